"""test_steps.py: the tests of studies/steps.py.

Run from the repository's root: python -m pytest -q
"""
import os
import time

import numpy as np
import pytest

import theory
from studies import steps, sweep
from studies.lib import folder, folder_write, intervals
from studies.conftest import (ARGV, STEPS_TINY, copy_folder, edit_row, one_line_refusal, run_cli,
                              walk_modules)
from test_all import Walk, run_python, cubic


def test_paired_medians_carry_the_settings_difference_not_the_seeds_luck():
    rng = np.random.default_rng(6)
    ref = [dict(T=50, seed=sd, steps_to_bar=int(rng.integers(50, 5000)), censored=0)
           for sd in range(12)]
    twice = [dict(r, steps_to_bar=2 * r["steps_to_bar"]) for r in ref][::-1]  # another order
    assert steps._paired_medians(twice, ref)[2:] == (2.0, 2.0, 2.0, 12)   # exact: seeds paired
    # a smaller budget on one side: both are censored at it
    _, _, ratio, lo, hi, _ = steps._paired_medians(ref, ref, budget=int(np.median(
        [r["steps_to_bar"] for r in ref])) - 1)
    assert ratio is None and lo is None and hi is None             # both medians inf: undefined
    censored = [dict(r, censored=1, steps_to_bar=None) if r["seed"] < 7 else r for r in twice]
    ma, _, ratio, lo, hi, _ = steps._paired_medians(censored, ref)
    assert ma == ratio == hi == np.inf and lo > 2                    # most censored: above
    assert steps._paired_medians(twice[-5:], ref)[-1] == 5            # only the shared seeds
    with pytest.raises(ValueError, match="share no seed"):
        steps._paired_medians(twice[:3], ref[:3])


def test_steps_sigterm_says_what_was_saved(tmp_path):
    """SIGTERM during steps.py's runs: its own line (the runs saved, how to resume) and exit
    status 143, as Ctrl-C's line and 130 (it used to be the generic "studies.steps: terminated")."""
    p = run_python("-m", "studies.steps", "--Ts", "8", "--seeds", "1", "--budget", "1000000", "--lr", "1e-9",
                "--d", "16", "--heads", "2", "--mlp", "16", "--workers", "1", "--out",
                str(tmp_path / "f"))
    try:
        assert p.stdout.readline().startswith("steps: 1 runs to do")        # the banner
        time.sleep(1.0)                                                     # inside the run
        p.terminate()
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 143 and err.strip().splitlines() == [
        f"terminated (SIGTERM): 0 runs of this session are saved in "
        f"{tmp_path / 'f' / 'steps.csv'}; rerun the same command to resume"], err


def test_steps_command_runs_resumes_and_pairs_two_folders(tmp_path, capsys):
    tiny = ["--s", "2", "--Ts", "6,8", "--seeds", "2", "--budget", "300", "--d", "16",
            "--heads", "4", "--mlp", "16", "--workers", "1", "--n-test", "200"]
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert steps.main(tiny + ["--m", "200", "--out", a]) == 0
    assert steps.main(tiny + ["--m", "400", "--out", b, "--against", a]) == 0
    table = (tmp_path / "b" / "against.md").read_text()
    assert "settings that differ: m 400 here, 200 there" in table
    rows = [ln.split(" | ") for ln in table.splitlines() if ln.startswith(("| 6 ", "| 8 "))]
    assert [r[:2] for r in rows] == [["| 6", "2"], ["| 8", "2"]]
    for folder_, column in ((b, 2), (a, 3)):                          # here, then there
        done = folder.read_done(os.path.join(folder_, "steps.csv"))
        med = np.median([np.inf if r["censored"] else r["steps_to_bar"]
                         for (T, _), r in done.items() if T == 6])
        assert rows[0][column] == ("inf" if np.isinf(med) else f"{med:.0f}")
    before = (tmp_path / "a" / "steps.csv").read_text()
    assert steps.main(tiny + ["--m", "200", "--out", a]) == 0          # resumes: nothing to run
    assert (tmp_path / "a" / "steps.csv").read_text() == before
    code, _, err = run_cli(capsys, "steps", "--out", b, "--report", "--against",
                           str(tmp_path / "nowhere"))
    assert code == 2 and "holds no readable steps.json" in err and len(err.splitlines()) == 1
    (tmp_path / "a" / "steps.json").write_text("[1, 2]")                # JSON, but not ours
    code, _, err = run_cli(capsys, "steps", "--out", b, "--report", "--against", a)
    assert code == 2 and "holds no readable steps.json" in err and len(err.splitlines()) == 1


def test_steps_with_one_seed_or_a_check_past_the_budget_writes_its_table(tmp_path):
    # issue 39: one seed made seed_resamples(1) fail ("cannot reshape array of size 0"), after the
    # training; its one resample is the seed itself. A check interval longer than the budget
    # censors every run: the table says so, and that there is no fit
    tiny = ["--s", "1", "--d", "8", "--heads", "2", "--mlp", "4", "--workers", "1", "--n-test",
            "100", "--m", "60"]
    assert steps.main(tiny + ["--Ts", "4", "--seeds", "1", "--budget", "60", "--out",
                              str(tmp_path / "one")]) == 0
    table = (tmp_path / "one" / "table.md").read_text()
    assert table.count("\n| 4 | 1 |") == 1
    assert steps.main(tiny + ["--Ts", "4,6", "--seeds", "2", "--budget", "5", "--every", "1000",
                              "--out", str(tmp_path / "late")]) == 0
    table = (tmp_path / "late" / "table.md").read_text()
    assert "| 4 | 2 | 2 | inf [inf, inf]" in table and "no fit" in table
    C, w = intervals.seed_resamples(1)
    assert C.tolist() == [[1.0]] and w.tolist() == [1.0]


@pytest.mark.parametrize("call, message", [
    (lambda: theory.numerical_jacobian(cubic, [[1.0, 2.0]]), "float64 numpy array"),
    (lambda: theory.numerical_jacobian(cubic, np.ones((2, 3), np.float32)), "float32"),
    (lambda: theory.numerical_jacobian(cubic, np.ones((2, 3)), h=0), "h must be"),
    (lambda: theory.numerical_jacobian(cubic, np.ones((0, 3))), r"one element, got shape \(0, 3\)"),
    (lambda: theory.fit_line([1.0, 1.0], [2.0, 3.0]), "distinct"),
])
def test_helpers_refuse_bad_input_in_one_line(call, message):
    with pytest.raises(ValueError, match=message) as e:
        call()
    assert "\n" not in str(e.value)


def _outcomes(out):
    return {k: (r["censored"], r["steps_to_bar"])
            for k, r in folder.read_done(os.path.join(str(out), "steps.csv")).items()}


def test_steps_folder_resumes_after_any_crash_without_gluing_rows(steps_ref, tmp_path, capsys):
    """A torn last row (SIGKILL mid-write), an empty steps.csv, NUL bytes mid-file or at the end:
    the same command resumes into a file every later run reads, with the same outcomes."""
    ref = (steps_ref / "steps.csv").read_text()
    lines = ref.splitlines(keepends=True)
    assert {c for c, _ in _outcomes(steps_ref).values()} == {0, 1}      # hits and a censored run
    variants = {"torn last row": ref[:-9], "empty": "",
                "NUL row mid-file": "".join(lines[:3]) + "\x00" * 40 + "\n" + "".join(lines[4:]),
                "NUL tail": ref[:-9] + "\x00" * 64}
    for name, text in variants.items():
        f = copy_folder(steps_ref, tmp_path / name.replace(" ", "-"))
        (f / "steps.csv").write_text(text)
        code, _, err = run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f))
        assert code == 0 and "Traceback" not in err, (name, err)
        assert _outcomes(f) == _outcomes(steps_ref), name
        body = (f / "steps.csv").read_text()
        assert body.startswith(lines[0]) and body.endswith("\n"), name
        assert all(len(ln.split(",")) == len(steps.FIELDS) for ln in body.splitlines()
                   if "\x00" not in ln), name                          # no row glued onto another
        assert run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f), "--report")[0] == 0, name


def test_steps_rows_and_files_that_contradict_their_folder_are_one_line(steps_ref, tmp_path,
                                                                        capsys):
    """The one row validator for steps.py's rows: a flipped censored flag, a step that is not a
    checked one, a row of another task, s, m, budget or check interval, one run twice with two
    outcomes; and a steps.json or curves.json that is not what steps.py writes: one line naming
    the file (and line), exit 2, for a resume and a report alike."""
    lines = (steps_ref / "steps.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    cens = [ln.split(",")[header.index("censored")] for ln in lines]
    hit, miss = cens.index("0", 1), cens.index("1", 1)
    rows = [(hit, dict(censored="1"), "censored 1 contradicts its steps_to_bar"),
            (miss, dict(censored="0"), "censored 0 contradicts its steps_to_bar (blank)"),
            (miss, dict(censored="0", steps_to_bar="20"), None),          # a hit: a censored
            (hit, dict(steps_to_bar="25"), "not a checked step"),         # run is duplicated
            (hit, dict(steps_to_bar="70"), "not a checked step"),
            (hit, dict(task="and"), "task and is not the folder's task parity"),
            (hit, dict(s="2"), "s 2 is not the folder's s 1"),
            (hit, dict(m="120"), "m 120 is not the folder's m 60"),
            (hit, dict(budget="100"), "budget 100 is not the folder's budget 60"),
            (hit, dict(every="20"), "every 20 is not the folder's every 10")]
    f = copy_folder(steps_ref, tmp_path / "f")
    for i, fields, msg in rows:
        edited = edit_row(lines[i], header, **fields)
        if msg is None:                                   # the same run, another outcome, twice
            (f / "steps.csv").write_text("".join(lines) + edited)
            msg, i = "opposite outcomes", len(lines)
        else:
            (f / "steps.csv").write_text("".join(lines[:i] + [edited] + lines[i + 1:]))
        for extra in (["--report"], []):
            code, _, err = run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f), *extra)
            one_line_refusal(code, err, msg, f"steps.csv line {i + 1}")
    (f / "steps.csv").write_text("".join(lines))
    meta = (steps_ref / "steps.json").read_text()
    for text, msg in [("[1, 2]", "holds no readable steps.json"),
                      (meta.replace('"budget": 60', '"budget": "x"'), "budget = 'x'"),
                      (meta.replace('"seeds": 3', '"seeds": true'), "seeds = True"),
                      (meta.replace('"Ts": [', '"Ts": [0, '), "Ts = "),
                      ("\xff\xfe binary", "holds no readable steps.json")]:
        (f / "steps.json").write_text(text, errors="surrogateescape")
        for extra in (["--report"], []):
            code, _, err = run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f), *extra)
            one_line_refusal(code, err, msg)
    (f / "steps.json").write_text(meta)
    for text in ("{", "[1]", '{"4|0": [1]}', '{"x": {"step": [], "test_acc": [], "loss": []}}',
                 '{"4|0": {"step": [1], "test_acc": [], "loss": []}}'):
        (f / "curves.json").write_text(text)
        for extra in (["--report"], []):
            code, _, err = run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f), *extra)
            one_line_refusal(code, err, "curves.json is not the curves steps.py writes")
    (f / "curves.json").write_bytes(b"\xff\x00\x01")
    code, _, err = run_cli(capsys, "steps", *STEPS_TINY, "--out", str(f))
    one_line_refusal(code, err, "curves.json")


def test_steps_and_reports_take_the_folders_one_lock(steps_ref, smoke_ref, tmp_path, capsys):
    """A steps.py run, a steps.py report and a sweep's report never write into a folder that
    another command holds: each stops at once, in one line naming the holder, changing nothing."""
    f = copy_folder(steps_ref, tmp_path / "steps")
    g = copy_folder(smoke_ref, tmp_path / "sweep")
    before = {p: p.read_bytes() for d in (f, g) for p in d.iterdir() if p.name != ".lock"}
    for d, argv in [(f, ["steps", *STEPS_TINY, "--out", str(f)]),
                    (f, ["steps", *STEPS_TINY, "--out", str(f), "--report"]),
                    (f, ["steps", *STEPS_TINY, "--Ts", "4,6,8", "--out", str(f)]),
                    (g, ["sweep", "--out", str(g), "--report"]),
                    (g, ["sweep", "--preset", "smoke", "--workers", "1", "--out", str(g)])]:
        held = folder_write.lock_folder(str(d), (1, 3))
        try:
            code, _, err = run_cli(capsys, *argv)
        finally:
            held.close()
        one_line_refusal(code, err, "is in use by another", "shard 1/3")
        assert {p: p.read_bytes() for dd in (f, g) for p in dd.iterdir()
                if p.name != ".lock"} == before, argv
    assert run_cli(capsys, "sweep", "--out", str(g), "--report")[0] == 0   # free again


def test_sizes_are_checked_before_anything_is_built(smoke_ref, tmp_path, capsys, monkeypatch):
    """--seeds 1000000000 (sweep, its report, steps.py) is one line naming --seeds before a list
    of searches is built; so is a grid too fine to build."""
    def built(*args, **kw):
        raise AssertionError("a list of searches was built before the sizes were checked")
    monkeypatch.setattr(sweep, "_run_searches", built)
    monkeypatch.setattr(folder, "missing_searches", built)
    monkeypatch.setattr(steps, "_run_all", built)
    f = copy_folder(smoke_ref, tmp_path / "f")
    for argv in (["sweep", "--preset", "smoke", "--workers", "1", "--out", str(tmp_path / "n"),
                  "--seeds", "1000000000"],
                 ["sweep", "--out", str(f), "--report", "--seeds", "1000000000"],
                 ["sweep", "--out", str(f), "--report", "--models", "transformer,mlp",
                  "--Ts", "8,16,32", "--seeds", "200000"],
                 ["steps", *STEPS_TINY, "--out", str(tmp_path / "s"), "--seeds", "1000000000"]):
        code, _, err = run_cli(capsys, *argv)
        one_line_refusal(code, err, f"--seeds {argv[-1]}")
    code, _, err = run_cli(capsys, "sweep", "--preset", "smoke", "--out", str(tmp_path / "g"),
                           "--grid-ratio", "1.0000001", "--grid-max", "1000000000")
    one_line_refusal(code, err, "m_grid", "sizes")
    assert not (tmp_path / "n").exists() and not (tmp_path / "g" / "runs.csv").exists()


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "steps.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over steps.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((steps,), WALK)
