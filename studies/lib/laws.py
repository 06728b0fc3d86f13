"""laws.py (studies/lib): laws across T and s, fitted to the estimates stats.py makes.

m50(T) against ln T, T and T^k with paired bootstrap intervals and AIC (scaling_fits); m50(s) as
a power law or an exponential (growth_in_s); where a curve leaves the log law it follows at small
T (log_departure); and paired ratios of two protocols on the same seeds (paired_ratio,
paired_growth). Each takes the bootstrap replicates stats.success_estimates returns beside each
estimate, so the fits' intervals resample the seeds as the estimates did (stats.py's design).
"""
import collections.abc
import math
import numbers

import numpy as np

from studies.lib.checks import describe
from studies.lib.intervals import check_real, check_reals, percentile_ci, surely_above



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


def _check_curve(name, x, m50, m50_boot):
    """The checks scaling_fits and growth_in_s share: x [n] (T or s) >= 3 distinct positive values,
    m50 [n] finite and > 0, m50_boot [n, B]. -> (x, m50, boot as float arrays, keep [B]: the
    replicates whose every value is finite and > 0)."""
    x, m50 = check_reals(name, x), check_reals("m50", m50)
    show = lambda v: f"[{', '.join(f'{u:g}' for u in v)}]"
    if x.ndim != 1 or x.shape != m50.shape:
        raise ValueError(f"{name} and m50 must be 1-D of the same length, got {x.shape}, "
                         f"{m50.shape}")
    if not (np.isfinite(x).all() and (x > 0).all()) or np.unique(x).size != x.size or x.size < 3:
        raise ValueError(f"{name} must hold >= 3 distinct positive finite values, got {show(x)}")
    bad = ~(np.isfinite(m50) & (m50 > 0))
    if bad.any():
        raise ValueError(f"m50 must be finite and > 0 at every {name}, got m50={m50[bad].tolist()} "
                         f"at {name}={show(x[bad])}")
    try:
        boot = np.asarray(m50_boot)
    except ValueError:
        raise ValueError(f"m50_boot must be [n_{name}, B]: every {name} needs the same number B "
                         f"of replicates") from None
    boot = check_reals("m50_boot", boot)
    if boot.ndim != 2 or boot.shape[0] != x.size or boot.shape[1] < 1:
        raise ValueError(f"m50_boot must have shape [n_{name}={x.size}, B >= 1], got {boot.shape}")
    with np.errstate(invalid="ignore"):
        keep = (np.isfinite(boot) & (boot > 0)).all(0)
    return x, m50, boot, keep


def scaling_fits(T, m50, m50_boot):
    """Fits of m50(T) across T with stratified-bootstrap 95% CIs.

    T [n] distinct positive context lengths, n >= 3; m50 [n] point estimates (finite, > 0);
    m50_boot [n, B] bootstrap replicates of m50 at each T (e.g. success_estimates(...)["m50_boot"]
    for each T, same B). Replicate i combines one resample of each T's seeds, drawn independently
    at each T (the design in the module docstring: a seed shares nothing across T; the callers
    draw with resample_counts, success_estimates or critical_sizes). A replicate with any non-finite
    or non-positive value (an m50 or m* above every m tried), or one so large that its fits
    overflow, has no fit: it is dropped and counted against both bounds, so a bound is +-inf once
    more than 2.5% of the replicates are dropped (an interval of the kept ones alone would be
    conditional on the value lying within the grid).
    Models (least squares, fit_line): log  m = a + b ln T;  lin  m = a + b T;
    pow  ln m = ln a + k ln T. daic = AIC(log) - AIC(lin) (Gaussian, n ln(RSS/n) + 2*2 each);
    negative favours the log model.
    Returns a dict: for name in (log_b, lin_b, pow_k, daic): name, name_lo, name_hi; log_a,
    lin_a, pow_a (point estimates; pow_a = a of a T^k), log_r2, lin_r2, pow_r2,
    p_log_better (fraction of kept replicates with daic < 0; None if none kept), n_T, n_boot,
    n_dropped."""
    T, m50, boot, keep = _check_curve("T", T, m50, m50_boot)
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
    n_out = out["n_dropped"]                   # counted against both bounds, as in growth_in_s
    for name, get in pick.items():
        out[name] = float(np.ravel(get(point))[0])
        v = get(reps)[ok] if ok.any() else np.empty(0)
        out[name + "_lo"] = percentile_ci(np.append(v, np.full(n_out, -np.inf)))[0]
        out[name + "_hi"] = percentile_ci(np.append(v, np.full(n_out, np.inf)))[1]
    out.update(log_a=point["log"][1], lin_a=point["lin"][1], pow_a=math.exp(point["pow"][1]),
               log_r2=point["log"][2], lin_r2=point["lin"][2], pow_r2=point["pow"][2],
               p_log_better=float(np.mean(reps["daic"][ok] < 0)) if ok.any() else None)
    return out


def growth_in_s(s, m50, m50_boot):
    """How m50 grows with the sparsity s at one T: a power law or an exponential, with
    bootstrap 95% CIs (the theory: weight norms poly(s) for symmetric functions, 2^O(s) for
    arbitrary ones).

    s [n] distinct sparsities, n >= 3 (with 3, each model keeps one residual degree of freedom: read
    its AIC with care); m50 [n] finite and > 0; m50_boot [n, B], independent across s (replicate i
    resamples seed indices i at every s: paired where the folders hold the same seeds). A replicate
    with a value that is not finite and positive (an m50 above the grid) has no fit: it is dropped
    and counted against both bounds, so a bound is +-inf once more than 2.5% of the replicates are
    dropped. Both models fit ln m50 by least squares, so their AIC compare:
    power  ln m = ln a + k ln s;  exponential  ln m = ln a + s ln b.  daic = AIC(power) -
    AIC(exponential), negative favours the power law. At one T the folders of different s are
    paired (a seed gives them the same inputs X and, at one width, the same init). -> dict: pow_k,
    exp_b, daic, each with _lo and _hi; pow_a, exp_a, p_power_better (fraction of kept replicates
    with daic < 0, None if none kept), n_s, n_boot, n_dropped."""
    s, m50, boot, keep = _check_curve("s", s, m50, m50_boot)

    def fits(Y):                                   # Y [n, B] > 0 -> (k, ln a, ln b, ln a', daic)
        n, lY = s.size, np.log(Y)
        (k, c_pow), (lb, c_exp) = np.polyfit(np.log(s), lY, 1), np.polyfit(s, lY, 1)
        rss = [np.maximum(((lY - (sl * x[:, None] + c)) ** 2).sum(0), np.finfo(float).tiny)
               for sl, c, x in ((k, c_pow, np.log(s)), (lb, c_exp, s))]
        return k, c_pow, lb, c_exp, n * np.log(rss[0] / n) - n * np.log(rss[1] / n)

    k, c_pow, lb, c_exp, daic = (float(v[0]) for v in fits(m50[:, None]))
    out = dict(pow_k=k, pow_a=math.exp(c_pow), exp_b=math.exp(lb), exp_a=math.exp(c_exp),
               daic=daic, n_s=int(s.size), n_boot=int(boot.shape[1]),
               n_dropped=int(boot.shape[1] - keep.sum()), p_power_better=None)
    for name in ("pow_k", "exp_b", "daic"):
        out[name + "_lo"], out[name + "_hi"] = -math.inf, math.inf
    if keep.any():
        rk, _, rlb, _, rd = fits(boot[:, keep])
        n_out = out["n_dropped"]
        for name, v in (("pow_k", rk), ("exp_b", np.exp(rlb)), ("daic", rd)):
            out[name + "_lo"] = percentile_ci(np.append(v, np.full(n_out, -np.inf)))[0]
            out[name + "_hi"] = percentile_ci(np.append(v, np.full(n_out, np.inf)))[1]
        out["p_power_better"] = float(np.mean(rd < 0))
    return out


def log_departure(T, m50, m50_boot, fit_below):
    """Where a curve m50(T) leaves the log law it follows at small T.

    T [n] distinct context lengths; m50 [n]; m50_boot [n, B] bootstrap replicates, drawn
    independently at each T (as in scaling_fits). Fits m50 ~ a + b ln T over the
    T <= fit_below (at least 2 of them), in every replicate too, and divides each larger T's m50
    by the fit's extrapolation a + b ln T: ratio [95% CI] (replicates whose small-T values are not
    finite and positive, or whose extrapolation is not positive, are dropped; an m50 above every m
    tried gives an inf ratio, which counts as above). The departure is the first larger T whose
    whole interval lies above 1, beyond its Monte Carlo error (surely_above): m50 grows faster
    there than the small-T log law, at 95% confidence. -> dict(a, b (nan when a small-T m50 is
    not finite), ratios {T: (ratio, lo, hi)}, departs: that T or None)."""
    T, m50 = check_reals("T", T), check_reals("m50", m50)
    boot, fit_below = check_reals("m50_boot", m50_boot), check_real("fit_below", fit_below)
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
        if departs is None and surely_above(lo, 1.0):
            departs = int(T[i])
    return dict(a=float(a), b=float(b), ratios=ratios, departs=departs)


def paired_growth(e, ref, e0, ref0):
    """How a paired ratio changes with T: (m50 / ref's m50) at one T over the same at T0, with a
    95% bootstrap CI. All four are success_estimates of the same seeds with the same n_boot and
    bootstrap seed, so replicate i resamples the same seeds in both folders at one T (paired by
    construction) and independent resamples at T and at T0 (the design): a constant offset between
    the two (one width needing 1.2 times the other's samples at every T) cancels, and an interval
    above 1 says the first loses ground as T grows. Replicates whose value is undefined are dropped.
    -> (growth, lo, hi)."""
    _check_estimates(e=e, ref=ref, e0=e0, ref0=ref0)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (np.asarray(e["m50_boot"]) / np.asarray(ref["m50_boot"])) / (
            np.asarray(e0["m50_boot"]) / np.asarray(ref0["m50_boot"]))
        point = (e["m50"] / ref["m50"]) / (e0["m50"] / ref0["m50"])
    q = q[~np.isnan(q)]
    return (float(point),) + (percentile_ci(q) if q.size else (math.nan, math.nan))


def paired_ratio(e, ref):
    """m50 of one protocol over a reference's at one T, with a paired 95% bootstrap CI.

    e, ref: success_estimates of the same seeds with the same n_boot and bootstrap seed, so
    replicate i of both resamples the same seeds (parse_rows orders seeds by label): the ratio's
    interval then carries only the protocols' difference, not the seeds' shared luck. Replicates
    whose ratio is undefined (inf / inf, 0 / 0) are dropped. -> (ratio, lo, hi)."""
    _check_estimates(e=e, ref=ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.asarray(e["m50_boot"]) / np.asarray(ref["m50_boot"])
        point = e["m50"] / ref["m50"] if ref["m50"] > 0 else math.nan
    r = r[~np.isnan(r)]
    return (float(point),) + (percentile_ci(r) if r.size else (math.nan, math.nan))


def _check_estimates(**estimates):
    """Each a success_estimates dict: m50 a number >= 0, m50_boot [B], one B for all."""
    sizes = set()
    for name, e in estimates.items():
        ok = isinstance(e, collections.abc.Mapping) and "m50" in e and "m50_boot" in e
        boot = check_reals(f"{name}['m50_boot']", e["m50_boot"]) if ok else None
        if not (ok and isinstance(e["m50"], numbers.Real) and not isinstance(
                e["m50"], (bool, np.bool_)) and e["m50"] >= 0 and boot.ndim == 1):
            raise ValueError(f"{name} must be a dict of success_estimates (m50 >= 0, m50_boot "
                             f"[B]), got {describe(e)}")
        sizes.add(boot.size)
    if len(sizes) > 1:
        raise ValueError(f"{', '.join(estimates)} must have one number of replicates (the same "
                         f"n_boot), got {sorted(sizes)}")


# Four laws of m(T) on the m scale, for issue 52's class ball: each a two-parameter least-squares
# fit of m itself (so that their AICs compare), m = a + b f(T) for f = ln T, T, (ln T)^2, and
# m = a T^k (k by a bracketing grid and golden-section search, a in closed form for each k).
LAWS = ("log", "lin", "log2", "pow")
_K_LO, _K_HI = -1.0, 3.0                          # the power law's exponent is sought in here


def _pow_fit(T, Y):  # T [n], Y [n, B] -> (k [B], a [B], rss [B]): m = a T^k on the m scale
    lT = np.log(T)[:, None, None]

    def rss(k):                                    # k [K, B] -> rss, a [K, B]
        P = np.exp(lT * k[None])                   # [n, K, B]
        a = (P * Y[:, None]).sum(0) / (P * P).sum(0)
        return ((Y[:, None] - a[None] * P) ** 2).sum(0), a
    ks = np.linspace(_K_LO, _K_HI, 41)[:, None] * np.ones((1, Y.shape[1]))
    r, _ = rss(ks)
    i = np.clip(np.argmin(r, 0), 1, 39)
    lo, hi = ks[i - 1, np.arange(Y.shape[1])], ks[i + 1, np.arange(Y.shape[1])]
    g = (math.sqrt(5) - 1) / 2
    for _ in range(40):                            # golden section within the grid's bracket
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        (r1, _), (r2, _) = rss(x1[None]), rss(x2[None])
        left = r1[0] < r2[0]
        hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
    k = (lo + hi) / 2
    r, a = rss(k[None])
    return k, a[0], r[0]


def _four_fits(T, Y):  # T [n], Y [n, B] -> {law: (b or k [B], a [B], rss [B])}
    out = {}
    for name, x in (("log", np.log(T)), ("lin", T), ("log2", np.log(T) ** 2)):
        b, a = np.polyfit(x, Y, 1)
        out[name] = (b, a, ((Y - (b * x[:, None] + a)) ** 2).sum(0))
    out["pow"] = _pow_fit(T, Y)
    return out


def four_laws(T, m50, m50_boot):
    """m(T) against the four LAWS on the m scale, with the seeds' bootstrap: T [n] >= 3 distinct
    values, m50 [n] finite > 0 (m50, or m* under the same name), m50_boot [n, B] its replicates (drawn independently at
    each T, as scaling_fits takes them). A replicate with a value that is not finite and > 0 (an
    m above the grid) has no fit: dropped and counted against both bounds (scaling_fits' rule).
    Every law has two parameters, so AIC(i) - AIC(j) = n ln(RSS_i / RSS_j).
    -> dict: for each law its slope (b; k for pow) and a, with the slope's 95% interval
    (law + "_b", "_a", "_lo", "_hi"); for each pair i < j in LAWS' order "daic_i_j" with "_lo",
    "_hi" (negative favours i); "best": the share of kept replicates in which each law has the
    lowest AIC; n_T, n_boot, n_dropped."""
    T, m, boot, keep = _check_curve("T", T, m50, m50_boot)
    tiny = np.finfo(float).tiny
    point = _four_fits(T, m[:, None])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        reps = _four_fits(T, boot[:, keep] if keep.any() else np.ones((T.size, 1)))
        aic = {k: T.size * np.log(np.maximum(v[2], tiny) / T.size) for k, v in reps.items()}
        ok = keep.any() & np.logical_and.reduce([np.isfinite(v[0]) & np.isfinite(aic[k])
                                                 for k, v in reps.items()])
    n_out = int(boot.shape[1] - ok.sum())
    out = {"n_T": int(T.size), "n_boot": int(boot.shape[1]), "n_dropped": n_out}

    def interval(v):
        v = v[ok] if ok.any() else np.empty(0)
        return (percentile_ci(np.append(v, np.full(n_out, -np.inf)))[0],
                percentile_ci(np.append(v, np.full(n_out, np.inf)))[1])
    for k in LAWS:
        out[k + "_b"], out[k + "_a"] = float(point[k][0][0]), float(point[k][1][0])
        out[k + "_lo"], out[k + "_hi"] = interval(reps[k][0])
    p_aic = {k: T.size * math.log(max(float(v[2][0]), tiny) / T.size) for k, v in point.items()}
    for i, a in enumerate(LAWS):
        for b in LAWS[i + 1:]:
            out[f"daic_{a}_{b}"] = p_aic[a] - p_aic[b]
            with np.errstate(invalid="ignore"):            # dropped replicates: inf - inf
                out[f"daic_{a}_{b}_lo"], out[f"daic_{a}_{b}_hi"] = interval(aic[a] - aic[b])
    stack = np.stack([aic[k] for k in LAWS])
    win = np.argmin(stack, 0)[ok] if ok.any() else np.empty(0, int)
    out["best"] = {k: float(np.mean(win == i)) if win.size else None for i, k in enumerate(LAWS)}
    return out
