"""test_trainer.py: the tests of studies/trainer.py.

Run from the repository's root: python -m pytest -q
"""
import json
import os

import numpy as np
import pytest

import train
from studies import trainer
from studies.lib import checkpoint, cli, training
from studies.conftest import run_cli, walk_modules
from test_all import SMALL, TINY, Walk, run_python


def test_writes_that_fail_are_one_line_and_keep_the_last_checkpoint(tmp_path, capsys,
                                                                    monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for target, msg in [(str(blocker / "ck.npz"), "does not exist"),
                        (str(tmp_path), "not a checkpoint")]:
        code, out, err = run_cli(capsys, *TINY, "--save", target)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    (tmp_path / "ck.npz.tmp.npz").mkdir()        # at the old temporary's name: never touched
    code, out, err = run_cli(capsys, *TINY, "--save", str(tmp_path / "ck.npz"))
    assert code == 0 and (tmp_path / "ck.npz").is_file(), err
    assert (tmp_path / "ck.npz.tmp.npz").is_dir() and not list((tmp_path / "ck.npz.tmp.npz").iterdir())
    good = str(tmp_path / "good.npz")
    assert run_cli(capsys, *TINY, "--save", good)[0] == 0
    before = open(good, "rb").read()

    def full_disk(f, **arrays):
        f.write(b"half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np, "savez", full_disk)
    code, out, err = run_cli(capsys, "--resume", good, "--steps", "8")
    assert code == 1 and "No space left" in err and len(err.strip().splitlines()) == 1
    assert open(good, "rb").read() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz", "ck.npz.tmp.npz", "file",
                                                          "good.npz"]      # no temporary left
    code, out, err = run_cli(capsys, "sweep", "--preset", "smoke", "--workers", "1", "--out",
                             str(blocker / "sub"))
    assert code == 2 and "cannot create the folder" in err


def test_interruptions_and_failures_say_what_was_kept_and_what_to_change(tmp_path, capsys,
                                                                        monkeypatch):
    """Family 6: with --save, Ctrl-C before step 1 or during the final evaluation never says
    "no --save given", and the summary of an interrupted evaluation is one resume away; a
    failure names the option and value that matter."""
    path = str(tmp_path / "ck.npz")
    real = dict(draw_study_data=training.draw_study_data, accuracy=train.accuracy,
                study_run=training.study_run)

    def ctrl_c(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(training, "draw_study_data", ctrl_c)                 # before step 1
    code, out, err = run_cli(capsys, *TINY, "--save", path)
    assert code == 130 and "nothing was saved" in err and "no --save" not in err
    assert not os.path.exists(path)
    monkeypatch.setattr(training, "draw_study_data", real["draw_study_data"])
    monkeypatch.setattr(train, "accuracy", ctrl_c)                # during the final evaluation
    code, out, err = run_cli(capsys, *TINY, "--save", path)
    assert code == 130 and "final evaluation" in err and "no --save" not in err
    assert f"python -m studies.trainer --resume {path} --steps 5" in err
    with pytest.raises(checkpoint.Interrupted, match="final evaluation") as e:
        training.study_run(SMALL, save=str(tmp_path / "py.npz"))
    assert (e.value.step, e.value.phase) == (SMALL["steps"], "evaluation")

    def sigterm(*args, **kw):                                      # SIGTERM's, under the guard
        raise cli.Terminated
    monkeypatch.setattr(train, "accuracy", sigterm)
    code, out, err = run_cli(capsys, *TINY, "--save", str(tmp_path / "term.npz"))
    assert code == 143 and err.startswith("\nterminated (SIGTERM) during the final evaluation; "
                                          "all 5 steps are saved"), err
    monkeypatch.setattr(train, "accuracy", real["accuracy"])
    code, out, err = run_cli(capsys, "--resume", path, "--steps", "5")   # evaluates, reports
    assert code == 0 and "test accuracy" in out and "evaluating it" in out and not err
    monkeypatch.setattr(training, "draw_study_data", ctrl_c)                 # a resume stopped at once
    code, out, err = run_cli(capsys, "--resume", path, "--steps", "9")
    assert code == 130 and "unchanged at step 5" in err and "no --save" not in err
    monkeypatch.setattr(training, "draw_study_data", real["draw_study_data"])
    assert checkpoint.load_checkpoint(path)["step"] == 5
    code, out, err = run_cli(capsys, *TINY, "--wd", "1e308")       # the decay, not the rate
    assert code == 1 and "smaller --wd (now 1e+308" in err and "--lr (now" not in err
    code, out, err = run_cli(capsys, *TINY, "--lr", "1e30")
    assert code == 1 and "smaller --lr (now 1e+30)" in err
    for flag in ("--beta2", "--dropout"):                          # 1 is refused: "< 1"
        code, out, err = run_cli(capsys, *TINY, flag, "1")
        assert code == 2 and "< 1" in err and "<= 1" not in err, err
    help_text = " ".join(trainer.train_parser().format_help().split())
    assert "decay, >= 0 and < 1" in help_text and "probability, >= 0 and < 1" in help_text
    code, out, err = run_cli(capsys, *TINY, "--val", "100000000")  # sized before allocating
    assert code == 2 and "GiB" in err and "--val 100000000" in err
    monkeypatch.setattr(training, "study_run", lambda *a, **k: (_ for _ in ()).throw(
        MemoryError("Unable to allocate 9.1 GiB for an array")))
    code, out, err = run_cli(capsys, *TINY)
    assert code == 1 and "--T 12" in err and "Unable to allocate 9.1 GiB" in err
    monkeypatch.setattr(training, "study_run", real["study_run"])
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(
        OSError(28, "No space left on device")))                  # a full disk at --json
    out_json = tmp_path / "r.json"
    code = cli.one_line_errors("studies.trainer", trainer.main, [*TINY, "--json", str(out_json)])
    err = capsys.readouterr().err
    monkeypatch.undo()
    assert code == 1 and str(out_json) in err and "No space left" in err
    assert sorted(os.listdir(tmp_path)) == ["ck.npz", "py.npz", "term.npz"]   # no summary, no tmp


def test_no_output_replaces_a_file_that_is_not_its_own(tmp_path, capsys):
    """Family 1: every path the project writes passes one check (cli.claim_output): free, or
    already this command's own kind of output. A checkpoint is never replaced by a --json, nor
    another run's checkpoint by train_run(save=...)."""
    ck = str(tmp_path / "x.npz")
    code, out, err = run_cli(capsys, *TINY, "--save", ck, "--json", ck)
    assert code == 2 and "same file" in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(ck)
    assert run_cli(capsys, *TINY, "--save", ck)[0] == 0
    good = open(ck, "rb").read()
    notes, other, empty, fifo = (tmp_path / n for n in ("notes.txt", "o.json", "e.json", "fifo"))
    notes.write_text("precious")
    other.write_text('{"a": 1}')
    empty.write_text("")
    os.mkfifo(fifo)
    for target, msg in [(ck, "not a JSON summary"), (notes, "not a JSON summary"),
                        (other, "not a JSON summary"), (empty, "not a JSON summary"),
                        (fifo, "not a regular file"), (tmp_path, "is a folder")]:
        code, out, err = run_cli(capsys, *TINY, "--json", str(target))
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (target, err)
        assert "Traceback" not in err and not out
    assert open(ck, "rb").read() == good and checkpoint.load_checkpoint(ck)["step"] == 5
    assert (notes.read_text(), other.read_text(), empty.read_text()) == ("precious", '{"a": 1}', "")
    summary = tmp_path / "r.json"                    # a summary is replaced by a new summary
    assert run_cli(capsys, *TINY, "--json", str(summary))[0] == 0
    assert run_cli(capsys, *TINY, "--seed", "1", "--json", str(summary))[0] == 0
    assert json.loads(summary.read_text())["seed"] == 1
    for target, msg in [(ck, "already holds a checkpoint at step 5"),    # Python: the same rule
                        (str(notes), "not a checkpoint of this run"),
                        (str(summary), "not a checkpoint of this run"), (str(tmp_path), "folder")]:
        with pytest.raises(ValueError, match=msg):
            training.study_run(SMALL, save=target)
    with pytest.raises(TypeError, match="save must be a file path"):
        training.study_run(SMALL, save=5)
    assert open(ck, "rb").read() == good and notes.read_text() == "precious"
    mine = str(tmp_path / "mine.npz")                # its own checkpoint: continued, so replaced
    with pytest.raises(checkpoint.Interrupted, match="interrupted after step 7; checkpoint"):
        training.study_run(SMALL, save=mine, stop_after=7)
    training.study_run(SMALL, save=mine, resume=checkpoint.load_checkpoint(mine))
    assert checkpoint.load_checkpoint(mine)["step"] == SMALL["steps"]
    table, readme, photo = tmp_path / "t.md", tmp_path / "README.md", tmp_path / "photo.png"
    table.write_text("| model | T | m50 |\n")
    readme.write_text("# my notes\n")
    photo.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert cli.claim_output(str(table), "table") == str(table)
    for path, kind, msg in [(readme, "table", "not a table"), (photo, "plot", "not a plot"),
                            (summary, "critical", "not a sweep report's critical.json"),
                            (readme, "limits", "not a cache of statistical limits")]:
        with pytest.raises(ValueError, match=msg):
            cli.claim_output(str(path), kind, "--out")
    with pytest.raises(ValueError, match=r"--plot .*x\.foo: the image's extension must be one of "
                                         r"png, .*, got 'foo'"):
        cli.claim_output(str(tmp_path / "x.foo"), "plot", "--plot")   # savefig would traceback


def test_rerun_never_overwrites_a_checkpoint(tmp_path, capsys):
    path = str(tmp_path / "ck.npz")
    assert run_cli(capsys, *TINY, "--save", path)[0] == 0
    good = open(path, "rb").read()
    for extra in ([], ["--T", "13"]):          # the same command again, or another configuration
        code, out, err = run_cli(capsys, *TINY, *extra, "--save", path)
        assert code == 2 and "already holds a checkpoint at step 5" in err, err
        assert len(err.strip().splitlines()) == 1
    assert open(path, "rb").read() == good


def test_cli_checkpoint_errors_leave_files_alone(tmp_path, capsys):
    path = str(tmp_path / "ck.npz")
    base = ["--T", "12", "--m", "40", "--d", "8", "--heads", "2", "--mlp", "4", "--n-test", "100",
            "--log-every", "0"]
    code, out, err = run_cli(capsys, *base, "--steps", "5", "--save", path)
    assert code == 0 and "checkpoint" in out
    good = open(path, "rb").read()
    (tmp_path / "trunc.npz").write_bytes(good[:100])
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    for argv, msg in [(["--resume", str(tmp_path / "trunc.npz")], "not a readable checkpoint"),
                      (["--resume", path, "--T", "13"], "another configuration: --T 13"),
                      (["--resume", path, "--steps", "4"], "already at step 5"),
                      (["--resume", str(notes)], "not a readable checkpoint"),
                      (base + ["--save", str(notes)], "refusing to overwrite")]:
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert open(path, "rb").read() == good and notes.read_text() == "precious"
    code, out, err = run_cli(capsys, "--resume", path, "--steps", "9")
    assert code == 0 and "resumed at step 5" in out


def test_ctrl_c_while_the_last_checkpoint_is_written_is_not_swallowed(tmp_path, capsys,
                                                                     monkeypatch):
    """A Ctrl-C noted by the handler while the final checkpoint was written used to be
    forgotten: the whole evaluation ran and the command exited 0. It stops the run: exit 130,
    the checkpoint complete at the last step, the command that evaluates it."""
    import signal
    path, real = str(tmp_path / "ck.npz"), checkpoint.save_checkpoint

    def save_then_ctrl_c(*args):
        written = real(*args)
        os.kill(os.getpid(), signal.SIGINT)           # lands in the loop's handler
        return written
    monkeypatch.setattr(checkpoint, "save_checkpoint", save_then_ctrl_c)
    code, out, err = run_cli(capsys, *TINY, "--save", path)
    assert code == 130 and "test accuracy" not in out, (out, err)
    assert "after the last step; all 5 steps are saved" in err and \
        f"python -m studies.trainer --resume {path} --steps 5" in err
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(path)["step"] == 5


def test_sigterm_saves_like_ctrl_c(tmp_path):
    """SIGTERM during training with --save: the checkpoint is saved and said so, as on Ctrl-C,
    but the exit status is SIGTERM's 143, as every other command's (cli.one_line_errors; it
    used to be Ctrl-C's 130)."""
    path = str(tmp_path / "ck.npz")
    p = run_python("-m", "studies.trainer", "--T", "12", "--m", "40", "--d", "8", "--heads", "2", "--mlp", "4",
                "--steps", "1000000", "--log-every", "10", "--save", path)
    p.stdout.readline(), p.stdout.readline()
    p.terminate()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143 and "checkpoint saved" in err and "Traceback" not in err, err
    assert err.strip().startswith("terminated (SIGTERM) after step"), err
    assert checkpoint.load_checkpoint(path)["step"] >= 1


def test_summary_says_what_the_last_step_hides_and_names_the_head_that_found_s(tmp_path,
                                                                                capsys):
    """The run's summary and JSON: the best accuracy at the logged steps and its step, the first
    jump of the training loss after it fell below LOSS_LOW, and the head with the most [CLS]
    attention on S; the outcome stays the last step's."""
    class Logged:
        label, logged = "test", [dict(step=1, acc=0.5), dict(step=3, acc=0.9), dict(step=5,
                                                                                     acc=0.6)]
    got = train.over_the_run([0.7, 0.005, 0.004, 0.5, 0.3], Logged.logged, Logged.label, steps=5)
    assert (got["best_logged_acc"], got["best_logged_step"]) == (0.9, 3)
    assert (got["loss_low_step"], got["loss_jump_step"]) == (2, 4)
    quiet = train.over_the_run([0.7, 0.05, 0.004, 0.009], [], "val", steps=10)  # resumed at 7
    assert quiet["loss_low_step"] == 9 and quiet["loss_jump_step"] is None
    assert quiet["best_logged_step"] is None and np.isnan(quiet["best_logged_acc"])
    A = np.full((7, 3), 0.1)
    A[[1, 4], 2], A[[0, 5], 0] = 0.4, 0.3          # head 2 puts 0.8 on S = [1, 4], head 0 0.2
    assert train.best_head(A, np.array([1, 4]))["best_head"] == 2
    assert train.best_head(A, np.array([1, 4]))["best_head_top"] == [1, 4]
    out = str(tmp_path / "r.json")
    code, printed, _ = run_cli(capsys, *TINY, "--steps", "30", "--log-every", "10", "--json", out)
    r = json.load(open(out))
    assert code == 0 and "cls_attention" not in r and 0 <= r["best_head"] < 2
    assert r["best_logged_step"] in (1, 10, 20, 30) and r["logged_on"] == "test"
    assert r["best_logged_acc"] == max(e["acc"] for e in r["logged"]) >= r["logged"][-1]["acc"]
    assert f"head {r['best_head']} of 2 attends most to  [" in printed
    assert "(mean over 2 heads: " in printed and "at the logged steps" in printed


def test_plot_option_draws_the_run(tmp_path, capsys, monkeypatch):
    """--plot PATH: with matplotlib, one picture (claimed like every output: never over a file
    that is not a plot); without it, one line saying so, and the run still reports."""
    path = str(tmp_path / "run.png")
    (tmp_path / "notes.png").write_text("my notes")
    code, _, err = run_cli(capsys, *TINY, "--plot", str(tmp_path / "notes.png"))
    assert code == 2 and "--plot" in err and (tmp_path / "notes.png").read_text() == "my notes"
    monkeypatch.setattr(cli, "pyplot_or_hint", lambda then: print("no plot: matplotlib is not "
                                                                  "installed") and None)
    code, out, _ = run_cli(capsys, *TINY, "--plot", path)
    assert code == 0 and "no plot" in out and "test accuracy" in out
    assert not os.path.exists(path)
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    code, out, _ = run_cli(capsys, *TINY, "--log-every", "2", "--plot", path)
    assert code == 0 and f"plot: {path}" in out and cli.claim_output(path, "plot") == path


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "trainer.train_parser": Walk(lambda f: dict()),
    "trainer.main": Walk(lambda f: dict(argv=["--help"]), run=False,
                       legal=dict(argv={"None": "the process's own arguments"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over trainer.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((trainer,), WALK)
