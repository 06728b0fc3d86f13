"""workers.py (studies/lib): what a worker process trains for each study, and the rows it returns.

A sweep (studies.sweep), the steps study (studies.steps) and the mechanism study (studies.mechanism)
each hand stacks of runs to worker processes (harness.worker_pool); the function a worker runs is
here, one per kind of row, so that studies.replay trains a folder's rows again through the very
code that wrote them. Each takes a list of run options (a stack: the same T and width), trains
them together (training.study_stack: stacked runs give the runs' own numbers) and returns one
dict per row of the folder's CSV (rows.py names the columns).
"""
import math
import time

import numpy as np

from studies.lib import harness, row_kinds, run_options, training
from studies.lib.checks import INTS, check_number
from studies.lib.measures import N_MEASURE, measure_mechanism


# ---------------------------------------------------------------- a sweep's runs --------------

def sweep_worker(runs):
    """A stack of training runs of the sweep, in a worker process: the CSV rows they produce.
    Transformer runs train as one stack (training.study_stack; the sweep stacks only runs with the
    same T and m, whose results are bit for bit those of the runs alone); MLP runs one by one. A
    diverged run is a failed run (test_acc nan), not the end of the sweep; so is a run of the
    paper's data protocol whose m is too small to draw a training set that identifies S."""
    harness.check_runs(runs, ("m", "model"))
    training.keep_freed_memory()
    runs = [dict(o, log_every=0, batch=0 if o.get("batch", 0) >= o["m"] else o["batch"])
            for o in runs]                      # a minibatch as large as the set: full batch
    failed = {}
    for i, o in enumerate(runs):
        if o.get("data") == "unambiguous":
            try:
                training.draw_study_data(run_options.validate_options(o))
            except ValueError:
                failed[i] = training.diverged_result(run_options.validate_options(o))
    trainable = [o for i, o in enumerate(runs) if i not in failed]
    if not trainable:
        results = []
    elif runs[0]["model"] == "transformer" and not runs[0].get("dropout"):
        results = training.study_stack(trainable)
    else:
        results = []
        for o in trainable:
            try:
                results.append(training.study_run(o, log=None))
            except training.Diverged:
                results.append(training.diverged_result(run_options.validate_options(o)))
    results = iter(results)
    results = [failed[i] if i in failed else next(results) for i in range(len(runs))]
    return [dict({k: r[k] for k in row_kinds.ROW_FIELDS if k not in ("success", "sweep_id")},
                 **({"ball": r.get("ball")} if run_options.ball_radii(o) else {}))
            for r, o in zip(results, runs)]


# A stack's largest array, [R, 2T+1, d + heads], kept within about half a core's L2 cache: on the
# 2 MiB-L2 AMD EPYC, runs stacked past 1 MiB trained 3 to 36 % slower per run than alone (T = 1000,
# stacks of 2 to 16; `python -m studies.bench --Ts 1000 --stack 4` shows it), below it faster.
STACK_BYTES = 1 << 20


def stack_size(T, most, d=64, heads=16, itemsize=4):
    """Runs per stack at context length T: stacking pays numpy's per-call overhead once for R
    runs, but past a few MiB per array the passes over memory slow every run down (the README's
    performance page has the measurements). At least 1, at most `most`."""
    for name, v in (("T", T), ("most", most), ("d", d), ("heads", heads), ("itemsize", itemsize)):
        check_number(name, v, INTS, 1, 2 ** 62)
    per_run = (2 * T + 1) * (d + heads) * itemsize
    return max(1, min(most, STACK_BYTES // per_run))


# ---------------------------------------------------------------- a mechanism study's runs -----

MEASURED = ("covering_constant", "B_X", "score_scale", "norm_V", "norm_O", "top_head",
            "mass_on_S", "score_gap", "heads_on_S", "top_score_scale", "top_norm_V", "top_norm_O"
            ) + row_kinds.MECHANISM_FACTORS + row_kinds.MECHANISM_CANONICAL


LOG_EVERY = 100     # the monitor's steps (gcd with the run's steps, so the last is one of them)


LOSS_LOW = 0.01     # loss_jump: the largest training loss after the loss first fell below this


class _BestSeen:
    """training.study_stack's monitor: each run's best test accuracy at the logged steps (every
    `every` steps) and the first step that reached it. It never stops training (returns False):
    the test set only watches."""
    at_start = False                                    # the logged steps: every `every` steps

    def __init__(self, every=LOG_EVERY):
        self.every, self.best, self.step = every, None, None

    def __call__(self, step, test_acc, loss, params=None):
        acc = np.asarray(test_acc, np.float64)
        if self.best is None:
            self.best, self.step = np.full(acc.shape, -np.inf), np.zeros(acc.shape, np.int64)
        better = acc > self.best                        # nan (a diverged run) is never better
        self.best[better], self.step[better] = acc[better], step
        return False


class _Trace:
    """training.study_stack's monitor for the trajectories (issue 38): at step 1 and every `every`
    steps, each run's test accuracy, training loss and the mechanism of its parameters then
    (measure_mechanism on the run's support S and its inputs X: B_X, the top head, its score gap
    and mass on S). It never stops training (returns False) and only reads the parameters.
    .rows: one dict per run per logged step, in that order."""
    at_start = True

    def __init__(self, every, cfg, supports, inputs):
        self.every, self.cfg, self.S, self.X, self.rows = every, cfg, supports, inputs, []

    def __call__(self, step, test_acc, loss, params):
        for r, (S, X) in enumerate(zip(self.S, self.X)):
            p = {k: v[r] for k, v in params.items()}
            row = dict(run=r, step=step, test_acc=float(test_acc[r]), train_loss=float(loss[r]))
            if all(np.isfinite(v).all() for v in p.values()):
                mech = measure_mechanism(p, self.cfg, S, X, canonical=False)
                row.update({k: mech[k] for k in TRACED})
            else:                                          # a diverged run: nothing to measure
                row.update({k: math.nan for k in TRACED}, top_head=-1, B_X_token="none",
                           B_X_position=-1, B_X_in_S=0)
            self.rows.append(row)
        return False


TRACED = ("B_X", "score_gap", "mass_on_S", "top_head",    # what Trace takes of measure_mechanism
          "ln1_gain_rms", "ln1_shift_norm", "B_X_token", "B_X_position", "B_X_in_S")


def _loss_summary(losses):  # [steps] -> final_loss, min_loss, loss_jump
    """The last and smallest training loss, and the largest loss after it first fell below
    LOSS_LOW (nan when it never did): a run that lost a fitted training set shows a jump."""
    L = np.asarray(losses, np.float64)
    low = np.flatnonzero(L < LOSS_LOW)
    jump = float(L[low[0]:].max()) if low.size else math.nan
    return float(L[-1]), float(L.min()), jump


def train_cell(runs):
    """A stack of runs of one cell (one d, T and m; different seeds) in a worker process: train
    them together (training.study_stack, whose stacked runs equal the runs alone), measure each ->
    the CSV rows. A diverged run is a failure whose measurements are nan."""
    harness.check_runs(runs, ("design", "steps"))
    training.keep_freed_memory()
    design = runs[0]["design"]
    runs = [{k: v for k, v in o.items() if k != "design"} for o in runs]
    cpu0, monitor = time.process_time(), _BestSeen(math.gcd(LOG_EVERY, runs[0]["steps"]))
    results = training.study_stack(runs, monitor=monitor)
    cpu = (time.process_time() - cpu0) / len(runs)
    rows = []
    for i, (o, r) in enumerate(zip(runs, results)):
        row = dict(design=design, d=o["d"], T=o["T"], m=o["m"], seed=o["seed"],
                   model="transformer", task=o["task"], s=o["s"], steps=o["steps"],
                   test_acc=r["test_acc"], train_acc=r["train_acc"], attn_on_S=r["attn_on_S"],
                   best_test_acc=float(monitor.best[i]) if monitor.best is not None else math.nan,
                   best_step=int(monitor.step[i]) if monitor.best is not None else 0,
                   seconds=r["seconds"], cpu_seconds=cpu)
        row["final_loss"], row["min_loss"], row["loss_jump"] = _loss_summary(r["losses"])
        if r.get("diverged"):
            row.update({k: math.nan for k in MEASURED})
        else:
            X = training.draw_study_data(o)[2][0][:N_MEASURE]            # the run's own test inputs
            mech = measure_mechanism(r["params"], r["cfg"], r["S"], X)
            row.update({k: mech[k] for k in MEASURED})
        rows.append(row)
    return rows


def train_trace(runs, every):
    """train_cell's sibling for the trajectories: a stack of runs of one cell trained with the
    Trace monitor -> its rows (one per run per logged step; success is set by the writer from
    final_test_acc). The training is train_cell's: the monitor only reads."""
    harness.check_runs(runs, ("design", "steps"))
    steps = runs[0]["steps"]
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"runs: steps must be an integer >= 1, got {steps!r:.40}")
    every = check_number("every", every, INTS, 1, steps + 1, "an integer in [1, {hi}) (the "
                         "runs' steps + 1)")
    if steps % every:
        raise ValueError(f"every = {every} must divide the runs' steps ({steps}): the last step "
                         f"is logged")
    training.keep_freed_memory()
    design = runs[0]["design"]
    runs = [{k: v for k, v in o.items() if k != "design"} for o in runs]
    draws = [training.draw_study_data(o) for o in runs]
    monitor = _Trace(every, run_options.attention_config(runs[0]), [d[0].S for d in draws],
                    [d[2][0][:N_MEASURE] for d in draws])        # each run's own test inputs
    cpu0 = time.process_time()
    results = training.study_stack(runs, monitor=monitor)
    cpu = (time.process_time() - cpu0) / len(runs)
    return [dict({k: row[k] for k in ("step", "train_loss", "test_acc") + TRACED},
                 design=design, d=runs[i]["d"], T=runs[i]["T"], m=runs[i]["m"],
                 seed=runs[i]["seed"], final_test_acc=results[i]["test_acc"],
                 steps=runs[i]["steps"], cpu_seconds=cpu)
            for i in range(len(runs)) for row in monitor.rows if row["run"] == i]


# ---------------------------------------------------------------- the steps study's runs ------

CURVE_SEEDS = 3          # seeds whose whole curves are kept for the plot


STEPS_BAR = 0.99


class _FirstHit:
    """training.study_stack's monitor: the first checked step at which each run's test accuracy
    reaches the bar; stops the stack when every run has. Keeps the curves it saw."""
    at_start = False                                           # its checks: every `every` steps

    def __init__(self, every, R):
        self.every, self.first = every, np.zeros(R, int)       # 0: not yet
        self.curve = []                                        # (step, acc [R], loss [R])

    def __call__(self, step, acc, loss, params=None):
        self.curve.append((step, acc.tolist(), np.asarray(loss, float).tolist()))
        self.first[(self.first == 0) & (acc >= STEPS_BAR)] = step
        return bool((self.first > 0).all())


def run_stack(runs, every):
    """Train one stack (runs that share T) until each reaches the bar or the budget: one CSV row
    per run, and the curves of the runs with seed < CURVE_SEEDS."""
    harness.check_runs(runs, ("steps",))
    check_number("every", every, INTS, 1)
    training.keep_freed_memory()
    watch = _FirstHit(every, len(runs))
    results = training.study_stack(runs, monitor=watch)
    rows, curves = [], {}
    for r, (o, res) in enumerate(zip(runs, results)):
        hit = int(watch.first[r])
        rows.append(dict(task=o["task"], s=o["s"], T=o["T"], m=o["m"], seed=o["seed"],
                         steps_to_bar=hit if hit else "", censored=int(not hit),
                         budget=o["steps"], every=every, final_test_acc=res["test_acc"],
                         seconds=res["seconds"]))
        if o["seed"] < CURVE_SEEDS:
            curves[f"{o['T']}|{o['seed']}"] = dict(
                step=[c[0] for c in watch.curve], test_acc=[c[1][r] for c in watch.curve],
                loss=[c[2][r] for c in watch.curve])
    return rows, curves
