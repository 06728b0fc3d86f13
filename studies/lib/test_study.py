"""test_study.py: the tests of studies/lib/study.py.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np
import pytest

from studies import mechanism
from studies.lib import folder, study
from studies.conftest import (SEEDS, SURELY_BOUND_LEGAL, edit_row, study_refused,
                              synthetic_study, walk_path, run_cli_main, walk_modules)
from test_all import LITERAL, Walk


def test_mechanism_plan_from_the_committed_folders():
    plan = study.plan_cells(["results/extended", "results/width/d-128"], [10, 1000],
                                extra=[(128, 10000)], n_seeds=20)
    got = [(c["design"], c["d"], c["T"]) for c in plan["cells"]]
    assert got == [("borderline", 64, 10), ("borderline", 128, 10), ("borderline", 64, 1000),
                   ("borderline", 128, 1000), ("fixed", 64, 10), ("fixed", 128, 10),
                   ("fixed", 64, 1000), ("fixed", 128, 1000), ("borderline", 128, 10000),
                   ("fixed", 128, 10000)]
    c = {(c["design"], c["d"], c["T"]): c for c in plan["cells"]}
    assert c[("borderline", 64, 1000)]["source"]["T_folder"] == 1100     # nearest in ln T
    for T in (10, 1000, 10000):
        assert c[("fixed", 128, T)]["m"] == 2 * c[("borderline", 128, T)]["m"]
    assert c[("fixed", 64, 1000)]["m"] == c[("fixed", 128, 1000)]["m"]
    assert c[("borderline", 64, 10)]["options"]["d"] == 64 and plan["bar"] == 0.99
    with pytest.raises(ValueError, match="no T within"):
        study.plan_cells(["results/width/d-128"], [600])


def test_a_diverged_run_reads_and_half_a_divergence_is_refused(tmp_path):
    """A diverged run (train_one_stack: every accuracy nan, seconds nan) is a failure its folder
    reads; a test accuracy nan beside a training accuracy that is a number is no run we write."""
    out = tmp_path / "s"
    synthetic_study(str(out))
    lines = (out / "runs.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\r\n").split(",")
    fail = next(i for i, ln in enumerate(lines[1:], 1) if ln.split(",")[head.index("success")]
                == "0")
    diverged = edit_row(lines[fail], head, test_acc="nan", train_acc="nan", seconds="nan",
                         best_test_acc="nan")
    (out / "runs.csv").write_text("".join(lines[:fail] + [diverged] + lines[fail + 1:]))
    plan, cells = study.load_study(str(out))
    assert sum(math.isnan(r["test_acc"]) for rows in cells.values() for r in rows) == 1
    half = edit_row(lines[fail], head, test_acc="nan")
    (out / "runs.csv").write_text("".join(lines[:fail] + [half] + lines[fail + 1:]))
    with pytest.raises(ValueError, match=f"runs.csv line {fail + 1}: not a valid mechanism row"):
        study.load_study(str(out))


def test_plan_refuses_a_factor_no_run_can_train_before_it_plans(tmp_path, capsys):
    """Issue 45: `plan --factor 1e9` was accepted and `run` trained the borderline rows before
    refusing the fixed cells; now plan refuses, naming the factor and the m it makes, and writes
    nothing; plan_cells(factor=-1) planned a cell of m = -13, now refused."""
    code, _, err = run_cli_main(capsys, mechanism.main, [
        "plan", str(tmp_path / "p"), "results/width/d-128", "--Ts", "10", "--seeds", "2",
        "--factor", "1e9"])
    study_refused(code, err, "factor = 1e+09 makes the fixed m = 21000000000",
                   "which no run can train")
    assert not (tmp_path / "p").exists()
    with pytest.raises(ValueError, match="factor must be a finite number > 0"):
        study.plan_cells(["results/width/d-128"], [10], n_seeds=2, factor=-1)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "study.growth_table": Walk(lambda f: dict(
        plan=folder.read_plan(walk_path("study")), cells=study.load_study(walk_path("study"))[1],
        W=study.seed_weights(12, [10, 100, 1000], 20), design="fixed",
        quantities=[("covering_constant", "C")]), run=False,
        legal=dict(cells={"missing key": "fewer cells: the fits take the T left"})),
    "study.plan_cells": Walk(lambda f: dict(folders=["results/width/d-128"], Ts=[10],
                                                extra=[], n_seeds=2, fixed_from=None,
                                                factor=2.0),
                                 ),
    # study.py
    "study.read_plan": Walk(lambda f: dict(out=walk_path("study")), names=dict(out=r"\bout\b|bogus")),
    "study.same_folder": Walk(lambda f: dict(a=walk_path("study"), b=walk_path("study") + "/"),
                              legal=dict(a={"'bogus'": "another folder: False"},
                                         b={"'bogus'": "another folder: False"})),
    "study.recorded_folder": Walk(lambda f: dict(recorded="study", beside=walk_path("trace"),
                                                 study=walk_path("study")),
                                  legal=dict(recorded={"'bogus'": "no such folder: None"},
                                             beside={"'bogus'": "from here: None"},
                                             study={"None": "the folder found, not a test",
                                                    "'bogus'": "another folder: False"})),
    "study.study_cells": Walk(lambda f: dict(source=walk_path("study"), design="borderline", Ts=[10],
                                             widths=None),
                              names=dict(Ts=r"\bTs?\b", widths=r"widths?")),
    "study.study_rows": Walk(lambda f: dict(out=walk_path("study"), plan=folder.read_plan(walk_path("study")),
                                            what="runs"),
                             legal=dict(out={"'bogus'": "no CSV there: no rows"})),
    "study.study_files": Walk(lambda f: dict(out=walk_path("study")),
                              legal=dict(out={"'bogus'": "no such folder: no files"})),
    "study.is_final": Walk(lambda f: dict(row=dict(step="20", steps="20")),
                           legal=dict(row={"missing key": "no step: a row of runs.csv"})),
    "study.load_runs": Walk(lambda f: dict(out=walk_path("study"), role="the study"),
                            legal=dict(role={"'bogus'": LITERAL}),
                            names=dict(out=r"\bout\b|bogus")),
    "study.load_study": Walk(lambda f: dict(out=walk_path("study")), names=dict(out=r"\bout\b|bogus")),
    "study.seed_weights": Walk(lambda f: dict(n_seeds=4, Ts=[10, 100], n_boot=20, seed=0),
                               legal=dict(seed=SEEDS, n_boot={"None": "intervals.N_BOOT"},
                                          Ts={"[5]": "a T"})),
    "study.weights_at": Walk(lambda f: dict(W=study.seed_weights(4, [10], 20),
                                            rows=[dict(T=10, seed=0)])),
    "study.weighted_median": Walk(lambda f: dict(v=np.array([1.0, 2, 3]),
                                                 w=np.ones((2, 3)))),
    "study.median_ci": Walk(lambda f: dict(rows=[dict(T=10, seed=s, x=float(s)) for s in range(4)],
                                           key="x", W=study.seed_weights(4, [10], 20))),
    "study.separation": Walk(lambda f: dict(
        cells_rows=[[dict(T=10, seed=s, x=float(s), success=s % 2) for s in range(4)]], key="x",
        W=study.seed_weights(4, [10], 20))),
    "study.word": Walk(lambda f: dict(lo=0.1, hi=0.3, null=0.0),
                       legal={k: SURELY_BOUND_LEGAL for k in ("lo", "hi", "null")}),
    "study.fmt": Walk(lambda f: dict(v=1.5, lo=1.0, hi=2.0, digits=3),
                      legal=dict(v={"None": "n/a", "nan": "n/a", "inf": "n/a", "-inf": "n/a",
                                    "-1": "a value", "0": "a value", "10**12": "a value"},
                                 **{k: {"nan": "n/a", "inf": "a bound", "-inf": "a bound",
                                        "-1": "a bound", "0": "a bound", "10**12": "a bound"}
                                    for k in ("lo", "hi")})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over study.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((study,), WALK)
