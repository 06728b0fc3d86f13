"""test_checkpoint.py: the tests of studies/lib/checkpoint.py.

Run from the repository's root: python -m pytest -q
"""
import json
import os
import re

import numpy as np
import pytest

import optim
from studies.lib import checkpoint, run_options, training
from studies.conftest import run_cli, walk_modules
from test_all import ANY_DICT, SMALL, TINY, Walk, any_literal


def _walk_checkpoint():
    """A checkpoint of a two-step run on disk: (path, its checkpoint dict, the run's options)."""
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), "c.npz")
    o = dict(SMALL, steps=4)
    try:
        training.study_run(o, log=None, save=path, stop_after=2)
    except checkpoint.Interrupted:
        pass
    return path, checkpoint.load_checkpoint(path), run_options.validate_options(o)


def _walk_state():
    ck, o = _walk_checkpoint()[1:]
    params = {k: v.copy() for k, v in ck["params"].items()}
    state = optim.adam_init(params)
    return dict(ckpt=ck, o=o, params=params, state=state, rng_order=np.random.default_rng(0))


def test_a_plain_resume_of_a_checkpoint_without_its_length_asks_for_steps(tmp_path, capsys):
    """An older checkpoint does not record its run's length: --resume alone is refused in one
    line asking for --steps (it used to train on to the default 1000 in silence)."""
    path = str(tmp_path / "ck.npz")
    with pytest.raises(checkpoint.Interrupted):
        training.study_run(dict(SMALL, steps=20), save=path, stop_after=7)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    options = json.loads(str(arrays["options"]))
    del options["steps"]
    np.savez(path, **dict(arrays, options=np.array(json.dumps(options))))
    assert checkpoint.load_checkpoint(path)["run_steps"] is None
    code, out, err = run_cli(capsys, "--resume", path, "--log-every", "0")
    assert code == 2 and "--steps" in err and "length" in err and len(err.splitlines()) <= 2
    assert checkpoint.load_checkpoint(path)["step"] == 7
    code, out, _ = run_cli(capsys, "--resume", path, "--steps", "20", "--log-every", "0")
    assert code == 0 and "(13 of the 20 steps in this session)" in out, out
    assert "the run is judged by its last step." not in out        # no logged steps: no line


def test_a_plain_resume_trains_to_the_length_of_the_run_that_saved(tmp_path, capsys):
    """--resume with no --steps goes on to the saved run's own length (not the default 1000);
    a typed --steps still wins."""
    path = str(tmp_path / "ck.npz")
    with pytest.raises(checkpoint.Interrupted):
        training.study_run(dict(SMALL, steps=20), save=path, stop_after=7)
    assert checkpoint.load_checkpoint(path)["run_steps"] == 20
    code, out, _ = run_cli(capsys, "--resume", path, "--log-every", "0")
    assert code == 0 and "(resumed at step 7)" in out and "(13 of the 20 steps in this " \
        "session)" in out, out
    code, out, _ = run_cli(capsys, "--resume", path, "--steps", "25", "--log-every", "0")
    assert code == 0 and "(5 of the 25 steps in this session)" in out, out


def test_checkpoint_refuses_bad_files(tmp_path):
    opts = dict(run_options.DEFAULTS, **SMALL)
    path = str(tmp_path / "ck.npz")
    training.study_run(SMALL, save=path)
    good = open(path, "rb").read()
    (tmp_path / "trunc.npz").write_bytes(good[: len(good) // 2])
    (tmp_path / "text.npz").write_text("hello")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    for name, msg in [("trunc.npz", "not a readable checkpoint"),
                      ("text.npz", "not a readable checkpoint"),
                      ("other.npz", "not a checkpoint of train.py"),
                      ("missing.npz", "no checkpoint")]:
        with pytest.raises(ValueError, match=msg):
            checkpoint.load_checkpoint(str(tmp_path / name), opts)
    for key, val in [("T", 13), ("d", 16), ("heads", 4), ("task", "parity")]:
        with pytest.raises(ValueError, match=f"another configuration: {key}="):
            checkpoint.load_checkpoint(path, dict(opts, **{key: val}))
    assert open(path, "rb").read() == good               # nothing was overwritten


def test_crafted_checkpoints_are_one_line_naming_the_file_and_the_field(tmp_path, capsys):
    """Family 4: one reader (checkpoint.load_checkpoint, check_checkpoint) checks every field; a
    checkpoint's options never override what the user typed."""
    path = str(tmp_path / "ck.npz")
    assert run_cli(capsys, *TINY, "--save", path)[0] == 0
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    opts, state = json.loads(str(arrays["options"])), json.loads(str(arrays["rng_order"]))
    W, v = arrays["param/W_Q"], arrays["adam_v/b"]
    variants = [("step", None, "'step' is missing"), ("options", None, "'options' is missing"),
                ("rng_order", None, "'rng_order' is missing"),
                ("adam_t", None, "'adam_t' is missing"),
                ("param/W_Q", None, "'param/W_Q' is missing"),
                ("adam_m/E_pos", None, "'adam_m/E_pos' is missing"),
                ("step", np.array([5, 5]), "'step' must be a single integer"),
                ("step", np.array(5.0), "'step' must be a single integer"),
                ("step", np.array("5"), "'step' must be a single integer"),
                ("step", np.array(True), "'step' must be a single integer"),
                ("step", np.array(0), "'step' must be a positive integer"),
                ("adam_t", np.array(4), "'adam_t' must be an integer equal to the step"),
                ("options", np.array(json.dumps(list(opts.values()))), "'options' must be a dict"),
                ("options", np.array(json.dumps(dict(opts, T="12"))), "'options' holds a bad value"),
                ("options", np.array(json.dumps(dict(opts, d=True))), "'options' holds a bad value"),
                ("options", np.array(json.dumps(dict(opts, zz=1))), "'options' holds a bad value"),
                ("options", np.array(json.dumps(dict(opts, dropout=0.5))), "'options' ask for val"),
                ("options", np.array("{not json"), "'options' is not JSON"),
                ("param/W_Q", W.astype(str), "'param/W_Q' has dtype"),
                ("param/W_Q", W.astype(np.complex64), "'param/W_Q' has dtype"),
                ("param/W_Q", W.astype(bool), "'param/W_Q' has dtype"),
                ("param/W_Q", np.zeros((3, 3), np.float32), "'param/W_Q' has shape"),
                ("adam_v/b", -np.ones_like(v), "'adam_v/b' is negative"),
                ("param/extra", np.zeros(3, np.float32), "'param/extra' is not a parameter"),
                ("junk", np.zeros(3), "'junk' is not a field"),
                ("rng_order", np.array(json.dumps(dict(state, bit_generator="MT19937"))),
                 "'rng_order' is not a state"),
                ("rng_order", np.array(json.dumps(dict(state, state={"state": "x", "inc": 1}))),
                 "'rng_order' is not a state"),
                ("rng_order", np.array("[1, 2]"), "'rng_order' is not a state")]
    bad = str(tmp_path / "bad.npz")
    for key, value, msg in variants:
        crafted = {k: a for k, a in arrays.items() if k != key}
        if value is not None:
            crafted[key] = value
        np.savez(bad, **crafted)
        with pytest.raises(ValueError, match=re.escape(msg)) as e:
            checkpoint.load_checkpoint(bad)
        assert "bad.npz" in str(e.value)
        code, out, err = run_cli(capsys, "--resume", bad, "--steps", "9")
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (key, err)
        assert "Traceback" not in err and "resumed" not in out
    np.savez(bad, **dict(arrays, options=np.array(json.dumps(dict(opts, steps=6)))))
    code, out, err = run_cli(capsys, "--resume", bad, "--steps", "8")     # typed, not stored
    assert code == 0 and "(3 of the 8 steps in this session)" in out, (out, err)
    for resume, kind, msg in [({}, ValueError, "resume: field"), ([1], TypeError, "resume must"),
                              (dict(checkpoint.load_checkpoint(path), step=2.0), ValueError, "'step'")]:
        with pytest.raises(kind, match=msg):
            training.study_run(dict(SMALL, T=12, m=40, n_test=100, steps=9), resume=resume)


def test_a_run_of_very_many_steps_starts_and_its_checkpoint_resumes(tmp_path):
    """--steps 10**18 (or resuming a checkpoint of a 10**15-step run) was refused as 'out of
    memory ... make one of --T --m ... smaller': the loss history was allocated for every step
    up front. It now grows as the run goes, so such a run starts, saves and resumes."""
    path = str(tmp_path / "long.npz")
    with pytest.raises(checkpoint.Interrupted, match="after step 3"):
        training.study_run(dict(SMALL, steps=10**18), log=None, save=path, stop_after=3)
    ck = checkpoint.load_checkpoint(path)
    assert ck["run_steps"] == 10**18 and ck["step"] == 3
    with pytest.raises(checkpoint.Interrupted, match="after step 6"):
        training.study_run(dict(SMALL, steps=10**15), log=None, save=path, resume=ck, stop_after=6)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # checkpoint.py
    "checkpoint.save_checkpoint": Walk(lambda f: dict(
        path=_walk_checkpoint()[0], **{k: v for k, v in _walk_state().items() if k in (
            "params", "state", "rng_order")}, opts=dict(SMALL, steps=4), step=3),
        legal=dict(opts={"missing key": ANY_DICT}, step={"10**12": "a step number"},
                   params={"missing key": "any parameters: a file of them"},
                   path={"'bogus'": "a new file name"})),
    "checkpoint.load_checkpoint": Walk(lambda f: dict(path=_walk_checkpoint()[0], opts=None)),
    "checkpoint.check_checkpoint": Walk(lambda f: dict(ck=_walk_checkpoint()[1], where="resume"),
                                        legal=dict(where=any_literal("where")["where"]),
                                        names=dict(ck="resume")),       # as `where` names it,
    "checkpoint.same_path": Walk(lambda f: dict(a="x.npz", b="y.npz"), legal=dict(
        a={"'bogus'": "a path", "None": "no path"}, b={"'bogus'": "a path", "None": "no path"})),
    "checkpoint.checkpoint_owner": Walk(lambda f: dict(resume_path="x.npz", cli_style=True),
                                        legal=dict(resume_path={"'bogus'": "a path", "None":
                                                                "no resume: none is ours"})),
    "checkpoint.restore": Walk(lambda f: _walk_state(), legal=dict(
        o={"missing key": ANY_DICT}, params={"missing key": "refused: not the checkpoint's"})),
    "checkpoint.StopRequests": Walk(lambda f: dict(enabled=True, stop_after=None)),
    "checkpoint.StopRequests.after": Walk(lambda f: dict(self=checkpoint.StopRequests(), step=1),
                                          legal=dict(step={"10**12": "a step number"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over checkpoint.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((checkpoint,), WALK)
