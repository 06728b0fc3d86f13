"""intervals.py (studies/lib): the intervals every table prints, and the exact tests on counts.

Numpy only; every function checks its input and raises a one-line ValueError that names the bad
value. Intervals are 95% percentile intervals from resampling SEEDS (a drawn seed brings all its
runs), exact where that is cheap: a median or an order statistic of one cell's seeds
(median_bootstrap, order_statistic_bootstrap), or every resample of up to 11 seeds listed with
its probability (seed_resamples). Elsewhere N_BOOT drawn resamples, and each bound carries its
Monte Carlo band (Bound) so that it prints with no digit that band moves (mc_decimals,
bound_text). The exact tests: the sign test on discordant pairs and Fisher's test of a 2x2
table. stats.py's estimators (m50, m90, m*) and laws.py's fits draw their intervals here.

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
import decimal
import itertools
import math
import numbers

import numpy as np

from studies.lib.checks import INTS, check_number, describe


N_BOOT = 100_000  # bootstrap resamples of the seeds behind every interval in a table: enough


                  # that most bounds keep their last digit (see mc_decimals)
MAX_BOOT = 10_000_000   # resamples in one call at most (the counts alone take 8 bytes a seed each)


MC_Z = 2          # a drawn bound's Monte Carlo band: this many standard errors either side of it


MC_SPAN = 0.5     # a printed digit's unit is at least 1 / MC_SPAN times its bound's band


EXACT_RESAMPLES = 400_000   # list every resample of the seeds up to this many (seed_resamples)


MAX_COUNTS = 10 ** 8   # n_boot * n_seeds at most in one seed_counts (32 bytes each while drawn)


MAX_DECIMALS = 350     # decimals a number prints with at most (the smallest float is 5e-324)


MAX_FLOAT = float(np.finfo(np.float64).max)   # an integer above it (10**400) is no float


# ---------------------------------------------------------------- a bound, and the text it prints ---

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
                             f"{value!r}, got {describe(band)}")
        if side not in ("lo", "hi"):
            raise ValueError(f"side must be 'lo' or 'hi', got {describe(side)}")
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
    x = check_reals("samples", samples).ravel()
    if x.size == 0 or np.isnan(x).any():
        raise ValueError(f"samples must be non-empty and NaN-free, got {x.size} values "
                         f"with {int(np.isnan(x).sum())} NaN")
    n, at = x.size, []
    for q in (lo, hi):
        k = min(max(math.ceil(q * n / 100.0 - 1e-9) - 1, 0), n - 1)
        s = math.ceil(MC_Z * math.sqrt(n * (q / 100.0) * (1.0 - q / 100.0)))
        at.append((k, max(k - s, 0), min(k + s, n - 1)))
    # the six order statistics alone (a partition, not a sort: a fifth of the time at 20,000
    # resamples); equal floats are the same bits but for 0 and -0, so where one is 0 the sort
    # picks it, as it always did
    v = np.partition(x, sorted({i for ks in at for i in ks}))
    if any(v[i] == 0 for ks in at for i in ks):
        v = np.sort(x)
    return tuple(Bound(v[k], (v[a], v[b]), side) for (k, a, b), side in zip(at, ("lo", "hi")))


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


# ---------------------------------------------------------------- exact and weighted intervals ---

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
    n, k = v.size, check_count("k", k)
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
    n_seeds = check_count("n_seeds", n_seeds)      # C(2n - 1, n) >= 2^(n - 1): no huge comb
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
    n = check_count("n_seeds", n_seeds)
    n_boot = check_count("n_boot", N_BOOT if n_boot is None else n_boot, MAX_BOOT)
    rng = np.random.default_rng(0) if rng is None else check_generator(rng)
    if not isinstance(exact, (bool, np.bool_)):
        raise ValueError(f"exact must be True or False, got {describe(exact)}")
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


# ---------------------------------------------------------------- argument checks --------------

def check_real(name, v, nan=False):
    """v as a float when it is a real number (no bool, no text), NaN only where `nan`; +-inf
    passes (the caller bounds it). Else one line naming it."""
    if not (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))) or (
            isinstance(v, numbers.Integral) and abs(v) > MAX_FLOAT) or (not nan and math.isnan(v)):
        raise ValueError(f"{name} must be a real number{'' if nan else ', not NaN'}, got "
                         f"{describe(v)}")
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
                         f"{describe(v)}")
    return a.astype(np.float64, copy=False)


def _check_decimals(decimals):
    if not (isinstance(decimals, numbers.Integral) and not isinstance(decimals, (bool, np.bool_))
            and -MAX_DECIMALS <= decimals <= MAX_DECIMALS):
        raise ValueError(f"decimals must be an integer from {-MAX_DECIMALS} to {MAX_DECIMALS}, "
                         f"got {describe(decimals)}")


def check_generator(rng):
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got "
                         f"{describe(rng)}")
    return rng


def check_count(name, v, most=None):
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


# ---------------------------------------------------------------- the design: which cells draw the same resamples ---

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
        raise ValueError(f"T must be a positive finite number, got {describe(T)}")
    words = np.frombuffer(np.float64(t).tobytes(), dtype=np.uint32)     # T's exact value
    return np.random.default_rng([int(seed), 37, *(int(w) for w in words)])


def resample_counts(n_seeds, T, n_boot=None, seed=0):  # -> [n_boot, n_seeds]
    """The design's resamples of the seeds at context length T, as counts: n_boot (default
    N_BOOT) draws of n_seeds labels with replacement from stratum_rng(T, seed). The same at one
    T (paired cells), independent across T (a stratified bootstrap)."""
    n_boot = check_count("n_boot", N_BOOT if n_boot is None else n_boot, MAX_BOOT)
    return seed_counts(stratum_rng(T, seed), check_count("n_seeds", n_seeds), n_boot)


def seed_counts(rng, n_seeds, n_boot):
    """[n_boot, n_seeds] multiplicity of each seed in each resample of n_seeds seeds (at most
    MAX_COUNTS of them: their memory is checked first)."""
    rng = check_generator(rng)
    n_seeds = check_count("n_seeds", n_seeds)
    n_boot = check_count("n_boot", n_boot, MAX_BOOT)
    if n_boot * n_seeds > MAX_COUNTS:
        raise ValueError(f"n_boot * n_seeds must be at most {MAX_COUNTS:,} (the counts' memory), "
                         f"got n_boot={n_boot:,} and n_seeds={n_seeds:,}")
    idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    flat = (idx + n_seeds * np.arange(n_boot)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n_seeds).reshape(n_boot, n_seeds).astype(float)


# ---------------------------------------------------------------- exact tests on counts ---------

def sign_test(lost, gained):
    """Two-sided exact sign test: P(a Binomial(n, 1/2) count as far from n/2 as `lost`)."""
    lost, gained = (check_number(k, v, INTS, 0, 10**6 + 1, "a count from 0 to 10**6")
                    for k, v in (("lost", lost), ("gained", gained)))
    n, k = lost + gained, min(lost, gained)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def exact_rate(k, n, level=0.95):
    """Clopper-Pearson's exact interval (lo, hi) for a rate seen k times in n trials: the p at
    which P(X >= k) and P(X <= k) under Binomial(n, p) are (1 - level) / 2, found by bisection on
    the binomial's distribution function summed in log space (lo = 0 at k = 0, hi = 1 at k = n)."""
    n = check_number("n", n, INTS, 1, 10**6 + 1, "an integer from 1 to 10**6")
    k = check_number("k", k, INTS, 0, n + 1, f"an integer from 0 to n = {n}")
    level = check_number("level", level, (float,), 0.5, 1.0, "a number in [0.5, 1)")
    tail = (1.0 - level) / 2

    def cdf(j, p):                            # P(X <= j), X ~ Binomial(n, p), 0 < p < 1
        logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(j + 1)]
        top = max(logs)
        return math.exp(top) * sum(math.exp(v - top) for v in logs)

    def root(f):                              # f rises from < 0 to > 0 on (0, 1)
        a, b = 0.0, 1.0
        for _ in range(200):
            mid = (a + b) / 2
            a, b = (mid, b) if f(mid) < 0 else (a, mid)
        return (a + b) / 2

    lo = 0.0 if k == 0 else root(lambda p: (1.0 - cdf(k - 1, p)) - tail)
    hi = 1.0 if k == n else root(lambda p: tail - cdf(k, p))
    return lo, hi


def holm(ps):
    """Holm's step-down adjustment of the p-values `ps` (a family's tests, in any order): the
    k-th smallest times (n - k + 1), made non-decreasing, capped at 1; [n] -> [n], in ps' order."""
    ps = check_reals("ps", ps).ravel().tolist()
    if not all(0.0 <= p <= 1.0 for p in ps):
        raise ValueError(f"ps must be p-values in [0, 1], got {describe(ps)}")
    out, run = [0.0] * len(ps), 0.0
    for k, i in enumerate(sorted(range(len(ps)), key=ps.__getitem__)):
        run = max(run, min(1.0, (len(ps) - k) * ps[i]))
        out[i] = run
    return out


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
