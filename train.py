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
    mlp=64,          # MLP hidden units (0 = no MLP)
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
    A = attn.cls_attention(params, cfg, X).mean(axis=(0, 1))[:-1]       # [T]
    return float(A[S].sum()), A


def train_run(opts, log=print):
    """Train one model with options `opts` (keys of DEFAULTS); return a result dict."""
    o = dict(DEFAULTS, **opts)
    r_task, r_train, r_test, r_init, r_order = seeds_for(o["seed"])
    task = data.make_task(o["task"], o["T"], o["s"], r_task)
    Xtr, ytr = task.sample(o["m"], r_train)
    Xte, yte = task.sample(o["n_test"], r_test)
    cfg = attn.default_config(T=o["T"], d=o["d"], heads=o["heads"], mlp=o["mlp"],
                              dtype=o["dtype"])
    params = attn.init_params(cfg, r_init)
    dt = np.dtype(o["dtype"])
    Xtr_f, ytr_f, Xte_f = Xtr.astype(dt), ytr.astype(dt), Xte.astype(dt)
    state = adam_init(params)
    batch = o["batch"] or o["m"]
    t0 = time.perf_counter()
    loss = float("nan")
    for step in range(1, o["steps"] + 1):
        if batch < o["m"]:
            idx = r_order.choice(o["m"], size=batch, replace=False)
            Xb, yb = Xtr_f[idx], ytr_f[idx]
        else:
            Xb, yb = Xtr_f, ytr_f
        loss, grads, _ = attn.loss_and_grads(params, cfg, Xb, yb)
        loss = float(loss)
        if not np.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {step}; try a smaller --lr "
                                     f"(now {o['lr']})")
        adam_step(params, grads, state, o["lr"], o["wd"])
        if o["log_every"] and (step % o["log_every"] == 0 or step == 1):
            tr = accuracy(attn.model_forward(params, cfg, Xtr_f)[0], ytr)
            te = accuracy(attn.model_forward(params, cfg, Xte_f)[0], yte)
            mass, _ = attention_on_support(params, cfg, Xte[:200], task.S)
            log(f"step {step:5d}  loss {loss:.4f}  train acc {tr:.3f}  test acc {te:.3f}  "
                f"attn on S {mass:.3f}  {time.perf_counter() - t0:6.1f}s")
    seconds = time.perf_counter() - t0
    z_te = attn.model_forward(params, cfg, Xte_f)[0]
    mass, A = attention_on_support(params, cfg, Xte[:200], task.S)
    top = np.sort(np.argsort(A)[::-1][:o["s"]])
    return dict(task=o["task"], T=o["T"], s=o["s"], m=o["m"], seed=o["seed"],
                loss=loss, train_acc=accuracy(attn.model_forward(params, cfg, Xtr_f)[0], ytr),
                test_acc=accuracy(z_te, yte), attn_on_S=mass, S=task.S.tolist(),
                top_attended=top.tolist(), steps=o["steps"], seconds=seconds,
                params=params, cfg=cfg)


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


def main_train(argv):
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
    add_model_options(ap)
    a = ap.parse_args(argv)
    opts = vars(a).copy()
    out_json = opts.pop("json")
    problem = check_options(opts)
    if problem:
        ap.error(problem)
    print(f"task {a.task}  T={a.T}  s={a.s}  m={a.m}  steps={a.steps}  lr={a.lr}  wd={a.wd}  "
          f"d={a.d}  heads={a.heads}  mlp={a.mlp}  {a.dtype}  seed={a.seed}")
    r = train_run(opts)
    ok = r["test_acc"] >= 0.99
    print(f"\ntest accuracy {r['test_acc']:.4f} on {a.n_test} fresh samples "
          f"({'reaches' if ok else 'is below'} the 0.99 bar); train accuracy {r['train_acc']:.4f}")
    print(f"true support S         {r['S']}")
    print(f"[CLS] attends most to  {r['top_attended']}  "
          f"({'found S' if r['top_attended'] == r['S'] else 'not S'}; "
          f"attention mass on S {r['attn_on_S']:.3f}, uniform would be {a.s / (a.T + 1):.3f})")
    print(f"{r['steps']} steps in {r['seconds']:.1f} s")
    if out_json:
        summary = {k: v for k, v in r.items() if k not in ("params", "cfg")}
        with open(out_json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


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
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "sweep":
        return main_sweep(argv[1:])
    if argv and argv[0] == "bench":
        return main_bench(argv[1:])
    return main_train(argv)


def main_sweep(argv):
    raise SystemExit("sweep: not implemented yet")


def main_bench(argv):
    raise SystemExit("bench: not implemented yet")


if __name__ == "__main__":
    sys.exit(main())
