"""report.py (studies/lib): one finished sweep folder's table and plot, and the table pieces every
report over folders shares (compare.py, families.py); nothing here trains.

    python -m studies.sweep --out DIR --report    a folder's table.md, critical.json, mstar.png

Every number comes from stats.py (the estimator) and intervals.py applied to the rows of
folder.py; plots need matplotlib and are skipped with a one-line hint without it; the
statistical limit beside m* is limits.py's. The file reads top to bottom: the paper's figure,
the table pieces, one folder's table and plot, what every command over folders does first.
"""
import os
import sys

import numpy as np

from theory import fit_line

from studies.lib import harness, intervals, provenance
from studies.lib.checks import INTS, check_number
from studies.lib.cli import pyplot_or_hint, save_figure, write_json, write_text
from studies.lib.folder import folder_rows
from studies.lib.harness import need
from studies.lib.intervals import bound_text
from studies.lib.laws import scaling_fits
from studies.lib.limits import STRUCTURED, limit_text, statistical_limits
from studies.lib.stats import critical_sizes, split_by_T, success_estimates

# ---------------------------------------------------------------- the paper's figure -----------
# "Transformer, 3-way AND": the critical sample size m* per T, read off the published image to
# about half a sample, and the figure's error bars as (low, high).

PAPER_MSTAR = {100: 50.0, 150: 52.8, 200: 57.7, 250: 56.0, 300: 69.2, 350: 61.0, 400: 79.5,
               450: 82.4, 500: 80.4, 550: 85.2, 600: 94.1, 650: 96.7, 700: 88.9, 750: 101.4,
               800: 99.7, 900: 108.4, 1000: 111.0, 1100: 113.4}  # read off the paper's figure
PAPER_BAR = {100: (48.7, 51.3), 150: (48.3, 57.3), 200: (53.3, 62.1), 250: (51.1, 60.9),
             300: (61.7, 76.7), 350: (54.3, 67.7), 400: (74.8, 84.3), 450: (76.7, 88.1),
             500: (71.9, 89.0), 550: (77.6, 92.8), 600: (84.2, 104.0), 650: (81.8, 111.6),
             700: (79.2, 98.7), 750: (90.8, 112.0), 800: (87.1, 112.4), 900: (104.8, 112.0),
             1000: (105.8, 116.2), 1100: (107.8, 119.1)}


def asks_papers_question(task, s, bar):
    """True when a sweep measures what the paper's figure does (3-sparse AND, success = test
    accuracy 0.99), so its m* may be set beside PAPER_MSTAR."""
    return (task, s, bar) == ("and", 3, 0.99)


def paper_bar_text(T):
    """The figure's error bar at T as the table prints it ("48.7-51.3"), or '' off the figure."""
    on = isinstance(T, (int, np.integer)) and T in PAPER_BAR
    return f"{PAPER_BAR[T][0]:.1f}-{PAPER_BAR[T][1]:.1f}" if on else ""


# ---------------------------------------------------------------- one folder: its table and plot

def success_table(rows, models):
    """Per (model, T): success_estimates over all runs (m50, m90 and their 95% CIs from a
    bootstrap over seeds); and per model, scaling_fits of m50 against T (None under 3 T).
    About a second per (model, T) at N_BOOT resamples: on a terminal, a line on stderr shows
    which one it is at, and is cleared when done."""
    need(isinstance(rows, list) and all(isinstance(r, dict) and "model" in r for r in rows),
            "rows", rows, "a list of runs (dicts with a model)")
    need(isinstance(models, (list, tuple)) and all(m in ("transformer", "mlp") for m in models),
            "models", models, "a list of transformer, mlp", ValueError)
    est, fits = {}, {}
    show = sys.stderr.isatty()
    for model in models:
        by_T = split_by_T([r for r in rows if r["model"] == model])
        for i, (T, runs) in enumerate(by_T.items()):
            if show:
                print(f"\rbootstrap over seeds, {intervals.N_BOOT:,} resamples: {model} T = {int(T)} "
                      f"({i + 1} of {len(by_T)})   ", end="", file=sys.stderr, flush=True)
            est[(model, int(T))] = success_estimates(runs, n_boot=intervals.N_BOOT, seed=0)
        Ts = [int(T) for T in by_T if np.isfinite(est[(model, int(T))]["m50"])
              and est[(model, int(T))]["m50"] > 0]
        if len(Ts) >= 3:
            fits[model] = scaling_fits(np.array(Ts), np.array([est[(model, T)]["m50"] for T in Ts]),
                                       np.array([est[(model, T)]["m50_boot"] for T in Ts]))
    if show:
        print("\r" + " " * 79 + "\r", end="", file=sys.stderr, flush=True)
    return est, fits


def ci_text(e, key, decimals=0):
    """e[key] [e[key_lo], e[key_hi]]: a point estimate and its 95% interval, no bound printed to a
    digit finer than its Monte Carlo error (intervals.bound_text)."""
    need(isinstance(key, str), "key", key, "a str")
    need(isinstance(e, dict) and {key, key + "_lo", key + "_hi"} <= set(e), "e", e,
            f"a dict holding {key}, {key}_lo and {key}_hi (key={key!r})", ValueError)
    return (f"{bound_text(e[key], decimals)} [{bound_text(e[key + '_lo'], decimals)}, "
            f"{bound_text(e[key + '_hi'], decimals)}]")


def rerun_texts(folder, seeds=range(10), n_boot=None):
    """The printed text of a folder's drawn bounds at several bootstrap seeds, for measuring how
    often a rerun changes a printed digit (rerun_changes): per T the bounds of m50 and m90
    (success_estimates), and the bounds of the fits across T (scaling_fits, the table's digits)
    -> {name: [text at each seed]}. n_boot: default intervals.N_BOOT, what the tables draw."""
    harness.check_path("folder", folder, "a sweep folder", folder=True)
    need(isinstance(seeds, (list, tuple, range)) and seeds, "seeds", seeds,
            "a non-empty list of bootstrap seeds")
    for seed in seeds:
        check_number("seeds", seed, INTS, 0)
    n_boot = intervals.N_BOOT if n_boot is None else check_number("n_boot", n_boot, INTS, 1,
                                                              intervals.MAX_BOOT + 1)
    _, rows = folder_rows(folder)
    by = {int(T): r for T, r in split_by_T([r for r in rows if r["model"] == "transformer"]).items()}
    out = {}
    for seed in seeds:
        est = {T: success_estimates(r, n_boot=n_boot, seed=seed) for T, r in by.items()}
        for T, e in est.items():
            for key in ("m50_lo", "m50_hi", "m90_lo", "m90_hi"):
                out.setdefault(f"{key} T={T}", []).append(bound_text(e[key], 0))
        Ts = [T for T in by if np.isfinite(est[T]["m50"]) and est[T]["m50"] > 0]
        if len(Ts) >= 3:
            f = scaling_fits(np.array(Ts), np.array([est[T]["m50"] for T in Ts]),
                             np.array([est[T]["m50_boot"] for T in Ts]))
            for key, dec in (("log_b", 1), ("lin_b", 4), ("pow_k", 2), ("daic", 1)):
                for side in ("_lo", "_hi"):
                    out.setdefault(key + side, []).append(bound_text(f[key + side], dec))
    return out


def rerun_changes(texts):
    """{name: [text at seed 0, at seed 1, ...]} -> (reruns whose text differs from seed 0's,
    reruns): the measure of the printing rule (stats.py's module docstring)."""
    need(isinstance(texts, dict) and all(isinstance(v, list) and v for v in texts.values()),
            "texts", texts, "rerun_texts' dict of lists")
    changed = sum(t != v[0] for v in texts.values() for t in v[1:])
    return changed, sum(len(v) - 1 for v in texts.values())


def rounding_note():
    """The line under every table of bootstrap intervals: how many resamples, and how to read a
    bound printed with fewer digits (intervals.bound_text)."""
    return (f"95% intervals from {intervals.N_BOOT:,} bootstrap resamples of the seeds, each T's on "
            f"its own and the same at one T (paired), or exact (one T's m* after bisection); a "
            f"bound from drawn resamples keeps no digit its Monte Carlo band (two standard errors "
            f"either side) moves, rounded outwards where it loses digits (an upper bound of 210 "
            f"may stand for 200-210, a lower one for 210-220), and one left without a figure is "
            f"widened to the far end of that band and marked ~ (~500: reaches at most that far; "
            f"> a: known only to exceed a)")


def fits_line(head, what, f):
    """One line of scaling_fits' results for `what` (m50 or m*), with their 95% CIs."""
    keys = {k + side for k in ("log_b", "lin_b", "pow_k", "daic") for side in ("", "_lo", "_hi")}
    need(isinstance(f, dict) and keys | {"p_log_better"} <= set(f), "f", f,
            "a dict of laws.scaling_fits", ValueError)
    return (f"{head}{what} ~ a + b ln T, b = {ci_text(f, 'log_b', 1)};  {what} ~ a + b T, "
            f"b = {ci_text(f, 'lin_b', 4)};  {what} ~ a T^k, k = {ci_text(f, 'pow_k', 2)};  "
            f"AIC(log) - AIC(line) = {ci_text(f, 'daic', 1)}, the "
            f"log fits better in {100 * f['p_log_better']:.0f}% of bootstrap resamples "
            f"(95% CIs, bootstrap over seeds)")


def _sweep_table(stats, paper_comparable, est, scaling, log=print, limits=None):
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
        ms = ci_text({"m": st["m_star"], "m_lo": st["m_star_lo"], "m_hi": st["m_star_hi"]}, "m")
        notes = ([f"{st['censored']} above grid"] if st["censored"] else []) + \
                ([f"{st['unfinished']} unfinished"] if st["unfinished"] else [])
        show = paper_comparable and model == "transformer"
        lines.append(f"| {model} | {T} | {ci_text(e, 'm50')} | {ci_text(e, 'm90')} | {ms} | "
                     f"{st['mean']:.1f} +- {st['std']:.1f} "
                     f"[{st['lo']:.0f}, {st['hi']:.0f}]"
                     f"{' (' + ', '.join(notes) + ')' if notes else ''} | {st['n_seeds']} | "
                     f"{PAPER_MSTAR.get(T, '') if show else ''} | "
                     f"{paper_bar_text(T) if show else ''} | {limit_text(limits.get(T))} |")
    fits = []                       # m50 with bootstrap CIs first, then the majority-rule m*
    for model, f in scaling.items():
        fits.append(fits_line(f"{model}: ", "m50", f))
    for model in sorted({k[0] for k in stats}):
        pts = sorted((T, st) for (mo, T), st in stats.items()
                     if mo == model and 0 < st["m_star"] < np.inf)
        if len(pts) >= 3:
            T_ = [T for T, _ in pts]
            f = scaling_fits(np.array(T_), np.array([st["m_star"] for _, st in pts]),
                             np.array([st["m_star_boot"] for _, st in pts]))
            fits.append(fits_line(f"{model}: ", "m*", f) + f" over T in {min(T_)}..{max(T_)}")
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        b, a, r2 = fit_line(np.log(Tp), [PAPER_MSTAR[t] for t in Tp])
        e, c, q2 = fit_line(Tp, [PAPER_MSTAR[t] for t in Tp])
        fits.append(f"paper: m* ~ {a:.1f} + {b:.1f} ln T (R^2 {r2:.3f});  m* ~ {c:.1f} + "
                    f"{e:.4f} T (R^2 {q2:.3f})  over T in 100..1100")
    fits.append(rounding_note())
    for line in lines + [""] + fits:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits]) + "\n"


def _sweep_plot(stats, path, title, paper_comparable, est=None, limits=None):
    """m50 with its 95% CI per model against T (log scale), the majority-rule m*, the paper's
    points with their bars, and the statistical limit; None when matplotlib is missing."""
    plt = pyplot_or_hint("rerun with --report to draw it from the saved runs")
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
            with np.errstate(invalid="ignore"):  # inf - inf where m50 is past the grid: no bar
                err = np.abs(np.array([[x["m50_lo"] for x in e], [x["m50_hi"] for x in e]]) - mid)
            ax.errorbar(T_, mid, yerr=np.where(np.isfinite(err), err, 0), fmt=mark, capsize=3,
                        label=f"{model} (ours): m50, 95% CI (bootstrap over seeds)")
        else:
            ax.errorbar(T_, [st["mean"] for _, st in pts], yerr=[st["std"] for _, st in pts],
                        fmt=mark, capsize=3, label=f"{model} (ours): per-seed mean +- std")
        ms = np.array([st["m_star"] for _, st in pts])
        with np.errstate(invalid="ignore"):      # inf - inf where m* is past the grid: no bar
            err = np.abs(np.array([[st["m_star_lo"] for _, st in pts],
                                   [st["m_star_hi"] for _, st in pts]]) - ms)
        ax.errorbar(T_, ms, yerr=np.where(np.isfinite(err), err, 0), fmt="x", color="k", ms=7,
                    capsize=2, elinewidth=0.8,
                    label="m* (ours): half of the seeds succeed, 95% CI"
                    if model == "transformer" else None)
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        ax.errorbar(Tp, [PAPER_MSTAR[t] for t in Tp],
                    yerr=np.abs(np.array([PAPER_BAR[t] for t in Tp]).T - [PAPER_MSTAR[t] for t in Tp]),
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
                ax.annotate(f"CI to {bound_text(e['m50_hi'], 0)}",
                            (T, top), xytext=(0, -12), textcoords="offset points", ha="center",
                            fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(plt, fig, path)

FOLDER_OUTPUTS = (("table.md", "table"), ("critical.json", "critical"), ("mstar.png", "plot"),
                  ("limits.json", "limits"))   # what folder_report writes into OUT, each its kind


def folder_report(out, rows, grids, a, protocol, missing):
    """One folder's report: the table (printed and OUT/table.md), OUT/critical.json and, with
    matplotlib, OUT/mstar.png. rows: the finished runs to report; grids {model: m grid}; a: the
    sweep's options (task, s, bar, n_test, steps, search, grid_ratio); missing: the searches asked
    for but not finished, [(model, T, seed)], named at the top of the table."""
    harness.check_path("out", out, "a sweep folder", folder=True)
    need(isinstance(missing, list), "missing", missing, "a list of (model, T, seed)")
    need(isinstance(grids, dict) and grids, "grids", grids, "a dict {model: m grid}")
    stats = critical_sizes(rows, grids, a.search)
    comparable = asks_papers_question(a.task, a.s, a.bar)
    what = f"{a.s}-sparse {a.task.upper() if a.task in ('and', 'or') else a.task}"
    print(f"\ncritical sample size of {what}, success = test accuracy >= {a.bar} on {a.n_test} "
          f"fresh samples after {a.steps} steps, {a.search} search on a grid of ratio "
          f"{a.grid_ratio}, protocol {protocol}:")
    est, scaling = success_table(rows, sorted({k[0] for k in stats}))
    Ts = sorted({k[1] for k in stats})
    limits = statistical_limits(a.task, a.s, Ts, cache=os.path.join(out, "limits.json"),
                                compute=a.task in STRUCTURED)   # majority, junta: enumeration
    table = _sweep_table(stats, comparable, est, scaling, limits=limits)
    if a.task not in STRUCTURED and set(Ts) - set(limits):
        note = (f"statistical limit not computed at T = "
                f"{', '.join(str(T) for T in Ts if T not in limits)}: for {a.task} it enumerates "
                f"every support, many minutes per T (python -m studies.sweep limit --task {a.task} "
                f"--s {a.s} --Ts ...)")
        print(note)
        table += "\n" + note + "\n"
    if missing:
        shown = ", ".join(f"{mo} T={T} seed {sd}" for mo, T, sd in missing[:6])
        table = (f"INCOMPLETE: {len(missing)} searches missing or unfinished "
                 f"({shown}{', ...' if len(missing) > 6 else ''})\n\n" + table)
    write_text(os.path.join(out, "table.md"), table)
    write_json(os.path.join(out, "critical.json"),
               [{k: v for k, v in dict(st, **est[key], limit=limits.get(key[1])).items()
                 if not k.endswith("_boot") and k != "m_star_above"}     # the JSON keeps its fields
                for key, st in stats.items()])
    png = _sweep_plot(stats, os.path.join(out, "mstar.png"),
                     f"{what}: samples to reach test accuracy >= {a.bar}", comparable, est=est,
                     limits=limits)
    print(f"saved {out}/table.md, {out}/critical.json" + (f", {png}" if png else ""))


def cpu_minutes(runs):
    """The runs' seconds summed, in minutes."""
    need(isinstance(runs, list) and all(isinstance(r, dict) and "seconds" in r for r in runs),
            "runs", runs, "a list of rows with seconds")
    return np.nansum([float(r["seconds"]) for r in runs]) / 60


# ---------------------------------------------------------------- the commands over folders ----

def over_folders(a, fail, make, also=()):
    """The compare, width and families commands' common part: every folder must exist, and
    --out (a table), --plot (an image) and `also` ((path, kind, what) of other files the
    command writes) must be free or already outputs of their kind (cli.claim_output), before
    anything is computed; make() -> (table, extra), its ValueError one line through fail(); the
    table also goes to --out, and a line when the folders' runs were made under different BLAS
    kernels (provenance.kernels_differ) to standard output."""
    harness.check_callable("make", make)
    need(isinstance(also, (list, tuple)), "also", also, "a list of (path, kind, what)")
    for folder in a.folders:
        if not os.path.isdir(folder):
            fail(f"no folder {folder}")
    try:
        harness.claim_outputs([(a.out, "table", "--out"),
                               (getattr(a, "plot", None), "plot", "--plot")] + list(also))
    except (ValueError, TypeError) as e:
        fail(str(e))
    try:
        table, extra = make()
        note = provenance.kernels_differ(a.folders)     # runs of two BLAS kernels side by side
    except ValueError as e:
        fail(str(e))
    if a.out:
        write_text(a.out, table)
    if note:
        print(note)
    return table, extra





