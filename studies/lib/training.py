"""training.py (studies/lib): train.py's loop with every option a study needs, through its hooks.

train.py is the paper's loop and nothing more. What the studies vary enters it here through its
hooks (StudyHooks, a train.Hooks): the data drawn (the paper's unambiguous training sets, a
validation set), the model built (the MLP baseline, dropout, LN1's gain, W_Q, W_K and W_V at c
times their scale, zero positions), Adam's state (decay sets, frozen LayerNorms, rescaled steps),
the step (clipping before Adam, AdamW, beta2, the projection onto the norm ball after it) and what
follows each step (early stopping, a monitor, checkpoints, Ctrl-C that saves). The options are
run_options.py's (one table: train.py's rows and the studies'); checkpoints checkpoint.py's; the
arithmetic record arithmetic.py's. Every sweep and study trains through study_run (one run) and
study_stack (runs trained side by side), named apart from train.py's train_run and train_stack,
whose arguments differ. Top to bottom: one run, a stack, the hooks, the set-up, the draws and the
model, the results, memory. The command `python -m studies.trainer` is studies/trainer.py.
"""
import collections
import math
import os
import signal
import time
import types

import numpy as np

import attn
import fast
import optim
import theory
import train

from studies.lib import arithmetic, baseline, checkpoint, checks, cli, hypotheses, symmetry
from studies.lib.checkpoint import (Interrupted, StopRequests, check_checkpoint, checkpoint_owner,
                                    restore, same_path)
from studies.lib.run_options import (RUN_KEYS, attention_config, ball_radii, py_flag, run_shapes,
                                     validate_options)

Diverged = train.Diverged


# ---------------------------------------------------------------- one run, a stack of runs ----

def study_run(opts, log=print, save=None, save_every=0, resume=None, stop_after=None,
              curve=False):
    """Train one model with options `opts` (keys of run_options.DEFAULTS); return a result dict.

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
        raise checks.refuse("curve", curve, "True or False", False)
    o, save_every, stop_after, resume = _check_run_call(opts, log, save, save_every, resume,
                                                       stop_after)
    kept = resume["step"] if resume and save and same_path(save, resume.get("path")) else 0
    hooks = StudyHooks(o, save, save_every, stop_after, curve=curve)
    run, phase = None, "start"       # where a Ctrl-C that is not caught at a step boundary came
    try:
        run = _set_up_run(o, log, resume, hooks, kept)
        phase = "training"
        hooks.train(run, o)
        phase = "evaluation"
        return _finish_run(o, run)
    except (KeyboardInterrupt, cli.Terminated) as e:
        if not save:
            raise
        raise Interrupted(run.kept if run else kept, save, phase,
                          signal.SIGTERM if isinstance(e, cli.Terminated) else signal.SIGINT) \
            from None


PER_RUN_KEYS = ("m", "data", "seed")       # what the runs of one stack may differ in (and nothing else)


STACK_KEYS = tuple(k for k in RUN_KEYS if k not in PER_RUN_KEYS) + ("steps",)


def study_stack(runs, monitor=None):
    """Train the Transformer runs `runs` (option dicts that agree on STACK_KEYS) as one stack
    (train.py's set_up_stack and loop); return one result dict per run, as study_run would. The
    runs stay independent: each run's numbers are those of the same run alone, up to float
    rounding (test_stack_equals_single_runs). A run whose loss stops being finite is reported as
    diverged (test_acc nan); the others go on unaffected.

    monitor: None, or a callable with an int attribute `every` and a bool attribute `at_start`:
    every `every` steps (and at step 1 too when `at_start`) it is called as monitor(step, test_acc
    [R], loss [R], params) with each run's accuracy on its own test set and the stack's
    parameters after the step ({name: [R, ...]}, the live arrays: read them, never write), and
    the stack stops early when it returns True (each result's "steps_run" says where). The test
    set then only watches; nothing is chosen by it."""
    opts, o = _check_stack(runs)
    monitor = _check_monitor(monitor)
    hooks = StudyHooks(o, monitor=monitor)
    run = train.set_up_stack(opts, hooks)
    run.val = tuple(np.stack(a) for a in zip(*(d.val for d in run.draws))) if o["val"] else None
    run.best = run.val and _best_so_far(run.params, run.R)
    run.test = tuple(np.stack(a) for a in zip(*(d.test for d in run.draws))) if monitor else None
    run.t0 = time.perf_counter()
    ran = hooks.train(run, o)
    if run.val:
        _restore_best(run)
    return _stack_results(opts, run, ran, (time.perf_counter() - run.t0) / run.R)


# ---------------------------------------------------------------- the hooks ---------------------

class StudyHooks(train.Hooks):
    """train.py's hooks for a run's study options `o` (run_options): what is drawn and built, Adam's
    state and step, and after each step early stopping, the picture's points, a monitor, and the
    checkpoint and stop of save (Ctrl-C, SIGTERM, or stop_after: Interrupted)."""

    def __init__(self, o, save=None, save_every=0, stop_after=None, monitor=None, curve=False):
        self.o, self.save, self.save_every, self.stop_after = o, save, save_every, stop_after
        self.monitor, self.stop = monitor, None
        self.extra = frozenset(_curve_steps(o["steps"])) if curve else frozenset()

    def draw(self, o):
        return draw_study_data(o)

    def build(self, o, rng):
        return build_study_model(o, rng)

    def adam(self, o, params):
        return optim.adam_init(params, o["decay"], _frozen_parameters(o), _scaled_parameters(o))

    def step(self, run, grads, o):
        if o["clip"]:             # frozen parameters have no gradient to clip (torch's
            optim.clip_gradients(   # requires_grad=False): the norm is the others' alone
                {k: g for k, g in grads.items() if k not in run.state["frozen"]}, o["clip"],
                run.R)
        optim.adam_step(run.params, grads, run.state, o["lr"], o["wd"], b2=o["beta2"],
                        decoupled=o["optimizer"] == "adamw")
        if o["qk_ball"]:                  # training inside the norm ball (projected Adam)
            symmetry.project_qk_ball(run.params, run.model.cfg, qk_ball_radius(o))
        radii = ball_radii(o)
        if radii:                         # inside the capacity bound's class (projected Adam)
            _count_projection(run, symmetry.project_class_ball(run.params, run.model.cfg, radii),
                              radii)

    def train(self, run, o):
        """train.train_loop under StopRequests (Ctrl-C and SIGTERM end it after their step,
        checkpointed, when there is a checkpoint); the finite check's message names the option
        to make smaller and the last finite checkpoint. -> the number of steps run."""
        with StopRequests(bool(self.save), self.stop_after) as self.stop:
            try:
                ran = train.train_loop(run, o, self)
            except train.Diverged as e:
                kept = (f"; the last finite checkpoint is {self.save}"
                        if self.save and os.path.exists(self.save) else "")
                raise Diverged(e.loss, e.step, divergence_culprit(o) + kept) from None
        if self.stop.now:             # came between the last step's check and the handlers' return
            raise Interrupted(run.kept, self.save, signum=self.stop.signum)
        return ran

    def after_step(self, run, step, loss):
        o, stop, save = self.o, self.stop, self.save
        if run.val and (step % o["val_every"] == 0 or step == o["steps"]):
            _keep_if_best(run, step)                          # early stopping
        if run.progress and run.curve is not None and (step in self.extra or
                                                       run.progress.printed(step)):
            run.curve.append(run.progress.logged[-1] if run.progress.printed(step) else
                             train.measure(run, step, loss))
        m = self.monitor
        if m and (step % m.every == 0 or step == 1 and m.at_start) and m(
                step, _monitored_accuracies(run), run.losses.values[step - run.first], run.params):
            return True
        stopping = stop.after(step)                          # Ctrl-C or SIGTERM came
        if save and (stopping or step == o["steps"] or (self.save_every and
                                                        step % self.save_every == 0)):
            if checkpoint.save_checkpoint(save, run.params, run.state, run.order, o, step):
                run.kept = step
        if stopping or stop.after(step):                     # ... or came while it saved
            raise Interrupted(step, save, signum=stop.signum)
        return False


def _check_monitor(monitor):
    """A stack's monitor: None, or a callable with an int attribute every >= 1 and a bool
    attribute at_start."""
    if monitor is None:
        return None
    every = getattr(monitor, "every", None)
    if not (callable(monitor) and isinstance(every, int) and not isinstance(every, bool)
            and every >= 1 and isinstance(getattr(monitor, "at_start", None), bool)):
        raise checks.refuse("monitor", monitor, "None or a callable with an integer attribute "
                            "every >= 1 and a bool attribute at_start", callable(monitor))
    return monitor


QK_BALL_EPS = 0.1     # the attention mass left off S at the construction's score gap


def qk_ball_radius(o):
    """The radius option qk_ball sets on each head's canonical ||W_QK||_F: qk_ball x R / (2 B^2),
    R = theory.paper_score_gap(T, s, 0.1) the construction's score gap and B^2 = d + 1 the
    canonical token norm's bound squared (LN1 without gain: ||x|| <= sqrt(d), the 1 the bias
    coordinate), so that the scores' range 2 ||W_QK||_2 B^2 reaches R at most at qk_ball = 1."""
    o = validate_options(o, name="o")
    return o["qk_ball"] * float(theory.paper_score_gap(o["T"], o["s"], QK_BALL_EPS)) / (
        2.0 * (o["d"] + 1))


def _count_projection(run, before, radii):
    """The ball's record of each run (run.ball, {name: [R]}): on how many steps the projection
    brought a norm back (a head's, for qk and vo: any head) and the largest norm / radius it met."""
    if getattr(run, "ball", None) is None:
        n = run.R or 1
        run.ball = {f"{k}_{x}": np.zeros(n, dtype) for k in radii
                    for x, dtype in (("active", int), ("worst", float))}
    for k, r in radii.items():
        ratio = before[k] / r
        worst = np.atleast_1d(ratio.max(-1) if k in ("qk", "vo") else ratio)
        run.ball[f"{k}_active"] += worst > 1
        run.ball[f"{k}_worst"] = np.fmax(run.ball[f"{k}_worst"], worst)


BALL_RECORD = tuple(f"{k}_{x}" for k in symmetry.CLASS_NORMS
                    for x in ("radius", "active", "worst", "final"))


def _ball_record(o, run, i=0):
    """Run i's record of the class's ball as a dict of BALL_RECORD, or None when its options hold
    no norm: for each norm of symmetry.CLASS_NORMS its radius (0: not held), the steps on which
    the projection acted, the largest norm / radius met before a projection (nan: not held), and
    the norm of the final parameters (the largest head's for qk and vo), measured whether held
    or not."""
    radii = ball_radii(o)
    if not radii:
        return None
    p = {k: v[i] for k, v in run.params.items()} if run.R else run.params
    final = symmetry.class_norms(p, run.model.cfg)
    out = {}
    for k in symmetry.CLASS_NORMS:
        held = k in radii and getattr(run, "ball", None) is not None
        out.update({f"{k}_radius": float(radii.get(k, 0.0)),
                    f"{k}_active": int(run.ball[f"{k}_active"][i]) if held else 0,
                    f"{k}_worst": float(run.ball[f"{k}_worst"][i]) if held else float("nan"),
                    f"{k}_final": float(np.max(final[k]))})
    return out


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
    loss = np.atleast_1d(_val_loss(train.chunked(run.model, run.params, run.val[0]), run.val[1]))
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


def _curve_steps(steps, n=60):
    """The picture's steps besides the printed ones: each of the first 10, then about n
    log-spaced ones up to `steps`, so the early rise is drawn where it happens (a set of at most
    n + 10 steps, whatever `steps` is)."""
    spaced = np.unique(np.geomspace(1, steps, n).round().astype(np.int64)).tolist()
    return set(range(1, min(10, steps) + 1)) | set(spaced)


# ---------------------------------------------------------------- setting up --------------------

def _check_run_call(opts, log, save, save_every, resume, stop_after):
    """study_run's arguments, before anything runs -> (options, save_every, stop_after, the
    checked checkpoint)."""
    o = validate_options(opts)
    save_every = checks.check_number("save_every", save_every, checks.INTS, 0)
    if stop_after is not None:
        stop_after = checks.check_number("stop_after", stop_after, checks.INTS, 1)
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


def _set_up_run(o, log, resume, hooks, kept):
    """One run's namespace (train.set_up_run, through the hooks), with what the studies add: the
    validation set shown instead of the test set (early stopping) and the best parameters so
    far, the checkpoint `resume` restored (parameters, Adam's state, the minibatch order), the
    picture's points, and the arithmetic of this session and of the checkpoint's."""
    run = train.set_up_run(o, log, hooks)
    val = run.draw.val
    if val:                      # with early stopping, the validation set is shown instead
        run.progress = train.Progress(log, o, run.draw.train, val, run.task.S, "val")
    run.val, run.best = val, val and _best_so_far(run.params)
    if resume is not None:
        run.first = restore(resume, o, run.params, run.state, run.order)
    now, before = arithmetic.record(o["dtype"]), resume and resume.get("arithmetic")
    if before and arithmetic.differences(before, now):
        if log:
            log(f"note: the checkpoint was made by {arithmetic.words(before)}; this session runs "
                f"{arithmetic.words(now)}, so the run will not replay bit for bit")
    else:
        before = None
    run.curve = [] if hooks.extra else None
    run.kept, run.arithmetic, run.before, run.t0 = kept, now, before, time.perf_counter()
    return run


def _best_so_far(params, R=None):
    """Early stopping's record: the lowest validation loss of each run, its step, its params."""
    return types.SimpleNamespace(loss=np.full(R or 1, np.inf), step=np.zeros(R or 1, int),
                                 params={k: v.copy() for k, v in params.items()})


def _check_stack(runs):
    """study_stack's runs, checked -> (their full options, the first's)."""
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
                         "study_run, not study_stack")
    for x in opts:
        check_run_memory(x)
    return opts, o


# ---------------------------------------------------------------- the draws and the model -------

StudyStreams = collections.namedtuple("StudyStreams", "task train test init order val dropout")


def study_streams(seed):
    """The independent generators one seed fixes, by name: train.seeds_for's five (task, train,
    test, init, order) and the studies' two, val (validation data) and dropout (masks): the
    children of SeedSequence(seed) with indices 5 and 6, so the seven never change one another."""
    seed = checks.check_number("seed", seed, checks.INTS, 0)
    extra = np.random.SeedSequence(seed).spawn(7)[5:]
    return StudyStreams(*train.seeds_for(seed), *(np.random.default_rng(s) for s in extra))


StudyDraw = collections.namedtuple("StudyDraw", "task train test init order val")


def draw_study_data(o):
    """What the seed fixes, drawn from independent streams, as a StudyDraw: train.draw_run's (task,
    train and test (each (X [n, T] in the run's dtype, y [n] uint8)), the init and order
    generators), the training set of the paper's protocol instead with data "unambiguous" (m
    samples of the train stream redrawn until one hypothesis fits them), and val (the validation
    set, or None without early stopping). o: options (validate_options fills in the defaults)."""
    o = validate_options(o, name="o")
    d, streams, dt = train.draw_run(o), study_streams(o["seed"]), np.dtype(o["dtype"])
    if o["data"] == "unambiguous":                 # ValueError when m cannot identify S
        Xtr, ytr = hypotheses.sample_unambiguous(d.task, o["m"], streams.train)
        d = d._replace(train=(Xtr.astype(dt), ytr))
    val = None
    if o["val"]:
        Xv, yv = d.task.sample(o["val"], streams.val)
        val = (Xv.astype(dt), yv)
    return StudyDraw(*d, val=val)


def _frozen_parameters(o):
    """The parameters option freeze holds at their init (optim.LAYERNORMS' gain and shift of one
    LayerNorm; none for "none")."""
    return optim.LAYERNORMS.get(o["freeze"], ())


def _scaled_parameters(o):
    """The parameters Adam steps as held at option qkv_step times their scale (optim.adam_init's
    scales): W_Q, W_K and W_V, or none at 1."""
    return None if o["qkv_step"] == 1.0 else dict.fromkeys(("W_Q", "W_K", "W_V"), o["qkv_step"])


class MLP:
    """baseline.py's MLP on the raw bits, as a model train.py's loop can run (no attention)."""
    cfg = None

    def keep(self, X):
        pass

    def loss_and_grads(self, params, X, y, weights=None):
        z, cache = baseline.forward(params, X)
        loss, c_loss = attn.logistic_forward(z, y)
        return loss, baseline.backward(attn.logistic_backward(1.0, c_loss), cache)

    def logits(self, params, X):
        return baseline.forward(params, X)[0]


class WithDropout(train.Transformer):
    """The Transformer trained with dropout: attn.py's reference path, masks from the seed's
    dropout stream (rng); evaluated without dropout, as train.Transformer."""

    def __init__(self, cfg, rng):
        super().__init__(cfg)
        self.dropout_rng = rng

    def keep(self, X):
        pass

    def loss_and_grads(self, params, X, y, weights=None):
        return attn.loss_and_grads(params, self.cfg, X, y, rng=self.dropout_rng)[:2]


def build_study_model(o, rng):
    """(params, model) for model o["model"], initialised from rng: the Transformer (train.py's,
    or WithDropout), LN1's gain at option ln1_gain and W_Q, W_K, W_V at qkv_init times their
    draw; or baseline.py's MLP (model.cfg None)."""
    o, rng = validate_options(o, name="o"), checks.check_rng(rng)
    if o["model"] == "mlp":
        return baseline.init(o["T"], o["mlp"], rng, o["dtype"]), MLP()
    cfg = attention_config(o)
    params = attn.init_params(cfg, rng)
    params["ln1_g"][...] = o["ln1_gain"]       # after the draws: every other weight the same
    if o["qkv_init"] != 1.0:
        for k in ("W_Q", "W_K", "W_V"):
            params[k] *= params[k].dtype.type(o["qkv_init"])
    model = WithDropout(cfg, study_streams(o["seed"]).dropout) if o["dropout"] else train.Transformer(cfg)
    return params, model


# ---------------------------------------------------------------- after the loop: results -------

def _finish_run(o, run):
    """The result of a trained run: early stopping's parameters put back, then train.py's
    summary with the studies' fields (the model, the positions' overlap, the arithmetic)."""
    if run.val:
        _restore_best(run)
    r = _more(o, train.finish_run(o, run))
    r["arithmetic"] = run.arithmetic
    if ball_radii(o):
        r["ball"] = _ball_record(o, run)
    if run.before is not None:                 # resumed from a checkpoint another arithmetic made
        r["arithmetic_before_resume"] = run.before
    if run.curve is not None:
        r["curve"] = run.curve
    if not run.val:
        return dict(r, best_step=o["steps"])
    best = int(run.best.step[0])               # the training loss of the parameters kept
    losses = r["losses"]
    return dict(r, best_step=best, loss=losses[best - run.first] if best >= run.first else
                r["loss"])


def _more(o, r):
    """A result of train.summarise with the model's name and the positions' overlap."""
    return dict(r, model=o["model"], pos_overlap=position_overlap(r["params"]["E_pos"], r["S"])
                if r["cfg"] else float("nan"))


def _stack_results(opts, run, ran, seconds):
    """One result dict per run of a trained stack (diverged runs as diverged_result)."""
    out = []
    for r, x in zip(train.stack_results(opts, run, ran, seconds), opts):
        if r["diverged"]:
            out.append(dict(diverged_result(x), losses=r["losses"]))
            continue
        i = len(out)
        out.append(dict(_more(x, r), best_step=int(run.best.step[i]) if run.val else ran,
                        **({"ball": _ball_record(x, run, i)} if ball_radii(x) else {})))
    return out


def _monitored_accuracies(run):
    """For a stack's monitor: each run's accuracy on its own test set, [R]."""
    Xte, yte = run.test
    return np.mean((train.chunked(run.model, run.params, Xte) > 0) == (yte > 0), axis=-1)


def position_overlap(E_pos, S):
    """How alike the learned positional embeddings of S and of the other positions are: the
    largest cosine between E_pos[t], t in S, and E_pos[u], u not in S (1 = some other position
    looks exactly like one in S; near 0 = S stands apart). O(s T d). nan when S is everything."""
    checks.check_array("E_pos", E_pos, "f", lambda s: len(s) == 2 and s[0] >= 1,
                     "a float array [T, d] of positional embeddings")
    S = checks.check_support(S, len(E_pos), len(S) if np.ndim(S) == 1 else -1)
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


# ---------------------------------------------------------------- memory ------------------------

def keep_freed_memory():
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the system.

    A training step allocates the same large arrays every time; by default glibc serves each with
    fresh pages from the kernel (mmap) and hands them back when freed, so every step pays for
    zero-filling and page faults. Raising the mmap threshold to its maximum (32 MiB) and the trim
    threshold makes the heap reuse them. Returns whether it applied: on other C libraries (macOS,
    musl) nothing happens and training is only slower. The numbers computed are the same."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
                    and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


MEMORY_BUDGET = 0.5   # refuse runs that would take more than this share of physical memory


def _study_run_bytes(o):
    """Rough peak bytes of one run: its data (bits, floats and labels), the parameters with their
    gradient and Adam's two moments, and the activations of one batch or evaluation chunk."""
    item = np.dtype(o["dtype"]).itemsize
    data_bytes = (o["m"] + o["n_test"] + o["val"]) * o["T"] * (1 + item + 8)
    B = max(min(o["batch"] or o["m"], o["m"]), min(train.EVAL_CHUNK, o["m"] + o["n_test"]))
    n_par = sum(math.prod(shape) for shape in run_shapes(o).values())
    if o["model"] == "transformer":
        act = fast.activation_bytes(attention_config(o), B)
    else:
        act = 6 * B * (o["T"] + o["mlp"]) * item
    return data_bytes + 4 * n_par * item + act


def check_run_memory(o, flag=py_flag):
    """ValueError (one line) if a run would not fit in memory, before anything is allocated;
    flag names an option (run_options.py_flag or cli_flag)."""
    if not callable(flag):
        raise checks.refuse("flag", flag, "a function (name, value) -> text such as "
                          "run_options.py_flag or cli_flag", False)
    o = validate_options(o, flag, "o")
    need, limit = _study_run_bytes(o), MEMORY_BUDGET * (checks.physical_memory() or math.inf)
    if need > limit:
        sizes = ", ".join(flag(k, o[k]) for k in ("T", "m", "n_test", "val", "d", "mlp")
                          if k != "val" or o["val"])
        raise ValueError(f"a run with {sizes} needs about {need / 2**30:.1f} GiB; this machine "
                         f"allows {limit / 2**30:.1f} GiB: make one of them smaller")
