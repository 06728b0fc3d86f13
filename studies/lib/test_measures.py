"""test_measures.py: the tests of studies/lib/measures.py.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np
import pytest

import attn
import data
import theory
from studies import mechanism
from studies.lib import compare, measures, row_kinds, symmetry, training, workers
from studies.conftest import two_head_model, walk_modules
from test_all import ARRAY_LIKE, Walk


def test_norm_measures_name_the_token_and_ln1_behind_B_X():
    cfg = attn.default_config(T=3, d=4, heads=2, mlp=0, ln=False, dtype="float64")
    p = attn.init_params(cfg, np.random.default_rng(0), std=0.0)
    X, S = np.zeros((2, 3)), np.array([2])
    for where, token, pos, in_S in ((("E_pos", 2), "bit0", 2, 1), (("E_tok", 1), "bit1", 0, 0),
                                    (("cls", None), "cls", -1, 0)):
        q = {k: v.copy() for k, v in p.items()}
        q["E_pos"][:, 1] = [0.3, 0.2, 0.1]               # no ties: position 0 leads a bit value
        (q[where[0]] if where[1] is None else q[where[0]][where[1]])[0] = 3.0
        mech = measures.measure_mechanism(q, cfg, S, X)
        assert (mech["B_X_token"], mech["B_X_position"], mech["B_X_in_S"]) == (token, pos, in_S)
    cfg = dict(cfg, ln=True)
    p = attn.init_params(cfg, np.random.default_rng(1), std=0.5)
    p["ln1_g"][:], p["ln1_b"][:] = [1.0, 1.0, 3.0, 3.0], [0.0, 4.0, 0.0, 3.0]
    nm = theory.norm_measures(p, cfg)
    assert abs(nm["ln1_gain_rms"] - math.sqrt(5.0)) < 1e-12 and nm["ln1_shift_norm"] == 5.0
    rows = np.concatenate([(p["E_tok"][:, None] + p["E_pos"]).reshape(-1, 4), p["cls"][None]])
    norms = np.linalg.norm(attn.layernorm_forward(rows, p["ln1_g"], p["ln1_b"])[0], axis=1)
    i = int(np.argmax(norms))
    assert (nm["B_X_token"], nm["B_X_position"]) == (("cls", -1) if i == 6 else
                                                     (f"bit{i // 3}", i % 3))
    assert abs(nm["B_X"] - math.hypot(norms[i], 1.0)) < 1e-12


def test_mechanism_measures_a_head_with_a_known_W_QK():
    R, T, S = 5.0, 6, [1, 3]
    p, cfg = two_head_model(R, T, S)
    X = (np.random.default_rng(1).random((50, T)) < 0.5).astype(np.uint8)
    m = measures.measure_mechanism(p, cfg, S, X)
    B_X = math.sqrt(2 + 1)            # longest token: a position of S holding bit 1, norm sqrt 2
    assert abs(m["B_X"] - B_X) < 1e-12
    assert m["top_head"] == 0 and m["heads_on_S"] == 1
    assert abs(m["top_score_scale"] - R * B_X ** 2) < 1e-9 and m["score_scale"] == \
        m["top_score_scale"]
    mass = 2 * math.exp(R) / (2 * math.exp(R) + (T - 2) + 1)      # + 1: [CLS], score 0
    assert abs(m["mass_on_S"] - mass) < 1e-12
    assert abs(m["score_gap"] - R) < 1e-12                          # R on S, 0 on the rest
    assert abs(m["per_head"]["mass_on_S"][1] - 2 / (T + 1)) < 1e-12   # head 1: uniform
    assert m["per_head"]["score_gap"][1] == 0 and m["per_head"]["score_scale"][1] == 0
    assert abs(m["norm_V"] - 1) < 1e-12 and abs(m["norm_O"] - 2) < 1e-12
    nm = theory.norm_measures(p, cfg)
    assert m["covering_constant"] == theory.covering_constant(nm) > 0


def test_the_studies_use_theorys_measures_not_a_copy():
    for name in ("norm_measures", "covering_constant"):
        assert getattr(measures, name) is getattr(theory, name), name
    assert mechanism.paper_score_gap is theory.paper_score_gap
    assert compare.construction_width is theory.construction_width


def test_mechanism_attention_agrees_with_attn_reference():
    """With LayerNorm on and random non-tiny weights, the mass and the score gap from the 2T + 1
    scores equal those of attn.cls_attention's weights (the log-weights differ from the scores
    by one constant per input, which cancels in the gap)."""
    cfg = attn.default_config(T=9, d=8, heads=2, mlp=4, dtype="float64")
    p = attn.init_params(cfg, np.random.default_rng(3), std=0.7)
    p["ln1_g"][:] = np.random.default_rng(4).uniform(0.5, 2.0, 8)
    p["ln1_b"][:] = 0.3
    S = np.array([0, 4, 7])
    X = (np.random.default_rng(5).random((40, 9)) < 0.6).astype(np.uint8)
    mass, gap = measures._head_attention_on_S(p, cfg, S, X)
    A = attn.cls_attention(p, cfg, X)                                  # [n, H, T + 1]
    rest = np.setdiff1d(np.arange(9), S)
    logA = np.log(A)
    assert np.allclose(mass, A[:, :, S].sum(-1).mean(0), atol=1e-12, rtol=0)
    assert np.allclose(gap, (logA[:, :, S].mean(-1) - logA[:, :, rest].mean(-1)).mean(0),
                       atol=1e-10, rtol=0)
    assert np.ptp(mass) > 0.01                         # the heads really differ


def test_the_mass_on_S_of_peaked_scores_is_attn_references_not_a_cancellation():
    """A head whose largest score (40, on S at bit 0) is a bit the input does not hold: for the
    inputs with every bit of S at 1, the normaliser is about 1e-15 of that score's exp, and the
    fast form (E0's total plus X @ (E1 - E0)) cancels (a committed row measured a mass of 6.6).
    The mass equals attn.cls_attention's, to rounding; the fast form alone is off by 8% here
    (so the test can fail), and the mass stays in [0, 1]."""
    T, S = 400, [3, 100, 250]
    p, cfg = two_head_model(40.0, T, S)
    p["W_K"][2, 0] = -35.0 * math.sqrt(2) / 2.0          # bit 1 lowers a score by 35
    X = (np.random.default_rng(5).random((64, T)) < 0.5).astype(np.uint8)
    assert X[:, S].all(1).sum() >= 3                      # inputs the fast form cancels on
    mass, _ = measures._head_attention_on_S(p, cfg, np.array(S), X)
    ref = attn.cls_attention(p, cfg, X)[:, :, S].sum(-1).mean(0)
    assert np.allclose(mass, ref, rtol=1e-12, atol=0) and np.all((0 <= mass) & (mass <= 1))
    sc, s_cls = measures._cls_scores(p, cfg)
    top = np.maximum(sc.max((0, 1)), s_cls)
    E, e_cls = np.exp(sc - top), np.exp(s_cls - top)
    XS = X[:, S, None].astype(np.float64)
    fast = ((E[0][S] * (1 - XS) + E[1][S] * XS).sum(1)
            / (E[0].sum(0) + X.astype(np.float64) @ (E[1] - E[0]) + e_cls)).mean(0)
    assert abs(fast[0] - ref[0]) > 0.01 * ref[0]          # what the mass was before
    m = measures.measure_mechanism(p, cfg, S, X, canonical=False)
    assert m["top_head"] == 0 and abs(m["mass_on_S"] - ref[0]) < 1e-12


def test_mechanism_on_the_hand_built_sparse_head():
    task = data.make_task("and", 30, 3, np.random.default_rng([30, 3, 0]))
    p, cfg, info = theory.build_sparse_head(task, np.random.default_rng([30, 3, 0, 1]))
    X = task.sample(100, np.random.default_rng(2))[0]
    m = measures.measure_mechanism(p, cfg, task.S, X)
    assert abs(m["mass_on_S"] - info["mass_on_S"]) < 1e-9 and m["heads_on_S"] == 1
    assert abs(m["top_score_scale"] - info["qk_spec"] * 3.0) < 1e-9   # B_X^2 = 1 + 1 + 1
    u, P = p["W_K"][:info["d_p"], 0], p["E_pos"][:, :info["d_p"]]
    rest = np.setdiff1d(np.arange(30), task.S)
    assert abs(m["score_gap"] - (info["R"] - (P[rest] @ u).mean())) < 1e-9


def test_mechanism_refuses_a_bad_support_in_one_line():
    p, cfg = two_head_model()
    X = np.zeros((3, 6), np.uint8)
    for S in ([], [0, 0], [7], list(range(6))):
        with pytest.raises(ValueError, match="S must hold") as e:
            measures.measure_mechanism(p, cfg, S, X)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="X must be"):
        measures.measure_mechanism(p, cfg, [1], np.zeros((3, 5)))


def test_a_study_row_carries_measures_of_the_function_that_no_symmetry_moves():
    """Issue 47: measure_mechanism's canonical columns (row_kinds.MECHANISM_CANONICAL) are equal
    (1e-9 relative) after LN1's, LNf's and per-head Q/K and V/O scales, while the raw C and score
    scale move under them, so the check can fail; and a row of them is read back as written."""
    r = training.study_run(dict(T=12, m=80, steps=40, n_test=100, seed=5, d=16, heads=4, mlp=8,
                             dtype="float64", log_every=0), log=None)
    p, cfg = r["params"], r["cfg"]
    X = np.random.default_rng(0).integers(0, 2, (50, 12)).astype(float)
    ref = measures.measure_mechanism(p, cfg, r["S"], X)
    assert set(row_kinds.MECHANISM_CANONICAL) <= set(ref) <= set(workers.MEASURED) | {
        "per_head", "ln1_gain_rms", "ln1_shift_norm", "B_X_token", "B_X_position", "B_X_in_S"}
    for q in (symmetry.scale_ln(p, cfg, "ln1", 2.0), symmetry.scale_ln(p, cfg, "lnf", 0.3),
              symmetry.mix_qk(p, cfg, [3.0, 0.2, -1.5, 7.0]), symmetry.mix_vo(p, cfg, 5.0)):
        got = measures.measure_mechanism(q, cfg, r["S"], X)
        for k in row_kinds.MECHANISM_CANONICAL:
            assert got[k] == pytest.approx(ref[k], rel=1e-9), k
    moved = measures.measure_mechanism(symmetry.scale_ln(p, cfg, "ln1", 2.0), cfg, r["S"], X)
    assert abs(moved["covering_constant"] / ref["covering_constant"] - 1) > 1e-3
    assert abs(moved["score_scale"] / ref["score_scale"] - 1) > 1e-3
    row = {k: "1" for k in row_kinds.MECHANISM_FIELDS}
    row.update(design="borderline", model="transformer", task="and", success="1", test_acc="1",
               best_test_acc="1", train_acc="1")
    assert row_kinds._mechanism_row(row)["canon_C"] == "1"
    assert row_kinds._mechanism_row({k: v for k, v in row.items()
                                  if k not in row_kinds.MECHANISM_CANONICAL})["canon_C"] == ""
    with pytest.raises(row_kinds.BadRow, match="canonical"):
        row_kinds._mechanism_row(dict(row, canon_C=""))          # a group half filled


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # mechanism.py
    "measures.measure_mechanism": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], S=np.array([0, 2]),
                                                       X=f["X"]),
                                        legal=dict(S={"list": ARRAY_LIKE}, X={"list": ARRAY_LIKE}),
                                        names=dict(p=r"params?")),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over measures.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((measures,), WALK)
