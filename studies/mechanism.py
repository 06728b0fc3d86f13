"""mechanism.py (studies, a command): what training finds, measured against the theory of Edelman et
al. (ICML 2022). Run from the repository's root:

    python -m studies.mechanism plan OUT FOLDER FOLDER ... --Ts 10,100   the cells: per width and
                      T a borderline m (the folder's m*) and a fixed m, in OUT/plan.json
    python -m studies.mechanism run OUT [--workers 2]   train every planned run: one row of
                      OUT/runs.csv each, flushed as it finishes (rerun to resume)
    python -m studies.mechanism report OUT      OUT/table.md, and OUT/mechanism.png (matplotlib)
    python -m studies.mechanism trace OUT --from STUDY --Ts 1000 --every 50   the study's runs
                      again, each logged at step 1 and every 50 steps, in OUT/trajectories.csv
                      (issue 38)
    python -m studies.mechanism trace-report OUT   OUT/table.md, OUT/trajectories.png (matplotlib)
    python -m studies.mechanism --help          every option, and issue 38's arm, factors, paired

The capacity argument (Section 3) says heads of bounded norm form a class whose covering number
grows only like log T; the construction (Section 4) creates the sparse variable with a head whose
score gap between S and the other positions grows like log((T - s) / (s eps)). This file measures
the same quantities on the parameters a trained run ends with (measure_mechanism) and studies
them over seeds, T and widths: do the norms stay bounded as T grows, do they tell the runs that
generalise from those that do not, and how does the head that attends S do it.

The norms, the covering constant and the construction's score gap are theory.py's (one copy: the
paper's theory sits below the studies). It reads top to bottom: the measurement of one trained
model, the plan of cells, the runs, the report, the command line. Issue 38's reports on a study
and its arms (factors, paired, trace-report) live in failures.py, which reads the rows this file
writes; the runs themselves (arm, run, trace) stay here.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.mechanism")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import functools
import json
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np

from theory import paper_score_gap

from studies.lib import (arithmetic, failures, folder, folder_write, harness, intervals, provenance,
                         row_kinds, run_options)
from studies.lib.cli import OneLineParser, int_list, integer, number
from studies.lib.measures import N_MEASURE, ON_S
from studies.lib.study import (EDGE_NOTE, SEPARATED, STUDY_CSVS, fmt, growth_table, is_final,
                               load_runs, median_ci, plan_cells, read_plan, seed_weights,
                               separation, study_cells, study_files, study_rows, weights_at, word)
from studies.lib.workers import LOG_EVERY, stack_size, train_cell, train_trace

# ======== 1. AN ARM'S PLAN, THE TRAJECTORIES' PLAN (the study's own: study.plan_cells) =========

def _arm_options(arm):
    """The one change an arm makes to its study's options: none for baseline-rerun, else the
    sweep protocol of the arm's name (row_kinds.INTERVENTIONS)."""
    if arm == "baseline-rerun":
        return {}
    if arm not in row_kinds.INTERVENTIONS:
        raise ValueError(f"arm must be baseline-rerun or one of {', '.join(row_kinds.INTERVENTIONS)}"
                         f", got {arm!r}")
    return dict(run_options.PROTOCOLS[arm])


def _arm_plan(source, arm, design, Ts, n_seeds, widths=None):
    """An arm of issue 38's interventions: the cells of `design` at the T in Ts of the study in
    the folder `source` (every width, or those in `widths`), their options with the arm's one
    change (_arm_options), the design named by the arm, seeds 0..n_seeds-1. A seed fixes the data and the init whatever
    these options (training.study_streams), so each run pairs with the study's run of its seed."""
    study, cells = study_cells(source, design, Ts, widths)
    change = _arm_options(arm)
    return dict(seeds=n_seeds, bar=study["bar"], cells=[
        dict(c, design=arm, options=dict(c["options"], **change)) for c in cells])


def _trace_plan(source, design, Ts, n_seeds, every, widths=None):
    """The trajectories' plan (issue 38): the cells of `design` at the T in Ts of the study in the
    folder `source` (every width, or those in `widths`), their options unchanged (the very runs
    of the study, seed for seed), logged at step 1 and every `every` steps."""
    study, cells = study_cells(source, design, Ts, widths)
    return dict(seeds=n_seeds, bar=study["bar"], every=every, cells=cells)


# ======== 2. THE RUNS: one CSV row per trained run ==============================================
# A row holds the run (design, d, T, m, seed), its outcome (success = the FINAL test accuracy >=
# the bar; the test set never chooses anything), what the monitor saw at the logged steps, the
# training loss, and measure_mechanism's numbers. The folder is folder.py's, as a sweep's is: one
# command at a time under its lock, rows read and checked by its one reader and validator
# (row_kinds.MECHANISM_ROWS: types and ranges, each row against the plan, two rows of one run), each
# row written, flushed and synced as it finishes (folder_write.RowWriter), a torn last row cut away
# only from a file this study wrote.

FIELDS = row_kinds.MECHANISM_FIELDS


# The two kinds of a study's CSV: runs.csv (one row per run, train_cell) and trajectories.csv
# (one row per run per logged step, train_trace): the file, its rows (folder.py) and the column
# that holds the run's final test accuracy, whose success the writer sets under the plan's bar.


def _stacks_to_run(plan, done, n_seeds=None):
    """The plan's runs (seeds 0..n_seeds-1, default all the plan's) not in `done`, as stacks
    (lists of option dicts of one cell), in the plan's order; each stack as large as
    workers.stack_size allows at its T and width."""
    out = []
    for c in plan["cells"]:
        o = c["options"]
        todo = [dict(o, T=c["T"], m=c["m"], seed=seed, design=c["design"], log_every=0)
                for seed in range(min(plan["seeds"], n_seeds or plan["seeds"]))
                if (c["d"], c["T"], c["m"], seed) not in done]
        k = stack_size(c["T"], len(todo) or 1, o["d"], o["heads"], np.dtype(o["dtype"]).itemsize)
        out += [todo[i:i + k] for i in range(0, len(todo), k)]
    return out


class Stop(Exception):
    """SIGTERM arrived: stop like Ctrl-C (the rows written so far stay)."""


def _raise_stop(signum, frame):
    raise Stop()


def _note_machine(out, plan, allow=False, name="runs.csv"):
    """This session's machine added to OUT/plan.json's machines (the arithmetic it runs), after
    provenance.check_arithmetic: a study continued under another arithmetic is refused unless
    `allow` (--other-arithmetic), and then the record of its rows' arithmetic beside OUT/`name`
    must be free or ours (folder_write.arithmetic_record), before plan.json changes. -> the
    arithmetic each new row records beside it (RowWriter's arithmetic_of), or None when it is
    the folder's own."""
    here = provenance.machine(plan["cells"][0]["options"]["dtype"])
    provenance.check_arithmetic(out, plan, here, allow)
    was = provenance.recorded_arithmetic(out, plan)
    mixed = (provenance.arithmetic_id(here) if was is not None
             and arithmetic.differences(was, here) else None)
    if mixed:
        folder_write.arithmetic_record(os.path.join(out, name))
    path = os.path.join(out, "plan.json")
    raw = folder.read_json(path, "a plan", "restore it, or use another folder")
    if here not in raw.get("machines", []):
        cli.write_json(path, dict(raw, machines=raw.get("machines", []) + [here]))
    return mixed


def _open_study(out, plan, what, n_seeds, other_arithmetic):
    """The study's folder taken for `what` ("runs" or "trace"): its lock, the runs already
    finished, the stacks still to run, and the writer of its CSV (under this session's
    arithmetic, note_machine). -> (lock, done, stacks, writer); the lock is let go on failure."""
    name, kind, _ = STUDY_CSVS[what]
    lock = folder_write.lock_folder(out, holder=f"studies.mechanism {what}, pid {os.getpid()}")
    try:
        key = row_kinds.MECHANISM_ROWS["run"]
        done = {key(r) for r in study_rows(out, plan, what) if is_final(r)}
        stacks = _stacks_to_run(plan, done, n_seeds)
        mixed = _note_machine(out, plan, other_arithmetic, name)
        return lock, done, stacks, folder_write.RowWriter(os.path.join(out, name), kind, mixed)
    except BaseException:
        if lock:
            lock.close()
        raise


def _run_plan(out, workers=1, n_seeds=None, log=print, what="runs", other_arithmetic=False):
    """Train every run of OUT/plan.json (seeds 0..n_seeds-1; default all) not yet finished in the
    study's CSV (what: "runs", train_cell's rows in OUT/runs.csv; "trace", train_trace's in
    OUT/trajectories.csv, at the plan's `every`), its rows written and flushed as its stack
    finishes. workers > 1: that many worker processes (BLAS one thread each). Under another
    arithmetic than the study's: refused unless other_arithmetic (note_machine). -> the number
    of runs written."""
    plan = read_plan(out)
    if n_seeds is not None and n_seeds > plan["seeds"]:
        raise ValueError(f"--seeds {n_seeds}: the plan of {out} has seeds 0..{plan['seeds'] - 1}; "
                         f"give at most {plan['seeds']} (a screen of its first seeds)")
    final = STUDY_CSVS[what][2]
    train_fn = train_cell if what == "runs" else functools.partial(train_trace,
                                                                  every=plan["every"])
    lock, done, stacks, writer = _open_study(out, plan, what, n_seeds, other_arithmetic)
    total = sum(map(len, stacks))
    log(f"mechanism: {len(done)} runs already in {out}; {total} to run in {len(stacks)} "
        f"stacks on {workers} worker(s)", flush=True)
    t0, n = time.perf_counter(), 0
    previous = signal.signal(signal.SIGTERM, _raise_stop)

    def write(rows):
        nonlocal n
        for row in rows:
            row["success"] = int(row[final] >= plan["bar"])         # nan (diverged): a failure
            writer.write(row)                                       # flushed and synced
        ends = [r for r in rows if is_final(r)]
        n += len(ends)
        r, ok = ends[0], sum(x["success"] for x in ends)
        what_ended = (f"median C {np.nanmedian([x['covering_constant'] for x in ends]):.3g}"
                      if what == "runs" else
                      f"median B_X {np.nanmedian([x['B_X'] for x in ends]):.3g}")
        log(f"[{n}/{total}] {r['design']} d={r['d']} T={r['T']} m={r['m']} seeds "
            f"{ends[0]['seed']}-{ends[-1]['seed']}: {ok}/{len(ends)} succeed, {what_ended}, "
            f"median mass on S {np.nanmedian([x['mass_on_S'] for x in ends]):.3f}; "
            f"{r['cpu_seconds']:.1f} CPU s/run; {(time.perf_counter() - t0) / 60:.1f} min",
            flush=True)

    pool = None
    try:
        if workers > 1:
            pool = harness.worker_pool(workers)
        _run_stacks(stacks, pool, workers, write, train_fn)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if pool:            # running workers stopped, the pool's manager thread joined (no race)
            pool.stop()
        try:
            writer.close()
        finally:
            if lock:
                lock.close()
    log(f"mechanism: {n} runs in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return n


def _run_stacks(stacks, pool, workers, write, train_fn=None):
    """Each stack through train_fn (default train_cell), in order: in this process, or at most
    `workers` at a time on the pool; write(rows) as each finishes."""
    train_fn = train_fn or train_cell
    queue, pending = list(stacks), {}
    while queue or pending:
        while queue and (pool is None or len(pending) < workers):
            stack = queue.pop(0)
            if pool is None:
                write(train_fn(stack))
            else:
                pending[pool.submit(train_fn, stack)] = stack
        if pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                pending.pop(fut)
                write(fut.result())


# ======== 3. THE REPORT: tables and plots from OUT/runs.csv and OUT/plan.json ===================
# Every interval is a 95% percentile interval over intervals.N_BOOT resamples of the SEED labels (a drawn
# seed brings its run in every cell of its T), by stats.py's design: the cells at one T share a
# seed's S, data and (at one width) init, and draw the same resamples; each T draws its own. Medians, not means: C is
# a cube of sums and has a long tail. A separation P(failure's X > success's X) (ties count 1/2)
# is undefined in a resample without both outcomes; such resamples count against both bounds.

EPS_LINE = 0.1      # the construction's line drawn in the plot: R = ln((T - s) / (s eps))


def _cell_table(plan, cells, W):
    """Table 1: per cell, the outcome and the medians of the mechanism, with intervals."""
    bar = plan["bar"]
    lines = ["| d | T | design | m | runs | succeed | C | score scale, largest head | "
             "score scale, top head | ‖W_V‖, largest | ‖W_O‖, largest | mass on S, top head | "
             "score gap, top head | heads on S | best ≥ bar, final < bar |",
             "|" + "---|" * 15]
    for (design, d, T, m), rows in cells.items():
        med = {k: fmt(*median_ci(rows, k, W)[:3]) for k in (
            "covering_constant", "score_scale", "top_score_scale", "norm_V", "norm_O",
            "mass_on_S", "score_gap")}
        heads = median_ci(rows, "heads_on_S", W)[0]
        lost = sum(r["best_test_acc"] >= bar > r["test_acc"] for r in rows)
        lines.append(f"| {d} | {T} | {design} | {m} | {len(rows)} | "
                     f"{sum(r['success'] for r in rows)} | {med['covering_constant']} | "
                     f"{med['score_scale']} | {med['top_score_scale']} | {med['norm_V']} | "
                     f"{med['norm_O']} | {med['mass_on_S']} | {med['score_gap']} | "
                     f"{fmt(heads)} | {lost} |")
    return lines


def _separation_table(plan, cells, W, design="borderline"):
    """Table 2: per cell of `design` and pooled over T per width, P(failure's X > success's X)
    for each quantity of SEPARATED, with the wording of each interval against 1/2. -> (lines,
    the number of intervals, {d: pooled results})."""
    lines = ["| d | T | m | successes / failures | median C: successes / failures | "
             + " | ".join(f"P({name}: failure > success)" for _, name in SEPARATED) + " |",
             "|" + "---|" * (5 + len(SEPARATED))]
    n_tests, pooled, widths = 0, {}, sorted({d for (g, d, T, m) in cells if g == design})
    for d in widths:
        mine = [(T, m, rows) for (g, dd, T, m), rows in cells.items() if g == design and dd == d]
        for T, m, rows in mine + [("all", "-", None)]:
            group = [r for _, _, r in mine] if rows is None else [rows]
            n_ok = sum(r["success"] for g in group for r in g)
            n_all = sum(len(g) for g in group)
            cols = []
            for key, _ in SEPARATED:
                p, lo, hi = separation(group, key, W)
                n_tests += np.isfinite(lo)
                cols.append(f"{fmt(p, lo, hi)} {word(lo, hi, 0.5)}" if np.isfinite(p) else "n/a")
                if rows is None:
                    pooled.setdefault(d, {})[key] = (p, lo, hi)
            T_text = f"all {len(mine)} T" if rows is None else T
            C = [np.median([r["covering_constant"] for g in group for r in g
                            if r["success"] == ok]) if (n_ok if ok else n_all - n_ok) else np.nan
                 for ok in (1, 0)]
            lines.append(f"| {d} | {T_text} | {m} | {n_ok} / {n_all - n_ok} | {fmt(C[0])} / "
                         f"{fmt(C[1])} | " + " | ".join(cols) + " |")
    return lines, int(n_tests), pooled


def _final_table(plan, cells, W):
    """Table 4: the final step against the best test accuracy seen at the logged steps, per width
    and design: runs, successes at the end, runs that reached the bar at a logged step but ended
    below it (with a seed-bootstrap interval of the share), runs that ended more than 0.01 below
    their best, runs whose best came at the last step, and training-loss jumps."""
    bar, lines = plan["bar"], [
        "| d | design | runs | final ≥ bar | best ≥ bar | lost: best ≥ bar > final [95% CI] | "
        "final < best - 0.01 | best at the last step | loss rose above 0.1 after < 0.01 |",
        "|---|---|---|---|---|---|---|---|---|"]
    for d in sorted({d for (_, d, _, _) in cells}):
        for design in ("borderline", "fixed"):
            group = [rows for (g, dd, T, m), rows in cells.items() if g == design and dd == d]
            rs = [r for rows in group for r in rows]
            if not rs:
                continue
            for r in rs:
                r["lost"] = float(r["best_test_acc"] >= bar > r["test_acc"])
            num = sum(_pair_weights(rows, "lost", W) for rows in group)
            den = sum(_pair_weights(rows, None, W) for rows in group)
            lo, hi = intervals.percentile_ci(num[1:] / np.maximum(den[1:], 1))
            lines.append(
                f"| {d} | {design} | {len(rs)} | {sum(r['test_acc'] >= bar for r in rs)} | "
                f"{sum(r['best_test_acc'] >= bar for r in rs)} | {int(num[0])} "
                f"({fmt(num[0] / den[0], lo, hi, 2)}) | "
                f"{sum(r['test_acc'] < r['best_test_acc'] - 0.01 for r in rs)} | "
                f"{sum(r['best_step'] == r['steps'] for r in rs)} | "
                f"{sum(r['loss_jump'] > 0.1 for r in rs)} |")
    return lines


def _pair_weights(rows, key, W):  # -> [1 + B]: the seeds' weights summed (times key when given)
    w = weights_at(W, rows)[:, [r["seed"] for r in rows]]
    return w.sum(1) if key is None else w @ np.array([r[key] for r in rows])


def _cost_lines(cells):
    """What the runs cost, from their rows: CPU and wall seconds per run summed."""
    rs = [r for rows in cells.values() for r in rows]
    cpu, wall = sum(r["cpu_seconds"] for r in rs), sum(r["seconds"] for r in rs)
    out = [f"- {len(rs)} runs: {cpu / 3600:.2f} CPU hours, {wall / 3600:.2f} hours of training "
           f"wall time summed over runs (training.study_stack's seconds per run)"]
    for d in sorted({d for (_, d, _, _) in cells}):
        most = max(((r["cpu_seconds"], r["T"], r["m"]) for r in rs if r["d"] == d))
        out.append(f"- d = {d}: {sum(r['cpu_seconds'] for r in rs if r['d'] == d) / 3600:.2f} "
                   f"CPU hours; the costliest run {most[0]:.0f} CPU s (T = {most[1]}, "
                   f"m = {most[2]})")
    return out


def _reproduction_lines(plan, cells):
    """How many of the study's runs the committed folders ran too (same width, T, m and seed: the
    same run, since a seed fixes S, the data and the init), and how many of those gave the very
    same test accuracy: a check that the study trains what the folders trained."""
    widths = {c["d"]: c["source"]["folder"] for c in plan["cells"]
              if c["design"] == "borderline" and "folder" in c["source"]}
    both = same = 0
    for d, path in widths.items():
        try:
            theirs = {(int(r["T"]), int(r["m"]), int(r["seed"])): r["test_acc"]
                      for r in folder.folder_rows(path)[1]}
        except (OSError, ValueError):
            return [f"- the folder {path} could not be read: no reproduction check"]
        for (design, dd, T, m), rows in cells.items():
            for r in rows if dd == d else []:
                acc = theirs.get((T, m, r["seed"]))
                if acc is not None:
                    both, same = both + 1, same + (float(acc) == r["test_acc"])
    return [f"- {both} runs of this study were also run by the committed folders (same d, T, m "
            f"and seed); {same} of them gave the same final test accuracy"]


def _check_a_study(out, plan):
    """ValueError, one line, unless the plan holds a study's borderline and fixed cells: an arm
    (its cells of one intervention, a baseline rerun) is reported beside its study."""
    designs = sorted({c["design"] for c in plan["cells"]})
    missing = [d for d in ("borderline", "fixed") if d not in designs]
    if missing:
        raise ValueError(f"{out} holds no {' or '.join(missing)} cells (its cells: "
                         f"{', '.join(designs)}): `report` tables a study's borderline and fixed "
                         f"cells; an arm is reported beside its study: python -m "
                         f"studies.mechanism paired STUDY {out}")


def _report(out, log=print):
    """OUT/table.md (the four tables, the counts of intervals and the costs) and, with
    matplotlib, OUT/mechanism.png, both claimed before either is written
    (harness.claim_outputs). -> the table's text."""
    harness.claim_outputs([(os.path.join(out, "table.md"), "table", "the table"),
                           (os.path.join(out, "mechanism.png"), "plot", "the plot")],
                          study_files(out), own=[out])
    plan, cells = load_runs(out, "OUT")
    _check_a_study(out, plan)
    W = seed_weights(plan["seeds"], [T for (_, _, T, _) in cells])
    sep, n_sep, pooled = _separation_table(plan, cells, W)
    grow, n_grow, fits = growth_table(plan, cells, W)
    s = int(next(iter(cells.values()))[0]["s"])                  # the task's sparsity
    text = "\n".join(
        _cell_table(plan, cells, W)
        + ["", f"Medians over seeds [95% CI, {intervals.N_BOOT:,} seed resamples, each T's on its "
               f"own; a bound keeps no digit its Monte Carlo band (two standard errors either "
               f"side) moves, and ~ marks one widened to that band's far end]; 'top head' = the "
           f"head with the largest mean [CLS] attention mass on S (over {N_MEASURE} test inputs); "
           f"heads on S: heads with mass >= {ON_S}; best = the best test accuracy at the "
           f"steps {LOG_EVERY}, {2 * LOG_EVERY}, ..., the outcome is the final step's.", ""]
        + sep + ["", f"{n_sep} intervals against 1/2 (no separation). A norm-based bound "
                 "predicts failures have the larger norms: P > 1/2. " + EDGE_NOTE, ""]
        + grow + ["", f"{n_grow} intervals. The construction's score gap grows as "
                  f"ln((T - s)/(s eps)): b = 1 in ln T at a fixed leak eps.", ""]
        + _final_table(plan, cells, W) + [""] + _cost_lines(cells)
        + _reproduction_lines(plan, cells)) + "\n"
    path = cli.claim_output(os.path.join(out, "table.md"), "table", "the table")
    cli.write_text(path, text)
    log(text)
    log(f"wrote {path}")
    _plot_study(out, plan, cells, W, s, log)
    return text


def _plot_study(out, plan, cells, W, s, log=print):
    """OUT/mechanism.png: C and the score scales against T (successes filled, failures open),
    the top head's score gap beside the construction's ln((T - s)/(s eps)), and the separation of
    C per T at the borderline m. Skipped with one line when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no plot: matplotlib is not installed (pip install matplotlib, then rerun report)")
        return None
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    colours = dict(zip(sorted({d for (_, d, _, _) in cells}), ("C0", "C3", "C2", "C1")))
    Ts = np.unique(np.round(np.geomspace(min(T for (_, _, T, _) in cells),   # integer T: the
                                         max(T for (_, _, T, _) in cells), 50)).astype(int))  # gap's
    for (design, d, T, m), rows in cells.items():
        shift = 1.04 if design == "fixed" else 0.96                 # the two designs side by side
        for r in rows:
            face = colours[d] if r["success"] else "none"
            kw = dict(marker="o" if design == "borderline" else "s", s=14, edgecolors=colours[d],
                      facecolors=face, alpha=0.6, linewidths=0.8)
            ax[0, 0].scatter(T * shift, r["covering_constant"], **kw)
            ax[0, 1].scatter(T * shift, r["top_score_scale"], **kw)
            ax[1, 0].scatter(T * shift, r["score_gap"], **kw)
    line = paper_score_gap(Ts, s, EPS_LINE)
    ax[0, 1].plot(Ts, line, "k--", label=f"construction: ln((T - s)/(s eps)), eps = {EPS_LINE}")
    ax[1, 0].plot(Ts, line, "k--", label=f"construction: ln((T - s)/(s eps)), eps = {EPS_LINE}")
    for d, c in colours.items():
        pts = [(T, *separation([rows], "covering_constant", W)) for (g, dd, T, m), rows in
               cells.items() if g == "borderline" and dd == d]
        pts = [p for p in pts if np.isfinite(p[1])]
        if pts:
            T_, p, lo, hi = map(np.array, zip(*sorted(pts)))
            ax[1, 1].errorbar(T_, p, yerr=[p - lo, hi - p], fmt="o-", color=c, capsize=3,
                              label=f"d = {d}")
        for a in ax.flat[:3]:
            a.scatter([], [], color=c, label=f"d = {d}")
    ax[1, 1].axhline(0.5, color="grey", lw=0.8)
    titles = ("covering constant C (log scale)", "score scale ||W_QK||_2 B_X^2, top head (log)",
              "score gap S vs the rest, top head", "P(failure's C > success's C), borderline m")
    for a, t in zip(ax.flat, titles):
        a.set_xscale("log")
        a.set_xlabel("T")
        a.set_title(t, fontsize=10)
        a.legend(fontsize=7)
    ax[0, 0].set_yscale("log")
    ax[0, 1].set_yscale("log")
    fig.suptitle("filled: success, open: failure; circles: borderline m, squares: fixed m",
                 fontsize=9)
    fig.tight_layout()
    path = cli.claim_output(os.path.join(out, "mechanism.png"), "plot", "the plot")
    try:
        cli.replace_atomically(path, lambda f: fig.savefig(f, dpi=110, format="png"))
    finally:
        plt.close(fig)
    log(f"wrote {path}")
    return path


# ======== 4. THE COMMAND LINE ====================================================================

def _extra_cells(text):
    """Parser for --extra: d:T pairs, comma-separated (128:10000)."""
    try:
        pairs = [tuple(int(v) for v in p.split(":")) for p in text.split(",") if p.strip()]
    except ValueError:
        pairs = None
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise cli.BadValue(f"must be d:T pairs separated by commas (128:10000), got {text!r}")
    return pairs


def _parser():
    ap = OneLineParser(prog="studies.mechanism", description=(
        "What training finds: the norms of Edelman et al.'s capacity bound (score scale "
        "||W_QK||_2 B_X^2, ||W_V||, ||W_O||, the covering constant C) and the head that attends "
        "S, measured on trained runs over seeds, T and widths. Three steps: plan, run, report."))
    sub = ap.add_subparsers(dest="command", required=True, metavar=(
        "{plan,arm,run,report,factors,paired,trace,trace-report}"))
    _add_study_commands(sub)
    _add_why_runs_fail_commands(sub)
    return ap


def _add_study_commands(sub):
    """plan, run, report: the study itself."""
    p = sub.add_parser("plan", help="write OUT/plan.json: the cells (d, T, m) from committed "
                       "sweep folders", description="Per width (one committed sweep folder) and "
                       "T: the borderline m = the folder's m* over the seeds, and a fixed m = "
                       "FACTOR x the m* of one width, the same at every width.")
    p.add_argument("out", help="the study's folder (created if missing)")
    p.add_argument("folders", nargs="+", help="committed sweep folders, one per width")
    p.add_argument("--Ts", type=int_list, required=True, help="T of every width, e.g. 10,30,100")
    p.add_argument("--extra", type=_extra_cells, default=[],
                   help="d:T cells run last, e.g. 128:10000")
    p.add_argument("--seeds", type=integer(1), default=20, help="seeds 0..N-1 per cell (20)")
    p.add_argument("--fixed-from", type=integer(1), default=None,
                   help="the width whose m* sets the fixed m (default: the widest)")
    p.add_argument("--factor", type=number(0, strict=True), default=2.0,
                   help="fixed m = FACTOR x that m* (2)")
    r = sub.add_parser("run", help="train the planned runs into OUT/runs.csv (resumable)",
                       description="Train every run of OUT/plan.json that OUT/runs.csv does not "
                       "hold yet, one row each, flushed as it finishes; rerun to resume.")
    r.add_argument("out")
    r.add_argument("--workers", type=integer(1), default=1,
                   help="worker processes, one BLAS thread each (1)")
    r.add_argument("--seeds", type=integer(1), default=None,
                   help="only seeds 0..N-1 of the plan's (a screen); default: all")
    provenance.add_other_arithmetic(r)
    q = sub.add_parser("report", help="OUT/table.md and OUT/mechanism.png from OUT/runs.csv",
                       description="The tables (per cell, the separation of successes and "
                       "failures, the growth with T, the final step against the best seen) and "
                       "the plots (with matplotlib).")
    q.add_argument("out")


def _add_why_runs_fail_commands(sub):
    """Issue 38's commands on a study's cells: arm, factors, paired, trace, trace-report."""
    g = sub.add_parser("arm", help="write OUT/plan.json: an intervention arm of a study's cells",
                       description="Issue 38: the study's cells of one design at the given T "
                       "(every width, or --widths), each with the arm's one change of options "
                       "(a sweep "
                       "protocol of the arm's name; none for baseline-rerun), paired by seed "
                       "with the study's runs.")
    g.add_argument("out", help="the arm's folder (created if missing)")
    g.add_argument("arm", choices=("baseline-rerun",) + row_kinds.INTERVENTIONS)
    _add_cells_arguments(g)
    f = sub.add_parser("factors", help="C's factors and the bound's size from a study's runs",
                       description="Issue 38, from a study's runs (no training): each factor of "
                       "C and C with each factor held at its cell median, their separations of "
                       "failures from successes pooled over T, and the reconstructed bound "
                       "sqrt(C ln(2dmT)/m) per cell beside 1.")
    f.add_argument("study", help="the study's folder (plan.json, runs.csv)")
    f.add_argument("--factors", default=None,
                   help="a baseline-rerun folder of the study whose runs carry C's factors "
                   "(default: the study's own runs)")
    f.add_argument("--out", required=True, help="the markdown file to write")
    pr = sub.add_parser("paired", help="arms against the study's runs, paired by seed",
                        description="Issue 38: each arm's runs against the study's run of the "
                        "same seed (same data, same init): per cell and pooled, successes, "
                        "discordant pairs, the paired difference of the success rate.")
    pr.add_argument("study", help="the study's folder (the baseline)")
    pr.add_argument("arms", nargs="+",
                    help="arm folders (python -m studies.mechanism arm, then run)")
    pr.add_argument("--out", required=True, help="the markdown file to write")
    pr.add_argument("--pairs", default=None, help="also write every pair to this CSV")
    t = sub.add_parser("trace", help="train a study's cells again with their trajectories "
                       "logged, into OUT/trajectories.csv (resumable)",
                       description="Issue 38: the study's cells of one design at the given T "
                       "(every width, or --widths), the very runs of the study seed for seed, each logged at "
                       "step 1 and every EVERY steps (test accuracy, training loss, B_X, the top "
                       "head's score gap and mass on S), one row per run per logged step. "
                       "OUT/plan.json is written on the first call; rerun the same command to "
                       "resume.")
    t.add_argument("out", help="the trajectories' folder (created if missing)")
    _add_cells_arguments(t)
    t.add_argument("--every", type=integer(1), default=50,
                   help="steps between logged steps, dividing the runs' steps (50)")
    t.add_argument("--workers", type=integer(1), default=1,
                   help="worker processes, one BLAS thread each (1)")
    provenance.add_other_arithmetic(t)
    tr = sub.add_parser("trace-report", help="OUT/table.md and OUT/trajectories.png from "
                        "OUT/trajectories.csv", description="Issue 38: per cell and logged "
                        "step, eventual successes against failures (B_X, test accuracy, the top "
                        "head's mass on S and score gap), each split with its interval, and the "
                        "first step each split is established; the plot with matplotlib.")
    tr.add_argument("out")


def _add_cells_arguments(p):
    """Which of a study's cells a new folder takes (arm, trace): --from, --design, --Ts,
    --seeds."""
    p.add_argument("--from", dest="source", required=True, help="the study's folder (plan.json)")
    p.add_argument("--design", choices=("borderline", "fixed"), default="borderline",
                   help="which of the study's cells (borderline)")
    p.add_argument("--Ts", type=int_list, required=True,
                   help="the study's T to take, e.g. 100,1000")
    p.add_argument("--seeds", type=integer(1), default=20, help="seeds 0..N-1 per cell (20)")
    p.add_argument("--widths", type=int_list, default=None,
                   help="the study's widths d to take, e.g. 128 (default: every width)")


def _write_plan(a):
    """The `plan` command: the cells from committed sweep folders, saved (save_plan)."""
    folder.check_plan_size(2 * len(a.folders), len(a.Ts) + len(a.extra), a.seeds)
    _save_plan(a.out, lambda: plan_cells(a.folders, a.Ts, a.extra, a.seeds, a.fixed_from,
                                        a.factor))


def _write_arm(a):
    """The `arm` command: an arm's plan from a study's (_arm_plan), saved (save_plan)."""
    plan = _save_plan(a.out, lambda: _arm_plan(a.source, a.arm, a.design, a.Ts, a.seeds,
                                                     a.widths))
    per, minutes = failures.plan_cost(plan, a.source)
    print(f"CPU time from {a.source}'s runs: " + "; ".join(per) + f"; about {minutes:.0f} CPU "
          f"min for {len(plan['cells'])} cells x {plan['seeds']} seeds")


def _write_trace(a):
    """The `trace` command: the trajectories' plan (_trace_plan) saved on the first call, the same
    plan required on a later one (a folder holds one plan), then its runs (run_plan, "trace")."""
    plan = _trace_plan(a.source, a.design, a.Ts, a.seeds, a.every, a.widths)
    path = os.path.join(a.out, "plan.json")
    if os.path.lexists(path):
        same = lambda p: json.dumps({k: v for k, v in folder.check_plan(p, path).items()
                                     if k != "machines"}, sort_keys=True)
        if same(read_plan(a.out)) != same(plan):
            raise ValueError(f"{path} holds another plan (other cells, seeds or --every); use "
                             f"another folder, or give the options it was written with")
        print(f"{path}: the same plan; resuming")
    else:
        _save_plan(a.out, lambda: plan)
    _run_plan(a.out, a.workers, what="trace", other_arithmetic=a.other_arithmetic)


def _save_plan(out, make):
    """OUT/plan.json = make(), written under the folder's lock, checked as every reader checks it
    (folder.check_plan), into a folder that holds no runs and no file called plan.json that is
    not a plan (someone's notes are never replaced); each cell printed."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"OUT {out} is a file; give a folder")
    path = os.path.join(out, "plan.json")

    def free():                                        # checked before planning, and under the lock
        if os.path.isdir(out):
            folder.check_folder_kind(out, "plan.json")
        if any(os.path.lexists(os.path.join(out, name)) for name, _, _ in STUDY_CSVS.values()):
            raise ValueError(f"{out} already holds runs; a new plan goes into a new folder")
        if os.path.lexists(path):
            folder.read_plan(out)                      # only a plan is ever replaced
    free()
    plan = make()
    folder.check_plan(plan, path)                      # before the folder is made
    made = not os.path.isdir(out)
    os.makedirs(out, exist_ok=True)
    try:
        lock = folder_write.lock_folder(out, holder=f"studies.mechanism plan, pid {os.getpid()}")
        try:
            free()
            folder.check_plan(plan, path)
            cli.write_json(path, plan)
        finally:
            if lock:
                lock.close()
    except BaseException:
        if made and not os.listdir(out):               # a refusal leaves no folder behind
            os.rmdir(out)
        raise
    for c in plan["cells"]:
        src = c.get("source", {})          # where m came from, or not recorded (check_plan)
        times = f"{src['factor']:g} x " if "factor" in src else ""
        print(f"{c['design']:>10} d={c['d']:<4} T={c['T']:<6} m={c['m']:<5}" + (
            f" = {times}m* {src['m_star']} [{src['m_star_lo']:g}, {src['m_star_hi']:g}] at "
            f"T={src['T_folder']} of {src['folder']} (seeds 0-{src['n_seeds'] - 1})"
            if {"m_star", "m_star_lo", "m_star_hi", "T_folder", "folder", "n_seeds"} <= set(src)
            else " (where m came from: not recorded)"))
    print(f"wrote {path}: {len(plan['cells'])} cells x {plan['seeds']} seeds")
    return plan


def _kernels_note(folders):
    """The line saying the folders set side by side were made under different BLAS kernels
    (provenance.kernels_differ), on standard output; nothing when they were not."""
    note = provenance.kernels_differ(folders)
    if note:
        print(note)


def main(argv=None):
    a = _parser().parse_args(harness.check_argv(argv))
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    try:
        if a.command == "plan":
            _write_plan(a)
        elif a.command == "arm":
            _write_arm(a)
        elif a.command == "factors":
            failures.factors_report(a.study, a.out, a.factors)
            _kernels_note([a.study] + ([a.factors] if a.factors else []))
        elif a.command == "paired":
            failures.paired_report(a.study, a.arms, a.out, a.pairs)
            _kernels_note([a.study] + a.arms)
        elif a.command == "run":
            _run_plan(a.out, a.workers, a.seeds, other_arithmetic=a.other_arithmetic)
        elif a.command == "trace":
            _write_trace(a)
        else:
            lock = folder_write.lock_folder(a.out, holder=f"studies.mechanism report, pid {os.getpid()}")
            try:
                (failures.trace_report if a.command == "trace-report" else _report)(a.out)
            finally:
                if lock:
                    lock.close()
    except (ValueError, Stop) as e:
        if isinstance(e, Stop):
            print("studies.mechanism: terminated; the rows written so far are kept",
                  file=sys.stderr)
            return 143
        print(f"studies.mechanism: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.mechanism", main))
