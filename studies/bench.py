"""bench.py (studies, a command): the speed of a training step, beside numpy's own matmul.

    python -m studies.bench                      the step table at T = 100, 1000, 3000; the sweep's
                                                 throughput on all cores, one run at a time and
                                                 stacked
    python -m studies.bench --help               every option

Times one training step (m samples, full batch, the experiment's model) on the fast path (and,
with --reference, on the plain [CLS]-row path), per run (x steps), and GFLOP/s of the matrix
products beside numpy's own matmul on this machine; then runs per minute of a sweep's workers.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.bench")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import os
import time

import numpy as np

import attn
import fast
import optim

from studies.lib import harness, run_options, training
from studies.lib.cli import OneLineParser, int_list, integer
from studies.lib.workers import stack_size

Terminated = cli.Terminated        # SIGTERM arrived (cli.sigterm_raises): stop like Ctrl-C


# ---------------------------------------------------------------- one step, timed ---------------

def _step_flops(T, B, d, H, k):
    """Matrix-product FLOPs of one training step on the fast path (forward + backward)."""
    R = 2 * T + 1                                      # two versions per position, plus [CLS]
    fwd = (2 * R * d * d + 2 * R * d * H + 2 * d * d       # values, scores rn @ (W_K q), query
           + 2 * B * 2 * T * (H + d)                       # Xb @ [E | E V]
           + 2 * B * d * d + 2 * 2 * B * d * k + 2 * B * d)  # W_O, MLP, readout
    bwd = (4 * R * d * d + 4 * R * d * H + 4 * d * d
           + 2 * B * 2 * T * (H + d)
           + 4 * B * d * d + 2 * 4 * B * d * k + 2 * B * d)
    return fwd + bwd


def _matmul_gflops(n, k, m, dtype, reps=20):
    """numpy's own speed on an (n, k) @ (k, m) product, in GFLOP/s (best of reps)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((k, m)).astype(dtype)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n * k * m / best / 1e9


def _time_steps(cfg, B, path, n_steps):
    rng = np.random.default_rng(0)
    p = optim.one_buffer(attn.init_params(cfg, rng))          # as training holds them
    dt = np.dtype(cfg["dtype"])
    X = (rng.random((B, cfg["T"])) < 0.8).astype(dt)
    y = rng.integers(0, 2, B).astype(dt)
    state = optim.adam_init(p)
    times = []
    for i in range(n_steps + 2):                       # two warm-up steps
        t = time.perf_counter()
        loss, g, _ = (fast if path == "fast" else attn).loss_and_grads(p, cfg, X, y)
        optim.adam_step(p, g, state, 1e-3, 1e-4)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


def _parser():
    c = OneLineParser(prog="studies.bench", description=(
        "Time one training step (m samples, full batch, the experiment's model) on the fast path "
        "and on the plain [CLS]-row path, per run (x steps), and GFLOP/s of the matrix products "
        "beside numpy's own matmul on this machine."))
    c.add_argument("--Ts", type=int_list, default=[100, 1000, 3000], help="T values")
    c.add_argument("--d", type=int_list, default=[run_options.DEFAULTS["d"]],
                   help="widths d, comma-separated, each a multiple of 16 heads (default 64)")
    c.add_argument("--m", type=integer(1), default=100, help="batch (default %(default)s)")
    c.add_argument("--steps", type=integer(1), default=1000,
                   help="steps per run, for the per-run time (default %(default)s)")
    c.add_argument("--reference", action="store_true",
                   help="also time the plain [CLS]-row path (slow at large T)")
    c.add_argument("--throughput", type=int_list, default=[100, 1000],
                   help="T values for the sweep throughput: runs per minute on all cores "
                        "(default 100,1000)")
    c.add_argument("--stack", type=integer(1), default=16,
                   help="at most this many runs per stack for the throughput, fewer at large T "
                        "as in the sweep (default %(default)s)")
    c.add_argument("--tp-steps", dest="tp_steps", type=integer(1), default=100,
                   help="steps timed per stack; runs/min is scaled to --steps (default "
                        "%(default)s)")
    return c


def _throughput_worker(args):
    T, R, steps, seed, d = args
    training.keep_freed_memory()
    base = dict(T=T, m=100, steps=steps, n_test=100, log_every=0, d=d)
    t = time.perf_counter()
    training.study_stack([dict(base, seed=seed + r) for r in range(R)])
    return time.perf_counter() - t


def _sweep_throughput(T, R, steps, full_steps, workers, repeats=3, d=64):
    """Runs of `full_steps` steps per minute when `workers` processes each train a stack of R runs
    (m = 100): timed on `steps` steps and scaled (setup and evaluation included once); the median
    of `repeats` timings, since a shared machine's speed wanders by 20% from one to the next."""
    walls = []
    ex = harness.worker_pool(workers)     # they exit when this process is gone, even by SIGKILL
    try:
        list(ex.map(_throughput_worker, [(T, R, 2, 0, d)] * workers))      # start-up and warm-up
        for _ in range(repeats):
            t = time.perf_counter()
            list(ex.map(_throughput_worker, [(T, R, steps, 10 * i, d) for i in range(workers)]))
            walls.append(time.perf_counter() - t)
    except BaseException:               # Ctrl-C, SIGTERM: stop the workers, not wait for them
        ex.stop()
        raise
    ex.shutdown()
    return 60 * workers * R / (float(np.median(walls)) * full_steps / steps)


def _main_bench(a, fail):
    """`python -m studies.bench`: the step table per width and dtype, then the sweep
    throughput (at the first width). Every size is checked to fit in memory before any time is
    spent."""
    H, k = run_options.DEFAULTS["heads"], run_options.DEFAULTS["mlp"]
    for d in a.d:
        if d % H:
            fail(f"--d {d} must be a multiple of the {H} heads")
        for T in sorted(set(a.Ts) | set(a.throughput)):
            try:
                training.check_run_memory(dict(run_options.DEFAULTS, T=T, m=a.m, n_test=1, d=d,
                                            dtype="float64"),
                                       lambda name, v: f"--Ts/--throughput {v}" if name == "T"
                                       else f"--{name.replace('_', '-')} {v}")
            except ValueError as e:
                fail(str(e))
    said = " during its step table"
    try:                  # SIGTERM as Ctrl-C, in every part: the workers are stopped, one line
        with cli.sigterm_raises():
            _bench_steps(a, H, k)
            said = "; its workers are stopped"
            _bench_throughput(a, H)
    except Terminated:
        print(f"\nstudies.bench: terminated (SIGTERM){said}", file=sys.stderr)
        return 143
    return 0


def _bench_steps(a, H, k):
    """The bench's step table: per dtype, width and T, the time of one training step."""
    print(f"model heads={H} mlp={k}; batch m={a.m}; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; numpy {np.__version__}")
    for dtype in ("float32", "float64"):
        sq = _matmul_gflops(1024, 1024, 1024, dtype, reps=5)
        print(f"\n{dtype}: numpy matmul 1024^3: {sq:6.1f} GFLOP/s")
        print(f"{'d':>4} {'T':>6} {'ms/step':>9} {'s/run':>7} {'GFLOP/s':>8} "
              f"{'numpy same shape':>17}" + (f" {'plain ms/step':>14} {'speed-up':>9}"
                                              if a.reference else ""))
        for d in a.d:
            for T in a.Ts:
                cfg = attn.default_config(T=T, d=d, heads=H, mlp=k, dtype=dtype)
                n = max(20, min(200, int(20000 / T)))            # median of >= 20 timed steps
                t_fast = _time_steps(cfg, a.m, "fast", n)
                gf = _step_flops(T, a.m, d, H, k) / t_fast / 1e9
                same = _matmul_gflops(2 * T + 1, d, d, dtype)    # the largest per-step product
                line = (f"{d:4d} {T:6d} {1e3 * t_fast:9.2f} {t_fast * a.steps:7.1f} {gf:8.2f} "
                        f"{same:17.1f}")
                if a.reference:
                    t_ref = _time_steps(cfg, a.m, "cls", 3)
                    line += f" {1e3 * t_ref:14.1f} {t_ref / t_fast:8.1f}x"
                print(line, flush=True)


def _bench_throughput(a, H):
    """The bench's sweep throughput at the first width: runs per minute on all cores, one run at
    a time per worker and stacked."""
    workers = os.cpu_count() or 1
    d = a.d[0]
    print(f"\nsweep throughput at d = {d}, {workers} worker processes, stacks of at most {a.stack} "
          f"runs (m = 100, {a.steps} steps, float32), runs per minute (median of 3 timings):")
    print(f"{'T':>6} {'stack':>6} {'one at a time':>14} {'stacked':>8} {'ratio':>6}")
    for T in a.throughput:
        R = stack_size(T, a.stack, d, H)
        steps = min(a.tp_steps, a.steps)
        alone = _sweep_throughput(T, 1, steps, a.steps, workers, d=d)    # measured now, alike
        now = _sweep_throughput(T, R, steps, a.steps, workers, d=d) if R > 1 else alone
        print(f"{T:6d} {R:6d} {alone:14.1f} {now:8.1f} {now / alone:5.1f}x", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else harness.check_argv(argv)
    training.keep_freed_memory()
    ap = _parser()
    return _main_bench(ap.parse_args(argv), ap.error)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.bench", main))
