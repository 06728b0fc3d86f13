"""symmetries.py (studies, a command): which of the studies' measures are measures of the function
(issue 47).

    python -m studies.symmetries measures OUT.md     train two study models (d = 64 and 128,
                     T = 100, the study's borderline options, seed 0: about 10 s), apply every
                     exact symmetry of symmetry.py at c = 2 and c = 0.5, and write each measure's
                     ratio (moved / original) per symmetry, raw and on the canonical form
    python -m studies.symmetries interaction PAIRS.csv OUT.md   the arm x T interaction of the
                     arms that hold the token norm high, from a `mechanism.py paired` CSV
    python -m studies.symmetries cells PAIRS.csv OUT.md [--seeds 20-39]   each paired cell with
                     the exact sign test beside its bootstrap interval
    python -m studies.symmetries canonical BORDERLINE FIXED OUT.md [--study results/mechanism]
                     the study's separations and growth in T, each measure raw and canonical,
                     from its runs trained again with the canonical columns
    python -m studies.symmetries ball STUDY FOLDER... --seeds N --Ts T,... --out OUT.md   m* and
                     each seed's critical m of protocol folders against the study's
    python -m studies.symmetries same FIRST SECOND OUT.md   how many runs of two folders (the
                     same cells and seeds) are the same to the bit

The studies' side: it imports the reference (attn, symmetry, theory, train) and the mechanism
study's measurement (measure_mechanism); nothing imports it but its tests. A measure "respects" a
symmetry when every ratio is 1 to 1e-9; the table prints the ratios where it does not.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.symmetries")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import math
import os

import numpy as np

import attn
from theory import covering_constant, generalization_gap, norm_measures

from studies.lib import folder, harness, intervals, provenance, row_kinds, symmetry, training
from studies.lib.checks import INTS, check_number
from studies.lib.cli import OneLineParser, int_list
from studies.lib.folder import folder_rows
from studies.lib.intervals import exact_rate, fisher_exact, sign_test
from studies.lib.measures import measure_mechanism
from studies.lib.stats import critical_sizes
from studies.lib.study import (EDGE_NOTE, fmt, growth_table, load_runs, seed_weights, separation,
                               word)

# ======== 1. THE MEASURES AGAINST THE SYMMETRIES ================================================

STUDY_PLAN = os.path.join("results", "mechanism", "plan.json")
MODELS = ((64, 100), (128, 100))      # (d, T) of the study's borderline cells measured, seed 0
FACTORS = (2.0, 0.5)
SAME = 1e-9                           # a ratio within this of 1 is "respected"


def _rotations(H, e, seed=47):  # -> [H, e, e] fixed random rotations
    rng = np.random.default_rng(seed)
    return np.stack([np.linalg.qr(rng.standard_normal((e, e)))[0] for _ in range(H)])


def _unit(n, seed):  # a fixed random unit vector [n]
    v = np.random.default_rng(seed).standard_normal(n)
    return v / np.linalg.norm(v)


def _symmetry_cases(cfg):
    """[(label, f(p, c))]: every exact symmetry of symmetry.py with one size c > 0 (the scalings
    at c; a mixing matrix M_h = O_h diag(c, 1, ..., 1), O_h a fixed rotation; a shift of length c
    along a fixed direction; the head order reversed, whatever c)."""
    d, H, e = cfg["d"], cfg["heads"], cfg["d"] // cfg["heads"]
    O = _rotations(H, e)

    def M(c):
        D = np.ones(e)
        D[0] = c
        return O * D
    cases = [("(a) LN1 gain, shift x c; W_Q, W_K, W_V / c", lambda p, c: symmetry.scale_ln(
        p, cfg, "ln1", c)),
        ("(b) per head W_Q, b_Q x c; W_K, b_K / c", lambda p, c: symmetry.mix_qk(p, cfg, c)),
        ("(c) per head W_V, b_V x c; W_O's rows / c", lambda p, c: symmetry.mix_vo(p, cfg, c)),
        ("(d) LNf gain, shift x c; w / c", lambda p, c: symmetry.scale_ln(p, cfg, "lnf", c)),
        ("(e) LN2 gain, shift x c; W_1 / c", lambda p, c: symmetry.scale_ln(p, cfg, "ln2", c)),
        ("(f) per head W_QK = (Q M)(K M^-T)^T", lambda p, c: symmetry.mix_qk(p, cfg, M(c))),
        ("(g) per head (V M)(M^-1 W_O)", lambda p, c: symmetry.mix_vo(p, cfg, M(c))),
        ("(h) b_K + v, ‖v‖ = c", lambda p, c: symmetry.shift_key_bias(p, cfg, c * _unit(d, 1))),
        ("(i) W_Q, W_K, W_V + (1/g) u^T off LN1's mean", lambda p, c: symmetry.shift_ln_null(
            p, cfg, "ln1", {k: c * _unit(d, i) for i, k in enumerate(("W_Q", "W_K", "W_V"))})),
        ("(j) E_tok + v, E_pos - v", lambda p, c: symmetry.shift_embeddings(
            p, cfg, c * _unit(d, 2), c * np.ones(2), c * np.ones(cfg["T"]))),
        ("(k) heads permuted", lambda p, c: symmetry.permute_heads(p, cfg, list(range(H))[::-1]))]
    return cases


def _measures(p, cfg, S, X, m):
    """{name: float}: every measure the studies take of a trained model (theory.norm_measures,
    the largest head's norms; C; measure_mechanism's score scale and score gap; the bound
    sqrt(C ln(2 d m T) / m))."""
    nm = norm_measures(p, cfg)
    mm = measure_mechanism(p, cfg, S, X)
    C = covering_constant(nm)
    out = dict(B_X=nm["B_X"], **{k: max(nm[k]) for k in ("qk_spec", "qk_21", "qk_fro", "v_spec",
                                                          "v_21", "o_spec")})
    out.update(readout_norm=nm["readout_norm"], mlp_factor=nm["mlp_factor"],
               L_after=nm["L_after"], C=C, score_scale=mm["score_scale"],
               score_gap=mm["score_gap"], bound=generalization_gap(C, cfg["d"], m, cfg["T"]))
    return out


def _canonical_measures(p, cfg, m=None):
    """theory.norm_measures of symmetry.canonical(p, cfg), with C (covering_constant) as "C", the
    largest head's score scale ||W_QK||_2 B_X^2 and, given m, the bound: the paper's norms as
    measures of the function."""
    nm = norm_measures(symmetry.canonical(p, cfg), cfg)
    C = covering_constant(nm)
    out = dict(nm, C=C, score_scale=max(nm["qk_spec"]) * nm["B_X"] ** 2)
    if m is not None:
        out["bound"] = generalization_gap(C, cfg["d"], m, cfg["T"])
    return out


def _train_study_model(d, T, plan=STUDY_PLAN, seed=0):
    """The study's borderline run (d, T) of `seed` in float64 -> (params, cfg, S, X, m)."""
    p = folder.check_plan(folder.read_json(plan, "a study's plan", "give the study's plan.json"),
                          plan)
    cell = next((c for c in p["cells"] if c["design"] == "borderline" and (c["d"], c["T"]) ==
                 (d, T)), None)
    if cell is None:
        raise ValueError(f"{plan}: no borderline cell at d = {d}, T = {T} (the study's plan "
                         f"holds one: give results/mechanism/plan.json)")
    r = training.study_run(dict(cell["options"], T=T, m=cell["m"], seed=seed, dtype="float64",
                             log_every=0), log=None)
    X = (np.random.default_rng(seed).random((500, T)) < 2.0 ** (-1.0 / 3)).astype(np.float64)
    return r["params"], r["cfg"], r["S"], X, cell["m"]


def _ratio_text(ratios):
    """'1' when every ratio is 1 to SAME; else 'xA to xB' (3 figures; 'x(1 + 2.6e-06)' where 3
    figures would print 1)."""
    lo, hi = min(ratios), max(ratios)
    if max(abs(lo - 1), abs(hi - 1)) <= SAME:
        return "1"
    f = lambda x: f"x{x:.3g}" if f"{x:.3g}" != "1" else f"x(1 {'+' if x > 1 else '-'} {abs(x - 1):.2g})"
    return f(lo) if abs(hi - lo) <= SAME * abs(hi) else f"{f(lo)} to {f(hi)}"


def _measure_table(models):
    """Markdown lines: per model (params, cfg, S, X, m), the ratio of each measure (rows) under
    each symmetry (columns) at c = 2 and 0.5; then the canonical form's C and norms likewise."""
    lines = []
    for p, cfg, S, X, m in models:
        cases = _symmetry_cases(cfg)
        base = _measures(p, cfg, S, X, m)
        moved = {lab: [_measures(f(p, c), cfg, S, X, m) for c in FACTORS] for lab, f in cases}
        can0 = _canonical_measures(p, cfg, m)
        can = {lab: [_canonical_measures(f(p, c), cfg, m) for c in FACTORS] for lab, f in cases}
        logit = max(attn.rel_error(attn.model_forward(f(p, c), cfg, X)[0],
                                   attn.model_forward(p, cfg, X)[0])
                    for lab, f in cases for c in FACTORS)
        lines += [f"### d = {cfg['d']}, T = {cfg['T']}, m = {m}, seed 0 (float64)", "",
                  f"Largest relative change of the logits over every symmetry and c: "
                  f"{logit:.1e}.", "",
                  "| measure | value | " + " | ".join(lab.split(" ")[0] for lab, _ in cases)
                  + " |", "|---|---|" + "---|" * len(cases)]
        for k, v in base.items():
            lines.append(f"| {k} | {v:.4g} | " + " | ".join(
                _ratio_text([moved[lab][i][k] / v for i in range(len(FACTORS))])
                for lab, _ in cases) + " |")
        for k in ("B_X", "qk_spec", "qk_fro", "qk_21", "v_spec", "v_21", "o_spec", "readout_norm",
                  "mlp_factor", "L_after", "C", "score_scale", "bound"):
            pick = (lambda nm: max(nm[k])) if isinstance(can0[k], list) else (lambda nm: nm[k])
            lines.append(f"| canonical {k} | {pick(can0):.4g} | " + " | ".join(
                _ratio_text([pick(can[lab][i]) / pick(can0) for i in range(len(FACTORS))])
                for lab, _ in cases) + " |")
        lines.append("")
    labels = _symmetry_cases(models[0][1])
    return lines + ["Columns: " + "; ".join(lab for lab, _ in labels) + ".", "",
                    "A ratio is the measure after the symmetry over the measure before it, at "
                    "c = 2 and c = 0.5 (one number when both agree); 1: equal to 1e-9 (the "
                    "measure respects the symmetry). Measures of the largest head where "
                    "theory.norm_measures gives one per head. Canonical: the same norms on "
                    "symmetry.canonical's form."]


def measures_command(out, plan=STUDY_PLAN, log=print):
    """Two study models trained again, their measures under every symmetry, into `out`."""
    _check_command(out, plan, log, name="plan")
    models = [_train_study_model(d, T, plan) for d, T in MODELS]
    lines = ["## The studies' measures under the model's exact symmetries", "",
             "Written by `python -m studies.symmetries measures` (two study models trained "
             "again in float64: the borderline cells' options, seed 0).", ""] + \
        _measure_table(models)
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}")


# ======== 2. THE ARM x T INTERACTION ============================================================
# In each (T, d) cell of a paired CSV, 20 seeds: the arm's success minus the study's, seed by
# seed. The interaction is the paired effect at the largest T minus its mean over the small T.
# Each (T, d) stratum's seeds are resampled on their own (intervals.resample_counts with the width as
# the bootstrap seed: different T share no data, and the widths are kept apart here); where the
# two arms are pooled, their pairs of one seed are drawn together (they share the baseline run).
# Beside it, exact tests on the discordant pairs: per group a two-sided sign test (lost against
# gained, Binomial(n, 1/2)), and Fisher's exact test of lost/gained against small/large T.

HIGH_ARMS = ("freeze-ln1", "decay-except-ln")    # the arms that hold the token norm high
SMALL_T, LARGE_T = (100, 300), (3000,)
N_BOOT = 20_000     # main passes it as read when called: the tests' fewer_resamples lowers it


def _read_pairs(path):  # -> the rows of a paired CSV, each checked (row_kinds.PAIR_ROWS)
    return row_kinds.read_whole(path, row_kinds.PAIR_ROWS)


def _interaction_row(rows, arms, d, n_boot=N_BOOT):
    """(effect at small T [lo, hi], at large T [lo, hi], difference [lo, hi], counts) for the
    arms `arms` pooled at width d (or both widths, d = "all": a seed's pairs at one T, both
    widths, drawn together)."""
    def cells(Ts):
        return {T: [r for r in rows if r["T"] == T and r["intervention"] in arms
                    and d in ("all", r["d"])] for T in Ts}
    rep = {}
    for name, Ts in (("small", SMALL_T), ("large", LARGE_T)):
        per_T = []
        for T, rs in cells(Ts).items():
            seeds = sorted({r["seed"] for r in rs})
            W = np.vstack([np.ones(len(seeds)), intervals.resample_counts(
                len(seeds), T, n_boot, seed=0 if d == "all" else d)])    # [1 + B, n_seeds]
            idx = {s: i for i, s in enumerate(seeds)}
            cols = [idx[r["seed"]] for r in rs]
            diff = np.array([r["int_success"] - r["base_success"] for r in rs], float)
            per_T.append(W[:, cols] @ diff / W[:, cols].sum(1))
        rep[name] = np.mean(per_T, axis=0)
    rep["difference"] = rep["large"] - rep["small"]
    out = {k: (float(v[0]), *intervals.percentile_ci(v[1:])) for k, v in rep.items()}
    counts = {}
    for name, Ts in (("small", SMALL_T), ("large", LARGE_T)):
        rs = [r for v in cells(Ts).values() for r in v]
        counts[name] = (sum(r["base_success"] > r["int_success"] for r in rs),
                        sum(r["base_success"] < r["int_success"] for r in rs), len(rs))
    return out, counts


def _interaction_table(rows, n_boot=N_BOOT):
    lines = ["| arms | d | T = 100, 300: int. - base [95% CI] | lost / gained (sign test p) | "
             "T = 3000: int. - base [95% CI] | lost / gained (sign test p) | "
             "difference, 3000 - small T [95% CI] | against 0 | Fisher exact p |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arms in [(a,) for a in HIGH_ARMS] + [HIGH_ARMS]:
        for d in sorted({r["d"] for r in rows}) + ["all"]:
            out, n = _interaction_row(rows, arms, d, n_boot)
            (ls, gs, _), (ll, gl, _) = n["small"], n["large"]
            exact = len(arms) == 1 and d != "all"     # independent pairs only
            p = (lambda f, *a: f" ({f(*a):.3g})" if exact else "")
            lines.append(
                f"| {' + '.join(arms)} | {d} | {fmt(*out['small'])} | {ls} / {gs}"
                f"{p(sign_test, ls, gs)} | {fmt(*out['large'])} | {ll} / {gl}"
                f"{p(sign_test, ll, gl)} | {fmt(*out['difference'])} | "
                f"{word(out['difference'][1], out['difference'][2], 0.0)} | "
                f"{p(fisher_exact, ls, gs, ll, gl).strip(' ()') or '-'} |")
    return lines


def interaction_command(pairs, out, n_boot=N_BOOT, log=print):
    """The arm x T interaction of the paired CSV `pairs`, into `out`."""
    _check_command(out, pairs, log, n_boot)
    rows = _read_pairs(pairs)
    lines = ["## The arm x T interaction of the arms that hold the token norm high", "",
             f"Written by `python -m studies.symmetries interaction {pairs}`. Per width, the "
             "paired success difference (arm - study, seed by seed) at T = 100 and 300 (their "
             "mean) and at T = 3000, and their difference; each (T, d) stratum's 20 seeds "
             f"resampled on their own ({n_boot} resamples), both widths of a seed at one T "
             "together in the rows d = all, both arms of a seed together where pooled (they "
             "share the baseline run). Exact tests on the discordant pairs beside it: the sign "
             "test per group, Fisher's exact test of lost/gained against small/large T; only where the "
             "pairs are independent (one arm, one width: '-' elsewhere, since two arms share a "
             "seed's baseline run and two widths its training set).", ""] + \
        _interaction_table(rows, n_boot)
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}")


def _seed_range(text):  # "20-39" -> (20, 39)
    try:
        lo, hi = (int(v) for v in text.split("-"))
    except ValueError:
        raise cli.BadValue(f"must look like LO-HI (e.g. 20-39), got {text!r}") from None
    if not 0 <= lo <= hi:
        raise cli.BadValue(f"needs 0 <= LO <= HI, got {text!r}")
    return lo, hi


def _cells_table(rows, seeds=None, n_boot=N_BOOT):
    """Per (arm, d, T) cell of a paired CSV (seeds lo..hi only, given `seeds`): pairs, lost,
    gained, the paired success difference [95% CI, the cell's seeds resampled], the bootstrap's
    word, and beside it the exact two-sided sign test on the discordant pairs."""
    if seeds:
        rows = [r for r in rows if seeds[0] <= r["seed"] <= seeds[1]]
    lines = ["| arm | d | T | pairs | lost | gained | int. - base [95% CI] | bootstrap | "
             "sign test p | sign test at 5% |", "|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["intervention"], r["d"], r["T"]) for r in rows}, key=lambda k: (
        k[0], k[1], k[2]))
    for arm, d, T in keys:
        rs = sorted((r for r in rows if (r["intervention"], r["d"], r["T"]) == (arm, d, T)),
                    key=lambda r: r["seed"])
        diff = np.array([r["int_success"] - r["base_success"] for r in rs], float)
        W = np.vstack([np.ones(len(rs)), intervals.resample_counts(len(rs), T, n_boot, seed=d)])
        rep = W @ diff / W.sum(1)
        lo, hi = intervals.percentile_ci(rep[1:])
        lost, gained = int((diff < 0).sum()), int((diff > 0).sum())
        p = sign_test(lost, gained)
        lines.append(f"| {arm} | {d} | {T} | {len(rs)} | {lost} | {gained} | "
                     f"{fmt(float(rep[0]), lo, hi)} | {word(lo, hi, 0.0)} | {p:.3g} | "
                     f"{'excludes 0' if p < 0.05 else 'holds 0'} |")
    return lines


def cells_command(pairs, out, seeds=None, n_boot=N_BOOT, log=print):
    """Each paired cell of `pairs` (seeds: None, or (lo, hi)) with its exact test, into `out`."""
    _check_command(out, pairs, log, n_boot)
    harness.need(seeds is None or isinstance(seeds, tuple) and len(seeds) == 2 and all(
        isinstance(s, int) and not isinstance(s, bool) for s in seeds) and 0 <= seeds[0]
        <= seeds[1], "seeds", seeds, "None or (lo, hi) with 0 <= lo <= hi")
    rows = _read_pairs(pairs)
    if seeds and not any(seeds[0] <= r["seed"] <= seeds[1] for r in rows):
        raise ValueError(f"{pairs} holds no pair with a seed in {seeds[0]}-{seeds[1]} (its seeds: "
                         f"{min(r['seed'] for r in rows)}-{max(r['seed'] for r in rows)})")
    which = f"seeds {seeds[0]}-{seeds[1]}" if seeds else "every seed"
    lines = ["## Paired cells with an exact test beside the bootstrap", "",
             f"Written by `python -m studies.symmetries cells {pairs}"
             + (f" --seeds {seeds[0]}-{seeds[1]}" if seeds else "") + f"` ({which}). Per cell "
             f"the arm's success minus the baseline's, seed by seed: the cell's seeds resampled "
             f"({n_boot} resamples), and the exact two-sided sign test on the discordant pairs "
             "(lost against gained, Binomial(n, 1/2)), which a small cell needs: 4 lost and 0 "
             "gained can exclude 0 in the bootstrap while the exact test gives p = 0.125.", ""] + \
        _cells_table(rows, seeds, n_boot)
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}")


# ======== 3. THE STUDY ON MEASURES OF THE FUNCTION =============================================
# The study's runs trained again, seed for seed, with the canonical measures as columns
# (studies.mechanism arm ... baseline-rerun; row_kinds.MECHANISM_CANONICAL): its borderline cells
# for the separations, its fixed-m cells for the growth in T, each measure raw beside canonical.

PAIRED_MEASURES = (("covering_constant", "canon_C", "C"),
                   ("score_scale", "canon_score_scale", "score scale, largest head"),
                   ("top_score_scale", "canon_top_score_scale", "score scale, top head"),
                   ("norm_V", "canon_norm_V", "‖W_V‖_2, largest head"),
                   ("norm_O", "canon_norm_O", "‖W_O‖_2, largest head"),
                   ("qk_fro", "canon_qk_fro", "‖W_QK‖_F, largest head"),
                   ("v_21", "canon_v_21", "‖W_V‖_2,1, largest head"),
                   ("readout_norm", "canon_readout_norm", "‖w‖, the readout"),
                   ("mlp_factor", "canon_mlp_factor", "the MLP's factor"),
                   ("B_X", None, "B_X (canonical: sqrt(d + 1))"))


def _same_runs(cells, study_cells, design=None, keys=("test_acc", "covering_constant")):
    """How many of `cells`' runs gave the run of the same (d, T, m, seed) in `study_cells` (of
    `design`, or any) the same `keys`, to the bit -> (same, compared, {(d, T): (same, n)})."""
    theirs = {(d, T, m, r["seed"]): r for (g, d, T, m), rows in study_cells.items()
              if design in (None, g) for r in rows}
    per = {}
    for (_, d, T, m), rows in cells.items():
        for r in rows:
            o = theirs.get((d, T, m, r["seed"]))
            if o is not None:
                same, n = per.get((d, T), (0, 0))
                per[(d, T)] = (same + all(r[k] == o[k] for k in keys), n + 1)
    return sum(s for s, _ in per.values()), sum(n for _, n in per.values()), per


SAME_KEYS = ("test_acc", "best_test_acc", "final_loss", "min_loss", "mass_on_S", "score_gap")


def same_command(first, second, out, log=print):
    """Per cell, how many runs of the folder `second` give the run of the same cell and seed in
    `first` the same SAME_KEYS to the bit (measures of the learned function and of training, not
    of its parametrisation), into `out`."""
    harness.check_path("out", out, "the table's file")
    for name, v in (("first", first), ("second", second)):
        harness.check_path(name, v, "a study's or an arm's folder", folder=True)
    harness.need(callable(log), "log", log, "a function of one line")
    harness.claim_outputs([(out, "table", "the table")], folders=[first, second])
    (_, a), (_, b) = load_runs(first, "the first folder"), load_runs(second, "the second folder")
    same, n, per = _same_runs(b, a, keys=SAME_KEYS)
    harness.need(n > 0, "folders", (first, second), "two folders with runs of the same cells "
                 "and seeds", ValueError)
    lines = ["## Runs of two folders compared to the bit", "",
             f"Written by `python -m studies.symmetries same {first} {second}`. A run is the same "
             f"when its {', '.join(SAME_KEYS)} are equal to the bit. {same} of {n} runs are.", "",
             "| d | T | runs | the same |", "|---|---|---|---|"] + [
        f"| {d} | {T} | {k} | {s} |" for (d, T), (s, k) in sorted(per.items())]
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}: {same} of {n} runs the same")


def _separation_lines(cells, W):
    """Pooled over the T of each width: P(a failure's measure > a success's), raw and
    canonical, each with its word against 1/2; then C per T. -> lines."""
    widths = sorted({d for (_, d, _, _) in cells})
    by_d = {d: [rows for (_, dd, _, _), rows in cells.items() if dd == d] for d in widths}

    def cell(group, key):
        if key is None:
            return "-"
        p, lo, hi = separation(group, key, W)
        return f"{fmt(p, lo, hi)} {word(lo, hi, 0.5)}" if np.isfinite(p) else "n/a"
    lines = ["| measure | " + " | ".join(f"d = {d}: raw | d = {d}: canonical" for d in widths)
             + " |", "|---|" + "---|---|" * len(widths)]
    for raw, canon, name in PAIRED_MEASURES:
        lines.append(f"| {name} | " + " | ".join(f"{cell(by_d[d], raw)} | {cell(by_d[d], canon)}"
                                                 for d in widths) + " |")
    lines += ["", "| d | T | m | successes / failures | P(C: failure > success), raw | canonical |",
              "|---|---|---|---|---|---|"]
    for (_, d, T, m), rows in sorted(cells.items(), key=lambda kv: kv[0][1:]):
        ok = sum(r["success"] for r in rows)
        lines.append(f"| {d} | {T} | {m} | {ok} / {len(rows) - ok} | "
                     f"{cell([rows], 'covering_constant')} | {cell([rows], 'canon_C')} |")
    return lines


def canonical_command(borderline, fixed, study, out, n_boot=N_BOOT, log=print):
    """The study's separations (its borderline cells, rerun in `borderline`) and growth in T (its
    fixed-m cells, rerun in `fixed`) on each measure raw and canonical, and how many reruns gave
    the study's (folder `study`) very runs, into `out`."""
    harness.check_path("out", out, "the table's file")
    for name, v in (("borderline", borderline), ("fixed", fixed), ("study", study)):
        harness.check_path(name, v, "a study's folder", folder=True)
    harness.need(callable(log), "log", log, "a function of one line")
    harness.claim_outputs([(out, "table", "the table")], folders=[borderline, fixed, study])
    check_number("n_boot", n_boot, INTS, 1, 10**6 + 1, "an integer from 1 to 10**6")
    _, theirs = load_runs(study, "the study")
    (pb, cb), (pf, cf) = (load_runs(f, role) for f, role in ((borderline, "the borderline rerun"),
                                                             (fixed, "the fixed-m rerun")))
    for plan, cells in ((pb, cb), (pf, cf)):
        harness.need(all(g == "baseline-rerun" for g, *_ in cells), "folders", cells,
                     "folders of `studies.mechanism arm ... baseline-rerun`", ValueError)
        harness.need(all(not math.isnan(r["canon_C"]) or not math.isfinite(r["test_acc"])
                         for rows in cells.values() for r in rows), "folders", cells,
                     "runs with the canonical columns (trained by this version)", ValueError)
    sb, nb, _ = _same_runs(cb, theirs, "borderline")
    sf, nf, _ = _same_runs(cf, theirs, "fixed")
    Wb = seed_weights(pb["seeds"], [T for (_, _, T, _) in cb], n_boot)
    Wf = seed_weights(pf["seeds"], [T for (_, _, T, _) in cf], n_boot)
    grown = [(k, n + (" (canonical)" if c else "")) for raw, canon, n in PAIRED_MEASURES[:5]
             for k, c in ((raw, False), (canon, True))]
    growth, _, _ = growth_table(pf, cf, Wf, design="baseline-rerun", quantities=grown)
    lines = ["## The study's measures, raw and on the canonical form", "",
             f"Written by `python -m studies.symmetries canonical {borderline} {fixed} --study "
             f"{study}`. The study's runs trained again, seed for seed, measured raw and on "
             f"symmetry.canonical's form (a measure of the function: no exact symmetry moves "
             f"it). {sb} of {nb} borderline and {sf} of {nf} fixed-m reruns gave the study's "
             f"final test accuracy and raw C to the bit.", "",
             "### Separations at the borderline m, pooled over T per width", "",
             f"P(a failure's measure > a success's), pairs within each T ({n_boot} resamples "
             "of the seeds, each T's on its own); 1/2 is no separation, and a norm-based bound "
             "predicts above 1/2. " + EDGE_NOTE, ""] + _separation_lines(cb, Wb) + [
             "", "### Growth in T at the fixed m", "",
             "Medians at each T, fitted as a + b ln T and a T^k (each T's seeds resampled on "
             "their own).", ""] + growth
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}")


# ======== 4. THE NORM BALL, SEED BY SEED ========================================================
# A sweep's seed fixes the data and the init whatever the options, so a protocol's seed and the
# study's seed of one T differ by the protocol alone: each seed's critical m (its bisection's
# answer; above the grid counts as larger) in the two folders, compared by the exact sign test.

def _critical(folder, n_seeds, Ts):  # -> {T: critical_sizes' entry} over seeds 0..n_seeds-1
    meta, rows = folder_rows(folder, n_seeds, Ts)
    grid = meta.get("grids", {}).get("transformer")
    harness.need(bool(grid), "folder", folder, "a sweep folder with a Transformer grid", ValueError)
    out = {T: st for (_, T), st in critical_sizes(rows, {"transformer": grid},
                                                  meta.get("search", "bisect")).items()}
    for T, st in out.items():
        harness.need(st["n_seeds"] == n_seeds and not st["unfinished"], "folder", folder,
                     f"every seed 0..{n_seeds - 1} finished at T = {T}", ValueError)
    return out


def _factors(mine, theirs):  # "x1.4 [0.7, 2.1]": each differing seed's critical m over the study's
    r = sorted(x / y for x, y in zip(mine, theirs) if x != y and math.isfinite(x)
               and math.isfinite(y))
    above = sum(x != y and not (math.isfinite(x) and math.isfinite(y))
                for x, y in zip(mine, theirs))
    text = (f"x{float(np.median(r)):.2f} [{r[0]:.2f}, {r[-1]:.2f}]" if r else "-")
    return text + (f" (+{above} above the grid)" if above else "")


def _share(k, n):         # "4 of 20, 20% [5.7%, 43.7%]": exact_rate's interval, rounded outwards
    lo, hi = exact_rate(k, n)
    return (f"{k} of {n}, {100 * k / n:.0f}% [{math.floor(1000 * lo) / 10:g}%, "
            f"{math.ceil(1000 * hi) / 10:g}%]")


def ball_command(study, folders, n_seeds, Ts, out, log=print):
    """Per folder and T: m* over seeds 0..n_seeds-1 with its exact interval, the study's m* on the
    same seeds, and how many seeds need more or fewer samples than in the study, with the exact
    two-sided sign test, into `out`."""
    harness.check_path("out", out, "the table's file")
    harness.check_path("study", study, "a sweep folder", folder=True)
    harness.need(isinstance(folders, (list, tuple)) and folders, "folders", folders,
                 "a list of sweep folders", ValueError)
    for f in folders:
        harness.check_path("folders", f, "a sweep folder", folder=True)
    harness.claim_outputs([(out, "table", "the table")], folders=[study, *folders])
    check_number("n_seeds", n_seeds, INTS, 1, 10**4 + 1, "an integer from 1 to 10**4")
    harness.need(isinstance(Ts, (list, tuple)) and Ts and all(
        isinstance(T, int) and not isinstance(T, bool) and T >= 1 for T in Ts), "Ts", Ts,
        "a list of integers T >= 1", ValueError)
    harness.need(callable(log), "log", log, "a function of one line")
    base = _critical(study, n_seeds, Ts)
    n = lambda v: "inf" if math.isinf(v) else f"{v:g}"
    lines = ["## The norm ball against the study, seed by seed", "",
             f"Written by `python -m studies.symmetries ball {study} {' '.join(folders)} --seeds "
             f"{n_seeds} --Ts {','.join(map(str, Ts))}`. m* by the majority rule over seeds "
             f"0-{n_seeds - 1} with its exact 95% interval (the bisection's order statistic); "
             "per seed, its critical m (the smallest grid m that succeeded; above the grid "
             "counts as larger) under the protocol against the study's, the exact two-sided "
             "sign test on the seeds that differ, the share that differ with its exact "
             "(Clopper-Pearson) 95% interval, and by what factor they differ (the seed's "
             "critical m over the study's).", "",
             "| protocol | T | m* [95% CI] | the study's m* [95% CI], same seeds | seeds above "
             "the grid | more / fewer / same than the study | sign test p | seeds that differ "
             "[95% CI] | the seeds that differ: factor, median [range] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in folders:
        got = _critical(f, n_seeds, Ts)
        for T in sorted(set(got) & set(base)):
            a, b = got[T], base[T]
            more = sum(x > y for x, y in zip(a["per_seed"], b["per_seed"]))
            fewer = sum(x < y for x, y in zip(a["per_seed"], b["per_seed"]))
            p = sign_test(more, fewer)
            lines.append(f"| {os.path.basename(f.rstrip('/'))} | {T} | {n(a['m_star'])} "
                         f"[{n(a['m_star_lo'])}, {n(a['m_star_hi'])}] | {n(b['m_star'])} "
                         f"[{n(b['m_star_lo'])}, {n(b['m_star_hi'])}] | {a['censored']} | "
                         f"{more} / {fewer} / {n_seeds - more - fewer} | {p:.3g} | "
                         f"{_share(more + fewer, n_seeds)} | "
                         f"{_factors(a['per_seed'], b['per_seed'])} |")
    path = out                               # claimed at the start (harness.claim_outputs)
    cli.write_text(path, "\n".join(lines) + "\n")
    log(f"wrote {path}")


# ======== 5. THE COMMAND LINE ===================================================================

def _parser():
    ap = OneLineParser(prog="python -m studies.symmetries", description=__doc__.split("\n\n")[2])
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measures", help="the measures' ratios under each symmetry")
    m.add_argument("out", help="the markdown table to write")
    m.add_argument("--plan", default=STUDY_PLAN, help="the study's plan.json (its options)")
    i = sub.add_parser("interaction", help="the arm x T interaction from a paired CSV")
    i.add_argument("pairs", help="a CSV of `mechanism.py paired --pairs`")
    i.add_argument("out", help="the markdown table to write")
    c = sub.add_parser("cells", help="each paired cell: bootstrap and exact sign test")
    c.add_argument("pairs", help="a CSV of `mechanism.py paired --pairs`")
    c.add_argument("out", help="the markdown table to write")
    c.add_argument("--seeds", type=_seed_range, default=None, help="only seeds LO-HI (e.g. 20-39)")
    k = sub.add_parser("canonical", help="the study's separations and growth, raw and canonical")
    k.add_argument("borderline", help="the study's borderline cells trained again (arm ... "
                   "baseline-rerun --design borderline)")
    k.add_argument("fixed", help="its fixed-m cells trained again (--design fixed)")
    k.add_argument("out", help="the markdown table to write")
    k.add_argument("--study", default=os.path.join("results", "mechanism"),
                   help="the study's folder, whose runs the reruns must give again")
    b = sub.add_parser("ball", help="m* and each seed's critical m against the study's")
    b.add_argument("study", help="the study's sweep folder (results/extended)")
    b.add_argument("folders", nargs="+", help="protocol folders of the same grid and seeds")
    b.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    b.add_argument("--Ts", type=int_list, required=True, help="comma-separated T")
    b.add_argument("--out", required=True, help="the markdown table to write")
    q = sub.add_parser("same", help="how many runs of two folders are the same to the bit")
    q.add_argument("first", help="a study's or an arm's folder")
    q.add_argument("second", help="another, with runs of the same cells and seeds")
    q.add_argument("out", help="the markdown table to write")
    return ap


def _check_command(out, source, log, n_boot=1, name="pairs"):
    harness.check_path("out", out, "the table's file")
    harness.check_path(name, source, "an input file")
    if not os.path.isfile(source):         # a FIFO or a device: refused, never opened
        raise ValueError(f"{name} {source} is not a regular file (missing, a folder, a device or "
                         f"a pipe); refusing to read it")
    harness.claim_outputs([(out, "table", "the table")], [source])
    harness.need(callable(log), "log", log, "a function of one line")
    check_number("n_boot", n_boot, INTS, 1, 10**6 + 1, "an integer from 1 to 10**6")


def main(argv=None):
    a = _parser().parse_args(harness.check_argv(argv))
    try:
        if a.command == "measures":
            measures_command(a.out, a.plan)
        elif a.command == "cells":
            cells_command(a.pairs, a.out, a.seeds, N_BOOT)
        elif a.command == "ball":
            ball_command(a.study, a.folders, a.seeds, a.Ts, a.out)
            _kernels_note([a.study] + a.folders)
        elif a.command == "same":
            same_command(a.first, a.second, a.out)
            _kernels_note([a.first, a.second])
        elif a.command == "canonical":
            canonical_command(a.borderline, a.fixed, a.study, a.out, N_BOOT)
            _kernels_note([a.borderline, a.fixed, a.study])
        else:
            interaction_command(a.pairs, a.out, N_BOOT)
    except ValueError as e:               # an OSError: one_line_errors says it
        sys.exit(f"python -m studies.symmetries: {e}")
    return 0


def _kernels_note(folders):
    """The line saying the folders set side by side were made under different BLAS kernels
    (provenance.kernels_differ), on standard output; nothing when they were not."""
    note = provenance.kernels_differ(folders)
    if note:
        print(note)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.symmetries", main))
