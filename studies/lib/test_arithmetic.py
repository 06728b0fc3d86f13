"""test_arithmetic.py: the tests of studies/lib/arithmetic.py, studies/lib/provenance.py.

Run from the repository's root: python -m pytest -q
"""
import json
import os
import platform

import numpy as np
import pytest

from studies import mechanism, replay
from studies.lib import arithmetic, checkpoint, cli, folder, provenance, training
from studies.conftest import (copy_folder, sweep_refused, smoke_sweep, tiny_plan, run_cli,
                              walk_modules)
from test_all import SMALL, TINY, Walk


def _other_kernel(path, name):
    """The folder description at `path` with every machine's kernel renamed `name`."""
    meta = json.loads(open(path).read())
    meta["machines"] = [dict(m, kernel=name) for m in meta.get("machines", [])]
    cli.write_json(path, meta)


def test_a_folder_of_another_arithmetic_is_not_continued_unless_asked(tmp_path, capsys,
                                                                     smoke_ref):
    """Issue 46: a folder continued on another machine mixed two arithmetics in silence. Now a
    sweep into a folder whose recorded kernel is another is refused in one line naming both;
    --other-arithmetic continues it, each new row recorded beside it with its arithmetic. A
    report (no training) is never refused."""
    f = copy_folder(smoke_ref, tmp_path / "f")
    _other_kernel(f / "sweep.json", "Imaginary")
    (f / "runs.csv").write_text("".join((smoke_ref / "runs.csv").read_text().splitlines(
        keepends=True)[:-4]))                                   # its last four runs to do
    err = sweep_refused(f, capsys)
    assert "Imaginary" in err and "--other-arithmetic" in err and "mix two arithmetics" in err
    assert smoke_sweep(f, "--report") == 0
    assert smoke_sweep(f, "--other-arithmetic") == 0
    side = (f / "arithmetic-of-runs.csv").read_text().splitlines()
    here = provenance.arithmetic_id(arithmetic.record("float32"))
    assert side[0] == "run,arithmetic" and len(side) > 2 and all(
        s.endswith("," + here) for s in side[1:])
    machines = json.loads((f / "sweep.json").read_text())["machines"]
    assert machines[0]["kernel"] == "Imaginary" and machines[-1]["kernel"] == \
        arithmetic.record("float32")["kernel"]


def test_damaged_rows_under_another_arithmetic_are_refused_before_anything_changes(
        tmp_path, capsys, smoke_ref):
    """A sweep continuing (--other-arithmetic) a folder of another kernel whose runs.csv is
    damaged: one line naming the file, and sweep.json as it was (it once gained this machine's
    entry before the rows were read)."""
    f = copy_folder(smoke_ref, tmp_path / "f")
    _other_kernel(f / "sweep.json", "Imaginary")
    lines = (f / "runs.csv").read_text().splitlines(keepends=True)
    head = lines[0].rstrip("\n").split(",")
    row = lines[1].rstrip("\n").split(",")
    row[head.index("seed")] = "bogus"                         # a row no sweep wrote
    (f / "runs.csv").write_text("".join(lines[:1] + [",".join(row) + "\n"] + lines[2:-4]))
    before = {p.name: p.read_bytes() for p in f.iterdir() if p.is_file()}
    err = sweep_refused(f, capsys, "--other-arithmetic")
    assert "runs.csv" in err and len(err.strip().splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in f.iterdir() if p.is_file()} == before


def test_a_record_of_arithmetic_not_ours_is_one_line_before_anything_changes(tmp_path, capsys,
                                                                            smoke_ref, steps_ref):
    """--other-arithmetic beside an arithmetic-of-runs.csv that is a folder or another file
    (another header): one line naming it, from the sweep, steps.py and the study alike, before
    the folder's description changes (it once was a traceback, after sweep.json was written)."""
    from studies import steps
    from studies.conftest import STEPS_TINY, run_cli_main, synthetic_study
    f = copy_folder(smoke_ref, tmp_path / "f")
    _other_kernel(f / "sweep.json", "Imaginary")
    (f / "runs.csv").write_text("".join((smoke_ref / "runs.csv").read_text().splitlines(
        keepends=True)[:4]))
    g = copy_folder(steps_ref, tmp_path / "g")
    _other_kernel(g / "steps.json", "Imaginary")
    h = tmp_path / "h"
    synthetic_study(str(h), small=True)
    plan = json.loads((h / "plan.json").read_text())
    cli.write_json(h / "plan.json", dict(plan, machines=[dict(provenance.machine(),
                                                              kernel="Imaginary")]))
    runs = [(f, "runs.csv", lambda: sweep_refused(f, capsys, "--other-arithmetic")),
            (g, "steps.csv", lambda: run_cli_main(capsys, steps.main, STEPS_TINY + [
                "--out", str(g), "--other-arithmetic"])[2]),
            (h, "runs.csv", lambda: run_cli_main(capsys, mechanism.main, [
                "run", str(h), "--other-arithmetic"])[2])]
    for where, name, refused in runs:
        side = where / f"arithmetic-of-{name}"
        for make in (lambda p: p.mkdir(), lambda p: p.write_text("a,b\n")):
            make(side)
            before = {p.name: p.read_bytes() for p in where.iterdir() if p.is_file()}
            err = refused()
            assert "is not a record of runs' arithmetic" in err and str(side) in err, err
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            assert {p.name: p.read_bytes() for p in where.iterdir() if p.is_file()} == before
            side.rmdir() if side.is_dir() else side.unlink()


def test_folders_side_by_side_say_when_their_kernels_differ(tmp_path, capsys, smoke_ref):
    """provenance.kernels_differ: one line naming each folder and its kernel when two differ
    (a folder recording none: "not recorded"), None when they agree; sweep compare prints it."""
    g = copy_folder(smoke_ref, tmp_path / "g")
    _other_kernel(g / "sweep.json", "Imaginary")
    same = copy_folder(smoke_ref, tmp_path / "same")
    here = provenance.arithmetic_id(arithmetic.record("float32"))
    assert provenance.folder_arithmetics(str(g)) == [here.rsplit(" ", 1)[0] + " Imaginary"]
    assert provenance.kernels_differ([str(smoke_ref), str(same)]) is None
    note = provenance.kernels_differ([str(smoke_ref), str(g)])
    assert f"{smoke_ref}: {here}" in note and f"{g}: " in note and "Imaginary" in note
    bare = copy_folder(smoke_ref, tmp_path / "bare")
    _other_kernel(bare / "sweep.json", "x")
    meta = json.loads((bare / "sweep.json").read_text())
    cli.write_json(bare / "sweep.json", dict(meta, machines=[]))
    assert f"{bare}: not recorded" in provenance.kernels_differ([str(g), str(bare),
                                                                 str(smoke_ref)])
    code, out, err = run_cli(capsys, "sweep", "compare", str(smoke_ref), str(g), "--out",
                             str(tmp_path / "c.md"))
    assert code == 0 and note in out.splitlines(), out
    code, out, err = run_cli(capsys, "sweep", "compare", str(smoke_ref), str(same), "--out",
                             str(tmp_path / "c.md"))
    assert code == 0 and "BLAS kernels" not in out
    from studies import kernels, symmetries
    from studies.conftest import run_cli_main, synthetic_study
    a, b = tmp_path / "a", tmp_path / "b"                    # two studies' folders
    for f, kernel in ((a, "Haswell"), (b, "SkylakeX")):
        synthetic_study(str(f))
        plan = json.loads((f / "plan.json").read_text())
        cli.write_json(f / "plan.json", dict(plan, machines=[dict(provenance.machine(),
                                                                  kernel=kernel)]))
    for main, argv in ((symmetries.main, ["same", str(a), str(b), str(tmp_path / "s.md")]),
                       (kernels.main, [str(a), str(b), "--out", str(tmp_path / "k.md")])):
        code, out, err = run_cli_main(capsys, main, argv)
        line = provenance.kernels_differ([str(a), str(b)])
        assert code in (0, None) and line in out.splitlines() and "Haswell" in line, (out, err)


def test_a_study_of_another_arithmetic_is_not_continued_unless_asked(tmp_path):
    """The same for the mechanism study: plan.json records each machine that ran it; a run
    under another recorded kernel is refused naming both, unless other_arithmetic."""
    out = str(tmp_path)
    tiny_plan(out, seeds=2, steps=10)
    quiet = lambda *a, **k: None
    assert mechanism._run_plan(out, log=quiet, n_seeds=1) == 1
    plan = json.loads(open(os.path.join(out, "plan.json")).read())
    assert plan["machines"][-1]["kernel"] == arithmetic.record("float32")["kernel"]
    _other_kernel(os.path.join(out, "plan.json"), "Imaginary")
    with pytest.raises(ValueError, match="was made by .*Imaginary.*--other-arithmetic"):
        mechanism._run_plan(out, log=quiet)
    assert mechanism._run_plan(out, log=quiet, other_arithmetic=True) == 1
    assert os.path.isfile(os.path.join(out, "arithmetic-of-runs.csv"))
    assert replay.folder_kind(out) == "runs"
    res = replay.replay(out, n_rows=2, log=None)
    assert len(res["rows"]) == 2 and all(d is None for _, d, _ in res["rows"])


def test_a_run_and_its_checkpoint_record_the_arithmetic_that_made_them(tmp_path, capsys):
    """Issue 46: a float32 run replays bit for bit only under the same BLAS kernel, so a run's
    JSON, its printed summary and its checkpoint record the BLAS library, its version, the
    kernel it ran (read from the loaded library: OPENBLAS_CORETYPE names only a request), the
    threads, numpy, Python, the CPU and the dtype."""
    rec = arithmetic.record("float32")
    assert set(arithmetic.DECIDING) <= set(rec) and rec["dtype"] == "float32"
    assert {"threads", "numpy", "python", "cpu", "numpy_simd", "coretype_env"} <= set(rec)
    assert rec["numpy"] == np.__version__ and rec["python"] == platform.python_version()
    if rec["blas"] == "OpenBLAS":                      # numpy's wheels: the kernel is read
        assert rec["kernel"] != arithmetic.UNREAD and rec["blas_version"][0].isdigit()
    out, ck = tmp_path / "r.json", tmp_path / "c.npz"
    code, printed, _ = run_cli(capsys, *TINY, "--json", str(out), "--save", str(ck))
    assert code == 0 and f"arithmetic: {arithmetic.words(rec)}" in printed
    assert json.loads(out.read_text())["arithmetic"] == rec
    assert checkpoint.load_checkpoint(str(ck))["arithmetic"] == rec


def test_a_resume_under_another_arithmetic_says_so_and_records_both(tmp_path):
    """A checkpoint made by another kernel resumes (the numbers stay valid), but the log says the
    run will not replay bit for bit and the result keeps the checkpoint's record beside its
    own; a checkpoint of the same arithmetic adds nothing. Older checkpoints hold no record."""
    path, lines = str(tmp_path / "c.npz"), []
    with pytest.raises(checkpoint.Interrupted):
        training.study_run(SMALL, log=None, save=path, stop_after=5)
    ck = checkpoint.load_checkpoint(path)
    same = training.study_run(SMALL, log=lines.append, resume=ck)
    assert "arithmetic_before_resume" not in same and not any("note:" in x for x in lines)
    other = dict(ck["arithmetic"], kernel="Imaginary")
    r = training.study_run(SMALL, log=lines.append, resume=dict(ck, arithmetic=other))
    assert r["arithmetic_before_resume"] == other and r["arithmetic"] == ck["arithmetic"]
    assert any("note: the checkpoint was made by" in x and "Imaginary" in x for x in lines)
    assert arithmetic.differences(other, ck["arithmetic"]) == [
        f"kernel: Imaginary vs {ck['arithmetic']['kernel']}"]
    with pytest.raises(ValueError, match="'arithmetic' must be a dict"):
        training.study_run(SMALL, log=None, resume=dict(ck, arithmetic="SkylakeX"))
    legacy = {k: v for k, v in ck.items() if k != "arithmetic"}
    assert "arithmetic_before_resume" not in training.study_run(SMALL, log=None, resume=legacy)


def test_only_kernels_the_processor_can_run_are_offered(monkeypatch):
    """A kernel the CPU cannot run crashes it: kernels_here offers one only when every flag it
    needs is present, and none where the flags cannot be read."""
    monkeypatch.setattr(arithmetic, "cpu_flags", lambda: {"sse4_2", "avx", "avx2", "fma"})
    assert arithmetic.kernels_here() == ["Nehalem", "Sandybridge", "Haswell", "Zen"]
    monkeypatch.setattr(arithmetic, "cpu_flags", lambda: set())
    assert arithmetic.kernels_here() == []


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # replay.py and kernels.py (issue 46): the folders read, nothing trained in a hostile call
    "provenance.read_finding": Walk(lambda f: dict(path="results/extended/arithmetic.json")),
    # folder.py: the arithmetic of a folder (issue 46)
    "provenance.add_other_arithmetic": Walk(lambda f: dict(ap=cli.OneLineParser(prog="x"))),
    "provenance.arithmetic_id": Walk(lambda f: dict(rec=arithmetic.record("float32")),
                                 legal=dict(rec={"missing key": "a field it lacks: 'not read'"})),
    "provenance.recorded_arithmetic": Walk(lambda f: dict(out="results/extended",
                                                      meta=folder.read_meta("results/extended")),
                                       legal=dict(out={"'bogus'": "a folder of no finding"},
                                                  meta={"missing key": "any description"})),
    "provenance.check_arithmetic": Walk(lambda f: dict(out="results/extended",
                                                   meta=folder.read_meta("results/extended"),
                                                   here=arithmetic.record("float32"),
                                                   allow=True, flag="--other-arithmetic"),
                                    legal=dict(out={"'bogus'": "a folder of no finding"},
                                               meta={"missing key": "any description"},
                                               here={"missing key": "allowed: nothing compared"},
                                               flag={"'bogus'": "an option's name"})),
    "provenance.machine": Walk(lambda f: dict()),
    "provenance.folder_arithmetics": Walk(lambda f: dict(out="results/extended")),
    "provenance.kernels_differ": Walk(lambda f: dict(folders=["results/extended",
                                                            "results/width/d-128"])),
    # arithmetic.py
    "arithmetic.blas_path": Walk(lambda f: dict()),
    "arithmetic.blas_library": Walk(lambda f: dict()),
    "arithmetic.cpu_model": Walk(lambda f: dict()),
    "arithmetic.cpu_flags": Walk(lambda f: dict()),
    "arithmetic.numpy_simd": Walk(lambda f: dict()),
    "arithmetic.kernels_here": Walk(lambda f: dict()),
    "arithmetic.record": Walk(lambda f: dict(dtype="float32")),
    "arithmetic.differences": Walk(lambda f: dict(a=arithmetic.record("float32"),
                                                  b=arithmetic.record("float64")),
                                   legal=dict(a={"missing key": "a field it lacks differs"},
                                              b={"missing key": "a field it lacks differs"})),
    "arithmetic.words": Walk(lambda f: dict(rec=arithmetic.record("float32")),
                             legal=dict(rec={"missing key": "a field it lacks: 'not read'"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over arithmetic.py, provenance.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((arithmetic, provenance,), WALK)
