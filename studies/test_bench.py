"""test_bench.py: the tests of studies/bench.py.

Run from the repository's root: python -m pytest -q
"""
import os
import signal
import time

import pytest

from studies import bench
from studies.conftest import ARGV, parent_pid, is_zombie, walk_modules
from test_all import Walk, run_python


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_bench_leaves_no_worker_behind(how):
    """SIGTERM or SIGKILL during `studies.bench`'s throughput part: its workers are gone within
    seconds (they watch their parent); SIGTERM is one line and exit status 143."""
    p = run_python("-m", "studies.bench", "--Ts", "8", "--d", "16", "--m", "8", "--steps", "100000",
                "--tp-steps", "100000", "--throughput", "100", "--stack", "2")
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
        assert p.stdout.readline().startswith("model heads=")              # the banner
        p.stdout.readline(), p.stdout.readline()                          # float32: matmul
        p.terminate()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 143 and err.strip().splitlines() == [
        "studies.bench: terminated (SIGTERM) during its step table"], err
    assert "sweep throughput" not in out


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "bench.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over bench.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((bench,), WALK)
