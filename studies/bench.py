"""bench.py (studies, a command): the training step's time beside the machine's own rate.

    python -m studies.bench                  the step at T = 100, 1000 and 10^4 (m = 100, full
                                             batch, float32, one BLAS thread): its time, a square
                                             GEMM of the same flops timed in turn with it, the
                                             share of the GEMM's rate the step reaches, a stack's
                                             time per run, the reference's; where the step's time
                                             goes; the peak memory of a step at T = 10^4, m = 600
    python -m studies.bench --help           every option

One process, one BLAS thread, the loop of train.py (train.train_loop: batch, loss and gradients,
Adam) on a run set up as `python train.py` sets it up. Each T is timed in rounds: a block of the
run's steps, the GEMM as many times, a block of the stack's steps, so a machine whose speed wanders
slows all three alike; each time printed is the median over the rounds.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.bench")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import os
import resource
import time
import tracemalloc

import numpy as np

import attn
import fast
import optim
import train

from studies.lib import harness, run_options, training
from studies.lib.cli import OneLineParser, int_list, integer
from studies.lib.workers import stack_size

Terminated = cli.Terminated        # SIGTERM arrived (cli.sigterm_raises): stop like Ctrl-C
STUDY_STACK = 16                   # the most runs a sweep stacks (its --stack default)


# ---------------------------------------------------------------- the step's flops and its GEMM --

def _step_flops(T, B, d, H, k):
    """The matrix-product flops of one training step on the fast path (forward + backward):
    every product of fast.py's step, counted as 2 n k m for an (n, k) @ (k, m) product."""
    R = 2 * T + 1                                      # two versions per position, plus [CLS]
    fwd = (2 * R * d * d + 2 * R * d * H + 2 * d * d       # values, scores rn @ (W_K q), query
           + 2 * R * H * d + 2 * B * H * d                 # E @ spread, Z @ spread
           + 2 * B * 2 * T * (H + d)                       # Xb @ [E | E V]
           + 2 * B * d * d + 2 * 2 * B * d * k + 2 * B * d)  # W_O, MLP, readout
    bwd = (4 * R * d * d + 4 * R * d * H + 4 * d * d       # each product's two gradients
           + 2 * B * 2 * T * (H + d)                       # Xb^T @ d[Z | N] (Xb needs none)
           + 4 * B * d * d + 2 * 4 * B * d * k + 2 * B * d)
    return fwd + bwd


def _square_gemm(flops, dtype):
    """(a, b, out) for a square product of about `flops` flops: n = (flops / 2)^(1/3)."""
    n = max(1, round((flops / 2) ** (1 / 3)))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    return a, b, np.empty((n, n), dtype)


# ---------------------------------------------------------------- runs, as train.py sets them up --

def _options(T, m, dtype, seed=0):
    return train.check_options(dict(T=T, m=m, n_test=1, steps=1, log_every=0, dtype=dtype,
                                    seed=seed))


def _set_up(T, m, dtype, R):
    """A run (R = 1) or a stack of R runs at T, m, full batch, with one step taken (the warm-up),
    and its options: the state of a run in `python train.py` or in a study's worker."""
    hooks = train.Hooks()
    o = _options(T, m, dtype)
    run = (train.set_up_run(o, None, hooks) if R == 1 else
           train.set_up_stack([_options(T, m, dtype, seed) for seed in range(R)], hooks))
    train.train_loop(run, o, hooks)
    return run, o, hooks


def _steps(run, o, hooks, n):
    """n more steps of train.train_loop -> seconds per step."""
    run.first, o["steps"] = 2, n + 1
    t = time.perf_counter()
    train.train_loop(run, o, hooks)
    return (time.perf_counter() - t) / n


def _gemm(a, b, out, n):  # -> seconds per product, n products
    t = time.perf_counter()
    for _ in range(n):
        np.matmul(a, b, out=out)
    return (time.perf_counter() - t) / n


def _reference_step(T, m, dtype, reps):
    """Seconds of one step on the reference's [CLS]-row path: attn.loss_and_grads, then Adam
    (the median of reps, after one warm-up step)."""
    o = _options(T, m, dtype)
    draw = train.draw_run(o)
    p = attn.init_params(train.model_config(o), draw.init)
    X, y = draw.train[0], draw.train[1]
    state, cfg, times = optim.adam_init(p), train.model_config(o), []
    for _ in range(reps + 1):
        t = time.perf_counter()
        _, g, _ = attn.loss_and_grads(p, cfg, X, y)
        optim.adam_step(p, g, state, o["lr"], o["wd"])
        times.append(time.perf_counter() - t)
    return float(np.median(times[1:]))


# ---------------------------------------------------------------- where a step's time goes --------

# Each part of the step by the functions that compute it (none calls another of the list).
PARTS = {
    "Xb @ [E|EV]": ("_mix", "_mix_backward"),    # the (B, 2T) product and its backward
    "2T+1 rows": (("_linear_forward", "V"), ("_linear_backward", "V")),  # the values' product
    "LayerNorms": ("_layernorm_forward", "_layernorm_backward"),
    "small products": ("_linear_forward", "_linear_backward"),            # q, W_O, the MLP
    "GELU": ("_gelu_forward", "_gelu_backward"),
    "Adam": ("adam_step",),
}


class _Parts:
    """Seconds spent in each of PARTS while it is installed (fast's and optim's functions wrapped
    in timers; a wrapper costs about a microsecond a call, within a percent of a step)."""

    def __init__(self):
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.saved = []

    def _wrap(self, module, name):
        f = getattr(module, name)
        roles = {spec: part for part, specs in PARTS.items() for spec in specs}

        at = {"_linear_forward": 4, "_linear_backward": 3}.get(name)   # its role argument

        def timed(*args, **kw):
            part = roles.get((name, args[at]), roles[name]) if at else roles[name]
            t = time.perf_counter()
            try:
                return f(*args, **kw)
            finally:
                self.seconds[part] += time.perf_counter() - t
        self.saved.append((module, name, f))
        setattr(module, name, timed)

    def __enter__(self):
        names = {spec[0] if isinstance(spec, tuple) else spec
                 for specs in PARTS.values() for spec in specs}
        for name in sorted(names):
            self._wrap(optim if name == "adam_step" else fast, name)
        self.saved.append((fast, "_ACTIVATIONS", fast._ACTIVATIONS))   # it holds the functions
        fast._ACTIVATIONS = {act: tuple(getattr(fast, f.__name__) for f in pair)
                             for act, pair in fast._ACTIVATIONS.items()}
        return self

    def __exit__(self, *exc):
        for module, name, f in reversed(self.saved):
            setattr(module, name, f)


def _breakdown(run, o, hooks, n):
    """Where n steps' time goes: {part: share of the step}, "rest" the step's other operations
    (exp, the scores, sums, residuals, the batch, the loss), and the allocation: minor page faults
    and system seconds per step (the kernel's share of a step, mostly fresh pages)."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    with _Parts() as parts:
        t = _steps(run, o, hooks, n)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    shares = {k: v / n / t for k, v in parts.seconds.items()}
    shares["rest"] = 1 - sum(shares.values())
    return shares, (r1.ru_minflt - r0.ru_minflt) / n, (r1.ru_stime - r0.ru_stime) / n


def _peak_memory(T, m, dtype):
    """Bytes of a full-batch run at T, m (tracemalloc, which sees numpy's arrays): the run as set
    up (its training set, parameters, Adam's moments, the step's kept arrays), the training set
    alone, and the most a step adds above that."""
    tracemalloc.start()
    try:
        run, o, hooks = _set_up(T, m, dtype, 1)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        _steps(run, o, hooks, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    data = run.X.nbytes + run.y.nbytes + run.labels.nbytes
    return held, data, peak - held


# ---------------------------------------------------------------- the command -------------------

def _parser():
    c = OneLineParser(prog="studies.bench", description=(
        "The training step's time (m samples, full batch, the experiment's model, one BLAS "
        "thread) beside a square GEMM of the same flops, a stack's and the reference's; where "
        "the step's time goes; a step's peak memory."))
    c.add_argument("--Ts", type=int_list, default=[100, 1000, 10000],
                   help="T values (default 100,1000,10000)")
    c.add_argument("--m", type=integer(1), default=100, help="samples, full batch (default 100)")
    c.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="the runs' dtype (default float32, the experiment's)")
    c.add_argument("--stack", type=integer(0), default=0,
                   help="runs in the stack timed beside one run (default 0: as many as the "
                        "studies stack at that T, workers.stack_size; 1: none)")
    c.add_argument("--rounds", type=integer(1), default=7,
                   help="rounds of run, GEMM and stack, each time the median (default 7)")
    c.add_argument("--ref-reps", dest="ref_reps", type=integer(0), default=2,
                   help="steps timed of the reference (0: none; default 2)")
    c.add_argument("--peak-T", dest="peak_T", type=integer(0), default=10000,
                   help="T of the peak-memory run (0: none; default 10000)")
    c.add_argument("--peak-m", dest="peak_m", type=integer(1), default=600,
                   help="m of the peak-memory run (default 600)")
    c.add_argument("--throughput", type=int_list, default=[],
                   help="T values for a sweep's throughput: runs of 1000 steps per minute on all "
                        "cores, one run at a time and stacked (default: none)")
    return c


def _step_row(T, a):
    """The step table's row at T: one run's and a stack's step, the GEMM, in rounds."""
    run, o, hooks = _set_up(T, a.m, a.dtype, 1)
    R = a.stack or stack_size(T, STUDY_STACK, o["d"], o["heads"], np.dtype(a.dtype).itemsize)
    stack, so, shooks = _set_up(T, a.m, a.dtype, R) if R > 1 else (None, None, None)
    flops = _step_flops(T, a.m, o["d"], o["heads"], o["mlp"])
    A, Bm, C = _square_gemm(flops, a.dtype)
    n = max(3, min(100, int(3e4 / T)))                  # steps per block: about 0.1-0.3 s
    _gemm(A, Bm, C, n)
    times = np.array([(_steps(run, o, hooks, n), _gemm(A, Bm, C, n),
                       _steps(stack, so, shooks, max(1, n // R)) / R if R > 1 else np.nan)
                      for _ in range(a.rounds)])
    step, gemm, per_run = np.median(times, 0)
    parts = _breakdown(run, o, hooks, n)
    return dict(T=T, step=step, gemm=gemm, n=A.shape[0], flops=flops, R=R, per_run=per_run,
                parts=parts)


def _print_tables(rows, a, refs):
    print(f"{'T':>6} {'step ms':>8} {'GEMM ms (n)':>13} {'share':>6} {'GFLOP/s':>8} "
          f"{'a stack: runs, ms per run':>26} {'reference ms':>13}")
    for r in rows:
        ref = refs.get(r["T"])
        cell = lambda t: "-" if t is None else f"{1e3 * t:.0f} (x{t / r['step']:.0f})"
        stack = (f"{r['R']:3d}, {1e3 * r['per_run']:.2f} ({r['per_run'] / r['step']:.2f})"
                 if r["R"] > 1 else "  1 (none: alone)")
        print(f"{r['T']:6d} {1e3 * r['step']:8.2f} {1e3 * r['gemm']:8.2f} ({r['n']:d})"
              f"{r['gemm'] / r['step']:6.0%} {r['flops'] / r['step'] / 1e9:8.1f} "
              f"{stack:>26} {cell(ref):>13}")
    print("\nwhere a step's time goes (share of the step; timers on the functions of fast.py "
          "and optim.py):")
    print(f"{'T':>6} " + " ".join(f"{k:>14}" for k in list(PARTS) + ["rest"])
          + f" {'faults/step':>11} {'sys ms/step':>11}")
    for r in rows:
        shares, faults, sys_s = r["parts"]
        print(f"{r['T']:6d} " + " ".join(f"{v:14.0%}" for v in shares.values())
              + f" {faults:11.1f} {1e3 * sys_s:11.2f}")


def _main_bench(a, fail):
    """`python -m studies.bench`: the step table, its breakdown, the peak memory, the throughput.
    Every size is checked to fit in memory before any time is spent."""
    peak = (a.peak_T, a.peak_m) if a.peak_T else None
    for T, m in [(T, a.m * max(1, a.stack or STUDY_STACK)) for T in a.Ts] + ([tuple(peak)] if peak else []):
        try:
            training.check_run_memory(dict(run_options.DEFAULTS, T=T, m=m, n_test=1,
                                           dtype=a.dtype), lambda name, v: f"--{name} {v}")
        except ValueError as e:
            fail(str(e))
    kernel, threads = train.blas(1)
    print(f"studies.bench: m = {a.m}, full batch, {a.dtype}, numpy {np.__version__}, "
          f"OpenBLAS kernel {kernel}, {threads} BLAS thread; the median of {a.rounds} rounds",
          flush=True)
    said = " during its step table"
    try:                  # SIGTERM as Ctrl-C, in every part: the workers are stopped, one line
        with cli.sigterm_raises():
            rows = [_step_row(T, a) for T in a.Ts]
            refs = {T: _reference_step(T, a.m, a.dtype, a.ref_reps) for T in a.Ts if a.ref_reps}
            _print_tables(rows, a, refs)
            if peak:
                held, data, step = _peak_memory(*peak, a.dtype)
                print(f"\npeak memory, T = {peak[0]}, m = {peak[1]}, full batch: the run as set "
                      f"up {held / 2**20:.0f} MiB (its training set {data / 2**20:.1f} MiB), a "
                      f"step adds at most {step / 2**20:.1f} MiB (tracemalloc)", flush=True)
            said = "; its workers are stopped"
            if a.throughput:
                _bench_throughput(a)
    except Terminated:
        print(f"\nstudies.bench: terminated (SIGTERM){said}", file=sys.stderr)
        return 143
    return 0


def _throughput_worker(args):
    T, R, steps, seed = args
    base = dict(T=T, m=100, steps=steps, n_test=100, log_every=0)
    t = time.perf_counter()
    training.study_stack([dict(base, seed=seed + r) for r in range(R)])
    return time.perf_counter() - t


def _sweep_throughput(T, R, steps, workers, repeats=3):
    """Runs of 1000 steps per minute when `workers` processes each train a stack of R runs
    (m = 100): timed on `steps` steps and scaled; the median of `repeats` timings."""
    walls = []
    ex = harness.worker_pool(workers)     # they exit when this process is gone, even by SIGKILL
    try:
        list(ex.map(_throughput_worker, [(T, R, 2, 0)] * workers))      # start-up and warm-up
        for _ in range(repeats):
            t = time.perf_counter()
            list(ex.map(_throughput_worker, [(T, R, steps, 10 * i) for i in range(workers)]))
            walls.append(time.perf_counter() - t)
    except BaseException:               # Ctrl-C, SIGTERM: stop the workers, not wait for them
        ex.stop()
        raise
    ex.shutdown()
    return 60 * workers * R / (float(np.median(walls)) * 1000 / steps)


def _bench_throughput(a):
    """A sweep's throughput: runs of 1000 steps per minute on all cores, alone and stacked."""
    workers = os.cpu_count() or 1
    print(f"\nsweep throughput, {workers} worker processes (m = 100, float32), runs of 1000 steps "
          f"per minute (median of 3 timings of 100 steps):")
    print(f"{'T':>6} {'stack':>6} {'one at a time':>14} {'stacked':>8} {'ratio':>6}")
    for T in a.throughput:
        R = stack_size(T, STUDY_STACK)
        alone = _sweep_throughput(T, 1, 100, workers)
        now = _sweep_throughput(T, R, 100, workers) if R > 1 else alone
        print(f"{T:6d} {R:6d} {alone:14.1f} {now:8.1f} {now / alone:5.1f}x", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else harness.check_argv(argv)
    ap = _parser()
    return _main_bench(ap.parse_args(argv), ap.error)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.bench", main))
