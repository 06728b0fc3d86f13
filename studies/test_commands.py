"""test_commands.py: Every study command's promises at once: its entry prologue (Ctrl-C and SIGTERM
while it starts, run as a file), one-line refusals of every option, a full disk, every plot it
offers (studies/*.py; cli.py's prologue).

Run from the repository's root: python -m pytest -q
"""
import itertools
import os
import re
import subprocess
import sys

import pytest

from studies import bench, classball, mechanism, steps, sweep, trainer
from studies.lib import cli, folder_write
from studies.conftest import (STEPS_TINY, STUDIES, command_name, copy_folder, run_side_by_side,
                              synthetic_study, synthetic_trace, tiny_plan, run_cli, run_cli_main,
                              study_commands)
from test_all import HERE, into_failing_stdout, run_python


def _bad_values(action):
    """Values that must be refused for one option, from its type."""
    if action.choices:
        return ["bogus"]
    t = action.type
    if t is None or action.nargs == 0:
        return []
    name, allowed = getattr(t, "__name__", ""), getattr(t, "allowed", "")
    if allowed.startswith("an integer"):          # cli.integer(lo)
        return ["abc", "1.5", "-1", ""]
    if allowed.startswith("a finite number"):     # cli.number(lo)
        return ["abc", "-1", "nan", "inf"]
    if name == "int_list":
        return ["abc", "0", "5,-3", ""]
    if name == "shard_spec":
        return ["2/2", "a/b", "1"]
    if name == "model_list":
        return ["cnn", ""]
    return []


_HOOK = ("import os, signal, sys, runpy\n"
         "signal.signal(signal.SIGINT, signal.default_int_handler)\n"   # as in a terminal
         "AT, SWALLOW = sys.argv[1], sys.argv[2] == 'swallow'\n"
         "class Hook:\n"
         "    def find_spec(self, name, path=None, target=None):\n"
         "        if name == AT:\n"
         "            sys.meta_path.remove(self)\n"
         "            try:\n"                  # code that swallows what lands in it, as some do
         "                os.kill(os.getpid(), signal.SIGINT)\n"
         "                sum(range(10 ** 5))\n"
         "            except BaseException:\n"
         "                if not SWALLOW:\n"
         "                    raise\n"
         "sys.meta_path.insert(0, Hook())\n"
         "sys.argv = sys.argv[3:]\n"
         "runpy.run_path(sys.argv[0], run_name='__main__')\n")


class _FullDisk:
    """A file on a disk that fills after `room` writes: that write fails with ENOSPC, and so does
    every flush and the close after it (what the buffered data meets on a full disk)."""

    def __init__(self, f, room):
        self.f, self.room, self.full = f, room, False

    def write(self, text):
        if self.room <= 0:
            self.full = True
            raise OSError(28, "No space left on device")
        self.room -= 1
        return self.f.write(text)

    def flush(self):
        if self.full:
            raise OSError(28, "No space left on device")
        return self.f.flush()

    def close(self):
        self.f.close()
        if self.full:
            raise OSError(28, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.f, name)


@pytest.mark.parametrize("command", ["train", "sweep", "bench"])
def test_every_option_refuses_bad_values_in_one_line(command, capsys, tmp_path):
    """Walk every option of every command: a bad value gives exit 2 and one line on stderr."""
    parser = {"train": trainer.train_parser, "sweep": sweep._sweep_parser,
              "bench": bench._parser}[command]()
    prefix = [] if command == "train" else [command]
    tried = 0
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        for bad in _bad_values(action):
            code, out, err = run_cli(capsys, *prefix, action.option_strings[0], bad,
                                     "--out" if command == "sweep" else "--json",
                                     str(tmp_path / "x"))
            assert code == 2, (action.dest, bad, out, err)
            assert len(err.strip().splitlines()) == 1 and "error" in err, (action.dest, bad, err)
            assert f"argument {'/'.join(action.option_strings)}:" in err, (action.dest, bad, err)
            assert "Traceback" not in err
            tried += 1
    assert tried >= 10
    # values that each pass alone but not together, and an impossible memory demand
    if command != "bench":
        for argv, msg in [(["--s", "200"], "larger than"), (["--heads", "7"], "must divide"),
                          (["--task", "majority", "--s", "2"], "odd")]:
            code, out, err = run_cli(capsys, *prefix, *argv, "--out" if command == "sweep"
                                     else "--json", str(tmp_path / "x"))
            assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
    if command == "train":
        for argv, msg in [(["--T", "100000000"], "GiB"), (["--batch", "900"], "larger than --m")]:
            code, out, err = run_cli(capsys, *argv)
            assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_ctrl_c_while_a_command_starts_is_one_line(tmp_path, capsys, monkeypatch):
    """Family 5: Ctrl-C while a command imports numpy or builds its parser is one line and exit
    status 130 (Ctrl-C before Python has run the script's first line is Python's own)."""
    hook = ("import os, signal, sys, runpy\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # as in a terminal, even
            "class Hook:\n"                                  # when pytest runs with SIGINT ignored
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy':\n"
            "            os.kill(os.getpid(), signal.SIGINT)\n"
            "sys.meta_path.insert(0, Hook())\n"
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    for argv in (["studies/trainer.py", "--steps", "5"], ["studies/sweep.py", "limit"],
                 ["studies/sweep.py", "--help"]):
        r = subprocess.run([sys.executable, "-c", hook, *argv], cwd=HERE, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 130 and "Traceback" not in r.stderr, (argv, r.stderr)
        assert r.stderr.strip().splitlines() == [f"{command_name(argv[0])}: interrupted while "
                                                 f"starting; nothing was run"]

    def ctrl_c(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(trainer, "train_parser", ctrl_c)
    assert cli.one_line_errors("studies.trainer", trainer.main, []) == 130
    assert capsys.readouterr().err.strip() == "studies.trainer: interrupted"


def test_ctrl_c_at_start_up_is_one_line_and_never_swallowed():
    """Ctrl-C while any command starts (in its first line, `import cli`; importing numpy or its
    own modules), even where the code it lands in swallows exceptions: one line, exit status 130,
    nothing run (it used to print the line and then run on to exit 0, or give a traceback:
    steps.py, theory.py, and every command during `import cli`)."""
    commands = [["studies/steps.py", "--out", "nowhere-32"], ["studies/theory_report.py"],
                ["studies/trainer.py", "--steps", "5"], ["studies/sweep.py", "limit"],
                ["studies/sweep.py", "headline", "--out", "nowhere-32.md"]]
    points = [("argparse", "raise"), ("numpy", "swallow"), ("attn", "raise"), ("attn", "swallow")]
    cases = [(argv, at, mode) for argv, (at, mode) in itertools.product(commands, points)
             if (at, mode) != ("attn", "raise") or argv[0] == "studies/theory_report.py"]
    # ("attn", "raise"): once after numpy is enough
    done = run_side_by_side([([sys.executable, "-c", _HOOK, at, mode, *argv], dict(cwd=HERE))
                             for argv, at, mode in cases])
    for (argv, at, mode), (r, _) in zip(cases, done, strict=True):
        assert r.returncode == 130, (argv, at, mode, r.returncode, r.stderr[-500:])
        assert r.stderr.strip().splitlines() == [f"{command_name(argv[0])}: interrupted while "
                                                 f"starting; nothing was run"], (argv, at, mode)
        assert r.stdout == ""
    assert not os.path.exists(os.path.join(HERE, "nowhere-32"))


def test_a_full_disk_names_the_file_and_leaves_no_empty_csv(tmp_path, capsys, monkeypatch,
                                                            steps_ref):
    """Disk full while a sweep, steps.py or mechanism.py writes its CSV's header or first row:
    one line naming the CSV's path, exit status 1, and no empty CSV left behind."""
    real = open
    for room, command, name in [(0, "sweep", "runs.csv"), (1, "sweep", "runs.csv"),
                                (0, "steps", "steps.csv"), (1, "steps", "steps.csv"),
                                (0, "mechanism", "runs.csv"), (1, "mechanism", "runs.csv")]:
        out = tmp_path / f"{command}-{room}"
        def full(path, mode="r", *args, room=room, **kw):       # CSVs opened to write: full
            f = real(path, mode, *args, **kw)
            return _FullDisk(f, room) if str(path).endswith(".csv") and mode in "wa" else f
        monkeypatch.setattr(folder_write, "open", full, raising=False)   # the writing side
        argv = {"sweep": ["--preset", "smoke", "--workers", "1", "--out", str(out)],
                "steps": STEPS_TINY + ["--out", str(out)], "mechanism": ["run", str(out)]}[command]
        if command == "mechanism":
            tiny_plan(str(out))
        capsys.readouterr()
        code = cli.one_line_errors(f"{command}.py", dict(sweep=sweep.main, steps=steps.main,
                                                         mechanism=mechanism.main)[command], argv)
        err = capsys.readouterr().err
        assert code == 1 and err.strip().splitlines() == [
            f"{command}.py: cannot access {out / name}: No space left on device"], err
        assert not (out / name).exists() or (out / name).read_text().count("\n") == 1
        monkeypatch.undo()


@pytest.mark.parametrize("argv, msg", [
    (["--d", "2000000", "--heads", "1"], "GiB"), (["--mlp", "3000000000"], "GiB"),
    (["--model", "mlp", "--mlp", "1000000000", "--T", "1000"], "GiB"),
    (["sweep", "--Ts", "100", "--d", "2000000", "--heads", "1"], "GiB"),
    (["bench", "--Ts", "100000000"], "GiB"), (["bench", "--m", "1000000000"], "GiB")])
def test_sizes_that_do_not_fit_are_one_line_before_anything_runs(argv, msg, capsys, tmp_path):
    code, out, err = run_cli(capsys, *argv, *(["--out", str(tmp_path)] if argv[0] == "sweep"
                                               else []))
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err


_SWALLOWED = ("import os, signal, sys, time\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"   # as in a terminal
              "from studies.lib import cli\n"
              "cli.STOP_GRACE = 1.0\n"
              "SIG, RUN_ON = getattr(signal, sys.argv[1]), float(sys.argv[2])\n"
              "def main(argv):\n"
              "    print('banner', flush=True)\n"
              "    try:\n"                   # code that swallows what lands in it, as numpy's
              "        os.kill(os.getpid(), SIG)\n"       # first import of numpy.random does
              "        time.sleep(1)\n"
              "    except BaseException:\n"
              "        pass\n"
              "    time.sleep(RUN_ON)\n"
              "    print('ran to its end', flush=True)\n"
              "    return 0\n"
              "sys.exit(cli.one_line_errors('x.py', main))\n")


def test_ctrl_c_or_sigterm_in_main_is_one_line_even_where_it_is_swallowed():
    """Ctrl-C or SIGTERM from the first line of a command's main to its last is one line and exit
    status 130 or 143 (SIGTERM after the banner used to kill the command with -15 and no word);
    where the code it lands in swallows it (numpy importing numpy.random on first use did, and the
    command ran to its end and exited 0), the command still stops: at once when main returns,
    else cli.STOP_GRACE seconds later."""
    cases = [(sig, code, line, run_on) for sig, code, line in [
        ("SIGINT", 130, "x.py: interrupted"), ("SIGTERM", 143, "x.py: terminated (SIGTERM)")]
        for run_on in (0, 60)]
    done = run_side_by_side([([sys.executable, "-c", _SWALLOWED, sig, str(run_on)],
                              dict(cwd=HERE)) for sig, _, _, run_on in cases])
    for (sig, code, line, run_on), (r, seconds) in zip(cases, done, strict=True):
        assert r.returncode == code and r.stderr.strip().splitlines() == [line], (sig, r)
        assert seconds < 30 and ("ran to its end" in r.stdout) == (run_on == 0)
    p = run_python("-m", "studies.trainer", "--T", "12", "--m", "40", "--d", "8", "--heads", "2", "--mlp", "4",
                "--steps", "1000000", "--log-every", "0")
    assert p.stdout.readline().startswith("transformer on task and")       # the banner
    p.terminate()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and err.strip().splitlines() == ["studies.trainer: terminated (SIGTERM)"]


def test_every_study_command_run_another_way_says_in_one_line_how_to_run_it(tmp_path):
    """`python studies/X.py` from another folder and `python -m X` from inside studies/ end in
    one line naming `python -m studies.X`, never a traceback (ModuleNotFoundError: 'studies')."""
    names = study_commands()
    assert {"sweep", "trainer", "mechanism", "symmetries", "replay"} <= set(names)
    env = dict(os.environ, PYTHONPATH="")
    cases = [(name, argv, cwd) for name in names
             for argv, cwd in (([os.path.join(STUDIES, name + ".py"), "--help"], str(tmp_path)),
                               (["-m", name, "--help"], STUDIES))]
    done = run_side_by_side([([sys.executable, *argv], dict(cwd=cwd, env=env))
                             for _, argv, cwd in cases])
    for (name, argv, _), (p, _) in zip(cases, done, strict=True):
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and not p.stdout, (name, argv, p.stderr)
        assert f"python -m studies.{name}" in lines[0], (name, lines)


@pytest.mark.parametrize("name", study_commands())
def test_every_study_command_ends_as_a_unix_tool_when_its_standard_output_fails(name):
    """`python -m studies.X ... | head -c 1` once the pipe's reader is gone: the command ends
    quietly with exit status 141 (128 + SIGPIPE), nothing on stderr; `> /dev/full`: one line
    naming standard output, exit status 1, never a traceback or "Exception ignored". Every
    command's --help goes out through its main and cli.one_line_errors, the common way out
    (and `sweep limit`, the issue's case, prints its own table)."""
    argvs = [["--help"]] + ([["limit", "--Ts", "10", "--seeds", "2", "--sets", "2"]]
                           if name == "sweep" else [])
    start = lambda out, argv: subprocess.Popen([sys.executable, "-m", f"studies.{name}", *argv],
                                               cwd=HERE, stdout=out, stderr=subprocess.PIPE,
                                               text=True)
    for argv, where, code, err in into_failing_stdout(argvs, start, 60):
        if where == "pipe":
            assert (code, err) == (141, ""), (name, argv, err)
        else:
            assert code == 1 and err.splitlines() == [
                f"studies.{name}: cannot write its standard output: No space left on "
                f"device"], (name, argv, err)


def _plot_cases(request, tmp):
    """(module, argv, the image it must write) for every plot a command offers; each argv's
    inputs are the session's small folders."""
    smoke, steps_dir = request.getfixturevalue("smoke_ref"), request.getfixturevalue("steps_ref")
    ball, wide = request.getfixturevalue("ball_ref"), request.getfixturevalue("wide_ref")
    synthetic_study(str(tmp / "study"))
    synthetic_trace(str(tmp / "trace"))
    copy_folder(steps_dir, tmp / "steps")
    copy_folder(smoke, tmp / "sweep")
    p = lambda name: str(tmp / f"{name}.png")
    readme = tmp / "README.md"               # headline pastes its table here, never into ours
    readme.write_text("# x\n\n<!-- begin results/headline.md -->\n"
                      "<!-- end results/headline.md -->\n")
    return [
        (trainer, ["--T", "12", "--m", "40", "--steps", "30", "--d", "8", "--heads", "2",
                   "--plot", p("trainer")], p("trainer")),
        (sweep, ["--preset", "smoke", "--workers", "1", "--out", str(tmp / "sweep"), "--report"],
         str(tmp / "sweep" / "mstar.png")),
        (sweep, ["compare", str(smoke), str(smoke), "--out", str(tmp / "c.md"), "--plot",
                 p("compare")], p("compare")),
        (sweep, ["width", str(smoke), "--out", str(tmp / "w.md"), "--plot", p("width")],
         p("width")),
        (sweep, ["families", str(smoke), "--out", str(tmp / "f.md"), "--plot", p("families")],
         p("families")),
        (sweep, ["headline", "--d64", str(smoke), "--d128", str(wide), "--out",
                 str(tmp / "h.md"), "--readme", str(readme), "--plot", p("headline")],
         p("headline")),
        (steps, ["--report", "--out", str(tmp / "steps")] + STEPS_TINY,
         str(tmp / "steps" / "steps.png")),
        (mechanism, ["report", str(tmp / "study")], str(tmp / "study" / "mechanism.png")),
        (mechanism, ["trace-report", str(tmp / "trace")], str(tmp / "trace" / "trajectories.png")),
        (classball, [str(smoke), str(ball), "--out", str(tmp / "b.md"), "--plot", p("ball")],
         p("ball")),
    ]


def test_every_plot_a_command_offers_is_listed_for_drawing():
    """Every command whose --help offers --plot, or whose report draws a picture, is in
    _plot_cases (read from the source: a new --plot joins by being written)."""
    offered = {m for m in study_commands()
               if re.search(r"add_argument\(\s*\"--plot\"|pyplot_or_hint\(|plt\.subplots",
                            open(os.path.join(STUDIES, m + ".py")).read())}
    listed = {"trainer", "sweep", "steps", "mechanism", "classball"}
    assert offered <= listed | {"failures"}, offered - listed   # failures: mechanism trace-report
    src = open(__file__).read()
    for m in listed:
        assert f"({m}, [" in src.split("def _plot_cases", 1)[1].split("def test_every_plot", 1)[0]


def test_every_plot_a_command_offers_is_drawn(tmp_path, capsys, request):
    pytest.importorskip("matplotlib")
    for module, argv, image in _plot_cases(request, tmp_path):
        code, out, err = run_cli_main(capsys, module.main, argv)
        assert code in (0, None) and os.path.getsize(image) > 1000, (argv, out[-300:], err)
