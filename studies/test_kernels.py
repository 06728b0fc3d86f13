"""test_kernels.py: the tests of studies/kernels.py.

Run from the repository's root: python -m pytest -q
"""
import json
import shutil

import pytest

from studies import kernels, mechanism
from studies.lib import cli, intervals
from studies.conftest import ARGV, tiny_plan, run_cli_main, walk_modules
from test_all import Walk


def test_kernels_counts_the_runs_that_change_outcome_and_the_verdicts_that_move(tmp_path,
                                                                              capsys):
    """Issue 46's question, how much the arithmetic moves the science: studies.kernels pairs a
    study's runs with the same runs made again (by seed) and counts the outcomes that change,
    with the exact sign test; a run changed in the copy is counted; one folder given twice, or
    two studies of no common cell, is one line."""
    a, b = tmp_path / "a", tmp_path / "b"
    tiny_plan(str(a), seeds=3, steps=10)
    assert mechanism._run_plan(str(a), log=lambda *x, **k: None) == 3
    shutil.copytree(a, b)
    lines = (b / "runs.csv").read_text().splitlines(keepends=True)
    header = lines[0].strip().split(",")
    cells = lines[1].rstrip("\r\n").split(",")
    was = cells[header.index("success")] == "1"
    cells[header.index("success")] = "0" if was else "1"
    cells[header.index("test_acc")] = "0.5" if was else "1.0"
    lines[1] = ",".join(cells) + "\r\n"
    (b / "runs.csv").write_text("".join(lines))
    text = kernels.kernels_table(str(a), str(b))
    assert f"1 of 3 runs change outcome ({int(was)} lost, {int(not was)} gained" in text
    assert intervals.sign_test(0, 0) == 1.0 and intervals.sign_test(4, 0) == 0.125
    assert intervals.sign_test(5, 0) == 0.0625
    code, out, err = run_cli_main(capsys, kernels.main, [str(a), str(a) + "/", "--out",
                                                         str(tmp_path / "k.md")])
    assert code == 2 and "are one folder" in err
    c = tmp_path / "c"
    tiny_plan(str(c), seeds=1, steps=10)
    plan = json.loads((c / "plan.json").read_text())
    plan["cells"][0].update(T=9)
    cli.write_json(str(c / "plan.json"), plan)
    assert mechanism._run_plan(str(c), log=lambda *x, **k: None) == 1
    with pytest.raises(ValueError, match="share no cell"):
        kernels.kernels_table(str(a), str(c))


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "kernels.kernels_table": Walk(lambda f: dict(study="results/mechanism",
                                                 rerun="results/mechanism-factors"), run=False,
                                  legal=dict(study={"'bogus'": "refused: no folder"},
                                             rerun={"'bogus'": "refused: no folder"})),
    "kernels.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over kernels.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((kernels,), WALK)
