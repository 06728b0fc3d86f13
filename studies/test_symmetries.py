"""test_symmetries.py: the tests of studies/symmetries.py.

Run from the repository's root: python -m pytest -q
"""
import json
import math
import os
import shutil

import numpy as np
import pytest

from studies import mechanism, symmetries
from studies.lib import cli, row_kinds, training
from studies.conftest import ARGV, NEW_FILE, synthetic_study, walk_path, walk_modules
from test_all import HERE, Walk


def _pairs(effect_small, effect_large, n=20):  # rows of a paired CSV, one arm, one width
    rows = []
    for T, eff in ((100, effect_small), (300, effect_small), (3000, effect_large)):
        for s in range(n):
            base = s % 2
            lose = eff < 0 and base == 1 and s < 2 * round(-eff * n)
            gain = eff > 0 and base == 0 and s < 2 * round(eff * n)
            rows.append(dict(intervention="freeze-ln1", d=64, T=T, seed=s, base_success=base,
                             int_success=0 if lose else 1 if gain else base))
    return rows


def test_the_interaction_is_established_where_the_effect_flips_and_not_where_it_does_not():
    flip = symmetries._interaction_row(_pairs(0.2, -0.3), ("freeze-ln1",), 64, n_boot=2000)
    (out, n), same = flip, symmetries._interaction_row(_pairs(0.1, 0.1), ("freeze-ln1",), 64,
                                                      n_boot=2000)
    assert out["small"][0] == pytest.approx(0.2) and out["large"][0] == pytest.approx(-0.3)
    assert out["difference"][0] == pytest.approx(-0.5) and out["difference"][2] < 0
    assert n["small"] == (0, 8, 40) and n["large"] == (6, 0, 20)
    assert same[0]["difference"][0] == 0 and same[0]["difference"][1] <= 0 <= same[0][
        "difference"][2]


def test_the_committed_interaction_table_is_what_the_command_writes(tmp_path, capsys,
                                                                       shipped_resamples):
    out = tmp_path / "interaction.md"
    symmetries.main(["interaction", os.path.join(HERE, "results/mechanism-interventions/full/"
                                                 "pairs.csv"), str(out)])
    got = out.read_text().splitlines()
    want = open(os.path.join(HERE, "results/symmetries/interaction.md")).read().splitlines()
    assert got[3:] == want[3:] and len(want) >= 12


def test_the_measures_table_says_which_measure_each_symmetry_moves():
    """On a small trained model: B_X moved by LN1's scale (a), not by the QK scale (b); W_QK's
    norms not by (b); the score gap and every canonical measure by none."""
    r = training.study_run(dict(T=12, m=80, steps=40, n_test=100, seed=5, d=16, heads=4, mlp=8,
                             dtype="float64", log_every=0), log=None)
    X = np.random.default_rng(0).integers(0, 2, (50, 12)).astype(float)
    lines = symmetries._measure_table([(r["params"], r["cfg"], r["S"], X, 80)])
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ")[2:] for ln in lines if ln.startswith("| ")}
    assert rows["B_X"][0] != "1" and rows["B_X"][1] == "1"          # (a) moves it, (b) does not
    assert all(rows[k][1] == "1" for k in ("qk_spec", "qk_21", "qk_fro"))
    assert rows["C"][0] != "1" and rows["v_spec"][2] != "1"
    assert all(x.strip(" |") == "1" for x in rows["score_gap"])
    canon = [k for k in rows if k.startswith("canonical")]
    assert len(canon) == 13 and all(x.strip(" |") == "1" for k in canon for x in rows[k])
    assert symmetries._ratio_text([1.0, 1 + 1e-12]) == "1"
    assert symmetries._ratio_text([0.5, 2.0]) == "x0.5 to x2"
    assert symmetries._ratio_text([1 + 2.6e-6, 1.01]) == "x(1 + 2.6e-06) to x1.01"


def test_each_paired_cell_gets_the_exact_sign_test_beside_its_bootstrap(tmp_path):
    """A cell of 4 lost and 0 gained: the exact test holds 0 (p = 0.125) whatever the bootstrap
    says; 11 lost, 0 gained excludes it; --seeds keeps only that seed range."""
    rows = [dict(intervention="a", d=64, T=100, seed=s, base_success=int(s < 4), int_success=0)
            for s in range(20)]
    rows += [dict(intervention="a", d=64, T=300, seed=s, base_success=int(s < 11), int_success=0)
             for s in range(20)]
    lines = symmetries._cells_table(rows, n_boot=2000)
    assert "| a | 64 | 100 | 20 | 4 | 0 |" in lines[2] and lines[2].endswith("| 0.125 | holds 0 |")
    assert lines[3].endswith("| 0.000977 | excludes 0 |")
    only = symmetries._cells_table(rows, seeds=(10, 19), n_boot=2000)
    assert "| a | 64 | 100 | 10 | 0 | 0 |" in only[2] and "| a | 64 | 300 | 10 | 1 | 0 |" in only[3]
    with pytest.raises(cli.BadValue):
        symmetries._seed_range("39-20")


def _rerun_of(study_dir, out, design, canon_C, edit=None):
    """A `baseline-rerun` folder of the synthetic study's `design` cells: its rows again, every
    factor 1, each canonical measure 1 but canon_C (a function of the row), `edit` applied."""
    import csv
    plan = json.load(open(os.path.join(study_dir, "plan.json")))
    rows = [dict(r, design="baseline-rerun", **dict.fromkeys(row_kinds.MECHANISM_FACTORS, 1.0),
                 **dict.fromkeys(row_kinds.MECHANISM_CANONICAL, 1.0))
            for r in csv.DictReader(open(os.path.join(study_dir, "runs.csv")))
            if r["design"] == design]
    for r in rows:
        r["canon_C"] = canon_C(r)
    if edit:
        edit(rows)
    os.makedirs(out)
    cli.write_json(os.path.join(out, "plan.json"), dict(plan, cells=[
        dict(c, design="baseline-rerun") for c in plan["cells"] if c["design"] == design]))
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=mechanism.FIELDS)
        w.writeheader()
        w.writerows(rows)


def test_the_canonical_table_sets_each_separation_raw_beside_canonical(tmp_path):
    """Issue 47: where the raw C separates failures and the canonical C is the same for every run,
    the table says established beside not detected; the growth table fits both; the runs that
    do not give the study's test accuracy and C to the bit are counted."""
    study_dir, b, f = (str(tmp_path / n) for n in ("study", "b", "f"))
    synthetic_study(study_dir)

    def one_changed(rows):
        rows[0]["test_acc"] = 0.5
    _rerun_of(study_dir, b, "borderline", lambda r: 3.0, one_changed)
    _rerun_of(study_dir, f, "fixed", lambda r: 5 + math.log(int(r["T"])))
    out = tmp_path / "canonical.md"
    symmetries.canonical_command(b, f, study_dir, str(out), n_boot=2000, log=lambda *a: None)
    text = out.read_text()
    assert "35 of 36 borderline and 36 of 36 fixed-m reruns" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| C |"))
    raw, canon = row.strip(" |").split(" | ")[1:3]
    assert raw.endswith("established") and canon.endswith("not detected"), row
    assert "| 64 | C (canonical) | 10, 100, 1000 |" in text
    shutil.copytree(study_dir, tmp_path / "study-copy")     # the study where its rerun belongs
    with pytest.raises(ValueError, match="baseline-rerun"):
        symmetries.canonical_command(str(tmp_path / "study-copy"), f, study_dir,
                                     str(tmp_path / "x.md"), n_boot=10, log=lambda *a: None)


def test_same_counts_the_runs_two_folders_share_to_the_bit(tmp_path):
    """A rerun of every borderline run but one, whose final loss moved in its last bit: 35 of 36
    the same, and that run's cell says which."""
    study_dir, b = str(tmp_path / "study"), str(tmp_path / "b")
    synthetic_study(study_dir)

    def nudge(rows):
        rows[0]["final_loss"] = math.nextafter(float(rows[0]["final_loss"]), 1.0)
    _rerun_of(study_dir, b, "borderline", lambda r: 1.0, nudge)
    out = tmp_path / "same.md"
    symmetries.same_command(study_dir, b, str(out), log=lambda *a: None)
    text = out.read_text()
    assert "35 of 36 runs are." in text and "| 64 | 10 | 12 | 11 |" in text
    with pytest.raises(ValueError, match="same cells"):
        symmetries.same_command(str(tmp_path / "b"), _empty_like(tmp_path, b), str(out))


def _empty_like(tmp_path, src):  # a folder of the same plan whose runs are of other seeds
    import csv
    dst = str(tmp_path / "other")
    shutil.copytree(src, dst)
    rows = list(csv.DictReader(open(os.path.join(dst, "runs.csv"))))
    plan = json.load(open(os.path.join(dst, "plan.json")))
    cli.write_json(os.path.join(dst, "plan.json"), dict(plan, seeds=40))
    with open(os.path.join(dst, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=mechanism.FIELDS)
        w.writeheader()
        w.writerows([dict(r, seed=int(r["seed"]) + 20) for r in rows])
    return dst


def test_the_symmetries_tables_may_be_written_again_over_themselves(tmp_path):
    """cli.claim_output replaces only a file this project wrote: each new symmetries table must
    be recognised as one (TABLE_HEADS), or the second run of its command refuses."""
    study_dir, b = str(tmp_path / "study"), str(tmp_path / "b")
    synthetic_study(study_dir)
    _rerun_of(study_dir, b, "borderline", lambda r: 1.0)
    out = str(tmp_path / "t.md")
    for _ in range(2):
        symmetries.same_command(study_dir, b, out, log=lambda *a: None)
    _rerun_of(study_dir, str(tmp_path / "f"), "fixed", lambda r: 1.0)
    for _ in range(2):
        symmetries.canonical_command(b, str(tmp_path / "f"), study_dir, out, n_boot=10,
                                     log=lambda *a: None)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # symmetries.py (issue 47): its commands and exact tests
    "symmetries.measures_command": Walk(lambda f: dict(out=walk_path("m.md"),
                                                       plan="results/mechanism/plan.json",
                                                       log=print), run=False,
                                        legal=dict(out=NEW_FILE)),
    **{f"symmetries.{c}_command": Walk(lambda f: dict(
        pairs="results/mechanism-interventions/full/pairs.csv", out=walk_path("i.md"), n_boot=10,
        log=print), run=False, legal=dict(out=NEW_FILE, n_boot={"10**12": "refused"}))
       for c in ("interaction", "cells")},
    "symmetries.canonical_command": Walk(lambda f: dict(
        borderline=walk_path("study"), fixed=walk_path("study2"), study=walk_path("study3"), out=walk_path("c.md"), n_boot=10,
        log=print), run=False, legal=dict(out=NEW_FILE, n_boot={"10**12": "refused"})),
    "symmetries.same_command": Walk(lambda f: dict(first=walk_path("study"), second=walk_path("study2"),
                                                   out=walk_path("s.md"), log=print),
                                    run=False, legal=dict(out=NEW_FILE)),
    "symmetries.ball_command": Walk(lambda f: dict(
        study="results/extended", folders=["results/protocols/qk-ball-4"],
        n_seeds=10, Ts=[100], out=walk_path("b.md"), log=print), run=False,
        legal=dict(out=NEW_FILE, n_seeds={"10**12": "refused"})),
    "symmetries.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over symmetries.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((symmetries,), WALK)
