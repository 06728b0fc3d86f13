"""measures.py (studies/lib): the mechanism a trained model ends with, measured (Edelman et al.,
Sections 3 and 4).

In a one-layer model read out at [CLS], the [CLS] token's query does not depend on the input,
and position t holds one of only two tokens (its bit 0 or 1): each head has 2T + 1 possible
scores, and an input's attention weights are the softmax of the T + 1 of them it selects.
measure_mechanism reads everything from those scores and from theory.norm_measures (the norms
the capacity bound counts, theory.covering_constant), on the trained weights and on their
canonical form (symmetry.canonical: no exact symmetry of the model moves those). The mechanism
study (studies.mechanism), its trajectories and the symmetries study measure through here.
"""
import numpy as np

import attn
from theory import covering_constant, covering_parts, norm_measures

from studies.lib import checks, harness, symmetry


ON_S = 0.5          # a head "attends S" when its mean [CLS] attention mass on S is >= this
N_MEASURE = 500     # inputs (the first of the run's own test set) the attention is averaged over


def _cls_scores(p, cfg):  # -> scores [2, T, H] (bit 0, bit 1 at each position), cls [H]
    """The [CLS] query's attention scores q . k_t / sqrt(e) per head, in float64, from the same
    tokens attn.py feeds its head (embedding, then LN1 with the trained gain and shift)."""
    attn.check_params(p, cfg)
    d, H, T = cfg["d"], cfg["heads"], cfg["T"]
    e = d // H
    f = {k: np.asarray(v, np.float64) for k, v in p.items()}
    rows = np.concatenate([(f["E_tok"][:, None, :] + f["E_pos"]).reshape(-1, d), f["cls"][None]])
    if cfg["ln"]:
        rows = attn.layernorm_forward(rows, f["ln1_g"], f["ln1_b"])[0]       # [2T + 1, d]
    q = (rows[-1] @ f["W_Q"] + f["b_Q"]).reshape(H, e)
    k = (rows @ f["W_K"] + f["b_K"]).reshape(-1, H, e)
    s = np.einsum("nhe,he->nh", k, q) * e ** -0.5                              # [2T + 1, H]
    return s[:2 * T].reshape(2, T, H), s[2 * T]


EXACT_TO = 1e-6    # the relative error a normaliser summed the fast way may have and be kept
_U = 2.0 ** -53    # float64's unit roundoff


def _head_attention_on_S(p, cfg, S, X):  # -> mass [H], gap [H]
    """Per head, the means over the inputs X [n, T] of (mass) the [CLS] attention weight on S and
    (gap) the mean score over S minus the mean score over the T - s other bit positions ([CLS]'s
    own score is left out of both). An input's softmax normaliser is the sum of the exp of the
    T + 1 scores it selects; taken for every input at once as E0's total plus X @ (E1 - E0), it
    is a difference, which cancels when the scores are peaked (a head whose largest score is a
    bit the input does not hold: committed rows measured masses of 6.6 and 187). Wherever that
    form's rounding error could exceed EXACT_TO of the normaliser (its bound: 2 gamma_{T+2}
    times the sum of every exp), the input's normaliser and mass on S are taken again as sums
    of positive terms after the input's own largest score (_exact_terms)."""
    sc, s_cls = _cls_scores(p, cfg)
    X = np.asarray(X, np.float64)
    S = np.asarray(S, np.intp)
    T, s = cfg["T"], len(S)
    if X.ndim != 2 or X.shape[1] != T or not len(X):
        raise ValueError(f"X must be [n >= 1, T={T}] bits, got shape {X.shape}")
    if not 1 <= s < T or len(np.unique(S)) != s or S.min() < 0 or S.max() >= T:
        raise ValueError(f"S must hold 1 to T - 1 distinct positions in [0, {T}), got {S.tolist()}")
    top = np.maximum(sc.max((0, 1)), s_cls)                   # [H]: softmax's own shift
    E, e_cls = np.exp(sc - top), np.exp(s_cls - top)
    XS = X[:, S, None]                                        # [n, s, 1]
    Z = E[0].sum(0) + X @ (E[1] - E[0]) + e_cls               # [n, H]: every input's normaliser
    on_S = (E[0][S] * (1 - XS) + E[1][S] * XS).sum(1)         # [n, H]
    k = T + 2
    err = 2 * k * _U / (1 - k * _U) * (E.sum((0, 1)) + e_cls)  # [H]: Z's rounding, at most
    loose = ~(Z * EXACT_TO > err)                             # [n, H] (nan: loose too)
    rows = np.flatnonzero(loose.any(1))
    for part in np.array_split(rows, -(-len(rows) * T * len(top) // 2 ** 21) or 1):
        exact_on_S, exact_Z = _exact_terms(sc, s_cls, X[part], S)
        on_S[part] = np.where(loose[part], exact_on_S, on_S[part])
        Z[part] = np.where(loose[part], exact_Z, Z[part])
    all_scores = sc[0].sum(0) + X @ (sc[1] - sc[0])           # [n, H]: sum of the T bit scores
    S_scores = (sc[0][S] * (1 - XS) + sc[1][S] * XS).sum(1)
    gap = S_scores / s - (all_scores - S_scores) / (T - s)
    return (on_S / Z).mean(0), gap.mean(0)


def _exact_terms(sc, s_cls, X, S):  # -> mass on S [r, H], normaliser [r, H], one shift each
    """For the inputs X [r, T], each head's softmax terms after the input's own largest score:
    the sum over S and the normaliser, both sums of terms in (0, 1] (the normaliser >= 1)."""
    sel = np.where(X[:, :, None] > 0, sc[1], sc[0])           # [r, T, H]: the scores it selects
    top = np.maximum(sel.max(1), s_cls)                       # [r, H]
    w = np.exp(sel - top[:, None, :])
    return w[:, S].sum(1), w.sum(1) + np.exp(s_cls - top)


def _check_support(S, T):
    """S read as positions (array-likes too): 1 to T - 1 distinct integers in [0, T)."""
    A = np.asarray(S) if isinstance(S, (list, tuple, np.ndarray)) else None
    if A is None or A.ndim != 1 or A.dtype.kind not in "iu" or not 1 <= len(A) < T or \
            len(np.unique(A)) != len(A) or A.min() < 0 or A.max() >= T:
        raise ValueError(f"S must hold 1 to T - 1 distinct integer positions in [0, {T}), got "
                         f"{harness.shown(S)}")
    return A.astype(np.intp)


def _check_inputs(X, T):
    """X read as inputs (array-likes too): [n >= 1, T] bits 0/1."""
    A = np.asarray(X) if isinstance(X, (list, tuple, np.ndarray)) else None
    if A is None or A.dtype.kind not in "biuf" or A.ndim != 2 or A.shape[1] != T or not len(A):
        raise ValueError(f"X must be [n >= 1, T={T}] bits 0/1, got {harness.shown(X)}")
    checks.check_01("X", A, "bits")
    return A


def measure_mechanism(p, cfg, S, X, canonical=True):
    """The mechanism of a trained model (params p, attn.py config cfg) on its support S, averaged
    over the inputs X [n, T] -> dict of floats (and per_head lists); with canonical, also the
    norms on the model's canonical form (_canonical_measures: about two thirds of the time, which
    a trajectory, reading none of them, leaves out).

    What is taken, per head h (theory.norm_measures, with the biases folded in):
      score scale   ||W_QK,h||_2 B_X^2: W_QK,h = [W_Q; b_Q]_h [W_K; b_K]_h^T / sqrt(e), the matrix
                    whose bilinear form is the head's score (attn.py's 1/sqrt(e) included), and
                    B_X = sqrt(B^2 + 1), B the largest norm of the 2T + 1 distinct tokens that
                    enter attention (after LN1 with its trained gain and shift), the 1 the bias
                    coordinate. |score| <= score scale for every input.
      norm_V, norm_O  ||[W_V; b_V]_h||_2 and ||W_O,h||_2 (spectral norms)
      covering_constant  C of the reconstructed bound (covering_constant), all heads together
    Keys: B_X, covering_constant; score_scale, norm_V, norm_O: the largest over the heads;
    top_head: the head whose mean [CLS] attention mass on S is largest, and its mass_on_S,
    score_gap (mean score on S minus mean score on the other bit positions, averaged over X) and
    top_score_scale, top_norm_V, top_norm_O; heads_on_S: how many heads put a mean mass >= ON_S
    on S; where B_X comes from (norm_measures): ln1_gain_rms, ln1_shift_norm, B_X_token ("cls",
    "bit0", "bit1"), B_X_position (-1 for [CLS]) and B_X_in_S (1 when that position is in S);
    C's other factors (issue 38, row_kinds.MECHANISM_FACTORS): readout_norm and mlp_factor (L_after
    is their product), qk_fro and v_21 (the largest head's ||W_QK||_F and ||W_V||_{2,1}) and the
    head sums theory.COVERING_SUMS, from which theory.covering_from_parts gives C again;
    per_head: each of score_scale, norm_V, norm_O, mass_on_S, score_gap per head."""
    attn.check_config(cfg)
    attn.check_params(p, cfg)
    S, X = _check_support(S, cfg["T"]), _check_inputs(X, cfg["T"])
    harness.need(isinstance(canonical, bool), "canonical", canonical, "True or False")
    nm = norm_measures(p, cfg)
    mass, gap = _head_attention_on_S(p, cfg, S, X)
    at = nm["B_X_position"]
    scale = np.asarray(nm["qk_spec"]) * nm["B_X"] ** 2
    per_head = dict(score_scale=scale, norm_V=np.asarray(nm["v_spec"]),
                    norm_O=np.asarray(nm["o_spec"]), mass_on_S=mass, score_gap=gap)
    h = int(np.argmax(mass))
    return dict(B_X=nm["B_X"], covering_constant=covering_constant(nm),
                score_scale=float(scale.max()), norm_V=float(per_head["norm_V"].max()),
                norm_O=float(per_head["norm_O"].max()), top_head=h, mass_on_S=float(mass[h]),
                score_gap=float(gap[h]), heads_on_S=int((mass >= ON_S).sum()),
                top_score_scale=float(scale[h]), top_norm_V=float(per_head["norm_V"][h]),
                top_norm_O=float(per_head["norm_O"][h]),
                **{k: nm[k] for k in ("ln1_gain_rms", "ln1_shift_norm", "B_X_token",
                                      "B_X_position")},
                B_X_in_S=int(at >= 0 and at in set(np.asarray(S).tolist())),
                readout_norm=nm["readout_norm"], mlp_factor=nm["mlp_factor"],
                qk_fro=float(max(nm["qk_fro"])), v_21=float(max(nm["v_21"])), **covering_parts(nm),
                **(_canonical_measures(p, cfg, h) if canonical else {}),
                per_head={k: v.tolist() for k, v in per_head.items()})


def _canonical_measures(p, cfg, top):
    """The same norms on symmetry.canonical's form of p (issue 47: measures of the function, which
    no exact symmetry of the model moves; row_kinds.MECHANISM_CANONICAL): its C, the score scale of
    the largest head and of the head `top`, the largest ||W_V||_2, ||W_O||_2, ||W_QK||_F and
    ||W_V||_{2,1}, the readout's norm and the MLP's factor. Canonical B_X is sqrt(d + 1) (every
    LayerNorm's gain folded into what reads it), so the score scale is ||W_QK||_2 (d + 1)."""
    nm = norm_measures(symmetry.canonical(p, cfg), dict(cfg, dtype="float64"))   # its dtype
    scale = np.asarray(nm["qk_spec"]) * nm["B_X"] ** 2
    return dict(canon_C=covering_constant(nm), canon_score_scale=float(scale.max()),
                canon_top_score_scale=float(scale[top]), canon_norm_V=float(max(nm["v_spec"])),
                canon_norm_O=float(max(nm["o_spec"])), canon_qk_fro=float(max(nm["qk_fro"])),
                canon_v_21=float(max(nm["v_21"])), canon_readout_norm=nm["readout_norm"],
                canon_mlp_factor=nm["mlp_factor"])
