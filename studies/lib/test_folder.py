"""test_folder.py: the tests of studies/lib/folder.py, studies/lib/row_kinds.py,
studies/lib/folder_write.py.

Run from the repository's root: python -m pytest -q
"""
import ast
import errno
import glob
import importlib
import json
import math
import os
import re
import shutil

import numpy as np
import pytest

import theory
from studies import mechanism, steps, sweep
from studies.lib import cli, folder, folder_write, limits, measures, row_kinds, study, workers
from studies.conftest import (NEW_FILE, STEPS_TINY, STUDIES, WALK_TMP, copy_folder, edit_row,
                              one_line_refusal, sweep_refused, snapshot, smoke_sweep,
                              synthetic_study, tiny_plan, two_head_model, walk_path, run_cli,
                              run_cli_main, walk_modules)
from test_all import LITERAL, Walk, source_tree


def test_rows_must_agree_with_themselves_each_other_and_their_sweep_json(tmp_path, capsys,
                                                                         smoke_ref, monkeypatch):
    """Family 3: one row validator (folder.check_rows, folder._check_meta) for resume, merge and
    report: a contradiction stops with one line naming the file and line; a torn row in the
    middle of a file is named in a warning; a run recorded twice alike counts once."""
    ref_table = (smoke_ref / "table.md").read_text()
    lines = (smoke_ref / "runs.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    success = [ln.split(",")[header.index("success")] for ln in lines]
    ok, fail = success.index("1", 1), success.index("0", 1)        # a success, a failure
    variants = [(ok, dict(success="0"), "success 0 contradicts its test accuracy"),
                (fail, dict(success="1", test_acc="nan"), "success 1 contradicts its test "
                                                           "accuracy nan"),
                (fail, dict(test_acc="1.0"), "success 0 contradicts its test accuracy 1.0"),
                (fail, dict(test_acc="0.995"), "success 0 contradicts its test accuracy 0.995")]
    f = copy_folder(smoke_ref, tmp_path / "f")
    for i, fields, msg in variants:
        (f / "runs.csv").write_text("".join(lines[:i] + [edit_row(lines[i], header, **fields)]
                                            + lines[i + 1:]))
        where = f"runs.csv line {i + 1}"
        for extra in (["--report"], []):                            # report, and resume
            err = sweep_refused(f, capsys, *extra)
            assert msg in err and where in err, (fields, err)
        code, _, err = run_cli(capsys, "sweep", "compare", str(f))
        assert code == 2 and msg in err and where in err
        with pytest.raises(ValueError, match=re.escape(where)):
            folder.folder_runs(str(f))
    flipped = edit_row(lines[ok], header, success="0", test_acc="0.5")     # one run, twice
    (f / "runs.csv").write_text("".join(lines) + flipped)
    err = sweep_refused(f, capsys, "--report")
    assert "opposite outcomes" in err and f"line {ok + 1}" in err and f"line {len(lines) + 1}" in err
    (f / "runs.csv").write_text("".join(lines) + lines[ok])         # the same outcome twice
    shutil.copy(f / "runs.csv", f / "runs-shard-0-of-1.csv")        # and a copy of the file
    assert smoke_sweep(f, "--report") == 0 and (f / "table.md").read_text() == ref_table
    os.remove(f / "runs-shard-0-of-1.csv")
    torn = lines[:3] + [lines[3][:20] + "\r\n", "\x00" * 30 + "\r\n"] + lines[5:]
    (f / "runs.csv").write_text("".join(torn) + lines[5][:10])      # and a torn last line
    capsys.readouterr()
    assert smoke_sweep(f, "--report") == 0
    err = capsys.readouterr().err
    assert "runs.csv line 4: a torn row" in err and "runs.csv line 5: a torn row (NUL" in err
    last = f"runs.csv line {len(torn) + 1}: the last row is cut mid-line, skipped; a run killed"
    assert last in err and len(err.strip().splitlines()) == 3       # each named, none believed
    (f / "runs.csv").write_text("".join(lines))
    meta = json.loads((smoke_ref / "sweep.json").read_text())
    for edit, field in [(dict(options=dict(meta["options"], steps=151)), "sweep_id"),
                        (dict(bar=0.5), "sweep_id"), (dict(plan=dict(meta["plan"], Ts="8")), "plan"),
                        (dict(plan=dict(meta["plan"], seeds=0)), "plan"), (dict(plan=[1]), "plan"),
                        (dict(grids={"transformer": [8, "x"]}), "grids"),
                        (dict(options=dict(meta["options"], lr="0.001")), "options")]:
        (f / "sweep.json").write_text(json.dumps(dict(meta, **edit)))
        for extra in (["--report"], []):
            err = sweep_refused(f, capsys, *extra)
            assert f"sweep.json: field '{field}'" in err, (edit, err)
        code, _, err = run_cli(capsys, "sweep", "compare", str(f))
        assert code == 2 and f"field '{field}'" in err
    (f / "sweep.json").write_text(json.dumps(meta))
    cached = json.loads((smoke_ref / "limits.json").read_text())
    (f / "limits.json").write_text(json.dumps({k: dict(v, median="x") for k, v in cached.items()}))
    monkeypatch.setattr(limits, "_LIMITS", {})      # else the process's own cache answers first
    assert smoke_sweep(f, "--report") == 0 and (f / "table.md").read_text() == ref_table
    assert json.loads((f / "limits.json").read_text()) == cached   # the damaged entry, redone
    (f / "limits.json").write_text("[1, 2]")                        # not a cache: left alone
    err = sweep_refused(f, capsys, "--report")
    assert "not a cache of statistical limits" in err and (f / "limits.json").read_text() == "[1, 2]"


def test_fingerprint_survives_new_options_at_their_defaults():
    meta = dict(options=dict(task="and", steps=1000, lr=1e-3), bar=0.99, search="bisect")
    more = dict(meta, options=dict(meta["options"], dropout=0.0, clip=0.0, optimizer="adam"))
    assert folder.sweep_fingerprint(meta) == folder.sweep_fingerprint(more)
    assert folder.sweep_fingerprint(meta) != folder.sweep_fingerprint(
        dict(meta, options=dict(meta["options"], steps=500)))


def test_old_headers_are_continued_aside_and_mixed_rows_refused(tmp_path, capsys, smoke_ref):
    copy_folder(smoke_ref, tmp_path)
    path = tmp_path / "runs.csv"
    lines = path.read_text().splitlines(keepends=True)
    old_cols = lines[0].rstrip("\n").split(",")[:12]                # an older, shorter header
    path.write_text(",".join(old_cols) + "\n" + "".join(          # all but the last 4 runs:
        ",".join(ln.rstrip("\n").split(",")[:12]) + "\n" for ln in lines[1:-4]))   # a few to do
    old = path.read_text()
    assert smoke_sweep(tmp_path) == 0                                     # resumes into a new file
    assert (tmp_path / "runs-part2.csv").exists()
    assert path.read_text() == old                                   # the old file untouched
    with open(path, "a") as f:                                       # a longer row under it
        f.write(lines[5])
    with pytest.raises(ValueError, match="more fields than the header"):
        row_kinds.read_rows([str(path)])
    empty = tmp_path / "e"
    empty.mkdir()
    (empty / "runs.csv").write_text("model,ta")                      # a header torn mid-write
    assert smoke_sweep(empty, "--Ts", "8", "--seeds", "1") == 0      # one search shows it runs


def test_a_second_sweep_into_a_busy_folder_stops_at_once(tmp_path, capsys):
    held = folder_write.lock_folder(str(tmp_path))              # as if another sweep were running
    try:
        with pytest.raises(SystemExit, match="^2$"):
            smoke_sweep(tmp_path)
        assert "in use by another sweep" in capsys.readouterr().err
        assert not (tmp_path / "runs.csv").exists()
    finally:
        held.close()
    assert smoke_sweep(tmp_path, "--Ts", "8", "--seeds", "1") == 0   # released: the folder works


def test_one_folder_runs_one_sweep_whatever_the_shard(tmp_path, capsys):
    """A shard beside the whole sweep, shards of two splits, or two shards of one split: the
    second to start into a folder stops at once, before it writes a row."""
    for first, second in [((0, 1), "0/2"), ((0, 2), "0/3"), ((0, 2), "1/2"), ((1, 3), "1/3")]:
        held = folder_write.lock_folder(str(tmp_path), first)
        try:
            with pytest.raises(SystemExit, match="^2$"):
                smoke_sweep(tmp_path, "--shard", second)
            err = capsys.readouterr().err
            assert "in use by another sweep" in err
            assert f"shard {first[0]}/{first[1]}" in err
            assert not list(tmp_path.glob("runs*.csv"))
        finally:
            held.close()


def test_sweep_rows_that_contradict_their_folder_are_one_line(smoke_ref, tmp_path, capsys):
    """Rows without a fingerprint are trusted to their folder's sweep.json, so they must agree
    with it: a row of another task, s or step count, an m off the folder's grid, or an m on the
    grid that the seed's bisection never runs (the issue's T = 16 row moved from m 26 to 17,
    which moved m90) stops report, resume and compare with one line naming the file and line."""
    lines = (smoke_ref / "runs.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    meta = json.loads((smoke_ref / "sweep.json").read_text())
    grid = meta["grids"]["transformer"]
    i = next(k for k, ln in enumerate(lines) if k and ln.split(",")[header.index("T")] == "16")
    m = int(lines[i].split(",")[header.index("m")])
    off = next(v for v in range(grid[0], grid[-1]) if v not in grid)
    probe = 17                        # on the grid; the edit of the first T = 16 row
    assert m == 26 and probe in grid
    f = copy_folder(smoke_ref, tmp_path / "f")
    for fields, msg in [(dict(task="or"), "task or is not the folder's task and"),
                        (dict(s="4"), "s 4 is not the folder's s 3"),
                        (dict(steps="151"), "steps 151 is not the folder's steps 150"),
                        (dict(m=str(off)), f"m {off} is not on the folder's transformer grid"),
                        (dict(m=str(probe)), f"m {probe} is not a size the folder's bisect "
                                             f"search runs")]:
        edited = edit_row(lines[i], header, sweep_id="", **fields)
        (f / "runs.csv").write_text("".join(lines[:i] + [edited] + lines[i + 1:]))
        for extra in (["--report"], []):
            err = sweep_refused(f, capsys, *extra)
            assert msg in err and f"runs.csv line {i + 1}" in err, (fields, err)
        code, _, err = run_cli(capsys, "sweep", "compare", str(f))
        one_line_refusal(code, err, msg)
    code, _, err = run_cli(capsys, "sweep", "families", str(smoke_ref), "--Ts", "7")
    one_line_refusal(code, err, "T = 7", "it holds T = 8, 16")


def test_trajectory_rows_are_checked_against_their_plan_and_run(tmp_path):
    out = str(tmp_path)
    tiny_plan(out, every=5)
    plan = folder.read_plan(out)
    row = dict(design="fixed", d="8", T="8", m="16", seed="0", step="5", B_X="3.0",
               score_gap="0.1", mass_on_S="0.4", top_head="1", train_loss="0.6",
               test_acc="0.9", success="0", final_test_acc="0.95", steps="20",
               cpu_seconds="0.1")
    check = lambda rows: folder.check_rows(rows, plan["bar"], plan, kind=row_kinds.TRAJECTORY_ROWS)
    assert len(check([dict(row), dict(row, step="1")])) == 2
    for bad, words in ((dict(row, step="7"), "not a logged step"),
                       (dict(row, success="1"), "contradicts its final test accuracy"),
                       (dict(row, m="17"), "not a cell of the folder's plan"),
                       (dict(row, steps="40"), "not its cell's steps")):
        with pytest.raises(ValueError, match=words):
            check([bad])
    with pytest.raises(ValueError, match="one run has one end"):
        check([dict(row), dict(row, step="10", final_test_acc="0.96")])
    with pytest.raises(row_kinds.BadRow):
        row_kinds.TRAJECTORY_ROWS["parse"](dict(row, step="21"))       # past the run's steps
    # where B_X comes from: all given and consistent, or all absent (a file from before them)
    src = dict(ln1_gain_rms="0.9", ln1_shift_norm="0.1", B_X_token="bit1", B_X_position="7",
               B_X_in_S="1")
    assert row_kinds.TRAJECTORY_ROWS["parse"](dict(row))["B_X_token"] == ""
    assert row_kinds.TRAJECTORY_ROWS["parse"](dict(row, **src))["B_X_position"] == "7"
    for bad in (dict(B_X_position="8"), dict(B_X_token="cls"), dict(B_X_token="bit2"),
                dict(B_X_in_S="2"), dict(ln1_gain_rms="-1"), dict(ln1_shift_norm=""),
                dict(B_X_token="cls", B_X_position="-1")):            # [CLS] is never in S
        with pytest.raises(row_kinds.BadRow):
            row_kinds.TRAJECTORY_ROWS["parse"](dict(row, **dict(src, **bad)))
    assert row_kinds.TRAJECTORY_ROWS["parse"](dict(row, **dict(src, B_X_token="cls",
                                                            B_X_position="-1", B_X_in_S="0")))
    with pytest.raises(ValueError, match="every"):
        folder.check_plan(dict(plan, every=3))                     # 20 steps: 20 not logged


def test_impossible_measures_in_a_row_are_refused_naming_the_line(smoke_ref, tmp_path):
    """Values no run can produce: a share of attention above 1, a negative time or norm, a best
    step past the last, a cosine beyond 1, an infinite measure: one line naming the file and line."""
    f = copy_folder(smoke_ref, tmp_path / "sweep")
    lines = (f / "runs.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\r\n").split(",")
    for edit in (dict(attn_on_S="7"), dict(seconds="-5"), dict(best_step="99999"),
                 dict(pos_overlap="5")):
        (f / "runs.csv").write_text("".join(lines[:2] + [edit_row(lines[2], head, **edit)]
                                            + lines[3:]))
        with pytest.raises(ValueError, match="runs.csv line 3: not a valid run row"):
            folder.folder_runs(str(f))
    out = tmp_path / "s"
    synthetic_study(str(out))
    lines = (out / "runs.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\r\n").split(",")
    for edit in (dict(B_X="-1"), dict(score_gap="inf"), dict(best_step="100000"),
                 dict(attn_on_S="2"), dict(norm_V="-0.5")):
        (out / "runs.csv").write_text("".join(lines[:2] + [edit_row(lines[2], head, **edit)]
                                              + lines[3:]))
        with pytest.raises(ValueError, match="runs.csv line 3: not a valid mechanism row"):
            study.load_study(str(out))


def test_numbers_are_read_as_written_never_as_int_reads_them(smoke_ref, tmp_path):
    """int() takes ' 8 ', '3_0' and '٣'; the project writes none of them: an option or a CSV value
    so spelled is refused, as is a list with an empty item or a value twice, and a pairs row of
    an intervention no study runs."""
    for text in ("3_0", " 3 ", "\u0663", "+3", "3.0"):
        with pytest.raises(cli.BadValue):
            cli.integer(1)(text)
    assert cli.integer(1)("30") == 30
    for text in ("8,,16", "10,", "10,10", " ", "8;16"):
        with pytest.raises(cli.BadValue):
            cli.int_list(text)
    assert cli.int_list("300, 100") == [100, 300]
    f = copy_folder(smoke_ref, tmp_path / "sweep")
    lines = (f / "runs.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\r\n").split(",")
    for v in (" 8", "0_8", "\u0668"):
        (f / "runs.csv").write_text("".join(lines[:2] + [edit_row(lines[2], head, T=v)]
                                            + lines[3:]))
        with pytest.raises(ValueError, match="runs.csv line 3: the value"):
            folder.folder_runs(str(f))
    pairs = tmp_path / "pairs.csv"
    rows = open("results/mechanism-interventions/full/pairs.csv").read().splitlines(keepends=True)
    pairs.write_text("".join(rows[:5] + [rows[5].replace("freeze-ln1,", "freeze-lnl,", 1)]
                             + rows[6:]))
    with pytest.raises(ValueError, match="pairs.csv line 6: not a valid pair row"):
        row_kinds.read_whole(str(pairs), row_kinds.PAIR_ROWS)


def test_mechanism_rows_carry_Cs_factors_and_older_files_still_read(tmp_path):
    """Issue 38: measure_mechanism's C's factors give C again (covering_from_parts); a runs.csv
    written before those columns reads with them nan; a row with only some of them, or a negative
    one, is refused; a folder of the older header resumed by this version continues in
    runs-part2.csv, which study_rows reads with it."""
    R, T, S = 5.0, 6, [1, 3]
    p, cfg = two_head_model(R, T, S)
    p["w"][0] = 3.0
    X = (np.random.default_rng(1).random((50, T)) < 0.5).astype(np.uint8)
    m = measures.measure_mechanism(p, cfg, S, X)
    assert set(row_kinds.MECHANISM_FACTORS) <= set(m) <= set(m) | set(workers.MEASURED)
    C = theory.covering_from_parts(m["B_X"], m["readout_norm"] * m["mlp_factor"],
                                   *(m[k] for k in theory.COVERING_SUMS))
    assert abs(C / m["covering_constant"] - 1) < 1e-12 and m["readout_norm"] == 3.0
    out = str(tmp_path / "s")
    synthetic_study(out)                       # rows without the factor columns: written ""
    plan, cells = study.load_study(out)
    r = cells[("borderline", 64, 10, 20)][0]
    assert all(math.isnan(r[k]) for k in row_kinds.MECHANISM_FACTORS)
    older = [k for k in mechanism.FIELDS if k not in row_kinds.MECHANISM_FACTORS
             + row_kinds.MECHANISM_CANONICAL]                 # the first header: neither group
    import csv
    rows = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:     # the older header
        w = csv.DictWriter(f, fieldnames=older, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows[:-1])
    writer = folder_write.RowWriter(os.path.join(out, "runs.csv"), row_kinds.MECHANISM_ROWS)
    assert writer.path.endswith("runs-part2.csv")
    last = dict(rows[-1], **{k: 1.0 for k in row_kinds.MECHANISM_FACTORS})
    writer.write(last)
    writer.close()
    import shutil
    shutil.copy(os.path.join(out, "runs-part2.csv"), os.path.join(out, "runs-partial.csv"))
    got = study.study_rows(out, plan)          # not a continuation: runs-partial.csv unread
    assert len(got) == len(rows) and got[-1]["qk_fro"] == "1.0"
    for bad in (dict(last, qk_fro=""), dict(last, v_21="-1")):
        with pytest.raises(row_kinds.BadRow):
            row_kinds.MECHANISM_ROWS["parse"](bad)


def test_a_full_disk_while_locking_a_folder_names_the_lock_file(tmp_path, monkeypatch):
    """Issue 45: `trace-report` and `arm` on a full disk named no file: the lock's holder line
    failed to write. Now the OSError names OUT/.lock (one line through cli.one_line_errors)."""
    class Full:
        def __init__(self, path, mode, **kw):
            self.f = open(path, mode, **kw)

        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.f, name)
    monkeypatch.setattr(folder_write, "open", Full, raising=False)
    with pytest.raises(OSError) as e:
        folder_write.lock_folder(str(tmp_path))
    assert e.value.filename == os.path.join(str(tmp_path), ".lock")


def test_no_command_adds_runs_or_reports_into_another_commands_folder(smoke_ref, steps_ref,
                                                                       tmp_path, capsys):
    """A folder holds one kind of runs (folder.check_folder_kind): a sweep, steps.py or the
    mechanism study pointed at another's folder ends in one line naming it, writing nothing."""
    sweep_f, steps_f, study_f = tmp_path / "sweep", tmp_path / "steps", tmp_path / "study"
    copy_folder(smoke_ref, sweep_f)
    copy_folder(steps_ref, steps_f)
    synthetic_study(str(study_f))
    cases = [(sweep, ["--preset", "smoke", "--workers", "1", "--out", str(f)] + extra, f)
             for f in (steps_f, study_f) for extra in ([], ["--report"])]
    cases += [(steps, ["--out", str(f)] + extra + STEPS_TINY, f)
              for f in (sweep_f, study_f) for extra in ([], ["--report"])]
    cases += [(steps, ["--report", "--out", str(steps_f), "--against", str(sweep_f)]
               + STEPS_TINY, sweep_f)]
    cases += [(mechanism, ["plan", str(f), str(smoke_ref), "--Ts", "8"], f)
              for f in (sweep_f, steps_f)]
    shutil.copy(study_f / "plan.json", sweep_f / "plan.json")      # a sweep's folder with a plan
    cases += [(mechanism, [sub, str(sweep_f)], sweep_f) for sub in ("run", "report")]
    for module, argv, f in cases:
        before = snapshot(tmp_path)
        code, out, err = run_cli_main(capsys, module.main, argv)
        if isinstance(code, str):
            code, err = 1, err + code + "\n"
        assert code not in (0, None) and err.count("\n") == 1 and str(f) in err, (argv, err)
        assert "holds" in err and snapshot(tmp_path) == before, (argv, err)


PARSERS = {("json", "load"), ("json", "loads"), ("csv", "reader"), ("csv", "DictReader"),
           ("np", "load"), ("numpy", "load"), ("folder", "parse_json")}


def _parsing_sites():
    """(module.function, line) of every call that parses a file's text in studies/*.py (not
    tests): json.load(s), csv.reader, csv.DictReader, np.load; the function is the top-level
    one (or Class.method) that holds the call."""
    sites = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "**", "*.py"),
                                  recursive=True)):
        name = os.path.basename(path)[:-3]
        if name.startswith("test_"):
            continue
        tree = source_tree(path)
        for top in tree.body:
            for node in ast.walk(top):
                f = getattr(node, "func", None)
                if isinstance(node, ast.Call) and (
                        isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                        and (f.value.id, f.attr) in PARSERS
                        or isinstance(f, ast.Name) and f.id in {a for _, a in PARSERS}):
                    where = getattr(top, "name", "<module>")
                    sites.append((f"{name}.{where}", node.lineno))
    return sites


def test_no_code_parses_a_study_file_but_its_declared_reader():
    """By construction (issue 53): every json/csv/npz parse in studies/ is inside a reader that
    folder.READERS declares, or a helper of theirs (folder.PARSE_HELPERS)."""
    allowed = set(folder.READERS.values()) | set(folder.PARSE_HELPERS)
    sites = _parsing_sites()
    assert len(sites) >= 5                                  # the scan sees the readers themselves
    assert {f for f, _ in sites} <= allowed, [s for s in sites if s[0] not in allowed]
    for qualified in allowed:                               # and each declared name exists
        module, function = qualified.split(".")
        where = "studies.lib" if os.path.exists(os.path.join(STUDIES, "lib", module + ".py")) \
            else "studies"
        assert callable(getattr(importlib.import_module(f"{where}.{module}"), function)), qualified


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "folder.read_done": Walk(lambda f: dict(path="results/parity/s-2/steps.csv", meta=None),
                            legal=dict(path={"'bogus'": "a folder with no steps CSV: no runs"})),
    "folder.read_steps_meta": Walk(lambda f: dict(out="results/parity/s-2"),
                                  names=dict(out=r"\bout\b|holds no readable steps.json")),
    "row_kinds.check_kind": Walk(lambda f: dict(kind=row_kinds.SWEEP_ROWS)),
    "row_kinds.check_row_list": Walk(lambda f: dict(rows=[])),
    "row_kinds.check_bar": Walk(lambda f: dict(bar=0.99), legal=dict(bar={"None": "no bar"})),
    "row_kinds.csv_header": Walk(lambda f: dict(path="results/extended/runs.csv"),
                                 legal=dict(path={"'bogus'": "no file: no header yet"})),
    "row_kinds.header_state": Walk(lambda f: dict(path="results/extended/runs.csv",
                                                  fields=row_kinds.ROW_FIELDS),
                                   legal=dict(path={"'bogus'": "a missing file: fresh"},
                                              fields={"list": "column names in a list",
                                                      "short": "another header: other"})),
    "folder.read_curves": Walk(lambda f: dict(out="results/parity/s-2"),
                               legal=dict(out={"'bogus'": "a folder with no curves: none"})),
    # folder.py
    "row_kinds.read_rows": Walk(lambda f: dict(paths=[walk_path("study", "runs.csv")], warn=None,
                                            kind=row_kinds.MECHANISM_ROWS)),
    "row_kinds.read_whole": Walk(lambda f: dict(
        path="results/mechanism-interventions/full/pairs.csv", kind=row_kinds.PAIR_ROWS)),
    "folder.check_rows": Walk(lambda f: dict(
        rows=row_kinds.read_rows([walk_path("study", "runs.csv")], kind=row_kinds.MECHANISM_ROWS), bar=0.99,
        meta=folder.read_plan(walk_path("study")), kind=row_kinds.MECHANISM_ROWS),
        legal=dict(bar={"None": "no bar: rows checked alone"},
                   meta={"None": "no plan: rows checked alone"})),
    "folder.study_csvs": Walk(lambda f: dict(path=walk_path("study", "runs.csv"),
                                             kind=row_kinds.MECHANISM_ROWS, what="runs"),
                              legal=dict(what={"*": LITERAL})),
    "folder_write.RowWriter": Walk(lambda f: dict(path=walk_path("rows.csv"), kind=row_kinds.SWEEP_ROWS),
                             legal=dict(path=NEW_FILE)),
    "folder_write.RowWriter.write": Walk(lambda f: dict(
        self=folder_write.RowWriter(walk_path("rows.csv"), row_kinds.STEPS_ROWS),
        row=dict(task="parity", s=2, T=6, m=100, seed=0, steps_to_bar=10, censored=0, budget=60,
                 every=10, final_test_acc=1.0, seconds=0.1))),
    "folder_write.RowWriter.close": Walk(lambda f: dict(self=folder_write.RowWriter(walk_path("rows.csv"),
                                                                        row_kinds.STEPS_ROWS))),
    "folder.full_options": Walk(lambda f: dict(options=dict(d=8, T=10)),
                                legal=dict(options={"missing key": "any options: the rest "
                                                                   "defaults"})),
    "folder.sweep_fingerprint": Walk(lambda f: dict(meta=folder.read_meta("results/extended"))),
    "folder.check_plan_size": Walk(lambda f: dict(n_models=1, n_Ts=2, n_seeds=3),
                                   names=dict(n_Ts=r"n_Ts|--Ts", n_seeds=r"n_seeds|--seeds")),
    "folder.missing_searches": Walk(lambda f: dict(rows=[], models=["transformer"], Ts=[10],
                                                   n_seeds=2, grids={"transformer": [8, 16]},
                                                   search="bisect"),
                                    legal=dict(Ts={"[5]": "a T without rows: all missing"}),
                                    names=dict(n_seeds=r"n_seeds|--seeds")),
    "folder.read_meta": Walk(lambda f: dict(folder="results/extended"),
                             legal=dict(folder={"'bogus'": "a folder not made yet: {}"})),
    "folder.check_folder_kind": Walk(lambda f: dict(out="results/extended", own="sweep.json"),
                                     legal=dict(out={"'bogus'": "a folder not made yet"})),
    "row_kinds.own_file": Walk(lambda f: dict(path="results/extended/runs.csv"),
                            legal=dict(path={"'bogus'": "a path that is no link: its own"})),
    "folder.read_json": Walk(lambda f: dict(path="results/extended/sweep.json", what="a sweep",
                                            advice="restore it"),
                             legal=dict(what={"*": LITERAL}, advice={"*": LITERAL}),
                             names=dict(path=r"\bpath\b|bogus")),
    "folder.read_plan": Walk(lambda f: dict(out=walk_path("study"), command="plan"),
                             legal=dict(command={"*": LITERAL}),
                             names=dict(out=r"\bout\b|bogus")),
    "folder.check_plan": Walk(lambda f: dict(plan=json.load(open(walk_path("study", "plan.json"))),
                                             path="plan.json"),
                              legal=dict(path={"*": LITERAL})),
    "folder.csv_paths": Walk(lambda f: dict(folder="results/extended", stem="runs"),
                             legal=dict(folder={"'bogus'": "no such folder: no CSVs"})),
    "folder.folder_runs": Walk(lambda f: dict(folder="results/check-grid-T100", bar=0.99,
                                              sweep_ids=None, warn=None, meta=None),
                               legal=dict(bar={"None": "the folder's own bar"})),
    "folder.folder_rows": Walk(lambda f: dict(folder="results/check-grid-T100", n_seeds=5,
                                              Ts=[100]),
                               legal=dict(n_seeds={"None": "every seed", "10**12": "every seed"},
                                          Ts={"None": "every T"}),
                               names=dict(Ts=r"\bTs\b|--Ts")),
    "folder.parse_json": Walk(lambda f: dict(text='{"a": 1}'),
                              legal=dict(text={"'bogus'": "refused: not JSON"})),
    "folder_write.arithmetic_record": Walk(lambda f: dict(path=walk_path("new", "runs.csv")),
                                           legal=dict(path={"'bogus'": "a CSV's name"})),
    "folder_write.lock_folder": Walk(lambda f: dict(out=WALK_TMP[0], shard=(0, 1), holder=None),
                               legal=dict(shard={"list": "a pair as a list"}),
                               names=dict(out=r"\bout\b|bogus")),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over folder.py, folder_write.py, row_kinds.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((folder, folder_write, row_kinds,), WALK)
