"""test_training.py: the tests of studies/lib/training.py.

Run from the repository's root: python -m pytest -q
"""
import math
import os
import re

import numpy as np
import pytest

import attn
import fast
import theory
from studies import sweep
from studies.lib import checkpoint, run_options, symmetry, training
from studies.conftest import SYM_OPTS, run_cli, walk_modules
from test_all import ANY_DICT, ARRAY_LIKE, SMALL, TINY, Walk


def test_interventions_pair_with_the_baseline_by_seed():
    """An intervention run (freeze, decay except-ln) of a seed trains on the baseline's training
    set, tests on its test set and starts from its weights: the same draws, the same init, the
    same first loss (computed before any step), and a different run after it; stacked as alone;
    frozen parameters end at their init, clipped or not; each is a protocol a sweep accepts."""
    base = dict(SMALL, steps=3, dtype="float64")
    b = training.study_run(base)
    (_, (Xb, yb), (Tb, tb), r_b, _, _) = training.draw_study_data(base)
    init_b = attn.init_params(run_options.attention_config(run_options.validate_options(base)), r_b)
    for change in (dict(freeze="ln1"), dict(freeze="lnf"), dict(decay="except-ln")):
        o = dict(base, **change)
        (_, (X, y), (Te, te), r_i, _, _) = training.draw_study_data(o)
        assert np.array_equal(X, Xb) and np.array_equal(y, yb), change
        assert np.array_equal(Te, Tb) and np.array_equal(te, tb), change
        init = attn.init_params(run_options.attention_config(run_options.validate_options(o)), r_i)
        assert all(np.array_equal(init[k], init_b[k]) for k in init_b), change
        r = training.study_run(o)
        assert r["losses"][0] == b["losses"][0] and r["losses"][2] != b["losses"][2], change
        runs = [dict(o, seed=s) for s in (3, 4)]
        for x, st in zip(runs, training.study_stack(runs), strict=True):
            assert np.allclose(st["losses"], training.study_run(x)["losses"], rtol=1e-9), change
    low = dict(base, freeze="ln1", ln1_gain=0.5)      # every weight the baseline's but LN1's gain
    p0 = training.build_study_model(run_options.validate_options(low), training.draw_study_data(low)[3])[0]
    assert all(np.array_equal(p0[k], init_b[k]) for k in init_b if k != "ln1_g")
    assert np.all(p0["ln1_g"] == 0.5) and training.study_run(low)["losses"][0] != b["losses"][0]
    for clip in (0.0, 0.01):
        for x, g in [(dict(base, freeze="ln1", clip=clip), 1.0)] * 2 + [(dict(low, clip=clip), 0.5)]:
            for p in (training.study_run(x)["params"], training.study_stack([x])[0]["params"]):
                assert np.all(p["ln1_g"] == g) and not p["ln1_b"].any(), clip
    ap = sweep._sweep_parser(commands=False)
    for name, change in (("freeze-ln1", dict(freeze="ln1")), ("freeze-lnf", dict(freeze="lnf")),
                         ("decay-except-ln", dict(decay="except-ln")),
                         ("freeze-ln1-low", dict(freeze="ln1", ln1_gain=0.5))):
        a = ap.parse_args(["--protocol", name, "--out", "unused"])
        sweep._sweep_options(ap, a, [])
        assert {k: getattr(a, k) for k in change} == change, name
    with pytest.raises(ValueError, match="freeze acts on the Transformer"):
        run_options.validate_options(dict(model="mlp", freeze="ln1"))
    with pytest.raises(ValueError, match="ln1_gain acts on the Transformer"):
        run_options.validate_options(dict(model="mlp", ln1_gain=0.5))


def test_early_stopping_keeps_the_best_validation_step_and_never_looks_at_the_test_set(
        monkeypatch):
    opts = dict(SMALL, steps=60, val=150, val_every=10, n_test=321)
    seen = []                          # (training steps so far, rows) of every forward pass
    steps = [0]
    real_lg, real_fw = fast.loss_and_grads, fast.model_forward
    monkeypatch.setattr(fast, "loss_and_grads",
                        lambda *a, **k: steps.__setitem__(0, steps[0] + 1) or real_lg(*a, **k))
    monkeypatch.setattr(fast, "model_forward",
                        lambda p, c, X, *a: seen.append((steps[0], len(X))) or real_fw(p, c, X, *a))
    r = training.study_run(opts)
    test_passes = [n for n, rows in seen if rows == 321]
    assert test_passes and all(n == opts["steps"] for n in test_passes)  # test: only at the end
    assert any(rows == 150 and n < opts["steps"] for n, rows in seen)     # validation: during
    b = r["best_step"]
    assert b % 10 == 0 and 10 <= b <= 60
    monkeypatch.undo()
    plain = training.study_run(dict(SMALL, steps=b, n_test=321))   # the same run stopped at b
    assert all(np.array_equal(plain["params"][k], r["params"][k]) for k in r["params"])
    assert plain["test_acc"] == r["test_acc"]
    other = training.study_run(dict(opts, n_test=77))              # another test set: same choice
    assert other["best_step"] == b


def test_same_seed_same_bits_every_loss():
    """A seed fixes every bit: the same options twice give the same loss at every step and the
    same parameters; another seed gives another run."""
    a, b = training.study_run(SMALL), training.study_run(SMALL)
    assert a["losses"] == b["losses"] and len(a["losses"]) == SMALL["steps"]
    assert a["loss"] == b["loss"]
    assert all(np.array_equal(a["params"][k], b["params"][k]) for k in a["params"])
    c = training.study_run(dict(SMALL, seed=SMALL["seed"] + 1))
    assert not np.array_equal(a["params"]["W_Q"], c["params"]["W_Q"])
    assert a["losses"] != c["losses"]


def test_stacked_runs_follow_the_new_options_like_single_runs():
    opts = dict(SMALL, steps=40, dtype="float64", optimizer="adamw", wd=0.1, decay="matrices",
                clip=0.5, beta2=0.95, val=60, val_every=10)
    runs = [dict(opts, seed=s) for s in (3, 4)]
    stacked = training.study_stack(runs)
    for o, st in zip(runs, stacked, strict=True):
        alone = training.study_run(o)
        assert st["best_step"] == alone["best_step"] and st["test_acc"] == alone["test_acc"]
        assert np.allclose(st["losses"], alone["losses"], rtol=1e-9)


@pytest.mark.parametrize("clip, wd", [(0.0, 0.0), (0.5, 0.0), (0.0, 0.1)])
def test_stacked_minibatch_runs_take_the_mean_loss_like_single_runs(clip, wd):
    """A stack of minibatch runs (minGPT's batch 64) weighs each sample of a batch 1/batch, as a
    single run's mean loss does: the same losses, so clipping and weight decay act on the same
    gradient (a sum would give batch times the gradient, clipped at 1/batch of its threshold)."""
    opts = dict(SMALL, steps=20, dtype="float64", batch=16, clip=clip, wd=wd)
    runs = [dict(opts, seed=s) for s in (3, 4)]
    for o, st in zip(runs, training.study_stack(runs), strict=True):
        alone = training.study_run(o)
        assert np.allclose(st["losses"], alone["losses"], rtol=1e-9), (clip, wd)


def test_dropout_training_is_seeded_and_runs_one_at_a_time():
    opts = dict(SMALL, steps=20, dropout=0.1)
    a, b = training.study_run(opts), training.study_run(opts)
    assert a["losses"] == b["losses"]                           # masks come from the seed
    assert a["losses"] != training.study_run(dict(SMALL, steps=20))["losses"]
    with pytest.raises(ValueError, match="one at a time"):
        training.study_stack([opts, dict(opts, seed=5)])
    with pytest.raises(ValueError, match="Transformer only"):
        training.study_run(dict(opts, model="mlp"))


def test_zero_positional_init_changes_only_the_positions_and_stacks_like_single_runs():
    a = attn.init_params(attn.default_config(T=20), np.random.default_rng(3))
    b = attn.init_params(attn.default_config(T=20, pos_init="zero"), np.random.default_rng(3))
    assert not b["E_pos"].any() and a["E_pos"].any()
    assert all(np.array_equal(a[k], b[k]) for k in a if k != "E_pos")
    runs = [dict(SMALL, steps=30, dtype="float64", pos_init="zero", seed=s) for s in (3, 4)]
    for o, st in zip(runs, training.study_stack(runs), strict=True):
        assert np.allclose(st["losses"], training.study_run(o)["losses"], rtol=1e-9)
    with pytest.raises(ValueError, match="pos_init must be 'normal' or 'zero', got 'ones'"):
        attn.default_config(pos_init="ones")
    with pytest.raises(ValueError, match="pos_init must be one of normal, zero, got 'ones'"):
        run_options.validate_options(dict(pos_init="ones"))


def test_position_overlap_known_values():
    E = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [1.0, 1.0]])
    assert np.isclose(training.position_overlap(E, np.array([0])), 1.0)       # 2 is 0's twin
    assert np.isclose(training.position_overlap(E, np.array([1])), 2 ** -0.5)
    assert np.isnan(training.position_overlap(E, np.arange(4)))


@pytest.mark.parametrize("batch", [0, 16])
def test_resume_is_exact(tmp_path, batch):
    """Stopped at step k and resumed, a run ends with the very bits of a run straight through
    (minibatch order included: the generator state is in the checkpoint)."""
    opts = dict(SMALL, batch=batch)
    straight = training.study_run(opts)
    path = str(tmp_path / "ck.npz")
    with pytest.raises(checkpoint.Interrupted, match="interrupted after step 13; checkpoint .* at "
                                                "step 13") as e:
        training.study_run(opts, save=path, stop_after=13)
    assert e.value.step == 13
    ck = checkpoint.load_checkpoint(path, dict(run_options.DEFAULTS, **opts))
    assert ck["step"] == 13
    resumed = training.study_run(opts, save=path, resume=ck)
    assert resumed["losses"] == straight["losses"][13:]
    for k in straight["params"]:
        assert np.array_equal(straight["params"][k], resumed["params"][k]), k
    assert straight["loss"] == resumed["loss"]


def test_resume_refuses_another_configuration(tmp_path):
    path = str(tmp_path / "ck.npz")
    training.study_run(SMALL, save=path)
    ck = checkpoint.load_checkpoint(path)
    with pytest.raises(ValueError, match="another configuration: seed=2"):
        training.study_run(dict(SMALL, seed=3, steps=40), resume=ck)


def test_divergence_names_step_and_keeps_last_finite_checkpoint(tmp_path):
    path = str(tmp_path / "ck.npz")
    with pytest.raises(training.Diverged, match=r"at step \d+.*smaller --lr.*last finite") as e:
        training.study_run(dict(SMALL, lr=1e37, steps=50), save=path, save_every=1)
    ck = checkpoint.load_checkpoint(path)
    assert all(np.all(np.isfinite(v)) for v in ck["params"].values())
    assert ck["step"] == int(re.search(r"at step (\d+)", str(e.value))[1]) - 1


def test_public_functions_raise_valueerror():
    cfg = attn.default_config(T=4, d=4, heads=1)
    p = attn.init_params(cfg, np.random.default_rng(0))
    for X, msg in [([[0, 1, 0, 1]], r"array \[batch >= 1, T=4\]"), (np.zeros((0, 4), np.uint8),
                   r"\[batch >= 1"), (np.zeros(4, np.uint8), r"array \[batch >= 1, T=4\]")]:
        with pytest.raises(ValueError, match=msg):
            attn.model_forward(p, cfg, X)
    for bad in (2, -1, 0.5):
        X = np.zeros((3, 4))
        X[1, 2] = bad
        with pytest.raises(ValueError, match="of 0s and 1s"):
            attn.model_forward(p, cfg, X)
    with pytest.raises(ValueError, match="GiB"):
        training.study_run(dict(T=10**9, m=10))
    for bad, msg in [(dict(task="xor"), "task must be one of"), (dict(model="cnn"), "model must"),
                     (dict(stepz=3), "unknown option"), (dict(lr=-1.0), "lr must be"),
                     (dict(batch=-5), "batch must be"), (dict(batch=900), "larger than m=40"),
                     (dict(log_every=-1), "log_every must"), (dict(T=5.0), "T must be"),
                     (dict(s=50), "s=50 is larger than T=12"), (dict(heads=5), "heads=5"),
                     (dict(model="mlp", mlp=0), "mlp=0"), (dict(T=10**7, m=10**4), "GiB")]:
        with pytest.raises(ValueError, match=msg) as err:
            training.study_run(dict(SMALL, **bad))
        assert "--" not in str(err.value), err.value    # a Python caller typed no flags


def test_python_api_names_the_argument_for_every_wrong_input(tmp_path):
    """Families 5 and 8: ValueError or TypeError naming the argument, never an IndexError,
    KeyError or AttributeError from inside, and never a silent result (save_every=-1)."""
    cases = [(lambda: training.study_stack([]), ValueError, "runs must hold at least one"),
             (lambda: training.study_stack(dict(SMALL)), TypeError, "runs must be a list"),
             (lambda: training.study_run(SMALL, resume={}), ValueError, "resume: field"),
             (lambda: training.study_run([SMALL]), TypeError, "opts must be a dict"),
             (lambda: training.study_run(SMALL, save=str(tmp_path / "a.npz"), save_every=-1),
              ValueError, "save_every must be"),
             (lambda: training.study_run(SMALL, save_every=2.5), ValueError, "save_every must be"),
             (lambda: training.study_run(SMALL, log=5), TypeError, "log must be"),
             (lambda: training.study_run(SMALL, stop_after=0), ValueError, "stop_after must be"),
             (lambda: training.study_streams(-1), ValueError, "seed must be"),
             (lambda: training.study_streams("a"), ValueError, "seed must be"),
             (lambda: training.study_streams("5"), ValueError, "seed must be an integer"),  # check_int's
             (lambda: training.draw_study_data(dict(SMALL, T=[3])), ValueError, "T must be"),
             (lambda: checkpoint.load_checkpoint(5), TypeError, "path must be"),
             (lambda: run_options.validate_options(None), TypeError, "opts must be a dict")]
    for call, kind, msg in cases:
        with pytest.raises(kind, match=re.escape(msg)):
            call()
    assert not os.path.exists(tmp_path / "a.npz")
    assert training.draw_study_data(dict(SMALL))[1][0].shape == (SMALL["m"], SMALL["T"])  # defaults filled


def test_the_pictures_curve_is_dense_early_and_changes_nothing_else(capsys):
    """curve=True (--plot) measures the accuracies at every one of the first steps and then
    log-spaced, so the picture draws the rise where it happens; the printed lines, the summary's
    logged steps and the training are those of a run without it. The demo's last line is a
    sentence."""
    opts = dict(SMALL, steps=300, log_every=100)
    lines = []
    plain = training.study_run(opts, log=lines.append)
    dense = training.study_run(opts, log=lines.append, curve=True)
    assert "curve" not in plain
    strip = lambda x: re.sub(r" +[0-9.]+s$", "", x)                  # the times differ
    assert [strip(x) for x in lines[:4]] == [strip(x) for x in lines[4:]] and len(lines) == 8
    assert dense["losses"] == plain["losses"] and dense["logged"] == plain["logged"]
    steps = [e["step"] for e in dense["curve"]]
    assert steps[:10] == list(range(1, 11)) and {100, 200, 300} <= set(steps)
    assert 25 < len(steps) < 80 and steps == sorted(steps)
    assert all(np.diff(steps)[:40] <= 1 + 0.1 * np.array(steps[:40]))   # log-spaced: no gaps
    code, out, _ = run_cli(capsys, *TINY, "--log-every", "1")
    assert code == 0 and re.search(r"\(step \d+\); the run is judged by its last step\.\n", out)


def test_training_sharpens_attention_norms_and_grows_the_covering_constant():
    """Part 1 on a model that learned (3-sparse AND at T = 20, 200 steps), against the run's own
    init: to single out S the attention must sharpen, so the largest |W_QK|_2 grows several-fold,
    the Lipschitz factor after attention grows, and the covering constant C (which multiplies
    them) grows by more than 10x; B_X stays near sqrt(d + 1) (LN1 puts tokens on the sphere of
    radius sqrt(d)); every measure is finite."""
    opts = dict(T=20, m=200, steps=200, n_test=1000, seed=1, log_every=0)
    trained = training.study_run(opts, log=None)
    assert trained["test_acc"] >= 0.99                           # it has learned S
    o, cfg = run_options.validate_options(opts), trained["cfg"]
    init = training.build_study_model(o, training.draw_study_data(o)[3])[0]         # the run's own initial params
    nm0, nm = theory.norm_measures(init, cfg), theory.norm_measures(trained["params"], cfg)
    for k in ("qk_spec", "qk_21", "qk_fro", "v_spec", "v_21", "o_spec"):
        assert len(nm[k]) == cfg["heads"] and np.all(np.isfinite(nm[k])), k
        assert nm[k] != nm0[k], k                                 # training moved every head
    assert max(nm["qk_spec"]) > 3 * max(nm0["qk_spec"])
    assert nm["L_after"] > 2 * nm0["L_after"]
    for m in (nm0, nm):
        assert abs(m["B_X"] / math.sqrt(cfg["d"] + 1) - 1) < 0.05
    C0, C = theory.covering_constant(nm0), theory.covering_constant(nm)
    assert np.isfinite(C) and C > 10 * C0 > 0


def test_a_checkpoint_whose_frozen_layernorm_moved_is_refused(tmp_path):
    """freeze ln1 keeps LN1's gain at ln1_gain and its shift at 0 for the whole run; a checkpoint
    whose frozen values say otherwise (other options, or edited) was resumed without a word. Now
    it is refused in one line naming the field and the value."""
    o = dict(SMALL, freeze="ln1", ln1_gain=0.5)
    path = str(tmp_path / "f.npz")
    with pytest.raises(checkpoint.Interrupted):
        training.study_run(o, log=None, save=path, stop_after=3)
    ck = checkpoint.load_checkpoint(path)
    assert (ck["params"]["ln1_g"] == np.float32(0.5)).all()
    for name, change in (("ln1_g", lambda a: a * 2), ("ln1_b", lambda a: a + 0.25)):
        bad = dict(ck, params=dict(ck["params"], **{name: change(ck["params"][name])}))
        with pytest.raises(ValueError, match=f"field 'param/{name}' holds .* where freeze ln1 "
                                             f"keeps it at its init"):
            training.study_run(o, log=None, resume=bad)
    assert training.study_run(o, log=None, resume=ck)["steps"] == SMALL["steps"]


def test_training_inside_the_qk_ball_ends_inside_it_and_an_inactive_ball_changes_nothing():
    """Option qk_ball: every head's canonical ||W_QK||_F (symmetry.qk_norms, which is
    norm_measures' qk_fro of the canonical form) ends within training.qk_ball_radius, in a single
    run and in a stack alike, and the stack's runs are the runs alone; a ball too large to touch
    gives the very losses of no ball; the option is refused where it cannot act."""
    base = dict(SYM_OPTS, T=30, steps=60)
    o = dict(base, qk_ball=0.5)
    r = training.study_run(o, log=None)
    radius = training.qk_ball_radius(run_options.validate_options(o))
    n = symmetry.qk_norms(r["params"], r["cfg"])
    assert n.max() <= radius * (1 + 1e-9) and n.max() > 0.99 * radius      # the ball acted
    can = theory.norm_measures(symmetry.canonical(r["params"], r["cfg"]), r["cfg"])["qk_fro"]
    assert np.allclose(n, can, rtol=1e-9, atol=0)
    free = training.study_run(dict(base, qk_ball=0.0), log=None)
    assert free["losses"] != r["losses"]
    assert symmetry.qk_norms(free["params"], free["cfg"]).max() > radius
    assert training.study_run(dict(base, qk_ball=1e6), log=None)["losses"] == free["losses"]
    stacked = training.study_stack([dict(o, seed=s) for s in (5, 6)])
    assert np.allclose(stacked[0]["losses"], r["losses"], rtol=1e-9, atol=0)
    for st in stacked:
        assert symmetry.qk_norms(st["params"], st["cfg"]).max() <= radius * (1 + 1e-9)
    for bad, words in ((dict(o, model="mlp"), "qk_ball acts on the Transformer"),
                       (dict(o, T=3, s=3), "qk_ball needs T > 1.1 s"),
                       (dict(o, qk_ball=-1.0), "qk_ball")):
        with pytest.raises(ValueError, match=words):
            run_options.validate_options(bad)


CLASS_RADII = dict(ball_qk=0.004, ball_vo=0.015, ball_w=0.1, ball_mlp=0.01)


def test_training_inside_the_class_ball_never_leaves_it_and_a_ball_too_large_changes_no_bit():
    """Options ball_qk, ball_vo, ball_w, ball_mlp: after every step of a stack every norm of
    symmetry.class_norms is within its radius (the monitor reads the parameters after each
    step); the record says each projection acted and its finals are the final parameters' norms.
    A ball at 1.0001 times the largest norm a free run ever reached (the record of a ball too
    large to act) gives that run bit for bit; at 1/1.001 of it the projection acts and the run
    changes (so the first check can fail)."""
    base = dict(SYM_OPTS, T=30, steps=60)
    cfg = run_options.attention_config(dict(base, **CLASS_RADII))
    ratios = []

    class Watch:
        every, at_start = 1, True

        def __call__(self, step, acc, loss, params):
            n = symmetry.class_norms(params, cfg)
            ratios.append(max(float(np.max(n[k[5:]])) / r for k, r in CLASS_RADII.items()))
            return False
    stacked = training.study_stack([dict(base, **CLASS_RADII, seed=s) for s in (5, 6)],
                                  monitor=Watch())
    assert len(ratios) == 60 and max(ratios) <= 1.0
    for r in stacked:
        rec, n = r["ball"], symmetry.class_norms(r["params"], r["cfg"])
        for k in symmetry.CLASS_NORMS:
            assert rec[f"{k}_active"] > 0 and rec[f"{k}_worst"] > 1, (k, rec)
            assert rec[f"{k}_final"] == float(np.max(n[k])) <= rec[f"{k}_radius"]
    free = training.study_run(base, log=None)
    huge = training.study_run(dict(base, **{k: 1e6 * v for k, v in CLASS_RADII.items()}),
                             log=None)["ball"]
    reached = {k: huge[f"{k[5:]}_worst"] * 1e6 * v for k, v in CLASS_RADII.items()}
    edge = training.study_run(dict(base, **{k: 1.0001 * v for k, v in reached.items()}), log=None)
    assert all(edge["ball"][f"{k}_active"] == 0 for k in symmetry.CLASS_NORMS)
    assert all(np.array_equal(free["params"][k], edge["params"][k]) for k in free["params"])
    assert edge["losses"] == free["losses"]
    inside = training.study_run(dict(base, **{k: v / 1.001 for k, v in reached.items()}), log=None)
    assert all(inside["ball"][f"{k}_active"] > 0 for k in symmetry.CLASS_NORMS)
    assert not all(np.array_equal(free["params"][k], inside["params"][k]) for k in free["params"])
    for bad, words in ((dict(base, ball_qk=0.1, model="mlp"), "ball_qk acts on the Transformer"),
                       (dict(base, ball_qk=0.1, qk_ball=1.0), "cannot be combined"),
                       (dict(base, ball_mlp=0.1, mlp=0), "ball_mlp holds the MLP"),
                       (dict(base, ball_w=-1.0), "ball_w"), (dict(base, ball_vo=float("nan")),
                                                             "ball_vo")):
        with pytest.raises(ValueError, match=words):
            run_options.validate_options(bad)


def test_the_low_gain_run_with_its_step_restored_is_the_gain_1_run_bit_for_bit():
    """LN1's gain frozen at 1/2 with W_Q, W_K, W_V initialised 2x and stepped as held at 2x is the
    gain-1 frozen-LN1 run reparametrised (symmetry (a)): the same test accuracy, losses and
    attention, bit for bit in float32, alone and in a stack; either factor alone is not."""
    base = dict(T=20, m=60, steps=60, n_test=200, d=16, heads=4, mlp=8, freeze="ln1",
                log_every=0)
    runs = {name: dict(base, **extra) for name, extra in (
        ("gain 1", {}), ("restored", dict(ln1_gain=0.5, qkv_init=2.0, qkv_step=2.0)),
        ("init only", dict(ln1_gain=0.5, qkv_init=2.0)),
        ("step only", dict(ln1_gain=0.5, qkv_step=2.0)))}
    got = {k: training.study_run(dict(o, seed=3), log=None) for k, o in runs.items()}
    same = lambda a, b: (a["test_acc"] == b["test_acc"] and np.array_equal(a["losses"],
                         b["losses"]) and a["attn_on_S"] == b["attn_on_S"])
    assert same(got["gain 1"], got["restored"])
    assert np.array_equal(got["restored"]["params"]["W_Q"], 2 * got["gain 1"]["params"]["W_Q"])
    assert not same(got["gain 1"], got["init only"]) and not same(got["gain 1"], got["step only"])
    stacked = training.study_stack([dict(runs["restored"], seed=s) for s in (3, 4)])
    alone = training.study_run(dict(runs["gain 1"], seed=4), log=None)
    assert same(stacked[0], got["gain 1"]) and same(stacked[1], alone)
    assert {"qkv_init", "qkv_step"} <= set(run_options.RUN_KEYS)
    for bad, message in ((dict(qkv_step=0.0), "qkv_step"), (dict(qkv_init=2.0 ** 30), "qkv_init"),
                         (dict(model="mlp", freeze="none", qkv_init=2.0), "attention only")):
        with pytest.raises(ValueError, match=message):
            run_options.validate_options(dict(base, seed=0, **bad))


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "training.keep_freed_memory": Walk(lambda f: dict()),
    "training.study_run": Walk(lambda f: dict(opts=dict(SMALL, steps=2), log=None, save=None,
                                           save_every=0, resume=None, stop_after=None,
                                           curve=False),
                            legal=dict(opts={"missing key": ANY_DICT},
                                       save_every={"0": "only at the end", "10**12": "never "
                                                   "before the end"})),
    "training.study_stack": Walk(lambda f: dict(runs=[dict(SMALL, steps=2)], monitor=None)),
    "training.qk_ball_radius": Walk(lambda f: dict(o=dict(SMALL, qk_ball=1.0)),
                                 legal=dict(o={"missing key": ANY_DICT})),
    "training.divergence_culprit": Walk(lambda f: dict(o=run_options.validate_options({})),
                                     legal=dict(o={"missing key": ANY_DICT})),
    "training.study_streams": Walk(lambda f: dict(seed=0), legal=dict(seed={
        "10**12": "a seed: numpy's SeedSequence takes any int >= 0", "0": "seed 0"})),
    "training.draw_study_data": Walk(lambda f: dict(o=dict(SMALL)), legal=dict(o={"missing key": ANY_DICT})),
    "training.build_study_model": Walk(lambda f: dict(o=dict(SMALL), rng=f["rng"]),
                              legal=dict(o={"missing key": ANY_DICT})),
    "training.position_overlap": Walk(lambda f: dict(E_pos=f["W"], S=np.array([0, 2])),
                                   legal=dict(S={"list": ARRAY_LIKE})),
    "training.diverged_result": Walk(lambda f: dict(o=dict(SMALL)),
                                  legal=dict(o={"missing key": ANY_DICT})),
    "training.check_run_memory": Walk(lambda f: dict(o=dict(SMALL), flag=run_options.py_flag),
                                   legal=dict(o={"missing key": ANY_DICT})),
}
HOOK = "a hook of train.py's loop: study_run and study_stack check before they build it"
TRAINING_INSIDE = {k: HOOK for k in (
    "training.StudyHooks", "training.StudyHooks.draw", "training.StudyHooks.build",
    "training.StudyHooks.adam", "training.StudyHooks.step", "training.StudyHooks.train",
    "training.StudyHooks.after_step", "training.MLP", "training.MLP.keep",
    "training.MLP.loss_and_grads", "training.MLP.logits", "training.WithDropout",
    "training.WithDropout.keep", "training.WithDropout.loss_and_grads")}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over training.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((training,), WALK, exempt=TRAINING_INSIDE)
