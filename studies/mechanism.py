"""mechanism.py (studies): what training finds, measured against the theory of Edelman et al.
(ICML 2022). Run from the repository's root:

    python -m studies.mechanism plan OUT FOLDER FOLDER ... --Ts 10,100   the cells: per width and
                      T a borderline m (the folder's m*) and a fixed m, in OUT/plan.json
    python -m studies.mechanism run OUT [--workers 2]   train every planned run: one row of
                      OUT/runs.csv each, flushed as it finishes (rerun to resume)
    python -m studies.mechanism report OUT      OUT/table.md, and OUT/mechanism.png (matplotlib)
    python -m studies.mechanism trace OUT --from STUDY --Ts 1000 --every 50   the study's runs
                      again, each logged at step 1 and every 50 steps, in OUT/trajectories.csv
                      (issue 38)
    python -m studies.mechanism trace-report OUT   OUT/table.md, OUT/trajectories.png (matplotlib)
    python -m studies.mechanism --help          every option, and issue 38's arm, factors, paired

The capacity argument (Section 3) says heads of bounded norm form a class whose covering number
grows only like log T; the construction (Section 4) creates the sparse variable with a head whose
score gap between S and the other positions grows like log((T - s) / (s eps)). This file measures
the same quantities on the parameters a trained run ends with (measure_mechanism) and studies
them over seeds, T and widths: do the norms stay bounded as T grows, do they tell the runs that
generalise from those that do not, and how does the head that attends S do it.

The norms, the covering constant and the construction's score gap are theory.py's (one copy: the
paper's theory sits below the studies). It reads top to bottom: the measurement of one trained
model, the plan of cells, the runs, the report, the command line. Issue 38's reports on a study
and its arms (factors, paired, trace-report) live in failures.py, which reads the rows this file
writes; the runs themselves (arm, run, trace) stay here.
"""
import signal
if __name__ == "__main__" and hasattr(signal, "pthread_sigmask"):   # Ctrl-C waits, pending, for
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})      # cli's guard (quiet_interrupts)
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.mechanism")   # (run as a file)

from studies.lib import cli  # standard library only: the thread setting acts before numpy

if __name__ == "__main__":
    cli.quiet_interrupts("studies.mechanism")
    cli.set_blas_threads()      # one BLAS thread per process: the worker pool is the parallelism

import functools
import json
import math
import os
import time
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np

from studies.lib import checks

from studies.lib import arithmetic
import attn
from studies.lib.checks import INTS, REALS, check_number
from studies.lib import run_options
from studies.lib import symmetry
from studies import trainer
from studies.lib.cli import OneLineParser, int_list, integer, number
from theory import covering_constant, covering_parts, norm_measures, paper_score_gap

from studies.lib import failures, folder, harness, laws, provenance, stats
from studies.lib import folder_write
from studies.lib.study import (EDGE_NOTE, STUDY_CSVS, fmt, is_final, load_runs, median_ci,
                           read_plan, seed_weights, separation, study_cells, study_files,
                           study_rows, weights_at, word)

# ======== 1. ONE TRAINED MODEL: the mechanism it ends with =====================================
# In a one-layer model read out at [CLS], the [CLS] token's query does not depend on the input,
# and position t holds one of only two tokens (its bit 0 or 1): each head has 2T + 1 possible
# scores, and an input's attention weights are the softmax of the T + 1 of them it selects.
# measure_mechanism reads everything from those scores and from theory.norm_measures (Edelman Section 3).

ON_S = 0.5          # a head "attends S" when its mean [CLS] attention mass on S is >= this
N_MEASURE = 500     # inputs (the first of the run's own test set) the attention is averaged over


def _cls_scores(p, cfg):  # -> scores [2, T, H] (bit 0, bit 1 at each position), cls [H]
    """The [CLS] query's attention scores q . k_t / sqrt(e) per head, in float64, from the same
    tokens attn.py feeds its head (embedding, then LN1 with the trained gain and shift)."""
    attn.check_params(p, cfg)
    d, H, T = cfg["d"], cfg["heads"], cfg["T"]
    e = d // H
    f = {k: np.asarray(v, np.float64) for k, v in p.items()}
    rows = np.concatenate([(f["E_tok"][:, None, :] + f["E_pos"]).reshape(-1, d), f["cls"][None]])
    if cfg["ln"]:
        rows = attn.layernorm_forward(rows, f["ln1_g"], f["ln1_b"])[0]       # [2T + 1, d]
    q = (rows[-1] @ f["W_Q"] + f["b_Q"]).reshape(H, e)
    k = (rows @ f["W_K"] + f["b_K"]).reshape(-1, H, e)
    s = np.einsum("nhe,he->nh", k, q) * e ** -0.5                              # [2T + 1, H]
    return s[:2 * T].reshape(2, T, H), s[2 * T]


def _head_attention_on_S(p, cfg, S, X):  # -> mass [H], gap [H]
    """Per head, the means over the inputs X [n, T] of (mass) the [CLS] attention weight on S and
    (gap) the mean score over S minus the mean score over the T - s other bit positions ([CLS]'s
    own score is left out of both)."""
    sc, s_cls = _cls_scores(p, cfg)
    X = np.asarray(X, np.float64)
    S = np.asarray(S, np.intp)
    T, s = cfg["T"], len(S)
    if X.ndim != 2 or X.shape[1] != T or not len(X):
        raise ValueError(f"X must be [n >= 1, T={T}] bits, got shape {X.shape}")
    if not 1 <= s < T or len(np.unique(S)) != s or S.min() < 0 or S.max() >= T:
        raise ValueError(f"S must hold 1 to T - 1 distinct positions in [0, {T}), got {S.tolist()}")
    top = np.maximum(sc.max((0, 1)), s_cls)                   # [H]: softmax's own shift
    E, e_cls = np.exp(sc - top), np.exp(s_cls - top)
    XS = X[:, S, None]                                        # [n, s, 1]
    Z = E[0].sum(0) + X @ (E[1] - E[0]) + e_cls               # [n, H]: every input's normaliser
    on_S = (E[0][S] * (1 - XS) + E[1][S] * XS).sum(1)         # [n, H]
    all_scores = sc[0].sum(0) + X @ (sc[1] - sc[0])           # [n, H]: sum of the T bit scores
    S_scores = (sc[0][S] * (1 - XS) + sc[1][S] * XS).sum(1)
    gap = S_scores / s - (all_scores - S_scores) / (T - s)
    return (on_S / Z).mean(0), gap.mean(0)


def _check_support(S, T):
    """S read as positions (array-likes too): 1 to T - 1 distinct integers in [0, T)."""
    A = np.asarray(S) if isinstance(S, (list, tuple, np.ndarray)) else None
    if A is None or A.ndim != 1 or A.dtype.kind not in "iu" or not 1 <= len(A) < T or \
            len(np.unique(A)) != len(A) or A.min() < 0 or A.max() >= T:
        raise ValueError(f"S must hold 1 to T - 1 distinct integer positions in [0, {T}), got "
                         f"{harness.shown(S)}")
    return A.astype(np.intp)


def _check_inputs(X, T):
    """X read as inputs (array-likes too): [n >= 1, T] bits 0/1."""
    A = np.asarray(X) if isinstance(X, (list, tuple, np.ndarray)) else None
    if A is None or A.dtype.kind not in "biuf" or A.ndim != 2 or A.shape[1] != T or not len(A):
        raise ValueError(f"X must be [n >= 1, T={T}] bits 0/1, got {harness.shown(X)}")
    checks.check_01("X", A, "bits")
    return A


def measure_mechanism(p, cfg, S, X, canonical=True):
    """The mechanism of a trained model (params p, attn.py config cfg) on its support S, averaged
    over the inputs X [n, T] -> dict of floats (and per_head lists); with canonical, also the
    norms on the model's canonical form (_canonical_measures: about two thirds of the time, which
    a trajectory, reading none of them, leaves out).

    What is taken, per head h (theory.norm_measures, with the biases folded in):
      score scale   ||W_QK,h||_2 B_X^2: W_QK,h = [W_Q; b_Q]_h [W_K; b_K]_h^T / sqrt(e), the matrix
                    whose bilinear form is the head's score (attn.py's 1/sqrt(e) included), and
                    B_X = sqrt(B^2 + 1), B the largest norm of the 2T + 1 distinct tokens that
                    enter attention (after LN1 with its trained gain and shift), the 1 the bias
                    coordinate. |score| <= score scale for every input.
      norm_V, norm_O  ||[W_V; b_V]_h||_2 and ||W_O,h||_2 (spectral norms)
      covering_constant  C of the reconstructed bound (covering_constant), all heads together
    Keys: B_X, covering_constant; score_scale, norm_V, norm_O: the largest over the heads;
    top_head: the head whose mean [CLS] attention mass on S is largest, and its mass_on_S,
    score_gap (mean score on S minus mean score on the other bit positions, averaged over X) and
    top_score_scale, top_norm_V, top_norm_O; heads_on_S: how many heads put a mean mass >= ON_S
    on S; where B_X comes from (norm_measures): ln1_gain_rms, ln1_shift_norm, B_X_token ("cls",
    "bit0", "bit1"), B_X_position (-1 for [CLS]) and B_X_in_S (1 when that position is in S);
    C's other factors (issue 38, folder.MECHANISM_FACTORS): readout_norm and mlp_factor (L_after
    is their product), qk_fro and v_21 (the largest head's ||W_QK||_F and ||W_V||_{2,1}) and the
    head sums theory.COVERING_SUMS, from which theory.covering_from_parts gives C again;
    per_head: each of score_scale, norm_V, norm_O, mass_on_S, score_gap per head."""
    attn.check_config(cfg)
    attn.check_params(p, cfg)
    S, X = _check_support(S, cfg["T"]), _check_inputs(X, cfg["T"])
    harness.need(isinstance(canonical, bool), "canonical", canonical, "True or False")
    nm = norm_measures(p, cfg)
    mass, gap = _head_attention_on_S(p, cfg, S, X)
    at = nm["B_X_position"]
    scale = np.asarray(nm["qk_spec"]) * nm["B_X"] ** 2
    per_head = dict(score_scale=scale, norm_V=np.asarray(nm["v_spec"]),
                    norm_O=np.asarray(nm["o_spec"]), mass_on_S=mass, score_gap=gap)
    h = int(np.argmax(mass))
    return dict(B_X=nm["B_X"], covering_constant=covering_constant(nm),
                score_scale=float(scale.max()), norm_V=float(per_head["norm_V"].max()),
                norm_O=float(per_head["norm_O"].max()), top_head=h, mass_on_S=float(mass[h]),
                score_gap=float(gap[h]), heads_on_S=int((mass >= ON_S).sum()),
                top_score_scale=float(scale[h]), top_norm_V=float(per_head["norm_V"][h]),
                top_norm_O=float(per_head["norm_O"][h]),
                **{k: nm[k] for k in ("ln1_gain_rms", "ln1_shift_norm", "B_X_token",
                                      "B_X_position")},
                B_X_in_S=int(at >= 0 and at in set(np.asarray(S).tolist())),
                readout_norm=nm["readout_norm"], mlp_factor=nm["mlp_factor"],
                qk_fro=float(max(nm["qk_fro"])), v_21=float(max(nm["v_21"])), **covering_parts(nm),
                **(_canonical_measures(p, cfg, h) if canonical else {}),
                per_head={k: v.tolist() for k, v in per_head.items()})


def _canonical_measures(p, cfg, top):
    """The same norms on symmetry.canonical's form of p (issue 47: measures of the function, which
    no exact symmetry of the model moves; folder.MECHANISM_CANONICAL): its C, the score scale of
    the largest head and of the head `top`, the largest ||W_V||_2, ||W_O||_2, ||W_QK||_F and
    ||W_V||_{2,1}, the readout's norm and the MLP's factor. Canonical B_X is sqrt(d + 1) (every
    LayerNorm's gain folded into what reads it), so the score scale is ||W_QK||_2 (d + 1)."""
    nm = norm_measures(symmetry.canonical(p, cfg), dict(cfg, dtype="float64"))   # its dtype
    scale = np.asarray(nm["qk_spec"]) * nm["B_X"] ** 2
    return dict(canon_C=covering_constant(nm), canon_score_scale=float(scale.max()),
                canon_top_score_scale=float(scale[top]), canon_norm_V=float(max(nm["v_spec"])),
                canon_norm_O=float(max(nm["o_spec"])), canon_qk_fro=float(max(nm["qk_fro"])),
                canon_v_21=float(max(nm["v_21"])), canon_readout_norm=nm["readout_norm"],
                canon_mlp_factor=nm["mlp_factor"])


# ======== 2. THE PLAN: which cells (d, T, m) the study trains ==================================
# Per width (a committed sweep folder) and T: the borderline m = the folder's m* (the majority
# rule, stats.critical_sizes) over seeds 0..n-1 at the folder's T nearest T in ln T, where both
# successes and failures occur; and a fixed m = FACTOR x the m* of one chosen width, the same m
# at every width of that T. Training options are the folder's own (its sweep.json).

NEAR_T = 1.25       # a folder's T may stand in for T when within this factor of it


def _folder_mstars(path, Ts, n_seeds):
    """(width d, the folder's full training options, bar, {T: where its m* comes from}) for a
    committed sweep folder: for each T, the folder's nearest T (within NEAR_T) and its m* over
    seeds 0..n_seeds-1 with the 95% interval. ValueError when the folder has no T near one."""
    meta, rows = folder.folder_rows(path, n_seeds=n_seeds)
    crit = stats.critical_sizes(rows, meta["grids"], meta["search"])
    have = sorted(T for (model, T) in crit if model == "transformer")
    out = {}
    for T in Ts:
        near = min(have, key=lambda t: abs(math.log(t / T)))
        if abs(math.log(near / T)) > math.log(NEAR_T):
            raise ValueError(f"{path} has no T within a factor {NEAR_T} of T={T} (Ts or extra; it "
                             f"has {have})")
        c = crit[("transformer", near)]
        if not math.isfinite(c["m_star"]):
            raise ValueError(f"{path}: m* at T={near} is above its grid; no borderline m there")
        out[T] = dict(folder=path, T_folder=int(near), m_star=int(c["m_star"]),
                      m_star_lo=c["m_star_lo"], m_star_hi=c["m_star_hi"], n_seeds=c["n_seeds"])
    options = folder.full_options(meta["options"])
    return int(options["d"]), options, meta["bar"], out


def _check_plan_arguments(folders, Ts, extra, n_seeds, fixed_from, factor):
    """plan_cells' arguments, each checked in one line naming it -> (folders, Ts, extra) as lists."""
    if not (isinstance(folders, (list, tuple)) and folders):
        raise TypeError(f"folders must be a non-empty list of sweep folders, got {harness.shown(folders)}")
    folders = [harness.check_path("folders", p, "a list of folder paths") for p in folders]
    if not (isinstance(Ts, (list, tuple)) and Ts):
        raise TypeError(f"Ts must be a non-empty list of integers T >= 1, got {harness.shown(Ts)}")
    Ts = [check_number("Ts", T, INTS, 1) for T in Ts]
    if not (isinstance(extra, (list, tuple)) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in extra)):
        raise TypeError(f"extra must be a list of (d, T) pairs, got {harness.shown(extra)}")
    extra = [tuple(check_number("extra", v, INTS, 1) for v in p) for p in extra]
    check_number("n_seeds", n_seeds, INTS, 1, folder.MAX_SEARCHES + 1)
    if fixed_from is not None:
        check_number("fixed_from", fixed_from, INTS, 1)
    positive = "a finite number > 0 (fixed m = factor x m*)"
    check_number("factor", factor, REALS, 0, what=positive)
    if not factor > 0:
        raise ValueError(f"factor must be {positive}, got {factor!r}")
    return folders, Ts, extra


def plan_cells(folders, Ts, extra=(), n_seeds=20, fixed_from=None, factor=2.0):
    """The study's plan: cells in the order they run -> dict(seeds, bar, cells). folders: committed
    sweep folders, one per width; Ts: the T of every width; extra: (d, T) cells run last (a large T
    at one width). Order: the borderline m at every T of every width, then the fixed m, then the
    extra cells (borderline, then fixed), so that a study cut short leaves whole designs behind.
    fixed m = round(factor x m*) of the width fixed_from (default: the widest), checked here: a
    factor that makes a fixed m no run can train is refused before anything is planned."""
    folders, Ts, extra = _check_plan_arguments(folders, Ts, extra, n_seeds, fixed_from, factor)
    widths = {}
    for path in folders:
        Ts_here = sorted(set(Ts) | {T for d, T in extra})
        d, options, bar, mstars = _folder_mstars(path, Ts_here, n_seeds)
        if d in widths:
            raise ValueError(f"two folders of width d={d}: {widths[d][0]} and {path}")
        widths[d] = (path, options, bar, mstars)
    fixed_from = max(widths) if fixed_from is None else fixed_from
    if fixed_from not in widths:
        raise ValueError(f"fixed_from d={fixed_from} is not a width of the folders "
                         f"({sorted(widths)})")
    if len({w[2] for w in widths.values()}) != 1:
        raise ValueError("the folders use different success bars")
    for d, T in extra:
        if d not in widths:
            raise ValueError(f"extra cell d={d}, T={T}: no folder of width {d}")

    def cell(design, d, T):
        path, options, _, mstars = widths[d]
        src = mstars[T] if design == "borderline" else dict(
            mstars_from=fixed_from, factor=factor, **widths[fixed_from][3][T])
        m = src["m_star"] if design == "borderline" else int(round(factor * src["m_star"]))
        opts = {k: v for k, v in options.items()}
        try:
            if m < 1:
                raise ValueError("m must be at least 1")
            trainer.check_run_memory(run_options.validate_options(dict(opts, T=T, m=m)))
        except ValueError as e:
            raise ValueError(f"factor = {factor:g} makes the {design} m = {m} at d={d}, T={T} "
                             f"(m* {src['m_star']}), which no run can train: {e}") from None
        return dict(design=design, d=d, T=T, m=m, options=opts, source=src)

    main = [(d, T) for T in sorted(Ts) for d in sorted(widths)]
    cells = [cell(design, d, T) for pairs, designs in ((main, ("borderline", "fixed")),
                                                       (list(extra), ("borderline", "fixed")))
             for design in designs for d, T in pairs]
    return dict(seeds=n_seeds, bar=next(iter(widths.values()))[2], cells=cells)


def _arm_options(arm):
    """The one change an arm makes to its study's options: none for baseline-rerun, else the
    sweep protocol of the arm's name (folder.INTERVENTIONS)."""
    from studies.sweep import PROTOCOLS
    if arm == "baseline-rerun":
        return {}
    if arm not in folder.INTERVENTIONS:
        raise ValueError(f"arm must be baseline-rerun or one of {', '.join(folder.INTERVENTIONS)}"
                         f", got {arm!r}")
    return dict(PROTOCOLS[arm])


def _arm_plan(source, arm, design, Ts, n_seeds, widths=None):
    """An arm of issue 38's interventions: the cells of `design` at the T in Ts of the study in
    the folder `source` (every width, or those in `widths`), their options with the arm's one
    change (arm_options), the design named by the arm, seeds 0..n_seeds-1. A seed fixes the data and the init whatever
    these options (trainer.seeds_for), so each run pairs with the study's run of its seed."""
    study, cells = study_cells(source, design, Ts, widths)
    change = _arm_options(arm)
    return dict(seeds=n_seeds, bar=study["bar"], cells=[
        dict(c, design=arm, options=dict(c["options"], **change)) for c in cells])


def _trace_plan(source, design, Ts, n_seeds, every, widths=None):
    """The trajectories' plan (issue 38): the cells of `design` at the T in Ts of the study in the
    folder `source` (every width, or those in `widths`), their options unchanged (the very runs
    of the study, seed for seed), logged at step 1 and every `every` steps."""
    study, cells = study_cells(source, design, Ts, widths)
    return dict(seeds=n_seeds, bar=study["bar"], every=every, cells=cells)


# ======== 3. THE RUNS: one CSV row per trained run ==============================================
# A row holds the run (design, d, T, m, seed), its outcome (success = the FINAL test accuracy >=
# the bar; the test set never chooses anything), what the monitor saw at the logged steps, the
# training loss, and measure_mechanism's numbers. The folder is folder.py's, as a sweep's is: one
# command at a time under its lock, rows read and checked by its one reader and validator
# (folder.MECHANISM_ROWS: types and ranges, each row against the plan, two rows of one run), each
# row written, flushed and synced as it finishes (folder_write.RowWriter), a torn last row cut away
# only from a file this study wrote.

FIELDS = folder.MECHANISM_FIELDS
MEASURED = ("covering_constant", "B_X", "score_scale", "norm_V", "norm_O", "top_head",
            "mass_on_S", "score_gap", "heads_on_S", "top_score_scale", "top_norm_V", "top_norm_O"
            ) + folder.MECHANISM_FACTORS + folder.MECHANISM_CANONICAL
LOG_EVERY = 100     # the monitor's steps (gcd with the run's steps, so the last is one of them)
LOSS_LOW = 0.01     # loss_jump: the largest training loss after the loss first fell below this


class _BestSeen:
    """trainer.train_stack's monitor: each run's best test accuracy at the logged steps (every
    `every` steps) and the first step that reached it. It never stops training (returns False):
    the test set only watches."""
    at_start = False                                    # the logged steps: every `every` steps

    def __init__(self, every=LOG_EVERY):
        self.every, self.best, self.step = every, None, None

    def __call__(self, step, test_acc, loss, params=None):
        acc = np.asarray(test_acc, np.float64)
        if self.best is None:
            self.best, self.step = np.full(acc.shape, -np.inf), np.zeros(acc.shape, np.int64)
        better = acc > self.best                        # nan (a diverged run) is never better
        self.best[better], self.step[better] = acc[better], step
        return False


class _Trace:
    """trainer.train_stack's monitor for the trajectories (issue 38): at step 1 and every `every`
    steps, each run's test accuracy, training loss and the mechanism of its parameters then
    (measure_mechanism on the run's support S and its inputs X: B_X, the top head, its score gap
    and mass on S). It never stops training (returns False) and only reads the parameters.
    .rows: one dict per run per logged step, in that order."""
    at_start = True

    def __init__(self, every, cfg, supports, inputs):
        self.every, self.cfg, self.S, self.X, self.rows = every, cfg, supports, inputs, []

    def __call__(self, step, test_acc, loss, params):
        for r, (S, X) in enumerate(zip(self.S, self.X)):
            p = {k: v[r] for k, v in params.items()}
            row = dict(run=r, step=step, test_acc=float(test_acc[r]), train_loss=float(loss[r]))
            if all(np.isfinite(v).all() for v in p.values()):
                mech = measure_mechanism(p, self.cfg, S, X, canonical=False)
                row.update({k: mech[k] for k in TRACED})
            else:                                          # a diverged run: nothing to measure
                row.update({k: math.nan for k in TRACED}, top_head=-1, B_X_token="none",
                           B_X_position=-1, B_X_in_S=0)
            self.rows.append(row)
        return False


TRACED = ("B_X", "score_gap", "mass_on_S", "top_head",    # what Trace takes of measure_mechanism
          "ln1_gain_rms", "ln1_shift_norm", "B_X_token", "B_X_position", "B_X_in_S")


def _loss_summary(losses):  # [steps] -> final_loss, min_loss, loss_jump
    """The last and smallest training loss, and the largest loss after it first fell below
    LOSS_LOW (nan when it never did): a run that lost a fitted training set shows a jump."""
    L = np.asarray(losses, np.float64)
    low = np.flatnonzero(L < LOSS_LOW)
    jump = float(L[low[0]:].max()) if low.size else math.nan
    return float(L[-1]), float(L.min()), jump


def train_cell(runs):
    """A stack of runs of one cell (one d, T and m; different seeds) in a worker process: train
    them together (trainer.train_stack, whose stacked runs equal the runs alone), measure each ->
    the CSV rows. A diverged run is a failure whose measurements are nan."""
    harness.check_runs(runs, ("design", "steps"))
    cli.keep_freed_memory()
    design = runs[0]["design"]
    runs = [{k: v for k, v in o.items() if k != "design"} for o in runs]
    cpu0, monitor = time.process_time(), _BestSeen(math.gcd(LOG_EVERY, runs[0]["steps"]))
    results = trainer.train_stack(runs, monitor=monitor)
    cpu = (time.process_time() - cpu0) / len(runs)
    rows = []
    for i, (o, r) in enumerate(zip(runs, results)):
        row = dict(design=design, d=o["d"], T=o["T"], m=o["m"], seed=o["seed"],
                   model="transformer", task=o["task"], s=o["s"], steps=o["steps"],
                   test_acc=r["test_acc"], train_acc=r["train_acc"], attn_on_S=r["attn_on_S"],
                   best_test_acc=float(monitor.best[i]) if monitor.best is not None else math.nan,
                   best_step=int(monitor.step[i]) if monitor.best is not None else 0,
                   seconds=r["seconds"], cpu_seconds=cpu)
        row["final_loss"], row["min_loss"], row["loss_jump"] = _loss_summary(r["losses"])
        if r.get("diverged"):
            row.update({k: math.nan for k in MEASURED})
        else:
            X = trainer.draw_run(o)[2][0][:N_MEASURE]            # the run's own test inputs
            mech = measure_mechanism(r["params"], r["cfg"], r["S"], X)
            row.update({k: mech[k] for k in MEASURED})
        rows.append(row)
    return rows


def train_trace(runs, every):
    """train_cell's sibling for the trajectories: a stack of runs of one cell trained with the
    Trace monitor -> its rows (one per run per logged step; success is set by the writer from
    final_test_acc). The training is train_cell's: the monitor only reads."""
    harness.check_runs(runs, ("design", "steps"))
    steps = runs[0]["steps"]
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"runs: steps must be an integer >= 1, got {steps!r:.40}")
    every = check_number("every", every, INTS, 1, steps + 1, "an integer in [1, {hi}) (the "
                         "runs' steps + 1)")
    if steps % every:
        raise ValueError(f"every = {every} must divide the runs' steps ({steps}): the last step "
                         f"is logged")
    cli.keep_freed_memory()
    design = runs[0]["design"]
    runs = [{k: v for k, v in o.items() if k != "design"} for o in runs]
    draws = [trainer.draw_run(o) for o in runs]
    monitor = _Trace(every, trainer.model_config(runs[0]), [d[0].S for d in draws],
                    [d[2][0][:N_MEASURE] for d in draws])        # each run's own test inputs
    cpu0 = time.process_time()
    results = trainer.train_stack(runs, monitor=monitor)
    cpu = (time.process_time() - cpu0) / len(runs)
    return [dict({k: row[k] for k in ("step", "train_loss", "test_acc") + TRACED},
                 design=design, d=runs[i]["d"], T=runs[i]["T"], m=runs[i]["m"],
                 seed=runs[i]["seed"], final_test_acc=results[i]["test_acc"],
                 steps=runs[i]["steps"], cpu_seconds=cpu)
            for i in range(len(runs)) for row in monitor.rows if row["run"] == i]


# The two kinds of a study's CSV: runs.csv (one row per run, train_cell) and trajectories.csv
# (one row per run per logged step, train_trace): the file, its rows (folder.py) and the column
# that holds the run's final test accuracy, whose success the writer sets under the plan's bar.


def _stacks_to_run(plan, done, n_seeds=None):
    """The plan's runs (seeds 0..n_seeds-1, default all the plan's) not in `done`, as stacks
    (lists of option dicts of one cell), in the plan's order; each stack as large as
    sweep.stack_size allows at its T and width."""
    from studies.sweep import stack_size
    out = []
    for c in plan["cells"]:
        o = c["options"]
        todo = [dict(o, T=c["T"], m=c["m"], seed=seed, design=c["design"], log_every=0)
                for seed in range(min(plan["seeds"], n_seeds or plan["seeds"]))
                if (c["d"], c["T"], c["m"], seed) not in done]
        k = stack_size(c["T"], len(todo) or 1, o["d"], o["heads"], np.dtype(o["dtype"]).itemsize)
        out += [todo[i:i + k] for i in range(0, len(todo), k)]
    return out


class Stop(Exception):
    """SIGTERM arrived: stop like Ctrl-C (the rows written so far stay)."""


def _raise_stop(signum, frame):
    raise Stop()


def _note_machine(out, plan, allow=False):
    """This session's machine added to OUT/plan.json's machines (the arithmetic it runs), after
    provenance.check_arithmetic: a study continued under another arithmetic is refused unless
    `allow` (--other-arithmetic). -> the arithmetic each new row records beside it (RowWriter's
    arithmetic_of), or None when it is the folder's own."""
    here = provenance.machine(plan["cells"][0]["options"]["dtype"])
    provenance.check_arithmetic(out, plan, here, allow)
    was = provenance.recorded_arithmetic(out, plan)
    path = os.path.join(out, "plan.json")
    raw = folder.read_json(path, "a plan", "restore it, or use another folder")
    if here not in raw.get("machines", []):
        cli.write_json(path, dict(raw, machines=raw.get("machines", []) + [here]))
    return (provenance.arithmetic_id(here) if was is not None
            and arithmetic.differences(was, here) else None)


def _run_plan(out, workers=1, n_seeds=None, log=print, what="runs", other_arithmetic=False):
    """Train every run of OUT/plan.json (seeds 0..n_seeds-1; default all) not yet finished in the
    study's CSV (what: "runs", train_cell's rows in OUT/runs.csv; "trace", train_trace's in
    OUT/trajectories.csv, at the plan's `every`), its rows written and flushed as its stack
    finishes. workers > 1: that many worker processes (BLAS one thread each). Under another
    arithmetic than the study's: refused unless other_arithmetic (note_machine). -> the number
    of runs written."""
    plan = read_plan(out)
    if n_seeds is not None and n_seeds > plan["seeds"]:
        raise ValueError(f"--seeds {n_seeds}: the plan of {out} has seeds 0..{plan['seeds'] - 1}; "
                         f"give at most {plan['seeds']} (a screen of its first seeds)")
    name, kind, final = STUDY_CSVS[what]
    train_fn = train_cell if what == "runs" else functools.partial(train_trace,
                                                                  every=plan["every"])
    lock = folder_write.lock_folder(out, holder=f"studies.mechanism {what}, pid {os.getpid()}")
    try:
        key = folder.MECHANISM_ROWS["run"]
        done = {key(r) for r in study_rows(out, plan, what) if is_final(r)}
        stacks = _stacks_to_run(plan, done, n_seeds)
        mixed = _note_machine(out, plan, other_arithmetic)
        writer = folder_write.RowWriter(os.path.join(out, name), kind, mixed)
    except BaseException:
        if lock:
            lock.close()
        raise
    total = sum(map(len, stacks))
    log(f"mechanism: {len(done)} runs already in {out}; {total} to run in {len(stacks)} "
        f"stacks on {workers} worker(s)", flush=True)
    t0, n = time.perf_counter(), 0
    previous = signal.signal(signal.SIGTERM, _raise_stop)

    def write(rows):
        nonlocal n
        for row in rows:
            row["success"] = int(row[final] >= plan["bar"])         # nan (diverged): a failure
            writer.write(row)                                       # flushed and synced
        ends = [r for r in rows if is_final(r)]
        n += len(ends)
        r, ok = ends[0], sum(x["success"] for x in ends)
        what_ended = (f"median C {np.nanmedian([x['covering_constant'] for x in ends]):.3g}"
                      if what == "runs" else
                      f"median B_X {np.nanmedian([x['B_X'] for x in ends]):.3g}")
        log(f"[{n}/{total}] {r['design']} d={r['d']} T={r['T']} m={r['m']} seeds "
            f"{ends[0]['seed']}-{ends[-1]['seed']}: {ok}/{len(ends)} succeed, {what_ended}, "
            f"median mass on S {np.nanmedian([x['mass_on_S'] for x in ends]):.3f}; "
            f"{r['cpu_seconds']:.1f} CPU s/run; {(time.perf_counter() - t0) / 60:.1f} min",
            flush=True)

    pool = None
    try:
        if workers > 1:
            pool = harness.worker_pool(workers)
        _run_stacks(stacks, pool, workers, write, train_fn)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if pool:            # running workers stopped, the pool's manager thread joined (no race)
            pool.stop()
        try:
            writer.close()
        finally:
            if lock:
                lock.close()
    log(f"mechanism: {n} runs in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return n


def _run_stacks(stacks, pool, workers, write, train_fn=None):
    """Each stack through train_fn (default train_cell), in order: in this process, or at most
    `workers` at a time on the pool; write(rows) as each finishes."""
    train_fn = train_fn or train_cell
    queue, pending = list(stacks), {}
    while queue or pending:
        while queue and (pool is None or len(pending) < workers):
            stack = queue.pop(0)
            if pool is None:
                write(train_fn(stack))
            else:
                pending[pool.submit(train_fn, stack)] = stack
        if pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                pending.pop(fut)
                write(fut.result())


# ======== 4. THE REPORT: tables and plots from OUT/runs.csv and OUT/plan.json ===================
# Every interval is a 95% percentile interval over stats.N_BOOT resamples of the SEED labels (a drawn
# seed brings its run in every cell of its T), by stats.py's design: the cells at one T share a
# seed's S, data and (at one width) init, and draw the same resamples; each T draws its own. Medians, not means: C is
# a cube of sums and has a long tail. A separation P(failure's X > success's X) (ties count 1/2)
# is undefined in a resample without both outcomes; such resamples count against both bounds.

SEPARATED = (("covering_constant", "C"), ("score_scale", "score scale"),
             ("norm_V", "‖W_V‖"), ("norm_O", "‖W_O‖"), ("mass_on_S", "mass on S (top head)"))
GROWN = (("covering_constant", "C"), ("score_scale", "score scale, largest head"),
         ("top_score_scale", "score scale, top head"), ("norm_V", "‖W_V‖, largest head"),
         ("norm_O", "‖W_O‖, largest head"), ("score_gap", "score gap, top head"),
         ("mass_on_S", "mass on S, top head"))
EPS_LINE = 0.1      # the construction's line drawn in the plot: R = ln((T - s) / (s eps))


def _cell_table(plan, cells, W):
    """Table 1: per cell, the outcome and the medians of the mechanism, with intervals."""
    bar = plan["bar"]
    lines = ["| d | T | design | m | runs | succeed | C | score scale, largest head | "
             "score scale, top head | ‖W_V‖, largest | ‖W_O‖, largest | mass on S, top head | "
             "score gap, top head | heads on S | best ≥ bar, final < bar |",
             "|" + "---|" * 15]
    for (design, d, T, m), rows in cells.items():
        med = {k: fmt(*median_ci(rows, k, W)[:3]) for k in (
            "covering_constant", "score_scale", "top_score_scale", "norm_V", "norm_O",
            "mass_on_S", "score_gap")}
        heads = median_ci(rows, "heads_on_S", W)[0]
        lost = sum(r["best_test_acc"] >= bar > r["test_acc"] for r in rows)
        lines.append(f"| {d} | {T} | {design} | {m} | {len(rows)} | "
                     f"{sum(r['success'] for r in rows)} | {med['covering_constant']} | "
                     f"{med['score_scale']} | {med['top_score_scale']} | {med['norm_V']} | "
                     f"{med['norm_O']} | {med['mass_on_S']} | {med['score_gap']} | "
                     f"{fmt(heads)} | {lost} |")
    return lines


def _separation_table(plan, cells, W, design="borderline"):
    """Table 2: per cell of `design` and pooled over T per width, P(failure's X > success's X)
    for each quantity of SEPARATED, with the wording of each interval against 1/2. -> (lines,
    the number of intervals, {d: pooled results})."""
    lines = ["| d | T | m | successes / failures | median C: successes / failures | "
             + " | ".join(f"P({name}: failure > success)" for _, name in SEPARATED) + " |",
             "|" + "---|" * (5 + len(SEPARATED))]
    n_tests, pooled, widths = 0, {}, sorted({d for (g, d, T, m) in cells if g == design})
    for d in widths:
        mine = [(T, m, rows) for (g, dd, T, m), rows in cells.items() if g == design and dd == d]
        for T, m, rows in mine + [("all", "-", None)]:
            group = [r for _, _, r in mine] if rows is None else [rows]
            n_ok = sum(r["success"] for g in group for r in g)
            n_all = sum(len(g) for g in group)
            cols = []
            for key, _ in SEPARATED:
                p, lo, hi = separation(group, key, W)
                n_tests += np.isfinite(lo)
                cols.append(f"{fmt(p, lo, hi)} {word(lo, hi, 0.5)}" if np.isfinite(p) else "n/a")
                if rows is None:
                    pooled.setdefault(d, {})[key] = (p, lo, hi)
            T_text = f"all {len(mine)} T" if rows is None else T
            C = [np.median([r["covering_constant"] for g in group for r in g
                            if r["success"] == ok]) if (n_ok if ok else n_all - n_ok) else np.nan
                 for ok in (1, 0)]
            lines.append(f"| {d} | {T_text} | {m} | {n_ok} / {n_all - n_ok} | {fmt(C[0])} / "
                         f"{fmt(C[1])} | " + " | ".join(cols) + " |")
    return lines, int(n_tests), pooled


def growth_table(plan, cells, W, design="fixed", quantities=GROWN):
    """Table 3: how each quantity of `quantities` ((key, name) pairs; GROWN) moves with T at the
    fixed m, per width: the median at each T fitted (laws.scaling_fits, each T resampled on its
    own) as a + b ln T and a T^k, over the cells whose every seed ran. -> (lines, the number of
    intervals, {(d, key): fit})."""
    harness.need(isinstance(plan, dict) and isinstance(plan.get("seeds"), int), "plan", plan,
                 "a study's plan (read_plan)")
    harness.need(isinstance(cells, dict) and all(
        isinstance(k, tuple) and len(k) == 4 and isinstance(v, list) for k, v in cells.items()),
        "cells", cells, "load_study's cells {(design, d, T, m): rows}")
    harness.need(isinstance(W, dict) and all(isinstance(v, np.ndarray) for v in W.values()),
                 "W", W, "seed_weights' {T: weights}")
    designs = sorted({k[0] for k in cells})
    harness.need(isinstance(design, str) and design in designs, "design", design,
                 f"a design of the cells ({', '.join(designs) or 'none: no cells'})", ValueError)
    harness.need(isinstance(quantities, (list, tuple)) and all(
        isinstance(q, tuple) and len(q) == 2 and all(isinstance(x, str) for x in q)
        for q in quantities), "quantities", quantities, "(column, name) pairs")
    lines = ["| d | quantity | T | median at each T | b of a + b ln T [95% CI] | "
             "k of a T^k [95% CI] | log fits better |", "|---|---|---|---|---|---|---|"]
    n_tests, fits = 0, {}
    for d in sorted({d for (g, d, T, m) in cells if g == design}):
        mine = sorted((T, rows) for (g, dd, T, m), rows in cells.items()
                      if g == design and dd == d and len(rows) == plan["seeds"])
        if len(mine) < 3:
            continue
        Ts = np.array([T for T, _ in mine], np.float64)
        for key, name in quantities:
            got = [median_ci(rows, key, W) for _, rows in mine]
            med, boot = np.array([g[0] for g in got]), np.array([g[3] for g in got])
            try:
                f = laws.scaling_fits(Ts, med, boot)
            except ValueError:           # a median <= 0 (a gap): the power law has no meaning
                f = None
            fits[(d, key)] = f
            n_tests += 2 if f else 0
            b = fmt(f["log_b"], f["log_b_lo"], f["log_b_hi"]) if f else "n/a"
            k = fmt(f["pow_k"], f["pow_k_lo"], f["pow_k_hi"]) if f else "n/a"
            better = f"{100 * f['p_log_better']:.0f}%" if f and f["p_log_better"] is not None \
                else "n/a"
            lines.append(f"| {d} | {name} | {', '.join(str(int(T)) for T in Ts)} | "
                         f"{', '.join(fmt(v) for v in med)} | {b} | {k} | {better} |")
    return lines, n_tests, fits


def _final_table(plan, cells, W):
    """Table 4: the final step against the best test accuracy seen at the logged steps, per width
    and design: runs, successes at the end, runs that reached the bar at a logged step but ended
    below it (with a seed-bootstrap interval of the share), runs that ended more than 0.01 below
    their best, runs whose best came at the last step, and training-loss jumps."""
    bar, lines = plan["bar"], [
        "| d | design | runs | final ≥ bar | best ≥ bar | lost: best ≥ bar > final [95% CI] | "
        "final < best - 0.01 | best at the last step | loss rose above 0.1 after < 0.01 |",
        "|---|---|---|---|---|---|---|---|---|"]
    for d in sorted({d for (_, d, _, _) in cells}):
        for design in ("borderline", "fixed"):
            group = [rows for (g, dd, T, m), rows in cells.items() if g == design and dd == d]
            rs = [r for rows in group for r in rows]
            if not rs:
                continue
            for r in rs:
                r["lost"] = float(r["best_test_acc"] >= bar > r["test_acc"])
            num = sum(_pair_weights(rows, "lost", W) for rows in group)
            den = sum(_pair_weights(rows, None, W) for rows in group)
            lo, hi = stats.percentile_ci(num[1:] / np.maximum(den[1:], 1))
            lines.append(
                f"| {d} | {design} | {len(rs)} | {sum(r['test_acc'] >= bar for r in rs)} | "
                f"{sum(r['best_test_acc'] >= bar for r in rs)} | {int(num[0])} "
                f"({fmt(num[0] / den[0], lo, hi, 2)}) | "
                f"{sum(r['test_acc'] < r['best_test_acc'] - 0.01 for r in rs)} | "
                f"{sum(r['best_step'] == r['steps'] for r in rs)} | "
                f"{sum(r['loss_jump'] > 0.1 for r in rs)} |")
    return lines


def _pair_weights(rows, key, W):  # -> [1 + B]: the seeds' weights summed (times key when given)
    w = weights_at(W, rows)[:, [r["seed"] for r in rows]]
    return w.sum(1) if key is None else w @ np.array([r[key] for r in rows])


def _cost_lines(cells):
    """What the runs cost, from their rows: CPU and wall seconds per run summed."""
    rs = [r for rows in cells.values() for r in rows]
    cpu, wall = sum(r["cpu_seconds"] for r in rs), sum(r["seconds"] for r in rs)
    out = [f"- {len(rs)} runs: {cpu / 3600:.2f} CPU hours, {wall / 3600:.2f} hours of training "
           f"wall time summed over runs (trainer.train_stack's seconds per run)"]
    for d in sorted({d for (_, d, _, _) in cells}):
        most = max(((r["cpu_seconds"], r["T"], r["m"]) for r in rs if r["d"] == d))
        out.append(f"- d = {d}: {sum(r['cpu_seconds'] for r in rs if r['d'] == d) / 3600:.2f} "
                   f"CPU hours; the costliest run {most[0]:.0f} CPU s (T = {most[1]}, "
                   f"m = {most[2]})")
    return out


def _reproduction_lines(plan, cells):
    """How many of the study's runs the committed folders ran too (same width, T, m and seed: the
    same run, since a seed fixes S, the data and the init), and how many of those gave the very
    same test accuracy: a check that the study trains what the folders trained."""
    widths = {c["d"]: c["source"]["folder"] for c in plan["cells"]
              if c["design"] == "borderline" and "folder" in c["source"]}
    both = same = 0
    for d, path in widths.items():
        try:
            theirs = {(int(r["T"]), int(r["m"]), int(r["seed"])): r["test_acc"]
                      for r in folder.folder_rows(path)[1]}
        except (OSError, ValueError):
            return [f"- the folder {path} could not be read: no reproduction check"]
        for (design, dd, T, m), rows in cells.items():
            for r in rows if dd == d else []:
                acc = theirs.get((T, m, r["seed"]))
                if acc is not None:
                    both, same = both + 1, same + (float(acc) == r["test_acc"])
    return [f"- {both} runs of this study were also run by the committed folders (same d, T, m "
            f"and seed); {same} of them gave the same final test accuracy"]


def _report(out, log=print):
    """OUT/table.md (the four tables, the counts of intervals and the costs) and, with
    matplotlib, OUT/mechanism.png, both claimed before either is written
    (harness.claim_outputs). -> the table's text."""
    harness.claim_outputs([(os.path.join(out, "table.md"), "table", "the table"),
                           (os.path.join(out, "mechanism.png"), "plot", "the plot")],
                          study_files(out), own=[out])
    plan, cells = load_runs(out, "OUT")
    W = seed_weights(plan["seeds"], [T for (_, _, T, _) in cells])
    sep, n_sep, pooled = _separation_table(plan, cells, W)
    grow, n_grow, fits = growth_table(plan, cells, W)
    s = int(next(iter(cells.values()))[0]["s"])                  # the task's sparsity
    text = "\n".join(
        _cell_table(plan, cells, W)
        + ["", f"Medians over seeds [95% CI, {stats.N_BOOT:,} seed resamples, each T's on its "
               f"own; a bound keeps no digit its Monte Carlo band (two standard errors either "
               f"side) moves, and ~ marks one widened to that band's far end]; 'top head' = the "
           f"head with the largest mean [CLS] attention mass on S (over {N_MEASURE} test inputs); "
           f"heads on S: heads with mass >= {ON_S}; best = the best test accuracy at the "
           f"steps {LOG_EVERY}, {2 * LOG_EVERY}, ..., the outcome is the final step's.", ""]
        + sep + ["", f"{n_sep} intervals against 1/2 (no separation). A norm-based bound "
                 "predicts failures have the larger norms: P > 1/2. " + EDGE_NOTE, ""]
        + grow + ["", f"{n_grow} intervals. The construction's score gap grows as "
                  f"ln((T - s)/(s eps)): b = 1 in ln T at a fixed leak eps.", ""]
        + _final_table(plan, cells, W) + [""] + _cost_lines(cells)
        + _reproduction_lines(plan, cells)) + "\n"
    path = cli.claim_output(os.path.join(out, "table.md"), "table", "the table")
    cli.write_text(path, text)
    log(text)
    log(f"wrote {path}")
    _plot_study(out, plan, cells, W, s, log)
    return text


def _plot_study(out, plan, cells, W, s, log=print):
    """OUT/mechanism.png: C and the score scales against T (successes filled, failures open),
    the top head's score gap beside the construction's ln((T - s)/(s eps)), and the separation of
    C per T at the borderline m. Skipped with one line when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no plot: matplotlib is not installed (pip install matplotlib, then rerun report)")
        return None
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    colours = dict(zip(sorted({d for (_, d, _, _) in cells}), ("C0", "C3", "C2", "C1")))
    Ts = np.unique(np.round(np.geomspace(min(T for (_, _, T, _) in cells),   # integer T: the
                                         max(T for (_, _, T, _) in cells), 50)).astype(int))  # gap's
    for (design, d, T, m), rows in cells.items():
        shift = 1.04 if design == "fixed" else 0.96                 # the two designs side by side
        for r in rows:
            face = colours[d] if r["success"] else "none"
            kw = dict(marker="o" if design == "borderline" else "s", s=14, edgecolors=colours[d],
                      facecolors=face, alpha=0.6, linewidths=0.8)
            ax[0, 0].scatter(T * shift, r["covering_constant"], **kw)
            ax[0, 1].scatter(T * shift, r["top_score_scale"], **kw)
            ax[1, 0].scatter(T * shift, r["score_gap"], **kw)
    line = paper_score_gap(Ts, s, EPS_LINE)
    ax[0, 1].plot(Ts, line, "k--", label=f"construction: ln((T - s)/(s eps)), eps = {EPS_LINE}")
    ax[1, 0].plot(Ts, line, "k--", label=f"construction: ln((T - s)/(s eps)), eps = {EPS_LINE}")
    for d, c in colours.items():
        pts = [(T, *separation([rows], "covering_constant", W)) for (g, dd, T, m), rows in
               cells.items() if g == "borderline" and dd == d]
        pts = [p for p in pts if np.isfinite(p[1])]
        if pts:
            T_, p, lo, hi = map(np.array, zip(*sorted(pts)))
            ax[1, 1].errorbar(T_, p, yerr=[p - lo, hi - p], fmt="o-", color=c, capsize=3,
                              label=f"d = {d}")
        for a in ax.flat[:3]:
            a.scatter([], [], color=c, label=f"d = {d}")
    ax[1, 1].axhline(0.5, color="grey", lw=0.8)
    titles = ("covering constant C (log scale)", "score scale ||W_QK||_2 B_X^2, top head (log)",
              "score gap S vs the rest, top head", "P(failure's C > success's C), borderline m")
    for a, t in zip(ax.flat, titles):
        a.set_xscale("log")
        a.set_xlabel("T")
        a.set_title(t, fontsize=10)
        a.legend(fontsize=7)
    ax[0, 0].set_yscale("log")
    ax[0, 1].set_yscale("log")
    fig.suptitle("filled: success, open: failure; circles: borderline m, squares: fixed m",
                 fontsize=9)
    fig.tight_layout()
    path = cli.claim_output(os.path.join(out, "mechanism.png"), "plot", "the plot")
    try:
        cli.replace_atomically(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)
    log(f"wrote {path}")
    return path


# ======== 5. THE COMMAND LINE ====================================================================

def _extra_cells(text):
    """Parser for --extra: d:T pairs, comma-separated (128:10000)."""
    try:
        pairs = [tuple(int(v) for v in p.split(":")) for p in text.split(",") if p.strip()]
    except ValueError:
        pairs = None
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise cli.BadValue(f"must be d:T pairs separated by commas (128:10000), got {text!r}")
    return pairs


def _parser():
    ap = OneLineParser(prog="studies.mechanism", description=(
        "What training finds: the norms of Edelman et al.'s capacity bound (score scale "
        "||W_QK||_2 B_X^2, ||W_V||, ||W_O||, the covering constant C) and the head that attends "
        "S, measured on trained runs over seeds, T and widths. Three steps: plan, run, report."))
    sub = ap.add_subparsers(dest="command", required=True, metavar=(
        "{plan,arm,run,report,factors,paired,trace,trace-report}"))
    _add_study_commands(sub)
    _add_why_runs_fail_commands(sub)
    return ap


def _add_study_commands(sub):
    """plan, run, report: the study itself."""
    p = sub.add_parser("plan", help="write OUT/plan.json: the cells (d, T, m) from committed "
                       "sweep folders", description="Per width (one committed sweep folder) and "
                       "T: the borderline m = the folder's m* over the seeds, and a fixed m = "
                       "FACTOR x the m* of one width, the same at every width.")
    p.add_argument("out", help="the study's folder (created if missing)")
    p.add_argument("folders", nargs="+", help="committed sweep folders, one per width")
    p.add_argument("--Ts", type=int_list, required=True, help="T of every width, e.g. 10,30,100")
    p.add_argument("--extra", type=_extra_cells, default=[],
                   help="d:T cells run last, e.g. 128:10000")
    p.add_argument("--seeds", type=integer(1), default=20, help="seeds 0..N-1 per cell (20)")
    p.add_argument("--fixed-from", type=integer(1), default=None,
                   help="the width whose m* sets the fixed m (default: the widest)")
    p.add_argument("--factor", type=number(0, strict=True), default=2.0,
                   help="fixed m = FACTOR x that m* (2)")
    r = sub.add_parser("run", help="train the planned runs into OUT/runs.csv (resumable)",
                       description="Train every run of OUT/plan.json that OUT/runs.csv does not "
                       "hold yet, one row each, flushed as it finishes; rerun to resume.")
    r.add_argument("out")
    r.add_argument("--workers", type=integer(1), default=1,
                   help="worker processes, one BLAS thread each (1)")
    r.add_argument("--seeds", type=integer(1), default=None,
                   help="only seeds 0..N-1 of the plan's (a screen); default: all")
    provenance.add_other_arithmetic(r)
    q = sub.add_parser("report", help="OUT/table.md and OUT/mechanism.png from OUT/runs.csv",
                       description="The tables (per cell, the separation of successes and "
                       "failures, the growth with T, the final step against the best seen) and "
                       "the plots (with matplotlib).")
    q.add_argument("out")


def _add_why_runs_fail_commands(sub):
    """Issue 38's commands on a study's cells: arm, factors, paired, trace, trace-report."""
    g = sub.add_parser("arm", help="write OUT/plan.json: an intervention arm of a study's cells",
                       description="Issue 38: the study's cells of one design at the given T "
                       "(every width, or --widths), each with the arm's one change of options "
                       "(a sweep "
                       "protocol of the arm's name; none for baseline-rerun), paired by seed "
                       "with the study's runs.")
    g.add_argument("out", help="the arm's folder (created if missing)")
    g.add_argument("arm", choices=("baseline-rerun",) + folder.INTERVENTIONS)
    _add_cells_arguments(g)
    f = sub.add_parser("factors", help="C's factors and the bound's size from a study's runs",
                       description="Issue 38, from a study's runs (no training): each factor of "
                       "C and C with each factor held at its cell median, their separations of "
                       "failures from successes pooled over T, and the reconstructed bound "
                       "sqrt(C ln(2dmT)/m) per cell beside 1.")
    f.add_argument("study", help="the study's folder (plan.json, runs.csv)")
    f.add_argument("--factors", default=None,
                   help="a baseline-rerun folder of the study whose runs carry C's factors "
                   "(default: the study's own runs)")
    f.add_argument("--out", required=True, help="the markdown file to write")
    pr = sub.add_parser("paired", help="arms against the study's runs, paired by seed",
                        description="Issue 38: each arm's runs against the study's run of the "
                        "same seed (same data, same init): per cell and pooled, successes, "
                        "discordant pairs, the paired difference of the success rate.")
    pr.add_argument("study", help="the study's folder (the baseline)")
    pr.add_argument("arms", nargs="+",
                    help="arm folders (python -m studies.mechanism arm, then run)")
    pr.add_argument("--out", required=True, help="the markdown file to write")
    pr.add_argument("--pairs", default=None, help="also write every pair to this CSV")
    t = sub.add_parser("trace", help="train a study's cells again with their trajectories "
                       "logged, into OUT/trajectories.csv (resumable)",
                       description="Issue 38: the study's cells of one design at the given T "
                       "(every width, or --widths), the very runs of the study seed for seed, each logged at "
                       "step 1 and every EVERY steps (test accuracy, training loss, B_X, the top "
                       "head's score gap and mass on S), one row per run per logged step. "
                       "OUT/plan.json is written on the first call; rerun the same command to "
                       "resume.")
    t.add_argument("out", help="the trajectories' folder (created if missing)")
    _add_cells_arguments(t)
    t.add_argument("--every", type=integer(1), default=50,
                   help="steps between logged steps, dividing the runs' steps (50)")
    t.add_argument("--workers", type=integer(1), default=1,
                   help="worker processes, one BLAS thread each (1)")
    provenance.add_other_arithmetic(t)
    tr = sub.add_parser("trace-report", help="OUT/table.md and OUT/trajectories.png from "
                        "OUT/trajectories.csv", description="Issue 38: per cell and logged "
                        "step, eventual successes against failures (B_X, test accuracy, the top "
                        "head's mass on S and score gap), each split with its interval, and the "
                        "first step each split is established; the plot with matplotlib.")
    tr.add_argument("out")


def _add_cells_arguments(p):
    """Which of a study's cells a new folder takes (arm, trace): --from, --design, --Ts,
    --seeds."""
    p.add_argument("--from", dest="source", required=True, help="the study's folder (plan.json)")
    p.add_argument("--design", choices=("borderline", "fixed"), default="borderline",
                   help="which of the study's cells (borderline)")
    p.add_argument("--Ts", type=int_list, required=True,
                   help="the study's T to take, e.g. 100,1000")
    p.add_argument("--seeds", type=integer(1), default=20, help="seeds 0..N-1 per cell (20)")
    p.add_argument("--widths", type=int_list, default=None,
                   help="the study's widths d to take, e.g. 128 (default: every width)")


def _write_plan(a):
    """The `plan` command: the cells from committed sweep folders, saved (save_plan)."""
    folder.check_plan_size(2 * len(a.folders), len(a.Ts) + len(a.extra), a.seeds)
    _save_plan(a.out, lambda: plan_cells(a.folders, a.Ts, a.extra, a.seeds, a.fixed_from,
                                        a.factor))


def _write_arm(a):
    """The `arm` command: an arm's plan from a study's (arm_plan), saved (save_plan)."""
    plan = _save_plan(a.out, lambda: _arm_plan(a.source, a.arm, a.design, a.Ts, a.seeds,
                                                     a.widths))
    per, minutes = failures.plan_cost(plan, a.source)
    print(f"CPU time from {a.source}'s runs: " + "; ".join(per) + f"; about {minutes:.0f} CPU "
          f"min for {len(plan['cells'])} cells x {plan['seeds']} seeds")


def _write_trace(a):
    """The `trace` command: the trajectories' plan (trace_plan) saved on the first call, the same
    plan required on a later one (a folder holds one plan), then its runs (run_plan, "trace")."""
    plan = _trace_plan(a.source, a.design, a.Ts, a.seeds, a.every, a.widths)
    path = os.path.join(a.out, "plan.json")
    if os.path.lexists(path):
        same = lambda p: json.dumps({k: v for k, v in folder.check_plan(p, path).items()
                                     if k != "machines"}, sort_keys=True)
        if same(read_plan(a.out)) != same(plan):
            raise ValueError(f"{path} holds another plan (other cells, seeds or --every); use "
                             f"another folder, or give the options it was written with")
        print(f"{path}: the same plan; resuming")
    else:
        _save_plan(a.out, lambda: plan)
    _run_plan(a.out, a.workers, what="trace", other_arithmetic=a.other_arithmetic)


def _save_plan(out, make):
    """OUT/plan.json = make(), written under the folder's lock, checked as every reader checks it
    (folder.check_plan), into a folder that holds no runs and no file called plan.json that is
    not a plan (someone's notes are never replaced); each cell printed."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"OUT {out} is a file; give a folder")
    path = os.path.join(out, "plan.json")

    def free():                                        # checked before planning, and under the lock
        if os.path.isdir(out):
            folder.check_folder_kind(out, "plan.json")
        if any(os.path.lexists(os.path.join(out, name)) for name, _, _ in STUDY_CSVS.values()):
            raise ValueError(f"{out} already holds runs; a new plan goes into a new folder")
        if os.path.lexists(path):
            folder.read_plan(out)                      # only a plan is ever replaced
    free()
    plan = make()
    folder.check_plan(plan, path)                      # before the folder is made
    os.makedirs(out, exist_ok=True)
    lock = folder_write.lock_folder(out, holder=f"studies.mechanism plan, pid {os.getpid()}")
    try:
        free()
        folder.check_plan(plan, path)
        cli.write_json(path, plan)
    finally:
        if lock:
            lock.close()
    for c in plan["cells"]:
        src = c.get("source", {})          # where m came from, or not recorded (check_plan)
        times = f"{src['factor']:g} x " if "factor" in src else ""
        print(f"{c['design']:>10} d={c['d']:<4} T={c['T']:<6} m={c['m']:<5}" + (
            f" = {times}m* {src['m_star']} [{src['m_star_lo']:g}, {src['m_star_hi']:g}] at "
            f"T={src['T_folder']} of {src['folder']} (seeds 0-{src['n_seeds'] - 1})"
            if {"m_star", "m_star_lo", "m_star_hi", "T_folder", "folder", "n_seeds"} <= set(src)
            else " (where m came from: not recorded)"))
    print(f"wrote {path}: {len(plan['cells'])} cells x {plan['seeds']} seeds")
    return plan


def main(argv=None):
    a = _parser().parse_args(harness.check_argv(argv))
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    try:
        if a.command == "plan":
            _write_plan(a)
        elif a.command == "arm":
            _write_arm(a)
        elif a.command == "factors":
            failures.factors_report(a.study, a.out, a.factors)
        elif a.command == "paired":
            failures.paired_report(a.study, a.arms, a.out, a.pairs)
        elif a.command == "run":
            _run_plan(a.out, a.workers, a.seeds, other_arithmetic=a.other_arithmetic)
        elif a.command == "trace":
            _write_trace(a)
        else:
            lock = folder_write.lock_folder(a.out, holder=f"studies.mechanism report, pid {os.getpid()}")
            try:
                (failures.trace_report if a.command == "trace-report" else _report)(a.out)
            finally:
                if lock:
                    lock.close()
    except (ValueError, Stop) as e:
        if isinstance(e, Stop):
            print("studies.mechanism: terminated; the rows written so far are kept",
                  file=sys.stderr)
            return 143
        print(f"studies.mechanism: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.mechanism", main))
