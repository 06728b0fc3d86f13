"""test_symmetry.py: the tests of studies/lib/symmetry.py.

Run from the repository's root: python -m pytest -q
"""
import re

import numpy as np
import pytest

import attn
import fast
import theory
from studies.lib import symmetry, training
from studies.conftest import SYM_OPTS, walk_modules
from test_all import P_NAMES, Walk


ANY_FACTOR = {"-1": "a negative factor is a symmetry too", "10**12": "any finite nonzero factor"}


def _trained_small():  # -> params, cfg, X (trained once per session)
    if not hasattr(_trained_small, "kept"):
        r = training.study_run(SYM_OPTS, log=None)
        X = np.random.default_rng(1).integers(0, 2, (64, SYM_OPTS["T"]))
        _trained_small.kept = r["params"], r["cfg"], X
    return _trained_small.kept


def _logit_change(p, q, cfg, X):  # -> the largest relative change over the three exact paths
    return max(attn.rel_error(f(q, cfg, X)[0], f(p, cfg, X)[0])
               for f in (attn.model_forward, attn.full_model_forward, fast.model_forward))


def _random_symmetries(p, cfg, rng):  # -> {label: moved copy}, every symmetry, random factors
    d, H, e, T = cfg["d"], cfg["heads"], cfg["d"] // cfg["heads"], cfg["T"]
    M = lambda: rng.standard_normal((H, e, e)) + 2 * np.eye(e)
    c = lambda: float(rng.choice([-1, 1]) * np.exp(rng.uniform(-1.5, 1.5)))
    return {
        "ln1": symmetry.scale_ln(p, cfg, "ln1", c()), "ln2": symmetry.scale_ln(p, cfg, "ln2", c()),
        "lnf": symmetry.scale_ln(p, cfg, "lnf", c()),
        "qk per head": symmetry.mix_qk(p, cfg, [c() for _ in range(H)]),
        "vo per head": symmetry.mix_vo(p, cfg, [c() for _ in range(H)]),
        "qk mixed": symmetry.mix_qk(p, cfg, M()), "vo mixed": symmetry.mix_vo(p, cfg, M()),
        "key bias": symmetry.shift_key_bias(p, cfg, rng.standard_normal(d)),
        "ln1 null": symmetry.shift_ln_null(p, cfg, "ln1", {k: rng.standard_normal(d)
                                                            for k in ("W_Q", "W_K", "W_V")}),
        "ln2 null": symmetry.shift_ln_null(p, cfg, "ln2", {"W_1": rng.standard_normal(
            cfg["mlp"])}),
        "lnf null": symmetry.shift_ln_null(p, cfg, "lnf", {"w": rng.standard_normal(1)}),
        "embeddings": symmetry.shift_embeddings(p, cfg, rng.standard_normal(d),
                                                rng.standard_normal(2), rng.standard_normal(T)),
        "heads": symmetry.permute_heads(p, cfg, rng.permutation(H))}


def test_every_symmetry_leaves_every_logit_of_a_trained_model_unchanged():
    p, cfg, X = _trained_small()
    assert abs(p["ln1_g"] - 1).max() > 1e-3 and abs(p["ln1_b"]).max() > 1e-3   # trained away
    rng = np.random.default_rng(47)
    moved = {}
    for _ in range(3):
        for k, q in _random_symmetries(p, cfg, rng).items():
            moved[k] = max(moved.get(k, 0.0), _logit_change(p, q, cfg, X))
    assert len(moved) == 13 and max(moved.values()) < 1e-12, moved
    chain = p                                            # composed, one after another
    for q in _random_symmetries(p, cfg, rng):
        chain = _random_symmetries(chain, cfg, rng)[q]
    assert _logit_change(p, chain, cfg, X) < 1e-11


def test_a_non_symmetry_moves_the_logits_so_the_check_can_fail():
    """W_Q alone times c; LN1's gain alone; W_Q and W_K per head with their biases left alone
    (b_Q must scale with W_Q); and GELU's hidden units scaled against W_2, which only ReLU
    allows (scale_mlp_units refuses GELU, and is exact for ReLU)."""
    p, cfg, X = _trained_small()
    for q in (dict(p, W_Q=p["W_Q"] * 2.0), dict(p, ln1_g=p["ln1_g"] * 0.5),
              dict(symmetry.mix_qk(p, cfg, 3.0), b_Q=p["b_Q"]),
              dict(p, W_1=p["W_1"] * 10.0, b_1=p["b_1"] * 10.0, W_2=p["W_2"] / 10.0)):
        assert _logit_change(p, q, cfg, X) > 1e-6          # a symmetry's is below 1e-12
    with pytest.raises(ValueError, match="ReLU"):
        symmetry.scale_mlp_units(p, cfg, 2.0)
    relu = attn.default_config(T=6, d=8, heads=2, mlp=5, act="relu", dtype="float64")
    rng = np.random.default_rng(0)
    r = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in attn.init_params(relu, rng).items()}
    Xr = rng.integers(0, 2, (32, 6))
    assert _logit_change(r, symmetry.scale_mlp_units(r, relu, rng.uniform(0.2, 5, 5)), relu,
                         Xr) < 1e-12
    assert _logit_change(r, symmetry.canonical(r, relu), relu, Xr) < 1e-12


def test_B_X_moves_under_LN1s_scale_and_W_QKs_norms_do_not_under_the_QK_scale():
    p, cfg, _ = _trained_small()
    nm = theory.norm_measures(p, cfg)
    a = theory.norm_measures(symmetry.scale_ln(p, cfg, "ln1", 2.0), cfg)
    assert 1.9 < a["B_X"] / nm["B_X"] < 2.01 and a["qk_fro"] != pytest.approx(nm["qk_fro"])
    b = theory.norm_measures(symmetry.mix_qk(p, cfg, [3.0, 0.2, -1.5, 7.0]), cfg)
    for k in ("qk_spec", "qk_21", "qk_fro"):
        assert np.allclose(b[k], nm[k], rtol=1e-12, atol=0), k
    assert not np.allclose(b["v_spec"], theory.norm_measures(
        symmetry.mix_vo(p, cfg, 3.0), cfg)["v_spec"])              # W_V's norm moves with (c)


def test_the_canonical_form_computes_the_same_logits_and_its_norms_do_not_move():
    """theory.norm_measures and C of symmetry.canonical(p) are equal (1e-9 relative) after every
    symmetry with random factors; the raw C is not (LN1's scale moves it), so the test can fail."""
    p, cfg, X = _trained_small()
    can = symmetry.canonical(p, cfg)
    assert _logit_change(p, can, cfg, X) < 1e-12
    assert np.allclose(can["ln1_g"], 1) and not can["ln1_b"].any() and not can["b_K"].any()
    keys = ("B_X", "qk_spec", "qk_21", "qk_fro", "v_spec", "v_21", "o_spec", "readout_norm",
            "mlp_factor", "L_after")

    def measured(q):
        nm = theory.norm_measures(symmetry.canonical(q, cfg), cfg)
        return {**{k: np.sort(np.atleast_1d(nm[k])) for k in keys},   # head order aside
                "C": theory.covering_constant(nm)}
    ref, rng = measured(p), np.random.default_rng(3)
    for label, q in _random_symmetries(p, cfg, rng).items():
        got = measured(q)
        for k in ref:
            assert np.allclose(got[k], ref[k], rtol=1e-9, atol=0), (label, k)
    raw = theory.covering_constant(theory.norm_measures(p, cfg))
    moved = theory.covering_constant(theory.norm_measures(symmetry.scale_ln(p, cfg, "ln1", 3.0),
                                                          cfg))
    assert abs(moved / raw - 1) > 1e-3


def test_the_symmetries_refuse_a_wrong_argument_in_one_line_naming_it():
    p, cfg, _ = _trained_small()
    H, e = cfg["heads"], cfg["d"] // cfg["heads"]
    bad = [(lambda: symmetry.scale_ln(p, cfg, "ln3", 2.0), "ln must be"),
           (lambda: symmetry.scale_ln(p, cfg, "ln1", 0.0), "c must be"),
           (lambda: symmetry.scale_ln(p, cfg, "ln1", float("nan")), "c must be"),
           (lambda: symmetry.mix_qk(p, cfg, [1.0, 2.0]), "M must be"),
           (lambda: symmetry.mix_vo(p, cfg, np.zeros((H, e, e))), "M must hold invertible"),
           (lambda: symmetry.shift_key_bias(p, cfg, np.ones(3)), "v must be"),
           (lambda: symmetry.shift_ln_null(p, cfg, "ln1", [1.0]), "u must be"),
           (lambda: symmetry.shift_embeddings(p, cfg, np.ones(cfg["d"]), np.ones(5)),
            "a_tok must be"),
           (lambda: symmetry.permute_heads(p, cfg, [0, 0, 1, 2]), "order must be"),
           (lambda: symmetry.canonical(dict(p, W_Q=p["W_Q"][:2]), cfg), "W_Q"),
           (lambda: symmetry.scale_ln({k: v for k, v in p.items() if not k.startswith("ln")},
                                      attn.default_config(T=12, d=16, heads=4, mlp=8, ln=False,
                                                          dtype="float64"), "ln1", 2.0),
            "ln must be a LayerNorm the model has")]
    for call, words in bad:
        with pytest.raises(ValueError, match=re.escape(words)) as err:
            call()
        assert "\n" not in str(err.value), str(err.value)


def test_class_norms_are_the_canonical_forms_norms_and_no_symmetry_moves_them():
    """symmetry.class_norms equals the norms taken of symmetry.canonical's output (qk_fro, the
    readout, the MLP factor of theory.norm_measures, and ||W_VO,h||_F built from the canonical
    V and O), and every exact symmetry leaves it where it was; a non-symmetry (W_V alone scaled)
    moves vo. A stack's parameters give each run's norms."""
    p, cfg, _ = _trained_small()
    n = symmetry.class_norms(p, cfg)
    q = symmetry.canonical(p, cfg)
    nm = theory.norm_measures(q, cfg)
    e = cfg["d"] // cfg["heads"]
    vo = [np.linalg.norm(np.vstack([q["W_V"][:, h * e:(h + 1) * e], q["b_V"][h * e:(h + 1) * e]])
                         @ q["W_O"][h * e:(h + 1) * e]) for h in range(cfg["heads"])]
    assert np.allclose(n["qk"], nm["qk_fro"], rtol=1e-9, atol=0)
    assert np.allclose(n["vo"], vo, rtol=1e-9, atol=0)
    assert np.isclose(n["w"], nm["readout_norm"], rtol=1e-9, atol=0)
    assert np.isclose(1 + 1.13 * n["mlp"], nm["mlp_factor"], rtol=1e-9, atol=0)
    assert nm["B_X"] <= np.sqrt(cfg["d"] + 1)                  # LayerNorm holds the fifth bound
    for label, moved in _random_symmetries(p, cfg, np.random.default_rng(3)).items():
        m = symmetry.class_norms(moved, cfg)
        same = {k: np.allclose(np.sort(m[k], axis=None), np.sort(n[k], axis=None), rtol=1e-8,
                               atol=0) for k in n}
        assert all(same.values()), (label, same)
    not_sym = dict(p, W_V=p["W_V"] * 1.5)
    assert not np.allclose(symmetry.class_norms(not_sym, cfg)["vo"], n["vo"])
    stack = {k: np.stack([v, 2 * v]) for k, v in p.items()}
    ns = symmetry.class_norms(stack, cfg)
    assert np.allclose(ns["qk"][0], n["qk"], rtol=1e-12) and ns["w"].shape == (2,)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # symmetry.py (issue 47): each symmetry, the canonical form, the ball
    "symmetry.scale_ln": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], ln="ln1", c=2.0),
                              names=dict(P_NAMES, c=r"\bc\b"), legal=dict(c=ANY_FACTOR)),
    "symmetry.shift_ln_null": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], ln="ln2",
                                                  u={"W_1": np.ones(3)}), names=P_NAMES,
                                   legal=dict(u={"missing key": "a matrix not named shifts by 0"})),
    "symmetry.mix_qk": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], M=np.stack([np.eye(2)] * 2)),
                            names=P_NAMES),
    "symmetry.mix_vo": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], M=np.stack([np.eye(2)] * 2)),
                            names=P_NAMES),
    "symmetry.shift_key_bias": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], v=np.ones(4)),
                                    names=P_NAMES),
    "symmetry.shift_embeddings": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], v=np.ones(4),
                                                     a_tok=np.ones(2), a_pos=np.ones(4)),
                                      names=P_NAMES, legal=dict(a_tok={"None": "no mean shift"},
                                                                a_pos={"None": "no mean shift"})),
    "symmetry.permute_heads": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], order=[1, 0]),
                                   names=P_NAMES),
    "symmetry.scale_mlp_units": Walk(lambda f: dict(p=f["p"], cfg=dict(f["cfg"], act="relu"),
                                                    c=2.0), names=dict(P_NAMES, c=r"\bc\b"),
                                     legal=dict(c={"10**12": "any positive factor"})),
    "symmetry.canonical": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"]), names=P_NAMES),
    "symmetry.qk_norms": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"]), legal=dict(p={
        "missing key": "only W_Q, b_Q, W_K and LN1's are read (a stack's too)"})),
    "symmetry.project_qk_ball": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], radius=0.01),
                                     legal=dict(p={"missing key": "as qk_norms"}, radius={
                                         "10**12": "a ball too large to act"})),
    "symmetry.class_norms": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"]), legal=dict(p={
        "missing key": "only the norms' parameters are read (a stack's too)"})),
    "symmetry.project_class_ball": Walk(
        lambda f: dict(p=f["p"], cfg=f["cfg"], radii=dict(qk=0.01, vo=0.01, w=0.1, mlp=0.01)),
        legal=dict(p={"missing key": "as class_norms"}, radii={
            "empty": "no norm held: nothing to do", "{}": "no norm held: nothing to do",
            "missing key": "a norm left out is not held"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over symmetry.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((symmetry,), WALK)
