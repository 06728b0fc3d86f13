"""train.py: CPU training of the sparse-AND Transformer of Edelman et al. (ICML 2022, Section 5).

    python train.py              the demo: learn 3-sparse AND at T=100 from 500 samples
    python train.py --help       every option
    python -m studies.sweep ...  the experiment built on this file: m*(T), the paper's figure

Training (Section 5, as reproductions read it): Adam with bias correction, lr 1e-3, weight decay
1e-4 *added to the gradient* (L2, as torch.optim.Adam does, not decoupled AdamW) on every
parameter, full-batch logistic loss, 1000 steps, accuracy on fresh test samples.

The file reads top to bottom: one run (train_run) and a stack of runs (train_stack: R runs at
once) set up and run the one loop, _train_loop (batch, loss and gradients, finite check, clip,
Adam's step, early stopping, log, checkpoint), whose parts follow it; then the set-up, the
result's measurements, memory, the command line and the run's picture. Adam's arithmetic is
optim.py's; the options (one table of defaults, checks and --help) run_options.py's; the
checkpoint files and the Ctrl-C that saves one checkpoint.py's. Dimension names: B batch, T
bits, d width, R runs. `o` is always a run's options, checked once at the door
(run_options.validate_options: an Options, read-only) and passed on as they are.
"""
import signal
if __name__ == "__main__" and hasattr(signal, "pthread_sigmask"):   # Ctrl-C waits, pending, for
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})      # cli's guard (quiet_interrupts)
import sys

import cli                                  # standard library only: Ctrl-C from the first line

if __name__ == "__main__":
    cli.quiet_interrupts("train.py")        # Ctrl-C while starting: one line, exit 130
    cli.threads_from_argv(sys.argv[1:])     # BLAS threads: before numpy is first imported

import argparse
import collections
import math
import os
import time
import types

from cli import integer

import numpy as np

import arithmetic
import attn
import baseline
import data
import fast
import hypotheses
import optim
import symmetry
import theory
from checkpoint import (Interrupted, StopRequests, check_checkpoint, checkpoint_owner,
                        load_checkpoint, restore, same_path, save_checkpoint)
from run_options import (DEFAULTS, OPTIONS, RUN_KEYS, cli_flag, model_config, py_flag,
                         run_shapes, validate_options)


# ---------------------------------------------------------------- training --------------------
# One run (train_run) and a stack of runs (train_stack) set up, run the one loop (_train_loop), and
# report. The loop's parts follow it; the set-up, the result's measurements, memory and the
# command line come after, where a reader of the loop need not pass.

def train_run(opts, log=print, save=None, save_every=0, resume=None, stop_after=None,
              curve=False):
    """Train one model with options `opts` (keys of DEFAULTS); return a result dict.

    save: checkpoint path, written every save_every steps (0: only at the end), at the end, and
    on Ctrl-C or SIGTERM (then Interrupted is raised, also when Ctrl-C comes before step 1,
    while the last checkpoint is written or during the final evaluation). Like --save, it must
    be free or the very file `resume` was read from (cli.claim_output): another run's
    checkpoint, or any other file, is never replaced. resume: a dict from load_checkpoint to
    continue from (checked field by field, check_checkpoint); a checkpoint already at o["steps"]
    is evaluated and reported without training. stop_after: behave as if Ctrl-C came after that
    step (for tests). A non-finite loss raises Diverged and leaves the last (finite) checkpoint
    untouched. log: a function of one line, or None for none. curve: also measure the
    accuracies at log-spaced steps (_curve_steps), for the run's picture: result["curve"].
    """
    if not isinstance(curve, (bool, np.bool_)):
        raise attn.refuse("curve", curve, "True or False", False)
    o, save_every, stop_after, resume = _check_run_call(opts, log, save, save_every, resume,
                                                       stop_after)
    kept = resume["step"] if resume and save and same_path(save, resume.get("path")) else 0
    run, phase = None, "start"       # where a Ctrl-C that is not caught at a step boundary came
    try:
        run = _set_up_run(o, log, resume, curve, kept)
        phase = "training"
        _train_loop(run, o, save, save_every, stop_after)
        phase = "evaluation"
        return _finish_run(o, run)
    except (KeyboardInterrupt, cli.Terminated) as e:
        if not save:
            raise
        raise Interrupted(run.kept if run else kept, save, phase,
                          signal.SIGTERM if isinstance(e, cli.Terminated) else signal.SIGINT) \
            from None


PER_RUN = ("m", "data", "seed")       # what the runs of one stack may differ in (and nothing else)
STACK_KEYS = tuple(k for k in RUN_KEYS if k not in PER_RUN) + ("steps",)


def train_stack(runs, monitor=None):
    """Train the Transformer runs `runs` (option dicts that agree on STACK_KEYS) as one stack;
    return one result dict per run, as train_run would. Every parameter gets a leading run axis
    and each step is one set of batched array operations, so numpy's per-call overhead is paid
    once for R runs. The runs stay independent: each run's numbers are those of the same run
    alone, up to float rounding (test_stack_equals_single_runs). Shorter training sets are
    padded to the longest with weight-0 samples. A run whose loss stops being finite is reported
    as diverged (test_acc nan); the others go on unaffected.

    monitor: None, or a callable with an int attribute `every` and a bool attribute `at_start`:
    every `every` steps (and at step 1 too when `at_start`) it is called as monitor(step, test_acc
    [R], loss [R], params) with each run's accuracy on its own test set and the stack's
    parameters after the step ({name: [R, ...]}, the live arrays: read them, never write), and
    the stack stops early when it returns True (each result's "steps_run" says where). The test
    set then only watches; nothing is chosen by it."""
    opts, o = _check_stack(runs)
    run = _set_up_stack(opts, watched=monitor is not None)
    ran = _train_loop(run, o, monitor=monitor)
    if run.val:
        _restore_best(run)
    return _stack_results(opts, run, ran, (time.perf_counter() - run.t0) / run.R)


def _train_loop(run, o, save=None, save_every=0, stop_after=None, monitor=None):
    """The training loop, for one run and for a stack of runs alike (run.R: None, or the number
    of runs; `run` is _set_up_run's or _set_up_stack's). Each step: the batch, the loss and its
    gradients, the finite check (one run), clipping, Adam's step, early stopping's check, the
    log, the checkpoint. With `save`, Ctrl-C and SIGTERM end the loop after the step they come
    in, checkpointed (Interrupted). -> the number of steps run (fewer when monitor ended it)."""
    with StopRequests(bool(save), stop_after) as stop, np.errstate(over="ignore",
                                                                   invalid="ignore"):
        for step in range(run.first, o["steps"] + 1):
            X, y, weights = _draw_batch(run, o["batch"])
            loss, grads = _loss_and_grads(run.model, run.params, X, y, weights)
            if run.R is None:       # a stack's runs go on; each is judged by its losses at the end
                loss = float(loss)
                if not math.isfinite(loss):     # the blow-up is caught here: overflow warnings off
                    raise Diverged(_divergence_message(loss, step, o, save))
            if o["clip"]:             # frozen parameters have no gradient to clip (torch's
                optim.clip_gradients(   # requires_grad=False): the norm is the others' alone
                    {k: g for k, g in grads.items() if k not in run.state["frozen"]}, o["clip"],
                    run.R)
            optim.adam_step(run.params, grads, run.state, o["lr"], o["wd"], b2=o["beta2"],
                            decoupled=o["optimizer"] == "adamw")
            if o["qk_ball"]:                  # training inside the norm ball (projected Adam)
                symmetry.project_qk_ball(run.params, run.model.cfg, qk_ball_radius(o))
            run.losses.put(step - run.first, loss)
            if run.val and (step % o["val_every"] == 0 or step == o["steps"]):
                _keep_if_best(run, step)                          # early stopping
            if run.progress and run.progress.due(step):
                _log_progress(run, step, loss)
            if monitor and (step % monitor.every == 0 or step == 1 and monitor.at_start) and (
                    monitor(step, _monitored_accuracies(run), run.losses.values[step - run.first],
                            run.params)):
                return step
            stopping = stop.after(step)                          # Ctrl-C or SIGTERM came
            if save and (stopping or step == o["steps"] or (save_every and
                                                            step % save_every == 0)):
                if save_checkpoint(save, run.params, run.state, run.order, o, step):
                    run.kept = step
            if stopping or stop.after(step):                     # ... or came while it saved
                raise Interrupted(step, save, signum=stop.signum)
    if stop.now:                      # came between the last step's check and the handlers' return
        raise Interrupted(run.kept, save, signum=stop.signum)
    return o["steps"]


# the loop's parts

QK_BALL_EPS = 0.1     # the attention mass left off S at the construction's score gap


def qk_ball_radius(o):
    """The radius option qk_ball sets on each head's canonical ||W_QK||_F: qk_ball x R / (2 B^2),
    R = theory.paper_score_gap(T, s, 0.1) the construction's score gap and B^2 = d + 1 the
    canonical token norm's bound squared (LN1 without gain: ||x|| <= sqrt(d), the 1 the bias
    coordinate), so that the scores' range 2 ||W_QK||_2 B^2 reaches R at most at qk_ball = 1."""
    o = validate_options(o, name="o")
    return o["qk_ball"] * float(theory.paper_score_gap(o["T"], o["s"], QK_BALL_EPS)) / (
        2.0 * (o["d"] + 1))


def _draw_batch(run, size):
    """The step's batch: X, y and the samples' weights (a stack's, [R, B]; None for one run, whose
    loss is the mean). The whole training set when size is 0 (one run: or >= m), else `size` rows
    of each run drawn without replacement by its own minibatch generator (run.order)."""
    if run.R is None:
        return next_batch(run.X, run.y, size, run.order) + (None,)
    if not size:
        return run.X, run.y, run.w
    idx = [rng.choice(m, size=size, replace=False) for m, rng in zip(run.ms, run.order)]
    rows = np.arange(run.R)[:, None]
    return run.X[rows, idx], run.y[rows, idx], np.full((run.R, size), 1.0 / size, run.y.dtype)


def next_batch(X, y, batch, rng):
    """The whole training set (batch 0 or >= m), else `batch` rows drawn without replacement."""
    for name, a in (("X", X), ("y", y)):
        if not isinstance(a, np.ndarray) or a.ndim < 1:
            raise attn.refuse(name, a, "a numpy array of rows", False)
    if len(X) != len(y):
        raise ValueError(f"X and y must have as many rows, got {len(X)} and {len(y)}")
    batch = data.check_number("batch", batch, data.INTS, 0)
    if not batch or batch >= len(X):
        return X, y
    data.check_rng(rng)
    idx = rng.choice(len(X), size=batch, replace=False)
    return X[idx], y[idx]


def _loss_and_grads(model, params, X, y, weights=None):
    """The loss and its gradients for model (build_model's): the Transformer on fast.py (with
    `versions` kept by a full-batch run), with dropout on attn.py's reference (masks from the
    seed's dropout stream), or baseline.py's MLP (model.cfg None)."""
    if model.cfg is None:
        z, cache = baseline.forward(params, X)
        loss, c_loss = attn.logistic_forward(z, y)
        return loss, baseline.backward(attn.logistic_backward(1.0, c_loss), cache)
    if model.dropout_rng is not None:
        return attn.loss_and_grads(params, model.cfg, X, y, rng=model.dropout_rng)[:2]
    return fast.loss_and_grads(params, model.cfg, X, y, weights=weights,
                               versions=model.versions)[:2]


def _logits(model, params, X):  # X [n, T] -> [n], or a stack's [R, n, T] -> [R, n]
    """The model's logits, without dropout (for accuracies and early stopping)."""
    if model.cfg is None:
        return baseline.forward(params, X)[0]
    return fast.model_forward(params, model.cfg, X)[0]


def _divergence_message(loss, step, o, save):
    """Diverged's line: the step, the option to make smaller, the last finite checkpoint."""
    kept = f"; the last finite checkpoint is {save}" if save and os.path.exists(save) else ""
    return (f"loss is {loss} at step {step}: training diverged; try a smaller "
            f"{divergence_culprit(o)}{kept}")


def divergence_culprit(o):
    """The option a diverged run most likely owes it to, with its value: the weight decay when it
    is strong enough to do it alone (with adamw, lr * wd >= 1: a decoupled step more than zeroes
    every parameter; or wd so large that wd * p, squared in Adam's second moment, leaves the
    dtype's range) and the learning rate is not itself >= 1; else the learning rate."""
    o = validate_options(o, name="o")
    wd, lr = o["wd"], o["lr"]
    strong = wd and ((o["optimizer"] == "adamw" and lr * wd >= 1)
                     or wd >= 1e-3 * math.sqrt(float(np.finfo(o["dtype"]).max)))
    if strong and lr < 1:
        return f"--wd (now {wd}, too strong for --lr {lr} in {o['dtype']})"
    if o["ln1_gain"] >= 1e-3 * (float(np.finfo(o["dtype"]).max) / o["d"]) ** 0.5:  # ~ gain^2 d
        return f"--ln1-gain (now {o['ln1_gain']}, near where {o['dtype']} overflows) or --lr"
    return f"--lr (now {lr})" + (f" or --wd (now {wd})" if strong else "")


def _keep_if_best(run, step):
    """Early stopping's check: the validation loss of the run (of each run of a stack) now; the
    parameters at the lowest so far are kept in run.best (_restore_best puts them back at the
    end). A nan loss is never lower. The test set plays no part in the choice."""
    loss = np.atleast_1d(_val_loss(_chunked(run.model, run.params, run.val[0]), run.val[1]))
    better = loss < run.best.loss
    if not better.any():
        return
    run.best.loss[better], run.best.step[better] = loss[better], step
    for k, v in run.params.items():
        if run.R:
            run.best.params[k][better] = v[better]
        else:
            run.best.params[k][...] = v


def _val_loss(z, y):  # logits [..., n], labels [..., n] in {0, 1} -> mean logistic loss [...]
    """Early stopping's measure: attn.logistic_forward in float64 whatever the model's dtype (so a
    float32 run's choice is not decided by rounding)."""
    return attn.logistic_forward(z.astype(np.float64), y)[0]


def _restore_best(run):
    for k, v in run.params.items():
        v[...] = run.best.params[k]


def _log_progress(run, step, loss):
    """Measure the run at this step (accuracy on the training set and on the shown set, [CLS]
    attention mass on S) for the picture's curve, and at the printed steps the progress line
    (flushed by the caller's log, so it shows under redirection too)."""
    p = run.progress
    tr = accuracy(_logits(run.model, run.params, p.train[0]), p.train[1])
    te = accuracy(_logits(run.model, run.params, p.shown[0]), p.shown[1])
    mass = (_attention_on_support(run.params, run.model.cfg, p.shown[0][:200], p.S)[0]
            if run.model.cfg else np.nan)
    entry = dict(step=step, loss=loss, train_acc=tr, acc=te, attn_on_S=mass)
    if p.curve is not None:
        p.curve.append(entry)
    if p.printed(step):
        p.logged.append(entry)
        p.say(f"step {step:5d}  loss {loss:.4f}  train acc {tr:.3f}  {p.label} acc {te:.3f}  "
              f"attn on S {mass:.3f}  {time.perf_counter() - run.t0:6.1f}s")


class _Progress:
    """When and on what a run is logged: the progress line at step 1 and every log_every steps
    (when there is a log), and with curve the picture's points too, at _curve_steps. .logged
    keeps the printed lines' numbers (step, loss, train_acc, acc, attn_on_S), .curve (None
    without curve) every measured step's."""

    def __init__(self, log, o, train, shown, S, label, curve):
        self.say, self.every = log, o["log_every"] if log else 0
        self.train, self.shown, self.S, self.label = train, shown, S, label
        self.extra = frozenset(_curve_steps(o["steps"])) if curve else frozenset()
        self.logged, self.curve = [], [] if curve else None

    def printed(self, step):
        return bool(self.every) and (step % self.every == 0 or step == 1)

    def due(self, step):             # printed (each multiple of every), or a point of the curve
        return self.printed(step) or step in self.extra


def _curve_steps(steps, n=60):
    """The picture's steps besides the printed ones: each of the first 10, then about n
    log-spaced ones up to `steps`, so the early rise is drawn where it happens (a set of at most
    n + 10 steps, whatever `steps` is)."""
    spaced = np.unique(np.geomspace(1, steps, n).round().astype(np.int64)).tolist()
    return set(range(1, min(10, steps) + 1)) | set(spaced)


class _LossHistory:
    """The training loss at each step of this session, [n] for one run or [n, R] for a stack,
    grown as the run goes (doubling its room), so a run asks for no memory for steps it has not
    reached: a run of 10**15 steps starts like any other. .values: the losses so far."""

    def __init__(self, R=None, room=1024):
        self.a, self.n = np.empty((room,) + ((R,) if R else ())), 0

    def put(self, i, loss):             # the step's index in this session, its loss (a stack's [R])
        if i >= len(self.a):
            grown = np.empty((max(2 * len(self.a), i + 1),) + self.a.shape[1:])
            grown[:len(self.a)] = self.a
            self.a = grown
        self.a[i] = loss
        self.n = max(self.n, i + 1)

    @property
    def values(self):
        return self.a[:self.n]


# ---------------------------------------------------------------- setting up ------------------
# A run's checks, the seed's draws, the model, the optimiser and what the loop logs, gathered in
# one namespace `run`: R (None for one run), X, y, w (training data, a stack's sample weights),
# order (minibatch generator(s)), model, params, state (Adam's), first (step), losses, val and
# best (early stopping), progress, t0, kept (the step the checkpoint on disk holds).

def _check_run_call(opts, log, save, save_every, resume, stop_after):
    """train_run's arguments, before anything runs -> (options, save_every, stop_after, the
    checked checkpoint)."""
    o = validate_options(opts)
    save_every = data.check_number("save_every", save_every, data.INTS, 0)
    if stop_after is not None:
        stop_after = data.check_number("stop_after", stop_after, data.INTS, 1)
    if log is not None and not callable(log):
        raise TypeError(f"log must be a function of one line (e.g. print) or None, got "
                        f"{type(log).__name__}")
    if resume is not None:
        resume = check_checkpoint(resume, "resume")
    if save is not None:
        cli.claim_output(save, "checkpoint", "save",
                         checkpoint_owner(resume and resume.get("path"), cli_style=False))
    check_run_memory(o)
    if (o["val"] or o["dropout"]) and (save is not None or resume is not None):
        raise ValueError("early stopping (val) and dropout do not combine with checkpoints yet "
                         "(the best parameters and the mask generator are not saved); drop them "
                         "or save/resume")
    return o, save_every, stop_after, resume


def _set_up_run(o, log, resume, curve, kept):
    """One run's `run` namespace: the seed's draws, the model, the parameters in one buffer (for
    Adam's fast step) and Adam's state, restored from `resume`; the first step; early stopping;
    what is logged."""
    draw = draw_run(o)
    (Xtr, ytr), val = draw.train, draw.val
    params, model = build_model(o, draw.init)
    params = optim.one_buffer(params)
    state = optim.adam_init(params, o["decay"], _frozen_parameters(o), _scaled_parameters(o))
    first = 1 if resume is None else restore(resume, o, params, state, draw.order)
    if model.cfg and not model.dropout_rng and (not o["batch"] or o["batch"] >= o["m"]):
        model.versions = fast.two_versions(Xtr, Xtr.dtype)   # full batch: the bits never change
    shown = val or draw.test     # with early stopping, the validation set is shown instead
    now, before = arithmetic.record(o["dtype"]), resume and resume.get("arithmetic")
    if before and arithmetic.differences(before, now):
        if log:
            log(f"note: the checkpoint was made by {arithmetic.words(before)}; this session runs "
                f"{arithmetic.words(now)}, so the run will not replay bit for bit")
    else:
        before = None
    return types.SimpleNamespace(
        R=None, task=draw.task, X=Xtr, y=ytr.astype(Xtr.dtype), w=None, labels=ytr,
        test=draw.test, order=draw.order, model=model, params=params, state=state, first=first,
        losses=_LossHistory(), val=val, best=val and _best_so_far(params),
        progress=_Progress(log, o, draw.train, shown, draw.task.S, "val" if val else "test",
                          curve),
        t0=time.perf_counter(), kept=kept, arithmetic=now, before=before)


def _best_so_far(params, R=None):
    """Early stopping's record: the lowest validation loss of each run, its step, its params."""
    return types.SimpleNamespace(loss=np.full(R or 1, np.inf), step=np.zeros(R or 1, int),
                                 params={k: v.copy() for k, v in params.items()})


def _check_stack(runs):
    """train_stack's runs, checked -> (their full options, the first's)."""
    if not isinstance(runs, (list, tuple)):
        raise TypeError(f"runs must be a list of option dicts, got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs must hold at least one option dict, got an empty list")
    opts = [validate_options(o, name=f"runs[{i}]") for i, o in enumerate(runs)]
    o = opts[0]
    differ = [k for k in STACK_KEYS if any(x[k] != o[k] for x in opts)]
    if differ or o["model"] != "transformer":
        raise ValueError(f"a stack needs Transformer runs that agree on {', '.join(STACK_KEYS)}; "
                         f"these differ on {differ or ['model']}")
    if o["dropout"]:
        raise ValueError("runs with dropout train on the plain path, one at a time: use "
                         "train_run, not train_stack")
    for x in opts:
        check_run_memory(x)
    return opts, o


def _set_up_stack(opts, watched=False):
    """A stack's `run` namespace: each run's draws; the training sets padded to the longest (X
    [R, M, T] bits, y [R, M], weights w [R, M]: 1/m on a run's own samples, 0 on the padding);
    the stacked parameters [R, ...] in one buffer and Adam's state; each run's validation set
    (early stopping) and, when a monitor watches, its test set [R, n_test, T]."""
    o, R, M = opts[0], len(opts), max(x["m"] for x in opts)
    dt, cfg = np.dtype(o["dtype"]), model_config(o)
    X, y, w = np.zeros((R, M, o["T"]), bool), np.zeros((R, M), dt), np.zeros((R, M), dt)
    draws, params = [draw_run(x) for x in opts], []
    for r, (x, draw) in enumerate(zip(opts, draws)):
        X[r, :x["m"]], y[r, :x["m"]], w[r, :x["m"]] = *draw.train, 1.0 / x["m"]
        params.append(build_model(x, draw.init)[0])
    P = optim.one_buffer({k: np.stack([p[k] for p in params]) for k in params[0]})
    state = optim.adam_init(P, o["decay"], _frozen_parameters(o), _scaled_parameters(o))
    val = tuple(np.stack(a) for a in zip(*(draw.val for draw in draws))) if o["val"] else None
    test = tuple(np.stack(a) for a in zip(*(draw.test for draw in draws))) if watched else None
    model = types.SimpleNamespace(cfg=cfg, dropout_rng=None, versions=None if o["batch"] else
                                  fast.two_versions(X, dt))
    return types.SimpleNamespace(
        R=R, draws=draws, X=X, y=y, w=w, ms=[x["m"] for x in opts],
        order=[draw.order for draw in draws], model=model, params=P, state=state, first=1,
        losses=_LossHistory(R), val=val, best=val and _best_so_far(P, R),
        progress=None, test=test, t0=time.perf_counter(), kept=0)


Streams = collections.namedtuple("Streams", "task train test init order val dropout")


def seeds_for(seed):
    """The independent generators one seed fixes, by name: task (the support S), train (training
    data), test (test data), init, order (minibatches), val (validation data), dropout (masks).
    Each is a child of SeedSequence(seed) fixed by its index in that order, so the seven streams
    never change one another."""
    seed = data.check_number("seed", seed, data.INTS, 0)
    return Streams(*(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(7)))


Draw = collections.namedtuple("Draw", "task train test init order val")


def draw_run(o):
    """What the seed fixes, drawn from independent streams, as a Draw: task (the support S),
    train and test (each (X [n, T] in the run's dtype, y [n] uint8)), init and order (the
    generators of the init and of the minibatch order), val (the validation set, or None without
    early stopping). o: options (validate_options fills in the defaults)."""
    o = validate_options(o, name="o")
    streams = seeds_for(o["seed"])
    task = data.make_task(o["task"], o["T"], o["s"], streams.task)
    if o["data"] == "unambiguous":                 # ValueError when m cannot identify S
        Xtr, ytr = hypotheses.sample_unambiguous(task, o["m"], streams.train)
    else:
        Xtr, ytr = task.sample(o["m"], streams.train)
    Xte, yte = task.sample(o["n_test"], streams.test)
    dt = np.dtype(o["dtype"])
    val = None
    if o["val"]:
        Xv, yv = task.sample(o["val"], streams.val)
        val = (Xv.astype(dt), yv)
    return Draw(task=task, train=(Xtr.astype(dt), ytr), test=(Xte.astype(dt), yte),
                init=streams.init, order=streams.order, val=val)


def _frozen_parameters(o):
    """The parameters option freeze holds at their init (optim.LAYERNORMS' gain and shift of one
    LayerNorm; none for "none")."""
    return optim.LAYERNORMS.get(o["freeze"], ())


def _scaled_parameters(o):
    """The parameters Adam steps as held at option qkv_step times their scale (optim.adam_init's
    scales): W_Q, W_K and W_V, or none at 1."""
    return None if o["qkv_step"] == 1.0 else dict.fromkeys(("W_Q", "W_K", "W_V"), o["qkv_step"])


def build_model(o, rng):
    """(params, model) for model o["model"], initialised from rng: the Transformer, LN1's gain
    at option ln1_gain (model.cfg its attn.py config; model.dropout_rng the seed's dropout
    stream when it trains with dropout, else None), or baseline.py's MLP (model.cfg None).
    model.versions: set by a full-batch run."""
    o, rng = validate_options(o, name="o"), data.check_rng(rng)
    if o["model"] == "mlp":
        params = baseline.init(o["T"], o["mlp"], rng, o["dtype"])
        return params, types.SimpleNamespace(cfg=None, dropout_rng=None, versions=None)
    cfg = model_config(o)
    dropout_rng = seeds_for(o["seed"]).dropout if o["dropout"] else None
    params = attn.init_params(cfg, rng)
    params["ln1_g"][...] = o["ln1_gain"]       # after the draws: every other weight the same
    if o["qkv_init"] != 1.0:
        for k in ("W_Q", "W_K", "W_V"):
            params[k] *= params[k].dtype.type(o["qkv_init"])
    return params, types.SimpleNamespace(cfg=cfg, dropout_rng=dropout_rng, versions=None)


# ---------------------------------------------------------------- after the loop: results -----

def _finish_run(o, run):
    """The result of a trained run: early stopping's parameters put back, then the summary."""
    if run.val:
        _restore_best(run)
    losses = run.losses.values.tolist()
    r = _summarise(o, run.task, run.params, run.model, (run.X, run.labels), run.test, losses,
                  time.perf_counter() - run.t0)
    r.update(over_the_run(losses, run.progress.logged, run.progress.label, o["steps"]),
             arithmetic=run.arithmetic)
    if run.before is not None:                 # resumed from a checkpoint another arithmetic made
        r["arithmetic_before_resume"] = run.before
    if run.progress.curve is not None:
        r["curve"] = run.progress.curve
    if not run.val:
        return dict(r, best_step=o["steps"])
    best = int(run.best.step[0])               # the training loss of the parameters kept
    return dict(r, best_step=best, loss=losses[best - run.first] if best >= run.first else
                r["loss"])


def _stack_results(opts, run, ran, seconds):
    """One result dict per run of a trained stack (diverged runs as diverged_result)."""
    losses = run.losses.values[:ran]
    finite = np.isfinite(losses).all(0)
    out = []
    for r, (x, draw) in enumerate(zip(opts, run.draws)):
        if not finite[r]:
            out.append(dict(diverged_result(x), losses=losses[:, r].tolist()))
            continue
        p = {k: v[r] for k, v in run.params.items()}
        res = _summarise(x, draw.task, p, run.model, draw.train, draw.test,
                        losses[:, r].tolist(), seconds)
        out.append(dict(res, diverged=False, steps_run=ran,
                        best_step=int(run.best.step[r]) if run.val else ran))
    return out


def _monitored_accuracies(run):
    """For a stack's monitor: each run's accuracy on its own test set, [R]."""
    Xte, yte = run.test
    return np.mean((_chunked(run.model, run.params, Xte) > 0) == (yte > 0), axis=-1)


# evaluation: accuracies and attention, on whole sets EVAL_CHUNK rows at a time

def _chunked(model, params, X):  # X [n, T] -> [n], or a stack's [R, n, T] -> [R, n]
    """_logits(model, params, X) EVAL_CHUNK rows at a time: a final accuracy on 10^5 samples must
    not need the memory of a 10^5-row batch (and lose a finished run to it)."""
    return np.concatenate([_logits(model, params, X[..., i:i + EVAL_CHUNK, :])
                           for i in range(0, X.shape[-2], EVAL_CHUNK)], axis=-1)


def accuracy(z, y):
    """Share of logits z [n] on the side of their 0/1 labels y [n]."""
    try:
        if np.asarray(z).dtype.kind not in "biufU" or np.asarray(y).dtype.kind not in "biufU":
            raise TypeError("not real numbers")
        z, y = np.asarray(z, dtype=float), np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"z and y must be arrays of numbers, got {attn.describe(z)} and "
                         f"{attn.describe(y)}") from None
    if z.shape != y.shape or not z.size:
        raise ValueError(f"z and y must be arrays of one non-empty shape, got {z.shape} and "
                         f"{y.shape}")
    return float(np.mean((z > 0) == (y > 0)))


def _attention_on_support(params, cfg, X, S):
    """Mean over samples and heads of the [CLS] attention mass on S; the mean weight [T]; and
    each head's mean weight [T+1, H] (fast.cls_attention_mean: one forward for all three)."""
    A, by_head = fast.cls_attention_mean(params, cfg, X)
    return float(A[S].sum()), A[:-1], by_head


def _summarise(o, task, params, model, train, test, losses, seconds):
    """The result dict of a run: accuracies, attention on S, the [CLS]'s top positions, params."""
    cfg = model.cfg
    r = dict(model=o["model"], task=o["task"], T=o["T"], s=o["s"], m=o["m"], seed=o["seed"],
             loss=losses[-1] if losses else float("nan"), losses=losses,
             train_acc=accuracy(_chunked(model, params, train[0]), train[1]),
             test_acc=accuracy(_chunked(model, params, test[0]), test[1]),
             attn_on_S=float("nan"), S=task.S.tolist(), top_attended=[], steps=o["steps"],
             seconds=seconds, params=params, cfg=cfg, pos_overlap=float("nan"))
    if cfg:
        mass, A, by_head = _attention_on_support(params, cfg, test[0][:200], task.S)
        r.update(attn_on_S=mass, top_attended=np.sort(np.argsort(A)[::-1][:o["s"]]).tolist(),
                 pos_overlap=position_overlap(params["E_pos"], task.S))
        r.update(best_head(by_head, task.S))
    return r


def best_head(A, S):  # A [T+1, H]: each head's mean [CLS] attention -> dict
    """The head whose [CLS] attention puts the most mass on S, its mass there and its top s
    positions; and A itself (cls_attention, [T+1, H], for the plot). Averaging over heads can
    hide a head that found S behind heads that attend elsewhere."""
    attn.check_array("A", A, "f", lambda s: len(s) == 2 and s[0] >= 2,
                     "a float array [T+1, heads] of [CLS] attention")
    S = data.check_support(S, len(A) - 1, len(S) if np.ndim(S) == 1 else -1)
    on_S = A[S].sum(0)                                                # [H]
    h = int(np.argmax(on_S))
    top = np.sort(np.argsort(A[:-1, h])[::-1][:len(S)]).tolist()
    return dict(best_head=h, best_head_on_S=float(on_S[h]), best_head_top=top, cls_attention=A)


LOSS_LOW = 0.01        # a training loss below this has fit its set; a jump is back above 10x this


def over_the_run(losses, logged, label, steps):
    """What the last step hides: the best accuracy at the logged steps (`logged`: dicts with
    step and acc, measured on the `label` set, "test", or "val" with early stopping) and its
    step, and the first jump of the training loss above 10 * LOSS_LOW after it had fallen below
    LOSS_LOW (losses: this session's, the last at step `steps`; None: none). Nothing here
    chooses anything: the outcome stays the last step's."""
    try:
        values = np.asarray(losses, dtype=np.float64)
    except (TypeError, ValueError):
        values = np.empty((0, 0))
    if values.ndim != 1 or isinstance(losses, (str, bytes)):
        raise attn.refuse("losses", losses, "a list or 1-D array of numbers", False)
    losses = values.tolist()
    if not (isinstance(logged, list) and all(isinstance(e, dict) and {"step", "acc"} <= set(e)
                                             for e in logged)):
        raise attn.refuse("logged", logged, "a list of dicts with step and acc", False)
    attn.check_choice("label", label, ("test", "val"))
    steps = data.check_number("steps", steps, data.INTS, max(len(losses), 1))
    first = steps - len(losses) + 1
    low = next((i for i, v in enumerate(losses) if v < LOSS_LOW), None)
    jump = None if low is None else next((i for i, v in enumerate(losses[low:], low)
                                          if v > 10 * LOSS_LOW), None)
    best = max(logged, key=lambda e: e["acc"], default=None)
    return dict(logged=logged, logged_on=label,
                best_logged_acc=best["acc"] if best else float("nan"),
                best_logged_step=best["step"] if best else None,
                loss_low_step=None if low is None else first + low,
                loss_jump_step=None if jump is None else first + jump)


def position_overlap(E_pos, S):
    """How alike the learned positional embeddings of S and of the other positions are: the
    largest cosine between E_pos[t], t in S, and E_pos[u], u not in S (1 = some other position
    looks exactly like one in S; near 0 = S stands apart). O(s T d). nan when S is everything."""
    attn.check_array("E_pos", E_pos, "f", lambda s: len(s) == 2 and s[0] >= 1,
                     "a float array [T, d] of positional embeddings")
    S = data.check_support(S, len(E_pos), len(S) if np.ndim(S) == 1 else -1)
    E = E_pos / np.maximum(np.linalg.norm(E_pos, axis=1, keepdims=True), 1e-30)
    rest = np.setdiff1d(np.arange(len(E)), S)
    if not len(rest):
        return float("nan")
    return float((E[S] @ E[rest].T).max())


def diverged_result(o):
    """The result of a run whose loss stopped being finite: a failed run, accuracies nan."""
    o = validate_options(o, name="o")
    return dict(model=o["model"], task=o["task"], T=o["T"], s=o["s"], m=o["m"], seed=o["seed"],
                train_acc=float("nan"), test_acc=float("nan"), attn_on_S=float("nan"),
                steps=o["steps"], seconds=float("nan"), diverged=True, best_step=0,
                pos_overlap=float("nan"))


class Diverged(Exception):
    pass


# ---------------------------------------------------------------- memory ----------------------

MEMORY_BUDGET = 0.5   # refuse runs that would take more than this share of physical memory
EVAL_CHUNK = 4096     # accuracies are computed this many samples at a time


def _run_bytes(o):
    """Rough peak bytes of one run: its data (bits, floats and labels), the parameters with their
    gradient and Adam's two moments, and the activations of one batch or evaluation chunk."""
    item = np.dtype(o["dtype"]).itemsize
    data_bytes = (o["m"] + o["n_test"] + o["val"]) * o["T"] * (1 + item + 8)
    B = max(min(o["batch"] or o["m"], o["m"]), min(EVAL_CHUNK, o["m"] + o["n_test"]))
    n_par = sum(math.prod(shape) for shape in run_shapes(o).values())
    if o["model"] == "transformer":
        act = fast.activation_bytes(model_config(o), B)
    else:
        act = 6 * B * (o["T"] + o["mlp"]) * item
    return data_bytes + 4 * n_par * item + act


def check_run_memory(o, flag=py_flag):
    """ValueError (one line) if a run would not fit in memory, before anything is allocated;
    flag names an option (run_options.py_flag or cli_flag)."""
    if not callable(flag):
        raise attn.refuse("flag", flag, "a function (name, value) -> text such as "
                          "run_options.py_flag or cli_flag", False)
    o = validate_options(o, flag, "o")
    need, limit = _run_bytes(o), MEMORY_BUDGET * (attn.physical_memory() or math.inf)
    if need > limit:
        sizes = ", ".join(flag(k, o[k]) for k in ("T", "m", "n_test", "val", "d", "mlp")
                          if k != "val" or o["val"])
        raise ValueError(f"a run with {sizes} needs about {need / 2**30:.1f} GiB; this machine "
                         f"allows {limit / 2**30:.1f} GiB: make one of them smaller")

# One .npz, no pickled objects (np.load(..., allow_pickle=False) never runs code): arrays
# "param/NAME", "adam_m/NAME", "adam_v/NAME", and 0-d arrays "adam_t", "step", "options" (JSON),
# "rng_order" (JSON of the minibatch generator's state), "format".


# ---------------------------------------------------------------- command line ----------------

def add_options(ap, names, defaults=None):
    """Add --NAME options from the OPTIONS table (help and default from the table, or from
    `defaults` where given)."""
    table = {name: (default, parse, text) for name, default, parse, text in OPTIONS}
    if not isinstance(ap, argparse.ArgumentParser):
        raise attn.refuse("ap", ap, "an argparse.ArgumentParser", False)
    if not (isinstance(names, (list, tuple)) and all(isinstance(n, str) and n in table
                                                     for n in names)):
        raise attn.refuse("names", names, f"a list of option names ({', '.join(table)})",
                          isinstance(names, (list, tuple)))
    if not (defaults is None or isinstance(defaults, dict) and set(defaults) <= set(table)):
        raise attn.refuse("defaults", defaults, "None or a dict of option defaults", False)
    for name in names:
        default, parse, text = table[name]
        default = (defaults or {}).get(name, default)
        kw = dict(choices=parse.choices) if hasattr(parse, "choices") else dict(type=parse)
        shown = "" if default is None else f" (default {default})"
        ap.add_argument("--" + name.replace("_", "-"), dest=name, default=default,
                        help=text + shown, **kw)


def train_parser():
    ap = cli.OneLineParser(prog="train.py", description=(
        "Train the one-block Transformer of Edelman et al. (2022) on an s-sparse Boolean task. "
        "With no options: the demo, 3-sparse AND at T=100 from 500 samples. The experiment: "
        "'python -m studies.sweep --help'."))
    add_options(ap, [name for name, *_ in OPTIONS])
    ap.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH")
    ap.add_argument("--plot", metavar="PATH", help="also draw the run (losses, accuracies, each "
                    "head's [CLS] attention at the end, S marked) into PATH (.png, .pdf, .svg); "
                    "needs matplotlib")
    ap.add_argument("--save", metavar="PATH", help="checkpoint (.npz) written every --save-every "
                    "steps, at the end and on Ctrl-C or SIGTERM")
    ap.add_argument("--save-every", dest="save_every", type=integer(1), default=100,
                    help="steps between checkpoints (default %(default)s)")
    ap.add_argument("--resume", metavar="PATH", help="continue from this checkpoint with its "
                    "options and its run's length; only --steps, --log-every and --save may "
                    "be given anew")
    ap.add_argument("--threads", type=integer(1), default=1,
                    help="BLAS threads (default %(default)s; see the README on speed)")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (isinstance(argv, list) and all(isinstance(v, str) for v in argv)):
        raise attn.refuse("argv", argv, "None or a list of strings (the command line)", False)
    cli.keep_freed_memory()
    ap = train_parser()
    a = ap.parse_args(argv)
    opts = vars(a).copy()
    out_json, plot, save, save_every, resume = (opts.pop(k) for k in (
        "json", "plot", "save", "save_every", "resume"))
    opts.pop("threads")
    ckpt = None
    if resume:
        ckpt = _resume_options(ap, argv, opts, resume)
        save = save or resume
    try:                                      # never over a file that is not this run's own
        cli.claim_outputs([(out_json, "summary", "--json"), (plot, "plot", "--plot"),
                           (save, "checkpoint", "--save", checkpoint_owner(resume))])
    except ValueError as e:
        ap.error(str(e))
    try:                                      # the door: every option checked, once
        o = validate_options(opts, cli_flag)
        check_run_memory(o, cli_flag)
    except ValueError as e:
        ap.error(str(e))
    at_end = bool(ckpt) and ckpt["step"] == o["steps"]
    print(f"{o['model']} on task {o['task']}  T={o['T']}  s={o['s']}  m={o['m']}  "
          f"steps={o['steps']}  lr={o['lr']}  wd={o['wd']}  d={o['d']}  heads={o['heads']}  "
          f"mlp={o['mlp']}  {o['dtype']}  seed={o['seed']}"
          + ((f"  (checkpoint at its last step {ckpt['step']}: evaluating it)" if at_end else
              f"  (resumed at step {ckpt['step']})") if ckpt else ""), flush=True)
    try:
        r = train_run(o, log=lambda line: print(line, flush=True), save=save,
                      save_every=save_every, resume=ckpt, curve=bool(plot))
    except Interrupted as e:
        print(_interrupted_message(e, o), file=sys.stderr)
        return e.code
    except (Diverged, ValueError) as e:       # ValueError: e.g. --data unambiguous, m too small
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    except MemoryError as e:
        sizes = " ".join(cli_flag(k, o[k]) for k in ("T", "m", "n_test", "val", "d", "mlp")
                         if k != "val" or o["val"])
        print(f"train.py: out of memory ({e}) in a run with {sizes}: make one of them smaller",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:               # only without --save: with it, Interrupted
        print("\ninterrupted (no --save given, so nothing was kept; add --save PATH to be "
              "able to resume)", file=sys.stderr)
        return 130
    _print_summary(r, o, save)
    if out_json:
        summary = {k: v for k, v in r.items() if k not in ("params", "cfg", "cls_attention")}
        cli.write_json(out_json, summary)          # strict JSON: NaN is written as null
    if plot:
        _plot_run(r, o, plot)
    return 0


def _resume_options(ap, argv, opts, resume):
    """--resume: the checkpoint read and checked, its options put into `opts` (the run's length
    too, unless --steps was typed); an option typed anew that contradicts it, or a checkpoint
    past the steps asked for, is the parser's one-line error. -> the checkpoint."""
    explicit = cli.explicit_options(ap, argv)
    try:
        ckpt = load_checkpoint(resume)
    except ValueError as e:
        ap.error(str(e))
    clash = [f"--{k.replace('_', '-')} {opts[k]} (checkpoint: {ckpt['options'][k]})"
             for k in RUN_KEYS if k in explicit and opts[k] != ckpt["options"][k]]
    if clash:
        ap.error(f"{resume} was made for another configuration: " + ", ".join(clash))
    opts.update(ckpt["options"])          # RUN_KEYS only; the length, unless typed:
    if "steps" not in explicit:
        if not ckpt["run_steps"]:
            ap.error(f"{resume} does not record its run's length (an older checkpoint): "
                     f"give --steps, the length to train it to")
        opts["steps"] = ckpt["run_steps"]
    if ckpt["step"] > opts["steps"]:
        ap.error(f"{resume} is already at step {ckpt['step']}; ask for at least that many "
                 f"with --steps")
    return ckpt


def _plot_run(r, o, path):
    """The run in one picture: the training loss at every step and the accuracies at the steps
    measured for it (r["curve"]: each of the first 10, then log-spaced, on a log step axis, so
    the early rise is drawn where it happens); each head's mean [CLS] attention over the T
    positions at the end, S and the uniform level 1/(T+1) marked. Every line in a legend."""
    plt = cli.pyplot_or_hint("rerun with --plot")
    if plt is None:
        return None
    panels = 2 if r["cfg"] else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7.0, 3.2 * panels), squeeze=False)
    ax = axes[0, 0]
    steps = np.arange(r["steps"] - len(r["losses"]) + 1, r["steps"] + 1)
    lines = ax.plot(steps, np.maximum(r["losses"], 1e-12), color="0.3", lw=1,
                    label="training loss (left axis)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    acc = ax.twinx()
    points = r.get("curve") or r["logged"]
    for key, label, style in (("train_acc", "train accuracy", "b.-"),
                              ("acc", f"{r['logged_on']} accuracy", "r.-")):
        lines += acc.plot([e["step"] for e in points], [e[key] for e in points], style, ms=3,
                          lw=0.8, label=label + " (right axis)")
    acc.set_ylim(0.4, 1.02)
    acc.set_ylabel("accuracy")
    acc.legend(lines, [line.get_label() for line in lines], loc="center left", fontsize=8)
    ax.set_title(f"{o['model']} on {o['task']}, T={o['T']}, s={o['s']}, m={o['m']}, "
                 f"seed={o['seed']}: test accuracy {r['test_acc']:.3f} at the end", fontsize=9)
    if r["cfg"]:
        ax = axes[1, 0]
        A = r["cls_attention"][:-1]                                   # [T, H]; [CLS] left out
        for h in range(A.shape[1]):
            best = h == r["best_head"]
            first_other = h == (1 if r["best_head"] == 0 else 0)
            ax.plot(A[:, h], lw=1.6 if best else 0.6, color="C3" if best else "0.6",
                    label=f"head {h} (most mass on S)" if best else
                    "the other heads" if first_other else None)
        ax.axhline(1 / (o['T'] + 1), color="k", ls="--", lw=0.8,
                   label=f"uniform attention, 1/(T+1) = {1 / (o['T'] + 1):.3f}")
        for i, t in enumerate(r["S"]):
            ax.axvline(t, color="C0", ls=":", lw=1, label=f"S = {r['S']}" if i == 0 else None)
        ax.set_xlabel("position t")
        ax.set_ylabel("[CLS] attention")
        ax.set_title(f"each head's [CLS] attention at the end, mean over {min(200, o['n_test'])} "
                     f"test samples", fontsize=9)
        ax.legend(fontsize=8)
    cli.save_figure(plt, fig, path)
    print(f"plot: {path}")
    return path


def _interrupted_message(e, o):
    """What an Interrupted run kept, and the command that goes on from it."""
    again = (f"  python train.py --resume {e.path}" +
             (f" --steps {o['steps']}" if o['steps'] != DEFAULTS["steps"] else ""))
    if not e.step:
        where = "before training started" if e.phase == "start" else "before a step was saved"
        return f"\n{e.word} {where}; nothing was saved in {e.path} yet"
    if e.phase == "evaluation" or (e.phase == "training" and e.step == o['steps']):
        when = "during the final evaluation" if e.phase == "evaluation" else "after the last step"
        return (f"\n{e.word} {when}; all {e.step} steps are saved in {e.path}. Evaluate and "
                f"report them with:\n{again}")
    if e.phase == "start":
        return (f"\n{e.word} before training went on; the checkpoint {e.path} is unchanged at "
                f"step {e.step}. Resume with:\n{again}")
    return (f"\n{e.word} after step {e.step}; checkpoint saved in {e.path}. Resume with:\n"
            f"{again}")


def _print_summary(r, o, save):
    ok = r["test_acc"] >= 0.99
    print(f"\ntest accuracy {r['test_acc']:.4f} on {o['n_test']} fresh samples "
          f"({'reaches' if ok else 'is below'} the 0.99 bar); train accuracy {r['train_acc']:.4f}")
    if o['val']:
        print(f"early stopping: the parameters of step {r['best_step']}, the lowest loss on "
              f"{o['val']} validation samples (checked every {o['val_every']} steps)")
    print(f"true support S         {r['S']}")
    if r["cfg"]:
        print(f"[CLS] attends most to  {r['top_attended']}  (mean over {o['heads']} heads: "
              f"{'found S' if r['top_attended'] == r['S'] else 'not S'}; mass on S "
              f"{r['attn_on_S']:.3f}, uniform {o['s'] / (o['T'] + 1):.3f})")
        print(f"head {r['best_head']} of {o['heads']} attends most to  {r['best_head_top']}  "
              f"(the most mass on S, {r['best_head_on_S']:.3f}: "
              f"{'found S' if r['best_head_top'] == r['S'] else 'not S'})")
    if r["logged"]:
        print(f"best {r['logged_on']} accuracy at the logged steps {r['best_logged_acc']:.4f} "
              f"(step {r['best_logged_step']}); the run is judged by its last step.")
    if r["loss_jump_step"]:
        print(f"the training loss fell below {LOSS_LOW} at step {r['loss_low_step']} and jumped "
              f"above {10 * LOSS_LOW} at step {r['loss_jump_step']}")
    ran = len(r["losses"])
    print(f"{r['steps']} steps" + (f" ({ran} of them in this session)" if ran < r["steps"] else "")
          + f" in {r['seconds']:.1f} s" + (f"; checkpoint {save}" if save else "")
          + f"\narithmetic: {arithmetic.words(r['arithmetic'])} on {r['arithmetic']['cpu']}",
          flush=True)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("train.py", main))
