"""test_seed_laws.py: the tests of studies/lib/seed_laws.py, the laws fitted to every seed.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np
import pytest

from studies.lib import seed_laws
from studies.conftest import walk_modules
from test_all import Walk

TS = (100, 300, 1100, 3000, 10000)


def _values(law, sigma=0.25, n=20, seed=0, top=580.0):
    """{T: {seed: m}} drawn from m = law(T) e^eps, eps ~ N(0, sigma^2); above top: inf."""
    rng = np.random.default_rng(seed)
    out = {}
    for T in TS:
        m = law(T) * np.exp(sigma * rng.standard_normal(n))
        out[T] = {s: (float(v) if v <= top else math.inf) for s, v in enumerate(m)}
    return out


def test_the_law_that_made_the_seeds_is_the_one_that_wins():
    """Seeds drawn from a T^0.4 law: pow wins, its k is recovered within its interval; from
    60 + 25 ln T: log wins. Can fail: the two laws differ enough over T = 100..10^4."""
    f = seed_laws.fit_curve(_values(lambda T: 10 * T ** 0.4), 580, n_boot=300)
    assert f["best"] == "pow" and f["k"][1] <= 0.4 <= f["k"][2] and abs(f["k"][0] - 0.4) < 0.05
    assert f["daic"]["lin"][1] > 0                         # a line is worse, and surely so
    g = seed_laws.fit_curve(_values(lambda T: 60 + 25 * math.log(T)), 580, n_boot=300)
    assert g["best"] == "log" and abs(g["log"]["b"] - 25) < 5 and g["wins"]["log"] > 0.5


def test_a_censored_seed_counts_as_above_the_grid_not_at_it():
    """The EM fit maximises the censored likelihood: moving the fitted (a, k) or sigma any way
    lowers it; and treating the censored seeds as exactly at the grid's top (their lower bound)
    gives a smaller exponent than the censored fit."""
    values = _values(lambda T: 12 * T ** 0.45, top=400.0)
    assert sum(math.isinf(v) for s in values.values() for v in s.values()) >= 3
    f = seed_laws.fit_curve(values, 400, n_boot=10)
    T, m, w = seed_laws._design(values, 1, 0)
    cens = ~np.isfinite(m)
    y = np.log(np.where(cens, 400.0, m))
    at = lambda a, k, s: seed_laws._log_likelihood(
        (np.log(a) + k * np.log(T))[None], np.array([s]), y, cens, w[:1])[0]
    p = f["pow"]
    best = at(p["a"], p["b"], p["sigma"])
    assert abs(best - p["lnL"]) < 1e-9
    for da, dk, ds in ((1.01, 0, 0), (0.99, 0, 0), (1, 0.005, 0), (1, -0.005, 0), (1, 0, 0.01),
                       (1, 0, -0.01)):
        assert at(p["a"] * da, p["b"] + dk, p["sigma"] + ds) < best
    flat = {T: {s: min(v, 400.0) for s, v in seeds.items()} for T, seeds in values.items()}
    assert seed_laws.fit_curve(flat, 1e9, n_boot=10)["k"][0] < p["b"]


def test_a_folder_against_itself_differs_by_nothing_seed_by_seed():
    """The same seeds at the same T draw the same resamples: a curve's exponent minus its own
    is exactly 0 in every resample (the pairing the table's last column reads)."""
    values = _values(lambda T: 10 * T ** 0.4)
    a = seed_laws.fit_curve(values, 580, n_boot=50)
    b = seed_laws.fit_curve(values, 580, n_boot=50)
    assert np.array_equal(a["k_boot"], b["k_boot"])
    other = seed_laws.fit_curve(_values(lambda T: 10 * T ** 0.4, seed=1), 580, n_boot=50)
    assert not np.array_equal(a["k_boot"], other["k_boot"])


def test_fewer_than_three_T_have_no_law():
    with pytest.raises(ValueError, match="at least 3 T"):
        seed_laws.fit_curve({300: {0: 50.0, 1: 60.0}, 3000: {0: 80.0, 1: 90.0}}, 580)


WALK = {
    "seed_laws.seed_values": Walk(lambda f: dict(
        rows=[dict(T=10, seed=0, m=8, success="1")], grid=[8, 12], search="bisect"),
        legal=dict(grid={"[5]": "a grid of one m"}), run=True),
    "seed_laws.fit_curve": Walk(lambda f: dict(values=_values(lambda T: 10 * T ** 0.4, n=5),
                                               top=580, n_boot=5, seed=0),
                                legal=dict(seed={"10**12": "a bootstrap seed", "0": "seed 0"},
                                           values={"missing key": "a curve without its first T"},
                                           top={"10**12": "a grid's top", "2.5": "a grid's top"})),
    "seed_laws.laws_table": Walk(lambda f: dict(folders=["results/class-ball/tight"], n_seeds=2,
                                                Ts=[100, 300, 1100], n_boot=5, log=print),
                                 run=False, legal=dict(n_seeds={"None": "every seed",
                                                                "10**12": "every seed"},
                                                       Ts={"None": "every T"})),
    "seed_laws.laws_command": Walk(lambda f: dict(a=None, fail=None), run=False,
                                   legal=dict(a={"*": "a parsed command line"},
                                              fail={"*": "the parser's way out"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over seed_laws.py: every public function has a WALK entry and
    refuses each hostile value in one line naming the argument."""
    walk_modules((seed_laws,), WALK)
