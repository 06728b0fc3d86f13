"""seed_laws.py (studies/lib): the four laws across T fitted to every seed's critical m by maximum
likelihood, the grid's top as censoring, compared by AIC with intervals that follow the design.

laws.four_laws fits a law to one estimate per T (m* or m50): five points of very different
precision, each weighing the same. Here every seed counts. The noise model: a seed's critical m
at T (stats.seed_outcome: the smallest grid m at which its search succeeded) is
m = L(T) e^eps, eps ~ N(0, sigma^2), independent over seeds and T: lognormal seed noise around
the law, on ln m. A seed whose search ends above the grid (even its largest m failed) is
right-censored at the grid's top G: it contributes P(ln m > ln G), not a density (its m is only
known to exceed G). The grid's spacing (5 %) is not modelled: a seed's value is its grid m.

The laws (LAWS, as laws.py names them): L = a + b ln T, a + b T, a + b (ln T)^2, a T^k. Each has
three parameters with sigma, so AIC(i) - AIC(j) = -2 (lnL_i - lnL_j). The fit: for a T^k, ln m
is linear in (ln a, k); for a + b x, Gauss-Newton on ln(a + b x), kept positive at every x.
Censored seeds by EM (the Tobit model's): each step replaces a censored ln m by its expectation
above ln G given the current fit, refits, and updates sigma with the conditional variance.

Intervals: each T's seeds resampled on their own, by intervals.resample_counts (the design: the
same resamples at one T, so two folders with the same seeds there are paired seed by seed;
independent resamples across T, which share no data). A resample refits every law; its AIC
differences, slopes and power exponent give the percentile intervals. Fits run on all resamples
at once (arrays [B, n]).
"""
import math
import os

import numpy as np

from studies.lib import folder, harness
from studies.lib.intervals import bound_text, percentile_ci, resample_counts
from studies.lib.report import over_folders
from studies.lib.stats import seed_outcome

LAWS = ("log", "lin", "log2", "pow")
FEATURE = {"log": np.log, "lin": lambda T: T, "log2": lambda T: np.log(T) ** 2}
N_FIT_BOOT = 4000        # resamples behind every interval here (each refits four laws)
EM_STEPS = 60            # EM steps of a censored fit (each a full weighted fit)
GN_STEPS = 6             # Gauss-Newton steps inside each EM step (each warm-started)
SQRT2 = math.sqrt(2.0)
_ERFC = np.vectorize(math.erfc, otypes=[float])


# ---------------------------------------------------------------- one weighted fit of one law --

def _linear_fit(X, y, w):  # X [n, 2], y [B, n], w [B, n] -> theta [B, 2] (weighted least squares)
    A = np.einsum("bn,ni,nj->bij", w, X, X)
    v = np.einsum("bn,ni,bn->bi", w, X, y)
    return np.linalg.solve(A + 1e-12 * np.eye(2), v[..., None])[..., 0]


def _mean(law, x, theta):  # -> mu = ln L(T) [B, n] (nan where a + b x <= 0)
    if law == "pow":
        return theta[:, :1] + theta[:, 1:] * x[None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(theta[:, :1] + theta[:, 1:] * x[None])


def _gauss_newton(law, x, y, w, theta):
    """theta of ln(a + b x) fitted to y by weighted least squares, from `theta`, each step halved
    until a + b x stays positive at every x and the residual sum falls."""
    X = np.stack([np.ones_like(x), x], 1)
    rss = lambda t: np.nansum(w * (y - _mean(law, x, t)) ** 2, 1) + np.where(
        np.all(t[:, :1] + t[:, 1:] * x[None] > 0, 1), 0, np.inf)
    best = rss(theta)
    for _ in range(GN_STEPS):
        L = theta[:, :1] + theta[:, 1:] * x[None]
        J = X[None] / L[..., None]                                  # d mu / d theta  [B, n, 2]
        r = y - np.log(L)
        A = np.einsum("bn,bni,bnj->bij", w, J, J) + 1e-12 * np.eye(2)
        step = np.linalg.solve(A, np.einsum("bn,bni,bn->bi", w, J, r)[..., None])[..., 0]
        moved = False
        for _ in range(8):                                        # step halving
            trial = theta + step
            got = rss(trial)
            better = got < best
            theta, best = np.where(better[:, None], trial, theta), np.where(better, got, best)
            moved |= better.any()
            step = np.where(better[:, None], 0.0, step / 2)
            if not step.any():
                break
        if not moved:
            break
    return theta


def _start(law, x, m, w):  # a first theta: a line through (x, m), or ln m on ln T, weighted
    if law == "pow":
        return _linear_fit(np.stack([np.ones_like(x), x], 1), np.log(m), w)
    theta = _linear_fit(np.stack([np.ones_like(x), x], 1), m, w)
    L = theta[:, :1] + theta[:, 1:] * x[None]
    flat = np.stack([np.average(m, axis=1, weights=w), np.zeros(len(m))], 1)
    return np.where(np.all(L > 0, 1)[:, None], theta, flat)    # positive: else a constant law


def _fit(law, T, y, cens, w):
    """One law fitted to y = ln m [B, n] (cens [n]: right-censored at that value) with seed
    weights w [B, n] -> (theta [B, 2], sigma [B], lnL [B])."""
    x = np.log(T) if law == "pow" else FEATURE[law](T)
    yy = np.broadcast_to(y, w.shape).copy()
    theta = _start(law, x, np.exp(yy), w)
    sigma = np.full(len(w), 0.5)
    for _ in range(EM_STEPS if cens.any() else 1):
        mu = _mean(law, x, theta)
        if cens.any():                                               # E step on the censored
            z = (y[cens] - mu[:, cens]) / sigma[:, None]
            tail = np.maximum(0.5 * _ERFC(z / SQRT2), 1e-300)
            lam = np.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi) / tail
            yy[:, cens] = mu[:, cens] + sigma[:, None] * lam
            extra = (sigma[:, None] ** 2 * (1 + z * lam - lam ** 2)) * w[:, cens]
        was = theta
        theta = (_linear_fit(np.stack([np.ones_like(x), x], 1), yy, w) if law == "pow"
                 else _gauss_newton(law, x, yy, w, theta))
        mu = _mean(law, x, theta)
        var = np.nansum(w * (yy - mu) ** 2, 1) + (extra.sum(1) if cens.any() else 0.0)
        sigma = np.sqrt(np.maximum(var / w.sum(1), 1e-12))
        if np.nanmax(np.abs(theta - was) / (1 + np.abs(theta))) < 1e-9:
            break
    return theta, sigma, _log_likelihood(_mean(law, x, theta), sigma, y, cens, w)


def _log_likelihood(mu, sigma, y, cens, w):  # of ln m: densities, and the censored tails
    s = sigma[:, None]
    dens = -0.5 * math.log(2 * math.pi) - np.log(s) - 0.5 * ((y - mu) / s) ** 2
    out = (w[:, ~cens] * dens[:, ~cens]).sum(1)
    if cens.any():
        tail = 0.5 * _ERFC(((y[cens] - mu[:, cens]) / s) / SQRT2)
        out = out + (w[:, cens] * np.log(np.maximum(tail, 1e-300))).sum(1)
    return np.where(np.isfinite(out), out, -np.inf)


# ---------------------------------------------------------------- a curve: every seed at every T --

def seed_values(rows, grid, search):
    """{T: {seed: its critical m}} of a folder's rows (one model), each seed's search replayed
    (stats.seed_outcome; inf above the grid); unfinished searches left out."""
    harness.need(isinstance(rows, list) and all(isinstance(r, dict) and {
        "T", "seed", "m", "success"} <= r.keys() for r in rows), "rows", rows,
        "a list of runs (dicts with T, seed, m, success)")
    harness.need(isinstance(grid, list) and grid and all(
        isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in grid)
        and grid == sorted(set(grid)), "grid", grid, "the folder's m grid (increasing integers)")
    by = {}
    for r in rows:
        by.setdefault(int(r["T"]), {}).setdefault(int(r["seed"]), {})[int(r["m"])] = \
            r["success"] in (True, 1, "1")
    out = {}
    for T, seeds in sorted(by.items()):
        done = {s: seed_outcome(grid, search, res) for s, res in sorted(seeds.items())}
        out[T] = {s: v for s, (state, v) in done.items() if state == "done"}
    return out


def _check_curve(values, top, n_boot, seed):  # fit_curve's arguments
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    harness.need(isinstance(values, dict) and values and all(
        isinstance(T, int) and T >= 1 and isinstance(s, dict) and s and all(
            isinstance(k, int) and number(v) and v > 0 for k, v in s.items())
        for T, s in values.items()), "values", values,
        "{T: {seed: critical m > 0, inf above the grid}}")
    harness.need(number(top) and 0 < top < 1e300, "top", top, "the grid's largest m (a finite "
                 "number > 0)")
    harness.need(isinstance(n_boot, int) and not isinstance(n_boot, bool) and 1 <= n_boot <= 10**6,
                 "n_boot", n_boot, "an integer from 1 to 10**6")
    harness.need(isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**63,
                 "seed", seed, "an integer in [0, 2**63)")


def _design(values, n_boot, seed):
    """The curve's data and its resamples: T, y = ln m, cens [n] (seeds in T then label order)
    and weights [1 + n_boot, n] (row 0: every seed once; then each T's resample_counts)."""
    T, m, cols = [], [], []
    for t, seeds in sorted(values.items()):
        vals = [v for _, v in sorted(seeds.items())]
        T += [t] * len(vals)
        m += vals
        cols.append(np.vstack([np.ones((1, len(vals))),
                               resample_counts(len(vals), t, n_boot, seed)]))
    return np.array(T, float), np.array(m, float), np.hstack(cols)


def fit_curve(values, top, n_boot=N_FIT_BOOT, seed=0):
    """The four LAWS fitted to every seed of `values` ({T: {seed: critical m}}, inf above the
    grid, whose largest m is `top`), by maximum likelihood (the module docstring), on the seeds
    and on n_boot resamples of them (each T's on its own). -> dict: n (seeds), censored, Ts; per
    law its a, b (k for pow), sigma, lnL and AIC at the point; best (the point's lowest AIC);
    daic {law: (AIC(law) - AIC(best), lo, hi)}; wins {law: the share of resamples it fits best};
    k (pow's exponent, lo, hi); and the replicates (for paired differences): aic_boot {law: [B]},
    k_boot [B]."""
    _check_curve(values, top, n_boot, seed)
    T, m, w = _design(values, n_boot, seed)
    if len(set(T)) < 3:
        raise ValueError(f"a law needs at least 3 T with finished seeds, got T = {sorted(set(T))}")
    cens = ~np.isfinite(m)
    y = np.log(np.where(cens, float(top), m))
    fits = {law: _fit(law, T, y, cens, w) for law in LAWS}
    aic = {law: 2 * 3 - 2 * f[2] for law, f in fits.items()}
    best = min(LAWS, key=lambda k: aic[k][0])
    stack = np.stack([aic[k][1:] for k in LAWS])
    win = np.argmin(np.where(np.isfinite(stack), stack, np.inf), 0)
    out = dict(n=int(len(m)), censored=int(cens.sum()), Ts=sorted({int(t) for t in T}),
               best=best, aic_boot={k: aic[k][1:] for k in LAWS}, k_boot=fits["pow"][0][1:, 1],
               wins={k: float(np.mean(win == i)) for i, k in enumerate(LAWS)})
    for law, (theta, sigma, lnl) in fits.items():
        out[law] = dict(a=float(np.exp(theta[0, 0]) if law == "pow" else theta[0, 0]),
                        b=float(theta[0, 1]), sigma=float(sigma[0]), lnL=float(lnl[0]),
                        aic=float(aic[law][0]))
    out["daic"] = {k: (out[k]["aic"] - out[best]["aic"],) + percentile_ci(
        aic[k][1:] - aic[best][1:]) for k in LAWS}
    out["k"] = (out["pow"]["b"],) + percentile_ci(out["k_boot"])
    return out


# ---------------------------------------------------------------- the table over folders ---------

def _ci(v, lo, hi, decimals=1):  # "v [lo, hi]", each bound printed by its Monte Carlo band
    show = lambda x: "inf" if x == math.inf else "-inf" if x == -math.inf else bound_text(
        x, decimals)
    return f"{v:.{decimals}f} [{show(lo)}, {show(hi)}]"


def _curve_line(name, f, ref=None):
    """One folder's row: its data, the best law, each other law's AIC above it, the shares of
    resamples each law wins, the power law's exponent; with ref (the first folder's fit on the
    same T and seeds), the exponent's difference from it, paired seed by seed."""
    others = "; ".join(f"{k} {_ci(*f['daic'][k])}" for k in LAWS if k != f["best"])
    wins = ", ".join(f"{k} {f['wins'][k]:.0%}" for k in LAWS)
    dk = "-"
    if ref is not None:
        diff = f["k_boot"] - ref["k_boot"]
        dk = _ci(f["k"][0] - ref["k"][0], *percentile_ci(diff[np.isfinite(diff)]), decimals=2)
    return (f"| {name} | {', '.join(map(str, f['Ts']))} | {f['n']} ({f['censored']} above the "
            f"grid) | {f['best']} | {others} | {wins} | {_ci(*f['k'], decimals=2)} | {dk} |")


def laws_table(folders, n_seeds=None, Ts=None, n_boot=N_FIT_BOOT, log=print):
    """The table of `folders` (sweep folders; the first is the reference): per folder, the four
    laws fitted to every seed's critical m (fit_curve) on T in Ts (default: every T the folder
    finished) and seeds < n_seeds, and, from the second folder on, its power exponent minus the
    first's fitted on the same T and seeds (paired: the same resamples at each T; '-' where the
    first lacks one of them)."""
    harness.need(isinstance(folders, list) and folders and all(
        isinstance(f, str) and f for f in folders), "folders", folders, "a list of sweep folders")
    harness.need(callable(log), "log", log, "a function of one line")
    lines = ["| folder | T | seeds (censored) | best law | AIC above the best [95% CI] | "
             "resamples each law fits best | k of a T^k [95% CI] | k minus the first's "
             "[paired 95% CI] |", "|---|---|---|---|---|---|---|---|"]
    curves = []
    for f in folders:
        meta, rows = folder.folder_rows(f, n_seeds, Ts)
        grid = meta["grids"]["transformer"]
        curves.append((seed_values(rows, grid, meta["search"]), max(grid)))
    for i, (f, (values, top)) in enumerate(zip(folders, curves)):
        if len(values) < 3:
            lines.append(f"| {os.path.basename(f.rstrip('/'))} | {', '.join(map(str, values))} "
                         f"| {sum(map(len, values.values()))} | fewer than 3 T: no law | | | | |")
            continue
        fit, ref = fit_curve(values, top, n_boot), None
        first = curves[0][0]
        if i and all(set(seeds) <= set(first.get(T, {})) for T, seeds in values.items()):
            ref = fit_curve({T: {s: first[T][s] for s in seeds} for T, seeds in values.items()},
                            curves[0][1], n_boot)
        lines.append(_curve_line(os.path.basename(f.rstrip("/")), fit, ref))
        log(f"fitted {f}: best {fit['best']}")
    return lines


def laws_command(a, fail):
    """`python -m studies.sweep laws FOLDER...`: laws_table, printed and written to --out."""
    harness.need(callable(fail), "fail", fail, "the parser's error (one line, exit 2)")

    def make():
        lines = ["## The laws fitted to every seed", "",
                 f"Written by `python -m studies.sweep laws {' '.join(a.folders)}"
                 + (f" --seeds {a.seeds}" if a.seeds else "")
                 + (f" --Ts {','.join(map(str, a.Ts))}" if a.Ts else "") + "`. Each seed's "
                 "critical m is L(T) times a lognormal seed noise, a seed above the grid "
                 "censored at its top (studies/lib/seed_laws.py); the laws a + b ln T (log), "
                 "a + b T (lin), a + b (ln T)^2 (log2) and a T^k (pow), each fitted by maximum "
                 "likelihood and compared by AIC (three parameters each); intervals from "
                 f"{N_FIT_BOOT} resamples of each T's seeds on their own (the same at one T in "
                 "every folder: the exponent differences are paired seed by seed). An AIC "
                 "interval above 0 says the best law fits better than that law.", ""]
        lines += laws_table(a.folders, a.seeds, a.Ts)
        return "\n".join(lines) + "\n", None
    table, _ = over_folders(a, fail, make)
    print(table)
    return 0
