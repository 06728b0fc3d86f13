"""test_families.py: the tests of studies/lib/families.py.

Run from the repository's root: python -m pytest -q
"""
import math
import os
import re

import numpy as np

from studies import sweep
from studies.lib import families, stats
from studies.conftest import COMMAND, run_cli, walk_modules
from test_all import HERE, Walk


def test_families_plot_series_hold_mstar_against_T_and_s(smoke_ref):
    _, by_family = families._families_table([str(smoke_ref)], log=lambda *_: None)
    (grid, cells, _, limits), = by_family.values()
    (c,) = families._mstar_series(by_family)                 # one family, two T, one s: no s series
    assert c["axis"] == "T" and c["label"] == "and s = 3" and c["x"] == [8, 16]
    assert c["mstar"] == [cells[T][1]["m_star"] for T in (8, 16)]
    assert all(lo <= m <= hi for lo, m, hi in zip(c["lo"], c["mstar"], c["hi"]))
    assert c["limit"] == [limits[T]["median"] for T in (8, 16)]
    st = dict(m_star=math.inf, m_star_lo=50.0, m_star_hi=math.inf)   # past the grid: at its end
    two_s = {("junta", 1): ([8, 16], {100: (None, dict(st, m_star=9.0, m_star_hi=9.0))}, "", {}),
             ("junta", 2): ([8, 16], {100: (None, st)}, "", {100: None})}
    (c,) = families._mstar_series(two_s)
    assert (c["axis"], c["label"], c["x"], c["mstar"], c["hi"], c["above"], c["open_hi"]) == (
        "s", "junta, T = 100", [1, 2], [9.0, 16], [9.0, 16], [False, True], [False, True])


def test_families_says_when_m50_is_not_located_rather_than_beyond_the_grid():
    grid = [8, 16, 32]
    e = lambda m50, b: dict(m50=m50, m50_lo=m50, m50_hi=m50, b=b)
    falls, beyond, fine = e(math.inf, -0.5), e(math.inf, None), e(20.0, 1.0)
    assert families._m50_text(falls) == "not located (success does not rise with m)"
    assert families._m50_text(beyond) == "inf [inf, inf]" and families._m50_text(fine) == "20 [20, 20]"
    assert families._m50_text(e(math.inf, 0.0)).startswith("not located")     # flat: not located
    line = families._growth_line("junta", 100, "m50", [(1, grid, fine), (2, grid, falls),
                                                       (3, grid, beyond)], "m50")
    assert "left out: s = 2 (m50 not located: pooled success does not rise with m); " \
           "3 (m50 above the largest m tried, 32)" in line


def test_families_table_puts_tasks_side_by_side_with_label_balance(smoke_ref, tmp_path, capsys):
    out = tmp_path / "families.md"
    assert sweep.main(["families", str(smoke_ref), "--out", str(out)]) == 0
    table = out.read_text()
    rows = [ln for ln in table.splitlines() if ln.startswith("| and | 3 |")]
    assert [ln.split(" | ")[2] for ln in rows] == ["8", "16"]
    balance = [float(ln.split(" | ")[8].split(" +- ")[0]) for ln in rows]
    assert all(abs(p - 0.5) < 0.02 for p in balance)          # data.py balances the labels
    assert "m50 and m* within the m tried at 2 T only (8, 16): no fit across T" in table   # 2 T: no law
    assert sweep.main(["families", str(smoke_ref), "--Ts", "16", "--seeds", "1", "--out",
                       str(out)]) == 0
    assert [ln.split(" | ")[2:4] for ln in out.read_text().splitlines()
            if ln.startswith("| and |")] == [["16", "1"]]
    code, _, err = run_cli(capsys, "sweep", "families", str(smoke_ref), str(smoke_ref))
    assert code == 2 and "both hold and with s = 3" in err and len(err.splitlines()) == 1
    p, se = families._label_balance("majority", 3, 20, n_seeds=2, n=500)
    assert abs(p - 0.5) < 5 * se + 1e-9 and 0 < se < 0.05


def test_families_fit_m50_across_s_and_name_the_s_left_out():
    """growth_lines on synthetic searches: m50 = 10 s^2 for s = 2..5 is fitted; s = 1 (every run
    succeeds) and s = 6 (m50 extrapolated past the grid) are named and left out."""
    rng, grid, by_family = np.random.default_rng(5), [5, 10, 20, 40, 80, 160, 320], {}
    for s in range(1, 7):
        rows = [dict(T=100, seed=seed, m=m, success=float(m >= crit)) for seed in range(12)
                for crit in [(1 if s == 1 else 10 * s ** 2) * np.exp(0.2 * rng.standard_normal())]
                for m in grid]
        m_star = 10.0 * s ** 2                   # the m* line: exactly 10 s^2, 360 past the grid
        entry = dict(m_star=m_star, m_star_boot=np.full(50, m_star))
        by_family[("and", s)] = (grid, {100: (stats.success_estimates(rows), entry, rows)}, "f")
    by_family[("or", 3)] = by_family[("and", 3)]                    # one s only: no line
    line, line_mstar = families._growth_lines(by_family)
    assert line_mstar.startswith("and at T = 100, m* across s = 1, 2, 3, 4, 5 (left out: s = 6 "
                                 "(m* above the largest m tried, 320)): m* ~ a s^k, k = 2.00 "
                                 "[2.00, 2.00]")
    assert line.startswith("and at T = 100, m50 across s = 2, 3, 4, 5 (left out: s = 1 (m50 "
                           "below the smallest m tried, 5); 6 (m50 above the largest m tried, "
                           "320)): m50 ~ a s^k, k = ")
    k, lo, hi = map(float, re.match(r".*k = ([\d.]+) \[([\d.]+), ([\d.]+)\]", line).groups())
    assert lo <= 2 <= hi and abs(k - 2) < 0.3


def test_an_mstar_interval_open_at_the_grid_says_how_often_it_leaves_it():
    grid = [8, 10, 580]
    st = lambda m, lo, hi, above: dict(m_star=m, m_star_lo=lo, m_star_hi=hi, m_star_above=above)
    cells = {30: (None, st(10, 8, 10, 0.0), None),                          # inside: no line
             1000: (None, st(580, 10, math.inf, 0.25), None),
             3000: (None, st(math.inf, 580, math.inf, 1.0), None)}          # off the grid
    (line,) = families._grid_edge_lines({("junta", 3): (grid, cells, "f", {})})
    assert line == ("junta s = 3, T = 1000: m* = 580, the largest m tried, so a growth to it is a "
                    "lower bound; m* lies above the largest m tried (580) with bootstrap "
                    "probability 0.250")
    # the 3-junta at T = 1000: 9 of 20 seeds never succeed, so m* (the 10th smallest critical m)
    # is above the grid exactly when fewer than 10 of 20 draws are among the 11 that succeed
    p = sum(math.comb(20, j) * 0.55 ** j * 0.45 ** (20 - j) for j in range(10))
    fam = open(os.path.join(HERE, "results/families/families.md")).read()
    assert f"junta s = 3, T = 1000: m* = 580, the largest m tried" in fam
    assert f"with bootstrap probability {p:.3f}" in fam and f"{p:.3f}" == "0.249"


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # families.py, report.py's commands, sweep.py, steps.py
    "families.families_command": Walk(lambda f: dict(a=None, fail=None), run=False,
                                      legal=dict(a={"*": COMMAND}, fail={"*": COMMAND})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over families.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((families,), WALK)
