"""test_limits.py: the tests of studies/lib/limits.py.

Run from the repository's root: python -m pytest -q
"""
import json
import math

import numpy as np
import pytest

from studies import sweep
from studies.lib import hypotheses, limits, stats
from studies.conftest import COMMAND, copy_folder, smoke_sweep, run_cli, walk_modules
from test_all import Walk


def test_a_junta_sweep_reports_without_enumerating_its_limit(tmp_path, monkeypatch):
    """A sweep's own report never starts the enumeration that counts a junta's (or majority's)
    hypotheses: at T = 1000 it ran for more than ten minutes after the runs had finished."""
    def never(*a, **k):
        raise AssertionError("the limit was enumerated")
    monkeypatch.setattr(hypotheses, "first_identifying_m", never)
    assert smoke_sweep(tmp_path / "j", "--task", "junta", "--s", "4", "--Ts", "16", "--seeds", "1",
                  "--steps", "10") == 0                        # C(16, 4) = 1820 supports
    assert "statistical limit not computed at T = 16: for junta" in (tmp_path / "j" /
                                                                     "table.md").read_text()
    monkeypatch.undo()                                         # C(8, 1) = 8: counted, quickly
    lim = limits.statistical_limits("junta", 1, [8], compute=False)
    assert set(lim) == {8} and 1 <= lim[8]["median"] <= 8


def test_limit_command_writes_a_table_and_json(tmp_path, capsys):
    assert sweep.main(["limit", "--Ts", "10,40", "--ms", "5,30", "--seeds", "8", "--sets", "20",
                       "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "limit.json").read_text())["rows"]
    assert [r["T"] for r in rows] == [10, 40]
    assert all(r["q05"] <= r["median"] <= r["q95"] for r in rows)
    assert rows[0]["p_ambiguous"]["5"] >= rows[0]["p_ambiguous"]["30"]
    code, _, err = run_cli(capsys, "sweep", "limit", "--Ts", "2", "--s", "3")
    assert code == 2 and "larger than the smallest T" in err


def test_m_grid_and_limit_caches_refuse_impossible_values(smoke_ref, tmp_path, monkeypatch):
    """stats.m_grid refuses complex, bool, inf and nan in one line; a limits.json entry that is
    no number of samples (99999 [0, 1e300], a fraction, beyond the search) is computed again, not
    shown, and a cache that is not a readable text file is not read."""
    for args in [(8, 600, 1j), (True, 600), (8, True), (np.bool_(True), 600), (8, math.inf),
                 (8, 600, math.inf), (8, 600, math.nan), (8, 600, 1), (8, 600, True), (8.5, 600),
                 (0, 600), (600, 8), ("8", 600)]:
        with pytest.raises(ValueError, match="^m_grid: .* got "):
            stats.m_grid(*args)
    assert stats.m_grid(np.int64(8), 13, np.float32(1.5)) == [8, 12]
    f = copy_folder(smoke_ref, tmp_path / "f")
    ref_table, cached = (smoke_ref / "table.md").read_text(), json.loads(
        (smoke_ref / "limits.json").read_text())
    for bad in (dict(median=99999, q05=0, q95=1e300), dict(median=7.5, q05=3, q95=9),
                dict(median=7, q05=3, q95=200000), dict(median=7, q05=0, q95=9)):
        assert limits._cached_limit(dict(bad, n_seeds=200), 200, 16, 3) is None, bad
    assert limits._cached_limit(dict(median=7, q05=3, q95=None, n_seeds=200), 200, 16, 3) == \
        dict(median=7.0, q05=3.0, q95=math.inf, n_seeds=200)
    assert limits._cached_limit(dict(median=0, q05=0, q95=0, n_seeds=200), 200, 3, 3)  # T = s
    (f / "limits.json").write_text(json.dumps({k: dict(v, median=99999, q05=0, q95=1e300)
                                               for k, v in cached.items()}))
    monkeypatch.setattr(limits, "_LIMITS", {})
    assert smoke_sweep(f, "--report") == 0 and "99999" not in (f / "table.md").read_text()
    assert (f / "table.md").read_text() == ref_table
    assert json.loads((f / "limits.json").read_text()) == cached


def test_limit_cache_not_finite_or_huge_is_computed_again_with_a_warning(smoke_ref, tmp_path,
                                                                          monkeypatch, capsys):
    """A limits.json entry holding -Infinity, Infinity or NaN (which strict JSON never writes: inf
    is null) or a 400-digit integer is no limit: one warning line, computed again, never shown as
    'inf [inf, inf]' and never an OverflowError."""
    for v in (-math.inf, math.inf, math.nan, 10 ** 400, -10 ** 400):
        assert limits._cached_limit(dict(median=v, q05=3, q95=None, n_seeds=200), 200, 16, 3) \
            is None, v
    f = copy_folder(smoke_ref, tmp_path / "f")
    ref_table, cached = (smoke_ref / "table.md").read_text(), json.loads(
        (smoke_ref / "limits.json").read_text())
    for bad in ('-Infinity', 'NaN', '9' * 400):
        text = json.dumps({k: dict(v, median=0, q05=0, q95=0) for k, v in cached.items()})
        (f / "limits.json").write_text(text.replace('"median": 0, "q05": 0, "q95": 0',
                                                    f'"median": {bad}, "q05": {bad}, "q95": {bad}'))
        monkeypatch.setattr(limits, "_LIMITS", {})
        capsys.readouterr()
        assert smoke_sweep(f, "--report") == 0, bad
        out = capsys.readouterr().out
        warned = [line for line in out.splitlines() if line.startswith("warning: the cache")]
        assert len(warned) == len(cached) and "computed again" in warned[0], out
        assert (f / "table.md").read_text() == ref_table and "inf [inf" not in ref_table
        assert json.loads((f / "limits.json").read_text()) == cached


def test_a_damaged_limits_cache_is_set_aside_with_one_warning_and_not_replaced(tmp_path, capsys):
    cache = tmp_path / "limits.json"
    for text in ("", "\x00\x01 not json", "[1, 2]"):
        cache.write_text(text)
        got = limits.statistical_limits("and", 3, [8], n_seeds=2, cache=str(cache))
        out = capsys.readouterr().out
        assert [ln for ln in out.splitlines() if ln.startswith("warning:") and str(cache) in ln]
        assert got[8]["median"] >= 1 and cache.read_text() == text


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # report.py
    "limits.statistical_limits": Walk(lambda f: dict(task="and", s=3, Ts=[10], n_seeds=5,
                                                     cache=None, compute=True),
                                      legal=dict(Ts={"[5]": "a T: its limit"}),
                                      names=dict(Ts=r"\bTs\b|\bT\b")),
    "limits.limit_text": Walk(lambda f: dict(lim=dict(median=30.0, q05=20.0, q95=40.0,
                                                      n_seeds=5)),
                              legal=dict(lim={"None": "no limit: no text"})),
    "limits.limit_command": Walk(lambda f: dict(a=None, fail=None), run=False,
                                 legal=dict(a={"*": COMMAND}, fail={"*": COMMAND})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over limits.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((limits,), WALK)
