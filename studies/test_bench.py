"""test_bench.py: the tests of studies/bench.py.

Run from the repository's root: python -m pytest -q
"""
import os
import signal
import time

import numpy as np
import pytest

import fast
import optim
from studies import bench
from studies.conftest import ARGV, parent_pid, is_zombie, walk_modules
from test_all import Walk, run_python


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_bench_leaves_no_worker_behind(how):
    """SIGTERM or SIGKILL during `studies.bench`'s throughput part: its workers are gone within
    seconds (they watch their parent); SIGTERM is one line and exit status 143."""
    p = run_python("-m", "studies.bench", "--Ts", "8", "--m", "8", "--rounds", "1", "--ref-reps",
                   "0", "--peak-T", "0", "--throughput", "100000")
    try:
        for line in p.stdout:
            if line.startswith("sweep throughput"):
                break
        children, deadline = [], time.time() + 60
        while time.time() < deadline and len(children) < 2:
            time.sleep(0.3)
            children = [int(d) for d in os.listdir("/proc") if d.isdigit()
                        and parent_pid(int(d)) == p.pid and b"resource_tracker" not in
                        open(f"/proc/{d}/cmdline", "rb").read()]
        assert children
        time.sleep(1.0)
        p.send_signal(how)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f"/proc/{c}") and not is_zombie(c)
                                         for c in children):
        time.sleep(0.2)
    assert not [c for c in children if os.path.exists(f"/proc/{c}") and not is_zombie(c)]
    if how == signal.SIGTERM:
        assert p.returncode == 143 and err.strip().splitlines() == [
            "studies.bench: terminated (SIGTERM); its workers are stopped"], err


def test_sigterm_during_the_bench_step_table_is_one_line():
    """SIGTERM while the bench times its step table (before any worker starts) is one line and
    exit status 143, as in its throughput part (it used to end with -15 and no word)."""
    p = run_python("-m", "studies.bench", "--Ts", "3000", "--m", "100", "--throughput", "100")
    try:
        assert p.stdout.readline().startswith("studies.bench: m = 100")     # the banner
        time.sleep(0.5)
        p.terminate()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 143 and err.strip().splitlines() == [
        "studies.bench: terminated (SIGTERM) during its step table"], err
    assert "sweep throughput" not in out


def test_the_bench_prints_its_tables_and_leaves_the_step_as_it_was(capsys):
    """A small bench: a row per T, the parts of a step and its rest summing to the whole, the peak
    memory; afterwards fast's and optim's functions are their own again (the timers are gone)."""
    before = (fast._mix, fast._linear_forward, fast._ACTIVATIONS, optim.adam_step)
    assert bench.main(["--Ts", "8,16", "--rounds", "1", "--ref-reps", "1", "--peak-T", "16",
                       "--peak-m", "30"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("studies.bench: m = 100, full batch, float32") and "kernel" in out[0]
    rows = [ln.split() for ln in out if ln.split()[:1] in (["8"], ["16"])]
    assert len(rows) == 4                           # the step table's two rows, the parts' two
    for parts in rows[2:]:
        shares = [float(v.rstrip("%")) for v in parts[1:8]]
        assert all(0 <= v <= 100 for v in shares[:6]) and abs(sum(shares) - 100) <= 4, parts
    assert any(ln.startswith("peak memory, T = 16, m = 30") for ln in out)
    assert (fast._mix, fast._linear_forward, fast._ACTIVATIONS, optim.adam_step) == before


def test_the_parts_timers_change_no_bit_of_a_step():
    """The same steps with the bench's timers installed and without: the same parameters."""
    runs = [bench._set_up(12, 20, "float32", 1) for _ in range(2)]
    bench._steps(*runs[0], 3)
    with bench._Parts() as parts:
        bench._steps(*runs[1], 3)
    assert all(v > 0 for v in parts.seconds.values()), parts.seconds
    assert all(np.array_equal(runs[0][0].params[k], runs[1][0].params[k])
               for k in runs[0][0].params)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "bench.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over bench.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((bench,), WALK)
