"""test_sweep.py: the tests of studies/sweep.py.

Run from the repository's root: python -m pytest -q
"""
import os
import shutil
import signal
import sys
import time

import pytest

from studies import bench, sweep
from studies.lib import cli, limits, report, row_kinds, training, workers
from studies.conftest import (ARGV, copy_folder, parent_pid, smoke_sweep, is_zombie, run_cli,
                              walk_modules)
from test_all import Walk, run_python


def _rows(path):
    rows = row_kinds.read_rows([path])
    return sorted((r["model"], r["T"], r["seed"], r["m"], r["test_acc"]) for r in rows)


def test_sweep_resumes_and_shards_merge(tmp_path, capsys, smoke_ref):
    full = smoke_ref
    ref_rows, ref_table = _rows(full / "runs.csv"), (full / "table.md").read_text()
    assert len(ref_rows) > 8

    # interrupted: keep the header and all finished rows but the last four, and a row torn
    # mid-write
    part, done = tmp_path / "part", len(ref_rows) - 4
    part.mkdir()
    lines = (full / "runs.csv").read_text().splitlines(keepends=True)
    (part / "runs.csv").write_text("".join(lines[:done + 1]) + lines[done + 1][:12])
    (part / "sweep.json").write_text((full / "sweep.json").read_text())
    capsys.readouterr()
    assert smoke_sweep(part) == 0
    out = capsys.readouterr().out
    assert f"{done} runs already saved" in out
    assert f"sweep: {len(ref_rows) - done} runs in" in out        # nothing finished is redone
    assert _rows(part / "runs.csv") == ref_rows
    assert (part / "table.md").read_text() == ref_table

    # two shards, as on two machines, merged by --report: at T = 8 (a search of each seed per
    # shard), against the whole sweep's rows at T = 8 and its report at T = 8
    t8, ref8 = ["--Ts", "8"], copy_folder(full, tmp_path / "ref8")
    assert smoke_sweep(ref8, "--report", *t8) == 0
    shards = tmp_path / "shards"
    assert smoke_sweep(shards, "--shard", "0/2", *t8) == 0
    assert smoke_sweep(shards, "--shard", "1/2", *t8) == 0
    assert smoke_sweep(shards, "--report", *t8) == 0
    merged = sorted(_rows(shards / "runs-shard-0-of-2.csv") + _rows(shards / "runs-shard-1-of-2.csv"))
    assert merged == [r for r in ref_rows if r[1] == "8"] and {r[2] for r in merged} == {"0", "1"}
    assert (shards / "table.md").read_text() == (ref8 / "table.md").read_text()


def test_merge_refuses_another_protocol_and_reports_missing_shards(tmp_path, capsys):
    a, b, merged = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    t8 = ["--Ts", "8"]                               # two searches (two seeds), one per shard
    assert smoke_sweep(a, "--shard", "0/2", *t8) == 0
    assert smoke_sweep(b, "--shard", "1/2", "--steps", "140", *t8) == 0     # a mistyped shard
    merged.mkdir()
    shutil.copy(a / "runs-shard-0-of-2.csv", merged)
    capsys.readouterr()
    assert smoke_sweep(merged, "--report", "--seeds", "2", *t8) == 0   # one shard only: said so
    out = capsys.readouterr().out
    assert "1 of 2 searches are missing or unfinished" in out
    assert (merged / "table.md").read_text().startswith("INCOMPLETE: 1 searches")
    shutil.copy(b / "runs-shard-1-of-2.csv", merged)
    with pytest.raises(SystemExit, match="^2$"):
        smoke_sweep(merged, "--report", "--seeds", "2", *t8)
    err = capsys.readouterr().err
    assert "holds runs of another sweep" in err


def test_sweep_refuses_other_options_in_same_folder(tmp_path, capsys, smoke_ref):
    copy_folder(smoke_ref, tmp_path)
    with pytest.raises(SystemExit, match="^2$"):
        smoke_sweep(tmp_path, "--lr", "0.01")
    err = capsys.readouterr().err
    assert "other options" in err and len(err.strip().splitlines()) == 1


def test_sweep_folder_keeps_one_protocol(tmp_path, capsys):
    assert smoke_sweep(tmp_path, "--steps", "40", "--Ts", "8", "--seeds", "1") == 0  # a search
    meta = (tmp_path / "sweep.json").read_text()
    assert '"steps": 40' in meta                           # an explicit option beats the preset
    for extra, msg in [(["--steps", "41"], "other options"), (["--search", "grid"], "other search"),
                       (["--grid-ratio", "1.2"], "another m grid")]:
        with pytest.raises(SystemExit, match="^2$"):
            smoke_sweep(tmp_path, "--steps", "40", *extra)
        assert msg in capsys.readouterr().err
    assert (tmp_path / "sweep.json").read_text() == meta   # nothing was overwritten
    (tmp_path / "sweep.json").write_text("{broken")
    with pytest.raises(SystemExit, match="^2$"):
        smoke_sweep(tmp_path, "--steps", "40")
    assert "not a sweep description" in capsys.readouterr().err


def test_a_csv_replaced_under_a_running_sweep_loses_no_row(tmp_path, monkeypatch, smoke_ref):
    real, calls = workers.sweep_worker, [0]
    path = tmp_path / "runs.csv"

    def worker(runs):
        calls[0] += 1
        if calls[0] == 3:                       # as `git checkout` would: a new file, old content
            header = path.read_text().splitlines(keepends=True)[:2]
            (tmp_path / "old.csv").write_text("".join(header))
            os.replace(tmp_path / "old.csv", path)
        return real(runs)
    monkeypatch.setattr(workers, "sweep_worker", worker)
    assert smoke_sweep(tmp_path, "--Ts", "8") == 0                  # T = 8: two searches
    assert calls[0] > 3                             # replaced mid-sweep, with stacks still to run
    assert _rows(path) == [r for r in _rows(smoke_ref / "runs.csv") if r[1] == "8"]


def test_a_failing_run_is_the_same_one_line_under_workers_1(tmp_path, capsys, monkeypatch):
    def boom(runs):
        raise RuntimeError("boom")
    monkeypatch.setattr(training, "study_stack", boom)
    assert smoke_sweep(tmp_path) == 1
    err = capsys.readouterr().err
    assert "failed: RuntimeError: boom" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("command", ["studies.sweep", "studies.steps"])
def test_a_killed_sweep_leaves_no_worker_behind(tmp_path, command):
    args = (["--preset", "smoke", "--Ts", "400", "--seeds", "4", "--steps", "100000"]
            if command == "studies.sweep" else
            ["--Ts", "400", "--seeds", "4", "--stack", "2", "--budget", "100000", "--m", "50",
             "--d", "8", "--heads", "2", "--mlp", "4"])
    p = run_python("-m", command, *args, "--workers", "2", "--out", str(tmp_path))
    try:
        assert p.stdout.readline().startswith(command.split(".")[1] + ":")
        time.sleep(1.5)
        children = [int(d) for d in os.listdir("/proc") if d.isdigit() and parent_pid(int(d)) == p.pid]
        assert children
    finally:
        p.kill()                                          # SIGKILL: no handler runs in the parent
        p.communicate()
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f"/proc/{c}") and parent_pid(c) != 0
                                         and not is_zombie(c) for c in children):
        time.sleep(0.2)
    assert not [c for c in children if os.path.exists(f"/proc/{c}") and not is_zombie(c)]


def test_every_command_is_one_line_on_ctrl_c_and_odd_values(tmp_path, capsys, monkeypatch,
                                                           smoke_ref):
    """Families 5 and 6 for studies.sweep: every command's --help; Ctrl-C during a report, in limit
    and in bench; values that start with '-'; sizes and --workers checked before anything."""
    for command in sweep.COMMANDS:
        code, out, err = run_cli(capsys, "sweep", command, "--help")
        assert code == 0 and out.startswith(f"usage: studies.sweep {command}") and not err

    def ctrl_c(*args, **kw):
        raise KeyboardInterrupt
    f = copy_folder(smoke_ref, tmp_path / "f")
    for module, name, argv, msg in [
            (report, "folder_report", ["--out", str(f), "--report"], "during the report"),
            (limits, "statistical_limits", ["limit", "--Ts", "10", "--seeds", "2"], "interrupted"),
            (sweep, "_sweep_parser", ["--out", str(f)], "interrupted")]:
        monkeypatch.setattr(module, name, ctrl_c)
        code = cli.one_line_errors("studies.sweep", sweep.main, argv)
        err = capsys.readouterr().err
        monkeypatch.undo()
        assert code == 130 and msg in err and len(err.strip().splitlines()) == 1, (name, err)
    monkeypatch.setattr(bench, "_step_row", ctrl_c)
    code = cli.one_line_errors("studies.bench", bench.main, ["--Ts", "10", "--throughput", "10"])
    err = capsys.readouterr().err
    monkeypatch.undo()
    assert code == 130 and "interrupted" in err and len(err.strip().splitlines()) == 1, err
    for argv, msg in [(["--shard", "-1/2"], "needs 0 <= i < n, got '-1/2'"),
                      (["--Ts", "-5,3"], "integers >= 1, got '-5,3'"),
                      (["--bar", "-.5"], "--bar"),
                      (["--workers", "1000000"], "between 1 and"),
                      (["--Ts", "10", "--val", "100000000"], "GiB"),
                      (["limit", "--Ts", "1000000000"], "--Ts 1000000000"),
                      (["limit", "--Ts", "100000", "--ms", "100000000"], "--ms 100000000")]:
        extra = [] if argv[0] == "limit" else ["--out", str(tmp_path / "x")]
        code, out, err = run_cli(capsys, "sweep", *argv, *extra)
        assert code == 2 and msg in err and "expected one argument" not in err, (argv, err)
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_ctrl_c_in_a_sweeps_process_group_is_one_line(tmp_path):
    """A terminal sends Ctrl-C to the sweep and its workers at once: one line (the rows kept),
    exit status 130, no worker's traceback."""
    p = run_python("-m", "studies.sweep", "--preset", "smoke", "--workers", "2", "--out", str(tmp_path / "f"),
                start_new_session=True)
    try:
        p.stdout.readline(), p.stdout.readline()                          # the first run's row
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130 and len(err.strip().splitlines()) == 1, err
    assert err.strip().startswith("interrupted: ") and "saved in" in err


def test_a_sweep_inside_the_class_ball_writes_its_record_beside_its_runs(tmp_path):
    """A sweep whose options hold a norm writes ball-of-runs.csv: one row per run of runs.csv,
    read back through row_kinds.read_rows (BALL_ROWS), each held norm's final within its radius;
    a row claiming a final outside its radius is refused naming the file and line."""
    out = tmp_path / "ball"       # one search (T = 8, one seed): each check below is run by run
    assert smoke_sweep(out, "--ball-qk", "0.05", "--ball-w", "0.5", "--Ts", "8", "--seeds",
                       "1") == 0
    runs = row_kinds.read_rows([str(out / "runs.csv")])
    rec = row_kinds.read_rows([str(out / "ball-of-runs.csv")], kind=row_kinds.BALL_ROWS)
    assert sorted((r["T"], r["seed"], r["m"]) for r in rec) == sorted(
        (int(r["T"]), int(r["seed"]), int(r["m"])) for r in runs)
    assert all(r["qk_final"] <= 0.05 * (1 + 1e-5) and r["vo_radius"] == 0 for r in rec)
    text = (out / "ball-of-runs.csv").read_text().splitlines()
    cols = text[0].split(",")
    row = text[1].split(",")
    row[cols.index("qk_final")] = "0.06"
    (out / "ball-of-runs.csv").write_text("\n".join([text[0], ",".join(row)]) + "\n")
    with pytest.raises(ValueError, match="ball-of-runs.csv line 2"):
        row_kinds.read_rows([str(out / "ball-of-runs.csv")], kind=row_kinds.BALL_ROWS)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "sweep.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over sweep.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((sweep,), WALK)
