"""train.py: CPU training of the sparse-AND Transformer of Edelman et al. (ICML 2022, Section 5).

    python train.py              the demo: learn 3-sparse AND at T=100 from 500 samples
    python train.py --help       every option
    python -m studies.trainer    the same loop with the studies' options (checkpoints, protocols)

Training (Section 5, as reproductions read it): Adam with bias correction, lr 1e-3, weight decay
1e-4 *added to the gradient* (L2, as torch.optim.Adam does, not decoupled AdamW) on every
parameter, full-batch logistic loss, 1000 steps, accuracy on fresh test samples.

The file reads top to bottom: the options (one table), what one seed draws, the model, the one
loop (train_loop) with its hooks, one run (train_run) and a stack of R runs trained at once
(train_stack), the result's measurements, the command line. Needs attn.py, data.py, optim.py and
fast.py, nothing else. Dimension names: B batch, T bits, d width, R runs. `o` is always a run's
options, a plain dict checked once at the door (check_options).
"""
import argparse
import collections
import json
import math
import os
import sys
import time
import types

import numpy as np

import attn
import data
import fast
import optim

OPTIONS = (  # name, default, type, allowed (the lowest value, or the choices), help
    ("task", "and", str, data.TASKS, "sparse Boolean function"),
    ("T", 100, int, 1, "context length: number of bits"),
    ("s", 3, int, 1, "sparsity: size of the support S"),
    ("m", 500, int, 1, "training samples"),
    ("n_test", 2000, int, 1, "fresh test samples"),
    ("steps", 1000, int, 1, "Adam steps"),
    ("lr", 1e-3, float, 0, "Adam learning rate"),
    ("wd", 1e-4, float, 0, "L2 weight decay added to the gradient (torch.optim.Adam style)"),
    ("batch", 0, int, 0, "minibatch size; 0 = full batch"),
    ("seed", 0, int, 0, "one seed fixes S, the data, the init and the minibatch order"),
    ("d", 64, int, 1, "model width"),
    ("heads", 16, int, 1, "attention heads; must divide d"),
    ("mlp", 64, int, 0, "MLP hidden units (0 = no MLP)"),
    ("dtype", "float32", str, ("float32", "float64"), "floating-point type"),
    ("log_every", 100, int, 0, "progress line every this many steps (0 = quiet)"),
)
DEFAULTS = {name: default for name, default, *_ in OPTIONS}
# The options of the studies' trainer alone (python -m studies.trainer --help lists them with
# these): train.py refuses each in one line that names the command where it lives.
STUDY_OPTIONS = ("model", "data", "optimizer", "beta2", "decay", "freeze", "ln1_gain", "qk_ball",
                 "ball_qk", "ball_vo", "ball_w", "ball_mlp", "qkv_init", "qkv_step", "clip",
                 "dropout", "val", "val_every", "pos_init", "plot", "save", "save_every", "resume")


# ---------------------------------------------------------------- what one seed fixes ----------

Streams = collections.namedtuple("Streams", "task train test init order")


def seeds_for(seed):
    """The independent generators one seed fixes, by name: task (the support S), train and test
    (the data), init, order (the minibatches). Each is the child of SeedSequence(seed) with its
    index in that order, so no stream changes another (a study may spawn further children)."""
    return Streams(*(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)))


Draw = collections.namedtuple("Draw", "task train test init order")


def draw_run(o):
    """What the seed fixes, as a Draw: task (the support S), train and test (each X [n, T] in the
    run's dtype, y [n] uint8), and the generators of the init and of the minibatch order."""
    streams = seeds_for(o["seed"])
    task = data.make_task(o["task"], o["T"], o["s"], streams.task)
    (Xtr, ytr), (Xte, yte) = task.sample(o["m"], streams.train), task.sample(o["n_test"],
                                                                             streams.test)
    dt = np.dtype(o["dtype"])
    return Draw(task=task, train=(Xtr.astype(dt), ytr), test=(Xte.astype(dt), yte),
                init=streams.init, order=streams.order)


def _memory_need(o):
    """About the most memory a run holds at once, in bytes: its samples (each T float64 uniforms,
    T bits and their copy in the run's dtype), its parameters (drawn in float64; with their
    gradient and Adam's two moments) and one step's activations (fast.activation_bytes)."""
    cfg, item = model_config(o), np.dtype(o["dtype"]).itemsize
    weights = sum(math.prod(shape) for shape in attn.param_shapes(cfg).values())
    return ((o["m"] + o["n_test"]) * o["T"] * (9 + item) + weights * (8 + 4 * item)
            + fast.activation_bytes(cfg, o["batch"] or o["m"]))


def _heaviest(o):
    """"k=value" of the option of T, m, n_test, d (with heads) and mlp whose default would shrink
    the run's memory most: the one a refusal for memory names."""
    k = min(("T", "m", "n_test", "d", "mlp"), key=lambda k: _memory_need(dict(
        o, **{k: DEFAULTS[k]}, heads=DEFAULTS["heads"] if k == "d" else o["heads"])))
    return f"{k}={o[k]}"


# ---------------------------------------------------------------- the model -------------------

def model_config(o):
    """attn.py's config of the Transformer that options `o` train (Section 5's block)."""
    return attn.default_config(T=o["T"], d=o["d"], heads=o["heads"], mlp=o["mlp"],
                               dtype=o["dtype"])


class Transformer:
    """The model a run trains: attn.py's config `cfg`, computed by fast.py (the exact [CLS]
    shortcut, one run or a stack). A full-batch run keeps the two versions of its bits, which
    never change (keep)."""

    def __init__(self, cfg):
        self.cfg, self.versions = cfg, None

    def keep(self, X):                 # the training set of every step: X [(R,) B, T]
        self.versions = fast.two_versions(X, np.dtype(self.cfg["dtype"]))

    def loss_and_grads(self, params, X, y, weights=None):  # -> loss ([R] for a stack), grads
        return fast.loss_and_grads(params, self.cfg, X, y, weights=weights,
                                   versions=self.versions)[:2]

    def logits(self, params, X):       # X [n, T] -> [n], or a stack's [R, n, T] -> [R, n]
        return fast.model_forward(params, self.cfg, X)[0]


def build_model(o, rng):
    """(params, model): Section 5's init (attn.init_params) drawn from rng, and the model."""
    cfg = model_config(o)
    return attn.init_params(cfg, rng), Transformer(cfg)


# ---------------------------------------------------------------- the loop --------------------

class Hooks:
    """What a study adds to training without touching the loop (as minGPT's trainer callbacks and
    PyTorch's optimizer hooks do). Each default is the reference's own step; studies/trainer.py
    overrides what its options need: the data drawn, the model built, Adam's state (frozen or
    rescaled parameters), the step (clipping before Adam, a projection after it), and what
    happens after each step (early stopping, a monitor, checkpoints). after_step returns True to
    end training at that step."""

    def draw(self, o):
        return draw_run(o)

    def build(self, o, rng):
        return build_model(o, rng)

    def adam(self, o, params):
        return optim.adam_init(params)

    def step(self, run, grads, o):
        optim.adam_step(run.params, grads, run.state, o["lr"], o["wd"])

    def after_step(self, run, step, loss):
        return False


def train_loop(run, o, hooks):
    """The training loop, for one run and for a stack of runs alike (run.R: None, or the number
    of runs; `run` from set_up_run or set_up_stack). Each step: the batch, the loss and its
    gradients, the finite check (one run; a stack's runs are judged by their losses at the end),
    Adam's step (hooks.step), the log, hooks.after_step. -> the number of steps run."""
    with np.errstate(over="ignore", invalid="ignore"):   # a blow-up is caught by the finite check
        for step in range(run.first, o["steps"] + 1):
            X, y, weights = draw_batch(run, o["batch"])
            loss, grads = run.model.loss_and_grads(run.params, X, y, weights)
            if run.R is None:
                loss = float(loss)
                if not math.isfinite(loss):
                    raise Diverged(loss, step)
            hooks.step(run, grads, o)
            run.losses.put(step - run.first, loss)
            if run.progress and run.progress.printed(step):
                log_progress(run, step, loss)
            if hooks.after_step(run, step, loss):
                return step
    return o["steps"]


class Diverged(Exception):
    """A run's loss stopped being finite: the step, and the option to make smaller."""

    def __init__(self, loss, step, advice="--lr"):
        super().__init__(f"loss is {loss} at step {step}: training diverged; try a smaller "
                         f"{advice}")
        self.loss, self.step = loss, step


def draw_batch(run, size):
    """The step's batch: X, y and the samples' weights (a stack's, [R, B]; None for one run, whose
    loss is the mean). The whole training set when size is 0 or >= m, else `size` rows of each
    run drawn without replacement by its own minibatch generator (run.order)."""
    if run.R is None:
        if not size or size >= len(run.X):
            return run.X, run.y, None
        idx = run.order.choice(len(run.X), size=size, replace=False)
        return run.X[idx], run.y[idx], None
    if not size:
        return run.X, run.y, run.w
    idx = [rng.choice(m, size=size, replace=False) for m, rng in zip(run.ms, run.order)]
    rows = np.arange(run.R)[:, None]
    return run.X[rows, idx], run.y[rows, idx], np.full((run.R, size), 1.0 / size, run.y.dtype)


class LossHistory:
    """The training loss at each step, [n] for one run or [n, R] for a stack, grown as the run
    goes (doubling its room), so a run asks for no memory for steps it has not reached."""

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


class Progress:
    """What a run logs: at step 1 and every log_every steps, the training loss, accuracy on the
    training set and on the `shown` set (labelled `label`), and the [CLS] attention mass on S.
    .logged keeps each printed line's numbers (dicts: step, loss, train_acc, acc, attn_on_S)."""

    def __init__(self, log, o, train, shown, S, label="test"):
        self.say, self.every = log, o["log_every"] if log else 0
        self.train, self.shown, self.S, self.label = train, shown, S, label
        self.logged = []

    def printed(self, step):
        return bool(self.every) and (step % self.every == 0 or step == 1)


def measure(run, step, loss):
    """The run now: loss, accuracy on the training set and on the shown set, attention on S."""
    p = run.progress
    tr = accuracy(chunked(run.model, run.params, p.train[0]), p.train[1])
    te = accuracy(chunked(run.model, run.params, p.shown[0]), p.shown[1])
    mass = (attention_on_support(run.params, run.model.cfg, p.shown[0][:200], p.S)[0]
            if run.model.cfg else np.nan)
    return dict(step=step, loss=loss, train_acc=tr, acc=te, attn_on_S=mass)


def log_progress(run, step, loss):
    """The progress line of this step (flushed by the caller's log, so it shows in a pipe too)."""
    e, p = measure(run, step, loss), run.progress
    p.logged.append(e)
    p.say(f"step {step:5d}  loss {loss:.4f}  train acc {e['train_acc']:.3f}  {p.label} acc "
          f"{e['acc']:.3f}  attn on S {e['attn_on_S']:.3f}  {time.perf_counter() - run.t0:6.1f}s")


# ---------------------------------------------------------------- one run, a stack of runs ----

def train_run(opts, log=print, hooks=None):
    """Train one model with options `opts` (keys of DEFAULTS; the rest take their defaults) and
    return the result dict (summarise). log: a function of one line, or None. A non-finite loss
    raises Diverged."""
    o, hooks = check_options(opts), _check_hooks(hooks, log)
    run = set_up_run(o, log, hooks)
    train_loop(run, o, hooks)
    return finish_run(o, run)


def set_up_run(o, log, hooks):
    """One run's namespace: the seed's draws, the model, its parameters in one buffer (for Adam's
    fast step) and Adam's state, the first step, the loss history and what is logged."""
    draw = hooks.draw(o)
    params, model = hooks.build(o, draw.init)
    params = optim.one_buffer(params)
    if not o["batch"] or o["batch"] >= o["m"]:
        model.keep(draw.train[0])       # full batch: the bits never change
    return types.SimpleNamespace(
        R=None, draw=draw, task=draw.task, X=draw.train[0], y=draw.train[1].astype(draw.train[0].dtype),
        labels=draw.train[1], test=draw.test, order=draw.order, model=model, params=params,
        state=hooks.adam(o, params), first=1, losses=LossHistory(),
        progress=Progress(log, o, draw.train, draw.test, draw.task.S), t0=time.perf_counter())


def finish_run(o, run):
    """The result of a trained run: summarise, with what the last step hides (over_the_run)."""
    losses = run.losses.values.tolist()
    r = summarise(o, run.task, run.params, run.model, (run.X, run.labels), run.test, losses,
                  time.perf_counter() - run.t0)
    return dict(r, **over_the_run(losses, run.progress.logged, run.progress.label, o["steps"]))


PER_RUN = ("m", "seed")       # what the runs of one stack may differ in (and nothing else)


def train_stack(runs, hooks=None):
    """Train the runs `runs` (option dicts that differ in m and seed only) as one stack; return
    one result dict per run, as train_run would. Every parameter gets a leading run axis and
    each step is one set of batched array operations, so numpy's per-call overhead is paid once
    for R runs. The runs stay independent: each run's numbers are those of the same run alone,
    up to float rounding. Shorter training sets are padded to the longest with weight-0 samples.
    A run whose loss stops being finite is reported as diverged (test_acc nan)."""
    if not (isinstance(runs, list) and runs):
        raise TypeError(f"runs must be a non-empty list of option dicts, got {runs!r:.60}")
    opts, hooks = [check_options(o, f"runs[{i}]") for i, o in enumerate(runs)], _check_hooks(hooks)
    differ = [k for k in DEFAULTS if k not in PER_RUN and any(o[k] != opts[0][k] for o in opts)]
    if differ:
        raise ValueError(f"the runs of a stack may differ in {PER_RUN} only, not in {differ}")
    run = set_up_stack(opts, hooks)
    ran = train_loop(run, opts[0], hooks)
    return stack_results(opts, run, ran, (time.perf_counter() - run.t0) / run.R)


def set_up_stack(opts, hooks):
    """A stack's namespace: each run's draws; the training sets padded to the longest (X [R, M, T]
    bits, y [R, M], weights w [R, M]: 1/m on a run's own samples, 0 on the padding); the stacked
    parameters [R, ...] in one buffer and Adam's state."""
    o, R, M = opts[0], len(opts), max(x["m"] for x in opts)
    dt = np.dtype(o["dtype"])
    X, y, w = np.zeros((R, M, o["T"]), bool), np.zeros((R, M), dt), np.zeros((R, M), dt)
    draws, params = [hooks.draw(x) for x in opts], []
    for r, (x, draw) in enumerate(zip(opts, draws)):
        X[r, :x["m"]], y[r, :x["m"]], w[r, :x["m"]] = *draw.train, 1.0 / x["m"]
        p, model = hooks.build(x, draw.init)
        params.append(p)
    P = optim.one_buffer({k: np.stack([p[k] for p in params]) for k in params[0]})
    if not o["batch"]:
        model.keep(X)
    return types.SimpleNamespace(
        R=R, draws=draws, X=X, y=y, w=w, ms=[x["m"] for x in opts],
        order=[draw.order for draw in draws], model=model, params=P, state=hooks.adam(o, P),
        first=1, losses=LossHistory(R), progress=None, t0=time.perf_counter())


def stack_results(opts, run, ran, seconds):
    """One result dict per run of a trained stack (a diverged run's accuracies nan)."""
    losses = run.losses.values[:ran]
    out = []
    for r, (x, draw) in enumerate(zip(opts, run.draws)):
        if not np.isfinite(losses[:, r]).all():
            out.append(dict(x, train_acc=np.nan, test_acc=np.nan, attn_on_S=np.nan, diverged=True,
                            seconds=np.nan, losses=losses[:, r].tolist(), steps_run=ran))
            continue
        p = {k: v[r] for k, v in run.params.items()}
        res = summarise(x, draw.task, p, run.model, draw.train, draw.test,
                        losses[:, r].tolist(), seconds)
        out.append(dict(res, diverged=False, steps_run=ran))
    return out


# ---------------------------------------------------------------- after training: results -----

EVAL_CHUNK = 4096     # accuracies are computed this many samples at a time


def chunked(model, params, X):  # X [n, T] -> [n], or a stack's [R, n, T] -> [R, n]
    """model.logits(params, X), EVAL_CHUNK rows at a time: an accuracy on 10^5 samples must not
    need the memory of a 10^5-row batch."""
    return np.concatenate([model.logits(params, X[..., i:i + EVAL_CHUNK, :])
                           for i in range(0, X.shape[-2], EVAL_CHUNK)], axis=-1)


def accuracy(z, y):
    """Share of logits z [n] on the side of their 0/1 labels y [n]."""
    y = np.asarray(y)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"y must hold labels 0 and 1, got {np.unique(y)[:4]}")
    return float(np.mean((np.asarray(z) > 0) == (y > 0)))


def attention_on_support(params, cfg, X, S):
    """Mean over samples and heads of the [CLS] attention mass on S; the mean weight [T]; and
    each head's mean weight [T+1, H] (fast.cls_attention_mean: one forward for all three)."""
    A, by_head = fast.cls_attention_mean(params, cfg, X)
    return float(A[S].sum()), A[:-1], by_head


def summarise(o, task, params, model, train, test, losses, seconds):
    """The result dict of a run: accuracies, attention on S, the [CLS]'s top positions, params."""
    r = dict(task=o["task"], T=o["T"], s=o["s"], m=o["m"], seed=o["seed"],
             loss=losses[-1] if losses else float("nan"), losses=losses,
             train_acc=accuracy(chunked(model, params, train[0]), train[1]),
             test_acc=accuracy(chunked(model, params, test[0]), test[1]),
             attn_on_S=float("nan"), S=task.S.tolist(), top_attended=[], steps=o["steps"],
             seconds=seconds, params=params, cfg=model.cfg)
    if model.cfg:
        mass, A, by_head = attention_on_support(params, model.cfg, test[0][:200], task.S)
        r.update(attn_on_S=mass, top_attended=np.sort(np.argsort(A)[::-1][:o["s"]]).tolist())
        r.update(best_head(by_head, task.S))
    return r


def best_head(A, S):  # A [T+1, H]: each head's mean [CLS] attention -> dict
    """The head whose [CLS] attention puts the most mass on S, its mass there and its top s
    positions; and A itself (cls_attention). Averaging over heads can hide a head that found S
    behind heads that attend elsewhere."""
    on_S = A[S].sum(0)                                                # [H]
    h = int(np.argmax(on_S))
    top = np.sort(np.argsort(A[:-1, h])[::-1][:len(S)]).tolist()
    return dict(best_head=h, best_head_on_S=float(on_S[h]), best_head_top=top, cls_attention=A)


LOSS_LOW = 0.01        # a training loss below this has fit its set; a jump is back above 10x this


def over_the_run(losses, logged, label, steps):
    """What the last step hides: the best accuracy at the logged steps (`logged`: dicts with
    step and acc, measured on the `label` set) and its step, and the first jump of the training
    loss above 10 * LOSS_LOW after it had fallen below LOSS_LOW (losses: this session's, the
    last at step `steps`). Nothing here chooses anything: the outcome stays the last step's."""
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


# ---------------------------------------------------------------- the options' door -----------

def check_options(opts, name="opts"):
    """`opts` with the defaults filled in, each value of its type and in its range, the runs'
    shapes consistent; else a one-line ValueError naming the value and what is allowed (`name`:
    the caller's word for opts)."""
    if not isinstance(opts, dict):
        raise TypeError(f"{name} must be a dict of options (keys of DEFAULTS), got {opts!r:.60}")
    unknown = sorted(set(opts) - set(DEFAULTS), key=str)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; allowed: {', '.join(DEFAULTS)}")
    o = dict(DEFAULTS, **opts)
    for key, _, kind, allowed, _ in OPTIONS:
        o[key] = _check_value(key, o[key], kind, allowed)
    top = float(np.finfo(o["dtype"]).max) ** 0.5       # Adam squares the decayed gradient wd p
    for bad, why in ((o["s"] > o["T"], f"s={o['s']} must be at most T={o['T']}"),
                     (o["d"] % o["heads"], f"heads={o['heads']} must divide d={o['d']}"),
                     (o["batch"] > o["m"], f"batch={o['batch']} must be at most m={o['m']}"),
                     (o["wd"] >= top, f"wd={o['wd']} must be below {top:.3g} in {o['dtype']}")):
        if bad:
            raise ValueError(why)
    need, have = _memory_need(o), os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have / 2:
        raise ValueError(f"{_heaviest(o)} is too large: the run would need about "
                         f"{need / 2**30:.1f} GiB, over half this machine's {have / 2**30:.1f} GiB")
    return o


def _check_hooks(hooks, log=None):  # -> hooks, or the reference's own Hooks() for None
    if not isinstance(hooks, (Hooks, type(None))):
        raise TypeError(f"hooks must be None or a train.Hooks, got {hooks!r:.60}")
    if not (log is None or callable(log)):
        raise TypeError(f"log must be None or a function of one line, got {log!r:.60}")
    return hooks or Hooks()


def _check_value(name, v, kind, allowed):  # -> v as `kind`, when of that kind and allowed
    if isinstance(allowed, tuple):
        ok, what = isinstance(v, str) and v in allowed, f"one of {', '.join(allowed)}"
    else:
        types = (int, np.integer) + ((float, np.floating) if kind is float else ())
        ok = isinstance(v, types) and not isinstance(v, bool) and allowed <= v <= sys.float_info.max
        what = f"{'an integer' if kind is int else 'a finite number'} >= {allowed}"
    if not ok:
        raise ValueError(f"{name} must be {what}, got {v!r:.60}")
    return v if isinstance(allowed, tuple) else kind(v)


# ---------------------------------------------------------------- the command line ------------

class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors in one line (the usage is in --help), and its help's failed write
    raised (argparse drops it): main ends a closed or full stdout as attn.stdout_lost says."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def print_help(self, file=None):
        (file or sys.stdout).write(self.format_help())
        (file or sys.stdout).flush()


class _StudyOption(argparse.Action):  # an option of STUDY_OPTIONS: where it lives, in one line
    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is an option of the studies' trainer: python -m "
                     f"studies.trainer {' '.join([option_string, *values])}")


def parser():
    ap = OneLineParser(prog="train.py", allow_abbrev=False, description=(
        "Train the one-block Transformer of Edelman et al. (2022) on an s-sparse Boolean task. "
        "With no options: the demo, 3-sparse AND at T=100 from 500 samples. The experiment: "
        "'python -m studies.sweep --help'; every study option: 'python -m studies.trainer "
        "--help'."))
    for name, default, kind, allowed, text in OPTIONS:
        ap.add_argument("--" + name.replace("_", "-"), dest=name, default=default, type=kind,
                        help=f"{text} (default {default})",
                        **dict(choices=allowed) if isinstance(allowed, tuple) else {})
    ap.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    for name in STUDY_OPTIONS:
        ap.add_argument("--" + name.replace("_", "-"), nargs="*", action=_StudyOption,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return ap


def print_summary(r, o):
    ok = r["test_acc"] >= 0.99
    print(f"\ntest accuracy {r['test_acc']:.4f} on {o['n_test']} fresh samples "
          f"({'reaches' if ok else 'is below'} the 0.99 bar); train accuracy {r['train_acc']:.4f}")
    print(f"true support S         {r['S']}")
    if r["cfg"]:                       # (a study's MLP has no attention: studies/trainer.py)
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
    kernel, threads = blas()
    print(f"{r['steps']} steps in {r['seconds']:.1f} s; arithmetic: {o['dtype']}, OpenBLAS "
          f"kernel {kernel}, {threads} BLAS thread{'s' * (threads != 1)}", flush=True)


def blas(threads=None):
    """(kernel, threads) of numpy's OpenBLAS, its thread count set first when `threads` is given,
    through OpenBLAS's own C functions: numpy loads it before any option is read and has no call
    of its own for this. The kernel decides a float32 run's bits (SkylakeX and Haswell round
    differently). ("not OpenBLAS", None) where numpy's BLAS is another library."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            lib = ctypes.CDLL(next(line.split()[-1] for line in f if "openblas" in line.lower()))
    except (OSError, StopIteration):
        return "not OpenBLAS", None
    for pre, post in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""), ("openblas_", "64_"),
                      ("openblas_", "")):
        get, put, core = (getattr(lib, f"{pre}{name}{post}", None) for name in (
            "get_num_threads", "set_num_threads", "get_corename"))
        if get and put and core:
            if threads is not None:
                put.argtypes = [ctypes.c_int]
                put(threads)
            get.restype, core.restype = ctypes.c_int, ctypes.c_char_p
            return core().decode(errors="replace"), get()
    return "not OpenBLAS", None


def _summary_path(path, size, text=None):
    """--json's PATH, checked before any training (text None: a probe) and again when the summary
    `text` is written (_write_new: whole, or not at all): a new file, or a summary train.py wrote
    before (never someone's file, a link, a folder or a pipe), in a folder that takes a new file
    of `size` bytes (its room reserved, where the system can)."""
    def ours():
        if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 1e8:
            return False
        with open(path, errors="replace") as f:
            try:
                old = json.load(f)
            except ValueError:
                return False
        return isinstance(old, dict) and {"task", "T", "m", "test_acc"} <= set(old)
    try:
        if not path or os.path.lexists(path) and not ours():
            raise ValueError("it is neither a new file nor a summary train.py wrote; give another")
        _write_new(path, text, size)
    except (OSError, ValueError) as e:
        raise ValueError(f"--json {path!r}: {getattr(e, 'strerror', None) or e}") from None
    return path


def _write_new(path, text, size):
    """`text` into a file created new and exclusively beside `path`, under a random name no user
    chose (so no one's file or link is ever opened), with room for `size` bytes reserved first,
    then renamed over `path`; text None: the file is removed (a probe: can the folder take it?).
    On an OSError no file is left behind and `path` is as it was."""
    tmp = os.path.join(os.path.dirname(path) or ".", f".train-{os.urandom(8).hex()}.tmp")
    f, done = open(tmp, "x"), False                 # "x": created new, or an OSError
    try:
        with f:
            if hasattr(os, "posix_fallocate"):      # a full disk or quota: ENOSPC or EDQUOT now
                os.posix_fallocate(f.fileno(), 0, size)
            f.write(text or "")
        if text is not None:
            os.replace(tmp, path)
            done = True
    finally:
        if not done:
            os.remove(tmp)


def _summary_bytes(o):  # at most what the summary of a run with options o takes, in bytes
    return min(4096 + 96 * o["s"] + 256 * o["steps"], 2**62)


def main(argv=None):
    """The command line (argv: None, the process's own): -> the exit code. A closed or full stdout
    ends as attn.stdout_lost says; every other failure is one line on stderr."""
    if not (argv is None or isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise TypeError(f"argv must be None or a list of strings (the command line), got {argv!r}")
    try:
        return _command(argv)
    except OSError as e:                # stdout's alone: --json's are one line in _command
        return attn.stdout_lost("train.py", e)


def _command(argv):
    ap = parser()
    a = vars(ap.parse_args(argv))
    out_json, threads = a.pop("json"), a.pop("threads")
    try:
        o = check_options(a)
        if out_json is not None:
            _summary_path(out_json, _summary_bytes(o))
    except ValueError as e:
        ap.error(str(e))
    if not 1 <= threads <= 1024:
        ap.error(f"--threads must be from 1 to 1024, got {threads}")
    blas(threads)
    print(f"transformer on task {o['task']}  T={o['T']}  s={o['s']}  m={o['m']}  "
          f"steps={o['steps']}  lr={o['lr']}  wd={o['wd']}  d={o['d']}  heads={o['heads']}  "
          f"mlp={o['mlp']}  {o['dtype']}  seed={o['seed']}", flush=True)
    try:
        r = train_run(o, log=lambda line: print(line, flush=True))
        print_summary(r, o)
        if out_json is not None:        # whole, or not at all: one line if it cannot be written
            text = json.dumps(_summary_of(r, o), indent=1)
            _summary_path(out_json, len(text), text)
    except (Diverged, ValueError, MemoryError) as e:      # MemoryError: numpy's own words
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    return 0


def _summary_of(r, o):
    """The JSON summary --json writes of result r of a run with options o: the result less the
    arrays, nan as null, and the arithmetic that made its bits (dtype, OpenBLAS kernel, threads)."""
    summary = {k: (None if isinstance(v, float) and math.isnan(v) else v)
               for k, v in r.items() if k not in ("params", "cfg", "cls_attention")}
    return dict(summary, arithmetic=dict(zip(("dtype", "kernel", "threads"), (o["dtype"],
                                                                                *blas()))))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ntrain.py: interrupted; nothing was saved", file=sys.stderr)
        sys.exit(130)
