"""stats.py (studies): the experiment's statistics, from which m grid to run to m* and its interval.

Numpy only; every function checks its input and raises a one-line ValueError that names the bad
value. It reads top to bottom:

  1. the m grid and the searches: which training-set sizes a seed runs (bisection on a grid of
     ratio 1.05, or the whole grid), and replaying a search over saved runs.
  2. rows: runs as dicts {"T", "seed", "m", "success"} or tuples (T, seed, m, success).
  3. the success curve: P(success | m) = sigmoid(a + b ln m) fitted to all runs of one T pooled
     (fit_success_curve); m50 and m90 where it crosses 0.5 and 0.9 (m_at).
  4. the bootstrap over seeds: 95% percentile intervals from resampling SEEDS, all runs of a
     drawn seed together (bootstrap_over_seeds, success_estimates), each T on its own (the
     design, below); exact where that is cheap: a median or an order statistic of one cell's
     seeds (median_bootstrap, order_statistic_bootstrap), or every resample of up to 11 seeds
     listed with its probability (seed_resamples). Elsewhere N_BOOT drawn resamples, and each
     bound carries its Monte Carlo band (Bound) so that it prints with no digit that band moves
     (mc_decimals, bound_text).
  5. m* by the majority rule, the paper's statistic: the smallest grid m at which at least half of
     the seeds succeed (critical_sizes for the sweep's searches, majority_mstar for plain rows).
  The laws across T and s fitted to these estimates (scaling_fits, growth_in_s, log_departure,
  paired ratios) are laws.py's.

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

The design: what a seed shares, and which cells are resampled together. A run's seed fixes the
task's support S, its training data, its test data and its init (training.study_streams, draw_run),
each from its own stream. At one T, seed i gives every cell the same S and the same training
examples (the first m of one stream: a larger m extends a smaller one's set), whatever the
width, the protocol or the number of steps, and the same init wherever the parameters have the
same shapes. At two different T, seed i shares no example: its inputs are the same coin flips cut
into rows of another length, and S is drawn among other positions, so its labels agree by
chance. The outcomes follow: the rank correlation (Spearman) of the seeds' critical m between
two T, averaged over the pairs of T, is 0.005 at d = 64 (results/extended, 45 pairs) and -0.03
at d = 128 (21 pairs), of parity's steps 0.02; between d = 64 and d = 128 at one T it is 0.19,
between parity's m = 2000 and 4000 at one T 0.29. Hence the resampling: cells at one T are
PAIRED by construction, and resample i draws the same seed labels in all of them (paired_ratio:
two protocols or two widths at one T); cells at different T are INDEPENDENT, and each T's seeds
are resampled on their own (a stratified bootstrap). Both come from one place,
resample_counts(n_seeds, T, n_boot, seed): its generator is seeded by the bootstrap's seed and
by T (stratum_rng), so two calls at one T draw the same resamples and two calls at different T
independent ones (test_seeds_pair_cells_at_one_T_and_nothing_across_T shows the data and the
draws). A fit across T (scaling_fits, log_departure, paired_growth's growth from T0 to T)
combines replicate i of each T, drawn independently, so no interval across T is exact: the
exact distributions (median_bootstrap, order_statistic_bootstrap, seed_resamples) are those of
one T's cell, or of cells paired at one T. Seeds are indexed by their sorted labels
(parse_rows), so an interval does not depend on the order of the rows, and the pairing at one T
holds wherever two sets of rows hold the same seeds.

The Monte Carlo band. A bound from B drawn resamples is the order statistic at q; drawn again it
moves by about s = sqrt(B q (1 - q)) places in the sorted resamples (one standard error). The
band a Bound carries is the order statistics MC_Z = 2 standard errors either side of it (about
95% of the bound's reruns fall inside it). A bound prints its last digit only where the whole
band spans at most MC_SPAN = half a unit of that digit (mc_decimals); a bound that loses digits so
is rounded outwards (a lower bound down, an upper bound up), so that a printed interval is never
narrower than the one measured, and a bound the band leaves without one figure prints as its
band's outer end, rounded outwards and marked "~" (bound_text: "~500" reaches at most about that
far; it is not a measured 500). Measured: rerun at other bootstrap seeds 1-9, the 84 drawn bounds
of results/extended and results/width/d-128 (m50, m90, the fits across T) printed another text
in 57 of 756 reruns, 7.5%, about 1 in 13; rounded to the nearest, as they were before, 49, 6.5%,
and under the band before that (one standard error, within a whole unit, to the nearest) 175,
23% (report.rerun_texts and report.rerun_changes measure it on a folder;
test_a_printed_bound_keeps_its_text_in_about_nineteen_reruns_of_twenty on drawn normal samples:
3.0% against 20% under the band before, both rounded outwards).
"""
import collections.abc
import decimal
import itertools
import math
import numbers

import numpy as np

from studies.lib.checks import INTS, check_number

N_BOOT = 100_000  # bootstrap resamples of the seeds behind every interval in a table: enough
                  # that most bounds keep their last digit (see mc_decimals)
MAX_BOOT = 10_000_000   # resamples in one call at most (the counts alone take 8 bytes a seed each)
MC_Z = 2          # a drawn bound's Monte Carlo band: this many standard errors either side of it
MC_SPAN = 0.5     # a printed digit's unit is at least 1 / MC_SPAN times its bound's band
RIDGE = 1e-3      # ridge strength on (centred intercept, slope); see the module docstring
MAX_ITER = 100    # Newton iterations cap (typical fits converge in 5-30)
EXACT_RESAMPLES = 400_000   # list every resample of the seeds up to this many (seed_resamples)
MAX_GRID = 100000  # sizes in one m grid at most (checked before the grid is built)
MAX_COUNTS = 10 ** 8   # n_boot * n_seeds at most in one seed_counts (32 bytes each while drawn)
MAX_DECIMALS = 350     # decimals a number prints with at most (the smallest float is 5e-324)
MAX_FLOAT = float(np.finfo(np.float64).max)   # an integer above it (10**400) is no float
NEWTON_TOL = 1e-10   # Newton stops when every step is below NEWTON_TOL * (1 + |parameter|)


# ---------------------------------------------------------------- 1. the m grid and the searches

def m_grid(lo, hi, ratio=1.05):
    """Integers from lo to hi, each about `ratio` times the last (every integer while that is
    finer): the candidate training-set sizes. lo and hi are integers with 1 <= lo <= hi (no
    bool), ratio a finite real number > 1; anything else is a one-line ValueError."""
    whole = lambda v: (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)))
    if not (whole(lo) and whole(hi) and 1 <= lo <= hi <= 2 ** 53):
        raise ValueError(f"m_grid: lo and hi must be integers with 1 <= lo <= hi <= 2**53, got "
                         f"lo={_show(lo)}, hi={_show(hi)}")
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
                         f"got {_show(grid)}")
    return grid


def replay(gen, saved, answer=None):
    """Drive a search generator over saved runs (saved[m] -> success), first sending `answer` to
    its pending question (None: start it). -> ("done", its answer) or ("run", the next m to run).
    The one place where saved runs are replayed: resuming a sweep and reading its results."""
    if not isinstance(gen, collections.abc.Generator):
        raise ValueError(f"gen must be a search's generator (bisect_search, grid_search), got "
                         f"{_show(gen)}")
    if not isinstance(saved, collections.abc.Mapping):
        raise ValueError(f"saved must be a dict {{m: success}} of saved runs, got {_show(saved)}")
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
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {_show(search)}")
    if not isinstance(results, collections.abc.Mapping):
        raise ValueError(f"results must be a dict {{m: success}} of saved runs, got "
                         f"{_show(results)}")
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
                         f"got {_show(rows)}")
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
        raise ValueError(f"z must be real numbers (an array or a number), got {_show(z)}")
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


class Bound(float):
    """A bound of a percentile interval from drawn resamples: a float that also carries `band`,
    the bound's Monte Carlo band as the pair (lower, upper) of order statistics MC_Z standard errors
    either side of it (about a 95% band), and `side` ("lo" or "hi"), for bound_text. Exact bounds
    (distribution_ci) are plain floats: they have no Monte Carlo error."""

    def __new__(cls, value, band, side):
        value = check_real("value", value)
        if not (isinstance(band, (tuple, list)) and len(band) == 2
                and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                        for v in band) and band[0] <= value <= band[1]):
            raise ValueError(f"band must be a pair (lower, upper) of numbers around value="
                             f"{value!r}, got {_show(band)}")
        if side not in ("lo", "hi"):
            raise ValueError(f"side must be 'lo' or 'hi', got {_show(side)}")
        out = super().__new__(cls, value)
        out.band, out.side = (float(band[0]), float(band[1])), side
        return out

    def __reduce__(self):               # copy and pickle keep the band (float's would drop it)
        return Bound, (float(self), self.band, self.side)


def percentile_ci(samples, lo=2.5, hi=97.5):
    """Percentile interval of bootstrap samples [B] (may hold +-inf, not NaN) -> (lo, hi) Bounds.

    Uses order statistics (the inverted-CDF percentile, no interpolation), so the bound at q is
    inf exactly when more than (100 - q)% of the samples are +inf: e.g. the upper 97.5% bound is
    inf iff more than 2.5% of the resamples are inf.
    Monte Carlo error: how many of B resamples fall below the true q-quantile is Binomial(B, q),
    with standard deviation s = sqrt(B q (1 - q)); so the bound drawn again from other resamples
    moves by about the spread of the order statistics s places either side of it. Each Bound
    carries the order statistics MC_Z * s places either side as its band, and bound_text prints
    no digit that band moves. lo and hi: percents with 0 <= lo < hi <= 100."""
    _check_percents(lo, hi)
    v = np.sort(check_reals("samples", samples).ravel())
    if v.size == 0 or np.isnan(v).any():
        raise ValueError(f"samples must be non-empty and NaN-free, got {v.size} values "
                         f"with {int(np.isnan(v).sum())} NaN")
    n, out = v.size, []
    for q, side in ((lo, "lo"), (hi, "hi")):
        k = min(max(math.ceil(q * n / 100.0 - 1e-9) - 1, 0), n - 1)
        s = math.ceil(MC_Z * math.sqrt(n * (q / 100.0) * (1.0 - q / 100.0)))
        out.append(Bound(v[k], (v[max(k - s, 0)], v[min(k + s, n - 1)]), side))
    return out[0], out[1]


def mc_decimals(x, decimals):
    """The decimals, at most `decimals`, that a number's Monte Carlo band allows: `decimals` for
    a plain float (exact: no such error); for a Bound, one fewer while its band (MC_Z standard
    errors either side of it) spans more than half a unit of the last decimal, so that the last
    digit printed is one a rerun at another bootstrap seed keeps (the module docstring measures
    how often it does; negative: tens, hundreds, ...). None when the band leaves the bound
    without one significant figure, or beside an infinite resample."""
    check_real("x", x, nan=True)
    _check_decimals(decimals)
    if not isinstance(x, Bound) or not math.isfinite(x):
        return decimals
    width, d = x.band[1] - x.band[0], decimals
    while math.isfinite(width) and width > MC_SPAN * 10.0 ** -d:
        d -= 1
    return d if math.isfinite(width) and (d == decimals or 10.0 ** -d <= abs(x)) else None


def bound_text(x, decimals):
    """A number as text with `decimals` decimals, but no digit finer than its Monte Carlo band
    (mc_decimals). A bound that loses digits so is rounded outwards, never narrowing its interval:
    down if a lower bound, up if an upper one, in exact decimals (a bound already at the kept
    digits prints as it is): 206.3 with a band of 204-208 prints as 210 if an upper bound
    ("at most 210", somewhere in 200-210) and 200 if a lower one. A bound its
    band leaves without one significant figure is widened to the outer end of its band (the upper
    end of an upper bound, the lower end of a lower bound), rounded outwards to a multiple of 1, 2
    or 5 x 10^k of which the band spans at most half (so a rerun keeps it) and marked "~" ("~500":
    the interval reaches at most that far, a bound not measured to its first figure), so the printed
    interval holds the one a rerun at another bootstrap seed gives in all but a few reruns (the
    module docstring measures it). Where that end is infinite, or more than twice as far from 0 as
    the inner end (a heavy tail, whose far end a rerun moves by a factor), an upper bound prints as
    "> a" and a lower bound as "< b", a and b the power of ten at or inside the inner end: known
    only to exceed a. Bounds of a million or more that lose digits print as 8.4e+06, rounded
    outwards in the same way. Plain floats (exact bounds, point estimates) and bounds that keep
    every decimal asked for print with `decimals` decimals, rounded to the nearest; infinities as
    inf and -inf."""
    v = check_real("x", x, nan=True)
    _check_decimals(decimals)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    d = mc_decimals(x, decimals)
    if d is None:
        hi = x.side == "hi"
        outer, inner = (x.band[1], x.band[0]) if hi else (x.band[0], x.band[1])
        far = not math.isfinite(outer) or (inner * outer > 0 and abs(outer) > 2 * abs(inner))
        end, sign = (inner, "> " if hi else "< ") if far else (outer, "~")
        if end == 0 or not math.isfinite(end):
            return f"{sign}{end:g}"
        if far:                     # the power of ten at or inside the inner end
            out = math.copysign(10.0 ** math.floor(math.log10(abs(end))), end)
            if (out < end) != hi:   # a negative inner end: inwards is the other way
                out *= 10.0
            return sign + (f"{out:.0e}" if abs(out) >= 1e6 else f"{out:g}")
        else:                       # the first of 1, 2, 5 x 10^k the band spans at most half of
            unit = 10.0 ** math.floor(math.log10(x.band[1] - x.band[0]))
            unit = next(u * unit for u in (1, 2, 5, 10, 20, 50)
                        if x.band[1] - x.band[0] <= MC_SPAN * u * unit)
        out = (math.ceil if hi == (sign == "~") else math.floor)(end / unit) * unit
        out = round(out, max(0, 1 - math.floor(math.log10(unit))))    # no 0.30000000000000004
        return sign + (f"{out:.1e}".replace(".0e", "e") if abs(out) >= 1e6 else f"{out:g}")
    if d < decimals:                # lost digits: outwards, never narrowing the interval
        out = _outwards(v, d, x.side == "hi")
        if abs(v) >= 1e6:
            mantissa, exp = f"{out:.{max(0, math.floor(math.log10(abs(v))) + d)}e}".split("e")
            return f"{mantissa}e{int(exp):+03d}"
        return f"{out:f}"
    return f"{v:.{d}f}" if d >= 0 else f"{round(v, d):.0f}"


def _outwards(v, d, up):
    """The float v rounded to d decimals (negative: tens, hundreds, ...), up (ceiling) or down
    (floor), as an exact decimal.Decimal: its shortest repr, so a value already at d decimals
    stays (1.3 at one decimal is 1.3, although 1.3 / 0.1 is 13.000000000000002 in floats)."""
    context = decimal.Context(prec=2 * MAX_DECIMALS + 400)     # every digit of any float at d
    return decimal.Decimal(repr(v)).quantize(
        decimal.Decimal(1).scaleb(-d), context=context,
        rounding=decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR)


def surely_above(lo, value):
    """True when a lower bound lies above `value` beyond its Monte Carlo error: the whole band of
    a Bound, a plain (exact) float itself. The tests of the pages (does an interval exclude 1,
    or 0?) use this and surely_below, so no word rests on a digit the resampling moves. A NaN
    bound (undefined) is above nothing."""
    check_real("lo", lo, nan=True)
    check_real("value", value)
    return (lo.band[0] if isinstance(lo, Bound) else lo) > value


def surely_below(hi, value):
    """True when an upper bound lies below `value` beyond its Monte Carlo error (surely_above)."""
    check_real("hi", hi, nan=True)
    check_real("value", value)
    return (hi.band[1] if isinstance(hi, Bound) else hi) < value


def median_bootstrap(values):
    """The exact bootstrap distribution of the median of n values resampled with replacement,
    from order statistics instead of random resamples -> (support [j], probabilities [j]), the
    support sorted and its values distinct. values: [n] floats, may hold +inf (a censored run).

    The median is np.median's: for odd n the middle order statistic (order_statistic_bootstrap),
    for even n the mean of the two middle ones. Sort the values v_1 <= ... <= v_n and let C_p be
    how many of the n draws land on positions 1..p; C_p ~ Binomial(n, p/n), and given C_p the
    remaining draws fall uniformly on positions p+1..n. With k = n / 2, the two middle order
    statistics are (v_p, v_q), p < q, exactly when C_{p-1} < k, C_p = k = C_{q-1} and C_q > k;
    both are v_p when C_{p-1} < k < C_p. Each event is a sum of binomial terms, O(n^3) in all, so
    the bound carries no Monte Carlo error; tied values are merged at the end."""
    v = np.sort(check_reals("values", values).ravel())
    n = v.size
    if n == 0 or np.isnan(v).any() or (v == -np.inf).any():
        raise ValueError(f"values must be non-empty, NaN-free and > -inf, got {v.size} values")
    if n % 2:
        return order_statistic_bootstrap(v, (n + 1) // 2)
    binom = lambda N, p, j: math.comb(N, j) * p ** j * (1.0 - p) ** (N - j)
    before = lambda p, a: binom(n, (p - 1) / n, a)          # P(C_{p-1} = a), positions 1-based
    on_p = lambda p, a, j: binom(n - a, 1.0 / (n - p + 1), j)   # P(N_p = j | C_{p-1} = a)
    k, prob = n // 2, {}
    add = lambda x, w: prob.__setitem__(x, prob.get(x, 0.0) + w)
    for p in range(1, n + 1):
        add(v[p - 1], sum(before(p, a) * sum(on_p(p, a, j) for j in range(k + 1 - a, n - a + 1))
                          for a in range(k)))                # C_{p-1} < k < C_p
        if p == n:
            continue
        at_k = sum(before(p, a) * on_p(p, a, k - a) for a in range(k))    # C_{p-1} < k = C_p
        for q in range(p + 1, n + 1):                        # none on p+1..q-1, one or more on q
            none = ((n - q + 1) / (n - p)) ** (n - k)
            some = 1.0 - ((n - q) / (n - q + 1)) ** (n - k)
            add((v[p - 1] + v[q - 1]) / 2.0, at_k * none * some)
    support = np.array(sorted(prob))
    return support, np.array([prob[x] for x in support])


def order_statistic_bootstrap(values, k):
    """The exact bootstrap distribution of the k-th smallest (1-based) of n values resampled with
    replacement -> (support [j], probabilities [j]), the support the distinct values, sorted.
    The k-th smallest draw is at most v exactly when k or more of the n draws are, so
    P(X_(k) <= v) = P(Binomial(n, F(v)) >= k), F(v) the share of the values at most v. Majority
    m* after bisection is such a statistic: the ceil(n/2)-th smallest critical m of the seeds."""
    v = np.sort(check_reals("values", values).ravel())
    n, k = v.size, _check_count("k", k)
    if n == 0 or np.isnan(v).any() or not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n NaN-free values, got k = {k} and {n} values")
    support = np.unique(v)
    at_most = lambda x: float(np.sum(v <= x)) / n
    cdf = np.array([sum(math.comb(n, j) * at_most(x) ** j * (1 - at_most(x)) ** (n - j)
                        for j in range(k, n + 1)) for x in support])
    return support, np.diff(np.concatenate([[0.0], cdf]))


def distribution_ci(support, p, lo=2.5, hi=97.5):
    """95% percentile interval of an exact bootstrap distribution (support sorted, p its
    probabilities) -> (lo, hi) floats: the bound at q is the smallest value whose probability of
    lying at or below it reaches q%, the rule percentile_ci applies to drawn resamples."""
    _check_percents(lo, hi)
    support, p = check_reals("support", support), check_reals("p", p)
    if support.ndim != 1 or support.size == 0 or p.shape != support.shape:
        raise ValueError(f"support and p must be 1-D of the same non-zero length, got shapes "
                         f"{support.shape}, {p.shape}")
    if np.isnan(support).any() or (np.diff(support) < 0).any():
        raise ValueError("support must be sorted and NaN-free")
    if not (np.isfinite(p).all() and (p >= 0).all() and p.sum() > 0):
        raise ValueError("p must be finite probabilities >= 0, not all 0")
    cdf = np.cumsum(p)
    at = lambda q: min(int(np.searchsorted(cdf, q / 100.0 - 1e-12)), support.size - 1)
    return float(support[at(lo)]), float(support[at(hi)])


def median_ci(values, lo=2.5, hi=97.5):
    """95% percentile interval of the bootstrap median of `values`, computed exactly
    (median_bootstrap, distribution_ci): no resampling error."""
    _check_percents(lo, hi)
    return distribution_ci(*median_bootstrap(values), lo, hi)


def exact_resamples(n_seeds):
    """True when every resample of n_seeds seeds can be listed (seed_resamples): the multisets
    of n draws from n seeds number C(2n - 1, n), 92,378 for 10 seeds, 352,716 for 11."""
    n_seeds = _check_count("n_seeds", n_seeds)      # C(2n - 1, n) >= 2^(n - 1): no huge comb
    return n_seeds <= EXACT_RESAMPLES.bit_length() and \
        math.comb(2 * n_seeds - 1, n_seeds) <= EXACT_RESAMPLES


def seed_resamples(n_seeds, n_boot=None, rng=None, exact=True):
    """The resamples of n_seeds seeds as counts and probabilities -> (C [K, n_seeds], w [K]).

    Where exact_resamples(n_seeds) (and exact), every multiset of n draws with its multinomial
    probability n! / (prod c_i! n^n): a statistic of the resample then has its bootstrap
    distribution exactly, with no Monte Carlo error, and any two calls list the same resamples in
    the same order (so two folders' statistics at one T stay paired; across T the design draws
    each T on its own, exact=False, the module docstring). Otherwise n_boot
    random resamples (rng, default np.random.default_rng(0); n_boot, default N_BOOT) of weight
    1 / n_boot each. One seed has one resample: itself, with probability 1."""
    n = _check_count("n_seeds", n_seeds)
    n_boot = _check_count("n_boot", N_BOOT if n_boot is None else n_boot, MAX_BOOT)
    rng = np.random.default_rng(0) if rng is None else _check_generator(rng)
    if not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True or False, got {_show(exact)}")
    if not (exact and exact_resamples(n)):
        return seed_counts(rng, n, n_boot), np.full(n_boot, 1.0 / n_boot)
    bars = list(itertools.combinations(range(2 * n - 1), n - 1))
    bars = np.array(bars, dtype=np.int64).reshape(len(bars), n - 1)   # stars and bars: n - 1
                                                   # bars among 2n - 1 slots (none for one seed)
    ends = np.ones((bars.shape[0], 1), dtype=np.int64)
    C = np.diff(np.hstack([-ends, bars, (2 * n - 1) * ends]), axis=1) - 1   # [K, n], rows sum to n
    lgam = np.array([math.lgamma(c + 1) for c in range(n + 1)])
    w = np.exp(math.lgamma(n + 1) - lgam[C].sum(1) - n * math.log(n))
    return C.astype(float), w / w.sum()


def resample_medians(values, C):
    """np.median of each resample given by counts C [K, n] over values [n] (may hold +inf) ->
    [K]: the middle order statistic, or the mean of the two for an even number of draws."""
    v, C = check_reals("values", values), check_reals("C", C)
    if v.ndim != 1 or v.size == 0 or np.isnan(v).any():
        raise ValueError(f"values must be 1-D, non-empty and NaN-free, got shape {v.shape}")
    if C.ndim != 2 or C.shape[0] == 0 or C.shape[1] != v.size or not (C >= 0).all():
        raise ValueError(f"C must be counts >= 0 of shape [K >= 1, n={v.size}], got shape "
                         f"{C.shape}")
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(C[:, order], axis=1)                   # draws at or below each sorted value
    n = int(round(cum[0, -1]))
    if n < 1 or (cum[:, -1] != cum[0, -1]).any():
        raise ValueError("C must hold the same number (>= 1) of draws in every row")
    at = lambda k: v[order][np.argmax(cum >= k, axis=1)]   # the k-th order statistic (1-based)
    return at((n + 1) // 2) if n % 2 else (at(n // 2) + at(n // 2 + 1)) / 2.0


def weighted_percentile_ci(samples, weights, lo=2.5, hi=97.5):
    """percentile_ci for samples [K] with probabilities weights [K] (renormalised to sum 1): the
    bound at q is the smallest sample whose cumulative probability reaches q%. With equal weights
    it is percentile_ci's order statistic."""
    _check_percents(lo, hi)
    x, w = check_reals("samples", samples).ravel(), check_reals("weights", weights).ravel()
    if x.size == 0 or x.size != w.size or np.isnan(x).any() or not (
            np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
        raise ValueError(f"samples and weights must be non-empty, NaN-free and alike in size, got "
                         f"{x.size} samples and {w.size} weights")
    if (w == w[0]).all():          # drawn resamples: percentile_ci, with its Monte Carlo error
        return percentile_ci(x, lo, hi)
    order = np.argsort(x, kind="stable")
    return distribution_ci(x[order], w[order] / w.sum(), lo, hi)


def _show(v):  # what a caller gave, in a few words
    return f"an array of shape {v.shape} and dtype {v.dtype}" if isinstance(v, np.ndarray) \
        else f"{v!r:.60}" if isinstance(v, (type(None), numbers.Number, str, list, tuple, dict)) \
        else f"an object of type {type(v).__name__}"


def check_real(name, v, nan=False):
    """v as a float when it is a real number (no bool, no text), NaN only where `nan`; +-inf
    passes (the caller bounds it). Else one line naming it."""
    if not (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))) or (
            isinstance(v, numbers.Integral) and abs(v) > MAX_FLOAT) or (not nan and math.isnan(v)):
        raise ValueError(f"{name} must be a real number{'' if nan else ', not NaN'}, got "
                         f"{_show(v)}")
    return float(v)


def check_reals(name, v, bools=False):
    """v as a float64 array when it holds real numbers (an array, a number or a list of them;
    bools only where `bools`); the caller checks shapes and values. Else one line naming it."""
    try:
        a = np.asarray(v)
    except (ValueError, TypeError):             # a ragged list
        a = np.empty(0, dtype=object)
    if a.dtype.kind not in ("iufb" if bools else "iuf"):
        raise ValueError(f"{name} must be real numbers (an array, a number or a list), got "
                         f"{_show(v)}")
    return a.astype(np.float64, copy=False)


def _check_decimals(decimals):
    if not (isinstance(decimals, numbers.Integral) and not isinstance(decimals, (bool, np.bool_))
            and -MAX_DECIMALS <= decimals <= MAX_DECIMALS):
        raise ValueError(f"decimals must be an integer from {-MAX_DECIMALS} to {MAX_DECIMALS}, "
                         f"got {_show(decimals)}")


def _check_generator(rng):
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got "
                         f"{_show(rng)}")
    return rng


def _check_count(name, v, most=None):
    """v as an int when it is an integer >= 1 (no bool) and at most `most`; else one line."""
    if not (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) and v >= 1
            and (most is None or v <= most)):
        raise ValueError(f"{name} must be an integer from 1" + (
            f" to {most:,}" if most else "") + f", got {v!r}")
    return int(v)


def _check_percents(lo, hi):
    """lo and hi of a percentile interval: real numbers with 0 <= lo < hi <= 100."""
    for name, v in (("lo", lo), ("hi", hi)):
        if not (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                and 0 <= v <= 100):
            raise ValueError(f"{name} must be a percent from 0 to 100, got {v!r}")
    if not lo < hi:
        raise ValueError(f"lo must be below hi, got lo={lo!r}, hi={hi!r}")


def stratum_rng(T, seed=0):
    """The generator of the seed resamples at context length T: seeded by the bootstrap's seed
    (an integer >= 0) and by T's value, so two calls at one T give the same resamples (the cells
    there are paired) and two calls at different T independent ones (the module docstring)."""
    if not (isinstance(seed, numbers.Integral) and not isinstance(seed, (bool, np.bool_))
            and seed >= 0):
        raise ValueError(f"seed must be an integer >= 0 (the bootstrap's seed), got {seed!r}")
    t = float(T) if isinstance(T, numbers.Real) and not isinstance(T, (bool, np.bool_)) and \
        not (isinstance(T, numbers.Integral) and T > MAX_FLOAT) else 0.0
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"T must be a positive finite number, got {_show(T)}")
    words = np.frombuffer(np.float64(t).tobytes(), dtype=np.uint32)     # T's exact value
    return np.random.default_rng([int(seed), 37, *(int(w) for w in words)])


def resample_counts(n_seeds, T, n_boot=None, seed=0):  # -> [n_boot, n_seeds]
    """The design's resamples of the seeds at context length T, as counts: n_boot (default
    N_BOOT) draws of n_seeds labels with replacement from stratum_rng(T, seed). The same at one
    T (paired cells), independent across T (a stratified bootstrap)."""
    n_boot = _check_count("n_boot", N_BOOT if n_boot is None else n_boot, MAX_BOOT)
    return seed_counts(stratum_rng(T, seed), _check_count("n_seeds", n_seeds), n_boot)


def seed_counts(rng, n_seeds, n_boot):
    """[n_boot, n_seeds] multiplicity of each seed in each resample of n_seeds seeds (at most
    MAX_COUNTS of them: their memory is checked first)."""
    rng = _check_generator(rng)
    n_seeds = _check_count("n_seeds", n_seeds)
    n_boot = _check_count("n_boot", n_boot, MAX_BOOT)
    if n_boot * n_seeds > MAX_COUNTS:
        raise ValueError(f"n_boot * n_seeds must be at most {MAX_COUNTS:,} (the counts' memory), "
                         f"got n_boot={n_boot:,} and n_seeds={n_seeds:,}")
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
    n_boot = _check_count("n_boot", n_boot, MAX_BOOT)
    rng = np.random.default_rng(0) if rng is None else _check_generator(rng)
    if not callable(stat):
        raise ValueError(f"stat must be a function (a [B], b [B]) -> {{name: [B]}}, got "
                         f"{_show(stat)}")
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
    m_star_boot holds the seed bootstrap of success_estimates (the same N_BOOT resamples,
    resample_counts at this T with seed 0), m* recomputed by the same rule on each, for
    scaling_fits; they are drawn independently at each T (the design, module docstring).
    """
    if not (isinstance(search, str) and search in SEARCHES):
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {_show(search)}")
    if not isinstance(grid_by_model, collections.abc.Mapping):
        raise ValueError(f"grid_by_model must be a dict {{model: its m grid}}, got "
                         f"{_show(grid_by_model)}")
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
                             f"{_show(r)}")
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
    boot = np.full(1 + N_BOOT, np.inf)
    if n:
        C = np.vstack([np.ones(n), resample_counts(n, T, N_BOOT, 0)])
        half = (C @ wins) >= n / 2                              # [1 + N_BOOT, n_grid]
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

def sign_test(lost, gained):
    """Two-sided exact sign test: P(a Binomial(n, 1/2) count as far from n/2 as `lost`)."""
    lost, gained = (check_number(k, v, INTS, 0, 10**6 + 1, "a count from 0 to 10**6")
                    for k, v in (("lost", lost), ("gained", gained)))
    n, k = lost + gained, min(lost, gained)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def fisher_exact(a, b, c, d):
    """Two-sided Fisher exact test of the 2x2 table [[a, b], [c, d]]: the probability, given the
    margins, of a table no more likely than this one (integer arithmetic: ties are exact)."""
    a, b, c, d = (check_number(k, v, INTS, 0, 10**6 + 1, "a count from 0 to 10**6")
                  for k, v in (("a", a), ("b", b), ("c", c), ("d", d)))
    r1, c1, n = a + b, a + c, a + b + c + d
    ways = lambda x: math.comb(c1, x) * math.comb(n - c1, r1 - x)   # tables with a = x
    here = ways(a)
    return sum(w for w in map(ways, range(max(0, r1 + c1 - n), min(r1, c1) + 1))
               if w <= here) / math.comb(n, r1)
