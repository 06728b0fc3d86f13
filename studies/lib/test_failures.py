"""test_failures.py: the tests of studies/lib/failures.py.

Run from the repository's root: python -m pytest -q
"""
import errno
import os
import shutil

import pytest

import theory
from studies import mechanism
from studies.lib import cli, failures, folder
from studies.conftest import (NEW_FILE, copy_folder, edit_plan, study_refused, synthetic_study,
                              synthetic_trace, walk_path, run_cli_main, walk_modules)
from test_all import HERE, Walk


def test_trace_report_finds_which_split_comes_first(tmp_path):
    out = str(tmp_path)
    synthetic_trace(out)
    text = failures.trace_report(out, log=lambda *a: None)
    assert open(os.path.join(out, "table.md")).read() == text
    onsets = next(ln for ln in text.splitlines() if ln.startswith("| 8 | 8 | 16 | 4 / 4 |"))
    cols = [c.strip() for c in onsets.split("|")]
    assert cols[5:7] == ["50 / 50", "100 / 100"] and cols[-2] == "before"
    step = lambda k: next(ln for ln in text.splitlines() if ln.startswith(f"| 8 | 8 | 16 | {k} |"))
    assert "| 5 / 5 | 0 [0, 0] not detected |" in step(1)            # no split at the start
    assert "| 5 / 6.55 | 1.55 [" in step(50) and "established" in step(50).split("|")[6]
    assert "not detected" in step(50).split("|")[8]                  # test accuracy: not yet
    assert "Where B_X comes from" not in text                        # an older file: no columns


def test_trace_report_says_where_B_X_comes_from(tmp_path):
    out = str(tmp_path)
    synthetic_trace(out, source=True)
    text = failures.trace_report(out, log=lambda *a: None)
    part = text.split("### Where B_X comes from")[1]
    step = lambda k: [c.strip() for c in next(
        ln for ln in part.splitlines() if ln.startswith(f"| 8 | 8 | 16 | {k} |")).split("|")]
    c1, c50 = step(1), step(50)
    assert c1[5:9] == ["1 / 1", "0 [0, 0] not detected", "0.1 / 0.1", "0 [0, 0] not detected"]
    assert c50[5] == "1 / 1.2" and c50[6].startswith("0.2 [") and c50[6].endswith("established")
    assert c50[9:11] == ["4/4 / 0/4", "-1 [-1, -1] established"]            # [CLS]: successes
    assert c50[11] == "0/4 / 0/4" and c50[13] == "0/4 / 4/4" and c50[15] == "0/4 / 4/4"
    assert c50[16] == "1 [1, 1] established"                                # in S: failures


def test_factors_report_holds_each_factor_exactly(tmp_path, capsys):
    """Issue 38: on made-up runs whose failures differ from their successes only in B_X (and so
    in C), B_X and C separate them fully, C with B_X held at its cell median does not separate
    at all (every run's C is then the same) and C with any other factor held still does; a
    study whose runs lack C's factors is refused in one line that says how to get them."""
    import csv
    out = str(tmp_path / "s")
    synthetic_study(out)
    path = os.path.join(out, "runs.csv")
    rows = list(csv.DictReader(open(path)))
    parts = dict(heads_scores=0.3, heads_values=2.0, heads_readout=1.0)
    for r in rows:
        B = 8.0 + (r["success"] == "0")
        r.update(parts, B_X=B, readout_norm=0.9, mlp_factor=1.5, qk_fro=0.1, v_21=1.0,
                 covering_constant=float(theory.covering_from_parts(B, 1.35, **parts)))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=mechanism.FIELDS)
        w.writeheader()
        w.writerows(rows)
    text = open(failures.factors_report(out, str(tmp_path / "f.md"))).read()
    line = lambda q: next(x for x in text.splitlines() if x.startswith(f"| 64 | {q} |"))
    for q in ("C", "B_X (token norm after LN1)", "C, ‖W_QK‖_F held at its cell median",
              "C, readout ‖w‖ held at its cell median"):
        assert "| 1 [1, 1] | established |" in line(q), q
    assert "| 0.5 [0.5, 0.5] | not detected |" in line("C, B_X held at its cell median")
    assert "equals the runs' C to" in text
    with pytest.raises(ValueError, match="is not a baseline-rerun of"):
        failures.factors_report(out, str(tmp_path / "h.md"), factors=out)
    code, _, err = run_cli_main(capsys, mechanism.main, ["factors", "results/mechanism", "--out",
                                                         str(tmp_path / "g.md")])
    assert code == 1 and "do not carry C's factors" in err and "baseline-rerun" in err
    assert not os.path.exists(tmp_path / "g.md")


SCREEN = "results/mechanism-interventions/screen"


def _paired_folders(tmp_path):
    """A copy of the mechanism study and of the screen's freeze-ln1 arm, and a folder `other`
    holding a pairs table of its own (the committed screen's pairs.csv)."""
    study, arm, other = tmp_path / "study", tmp_path / "arm", tmp_path / "other"
    copy_folder("results/mechanism", study)
    copy_folder(f"{SCREEN}/freeze-ln1", arm)
    other.mkdir()
    shutil.copy(f"{SCREEN}/pairs.csv", other / "pairs.csv")
    return study, arm, other


def test_paired_claims_every_output_before_it_writes_and_names_a_full_disk(tmp_path, capsys,
                                                                          monkeypatch):
    """Issue 45: `paired` claims its page and its pairs table (free or a table, neither an input
    nor the other) before it writes either, then writes each whole under a temporary name: a
    refused --out leaves --pairs untouched (before, the pairs were already written over), --out X
    --pairs X and a --pairs or --out that is one of the folders' files are one line, and a full
    disk leaves the old pairs.csv whole and names it."""
    study, arm, other = _paired_folders(tmp_path)
    notes, old = tmp_path / "notes.txt", (other / "pairs.csv").read_bytes()
    notes.write_text("my notes\n")
    files = lambda: {p: p.read_bytes() for d in (study, arm, other, tmp_path) for p in d.iterdir()
                     if p.is_file() and p.name != ".lock"}
    before = files()
    mech = lambda *argv: run_cli_main(capsys, mechanism.main, ["paired", str(study), str(arm),
                                                               *argv])
    for argv, words in (
            (["--out", str(notes), "--pairs", str(other / "pairs.csv")],
             ["notes.txt exists and is not a table"]),
            (["--out", str(tmp_path / "x.md"), "--pairs", str(tmp_path / "x.md")],
             ["are the same file"]),
            (["--out", str(tmp_path / "p.md"), "--pairs", str(arm / "runs.csv")],
             ["--pairs", "a file this command reads"]),
            (["--out", f"{study}/./plan.json"], ["--out", "a file this command reads"]),
            (["--out", str(tmp_path / "p.md"), "--pairs", str(study / "runs.csv")],
             ["--pairs", "a file this command reads"])):
        code, _, err = mech(*argv)
        study_refused(code, err, *words)
        assert files() == before, argv
    real = cli.replace_atomically

    def full_disk(path, write):
        def half(f):
            f.write(b"intervention,d,T")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, half)
    monkeypatch.setattr(cli, "replace_atomically", full_disk)
    code, _, err = mech("--out", str(tmp_path / "p.md"), "--pairs", str(other / "pairs.csv"))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(other / "pairs.csv") in err and "No space left" in err, err
    assert (other / "pairs.csv").read_bytes() == old and files() == before
    assert sorted(os.listdir(other)) == ["pairs.csv"]               # no temporary left behind


@pytest.mark.parametrize("where", ["slash", "dot", "absolute", "from results/"])
def test_factors_takes_the_study_in_any_spelling(tmp_path, capsys, monkeypatch, where,
                                                  fewer_resamples):
    """Issue 45: `factors STUDY --factors RERUN` compares the rerun's recorded study with STUDY as
    folders, not as text: a trailing slash, ./, an absolute path or a run from results/ (the
    plan recorded results/mechanism from the root) are the same study; another study is not.
    The first spelling draws the shipped resamples and gives the committed factors.md; the others
    draw the suite's fewer and give the table of the plain spelling drawn so (_plain_factors):
    the spelling decides which folders are read, not what is drawn from them."""
    tables = lambda path: [ln for ln in open(path) if ln.startswith("|")]  # the text echoes names
    if where == "slash":
        for (module, name), shipped in fewer_resamples.items():
            monkeypatch.setattr(module, name, shipped)
        want = tables(os.path.join(HERE, "results/mechanism-factors/factors.md"))
    else:
        want = _plain_factors(tmp_path / "plain.md", capsys, tables)
    out = str(tmp_path / "f.md")
    study, rerun = {"slash": ("results/mechanism/", "results/mechanism-factors/"),
                    "dot": ("./results/mechanism", "./results/mechanism-factors"),
                    "absolute": (os.path.abspath("results/mechanism"),
                                 os.path.abspath("results/mechanism-factors")),
                    "from results/": ("mechanism", "mechanism-factors")}[where]
    if where == "from results/":
        monkeypatch.chdir("results")
    code, _, err = run_cli_main(capsys, mechanism.main, ["factors", study, "--factors", rerun,
                                                         "--out", out])
    assert code == 0 and err == "", err
    assert tables(out) == want and len(want) > 10
    code, _, err = run_cli_main(capsys, mechanism.main, ["factors", rerun, "--factors", rerun,
                                                         "--out", out])
    study_refused(code, err, "is not a baseline-rerun of")


_PLAIN = []


def _plain_factors(out, capsys, tables):
    """The table lines of `factors results/mechanism --factors results/mechanism-factors` at the
    suite's resamples, made once for the session."""
    if not _PLAIN:
        code, _, err = run_cli_main(capsys, mechanism.main, [
            "factors", "results/mechanism", "--factors", "results/mechanism-factors", "--out",
            str(out)])
        assert code == 0 and err == "", err
        _PLAIN.append(tables(out))
    return _PLAIN[0]


def test_paired_and_trace_report_refuse_what_they_cannot_read_in_one_line(tmp_path, capsys):
    """Issue 45: an arm planned but not run (paired, factors), a trajectories folder given as an
    arm, a study or to report, a study paired
    with itself (in another spelling) or an arm given twice, a trajectories file missing a middle
    logged step of one run, and a trajectories plan without `every` are one line naming the
    folder or file and line; before: StopIteration, KeyError, or a page of zero differences."""
    study, arm, _ = _paired_folders(tmp_path)
    planned, trace = tmp_path / "planned", tmp_path / "trace"
    planned.mkdir()
    shutil.copy(arm / "plan.json", planned / "plan.json")
    synthetic_trace(str(trace))
    out = ["--out", str(tmp_path / "p.md")]
    mech = lambda *argv: run_cli_main(capsys, mechanism.main, list(argv))
    for argv, words in (
            (["paired", str(study), str(planned), *out], ["planned: no finished runs in",
                                                          "studies.mechanism run"]),
            (["paired", str(study), str(trace), *out], ["is a trajectories folder"]),
            (["paired", str(trace), str(arm), *out], ["is a trajectories folder"]),
            (["paired", str(study), f"{study}/", *out], ["is the study's folder"]),
            (["paired", str(study), str(arm), f"./{os.path.relpath(arm)}", *out],
             ["is given twice"]),
            (["factors", str(planned), *out], ["planned: no finished runs in"]),
            (["factors", str(study), "--factors", str(planned), *out],
             ["--factors", "planned: no finished runs in"]),
            (["factors", str(trace), *out], ["is a trajectories folder"]),
            (["report", str(trace)], ["is a trajectories folder"])):
        code, _, err = mech(*argv)
        study_refused(code, err, *words)
    assert not (tmp_path / "p.md").exists()
    lines = (trace / "trajectories.csv").read_text().splitlines(keepends=True)
    gone = next(i for i, ln in enumerate(lines) if ln.startswith("fixed,8,8,16,2,100,"))
    (trace / "trajectories.csv").write_text("".join(lines[:gone] + lines[gone + 1:]))
    code, _, err = mech("trace-report", str(trace))
    study_refused(code, err, f"trajectories.csv line {gone + 1}:",
              "seed=2 has no row at step 100")
    synthetic_trace(str(tmp_path / "trace2"))
    edit_plan(lambda p: p.pop("every"))(tmp_path / "trace2")
    code, _, err = mech("trace-report", str(tmp_path / "trace2"))
    study_refused(code, err, "plan.json: every is missing")
    assert not (trace / "table.md").exists() and not (tmp_path / "trace2" / "table.md").exists()


def test_trace_report_finds_its_study_from_another_folder(tmp_path, monkeypatch):
    """Issue 45: a trajectories plan records its study as the command was given it
    (results/mechanism, from the root); trace-report run from inside the folder finds that study
    from the folders above it and checks the runs' ends, as from the root (before: 'could not be
    read')."""
    for name in ("mechanism", "mechanism-trajectories"):
        copy_folder(f"results/{name}", tmp_path / "results" / name)
    monkeypatch.chdir(tmp_path)                    # the copy's root: no committed file is written
    at_root = failures.trace_report("results/mechanism-trajectories", log=lambda *a: None)
    monkeypatch.chdir(tmp_path / "results" / "mechanism-trajectories")
    text = failures.trace_report(".", log=lambda *a: None)
    check = lambda t: next(ln for ln in t.splitlines() if ln.startswith("The monitor only"))
    assert check(text) == check(at_root) and "of results/mechanism (same d" in check(text)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # failures.py
    "failures.factors_report": Walk(lambda f: dict(study="results/mechanism", out=walk_path("f.md"),
                                                   factors="results/mechanism-factors"),
                                    legal=dict(out=NEW_FILE)),
    "failures.paired_report": Walk(lambda f: dict(study="results/mechanism",
                                                  arms=[f"{SCREEN}/freeze-ln1"], out=walk_path("p.md"),
                                                  pairs_csv=walk_path("p.csv")),
                                   legal=dict(out=NEW_FILE, pairs_csv={
                                       **NEW_FILE, "None": "no pairs table asked for"})),
    "failures.plan_cost": Walk(lambda f: dict(plan=folder.read_plan(f"{SCREEN}/freeze-ln1"),
                                              source="results/mechanism")),
    "failures.trace_report": Walk(lambda f: dict(out=walk_path("trace"), log=lambda *a: None)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over failures.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((failures,), WALK)
