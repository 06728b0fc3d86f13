"""sweep.py: the paper's experiment, the critical sample size m*(T) (Edelman et al. 2022, Section 5).

    python sweep.py --preset paper         T = 100..1100: the paper's figure
    python sweep.py --preset extended      T = 10..3000, log-spaced
    python sweep.py --help                 every option
    python sweep.py bench                  time per training step, GFLOP/s beside numpy's matmul

For each T and seed, training runs (train.train_run) at training-set sizes m on a grid say whether
the model reaches test accuracy >= 0.99; a search per seed picks the m to run. Every run is one CSV
row, written as it finishes, so an interrupted sweep loses nothing and resumes where it stopped.

The file reads top to bottom: the paper's numbers and the presets, the m grid and the searches,
the statistic m*(T), runs on disk, running the searches on a process pool, tables and plots, the
bench, the command line.
"""
import argparse
import csv
import glob
import json
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

if __name__ == "__main__":
    # One BLAS thread per process (see train.py): the pool of worker processes is the parallelism.
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np

import attn
import train
from theory import fit_line
from train import BadValue, OneLineParser, integer, number

# ---------------------------------------------------------------- the paper's figure ----------
# For each T, the critical sample size m*(T) is the smallest m on the grid at which at least half
# of the seeds reach test accuracy >= 0.99 on fresh samples. Each seed fixes S, the data stream
# (the training set for m is the first m samples of the seed's stream, so larger m only adds
# samples), the test set and the init.

PAPER_MSTAR = {100: 50.0, 150: 52.8, 200: 57.7, 250: 56.0, 300: 69.2, 350: 61.0, 400: 79.5,
               450: 82.4, 500: 80.4, 550: 85.2, 600: 94.1, 650: 96.7, 700: 88.9, 750: 101.4,
               800: 99.7, 900: 108.4, 1000: 111.0, 1100: 113.4}  # read off the paper's figure
PAPER_BAR = {100: "48.7-51.3", 150: "48.3-57.3", 200: "53.3-62.1", 250: "51.1-60.9",
             300: "61.7-76.7", 350: "54.3-67.7", 400: "74.8-84.3", 450: "76.7-88.1",
             500: "71.9-89.0", 550: "77.6-92.8", 600: "84.2-104.0", 650: "81.8-111.6",
             700: "79.2-98.7", 750: "90.8-112.0", 800: "87.1-112.4", 900: "104.8-112.0",
             1000: "105.8-116.2", 1100: "107.8-119.1"}             # the figure's error bars

PRESETS = {
    "paper": dict(T=[100, 300, 500, 700, 900, 1100], seeds=10),
    "extended": dict(T=[10, 20, 50, 100, 200, 500, 1000, 2000, 3000], seeds=10,
                     grid_max={"transformer": 1500}),
    "smoke": dict(T=[8, 16], seeds=2, steps=150, n_test=500,
                  grid_max={"transformer": 64, "mlp": 64}),
}
ROW_FIELDS = ("model", "task", "s", "T", "m", "seed", "test_acc", "train_acc", "success",
              "attn_on_S", "steps", "seconds")


def m_grid(lo, hi, ratio=1.05):
    """Integers from lo to hi, each about `ratio` times the last (every integer while that is
    finer): the candidate training-set sizes."""
    g, m = [], float(lo)
    while round(m) <= hi:
        if not g or round(m) > g[-1]:
            g.append(int(round(m)))
        m = max(m * ratio, m + 1)
    return g


def bisect_search(grid):
    """Search for the smallest grid m at which a run succeeds, assuming success is monotone in m.

    A generator: it yields the next m to run and is sent back whether that run succeeded; it
    returns the smallest successful m, or None when even the largest fails. About
    log2(len(grid)) + 1 runs instead of len(grid).
    """
    lo, hi = -1, len(grid)           # grid[lo] fails (virtually), grid[hi] succeeds (virtually)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (yield grid[mid]):
            hi = mid
        else:
            lo = mid
    return grid[hi] if hi < len(grid) else None


def grid_search(grid):
    """Same protocol as bisect_search, but every grid m is run; returns the smallest success."""
    first = None
    for m in grid:
        if (yield m) and first is None:
            first = m
    return first


SEARCHES = {"bisect": bisect_search, "grid": grid_search}


def replay(gen, saved, answer=None):
    """Drive a search generator over saved runs (saved[m] -> success), first sending `answer` to
    its pending question (None: start it). -> ("done", its answer) or ("run", the next m to run).
    The one place where saved runs are replayed: resuming a sweep and reading its results."""
    try:
        m = next(gen) if answer is None else gen.send(bool(answer))
        while m in saved:
            m = gen.send(bool(saved[m]))
    except StopIteration as stop:
        return "done", stop.value
    return "run", m


def seed_outcome(grid, search, results):
    """One seed's search replayed over its saved runs {m: success}: ("done", critical m, or inf
    when even the largest m failed) or ("unfinished", None) when the search still needs a run."""
    state, value = replay(SEARCHES[search](grid), results)
    if state == "run":
        return "unfinished", None
    return "done", (np.inf if value is None else float(value))


def critical_sizes(rows, grid_by_model, search="bisect"):
    """Per (model, T): each seed's critical m, m*(T) by the majority rule, and per-seed stats.

    A seed's critical m is its search's answer, replayed from the saved runs: the smallest grid m
    that succeeded (inf when even the largest failed: "above grid"). Seeds whose search is not
    finished (an interrupted sweep, a missing shard) are counted apart, never as "above grid".
    m*(T) is the smallest grid m at which at least half of the finished seeds succeed: counted
    at m itself when the whole grid was run (--search grid), and as #{seeds: critical <= m} after
    bisection, which takes success to be monotone in m. Real runs are not perfectly monotone
    (a seed can fail above its first success), so the two can differ.
    """
    by = {}
    for r in rows:
        seeds = by.setdefault((r["model"], int(r["T"])), {})
        seeds.setdefault(int(r["seed"]), {})[int(r["m"])] = r["success"] in (True, "1", 1)
    out = {}
    for (model, T), seeds in sorted(by.items()):
        grid = grid_by_model[model]
        outcomes = [seed_outcome(grid, search, res) for res in seeds.values()]
        crit = np.array([c for state, c in outcomes if state == "done"], dtype=float)
        n = len(crit)
        if search == "grid":        # the definition itself: count the seeds that succeed AT m
            done = [res for res, (state, _) in zip(seeds.values(), outcomes) if state == "done"]
            mstar = next((m for m in grid if n and sum(res[m] for res in done) >= n / 2), np.inf)
        else:                       # bisection: each seed's answer, success taken as monotone
            mstar = next((m for m in grid if n and np.sum(crit <= m) >= n / 2), np.inf)
        finite = crit[np.isfinite(crit)]
        out[(model, T)] = dict(model=model, T=T, n_seeds=n, m_star=mstar,
                               unfinished=len(outcomes) - n,
                               mean=float(finite.mean()) if len(finite) else np.inf,
                               std=float(finite.std(ddof=1)) if len(finite) > 1 else 0.0,
                               lo=float(finite.min()) if len(finite) else np.inf,
                               hi=float(finite.max()) if len(finite) else np.inf,
                               censored=int(n - len(finite)), per_seed=crit.tolist())
    return out



def read_rows(paths):
    """The finished runs in CSV files; a torn last line (a run killed mid-write) is skipped."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        for r in csv.DictReader(complete.splitlines()):
            if None in r.values() or "" in (r.get("seconds"), r.get("success")):
                continue
            r["success"] = r["success"] == "1"
            rows.append(r)
    return rows


def drop_torn_tail(path):
    """Cut a CSV back to its last complete line, so appending cannot glue onto a torn row."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        text = f.read()
        if text and not text.endswith(b"\n"):
            f.truncate(text.rfind(b"\n") + 1)


def sweep_table(stats, paper_comparable, log=print):
    """The printed table, ours beside the paper's at the shared T (only when our protocol asks
    the paper's question: 3-sparse AND, bar 0.99), then fits of m* against ln T and T."""
    lines = ["| model | T | m* (ours) | per-seed critical m: mean +- std [min, max] | seeds "
             "| m* (paper) | paper's bar |", "|---|---|---|---|---|---|---|"]
    for (model, T), st in stats.items():
        ms = "n/a" if not np.isfinite(st["m_star"]) else f"{st['m_star']:.0f}"
        notes = ([f"{st['censored']} above grid"] if st["censored"] else []) + \
                ([f"{st['unfinished']} unfinished"] if st["unfinished"] else [])
        show = paper_comparable and model == "transformer"
        lines.append(f"| {model} | {T} | {ms} | {st['mean']:.1f} +- {st['std']:.1f} "
                     f"[{st['lo']:.0f}, {st['hi']:.0f}]"
                     f"{' (' + ', '.join(notes) + ')' if notes else ''} | {st['n_seeds']} | "
                     f"{PAPER_MSTAR.get(T, '') if show else ''} | "
                     f"{PAPER_BAR.get(T, '') if show else ''} |")
    fits = []
    for model in sorted({k[0] for k in stats}):
        pts = [(T, st["m_star"]) for (mo, T), st in stats.items()
               if mo == model and np.isfinite(st["m_star"])]
        if len(pts) >= 3:
            T_, m_ = zip(*pts)
            b, a, r2 = fit_line(np.log(T_), m_)
            e, c, q2 = fit_line(T_, m_)
            fits.append(f"{model}: m* ~ {a:.1f} + {b:.1f} ln T (R^2 {r2:.3f});  "
                        f"m* ~ {c:.1f} + {e:.4f} T (R^2 {q2:.3f})  over T in {min(T_)}..{max(T_)}")
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        b, a, r2 = fit_line(np.log(Tp), [PAPER_MSTAR[t] for t in Tp])
        e, c, q2 = fit_line(Tp, [PAPER_MSTAR[t] for t in Tp])
        fits.append(f"paper: m* ~ {a:.1f} + {b:.1f} ln T (R^2 {r2:.3f});  m* ~ {c:.1f} + "
                    f"{e:.4f} T (R^2 {q2:.3f})  over T in 100..1100")
    for line in lines + [""] + fits:
        log(line)
    return "\n".join(lines + [""] + ["- " + f for f in fits]) + "\n"


def sweep_plot(stats, path, title, paper_comparable):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is not installed (pip install matplotlib, then rerun with "
              "--report to draw it from the saved runs)")
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for model, mark in (("transformer", "o-"), ("mlp", "s--")):
        pts = sorted((T, st) for (mo, T), st in stats.items() if mo == model)
        if not pts:
            continue
        T_ = [T for T, _ in pts]
        ax.errorbar(T_, [st["mean"] for _, st in pts], yerr=[st["std"] for _, st in pts],
                    fmt=mark, capsize=3, label=f"{model} (ours): per-seed mean +- std")
        ax.plot(T_, [st["m_star"] for _, st in pts], "x", color="k", ms=7,
                label="m* (ours): half of the seeds succeed" if model == "transformer" else None)
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        ax.errorbar(Tp, [PAPER_MSTAR[t] for t in Tp],
                    yerr=np.abs(np.array([[float(v) for v in PAPER_BAR[t].split("-")]
                                          for t in Tp]).T - [PAPER_MSTAR[t] for t in Tp]),
                    fmt="^:", color="tab:red", capsize=2, label="Transformer, the paper's figure")
    ax.set_xscale("log")
    ax.set_xlabel("T (context length, log scale)")
    ax.set_ylabel("critical sample size m")
    finite = [st["m_star"] for st in stats.values() if np.isfinite(st["m_star"])]
    if finite and max(finite) > 20 * min(finite):       # the MLP beside the Transformer
        ax.set_yscale("log")
        ax.set_ylabel("critical sample size m (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


class RunFailed(Exception):
    pass


def _sweep_worker(runs):
    """A stack of training runs of the sweep, in a worker process: the CSV rows they produce.
    Transformer runs train as one stack (train.train_stack; the sweep stacks only runs with the
    same T and m, whose results are bit for bit those of the runs alone); MLP runs one by one. A
    diverged run is a failed run (test_acc nan), not the end of the sweep."""
    runs = [dict(o, log_every=0) for o in runs]
    if runs[0]["model"] == "transformer":
        results = train.train_stack(runs)
    else:
        results = []
        for o in runs:
            try:
                results.append(train.train_run(o, log=None))
            except train.Diverged:
                results.append(dict(o, test_acc=float("nan"), train_acc=float("nan"),
                                    attn_on_S=float("nan"), seconds=float("nan")))
    return [{k: r[k] for k in ROW_FIELDS if k != "success"} for r in results]


def take_stack(queue, most):
    """Pop from the queue of (job, m) probes the largest group that shares (model, T, m), at most
    `most` probes (one for the MLP): the runs one worker trains as one stack."""
    groups = {}
    for i, ((model, T, _), m) in enumerate(queue):
        groups.setdefault((model, T, m), []).append(i)
    key = max(groups, key=lambda k: len(groups[k]))
    take = groups[key][:most if key[0] == "transformer" else 1]
    probes = [queue[i] for i in take]
    for i in reversed(take):
        queue.pop(i)
    return probes


# train.py's options a sweep shares with every run. Not --model: a sweep takes --models (a list),
# and with abbreviations off, --model is an error rather than a silent prefix of --models.
MODEL_OPTIONS = ("task", "s", "steps", "lr", "wd", "n_test", "d", "heads", "mlp", "dtype")


def sweep_parser():
    ap = OneLineParser(prog="sweep.py", description=(
        "Critical sample size m*(T) of a sparse task (the paper's Section 5 figure). Runs are "
        "saved as they finish, one CSV row each, in OUT/runs*.csv; rerunning the same command "
        "resumes. Shards (--shard i/n) split the (model, T, seed) searches across machines; copy "
        "their CSVs into one OUT and run with --report to merge."))
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper",
                    help="paper: T=100..1100; extended: T=10..3000 (default %(default)s)")
    ap.add_argument("--Ts", type=int_list, help="comma-separated T values (overrides preset)")
    ap.add_argument("--seeds", type=integer(1), help="seeds per T (preset: 10)")
    ap.add_argument("--models", type=model_list, default=["transformer"],
                    help="comma-separated: transformer,mlp (default transformer)")
    ap.add_argument("--search", choices=("bisect", "grid"), default="bisect",
                    help="bisect each seed's critical m on the grid (assumes success is monotone "
                         "in m), or run every grid m (default %(default)s)")
    ap.add_argument("--grid-min", dest="grid_min", type=integer(1), default=8,
                    help="smallest m (default %(default)s)")
    ap.add_argument("--grid-max", dest="grid_max", type=integer(1),
                    help="m at most this (default: transformer 600, 1500 in the extended preset; "
                         "mlp 30*max(T) capped at 20000)")
    ap.add_argument("--grid-ratio", dest="grid_ratio", type=number(0, strict=True), default=1.05,
                    help="ratio of consecutive grid sizes, in (1, 10] (default %(default)s)")
    ap.add_argument("--bar", type=number(0, strict=True), default=0.99,
                    help="success: test accuracy >= bar, in (0, 1] (default %(default)s)")
    ap.add_argument("--out", default=None, help="results folder (default results/PRESET)")
    ap.add_argument("--shard", type=shard_spec, default=(0, 1), help="i/n: run share i of n")
    ap.add_argument("--workers", type=integer(1), default=os.cpu_count() or 1,
                    help="processes (default: the number of cores, %(default)s)")
    ap.add_argument("--report", action="store_true", help="only merge OUT/runs*.csv and report")
    ap.add_argument("--stack", type=integer(1), default=16,
                    help="Transformer runs with the same T and m trained as one stack by one "
                         "worker (default %(default)s; 1 = one run at a time)")
    train.add_options(ap, MODEL_OPTIONS, defaults=dict(steps=None, n_test=None))
    return ap


def main_sweep(argv):
    ap = sweep_parser()
    a = ap.parse_args(argv)
    preset = PRESETS[a.preset]
    Ts = a.Ts or preset["T"]
    n_seeds = a.seeds or preset["seeds"]
    for key in ("steps", "n_test"):
        if getattr(a, key) is None:
            setattr(a, key, preset.get(key, train.DEFAULTS[key]))
    if not (0 < a.bar <= 1):
        ap.error(f"--bar must be in (0, 1], got {a.bar}")
    if not 1 < a.grid_ratio <= 10:
        ap.error(f"--grid-ratio must be in (1, 10], got {a.grid_ratio}")
    problem = train.check_options(dict(vars(a), T=min(Ts)))
    if problem:
        ap.error(problem.replace("--T", "the smallest T"))
    grids = {}
    for model in a.models:
        hi = a.grid_max or preset.get("grid_max", {}).get(model) or (
            600 if model == "transformer" else min(20000, 30 * max(Ts)))
        if hi < a.grid_min:
            ap.error(f"--grid-max {hi} is below --grid-min {a.grid_min}")
        grids[model] = m_grid(a.grid_min, hi, a.grid_ratio)
        try:
            train.check_run_memory(dict(train.DEFAULTS, T=max(Ts), m=grids[model][-1], n_test=a.n_test,
                                  dtype=a.dtype))
        except ValueError as e:
            ap.error(str(e))
    base = dict(task=a.task, s=a.s, steps=a.steps, lr=a.lr, wd=a.wd, n_test=a.n_test, d=a.d,
                heads=a.heads, mlp=a.mlp, dtype=a.dtype)
    out = a.out or os.path.join("results", a.preset)
    if os.path.exists(out) and not os.path.isdir(out):
        ap.error(f"--out {out} is a file; give a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        ap.error(f"--out {out}: cannot create the folder ({e.strerror})")
    meta_path = os.path.join(out, "sweep.json")
    meta = dict(options=base, bar=a.bar, search=a.search, grids=grids)
    if os.path.exists(meta_path):                      # the folder's sweep must be this one
        try:
            with open(meta_path) as f:
                old = json.load(f)
            old_grids = dict(old["grids"])
        except (ValueError, KeyError, TypeError):
            ap.error(f"{meta_path} is not a sweep description (damaged?); use another --out")
        for key in ("options", "bar", "search"):
            if old.get(key) != meta[key]:
                ap.error(f"{out} holds a sweep with other {key} ({old.get(key)}); "
                         f"use another --out or the same options")
        for model, grid in grids.items():
            if model in old_grids and old_grids[model] != grid:
                ap.error(f"{out} holds a {model} sweep on another m grid; use another --out or "
                         f"the same --grid-min/--grid-max/--grid-ratio")
        meta["grids"] = dict(old_grids, **grids)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    i, n = a.shard
    csv_path = os.path.join(out, "runs.csv" if n == 1 else f"runs-shard-{i}-of-{n}.csv")

    def load_done():
        return {(r["model"], int(r["T"]), int(r["seed"]), int(r["m"])): r
                for r in read_rows(sorted(glob.glob(os.path.join(out, "runs*.csv"))))}
    done = load_done()
    if not a.report:
        code = run_searches(a, Ts, n_seeds, grids, base, csv_path, done, (i, n))
        if code:
            return code
        done = load_done()
    rows = [r for (model, T, seed, m), r in done.items()
            if model in a.models and T in Ts and seed < n_seeds]
    if not rows:
        print(f"no finished runs in {out} for models {a.models}, T in {Ts}, seeds < {n_seeds}")
        return 0
    stats = critical_sizes(rows, meta["grids"], a.search)
    comparable = a.task == "and" and a.s == 3 and a.bar == 0.99
    what = f"{a.s}-sparse {a.task.upper() if a.task in ('and', 'or') else a.task}"
    print(f"\ncritical sample size of {what}, success = test accuracy >= {a.bar} on {a.n_test} "
          f"fresh samples after {a.steps} steps, {a.search} search on a grid of ratio "
          f"{a.grid_ratio}:")
    table = sweep_table(stats, comparable)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "critical.json"), "w") as f:
        json.dump([dict(st, m_star=None if not np.isfinite(st["m_star"]) else st["m_star"])
                   for st in stats.values()], f, indent=1, default=float)
    png = sweep_plot(stats, os.path.join(out, "mstar.png"),
                     f"{what}: samples to reach test accuracy >= {a.bar}", comparable)
    print(f"saved {out}/table.md, {out}/critical.json" + (f", {png}" if png else ""))
    return 0


def int_list(text):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1, got {text!r}")
    return sorted(set(vals))


def model_list(text):
    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in ("transformer", "mlp")]
    if bad or not vals:
        raise argparse.ArgumentTypeError(f"allowed: transformer, mlp; got {text!r}")
    return sorted(set(vals))                 # one order everywhere: shards split the same list


def shard_spec(text):
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must look like i/n (e.g. 0/4), got {text!r}")
    if n < 1 or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"needs 0 <= i < n, got {text!r}")
    return i, n


def run_searches(a, Ts, n_seeds, grids, base, csv_path, done, shard):
    """Drive every (model, T, seed) search of this shard; run probes on a process pool, write
    each finished run as a CSV row at once (so an interrupted sweep loses nothing finished)."""
    jobs = [(model, T, seed) for model in a.models for T in Ts for seed in range(n_seeds)]
    jobs = [j for k, j in enumerate(jobs) if k % shard[1] == shard[0]]
    search = SEARCHES[a.search]
    saved = {job: {} for job in jobs}             # job -> {m: success}, the runs on disk
    for (model, T, seed, m), r in done.items():
        if (model, T, seed) in saved:
            saved[(model, T, seed)][m] = bool(r["success"])
    gens, pending, t0, n_run = {}, {}, time.perf_counter(), 0
    drop_torn_tail(csv_path)
    new_file = not os.path.exists(csv_path) or os.path.getsize(csv_path) == 0
    fh = open(csv_path, "a", newline="")
    writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS)
    if new_file:
        writer.writeheader()
        fh.flush()
    per_search = (len(next(iter(grids.values()))) if a.search == "grid"
                  else int(np.ceil(np.log2(max(len(g) for g in grids.values()) + 1))))
    print(f"sweep: {len(jobs)} searches (model, T, seed) in this shard, about {per_search} runs "
          f"each; {len(done)} runs already saved; writing {csv_path}")
    if a.workers > 1:                       # one BLAS thread per process: the pool is the parallelism
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        pool = ProcessPoolExecutor(a.workers, mp_context=mp.get_context("spawn"))
    else:
        pool = None

    def advance(job, answer):
        """Feed the search its last answer; return the next m to probe, or None when done."""
        state, m = replay(gens[job], saved[job], answer)
        return m if state == "run" else None

    def record(job, m, row):
        nonlocal n_run
        row = dict(row, success=int(row["test_acc"] >= a.bar))   # nan (diverged) fails
        writer.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())
        done[(job[0], job[1], job[2], m)] = dict(row, success=bool(row["success"]))
        saved[job][m] = bool(row["success"])
        n_run += 1
        el = time.perf_counter() - t0
        print(f"[{n_run:4d}] {job[0]:11s} T={job[1]:<5d} seed={job[2]:<3d} m={m:<6d} "
              f"test acc {row['test_acc']:.4f} {'ok  ' if row['success'] else 'fail'} "
              f"{row['seconds']:6.1f}s   elapsed {el / 60:5.1f} min", flush=True)
        return bool(row["success"])

    def finish(probes, rows):
        """Record a stack's rows and queue each search's next probe."""
        for (job, m), row in zip(probes, rows):
            m2 = advance(job, record(job, m, row))
            if m2 is not None:
                queue.append((job, m2))

    try:
        queue = []
        for job in jobs:
            gens[job] = search(grids[job[0]])
            m = advance(job, None)
            if m is not None:
                queue.append((job, m))
        while queue or pending:
            while queue and (pool is None or len(pending) < a.workers):
                probes = take_stack(queue, a.stack)
                runs = [dict(base, model=job[0], T=job[1], seed=job[2], m=m) for job, m in probes]
                if pool is None:
                    finish(probes, _sweep_worker(runs))
                else:
                    pending[pool.submit(_sweep_worker, runs)] = probes
            if pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: f.exception() is not None):
                    probes = pending.pop(fut)
                    if fut.exception() is not None:      # record the others first, then stop
                        (model, T, seed), m = probes[0]
                        raise RunFailed(f"run {model} T={T} seed={seed} m={m} failed: "
                                        f"{type(fut.exception()).__name__}: {fut.exception()}")
                    finish(probes, fut.result())
    except KeyboardInterrupt:
        print(f"\ninterrupted: {n_run} runs of this session are saved in {csv_path}; "
              f"rerun the same command to resume", file=sys.stderr)
        return 130
    except RunFailed as e:
        print(f"sweep.py: {e}; the {n_run} runs finished before it are saved in "
              f"{csv_path}", file=sys.stderr)
        return 1
    finally:
        fh.close()
        if pool:
            pool.shutdown(wait=False, cancel_futures=True)
    print(f"sweep: {n_run} runs in {(time.perf_counter() - t0) / 60:.1f} min")
    return 0


# ---------------------------------------------------------------- bench ----------------------

def step_flops(T, B, d, H, k):
    """Matrix-product FLOPs of one training step on the fast path (forward + backward)."""
    R = 2 * T + 1                                      # two versions per position, plus [CLS]
    fwd = (2 * R * d * d + 2 * R * d * H + 2 * d * d       # values, scores rn @ (W_K q), query
           + 2 * B * 2 * T * (H + d)                       # Xb @ [E | E V]
           + 2 * B * d * d + 2 * 2 * B * d * k + 2 * B * d)  # W_O, MLP, readout
    bwd = (4 * R * d * d + 4 * R * d * H + 4 * d * d
           + 2 * B * 2 * T * (H + d)
           + 4 * B * d * d + 2 * 4 * B * d * k + 2 * B * d)
    return fwd + bwd


def matmul_gflops(n, k, m, dtype, reps=20):
    """numpy's own speed on an (n, k) @ (k, m) product, in GFLOP/s (best of reps)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n * k * m / best / 1e9


def time_steps(cfg, B, path, n_steps):
    rng = np.random.default_rng(0)
    p = attn.init_params(cfg, rng)
    dt = np.dtype(cfg["dtype"])
    X = (rng.random((B, cfg["T"])) < 0.8).astype(dt)
    y = rng.integers(0, 2, B).astype(dt)
    state = train.adam_init(p)
    times = []
    for i in range(n_steps + 2):                       # two warm-up steps
        t = time.perf_counter()
        loss, g, _ = attn.loss_and_grads(p, cfg, X, y, path)
        train.adam_step(p, g, state, 1e-3, 1e-4)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


def bench_parser():
    ap = OneLineParser(prog="sweep.py bench", description=(
        "Time one training step (m samples, full batch, the experiment's model) on the fast path "
        "and on the plain [CLS]-row path, per run (x steps), and GFLOP/s of the matrix products "
        "beside numpy's own matmul on this machine."))
    ap.add_argument("--Ts", type=int_list, default=[100, 1000, 3000], help="T values")
    ap.add_argument("--m", type=integer(1), default=100, help="batch (default %(default)s)")
    ap.add_argument("--steps", type=integer(1), default=1000,
                    help="steps per run, for the per-run time (default %(default)s)")
    ap.add_argument("--reference", action="store_true",
                    help="also time the plain [CLS]-row path (slow at large T)")
    ap.add_argument("--throughput", type=int_list, default=[100, 1000],
                    help="T values for the sweep throughput: runs per minute on all cores "
                         "(default 100,1000)")
    ap.add_argument("--stack", type=integer(1), default=16,
                    help="runs per stack for the throughput (default %(default)s)")
    ap.add_argument("--tp-steps", dest="tp_steps", type=integer(1), default=100,
                    help="steps timed per stack; runs/min is scaled to --steps (default "
                         "%(default)s)")
    return ap


# Sweep throughput before stacked runs (commit 02b5d41: one run per task, 2 worker processes of
# one BLAS thread, m = 100, 1000 steps), measured on this 2-core machine on 2026-11-30.
THROUGHPUT_BEFORE = {100: 40.7, 1000: 13.6}


def _throughput_worker(args):
    T, R, steps, seed = args
    base = dict(T=T, m=100, steps=steps, n_test=100, log_every=0)
    t = time.perf_counter()
    train.train_stack([dict(base, seed=seed + r) for r in range(R)])
    return time.perf_counter() - t


def sweep_throughput(T, R, steps, full_steps, workers):
    """Runs of `full_steps` steps per minute when `workers` processes each train a stack of R runs
    (m = 100): timed on `steps` steps and scaled (setup and evaluation included once)."""
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_throughput_worker, [(T, R, 2, 0)] * workers))      # start-up and warm-up
        t = time.perf_counter()
        list(ex.map(_throughput_worker, [(T, R, steps, 10 * i) for i in range(workers)]))
        wall = time.perf_counter() - t
    return 60 * workers * R / (wall * full_steps / steps)


def main_bench(argv):
    ap = bench_parser()
    a = ap.parse_args(argv)
    d, H, k = (train.DEFAULTS[key] for key in ("d", "heads", "mlp"))
    print(f"model d={d} heads={H} mlp={k}; batch m={a.m}; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; numpy {np.__version__}")
    for dtype in ("float32", "float64"):
        sq = matmul_gflops(1024, 1024, 1024, dtype, reps=5)
        print(f"\n{dtype}: numpy matmul 1024^3: {sq:6.1f} GFLOP/s")
        print(f"{'T':>6} {'ms/step':>9} {'s/run':>7} {'GFLOP/s':>8} {'numpy same shape':>17}"
              + (f" {'plain ms/step':>14} {'speed-up':>9}" if a.reference else ""))
        for T in a.Ts:
            cfg = attn.default_config(T=T, d=d, heads=H, mlp=k, dtype=dtype)
            n = max(5, min(100, int(2000 / T)))
            t_fast = time_steps(cfg, a.m, "fast", n)
            gf = step_flops(T, a.m, d, H, k) / t_fast / 1e9
            same = matmul_gflops(2 * T + 1, d, d, dtype)    # the largest per-step product
            line = (f"{T:6d} {1e3 * t_fast:9.2f} {t_fast * a.steps:7.1f} {gf:8.2f} "
                    f"{same:17.1f}")
            if a.reference:
                t_ref = time_steps(cfg, a.m, "cls", 3)
                line += f" {1e3 * t_ref:14.1f} {t_ref / t_fast:8.1f}x"
            print(line, flush=True)
    workers = os.cpu_count() or 1
    print(f"\nsweep throughput, {workers} worker processes, stacks of {a.stack} runs (m = 100, "
          f"{a.steps} steps, float32), runs per minute:")
    print(f"{'T':>6} {'before stacking':>16} {'now':>8} {'ratio':>6}")
    for T in a.throughput:
        now = sweep_throughput(T, a.stack, min(a.tp_steps, a.steps), a.steps, workers)
        old = THROUGHPUT_BEFORE.get(T) if a.steps == 1000 else None
        print(f"{T:6d} {old if old else '':>16} {now:8.1f} "
              f"{f'{now / old:5.1f}x' if old else '':>6}", flush=True)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "bench":
        return main_bench(argv[1:])
    return main_sweep(argv)


if __name__ == "__main__":
    sys.exit(main())
