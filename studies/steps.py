"""steps.py (studies, a command): the computational side of sparse learning: training steps until
success against T. Run from the repository's root:

    python -m studies.steps --task parity --s 2 --out results/parity/s-2  steps to 0.99, T = 10..100
    python -m studies.steps --out DIR --report                             the table and plot again
    python -m studies.steps --out DIR --report --against REF               steps paired with REF's

Statistics are not computation. Sparse parity is statistically cheap (a few times s log T samples
identify S, and Gaussian elimination over GF(2) needs about T), but Barak et al. (2022, "Hidden
progress in deep learning") find that gradient descent needs a number of steps growing like
T^O(s), with a long plateau and then a sudden jump. Here a training set large enough that data is
not the limit (--m; checked by rerunning with twice as many samples) is fixed, and each run counts
the steps until its test accuracy first reaches 0.99, checked every --every steps. A run that does
not get there within --budget steps is censored: counted, never dropped (its steps are "> budget").

Per T: the median steps over seeds with a 95% interval from a bootstrap over seeds (a censored run
is +inf, so the median is finite only while fewer than half are censored), the fit steps ~ a T^k
over the T whose median is finite (each T's seeds resampled on their own: a seed shares nothing
across T, stats.py's design), and beside them the samples the
GF(2) learner needs (hypotheses.gf2_first_full_rank on each seed's stream) and the statistical limit.

Every run is one CSV row of OUT/steps.csv, written as its stack finishes; the same command resumes.
The folder is folder.py's, as a sweep's is: one command at a time under its lock, a torn row cut
away before a resume appends, every row checked by the one validator against itself and steps.json.
OUT/curves.json keeps the test accuracy and loss at every check of seeds 0-2, for the plot of the
plateau and the jump. The optimiser is train.py's (Adam, full batch, the experiment's defaults)
unless options say otherwise; steps.json records every option.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.steps")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import functools
import os
import time
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np

from theory import fit_line

from studies.lib import (arithmetic, folder, folder_write, harness, hypotheses, intervals, limits,
                         provenance, row_kinds, run_options, training)
from studies.lib.cli import OneLineParser, int_list, integer
from studies.lib.intervals import (bound_text, median_ci, resample_medians, seed_resamples,
                                   weighted_percentile_ci)
from studies.lib.workers import STEPS_BAR, run_stack

FIELDS = row_kinds.STEPS_FIELDS       # one CSV row per run (folder.py reads, checks and writes it)


# ---------------------------------------------------------------- one stack of runs -------------


# ---------------------------------------------------------------- the runs on disk --------------


def _check_folder(out, meta, other_arithmetic=False):
    """The folder's steps.json must record the same options and budget, or none yet, and the
    same arithmetic unless other_arithmetic (provenance.check_arithmetic); `meta` becomes the
    merged description (Ts and seeds of every run, every machine), which main writes once the
    folder's rows are read (a refusal changes nothing). -> the arithmetic each new row records
    beside it (folder_write.RowWriter's arithmetic_of), or None."""
    mixed = None
    if os.path.lexists(os.path.join(out, "steps.json")):
        old = folder.read_steps_meta(out)
        for k in ("options", "budget", "every"):
            if old.get(k) != meta[k]:
                raise ValueError(f"{out} holds runs with other {k} ({old.get(k)}, not "
                                 f"{meta[k]}); use another --out or the same options")
        here = meta["machines"][0]
        provenance.check_arithmetic(out, old, here, other_arithmetic)
        was = provenance.recorded_arithmetic(out, old)
        mixed = (provenance.arithmetic_id(here) if was is not None
                 and arithmetic.differences(was, here) else None)
        if mixed:                     # its record beside the rows: free or ours, checked now
            folder_write.arithmetic_record(os.path.join(out, "steps.csv"))
        meta["Ts"] = sorted(set(old["Ts"]) | set(meta["Ts"]))
        meta["seeds"] = max(old["seeds"], meta["seeds"])
        meta["machines"] = old.get("machines", []) + [
            m for m in meta["machines"] if m not in old.get("machines", [])]
    return mixed


def _stacks(a, base, todo):
    """The (T, seed) runs `todo` as stacks over seeds of one T, at most --stack runs each."""
    stacks = []
    for T in a.Ts:
        seeds = [sd for TT, sd in todo if TT == T]
        R = max(1, min(a.stack, len(seeds)))
        stacks += [[dict(base, T=T, seed=sd) for sd in seeds[i:i + R]]
                   for i in range(0, len(seeds), R)]
    return stacks


def _run_all(a, out, base, done=None, curves=None):
    """Every (T, seed) not yet in OUT/steps.csv, as stacks over seeds on a pool of workers (in this
    process when --workers is 1, as in a sweep); each stack's rows are written as it finishes
    (folder_write.RowWriter: a torn last line cut away first, every write flushed and synced). done,
    curves: the folder's runs and curves when the caller has read them (folder.read_done,
    read_curves)."""
    path = os.path.join(out, "steps.csv")
    done = folder.read_done(path) if done is None else done
    curves = folder.read_curves(out) if curves is None else curves
    todo = [(T, seed) for T in a.Ts for seed in range(a.seeds) if (T, seed) not in done]
    stacks = _stacks(a, base, todo)
    try:                     # a CSV that is a link, or of another header's: one line
        writer = folder_write.RowWriter(path, row_kinds.STEPS_ROWS,
                                        getattr(a, "arithmetic_of", None))
    except ValueError as e:
        print(f"studies.steps: error: {e}", file=sys.stderr)
        return 2
    print(f"steps: {len(todo)} runs to do in {len(stacks)} stacks, {len(done)} saved; writing "
          f"{writer.path}", flush=True)
    curves_path = os.path.join(out, "curves.json")
    t0, n = time.perf_counter(), 0
    pool = harness.worker_pool(a.workers) if a.workers > 1 else None    # 1: in this process
    try:
        pending = {}
        while stacks or pending:
            while pool and stacks and len(pending) < a.workers:
                runs = stacks.pop(0)
                pending[pool.submit(run_stack, runs, a.every)] = runs
            if pool:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    del pending[fut]
                results = [fut.result() for fut in finished]
            else:
                results = [run_stack(stacks.pop(0), a.every)]
            for rows, c in results:
                for row in rows:
                    writer.write(row)
                curves.update(c)
                cli.write_json(curves_path, curves)
                n += len(rows)
                r = rows[0]
                print(f"[{n:4d}/{len(todo)}] T={r['T']:<5d} seeds "
                      f"{','.join(str(x['seed']) for x in rows)}: steps to {STEPS_BAR} "
                      f"{[x['steps_to_bar'] or '>' + str(x['budget']) for x in rows]}  "
                      f"elapsed {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    except (KeyboardInterrupt, cli.Terminated) as e:   # SIGTERM: one_line_errors raises it
        print(f"\n{'terminated (SIGTERM)' if isinstance(e, cli.Terminated) else 'interrupted'}: "
              f"{n} runs of this session are saved in {writer.path}; rerun the same command to "
              f"resume", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    finally:
        if pool:                    # running workers are stopped, not left to run for nobody
            pool.stop()
        writer.close()
    return 0


# ---------------------------------------------------------------- the report -------------------

def _median_steps(rows, n_boot=None, seed=0, exact=True):
    """Median steps over the seeds of one T (censored = inf) with its 95% seed-bootstrap interval
    computed exactly from order statistics (intervals.median_ci: no resampling error), and the median
    of every resample of the seeds with its probability (intervals.seed_resamples: all of them where
    they can be listed and `exact`, else n_boot drawn from intervals.stratum_rng(T, seed): the same
    at one T, independent across T) -> (median, lo, hi, boot [K], weights [K]), for the paired
    ratios at one T (exact) and the fit across T (drawn)."""
    v = np.array([np.inf if r["censored"] else r["steps_to_bar"] for r in rows], float)
    lo, hi = median_ci(v)
    C, w = seed_resamples(v.size, n_boot, intervals.stratum_rng(rows[0]["T"], seed), exact=exact)
    return float(np.median(v)), lo, hi, resample_medians(v, C), w


def _paired_medians(rows, ref, n_boot=None, seed=0, budget=None):
    """Median steps of `rows` over those of `ref` (one T each) on the seeds both hold, with a
    paired 95% seed-bootstrap interval: replicate i draws the same seeds for both, so the interval
    carries the difference between the two settings, not the seeds' luck. Censored = inf, and with
    `budget` a run that needed more steps counts as censored too (two budgets compared at the
    smaller). The ratio is None where both medians are inf (undefined), and so are replicates
    whose ratio is undefined: they are dropped. -> (median, median of ref, ratio, lo, hi,
    n_seeds)."""
    def censored_at_budget(r):
        late = budget is not None and r["steps_to_bar"] is not None and r["steps_to_bar"] > budget
        return dict(r, censored=1) if late else r
    here, there = {r["seed"]: r for r in rows}, {r["seed"]: r for r in ref}
    seeds = sorted(set(here) & set(there))
    if not seeds:
        raise ValueError("the two folders share no seed at this T: nothing to pair")
    # the same bootstrap seed over the same seed list: replicate i resamples the same seeds in both
    (ma, _, _, ba, w), (mb, _, _, bb, _) = (
        _median_steps([censored_at_budget(side[sd]) for sd in seeds], n_boot, seed)
        for side in (here, there))
    with np.errstate(invalid="ignore"):
        ratios, point = ba / bb, ma / mb
    keep = ~np.isnan(ratios)
    lo, hi = (weighted_percentile_ci(ratios[keep], w[keep]) if keep.any() and not np.isnan(point)
              else (None, None))
    return ma, mb, None if np.isnan(point) else float(point), lo, hi, len(seeds)


def _against_table(out, ref):
    """OUT/against.md: per T both folders hold, the median steps of each on their shared seeds and
    the ratio OUT / REF with its paired interval (paired_medians; where the budgets differ, both
    are censored at the smaller), then the settings in which the two differ (the check that
    twice the training samples leave the steps unchanged)."""
    path = os.path.join(out, "against.md")
    cli.claim_output(path, "table", "the comparison table")
    ma_, mb_ = folder.read_steps_meta(out), folder.read_steps_meta(ref)
    da, db = (folder.read_done(os.path.join(f, "steps.csv"), m) for f, m in ((out, ma_), (ref, mb_)))
    settings = lambda m: dict(m["options"], budget=m.get("budget"), every=m.get("every"))
    oa, ob = settings(ma_), settings(mb_)
    differ = [f"{k} {oa.get(k)} here, {ob.get(k)} there" for k in folder.STEPS_OPTIONS + ("budget", "every")
              if oa.get(k) != ob.get(k)]
    budgets = [b for b in (oa["budget"], ob["budget"]) if isinstance(b, int)]
    budget = min(budgets) if len(budgets) == 2 and budgets[0] != budgets[1] else None
    Ts = sorted({T for T, _ in da} & {T for T, _ in db})
    if not Ts:
        raise ValueError(f"{out} and {ref} share no T: nothing to compare")
    show = lambda v: "inf" if not np.isfinite(v) else f"{v:.0f}"
    lines = ["| T | paired seeds | median steps here | median steps there | ratio here / there "
             "[paired 95% CI] |", "|---|---|---|---|---|"]
    for T in Ts:
        try:
            ma, mb, r, lo, hi, n = _paired_medians([v for (TT, _), v in da.items() if TT == T],
                                                  [v for (TT, _), v in db.items() if TT == T],
                                                  budget=budget)
        except ValueError as e:
            raise ValueError(f"T = {T}: {e}") from None
        ratio = "undefined (both above the budget)" if r is None else (
            f"{r:.2f} [{bound_text(lo, 2)}, {bound_text(hi, 2)}]")
        lines.append(f"| {T} | {n} | {show(ma)} | {show(mb)} | {ratio} |")
    lines += ["", f"- here: {out}; there: {ref}; settings that differ: "
                  f"{'; '.join(differ) or 'none'}"
              + (f"; both censored at the smaller budget, {budget} steps" if budget else "")]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    cli.write_text(path, text)
    print(f"saved {path}")


@functools.lru_cache(maxsize=None)
def _gf2_samples(task, s, T, n_seeds=20):
    """Median over n_seeds draws of the samples the GF(2) learner needs (hypotheses.gf2_sample_need);
    None for a task that is not parity. Its draws are seeded (0..n_seeds-1): the answer depends on
    the arguments alone, kept for the life of the process (a report's later T, a second report)."""
    if task != "parity":
        return None
    return float(np.median([hypotheses.gf2_sample_need(T, s, np.random.default_rng(seed))[0]
                            for seed in range(n_seeds)]))


def _steps_report(out, meta):
    """OUT/table.md (per T: runs, censored, median steps [95% CI], the GF(2) samples and the
    statistical limit; then the fit steps ~ a T^k) and, with matplotlib, OUT/steps.png. Neither
    replaces a file that is not a table or a plot (cli.claim_outputs)."""
    cli.claim_outputs([(os.path.join(out, "table.md"), "table", "the table"),
                       (os.path.join(out, "steps.png"), "plot", "the plot")])
    done = folder.read_done(os.path.join(out, "steps.csv"), meta)
    if not done:
        raise ValueError(f"{os.path.join(out, 'steps.csv')} holds no finished runs: nothing to "
                         f"report (run the folder's command without --report)")
    curves = folder.read_curves(out)              # damaged: one line now, not after the table
    o = meta["options"]
    Ts = sorted({T for T, _ in done})
    lims = limits.statistical_limits(o["task"], o["s"], Ts,
                                     cache=os.path.join(out, "limits.json"))
    lines = [f"| T | runs | censored (> budget) | median steps to {STEPS_BAR} [95% CI] | GF(2) samples "
             f"(median) | statistical limit [5%, 95%] |", "|---|---|---|---|---|---|"]
    med = {}
    for T in Ts:
        rows = [r for (TT, _), r in sorted(done.items()) if TT == T]
        m, lo, hi, boot, w = _median_steps(rows, exact=False)   # drawn: T on its own, for the fit
        med[T] = (m, boot, w)
        show = lambda v: "inf" if not np.isfinite(v) else f"{v:.0f}"
        g = _gf2_samples(o["task"], o["s"], T)
        lines.append(f"| {T} | {len(rows)} | {sum(r['censored'] for r in rows)} | {show(m)} "
                     f"[{show(lo)}, {show(hi)}] | {'-' if g is None else show(g)} | "
                     f"{limits.limit_text(lims.get(T))} |")
    finite = [T for T in Ts if np.isfinite(med[T][0])]
    # the exponent depends on the range of T it is fitted over: the fit up to each T, then all
    fit = "\n".join(_steps_fit({T: med[T] for T in Ts if T <= top})
                    for top in finite[2:-1] + finite[-1:] or Ts[-1:])   # none finite: why
    text = "\n".join(lines) + "\n\n" + fit + "\n"
    print(text, end="")
    cli.write_text(os.path.join(out, "table.md"), text)
    png = _steps_plot(out, med, o, meta["budget"], curves)
    print(f"saved {out}/table.md" + (f", {png}" if png else ""))


def _steps_fit(med):
    """steps ~ a T^k over the T whose median is finite, with a stratified bootstrap interval on
    k: replicate i combines a resample of each T's seeds drawn on its own (median_steps with
    exact=False), so the interval is a drawn one, printed by its Monte Carlo band."""
    Ts = [T for T, (m, _, _) in sorted(med.items()) if np.isfinite(m)]
    if len(Ts) < 2:
        return "- fewer than 2 T with a finite median: no fit"
    k, c, r2 = fit_line(np.log(Ts), np.log([med[T][0] for T in Ts]))
    B = np.log(np.array([med[T][1] for T in Ts]))                       # [n_T, K]
    w = med[Ts[0]][2]
    ok = np.isfinite(B).all(0)
    x = np.log(Ts) - np.mean(np.log(Ts))
    ks = (x @ B[:, ok]) / (x @ x)
    lo, hi = weighted_percentile_ci(ks, w[ok]) if ks.size else (np.nan, np.nan)
    return (f"- steps ~ a T^k over T = {Ts[0]}..{Ts[-1]}: k = {k:.2f} [{bound_text(lo, 2)}, "
            f"{bound_text(hi, 2)}] (R^2 {r2:.3f}; 95% CI from {w.size:,} seed-bootstrap "
            f"replicates, each T's seeds resampled on their own; "
            f"{w[~ok].sum() / w.sum():.1%} of their probability dropped for a censored median)")


def _steps_plot(out, med, o, budget, curves=None):
    plt = cli.pyplot_or_hint("rerun with --report")
    if plt is None:
        return None
    curves = folder.read_curves(out) if curves is None else curves
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    Ts = sorted(med)
    ax.plot(Ts, [med[T][0] for T in Ts], "o-", label="median steps to 0.99")
    above = [T for T in Ts if not np.isfinite(med[T][0])]
    if above:                                   # a censored median: drawn at the budget, not left out
        ax.plot(above, [budget] * len(above), "^", color="C3",
                label=f"median above the budget ({budget} steps)")
    ax.set(xscale="log", yscale="log", xlabel="T (log scale)", ylabel="steps (log scale)",
           title=f"{o['s']}-sparse {o['task']}: steps until test accuracy 0.99")
    for key in sorted(curves, key=lambda k: tuple(int(v) for v in k.split("|"))):
        T, seed = (int(v) for v in key.split("|"))
        if seed == 0:
            bx.plot(curves[key]["step"], curves[key]["test_acc"], label=f"T = {T}, seed 0")
    bx.set(xscale="log", xlabel="step (log scale)", ylabel="test accuracy",
           title="the plateau and the jump (seed 0 at each T)")
    ax.legend(fontsize=8)
    bx.legend(fontsize=7)
    return cli.save_figure(plt, fig, os.path.join(out, "steps.png"))


# ---------------------------------------------------------------- the command line -------------

def _parser():
    ap = OneLineParser(prog="studies.steps", description=(
        "Training steps until test accuracy first reaches 0.99, against T, at a training set "
        "large enough that data is not the limit (sparse parity's wall)."))
    ap.add_argument("--Ts", type=int_list, default=[10, 20, 30, 50, 100], help="T values")
    ap.add_argument("--seeds", type=integer(1), default=10, help="seeds per T (default 10)")
    ap.add_argument("--budget", type=integer(1), default=20000,
                    help="most steps per run; runs still below the bar are censored (default "
                         "%(default)s)")
    ap.add_argument("--every", type=integer(1), default=10,
                    help="check test accuracy every this many steps (default %(default)s)")
    ap.add_argument("--out", required=True, help="results folder")
    ap.add_argument("--workers", type=integer(1, os.cpu_count() or 1), default=os.cpu_count() or 1,
                    help="processes (default %(default)s)")
    ap.add_argument("--stack", type=integer(1), default=10, help="runs per stack (default 10)")
    ap.add_argument("--report", action="store_true", help="only the table and plot")
    provenance.add_other_arithmetic(ap)
    ap.add_argument("--against", metavar="DIR",
                    help="also write OUT/against.md: the median steps paired on seeds with those "
                         "of another steps.py folder (e.g. the same runs with half the samples)")
    run_options.add_options(ap, folder.STEPS_OPTIONS, defaults=dict(task="parity", s=2, m=2000, n_test=1000))
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else harness.check_argv(argv)
    ap = _parser()
    a = ap.parse_args(argv)
    base = dict({k: getattr(a, k) for k in folder.STEPS_OPTIONS}, steps=a.budget, log_every=0)
    try:
        folder.check_plan_size(1, len(a.Ts), a.seeds)
        base = dict(run_options.validate_options(dict(base, T=max(a.Ts))), seed=0)
        training.check_run_memory(dict(base, T=max(a.Ts)), run_options.cli_flag)
    except ValueError as e:
        ap.error(str(e))
    if a.s > min(a.Ts):
        ap.error(f"--s {a.s} is larger than the smallest T {min(a.Ts)}")
    base.pop("T")
    meta = dict(options={k: base[k] for k in folder.STEPS_OPTIONS}, budget=a.budget, every=a.every,
                Ts=a.Ts, seeds=a.seeds, machines=[provenance.machine(base["dtype"])])
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error(f"--out {a.out} is a file; give a folder")
    if a.report and not os.path.isdir(a.out):
        ap.error(f"--report: no folder {a.out}")        # a report makes no folder
    lock = None
    try:
        try:
            if a.against:
                folder.read_steps_meta(a.against)          # a typo shows now, not after the runs
                folder.check_folder_kind(a.against, "steps.json")
                harness.check_distinct([a.out, a.against], "--out and --against")
            if os.path.isdir(a.out):
                folder.check_folder_kind(a.out, "steps.json")
            os.makedirs(a.out, exist_ok=True)
            lock = folder_write.lock_folder(a.out, holder=f"studies.steps, pid {os.getpid()}")
            if not a.report:                      # the folder's own runs, checked, first
                a.arithmetic_of = _check_folder(a.out, meta, a.other_arithmetic)
                done = folder.read_done(os.path.join(a.out, "steps.csv"), meta)
                curves = folder.read_curves(a.out)
                cli.write_json(os.path.join(a.out, "steps.json"), meta)   # the rows read
        except ValueError as e:
            ap.error(str(e))
        if not a.report:
            code = _run_all(a, a.out, base, done, curves)
            if code:
                return code
        try:
            _steps_report(a.out, folder.read_steps_meta(a.out))
            if a.against:
                _against_table(a.out, a.against)
        except ValueError as e:
            ap.error(str(e))
        return 0
    finally:
        if lock:
            lock.close()


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.steps", main))
