"""test_damage.py: The damage suite: every file kind a study reads (row_kinds.KINDS and the JSON
kinds of folder.READERS) damaged in every standard way, and every command that reads it: each must
end in one line naming the file, with nothing written.

Run from the repository's root: python -m pytest -q
"""
import builtins
import errno
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys

import numpy as np
import pytest

from studies import classball, kernels, mechanism, replay, steps, sweep, symmetries, trainer
from studies.lib import cli, folder, provenance, row_kinds
from studies.conftest import (STEPS_TINY, copy_folder, edit_plan, edit_row, snapshot, smoke_sweep,
                              synthetic_study, synthetic_trace, run_cli, run_cli_main,
                              study_commands)
from test_all import HERE, TINY


def _damaged(f, cases, argvs, main):
    """Each case (a function that damages the folder f, words the refusal must hold) under each
    command line: a non-zero exit, one line on stderr naming the problem, and not a byte of any
    file changed, no file left behind (not even the folder's lock)."""
    for damage, words in cases:
        undo = {p: p.read_bytes() for p in f.iterdir() if p.is_file()}
        damage(f)
        before = {p: p.read_bytes() for p in f.iterdir() if p.is_file()}
        for argv in argvs:
            code, _, err = main(argv)
            assert code not in (0, None) and len(err.strip().splitlines()) == 1, (words, err)
            assert "Traceback" not in err and all(w in err for w in words), (words, err)
            assert {p: p.read_bytes() for p in f.iterdir() if p.is_file()} == before  # no lock
        for p in f.iterdir():
            if p.is_file() and p not in undo:
                p.unlink()
        for p, data in undo.items():
            p.write_bytes(data)


def _edit_csv(name, line, append=False, **fields):
    def damage(f):
        lines = (f / name).read_text().splitlines(keepends=True)
        edited = edit_row(lines[line - 1], lines[0].rstrip("\r\n").split(","), **fields)
        lines = lines + [edited] if append else lines[:line - 1] + [edited] + lines[line:]
        (f / name).write_text("".join(lines))
    return damage


def test_damaged_files_are_one_line(tmp_path, capsys, smoke_ref):
    path = str(tmp_path / "ck.npz")
    assert run_cli(capsys, *TINY, "--save", path)[0] == 0
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    for key, value in [("param/W_Q", np.zeros((3, 3), np.float32)),
                       ("adam_v/E_pos", np.full(arrays["adam_v/E_pos"].shape, np.nan, np.float32)),
                       ("step", np.array(-4)), ("rng_order", np.array('{"state": 1}'))]:
        bad = str(tmp_path / "bad.npz")
        np.savez(bad, **dict(arrays, **{key: value}))
        code, out, err = run_cli(capsys, "--resume", bad, "--steps", "9")
        assert code in (1, 2) and "damaged" in err and "Traceback" not in err, (key, err)
        assert len(err.strip().splitlines()) == 1
    csv_path = copy_folder(smoke_ref, tmp_path / "s") / "runs.csv"
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines[:3]) + lines[3].replace(",transformer,", ",transformr,", 1)
                        .replace("transformer,", "transformr,", 1) + "".join(lines[4:]))
    with pytest.raises(SystemExit, match="^2$"):
        smoke_sweep(tmp_path / "s", "--report")
    err = capsys.readouterr().err
    assert "runs.csv line 4" in err and len(err.strip().splitlines()) == 1


def test_every_study_refuses_a_damaged_plan_or_damaged_rows_in_one_line(tmp_path, capsys,
                                                                         smoke_ref, steps_ref):
    """One harness (folder.py) for every study: a plan or rows that are not what the study
    writes, or contradict each other, stop mechanism.py's run and report, a sweep's report and
    resume, steps.py's run and report in one line naming the problem (the file and line for a
    row), before anything is written."""
    f = tmp_path / "mechanism"
    synthetic_study(str(f))
    mech = lambda argv: run_cli_main(capsys, mechanism.main, argv)
    both = [["run", str(f)], ["report", str(f)]]
    cell = lambda **kw: edit_plan(lambda p: p["cells"][0].update(kw))
    plan_cases = [
        (edit_plan(lambda p: p["cells"][0].pop("T")), ["cells[0] has no T"]),
        (edit_plan(lambda p: p["cells"][0].pop("options")), ["cells[0] has no options"]),
        (edit_plan(lambda p: p.update(cells="cells")), ["cells must be a non-empty list"]),
        (cell(options=dict(steps="x")), ["steps = 'x'"]),
        (edit_plan(lambda p: p.update(bar="x")), ["bar must be a number in (0, 1]"]),
        (edit_plan(lambda p: p.update(bar=2)), ["bar must be a number in (0, 1], got 2"]),
        (cell(d="1j"), ["d = '1j'"]),
        (cell(design="other"), ["design 'other'"]),
        (cell(options=dict(d=32)), ["cells[0] has d = 64 but its options train d = 32"]),
        (edit_plan(lambda p: p.update(seeds=10 ** 9)), ["seeds", "more than"]),
        (edit_plan(lambda p: p.update(cells=p["cells"] * 2)), ["cells[6] repeats cells[0]"]),
        (lambda f: (f / "plan.json").write_text("my notes"), ["plan.json is not a plan"]),
    ]
    row_cases = [
        (_edit_csv("runs.csv", 3, success="0"), ["line 3", "success 0 contradicts"]),
        (_edit_csv("runs.csv", 2, append=True, success="1", test_acc="1.0"),
         ["line 74", "opposite outcomes"]),
        (_edit_csv("runs.csv", 5, task="or"), ["line 5", "task or is not its cell's task and"]),
        (_edit_csv("runs.csv", 5, steps="500"), ["line 5", "steps 500"]),
        (_edit_csv("runs.csv", 5, seed="99"), ["line 5", "seed 99 is not one of the plan's"]),
        (_edit_csv("runs.csv", 5, m="21"), ["line 5", "borderline d=64 T=10 m=21 is not a cell"]),
        (_edit_csv("runs.csv", 5, test_acc="x"), ["line 5", "not a valid mechanism row"]),
        (lambda f: (f / "runs.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff" * 40 + b"tail"),
         ["runs.csv is not the CSV of runs mechanism.py writes"]),
    ]
    _damaged(f, plan_cases + row_cases, both, mech)
    (f / "notes").mkdir()
    (f / "notes" / "plan.json").write_text("my notes")
    _damaged(f / "notes", [(lambda f: None, ["plan.json is not a plan"])],
             [["plan", str(f / "notes"), "results/width/d-128", "--Ts", "10", "--seeds", "2"]],
             mech)
    _damaged(f, [(lambda f: None, ["--seeds 1000000000", "more than"])],
             [["plan", str(tmp_path / "new"), "results/width/d-128", "--Ts", "10", "--seeds",
               "1000000000"]], mech)
    assert not (tmp_path / "new").exists()
    g = copy_folder(smoke_ref, tmp_path / "sweep")
    _damaged(g, [(lambda g: (g / "sweep.json").write_text(
                      (smoke_ref / "sweep.json").read_text().replace('"bar": 0.99', '"bar": "x"')),
                  ["'bar' must be a number in (0, 1]"]),
                 (_edit_csv("runs.csv", 2, success="1", test_acc="0.5"),
                  ["line 2", "success 1 contradicts its test accuracy 0.5"])],
             [["sweep", "--out", str(g), "--report"], ["sweep", "--preset", "smoke", "--workers",
                                                       "1", "--out", str(g)]],
             lambda argv: run_cli(capsys, *argv))
    h = copy_folder(steps_ref, tmp_path / "steps")
    _damaged(h, [(lambda h: (h / "steps.json").write_text(
                      (steps_ref / "steps.json").read_text().replace('"budget": 60',
                                                                     '"budget": "x"')),
                  ["budget = 'x'"]),
                 (_edit_csv("steps.csv", 2, task="and"), ["line 2", "task and is not the"])],
             [["steps", *STEPS_TINY, "--out", str(h), "--report"],
              ["steps", *STEPS_TINY, "--out", str(h)]], lambda argv: run_cli(capsys, *argv))


def test_json_values_no_command_writes_are_refused(steps_ref, tmp_path, capsys):
    """Beyond keys and types: a curve's accuracy of 5 or steps out of order, a steps.json with no
    T, a T twice or machines not a list, an arithmetic.json naming a
    kernel OpenBLAS lacks or found by a kernel that replayed nothing: one line naming the file."""
    f = copy_folder(steps_ref, tmp_path / "steps")
    curves = json.loads((f / "curves.json").read_text())
    key = next(iter(curves))
    for edit in (dict(test_acc=[5] * len(curves[key]["test_acc"])),
                 dict(step=curves[key]["step"][::-1])):
        (f / "curves.json").write_text(json.dumps(dict(curves, **{key: dict(curves[key], **edit)})))
        with pytest.raises(ValueError, match="curves.json is not the curves steps.py writes"):
            folder.read_curves(str(f))
    (f / "curves.json").unlink()
    meta = json.loads((f / "steps.json").read_text())
    for edit in (dict(Ts=[]), dict(Ts=meta["Ts"] + meta["Ts"][:1]), dict(machines={})):
        (f / "steps.json").write_text(json.dumps(dict(meta, **edit)))
        with pytest.raises(ValueError, match="steps.json: "):
            folder.read_steps_meta(str(f))
    finding = json.loads(open("results/extended/arithmetic.json").read())
    path = tmp_path / "arithmetic.json"
    for edit in (dict(found=dict(finding["found"], kernel="Pentium")),
                 dict(tried=[dict(t, replayed=0) for t in finding["tried"]])):
        path.write_text(json.dumps(dict(finding, **edit)))
        with pytest.raises(ValueError, match="arithmetic.json: (found|tried)"):
            provenance.read_finding(str(path))
    code, _, err = run_cli_main(capsys, symmetries.main, [
        "cells", "results/mechanism-interventions/full/pairs.csv", str(tmp_path / "c.md"),
        "--seeds", "100-200"])
    assert "no pair with a seed in 100-200" in str(code) + err and not (tmp_path / "c.md").exists()


def _pairs_input(tmp, request):
    shutil.copy("results/mechanism-interventions/full/pairs.csv", tmp / "pairs.csv")
    return tmp / "pairs.csv", tmp


def _committed(name):
    """A maker of the input: a copy of the committed results/NAME (its runs.csv damaged)."""
    def make(tmp, request):
        shutil.copytree(os.path.join(HERE, "results", name), tmp / "study")
        return tmp / "study" / "runs.csv", tmp / "study"
    return make


def _sweep_input(tmp, request):
    copy_folder(request.getfixturevalue("smoke_ref"), tmp / "sweep")
    for f in ("table.md", "README.md", "mstar.png"):
        if (tmp / "sweep" / f).exists():
            (tmp / "sweep" / f).unlink()
    return tmp / "sweep" / "runs.csv", tmp / "sweep"


def _study_input(tmp, request):
    synthetic_study(str(tmp / "study"))
    copy_folder(tmp / "study", tmp / "rerun")          # kernels' second folder, left undamaged
    return tmp / "study" / "runs.csv", tmp / "study"


def _small_study_input(tmp, request):
    """The study of _study_input with a plan that trains d = 8 for 20 steps: `mechanism run`
    trains a cut last row again, in a moment."""
    synthetic_study(str(tmp / "study"), small=True)
    return tmp / "study" / "runs.csv", tmp / "study"


def _trace_input(tmp, request):
    synthetic_trace(str(tmp / "trace"))
    return tmp / "trace" / "trajectories.csv", tmp / "trace"


def _steps_input(tmp, request):
    copy_folder(request.getfixturevalue("steps_ref"), tmp / "rerun")   # --against's side, undamaged
    copy_folder(request.getfixturevalue("steps_ref"), tmp / "steps")
    for f in ("table.md", "steps.png"):
        if (tmp / "steps" / f).exists():
            (tmp / "steps" / f).unlink()
    return tmp / "steps" / "steps.csv", tmp / "steps"


ROW_BY_ROW = "written a row at a time as runs finish: a cut last row is a killed run's trace, " \
             "skipped with a warning naming the file and line, and run again on resume (read_rows)"


TWICE = "shards' or sessions' CSVs merged: the same run with the same outcome counts once, " \
        "with another outcome it is refused (folder.check_rows)"


RESUMES = "a resume: an empty runs file, or its header alone, is a run not started yet, " \
          "which it trains (tested in the resume tests)"


WRITES_NOTHING = "writes no file: a read-only folder changes nothing"


NOT_STARTED = "a report of a sweep not started yet (an empty runs file, or its header alone) " \
              "prints 'no finished runs in FOLDER' and writes nothing (test_report_of_no_runs)"


DAMAGE_KINDS = {  # kind -> (a valid input, [(module, argv)], {damage: why it is tolerated})
    "PAIR_ROWS": (_pairs_input, [(symmetries, ["interaction", "{IN}", "{OUT}"]),
                                 (symmetries, ["cells", "{IN}", "{OUT}"])], {}),
    "SWEEP_ROWS": (_sweep_input, [(sweep, ["compare", "{DIR}", "--out", "{OUT}"]),
                                  (sweep, ["--preset", "smoke", "--workers", "1", "--out",
                                           "{DIR}", "--report"], None,
                                   {"empty": NOT_STARTED, "header only": NOT_STARTED}),
                                  (sweep, ["--preset", "smoke", "--workers", "1", "--out",
                                           "{DIR}"], None, {"empty": RESUMES,
                                                            "header only": RESUMES}),
                                  (sweep, ["width", "{DIR}", "--out", "{OUT}"]),
                                  (sweep, ["families", "{DIR}", "--out", "{OUT}"]),
                                  (sweep, ["laws", "{DIR}", "--out", "{OUT}"]),
                                  (sweep, ["headline", "--d64", "{DIR}", "--d128", "{WIDE}",
                                           "--out", "{OUT}", "--readme", "{README}"]),
                                  (mechanism, ["plan", "{NEW}", "{DIR}", "--Ts", "8"]),
                                  (symmetries, ["ball", "{STUDY}", "{DIR}", "--Ts", "8",
                                                "--seeds", "2", "--out", "{OUT}"]),
                                  (replay, ["{DIR}", "--rows", "1"], None,
                                   {"read-only folder": WRITES_NOTHING})],
                   {"last row cut": ROW_BY_ROW, "duplicated row": TWICE}),
    "MECHANISM_ROWS": (_study_input, [(mechanism, ["report", "{DIR}"]),
                                      (kernels, ["{DIR}", "{RERUN}", "--out", "{OUT}"]),
                                      (mechanism, ["run", "{DIR}"], _small_study_input,
                                       {"empty": RESUMES, "header only": RESUMES}),
                                      (mechanism, ["factors", "results/mechanism",
                                                   "--factors", "{DIR}", "--out", "{OUT}"],
                                       _committed("mechanism-factors")),
                                      (mechanism, ["paired", "{RERUN}", "{DIR}", "--out",
                                                   "{OUT}"]),
                                      (symmetries, ["same", "{DIR}", "{RERUN}", "{OUT}"]),
                                      (symmetries, ["canonical", "{DIR}",
                                                    "results/symmetries/canonical-fixed", "{OUT}"],
                                       _committed("symmetries/canonical-borderline"))],
                       {"last row cut": ROW_BY_ROW, "duplicated row": TWICE}),
    "TRAJECTORY_ROWS": (_trace_input, [(mechanism, ["trace-report", "{DIR}"])],
                        {"last row cut": ROW_BY_ROW, "duplicated row": TWICE}),
    "STEPS_ROWS": (_steps_input, [(steps, ["--report", "--out", "{DIR}"] + STEPS_TINY),
                                  (steps, ["--out", "{DIR}"] + STEPS_TINY, None,
                                   {"empty": RESUMES, "header only": RESUMES}),
                                  (steps, ["--report", "--out", "{RERUN}", "--against", "{DIR}"]
                                   + STEPS_TINY)],
                   {"last row cut": ROW_BY_ROW, "duplicated row": TWICE}),
    "BALL_ROWS": (lambda tmp, request: _ball_input(tmp, request),
                  [(classball, ["{STUDY}", "{DIR}", "--out", "{OUT}"])],
                  {"last row cut": ROW_BY_ROW, "duplicated row": TWICE}),
}


@pytest.mark.parametrize("text", ["", "HEADER"])
def test_report_of_no_runs(text, smoke_ref, tmp_path, capsys):
    f = copy_folder(smoke_ref, tmp_path / "f")
    header = (f / "runs.csv").read_text().splitlines(keepends=True)[0]
    (f / "runs.csv").write_text(text.replace("HEADER", header))
    for name in ("table.md", "critical.json"):
        (f / name).unlink()
    before = snapshot(f)
    code, out, err = run_cli(capsys, "sweep", "--preset", "smoke", "--out", str(f), "--report")
    assert code in (0, None) and out.strip() == (f"no finished runs in {f} for models "
                                                 f"['transformer'], T in [8, 16], seeds < 2")
    assert snapshot(f) == before and not err


def _entry(entry, make):
    """A suite's command: (module, argv[, its own input maker or None[, {damage: why this
    command tolerates it}]]) -> (module, argv, make, tolerates)."""
    module, argv, own, tolerates = (tuple(entry) + (None, {})[len(entry) - 2:])
    return module, argv, own or make, tolerates


def _fill(argv, path, where, out, tmp, request):
    """A command's argv with its placeholders filled: {IN} the damaged file, {DIR} its folder,
    {OUT} the output file, {NEW} a folder not made yet (a command that writes one), {STUDY} the
    smoke sweep (undamaged), {WIDE} the smoke sweep at d = 128 (headline's --d128, undamaged),
    {RERUN} the undamaged copy beside a study's or a steps folder, {README} a copy of the front
    page (headline writes its table into one)."""
    fill = {"{IN}": path, "{DIR}": where, "{OUT}": out, "{NEW}": tmp / "new",
            "{RERUN}": where.parent / "rerun", "{README}": tmp / "README.md"}
    if any("{README}" in a for a in argv) and not (tmp / "README.md").exists():
        shutil.copy(os.path.join(HERE, "README.md"), tmp / "README.md")   # never the repo's own
    lazy = {"{STUDY}": "smoke_ref", "{WIDE}": "wide_ref"}
    args = []
    for a in argv:
        for k, v in fill.items():
            a = a.replace(k, str(v))
        for k, fixture in lazy.items():
            if k in a:
                a = a.replace(k, str(request.getfixturevalue(fixture)))
        args.append(a)
    return args


def _ball_input(tmp, request):
    copy_folder(request.getfixturevalue("ball_ref"), tmp / "ball")
    return tmp / "ball" / "ball-of-runs.csv", tmp / "ball"


def _damage(path, how, tmp):
    """Apply the standard damage `how` to the CSV at path (its first row and its seed column)."""
    text = path.read_text()
    lines = text.splitlines()
    head = lines[0].split(",")
    col = head.index("seed")

    def set_seed(v):
        row = lines[1].split(",")
        row[col] = v
        return "\n".join([lines[0], ",".join(row)] + lines[2:]) + "\n"
    if how == "empty":
        path.write_text("")
    elif how == "binary":
        path.write_bytes(bytes(range(256)) * 8)
    elif how == "header only":
        path.write_text(lines[0] + "\n")
    elif how == "last row cut":
        path.write_text(text.rstrip("\n")[:-3])
    elif how == "column renamed":
        path.write_text("\n".join([lines[0].replace("seed", "sead")] + lines[1:]) + "\n")
    elif how == "column dropped":
        path.write_text("\n".join(",".join(v for i, v in enumerate(line.split(",")) if i != col)
                                  for line in lines) + "\n")
    elif how == "value nan":
        path.write_text(set_seed("nan"))
    elif how == "out of range":
        path.write_text(set_seed("-1"))
    elif how == "wrong type":
        path.write_text(set_seed("seven"))
    elif how == "duplicated row":
        path.write_text(text + lines[1] + "\n")
    elif how == "header damaged":                  # an empty column: every row looks torn
        path.write_text("\n".join([lines[0] + ","] + lines[1:]) + "\n")
    elif how == "a field past the csv limit":       # csv.field_size_limit: 131,072 characters
        path.write_text(set_seed("7" * 200000))
    elif not _not_a_file(path, how):
        raise AssertionError(how)


def _not_a_file(path, how):
    """The file at path replaced by a FIFO (whose reader waits for a writer that never comes) or
    a character device (/dev/zero's: it never ends); False for another damage."""
    if how not in ("a fifo", "a device"):
        return False
    path.unlink()
    if how == "a fifo":
        os.mkfifo(path)
        return True
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except (PermissionError, AttributeError):
        pytest.skip("this system lets no test make a device node")
    return True


class _never_hangs:
    """Context: a test that would wait for ever (a FIFO opened for reading) fails instead, after
    `seconds` (SIGALRM, main thread)."""

    def __init__(self, seconds=60):
        self.seconds = seconds

    def __enter__(self):
        def alarm(signum, frame):
            raise AssertionError(f"hung for {self.seconds} s: a FIFO or device opened to read?")
        self.old = signal.signal(signal.SIGALRM, alarm)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        return False


DAMAGES = ("empty", "binary", "header only", "last row cut", "column renamed", "column dropped",
           "value nan", "out of range", "wrong type", "duplicated row", "header damaged",
           "a field past the csv limit", "a fifo", "a device")


def _damage_cases():
    return [(kind, i, how) for kind, spec in DAMAGE_KINDS.items() if spec
            for i in range(len(spec[1])) for how in DAMAGES + ("output is the input",
                                                               "output a link outside",
                                                               "read-only folder",
                                                               "input a link outside")]


def _link_outside(path, tmp):
    """The file at path moved outside its folder, a symbolic link left in its place."""
    outside = tmp / ("outside-" + path.name)
    shutil.move(path, outside)
    path.symlink_to(outside)


def _read_only(monkeypatch, where):
    """Make the folder `where` behave as on a read-only file system (EROFS) for every file opened
    for writing inside it (open's modes, os.open's flags: a temporary of tempfile.mkstemp too):
    chmod cannot, since the tests may run as root."""
    where, real, real_os_open, real_mkdir = os.path.abspath(where), builtins.open, os.open, \
        os.mkdir
    inside = lambda file: isinstance(file, (str, os.PathLike)) and os.path.abspath(
        os.fspath(file)).startswith(where + os.sep)

    def fake(file, mode="r", *args, **kwargs):
        if set(str(mode)) & set("wax+") and inside(file):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(file))
        return real(file, mode, *args, **kwargs)

    def fake_os_open(file, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and inside(file):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(file))
        return real_os_open(file, flags, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if inside(path):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_mkdir(path, *args, **kwargs)
    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


def test_the_damage_suite_declares_every_file_kind_a_study_reads():
    assert set(DAMAGE_KINDS) == set(row_kinds.KINDS)
    assert all(DAMAGE_KINDS[k] for k in DAMAGE_KINDS), [k for k, v in DAMAGE_KINDS.items() if not v]


@pytest.mark.parametrize("kind,i,how", _damage_cases())
def test_every_command_refuses_every_damage_of_every_file_it_reads(kind, i, how, tmp_path,
                                                                   capsys, request, monkeypatch):
    make, commands, tolerated = DAMAGE_KINDS[kind]
    module, argv, make, tolerates = _entry(commands[i], make)  # its own input, its own reasons
    if how in tolerates:
        pytest.skip(tolerates[how])
    if how in tolerated and tolerated[how] is not ROW_BY_ROW:
        pytest.skip(tolerated[how])
    path, where = make(tmp_path / "in", request) if (tmp_path / "in").mkdir() is None else None
    out = tmp_path / "out" / "table.md"
    out.parent.mkdir()
    if how == "output is the input":
        if "{OUT}" not in argv:
            pytest.skip("the command writes only its own folder's files")
        out = path
    elif how == "output a link outside":
        if "{OUT}" not in argv:
            pytest.skip("the command writes only its own folder's files")
        (tmp_path / "elsewhere.md").write_text("someone's notes\n")
        out.symlink_to(tmp_path / "elsewhere.md")
    elif how == "read-only folder":
        pass                                              # below, once the inputs are made
    elif how == "input a link outside":
        _link_outside(path, tmp_path)
    else:
        _damage(path, how, tmp_path)
    args = _fill(argv, path, where, out, tmp_path, request)
    if how == "read-only folder":
        _read_only(monkeypatch, tmp_path)                 # wherever the command would write
    before = snapshot(tmp_path)
    with _never_hangs():
        code, _, err = run_cli_main(capsys, module.main, args)
    if isinstance(code, str):                 # sys.exit(message): Python prints it on stderr
        code, err = 1, err + code + "\n"
    lines = err.strip().splitlines()
    if how in tolerated:
        # the cut row skipped, and said so; then the rest read, or refused by name (a ball
        # record's cut row leaves its run without a record, which classball names)
        assert "Traceback" not in err, (args, err)
        assert [ln for ln in lines if str(path) in ln and "cut mid-line" in ln], (args, err)
        assert code in (0, None) or all(str(where) in ln for ln in lines), (args, err)
        return
    assert code not in (0, None) and len(lines) == 1 and "Traceback" not in err, (args, err)
    named = (path, where, out, tmp_path / "new", where.parent / "rerun")   # what it may write
    assert any(str(x) in lines[0] for x in named), (how, lines)
    assert snapshot(tmp_path) == before, "something was written"


@pytest.mark.parametrize("kind,i", [(k, i) for k, spec in DAMAGE_KINDS.items() if spec
                                    for i in range(len(spec[1]))])
def test_every_command_of_the_damage_suite_reads_its_valid_input(kind, i, tmp_path, capsys,
                                                                 request):
    """The same commands on the undamaged input: exit 0 (so the refusals above are the damage's)."""
    make, commands, _ = DAMAGE_KINDS[kind]
    module, argv, make, _ = _entry(commands[i], make)
    (tmp_path / "in").mkdir()
    path, where = make(tmp_path / "in", request)
    out = tmp_path / "table.md"
    args = _fill(argv, path, where, out, tmp_path, request)
    code, _, err = run_cli_main(capsys, module.main, args)
    assert code in (0, None), (args, err)


def _finding_input(tmp, request):
    copy_folder(request.getfixturevalue("smoke_ref"), tmp / "sweep")
    shutil.copy("results/extended/arithmetic.json", tmp / "sweep" / "arithmetic.json")
    return tmp / "sweep" / "arithmetic.json", tmp / "sweep"


def _sweep_meta_input(tmp, request):
    path, where = _sweep_input(tmp, request)
    return where / "sweep.json", where


def _plan_input(tmp, request):
    path, where = _study_input(tmp, request)
    return where / "plan.json", where


def _small_plan_input(tmp, request):
    """_plan_input's plan.json, of the study whose cells train d = 8 for 20 steps
    (_small_study_input): `mechanism trace` on the valid input trains a run in a moment, not d = 64
    for 1,000 steps (--every 10 divides its 20); its reader and its refusals are the same."""
    path, where = _small_study_input(tmp, request)
    return where / "plan.json", where


def _study_plan_input(tmp, request):
    """The mechanism study's committed plan.json (symmetries measures trains two of its cells)."""
    (tmp / "study").mkdir()
    shutil.copy(os.path.join(HERE, "results", "mechanism", "plan.json"), tmp / "study")
    return tmp / "study" / "plan.json", tmp / "study"


SLOW_VALID_RUNS = {   # (module, first argv word) -> why its valid run is not in the suite
    ("symmetries", "measures"): "trains two of the study's models in float64 (25 s on 2 cores); "
                                "results/regenerate.sh runs it",
}


def _steps_meta_input(tmp, request):
    path, where = _steps_input(tmp, request)
    return where / "steps.json", where


def _curves_input(tmp, request):
    path, where = _steps_input(tmp, request)
    assert (where / "curves.json").exists()
    return where / "curves.json", where


JSON_KINDS = {   # file -> (a valid input, [(module, argv)], the key the key damages act on;
                 # "*/k": the key k inside every entry, for a file whose entries are its keys)
    "arithmetic.json": (_finding_input, [(replay, ["{DIR}", "--table", "{OUT}"])], "tried"),
    "sweep.json": (_sweep_meta_input, [(m, a) for m, a, *_ in DAMAGE_KINDS["SWEEP_ROWS"][1]],
                   "bar"),
    "plan.json": (_plan_input, [(m, a) for m, a, *make in DAMAGE_KINDS["MECHANISM_ROWS"][1]
                                if not make or make[0] is None] + [
        (mechanism, ["arm", "{NEW}", "baseline-rerun", "--from", "{DIR}", "--Ts", "10"]),
        (mechanism, ["trace", "{NEW}", "--from", "{DIR}", "--Ts", "10", "--seeds", "1",
                     "--every", "10", "--workers", "1"], _small_plan_input),
        (symmetries, ["measures", "--plan", "{IN}", "{OUT}"], _study_plan_input)], "cells"),
    "steps.json": (_steps_meta_input, [(m, a) for m, a, *_ in DAMAGE_KINDS["STEPS_ROWS"][1]],
                   "Ts"),
    "curves.json": (_curves_input, [(steps, ["--report", "--out", "{DIR}"] + STEPS_TINY)],
                    "*/loss"),
}


JSON_DAMAGES = ("empty", "binary", "cut mid-way", "a list", "key dropped", "key of wrong type",
                "input a link outside", "a key twice", "nested too deep", "a fifo", "a device")


def _damage_json(path, how, key):
    if how == "input a link outside":
        return _link_outside(path, path.parent.parent)
    if _not_a_file(path, how):
        return None
    text = path.read_text()
    obj = json.loads(text)
    if how == "empty":
        path.write_text("")
    elif how == "binary":
        path.write_bytes(bytes(range(256)) * 8)
    elif how == "cut mid-way":
        path.write_text(text[:len(text) // 2])
    elif how == "a key twice":                    # json itself would keep the last one
        first = next(iter(obj))
        path.write_text("{" + json.dumps(first) + ": 7, " + text.lstrip()[1:])
    elif how == "nested too deep":                # json itself dies of RecursionError
        path.write_text("[" * 100000 + "]" * 100000)
    elif how == "a list":
        path.write_text(json.dumps(list(obj)))
    elif key.startswith("*/"):
        inner = key[2:]
        edit = (lambda v: {k: x for k, x in v.items() if k != inner}) if how == "key dropped" \
            else (lambda v: dict(v, **{inner: "seven"}))
        path.write_text(json.dumps({k: edit(v) for k, v in obj.items()}))
    elif how == "key dropped":
        path.write_text(json.dumps({k: v for k, v in obj.items() if k != key}))
    elif how == "key of wrong type":
        path.write_text(json.dumps(dict(obj, **{key: "seven"})))


@pytest.mark.parametrize("name,how", [(n, h) for n in JSON_KINDS for h in JSON_DAMAGES])
def test_every_command_refuses_every_damage_of_every_json_file_it_reads(name, how, tmp_path,
                                                                        capsys, request):
    make, commands, key = JSON_KINDS[name]
    for j, entry in enumerate(commands):                 # each command on its own damaged copy
        module, argv, mk, _ = _entry(entry, make)
        base = tmp_path / f"c{j}"
        (base / "in").mkdir(parents=True)
        path, where = mk(base / "in", request)
        out = base / "table.md"
        _damage_json(path, how, key)
        args = _fill(argv, path, where, out, base, request)
        before = snapshot(base)
        with _never_hangs():
            code, _, err = run_cli_main(capsys, module.main, args)
        if isinstance(code, str):
            code, err = 1, err + code + "\n"
        lines = err.strip().splitlines()
        assert code not in (0, None) and len(lines) == 1 and "Traceback" not in err, (args, err)
        assert str(path) in lines[0] or str(where) in lines[0], (how, lines)
        assert snapshot(base) == before, "something was written"


@pytest.mark.parametrize("name,i", [(n, i) for n in JSON_KINDS for i in range(len(JSON_KINDS[n][1]))])
def test_every_command_of_the_json_suite_reads_its_valid_input(name, i, tmp_path, capsys, request):
    """The JSON suite's commands on the undamaged input: exit 0 (so its refusals are the damage's)."""
    make, commands, _ = JSON_KINDS[name]
    module, argv, make, _ = _entry(commands[i], make)
    if (module.__name__.split(".")[-1], argv[0]) in SLOW_VALID_RUNS:
        pytest.skip(SLOW_VALID_RUNS[module.__name__.split(".")[-1], argv[0]])
    (tmp_path / "in").mkdir()
    path, where = make(tmp_path / "in", request)
    args = _fill(argv, path, where, tmp_path / "table.md", tmp_path, request)
    code, _, err = run_cli_main(capsys, module.main, args)
    assert code in (0, None), (args, err)


def test_the_json_suite_holds_every_json_kind_a_reader_reads():
    declared = {k for k in folder.READERS if k.endswith(".json")}
    assert set(JSON_KINDS) | {"limits.json"} == declared, set(JSON_KINDS) ^ declared


COMMANDS_WITHOUT_STUDY_FILES = {   # (module, subcommand or None) -> what it reads instead
    ("trainer", None): "reads only its own checkpoint (--resume): checkpoint.load_checkpoint, "
                       "tested with damaged checkpoints in the checkpoint tests",
    ("theory_report", None): "trains small models and reads no file",
    ("sweep", "limit"): "computes the statistical limit from its options; reads no file",
    ("bench", None): "times training steps; reads no file",
    ("sweep", "pages"): "reads results pages and the tables their markers name, as text "
                        "(cli.read_text_file, inside the repository): the pages tests "
                        "(test_pages_*) damage both",
}


MAIN_MODE = {"sweep"}      # modules whose own options run without a subcommand, beside them


def _command_modes(name):
    """(name, mode) for every way to run python -m studies.NAME, read from its --help: each
    subcommand it lists, and None for a command without subcommands (or in MAIN_MODE)."""
    code, out, err = _helps()[name]
    assert code == 0, (name, err)
    listed = re.search(r"(?:positional arguments|other commands)[^\n]*:\n\s+\{([\w,-]+)\}",
                       out)
    subs = listed.group(1).split(",") if listed else []
    return {(name, sub) for sub in subs} | ({(name, None)} if not subs or name in MAIN_MODE
                                           else set())


@functools.lru_cache(maxsize=None)
def _helps():
    """{name: (exit status, stdout, stderr)} of python -m studies.NAME --help for every study
    command, the processes run side by side, once for the session: the two tests below read the
    same texts (a command's --help does not change while the suite runs)."""
    procs = {name: subprocess.Popen([sys.executable, "-m", f"studies.{name}", "--help"],
                                    cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for name in study_commands()}
    try:
        helps = {}
        for name, p in procs.items():
            out, err = p.communicate(timeout=60)
            helps[name] = (p.returncode, out, err)
        return helps
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_every_study_command_is_in_the_damage_suite_or_says_why_not():
    """By construction: every way to run a study command, as its --help lists them (every
    subcommand of every module of study_commands), is run by the damage suite on every file kind
    it reads (DAMAGE_KINDS, JSON_KINDS), or is listed above with what it reads instead."""
    modes = set().union(*(_command_modes(name) for name in study_commands()))
    assert len(modes) >= 28 and {("mechanism", "trace-report"), ("sweep", "pages")} <= modes
    covered = set()
    for spec in list(DAMAGE_KINDS.values()) + list(JSON_KINDS.values()):
        for module, argv, *_ in spec[1]:
            name = module.__name__.split(".")[-1]
            covered.add((name, argv[0] if (name, argv[0]) in modes else None))
    assert modes == covered | set(COMMANDS_WITHOUT_STUDY_FILES), (
        "not in the damage suite: " + repr(sorted(modes - covered - set(COMMANDS_WITHOUT_STUDY_FILES),
                                                    key=str)),
        "in the suite but not a command: " + repr(sorted((covered | set(
            COMMANDS_WITHOUT_STUDY_FILES)) - modes, key=str)))


# ---------------- temporary files that are never someone's ----------------------------------------
# Every file a command writes whole goes through cli.replace_atomically (test_layout holds it):
# a temporary made new and exclusively under a random name. The names writers used before (a
# fixed FILE.PID.tmp.EXT, a checkpoint's FILE.tmp.npz) are a stranger's now: a file or a link
# there is never opened, followed, moved or removed.

def _pages_input(tmp, request):
    """A page of a repository (the test's working folder) with a marked block, and the table the
    block copies, changed since: `sweep pages` writes the page again."""
    (tmp / "repo").mkdir()
    (tmp / "repo" / "t.md").write_text("| T |\n|---|\n| 8 |\n")
    (tmp / "repo" / "page.md").write_text("# p\n\n<!-- begin t.md -->\n| old |\n"
                                          "<!-- end t.md -->\n")
    return tmp / "repo" / "page.md", tmp / "repo"


def _empty_input(tmp, request):
    (tmp / "out").mkdir()
    return tmp / "out" / "nothing", tmp / "out"


WRITERS_BEYOND_THE_SUITE = [   # the writers COMMANDS_WITHOUT_STUDY_FILES lists: (module, argv,
                               # input maker, the working folder is the input's folder)
    (trainer, [*TINY, "--save", "{DIR}/ck.npz", "--json", "{DIR}/run.json"], _empty_input, False),
    (sweep, ["limit", "--Ts", "10", "--seeds", "2", "--sets", "2", "--out", "{DIR}"],
     _empty_input, False),
    (sweep, ["pages", "page.md"], _pages_input, True),
]


READS_ONLY = {   # (module, command line) of a suite's command that writes no file -> why
    ("studies.replay", ("{DIR}", "--rows", "1")): "trains rows again and compares them; --find "
                                                  "and --table write (--table is a writer too)",
}


WRITES_NOTHING = {   # (module, first word) -> why it is not among the writers
    ("bench", None): "times training steps and prints; writes no file",
    ("theory_report", None): "trains small models and prints; writes no file",
}


def _writers():
    """Every command of the damage suites on its valid input (each command line once), and the
    writers beyond them: (module, argv, input maker, chdir)."""
    seen, out = set(), []
    for spec in list(DAMAGE_KINDS.values()) + list(JSON_KINDS.values()):
        for entry in spec[1]:
            module, argv, make, _ = _entry(entry, spec[0])
            key = (module.__name__, tuple(argv))
            if key not in seen and (module.__name__.split(".")[-1], argv[0]) not in \
                    SLOW_VALID_RUNS:
                seen.add(key)
                out.append((module, argv, make, False))
    return out + WRITERS_BEYOND_THE_SUITE


OUTPUT_NAMES = ("table.md", "critical.json", "limits.json", "limit.json", "arithmetic.json",
                "curves.json", "sweep.json", "steps.json", "plan.json", "mstar.png", "steps.png",
                "mechanism.png", "trajectories.png", "against.md",   # a folder's own outputs
                "ck.npz", "run.json")                                 # the trainer's, above


def _old_temporaries(path):
    """The names the writers of before wrote `path` through: FILE.PID.tmp.EXT (cli's, this
    process's pid) and FILE.tmp.npz (a checkpoint's)."""
    root, ext = os.path.splitext(str(path))
    return [f"{root}.{os.getpid()}.tmp{ext}", str(path) + ".tmp.npz"]


ROW_BY_ROW_CSV = re.compile(r"(runs|steps|trajectories|ball-of-runs|arithmetic-of-runs).*\.csv")


def _lay_traps(base, paths, how):
    """A stranger's file, or a link to one outside `base`, at every old temporary name of
    `paths` -> {trap: what it must still be}. Not beside a CSV written row by row (never
    written whole): its old name would be a CSV of runs itself (runs.PID.tmp.csv)."""
    traps = {}
    for i, p in enumerate(paths):
        if ROW_BY_ROW_CSV.fullmatch(os.path.basename(p)):
            continue
        for t in _old_temporaries(p):
            if os.path.lexists(t) or not os.path.isdir(os.path.dirname(t)):
                continue
            if how == "a file":
                open(t, "w").write(f"someone's notes {i}\n")
                traps[t] = ("file", f"someone's notes {i}\n")
            else:
                target = base.parent / f"elsewhere-{base.name}-{len(traps)}.txt"
                target.write_text("someone else's file\n")
                os.symlink(target, t)
                traps[t] = ("link", str(target))
    return traps


def _trapped(traps):
    """The traps that are no longer what they were (a file changed or gone, a link gone,
    retargeted, or its target changed)."""
    bad = []
    for t, (kind, v) in traps.items():
        if kind == "file" and (os.path.islink(t) or not os.path.isfile(t) or open(t).read() != v):
            bad.append(t)
        if kind == "link" and (not os.path.islink(t) or os.readlink(t) != v
                               or open(v).read() != "someone else's file\n"):
            bad.append(t)
    return bad


@pytest.mark.parametrize("i,how", [(i, h) for i in range(len(_writers()))
                                   for h in ("a file", "a link")])
def test_a_file_or_a_link_at_the_old_temporary_names_is_never_touched(i, how, tmp_path, capsys,
                                                                      request, monkeypatch):
    """Each writer on its valid input, with a stranger's file (or a link to one elsewhere) at the
    old temporary names of every file it may write (its inputs, its outputs, a folder's own
    outputs): it writes what it writes, every trap is left as it was (a link still a link to the
    same, unchanged file), every file it wrote is a regular file, and no temporary is left."""
    module, argv, make, chdir = _writers()[i]
    base = tmp_path / "w"
    (base / "in").mkdir(parents=True)
    path, where = make(base / "in", request)
    out = base / "table.md"
    (base / "new").mkdir()                      # {NEW}: made now, to lay its traps in
    args = _fill(argv, path, where, out, base, request)
    if chdir:
        monkeypatch.chdir(where)
    written, real = [], cli.replace_atomically
    monkeypatch.setattr(cli, "replace_atomically",
                        lambda p, write: (written.append(os.path.abspath(p)), real(p, write))[1])
    candidates = {str(p) for p in base.rglob("*") if p.is_file()} | {str(out)} | {
        str(d / n) for d in [base, *base.rglob("*")] if d.is_dir() for n in OUTPUT_NAMES}
    traps = _lay_traps(base, sorted(candidates), how)
    assert traps
    with _never_hangs():
        code, _, err = run_cli_main(capsys, module.main, args)
    assert code in (0, None), (args, err)
    assert bool(written) != ((module.__name__, tuple(argv)) in READS_ONLY), (
        f"{module.__name__} {argv} wrote nothing: list it in READS_ONLY", written)
    assert set(written) <= candidates, (f"outputs without traps (add their names to "
                                        f"OUTPUT_NAMES): {set(written) - candidates}")
    assert not _trapped(traps), _trapped(traps)
    assert all(os.path.isfile(p) and not os.path.islink(p) for p in written), written
    left = [p for p in base.rglob("*") if ".tmp" in p.name and str(p) not in traps]
    assert not left, left


def test_every_command_that_writes_is_among_the_writers():
    """Every way to run a study command is a writer above (the damage suites' commands, and
    those beyond them), or listed in WRITES_NOTHING with why."""
    modes = set().union(*(_command_modes(name) for name in study_commands()))
    covered = set()
    for module, argv, *_ in _writers():
        name = module.__name__.split(".")[-1]
        covered.add((name, argv[0] if (name, argv[0]) in modes else None))
    slow = {(m, w) for m, w in SLOW_VALID_RUNS}
    assert modes == covered | set(WRITES_NOTHING) | slow, sorted(
        modes ^ (covered | set(WRITES_NOTHING) | slow), key=str)
