"""families.py (studies/lib): other Boolean families beside 3-sparse AND (studies.sweep families).

One table over sweep folders of different tasks or sparsities s: m50 and the majority m* per
(task, s, T) with their 95% intervals, the statistical limit, P(label = 1) measured on draws and
the CPU time; the fits against T per family, and how m50 and m* grow with s at each T; with
--plot, m* against T per family and against s per task.
"""
import math
import os

import numpy as np

import data

from studies.lib import training
from studies.lib.cli import pyplot_or_hint, save_figure
from studies.lib.folder import folder_rows, full_options
from studies.lib.laws import growth_in_s, scaling_fits
from studies.lib.limits import STRUCTURED, limit_text
from studies.lib.report import (ci_text, cpu_minutes, fits_line, over_folders, rounding_note,
                                statistical_limits, success_table)
from studies.lib.stats import critical_sizes, split_by_T


def _label_balance(task, s, T, n_seeds=20, n=2000):
    """P(label = 1) measured on draws: n fresh samples from each of seeds 0..n_seeds-1's test
    streams, the mean label and its binomial standard error. data.py chooses the bit probability
    so that it is 1/2; this checks it on the data the runs saw."""
    ys = []
    for seed in range(n_seeds):
        streams = training.study_streams(seed)
        t = data.make_task(task, T, s, streams.task)
        ys.append(t.sample(n, streams.test)[1])
    y = np.concatenate(ys).astype(float)
    return float(y.mean()), float(y.std() / math.sqrt(y.size))


def _family_cells(folder, n_seeds=None, Ts=None):
    """One folder (one task and s): per T, the success estimates, the majority m* and the
    search's outcome per seed (only seeds 0..n_seeds-1 and the T in Ts, when given).
    -> (opts, grid, {T: (estimates, critical_sizes entry, rows)})."""
    meta, rows = folder_rows(folder, n_seeds, Ts)
    opts = full_options(meta.get("options", {}))
    grid = meta.get("grids", {}).get("transformer")
    if not grid:
        raise ValueError(f"{folder}: sweep.json has no transformer grid")
    stats = critical_sizes(rows, {"transformer": grid}, meta.get("search", "bisect"))
    est, _ = success_table(rows, ["transformer"])
    by_T = split_by_T(rows)
    return opts, grid, {T: (est[("transformer", T)], st, by_T[float(T)])
                        for (_, T), st in stats.items()}


def _unlocated(e):
    """True when the pooled success curve falls or stays flat with m (slope b <= 0), so its
    m50 is not located at all, rather than lying beyond the m tried: it happens when seeds as
    unlike as a junta's truth tables pool their bisections (easy seeds run at small m and
    succeed, hard ones at large m and fail)."""
    return e.get("b") is not None and e["b"] <= 0


def _m50_text(e):
    """The table's m50 cell: the estimate with its 95% CI, or why there is none."""
    return "not located (success does not rise with m)" if _unlocated(e) else ci_text(e, "m50")


def _families_table(folders, log=print, n_seeds=None, Ts=None):
    """One table over sweep folders of different tasks or sparsities: per (task, s, T), m50 and
    the majority m* with 95% intervals, the share of seeds that succeed at the largest m tried
    (where a family is not solved within the grid, this, not an extrapolated m50, is its
    result; an m50 whose pooled success curve does not rise with m is "not located"), the
    statistical limit (for majority and juntas only where the folder's limits.json
    holds it: their count enumerates every support, many minutes per T), P(label = 1) on draws,
    and the CPU minutes; then per family the fits of m50 and m* against ln T, T and T^k where at
    least 3 T are determined, and per task and T the growth of m50 with s (growth_lines).
    Returns (markdown, by_family): {(task, s): (grid, cells, folder, limits)} with cells as
    family_cells gives them and limits {T: statistical limit or None}."""
    lines = ["| task | s | T | seeds | m50 [95% CI] | m* (majority) [95% CI] | seeds that succeed "
             "by the largest m tried | statistical limit [5%, 95%] | P(label = 1) on draws | "
             "CPU min |", "|---|---|---|---|---|---|---|---|---|---|"]
    fits, by_family = [], {}
    for f in folders:
        opts, grid, cells = _family_cells(f, n_seeds, Ts)
        task, s = opts["task"], opts["s"]
        if (task, s) in by_family:
            raise ValueError(f"{f} and {by_family[(task, s)][2]} both hold {task} with s = {s}: "
                             f"give one folder per task and s")
        limits = statistical_limits(task, s, sorted(cells), cache=os.path.join(f, "limits.json"),
                                    compute=task in STRUCTURED)
        by_family[(task, s)] = (grid, cells, f, limits)
        none = "not affordable" if task in STRUCTURED else "not computed"
        for T, (e, st, runs) in sorted(cells.items()):
            p, se = _label_balance(task, s, T)
            solved = st["n_seeds"] - st["censored"]
            ms = ci_text(dict(m=st["m_star"], m_lo=st["m_star_lo"], m_hi=st["m_star_hi"]), "m")
            lines.append(f"| {task} | {s} | {T} | {st['n_seeds']} | {_m50_text(e)} | {ms} | "
                         f"{solved} of {st['n_seeds']} (m <= {grid[-1]}) | "
                         f"{limit_text(limits.get(T)) or none} | {p:.3f} +- {se:.3f} | "
                         f"{cpu_minutes(runs):.1f} |")
        for what, key in (("m50", "m50"), ("m*", "m_star")):
            pts = [(T, c[0] if key == "m50" else c[1]) for T, c in sorted(cells.items())]
            pts = [(T, x) for T, x in pts if grid[0] <= x[key] <= grid[-1]]  # not extrapolated
            if len(pts) >= 3:
                boot = "m50_boot" if key == "m50" else "m_star_boot"
                fit = scaling_fits(np.array([T for T, _ in pts]), np.array([x[key] for _, x in pts]),
                                   np.array([x[boot] for _, x in pts]))
                fits.append(fits_line(f"{task} s = {s}: ", what, fit)
                            + f" over T in {pts[0][0]}..{pts[-1][0]}")
            else:
                lost = [T for T, c in sorted(cells.items()) if _unlocated(c[0])] if key == "m50" \
                    else []
                fits.append(f"{task} s = {s}: {what} within the m tried at {len(pts)} T only "
                            f"({', '.join(str(T) for T, _ in pts) or 'none'}"
                            + (f"; not located at T = {', '.join(map(str, lost))}" if lost else "")
                            + "): no fit across T")
                if what == "m*" and fits[-2] == fits[-1].replace("m*", "m50", 1):
                    fits[-2:] = [fits[-2].replace("m50", "m50 and m*", 1)]   # one line for both
    fits += _growth_lines(by_family) + _grid_edge_lines(by_family)
    fits.append(rounding_note())
    for line in lines + [""] + fits:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits]) + "\n", by_family


def _grid_edge_lines(by_family):
    """Per cell whose m* lies within the m tried but whose 95% interval leaves them: the bootstrap
    probability that m* lies above the largest m tried (exact after bisection: critical_sizes'
    m_star_above), so an interval open at one end reads as what it is, an estimate that leaves
    the grid in some resamples. Where m* is the largest m tried, a growth to it is a lower
    bound."""
    out = []
    for (task, s), (grid, cells, _, _) in sorted(by_family.items()):
        for T, (_, st, _) in sorted(cells.items()):
            if grid[0] <= st["m_star"] <= grid[-1] and st["m_star_hi"] > grid[-1]:
                edge = (", the largest m tried, so a growth to it is a lower bound"
                        if st["m_star"] == grid[-1] else "")
                out.append(f"{task} s = {s}, T = {T}: m* = {st['m_star']:.0f}{edge}; m* lies "
                           f"above the largest m tried ({grid[-1]}) with bootstrap probability "
                           f"{st['m_star_above']:.3f}")
    return out


def _growth_lines(by_family):
    """Per task and T held at 2 or more s: how m50 and the majority m* grow with s
    (laws.growth_in_s), on the s whose value lies within the m tried, naming the s left out (an
    m50 extrapolated beyond the grid is not a result). by_family {(task, s): (grid, cells,
    folder, limits)}, cells {T: (success estimates, critical_sizes entry, rows)}."""
    out = []
    for task, T, ss in _s_at_each_T(by_family):
        have = [(s,) + by_family[(task, s)][:2] for s in ss]
        for what, i, key in (("m50", 0, "m50"), ("m*", 1, "m_star")):
            out.append(_growth_line(task, T, what, [(s, grid, cells[T][i]) for s, grid, cells
                                                    in have], key))
    return out


def _s_at_each_T(by_family):
    """(task, T, [s]) for every task and T that by_family holds at two or more s, in order."""
    for task in sorted({task for task, _ in by_family}):
        ss = sorted(s for t, s in by_family if t == task)
        for T in sorted({T for s in ss for T in by_family[(task, s)][1]}):
            have = [s for s in ss if T in by_family[(task, s)][1]]
            if len(have) >= 2:
                yield task, T, have


def _growth_line(task, T, what, have, key):
    """One line of growth_lines: `what` (m50 or m*) across s at one T; have [(s, grid, entry)]."""
    ok, left = [], []
    for s, grid, e in have:
        if key == "m50" and _unlocated(e):
            left.append(f"{s} (m50 not located: pooled success does not rise with m)")
        elif e[key] > grid[-1]:
            left.append(f"{s} ({what} above the largest m tried, {grid[-1]})")
        elif e[key] < grid[0]:
            left.append(f"{s} ({what} below the smallest m tried, {grid[0]})")
        else:
            ok.append((s, e))
    head = (f"{task} at T = {T}, {what} across s = {', '.join(str(s) for s, _ in ok)}"
            + (f" (left out: s = {'; '.join(left)})" if left else "") + ": ")
    if len(ok) < 3:
        return head + f"{len(ok)} s within the grid: no fit"
    g = growth_in_s(np.array([s for s, _ in ok]), np.array([e[key] for _, e in ok]),
                    np.array([e[key + "_boot"] for _, e in ok]))
    better = ("no resample kept" if g["p_power_better"] is None else
              f"the power law fits better in {100 * g['p_power_better']:.0f}% of the kept "
              f"bootstrap resamples")
    return head + (f"{what} ~ a s^k, k = {ci_text(g, 'pow_k', 2)};  {what} ~ a b^s, b = "
                   f"{ci_text(g, 'exp_b', 2)};  AIC(power) - AIC(exp) = {ci_text(g, 'daic', 1)}, "
                   f"{better} "
                   f"(95% CIs, bootstrap over seeds; {g['n_dropped']} of {g['n_boot']} "
                   f"resamples without a fit, counted against both bounds)")


def _mstar_series(by_family):
    """What families_plot draws, as numbers: per family (task, s) with two or more T, its majority
    m* against T; per task with two or more s at one T, its m* against s. Each series is a dict
    of label, axis ("T" or "s") and lists with one value per point: x (T or s), top (the largest
    m its folder tried), mstar, lo, hi (m* and its 95% CI, each clipped to top), above (m* past
    top: drawn at top with a filled triangle), open_hi (the CI open above: an open triangle at
    top); the T series also hold limit, the statistical limit's median where it was computed
    (nan elsewhere)."""
    def points(items):
        x, y, lo, hi, above, open_hi, top = [], [], [], [], [], [], []
        for key, grid, st in items:
            x.append(key)
            top.append(grid[-1])
            above.append(bool(st["m_star"] > grid[-1]))
            open_hi.append(bool(st["m_star_hi"] > grid[-1]))
            y.append(min(st["m_star"], grid[-1]))
            lo.append(min(st["m_star_lo"], grid[-1]))
            hi.append(min(st["m_star_hi"], grid[-1]))
        return dict(x=x, mstar=y, lo=lo, hi=hi, above=above, open_hi=open_hi, top=top)
    out = []
    for (task, s), (grid, cells, _, limits) in sorted(by_family.items()):
        if len(cells) >= 2:
            Ts = sorted(cells)
            out.append(dict(points([(T, grid, cells[T][1]) for T in Ts]), label=f"{task} s = {s}",
                            axis="T", limit=[(limits.get(T) or {}).get("median", math.nan)
                                             for T in Ts]))
    for task, T, ss in _s_at_each_T(by_family):
        out.append(dict(points([(s, by_family[(task, s)][0], by_family[(task, s)][1][T][1])
                                for s in ss]), label=f"{task}, T = {T}", axis="s"))
    return out


def _families_plot(series, path):
    """m* against T per family (left, log-log, with the statistical limit dashed where computed)
    and against s per task (right, log m), each with its 95% CI; the panels without series are
    left out. None when matplotlib is missing."""
    panels = [axis for axis in ("T", "s") if any(c["axis"] == axis for c in series)]
    if not panels:
        print("no plot: no family holds two T and no task two s at one T")
        return None
    plt = pyplot_or_hint("rerun")
    if plt is None:
        return None
    from matplotlib import ticker
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, axis in zip(axes[0], panels):
        for i, c in enumerate(c for c in series if c["axis"] == axis):
            color = f"C{i % 10}"
            x, y = np.array(c["x"], float), np.array(c["mstar"])
            ax.errorbar(x, y, yerr=[y - c["lo"], np.array(c["hi"]) - y], fmt="o-", ms=4,
                        capsize=3, color=color, label=c["label"])
            up, open_hi = np.array(c["above"]), np.array(c["open_hi"]) & ~np.array(c["above"])
            ax.plot(x[up], y[up], "^", ms=9, color=color)           # past the largest m tried
            ax.plot(x[open_hi], np.array(c["top"])[open_hi], "^", ms=9, mfc="none",
                    color=color)                                    # its interval open above
            if axis == "T" and np.isfinite(c["limit"]).any():
                ax.plot(x, c["limit"], "--", color=color, lw=1)
        for top in {t for c in series if c["axis"] == axis for t in c["top"]}:
            ax.axhline(top, ls=":", color="gray", lw=1)
        ax.set_xscale("log" if axis == "T" else "linear")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(
            lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
        if axis == "s":
            ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_xlabel("T (log scale)" if axis == "T" else "s (relevant bits)")
        ax.set_ylabel("majority m* (log scale)")
        ax.set_title("m* against T; dashed: statistical limit" if axis == "T" else
                     "m* against s", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Majority m* with its 95% CI (bootstrap over seeds). Dotted: the largest m "
                 "tried; filled triangle: m* above it; open triangle: CI open above", fontsize=9)
    return save_figure(plt, fig, path)


def families_command(a, fail):
    """`python -m studies.sweep families DIR DIR ...`: families_table into --out, families_plot
    with --plot."""
    _, by_family = over_folders(a, fail, lambda: _families_table(a.folders, n_seeds=a.seeds,
                                                                 Ts=a.Ts))
    if a.plot:
        _families_plot(_mstar_series(by_family), a.plot)
    return 0
