"""test_theory_report.py: the tests of studies/theory_report.py.

Run from the repository's root: python -m pytest -q
"""


from studies import theory_report
from studies.conftest import ARGV, walk_modules
from test_all import P_NAMES, Walk





# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "theory_report.measure_trained_block": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"],
                                                               X=f["X"][:1]), names=P_NAMES),
    "theory_report.main": Walk(lambda f: dict(argv=["--help"]), run=False, legal=dict(argv=ARGV)),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over theory_report.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((theory_report,), WALK)
