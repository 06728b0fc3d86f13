"""classball.py (studies, a command): m*(T) for heads trained inside one fixed bound on every norm the
capacity bound counts (issue 52), against the unconstrained study on the same seeds.

    python -m studies.classball STUDY FOLDER... --out OUT.md [--plot OUT.png]

STUDY is the unconstrained sweep folder (results/extended); each FOLDER a sweep of the same grid
and search run with run options ball_qk, ball_vo, ball_w and ball_mlp (sweep protocols
class-tight, class-loose), which writes each run's projection record beside its runs
(ball-of-runs.csv, row_kinds.BALL_ROWS). At every T a folder holds, its finished seeds 0..n-1 are
set beside the study's same seeds. The page has four tables:
  1. per folder and T: m* by the majority rule with its exact interval, m50 with its bootstrap
     interval, the seeds above the grid, each seed's critical m against the study's (the exact
     sign test), the CPU minutes of the cell;
  2. per folder and the study (on the same seeds): m* and m50 against the four laws of
     laws.four_laws (a + b ln T, a + b T, a + b (ln T)^2, a T^k), slopes and pairwise AIC
     differences with intervals over seeds, and a verdict by the intervals;
  3. per folder and T: how often each norm's projection acted, and the final norms against the
     radii (from the record);
  4. the reconstructed capacity bound (theory.covering_constant's shape) at each folder's radii:
     its constant C and the generalization gap it gives at the measured m* (vacuous at >= 1).
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.classball")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import math
import os

import numpy as np

import theory

from studies.lib import (folder, harness, laws, limits, row_kinds, run_options, seed_laws, stats,
                         training)
from studies.lib.checks import INTS, check_number
from studies.lib.cli import OneLineParser
from studies.lib.intervals import holm, percentile_ci, resample_counts, sign_test
from studies.lib.study import fmt, weighted_median

NORMS = row_kinds.BALL_NORMS
GAP = 0.1               # the generalization gap the bound is asked for (theory.samples_for_gap)


def bound_constant(radii, d, heads):
    """theory.covering_constant's C for a model whose every head sits at the radii (the largest
    the class allows): canonical ||W_QK,h||_F = qk; ||W_V,h||_2 = ||W_O,h||_2 = sqrt(vo) (the
    canonical factors of ||W_VO,h||_2 <= ||W_VO,h||_F = vo), ||W_V,h||_{2,1} <= e^(3/4) sqrt(vo)
    (sum_i sqrt(sigma_i) <= sqrt(e sum_i sigma_i), sum_i sigma_i <= sqrt(e) vo); L_after = w (1 +
    1.13 mlp) (GELU's Lipschitz constant); B_X = sqrt(d + 1) (LayerNorm, canonical). None when a
    norm is not held (the class is then unbounded)."""
    harness.need(isinstance(radii, dict) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf
        for v in radii.values()), "radii", radii, "a dict {norm: radius >= 0}", TypeError)
    check_number("d", d, INTS, 1, 2 ** 20)
    check_number("heads", heads, INTS, 1, d)
    harness.need(d % heads == 0, "heads", heads, f"a divisor of d = {d}", ValueError)
    if any(not radii.get(k) for k in NORMS):
        return None
    e = d // heads
    v2 = math.sqrt(radii["vo"])
    nm = dict(B_X=math.sqrt(d + 1), L_after=radii["w"] * (1 + 1.13 * radii["mlp"]),
              qk_fro=[radii["qk"]] * heads, v_spec=[v2] * heads, v_21=[e ** 0.75 * v2] * heads,
              o_spec=[v2] * heads, readout_norm=radii["w"], mlp_factor=1 + 1.13 * radii["mlp"])
    return theory.covering_from_parts(nm["B_X"], nm["L_after"], **theory.covering_parts(nm))


def _cells(path, study):
    """{T: dict(rows, seeds, crit, est, base, base_est)} of a class folder: at each T its finished
    seeds 0..n-1 and the study's runs of the same seeds."""
    meta, rows = folder.folder_rows(path)
    _, srows = folder.folder_rows(study)
    smeta = folder.read_meta(study)
    grid = meta["grids"]["transformer"]
    harness.need(grid == smeta["grids"]["transformer"] and meta["search"] == smeta["search"],
                 "folders", (path, study), "sweeps of one grid and search", ValueError)
    crit = stats.critical_sizes(rows, {"transformer": grid}, meta["search"])
    out = {}
    for (_, T), st in sorted(crit.items()):
        n = st["n_seeds"]
        seeds = sorted({int(r["seed"]) for r in rows if int(r["T"]) == T})
        if st["unfinished"] or seeds != list(range(n)):
            continue                                       # a cell still running: left out
        mine = [r for r in rows if int(r["T"]) == T]
        theirs = [r for r in srows if int(r["T"]) == T and int(r["seed"]) < n]
        base = stats.critical_sizes(theirs, {"transformer": grid}, meta["search"]) if theirs else {}
        b = base.get(("transformer", T))
        out[T] = dict(rows=mine, n=n, crit=st, est=stats.success_estimates(mine),
                      base=b if b and b["n_seeds"] == n and not b["unfinished"] else None,
                      base_est=stats.success_estimates(theirs) if theirs else None)
    harness.need(bool(out), "folder", path, "a sweep folder with at least one finished T",
                 ValueError)
    return meta, out


def _n(v):
    return "inf" if math.isinf(v) else f"{v:g}"


def _ci(v, lo, hi):  # "v [lo, hi]", a bound rounded outwards by its Monte Carlo band (fmt)
    return fmt(v, lo, hi) if math.isfinite(v) else f"inf [{_n(lo)}, {_n(hi)}]"


def _cell_lines(name, cells, meta):
    """One row per T; the sign tests' p Holm-adjusted over the folder's T (one family)."""
    rows, ps = [], []
    for T, c in cells.items():
        a, b = c["crit"], c["base"]
        more = sum(x > y for x, y in zip(a["per_seed"], b["per_seed"])) if b else 0
        fewer = sum(x < y for x, y in zip(a["per_seed"], b["per_seed"])) if b else 0
        rows.append((T, c, more, fewer))
        if b:
            ps.append(sign_test(more, fewer))
    adjusted = iter(holm(ps))
    lines = []
    for T, c, more, fewer in rows:
        slack = f"{slack_of(meta, T)[0]:.2f}" if meta["options"].get("ball_qk") else "-"
        a, b, e = c["crit"], c["base"], c["est"]
        vs = (f"{_n(b['m_star'])} [{_n(b['m_star_lo'])}, {_n(b['m_star_hi'])}] | {more} / "
              f"{fewer} / {c['n'] - more - fewer} | {sign_test(more, fewer):.3g} | "
              f"{next(adjusted):.2g}") if b else "- | - | - | -"
        cpu = sum(float(r["seconds"]) for r in c["rows"] if r["seconds"] == r["seconds"]) / 60
        lines.append(f"| {name} | {T} | {slack} | {c['n']} | {_n(a['m_star'])} [{_n(a['m_star_lo'])}, "
                     f"{_n(a['m_star_hi'])}] | {_ci(e['m50'], e['m50_lo'], e['m50_hi'])} | "
                     f"{a['censored']} | {vs} | {cpu:.1f} |")
    return lines


def _verdict(f, a, b):
    lo, hi = f[f"daic_{a}_{b}_lo"], f[f"daic_{a}_{b}_hi"]
    return (f"{a} better" if hi < 0 else f"{b} better" if lo > 0 else "not decided")


def _law_lines(name, what, Ts, values, boots):
    if len(Ts) < 3 or not all(np.isfinite(values)) or min(values) <= 0:
        return [f"| {name} | {what} | fewer than 3 T with a finite value: no fit | | | |"]
    f = laws.four_laws(np.array(Ts, float), np.array(values, float), np.array(boots, float))
    slope = "; ".join(f"{k} {_ci(f[k + '_b'], f[k + '_lo'], f[k + '_hi'])}" for k in laws.LAWS)
    pairs = "; ".join(f"{a}-{b} {_ci(f[f'daic_{a}_{b}'], f[f'daic_{a}_{b}_lo'], f[f'daic_{a}_{b}_hi'])}"
                      f": {_verdict(f, a, b)}" for i, a in enumerate(laws.LAWS)
                      for b in laws.LAWS[i + 1:])
    best = ", ".join(f"{k} {v:.0%}" for k, v in f["best"].items() if v is not None)
    return [f"| {name} | {what} | {', '.join(map(str, Ts))} | {slope} | {pairs} | {best} "
            f"({f['n_dropped']} of {f['n_boot']} resamples without a fit) |"]


def _record_lines(name, path, cells):
    recs = row_kinds.read_rows(folder.study_csvs(os.path.join(path, "ball-of-runs.csv"),
                                              row_kinds.BALL_ROWS, "ball records"),
                            kind=row_kinds.BALL_ROWS)
    by = {}
    for r in recs:
        k, line = (r["T"], r["seed"], r["m"]), r.pop("line")
        harness.need(by.setdefault(k, r) == r, "folder", path, f"one record per run (ball-of-"
                     f"runs.csv; {line} records T={k[0]} seed={k[1]} m={k[2]} again, otherwise)",
                     ValueError)
    lines = []
    for T, c in cells.items():
        got = [by.get((T, int(r["seed"]), int(r["m"]))) for r in c["rows"]]
        if not all(got):
            raise ValueError(f"{os.path.join(path, 'ball-of-runs.csv')} has no record of "
                             f"{sum(g is None for g in got)} of the {len(got)} runs at T = {T} "
                             f"(a sweep inside the class ball writes one per run)")
        steps = [int(r["steps"]) for r in c["rows"]]
        parts = []
        for k in NORMS:
            if not got[0][f"{k}_radius"]:
                parts.append("not held")
                continue
            acted = np.mean([g[f"{k}_active"] > 0 for g in got])
            share = np.median([g[f"{k}_active"] / s for g, s in zip(got, steps)])
            final = np.median([g[f"{k}_final"] / g[f"{k}_radius"] for g in got])
            parts.append(f"{acted:.0%} of runs; {share:.1%} of steps; final {final:.2f}")
        lines.append(f"| {name} | {T} | {len(got)} | " + " | ".join(parts) + " |")
    return lines


def class_page(study, folders, out, plot=None, log=print):
    """The page (module docstring) of the class folders against the study, into `out`; with
    `plot` and matplotlib, m*(T) per folder beside the study's and the statistical limit: its
    four sections in turn (the cells, the laws, the projection's record, the bound)."""
    harness.check_path("out", out, "the table's file")
    harness.check_path("study", study, "a sweep folder", folder=True)
    harness.need(isinstance(folders, (list, tuple)) and folders, "folders", folders,
                 "a list of sweep folders", ValueError)
    folders = [harness.check_path("folders", f, "a sweep folder", folder=True) for f in folders]
    if plot is not None:
        harness.check_path("plot", plot, "an image file's path")
    harness.claim_outputs([(out, "table", "the table"), (plot, "plot", "the plot")],
                          folders=[study, *folders])
    harness.need(callable(log), "log", log, "a function of one line")
    got = _class_folders(study, folders)
    lines = (_cells_section(study, folders, got) + _growth_section(study, got)
             + _laws_section(study, got) + _record_section(got) + _bound_section(got))
    cli.write_text(out, "\n".join(lines) + "\n")
    log(f"wrote {out}")
    if plot:
        _plot(study, got, plot, log)


def _name(f):
    return os.path.basename(f.rstrip("/"))


def _class_folders(study, folders):
    """{folder: (its sweep.json, its cells against the study's, its radii)}, each folder one run
    inside the class ball."""
    got = {}
    for f in folders:
        meta, cells = _cells(f, study)
        radii = run_options.ball_radii(meta["options"])
        harness.need(bool(radii), "folders", f, "a sweep run inside the class ball (options "
                     "ball_qk, ball_vo, ball_w, ball_mlp)", ValueError)
        got[f] = (meta, cells, radii)
    return got


def _cells_section(study, folders, got):
    """The page's head and its table of cells: m*, m50, seeds above the grid, the sign test."""
    lines = ["## m*(T) inside the capacity bound's class", "",
             f"Written by `python -m studies.classball {study} {' '.join(folders)}`. Per folder "
             "and T, its finished seeds 0..n-1 beside the study's same seeds: m* by the majority "
             "rule with its exact 95% interval, m50 with its seed-bootstrap interval, and each "
             "seed's critical m against the study's (above the grid counts as larger; exact "
             "two-sided sign test on the seeds that differ, and its p Holm-adjusted over the "
             "folder's T). W_QK's slack: its radius over the "
             "ideal need at T (slack_of). CPU minutes: the cell's runs' seconds summed (wall "
             "time of one-thread runs).", "",
             _not_the_construction(folder.read_meta(study)["options"],
                                   sorted({T for _, cells, _ in got.values() for T in cells})), "",
             "| folder | T | W_QK's slack | seeds | m* [95% CI] | m50 [95% CI] | above the grid | "
             "the study's m*, same seeds | more / fewer / same | sign test p | Holm over T | "
             "CPU min |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f, (meta, cells, _) in got.items():
        lines += _cell_lines(_name(f), cells, meta)
    return lines


def _not_the_construction(options, Ts):
    """One sentence: the ideal need is not the hand-built construction's norm, whose codes need a
    width (theory.construction_width) beyond the model's d at these T."""
    widths = ", ".join(f"{theory.construction_width(T, options['s'])} at T = {T}" for T in Ts)
    return ("The ideal need is the least norm any head could open the gap with, not the norm of "
            "the hand-built construction "
            "(theory.build_sparse_head): its positional codes need width 16 s ln T "
            f"(theory.construction_width: {widths}) against this model's d = {options['d']}.")


def _growth_section(study, got):
    """The cost on the ratio scale, paired by seed: G(T) = (m* / the study's m*, same seeds, at
    T) over the same at the folder's first T, with its interval (laws.paired_growth: the same
    resamples in both folders at one T, independent ones at the two T)."""
    lines = ["", "### Does the cost grow with T?", "",
             f"G(T): the folder's m* over {_name(study)}'s on the same seeds at T, divided by the "
             "same ratio at the folder's first T; 95% interval from the seed bootstrap (paired at "
             "each T, each T's seeds resampled on their own). A constant cost factor gives "
             "G = 1 at every T; an interval above 1 says the cost grows.", "",
             "| folder | T | G(T) [95% CI] |", "|---|---|---|"]
    for f, (_, cells, _) in got.items():
        est = {T: ({"m50": c["crit"]["m_star"], "m50_boot": c["crit"]["m_star_boot"]},
                   {"m50": c["base"]["m_star"], "m50_boot": c["base"]["m_star_boot"]})
               for T, c in cells.items() if c["base"]}
        Ts = sorted(est)
        for T in Ts[1:]:
            g, lo, hi = laws.paired_growth(est[T][0], est[T][1], est[Ts[0]][0], est[Ts[0]][1])
            lines.append(f"| {_name(f)} | {T} (from {Ts[0]}) | {_ci(g, lo, hi)} |")
    return lines


def _laws_section(study, got):
    """The four laws on each folder's m* and m50, and on the study's same seeds (once per set of
    T and seeds)."""
    lines = ["", "### The laws", "",
             "Each curve against four two-parameter laws fitted to m itself (laws.four_laws); "
             "slopes (k for a T^k) with 95% intervals; AIC(i) - AIC(j) with its interval "
             "(negative favours i; the verdict is read from the interval: 'not decided' when it "
             "holds 0); the share of resamples each law fits best. The study's rows use the same "
             "seeds and T as the folder's.", "",
             "| curve | estimate | T | slopes | AIC differences | best |",
             "|---|---|---|---|---|---|"]
    shown = set()                 # the study's curve once per set of (T, seeds) it is read on
    for f, (_, cells, _) in got.items():
        Ts = list(cells)
        for who, key, est in ((_name(f), "crit", "est"), (f"{_name(study)} (same seeds)", "base",
                                                           "base_est")):
            if any(cells[T][key] is None for T in Ts):
                continue
            if key == "base":
                same = tuple((T, cells[T]["n"]) for T in Ts)
                if same in shown:
                    continue
                shown.add(same)
            lines += _law_lines(who, "m*", Ts, [cells[T][key]["m_star"] for T in Ts],
                                [cells[T][key]["m_star_boot"] for T in Ts])
            lines += _law_lines(who, "m50", Ts, [cells[T][est]["m50"] for T in Ts],
                                [cells[T][est]["m50_boot"] for T in Ts])
    return lines


def _record_section(got):
    """How often and how hard each projection acted, from the runs' records."""
    lines = ["", "### Was the constraint active?", "",
             "From each run's record (ball-of-runs.csv): the share of runs in which the norm's "
             "projection acted at least once, the median share of steps on which it acted, and "
             "the median final norm over its radius (the final norm is the largest head's).", "",
             "| folder | T | runs | " + " | ".join(NORMS) + " |",
             "|---|---|---|" + "---|" * len(NORMS)]
    for f, (_, cells, _) in got.items():
        lines += _record_lines(_name(f), f, cells)
    return lines


def _bound_section(got):
    """The reconstructed bound's constant at each folder's radii, and the gap it gives at m*."""
    lines = ["", "### The capacity bound at these radii", "",
             "theory.covering_constant's reconstructed shape for a model whose 16 heads all sit "
             "at the radii (bound_constant), and the generalization gap sqrt(C log(2 d m T) / "
             "m) it gives at the measured m*: a gap >= 1 says nothing about a 0-1 error "
             "(vacuous).", "",
             "| folder | radii (qk, vo, w, mlp) | C | gap at m*, per T |", "|---|---|---|---|"]
    for f, (meta, cells, radii) in got.items():
        o = run_options.validate_options(dict(meta["options"], T=max(cells)))
        C = bound_constant(radii, o["d"], o["heads"])
        gap = lambda c, T: theory.generalization_gap(C, o["d"], int(c["crit"]["m_star"]), T)
        gaps = ", ".join(f"T = {T}: " + (f"{gap(c, T):.3g}" if C and math.isfinite(
            c["crit"]["m_star"]) else "-") for T, c in cells.items())
        lines.append(f"| {_name(f)} | {', '.join(f'{radii.get(k, 0):g}' for k in NORMS)} | "
                     f"{C:.3g} | {gaps} |" if C else f"| {_name(f)} | - | unbounded | - |")
    return lines


def _plot(study, got, path, log):
    """Left: m*(T) per folder with its exact interval, the study's on the same seeds, the
    statistical limit. Right: the same on a log axis beside the m the reconstructed bound asks at
    each folder's radii for a gap of GAP (far above: vacuous at these sizes)."""
    plt = cli.pyplot_or_hint("rerun with --plot")
    if plt is None:
        return
    o = run_options.validate_options(dict(folder.read_meta(study)["options"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    Ts = sorted({T for _, cells, _ in got.values() for T in cells})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in axes:
        for c, (f, (_, cells, radii)) in zip(colours, got.items()):
            T = np.array(list(cells), float)
            m = np.array([x["crit"]["m_star"] for x in cells.values()])
            lo = np.array([x["crit"]["m_star_lo"] for x in cells.values()])
            hi = np.array([x["crit"]["m_star_hi"] for x in cells.values()])
            top = np.where(np.isfinite(hi), hi, m * 1.5)
            ax.errorbar(T, m, yerr=[m - lo, top - m], marker="o", capsize=3, color=c,
                        label=f"{os.path.basename(f.rstrip('/'))} (radii qk, vo, w, mlp: "
                              f"{', '.join(f'{radii.get(k, 0):g}' for k in NORMS)})")
        cells = next(iter(got.values()))[1]
        base = [(T, x["base"]) for T, x in cells.items() if x["base"]]
        if base:
            ax.plot([T for T, _ in base], [b["m_star"] for _, b in base], "k--", marker="s",
                    label="unconstrained (the study, same seeds)")
        lims = limits.statistical_limits(o["task"], o["s"], Ts, compute=False,
                                         cache=os.path.join(study, "limits.json"))
        if lims:
            ax.plot(sorted(lims), [lims[T]["median"] for T in sorted(lims)], "g:",
                    label="statistical limit (median)")
        ax.set_xscale("log")
        ax.set_xlabel("T (context length)")
    for c, (f, (_, cells, radii)) in zip(colours, got.items()):
        C = bound_constant(radii, o["d"], o["heads"])
        if C:
            axes[1].plot(Ts, [theory.samples_for_gap(C, o["d"], T, GAP) for T in Ts], ":",
                         color=c, label=f"the bound's m for a gap of {GAP}, "
                                        f"{os.path.basename(f.rstrip('/'))}'s radii")
    axes[0].set_ylabel("m* (majority of seeds, exact 95% CI)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("training samples m (log)")
    axes[0].set_title("m*(T) inside the capacity bound's class")
    axes[1].set_title("beside the reconstructed bound (vacuous here)")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    cli.save_figure(plt, fig, path)
    log(f"wrote {path}")


# ---------------------------------------------------------------- the slack, separated from T --
# Folders each at one T, every norm held as in class-tight but W_QK's radius set to c times the
# ideal need at that T (the least norm with which any head opens the construction's score gap at
# leak QK_BALL_EPS under ideal token geometry, training.qk_ball_radius at qk_ball = 1). The cost
# per seed: its critical m over the study's, same seed; per cell its median; across cells
# ln(median cost) = a + b ln c + g ln T, fitted to the cells' medians. Intervals: each T's seeds
# resampled on their own, the same resamples in every cell at one T (paired), N_SLACK_BOOT.

N_SLACK_BOOT = 20000


def slack_of(meta, T):
    """(c, radius, need) of a slack folder at T: its ball_qk over the ideal need at T."""
    harness.need(isinstance(meta, dict) and isinstance(meta.get("options"), dict), "meta", meta,
                 "a sweep.json's dict (with options)")
    o = run_options.validate_options(dict(meta["options"], T=T))
    need = float(theory.paper_score_gap(T, o["s"], training.QK_BALL_EPS)) / (2.0 * (o["d"] + 1))
    return o["ball_qk"] / need, o["ball_qk"], need


def _log_costs(mine, theirs):
    """ln(critical m / the study's) per seed: +inf above the grid alone, -inf the study's alone,
    0 where both are above it (no order between them)."""
    out = []
    for a, b in zip(mine, theirs):
        out.append(0.0 if math.isinf(a) and math.isinf(b) else math.log(a / b) if
                   math.isfinite(a) and math.isfinite(b) else math.inf if math.isinf(a) else -math.inf)
    return np.array(out)


def _slack_cells(study, folders):
    """[dict(name, T, c, radius, need, n, cost [n], crit, base)] of the slack folders, each at
    its one T against the study's same seeds."""
    _, srows = folder.folder_rows(study)
    smeta = folder.read_meta(study)
    cells = []
    for f in folders:
        meta, rows = folder.folder_rows(f)
        grid = meta["grids"]["transformer"]
        harness.need(grid == smeta["grids"]["transformer"], "folders", f,
                     "a sweep on the study's grid", ValueError)
        values = seed_laws.seed_values(rows, grid, meta["search"])
        harness.need(len(values) == 1, "folders", f, "a sweep at one T (a slack cell)",
                     ValueError)
        (T, mine), = values.items()
        theirs = seed_laws.seed_values([r for r in srows if int(r["T"]) == T], grid,
                                       smeta["search"]).get(T, {})
        seeds = sorted(mine)
        harness.need(set(seeds) <= set(theirs), "folders", f, f"seeds the study holds at T = {T}",
                     ValueError)
        c, radius, need = slack_of(meta, T)
        cells.append(dict(name=os.path.basename(f.rstrip("/")), T=T, c=c, radius=radius,
                          need=need, n=len(seeds), mine=[mine[s] for s in seeds],
                          theirs=[theirs[s] for s in seeds],
                          cost=_log_costs([mine[s] for s in seeds], [theirs[s] for s in seeds]),
                          crit=stats.critical_sizes(rows, {"transformer": grid}, meta["search"])[
                              ("transformer", T)]))
    return cells


def _slack_fit(cells):
    """The cells' median ln cost, point and N_SLACK_BOOT replicates (each T's seeds resampled on
    their own, the same counts in every cell of that T), and the least-squares fit of
    a + b ln c + g ln T to them -> (medians [1 + B, k], coefficients [1 + B, 3])."""
    med = []
    for c in cells:
        W = np.vstack([np.ones((1, c["n"])), resample_counts(c["n"], c["T"], N_SLACK_BOOT)])
        med.append(weighted_median(c["cost"], W))
    med = np.stack(med, 1)
    X = np.array([[1.0, math.log(c["c"]), math.log(c["T"])] for c in cells])
    ok = np.all(np.isfinite(med), 1)
    coef = np.full((len(med), 3), np.nan)
    coef[ok] = med[ok] @ np.linalg.pinv(X).T
    return med, coef


def _slack_word(lo, hi):
    return "established" if lo > 0 or hi < 0 else "not detected"


def slack_page(study, folders, out, log=print):
    """The slack design's page into `out`: per cell its slack, m*, the study's m* on the same
    seeds, the median cost with its interval and the sign test; then b (ln c) and g (ln T)."""
    harness.check_path("out", out, "the table's file")
    harness.check_path("study", study, "a sweep folder", folder=True)
    harness.need(isinstance(folders, (list, tuple)) and folders, "folders", folders,
                 "a list of sweep folders", ValueError)
    folders = [harness.check_path("folders", f, "a sweep folder", folder=True) for f in folders]
    harness.claim_outputs([(out, "table", "the table")], folders=[study, *folders])
    harness.need(callable(log), "log", log, "a function of one line")
    cells = sorted(_slack_cells(study, folders), key=lambda c: (c["T"], c["c"]))
    med, coef = _slack_fit(cells)
    lines = _slack_head(study, folders, cells) + [_slack_line(c, med[:, i]) for i, c in enumerate(cells)]
    lines += _slack_verdict(cells, coef)
    cli.write_text(out, "\n".join(lines) + "\n")
    log(f"wrote {out}")


def _slack_head(study, folders, cells):
    return ["## The slack, separated from T", "",
            f"Written by `python -m studies.classball {study} {' '.join(folders)} --slack`. Each "
            "folder one T, every norm held as in class-tight but W_QK's radius c times the ideal "
            "need at that T (ln((T - s) / (0.1 s)) / (2 (d + 1)): the least query-key norm with "
            "which any head opens the construction's score gap at leak 0.1 under ideal token "
            "geometry). Per cell: m* by the majority rule [exact 95% CI]; the study's m* on the "
            "same seeds; each seed's cost, its critical m over the study's (above the grid: "
            "larger; both above it: equal), their median [95% CI, "
            f"{N_SLACK_BOOT} resamples of the seeds]; the exact sign test.", "",
            _not_the_construction(folder.read_meta(study)["options"], sorted({c["T"] for c in cells})),
            "", "| cell | T | c | radius | seeds | m* [95% CI] | the study's m* | median cost "
            "[95% CI] | more / fewer / same | sign test p |", "|---|---|---|---|---|---|---|---|---|---|"]


def _slack_line(c, med):
    lo, hi = percentile_ci(np.exp(med[1:]))
    more = int(np.sum(c["cost"] > 0))
    fewer = int(np.sum(c["cost"] < 0))
    a, base = c["crit"], sorted(c["theirs"])[math.ceil(c["n"] / 2) - 1]
    return (f"| {c['name']} | {c['T']} | {c['c']:.2f} | {c['radius']:.4g} | {c['n']} | "
            f"{_n(a['m_star'])} [{_n(a['m_star_lo'])}, {_n(a['m_star_hi'])}] | {_n(base)} | "
            f"{_ci(float(np.exp(med[0])), lo, hi)} | {more} / {fewer} / {c['n'] - more - fewer} "
            f"| {sign_test(more, fewer):.3g} |")


def _slack_verdict(cells, coef):
    names = ("a", "b: ln c (the slack)", "g: ln T")
    kept = coef[1:][np.all(np.isfinite(coef[1:]), 1)]
    lines = ["", f"ln(median cost) = a + b ln c + g ln T, least squares over the {len(cells)} "
             f"cells (3 parameters), each coefficient with its 95% interval over the resamples "
             f"({len(kept)} of {N_SLACK_BOOT} with every cell's median finite):", ""]
    for j in (1, 2):
        lo, hi = percentile_ci(kept[:, j]) if len(kept) else (math.nan, math.nan)
        lines.append(f"- {names[j]}: {_ci(float(coef[0, j]), lo, hi)}, {_slack_word(lo, hi)} "
                     f"(against 0)")
    return lines


def _parser():
    ap = OneLineParser(prog="studies.classball", description=__doc__.split("\n\n")[0])
    ap.add_argument("study", help="the unconstrained sweep folder (results/extended)")
    ap.add_argument("folders", nargs="+", help="sweep folders run inside the class ball")
    ap.add_argument("--out", required=True, help="the markdown page to write")
    ap.add_argument("--plot", help="also draw m*(T) into this image (needs matplotlib)")
    ap.add_argument("--slack", action="store_true", help="the folders are slack cells (one T "
                    "each, W_QK's radius c times the need at T): the slack against T instead")
    return ap


def main(argv=None):
    ap = _parser()
    a = ap.parse_args(harness.check_argv(argv))
    try:
        if a.slack:
            slack_page(a.study, a.folders, a.out)
        else:
            class_page(a.study, a.folders, a.out, a.plot)
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.classball", main))
