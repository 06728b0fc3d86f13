"""test_laws.py: the tests of studies/lib/laws.py.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np
import pytest

import theory
from studies.lib import laws, stats
from studies.conftest import curve_data, stats_rows, walk_modules
from test_all import ARRAY_LIKE, Walk


T_GRID = np.array([10.0, 20, 50, 100, 200, 500, 1000])


def _scaling_data(truth, sd, B=1000, seed=0):
    rng = np.random.default_rng(seed)
    point = truth + sd * rng.standard_normal(truth.size)
    return point, point[:, None] + sd * rng.standard_normal((truth.size, B))


def _estimate(T=10):
    return stats.success_estimates(stats_rows(T), n_boot=50)


def test_fit_line_recovers_a_line():
    x = np.linspace(0.0, 5.0, 11)
    a, b, r2 = theory.fit_line(x, 2.5 * x - 1.0)
    assert abs(a - 2.5) < 1e-12 and abs(b + 1.0) < 1e-12 and abs(r2 - 1.0) < 1e-12
    b, a, r2 = theory.fit_line([1, 2, 3], [3, 5, 7])                   # (slope, intercept, R^2)
    assert abs(a - 1) < 1e-12 and abs(b - 2) < 1e-12 and abs(r2 - 1) < 1e-12
    assert theory.fit_line(x, np.sin(7 * x))[2] < 0.5                  # not a line: low R^2


def test_scaling_log_data_recovers_b_and_log_wins_aic():
    point, boot = _scaling_data(30 + 40 * np.log(T_GRID), sd=5.0)
    f = laws.scaling_fits(T_GRID, point, boot)
    assert f["log_b_lo"] <= 40 <= f["log_b_hi"] and abs(f["log_b"] - 40) < 5
    assert f["daic"] < 0 and f["daic_hi"] < 0 and f["p_log_better"] > 0.95
    assert f["n_dropped"] == 0 and f["n_boot"] == 1000 and f["log_r2"] > 0.99


def test_scaling_linear_data_linear_wins_aic():
    point, boot = _scaling_data(50 + 0.5 * T_GRID, sd=5.0)
    f = laws.scaling_fits(T_GRID, point, boot)
    assert f["lin_b_lo"] <= 0.5 <= f["lin_b_hi"]
    assert f["daic"] > 0 and f["daic_lo"] > 0 and f["p_log_better"] < 0.05


def test_scaling_power_law_exact_and_dropped_replicates():
    y = 3.0 * T_GRID ** 0.5
    boot = np.repeat(y[:, None], 50, 1)
    boot[2, :17] = np.inf
    boot[4, 17:20] = 0.0
    boot[3, 20] = 1e200                      # finite, but its squares overflow: no usable fit
    f = laws.scaling_fits(T_GRID, y, boot)
    assert f["n_dropped"] == 21 and f["pow_k"] == pytest.approx(0.5)
    assert f["pow_a"] == pytest.approx(3.0)
    assert (f["pow_k_lo"], f["pow_k_hi"]) == (-math.inf, math.inf)   # 21 of 50 count against both
    boot = np.repeat(y[:, None], 1000, 1)
    boot[2, :24] = np.inf                    # under 2.5% dropped: the bounds are the fits'
    f = laws.scaling_fits(T_GRID, y, boot)
    assert f["n_dropped"] == 24 and f["pow_k_lo"] == pytest.approx(0.5) == f["pow_k_hi"]
    boot[2, :26] = np.inf                    # past 2.5%: both bounds open
    f = laws.scaling_fits(T_GRID, y, boot)
    assert (f["pow_k_lo"], f["pow_k_hi"]) == (-math.inf, math.inf)
    all_bad = np.full((T_GRID.size, 5), np.inf)
    f = laws.scaling_fits(T_GRID, y, all_bad)
    assert f["n_dropped"] == 5 and f["p_log_better"] is None
    assert (f["log_b_lo"], f["log_b_hi"]) == (-math.inf, math.inf)


def test_log_departure_finds_where_a_curve_leaves_its_small_T_log_law():
    T = np.array([10, 30, 100, 300, 1000, 3000])
    on_law = 20 + 10 * np.log(T)
    rng = np.random.default_rng(0)
    noise = np.exp(0.05 * rng.standard_normal((T.size, 500)))     # replicates, independent per T
    # on the law everywhere: no departure, every ratio's CI covers 1
    dep = laws.log_departure(T, on_law, on_law[:, None] * noise, fit_below=100)
    assert dep["departs"] is None and abs(dep["b"] - 10) < 1e-9 and abs(dep["a"] - 20) < 1e-9
    assert all(lo < 1 < hi for _, lo, hi in dep["ratios"].values())
    assert sorted(dep["ratios"]) == [300, 1000, 3000]
    # doubled from T = 1000 on: departs there, not at 300, and the ratio is 2
    bent = on_law * np.where(T >= 1000, 2.0, 1.0)
    dep = laws.log_departure(T, bent, bent[:, None] * noise, fit_below=100)
    assert dep["departs"] == 1000 and abs(dep["ratios"][1000][0] - 2) < 1e-9
    assert dep["ratios"][1000][1] > 1.5
    # an m50 above every m tried (inf) is above the law; fewer than 2 T in the fit range is refused
    inf_boot = bent[:, None] * noise
    inf_boot[-1] = np.inf
    assert laws.log_departure(T, bent, inf_boot, 100)["ratios"][3000][1:] == (np.inf, np.inf)
    with pytest.raises(ValueError, match="at least 2 T"):
        laws.log_departure(T, bent, bent[:, None] * noise, fit_below=10)


@pytest.mark.parametrize("law, power_wins", [(lambda s: 12.0 * s ** 1.5, True),
                                              (lambda s: 6.0 * 2.5 ** s, False)])
def test_growth_in_s_tells_a_power_law_from_an_exponential(law, power_wins):
    s = np.arange(1, 6)
    rng = np.random.default_rng(4)
    point = law(s) * np.exp(0.03 * rng.standard_normal(s.size))
    boot = point[:, None] * np.exp(0.03 * rng.standard_normal((s.size, 800)))
    g = laws.growth_in_s(s, point, boot)
    if power_wins:
        assert g["pow_k_lo"] <= 1.5 <= g["pow_k_hi"] and g["daic_hi"] < 0
        assert g["p_power_better"] > 0.95
    else:
        assert g["exp_b_lo"] <= 2.5 <= g["exp_b_hi"] and g["daic_lo"] > 0
        assert g["p_power_better"] < 0.05
    assert g["n_s"] == 5 and g["n_dropped"] == 0


def test_growth_in_s_drops_undetermined_replicates_and_refuses_bad_input():
    s, m = np.array([1, 2, 3]), np.array([10.0, 20.0, 40.0])
    boot = np.repeat(m[:, None], 10, 1)
    boot[2, :4] = np.inf                             # an m50 above every m tried
    g = laws.growth_in_s(s, m, boot)
    assert g["n_dropped"] == 4 and g["exp_b"] == pytest.approx(2.0)
    assert (g["exp_b_lo"], g["exp_b_hi"], g["pow_k_hi"]) == (-np.inf, np.inf, np.inf)  # 40%
    boot = np.repeat(m[:, None], 1000, 1)
    boot[2, :20] = np.inf                            # 2% dropped: the bounds stay finite
    g = laws.growth_in_s(s, m, boot)
    assert g["n_dropped"] == 20 and g["exp_b_lo"] == g["exp_b_hi"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"s must hold >= 3 distinct.*\[1, 2\]"):
        laws.growth_in_s(s[:2], m[:2], boot[:2])
    with pytest.raises(ValueError, match=r"m50 must be finite and > 0.*s=\[3\]"):
        laws.growth_in_s(s, np.array([10.0, 20.0, np.inf]), boot)
    with pytest.raises(ValueError, match=r"m50_boot must have shape \[n_s=3, B >= 1\]"):
        laws.growth_in_s(s, m, boot[:2])


def test_four_laws_recover_the_law_that_made_the_curve_and_compare_on_one_scale():
    """laws.four_laws on curves made by each law (small noise): the law that made a curve has the
    lowest AIC in most resamples and its slope's interval holds the true slope; a power curve's
    exponent is found on the m scale (not fitted to ln m)."""
    T = np.array([100.0, 300, 1100, 3000, 10000])
    rng = np.random.default_rng(52)
    made = {"log": 20 + 30 * np.log(T), "lin": 50 + 0.02 * T, "log2": 10 + 2 * np.log(T) ** 2,
            "pow": 5 * T ** 0.4}
    slope = {"log": 30, "lin": 0.02, "log2": 2, "pow": 0.4}
    for law, m in made.items():
        f = laws.four_laws(T, m, m[:, None] * np.exp(rng.normal(0, 0.01, (5, 4000))))
        assert max(f["best"], key=f["best"].get) == law, (law, f["best"])
        assert f[law + "_lo"] <= slope[law] <= f[law + "_hi"]
        assert abs(f[law + "_b"] - slope[law]) < 1e-6 * max(1, slope[law])
    censored = made["log"][:, None] * np.ones((5, 100))
    censored[4, :10] = np.inf                     # 10 of 100 resamples above the grid
    f = laws.four_laws(T, made["log"], censored)
    assert f["n_dropped"] == 10 and f["log_hi"] == np.inf


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "laws.scaling_fits": Walk(lambda f: dict(zip(("T", "m50", "m50_boot"), curve_data())),
                               legal=dict(T={"list": ARRAY_LIKE}, m50={"list": ARRAY_LIKE},
                                          m50_boot={"list": ARRAY_LIKE})),
    "laws.four_laws": Walk(lambda f: dict(zip(("T", "m50", "m50_boot"), curve_data())),
                           legal=dict(T={"list": ARRAY_LIKE}, m50={"list": ARRAY_LIKE},
                                      m50_boot={"list": ARRAY_LIKE})),
    "laws.growth_in_s": Walk(lambda f: dict(zip(("s", "m50", "m50_boot"), curve_data())),
                              legal=dict(s={"list": ARRAY_LIKE}, m50={"list": ARRAY_LIKE},
                                         m50_boot={"list": ARRAY_LIKE})),
    "laws.log_departure": Walk(lambda f: dict(zip(("T", "m50", "m50_boot"), curve_data()),
                                               fit_below=20.0),
                                legal=dict(T={"list": ARRAY_LIKE}, m50={"list": ARRAY_LIKE},
                                           m50_boot={"list": ARRAY_LIKE},
                                           fit_below={"inf": "every T in the fit", "10**12":
                                                      "every T in the fit"})),
    "laws.paired_growth": Walk(lambda f: dict(e=_estimate(10), ref=_estimate(10),
                                               e0=_estimate(20), ref0=_estimate(20)),
                                legal={k: {"missing key": "T, its first key, is not read"}
                                       for k in ("e", "ref", "e0", "ref0")}),
    "laws.paired_ratio": Walk(lambda f: dict(e=_estimate(10), ref=_estimate(10)),
                               legal={k: {"missing key": "T, its first key, is not read"}
                                      for k in ("e", "ref")}),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over laws.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((laws,), WALK, huge=False)
