"""stats.py (studies/lib): the experiment's statistics, from which m grid to run to m* and its
interval.

Numpy only; every function checks its input and raises a one-line ValueError that names the bad
value. It reads top to bottom:

  1. the m grid and the searches: which training-set sizes a seed runs (bisection on a grid of
     ratio 1.05, or the whole grid), and replaying a search over saved runs.
  2. rows: runs as dicts {"T", "seed", "m", "success"} or tuples (T, seed, m, success).
  3. the success curve: P(success | m) = sigmoid(a + b ln m) fitted to all runs of one T pooled
     (fit_success_curve); m50 and m90 where it crosses 0.5 and 0.9 (m_at).
  4. the bootstrap over seeds of the success curve: 95% percentile intervals of m50 and m90 from
     resampling SEEDS, all runs of a drawn seed together (bootstrap_over_seeds,
     success_estimates), each T on its own; the resampling design, the exact intervals and the
     Monte Carlo band every drawn bound carries are intervals.py's.
  5. m* by the majority rule, the paper's statistic: the smallest grid m at which at least half of
     the seeds succeed (critical_sizes for the sweep's searches, majority_mstar for plain rows).
  The laws across T and s fitted to these estimates (scaling_fits, growth_in_s, log_departure,
  paired ratios) are laws.py's; the intervals and exact tests themselves, intervals.py's.

Why pooled runs and not each seed's first success: success is not monotone in m within a seed (a
seed can fail above its first success), so m50 comes from one logistic fit over every run of a T.

Undetermined fits. If every run of a T failed (or every run succeeded) the slope b is not
identified: fit_success_curve returns b = None and a = -inf (or +inf), the maximum-likelihood
constant curve P = 0 (or 1). m_at then gives inf ("above the largest m tried") or 0.0 ("below the
smallest m tried"), and fit_flag words it for a report. Inside the vectorised bootstrap the same
cases are stored as a = -inf / +inf with b = 0.0.

Regularisation. The log-likelihood gets a ridge penalty (RIDGE / 2) (a_c^2 + b^2), where a_c is
the intercept at the centre of the data (a_c = a + b * mean ln m), so the penalty does not pull the
curve's location towards m = 1. Under complete separation (every failure at a smaller m than every
success) the unpenalised maximum has b -> inf; the ridge keeps b finite (a steep curve whose m50
falls in the gap between the last failure and the first success) and makes the objective strictly
concave, so Newton's method with step halving always converges. On ordinary data its effect is
negligible: it shifts b by about RIDGE / (Fisher information of b), about 1e-5 relative for a few
hundred runs. Firth's penalty would also give finite estimates, but needs leverages at each
iteration and complicates the vectorised bootstrap; the ridge does not.

"""
import collections.abc
import math
import numbers

import numpy as np

from studies.lib import intervals
from studies.lib.checks import describe
from studies.lib.intervals import (MAX_BOOT, MAX_FLOAT, check_count, check_generator, check_real,
                                   check_reals, distribution_ci, order_statistic_bootstrap,
                                   percentile_ci, resample_counts, seed_counts, stratum_rng)

RIDGE = 1e-3      # ridge strength on (centred intercept, slope); see the module docstring
MAX_ITER = 100    # Newton iterations cap (typical fits converge in 5-30)
MAX_GRID = 100000  # sizes in one m grid at most (checked before the grid is built)
NEWTON_TOL = 1e-10   # Newton stops when every step is below NEWTON_TOL * (1 + |parameter|)


# ---------------------------------------------------------------- 1. the m grid and the searches

def m_grid(lo, hi, ratio=1.05):
    """Integers from lo to hi, each about `ratio` times the last (every integer while that is
    finer): the candidate training-set sizes. lo and hi are integers with 1 <= lo <= hi (no
    bool), ratio a finite real number > 1; anything else is a one-line ValueError."""
    whole = lambda v: (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)))
    if not (whole(lo) and whole(hi) and 1 <= lo <= hi <= 2 ** 53):
        raise ValueError(f"m_grid: lo and hi must be integers with 1 <= lo <= hi <= 2**53, got "
                         f"lo={describe(lo)}, hi={describe(hi)}")
    if not (isinstance(ratio, numbers.Real) and not isinstance(ratio, (bool, np.bool_))
            and not (isinstance(ratio, numbers.Integral) and ratio > MAX_FLOAT)
            and math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"m_grid: ratio must be a finite number > 1, got {ratio!r}")
    step_one = min(hi, max(lo, 1 / (ratio - 1)))        # every integer up to here, then ratio
    size = step_one - lo + math.log(hi / step_one) / math.log(ratio)
    if size > MAX_GRID:
        raise ValueError(f"m_grid: lo={lo}, hi={hi}, ratio={ratio!r} make about {size:.3g} sizes, "
                         f"more than {MAX_GRID}; use a larger ratio or a smaller range")
    g, m = [], float(lo)
    while round(m) <= hi:
        if not g or round(m) > g[-1]:
            g.append(int(round(m)))
        m = max(m * ratio, m + 1)
    return g


def bisect_search(grid):
    """Search for the smallest grid m at which a run succeeds, assuming success is monotone in m.

    -> a generator: it yields the next m to run and is sent back whether that run succeeded; it
    returns the smallest successful m, or None when even the largest fails. About
    log2(len(grid)) + 1 runs instead of len(grid). grid: increasing sizes >= 1 (m_grid's),
    checked here, before the generator starts.
    """
    return _bisect(_check_grid(grid))


def _bisect(grid):
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
    return _walk_grid(_check_grid(grid))


def _walk_grid(grid):
    first = None
    for m in grid:
        if (yield m) and first is None:
            first = m
    return first


SEARCHES = {"bisect": bisect_search, "grid": grid_search}


def _check_grid(grid):
    """grid itself when it is a non-empty sequence of increasing sizes >= 1 (numbers, no bool);
    else one line."""
    size = lambda v: isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
    if not (isinstance(grid, (list, tuple, np.ndarray)) and len(grid) > 0
            and all(size(m) for m in grid) and grid[0] >= 1
            and all(a < b for a, b in zip(grid[:-1], grid[1:]))):
        raise ValueError(f"grid must be a non-empty list of increasing sizes >= 1 (m_grid), "
                         f"got {describe(grid)}")
    return grid


def replay(gen, saved, answer=None):
    """Drive a search generator over saved runs (saved[m] -> success), first sending `answer` to
    its pending question (None: start it). -> ("done", its answer) or ("run", the next m to run).
    The one place where saved runs are replayed: resuming a sweep and reading its results."""
    if not isinstance(gen, collections.abc.Generator):
        raise ValueError(f"gen must be a search's generator (bisect_search, grid_search), got "
                         f"{describe(gen)}")
    if not isinstance(saved, collections.abc.Mapping):
        raise ValueError(f"saved must be a dict {{m: success}} of saved runs, got {describe(saved)}")
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
    if not (isinstance(search, str) and search in SEARCHES):
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {describe(search)}")
    if not isinstance(results, collections.abc.Mapping):
        raise ValueError(f"results must be a dict {{m: success}} of saved runs, got "
                         f"{describe(results)}")
    state, value = replay(SEARCHES[search](grid), results)
    if state == "run":
        return "unfinished", None
    return "done", (np.inf if value is None else float(value))

# ---------------------------------------------------------------- 2. rows

def parse_rows(rows):
    """Rows (dicts or (T, seed, m, success) tuples) -> dict of arrays, each shape [n_runs]:
    "T" float, "seed" int (0..n_seeds-1, the rank of the seed's label), "m" float > 0,
    "success" float in {0, 1}; plus "seeds" (the original seed labels, list of n_seeds, sorted
    by number where they are numbers, as the CSV's "12" is). Indexing seeds by their sorted
    labels, not by first appearance, makes the seed bootstrap independent of the order of the
    rows, and pairs replicate i with the same seeds in any two sets of rows holding them."""
    rows = _rows_list(rows)
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


def _rows_list(rows):
    """rows as a list when they are an iterable of runs (not text, not one dict); else one line."""
    if isinstance(rows, (str, bytes, dict)) or not isinstance(rows, collections.abc.Iterable):
        raise ValueError(f"rows must be a list of runs (dicts or (T, seed, m, success) tuples), "
                         f"got {describe(rows)}")
    return list(rows)


def _seed_key(label):
    """Sort key of a seed label: numbers (7, "12") by value, before any other label by text."""
    try:
        return (0, float(label), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(label))


def split_by_T(rows):
    """Rows -> {T: [rows of that T]}, T in increasing order (T as float)."""
    rows, out = _rows_list(rows), {}
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

# ---------------------------------------------------------------- 3. the success curve: P(success | m) = sigmoid(a + b ln m)

def sigmoid(z):
    """1 / (1 + e^-z), elementwise on real numbers of any shape."""
    if np.asarray(z).dtype.kind not in "iuf":
        raise ValueError(f"z must be real numbers (an array or a number), got {describe(z)}")
    return 0.5 * (1.0 + np.tanh(0.5 * z))   # no overflow for any finite z


def _objective(a, b, x, N, Y, lam):
    """Penalised binomial log-likelihood, shape [B]: sum_j Y eta - N softplus(eta) - ridge."""
    eta = a[:, None] + b[:, None] * x
    return (Y * eta - N * np.logaddexp(0.0, eta)).sum(1) - 0.5 * lam * (a * a + b * b)


def _fit_binomial(x, N, Y, lam=RIDGE, max_iter=MAX_ITER, start=None):
    """Ridge-penalised binomial logistic regression, vectorised over B independent data sets.

    x [M] covariate (centred ln m); N [B, M] run counts, Y [B, M] success counts (weights may be
    any non-negative numbers). Maximises sum_j (Y eta - N log(1 + e^eta)) - lam/2 (a^2 + b^2),
    eta = a + b x, by Newton's method with step halving, from `start` = (a, b) when given (the
    bootstrap starts every resample at the data's own fit, a few steps from its optimum), else
    from the logit of the smoothed success fraction with b = 0. Returns a [B], b [B], n_iter.
    The objective is strictly concave (lam > 0), so the result is finite for any data and does
    not depend on the start."""
    B = N.shape[0]
    n, y = N.sum(1), Y.sum(1)
    if start is None:
        a, b = np.log((y + 0.5) / (n - y + 0.5)), np.zeros(B)
    else:
        a, b = np.full(B, start[0], dtype=float), np.full(B, start[1], dtype=float)
    f = _objective(a, b, x, N, Y, lam)         # the objective at (a, b), kept across the steps
    active = np.arange(B)
    it = 0
    for it in range(1, max_iter + 1):
        Na, Ya, aa, ba = N[active], Y[active], a[active], b[active]
        p = sigmoid(aa[:, None] + ba[:, None] * x)
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
        f0 = f[active]
        t = np.ones(active.size)
        for _ in range(60):
            f1 = _objective(aa + t * da, ba + t * db, x, Na, Ya, lam)
            bad = f1 < f0 - 1e-12 * (1.0 + np.abs(f0))
            if not bad.any():
                break
            t[bad] *= 0.5
        else:                                   # 60 halvings: f1 is one halving behind t
            f1 = _objective(aa + t * da, ba + t * db, x, Na, Ya, lam)
        a[active] = aa + t * da
        b[active] = ba + t * db
        f[active] = f1
        step = np.maximum(np.abs(t * da) / (1.0 + np.abs(aa)), np.abs(t * db) / (1.0 + np.abs(ba)))
        active = active[step > NEWTON_TOL]
        if active.size == 0:
            break
    return a, b, it


def fit_success_curve(m, success):
    """Logistic fit of success on ln m, all runs pooled.

    m [n] positive training-set sizes; success [n] in {0, 1}. Returns (a, b), floats, with
    P(success | m) = sigmoid(a + b ln m), maximising the log-likelihood minus the ridge
    RIDGE/2 (a_c^2 + b^2) (the module docstring). Undetermined cases return b = None:
    all runs failed -> (-inf, None); all succeeded -> (+inf, None); runs at one m only, with both
    outcomes -> (logit of the success fraction, None). Never NaN."""
    m, success = _check_runs(m, success)
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


def _check_runs(m, success):
    """Runs' sizes m [n] (finite, > 0) and outcomes success [n] (0 or 1) as float arrays."""
    m, success = check_reals("m", m), check_reals("success", success, bools=True)
    if m.ndim != 1 or m.size == 0 or m.shape != success.shape:
        raise ValueError(f"m and success must be 1-D of the same non-zero length, got shapes "
                         f"{m.shape}, {success.shape}")
    if not (np.isfinite(m).all() and (m > 0).all()):
        raise ValueError(f"m must be positive and finite, got min {m.min()!r}")
    if not np.isin(success, (0.0, 1.0)).all():
        raise ValueError(f"success must be 0 or 1, got values {np.unique(success).tolist()}")
    return m, success


def m_at(p, a, b):
    """The m where sigmoid(a + b ln m) = p, i.e. exp((logit p - a) / b).

    p in (0, 1); a, b scalars or arrays of one shape (b may be None: undetermined). Returns inf
    where b <= 0 or b is None (the curve never rises to p), except 0.0 where a = +inf (every run
    succeeded: m* is below the smallest m tried). Scalar in, float out; arrays in, array out.
    a: real, +-inf allowed (the encodings above), never NaN; b: finite."""
    p = check_real("p", p)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    scalar = np.ndim(a) == 0 and (b is None or np.ndim(b) == 0)
    a = check_reals("a", a)
    b = np.zeros_like(a) if b is None else check_reals("b", b)
    if np.isnan(a).any():
        raise ValueError("a must not be NaN (+-inf: every run succeeded or failed)")
    if not np.isfinite(b).all():
        raise ValueError("b must be finite (None: undetermined)")
    if a.shape != b.shape and a.ndim and b.ndim:
        raise ValueError(f"a and b must have one shape (or be scalars), got {a.shape} and "
                         f"{b.shape}")
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
    m, success = _check_runs(m, success)
    a, b = check_real("a", a), None if b is None else check_real("b", b)
    if b is not None and not math.isfinite(b):
        raise ValueError(f"b must be finite or None (undetermined), got {b!r}")
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

# ---------------------------------------------------------------- 4. the bootstrap over seeds

def default_stat(a, b):
    """(a [B], b [B]) -> {"m50": [B], "m90": [B]}; the statistics success_estimates reports."""
    return {"m50": m_at(0.5, a, b), "m90": m_at(0.9, a, b)}


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
    n_boot = check_count("n_boot", n_boot, MAX_BOOT)
    rng = np.random.default_rng(0) if rng is None else check_generator(rng)
    if not callable(stat):
        raise ValueError(f"stat must be a function (a [B], b [B]) -> {{name: [B]}}, got "
                         f"{describe(stat)}")
    d = _one_T(rows)
    S = len(d["seeds"])
    u, inv = np.unique(d["m"], return_inverse=True)
    cell = d["seed"] * u.size + inv             # (seed, m) cell of each run
    runs = np.bincount(cell, minlength=S * u.size).reshape(S, u.size).astype(float)  # per cell
    wins = np.bincount(cell, weights=d["success"], minlength=S * u.size).reshape(S, u.size)
    C = seed_counts(rng, S, n_boot)
    N, Y = C @ runs, C @ wins                   # [n_boot, n_m]
    c = np.log(d["m"]).mean()
    start = _fit_binomial(np.log(u) - c, runs.sum(0)[None], wins.sum(0)[None])[:2]   # the data's
    ac, b, _ = _fit_binomial(np.log(u) - c, N, Y, start=start)
    a = ac - b * c
    n, y = N.sum(1), Y.sum(1)
    none, every = y == 0, y == n
    a[none], a[every], b[none | every] = -np.inf, np.inf, 0.0
    samples = {k: np.asarray(v, dtype=np.float64) for k, v in stat(a, b).items()}
    return {k: percentile_ci(v) for k, v in samples.items()}, samples


def success_estimates(rows, n_boot=1000, seed=0):
    """m50 and m90 with 95% seed-bootstrap CIs for rows of one T, the seeds resampled by the
    design (stratum_rng(T, seed)): paired with any rows of this T and the same seeds, independent
    of other T's.

    Returns a dict: m50, m50_lo, m50_hi, m90, m90_lo, m90_hi (floats; inf = above every m tried
    / never reached, 0.0 = below the smallest m tried), n_seeds, n_runs, a, b (b None when
    undetermined), T, flag (fit_flag's remark or None), m50_boot, m90_boot ([n_boot] replicates,
    for scaling_fits)."""
    rows = _rows_list(rows)
    d = _one_T(rows)
    rng = stratum_rng(d["T"][0], seed)
    a, b = fit_success_curve(d["m"], d["success"])
    ci, samples = bootstrap_over_seeds(rows, default_stat, n_boot, rng)
    out = {"T": float(d["T"][0])}
    for name, p in (("m50", 0.5), ("m90", 0.9)):
        out[name] = m_at(p, a, b)
        out[name + "_lo"], out[name + "_hi"] = ci[name]
    out.update(n_seeds=len(d["seeds"]), n_runs=int(d["m"].size), a=a, b=b,
               flag=fit_flag(d["m"], d["success"], a, b),
               m50_boot=samples["m50"], m90_boot=samples["m90"])
    return out

# ---------------------------------------------------------------- 5. m* by the majority rule (the paper's statistic)

def critical_sizes(rows, grid_by_model, search="bisect"):
    """Per (model, T): each seed's critical m, m*(T) by the majority rule, and per-seed stats.

    A seed's critical m is its search's answer, replayed from the saved runs: the smallest grid m
    that succeeded (inf when even the largest failed: "above grid"). Seeds whose search is not
    finished (an interrupted sweep, a missing shard) are counted apart, never as "above grid".
    m*(T) is the smallest grid m at which at least half of the finished seeds succeed: counted
    at m itself when the whole grid was run (--search grid), and as #{seeds: critical <= m} after
    bisection, which takes success to be monotone in m. Real runs are not perfectly monotone
    (a seed can fail above its first success), so the two can differ.
    m_star_lo, m_star_hi: its 95% interval from a bootstrap over the finished seeds. After
    bisection m* is the ceil(n/2)-th smallest critical m, so the interval is exact
    (order_statistic_bootstrap: no resampling error), and so is m_star_above, the bootstrap
    probability that m* lies above the grid; for a grid walk both come from the drawn resamples.
    m_star_boot holds the seed bootstrap of success_estimates (the same intervals.N_BOOT resamples,
    resample_counts at this T with seed 0), m* recomputed by the same rule on each, for
    scaling_fits; they are drawn independently at each T (the design, module docstring).
    """
    if not (isinstance(search, str) and search in SEARCHES):
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {describe(search)}")
    if not isinstance(grid_by_model, collections.abc.Mapping):
        raise ValueError(f"grid_by_model must be a dict {{model: its m grid}}, got "
                         f"{describe(grid_by_model)}")
    by = _runs_by_cell(rows)
    out = {}
    missing = sorted({model for model, _ in by} - set(grid_by_model), key=str)
    if missing:
        raise ValueError(f"grid_by_model has no grid for model(s) {missing}")
    for (model, T), seeds in sorted(by.items()):
        out[(model, T)] = _cell_mstar(model, T, seeds, grid_by_model[model], search)
    return out


def _runs_by_cell(rows):
    """{(model, T): {seed: {m: success}}} of critical_sizes' rows, seeds in order."""
    by, keys = {}, {"model", "T", "seed", "m", "success"}
    for i, r in enumerate(_rows_list(rows)):
        if not (isinstance(r, dict) and keys <= r.keys()):
            raise ValueError(f"rows[{i}] must be a dict with {', '.join(sorted(keys))}, got "
                             f"{describe(r)}")
        seeds = by.setdefault((r["model"], int(r["T"])), {})
        seeds.setdefault(int(r["seed"]), {})[int(r["m"])] = r["success"] in (True, "1", 1)
    return {key: dict(sorted(seeds.items())) for key, seeds in by.items()}


def _cell_mstar(model, T, seeds, grid, search):
    """critical_sizes' entry for one (model, T): the seeds' critical m, m* and its interval."""
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
    boot = np.full(1 + intervals.N_BOOT, np.inf)
    if n:
        C = np.vstack([np.ones(n), resample_counts(n, T, intervals.N_BOOT, 0)])
        half = (C @ wins) >= n / 2                              # [1 + intervals.N_BOOT, n_grid]
        boot[half.any(1)] = np.asarray(grid, dtype=float)[np.argmax(half, 1)[half.any(1)]]
    mstar, boot = float(boot[0]), boot[1:]
    finite = crit[np.isfinite(crit)]
    lo, hi = percentile_ci(boot)
    above = float(np.mean(np.isinf(boot)))
    if search != "grid" and n:   # the ceil(n/2)-th smallest critical m: its exact bootstrap
        support, p = order_statistic_bootstrap(crit, math.ceil(n / 2))
        (lo, hi), above = distribution_ci(support, p), float(p[np.isinf(support)].sum())
    return dict(model=model, T=T, n_seeds=n, m_star=mstar, m_star_lo=lo, m_star_hi=hi,
                m_star_boot=boot, m_star_above=above, unfinished=len(outcomes) - n,
                mean=float(finite.mean()) if len(finite) else np.inf,
                std=float(finite.std(ddof=1)) if len(finite) > 1 else 0.0,
                lo=float(finite.min()) if len(finite) else np.inf,
                hi=float(finite.max()) if len(finite) else np.inf,
                censored=int(n - len(finite)), per_seed=crit.tolist())


def majority_mstar(rows, grid=None):
    """Smallest m in grid at which at least half of the runs there succeeded, for rows of one T.

    With one run per (seed, m), as in the sweep, this is "at least half of the seeds that ran at
    m succeeded". m values of the grid with no runs are skipped; grid None = every m in rows.
    Returns a float, inf if no m qualifies."""
    d = _one_T(rows)
    grid = np.unique(d["m"]) if grid is None else check_reals("grid", grid)
    if grid.ndim != 1 or grid.size == 0 or np.isnan(grid).any():
        raise ValueError(f"grid must be a non-empty 1-D list of m values, got shape {grid.shape}"
                         + (" holding NaN" if np.isnan(grid).any() else ""))
    grid = np.sort(grid)
    for m in grid:
        at = d["m"] == m
        if at.any() and 2.0 * d["success"][at].sum() >= at.sum():
            return float(m)
    return math.inf


# ---------------------------------------------------------------- exact tests on counts --------
