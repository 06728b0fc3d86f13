"""compare.py (studies/lib): tables over several finished sweep folders; nothing here trains.

    python -m studies.sweep compare DIR DIR ...   protocols side by side, paired on their seeds
    python -m studies.sweep width DIR DIR ...     widths side by side, where each leaves its log law
    python -m studies.sweep headline              the front page's table, from committed folders

Every number comes from stats.py and intervals.py applied to the rows of folder.py, as in one
folder's report (report.py, whose table pieces these tables share); plots need matplotlib and are
skipped with a one-line hint without it. The file reads top to bottom: protocols side by side,
the width study, the front page's table.
"""
import math
import os

import numpy as np

from theory import construction_width

from studies.lib import harness, provenance, report, run_options
from studies.lib.cli import pyplot_or_hint, read_text_file, save_figure, write_text
from studies.lib.folder import folder_rows, full_options
from studies.lib.harness import check_markers, marked_files, page_target, paste_tables
from studies.lib.intervals import bound_text, surely_above, surely_below
from studies.lib.laws import log_departure, paired_growth, paired_ratio
from studies.lib.limits import LIMIT_SEEDS, statistical_limits
from studies.lib.report import (asks_papers_question, ci_text, cpu_minutes, over_folders,
                                paper_bar_text, rounding_note, success_table)
from studies.lib.stats import critical_sizes, seed_outcome, split_by_T


# ---------------------------------------------------------------- protocols side by side ------

def _compare_line(name, T, runs, e, seeds, ref, papers):
    """compare_table's row of one folder at one T (ref: the first folder's (seeds, estimates))."""
    ratio = _ratio(paired_ratio(e, ref[1])) if ref and ref[0] == seeds else "-"
    fail = [r for r in runs if not r["success"]]
    known = [r for r in fail if np.isfinite(float(r["train_acc"]))]   # nan: not recorded
    memo = sum(float(r["train_acc"]) == 1.0 for r in known)
    unrecorded = f" ({len(fail) - len(known)} not recorded)" if len(known) < len(fail) else ""
    return (f"| {name} | {T} | {ci_text(e, 'm50')} | {ratio} | {ci_text(e, 'm90')} | "
            f"{e['n_seeds']} | {report.PAPER_MSTAR.get(T, '-') if papers else '-'} | "
            f"{memo} of {len(known)}{unrecorded} | {_split_medians(runs, 'attn_on_S')} | "
            f"{_split_medians(runs, 'pos_overlap')} | {cpu_minutes(runs):.1f} |")


COMPARE_HEAD = ("| protocol | T | m50 [95% CI] | m50 / first [paired 95% CI] | m90 [95% CI] | "
                "seeds | m* (paper) | failures that memorised | attention on S: successes / "
                "failures (median) | positional overlap of S: successes / failures (median) | "
                "CPU min |", "|---|---|---|---|---|---|---|---|---|---|---|")


def _protocol_name(names, i, folder, meta, protocols):
    """The name folder i goes by in a comparison: its protocol, with its folder added where two
    folders share the protocol or its options are not the protocol's (`protocols`: name ->
    options it changes from train.py's), e.g. ours at another width."""
    own = dict(run_options.DEFAULTS, **(protocols or {}).get(names[i], {}))
    opts = full_options(meta.get("options", {}))
    changed = protocols is not None and "protocol" in meta and (
        names[i] not in protocols or any(own[k] != v for k, v in opts.items() if k in own))
    return names[i] if names.count(names[i]) == 1 and not changed else \
        f"{names[i]} ({os.path.basename(folder.rstrip('/'))})"


def _compare_table(folders, log=print, n_seeds=None, Ts=None, protocols=None, growth_from=None):
    """One table over sweep folders (one protocol each): per folder and T, m50 and m90 with 95%
    CIs, m50 over the first folder's with a paired CI (paired_ratio; only where both hold the same
    seeds), the paper's m*, the share of failed runs that fit their training set perfectly
    (memorised without generalising), the median [CLS] attention on S and positional overlap of S
    in successes and failures, and the CPU minutes its runs took; then each folder's slope of m50
    against ln T with its CI. Returns (markdown, entries): entries [(name, T, estimates)].
    A folder is named by its protocol, and also by its folder where that is ambiguous or where its
    options are not the protocol's (`protocols`: name -> options it changes from train.py's).
    growth_from=T0: also, per folder after the first and T > T0, its paired ratio at T over its
    paired ratio at T0 (laws.paired_growth), where both folders hold the same seeds at both T:
    of m50, and of majority m* where the folders record their grids (the same test on the
    paper's statistic: a claim on one quotes the other).
    Last, for folders of the paper's task (3-sparse AND, bar 0.99), where the paper's m* falls
    against the folder's majority m* interval at the paper's T (paper_position)."""
    lines = list(COMPARE_HEAD)
    fits, entries, first, growth, paper, first_star = [], [], {}, [], [], {}
    metas = [folder_rows(folder, n_seeds, Ts) for folder in folders]
    held = sorted({int(r["T"]) for _, rows in metas for r in rows})
    if growth_from is not None and growth_from not in held:
        raise ValueError(f"--growth-from {growth_from}: no folder holds T = {growth_from}; T here: "
                         f"{held}")
    names = [meta.get("protocol", os.path.basename(f.rstrip("/"))) for f, (meta, _) in
             zip(folders, metas)]
    for i, (folder, (meta, rows)) in enumerate(zip(folders, metas)):
        name = _protocol_name(names, i, folder, meta, protocols)
        opts = full_options(meta.get("options", {}))
        est, scaling = success_table(rows, ["transformer"])
        papers = asks_papers_question(opts["task"], opts["s"], meta.get("bar", 0.99))
        own = {}
        for T, runs in sorted(split_by_T(rows).items(), key=lambda kv: int(kv[0])):
            e = est[("transformer", int(T))]
            seeds = sorted({int(r["seed"]) for r in runs})
            if i == 0:
                first[int(T)] = (seeds, e)
            own[int(T)] = (seeds, e)
            entries.append((name, int(T), e))
            lines.append(_compare_line(name, int(T), runs, e, seeds, first.get(int(T)), papers))
        star = _mstar_entries(meta, rows) if growth_from is not None else {}
        first_star.update(star if i == 0 else {})
        if growth_from is not None and i > 0:
            growth.append(_gap_growth_line(name, own, first, growth_from))
            if star and first_star:
                growth.append(_gap_growth_line(name, star, first_star, growth_from, "m*"))
        if papers:
            grid = meta.get("grids", {}).get("transformer")
            line = grid and _paper_position(name, critical_sizes(
                rows, {"transformer": grid}, meta.get("search", "bisect")))
            paper += [line] if line else []
        f = scaling.get("transformer")
        if f:
            fits.append(f"{name}: m50 ~ a + b ln T, b = {ci_text(f, 'log_b', 1)}; m50 ~ a T^k, "
                        f"k = {ci_text(f, 'pow_k', 2)}")
    paper.append(rounding_note())
    for line in lines + [""] + fits + growth + paper:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits + growth + paper]) + "\n", entries


def _paper_position(name, stats):
    """Where the paper's m* (its figure, report.PAPER_MSTAR) falls against one folder's majority m*
    interval (critical_sizes: {(model, T): entry}) at each T of the figure the folder holds:
    inside it (bounds included), below it or above it; a T where no seed's search finished is named
    apart. The line ends "(every paper T held)" when the paper's m* is inside at every one of the
    figure's T the folder holds (which may be fewer than the figure's). A line for compare_table,
    or None where the folder holds none of the figure's T."""
    where = {"inside": [], "below": [], "above": [], "without a finished seed": []}
    for (_, T), st in sorted(stats.items()):
        if T in report.PAPER_MSTAR and not st["n_seeds"]:
            where["without a finished seed"].append(T)
        elif T in report.PAPER_MSTAR:
            p = report.PAPER_MSTAR[T]
            where["below" if surely_above(st["m_star_lo"], p) else
                  "above" if surely_below(st["m_star_hi"], p) else "inside"].append(T)
    n = sum(map(len, where.values()))
    if not n:
        return None
    parts = [f"{key} at T = {', '.join(map(str, Ts))}" for key, Ts in where.items() if Ts]
    return (f"{name}: the paper's m* against this folder's majority m* interval (95%): "
            f"{'; '.join(parts)}" + (" (every paper T held)" if len(where["inside"]) == n
                                     else ""))


def _mstar_entries(meta, rows):
    """{T: (seeds, {"m50": majority m*, "m50_boot": its N_BOOT replicates})} of one folder, for
    _gap_growth_line's m* version ({} where the folder records no grid)."""
    grid = meta.get("grids", {}).get("transformer")
    if not grid:
        return {}
    crit = critical_sizes(rows, {"transformer": grid}, meta.get("search", "bisect"))
    seeds = {T: sorted({int(r["seed"]) for r in rows if int(r["T"]) == T}) for (_, T) in crit}
    return {T: (seeds[T], {"m50": st["m_star"], "m50_boot": st["m_star_boot"]})
            for (_, T), st in crit.items() if not st["unfinished"]}


def _gap_growth_line(name, own, first, T0, what="m50"):
    """compare_table's line of one folder's paired ratio at each T > T0 over its value at T0, of
    m50 or (what="m*", entries from _mstar_entries) of majority m*."""
    base = own.get(T0), first.get(T0)
    if None in base or base[0][0] != base[1][0]:
        return f"{name}: {what} / first at T over at T = {T0}: not paired (T = {T0} missing or " \
               f"other seeds)"
    parts = [f"T = {T}: {_ratio(paired_growth(e, first[T][1], base[0][1], base[1][1]))}"
             for T, (seeds, e) in sorted(own.items()) if T > T0 and T in first and
             seeds == first[T][0] == base[0][0]]
    return (f"{name}: ({what} / first) at T over the same at T = {T0}, paired 95% CI: " +
            ("; ".join(parts) if parts else "no larger T with the same seeds"))


def _compare_plot(entries, path, title):
    """One panel per T: each protocol's m50 with its 95% CI (log m axis), the first protocol's m50
    as a dashed line, the paper's m* (and its bar) as a red band. None when matplotlib is missing."""
    plt = pyplot_or_hint("rerun")
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
        if T in report.PAPER_MSTAR:
            lo, hi = report.PAPER_BAR[T]
            ax.axvspan(lo, hi, color="tab:red", alpha=0.25, lw=0)
            ax.axvline(report.PAPER_MSTAR[T], color="tab:red", lw=1)
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
    return save_figure(plt, fig, path)


# ---------------------------------------------------------------- the width study -------------

def _pool_by_width(folders, n_seeds=None, Ts=None):
    """{d: pool} of the folders' Transformer rows, one pool per width d. Folders of the same d are
    pooled (e.g. one sweep's T range extended in another folder): they must share every option,
    the m grid and the search, and no run may be in two; ValueError otherwise. A pool is
    dict(opts, folders, names, rows, where {(T, seed, m): folder}, grid, search)."""
    pools = {}
    for folder in folders:
        meta, rows = folder_rows(folder, n_seeds, Ts)
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
    return pools


def _finished_cells(pool, d):
    """(the pool's rows without the T where some seed's search is unfinished, a note per T left
    out): an interrupted sweep's partial searches are not a cell of the study."""
    rows, left_out = pool["rows"], []
    if not pool["grid"]:
        return rows, left_out
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
    return rows, left_out


def _width_curves(folders, n_seeds=None, fit_below=100, Ts=None):
    """(curves, notes of the T left out): one curve per width d, sorted by d, each dict(d, heads,
    s, task, name, est {T: success_estimates}, runs {T: rows}, dep (log_departure against the
    small-T law fitted over T <= fit_below), fit (scaling_fits over all T, or None))."""
    curves, left_out = [], []
    for d, pool in _pool_by_width(folders, n_seeds, Ts).items():
        rows, skipped = _finished_cells(pool, d)
        left_out += skipped
        opts = pool["opts"]
        est, scaling = success_table(rows, ["transformer"])
        by_T = {int(T): r for T, r in split_by_T(rows).items()}
        e = [est[("transformer", T)] for T in sorted(by_T)]
        if sum(T <= fit_below for T in by_T) >= 2:
            dep = log_departure(sorted(by_T), [x["m50"] for x in e], [x["m50_boot"] for x in e],
                                fit_below)
        else:                   # a screen at large T only: no small-T law to depart from
            dep = dict(a=math.nan, b=math.nan, ratios={}, departs=None, law=False)
        curves.append(dict(d=d, heads=opts["heads"], s=opts["s"], task=opts["task"],
                           name=", ".join(pool["names"]), est=dict(zip(sorted(by_T), e)),
                           dep=dep, fit=scaling.get("transformer"), runs=by_T))
    curves.sort(key=lambda c: c["d"])
    return curves, left_out


def _width_table(folders, log=print, n_seeds=None, fit_below=100, Ts=None):
    """One table over sweep folders that differ in the width d (width_curves): per d and T, m50
    and m90 with 95% CIs, m50 over the extrapolated small-T log law with its CI (log_departure),
    the median [CLS] attention on S and positional overlap of S in successes and failures, and
    the CPU minutes; per d, the small-T law, the T where the curve departs from it, and the fits
    over all T; then per T, the construction's d_p beside each width's standing against its law
    (above it: that T's ratio interval lies above 1), the narrowest width not detected above its
    law and the first such width scaled like ln T (width_edges). -> (markdown, curves)."""
    curves, left_out = _width_curves(folders, n_seeds, fit_below, Ts)
    lines = ["| d | T | m50 [95% CI] | m90 [95% CI] | seeds | m50 / small-T log law [95% CI] | "
             "attention on S: successes / failures (median) | positional overlap of S: "
             "successes / failures (median) | CPU min |", "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for c in curves:
        for T, e in c["est"].items():
            ratio = (_ratio(c["dep"]["ratios"][T]) if T in c["dep"]["ratios"] else
                     "(fit range)" if T <= fit_below else "(no small-T law)")
            lines.append(f"| {c['d']} | {T} | {ci_text(e, 'm50')} | {ci_text(e, 'm90')} | "
                         f"{e['n_seeds']} | {ratio} | {_split_medians(c['runs'][T], 'attn_on_S')}"
                         f" | {_split_medians(c['runs'][T], 'pos_overlap')} | "
                         f"{cpu_minutes(c['runs'][T]):.1f} |")
        dep, f = c["dep"], c["fit"]
        where = (f"departs from it at T = {dep['departs']} (the first T whose m50 lies above the "
                 f"law with 95% confidence)" if dep["departs"] else
                 f"no departure up to T = {max(c['est'])}" if dep["ratios"] else
                 "no T beyond the fit range")
        law = (f"small-T law m50 = {dep['a']:.1f} + {dep['b']:.1f} ln T over T <= "
               f"{fit_below:g}; {where}" if dep.get("law", True) else
               f"no small-T law (fewer than 2 T <= {fit_below:g} run)")
        notes.append(f"d = {c['d']} ({c['name']}, {c['heads']} heads of {c['d'] // c['heads']}): "
                     f"{law}" + (
                         f"; over all T: m50 ~ a + b ln T, b = {ci_text(f, 'log_b', 1)}; m50 ~ "
                         f"a T^k, k = {ci_text(f, 'pow_k', 2)}; AIC(ln T) - AIC(T) = "
                         f"{ci_text(f, 'daic', 1)}, ln T "
                         f"better in {100 * f['p_log_better']:.0f}% of resamples" if f else ""))
    need = ["| T | construction's d_p = ceil(16 s ln T) | " +
            " | ".join(f"d = {c['d']}" for c in curves) + " | narrowest width not detected above "
            f"its law | ... nor losing ground to d = {curves[-1]['d']} (paired) | the first such "
            "width scaled like ln T |", "|---|---|" + "---|" * (len(curves) + 3)]
    where = lambda b: ("-" if b is None else f"{b[0]} < d <= {b[1]}" if b[0] and b[1] else
                       f"d <= {b[1]}" if b[1] else f"d > {b[0]}")
    for e in _width_edges(curves, fit_below):
        need.append(f"| {e['T']} | {e['d_p']} | " + " | ".join(e["states"]) + f" | "
                    f"{where(e['edge'])} | {where(e['paired'])} | "
                    f"{'-' if e['ln_T'] is None else e['ln_T']} |")
    notes += left_out + [rounding_note()]
    for line in lines + [""] + notes + [""] + need:
        log(line)
    return "\n".join(lines + [""] + ["- " + n for n in notes] + [""] + need) + "\n", curves


def _width_edges(curves, fit_below=100):
    """Per T, where the width the log law needs lies, curves sorted by d (the widest last). Each
    width's state against its small-T law: "above it" (the ratio's interval lies above 1),
    "consistent with it" (not detected above it: a wide interval says little), "fit range", "not
    run" or "no small-T law"; and, paired with the widest width on the same seeds, "; loses ground
    to d = W" where its m50 over the widest's at T, divided by the same at T0 (the largest T of
    the fit range; laws.paired_growth), lies above 1 with 95% confidence. An edge is (lo, hi): hi
    the narrowest width that passes, lo the widest narrower one that fails (None: no such width);
    None where no width is judged. "edge": the departure test alone; "paired": a width must also
    not lose ground. ln_T: the first departure edge's hi scaled by ln T / ln T0, the width the edge
    would reach if it grew like ln T (as the construction's d_p does).
    -> [dict(T, d_p, states, edge, paired, ln_T)]."""
    widest, out, first = curves[-1], [], None
    small = [t for t in widest["est"] if t <= fit_below]
    for T in sorted({T for c in curves for T in c["est"]}):
        states, judged = [], []
        for c in curves:
            if T not in c["est"]:
                states.append("not run")
            elif T <= fit_below or T not in c["dep"]["ratios"]:
                states.append("fit range" if T <= fit_below else "no small-T law")
            else:
                above = surely_above(c["dep"]["ratios"][T][1], 1.0)
                lost = c is not widest and _loses_ground(c, widest, T, small)
                states.append(("above it" if above else "consistent with it") +
                              (f"; loses ground to d = {widest['d']}" if lost else ""))
                judged.append((c["d"], not above, not above and not lost))
        if first is None and any(ok for _, ok, _ in judged):
            first = (T, min(d for d, ok, _ in judged if ok))
        out.append(dict(T=T, d_p=construction_width(T, curves[0]["s"]), states=states,
                        edge=_edge([(d, ok) for d, ok, _ in judged]),
                        paired=_edge([(d, ok) for d, _, ok in judged]),
                        ln_T=round(first[1] * math.log(T) / math.log(first[0])) if first else None))
    return out


def _edge(judged):
    """(widest failing width below the narrowest passing one, narrowest passing one) of [(d, ok)];
    None when nothing is judged."""
    if not judged:
        return None
    keeps = [d for d, ok in judged if ok]
    hi = min(keeps) if keeps else None
    below = [d for d, ok in judged if not ok and (hi is None or d < hi)]
    return (max(below) if below else None, hi)


def _seeds(runs):
    return sorted({int(r["seed"]) for r in runs})


def _loses_ground(c, widest, T, small):
    """Whether width c's m50 over the widest's at T, over the same at the largest small T both
    hold with the same seeds, lies above 1 with 95% confidence (laws.paired_growth)."""
    T0s = [t for t in small if t in c["est"] and "runs" in c and _seeds(c["runs"][t]) ==
           _seeds(widest["runs"][t])]
    if not T0s or T not in widest["est"] or _seeds(c["runs"][T]) != _seeds(widest["runs"][T]):
        return False
    T0 = max(T0s)
    return surely_above(paired_growth(c["est"][T], widest["est"][T], c["est"][T0],
                                      widest["est"][T0])[1], 1.0)


def _width_plot(curves, path, limits=None, fit_below=100):
    """Left: m50 against T per width, 95% CIs as bands, the small-T log law extrapolated (thin
    dashed), the paper's points with their bars and the statistical limit. Middle: edge_panel.
    Right: the median positional overlap of S in successes (solid) and failures (dashed). None
    without matplotlib."""
    plt = pyplot_or_hint("rerun")
    if plt is None:
        return None
    fig, (ax, cx, bx) = plt.subplots(1, 3, figsize=(16, 4.4))
    _edge_panel(cx, curves, _width_edges(curves, fit_below))
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
    Tp = sorted(report.PAPER_MSTAR)
    ax.errorbar(Tp, [report.PAPER_MSTAR[t] for t in Tp],
                yerr=np.abs(np.array([report.PAPER_BAR[t] for t in Tp]).T - [report.PAPER_MSTAR[t] for t in Tp]),
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
    return save_figure(plt, fig, path)


def _edge_panel(ax, curves, edges):
    """width_plot's middle panel, width_edges against T: a bar from the widest width above its law
    (open circle) to the narrowest not detected above it (filled; an arrow up where every width
    tried is above it), the widths tried (grey lines), the construction's d_p = ceil(16 s ln T)
    and the first such narrowest width scaled like ln T."""
    for c in curves:
        ax.axhline(c["d"], color="0.85", lw=0.8, zorder=0)
    judged = [e for e in edges if e["edge"]]
    first = next((e for e in judged if e["edge"][1] is not None), None)   # where ln_T starts
    for e in judged:
        lo, hi = e["edge"]
        if hi is not None:
            ax.plot([e["T"]], [hi], "o", color="tab:blue", ms=6)
        if lo is not None:
            ax.plot([e["T"]], [lo], "o", mfc="none", color="tab:blue", ms=6)
            ax.annotate("", (e["T"], hi if hi is not None else 2 * lo), (e["T"], lo),
                        arrowprops=dict(arrowstyle="-" if hi is not None else "->",
                                        color="tab:blue"))
    for e in edges:                                  # the paired edge, set a little to the right
        if e["paired"] and e["paired"] != e["edge"]:
            lo, hi = e["paired"]
            x = e["T"] * 1.15
            for y, mfc in ((hi, "tab:orange"), (lo, "none")):
                if y is not None:
                    ax.plot([x], [y], "s", mfc=mfc, color="tab:orange", ms=6)
            if lo is not None:
                ax.annotate("", (x, hi if hi is not None else 2 * lo), (x, lo),
                            arrowprops=dict(arrowstyle="-" if hi is not None else "->",
                                            color="tab:orange"))
    Ts = sorted({T for c in curves for T in c["est"]})
    grid = np.geomspace(min(Ts), max(Ts), 60)
    ax.plot(grid, [construction_width(T, curves[0]["s"]) for T in grid], "-", color="tab:red",
            label="construction's d_p = ceil(16 s ln T)")
    if first is not None:
        T0 = first["T"]
        g = grid[grid >= T0]
        ax.plot(g, first["edge"][1] * np.log(g) / np.log(T0), "--", color="tab:blue", lw=1,
                label=f"first such width scaled like ln T (from T = {T0})")
    ax.plot([], [], "o-", color="tab:blue", label="narrowest width not detected above its law\n"
            "(filled), widest above it (open)")
    if any(e["paired"] and e["paired"] != e["edge"] for e in edges):
        ax.plot([], [], "s-", color="tab:orange", label=f"where that differs: nor losing ground "
                f"to d = {curves[-1]['d']}\n(paired on seeds)")
    ax.set(xscale="log", yscale="log", xlabel="T (log scale)", ylabel="width d (log scale)",
           title="the width the small-T log law needs (grey: widths tried)\nblue: departure "
                 "test (a wide interval is not a departure); orange: also paired")
    ticks = sorted({c["d"] for c in curves} | {256, 384})
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xscale("log")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc="upper left")


def compare_command(a, fail):
    """`python -m studies.sweep compare DIR DIR ...`: compare_table, compare_plot with --plot."""
    table, entries = over_folders(a, fail, lambda: _compare_table(
        a.folders, n_seeds=a.seeds, Ts=a.Ts, protocols=a.protocols, growth_from=a.growth_from))
    if a.plot:
        _compare_plot(entries, a.plot, "m50 and its 95% CI (bootstrap over seeds); dashed: "
                     f"{entries[0][0]}; red: the paper's m* and bar")
    return 0


def width_command(a, fail):
    """`python -m studies.sweep width DIR DIR ...`: width_table, and width_plot with --plot."""
    cache = a.plot and os.path.join(os.path.dirname(os.path.abspath(a.plot)), "limits.json")
    table, curves = over_folders(a, fail, lambda: _width_table(
        a.folders, n_seeds=a.seeds, fit_below=a.fit_below, Ts=a.Ts),
        also=[(cache, "limits", "--plot's limits cache")] if cache else [])
    if a.plot:
        Ts = sorted({T for c in curves for T in c["est"]})
        limits = statistical_limits(curves[0]["task"], curves[0]["s"], Ts, cache=cache)
        _width_plot(curves, a.plot, limits, a.fit_below)
    return 0


# ---------------------------------------------------------------- the front page's table -------

BEGIN, END = "<!-- begin results/headline.md -->", "<!-- end results/headline.md -->"


def _folder_estimates(folders, d=None, flag=None):
    """{T: (success_estimates, critical_sizes entry)} of the Transformer runs pooled over folders
    of one protocol, with the grid and search of the first folder's sweep.json. With d, a folder
    whose runs are at another width is refused in one line naming it, its width and flag."""
    for f in folders if d is not None else ():
        (width,) = _pool_by_width([f]) or (None,)
        if width != d:
            raise ValueError(f"{f} holds runs at d = {width}, not {d}: not a folder for {flag}")
    pools = _pool_by_width(folders)
    if len(pools) != 1:
        raise ValueError(f"{', '.join(folders)}: expected folders of one width, got d in "
                         f"{sorted(pools)}")
    (d, pool), = pools.items()
    rows, _ = _finished_cells(pool, d)
    stats = critical_sizes(rows, {"transformer": pool["grid"]}, pool["search"])
    est, _ = success_table(rows, ["transformer"])
    return {T: (est[("transformer", T)], st) for (_, T), st in stats.items()}, pool["opts"]


def _headline_table(d64, d128, plot=None):
    """The README's table: per T, the paper's m* with its figure's bar, our majority m* with its
    95% interval (bootstrap over seeds) at d = 64 (folders d64) and at d = 128 (folders d128), and
    the statistical limit (the median over streams), each column one statistic, every interval
    written [lo, hi]; under it, where each column comes from. -> markdown. A folder whose runs
    are not at the width of its flag is refused (ValueError). plot: also draw m* per width, the
    paper's points and the limit into this image (with matplotlib)."""
    a, opts = _folder_estimates(d64, 64, "--d64")
    b, _ = _folder_estimates(d128, 128, "--d128")
    Ts = sorted(set(a) | set(b))
    cache = os.path.join(d64[0], "limits.json")
    limits = statistical_limits(opts["task"], opts["s"], Ts, cache=cache)
    if plot:
        _headline_plot({64: a, 128: b}, limits, plot)
    m = lambda x: ci_text(dict(m=x["m_star"], m_lo=x["m_star_lo"], m_hi=x["m_star_hi"]), "m")
    cell = lambda at, T: m(at[T][1]) if T in at else "-"
    lines = ["| T | the paper's m* (its figure's error bar) | ours, d = 64: m* [95% CI] | ours, "
             "d = 128: m* [95% CI] | statistical limit |", "|---|---|---|---|---|"]
    for T in Ts:
        paper = f"{report.PAPER_MSTAR[T]} (bar {paper_bar_text(T)})" if T in report.PAPER_MSTAR else "-"
        lim = f"{limits[T]['median']:.0f}" if limits.get(T) else "-"
        lines.append(f"| {T} | {paper} | {cell(a, T)} | {cell(b, T)} | {lim} |")
    return ("\n".join(lines) + "\n\n"
            "m*: the smallest training set at which at least half of the seeds reach test accuracy "
            "0.99 (the paper's statistic), with its 95% interval from a bootstrap over seeds. "
            "Where each column comes from:\n\n"
            "- the paper's m*: read off its figure (`report.PAPER_MSTAR`), with the error bar the "
            "figure draws (`report.PAPER_BAR`), written (bar lo-hi): square brackets on these "
            "pages are always our own 95% intervals;\n"
            f"- d = 64: {', '.join(d64)}/table.md ({_seed_counts(a)});\n"
            f"- d = 128: {', '.join(d128)}/table.md ({_seed_counts(b)});\n"
            f"- the statistical limit: the fewest samples that leave one hypothesis consistent, "
            f"the median over {LIMIT_SEEDS} random streams ({cache}; its 5-95% spread is in "
            f"the folders' tables).\n\n"
            "The folders' tables also give m50, where a logistic fit of success against ln m "
            "crosses 1/2; at d = 64 and T >= 3000 it is far above m*, because there the share of "
            "successes stops rising with m (a plateau the fit cannot follow).\n")


def _seed_counts(at):
    """'30 seeds', or '20 seeds, 10 at T = 10000' where some T hold fewer or more."""
    n = {T: at[T][1]["n_seeds"] for T in sorted(at)}
    usual = max(set(n.values()), key=lambda k: (list(n.values()).count(k), k))
    odd = {}
    for T, k in n.items():
        if k != usual:
            odd.setdefault(k, []).append(str(T))
    return f"{usual} seeds" + "".join(f", {k} at T = {', '.join(Ts)}" for k, Ts in odd.items())


def _headline_plot(widths, limits, path):
    """m* (majority) with its 95% interval against T for each width {d: {T: (est, st)}}, the
    paper's figure with its bars, and the statistical limit; None without matplotlib."""
    plt = pyplot_or_hint("rerun")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6.6, 4.3))
    for (d, at), mark in zip(sorted(widths.items()), ("o-", "s-")):
        Ts = sorted(at)
        ms = np.array([at[T][1]["m_star"] for T in Ts])
        err = np.abs(np.array([[at[T][1]["m_star_lo"] for T in Ts],
                               [at[T][1]["m_star_hi"] for T in Ts]]) - ms)
        ax.errorbar(Ts, ms, yerr=np.where(np.isfinite(err), err, 0), fmt=mark, capsize=3, ms=4,
                    label=f"ours, d = {d}: m* (half of the seeds succeed), 95% CI")
    Tp = sorted(report.PAPER_MSTAR)
    ax.errorbar(Tp, [report.PAPER_MSTAR[t] for t in Tp],
                yerr=np.abs(np.array([report.PAPER_BAR[t] for t in Tp]).T - [report.PAPER_MSTAR[t] for t in Tp]),
                fmt="^", color="k", ms=4, capsize=2, label="the paper's figure")
    Tl = sorted(limits)
    ax.plot(Tl, [limits[t]["median"] for t in Tl], ":", color="gray",
            label="statistical limit: one hypothesis left (median)")
    ax.set(xscale="log", xlabel="T, bits in the input (log scale)",
           ylabel="training samples needed", title="3-sparse AND: samples needed against T")
    ax.legend(fontsize=7.5)
    return save_figure(plt, fig, path)


def headline_command(a, fail):
    """`python -m studies.sweep headline`: headline_table into --out, and between the markers of
    --readme; a line when its folders' BLAS kernels differ (provenance.kernels_differ)."""
    for f in [a.d64] + a.d128:
        if not os.path.isdir(f):
            fail(f"no folder {f}")
    try:
        harness.claim_outputs([(a.out, "table", "--out"), (a.plot, "plot", "--plot")])
        text = read_text_file(a.readme, "--readme", keep_line_ends=True)   # as pages read a page
        check_markers(text, a.readme)
        if "results/headline.md" not in marked_files(text):
            raise ValueError(f"--readme {a.readme} has no lines '{BEGIN}' and '{END}' to paste "
                             f"the table between; add them, or give another --readme")
        target = page_target(a.readme, os.getcwd(), "--readme")
        table = _headline_table([a.d64], a.d128, a.plot)
        note = provenance.kernels_differ([a.d64] + a.d128)
    except ValueError as e:
        fail(str(e))
    write_text(a.out, table)
    print(table, end="")
    if note:
        print(note)
    new = paste_tables(text, {"results/headline.md": table})
    if new != text:
        write_text(target, new, newline="")
        print(f"saved {a.out}; pasted into {a.readme}")
        return 0
    print(f"saved {a.out}")
    return 0


def _ratio(x):  # (ratio, lo, hi) -> text, 2 decimals at most (ci_text)
    show = lambda v: "-" if np.isnan(v) else bound_text(v, 2)
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
