"""checkpoint.py (studies/lib): a run's checkpoint files, and the Ctrl-C that saves one.

    python -m studies.trainer --save run.npz ...  a checkpoint every --save-every steps, at the end,
                                             and on Ctrl-C or SIGTERM
    python -m studies.trainer --resume run.npz    the run goes on, bit for bit as if never stopped

One .npz, no pickled objects (np.load(..., allow_pickle=False) never runs code): arrays
"param/NAME", "adam_m/NAME", "adam_v/NAME", and 0-d arrays "adam_t", "step", "options" (JSON),
"rng_order" (JSON of the minibatch generator's state), "arithmetic" (JSON: the BLAS library,
kernel, threads, CPU and dtype that made it, arithmetic.record), "format". Top to bottom: writing and
reading a file, the one check of its contents (check_checkpoint), which file a run may replace,
putting a checkpoint back into a run, and the signals that stop a run at a step boundary
(StopRequests, Interrupted). The loop that uses them is train.py's, through studies/trainer.py's hooks.
"""
import json
import os
import signal

import numpy as np

from studies.lib import arithmetic, checks, cli, folder
from studies.lib.run_options import DEFAULTS, RUN_KEYS, run_shapes, validate_options

# ---------------------------------------------------------------- the file ---------------------



CKPT_FORMAT = "sparse-attention-checkpoint-v1"


def save_checkpoint(path, params, state, rng_order, opts, step):
    """Write atomically (cli.replace_atomically: a temporary of its own, then rename): a crash
    never leaves half a file, and no failure leaves the temporary behind. Skipped when a
    parameter is not finite, so the file on disk stays the last finite state. -> whether it was
    written."""
    _check_path("path", path)
    opts, step = validate_options(opts), checks.check_number("step", step, checks.INTS, 1)
    _check_state(params, state, rng_order)
    if not all(np.all(np.isfinite(v)) for v in params.values()):
        return False
    arrays = {"format": np.array(CKPT_FORMAT), "step": np.array(step),
              "adam_t": np.array(state["t"]),
              "options": np.array(json.dumps(dict({k: opts[k] for k in RUN_KEYS},
                                                  steps=opts["steps"]))),
              "rng_order": np.array(json.dumps(rng_order.bit_generator.state)),
              "arithmetic": np.array(json.dumps(arithmetic.record(opts["dtype"])))}
    for k in params:
        arrays["param/" + k] = params[k]
        arrays["adam_m/" + k], arrays["adam_v/" + k] = state["m"][k], state["v"][k]
    try:                            # a temporary no one else's, renamed over path
        cli.replace_atomically(path, lambda f: np.savez(f, **arrays))
    except OSError as e:            # a full disk, a folder gone read-only: say so, keep the old
        raise ValueError(f"cannot write the checkpoint {path} ({e.strerror or e}); the previous "
                         f"checkpoint, if any, is unchanged") from None
    return True


CKPT_FIELDS = ("format", "step", "adam_t", "options", "rng_order",   # and param/, adam_m/, adam_v/
               "arithmetic")      # what made it (arithmetic.record); older checkpoints lack it


def load_checkpoint(path, opts=None):
    """Read a checkpoint and check every field (check_checkpoint): ValueError, one line naming
    the file and the field, if it is missing, truncated, not ours, damaged or crafted in any
    field, or was made for other options than `opts` (compared on RUN_KEYS). Returns a dict:
    params, m, v (name -> array), t, step, options (the RUN_KEYS only: a checkpoint never says
    how long to train), rng_order, and the path it was read from."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise TypeError(f"path must be a file path (str), got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"path {path!r}: no checkpoint there")
    f = cli.open_regular(path, "checkpoint")     # a folder, a FIFO or a device: never opened
    try:
        with f, np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:
        raise ValueError(f"{path!r} is not a readable checkpoint (truncated or another kind of "
                         f"file: {type(e).__name__})") from None
    fmt = arrays.get("format")
    if fmt is None or fmt.shape != () or fmt.dtype.kind != "U" or str(fmt) != CKPT_FORMAT:
        raise ValueError(f"{path!r} is not a checkpoint of train.py (no {CKPT_FORMAT!r} mark)")
    where = repr(path)
    for k in arrays:
        if k not in CKPT_FIELDS and not k.startswith(("param/", "adam_m/", "adam_v/")):
            raise _damaged(where, k, "is not a field train.py writes")

    def scalar(k, kind):
        if k not in arrays:
            raise _damaged(where, k, "is missing")
        a = arrays[k]
        if a.shape != () or a.dtype.kind not in kind:
            raise _damaged(where, k, f"must be a single {'integer' if 'i' in kind else 'text'}, "
                                     f"got {_show(a)}")
        return a.item()

    def from_json(k):
        text = scalar(k, "U")
        try:
            return folder.parse_json(text)
        except ValueError:
            raise _damaged(where, k, "is not JSON") from None
    group = lambda pre: {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}
    ck = dict(params=group("param/"), m=group("adam_m/"), v=group("adam_v/"),
              t=scalar("adam_t", "iu"), step=scalar("step", "iu"), options=from_json("options"),
              rng_order=from_json("rng_order"), path=path,
              arithmetic=from_json("arithmetic") if "arithmetic" in arrays else None)
    ck = check_checkpoint(ck, where)
    if opts is not None:
        _check_same_configuration(ck["options"], validate_options(opts), where)
    return ck


def _show(a):
    text = repr(a)
    return text if len(text) <= 60 else text[:57] + "..."


def _damaged(where, field, problem):
    return ValueError(f"{where}: field {field!r} {problem}: the file is damaged or was not "
                      f"written by this train.py")


def check_checkpoint(ck, where="resume"):
    """The one check of a checkpoint's contents, for a file (load_checkpoint) and for a dict given
    to train_run(resume=...): step a positive integer and Adam's count equal to it; options a
    dict of valid values (validate_options) for a run that can be checkpointed; every parameter
    and both Adam moments present, of the options' dtype and shapes, finite (the second moment
    >= 0), no other; a minibatch generator state numpy's PCG64 accepts. ValueError (TypeError for
    a ck that is not a dict), one line naming `where` and the field; returns ck with the options
    reduced to RUN_KEYS, the numbers as ints, and run_steps: the length of the run that wrote it
    (None for a file that does not say)."""
    if not isinstance(where, str):
        raise checks.refuse("where", where, "a few words naming the checkpoint (a str)", False)
    if not isinstance(ck, dict):
        raise TypeError(f"{where} must be a checkpoint dict from checkpoint.load_checkpoint, got "
                        f"{type(ck).__name__}")
    names = dict(step="step", t="adam_t", options="options", rng_order="rng_order",
                 params="param/", m="adam_m/", v="adam_v/")
    missing = [names[k] for k in names if k not in ck]
    if missing:
        raise ValueError(f"{where}: field(s) {', '.join(missing)} missing: not a checkpoint dict "
                         f"from checkpoint.load_checkpoint")
    step, t = ck["step"], ck["t"]
    if not cli.is_integer(step) or step < 1:
        raise _damaged(where, "step", f"must be a positive integer, got {_show(step)}")
    if not cli.is_integer(t) or t != step:
        raise _damaged(where, "adam_t", f"must be an integer equal to the step {step}, got "
                                        f"{_show(t)}")
    if not isinstance(ck["options"], dict):
        raise _damaged(where, "options", f"must be a dict, got {type(ck['options']).__name__}")
    text = [k for k, v in ck["options"].items()      # JSON numbers stay numbers, names names
            if k in DEFAULTS and isinstance(v, str) != isinstance(DEFAULTS[k], str)]
    if text:
        raise _damaged(where, "options", f"holds a bad value ({text[0]} = "
                                         f"{ck['options'][text[0]]!r}, of the wrong type)")
    try:                                     # a key the file does not hold: its default
        o = validate_options(dict({k: DEFAULTS[k] for k in RUN_KEYS}, **ck["options"]))
    except ValueError as e:
        raise _damaged(where, "options", f"holds a bad value ({e})") from None
    if o["val"] or o["dropout"]:
        raise _damaged(where, "options", "ask for val or dropout, which train.py never saves")
    _check_arrays(ck, o, where)
    _check_frozen(ck["params"], o, where)
    if not isinstance(ck.get("arithmetic"), (dict, type(None))):
        raise _damaged(where, "arithmetic", f"must be a dict (arithmetic.record), got "
                                            f"{type(ck['arithmetic']).__name__}")
    try:
        np.random.PCG64().state = ck["rng_order"]
    except Exception:              # TypeError, ValueError, KeyError, OverflowError, ...
        raise _damaged(where, "rng_order", "is not a state numpy's PCG64 generator "
                                           "accepts") from None
    return dict(ck, options={k: o[k] for k in RUN_KEYS}, step=int(step), t=int(t),
                run_steps=o["steps"] if "steps" in ck["options"] else None)


def _check_arrays(ck, o, where):
    """check_checkpoint's part for the arrays: every parameter and both Adam moments of the model
    options `o` build, present, of its dtype and shape, finite (the second moment >= 0), no
    other; ValueError, one line naming `where` and the field."""
    names = dict(params="param/", m="adam_m/", v="adam_v/")
    shapes, dtype = run_shapes(o), np.dtype(o["dtype"])
    for part in ("params", "m", "v"):
        group = ck[part]
        if not isinstance(group, dict):
            raise _damaged(where, names[part], f"must be a dict of arrays, got "
                                               f"{type(group).__name__}")
        for k in sorted(set(group) - set(shapes), key=str):
            raise _damaged(where, names[part] + str(k), "is not a parameter of this model")
        for k, shape in shapes.items():
            a, field = group.get(k), names[part] + k
            if a is None:
                raise _damaged(where, field, "is missing")
            if not isinstance(a, np.ndarray):
                raise _damaged(where, field, f"must be an array, got {type(a).__name__}")
            if a.dtype != dtype:
                raise _damaged(where, field, f"has dtype {a.dtype}, not the options' {dtype}")
            if a.shape != shape:
                raise _damaged(where, field, f"has shape {a.shape}, not {shape} (T={o['T']}, "
                                             f"d={o['d']}, mlp={o['mlp']})")
            if not np.all(np.isfinite(a)):
                raise _damaged(where, field, "is not finite")
            if part == "v" and np.any(a < 0):
                raise _damaged(where, field, "is negative (Adam's second moment never is)")


def _check_frozen(params, o, where):
    """A LayerNorm the options freeze (freeze ln1 or lnf) holds its init in every entry: the gain
    ln1_gain (ln1) or 1 (lnf), the shift 0; a checkpoint whose frozen values say otherwise was
    made with other options or edited: ValueError naming `where` and the field."""
    if o["freeze"] == "none":
        return
    gain = o["ln1_gain"] if o["freeze"] == "ln1" else 1.0
    for name, value in ((o["freeze"] + "_g", gain), (o["freeze"] + "_b", 0.0)):
        off = params[name] != params[name].dtype.type(value)
        if off.any():
            raise _damaged(where, "param/" + name, f"holds {params[name][off].flat[0].item()!r} "
                           f"where freeze {o['freeze']} keeps it at its init {value} (other "
                           f"options, or edited)")


def same_path(a, b):
    """Whether two paths (or None) name one file."""
    for name, v in (("a", a), ("b", b)):
        if v is not None:
            _check_path(name, v)
    return a is not None and b is not None and cli.same_file(a, b)


def _check_path(name, v):
    if not (isinstance(v, (str, os.PathLike)) and not isinstance(v, bytes) and os.fspath(v)):
        raise checks.refuse(name, v, "a file path (a non-empty str)", False)


def _check_state(params, state, rng_order):
    """A run's parameters (a dict of float arrays), Adam's state (optim.adam_init's dict) and its
    minibatch generator, for a checkpoint written from them or restored into them."""
    if not (isinstance(params, dict) and params and all(
            isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in params.values())):
        raise checks.refuse("params", params, "a non-empty dict of float arrays", False)
    if not (isinstance(state, dict) and {"t", "m", "v"} <= set(state)
            and isinstance(state["m"], dict) and set(state["m"]) >= set(params)
            and isinstance(state["v"], dict) and set(state["v"]) >= set(params)):
        raise checks.refuse("state", state, "the dict optim.adam_init returned for params", False)
    if not isinstance(rng_order, np.random.Generator):
        raise checks.refuse("rng_order", rng_order, "the run's minibatch generator (a numpy "
                          "Generator)", False)


def checkpoint_owner(resume_path, cli_style=True):
    """cli.claim_output's `ours` for a checkpoint path: only the file the run was resumed from
    may be replaced; another run's checkpoint is named with its step and how to continue it."""
    if resume_path is not None:
        _check_path("resume_path", resume_path)
    if not isinstance(cli_style, (bool, np.bool_)):
        raise checks.refuse("cli_style", cli_style, "True or False", False)

    def ours(path):
        if same_path(path, resume_path):
            return True
        try:
            step = load_checkpoint(path)["step"]
        except ValueError:
            return False
        how = (f"--resume {path}, or give another --save path" if cli_style else
               f"resume=checkpoint.load_checkpoint({path!r}), or give another save path")
        return f"already holds a checkpoint at step {step}; continue it with {how}"
    return ours


def _check_same_configuration(saved, opts, what="the checkpoint"):
    """ValueError naming every RUN_KEYS option on which a checkpoint differs from opts."""
    diff = [f"{k}={saved[k]!r} (not {opts[k]!r})" for k in RUN_KEYS if saved[k] != opts[k]]
    if diff:
        raise ValueError(f"{what} was made for another configuration: " + ", ".join(diff))


def restore(ckpt, o, params, state, rng_order):
    """Load a checkpoint (checked by check_checkpoint) into the parameters, Adam state and
    minibatch generator; -> the next step (o["steps"] + 1 when it is at its last step already:
    nothing left to train, the run is evaluated)."""
    ckpt, o = check_checkpoint(ckpt, "ckpt"), validate_options(o, name="o")
    _check_state(params, state, rng_order)
    if set(params) != set(ckpt["params"]):
        raise ValueError(f"params must be the parameters of the checkpoint's model, got "
                         f"{sorted(params)}")
    _check_same_configuration(ckpt["options"], o)
    if ckpt["step"] > o["steps"]:
        raise ValueError(f"the checkpoint is already at step {ckpt['step']}; ask for at least "
                         f"{ckpt['step']} steps")
    for k in params:
        params[k][...] = ckpt["params"][k]
        state["m"][k][...], state["v"][k][...] = ckpt["m"][k], ckpt["v"][k]
    state["t"] = ckpt["t"]
    rng_order.bit_generator.state = ckpt["rng_order"]
    return ckpt["step"] + 1


# ---------------------------------------------------------------- stopping at a step boundary ---



class StopRequests:
    """Context: Ctrl-C (SIGINT) and SIGTERM are noted instead of killing the run, so the loop can
    finish its step, save and stop: after(step) says whether to stop after this step (also when
    step is `stop_after`, for tests). Off (signals act as usual) when enabled is False or outside
    the main thread."""

    def __init__(self, enabled=True, stop_after=None):
        if not isinstance(enabled, (bool, np.bool_)):
            raise checks.refuse("enabled", enabled, "True or False", False)
        if stop_after is not None:
            stop_after = checks.check_number("stop_after", stop_after, checks.INTS, 1)
        self.enabled, self.now, self.old, self.stop_after = enabled, False, {}, stop_after
        self.signum = signal.SIGINT         # the first signal that came (stop_after: Ctrl-C's)

    def __enter__(self):
        if self.enabled:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self.old[sig] = signal.signal(sig, self._request)
                except ValueError:                  # not the main thread
                    pass
        return self

    def _request(self, signum, frame):
        if not self.now:
            self.signum = signum
        self.now = True

    def after(self, step):
        if not (type(step) is int and 1 <= step < 2**62):
            step = checks.check_number("step", step, checks.INTS, 1, 2**62)
        self.now |= step == self.stop_after
        return self.now

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False


class Interrupted(Exception):
    """Training stopped by Ctrl-C or SIGTERM: at a step boundary (phase "training"), before step 1
    ("start") or during the final evaluation ("evaluation"). .step is the step the checkpoint
    .path holds (0: nothing saved yet), .phase where it stopped, .signum the signal (SIGINT or
    SIGTERM) and .code the command's exit status for it (130 or 143, as cli.one_line_errors)."""

    def __init__(self, step, path, phase="training", signum=signal.SIGINT):
        where = {"training": f"after step {step}", "start": "before training",
                 "evaluation": "during the final evaluation"}[phase]
        self.word = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
        super().__init__(f"{self.word} {where}; checkpoint {path} at step {step}" if step else
                         f"{self.word} {where}; nothing was saved yet")
        self.step, self.path, self.phase = step, path, phase
        self.signum, self.code = signum, 143 if signum == signal.SIGTERM else 130
