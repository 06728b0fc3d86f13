"""test_mechanism.py: the tests of studies/mechanism.py.

Run from the repository's root: python -m pytest -q
"""
import os
import sys

import numpy as np
import pytest

from studies import mechanism
from studies.lib import failures, folder, harness, measures, row_kinds, run_options, training
from studies.conftest import (ARGV, copy_folder, run_side_by_side, snapshot, study_refused,
                              synthetic_study, tiny_plan, run_cli_main, walk_modules)
from test_all import HERE, Walk


def test_mechanism_run_stops_its_pool_as_every_command_does(tmp_path, monkeypatch):
    """mechanism.py's workers come from harness.worker_pool and stop by pool.stop() on Ctrl-C (it
    built a pool of its own, whose shutdown raced the pool's exit hook: "Exception ignored ...
    Bad file descriptor" under the one line)."""
    made, real = [], harness.worker_pool

    def recording_pool(workers):
        pool = real(workers)
        stop = pool.stop
        pool.stop = lambda: (made.append("stopped"), stop())[1]
        made.append(workers)
        return pool

    def ctrl_c(stacks, pool, workers, write, train_fn):
        assert pool.submit(os.getpid).result(timeout=60) != os.getpid()   # a worker answers
        raise KeyboardInterrupt
    tiny_plan(str(tmp_path))
    monkeypatch.setattr(harness, "worker_pool", recording_pool)
    monkeypatch.setattr(mechanism, "_run_stacks", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        mechanism._run_plan(str(tmp_path), workers=2, log=lambda *a, **k: None)
    assert made == [2, "stopped"]


def test_mechanism_study_writes_its_columns_and_resumes(tmp_path):
    out = str(tmp_path)
    tiny_plan(out)
    quiet = lambda *a, **k: None
    assert mechanism._run_plan(out, log=quiet) == 2
    path = os.path.join(out, "runs.csv")
    assert row_kinds.csv_header(path) == list(mechanism.FIELDS)
    rows = row_kinds.read_rows([path])
    assert [(r["d"], r["T"], r["m"], r["seed"]) for r in rows] == [("8", "8", "16", "0"),
                                                                  ("8", "8", "16", "1")]
    for r in rows:
        assert r["success"] == (float(r["test_acc"]) >= 0.99)          # read_rows: a bool
        assert 0 < float(r["covering_constant"]) and 0 <= float(r["mass_on_S"]) <= 1
        assert r["best_step"] == "20" and float(r["best_test_acc"]) >= float(r["test_acc"])
    assert mechanism._run_plan(out, log=quiet) == 0                  # nothing left to run
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:                         # seed 1 lost, a torn row in its place
        f.write(text[:text.rstrip("\n").rfind("\n") + 1] + "fixed,8,8,16,1,1,0.5")
    assert mechanism._run_plan(out, log=quiet) == 1                  # only seed 1 again
    again = row_kinds.read_rows([path])
    assert len(again) == 2 and again[1]["test_acc"] == rows[1]["test_acc"]   # the same run
    with open(path) as f:
        assert "0.5fixed" not in f.read() and len(f.read().splitlines()) == 0


def test_mechanism_trace_ends_where_the_unmonitored_run_ends(tmp_path):
    out, quiet = str(tmp_path), lambda *a, **k: None
    tiny_plan(out, every=5)
    assert mechanism._run_plan(out, log=quiet) == 2                     # runs.csv: no trace
    assert mechanism._run_plan(out, log=quiet, what="trace") == 2
    base = {r["seed"]: r for r in row_kinds.read_rows([os.path.join(out, "runs.csv")],
                                                   kind=row_kinds.MECHANISM_ROWS)}
    trace = row_kinds.read_rows([os.path.join(out, "trajectories.csv")],
                             kind=row_kinds.TRAJECTORY_ROWS)
    for seed, b in base.items():
        mine = [r for r in trace if r["seed"] == seed]
        assert [int(r["step"]) for r in mine] == [1, 5, 10, 15, 20]
        last = mine[-1]                        # the monitor changed nothing of the training
        for k in ("B_X", "mass_on_S", "score_gap", "top_head", "test_acc"):
            assert last[k] == b[k], k
        assert last["final_test_acc"] == b["test_acc"] and last["train_loss"] == b["final_loss"]
        assert {r["success"] for r in mine} == {b["success"]}
    # the step-1 row measures the parameters after step 1: those a 1-step run ends with
    plan = folder.read_plan(out)
    runs = [dict(plan["cells"][0]["options"], T=8, m=16, seed=s, steps=1) for s in (0, 1)]
    for r, res in zip([r for r in trace if r["step"] == "1"], training.study_stack(runs)):
        X = training.draw_study_data(runs[0] | dict(seed=res["seed"]))[2][0][:measures.N_MEASURE]
        mech = measures.measure_mechanism(res["params"], res["cfg"], res["S"], X)
        assert float(r["B_X"]) == mech["B_X"] != float(base[r["seed"]]["B_X"])
    assert mechanism._run_plan(out, log=quiet, what="trace") == 0       # resumed: nothing left


def test_mechanism_arms_pair_with_the_study_and_reproduce_the_screen(tmp_path, capsys,
                                                                       shipped_resamples):
    """Issue 38: `studies.mechanism arm` plans an arm as the study's cells with one option changed
    (the sweep protocol of its name), under a design name check_plan accepts; an unknown arm or a
    T the study lacks is one line. `paired` on the committed screen writes its committed table
    and pairs again, each run against the study's run of its seed."""
    for arm, change in (("freeze-ln1", dict(freeze="ln1")), ("baseline-rerun", {}),
                        ("decay-except-ln", dict(decay="except-ln"))):
        plan = mechanism._arm_plan("results/mechanism", arm, "borderline", [100, 3000], 20)
        cells = [c for c in mechanism.read_plan("results/mechanism")["cells"]
                 if c["design"] == "borderline" and c["T"] in (100, 3000)]
        assert [(c["design"], c["d"], c["T"], c["m"]) for c in plan["cells"]] == [
            (arm, c["d"], c["T"], c["m"]) for c in cells] and len(cells) == 4
        assert all(c["options"] == dict(b["options"], **change)
                   for c, b in zip(plan["cells"], cells))
        folder.check_plan(plan)
    with pytest.raises(ValueError, match="no borderline cells at T = 200"):
        mechanism._arm_plan("results/mechanism", "freeze-ln1", "borderline", [100, 200], 20)
    with pytest.raises(ValueError, match="arm must be baseline-rerun or one of"):
        mechanism._arm_plan("results/mechanism", "freeze-ln2", "borderline", [100], 20)
    assert set(row_kinds.INTERVENTIONS) <= set(run_options.PROTOCOLS)
    S = "results/mechanism-interventions/screen"
    arms = [f"{S}/{a}" for a in ("baseline-rerun", "freeze-ln1", "decay-except-ln", "freeze-lnf")]
    failures.paired_report("results/mechanism", arms, str(tmp_path / "p.md"),
                            str(tmp_path / "p.csv"))
    for mine, committed in (("p.md", "paired.md"), ("p.csv", "pairs.csv")):
        with open(tmp_path / mine) as a, open(f"{S}/{committed}") as b:
            assert a.read() == b.read(), committed
    W = failures._cell_resamples(5, np.random.default_rng(0), n_boot=50)
    assert W.shape == (51, 5) and (W[0] == 1).all() and (W.sum(1) == 5).all()


def test_mechanism_report_on_a_synthetic_folder(tmp_path):
    out = str(tmp_path)
    synthetic_study(out)
    text = mechanism._report(out, log=lambda *a: None)
    assert open(os.path.join(out, "table.md")).read() == text and text.startswith("| d | T |")
    line = lambda start: next(ln for ln in text.splitlines() if ln.startswith(start))
    assert "| 1 [1, 1] established |" in line("| 64 | 10 | 20 | 6 / 6 |")
    assert "| 0.5 [0.5, 0.5] not detected |" in line("| 64 | 1000 | 60 | 6 / 6 |")
    pooled = line("| 64 | all 3 T |")
    p = float(pooled.split("|")[6].split()[0])
    assert abs(p - 5 / 6) < 1e-3 and "established" in pooled.split("|")[6]  # (1 + 1 + 1/2) / 3
    assert pooled.split("|")[5].strip() == "1 / 4"              # medians of C (T = 1000: all 2)
    fit = line("| 64 | C |")
    assert fit.split("|")[5].strip().startswith("3 [3, 3]")          # b of 10 + 3 ln T
    lost = line("| 64 | fixed | 36 |")
    assert lost.split("|")[6].strip().startswith("1 (0.028")          # 1 run of 36
    assert mechanism._plot_study.__doc__                                 # plots: matplotlib only


def test_a_study_older_than_the_factor_columns_resumes_and_reports(tmp_path, capsys):
    """A study whose runs.csv predates C's factors and the canonical measures (results/mechanism
    is one): `run` trains what is missing into runs-part2.csv (the older file never touched),
    and `report` reads both; `report` of an arm (results/mechanism-interventions/*/*, older
    too) is one line saying how it is reported: beside its study, with `paired`."""
    import csv
    out = tmp_path / "study"
    synthetic_study(str(out), small=True)
    rows = list(csv.DictReader(open(out / "runs.csv")))
    older = [k for k in mechanism.FIELDS if k not in row_kinds.MECHANISM_FACTORS
             + row_kinds.MECHANISM_CANONICAL]
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=older, extrasaction="ignore")
        w.writeheader()
        w.writerows(r for r in rows if not (r["T"] == "10" and int(r["seed"]) >= 10))
    before = (out / "runs.csv").read_bytes()
    code, _, err = run_cli_main(capsys, mechanism.main, ["run", str(out), "--workers", "1"])
    assert code == 0 and (out / "runs.csv").read_bytes() == before, err
    new = list(csv.DictReader(open(out / "runs-part2.csv")))
    assert len(new) == 4 and all(r["readout_norm"] != "" for r in new)
    code, out_text, err = run_cli_main(capsys, mechanism.main, ["report", str(out)])
    assert code == 0 and (out / "table.md").exists() and not err, err
    arm = copy_folder("results/mechanism-interventions/full/freeze-ln1", tmp_path / "arm")
    before = snapshot(arm)
    code, _, err = run_cli_main(capsys, mechanism.main, ["report", str(arm)])
    study_refused(code, err, "holds no borderline or fixed cells", "paired STUDY")
    assert snapshot(arm) == before                                  # no table, no lock


def test_mechanism_command_line_help_and_one_line_errors(tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    (h, _), (r, _), (p, _) = run_side_by_side([
        ([sys.executable, "-m", "studies.mechanism", *a], dict(cwd=HERE, env=env)) for a in (
            ["--help"], ["run", str(tmp_path)],                        # run: no plan.json yet
            ["plan", str(tmp_path), "results/extended", "--Ts", "10", "--extra", "64-100"])])
    assert h.returncode == 0 and all(w in h.stdout for w in ("plan", "run", "report", "trace"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "plan.json is missing" in r.stderr
    assert p.returncode == 2 and "d:T pairs" in p.stderr and p.stderr.count("\n") == 1


def test_a_screen_of_more_seeds_than_the_plan_is_refused(tmp_path, capsys):
    out = tmp_path / "study"
    synthetic_study(str(out))
    before = snapshot(tmp_path)
    code, _, err = run_cli_main(capsys, mechanism.main, ["run", "--seeds", "99", str(out)])
    assert code == 1 and err.count("\n") == 1 and "--seeds 99" in err and str(out) in err
    assert snapshot(tmp_path) == before


def test_mechanism_cells_of_some_widths():
    plan = mechanism._arm_plan("results/mechanism", "freeze-ln1", "borderline", [3000], 40, [128])
    assert [(c["d"], c["T"]) for c in plan["cells"]] == [(128, 3000)] and plan["seeds"] == 40
    with pytest.raises(ValueError, match="no borderline cells at width d = 96"):
        mechanism._arm_plan("results/mechanism", "freeze-ln1", "borderline", [3000], 20, [96])


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "mechanism.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over mechanism.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((mechanism,), WALK)
