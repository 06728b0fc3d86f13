"""test_checks.py: the tests of studies/lib/checks.py, the one vocabulary of argument checks.

Run from the repository's root: python -m pytest -q
"""
import numpy as np
import pytest

from studies.lib import checks
from studies.conftest import walk_modules
from test_all import Walk, any_literal


def test_a_wrong_type_is_a_value_error_and_a_type_error_naming_the_argument():
    with pytest.raises(checks.WrongType, match=r"^rng must be a numpy Generator .*, got 5$"):
        checks.check_rng(5)
    assert issubclass(checks.WrongType, ValueError) and issubclass(checks.WrongType, TypeError)
    with pytest.raises(ValueError, match=r"^m must be an integer >= 1, got 0$"):
        checks.check_number("m", 0, checks.INTS, 1)
    assert checks.check_number("m", np.int64(3), checks.INTS, 1) == 3       # numpy as Python
    with pytest.raises(ValueError, match=r"x must be a finite number >= 0, got 1000"):
        checks.check_number("x", 10 ** 400, checks.REALS, 0)                   # no float holds it


def test_bits_and_supports_name_the_first_bad_value_and_where():
    with pytest.raises(ValueError, match=r"X must hold bits 0/1 \(or bools\), got 2 at index \[1\]"):
        checks.check_bits("X", np.array([0, 2, 1]))
    assert checks.check_bits("X", np.array([True, False])).dtype == np.bool_
    with pytest.raises(ValueError, match="in increasing order"):
        checks.check_support([2, 1], 4, 2)
    assert checks.check_support([0, 3], 4, 2).tolist() == [0, 3]


def test_a_sample_no_machine_holds_is_refused_before_it_is_drawn():
    with pytest.raises(ValueError, match=r"m=1000000000000 samples of T=1000000 bits need about"):
        checks.check_sample_size(10 ** 12, 10 ** 6)
    assert checks.check_sample_size(5, 10) == 5


ANY_SHAPE = dict.fromkeys(("0-d", "wrong shape"), "bits of any shape")
WALK = {
    "checks.describe": Walk(lambda f: dict(v=5), legal=dict(v={"*": "describes any value"})),
    "checks.refuse": Walk(lambda f: dict(name="x", v=5, what="w", right_type=True, hint=""),
                          legal=any_literal("name", "v", "what", "right_type", "hint")),
    "checks.check_number": Walk(lambda f: dict(name="v", v=3, types=checks.INTS, lo=1,
                                               hi=10, what=None, bools=False),
                                legal=dict(any_literal("name", "types", "lo", "hi", "what",
                                                       "bools"), v={"10**12": "refused"})),
    "checks.check_rng": Walk(lambda f: dict(rng=f["rng"], optional=False),
                             legal=any_literal("optional")),
    "checks.check_choice": Walk(lambda f: dict(name="v", v="a", allowed=("a", "b")),
                                legal=any_literal("name", "allowed")),
    "checks.check_array": Walk(lambda f: dict(name="v", v=f["X"], kinds="iu",
                                              shape=lambda s: len(s) == 2, what="bits"),
                               legal=any_literal("name", "kinds", "shape", "what")),
    "checks.check_01": Walk(lambda f: dict(name="v", v=f["X"], what="bits"),
                            legal=dict(any_literal("name", "what"), v=ANY_SHAPE)),
    "checks.physical_memory": Walk(lambda f: dict()),
    "checks.check_memory": Walk(lambda f: dict(need=10, what="a run", of="of data",
                                               advice="ask for less"),
                                names=dict(need=r"\bneed\b|GiB"),
                                legal=dict(any_literal("what", "of", "advice"),
                                           need={"0": "nothing needed", "2.5": "bytes"})),
    "checks.check_support": Walk(lambda f: dict(S=np.array([0, 2]), T=4, s=2),
                                 legal=dict(any_literal("T", "s"),
                                            S={"list": "array-likes are read"})),
    "checks.check_sample_size": Walk(lambda f: dict(m=3, T=4, budget=0.5),
                                     legal=dict(any_literal("budget"), m={"0": "no samples"})),
    "checks.check_bits": Walk(lambda f: dict(name="A", A=f["X"]),
                              legal=dict(any_literal("name"),
                                         A=dict(ANY_SHAPE, list="array-likes are read"))),
    "checks.float_dtype": Walk(lambda f: dict(name="v", v="float32"),
                               legal=any_literal("name")),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over checks.py: every public function has a WALK entry and
    refuses each hostile value in one line naming the argument (the arguments a caller writes
    as literals: its names, bounds and words, aside)."""
    walk_modules((checks,), WALK)
