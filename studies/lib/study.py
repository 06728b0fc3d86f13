"""study.py (studies/lib): the mechanism study (studies.mechanism): its plan made and read back, its
rows, and the statistics its reports share.

mechanism.py writes a study (plan.json, runs.csv, trajectories.csv) and failures.py reports on a
study and its arms; both make and read the folder and draw their intervals through this file, so
neither imports the other. Top to bottom: the plan read back and its cells, the rows, the seeds'
resampling weights, medians and separations with their intervals, the page's wording; then the
plan made from committed sweep folders (plan_cells), and the growth of the mechanism's
quantities with T (growth_table), which the symmetries study reads too.
Every interval is a 95% percentile interval over intervals.N_BOOT resamples of the SEED labels (a
drawn seed brings its run in every cell of its T), by stats.py's design: the cells at one T share
a seed's S, data and (at one width) init, and draw the same resamples; each T draws its own.
Medians, not means: C is a cube of sums and has a long tail. A separation P(failure's X >
success's X) (ties count 1/2) is undefined in a resample without both outcomes; such resamples
count against both bounds.
"""
import glob
import math
import os

import numpy as np

from studies.lib import folder, harness, intervals, laws, row_kinds, run_options, stats, training
from studies.lib.checks import INTS, REALS, check_number
from studies.lib.harness import check_path, shown


def read_plan(out):
    """OUT/plan.json, every field checked (folder.read_plan: the harness every study stands on)."""
    check_path("out", out, "a study's folder")
    return folder.read_plan(out)


def same_folder(a, b):
    """Whether two spellings of folders name one folder on disk (a trailing slash, './', an
    absolute path or a path from elsewhere are the same folder; compared as files, then as real
    paths)."""
    for name, v in (("a", a), ("b", b)):
        if not isinstance(v, (str, os.PathLike)) or isinstance(v, bytes) or not os.fspath(v):
            raise TypeError(f"{name} must be a folder path (str), got {v!r:.40}")
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _recorded_places(recorded, beside):
    """Where a folder a plan records (`recorded`, spelt as the command that wrote the plan was
    given it, from the folder it ran in) may be now: from here, then from each folder above
    `beside` (the plan's own folder: the command ran from one of them, e.g. the repository's
    root)."""
    yield recorded
    up = os.path.realpath(beside)
    while True:
        yield os.path.join(up, recorded)
        if os.path.dirname(up) == up:
            return
        up = os.path.dirname(up)


def recorded_folder(recorded, beside, study=None):
    """The folder a plan's source records, found from here (_recorded_places) -> its path, or None
    when no such folder exists; with `study`, whether one of the places is that folder."""
    for name, v in (("recorded", recorded), ("beside", beside)):
        if not isinstance(v, str) or not v:
            raise TypeError(f"{name} must be a folder path (str), got {v!r:.40}")
    places = [p for p in _recorded_places(recorded, beside) if os.path.isdir(p)]
    if study is not None:
        check_path("study", study, "a study's folder")
        return any(same_folder(p, study) for p in places)
    return places[0] if places else None


def study_cells(source, design, Ts, widths=None):
    """(the study's plan, its cells of `design` at the T in Ts and the widths d in `widths`
    (default every width), each naming the plan it comes from); ValueError naming the T or width
    the study has no such cell at."""
    check_path("source", source, "a study's folder", folder=True)
    if design not in row_kinds.DESIGNS:
        raise ValueError(f"design must be one of {', '.join(row_kinds.DESIGNS)}, got {shown(design)}")
    for name, v in (("Ts", Ts), ("widths", widths)):
        if v is not None and not (isinstance(v, (list, tuple)) and v and all(
                isinstance(x, int) and not isinstance(x, bool) for x in v)):
            raise TypeError(f"{name} must be a non-empty list of integers, got {shown(v)}")
    if Ts is None:
        raise TypeError("Ts must be a non-empty list of integers, got None")
    study = read_plan(source)
    where = os.path.normpath(source)                   # "results/mechanism/": as without the slash
    cells = [dict(c, source=dict(c["source"], plan=f"{where}/plan.json ({design})"))
             for c in study["cells"] if c["design"] == design and c["T"] in Ts]
    for name, want, key in (("T", Ts, "T"), ("width d", widths or (), "d")):
        missing = sorted(set(want) - {c[key] for c in cells})
        if missing:
            raise ValueError(f"{source}/plan.json has no {design} cells at {name} = "
                             f"{', '.join(map(str, missing))}")
    return study, [c for c in cells if widths is None or c["d"] in widths]


STUDY_CSVS = dict(runs=("runs.csv", row_kinds.MECHANISM_ROWS, "test_acc"),
                  trace=("trajectories.csv", row_kinds.TRAJECTORY_ROWS, "final_test_acc"))


def study_rows(out, plan, what="runs"):
    """The finished rows in OUT/runs.csv (what="runs") or OUT/trajectories.csv ("trace"), each
    read and checked by folder.py (row_kinds.read_rows, folder.check_rows with the kind of rows of
    STUDY_CSVS) against the plan: a row that contradicts itself, the plan (its cell, seed, task,
    s, steps, its success under the bar) or another row of the same run is a one-line ValueError
    naming the file and line; a torn last row is skipped. The files are folder.study_csvs's: a
    CSV this study did not write is refused before anything reads or changes it, one of an
    older header is read with its continuations. Each row once."""
    check_path("out", out, "a study's folder")
    if not (isinstance(what, str) and what in STUDY_CSVS):
        raise ValueError(f"what must be one of {', '.join(STUDY_CSVS)}, got {shown(what)}")
    plan = folder.check_plan(plan, "plan")
    name, kind, _ = STUDY_CSVS[what]
    parts = folder.study_csvs(os.path.join(out, name), kind,
                              f"the CSV of {what} mechanism.py writes")
    if not parts:
        return []
    return folder.check_rows(row_kinds.read_rows(parts, kind=kind), plan["bar"], plan, kind=kind)


def study_files(out):
    """The files of a study's folder its readers read: plan.json and the CSVs of STUDY_CSVS with
    their continuations (those that exist)."""
    if not isinstance(out, (str, os.PathLike)) or isinstance(out, bytes) or not os.fspath(out):
        raise TypeError(f"out must be a folder path (str), got {out!r:.40}")
    names = ["plan.json"] + [n[:-len(".csv")] + "*.csv" for n, _, _ in STUDY_CSVS.values()]
    return [p for n in names for p in sorted(glob.glob(os.path.join(glob.escape(out), n)))]


def is_final(row):
    """Whether a study's row is its run's last: every row of runs.csv, the last step's of
    trajectories.csv (a run whose last row is written is finished: rows go out in step order)."""
    if not (isinstance(row, dict) and ("step" not in row or "steps" in row)):
        raise ValueError(f"row must be a study's row (a dict; with its step, its steps), got "
                         f"{shown(row)}")
    return "step" not in row or int(row["step"]) == int(row["steps"])


NUMBERS = ("test_acc", "best_test_acc", "train_acc", "final_loss", "min_loss", "loss_jump",
           "covering_constant", "B_X", "score_scale", "norm_V", "norm_O", "mass_on_S",
           "score_gap", "top_score_scale", "top_norm_V", "top_norm_O", "attn_on_S", "seconds",
           "cpu_seconds", "heads_on_S", "top_head", "best_step", "steps")


def load_study(out):
    """(plan, {(design, d, T, m): rows sorted by seed}) with numbers as floats, for the plan's
    cells (a cell with no runs yet is left out)."""
    plan = read_plan(check_path("out", out, "a study's folder"))
    rows = study_rows(out, plan)
    by = {}
    for r in rows:
        r = dict(r, **{k: float(r[k]) for k in NUMBERS},
                 **{k: float(r.get(k) or "nan")                                  # "": not taken
                    for k in row_kinds.MECHANISM_FACTORS + row_kinds.MECHANISM_CANONICAL},
                 d=int(r["d"]), T=int(r["T"]), m=int(r["m"]), seed=int(r["seed"]),
                 success=int(r["success"]))
        by.setdefault((r["d"], r["T"], r["m"]), {})[r["seed"]] = r      # a run once
    cells = {}
    for c in plan["cells"]:
        got = by.get((c["d"], c["T"], c["m"]), {})
        if got:
            cells[(c["design"], c["d"], c["T"], c["m"])] = [got[s] for s in sorted(got)]
    return plan, cells


def load_runs(out, role="the study"):
    """load_study of a folder that holds finished runs -> (plan, cells); ValueError, one line
    naming the folder (`role`: how the command calls it), for a trajectories folder or one whose
    runs are not trained yet."""
    if not isinstance(role, str):
        raise TypeError(f"role must be a str, got {shown(role)}")
    plan, cells = load_study(out)
    if "every" in plan:
        raise ValueError(f"{role} {out} is a trajectories folder (studies.mechanism trace), not "
                         f"a study or an arm; this command reads runs.csv")
    if not cells:
        raise ValueError(f"{role} {out}: no finished runs in {os.path.join(out, 'runs.csv')} "
                         f"yet; run `python -m studies.mechanism run {out}` first")
    return plan, cells


def seed_weights(n_seeds, Ts, n_boot=None, seed=0):  # -> {T: [1 + n_boot, n_seeds]}
    """How often each seed label 0..n_seeds-1 is drawn at each T: row 0 the data itself (all 1),
    then n_boot (default intervals.N_BOOT) resamples (intervals.resample_counts: the same at one T,
    independent across T)."""
    check_number("n_seeds", n_seeds, INTS, 1, 10 ** 6 + 1)
    if not (isinstance(Ts, (list, tuple, set)) and Ts):
        raise TypeError(f"Ts must be a non-empty list of T, got {shown(Ts)}")
    for T in Ts:
        check_number("Ts", T, INTS, 1)
    return {T: np.vstack([np.ones(n_seeds), intervals.resample_counts(n_seeds, T, n_boot, seed)])
            for T in sorted(set(Ts))}


def weights_at(W, rows):  # -> [1 + B, n_seeds]: the weights of the rows' T (one T per cell)
    """W is seed_weights' {T: weights}, or one cell's own weights (cell_resamples), taken as is."""
    _check_rows(rows, ("T",) if isinstance(W, dict) else ())
    if isinstance(W, dict) and W and (not rows or rows[0]["T"] in W):
        W = W[rows[0]["T"]] if rows else next(iter(W.values()))
    if not (isinstance(W, np.ndarray) and W.ndim == 2 and W.dtype.kind in "iuf" and len(W) > 1):
        raise ValueError(f"W must be seed weights [1 + B, n_seeds] or seed_weights' dict holding "
                         f"the rows' T, got {shown(W)}")
    return W


def _check_key(key, rows):
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {shown(key)}")
    if any(key not in r for r in rows if isinstance(r, dict)):
        raise ValueError(f"key {key!r} is not a field of the rows")


def _check_rows(rows, keys):
    if not (isinstance(rows, list) and all(isinstance(r, dict) and all(k in r for k in keys)
                                           for r in rows)):
        raise TypeError(f"rows must be a list of a study's rows (dicts with "
                        f"{', '.join(keys) or 'their fields'}), got {shown(rows)}")
    bad = next((r for r in rows if "success" in keys and r["success"] not in (0, 1)), None)
    if bad is not None:        # True and False are 1 and 0
        raise ValueError(f"rows: a row's success must be 0 or 1 (or a bool), got "
                         f"{shown(bad['success'])}")


def _check_real(name, v):
    """v a real number (nan and inf too), not a bool, within a float's range -> v as it is (a
    intervals.Bound keeps its Monte Carlo band)."""
    if not (isinstance(v, REALS) and not isinstance(v, (bool, np.bool_)) and
            (not isinstance(v, int) or abs(v) <= 2 ** 1023)):
        raise TypeError(f"{name} must be a real number, got {shown(v)}")
    return v


def weighted_median(v, w):  # [n], [B, n] -> [B] (nan where the weights are all 0)
    if not (isinstance(v, np.ndarray) and v.ndim == 1 and len(v) and v.dtype.kind in "iuf"):
        raise ValueError(f"v must be a numpy array [n >= 1] of numbers, got {shown(v)}")
    if not (isinstance(w, np.ndarray) and w.ndim == 2 and w.shape[1] == len(v) and
            w.dtype.kind in "iuf"):
        raise ValueError(f"w must be a numpy array [B, n={len(v)}] of weights, got {shown(w)}")
    order = np.argsort(v)
    v, cw = v[order], np.cumsum(w[:, order], 1)
    half = cw[:, -1:] / 2
    lo, hi = np.argmax(cw >= half, 1), np.argmax(cw > half, 1)
    med = (v[lo] + v[hi]) / 2
    return np.where(cw[:, -1] > 0, med, np.nan)


def median_ci(rows, key, W):
    """(median, lo, hi, [B] replicates) of rows' `key` (nan values left out), seeds weighted by
    W [1 + B, n_seeds]."""
    _check_key(key, rows if isinstance(rows, list) else [])
    _check_rows(rows, (key, "seed"))
    W = weights_at(W, rows)
    pairs = [(r[key], r["seed"]) for r in rows if np.isfinite(r[key])]
    if not pairs:
        return math.nan, math.nan, math.nan, np.full(W.shape[0] - 1, np.nan)
    v, s = map(np.array, zip(*pairs))
    med = weighted_median(v.astype(np.float64), W[:, s])
    lo, hi = intervals.percentile_ci(med[1:][np.isfinite(med[1:])]) if np.isfinite(
        med[1:]).any() else (math.nan, math.nan)
    return float(med[0]), lo, hi, med[1:]


def _pair_counts(rows, key, W):  # -> (numerator [1 + B], denominator [1 + B])
    """Over the (failure, success) pairs of rows, weighted by their seeds' draws: the count of
    pairs whose failure has the larger `key` (ties 1/2), and the count of pairs."""
    W, rows = weights_at(W, rows), [r for r in rows if np.isfinite(r[key])]
    if not rows:
        return np.zeros(W.shape[0]), np.zeros(W.shape[0])
    v = np.array([r[key] for r in rows])
    ok = np.array([r["success"] for r in rows], np.float64)
    w = W[:, [r["seed"] for r in rows]]
    G = ((v[:, None] > v[None]) + 0.5 * (v[:, None] == v[None])) * np.outer(1 - ok, ok)
    # sum_ij w_bi G_ij w_bj as (w G) . w: the matmul is BLAS's, a tenth of einsum's three-operand
    # loop; the draws' counts and G's halves keep every sum a whole number of halves, exact in
    # either order
    return np.einsum("bi,bi->b", w @ G, w), (w * (1 - ok)).sum(1) * (w * ok).sum(1)


def separation(cells_rows, key, W):
    """P(a failure's `key` > a success's) over the (failure, success) pairs within each cell of
    cells_rows (a list of cells' rows: one cell, or every T pooled) -> (point, lo, hi); nan when
    no cell has both outcomes. Undefined resamples count against both bounds (as 0 for lo, 1 for
    hi). W: the seeds' weights, one for every cell, or a list of one per cell (cell_resamples)."""
    if not (isinstance(cells_rows, list) and cells_rows and all(
            isinstance(rows, list) for rows in cells_rows)):
        raise TypeError(f"cells_rows must be a non-empty list of cells' rows (lists), got "
                        f"{shown(cells_rows)}")
    _check_key(key, [r for rows in cells_rows for r in rows])
    for rows in cells_rows:
        _check_rows(rows, (key, "seed", "success"))
    if isinstance(W, list) and len(W) != len(cells_rows):
        raise ValueError(f"W must be one weights per cell ({len(cells_rows)}), got {len(W)}")
    num = den = 0.0
    for rows, w in zip(cells_rows, W if isinstance(W, list) else [W] * len(cells_rows)):
        a, b = _pair_counts(rows, key, w)
        num, den = num + a, den + b
    if not den[0] > 0:
        return math.nan, math.nan, math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        p = num / den
    rep, bad = p[1:], ~(den[1:] > 0)
    lo = intervals.percentile_ci(np.where(bad, 0.0, rep))[0]
    hi = intervals.percentile_ci(np.where(bad, 1.0, rep))[1]
    return float(p[0]), lo, hi


EDGE_NOTE = ("A bound printed as the null itself beside 'established' lies beyond it by less "
             "than its last printed digit: the word is read from the bound's Monte Carlo band "
             "(intervals.surely_above, surely_below), the text rounded outwards.")


def word(lo, hi, null):
    """The page's wording for one interval against the value `null` of "no difference"."""
    lo, hi, null = _check_real("lo", lo), _check_real("hi", hi), _check_real("null", null)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "n/a"
    clear = intervals.surely_above(lo, null) or intervals.surely_below(hi, null)   # beyond its MC error
    return "established" if clear else "not detected"


def fmt(v, lo=None, hi=None, digits=3):
    """v [lo, hi] to `digits` significant figures, a bound to fewer where its Monte Carlo error
    moves the last one (intervals.bound_text)."""
    check_number("digits", digits, INTS, 1, 18)
    if v is not None:
        v = _check_real("v", v)
    if (lo is None) != (hi is None):
        raise ValueError(f"lo and hi must both be given or both None, got {lo!r}, {hi!r}")
    if lo is not None:
        lo, hi = _check_real("lo", lo), _check_real("hi", hi)
    if v is None or not np.isfinite(v):
        return "n/a"

    def f(x):
        dec = digits - 1 - math.floor(math.log10(abs(x))) if x and np.isfinite(x) else digits
        if intervals.mc_decimals(x, dec) != dec:
            return intervals.bound_text(x, dec)
        return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.2e}"
    return f(v) if lo is None else f"{f(v)} [{f(lo)}, {f(hi)}]"


# ---------------------------------------------------------------- the plan: which cells (d, T, m) the study trains
# Per width (a committed sweep folder) and T: the borderline m = the folder's m* (the majority
# rule, stats.critical_sizes) over seeds 0..n-1 at the folder's T nearest T in ln T, where both
# successes and failures occur; and a fixed m = FACTOR x the m* of one chosen width, the same m
# at every width of that T. Training options are the folder's own (its sweep.json).

NEAR_T = 1.25       # a folder's T may stand in for T when within this factor of it


def _folder_mstars(path, Ts, n_seeds):
    """(width d, the folder's full training options, bar, {T: where its m* comes from}) for a
    committed sweep folder: for each T, the folder's nearest T (within NEAR_T) and its m* over
    seeds 0..n_seeds-1 with the 95% interval. ValueError when the folder has no T near one."""
    meta, rows = folder.folder_rows(path, n_seeds=n_seeds)
    crit = stats.critical_sizes(rows, meta["grids"], meta["search"])
    have = sorted(T for (model, T) in crit if model == "transformer")
    out = {}
    for T in Ts:
        near = min(have, key=lambda t: abs(math.log(t / T)))
        if abs(math.log(near / T)) > math.log(NEAR_T):
            raise ValueError(f"{path} has no T within a factor {NEAR_T} of T={T} (Ts or extra; it "
                             f"has {have})")
        c = crit[("transformer", near)]
        if not math.isfinite(c["m_star"]):
            raise ValueError(f"{path}: m* at T={near} is above its grid; no borderline m there")
        out[T] = dict(folder=path, T_folder=int(near), m_star=int(c["m_star"]),
                      m_star_lo=c["m_star_lo"], m_star_hi=c["m_star_hi"], n_seeds=c["n_seeds"])
    options = folder.full_options(meta["options"])
    return int(options["d"]), options, meta["bar"], out


def _check_plan_arguments(folders, Ts, extra, n_seeds, fixed_from, factor):
    """plan_cells' arguments, each checked in one line naming it -> (folders, Ts, extra) as lists."""
    if not (isinstance(folders, (list, tuple)) and folders):
        raise TypeError(f"folders must be a non-empty list of sweep folders, got {harness.shown(folders)}")
    folders = [harness.check_path("folders", p, "a list of folder paths") for p in folders]
    if not (isinstance(Ts, (list, tuple)) and Ts):
        raise TypeError(f"Ts must be a non-empty list of integers T >= 1, got {harness.shown(Ts)}")
    Ts = [check_number("Ts", T, INTS, 1) for T in Ts]
    if not (isinstance(extra, (list, tuple)) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in extra)):
        raise TypeError(f"extra must be a list of (d, T) pairs, got {harness.shown(extra)}")
    extra = [tuple(check_number("extra", v, INTS, 1) for v in p) for p in extra]
    check_number("n_seeds", n_seeds, INTS, 1, row_kinds.MAX_SEARCHES + 1)
    if fixed_from is not None:
        check_number("fixed_from", fixed_from, INTS, 1)
    positive = "a finite number > 0 (fixed m = factor x m*)"
    check_number("factor", factor, REALS, 0, what=positive)
    if not factor > 0:
        raise ValueError(f"factor must be {positive}, got {factor!r}")
    return folders, Ts, extra


def plan_cells(folders, Ts, extra=(), n_seeds=20, fixed_from=None, factor=2.0):
    """The study's plan: cells in the order they run -> dict(seeds, bar, cells). folders: committed
    sweep folders, one per width; Ts: the T of every width; extra: (d, T) cells run last (a large T
    at one width). Order: the borderline m at every T of every width, then the fixed m, then the
    extra cells (borderline, then fixed), so that a study cut short leaves whole designs behind.
    fixed m = round(factor x m*) of the width fixed_from (default: the widest), checked here: a
    factor that makes a fixed m no run can train is refused before anything is planned."""
    folders, Ts, extra = _check_plan_arguments(folders, Ts, extra, n_seeds, fixed_from, factor)
    widths = {}
    for path in folders:
        Ts_here = sorted(set(Ts) | {T for d, T in extra})
        d, options, bar, mstars = _folder_mstars(path, Ts_here, n_seeds)
        if d in widths:
            raise ValueError(f"two folders of width d={d}: {widths[d][0]} and {path}")
        widths[d] = (path, options, bar, mstars)
    fixed_from = max(widths) if fixed_from is None else fixed_from
    if fixed_from not in widths:
        raise ValueError(f"fixed_from d={fixed_from} is not a width of the folders "
                         f"({sorted(widths)})")
    if len({w[2] for w in widths.values()}) != 1:
        raise ValueError("the folders use different success bars")
    for d, T in extra:
        if d not in widths:
            raise ValueError(f"extra cell d={d}, T={T}: no folder of width {d}")

    def cell(design, d, T):
        path, options, _, mstars = widths[d]
        src = mstars[T] if design == "borderline" else dict(
            mstars_from=fixed_from, factor=factor, **widths[fixed_from][3][T])
        m = src["m_star"] if design == "borderline" else int(round(factor * src["m_star"]))
        opts = {k: v for k, v in options.items()}
        try:
            if m < 1:
                raise ValueError("m must be at least 1")
            training.check_run_memory(run_options.validate_options(dict(opts, T=T, m=m)))
        except ValueError as e:
            raise ValueError(f"factor = {factor:g} makes the {design} m = {m} at d={d}, T={T} "
                             f"(m* {src['m_star']}), which no run can train: {e}") from None
        return dict(design=design, d=d, T=T, m=m, options=opts, source=src)

    main = [(d, T) for T in sorted(Ts) for d in sorted(widths)]
    cells = [cell(design, d, T) for pairs, designs in ((main, ("borderline", "fixed")),
                                                       (list(extra), ("borderline", "fixed")))
             for design in designs for d, T in pairs]
    return dict(seeds=n_seeds, bar=next(iter(widths.values()))[2], cells=cells)


# ---------------------------------------------------------------- the quantities the reports read

SEPARATED = (("covering_constant", "C"), ("score_scale", "score scale"),
             ("norm_V", "‖W_V‖"), ("norm_O", "‖W_O‖"), ("mass_on_S", "mass on S (top head)"))


GROWN = (("covering_constant", "C"), ("score_scale", "score scale, largest head"),
         ("top_score_scale", "score scale, top head"), ("norm_V", "‖W_V‖, largest head"),
         ("norm_O", "‖W_O‖, largest head"), ("score_gap", "score gap, top head"),
         ("mass_on_S", "mass on S, top head"))


def growth_table(plan, cells, W, design="fixed", quantities=GROWN):
    """Table 3: how each quantity of `quantities` ((key, name) pairs; GROWN) moves with T at the
    fixed m, per width: the median at each T fitted (laws.scaling_fits, each T resampled on its
    own) as a + b ln T and a T^k, over the cells whose every seed ran. -> (lines, the number of
    intervals, {(d, key): fit})."""
    harness.need(isinstance(plan, dict) and isinstance(plan.get("seeds"), int), "plan", plan,
                 "a study's plan (read_plan)")
    harness.need(isinstance(cells, dict) and all(
        isinstance(k, tuple) and len(k) == 4 and isinstance(v, list) for k, v in cells.items()),
        "cells", cells, "load_study's cells {(design, d, T, m): rows}")
    harness.need(isinstance(W, dict) and all(isinstance(v, np.ndarray) for v in W.values()),
                 "W", W, "seed_weights' {T: weights}")
    designs = sorted({k[0] for k in cells})
    harness.need(isinstance(design, str) and design in designs, "design", design,
                 f"a design of the cells ({', '.join(designs) or 'none: no cells'})", ValueError)
    harness.need(isinstance(quantities, (list, tuple)) and all(
        isinstance(q, tuple) and len(q) == 2 and all(isinstance(x, str) for x in q)
        for q in quantities), "quantities", quantities, "(column, name) pairs")
    lines = ["| d | quantity | T | median at each T | b of a + b ln T [95% CI] | "
             "k of a T^k [95% CI] | log fits better |", "|---|---|---|---|---|---|---|"]
    n_tests, fits = 0, {}
    for d in sorted({d for (g, d, T, m) in cells if g == design}):
        mine = sorted((T, rows) for (g, dd, T, m), rows in cells.items()
                      if g == design and dd == d and len(rows) == plan["seeds"])
        if len(mine) < 3:
            continue
        Ts = np.array([T for T, _ in mine], np.float64)
        for key, name in quantities:
            got = [median_ci(rows, key, W) for _, rows in mine]
            med, boot = np.array([g[0] for g in got]), np.array([g[3] for g in got])
            try:
                f = laws.scaling_fits(Ts, med, boot)
            except ValueError:           # a median <= 0 (a gap): the power law has no meaning
                f = None
            fits[(d, key)] = f
            n_tests += 2 if f else 0
            b = fmt(f["log_b"], f["log_b_lo"], f["log_b_hi"]) if f else "n/a"
            k = fmt(f["pow_k"], f["pow_k_lo"], f["pow_k_hi"]) if f else "n/a"
            better = f"{100 * f['p_log_better']:.0f}%" if f and f["p_log_better"] is not None \
                else "n/a"
            lines.append(f"| {d} | {name} | {', '.join(str(int(T)) for T in Ts)} | "
                         f"{', '.join(fmt(v) for v in med)} | {b} | {k} | {better} |")
    return lines, n_tests, fits
