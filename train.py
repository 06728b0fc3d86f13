"""train.py: CPU training of the sparse-AND Transformer, and the experiments (Edelman et al. 2022).

    python train.py              the demo: learn 3-sparse AND at T=100 from 500 samples
    python train.py --help       every option
    python train.py sweep ...    critical sample size m*(T), the paper's figure (Section 5)
    python train.py bench        time per training step, and GFLOP/s beside numpy's own matmul

Training (Section 5, as reproductions read it): Adam with bias correction, lr 1e-3, weight decay
1e-4 *added to the gradient* (L2, as torch.optim.Adam does, not decoupled AdamW) on every
parameter, full-batch logistic loss, 1000 steps, accuracy on fresh test samples.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import attn
import data

# ---------------------------------------------------------------- defaults (one screen) ------
DEFAULTS = dict(
    model="transformer",  # "transformer", or "mlp": the baseline without attention
    task="and",      # data.TASKS
    T=100,           # context length: number of bits
    s=3,             # sparsity: size of the support S
    m=500,           # training samples
    n_test=2000,     # fresh test samples
    steps=1000,      # Adam steps
    lr=1e-3,         # Adam learning rate
    wd=1e-4,         # L2 weight decay added to the gradient (torch.optim.Adam style)
    batch=0,         # minibatch size; 0 = full batch
    seed=0,          # one seed fixes S, the data, the init and the minibatch order
    d=64,            # model width
    heads=16,        # attention heads
    mlp=64,          # MLP hidden units (0 = no MLP); also the baseline's hidden width
    dtype="float32",  # float32 or float64
    log_every=100,   # progress line every this many steps (0 = quiet)
)


# ---------------------------------------------------------------- the optimiser -------------

def adam_init(params):
    return dict(t=0, m={k: np.zeros_like(v) for k, v in params.items()},
                v={k: np.zeros_like(v) for k, v in params.items()})


def adam_step(params, grads, state, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step in place (Kingma & Ba, with bias correction); g <- g + wd * param first."""
    state["t"] += 1
    t = state["t"]
    c1, c2 = 1.0 - b1 ** t, 1.0 - b2 ** t
    for k, p in params.items():
        g = grads[k] + wd * p if wd else grads[k]
        m, v = state["m"][k], state["v"][k]
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * (g * g)
        p -= (lr / c1) * m / (np.sqrt(v / c2) + eps)


# ---------------------------------------------------------------- one training run ----------

def seeds_for(seed):
    """Independent generators for the task (support S), training data, test data, init, order."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]


def accuracy(z, y):
    return float(np.mean((z > 0) == (y > 0)))


def attention_on_support(params, cfg, X, S):
    """Mean over samples and heads of the [CLS] attention mass on S; and the mean weight [T]."""
    A = attn.cls_attention_mean(params, cfg, X)[:-1]                     # [T]
    return float(A[S].sum()), A


def validate_options(opts):
    """ValueError (one line naming the value and what is allowed) for any bad run option."""
    unknown = sorted(set(opts) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    o = dict(DEFAULTS, **opts)
    for key, lo in (("T", 1), ("s", 1), ("m", 1), ("n_test", 1), ("steps", 1), ("batch", 0),
                    ("seed", 0), ("d", 1), ("heads", 1), ("mlp", 0), ("log_every", 0)):
        v = o[key]
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{key} must be an integer >= {lo}, got {v!r}")
    for key, lo_ok in (("lr", False), ("wd", True)):
        v = o[key]
        if (not isinstance(v, (int, float, np.floating)) or isinstance(v, bool)
                or not np.isfinite(v) or v < 0 or (v == 0 and not lo_ok)):
            raise ValueError(f"{key} must be a finite number {'>= 0' if lo_ok else '> 0'}, "
                             f"got {v!r}")
    for key, allowed in (("model", ("transformer", "mlp")), ("task", data.TASKS),
                         ("dtype", ("float32", "float64"))):
        if o[key] not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {o[key]!r}")
    problem = check_options(o)
    if problem:
        raise ValueError(problem)
    return o


def build_model(o, rng):
    """(params, loss_and_grads(params, X, y), logits(params, X), cfg) for model o["model"]."""
    if o["model"] == "mlp":
        params = attn.baseline_init(o["T"], o["mlp"] or 64, rng, o["dtype"])

        def loss_and_grads(p, X, y):
            z, cache = attn.baseline_forward(p, X)
            loss, c_loss = attn.logistic_forward(z, y)
            return loss, attn.baseline_backward(attn.logistic_backward(1.0, c_loss), cache)
        return params, loss_and_grads, lambda p, X: attn.baseline_forward(p, X)[0], None
    cfg = attn.default_config(T=o["T"], d=o["d"], heads=o["heads"], mlp=o["mlp"],
                              dtype=o["dtype"])
    return (attn.init_params(cfg, rng), lambda p, X, y: attn.loss_and_grads(p, cfg, X, y)[:2],
            lambda p, X: attn.model_forward(p, cfg, X)[0], cfg)


# ---------------------------------------------------------------- checkpoints ---------------
# One .npz, no pickled objects (np.load(..., allow_pickle=False) never runs code): arrays
# "param/NAME", "adam_m/NAME", "adam_v/NAME", and 0-d arrays "adam_t", "step", "options" (JSON),
# "rng_order" (JSON of the minibatch generator's state), "format".

CKPT_FORMAT = "sparse-attention-checkpoint-v1"
RUN_KEYS = ("model", "task", "T", "s", "m", "n_test", "lr", "wd", "batch", "seed", "d", "heads",
            "mlp", "dtype")          # what a checkpoint must agree on to be resumed


def save_checkpoint(path, params, state, rng_order, opts, step):
    """Write atomically (a temporary file, then rename): a crash never leaves half a file."""
    arrays = {"format": np.array(CKPT_FORMAT), "step": np.array(step),
              "adam_t": np.array(state["t"]),
              "options": np.array(json.dumps({k: opts[k] for k in RUN_KEYS})),
              "rng_order": np.array(json.dumps(rng_order.bit_generator.state))}
    for k in params:
        arrays["param/" + k] = params[k]
        arrays["adam_m/" + k], arrays["adam_v/" + k] = state["m"][k], state["v"][k]
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def load_checkpoint(path, opts=None):
    """Read a checkpoint; ValueError (one line) if it is missing, truncated, not ours, or was made
    for other options than `opts` (compared on RUN_KEYS). Returns a dict."""
    if not os.path.isfile(path):
        raise ValueError(f"no checkpoint at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:
        raise ValueError(f"{path!r} is not a readable checkpoint (truncated or another kind of "
                         f"file: {type(e).__name__})") from None
    if arrays.get("format") is None or str(arrays["format"]) != CKPT_FORMAT:
        raise ValueError(f"{path!r} is not a checkpoint of train.py (no {CKPT_FORMAT!r} mark)")
    saved = json.loads(str(arrays["options"]))
    if opts is not None:
        check_same_configuration(saved, opts, repr(path))
    group = lambda pre: {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}
    return dict(params=group("param/"), m=group("adam_m/"), v=group("adam_v/"),
                t=int(arrays["adam_t"]), step=int(arrays["step"]), options=saved,
                rng_order=json.loads(str(arrays["rng_order"])))


def check_same_configuration(saved, opts, what="the checkpoint"):
    """ValueError naming every RUN_KEYS option on which a checkpoint differs from opts."""
    diff = [f"{k}={saved[k]!r} (not {opts[k]!r})" for k in RUN_KEYS if saved[k] != opts[k]]
    if diff:
        raise ValueError(f"{what} was made for another configuration: " + ", ".join(diff))


class Interrupted(Exception):
    """Training stopped by Ctrl-C at a step boundary; .step and .path say where it was saved."""

    def __init__(self, step, path):
        super().__init__(f"interrupted after step {step}; checkpoint {path}")
        self.step, self.path = step, path


class Diverged(Exception):
    pass


# ---------------------------------------------------------------- one training run ----------

MEMORY_BUDGET = 0.5   # refuse runs whose data would take more than this share of physical memory


def check_run_memory(o):
    """ValueError if the data of a run would not fit in memory (before anything is allocated)."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        phys = 8 << 30
    need = (o["m"] + o["n_test"]) * o["T"] * (1 + np.dtype(o["dtype"]).itemsize + 8)
    if need > MEMORY_BUDGET * phys:
        raise ValueError(f"T={o['T']} with m={o['m']} and n_test={o['n_test']} needs about "
                         f"{need / 2**30:.1f} GiB for the data; this machine allows "
                         f"{MEMORY_BUDGET * phys / 2**30:.1f} GiB: use a smaller T, m or n_test")


def train_run(opts, log=print, save=None, save_every=0, resume=None, stop_after=None):
    """Train one model with options `opts` (keys of DEFAULTS); return a result dict.

    save: checkpoint path, written every save_every steps, at the end, and on Ctrl-C (then
    Interrupted is raised). resume: a dict from load_checkpoint to continue from. stop_after:
    behave as if Ctrl-C came after that step (for tests). A non-finite loss raises Diverged and
    leaves the last (finite) checkpoint untouched.
    """
    import signal
    o = validate_options(opts)
    check_run_memory(o)
    r_task, r_train, r_test, r_init, r_order = seeds_for(o["seed"])
    task = data.make_task(o["task"], o["T"], o["s"], r_task)
    Xtr, ytr = task.sample(o["m"], r_train)
    Xte, yte = task.sample(o["n_test"], r_test)
    params, loss_and_grads, logits, cfg = build_model(o, r_init)
    dt = np.dtype(o["dtype"])
    Xtr_f, ytr_f, Xte_f = Xtr.astype(dt), ytr.astype(dt), Xte.astype(dt)
    state = adam_init(params)
    first = 1
    if resume is not None:
        check_same_configuration(resume["options"], o)
        for k in params:
            params[k][...] = resume["params"][k]
            state["m"][k][...], state["v"][k][...] = resume["m"][k], resume["v"][k]
        state["t"], first = resume["t"], resume["step"] + 1
        r_order.bit_generator.state = resume["rng_order"]
    batch = o["batch"] or o["m"]
    stop = {"now": False}
    old_handler = None
    if save:                                   # Ctrl-C: finish the step, save, then stop
        def on_sigint(signum, frame):
            stop["now"] = True
        try:
            old_handler = signal.signal(signal.SIGINT, on_sigint)
        except ValueError:                     # not the main thread: no handler
            old_handler = None
    t0 = time.perf_counter()
    loss, losses = float("nan"), []
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # a blow-up is caught below
            for step in range(first, o["steps"] + 1):
                if batch < o["m"]:
                    idx = r_order.choice(o["m"], size=batch, replace=False)
                    Xb, yb = Xtr_f[idx], ytr_f[idx]
                else:
                    Xb, yb = Xtr_f, ytr_f
                loss, grads = loss_and_grads(params, Xb, yb)
                loss = float(loss)
                losses.append(loss)
                if not np.isfinite(loss):
                    kept = (f"; the last finite checkpoint is {save}"
                            if save and os.path.exists(save) else "")
                    raise Diverged(f"loss is {loss} at step {step}: training diverged; try a "
                                   f"smaller --lr (now {o['lr']}){kept}")
                adam_step(params, grads, state, o["lr"], o["wd"])
                if o["log_every"] and (step % o["log_every"] == 0 or step == 1):
                    tr = accuracy(logits(params, Xtr_f), ytr)
                    te = accuracy(logits(params, Xte_f), yte)
                    mass = (attention_on_support(params, cfg, Xte[:200], task.S)[0] if cfg
                            else np.nan)
                    log(f"step {step:5d}  loss {loss:.4f}  train acc {tr:.3f}  test acc {te:.3f}  "
                        f"attn on S {mass:.3f}  {time.perf_counter() - t0:6.1f}s")
                if stop_after is not None and step == stop_after:
                    stop["now"] = True
                if save and (stop["now"] or step == o["steps"] or
                             (save_every and step % save_every == 0)):
                    if all(np.all(np.isfinite(v)) for v in params.values()):
                        save_checkpoint(save, params, state, r_order, o, step)
                if stop["now"]:
                    raise Interrupted(step, save)
    finally:
        if old_handler is not None:
            signal.signal(signal.SIGINT, old_handler)
    seconds = time.perf_counter() - t0
    r = dict(model=o["model"], task=o["task"], T=o["T"], s=o["s"], m=o["m"], seed=o["seed"],
             loss=loss, losses=losses, train_acc=accuracy(logits(params, Xtr_f), ytr),
             test_acc=accuracy(logits(params, Xte_f), yte), attn_on_S=float("nan"),
             S=task.S.tolist(), top_attended=[], steps=o["steps"], seconds=seconds,
             params=params, cfg=cfg)
    if cfg:
        mass, A = attention_on_support(params, cfg, Xte[:200], task.S)
        r.update(attn_on_S=mass, top_attended=np.sort(np.argsort(A)[::-1][:o["s"]]).tolist())
    return r


# ---------------------------------------------------------------- command line ---------------

class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (exit status 2), never a traceback."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def int_at_least(lo):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {text!r}")
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {v}")
        return v
    return parse


def positive_float(text, allow_zero=False):
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        what = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"must be a finite number {what}, got {text!r}")
    return v


def nonneg_float(text):
    return positive_float(text, allow_zero=True)


def add_model_options(ap):
    D = DEFAULTS
    ap.add_argument("--model", choices=("transformer", "mlp"), default=D["model"],
                    help="the paper's Transformer, or the baseline MLP on the bits "
                         "(default %(default)s)")
    ap.add_argument("--task", choices=data.TASKS, default=D["task"],
                    help="sparse Boolean function (default %(default)s)")
    ap.add_argument("--s", type=int_at_least(1), default=D["s"],
                    help="sparsity: size of the support S (default %(default)s)")
    ap.add_argument("--steps", type=int_at_least(1), default=D["steps"],
                    help="Adam steps (default %(default)s)")
    ap.add_argument("--lr", type=positive_float, default=D["lr"],
                    help="Adam learning rate (default %(default)s)")
    ap.add_argument("--wd", type=nonneg_float, default=D["wd"],
                    help="L2 weight decay added to the gradient (default %(default)s)")
    ap.add_argument("--n-test", dest="n_test", type=int_at_least(1), default=D["n_test"],
                    help="fresh test samples (default %(default)s)")
    ap.add_argument("--d", type=int_at_least(1), default=D["d"],
                    help="model width (default %(default)s)")
    ap.add_argument("--heads", type=int_at_least(1), default=D["heads"],
                    help="attention heads; must divide d (default %(default)s)")
    ap.add_argument("--mlp", type=int_at_least(0), default=D["mlp"],
                    help="MLP hidden units, 0 for none (default %(default)s)")
    ap.add_argument("--dtype", choices=("float32", "float64"), default=D["dtype"],
                    help="floating-point type (default %(default)s)")


def train_parser():
    ap = OneLineParser(prog="train.py", description=(
        "Train the one-block Transformer of Edelman et al. (2022) on an s-sparse Boolean task. "
        "With no options: the demo, 3-sparse AND at T=100 from 500 samples. Other commands: "
        "'python train.py sweep --help', 'python train.py bench --help'."))
    ap.add_argument("--T", type=int_at_least(1), default=DEFAULTS["T"],
                    help="context length, number of bits (default %(default)s)")
    ap.add_argument("--m", type=int_at_least(1), default=DEFAULTS["m"],
                    help="training samples (default %(default)s)")
    ap.add_argument("--batch", type=int_at_least(0), default=DEFAULTS["batch"],
                    help="minibatch size, 0 for full batch (default %(default)s)")
    ap.add_argument("--seed", type=int_at_least(0), default=DEFAULTS["seed"],
                    help="fixes S, data, init and order (default %(default)s)")
    ap.add_argument("--log-every", dest="log_every", type=int_at_least(0),
                    default=DEFAULTS["log_every"], help="progress every N steps (default %(default)s)")
    ap.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH")
    ap.add_argument("--save", metavar="PATH", help="checkpoint (.npz) written every --save-every "
                    "steps, at the end and on Ctrl-C")
    ap.add_argument("--save-every", dest="save_every", type=int_at_least(1), default=100,
                    help="steps between checkpoints (default %(default)s)")
    ap.add_argument("--resume", metavar="PATH", help="continue from this checkpoint; its "
                    "options are used (only --steps, --log-every and --save may change)")
    add_model_options(ap)
    return ap


def main_train(argv):
    ap = train_parser()
    a = ap.parse_args(argv)
    opts = vars(a).copy()
    out_json, save, save_every, resume = (opts.pop(k) for k in ("json", "save", "save_every",
                                                                 "resume"))
    ckpt = None
    if resume:
        explicit = explicit_options(ap, argv)
        try:
            ckpt = load_checkpoint(resume)
        except ValueError as e:
            ap.error(str(e))
        clash = [f"--{k.replace('_', '-')} {opts[k]} (checkpoint: {ckpt['options'][k]})"
                 for k in RUN_KEYS if k in explicit and opts[k] != ckpt["options"][k]]
        if clash:
            ap.error(f"{resume} was made for another configuration: " + ", ".join(clash))
        opts.update(ckpt["options"])
        if ckpt["step"] >= opts["steps"]:
            ap.error(f"{resume} is already at step {ckpt['step']}; ask for more with --steps")
        save = save or resume
    if save and os.path.exists(save) and save != resume:
        try:
            load_checkpoint(save)
        except ValueError:
            ap.error(f"--save {save} exists and is not a checkpoint; refusing to overwrite it")
    problem = (check_options(opts) or (out_json and check_writable(out_json, "--json"))
               or (save and check_writable(save, "--save")))
    if problem:
        ap.error(problem)
    try:
        check_run_memory(validate_options(opts))
    except ValueError as e:
        ap.error(str(e))
    o = argparse.Namespace(**opts)
    print(f"{o.model} on task {o.task}  T={o.T}  s={o.s}  m={o.m}  steps={o.steps}  lr={o.lr}  "
          f"wd={o.wd}  d={o.d}  heads={o.heads}  mlp={o.mlp}  {o.dtype}  seed={o.seed}"
          + (f"  (resumed at step {ckpt['step']})" if ckpt else ""))
    try:
        r = train_run(opts, save=save, save_every=save_every, resume=ckpt)
    except Interrupted as e:
        print(f"\ninterrupted after step {e.step}; checkpoint saved in {e.path}. Resume with:\n"
              f"  python train.py --resume {e.path}" +
              (f" --steps {o.steps}" if o.steps != DEFAULTS["steps"] else ""), file=sys.stderr)
        return 130
    except Diverged as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted (no --save given, so nothing was kept; add --save PATH to be "
              "able to resume)", file=sys.stderr)
        return 130
    ok = r["test_acc"] >= 0.99
    print(f"\ntest accuracy {r['test_acc']:.4f} on {o.n_test} fresh samples "
          f"({'reaches' if ok else 'is below'} the 0.99 bar); train accuracy {r['train_acc']:.4f}")
    print(f"true support S         {r['S']}")
    if r["cfg"]:
        print(f"[CLS] attends most to  {r['top_attended']}  "
              f"({'found S' if r['top_attended'] == r['S'] else 'not S'}; attention mass on S "
              f"{r['attn_on_S']:.3f}, uniform would be {o.s / (o.T + 1):.3f})")
    ran = len(r["losses"])
    print(f"{r['steps']} steps" + (f" ({ran} of them in this session)" if ran < r["steps"] else "")
          + f" in {r['seconds']:.1f} s" + (f"; checkpoint {save}" if save else ""))
    if out_json:
        summary = {k: v for k, v in r.items() if k not in ("params", "cfg")}
        with open(out_json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


def explicit_options(ap, argv):
    """The dests the user actually typed (parsing again with every default set to a marker)."""
    marker = object()
    ap2 = OneLineParser(add_help=False)
    for action in ap._actions:
        if action.option_strings and action.dest != "help":
            ap2.add_argument(*action.option_strings, dest=action.dest, default=marker,
                             type=action.type, choices=action.choices,
                             action="store_true" if action.nargs == 0 else "store")
    return {k for k, v in vars(ap2.parse_args(argv)).items() if v is not marker}


def check_options(o):
    """Cross-option checks argparse cannot do; returns one line, or None when all is well."""
    if o["s"] > o["T"]:
        return f"--s {o['s']} is larger than --T {o['T']}; s must be between 1 and T"
    if o["task"] == "majority" and o["s"] % 2 == 0:
        return f"--task majority needs an odd --s, got {o['s']}"
    if o["d"] % o["heads"]:
        return f"--heads {o['heads']} must divide --d {o['d']}"
    if o.get("batch", 0) > o.get("m", 1):
        return f"--batch {o['batch']} is larger than --m {o['m']}; use 0 for full batch"
    if o["task"] == "junta" and o["s"] > data.JUNTA_MAX_S:
        return f"--task junta keeps 2^s table rows: --s must be <= {data.JUNTA_MAX_S}, got {o['s']}"
    return None


def check_writable(path, what):
    """One line if `path` cannot be written (its folder is missing or read-only), else None."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{what} {path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{what} {path}: folder {folder} is not writable"
    if os.path.isdir(path):
        return f"{what} {path} is a folder; give a file name"
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "sweep":
        return main_sweep(argv[1:])
    if argv and argv[0] == "bench":
        return main_bench(argv[1:])
    return main_train(argv)


# ---------------------------------------------------------------- the sweep: m*(T) ----------
# The paper's figure (Section 5): for each T, the critical sample size m*(T) is the smallest m on
# the grid at which at least half of the seeds reach test accuracy >= 0.99 on fresh samples.
# Each seed fixes S, the data stream (the training set for m is the first m samples of the seed's
# stream, so larger m only adds samples), the test set and the init.

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


def drive(search, succeeds):
    """Run a search generator synchronously with succeeds(m) -> bool; return its answer."""
    gen = search
    try:
        m = next(gen)
        while True:
            m = gen.send(bool(succeeds(m)))
    except StopIteration as stop:
        return stop.value


def seed_outcome(grid, search, results):
    """Replay one seed's search over its saved runs {m: success}: ("done", critical m or inf when
    even the largest m failed) or ("unfinished", None) when the search still needs a run."""
    gen = {"bisect": bisect_search, "grid": grid_search}[search](grid)
    try:
        m = next(gen)
        while m in results:
            m = gen.send(bool(results[m]))
    except StopIteration as stop:
        return "done", (np.inf if stop.value is None else float(stop.value))
    return "unfinished", None


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


def fit(x, y):
    """Least squares y ~ a + b x; returns (a, b, R^2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    A = np.stack([np.ones_like(x), x], 1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    ss = np.sum((y - y.mean()) ** 2)
    return float(a), float(b), float(1 - np.sum((y - a - b * x) ** 2) / ss) if ss > 0 else 1.0


def read_rows(paths):
    """The finished runs in CSV files; a torn last line (a run killed mid-write) is skipped."""
    import csv
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
            a, b, r2 = fit(np.log(T_), m_)
            c, e, q2 = fit(T_, m_)
            fits.append(f"{model}: m* ~ {a:.1f} + {b:.1f} ln T (R^2 {r2:.3f});  "
                        f"m* ~ {c:.1f} + {e:.4f} T (R^2 {q2:.3f})  over T in {min(T_)}..{max(T_)}")
    if paper_comparable:
        Tp = sorted(PAPER_MSTAR)
        a, b, r2 = fit(np.log(Tp), [PAPER_MSTAR[t] for t in Tp])
        c, e, q2 = fit(Tp, [PAPER_MSTAR[t] for t in Tp])
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


def _sweep_worker(opts):
    """One training run of the sweep, in a worker process: the CSV row it produces. A diverged
    run is a failed run (test_acc nan), not the end of the sweep."""
    try:
        r = train_run(dict(opts, log_every=0))
    except Diverged:
        r = dict(opts, test_acc=float("nan"), train_acc=float("nan"), attn_on_S=float("nan"),
                 seconds=float("nan"))
    return {k: r[k] for k in ROW_FIELDS if k != "success"}


def sweep_parser():
    ap = OneLineParser(prog="train.py sweep", description=(
        "Critical sample size m*(T) of a sparse task (the paper's Section 5 figure). Runs are "
        "saved as they finish, one CSV row each, in OUT/runs*.csv; rerunning the same command "
        "resumes. Shards (--shard i/n) split the (model, T, seed) searches across machines; copy "
        "their CSVs into one OUT and run with --report to merge."))
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper",
                    help="paper: T=100..1100; extended: T=10..3000 (default %(default)s)")
    ap.add_argument("--Ts", type=int_list, help="comma-separated T values (overrides preset)")
    ap.add_argument("--seeds", type=int_at_least(1), help="seeds per T (preset: 10)")
    ap.add_argument("--models", type=model_list, default=["transformer"],
                    help="comma-separated: transformer,mlp (default transformer)")
    ap.add_argument("--search", choices=("bisect", "grid"), default="bisect",
                    help="bisect each seed's critical m on the grid (assumes success is monotone "
                         "in m), or run every grid m (default %(default)s)")
    ap.add_argument("--grid-min", dest="grid_min", type=int_at_least(1), default=8,
                    help="smallest m (default %(default)s)")
    ap.add_argument("--grid-max", dest="grid_max", type=int_at_least(1),
                    help="m at most this (default: transformer 600, 1500 in the extended preset; "
                         "mlp 30*max(T) capped at 20000)")
    ap.add_argument("--grid-ratio", dest="grid_ratio", type=positive_float, default=1.05,
                    help="ratio of consecutive grid sizes, in (1, 10] (default %(default)s)")
    ap.add_argument("--bar", type=positive_float, default=0.99,
                    help="success: test accuracy >= bar, in (0, 1] (default %(default)s)")
    ap.add_argument("--out", default=None, help="results folder (default results/PRESET)")
    ap.add_argument("--shard", type=shard_spec, default=(0, 1), help="i/n: run share i of n")
    ap.add_argument("--workers", type=int_at_least(1), default=os.cpu_count() or 1,
                    help="processes (default: the number of cores, %(default)s)")
    ap.add_argument("--report", action="store_true", help="only merge OUT/runs*.csv and report")
    add_model_options(ap)
    ap.set_defaults(steps=None, n_test=None)          # the preset's, unless given
    return ap


def main_sweep(argv):
    import glob
    ap = sweep_parser()
    a = ap.parse_args(argv)
    preset = PRESETS[a.preset]
    Ts = a.Ts or preset["T"]
    n_seeds = a.seeds or preset["seeds"]
    for key in ("steps", "n_test"):
        if getattr(a, key) is None:
            setattr(a, key, preset.get(key, DEFAULTS[key]))
    if not (0 < a.bar <= 1):
        ap.error(f"--bar must be in (0, 1], got {a.bar}")
    if not 1 < a.grid_ratio <= 10:
        ap.error(f"--grid-ratio must be in (1, 10], got {a.grid_ratio}")
    problem = check_options(dict(vars(a), T=min(Ts)))
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
            check_run_memory(dict(DEFAULTS, T=max(Ts), m=grids[model][-1], n_test=a.n_test,
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
    import csv
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, FIRST_COMPLETED, wait
    jobs = [(model, T, seed) for model in a.models for T in Ts for seed in range(n_seeds)]
    jobs = [j for k, j in enumerate(jobs) if k % shard[1] == shard[0]]
    search = bisect_search if a.search == "bisect" else grid_search
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
        gen = gens[job]
        try:
            m = gen.send(answer) if answer is not None else next(gen)
        except StopIteration:
            return None
        while (job[0], job[1], job[2], m) in done:          # resume: replay saved runs
            try:
                m = gen.send(bool(done[(job[0], job[1], job[2], m)]["success"]))
            except StopIteration:
                return None
        return m

    def record(job, m, row):
        nonlocal n_run
        row = dict(row, success=int(row["test_acc"] >= a.bar))   # nan (diverged) fails
        writer.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())
        done[(job[0], job[1], job[2], m)] = dict(row, success=bool(row["success"]))
        n_run += 1
        el = time.perf_counter() - t0
        print(f"[{n_run:4d}] {job[0]:11s} T={job[1]:<5d} seed={job[2]:<3d} m={m:<6d} "
              f"test acc {row['test_acc']:.4f} {'ok  ' if row['success'] else 'fail'} "
              f"{row['seconds']:6.1f}s   elapsed {el / 60:5.1f} min", flush=True)
        return bool(row["success"])

    try:
        queue = []
        for job in jobs:
            gens[job] = search(grids[job[0]])
            m = advance(job, None)
            if m is not None:
                queue.append((job, m))
        while queue or pending:
            while queue and (pool is None or len(pending) < 2 * a.workers):
                job, m = queue.pop(0)
                opts = dict(base, model=job[0], T=job[1], seed=job[2], m=m)
                if pool is None:
                    ok = record(job, m, _sweep_worker(opts))
                    m2 = advance(job, ok)
                    if m2 is not None:
                        queue.insert(0, (job, m2))
                else:
                    pending[pool.submit(_sweep_worker, opts)] = (job, m)
            if pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: f.exception() is not None):
                    job, m = pending.pop(fut)
                    if fut.exception() is not None:      # record the others first, then stop
                        raise RunFailed(f"run {job[0]} T={job[1]} seed={job[2]} m={m} failed: "
                                        f"{type(fut.exception()).__name__}: {fut.exception()}")
                    ok = record(job, m, fut.result())
                    m2 = advance(job, ok)
                    if m2 is not None:
                        queue.append((job, m2))
    except KeyboardInterrupt:
        print(f"\ninterrupted: {n_run} runs of this session are saved in {csv_path}; "
              f"rerun the same command to resume", file=sys.stderr)
        return 130
    except RunFailed as e:
        print(f"train.py sweep: {e}; the {n_run} runs finished before it are saved in "
              f"{csv_path}", file=sys.stderr)
        return 1
    finally:
        fh.close()
        if pool:
            pool.shutdown(wait=False, cancel_futures=True)
    print(f"sweep: {n_run} runs in {(time.perf_counter() - t0) / 60:.1f} min")
    return 0


class RunFailed(Exception):
    pass


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
    state = adam_init(p)
    times = []
    for i in range(n_steps + 2):                       # two warm-up steps
        t = time.perf_counter()
        loss, g, _ = attn.loss_and_grads(p, cfg, X, y, path)
        adam_step(p, g, state, 1e-3, 1e-4)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


def bench_parser():
    ap = OneLineParser(prog="train.py bench", description=(
        "Time one training step (m samples, full batch, the experiment's model) on the fast path "
        "and on the plain [CLS]-row path, per run (x steps), and GFLOP/s of the matrix products "
        "beside numpy's own matmul on this machine."))
    ap.add_argument("--Ts", type=int_list, default=[100, 1000, 3000], help="T values")
    ap.add_argument("--m", type=int_at_least(1), default=100, help="batch (default %(default)s)")
    ap.add_argument("--steps", type=int_at_least(1), default=1000,
                    help="steps per run, for the per-run time (default %(default)s)")
    ap.add_argument("--reference", action="store_true",
                    help="also time the plain [CLS]-row path (slow at large T)")
    return ap


def main_bench(argv):
    ap = bench_parser()
    a = ap.parse_args(argv)
    d, H, k = DEFAULTS["d"], DEFAULTS["heads"], DEFAULTS["mlp"]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
