"""test_classball.py: the tests of studies/classball.py.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np

import theory
from studies import classball
from studies.conftest import ARGV, NEW_FILE, walk_path, walk_modules
from test_all import Walk


def test_the_class_balls_bound_constant_is_covering_constant_at_the_radii():
    """classball.bound_constant: C of norm_measures made by hand at the radii, through
    theory.covering_constant; None when a norm is not held; growing with every radius."""
    radii = dict(qk=0.08, vo=0.1, w=1.0, mlp=0.15)
    v = 0.1 ** 0.5
    nm = dict(B_X=65 ** 0.5, L_after=1.0 * (1 + 1.13 * 0.15), readout_norm=1.0,
              mlp_factor=1 + 1.13 * 0.15, qk_fro=[0.08] * 16, v_spec=[v] * 16,
              v_21=[4 ** 0.75 * v] * 16, o_spec=[v] * 16)
    C = classball.bound_constant(radii, 64, 16)
    assert np.isclose(C, theory.covering_constant(nm), rtol=1e-12)
    assert classball.bound_constant(dict(radii, w=0), 64, 16) is None
    assert all(classball.bound_constant(dict(radii, **{k: 2 * radii[k]}), 64, 16) > C
               for k in radii)


def _cell(T, c, seed, cost, n=20):
    """A slack cell by hand whose seeds' ln cost is `cost` plus a seed's noise."""
    noise = np.random.default_rng(seed).normal(0, 0.05, n)
    return dict(name=f"c-{c}-T-{T}", T=T, c=c, n=n, cost=cost + noise)


def test_the_slack_fit_tells_a_cost_of_the_slack_from_a_cost_of_T():
    """Cells whose cost is c^-1 alone give b = -1 and g = 0 within their intervals; cells whose
    cost is T^0.2 alone, b = 0 and g = 0.2. Each can fail: the design holds each c at two T."""
    cells = [(T, c) for T in (300, 3000) for c in (1.0, 1.27, 1.8)]
    for law, b, g in ((lambda T, c: -math.log(c), -1.0, 0.0),
                      (lambda T, c: 0.2 * math.log(T), 0.0, 0.2)):
        made = [_cell(T, c, i, law(T, c)) for i, (T, c) in enumerate(cells)]
        med, coef = classball._slack_fit(made)
        assert abs(coef[0, 1] - b) < 0.1 and abs(coef[0, 2] - g) < 0.05, coef[0]
        for j, want in ((1, b), (2, g)):
            lo, hi = np.percentile(coef[1:, j], [2.5, 97.5])
            assert lo <= want <= hi, (j, lo, hi)


def test_a_slack_cell_knows_its_slack_from_its_radius():
    """slack_of: c is ball_qk over ln((T - s) / (0.1 s)) / (2 (d + 1)); 0.08 at T = 10^4 and
    d = 64 is the construction's need there (c = 1.00)."""
    meta = dict(options=dict(ball_qk=0.08, ball_vo=0.1, ball_w=1.0, ball_mlp=0.15))
    c, radius, need = classball.slack_of(meta, 10000)
    assert abs(need - math.log(9997 / 0.3) / 130) < 1e-15 and radius == 0.08
    assert abs(c - 0.998) < 1e-3


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # classball.py (issue 52)
    "classball.bound_constant": Walk(lambda f: dict(radii=dict(qk=0.08, vo=0.1, w=1.0, mlp=0.15),
                                                    d=64, heads=16), run=False,
                                     legal=dict(radii={"missing key": "a norm not held: None"})),
    "classball.class_page": Walk(lambda f: dict(
        study="results/extended", folders=["results/class-ball/tight"], out=walk_path("c.md"), plot=None,
        log=print), run=False, legal=dict(out=NEW_FILE, plot={"None": "no plot"})),
    "classball.slack_of": Walk(lambda f: dict(meta=dict(options=dict(ball_qk=0.08)), T=300),
                               run=True, legal=dict(T={"10**12": "any T: its need"})),
    "classball.slack_page": Walk(lambda f: dict(
        study="results/extended", folders=["results/class-ball/slack/c-1.0-T-300"],
        out=walk_path("s.md"), log=print), run=False, legal=dict(out=NEW_FILE)),
    "classball.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over classball.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((classball,), WALK)


def test_the_pages_say_the_ideal_need_is_not_the_construction_with_its_computed_widths():
    line = classball._not_the_construction({"s": 3, "d": 64}, [100, 10000])
    assert f"{theory.construction_width(10000, 3)} at T = 10000" in line and "d = 64" in line
    assert theory.construction_width(10000, 3) == 443 > 64     # too wide for this model
