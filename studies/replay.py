"""replay.py (studies, a command): train a folder's rows again and say whether they replay bit for
bit.

    python -m studies.replay FOLDER [--rows 5] [--seed 0]       a few rows, spread over the cells,
                                                               under the folder's own kernel
    python -m studies.replay FOLDER --kernel Haswell           ... under another OpenBLAS kernel
    python -m studies.replay FOLDER ... --find --out FILE      each kernel this CPU runs, in turn,
                                                               until one replays every row drawn

A float32 run replays bit for bit only under the arithmetic that made it (arithmetic.py: the BLAS
library and its kernel above all). This command draws a few of a folder's rows (a reproducible
choice, spread over its cells: one row of each cell in turn, cells in a shuffled order fixed by
--seed), trains each again with the folder's recorded options (the very code path that wrote it:
a sweep's worker, steps.py's stack, the mechanism study's cell or trace) and compares every
recorded column exactly, timing columns aside. It works on every kind of folder the studies
write: a sweep's (sweep.json: the paper's range, the extended, width, protocol and family
folders), steps.py's (steps.json) and the mechanism study's, its arms and its traces (plan.json).

--kernel runs the training in worker processes started with OPENBLAS_CORETYPE set (OpenBLAS
reads it when it loads), only for a kernel this processor can run (arithmetic.kernels_here: a
kernel it cannot run would crash it); this process, the tests and CI keep their environment.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.replay")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import math
import os

import numpy as np

from studies.lib import arithmetic, folder, harness, provenance, study, training, workers
from studies.lib.checks import INTS, check_number
from studies.lib.cli import OneLineParser, integer
from studies.lib.provenance import read_finding  # arithmetic.json's one reader

_TIMING = ("seconds", "cpu_seconds")      # columns no replay reproduces
_STEPS_COMPARED = ("steps_to_bar", "censored")   # a steps row's final accuracy is its stack's


# ---------------------------------------------------------------- a folder's kind and its rows --

def folder_kind(out):
    """'sweep', 'steps', 'runs' (a mechanism study or arm) or 'trace', from the files it holds;
    ValueError naming the folder when it holds none of them."""
    out = harness.check_path("out", out, "a study folder", folder=True)
    if os.path.isfile(os.path.join(out, "sweep.json")):
        return "sweep"
    if os.path.isfile(os.path.join(out, "steps.json")):
        return "steps"
    if os.path.isfile(os.path.join(out, "plan.json")):
        has_runs = os.path.isfile(os.path.join(out, "runs.csv"))
        return "runs" if has_runs or not os.path.isfile(
            os.path.join(out, "trajectories.csv")) else "trace"
    raise ValueError(f"{out} is not a folder the studies write (no sweep.json, steps.json or "
                     f"plan.json)")


_CELL_T = dict(sweep=1, steps=0, runs=2, trace=2)   # where T stands in a kind's cell key


def _folder_runs(out, kind):
    """(the folder's description, its finished rows as written, each with its 'line', and a
    function row -> its cell key); a trace's rows are one per run per logged step."""
    if kind == "sweep":
        meta = folder.read_meta(out)
        return meta, folder.folder_runs(out, meta=meta), lambda r: (r["model"], int(r["T"]))
    if kind == "steps":
        meta = folder.read_steps_meta(out)
        rows = list(folder.read_done(os.path.join(out, "steps.csv"), meta).values())
        return meta, rows, lambda r: (int(r["T"]),)
    plan = study.read_plan(out)
    rows = study.study_rows(out, plan, "runs" if kind == "runs" else "trace")
    return plan, rows, lambda r: (r["design"], int(r["d"]), int(r["T"]), int(r["m"]))


def _draw_rows(rows, cell_of, n, seed=0, cheap_at=None):
    """n rows spread over the cells: the cells in an order shuffled by `seed`, one row of each in
    turn (drawn at random within its cell), until n are drawn or every row is. cheap_at: the
    index of T in a cell's key, to draw from the cells of the smallest T only (to find a
    kernel, any row will do, and a short run does it soonest)."""
    cells = {}
    for r in rows:
        cells.setdefault(cell_of(r), []).append(r)
    keys = sorted(cells, key=repr)
    if cheap_at is not None and keys:
        least = min(k[cheap_at] for k in keys)
        keys = [k for k in keys if k[cheap_at] == least]
    rng = np.random.default_rng(seed)
    order = [keys[i] for i in rng.permutation(len(keys))]
    pools = {k: [cells[k][i] for i in rng.permutation(len(cells[k]))] for k in order}
    out = []
    while len(out) < n and any(pools.values()):
        for k in order:
            if pools[k] and len(out) < n:
                out.append(pools[k].pop())
    return out


# ---------------------------------------------------------------- training a row again ---------

def _run_options_of(kind, meta, row):
    """The options the folder trained `row` with (its recorded options, the row's cell and seed)."""
    if kind == "sweep":
        return dict(folder.full_options(meta["options"]), model=row["model"], T=int(row["T"]),
                    m=int(row["m"]), seed=int(row["seed"]))
    if kind == "steps":
        return dict(meta["options"], T=int(row["T"]), seed=int(row["seed"]),
                    steps=int(meta["budget"]), log_every=0)
    cell = next(c for c in meta["cells"] if (c["design"], c["d"], c["T"], c["m"]) == (
        row["design"], int(row["d"]), int(row["T"]), int(row["m"])))
    return dict(cell["options"], T=cell["T"], m=cell["m"], seed=int(row["seed"]),
                design=cell["design"], log_every=0)


def _train_again(kind, meta, options):
    """The rows the folder's own code path writes for one run trained again (a list: a trace's
    run has one row per logged step), with the arithmetic that made them."""
    if kind == "sweep":
        rows = workers.sweep_worker([options])
    elif kind == "steps":
        rows = workers.run_stack([options], meta["every"])[0]
    elif kind == "runs":
        rows = workers.train_cell([options])
    else:
        rows = workers.train_trace([options], meta["every"])
    return rows, arithmetic.record(options.get("dtype", "float32"))


def _same(recorded, value):
    """(whether a recorded cell equals a value trained again, exactly; the difference, or None).
    A cell written with fewer digits (a log imported into a folder) agrees when the value
    rounds to it; text cells _compare as text. A cell read typed (a steps row's: an int, or None
    for a censored run's blank steps_to_bar) is compared as the text it was written as."""
    if not isinstance(recorded, str):
        recorded = "" if recorded is None else str(recorded)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (int, float, np.integer, np.floating)) and recorded not in ("",):
        try:
            r = float(recorded)
        except ValueError:
            return str(value) == recorded, None
        v = float(value)
        if math.isnan(r) or math.isnan(v):
            return math.isnan(r) and math.isnan(v), None
        if r == v:
            return True, None
        digits = len(recorded.split(".")[1]) if "." in recorded and "e" not in recorded else None
        if digits is not None and digits <= 6 and round(v, digits) == r:
            return True, None
        return False, v - r
    return str(value if value is not None else "") == recorded, None


LATER = ("pos_overlap",)   # measured since a later version: older rows wrote nan for it


def _compared(k, recorded):
    """Whether a recorded row's column is compared: not a timing, and recorded at all (a file
    written before the column existed holds it empty; a row imported from a log, *-from-log*.csv,
    holds nan where the log did not say, and an older row nan in a column measured LATER)."""
    text = recorded.get(k, "")
    return k not in _TIMING and k != "line" and text != "" and not (
        text == "nan" and ("from-log" in recorded.get("line", "") or k in LATER))


def _worst(kind, recorded, again, all_rows=None):
    """The largest relative difference between a recorded row and its run trained again over
    every compared numeric column (a trace's every step) -> (relative difference, column)."""
    pairs = [(recorded, again[0])]
    if kind == "trace":
        run = {int(r["step"]): r for r in all_rows if (r["d"], r["T"], r["m"], r["seed"]) == (
            recorded["d"], recorded["T"], recorded["m"], recorded["seed"])}
        pairs = [(run[int(n["step"])], n) for n in again if int(n["step"]) in run]
    out = (0.0, None)
    for old, new in pairs:
        for k in (_STEPS_COMPARED if kind == "steps" else new):
            if not _compared(k, old):
                continue
            ok, delta = _same(old[k], new[k])
            if not ok:
                rel = abs(delta) / max(abs(float(old[k])), 1e-300) if delta is not None else 1.0
                out = max(out, (rel, k), key=lambda x: x[0])
    return out


def _compare(kind, recorded, again, all_rows=None):
    """The first column that differs between a recorded row and its run trained again, as
    (column, recorded, now, difference), or None when every compared column is equal."""
    if kind == "trace":
        run = [r for r in all_rows if (r["d"], r["T"], r["m"], r["seed"]) == (
            recorded["d"], recorded["T"], recorded["m"], recorded["seed"])]
        by_step = {int(r["step"]): r for r in run}
        for new in again:
            old = by_step.get(int(new["step"]))
            if old is None:
                return ("step", "missing", new["step"], None)
            diff = _compare("runs", old, [new])
            if diff:
                return (f"{diff[0]} at step {new['step']}",) + diff[1:]
        return None
    new = again[0]
    columns = [k for k in (_STEPS_COMPARED if kind == "steps" else new) if _compared(k, recorded)]
    for k in columns:
        ok, delta = _same(recorded[k], new[k])
        if not ok:
            return (k, recorded[k], new[k], delta)
    return None


# ---------------------------------------------------------------- the folder's arithmetic ------
# (provenance.recorded_arithmetic: its description's machines, or what a replay found)

def _kernel_advice(wanted, here):
    """What to do when the folder's kernel is not the one this machine runs: the variable that
    selects it, and whether this processor can run it."""
    k = wanted.get("kernel", arithmetic.UNREAD)
    if wanted.get("blas") != "OpenBLAS" or k == arithmetic.UNREAD:
        return (f"the folder was made by {arithmetic.words(wanted)}; no OpenBLAS kernel can be "
                f"asked for here")
    lack = sorted(arithmetic.KERNEL_FLAGS.get(k, {"?"}) - arithmetic.cpu_flags())
    return (f"the folder needs OpenBLAS's {k} kernel, this machine runs {here.get('kernel')}: "
            f"replay with --kernel {k} (OPENBLAS_CORETYPE={k} in the workers)" + (
                "" if k in arithmetic.kernels_here() else
                f"; this processor cannot run {k} (its flags lack {', '.join(lack)})"))


# ---------------------------------------------------------------- the replay ------------------

def _replay_row(kind, meta, options):
    """A worker's task: one row trained again -> (its rows, the arithmetic that made them)."""
    training.keep_freed_memory()
    return _train_again(kind, meta, options)


def _served_kernel(requested):
    """The kernel OpenBLAS serves in a process started with OPENBLAS_CORETYPE=requested (it may
    serve an older one under a newer name), asked of one worker."""
    with _kernel_pool(requested, 1) as pool:
        return pool.submit(arithmetic.record, "float32").result()["kernel"]


class _kernel_pool:
    """harness.worker_pool(workers) whose workers start with OPENBLAS_CORETYPE=kernel (None: the
    environment as it is); this process's environment is put back as it was on leaving."""

    def __init__(self, kernel, workers):
        self.kernel, self.workers = kernel, workers

    def __enter__(self):
        self.old = os.environ.get("OPENBLAS_CORETYPE")
        if self.kernel is not None:
            os.environ["OPENBLAS_CORETYPE"] = self.kernel
        self.pool = harness.worker_pool(self.workers)
        return self.pool

    def __exit__(self, *exc):
        self.pool.shutdown(wait=True) if exc[0] is None else self.pool.stop()
        if self.old is None:
            os.environ.pop("OPENBLAS_CORETYPE", None)
        else:
            os.environ["OPENBLAS_CORETYPE"] = self.old
        return False


def _count(name, v, lo, most):
    return check_number(name, v, INTS, lo, most + 1, f"an integer from {lo} to {most}")


def _log_line(line):
    print(line, flush=True)


OWN = "own"        # replay's kernel: this machine's own, as the environment leaves it


def folder_kernel(out, meta):
    """The OpenBLAS kernel to replay the folder `out` (its description `meta`) under: the one it
    records (provenance.recorded_arithmetic) when this processor can run it, else None (this
    machine's own, and the summary says what the folder needs)."""
    rec = provenance.recorded_arithmetic(out, meta)
    k = rec.get("kernel") if rec and rec.get("blas") == "OpenBLAS" else None
    return k if k in arithmetic.kernels_here() else None


def replay(out, n_rows=5, seed=0, kernel=None, workers=1, cheap=False, log=_log_line):
    """Train n_rows of the folder `out` again (_draw_rows) under `kernel`: None, the kernel the
    folder records when this processor can run it (folder_kernel), else this machine's own;
    OWN, this machine's own; or a kernel this processor runs -> dict(kind, rows: [(row,
    difference or None)], arithmetic: the record the runs got, recorded: the folder's record or
    None)."""
    out = harness.check_path("out", out, "a study folder", folder=True)
    n_rows, seed = _count("n_rows", n_rows, 1, 10**6), _count("seed", seed, 0, 2**63)
    workers = _count("workers", workers, 1, harness.MAX_WORKERS)
    harness.need(kernel in (None, OWN) or kernel in arithmetic.kernels_here(), "kernel", kernel,
                 f"None, {OWN!r} or a kernel this processor can run "
                 f"({', '.join(arithmetic.kernels_here())})")
    harness.need(isinstance(cheap, bool), "cheap", cheap, "True or False")
    harness.need(log is None or callable(log), "log", log, "None or a function of one line")
    kind = folder_kind(out)
    meta, rows, cell_of = _folder_runs(out, kind)
    kernel = folder_kernel(out, meta) if kernel is None else None if kernel == OWN else kernel
    pick = [r for r in rows if study.is_final(r)] if kind == "trace" else rows
    drawn = _draw_rows(pick, cell_of, n_rows, seed, _CELL_T[kind] if cheap else None)
    if not drawn:
        raise ValueError(f"{out} holds no finished rows to replay")
    results, rec = [], None
    with _kernel_pool(kernel, workers) as pool:
        futures = [pool.submit(_replay_row, kind, meta, _run_options_of(kind, meta, r))
                   for r in drawn]
        for r, fut in zip(drawn, futures):
            again, rec = fut.result()
            diff = _compare(kind, r, again, rows)
            results.append((r, diff, _worst(kind, r, again, rows)))
            if log:
                log(f"  {r['line']}: {_difference_text(diff)}")
    return dict(kind=kind, rows=results, arithmetic=rec,
                recorded=provenance.recorded_arithmetic(out, meta))


def _difference_text(diff):
    if diff is None:
        return "replays bit for bit"
    return (f"{diff[0]} recorded {diff[1]}, now {diff[2]}"
            + (f" (differs by {diff[3]:.3g})" if diff[3] else ""))


def summary(out, res):
    """The verdict's line: 'OUT: 5 of 5 rows replay bit for bit (OpenBLAS ... SkylakeX, ...)' or
    the first row and column that differ, and what to do where the folder's kernel is another."""
    out = harness.check_path("out", out, "a study folder")
    harness.need(isinstance(res, dict) and {"rows", "arithmetic", "recorded"} <= set(res),
                    "res", res, "what replay returned")
    ok = sum(d is None for _, d, _ in res["rows"])
    line = (f"{out}: {ok} of {len(res['rows'])} rows replay bit for bit "
            f"({arithmetic.words(res['arithmetic'])})")
    first = next(((r, d) for r, d, _ in res["rows"] if d is not None), None)
    if first:
        line += f"; first difference: {first[0]['line']}: {_difference_text(first[1])}"
    if res["recorded"] and arithmetic.differences(res["recorded"], res["arithmetic"]):
        line += "; " + _kernel_advice(res["recorded"], res["arithmetic"])
    elif res["recorded"] is None:
        line += "; the folder records no kernel (made before issue 46: --find looks for it)"
    return line


def find(out, n_rows=2, seed=0, workers=1, log=_log_line):
    """Replay the _same rows under this machine's kernel, then under each other kernel this
    processor can run (each served kernel once), until one replays every row -> the finding
    (dict: found, the record of the kernel that replays, or None; tried; rows; command),
    written to OUT/arithmetic.json."""
    out = harness.check_path("out", out, "a study folder", folder=True)
    n_rows, seed = _count("n_rows", n_rows, 1, 10**6), _count("seed", seed, 0, 2**63)
    workers = _count("workers", workers, 1, harness.MAX_WORKERS)
    harness.need(log is None or callable(log), "log", log, "None or a function of one line")
    tried, found, seen, by_row = [], None, set(), {}
    for k in [None] + arithmetic.kernels_here()[::-1]:        # the newest kernels first
        served = _served_kernel(k) if k is not None else None
        if served in seen:
            continue
        res = replay(out, n_rows, seed, OWN if k is None else k, workers, cheap=True, log=log)
        seen.add(res["arithmetic"]["kernel"])
        ok = sum(d is None for _, d, _ in res["rows"])
        first = next((f"{r['line']}: {_difference_text(d)}" for r, d, _ in res["rows"] if d), None)
        rel, column = max((w for _, _, w in res["rows"]), key=lambda w: w[0])
        tried.append(dict(kernel=res["arithmetic"]["kernel"], requested=k, replayed=ok,
                          of=len(res["rows"]), first_difference=first,
                          worst_relative_difference=rel, worst_column=column))
        for r, d, _ in res["rows"]:
            if d is None:
                by_row.setdefault(r["line"], res["arithmetic"]["kernel"])
        if log:
            log(f"{out}: under {arithmetic.words(res['arithmetic'])}: {ok} of {len(res['rows'])}")
        if ok == len(res["rows"]):
            found = {k: v for k, v in res["arithmetic"].items() if k in arithmetic.DECIDING}
            break
    closest = min(tried, key=lambda x: x["worst_relative_difference"])
    finding = dict(found=found, tried=tried, rows=[r["line"] for r, _, _ in res["rows"]],
                   closest=None if found else {k: closest[k] for k in (
                       "kernel", "worst_relative_difference", "worst_column")},
                   rows_by_kernel=None if found else {r["line"]: by_row.get(r["line"])
                                                      for r, _, _ in res["rows"]},
                   command=f"python -m studies.replay {out} --find --rows {n_rows} --seed {seed}",
                   cpu=arithmetic.cpu_model())
    cli.write_json(cli.claim_output(os.path.join(out, "arithmetic.json"), "replay",
                                    "the finding"), finding)
    return finding


def _finding_row(out):
    """One line of the table of findings: the folder, the kernel that replays its rows (or that
    none does, with the first difference), and what it was tried on."""
    path = os.path.join(out, "arithmetic.json")
    if not os.path.lexists(path):                 # a FIFO there: read_finding refuses it
        return f"| {out} | not looked for | - | - |"
    f = read_finding(path)
    tries = "; ".join(f"{t['kernel']}: {t['replayed']} of {t['of']}" for t in f["tried"])
    if f["found"]:
        return (f"| {out} | {f['found']['blas']} {f['found']['blas_version']} "
                f"{f['found']['kernel']}, {f['found']['dtype']} | {tries} | {f['cpu']} |")
    rows = f.get("rows_by_kernel") or {}
    if rows and all(rows.values()):                   # each row replays, under its own kernel
        mixed = "; ".join(f"{line.split('/')[-1]}: {k}" for line, k in rows.items())
        return f"| {out} | rows of two kernels ({mixed}) | {tries} | {f['cpu']} |"
    c = f.get("closest")
    near = (f"closest: {c['kernel']}, worst relative difference "
            f"{c['worst_relative_difference']:.2g} in {c['worst_column']}" if c else "-")
    return f"| {out} | none of the kernels tried exactly ({near}) | {tries} | {f['cpu']} |"


def findings_table(folders):
    """The table of the folders' findings (their arithmetic.json; nothing is trained)."""
    harness.need(isinstance(folders, (list, tuple)) and folders, "folders", folders,
                    "a non-empty list of study folders")
    folders = [harness.check_path("folders", f, "a study folder", folder=True) for f in folders]
    return "\n".join(["| folder | the arithmetic that replays its rows | rows replayed, by kernel "
                      "tried | tried on |", "|---|---|---|---|"] + [_finding_row(f) for f in
                                                                    folders]) + "\n"


# ---------------------------------------------------------------- the command line ------------

def _parser():
    ap = OneLineParser(prog="studies.replay", description=(
        "Train a few of a folder's rows again with its recorded options and _compare every "
        "recorded column exactly: do they replay bit for bit here?"))
    ap.add_argument("folders", nargs="+", metavar="FOLDER", help="a study folder (sweep.json, "
                    "steps.json or plan.json in it)")
    ap.add_argument("--rows", type=integer(1), default=5, help="rows to draw, spread over the "
                    "folder's cells (default %(default)s)")
    ap.add_argument("--seed", type=integer(0), default=0, help="which rows (default %(default)s)")
    ap.add_argument("--kernel", choices=sorted(arithmetic.KERNEL_FLAGS), help="OpenBLAS's "
                    "kernel for the workers (OPENBLAS_CORETYPE); only one this CPU can run")
    ap.add_argument("--workers", type=integer(1), default=1, help="worker processes")
    ap.add_argument("--find", action="store_true", help="try every kernel this CPU can run "
                    "until one replays the rows drawn (from the smallest T); write "
                    "FOLDER/arithmetic.json")
    ap.add_argument("--table", metavar="FILE", help="no training: write the table of the "
                    "folders' findings (their arithmetic.json) into FILE")
    return ap


def main(argv=None):
    ap = _parser()
    a = ap.parse_args(harness.check_argv(argv))
    for out in a.folders:
        if not os.path.isdir(out):
            ap.error(f"{out} is not a folder")
    if a.kernel and a.kernel not in arithmetic.kernels_here():
        ap.error(f"--kernel {a.kernel} cannot run on this processor (it needs "
                 f"{', '.join(sorted(arithmetic.KERNEL_FLAGS[a.kernel]))}); it can run "
                 f"{', '.join(arithmetic.kernels_here()) or 'no kernel this command knows'}")
    if a.table:
        try:
            # a folder's arithmetic.md may sit beside its runs (its page quotes it); its
            # table.md is its own report, never the findings (harness.FOLDERS_OWN)
            harness.check_distinct(a.folders)
            harness.claim_outputs([(a.table, "table", "--table")], [os.path.join(
                f, "arithmetic.json") for f in a.folders])
        except ValueError as e:
            ap.error(str(e))
        try:
            table = findings_table(a.folders)
        except ValueError as e:
            ap.error(str(e))
        cli.write_text(a.table, table)
        print(f"table: {a.table}")
        return 0
    code = 0
    for out in a.folders:
        try:
            if a.find:
                f = find(out, a.rows, a.seed, a.workers)
                print(f"{out}: " + (f"replays under {arithmetic.words(dict(f['found'], threads=1))}"
                                    if f["found"] else _finding_row(out).split(" | ")[1]))
                continue
            res = replay(out, a.rows, a.seed, a.kernel, a.workers)
        except ValueError as e:
            ap.error(str(e))
        print(summary(out, res))
        code = code or int(any(d is not None for _, d, _ in res["rows"]))
    return code


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.replay", main))
