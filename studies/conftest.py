"""conftest.py: what the studies' test files share (pytest loads it for every test below studies/).

The fixtures (a smoke sweep, at d = 64 and at 128, a steps folder and a class-ball sweep made once
per session, the walker's scratch folder, fewer bootstrap resamples), a command run in this
process and its one-line refusals, a test's processes run side by side, folders, models and rows
made by hand with known answers, and the walker over a studies module (walk_modules, on
test_all.py's machinery). Each module's own tests sit beside it (studies/test_<command>.py,
studies/lib/test_<module>.py); the damage suite is test_damage.py.
"""
# First, before numpy is imported: the suite's BLAS on one thread, as every command's (unless the
# environment says otherwise). The training steps' matrices are small, and while another process
# kept the other core busy numpy's default two threads made a test's run up to 25 times slower
# (test_learns_sparse_and_small_T: 0.3 s alone, 7.4 s so). pytest loads this file before
# test_all.py, so the root's tests run on one thread too.
from studies.lib import cli
cli.set_blas_threads()

import glob  # noqa: E402  (after the threads, as in cli.py)
import json
import math
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

import attn
import test_all
from studies import bench, mechanism, steps, sweep, symmetries, trainer
from studies.lib import baseline, failures, folder, folder_write, intervals, row_kinds


# ---------------- the fixtures: folders made once per session ------------------------------------

@pytest.fixture(scope="session")
def smoke_ref(tmp_path_factory):
    """The smoke sweep, run once for the session: tests read it, or copy it (copy_folder) to
    change it."""
    out = tmp_path_factory.mktemp("smoke-ref")
    assert smoke_sweep(out) == 0
    return out


@pytest.fixture(scope="session")
def wide_ref(tmp_path_factory):
    """The smoke sweep at d = 128 on one seed, run once: headline's --d128 (its --d64 is
    smoke_ref). Given explicitly, never the committed results/width/d-128, whose T the smoke
    folder's limits.json does not hold: headline would compute their statistical limits (8 s)."""
    out = tmp_path_factory.mktemp("wide-ref")
    assert smoke_sweep(out, "--d", "128", "--seeds", "1") == 0
    return out


@pytest.fixture(scope="session")
def steps_ref(tmp_path_factory):
    """A finished steps.py folder (s = 1 parity, T = 4 and 6, 3 seeds: hits and a censored run)."""
    out = tmp_path_factory.mktemp("steps-ref")
    assert steps.main(STEPS_TINY + ["--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def ball_ref(tmp_path_factory):
    """The smoke sweep inside a class ball (every norm held), on one seed, run once: classball's
    input beside smoke_ref (its seed 0 set beside the study's; both T, so G(T) has a ratio)."""
    out = tmp_path_factory.mktemp("ball-ref")
    assert smoke_sweep(out, "--ball-qk", "0.05", "--ball-vo", "0.05", "--ball-w", "0.5",
                       "--ball-mlp", "0.05", "--seeds", "1") == 0
    return out


@pytest.fixture(scope="session")
def walk_tmp(tmp_path_factory):
    """A study, a trajectories folder and room for outputs, made once for the studies' walks."""
    root = tmp_path_factory.mktemp("walk45")
    for name in ("study", "study2", "study3"):        # commands that take several: each once
        synthetic_study(str(root / name))
    synthetic_trace(str(root / "trace"))
    WALK_TMP[:] = [str(root)]
    yield str(root)
    WALK_TMP[:] = []


WALK_TMP = []          # the walker's scratch folder (walk_tmp): outputs and folders by hand


def walk_path(*parts):
    return os.path.join(WALK_TMP[0], *parts)


FEWER = 2000           # the resamples a report draws in the tests (fewer_resamples)


@pytest.fixture(scope="session", autouse=True)
def fewer_resamples():
    """Reports in the tests draw 2,000 bootstrap resamples, not intervals.N_BOOT (100,000), nor
    the 20,000 of failures.CELL_BOOT (mechanism's factors, paired, trace-report) and of
    symmetries.N_BOOT: the tests check what a report computes and prints, which does not depend
    on how many resamples it draws, and the shipped numbers would make the suite 2.5 times
    slower. The tests of the Monte Carlo rule (intervals.mc_decimals) pass their own numbers of
    resamples; a test that compares a report with a committed table takes shipped_resamples.
    -> {(module, name): the shipped number}."""
    shipped = {(m, name): getattr(m, name) for m, name in RESAMPLES}
    for m, name in RESAMPLES:
        setattr(m, name, FEWER)
    yield shipped
    for (m, name), v in shipped.items():
        setattr(m, name, v)


RESAMPLES = ((intervals, "N_BOOT"), (failures, "CELL_BOOT"), (symmetries, "N_BOOT"))


@pytest.fixture
def shipped_resamples(fewer_resamples, monkeypatch):
    """The shipped numbers of resamples for one test: a report it compares, to the byte, with a
    table committed under results/ draws what the command draws."""
    for (m, name), v in fewer_resamples.items():
        monkeypatch.setattr(m, name, v)


# ---------------- a command run in this process, and its refusals --------------------------------

def run_cli(capsys, *argv):
    capsys.readouterr()
    main = trainer.main
    if argv and argv[0] == "sweep":
        main, argv = sweep.main, argv[1:]
    elif argv and argv[0] == "bench":
        main, argv = bench.main, argv[1:]
    elif argv and argv[0] == "steps":
        main, argv = steps.main, argv[1:]
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def run_cli_main(capsys, main, argv):
    """(exit code, stdout, stderr) of main(argv) as the command line runs it (cli.one_line_errors)."""
    capsys.readouterr()
    try:
        code = cli.one_line_errors("main", main, list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def smoke_sweep(out, *extra):
    return sweep.main(["--preset", "smoke", "--workers", "1", "--out", str(out),
                       *extra])


def sweep_refused(folder_path, capsys, *extra):
    """The one line (exit 2) a sweep or report of the folder stops with."""
    with pytest.raises(SystemExit, match="^2$"):
        smoke_sweep(folder_path, *extra)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def one_line_refusal(code, err, *words):
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def study_refused(code, err, *words):
    """A study command's refusal: exit 1, one line on stderr holding every word, no traceback."""
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), (words, err)


def command_name(path):
    """The name a command goes by in its messages: train.py, or studies.sweep for studies/sweep.py."""
    return path[:-3].replace("/", ".") if "/" in path else path


STEPS_TINY = ["--task", "parity", "--s", "1", "--Ts", "4,6", "--seeds", "3", "--budget", "60",
              "--every", "10", "--d", "8", "--heads", "2", "--mlp", "4", "--workers", "1",
              "--n-test", "100", "--m", "60", "--stack", "3", "--lr", "0.01"]


STUDIES = os.path.dirname(os.path.abspath(__file__))


def study_commands():
    """Every module of studies/ that is a command (holds `if __name__ == "__main__":` at its top
    level), by name: a new command joins the tests below by being written, not by being listed."""
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(STUDIES, "*.py"))
                  if re.search(r'^if __name__ == "__main__":', open(p).read(), re.M)
                  and not os.path.basename(p).startswith("test_"))


# ---------------- folders and files made by hand -------------------------------------------------

def copy_folder(folder, dest):
    shutil.copytree(folder, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".lock"))
    return dest


def snapshot(*folders):
    """Every file's bytes and every folder (None) below `folders`, a lock file (.lock) too: a
    command that refused leaves nothing behind, not even its lock."""
    return {str(p): p.read_bytes() if p.is_file() else None for f in folders
            for p in sorted(f.rglob("*")) if p.is_file() or p.is_dir()}


def edit_row(line, header, **fields):
    cells = line.rstrip("\r\n").split(",")
    for k, v in fields.items():
        cells[header.index(k)] = v
    return ",".join(cells) + "\r\n"


def edit_plan(change):
    def damage(f):
        plan = json.loads((f / "plan.json").read_text())
        change(plan)
        (f / "plan.json").write_text(json.dumps(plan))
    return damage


def tiny_plan(out, seeds=2, steps=20, **extra):
    o = dict(folder.full_options({}), d=8, heads=2, mlp=8, steps=steps, n_test=100)
    plan = dict(seeds=seeds, bar=0.99, cells=[dict(design="fixed", d=8, T=8, m=16, options=o,
                                                   source=dict(m_star=8, T_folder=8))], **extra)
    os.makedirs(out, exist_ok=True)
    cli.write_json(os.path.join(out, "plan.json"), plan)


def synthetic_study(out, small=False):
    """A folder of made-up rows: at the borderline m of T = 10 and 100 every failure has the
    larger C (4 vs 1); at T = 1000 C does not tell (all 2); at the fixed m, C = 10 + 3 ln T
    exactly and one run reached the bar at a logged step but ended below it. small: its plan
    trains d = 8 for 20 steps (a command that trains a run again does it in a moment)."""
    d, options = (8, dict(d=8, heads=2, mlp=8, steps=20, n_test=100)) if small else (64, {})
    cells, rows = [], []
    base = dict(train_acc=1.0, final_loss=0.01, min_loss=0.001, loss_jump=0.01, B_X=8.0,
                score_scale=5.0, norm_V=1.0, norm_O=1.0, top_head=0, mass_on_S=0.9,
                score_gap=4.0, heads_on_S=1, top_score_scale=5.0, top_norm_V=1.0,
                top_norm_O=1.0, attn_on_S=0.2, model="transformer", task="and", s=3,
                steps=options.get("steps", 1000), seconds=1.0, cpu_seconds=1.0)
    for design, T, m in (("borderline", 10, 20), ("borderline", 100, 50),
                         ("borderline", 1000, 60), ("fixed", 10, 40), ("fixed", 100, 100),
                         ("fixed", 1000, 120)):
        cells.append(dict(design=design, d=d, T=T, m=m, options=options, source={}))
        for seed in range(12):
            ok = seed % 2 if design == "borderline" else 1
            C = (2.0 if T == 1000 else 4.0 - 3 * ok) if design == "borderline" else \
                10 + 3 * math.log(T)
            acc = best = 1.0 if ok else 0.8
            if (design, T, seed) == ("fixed", 100, 0):
                acc = 0.95                                 # the bar reached, then lost
            rows.append(dict(base, design=design, d=d, T=T, m=m, seed=seed,
                             success=int(acc >= 0.99), test_acc=acc, best_test_acc=best,
                             best_step=base["steps"] // 2, covering_constant=C))
    os.makedirs(out, exist_ok=True)
    cli.write_json(os.path.join(out, "plan.json"), dict(seeds=12, bar=0.99, cells=cells))
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        import csv
        w = csv.DictWriter(f, fieldnames=mechanism.FIELDS)
        w.writeheader()
        w.writerows(rows)


def synthetic_trace(out, seeds=8, source=False):
    """A trajectories folder by hand: seeds 0-3 succeed, 4-7 fail; the failures' B_X splits from
    step 50, their test accuracy from step 100 (B_X's split comes before). With `source`, where
    B_X comes from: the failures' LN1 gain RMS larger from step 50 (1.2 against 1.0), the shift
    norm 0.1 in every run, B_X's token a bit 1 at position 2 (in S, {0, 1, 2}) in every
    failure, [CLS] in every success; without, the columns are left empty (an older file)."""
    tiny_plan(out, seeds=seeds, steps=200, every=50)
    w = folder_write.RowWriter(os.path.join(out, "trajectories.csv"), row_kinds.TRAJECTORY_ROWS)
    for seed in range(seeds):
        ok = seed < seeds // 2
        for step in (1, 50, 100, 150, 200):
            w.write(dict(design="fixed", d=8, T=8, m=16, seed=seed, step=step,
                         B_X=5.0 if ok or step == 1 else 6.0 + 0.1 * seed, score_gap=0.0,
                         mass_on_S=0.3, top_head=0, train_loss=0.1,
                         test_acc=0.875 if step < 100 else 1.0 if ok else 0.9,
                         success=int(ok), final_test_acc=1.0 if ok else 0.9, steps=200,
                         cpu_seconds=1.0, **(dict(
                             ln1_gain_rms=1.0 if ok or step == 1 else 1.2, ln1_shift_norm=0.1,
                             B_X_token="cls" if ok else "bit1", B_X_position=-1 if ok else 2,
                             B_X_in_S=int(not ok)) if source else {})))
    w.close()


# ---------------- models and rows with known answers ---------------------------------------------

def two_head_model(R=5.0, T=6, S=(1, 3)):
    """d = 4, 2 heads, no LayerNorm. Head 0: W_QK = R e_CLS e_0^T (the [CLS] query reads
    coordinate 3, the keys coordinate 0, which is 1 exactly on S): score R on S, 0 elsewhere.
    Head 1: all zero, uniform attention. The bit sits in coordinate 2, which no key reads."""
    cfg = attn.default_config(T=T, d=4, heads=2, mlp=0, ln=False, dtype="float64")
    p = attn.init_params(cfg, np.random.default_rng(0), std=0.0)
    p["E_pos"][list(S), 0] = 1.0
    p["E_tok"][1, 2] = 1.0
    p["cls"][3] = 1.0
    p["W_Q"][3, 0] = 2.0
    p["W_K"][0, 0] = R * math.sqrt(2) / 2.0           # undoes attn.py's 1/sqrt(e), e = 2
    p["W_V"][:] = np.eye(4)
    p["W_O"][:] = 2 * np.eye(4)
    p["w"][0] = 1.0
    return p, cfg


SYM_OPTS = dict(T=12, m=80, steps=40, n_test=100, seed=5, d=16, heads=4, mlp=8, dtype="float64",
                log_every=0)


WALK_GRID = [8, 12, 16, 24, 32]


def stats_rows(T=10, model=None):
    """Runs of 6 seeds at one T over WALK_GRID (one non-monotone seed): the stats walk's rows."""
    thr = [12, 16, 16, 24, 12, 32]
    return [dict(T=T, seed=s, m=m, success=int(m >= t and (s, m) != (2, 24)),
                 **({"model": model} if model else {}))
            for s, t in enumerate(thr) for m in WALK_GRID]


def curve_data(n=4):  # (x, m50, m50_boot) of a curve over n values
    x = np.array([10.0, 20.0, 40.0, 80.0][:n])
    m50 = 5 * np.log(x) + 3
    return x, m50, m50[:, None] * np.linspace(0.9, 1.1, 7)


def seed_rows(rng_seed, T=100):
    """Runs of 12 seeds at six m each, seed i succeeding from a log-normal critical m on."""
    rng = np.random.default_rng(rng_seed)
    return [dict(T=T, seed=seed, m=m, success=float(m >= crit))
            for seed, crit in enumerate(40 * np.exp(0.4 * rng.standard_normal(12)))
            for m in (20, 30, 45, 60, 90, 130)]


# ---------------- processes ----------------------------------------------------------------------

SIDE_BY_SIDE = 4        # processes of one test in flight at once (run_side_by_side)


def run_side_by_side(runs, timeout=60):
    """subprocess.run(args, capture_output=True, text=True, **kw) for each (args, kw) of `runs`,
    up to SIDE_BY_SIDE of them running at once: a test's independent runs on the machine's cores
    instead of one after the other. -> [(CompletedProcess, seconds from its start until it was
    collected)], in the order given; the seconds are at least the run's own. A run still going
    when one fails or times out is killed."""
    out, going = [], []

    def collect():
        args, p, t = going[0]
        stdout, stderr = p.communicate(timeout=timeout)
        going.pop(0)
        out.append((subprocess.CompletedProcess(args, p.returncode, stdout, stderr),
                    time.time() - t))
    try:
        for args, kw in runs:
            if len(going) == SIDE_BY_SIDE:
                collect()
            going.append((args, subprocess.Popen(args, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True, **kw),
                          time.time()))
        while going:
            collect()
    finally:
        for _, p, _ in going:
            if p.poll() is None:
                p.kill()
            p.communicate()
    return out


def parent_pid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ---------------- the walker over a studies module (test_all.py's machinery) ---------------------

def studies_walk_fixtures():
    """test_all's walk fixtures, and the studies' own: pb, a baseline MLP's parameters."""
    f = test_all.walk_fixtures()
    return dict(f, pb=baseline.init(4, 3, f["rng"], "float64"))


def walk_modules(modules, table, exempt=None, least=0, huge=True):
    """The walker of test_all.py over studies modules: every public function of `modules` has an
    entry in `table` (or in `exempt`, with the reason), no entry names a function that is gone,
    and each refuses every hostile value (huge: 10**400 among the numbers) in one line naming
    the argument; at least `least` hostile calls made."""
    public = {k: v for m in modules for k, v in test_all.public_functions(m).items()}
    missing = set(public) - set(table) - set(exempt or {})
    assert not missing, f"public functions without a WALK entry: {sorted(missing)}"
    stale = set(table) - set(public)
    assert not stale, f"WALK entries of no public function: {sorted(stale)}"
    test_all.assert_walked(public, table, least - 1, fixtures=studies_walk_fixtures, huge=huge)


NAN = float("nan")


SEEDS = dict.fromkeys(("0", "10**12", "10**400"), "a seed: numpy's SeedSequence takes any int >= 0")


# what intervals.surely_above and surely_below take as it is: any bound and any threshold
SURELY_BOUND_LEGAL = {"nan": "an undefined bound excludes nothing", "inf": "a bound",
                      "-inf": "a bound", "-1": "a bound", "0": "a bound", "10**12": "a bound"}


NEW_FILE = {"'bogus'": "a new file's name: it is written (in the working folder)"}


ARGV = {"None": "the command line (sys.argv)"}


COMMAND = "a parsed command line, every value checked by its parser, and the command's way out"
