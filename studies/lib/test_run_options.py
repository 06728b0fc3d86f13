"""test_run_options.py: the tests of studies/lib/run_options.py.

Run from the repository's root: python -m pytest -q
"""

import numpy as np
import pytest

from studies.lib import cli, folder, run_options, study, training
from studies.conftest import run_cli, walk_modules
from test_all import ANY_DICT, LITERAL, SMALL, TINY, Walk


def test_every_protocol_sets_only_options_a_sweep_passes_to_its_runs():
    """A protocol's option outside folder.MODEL_OPTIONS would be dropped without a word, and the
    sweep would train (and fingerprint) the default runs under the protocol's name (issue 47's
    first qk-ball screen did: qk_ball was missing there)."""
    for name, opts in run_options.PROTOCOLS.items():
        assert set(opts) <= set(folder.MODEL_OPTIONS), (name, set(opts) - set(folder.MODEL_OPTIONS))
    meta = dict(options=dict(run_options.DEFAULTS, qk_ball=1.0), bar=0.99, search="bisect")
    assert folder.sweep_fingerprint(meta) != folder.sweep_fingerprint(
        dict(meta, options=dict(run_options.DEFAULTS)))


def test_an_ln1_gain_that_overflows_the_dtype_names_its_option(capsys):
    """--ln1-gain 1e300 (or 1e38 in float32) used to give numpy's RuntimeWarning and then
    'training diverged; try a smaller --lr': now one line naming --ln1-gain, the dtype and the
    largest gain it allows, before anything runs; a gain near that limit that diverges is
    blamed on it too."""
    for gain, dtype in (("1e300", "float32"), ("1e38", "float32"), ("1e300", "float64")):
        code, out, err = run_cli(capsys, *TINY, "--ln1-gain", gain, "--dtype", dtype)
        assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
        assert f"--ln1-gain {float(gain)} is too large for {dtype}" in err, err
    with pytest.raises(ValueError, match="ln1_gain=1e.300 is too large for float32"):
        run_options.validate_options(dict(ln1_gain=1e300))
    o = run_options.validate_options(dict(ln1_gain=1e16))
    assert training.divergence_culprit(o).startswith("--ln1-gain (now 1e+16")
    assert training.divergence_culprit(run_options.validate_options({})).startswith("--lr")


@pytest.mark.parametrize("call,match", [
    (lambda: folder.check_rows([{}]), "a row: not a sweep CSV's row \\(no model"),
    (lambda: study.separation([[dict(seed=0, success=2, qk=1.0)]], "qk", np.ones((3, 1))),
     "success must be 0 or 1"),
    (lambda: run_options.validate_options(dict(qk_ball=10 ** 400)), "beyond a float's range"),
    (lambda: run_options.validate_options(dict(ln1_gain=10 ** 400)), "beyond a float's range"),
    (lambda: run_options.validate_options(dict(qkv_step=10 ** 400)), "beyond a float's range"),
    (lambda: run_options.validate_options(dict(ln1_gain=1e-320)), "ln1_gain=1e-320 is out of range"),
    (lambda: run_options.validate_options(dict(ball_vo=1e-320)), "ball_vo=1e-320 is out of range"),
])
def test_the_studies_doors_refuse_issue_53s_cases_in_one_line(call, match):
    """The public functions' cases of the hostile round (issue 53): each a ValueError or TypeError
    naming the argument, never a KeyError, an OverflowError or a nan."""
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_checked_run_options_are_read_only_through_every_operator():
    o = run_options.Options({})
    for change in (lambda: o.__setitem__("lr", 1), lambda: o.update(lr=1),
                   lambda: o.__ior__({"lr": 1}), lambda: o.setdefault("x", 1)):
        with pytest.raises(TypeError, match="read-only"):
            change()
    with pytest.raises(TypeError, match="read-only"):
        o |= {"lr": 1}
    assert o["lr"] == run_options.DEFAULTS["lr"]


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "run_options.add_options": Walk(lambda f: dict(ap=cli.OneLineParser(prog="x"), names=["lr"],
                                             defaults=None), legal=dict(names={"[v]": LITERAL})),
    # run_options.py
    "run_options.py_flag": Walk(lambda f: dict(name="s", value=5),
                                legal=dict(name={"'bogus'": "a name", "[v]": "refused"},
                                           value={"*": "any value is shown"})),
    "run_options.cli_flag": Walk(lambda f: dict(name="s", value=5),
                                 legal=dict(name={"'bogus'": "a name"},
                                            value={"*": "any value is shown"})),
    "run_options.cross_option_problem": Walk(lambda f: dict(o=dict(run_options.DEFAULTS),
                                                     flag=run_options.py_flag),
                                      legal=dict(o={"missing key": "refused"})),
    "run_options.Options": Walk(lambda f: dict(opts=dict(SMALL), flag=run_options.py_flag),
                                legal=dict(opts={"missing key": ANY_DICT})),
    "run_options.validate_options": Walk(lambda f: dict(opts=dict(SMALL),
                                                        flag=run_options.py_flag),
                                         legal=dict(opts={"missing key": ANY_DICT})),
    "run_options.ball_radii": Walk(lambda f: dict(o=dict(SMALL, ball_qk=0.1)),
                                   legal=dict(o={"missing key": ANY_DICT})),
    "run_options.attention_config": Walk(lambda f: dict(o=dict(SMALL)),
                                     legal=dict(o={"missing key": ANY_DICT})),
    "run_options.run_shapes": Walk(lambda f: dict(o=dict(SMALL)),
                                   legal=dict(o={"missing key": ANY_DICT})),
    **{f"run_options.Options.{m}": Walk(lambda f: dict(self=run_options.validate_options({})),
                                        run=False)       # read-only: every call is a TypeError
       for m in ("update", "pop", "popitem", "clear", "setdefault")},
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over run_options.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((run_options,), WALK)
