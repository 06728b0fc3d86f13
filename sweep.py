"""sweep.py: the paper's experiment, the critical sample size m*(T) (Edelman et al. 2022, Section 5).

    python sweep.py --preset paper         T = 100..1100: the paper's figure
    python sweep.py --preset extended      T = 10..10^4, 30 seeds (hours: shard it)
    python sweep.py --help                 every option
    python sweep.py bench                  time per training step, GFLOP/s beside numpy's matmul
    python sweep.py compare DIR DIR ...    one table over sweeps of different protocols
    python sweep.py width DIR DIR ...      widths side by side, and where each leaves its log T law
    python sweep.py limit                  the statistical limit per T, no training

For each T and seed, training runs (train.train_run) at training-set sizes m on a grid say whether
the model reaches test accuracy >= 0.99; a search per seed picks the m to run. Every run is one CSV
row, written as it finishes, so an interrupted sweep loses nothing and resumes where it stopped.

The file reads top to bottom: the paper's numbers and the presets, the m grid and the searches,
the statistic m*(T), runs on disk, running the searches on a process pool, tables and plots, the
bench, the command line.
"""
import argparse
import csv
import glob
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import re
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

if __name__ == "__main__":
    # One BLAS thread per process (see train.py): the pool of worker processes is the parallelism.
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np

import attn
import data
import train
from theory import code_width, fit_line
from train import BadValue, OneLineParser, integer, number

# ---------------------------------------------------------------- the paper's figure ----------
# For each T, the critical sample size m*(T) is the smallest m on the grid at which at least half
# of the seeds reach test accuracy >= 0.99 on fresh samples. Each seed fixes S, the data stream
# (the training set for m is the first m samples of the seed's stream, so larger m only adds
# samples), the test set and the init.

PAPER_MSTAR = {100: 50.0, 150: 52.8, 200: 57.7, 250: 56.0, 300: 69.2, 350: 61.0, 400: 79.5,
               450: 82.4, 500: 80.4, 550: 85.2, 600: 94.1, 650: 96.7, 700: 88.9, 750: 101.4,
               800: 99.7, 900: 108.4, 1000: 111.0, 1100: 113.4}  # read off the paper's figure
PAPER_BAR = {100: "48.7-51.3", 150: "48.3-57.3", 200: "53.3-62.1", 250: "51.1-60.9",
             300: "61.7-76.7", 350: "54.3-67.7", 400: "74.8-84.3", 450: "76.7-88.1",
             500: "71.9-89.0", 550: "77.6-92.8", 600: "84.2-104.0", 650: "81.8-111.6",
             700: "79.2-98.7", 750: "90.8-112.0", 800: "87.1-112.4", 900: "104.8-112.0",
             1000: "105.8-116.2", 1100: "107.8-119.1"}             # the figure's error bars

PRESETS = {
    "paper": dict(T=[100, 300, 500, 700, 900, 1100], seeds=10),
    "extended": dict(T=[10, 30, 100, 300, 500, 700, 900, 1100, 3000, 10000], seeds=30),
    "smoke": dict(T=[8, 16], seeds=2, steps=150, n_test=500,
                  grid_max={"transformer": 64, "mlp": 64}),
}
ROW_FIELDS = ("model", "task", "s", "T", "m", "seed", "test_acc", "train_acc", "success",
              "attn_on_S", "steps", "seconds", "best_step", "pos_overlap", "sweep_id")
OPTIONAL_FIELDS = ("best_step", "pos_overlap", "sweep_id")   # older rows lack them
# pos_overlap: train.position_overlap of the trained model (the width study's measurement)
# sweep_id: a fingerprint of the sweep's options, bar and search (see sweep_fingerprint), in every
# row, so that CSVs merged from shards or machines are checked to be one experiment.


def m_grid(lo, hi, ratio=1.05):
    """Integers from lo to hi, each about `ratio` times the last (every integer while that is
    finer): the candidate training-set sizes."""
    g, m = [], float(lo)
    while round(m) <= hi:
        if not g or round(m) > g[-1]:
            g.append(int(round(m)))
        m = max(m * ratio, m + 1)
    return g


def bisect_search(grid):
    """Search for the smallest grid m at which a run succeeds, assuming success is monotone in m.

    A generator: it yields the next m to run and is sent back whether that run succeeded; it
    returns the smallest successful m, or None when even the largest fails. About
    log2(len(grid)) + 1 runs instead of len(grid).
    """
    lo, hi = -1, len(grid)           # grid[lo] fails (virtually), grid[hi] succeeds (virtually)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (yield grid[mid]):
            hi = mid
        else:
            lo = mid
    return grid[hi] if hi < len(grid) else None


def grid_search(grid):
    """Same protocol as bisect_search, but every grid m is run; returns the smallest success."""
    first = None
    for m in grid:
        if (yield m) and first is None:
            first = m
    return first


SEARCHES = {"bisect": bisect_search, "grid": grid_search}


def replay(gen, saved, answer=None):
    """Drive a search generator over saved runs (saved[m] -> success), first sending `answer` to
    its pending question (None: start it). -> ("done", its answer) or ("run", the next m to run).
    The one place where saved runs are replayed: resuming a sweep and reading its results."""
    try:
        m = next(gen) if answer is None else gen.send(bool(answer))
        while m in saved:
            m = gen.send(bool(saved[m]))
    except StopIteration as stop:
        return "done", stop.value
    return "run", m


def seed_outcome(grid, search, results):
    """One seed's search replayed over its saved runs {m: success}: ("done", critical m, or inf
    when even the largest m failed) or ("unfinished", None) when the search still needs a run."""
    state, value = replay(SEARCHES[search](grid), results)
    if state == "run":
        return "unfinished", None
    return "done", (np.inf if value is None else float(value))


def critical_sizes(rows, grid_by_model, search="bisect"):
    """Per (model, T): each seed's critical m, m*(T) by the majority rule, and per-seed stats.

    A seed's critical m is its search's answer, replayed from the saved runs: the smallest grid m
    that succeeded (inf when even the largest failed: "above grid"). Seeds whose search is not
    finished (an interrupted sweep, a missing shard) are counted apart, never as "above grid".
    m*(T) is the smallest grid m at which at least half of the finished seeds succeed: counted
    at m itself when the whole grid was run (--search grid), and as #{seeds: critical <= m} after
    bisection, which takes success to be monotone in m. Real runs are not perfectly monotone
    (a seed can fail above its first success), so the two can differ.
    m_star_lo, m_star_hi: its 95% interval from the seed bootstrap of success_estimates (the same
    n_boot = 2000 resamples of the finished seeds, _seed_counts with seed 0), m* recomputed by
    the same rule on each resample; m_star_boot holds the replicates (for scaling_fits).
    """
    by = {}
    for r in rows:
        seeds = by.setdefault((r["model"], int(r["T"])), {})
        seeds.setdefault(int(r["seed"]), {})[int(r["m"])] = r["success"] in (True, "1", 1)
    by = {key: dict(sorted(seeds.items())) for key, seeds in by.items()}   # per-seed order: seed
    out = {}
    for (model, T), seeds in sorted(by.items()):
        grid = grid_by_model[model]
        outcomes = [seed_outcome(grid, search, res) for res in seeds.values()]
        crit = np.array([c for state, c in outcomes if state == "done"], dtype=float)
        n = len(crit)
        if search == "grid":        # the definition itself: count the seeds that succeed AT m
            done = [res for res, (state, _) in zip(seeds.values(), outcomes) if state == "done"]
            wins = np.array([[float(res[m]) for m in grid] for res in done]).reshape(n, len(grid))
        else:                       # bisection: each seed's answer, success taken as monotone
            wins = (crit[:, None] <= np.asarray(grid, dtype=float)[None]).astype(float)
        # per resample (row of C; the identity row gives m* itself): the first grid m at which
        # the drawn seeds' successes reach half of the n drawn
        boot = np.full(1 + N_BOOT, np.inf)
        if n:
            C = np.vstack([np.ones(n), _seed_counts(np.random.default_rng(0), n, N_BOOT)])
            half = (C @ wins) >= n / 2                              # [1 + N_BOOT, n_grid]
            boot[half.any(1)] = np.asarray(grid, dtype=float)[np.argmax(half, 1)[half.any(1)]]
        mstar, boot = float(boot[0]), boot[1:]
        finite = crit[np.isfinite(crit)]
        lo, hi = percentile_ci(boot)
        out[(model, T)] = dict(model=model, T=T, n_seeds=n, m_star=mstar, m_star_lo=lo,
                               m_star_hi=hi, m_star_boot=boot,
                               unfinished=len(outcomes) - n,
                               mean=float(finite.mean()) if len(finite) else np.inf,
                               std=float(finite.std(ddof=1)) if len(finite) > 1 else 0.0,
                               lo=float(finite.min()) if len(finite) else np.inf,
                               hi=float(finite.max()) if len(finite) else np.inf,
                               censored=int(n - len(finite)), per_seed=crit.tolist())
    return out



# ---------------------------------------------------------------- the estimator: success curves
# A run is one training run at context length T, seed `seed` and training-set size m; it succeeds
# (success = 1) when its test accuracy reaches 0.99. Rows are dicts {"T", "seed", "m", "success"} or
# tuples (T, seed, m, success). Success is not monotone in m within a seed, so m* is estimated from
# all runs of one T pooled:
#
#   1. fit_success_curve  P(success | m) = sigmoid(a + b ln m), ridge-penalised Newton (IRLS).
#   2. m_at               the m where the fitted curve equals p: m50 = m_at(0.5), m90 = m_at(0.9).
#   3. bootstrap_over_seeds / success_estimates
#                         95% percentile CIs from resampling SEEDS (all runs of a seed together).
#   4. majority_mstar     the paper-comparison statistic: smallest m where >= half the seeds succeed.
#   5. scaling_fits       m50(T) ~ a + b ln T, a + b T, a T^k with paired-bootstrap CIs and AIC.
#
# Undetermined fits. If every run of a T failed (or every run succeeded) the slope b is not
# identified; fit_success_curve returns b = None and a = -inf (or +inf): the maximum-likelihood
# constant curve, P = 0 (or 1) at every m. m_at then gives inf ("m* above the largest m tried") or
# 0.0 ("m* below the smallest m tried"), and fit_flag(...) words it for a report. Inside the
# vectorised bootstrap the same cases are stored as a = -inf / +inf with b = 0.0.
#
# Regularisation. The log-likelihood gets a ridge penalty (RIDGE / 2) (a_c^2 + b^2) with
# RIDGE = 1e-3, where a_c is the intercept at the centre of the data (a_c = a + b * mean ln m), so
# the penalty does not pull the curve's location towards m = 1. Under complete separation (every
# failure at a smaller m than every success) the unpenalised MLE has b -> inf; the ridge keeps b
# finite (a steep curve whose m50 falls inside the gap between the last failure and the first
# success) and makes the objective strictly concave, so Newton with step halving always converges.
# On ordinary data its effect is negligible: it shifts b by about RIDGE / (Fisher information of b),
# e.g. ~1e-5 relative for a few hundred runs. Firth's penalty would also give finite estimates, but
# needs leverages each iteration and complicates the vectorised bootstrap; the ridge does not.
#
# numpy only (no scipy). Every function validates its input and raises a one-line ValueError that

N_BOOT = 2000     # bootstrap resamples of the seeds behind every interval in a table
RIDGE = 1e-3      # ridge strength on (centred intercept, slope); see the module docstring
MAX_ITER = 100    # Newton iterations cap (typical fits converge in 5-30)
_TOL = 1e-10      # Newton stops when every step is below _TOL * (1 + |parameter|)


# ----------------------------------------------------------------------------------------------
# 0. rows


def parse_rows(rows):
    """Rows (dicts or (T, seed, m, success) tuples) -> dict of arrays, each shape [n_runs]:
    "T" float, "seed" int (0..n_seeds-1, the rank of the seed's label), "m" float > 0,
    "success" float in {0, 1}; plus "seeds" (the original seed labels, list of n_seeds, sorted
    by number where they are numbers, as the CSV's "12" is). Indexing seeds by their sorted
    labels, not by first appearance, makes the seed bootstrap independent of the order of the
    rows, and pairs replicate i with the same seeds in any two sets of rows holding them."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows must be non-empty, got 0 rows")
    T, seed, m, success, labels = [], [], [], [], {}
    for i, r in enumerate(rows):
        if isinstance(r, dict):
            try:
                t, s, mm, ok = r["T"], r["seed"], r["m"], r["success"]
            except KeyError as e:
                raise ValueError(f"row {i} lacks key {e.args[0]!r}: {r!r}") from None
        else:
            try:
                t, s, mm, ok = r
            except (TypeError, ValueError):
                raise ValueError(f"row {i} must be a dict or a (T, seed, m, success) tuple, "
                                 f"got {r!r}") from None
        try:
            t, mm, ok = float(t), float(mm), float(ok)
        except (TypeError, ValueError):
            raise ValueError(f"row {i} has a non-numeric T, m or success: {r!r}") from None
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"row {i}: T must be a positive finite number, got {t!r}")
        if not (math.isfinite(mm) and mm > 0):
            raise ValueError(f"row {i}: m must be a positive finite number, got {mm!r}")
        if ok not in (0.0, 1.0):
            raise ValueError(f"row {i}: success must be 0 or 1, got {ok!r}")
        T.append(t)
        seed.append(labels.setdefault(s, len(labels)))
        m.append(mm)
        success.append(ok)
    order = sorted(labels, key=_seed_key)
    rank = np.empty(len(order), dtype=np.int64)
    rank[[labels[s] for s in order]] = np.arange(len(order))
    return {"T": np.array(T), "seed": rank[np.array(seed, dtype=np.int64)], "m": np.array(m),
            "success": np.array(success), "seeds": order}


def _seed_key(label):
    """Sort key of a seed label: numbers (7, "12") by value, before any other label by text."""
    try:
        return (0, float(label), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(label))


def split_by_T(rows):
    """Rows -> {T: [rows of that T]}, T in increasing order (T as float)."""
    rows, out = list(rows), {}
    for r, t in zip(rows, parse_rows(rows)["T"]):
        out.setdefault(float(t), []).append(r)
    return dict(sorted(out.items()))


def _one_T(rows):
    """parse_rows for rows that must share one T; ValueError naming the T values otherwise."""
    d = parse_rows(rows)
    Ts = np.unique(d["T"])
    if Ts.size != 1:
        raise ValueError(f"rows mix context lengths T={Ts.tolist()}: pass one T at a time "
                         f"(split_by_T)")
    return d


# ----------------------------------------------------------------------------------------------
# 1. the success curve: P(success | m) = sigmoid(a + b ln m)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))   # no overflow for any finite z


def _objective(a, b, x, N, Y, lam):
    """Penalised binomial log-likelihood, shape [B]: sum_j Y eta - N softplus(eta) - ridge."""
    eta = a[:, None] + b[:, None] * x
    return (Y * eta - N * np.logaddexp(0.0, eta)).sum(1) - 0.5 * lam * (a * a + b * b)


def _fit_binomial(x, N, Y, lam=RIDGE, max_iter=MAX_ITER):
    """Ridge-penalised binomial logistic regression, vectorised over B independent data sets.

    x [M] covariate (centred ln m); N [B, M] run counts, Y [B, M] success counts (weights may be
    any non-negative numbers). Maximises sum_j (Y eta - N log(1 + e^eta)) - lam/2 (a^2 + b^2),
    eta = a + b x, by Newton's method with step halving. Returns a [B], b [B], n_iter (int).
    The objective is strictly concave (lam > 0), so the result is finite for any data."""
    B = N.shape[0]
    n, y = N.sum(1), Y.sum(1)
    a = np.log((y + 0.5) / (n - y + 0.5))      # logit of the smoothed success fraction
    b = np.zeros(B)
    active = np.arange(B)
    it = 0
    for it in range(1, max_iter + 1):
        Na, Ya, aa, ba = N[active], Y[active], a[active], b[active]
        p = _sigmoid(aa[:, None] + ba[:, None] * x)
        r, w = Ya - Na * p, Na * p * (1.0 - p)
        ga = r.sum(1) - lam * aa                # gradient and (negative) Hessian, per data set
        gb = (r * x).sum(1) - lam * ba
        haa = w.sum(1) + lam
        hab = (w * x).sum(1)
        hbb = (w * x * x).sum(1) + lam
        det = haa * hbb - hab * hab
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        # step halving until the objective does not decrease (it is concave: t = 1 usually works)
        f0 = _objective(aa, ba, x, Na, Ya, lam)
        t = np.ones(active.size)
        for _ in range(60):
            f1 = _objective(aa + t * da, ba + t * db, x, Na, Ya, lam)
            bad = f1 < f0 - 1e-12 * (1.0 + np.abs(f0))
            if not bad.any():
                break
            t[bad] *= 0.5
        a[active] = aa + t * da
        b[active] = ba + t * db
        step = np.maximum(np.abs(t * da) / (1.0 + np.abs(aa)), np.abs(t * db) / (1.0 + np.abs(ba)))
        active = active[step > _TOL]
        if active.size == 0:
            break
    return a, b, it


def fit_success_curve(m, success):
    """Logistic fit of success on ln m, all runs pooled.

    m [n] positive training-set sizes; success [n] in {0, 1}. Returns (a, b), floats, with
    P(success | m) = sigmoid(a + b ln m), maximising the log-likelihood minus the ridge
    RIDGE/2 (a_c^2 + b^2) (module docstring). Undetermined cases return b = None:
    all runs failed -> (-inf, None); all succeeded -> (+inf, None); runs at one m only, with both
    outcomes -> (logit of the success fraction, None). Never NaN."""
    m = np.asarray(m, dtype=np.float64)
    success = np.asarray(success, dtype=np.float64)
    if m.ndim != 1 or m.size == 0 or m.shape != success.shape:
        raise ValueError(f"m and success must be 1-D of the same non-zero length, got shapes "
                         f"{m.shape}, {success.shape}")
    if not (np.isfinite(m).all() and (m > 0).all()):
        raise ValueError(f"m must be positive and finite, got min {m.min()!r}")
    if not np.isin(success, (0.0, 1.0)).all():
        raise ValueError(f"success must be 0 or 1, got values {np.unique(success).tolist()}")
    k, n = success.sum(), success.size
    if k == 0:
        return -math.inf, None
    if k == n:
        return math.inf, None
    u, inv = np.unique(m, return_inverse=True)
    if u.size == 1:
        return float(math.log(k / (n - k))), None
    lx = np.log(u)
    c = np.log(m).mean()                        # centre: the ridge acts on the centred intercept
    N = np.bincount(inv, minlength=u.size)[None, :].astype(np.float64)
    Y = np.bincount(inv, weights=success, minlength=u.size)[None, :]
    ac, b, _ = _fit_binomial(lx - c, N, Y)
    return float(ac[0] - b[0] * c), float(b[0])


def m_at(p, a, b):
    """The m where sigmoid(a + b ln m) = p, i.e. exp((logit p - a) / b).

    p in (0, 1); a, b scalars or arrays of one shape (b may be None: undetermined). Returns inf
    where b <= 0 or b is None (the curve never rises to p), except 0.0 where a = +inf (every run
    succeeded: m* is below the smallest m tried). Scalar in, float out; arrays in, array out."""
    p = float(p)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    scalar = np.ndim(a) == 0 and (b is None or np.ndim(b) == 0)
    a = np.asarray(a, dtype=np.float64)
    b = np.zeros_like(a) if b is None else np.asarray(b, dtype=np.float64)
    a, b = np.broadcast_arrays(a, b)
    rising = b > 0
    e = np.where(rising, (math.log(p / (1.0 - p)) - a) / np.where(rising, b, 1.0), np.inf)
    out = np.full(e.shape, np.inf)
    small = e < 700.0                           # exp(700) ~ 1e304; beyond: inf, without overflow
    out[small] = np.exp(e[small])
    out[a == np.inf] = 0.0
    return float(out) if scalar else out


def fit_flag(m, success, a, b):
    """A one-line remark on a fit for reports, or None when the fit is ordinary.

    m, success [n] the runs; (a, b) their fit_success_curve result."""
    success = np.asarray(success, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    if b is None:
        if a == -math.inf:
            return f"all {m.size} runs failed: m* above the largest m tried ({m.max():g})"
        if a == math.inf:
            return f"all {m.size} runs succeeded: m* below the smallest m tried ({m.min():g})"
        return f"runs at a single m ({m[0]:g}): slope undetermined"
    if b <= 0:
        return f"success does not increase with m (b = {b:.3g}): m* not located"
    fail_max, ok_min = m[success == 0].max(), m[success == 1].min()
    if fail_max < ok_min:
        return (f"complete separation: m50 lies between {fail_max:g} and {ok_min:g}; the slope "
                f"(hence m90) is set by the ridge")
    return None


# ----------------------------------------------------------------------------------------------
# 2. bootstrap over seeds


def default_stat(a, b):
    """(a [B], b [B]) -> {"m50": [B], "m90": [B]}; the statistics success_estimates reports."""
    return {"m50": m_at(0.5, a, b), "m90": m_at(0.9, a, b)}


def percentile_ci(samples, lo=2.5, hi=97.5):
    """Percentile interval of bootstrap samples [B] (may hold +-inf, not NaN) -> (lo, hi) floats.

    Uses order statistics (the inverted-CDF percentile, no interpolation), so the bound at q is
    inf exactly when more than (100 - q)% of the samples are +inf: e.g. the upper 97.5% bound is
    inf iff more than 2.5% of the resamples are inf."""
    v = np.sort(np.asarray(samples, dtype=np.float64).ravel())
    if v.size == 0 or np.isnan(v).any():
        raise ValueError(f"samples must be non-empty and NaN-free, got {v.size} values "
                         f"with {int(np.isnan(v).sum())} NaN")
    n = v.size
    k = [min(max(math.ceil(q * n / 100.0 - 1e-9) - 1, 0), n - 1) for q in (lo, hi)]
    return float(v[k[0]]), float(v[k[1]])


def _seed_counts(rng, n_seeds, n_boot):
    """[n_boot, n_seeds] multiplicity of each seed in each resample of n_seeds seeds."""
    idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    flat = (idx + n_seeds * np.arange(n_boot)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n_seeds).reshape(n_boot, n_seeds).astype(float)


def bootstrap_over_seeds(rows, stat=default_stat, n_boot=1000, rng=None):
    """Seed-level bootstrap of the success-curve fit, for rows of one T.

    Each resample draws n_seeds seeds with replacement; every run of a drawn seed enters (as many
    times as the seed was drawn), so the within-seed correlation is kept. All n_boot refits run
    at once: the runs are reduced to counts per distinct m, [n_boot, n_m], and fitted by the same
    penalised Newton as fit_success_curve (same centring), so the identity resample reproduces
    the point fit. Resamples whose runs all fail (all succeed) get a = -inf (+inf), b = 0.

    stat: (a [n_boot], b [n_boot]) -> {name: [n_boot] values}, must handle that encoding (m_at
    does). rng: a numpy Generator (default: np.random.default_rng(0)).
    Returns (ci, samples): ci {name: (lo, hi)} 95% percentile intervals (percentile_ci),
    samples {name: [n_boot] array}."""
    if not isinstance(n_boot, (int, np.integer)) or isinstance(n_boot, bool) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    d = _one_T(rows)
    S = len(d["seeds"])
    u, inv = np.unique(d["m"], return_inverse=True)
    runs = np.zeros((S, u.size))                # runs of seed s at m = u[j]
    wins = np.zeros((S, u.size))                # successes of seed s at m = u[j]
    np.add.at(runs, (d["seed"], inv), 1.0)
    np.add.at(wins, (d["seed"], inv), d["success"])
    C = _seed_counts(rng, S, n_boot)
    N, Y = C @ runs, C @ wins                   # [n_boot, n_m]
    c = np.log(d["m"]).mean()
    ac, b, _ = _fit_binomial(np.log(u) - c, N, Y)
    a = ac - b * c
    n, y = N.sum(1), Y.sum(1)
    none, every = y == 0, y == n
    a[none], a[every], b[none | every] = -np.inf, np.inf, 0.0
    samples = {k: np.asarray(v, dtype=np.float64) for k, v in stat(a, b).items()}
    return {k: percentile_ci(v) for k, v in samples.items()}, samples


def success_estimates(rows, n_boot=1000, seed=0):
    """m50 and m90 with 95% seed-bootstrap CIs for rows of one T.

    Returns a dict: m50, m50_lo, m50_hi, m90, m90_lo, m90_hi (floats; inf = above every m tried
    / never reached, 0.0 = below the smallest m tried), n_seeds, n_runs, a, b (b None when
    undetermined), T, flag (fit_flag's remark or None), m50_boot, m90_boot ([n_boot] replicates,
    for scaling_fits)."""
    rows = list(rows)
    d = _one_T(rows)
    a, b = fit_success_curve(d["m"], d["success"])
    ci, samples = bootstrap_over_seeds(rows, default_stat, n_boot, np.random.default_rng(seed))
    out = {"T": float(d["T"][0])}
    for name, p in (("m50", 0.5), ("m90", 0.9)):
        out[name] = m_at(p, a, b)
        out[name + "_lo"], out[name + "_hi"] = ci[name]
    out.update(n_seeds=len(d["seeds"]), n_runs=int(d["m"].size), a=a, b=b,
               flag=fit_flag(d["m"], d["success"], a, b),
               m50_boot=samples["m50"], m90_boot=samples["m90"])
    return out


# ----------------------------------------------------------------------------------------------
# 3. the paper-comparison statistic


def majority_mstar(rows, grid=None):
    """Smallest m in grid at which at least half of the runs there succeeded, for rows of one T.

    With one run per (seed, m), as in the sweep, this is "at least half of the seeds that ran at
    m succeeded". m values of the grid with no runs are skipped; grid None = every m in rows.
    Returns a float, inf if no m qualifies."""
    d = _one_T(rows)
    grid = np.unique(d["m"]) if grid is None else np.sort(np.asarray(grid, dtype=np.float64))
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"grid must be a non-empty 1-D list of m values, got shape {grid.shape}")
    for m in grid:
        at = d["m"] == m
        if at.any() and 2.0 * d["success"][at].sum() >= at.sum():
            return float(m)
    return math.inf


# ----------------------------------------------------------------------------------------------
# 4. scaling of m50 with T


def _three_fits(T, Y):
    """T [n], Y [n, B] > 0 (B curves at once) -> {"log", "lin", "pow": (slope, intercept, R^2),
    each [B]; "daic": AIC(log) - AIC(lin), [B]}: least squares per column, as fit_line."""
    n = T.size
    lT = np.log(T)
    out, rss = {}, {}
    for name, x, yy in (("log", lT, Y), ("lin", T, Y), ("pow", lT, np.log(Y))):
        s, c = np.polyfit(x, yy, 1)                   # one least-squares solve for all columns
        res = ((yy - (s * x[:, None] + c)) ** 2).sum(0)
        ss = ((yy - yy.mean(0)) ** 2).sum(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[name] = (s, c, np.where(ss > 0, 1.0 - res / ss, 1.0))
        rss[name] = np.maximum(res, np.finfo(float).tiny)
    # Gaussian AIC n ln(RSS/n) + 2p with p = 2 for both models (response m in both): the 2p cancel
    out["daic"] = n * np.log(rss["log"] / n) - n * np.log(rss["lin"] / n)
    return out


def scaling_fits(T, m50, m50_boot):
    """Fits of m50(T) across T with paired-bootstrap 95% CIs.

    T [n] distinct positive context lengths, n >= 3; m50 [n] point estimates (finite, > 0);
    m50_boot [n, B] bootstrap replicates of m50 at each T (e.g. success_estimates(...)["m50_boot"]
    for each T, same B). Replicates at different T are independent, so replicate i is paired
    across T; a replicate with any non-finite or non-positive value, or one so large that its fits
    overflow, is dropped (counted).
    Models (least squares, fit_line): log  m = a + b ln T;  lin  m = a + b T;
    pow  ln m = ln a + k ln T. daic = AIC(log) - AIC(lin) (Gaussian, n ln(RSS/n) + 2*2 each);
    negative favours the log model.
    Returns a dict: for name in (log_b, lin_b, pow_k, daic): name, name_lo, name_hi; log_a,
    lin_a, pow_a (point estimates; pow_a = a of a T^k), log_r2, lin_r2, pow_r2,
    p_log_better (fraction of kept replicates with daic < 0; None if none kept), n_T, n_boot,
    n_dropped. CIs are (-inf, inf) if every replicate was dropped."""
    T = np.asarray(T, dtype=np.float64)
    m50 = np.asarray(m50, dtype=np.float64)
    if T.ndim != 1 or T.shape != m50.shape:
        raise ValueError(f"T and m50 must be 1-D of the same length, got {T.shape}, {m50.shape}")
    if not (np.isfinite(T).all() and (T > 0).all()) or np.unique(T).size != T.size or T.size < 3:
        raise ValueError(f"T must hold >= 3 distinct positive finite values, got {T.tolist()}")
    bad = ~(np.isfinite(m50) & (m50 > 0))
    if bad.any():
        raise ValueError(f"m50 must be finite and > 0 at every T, got m50={m50[bad].tolist()} "
                         f"at T={T[bad].tolist()}")
    try:
        boot = np.asarray(m50_boot, dtype=np.float64)
    except ValueError:
        raise ValueError("m50_boot must be [n_T, B]: every T needs the same number B of "
                         "replicates") from None
    if boot.ndim != 2 or boot.shape[0] != T.size or boot.shape[1] < 1:
        raise ValueError(f"m50_boot must have shape [n_T={T.size}, B >= 1], got {boot.shape}")
    with np.errstate(invalid="ignore"):
        keep = (np.isfinite(boot) & (boot > 0)).all(0)
    point = {k: np.ravel(v) if k == "daic" else tuple(float(u[0]) for u in v)
             for k, v in _three_fits(T, m50[:, None]).items()}
    pick = {"log_b": lambda f: f["log"][0], "lin_b": lambda f: f["lin"][0],
            "pow_k": lambda f: f["pow"][0], "daic": lambda f: f["daic"]}
    with np.errstate(over="ignore", invalid="ignore"):   # a huge m50 (flat curve) overflows:
        reps = _three_fits(T, boot[:, keep] if keep.any() else np.ones((T.size, 1)))
        ok = np.logical_and.reduce([np.isfinite(get(reps)) for get in pick.values()]) & (
            keep.any())                                    # replicates whose fits fail: dropped
    out = {"n_T": int(T.size), "n_boot": int(boot.shape[1]),
           "n_dropped": int(boot.shape[1] - ok.sum())}
    for name, get in pick.items():
        out[name] = float(np.ravel(get(point))[0])
        out[name + "_lo"], out[name + "_hi"] = (percentile_ci(get(reps)[ok]) if ok.any()
                                                else (-math.inf, math.inf))
    out.update(log_a=point["log"][1], lin_a=point["lin"][1], pow_a=math.exp(point["pow"][1]),
               log_r2=point["log"][2], lin_r2=point["lin"][2], pow_r2=point["pow"][2],
               p_log_better=float(np.mean(reps["daic"][ok] < 0)) if ok.any() else None)
    return out


ROW_TYPES = dict(T=int, m=int, seed=int, s=int, steps=int, test_acc=float, train_acc=float,
                 attn_on_S=float, seconds=float)


def read_rows(paths):
    """The finished runs in CSV files; a torn last line (a run killed mid-write) is skipped.
    A row that is complete but wrong inside (a missing column, a number that is not one, a model
    or success flag we never write) is a ValueError naming the file and line: a damaged results
    file must not turn into a quietly different table."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        if not complete:                      # empty, or a header torn mid-write: no runs yet
            continue
        reader = csv.DictReader(complete.splitlines())
        missing = [k for k in ROW_FIELDS
                   if k not in OPTIONAL_FIELDS and k not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a sweep CSV (no column {', '.join(missing)})")
        for line, r in enumerate(reader, start=2):
            if None in r:                                  # more fields than the header
                raise ValueError(f"{path} line {line}: {len(r[None])} more fields than the "
                                 f"header has columns (rows appended under another header?)")
            if None in r.values() or "" in (r.get("seconds"), r.get("success")):
                continue                                   # a torn row
            try:
                for k, kind in ROW_TYPES.items():
                    kind(r[k])
                if r["model"] not in ("transformer", "mlp") or r["success"] not in ("0", "1"):
                    raise ValueError
                if int(r["T"]) < 1 or int(r["m"]) < 1 or int(r["seed"]) < 0:
                    raise ValueError
            except (ValueError, TypeError):
                bad = {k: r[k] for k in ("model", "T", "m", "seed", "test_acc", "success")}
                raise ValueError(f"{path} line {line}: not a valid run row {bad}") from None
            r["success"] = r["success"] == "1"
            r.setdefault("sweep_id", "")
            r.setdefault("best_step", r["steps"])
            r.setdefault("pos_overlap", "nan")
            rows.append(r)
    return rows


def sweep_fingerprint(meta):
    """12 hex digits naming a sweep's options, success bar and search: rows of one experiment
    share it, whatever shard or machine wrote them."""
    options = {k: v for k, v in meta["options"].items() if v != train.DEFAULTS.get(k, object())}
    key = json.dumps(dict(options=options, bar=meta["bar"], search=meta["search"]),
                     sort_keys=True)             # an option added later, at its default, keeps
    return hashlib.sha1(key.encode()).hexdigest()[:12]   # the fingerprint of older rows


def check_one_sweep(rows, sweep_ids, out):
    """ValueError unless every row with a fingerprint carries one of `sweep_ids` (this sweep's,
    and the one the folder's sweep.json recorded for the same options); rows written before
    fingerprints existed carry none and are trusted to the folder's sweep.json."""
    ids = {}
    for r in rows:
        if r["sweep_id"]:
            ids[r["sweep_id"]] = ids.get(r["sweep_id"], 0) + 1
    other = {k: n for k, n in ids.items() if k not in sweep_ids}
    if other:
        found = ", ".join(f"{n} rows of sweep {k}" for k, n in other.items())
        raise ValueError(f"{out} holds runs of another sweep ({found}; these options make sweep "
                         f"{min(sweep_ids)}): a shard run with other --steps/--bar/--protocol "
                         f"options? Keep one sweep per folder")


def missing_searches(rows, models, Ts, n_seeds, grids, search):
    """The (model, T, seed) searches asked for that are not finished in `rows`: absent (a
    missing shard) or stopped half way (an interrupted run)."""
    have = {}
    for r in rows:
        have.setdefault((r["model"], int(r["T"]), int(r["seed"])), {})[int(r["m"])] = r["success"]
    return [(model, T, seed) for model in models for T in Ts for seed in range(n_seeds)
            if seed_outcome(grids[model], search, have.get((model, T, seed), {}))[0] != "done"]


def csv_header(path):
    """The column names of a CSV's first complete line, or None when it has none yet."""
    with open(path, newline="") as f:
        first = f.readline()
    return next(csv.reader([first])) if first.endswith("\n") else None


def open_csv(path):
    """(file, writer, fresh): `path` opened for appending rows, a header written first when the
    file is missing or has no complete header line yet."""
    fresh = not os.path.exists(path) or csv_header(path) is None
    fh = open(path, "w" if fresh else "a", newline="")
    writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS)
    if fresh:
        writer.writeheader()
        fh.flush()
    return fh, writer, fresh


def drop_torn_tail(path):
    """Cut a CSV back to its last complete line, so appending cannot glue onto a torn row."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        text = f.read()
        if text and not text.endswith(b"\n"):
            f.truncate(text.rfind(b"\n") + 1)


def success_table(rows, models):
    """Per (model, T): success_estimates over all runs (m50, m90 and their 95% CIs from a
    bootstrap over seeds); and per model, scaling_fits of m50 against T (None under 3 T)."""
    est, fits = {}, {}
    for model in models:
        by_T = split_by_T([r for r in rows if r["model"] == model])
        for T, runs in by_T.items():
            est[(model, int(T))] = success_estimates(runs, n_boot=N_BOOT, seed=0)
        Ts = [int(T) for T in by_T if np.isfinite(est[(model, int(T))]["m50"])
              and est[(model, int(T))]["m50"] > 0]
        if len(Ts) >= 3:
            fits[model] = scaling_fits(np.array(Ts), np.array([est[(model, T)]["m50"] for T in Ts]),
                                       np.array([est[(model, T)]["m50_boot"] for T in Ts]))
    return est, fits


LIMIT_SEEDS = 200     # streams per T for the statistical limit (about 1 s at T = 10^4)
_LIMITS = {}          # "task|s|T|n_seeds" -> the limit's dict, for the life of the process


def statistical_limits(task, s, Ts, n_seeds=LIMIT_SEEDS, cache=None):
    """Per T, the statistical limit of the task (no training): over seeds 0..n_seeds-1, the
    smallest m at which seed's own training stream (the rows an iid run of that seed trains on)
    leaves exactly one compatible s-sparse hypothesis (data.first_identifying_m). -> {T: dict(
    median, q05, q95)}, or {} for a task whose count is not affordable at these T. No learner of
    the class can do better than this on that stream; it is the floor beside m*. cache: a JSON
    file of earlier answers (they depend on nothing else), so a report does not redo them; this
    process also keeps every answer it has computed or read (_LIMITS)."""
    out, known = {}, {}
    if cache and os.path.exists(cache):
        try:
            with open(cache) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = {}
    for T in Ts:
        key = f"{task}|{s}|{T}|{n_seeds}"
        hit = _LIMITS.get(key) or (known[key] if isinstance(known.get(key), dict) else None)
        if hit:
            out[T] = known[key] = _LIMITS[key] = hit
            continue
        firsts = []
        try:
            for seed in range(n_seeds):
                r_task, r_train = train.seeds_for(seed)[:2]
                t = data.make_task(task, T, s, r_task)
                firsts.append(data.first_identifying_m(t, r_train, 100000))
        except ValueError:
            continue                                  # not affordable at this T: left out
        v = np.array([np.inf if f is None else f for f in firsts], float)
        q = lambda p: float(np.percentile(v, p, method="nearest"))   # inf-safe: no interpolation
        out[T] = known[key] = _LIMITS[key] = dict(median=q(50), q05=q(5), q95=q(95),
                                                  n_seeds=n_seeds)
    if cache and len(known) > 0:
        write_json(cache, known)
    return out


def _ci(e, key):
    show = lambda v: "inf" if not np.isfinite(v) else f"{v:.0f}"
    return f"{show(e[key])} [{show(e[key + '_lo'])}, {show(e[key + '_hi'])}]"


def _fits_line(head, what, f):
    """One line of scaling_fits' results for `what` (m50 or m*), with their 95% CIs."""
    return (f"{head}{what} ~ a + b ln T, b = {f['log_b']:.1f} [{f['log_b_lo']:.1f}, "
            f"{f['log_b_hi']:.1f}];  {what} ~ a + b T, b = {f['lin_b']:.4f} "
            f"[{f['lin_b_lo']:.4f}, {f['lin_b_hi']:.4f}];  {what} ~ a T^k, k = "
            f"{f['pow_k']:.2f} [{f['pow_k_lo']:.2f}, {f['pow_k_hi']:.2f}];  AIC(log) - "
            f"AIC(line) = {f['daic']:.1f} [{f['daic_lo']:.1f}, {f['daic_hi']:.1f}], the "
            f"log fits better in {100 * f['p_log_better']:.0f}% of bootstrap resamples "
            f"(95% CIs, bootstrap over seeds)")


def sweep_table(stats, paper_comparable, est, scaling, log=print, limits=None):
    """The printed table, ours beside the paper's at the shared T (only when our protocol asks
    the paper's question: 3-sparse AND, bar 0.99): the success-curve m50 and m90 and the
    majority-rule m*, each with its 95% CI, the per-seed spread, the statistical limit (median
    [5%, 95%] over streams); then the scaling fits of m50 and of m* with their CIs."""
    limits = limits or {}
    lines = ["| model | T | m50 [95% CI] | m90 [95% CI] | m* (majority) [95% CI] | per-seed "
             "critical m: mean +- std [min, max] | seeds | m* (paper) | paper's bar | statistical "
             "limit [5%, 95%] |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (model, T), st in stats.items():
        e = est[(model, T)]
        ms = _ci({"m": st["m_star"], "m_lo": st["m_star_lo"], "m_hi": st["m_star_hi"]}, "m")
        notes = ([f"{st['censored']} above grid"] if st["censored"] else []) + \
                ([f"{st['unfinished']} unfinished"] if st["unfinished"] else [])
        show = paper_comparable and model == "transformer"
        lines.append(f"| {model} | {T} | {_ci(e, 'm50')} | {_ci(e, 'm90')} | {ms} | "
                     f"{st['mean']:.1f} +- {st['std']:.1f} "
                     f"[{st['lo']:.0f}, {st['hi']:.0f}]"
                     f"{' (' + ', '.join(notes) + ')' if notes else ''} | {st['n_seeds']} | "
                     f"{PAPER_MSTAR.get(T, '') if show else ''} | "
                     f"{PAPER_BAR.get(T, '') if show else ''} | {_limit(limits.get(T))} |")
    fits = []                       # m50 with bootstrap CIs first, then the majority-rule m*
    for model, f in scaling.items():
        fits.append(_fits_line(f"{model}: ", "m50", f))
    for model in sorted({k[0] for k in stats}):
        pts = sorted((T, st) for (mo, T), st in stats.items()
                     if mo == model and 0 < st["m_star"] < np.inf)
        if len(pts) >= 3:
            T_ = [T for T, _ in pts]
            f = scaling_fits(np.array(T_), np.array([st["m_star"] for _, st in pts]),
                             np.array([st["m_star_boot"] for _, st in pts]))
            fits.append(_fits_line(f"{model}: ", "m*", f) + f" over T in {min(T_)}..{max(T_)}")
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        b, a, r2 = fit_line(np.log(Tp), [PAPER_MSTAR[t] for t in Tp])
        e, c, q2 = fit_line(Tp, [PAPER_MSTAR[t] for t in Tp])
        fits.append(f"paper: m* ~ {a:.1f} + {b:.1f} ln T (R^2 {r2:.3f});  m* ~ {c:.1f} + "
                    f"{e:.4f} T (R^2 {q2:.3f})  over T in 100..1100")
    for line in lines + [""] + fits:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits]) + "\n"


def _limit(lim):
    if not lim:
        return ""
    show = lambda v: f"{v:.0f}" if np.isfinite(v) else "inf"
    return f"{show(lim['median'])} [{show(lim['q05'])}, {show(lim['q95'])}]"


def _pyplot(then):
    """matplotlib.pyplot on the file-only Agg backend; None, with a one-line hint ending in
    `then`, when matplotlib is not installed (plots are optional)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no plot: matplotlib is not installed (pip install matplotlib, then {then})")
        return None
    return plt


def _save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def sweep_plot(stats, path, title, paper_comparable, est=None, limits=None):
    """m50 with its 95% CI per model against T (log scale), the majority-rule m*, the paper's
    points with their bars, and the statistical limit; None when matplotlib is missing."""
    plt = _pyplot("rerun with --report to draw it from the saved runs")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for model, mark in (("transformer", "o-"), ("mlp", "s--")):
        pts = sorted((T, st) for (mo, T), st in stats.items() if mo == model)
        if not pts:
            continue
        T_ = [T for T, _ in pts]
        if est:
            e = [est[(model, T)] for T in T_]
            mid = np.array([x["m50"] for x in e])
            err = np.abs(np.array([[x["m50_lo"] for x in e], [x["m50_hi"] for x in e]]) - mid)
            ax.errorbar(T_, mid, yerr=np.where(np.isfinite(err), err, 0), fmt=mark, capsize=3,
                        label=f"{model} (ours): m50, 95% CI (bootstrap over seeds)")
        else:
            ax.errorbar(T_, [st["mean"] for _, st in pts], yerr=[st["std"] for _, st in pts],
                        fmt=mark, capsize=3, label=f"{model} (ours): per-seed mean +- std")
        ms = np.array([st["m_star"] for _, st in pts])
        err = np.abs(np.array([[st["m_star_lo"] for _, st in pts],
                               [st["m_star_hi"] for _, st in pts]]) - ms)
        ax.errorbar(T_, ms, yerr=np.where(np.isfinite(err), err, 0), fmt="x", color="k", ms=7,
                    capsize=2, elinewidth=0.8,
                    label="m* (ours): half of the seeds succeed, 95% CI"
                    if model == "transformer" else None)
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        ax.errorbar(Tp, [PAPER_MSTAR[t] for t in Tp],
                    yerr=np.abs(np.array([[float(v) for v in PAPER_BAR[t].split("-")]
                                          for t in Tp]).T - [PAPER_MSTAR[t] for t in Tp]),
                    fmt="^:", color="tab:red", capsize=2, label="Transformer, the paper's figure")
    if limits:
        Tl = sorted(limits)
        ax.plot(Tl, [limits[t]["median"] for t in Tl], ":", color="gray",
                label="statistical limit (median over streams)")
    ax.set_xscale("log")
    ax.set_xlabel("T (context length, log scale)")
    ax.set_ylabel("critical sample size m")
    finite = [st["m_star"] for st in stats.values() if np.isfinite(st["m_star"])]
    if finite and max(finite) > 20 * min(finite):       # the MLP beside the Transformer
        ax.set_yscale("log")
        ax.set_ylabel("critical sample size m (log scale)")
    elif est:            # a poorly determined m50 (a plateau) must not flatten every other point
        top = 1.5 * max([v for e in est.values() for v in (e["m50"], e["m50_lo"])
                         if np.isfinite(v)] + [st["m_star_hi"] for st in stats.values()
                                                if np.isfinite(st["m_star_hi"])] + [1.0])
        ax.set_ylim(0, top)
        for (model, T), e in est.items():
            if e["m50_hi"] > top:
                ax.annotate(f"CI to {e['m50_hi']:.0f}" if np.isfinite(e["m50_hi"]) else "CI to inf",
                            (T, top), xytext=(0, -12), textcoords="offset points", ha="center",
                            fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


class RunFailed(Exception):
    pass


def _sweep_worker(runs):
    """A stack of training runs of the sweep, in a worker process: the CSV rows they produce.
    Transformer runs train as one stack (train.train_stack; the sweep stacks only runs with the
    same T and m, whose results are bit for bit those of the runs alone); MLP runs one by one. A
    diverged run is a failed run (test_acc nan), not the end of the sweep; so is a run of the
    paper's data protocol whose m is too small to draw a training set that identifies S."""
    train.keep_freed_memory()
    runs = [dict(o, log_every=0, batch=0 if o.get("batch", 0) >= o["m"] else o["batch"])
            for o in runs]                      # a minibatch as large as the set: full batch
    failed = {}
    for i, o in enumerate(runs):
        if o.get("data") == "unambiguous":
            try:
                train.draw_run(train.validate_options(o))
            except ValueError:
                failed[i] = train.diverged_result(train.validate_options(o))
    trainable = [o for i, o in enumerate(runs) if i not in failed]
    if not trainable:
        results = []
    elif runs[0]["model"] == "transformer" and not runs[0].get("dropout"):
        results = train.train_stack(trainable)
    else:
        results = []
        for o in trainable:
            try:
                results.append(train.train_run(o, log=None))
            except train.Diverged:
                results.append(train.diverged_result(train.validate_options(o)))
    results = iter(results)
    results = [failed[i] if i in failed else next(results) for i in range(len(runs))]
    return [{k: r[k] for k in ROW_FIELDS if k not in ("success", "sweep_id")} for r in results]


STACK_BYTES = 3 << 20   # a stack's largest array, [R, 2T+1, d + heads], kept about cache-sized


def stack_size(T, most, d=64, heads=16, itemsize=4):
    """Runs per stack at context length T: stacking pays the per-call overhead once for R runs,
    but past a few MiB per array the passes over memory slow every run down (measured on a 2-core
    machine, ms per run-step: T = 100 at R = 1, 4, 16: 1.5, 1.0, 0.84; T = 1000 at R = 1, 2, 4,
    8, 16: 5.1, 4.7, 4.3, 5.4, 4.8). At least 1, at most `most`."""
    per_run = (2 * T + 1) * (d + heads) * itemsize
    return max(1, min(most, STACK_BYTES // per_run))


def take_stack(queue, most, dropout=False):
    """Pop from the queue of (job, m) probes the largest group that shares (model, T, m), at most
    most(T) probes (one for the MLP): the runs one worker trains as one stack."""
    groups = {}
    for i, ((model, T, _), m) in enumerate(queue):
        groups.setdefault((model, T, m), []).append(i)
    key = max(groups, key=lambda k: len(groups[k]))
    take = groups[key][:most(key[1]) if key[0] == "transformer" and not dropout else 1]
    probes = [queue[i] for i in take]
    for i in reversed(take):
        queue.pop(i)
    return probes


# train.py's options a sweep shares with every run. Not --model: a sweep takes --models (a list),
# and with abbreviations off, --model is an error rather than a silent prefix of --models.
MODEL_OPTIONS = ("task", "s", "data", "steps", "lr", "wd", "n_test", "d", "heads", "mlp", "dtype",
                 "batch", "optimizer", "beta2", "decay", "clip", "dropout", "val", "val_every",
                 "pos_init")


def full_options(options):
    """A sweep.json's options with train.py's default for every model option it does not name
    (folders written before an option existed ran at its default)."""
    return dict({k: train.DEFAULTS[k] for k in MODEL_OPTIONS}, **options)

# Named protocols: each a small set of option values, recorded in sweep.json, so that one variant
# of the experiment is one command (--protocol NAME). Options given on the command line win.
MINGPT = dict(optimizer="adamw", lr=3e-4, beta2=0.95, wd=0.1, decay="matrices", clip=1.0,
              batch=64)              # minGPT's training defaults of 2020-22, without dropout
PROTOCOLS = {
    "ours": {},                                      # train.py's defaults: iid data, 2000 test
    "paper-data": dict(data="unambiguous", n_test=10000),   # Section 5's data protocol
    # one choice changed at a time (training-protocol study)
    "steps-250": dict(steps=250), "steps-500": dict(steps=500), "steps-2000": dict(steps=2000),
    "early-stop": dict(val=1000, val_every=25),      # best of 1000 steps on 1000 validation
    "adamw": dict(optimizer="adamw", wd=0.01),       # torch's AdamW default decay, same lr
    "mingpt": MINGPT, "mingpt-dropout": dict(MINGPT, dropout=0.1),
    "lr-3e-4": dict(lr=3e-4), "lr-3e-3": dict(lr=3e-3),
    "heads-1": dict(heads=1), "heads-4": dict(heads=4),
    "d-32": dict(d=32), "d-128": dict(d=128), "d-256": dict(d=256),
    "float64": dict(dtype="float64"),
    # the paper's data protocol with the width that came closest to the paper's figure
    "paper-data-d-128": dict(data="unambiguous", n_test=10000, d=128),
    # minGPT's block, one architectural detail at a time: MLP width 4d, positions starting at 0
    "mlp-4d": dict(mlp=256), "pos-zero": dict(pos_init="zero"),
    "mlp-4d-pos-zero": dict(mlp=256, pos_init="zero"),
    "d-128-mlp-4d": dict(d=128, mlp=512), "d-128-pos-zero": dict(d=128, pos_init="zero"),
    "d-128-mlp-4d-pos-zero": dict(d=128, mlp=512, pos_init="zero"),
}


def sweep_parser():
    ap = OneLineParser(prog="sweep.py", description=(
        "Critical sample size m*(T) of a sparse task (the paper's Section 5 figure). Runs are "
        "saved as they finish, one CSV row each, in OUT/runs*.csv; rerunning the same command "
        "resumes. Shards (--shard i/n) split the (model, T, seed) searches across machines; copy "
        "their CSVs into one OUT and run with --report to merge."))
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper",
                    help="paper: T=100..1100, 10 seeds; extended: T=10..10^4, 30 seeds "
                         "(default %(default)s)")
    ap.add_argument("--Ts", type=int_list, help="comma-separated T values (overrides preset)")
    ap.add_argument("--seeds", type=integer(1), help="seeds per T (preset paper: 10, extended: 30)")
    ap.add_argument("--models", type=model_list, default=None,
                    help="comma-separated: transformer,mlp (default transformer; with --report, "
                         "every model in the folder)")
    ap.add_argument("--search", choices=("bisect", "grid"), default="bisect",
                    help="bisect each seed's critical m on the grid (assumes success is monotone "
                         "in m), or run every grid m (default %(default)s)")
    ap.add_argument("--grid-min", dest="grid_min", type=integer(1), default=8,
                    help="smallest m (default %(default)s)")
    ap.add_argument("--grid-max", dest="grid_max", type=integer(1),
                    help="m at most this (default: transformer 600; "
                         "mlp 30*max(T) capped at 20000)")
    ap.add_argument("--grid-ratio", dest="grid_ratio", type=number(0, strict=True), default=1.05,
                    help="ratio of consecutive grid sizes, in (1, 10] (default %(default)s)")
    ap.add_argument("--bar", type=number(0, strict=True), default=0.99,
                    help="success: test accuracy >= bar, in (0, 1] (default %(default)s)")
    ap.add_argument("--out", default=None, help="results folder (default runs/PRESET)")
    ap.add_argument("--shard", type=shard_spec, default=(0, 1), help="i/n: run share i of n")
    ap.add_argument("--workers", type=integer(1), default=os.cpu_count() or 1,
                    help="processes (default: the number of cores, %(default)s)")
    ap.add_argument("--report", action="store_true",
                    help="only merge OUT/runs*.csv and report (by default every model, T and "
                         "seed in the folder; sweep.json is left as it is)")
    ap.add_argument("--stack", type=integer(1), default=16,
                    help="at most this many Transformer runs with the same T and m trained as one "
                         "stack by one worker; fewer at large T, where big stacks run slower "
                         "(default %(default)s; 1 = one run at a time)")
    ap.add_argument("--protocol", choices=sorted(PROTOCOLS), default="ours",
                    help="named option set (PROTOCOLS in sweep.py): ours = train.py's defaults; "
                         "paper-data = training sets redrawn until one hypothesis fits, 10^4 test "
                         "samples; the others change one training choice (default %(default)s)")
    train.add_options(ap, MODEL_OPTIONS, defaults={k: None for k in MODEL_OPTIONS})
    return ap


def main_sweep(argv):
    ap = sweep_parser()
    a = ap.parse_args(argv)
    preset = PRESETS[a.preset]
    out = a.out or os.path.join("runs", a.preset)     # never the committed results/
    grids_of_folder = None
    if a.report:
        if not os.path.isdir(out):
            ap.error(f"--report: no folder {out}")
        try:
            found = read_rows(sorted(glob.glob(os.path.join(out, "runs*.csv"))))
        except ValueError as e:
            ap.error(str(e))
        # the folder decides what is reported unless told otherwise: a report never drops rows
        plan = {}                     # what the folder's sweeps were asked to run, if known
        try:
            with open(os.path.join(out, "sweep.json")) as f:
                plan = json.load(f).get("plan", {})
        except (OSError, ValueError, AttributeError):
            pass
        folder_meta = {}
        try:
            with open(os.path.join(out, "sweep.json")) as f:
                folder_meta = json.load(f)
        except (OSError, ValueError):
            pass
        if isinstance(folder_meta, dict) and isinstance(folder_meta.get("options"), dict):
            # the folder's own protocol, unless the command line says otherwise (then checked)
            typed = train.explicit_options(ap, argv)
            for k, v in folder_meta["options"].items():
                if k in MODEL_OPTIONS and k not in typed:
                    setattr(a, k, v)
            for k in ("bar", "search", "protocol"):
                if k in folder_meta and k not in typed:
                    setattr(a, k, folder_meta[k])
            grids_of_folder = folder_meta.get("grids")
        a.models = a.models or sorted({r["model"] for r in found} | set(plan.get("models", [])))
        a.Ts = a.Ts or sorted({int(r["T"]) for r in found} | set(plan.get("Ts", [])))
        a.seeds = a.seeds or max([1 + int(r["seed"]) for r in found] + [plan.get("seeds", 1)])
    a.models = a.models or ["transformer"]
    Ts = a.Ts or preset["T"]
    n_seeds = a.seeds or preset["seeds"]
    for key in MODEL_OPTIONS:      # the command line, else the protocol, preset, train.py
        if getattr(a, key) is None:
            setattr(a, key, PROTOCOLS[a.protocol].get(key, preset.get(key, train.DEFAULTS[key])))
    if not (0 < a.bar <= 1):
        ap.error(f"--bar must be in (0, 1], got {a.bar}")
    if not 1 < a.grid_ratio <= 10:
        ap.error(f"--grid-ratio must be in (1, 10], got {a.grid_ratio}")
    problem = train.check_options(dict(vars(a), T=min(Ts)), flag=train.cli_flag)
    if problem:
        ap.error(problem.replace("--T", "the smallest T"))
    grids = {}
    for model in a.models:
        if grids_of_folder and model in grids_of_folder and not (
                {"grid_min", "grid_max", "grid_ratio"} & train.explicit_options(ap, argv)):
            grids[model] = list(grids_of_folder[model])         # a report: the folder's grid
            continue
        hi = a.grid_max or preset.get("grid_max", {}).get(model) or (
            600 if model == "transformer" else min(20000, 30 * max(Ts)))
        if hi < a.grid_min:
            ap.error(f"--grid-max {hi} is below --grid-min {a.grid_min}")
        grids[model] = m_grid(a.grid_min, hi, a.grid_ratio)
        try:
            train.check_run_memory(dict(train.DEFAULTS, model=model, T=max(Ts),
                                        m=grids[model][-1], n_test=a.n_test, dtype=a.dtype, d=a.d,
                                        heads=a.heads, mlp=a.mlp), flag=train.cli_flag)
        except ValueError as e:
            ap.error(str(e))
    base = {k: getattr(a, k) for k in MODEL_OPTIONS}
    if os.path.exists(out) and not os.path.isdir(out):
        ap.error(f"--out {out} is a file; give a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        ap.error(f"--out {out}: cannot create the folder ({e.strerror})")
    lock = None if a.report else lock_folder(out, ap, a.shard)
    try:
        meta_path = os.path.join(out, "sweep.json")
        meta = dict(options=base, bar=a.bar, search=a.search, grids=grids, protocol=a.protocol,
                    machines=[machine()])
        meta["sweep_id"] = sweep_fingerprint(meta)
        meta["plan"] = dict(models=a.models, Ts=Ts, seeds=n_seeds)
        accepted_ids = {meta["sweep_id"]}
        if os.path.exists(meta_path):                      # the folder's sweep must be this one
            try:
                with open(meta_path) as f:
                    old = json.load(f)
                old_grids = dict(old["grids"])
                old["options"] = full_options(old["options"])
            except (ValueError, KeyError, TypeError, AttributeError):
                ap.error(f"{meta_path} is not a sweep description (damaged?); use another --out")
            for key in ("options", "bar", "search"):
                if old.get(key) != meta[key]:
                    ap.error(f"{out} holds a sweep with other {key} ({old.get(key)}); "
                             f"use another --out or the same options")
            for model, grid in grids.items():
                if model in old_grids and old_grids[model] != grid:
                    ap.error(f"{out} holds a {model} sweep on another m grid; use another --out or "
                             f"the same --grid-min/--grid-max/--grid-ratio")
            meta["grids"] = dict(old_grids, **grids)
            if old.get("sweep_id"):            # same options (checked above), older fingerprint
                accepted_ids.add(old["sweep_id"])
            was = old.get("plan", {})
            meta["plan"] = dict(models=sorted(set(a.models) | set(was.get("models", []))),
                                Ts=sorted(set(Ts) | set(was.get("Ts", []))),
                                seeds=max(n_seeds, was.get("seeds", 0)))
            meta["machines"] = old.get("machines", []) + [m for m in meta["machines"]
                                                          if m not in old.get("machines", [])]
            if "protocol" in old and old["protocol"] != a.protocol and a.report:
                meta["protocol"] = old["protocol"]      # same options, the name it was run under
        if not (a.report and os.path.exists(meta_path)):
            write_json(meta_path, meta)
        i, n = a.shard
        csv_path = os.path.join(out, "runs.csv" if n == 1 else f"runs-shard-{i}-of-{n}.csv")

        def load_done():
            rows = read_rows(sorted(glob.glob(os.path.join(out, "runs*.csv"))))
            check_one_sweep(rows, accepted_ids, out)
            return {(r["model"], int(r["T"]), int(r["seed"]), int(r["m"])): r for r in rows}
        try:
            done = load_done()
        except ValueError as e:
            ap.error(str(e))
        if not a.report:
            code = run_searches(a, Ts, n_seeds, grids, base, csv_path, done, (i, n), meta["sweep_id"])
            if code:
                return code
            done = load_done()
        rows = [r for (model, T, seed, m), r in done.items()
                if model in a.models and T in Ts and seed < n_seeds]
        if not rows:
            print(f"no finished runs in {out} for models {a.models}, T in {Ts}, seeds < {n_seeds}")
            return 0
        missing = missing_searches(rows, a.models, Ts, n_seeds, meta["grids"], a.search)
        if missing:
            shown = ", ".join(f"{mo} T={T} seed {sd}" for mo, T, sd in missing[:6])
            print(f"warning: {len(missing)} of {len(a.models) * len(Ts) * n_seeds} searches are "
                  f"missing or unfinished in {out} ({shown}{', ...' if len(missing) > 6 else ''}): "
                  f"a missing shard or an interrupted run; the table below uses what is there")
        stats = critical_sizes(rows, meta["grids"], a.search)
        comparable = a.task == "and" and a.s == 3 and a.bar == 0.99
        what = f"{a.s}-sparse {a.task.upper() if a.task in ('and', 'or') else a.task}"
        print(f"\ncritical sample size of {what}, success = test accuracy >= {a.bar} on {a.n_test} "
              f"fresh samples after {a.steps} steps, {a.search} search on a grid of ratio "
              f"{a.grid_ratio}, protocol {meta['protocol']}:")
        est, scaling = success_table(rows, sorted({k[0] for k in stats}))
        limits = statistical_limits(a.task, a.s, sorted({k[1] for k in stats}),
                                    cache=os.path.join(out, "limits.json"))
        table = sweep_table(stats, comparable, est, scaling, limits=limits)
        if missing:
            table = (f"INCOMPLETE: {len(missing)} searches missing or unfinished "
                     f"({shown}{', ...' if len(missing) > 6 else ''})\n\n" + table)
        with open(os.path.join(out, "table.md"), "w") as f:
            f.write(table)
        write_json(os.path.join(out, "critical.json"),
                   [{k: v for k, v in dict(st, **est[key], limit=limits.get(key[1])).items()
                     if not k.endswith("_boot")} for key, st in stats.items()])
        png = sweep_plot(stats, os.path.join(out, "mstar.png"),
                         f"{what}: samples to reach test accuracy >= {a.bar}", comparable, est=est,
                         limits=limits)
        print(f"saved {out}/table.md, {out}/critical.json" + (f", {png}" if png else ""))
        return 0
    finally:
        if lock:
            lock.close()


def write_json(path, obj):
    """Strict JSON (NaN and inf become null, never the non-JSON NaN), written atomically."""
    tmp = f"{path}.{os.getpid()}.tmp"                 # shards may write at the same time
    with open(tmp, "w") as f:
        json.dump(train.json_safe(obj), f, indent=1, allow_nan=False)
    os.replace(tmp, path)


def lock_folder(out, ap, shard=(0, 1)):
    """Hold an exclusive lock on OUT/.lock (OUT/.lock-shard-i-of-n for a shard) for this
    process's life: a second sweep of the same folder and shard stops at once with one line
    instead of running every search twice and interleaving rows; other shards, which write CSVs
    of their own, may run beside it. The lock is the kernel's (flock), so a killed sweep never
    leaves a stale one. Where fcntl does not exist (Windows) there is no lock; None is returned."""
    try:
        import fcntl
    except ImportError:
        return None
    name = ".lock" if shard[1] == 1 else f".lock-shard-{shard[0]}-of-{shard[1]}"
    fh = open(os.path.join(out, name), "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        ap.error(f"{out} is in use by another sweep ({holder}); wait for it, or use another --out")
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}")
    fh.flush()
    return fh


def machine():
    """Where a sweep ran: CPU, BLAS library and threads, numpy. Borderline runs can flip between
    machines (float rounding differs with the BLAS kernels), so sweep.json keeps every machine
    that added runs to a folder."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas.get('name')} {blas.get('version')}"
    except Exception:                 # older numpy: no dict form; the version is still recorded
        blas = "unknown"
    return dict(cpu=cpu, cores=os.cpu_count(), blas=blas,
                blas_threads=os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                numpy=np.__version__, python=platform.python_version())


def int_list(text):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1, got {text!r}")
    return sorted(set(vals))


def model_list(text):
    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in ("transformer", "mlp")]
    if bad or not vals:
        raise argparse.ArgumentTypeError(f"allowed: transformer, mlp; got {text!r}")
    return sorted(set(vals))                 # one order everywhere: shards split the same list


def shard_spec(text):
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must look like i/n (e.g. 0/4), got {text!r}")
    if n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"needs 0 <= i < n, got {text!r}")
    return i, n


def _watch_parent(parent):
    """Worker start-up: exit when the sweep that started this worker is gone (killed, even by
    SIGKILL, which no handler sees), instead of training on for nobody."""
    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


class Terminated(Exception):
    """SIGTERM (what `timeout`, `kill` and job schedulers send) arrived: stop like Ctrl-C."""


def _raise_terminated(signum, frame):
    raise Terminated()


def run_searches(a, Ts, n_seeds, grids, base, csv_path, done, shard, sweep_id=""):
    """Drive every (model, T, seed) search of this shard; run probes on a process pool, write
    each finished run as a CSV row at once (so an interrupted sweep loses nothing finished)."""
    jobs = [(model, T, seed) for model in a.models for T in Ts for seed in range(n_seeds)]
    jobs = [j for k, j in enumerate(jobs) if k % shard[1] == shard[0]]
    search = SEARCHES[a.search]
    saved = {job: {} for job in jobs}             # job -> {m: success}, the runs on disk
    for (model, T, seed, m), r in done.items():
        if (model, T, seed) in saved:
            saved[(model, T, seed)][m] = bool(r["success"])
    gens, pending, t0, n_run = {}, {}, time.perf_counter(), 0
    drop_torn_tail(csv_path)
    k = 1
    while os.path.exists(csv_path) and csv_header(csv_path) not in (None, list(ROW_FIELDS)):
        k += 1                     # written by an older version: never touched, continued aside
        csv_path = re.sub(r"(-part\d+)?\.csv$", f"-part{k}.csv", csv_path)
        drop_torn_tail(csv_path)
    fh, writer, _ = open_csv(csv_path)
    per_search = (len(next(iter(grids.values()))) if a.search == "grid"
                  else int(np.ceil(np.log2(max(len(g) for g in grids.values()) + 1))))
    finished_jobs = set()
    expected = max(1, len(jobs) * per_search - sum(len(v) for v in saved.values()))
    print(f"sweep: {len(jobs)} searches (model, T, seed) in this shard, about {per_search} runs "
          f"each; {len(done)} runs already saved; about {expected} to run; writing {csv_path}",
          flush=True)
    if a.workers > 1:                       # one BLAS thread per process: the pool is the parallelism
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        pool = ProcessPoolExecutor(a.workers, mp_context=mp.get_context("spawn"),
                                   initializer=_watch_parent, initargs=(os.getpid(),))
    else:
        pool = None

    def advance(job, answer):
        """Feed the search its last answer; return the next m to probe, or None when done."""
        state, m = replay(gens[job], saved[job], answer)
        return m if state == "run" else None

    session_rows = []

    def still_ours():
        """Reopen the CSV if something replaced or removed it under the sweep (a `git checkout`
        of a tracked results file did once: every later row went to a deleted file), and write
        back this session's rows that the file no longer holds."""
        nonlocal fh, writer
        try:
            if os.stat(csv_path).st_ino == os.fstat(fh.fileno()).st_ino:
                return
        except OSError:                            # removed
            pass
        fh.close()
        drop_torn_tail(csv_path)
        fh, writer, fresh = open_csv(csv_path)
        on_disk = {(r["model"], int(r["T"]), int(r["seed"]), int(r["m"]))
                   for r in ([] if fresh else read_rows([csv_path]))}
        back = [r for r in session_rows
                if (r["model"], int(r["T"]), int(r["seed"]), int(r["m"])) not in on_disk]
        writer.writerows(back)
        print(f"warning: {csv_path} was replaced or removed while this sweep wrote to it; "
              f"reopened it and wrote back {len(back)} rows of this session", flush=True)

    def record(job, m, row):
        nonlocal n_run
        row = dict(row, success=int(row["test_acc"] >= a.bar),   # nan (diverged) fails
                   sweep_id=sweep_id)
        still_ours()
        writer.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())
        session_rows.append(row)
        done[(job[0], job[1], job[2], m)] = dict(row, success=bool(row["success"]))
        saved[job][m] = bool(row["success"])
        n_run += 1
        el = time.perf_counter() - t0
        left = len(jobs) - len(finished_jobs)           # open, this one included
        eta = el / n_run * max(0, expected - n_run)
        print(f"[{n_run:4d}/~{expected}] {job[0]:11s} T={job[1]:<5d} seed={job[2]:<3d} "
              f"m={m:<6d} test acc {row['test_acc']:.4f} {'ok  ' if row['success'] else 'fail'} "
              f"{row['seconds']:6.1f}s  elapsed {el / 60:5.1f} min, about {eta / 60:.0f} min "
              f"left ({max(left, 0)} searches open)", flush=True)
        return bool(row["success"])

    def finish(probes, rows):
        """Record a stack's rows and queue each search's next probe."""
        for (job, m), row in zip(probes, rows):
            m2 = advance(job, record(job, m, row))
            if m2 is not None:
                queue.append((job, m2))
            else:
                finished_jobs.add(job)

    def stack_of(T):
        return stack_size(T, a.stack, base["d"], base["heads"], np.dtype(base["dtype"]).itemsize)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    try:
        queue = []
        for job in jobs:
            gens[job] = search(grids[job[0]])
            m = advance(job, None)
            if m is not None:
                queue.append((job, m))
            else:
                finished_jobs.add(job)                  # finished in an earlier session
        while queue or pending:
            while queue and (pool is None or len(pending) < a.workers):
                probes = take_stack(queue, stack_of, bool(base.get("dropout")))
                runs = [dict(base, model=job[0], T=job[1], seed=job[2], m=m) for job, m in probes]
                if pool is None:                 # the same one-line report as from a pool
                    try:
                        rows = _sweep_worker(runs)
                    except (KeyboardInterrupt, Terminated):
                        raise
                    except Exception as e:
                        (model, T, seed), m = probes[0]
                        raise RunFailed(f"run {model} T={T} seed={seed} m={m} failed: "
                                        f"{type(e).__name__}: {e}") from None
                    finish(probes, rows)
                else:
                    pending[pool.submit(_sweep_worker, runs)] = probes
            if pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: f.exception() is not None):
                    probes = pending.pop(fut)
                    if fut.exception() is not None:      # record the others first, then stop
                        (model, T, seed), m = probes[0]
                        raise RunFailed(f"run {model} T={T} seed={seed} m={m} failed: "
                                        f"{type(fut.exception()).__name__}: {fut.exception()}")
                    finish(probes, fut.result())
    except (KeyboardInterrupt, Terminated) as e:
        print(f"\n{'terminated (SIGTERM)' if isinstance(e, Terminated) else 'interrupted'}: "
              f"{n_run} runs of this session are saved in {csv_path}; rerun the same command to "
              f"resume", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    except RunFailed as e:
        print(f"sweep.py: {e}; the {n_run} runs finished before it are saved in "
              f"{csv_path}", file=sys.stderr)
        return 1
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        fh.close()
        if pool:                  # running workers are stopped, not left to finish for nobody
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
    print(f"sweep: {n_run} runs in {(time.perf_counter() - t0) / 60:.1f} min")
    return 0


# ---------------------------------------------------------------- bench ----------------------

def step_flops(T, B, d, H, k):
    """Matrix-product FLOPs of one training step on the fast path (forward + backward)."""
    R = 2 * T + 1                                      # two versions per position, plus [CLS]
    fwd = (2 * R * d * d + 2 * R * d * H + 2 * d * d       # values, scores rn @ (W_K q), query
           + 2 * B * 2 * T * (H + d)                       # Xb @ [E | E V]
           + 2 * B * d * d + 2 * 2 * B * d * k + 2 * B * d)  # W_O, MLP, readout
    bwd = (4 * R * d * d + 4 * R * d * H + 4 * d * d
           + 2 * B * 2 * T * (H + d)
           + 4 * B * d * d + 2 * 4 * B * d * k + 2 * B * d)
    return fwd + bwd


def matmul_gflops(n, k, m, dtype, reps=20):
    """numpy's own speed on an (n, k) @ (k, m) product, in GFLOP/s (best of reps)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n * k * m / best / 1e9


def time_steps(cfg, B, path, n_steps):
    rng = np.random.default_rng(0)
    p = attn.init_params(cfg, rng)
    dt = np.dtype(cfg["dtype"])
    X = (rng.random((B, cfg["T"])) < 0.8).astype(dt)
    y = rng.integers(0, 2, B).astype(dt)
    state = train.adam_init(p)
    times = []
    for i in range(n_steps + 2):                       # two warm-up steps
        t = time.perf_counter()
        loss, g, _ = attn.loss_and_grads(p, cfg, X, y, path)
        train.adam_step(p, g, state, 1e-3, 1e-4)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


def bench_parser():
    ap = OneLineParser(prog="sweep.py bench", description=(
        "Time one training step (m samples, full batch, the experiment's model) on the fast path "
        "and on the plain [CLS]-row path, per run (x steps), and GFLOP/s of the matrix products "
        "beside numpy's own matmul on this machine."))
    ap.add_argument("--Ts", type=int_list, default=[100, 1000, 3000], help="T values")
    ap.add_argument("--m", type=integer(1), default=100, help="batch (default %(default)s)")
    ap.add_argument("--steps", type=integer(1), default=1000,
                    help="steps per run, for the per-run time (default %(default)s)")
    ap.add_argument("--reference", action="store_true",
                    help="also time the plain [CLS]-row path (slow at large T)")
    ap.add_argument("--throughput", type=int_list, default=[100, 1000],
                    help="T values for the sweep throughput: runs per minute on all cores "
                         "(default 100,1000)")
    ap.add_argument("--stack", type=integer(1), default=16,
                    help="at most this many runs per stack for the throughput, fewer at large T "
                         "as in the sweep (default %(default)s)")
    ap.add_argument("--tp-steps", dest="tp_steps", type=integer(1), default=100,
                    help="steps timed per stack; runs/min is scaled to --steps (default "
                         "%(default)s)")
    return ap


# Sweep throughput before stacked runs (commit 02b5d41: one run per task, 2 worker processes of
# one BLAS thread, m = 100, 1000 steps), measured on this 2-core machine on 2026-11-30.
THROUGHPUT_BEFORE = {100: 40.7, 1000: 13.6}


def _throughput_worker(args):
    T, R, steps, seed = args
    train.keep_freed_memory()
    base = dict(T=T, m=100, steps=steps, n_test=100, log_every=0)
    t = time.perf_counter()
    train.train_stack([dict(base, seed=seed + r) for r in range(R)])
    return time.perf_counter() - t


def sweep_throughput(T, R, steps, full_steps, workers, repeats=3):
    """Runs of `full_steps` steps per minute when `workers` processes each train a stack of R runs
    (m = 100): timed on `steps` steps and scaled (setup and evaluation included once); the median
    of `repeats` timings, since a shared machine's speed wanders by 20% from one to the next."""
    walls = []
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_throughput_worker, [(T, R, 2, 0)] * workers))      # start-up and warm-up
        for _ in range(repeats):
            t = time.perf_counter()
            list(ex.map(_throughput_worker, [(T, R, steps, 10 * i) for i in range(workers)]))
            walls.append(time.perf_counter() - t)
    return 60 * workers * R / (float(np.median(walls)) * full_steps / steps)


def main_bench(argv):
    ap = bench_parser()
    a = ap.parse_args(argv)
    d, H, k = (train.DEFAULTS[key] for key in ("d", "heads", "mlp"))
    for T in sorted(set(a.Ts) | set(a.throughput)):           # before any time is spent
        try:
            train.check_run_memory(dict(train.DEFAULTS, T=T, m=a.m, n_test=1, dtype="float64"),
                                   lambda name, v: f"--Ts/--throughput {v}" if name == "T" else
                                   f"--{name.replace('_', '-')} {v}")
        except ValueError as e:
            ap.error(str(e))
    print(f"model d={d} heads={H} mlp={k}; batch m={a.m}; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; numpy {np.__version__}")
    for dtype in ("float32", "float64"):
        sq = matmul_gflops(1024, 1024, 1024, dtype, reps=5)
        print(f"\n{dtype}: numpy matmul 1024^3: {sq:6.1f} GFLOP/s")
        print(f"{'T':>6} {'ms/step':>9} {'s/run':>7} {'GFLOP/s':>8} {'numpy same shape':>17}"
              + (f" {'plain ms/step':>14} {'speed-up':>9}" if a.reference else ""))
        for T in a.Ts:
            cfg = attn.default_config(T=T, d=d, heads=H, mlp=k, dtype=dtype)
            n = max(20, min(200, int(20000 / T)))            # median of >= 20 timed steps
            t_fast = time_steps(cfg, a.m, "fast", n)
            gf = step_flops(T, a.m, d, H, k) / t_fast / 1e9
            same = matmul_gflops(2 * T + 1, d, d, dtype)    # the largest per-step product
            line = (f"{T:6d} {1e3 * t_fast:9.2f} {t_fast * a.steps:7.1f} {gf:8.2f} "
                    f"{same:17.1f}")
            if a.reference:
                t_ref = time_steps(cfg, a.m, "cls", 3)
                line += f" {1e3 * t_ref:14.1f} {t_ref / t_fast:8.1f}x"
            print(line, flush=True)
    workers = os.cpu_count() or 1
    print(f"\nsweep throughput, {workers} worker processes, stacks of at most {a.stack} runs "
          f"(m = 100, {a.steps} steps, float32), runs per minute (median of 3 timings):")
    print(f"{'T':>6} {'stack':>6} {'before stacking':>16} {'now':>8} {'ratio':>6}")
    for T in a.throughput:
        R = stack_size(T, a.stack, d, H)
        now = sweep_throughput(T, R, min(a.tp_steps, a.steps), a.steps, workers)
        old = THROUGHPUT_BEFORE.get(T) if a.steps == 1000 else None
        print(f"{T:6d} {R:6d} {old if old else '':>16} {now:8.1f} "
              f"{f'{now / old:5.1f}x' if old else '':>6}", flush=True)
    return 0


# ---------------------------------------------------------------- compare protocols ----------

def paired_ratio(e, ref):
    """m50 of one protocol over a reference's at one T, with a paired 95% bootstrap CI.

    e, ref: success_estimates of the same seeds with the same n_boot and bootstrap seed, so
    replicate i of both resamples the same seeds (parse_rows orders seeds by label): the ratio's
    interval then carries only the protocols' difference, not the seeds' shared luck. Replicates whose
    ratio is undefined (inf / inf, 0 / 0) are dropped. -> (ratio, lo, hi)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.asarray(e["m50_boot"]) / np.asarray(ref["m50_boot"])
        point = e["m50"] / ref["m50"] if ref["m50"] > 0 else math.nan
    r = r[~np.isnan(r)]
    return (float(point),) + (percentile_ci(r) if r.size else (math.nan, math.nan))


def _ratio(x):
    show = lambda v: "-" if np.isnan(v) else "inf" if np.isinf(v) else f"{v:.2f}"
    return f"{show(x[0])} [{show(x[1])}, {show(x[2])}]"


def _median(rows, key):
    """Median of a row field over rows where it was recorded (nan = not recorded); nan if none."""
    v = [float(r[key]) for r in rows if np.isfinite(float(r[key]))]
    return float(np.median(v)) if v else math.nan


def _split_medians(runs, key):
    """'successes / failures' medians of a row field, 3 decimals ('-' where not recorded)."""
    show = lambda v: "-" if np.isnan(v) else f"{v:.3f}"
    return (f"{show(_median([r for r in runs if r['success']], key))} / "
            f"{show(_median([r for r in runs if not r['success']], key))}")


def _cpu_minutes(runs):
    return np.nansum([float(r["seconds"]) for r in runs]) / 60


def _folder_rows(folder, n_seeds=None, Ts=None):
    """(sweep.json as a dict, the folder's Transformer rows) for seeds < n_seeds and T in Ts
    (None = all). The bootstrap pairs folders by seed label (parse_rows), whatever the order."""
    try:
        with open(os.path.join(folder, "sweep.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        meta = {}
    rows = [r for r in read_rows(sorted(glob.glob(os.path.join(folder, "runs*.csv"))))
            if r["model"] == "transformer" and (n_seeds is None or int(r["seed"]) < n_seeds)
            and (Ts is None or int(r["T"]) in Ts)]
    if not rows:
        raise ValueError(f"{folder}: no Transformer runs (runs*.csv)")
    return meta, rows


def compare_table(folders, log=print, n_seeds=None, Ts=None):
    """One table over sweep folders (one protocol each): per folder and T, m50 and m90 with 95%
    CIs, m50 over the first folder's with a paired CI (paired_ratio; only where both hold the same
    seeds), the paper's m*, the share of failed runs that fit their training set perfectly
    (memorised without generalising), the median [CLS] attention on S and positional overlap of S
    in successes and failures, and the CPU minutes its runs took; then each folder's slope of m50
    against ln T with its CI. Returns (markdown, entries): entries [(name, T, estimates)]."""
    lines = ["| protocol | T | m50 [95% CI] | m50 / first [paired 95% CI] | m90 [95% CI] | "
             "seeds | m* (paper) | failures that memorised | attention on S: successes / "
             "failures (median) | positional overlap of S: successes / failures (median) | "
             "CPU min |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    fits, entries, first = [], [], {}
    for i, folder in enumerate(folders):
        meta, rows = _folder_rows(folder, n_seeds, Ts)
        name = meta.get("protocol", os.path.basename(folder.rstrip("/")))
        est, scaling = success_table(rows, ["transformer"])
        for T, runs in sorted(split_by_T(rows).items(), key=lambda kv: int(kv[0])):
            e = est[("transformer", int(T))]
            seeds = sorted({int(r["seed"]) for r in runs})
            if i == 0:
                first[int(T)] = (seeds, e)
            ref = first.get(int(T))
            ratio = _ratio(paired_ratio(e, ref[1])) if ref and ref[0] == seeds else "-"
            entries.append((name, int(T), e))
            fail = [r for r in runs if not r["success"]]
            known = [r for r in fail if np.isfinite(float(r["train_acc"]))]   # nan: not recorded
            memo = sum(float(r["train_acc"]) == 1.0 for r in known)
            lines.append(f"| {name} | {int(T)} | {_ci(e, 'm50')} | {ratio} | {_ci(e, 'm90')} | "
                         f"{e['n_seeds']} | {PAPER_MSTAR.get(int(T), '-')} | {memo} of {len(known)}"
                         f"{f' ({len(fail) - len(known)} not recorded)' if len(known) < len(fail) else ''}"
                         f" | {_split_medians(runs, 'attn_on_S')} | "
                         f"{_split_medians(runs, 'pos_overlap')} | {_cpu_minutes(runs):.1f} |")
        f = scaling.get("transformer")
        if f:
            fits.append(f"{name}: m50 ~ a + b ln T, b = {f['log_b']:.1f} [{f['log_b_lo']:.1f}, "
                        f"{f['log_b_hi']:.1f}]; m50 ~ a T^k, k = {f['pow_k']:.2f} "
                        f"[{f['pow_k_lo']:.2f}, {f['pow_k_hi']:.2f}]")
    for line in lines + [""] + fits:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits]) + "\n", entries


def compare_plot(entries, path, title):
    """One panel per T: each protocol's m50 with its 95% CI (log m axis), the first protocol's m50
    as a dashed line, the paper's m* (and its bar) as a red band. None when matplotlib is missing."""
    plt = _pyplot("rerun")
    if plt is None:
        return None
    from matplotlib import ticker
    names = list(dict.fromkeys(n for n, _, _ in entries))
    Ts = sorted({T for _, T, _ in entries})
    fig, axes = plt.subplots(1, len(Ts), figsize=(3.2 * len(Ts) + 1.2, 0.32 * len(names) + 1.4),
                             sharey=True, squeeze=False)
    for ax, T in zip(axes[0], Ts):
        here = [(names.index(n), e) for n, TT, e in entries if TT == T]
        top = 2 * max([e["m50"] for _, e in here if np.isfinite(e["m50"])] or [1])
        for y, e in here:
            lo, hi = e["m50_lo"], e["m50_hi"]
            hi_shown = hi if np.isfinite(hi) else top        # an open interval ends in an arrow
            ax.plot([max(lo, 1), hi_shown], [y, y], "-", color="tab:blue", lw=1.5)
            if not np.isfinite(hi):
                ax.plot([hi_shown], [y], ">", color="tab:blue", ms=4)
            ax.plot([e["m50"]], [y], "o", color="tab:blue", ms=4)
            if y == 0:
                ax.axvline(e["m50"], ls="--", color="gray", lw=1)
        if T in PAPER_MSTAR:
            lo, hi = (float(v) for v in PAPER_BAR[T].split("-"))
            ax.axvspan(lo, hi, color="tab:red", alpha=0.25, lw=0)
            ax.axvline(PAPER_MSTAR[T], color="tab:red", lw=1)
        ax.set_xscale("log")
        lo, hi = ax.get_xlim()                     # fewer labelled ticks over wide ranges
        subs = (1, 3) if hi / lo > 20 else (1, 2, 3, 5, 7)
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=subs))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(f"T = {T}", fontsize=10)
        ax.set_xlabel("m50 (log scale)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(names)))
    axes[0][0].set_yticklabels(names, fontsize=8)
    axes[0][0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    return _save(plt, fig, path)


def _table_over_folders(ap, a, make):
    """The compare and width commands' common part: every folder must exist; make() -> (table,
    extra), its ValueError a one-line error; the table also goes to --out."""
    for folder in a.folders:
        if not os.path.isdir(folder):
            ap.error(f"no folder {folder}")
    try:
        table, extra = make()
    except ValueError as e:
        ap.error(str(e))
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)
    return table, extra


def main_compare(argv):
    ap = OneLineParser(prog="sweep.py compare", allow_abbrev=False, description=(
        "One table over sweep folders, one protocol each (e.g. results/paper-range-ours "
        "results/paper-range-paper-data): m50, m90, memorisation, attention on S, CPU time."))
    ap.add_argument("folders", nargs="+", help="sweep output folders")
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--seeds", type=integer(1), help="only seeds 0..N-1 (the same in every folder)")
    ap.add_argument("--Ts", type=int_list, help="only these T")
    ap.add_argument("--plot", help="also draw m50 [95% CI] per protocol and T into this image "
                                   "(needs matplotlib)")
    a = ap.parse_args(argv)
    table, entries = _table_over_folders(ap, a, lambda: compare_table(a.folders, n_seeds=a.seeds,
                                                                      Ts=a.Ts))
    if a.plot:
        compare_plot(entries, a.plot, "m50 and its 95% CI (bootstrap over seeds); dashed: "
                     f"{entries[0][0]}; red: the paper's m* and bar")
    return 0


# ---------------------------------------------------------------- width and the log T law ----

def log_departure(T, m50, m50_boot, fit_below):
    """Where a curve m50(T) leaves the log law it follows at small T.

    T [n] distinct context lengths; m50 [n]; m50_boot [n, B] bootstrap replicates, independent
    across T (replicate i is paired across T, as in scaling_fits). Fits m50 ~ a + b ln T over the
    T <= fit_below (at least 2 of them), in every replicate too, and divides each larger T's m50
    by the fit's extrapolation a + b ln T: ratio [95% CI] (replicates whose small-T values are not
    finite and positive, or whose extrapolation is not positive, are dropped; an m50 above every m
    tried gives an inf ratio, which counts as above). The departure is the first larger T whose
    whole interval lies above 1: m50 grows faster there than the small-T log law, at 95%
    confidence. -> dict(a, b (nan when a small-T m50 is not finite), ratios {T: (ratio, lo, hi)},
    departs: that T or None)."""
    T = np.asarray(T, dtype=np.float64)
    m50 = np.asarray(m50, dtype=np.float64)
    boot = np.asarray(m50_boot, dtype=np.float64)
    if T.ndim != 1 or m50.shape != T.shape or boot.ndim != 2 or boot.shape[0] != T.size:
        raise ValueError(f"T [n], m50 [n] and m50_boot [n, B] needed, got {T.shape}, "
                         f"{m50.shape}, {boot.shape}")
    small = T <= fit_below
    if np.unique(T[small]).size < 2:
        raise ValueError(f"the small-T log fit needs at least 2 T <= fit_below={fit_below:g}, "
                         f"got {T[small].tolist()}")
    x = np.log(T[small])
    xc = x - x.mean()

    def line(y):                                   # y [k, ...] -> (intercept, slope), per column
        b = np.tensordot(xc, y, axes=1) / (xc @ xc)
        return y.mean(0) - b * x.mean(), b

    with np.errstate(invalid="ignore"):             # an inf m50 at small T: a, b are nan
        a, b = line(m50[small])
        ok = (np.isfinite(boot[small]) & (boot[small] > 0)).all(0)
        a_b, b_b = line(np.where(ok, boot[small], 0.0))
    ratios, departs = {}, None
    for i in np.flatnonzero(~small)[np.argsort(T[~small])]:
        pred, pred_b = a + b * math.log(T[i]), a_b + b_b * math.log(T[i])
        keep = ok & (pred_b > 0) & ~np.isnan(boot[i])
        with np.errstate(divide="ignore", invalid="ignore"):
            r = boot[i][keep] / pred_b[keep]
        point = m50[i] / pred if pred > 0 else math.nan
        lo, hi = percentile_ci(r) if r.size else (math.nan, math.nan)
        ratios[int(T[i])] = (float(point), lo, hi)
        if departs is None and lo > 1:
            departs = int(T[i])
    return dict(a=float(a), b=float(b), ratios=ratios, departs=departs)


def width_table(folders, log=print, n_seeds=None, fit_below=100, Ts=None):
    """One table over sweep folders that differ in the width d: per d and T, m50 and m90 with 95%
    CIs, m50 over the extrapolated small-T log law with its CI (log_departure), the median [CLS]
    attention on S and positional overlap of S in successes and failures, and the CPU minutes;
    per d, the small-T law, the T where the curve departs from it, and the fits over all T; then
    per T, the construction's d_p beside each width's standing against its law (above it: that
    T's ratio interval lies above 1). Folders of the same d are pooled (e.g. one sweep's T range
    extended in another folder): they must share every option, the m grid and the search, and no
    run may be in two. A T where some seed's search is unfinished (an interrupted sweep) is left
    out, and said so: its runs are not a cell of the study.
    Returns (markdown, curves): curves [dict(d, heads, s, task, name, est {T: estimates},
    runs {T: rows}, dep (log_departure), fit (scaling_fits or None))] sorted by d."""
    pools = {}                                   # d -> dict(opts, folders, names, rows, where)
    for folder in folders:
        meta, rows = _folder_rows(folder, n_seeds, Ts)
        opts = full_options(meta.get("options", {}))
        grid, search = meta.get("grids", {}).get("transformer"), meta.get("search", "bisect")
        pool = pools.setdefault(opts["d"], dict(opts=opts, folders=[], names=[], rows=[],
                                                where={}, grid=grid, search=search))
        if (opts, grid, search) != (pool["opts"], pool["grid"], pool["search"]):
            raise ValueError(f"{folder} and {pool['folders'][0]} have d = {opts['d']} but other "
                             f"options, m grid or search; pool only folders of one protocol")
        for r in rows:
            key = (int(r["T"]), int(r["seed"]), int(r["m"]))
            if key in pool["where"]:
                raise ValueError(f"{folder} and {pool['where'][key]} both hold the run T={key[0]}"
                                 f" seed={key[1]} m={key[2]}; pool folders of different runs")
            pool["where"][key] = folder
        pool["folders"].append(folder)
        name = meta.get("protocol", os.path.basename(folder.rstrip("/")))
        pool["names"] += [name] if name not in pool["names"] else []
        pool["rows"] += rows
    curves, left_out = [], []
    for d, pool in pools.items():
        rows, opts = pool["rows"], pool["opts"]
        if pool["grid"]:                  # a T where some seed's search is unfinished is no cell
            for T, runs in split_by_T(rows).items():
                by_seed = {}
                for r in runs:
                    by_seed.setdefault(int(r["seed"]), {})[int(r["m"])] = r["success"]
                open_ = [sd for sd, done in by_seed.items()
                         if seed_outcome(pool["grid"], pool["search"], done)[0] != "done"]
                if open_:
                    left_out.append(f"d = {d}, T = {int(T)}: {len(open_)} of {len(by_seed)} "
                                    f"seeds' searches unfinished ({len(runs)} runs), left out")
                    rows = [r for r in rows if int(r["T"]) != int(T)]
        est, scaling = success_table(rows, ["transformer"])
        by_T = {int(T): r for T, r in split_by_T(rows).items()}
        e = [est[("transformer", T)] for T in sorted(by_T)]
        dep = log_departure(sorted(by_T), [x["m50"] for x in e], [x["m50_boot"] for x in e],
                            fit_below)
        curves.append(dict(d=d, heads=opts["heads"], s=opts["s"], task=opts["task"],
                           name=", ".join(pool["names"]), est=dict(zip(sorted(by_T), e)),
                           dep=dep, fit=scaling.get("transformer"), runs=by_T))
    curves.sort(key=lambda c: c["d"])
    lines = ["| d | T | m50 [95% CI] | m90 [95% CI] | seeds | m50 / small-T log law [95% CI] | "
             "attention on S: successes / failures (median) | positional overlap of S: "
             "successes / failures (median) | CPU min |", "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for c in curves:
        for T, e in c["est"].items():
            ratio = _ratio(c["dep"]["ratios"][T]) if T in c["dep"]["ratios"] else "(fit range)"
            lines.append(f"| {c['d']} | {T} | {_ci(e, 'm50')} | {_ci(e, 'm90')} | "
                         f"{e['n_seeds']} | {ratio} | {_split_medians(c['runs'][T], 'attn_on_S')}"
                         f" | {_split_medians(c['runs'][T], 'pos_overlap')} | "
                         f"{_cpu_minutes(c['runs'][T]):.1f} |")
        dep, f = c["dep"], c["fit"]
        where = (f"departs from it at T = {dep['departs']} (the first T whose m50 lies above the "
                 f"law with 95% confidence)" if dep["departs"] else
                 f"no departure up to T = {max(c['est'])}" if dep["ratios"] else
                 "no T beyond the fit range")
        notes.append(f"d = {c['d']} ({c['name']}, {c['heads']} heads of {c['d'] // c['heads']}): "
                     f"small-T law m50 = {dep['a']:.1f} + {dep['b']:.1f} ln T over T <= "
                     f"{fit_below:g}; {where}" + (
                         f"; over all T: m50 ~ a + b ln T, b = {f['log_b']:.1f} "
                         f"[{f['log_b_lo']:.1f}, {f['log_b_hi']:.1f}]; m50 ~ a T^k, k = "
                         f"{f['pow_k']:.2f} [{f['pow_k_lo']:.2f}, {f['pow_k_hi']:.2f}]; AIC(ln T) - "
                         f"AIC(T) = {f['daic']:.1f} [{f['daic_lo']:.1f}, {f['daic_hi']:.1f}], ln T "
                         f"better in {100 * f['p_log_better']:.0f}% of resamples" if f else ""))
    need = ["| T | construction's d_p = ceil(16 s ln T) | " +
            " | ".join(f"d = {c['d']}" for c in curves) + " |", "|---|---|" + "---|" * len(curves)]
    for T in sorted({T for c in curves for T in c["est"]}):
        def state(c):            # where this width's curve stands at T against its small-T law
            if T not in c["est"]:
                return "not run"
            if T <= fit_below:
                return "fit range"
            return "above it" if c["dep"]["ratios"][T][1] > 1 else "consistent with it"
        need.append(f"| {T} | {code_width(T, curves[0]['s'])} | " +
                    " | ".join(state(c) for c in curves) + " |")
    notes += left_out
    for line in lines + [""] + notes + [""] + need:
        log(line)
    return "\n".join(lines + [""] + ["- " + n for n in notes] + [""] + need) + "\n", curves


def width_plot(curves, path, limits=None):
    """Left: m50 against T per width, 95% CIs as bands, the small-T log law extrapolated (thin
    dashed), the paper's points with their bars and the statistical limit. Right: the median
    positional overlap of S in successes (solid) and failures (dashed). None without matplotlib."""
    plt = _pyplot("rerun")
    if plt is None:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.4))
    top = 4 * max(e["m50"] for c in curves for e in c["est"].values() if np.isfinite(e["m50"]))
    for c, color in zip(curves, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        Ts = sorted(c["est"])
        e = [c["est"][T] for T in Ts]
        ax.plot(Ts, [x["m50"] for x in e], "o-", color=color, ms=4, label=f"d = {c['d']}")
        ax.fill_between(Ts, [max(x["m50_lo"], 1) for x in e],
                        [min(x["m50_hi"], top) for x in e], color=color, alpha=0.15, lw=0)
        grid = np.geomspace(min(Ts), max(Ts), 50)
        ax.plot(grid, c["dep"]["a"] + c["dep"]["b"] * np.log(grid), "--", color=color, lw=0.8)
        if c["dep"]["departs"]:
            ax.plot([c["dep"]["departs"]], [c["est"][c["dep"]["departs"]]["m50"]], "o", ms=10,
                    mfc="none", color=color)
        for won, style in ((True, "o-"), (False, "x--")):
            y = [_median([r for r in c["runs"][T] if bool(r["success"]) == won], "pos_overlap")
                 for T in Ts]
            bx.plot(Ts, y, style, color=color, ms=4, label=f"d = {c['d']}" if won else None)
    Tp = sorted(PAPER_MSTAR)
    ax.errorbar(Tp, [PAPER_MSTAR[t] for t in Tp],
                yerr=np.abs(np.array([[float(v) for v in PAPER_BAR[t].split("-")]
                                      for t in Tp]).T - [PAPER_MSTAR[t] for t in Tp]),
                fmt="^", color="k", ms=4, capsize=2, label="the paper's figure")
    if limits:
        Tl = sorted(limits)
        ax.plot(Tl, [limits[t]["median"] for t in Tl], ":", color="gray",
                label="statistical limit (median)")
    ax.set(xscale="log", yscale="log", xlabel="T (log scale)", ylabel="m50 (log scale)",
           title="m50 [95% CI] per width\ndashed: log law fitted at small T; circle: departure")
    bx.set(xscale="log", xlabel="T (log scale)", ylabel="median positional overlap of S",
           title="largest cosine between E_pos of S and another position's\n"
                 "solid: successes, dashed: failures")
    ax.title.set_fontsize(9)
    bx.title.set_fontsize(9)
    ax.legend(fontsize=8)
    bx.legend(fontsize=7)
    return _save(plt, fig, path)


def main_width(argv):
    ap = OneLineParser(prog="sweep.py width", allow_abbrev=False, description=(
        "Width against the log T law: sweep folders of several widths d (results/width/d-*): m50 "
        "and m90 per d and T, where each d's curve leaves the log law it follows at small T, the "
        "positional overlap of S, and the construction's width d_p beside the widths that stay "
        "on their law."))
    ap.add_argument("folders", nargs="+", help="sweep output folders; those of one width are "
                                               "pooled (same options, different runs)")
    ap.add_argument("--seeds", type=integer(1), help="only seeds 0..N-1")
    ap.add_argument("--Ts", type=int_list, help="only these T")
    ap.add_argument("--fit-below", dest="fit_below", type=number(0, strict=True), default=100,
                    help="the small-T log law is fitted over T <= this (default %(default)s)")
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--plot", help="also draw the curves into this image (needs matplotlib)")
    a = ap.parse_args(argv)
    table, curves = _table_over_folders(ap, a, lambda: width_table(
        a.folders, n_seeds=a.seeds, fit_below=a.fit_below, Ts=a.Ts))
    if a.plot:
        Ts = sorted({T for c in curves for T in c["est"]})
        limits = statistical_limits(curves[0]["task"], curves[0]["s"], Ts, cache=os.path.join(
            os.path.dirname(os.path.abspath(a.plot)), "limits.json"))
        width_plot(curves, a.plot, limits)
    return 0


# ---------------------------------------------------------------- the statistical limit ------

def main_limit(argv):
    ap = OneLineParser(prog="sweep.py limit", allow_abbrev=False, description=(
        "The statistical limit of a sparse task, no training: per T, the smallest m at which a "
        "seed's training stream leaves exactly one compatible hypothesis (median and 5-95% over "
        "seeds), and the probability that a random training set of m samples is ambiguous."))
    ap.add_argument("--Ts", type=int_list, default=[10, 100, 1000, 10000, 100000],
                    help="T values (default 10,100,1000,10000,100000)")
    ap.add_argument("--ms", type=int_list, default=[25, 50, 100],
                    help="m values for the ambiguity probability (default 25,50,100)")
    ap.add_argument("--seeds", type=integer(1), default=LIMIT_SEEDS,
                    help="streams per T (default %(default)s)")
    ap.add_argument("--sets", type=integer(1), default=1000,
                    help="random training sets per (T, m) for the probability (default "
                         "%(default)s)")
    ap.add_argument("--task", choices=data.TASKS, default="and", help="task (default and)")
    ap.add_argument("--s", type=integer(1), default=3, help="sparsity (default 3)")
    ap.add_argument("--out", help="also write the table (markdown) and JSON to this folder")
    a = ap.parse_args(argv)
    if a.s > min(a.Ts):
        ap.error(f"--s {a.s} is larger than the smallest T {min(a.Ts)}")
    t0 = time.perf_counter()
    lines = ["| T | first m that identifies S: median [5%, 95%] | "
             + " | ".join(f"P(ambiguous), m = {m}" for m in a.ms) + " |",
             "|---|---|" + "---|" * len(a.ms)]
    out = []
    for T in a.Ts:
        lim = statistical_limits(a.task, a.s, [T], a.seeds).get(T)
        if lim is None:
            ap.error(f"counting {a.task} hypotheses at T={T} is not affordable; use smaller T")
        rng = np.random.default_rng(1000 + T)
        task = data.make_task(a.task, T, a.s, rng)
        probs = [data.ambiguity_probability(task, m, rng, a.sets) for m in a.ms]
        out.append(dict(T=T, **lim, p_ambiguous=dict(zip(a.ms, probs))))
        lines.append(f"| {T} | {_limit(lim)} | " + " | ".join(f"{p:.3f}" for p in probs) + " |")
        print(lines[-1] if len(lines) > 3 else "\n".join(lines), flush=True)
    print(f"({a.seeds} streams and {a.sets} sets per T, {a.task} s={a.s}; "
          f"{time.perf_counter() - t0:.0f} s)")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        write_json(os.path.join(a.out, "limit.json"), dict(task=a.task, s=a.s, seeds=a.seeds,
                                                           sets=a.sets, rows=out))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    train.keep_freed_memory()
    if argv and argv[0] == "limit":
        return main_limit(argv[1:])
    if argv and argv[0] == "bench":
        return main_bench(argv[1:])
    if argv and argv[0] == "compare":
        return main_compare(argv[1:])
    if argv and argv[0] == "width":
        return main_width(argv[1:])
    return main_sweep(argv)


if __name__ == "__main__":
    sys.exit(train.one_line_errors("sweep.py", main))
