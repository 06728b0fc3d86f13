"""test_replay.py: the tests of studies/replay.py.

Run from the repository's root: python -m pytest -q
"""
import json

import pytest

from studies import replay
from studies.lib import arithmetic, provenance
from studies.conftest import ARGV, copy_folder, run_cli_main, walk_modules
from test_all import Walk


def test_a_new_folder_records_its_arithmetic_and_replays_bit_for_bit(tmp_path, smoke_ref):
    """Issue 46: sweep.json's machines record the BLAS library, its kernel, threads, numpy,
    Python, the CPU and the dtype (arithmetic.record); studies.replay draws rows spread over the
    folder's cells, trains them again through the sweep's own worker and finds every recorded
    column equal; a row whose last digit is changed is named, with its column."""
    meta = json.loads((smoke_ref / "sweep.json").read_text())
    here = arithmetic.record(meta["options"]["dtype"])
    assert {k: meta["machines"][-1][k] for k in arithmetic.DECIDING} == {
        k: here[k] for k in arithmetic.DECIDING}
    assert provenance.recorded_arithmetic(str(smoke_ref), meta)["kernel"] == here["kernel"]
    res = replay.replay(str(smoke_ref), n_rows=3, log=None)
    assert len(res["rows"]) == 3 and all(d is None for _, d, _ in res["rows"]), res["rows"]
    assert len({(r["model"], r["T"]) for r, _, _ in res["rows"]}) == 2      # spread over cells
    line = replay.summary(str(smoke_ref), res)
    assert "3 of 3 rows replay bit for bit" in line and here["kernel"] in line
    f = copy_folder(smoke_ref, tmp_path / "f")
    row = res["rows"][0][0]
    n = int(row["line"].rsplit(" ", 1)[1])
    lines = (f / "runs.csv").read_text().splitlines(keepends=True)
    header = lines[0].strip().split(",")
    cells = lines[n - 1].rstrip("\r\n").split(",")
    i = header.index("attn_on_S")
    cells[i] = repr(float(cells[i]) + 1e-9)
    lines[n - 1] = ",".join(cells) + "\r\n"
    (f / "runs.csv").write_text("".join(lines))
    bad = replay.replay(str(f), n_rows=3, log=None)
    diffs = [d for _, d, _ in bad["rows"] if d is not None]
    assert len(diffs) == 1 and diffs[0][0] == "attn_on_S" and abs(diffs[0][3] + 1e-9) < 1e-12
    assert "first difference" in replay.summary(str(f), bad) and "attn_on_S" in \
        replay.summary(str(f), bad)


def test_a_folder_replays_under_the_kernel_it_records(tmp_path, smoke_ref):
    """A folder made under another kernel this processor can run (its sweep.json's machine says
    so) is trained again under that kernel, without --kernel; OWN keeps this machine's own."""
    here = arithmetic.record("float32")["kernel"]
    other = next((k for k in ("Haswell", "Sandybridge", "Nehalem") if k != here
                  and k in arithmetic.kernels_here()), None)
    if other is None:
        pytest.skip("this processor runs no second OpenBLAS kernel")
    f = copy_folder(smoke_ref, tmp_path / "f")
    meta = json.loads((f / "sweep.json").read_text())
    meta["machines"][-1]["kernel"] = other
    (f / "sweep.json").write_text(json.dumps(meta))
    assert replay.folder_kernel(str(f), meta) == other
    res = replay.replay(str(f), n_rows=1, log=None)
    assert res["arithmetic"]["kernel"] == other and res["recorded"]["kernel"] == other
    assert replay.replay(str(f), n_rows=1, kernel=replay.OWN, log=None)["arithmetic"][
        "kernel"] == here


def test_a_steps_folder_with_censored_runs_replays(steps_ref):
    """steps.csv's censored rows (steps_to_bar blank, read as None) replay as the hits do."""
    res = replay.replay(str(steps_ref), n_rows=6, log=None)
    assert any(r["steps_to_bar"] is None for r, _, _ in res["rows"])          # one is censored
    assert all(d is None for _, d, _ in res["rows"]), res["rows"]


def test_replay_refuses_what_it_cannot_do_in_one_line(tmp_path, capsys):
    """Not a study folder, or a kernel this processor cannot run (it would crash it): one line,
    exit 2, nothing trained."""
    code, out, err = run_cli_main(capsys, replay.main, [str(tmp_path)])
    assert code == 2 and "not a folder the studies write" in err
    missing = [k for k in sorted(arithmetic.KERNEL_FLAGS) if k not in arithmetic.kernels_here()]
    if missing:
        code, out, err = run_cli_main(capsys, replay.main, [str(tmp_path), "--kernel",
                                                            missing[0]])
        assert code == 2 and "cannot run on this processor" in err


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "replay.folder_kind": Walk(lambda f: dict(out="results/extended"),
                               legal=dict(out={"'bogus'": "refused: no folder"})),
    "replay.folder_kernel": Walk(lambda f: dict(out="results/extended", meta={}),
                                 legal=dict(out={"'bogus'": "a folder recording nothing: None"},
                                            meta={"missing key": "no machines: none recorded"})),
    "replay.replay": Walk(lambda f: dict(out="results/extended", n_rows=1, seed=0, kernel=None,
                                         workers=1, cheap=True, log=None), run=False,
                          legal=dict(n_rows={"10**12": "refused"}, seed={"10**12": "a seed", "0": "seed 0"},
                                     out={"'bogus'": "refused: no folder"})),
    "replay.summary": Walk(lambda f: dict(out="results/extended", res=dict(
        kind="sweep", rows=[], arithmetic=arithmetic.record("float32"), recorded=None)),
                           legal=dict(out={"'bogus'": "a name in the line"},
                                      res={"missing key": "refused"})),
    "replay.find": Walk(lambda f: dict(out="results/extended", n_rows=1, seed=0, workers=1,
                                       log=None), run=False,
                        legal=dict(n_rows={"10**12": "refused"}, seed={"10**12": "a seed", "0": "seed 0"},
                                   out={"'bogus'": "refused: no folder"})),
    "replay.findings_table": Walk(lambda f: dict(folders=["results/extended"]),
                                  legal=dict(folders={"'--x'": "refused"})),
    "replay.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over replay.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((replay,), WALK)
