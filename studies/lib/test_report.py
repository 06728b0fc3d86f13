"""test_report.py: the tests of studies/lib/report.py.

Run from the repository's root: python -m pytest -q
"""
import argparse
import os
import shutil
import sys

import pytest

from studies import sweep
from studies.lib import cli, folder, laws, report
from studies.conftest import (COMMAND, copy_folder, curve_data, sweep_refused, stats_rows,
                              smoke_sweep, walk_path, run_cli, walk_modules)
from test_all import LITERAL, Walk


def test_report_keeps_every_model_and_never_rewrites_sweep_json(tmp_path, capsys):
    one = ["--Ts", "8", "--seeds", "1"]                   # a search per model shows it
    assert smoke_sweep(tmp_path, "--models", "transformer,mlp", *one) == 0
    table = (tmp_path / "table.md").read_text()
    meta = (tmp_path / "sweep.json").read_text()
    assert "| mlp |" in table and "| transformer |" in table
    os.remove(tmp_path / "table.md")                      # so that the report must write it
    assert smoke_sweep(tmp_path, "--report", *one) == 0        # no --models: all of the folder's
    assert (tmp_path / "table.md").read_text() == table
    assert (tmp_path / "sweep.json").read_text() == meta
    assert smoke_sweep(tmp_path, "--report", "--Ts", "999") == 0   # nothing there: nothing written
    assert (tmp_path / "table.md").read_text() == table


def test_report_reads_the_folders_own_protocol_and_grid(tmp_path, capsys):
    assert smoke_sweep(tmp_path, "--protocol", "steps-500", "--steps", "120", "--grid-max", "40",
                       "--Ts", "8", "--seeds", "1") == 0          # one search: the folder's own
    table = (tmp_path / "table.md").read_text()
    os.remove(tmp_path / "table.md")                       # so that the report must write it
    assert sweep.main(["--out", str(tmp_path), "--report"]) == 0     # nothing retyped
    assert (tmp_path / "table.md").read_text() == table
    capsys.readouterr()
    with pytest.raises(SystemExit, match="^2$"):                      # a typed clash is refused
        sweep.main(["--out", str(tmp_path), "--report", "--steps", "99"])
    assert "other options" in capsys.readouterr().err


def test_a_report_never_writes_a_fingerprint_it_did_not_run(tmp_path, capsys):
    """Family 7: --report writes no sweep.json; a folder without one (copied shard CSVs) is
    reported with the options given, checked against the rows' own fingerprints."""
    empty = tmp_path / "empty"               # no sweep at all: refused, nothing left behind
    empty.mkdir()
    assert "holds no sweep (no sweep.json, no runs*.csv)" in sweep_refused(empty, capsys,
                                                                           "--report")
    assert not list(empty.iterdir())
    a, t8 = tmp_path / "a", ["--Ts", "8"]         # T = 8 alone: a search of each seed per shard
    for shard in ("0/2", "1/2"):
        assert smoke_sweep(a, "--steps", "140", "--shard", shard, *t8) == 0
    assert smoke_sweep(a, "--report", *t8) == 0
    table = (a / "table.md").read_text()
    copied = tmp_path / "copied"
    copied.mkdir()
    for name in ("runs-shard-0-of-2.csv", "runs-shard-1-of-2.csv"):
        shutil.copy(a / name, copied)
    for extra in ([], ["--steps", "150"], ["--bar", "0.9"]):        # not the options of the runs
        err = sweep_refused(copied, capsys, "--report", *extra, *t8)
        assert "holds runs of another sweep" in err and "no sweep.json" in err
        assert not (copied / "sweep.json").exists()
    assert smoke_sweep(copied, "--report", "--steps", "140", *t8) == 0
    assert (copied / "table.md").read_text() == table and not (copied / "sweep.json").exists()
    old = copied / "runs-shard-1-of-2.csv"                          # rows with no fingerprint
    old.write_text("".join(ln.rsplit(",", 1)[0] + ",\r\n" if i else ln
                           for i, ln in enumerate(old.read_text().splitlines(keepends=True))))
    err = sweep_refused(copied, capsys, "--report", "--steps", "140", *t8)
    assert "runs-shard-1-of-2.csv line 2: a row without a fingerprint" in err
    assert smoke_sweep(empty, "--steps", "140", "--Ts", "8", "--seeds", "1") == 0   # not stuck


def test_reports_never_replace_a_file_that_is_not_their_own(tmp_path, capsys, monkeypatch,
                                                            smoke_ref):
    """Family 1 for sweep.py's outputs (--out tables, --plot images, headline --out, limit
    --out, a folder's table.md), and family 6: a full disk leaves no empty table and no
    temporary behind, and its line names the path."""
    runs, readme, photo = tmp_path / "runs.csv", tmp_path / "README.md", tmp_path / "photo.png"
    runs.write_text((smoke_ref / "runs.csv").read_text())
    readme.write_text("# my notes\n")
    photo.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    lim = tmp_path / "lim"
    lim.mkdir()
    (lim / "limit.json").write_text('{"mine": 1}')
    before = {p: p.read_bytes() for p in (runs, readme, photo, lim / "limit.json")}
    for argv, msg in [(["compare", str(smoke_ref), "--out", str(runs)], "not a table"),
                      (["width", str(smoke_ref), "--out", str(readme)], "not a table"),
                      (["compare", str(smoke_ref), "--plot", str(photo)], "not a plot"),
                      (["width", str(smoke_ref), "--plot", str(runs)], "not a plot"),
                      (["compare", str(smoke_ref), "--out", str(tmp_path)], "is a folder"),
                      (["compare", str(smoke_ref), "--out", str(readme), "--plot", str(readme)],
                       "same file"),
                      (["headline", "--d64", str(smoke_ref), "--d128", str(smoke_ref), "--out",
                        str(readme)], "not a table"),
                      (["limit", "--Ts", "10", "--seeds", "2", "--sets", "2", "--out", str(lim)],
                       "not a limit.json")]:
        code, out, err = run_cli(capsys, "sweep", *argv)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert {p: p.read_bytes() for p in before} == before
    f = copy_folder(smoke_ref, tmp_path / "f")
    (f / "table.md").write_text("my notes\n")
    assert "not a table" in sweep_refused(f, capsys, "--report")
    assert (f / "table.md").read_text() == "my notes\n"
    out = tmp_path / "cmp.md"                                        # its own table: rewritten
    for _ in range(2):
        assert run_cli(capsys, "sweep", "compare", str(smoke_ref), "--out", str(out))[0] == 0
    assert out.read_text().startswith("| protocol | T |")
    f = copy_folder(smoke_ref, tmp_path / "g")
    files = {p.name: p.read_bytes() for p in f.iterdir() if p.name != ".lock"}   # the report's
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(
        OSError(28, "No space left on device")))
    code = cli.one_line_errors("studies.sweep", sweep.main, ["--out", str(f), "--report"])
    code_cmp = cli.one_line_errors("studies.sweep", sweep.main, ["compare", str(f), "--out",
                                                             str(tmp_path / "new.md")])
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()
    assert (code, code_cmp) == (1, 1) and len(err) == 2 and all("No space left" in e for e in err)
    assert str(f) in err[0] and str(tmp_path / "new.md") in err[1]
    assert {p.name: p.read_bytes() for p in f.iterdir()
            if p.name != ".lock"} == files                          # no table, no temporary
    assert not (tmp_path / "new.md").exists() and not [p for p in os.listdir(tmp_path)
                                                        if p.endswith(".tmp")]  # hidden ones too


def test_the_bootstrap_shows_progress_on_a_terminal_only(monkeypatch, capsys):
    rows = [dict(model="transformer", T=T, seed=sd, m=m, success=int(m >= 20 + sd))
            for T in (10, 30) for sd in range(3) for m in (10, 20, 30, 40)]
    report.success_table(rows, ["transformer"])
    assert capsys.readouterr().err == ""                     # a pipe or a file: nothing
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    report.success_table(rows, ["transformer"])
    err = capsys.readouterr().err
    assert "transformer T = 30 (2 of 2)" in err and err.endswith("\r")   # cleared when done


def _fail(text):
    raise ValueError(text)


def _folder_report_args():
    meta, rows = folder.folder_rows("results/check-grid-T100")
    os.makedirs(walk_path("report"), exist_ok=True)
    a = argparse.Namespace(**{k: meta["options"].get(k, meta.get(k)) for k in (
        "task", "s", "n_test", "steps")}, bar=meta["bar"], search=meta["search"],
        grid_ratio=meta.get("grid_ratio", 1.05))
    return dict(out=walk_path("report"), rows=rows, grids=meta["grids"], a=a, protocol="default",
                missing=[])


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "report.asks_papers_question": Walk(lambda f: dict(task="and", s=3, bar=0.99),
                                        legal={k: {"*": "any value: asks or not"}
                                               for k in ("task", "s", "bar")}),
    "report.paper_bar_text": Walk(lambda f: dict(T=100), legal=dict(T={"*": "off the figure: ''"})),
    "report.success_table": Walk(lambda f: dict(rows=stats_rows(T=10, model="transformer"),
                                                models=["transformer"]),
                                 ),
    "report.ci_text": Walk(lambda f: dict(e=dict(m=5.0, m_lo=4.0, m_hi=6.0), key="m",
                                          decimals=0),
                           legal=dict(decimals={"-1": "to tens (intervals.bound_text)",
                                                "0": "whole numbers"})),
    "report.rerun_texts": Walk(lambda f: dict(folder="results/check-grid-T100", seeds=[0, 1],
                                              n_boot=50), run=False,
                               legal=dict(seeds={"[5]": "a bootstrap seed"},
                                          n_boot={"None": "intervals.N_BOOT, as the tables"})),
    "report.rerun_changes": Walk(lambda f: dict(texts={"a": ["1", "2"], "b": ["3", "3"]}),
                                 legal=dict(texts={"missing key": "fewer bounds"})),
    "report.rounding_note": Walk(lambda f: dict()),
    "report.fits_line": Walk(lambda f: dict(head="", what="m50", f=laws.scaling_fits(*curve_data())),
                             legal=dict(head={"*": LITERAL}, what={"*": LITERAL},
                                        f={"missing key": "a key the line does not print"})),
    "report.folder_report": Walk(lambda f: _folder_report_args(), legal=dict(
        a={"*": COMMAND}, protocol={"*": LITERAL}, missing={"[5]": "named at the top"})),
    "report.cpu_minutes": Walk(lambda f: dict(runs=[dict(seconds="60.0"), dict(seconds="nan")])),
    "report.over_folders": Walk(lambda f: dict(a=argparse.Namespace(
        folders=["results/check-grid-T100"], out=None, plot=None), fail=_fail,
        make=lambda: ("| T |\n", None), also=()), legal=dict(
        a={"*": COMMAND}, fail={"*": COMMAND}, also={"list": "a list", "short": "nothing more"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over report.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((report,), WALK)
