"""test_classball.py: the tests of studies/classball.py.

Run from the repository's root: python -m pytest -q
"""

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


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # classball.py (issue 52)
    "classball.bound_constant": Walk(lambda f: dict(radii=dict(qk=0.08, vo=0.1, w=1.0, mlp=0.15),
                                                    d=64, heads=16), run=False,
                                     legal=dict(radii={"missing key": "a norm not held: None"})),
    "classball.class_page": Walk(lambda f: dict(
        study="results/extended", folders=["results/class-ball/tight"], out=walk_path("c.md"), plot=None,
        log=print), run=False, legal=dict(out=NEW_FILE, plot={"None": "no plot"})),
    "classball.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over classball.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((classball,), WALK)
