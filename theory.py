"""theory.py: the paper's theory as checks that run on the project's own model.

    python theory.py        prints the report of parts 1-3 (about 20-30 s on 2 cores); -h: usage

[E] Edelman, Goel, Kakade, Zhang, Inductive Biases and Variable Creation in Self-Attention
Mechanisms, ICML 2022 (arXiv:2110.10090), Sections 3 (capacity) and 4 (sparse variables).
[S] Shim, A Probabilistic Interpretation of Transformers (arXiv:2205.01080, 2022): only its abstract
was available to us, so part 3 checks the standard mathematics that makes the abstract's sentences
precise (exponential families, log-sum-exp, LayerNorm geometry); none of it is quoted from [S].

It imports the model (attn.py), the data (data.py) and the fast path (fast.py) only, so it can be
copied beside them; the studies import its quantities, and the report that trains models and
measures them with these quantities is studies/theory_report.py. Every number the report prints
carries a tag: [theorem check] (must hold: AssertionError if not, and test_all.py tests it too),
[measurement] (measured on this code; no claim), [demonstration of a limit] (an example where a
tempting statement fails; reported, not asserted). Everything goes through attn.py's own
functions (row convention y = x @ W + b). Top to bottom:
  0. numerical helpers: numerical_jacobian (f called as f(x)) and fit_line; rel_error is attn.py's.
  1. capacity [E, Section 3]: softmax's l_inf -> l_1 Lipschitz constant, norm measures of a
     parameter dict and the covering constant C (the studies measure every trained run with
     them), the covering-number / generalization bound in its *reconstructed* shape.
  2. sparse variable creation [E, Section 4]: the construction's code width and the paper's score
     gap, hand-built weights for attn.py's one-head model computing s-sparse AND, OR, parity,
     majority and any s-junta exactly, checked through fast.py's forward (the training path) or
     either of attn.py's two exact forms.
  3. the probabilistic reading [S]: log-sum-exp gradient = attention, Hessian = covariance, tied
     residual attention expands, LayerNorm contracts, InfoNCE's gradient.
  4. the report: parts 1-3 printed, every theorem check asserted; then the command line.
  5. the checks of the doors a user calls (numerical_jacobian, fit_line, norm_measures, the
     covering constant and bound, the construction, main): one line each, a ValueError naming
     the value. The internals they call take what numpy takes.
"""
import math
import os
import signal
import sys
import time

import numpy as np

import attn
import data
import fast
from attn import rel_error


def require(ok, what):
    """A theorem check: AssertionError naming what failed (unlike `assert`, kept under -O)."""
    if not ok:
        raise AssertionError(f"theorem check failed: {what}")


# ======== 0. NUMERICAL HELPERS =================================================================
# attn.py's numerical_gradient(f, x) calls f() (a closure reading x) and is the one of that name;
# the checks here differentiate functions of x, f(x), scalar or array-valued, with
# numerical_jacobian; fit_line is the report's (and the studies') least-squares line. rel_error
# is attn.rel_error.

def numerical_jacobian(f, x, h=1e-6):  # f: x [...] -> y [k...]; -> [k..., ...] float64
    """Central differences of f at x, f called as f(x): J[j..., i...] = (f(x + h e_i) -
    f(x - h e_i))[j...] / (the step x really took, about 2h). x is a writeable float64 ndarray of
    any shape, moved in place one element at a time and restored afterwards, also if f raises.
    For f: [d] -> [k] the result is [k, d]; for a scalar f it is the gradient, x's shape. Error:
    O(h^2) from truncation plus O(2.2e-16 |f| / h) from rounding."""
    _check_arg(callable(f), f"f must be a function of x, got {type(f).__name__}")
    _check_arg(isinstance(x, np.ndarray) and x.dtype == np.float64 and x.flags.writeable and x.size,
               f"x must be a writeable float64 numpy array (it is moved in place) of at least one "
               f"element, got {_shown(x)}")
    h = _check_number("h", h, real=True)
    diffs = []
    for i in np.ndindex(x.shape):
        old = x[i]
        try:
            x[i] = old + h
            up, f_up = x[i], np.array(f(x), np.float64)          # copies: f may return a view
            x[i] = old - h
            down, f_down = x[i], np.array(f(x), np.float64)
        finally:
            x[i] = old                                           # restored even when f raises
        diffs.append((f_up - f_down) / (up - down))              # the step x really took
    return np.stack(diffs, axis=-1).reshape(diffs[0].shape + x.shape)


def fit_line(x, y):  # [n], [n] -> (slope, intercept, R^2)
    """Least squares y ~ slope * x + intercept, n >= 2 finite points, x not constant (the fits of
    the report's norms in ln T and s, and the studies' laws in T). R^2 = 1 - residual sum of
    squares / total sum of squares (1.0 when y is constant)."""
    x, y = _check_reals("x", x, 1), _check_reals("y", y, 1)
    _check_arg(x.shape == y.shape and np.ptp(x) > 0, f"x and y must have one length and x at least "
               f"2 distinct values, got shapes {x.shape} and {y.shape}")
    a, b = np.polyfit(x, y, 1)
    ss = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - ((y - (a * x + b)) ** 2).sum() / ss if ss > 0 else 1.0
    return float(a), float(b), float(r2)


# ======== 1. CAPACITY (Edelman Section 3) =======================================================
# 1a. Softmax is Lipschitz from l_inf to l_1 (the paper's Corollary A.7 gives the constant 2).
#     The tight constant is 1 (our derivation, not the paper's): along b(t) = a + t v with
#     ||v||_inf <= 1, d softmax/dt = p * (v - <p, v>), whose l_1 norm is E_p|v - E_p v|, the mean
#     absolute deviation of a variable in [-1, 1], which is at most 1. It approaches 1 when half
#     the probability mass moves up and half down by the same small amount.

def softmax_l1_linf_ratio(a, b):  # [..., T], [..., T] -> [...]
    """||softmax(a) - softmax(b)||_1 / ||a - b||_inf, softmax from attn.softmax_forward."""
    den = np.abs(a - b).max(-1)                            # 0/0 (nan) where a == b
    num = np.abs(attn.softmax_forward(a)[0] - attn.softmax_forward(b)[0]).sum(-1)
    return num / den


def balanced_direction(a):  # [n, T] -> [n, T] in {-1, +1}
    """The near-worst direction at a: split positions into two groups of softmax mass ~1/2 each
    (greedy, largest weight first) and move one group up, the other down."""
    p = attn.softmax_forward(a)[0]
    v = np.empty_like(a)
    rows = np.arange(a.shape[0])
    up, down = np.zeros(a.shape[0]), np.zeros(a.shape[0])
    for idx in np.argsort(-p, axis=-1).T:                  # largest weight first
        pj = p[rows, idx]
        to_up = up <= down                                 # add to the lighter group
        v[rows, idx] = np.where(to_up, 1.0, -1.0)
        up, down = up + np.where(to_up, pj, 0.0), down + np.where(to_up, 0.0, pj)
    return v


def softmax_lipschitz_search(rng, n_random=6000, n_climb=400):
    """Largest l_1/l_inf ratio found by three searches -> dict(random, constructed, climbed,
    overall). random: Gaussian a, b at scales 1e-2..1e2, T in {2, 3, 5, 10, 100, 1000};
    constructed: random a, b = a + eps * balanced_direction(a), eps in [1e-3, 1]; climbed: from
    random pairs (T in {2, 3, 4, 8}), random steps on (a, b) kept when the ratio grows."""
    Ts = (2, 3, 5, 10, 100, 1000)
    best_random = best_built = best_climb = 0.0
    for T in Ts:
        n = n_random // len(Ts)
        a = 10 ** rng.uniform(-2, 2, (n, 1)) * rng.standard_normal((n, T))
        b = a + 10 ** rng.uniform(-3, 1, (n, 1)) * rng.standard_normal((n, T))
        best_random = max(best_random, softmax_l1_linf_ratio(a, b).max())
    for T in (2, 4, 10, 100):
        a = rng.uniform(-0.5, 0.5, (50, 1)) * rng.standard_normal((50, T))
        b = a + 10 ** rng.uniform(-3, 0, (50, 1)) * balanced_direction(a)
        best_built = max(best_built, softmax_l1_linf_ratio(a, b).max())
    for T in (2, 3, 4, 8):
        a, b = rng.standard_normal((64, T)), rng.standard_normal((64, T))
        r, step = softmax_l1_linf_ratio(a, b), 0.3
        for _ in range(n_climb):
            a2 = a + step * rng.standard_normal(a.shape)
            b2 = b + step * rng.standard_normal(b.shape)
            r2 = softmax_l1_linf_ratio(a2, b2)
            keep = r2 > r
            a[keep], b[keep], r[keep] = a2[keep], b2[keep], r2[keep]
            step *= 0.995
        best_climb = max(best_climb, r.max())
    return dict(random=float(best_random), constructed=float(best_built),
                climbed=float(best_climb), overall=float(max(best_random, best_built, best_climb)))


# 1b. Norm measures of a parameter dict (attn.init_params, a training result, or a construction).
#     Per head h (columns h*e:(h+1)*e of W_Q, W_K, W_V; rows of W_O), with the biases folded in as
#     a constant-1 input coordinate, x~ = [x, 1]  (so a trained model's b_Q, b_K, b_V count too):
#       W_QK = (1/sqrt(e)) [W_Q; b_Q] [W_K; b_K]^T   [d+1, d+1]  the score of x_t is z~ W_QK x~_t^T
#       W_V  = [W_V; b_V]                             [d+1, e]
#       W_O  = W_O[h rows]                            [e, d]
#     B_X = max row norm of the tokens fed to attention (after LN1 when cfg["ln"]) with the 1 folded
#     in: sqrt(B^2 + 1). Before LN1 position t holds one of only two rows, so the max over the
#     2T + 1 distinct rows is the max over every possible input.

def spectral_norm(W):  # [a, b] -> float
    return float(np.linalg.norm(np.asarray(W, np.float64), 2))


def norm_21(W):  # [a, b] -> float: sum over columns of the column 2-norms
    return float(np.linalg.norm(np.asarray(W, np.float64), axis=0).sum())


def readout_and_mlp_factors(p, cfg):
    """The Lipschitz constant L_after of the map from the attention output (after W_O) to the
    logit, *leaving out LN2 and LNf* (their constant 1/sigma depends on the activations, not on
    T), as its two factors: (readout ||w||, MLP 1 + L_act ||W_1||_2 ||W_2||_2), L_act = 1 for
    ReLU and 1.13 for GELU; the MLP factor is 1 without an MLP. L_after is their product."""
    mlp = 1.0
    if cfg["mlp"]:
        L_act = 1.0 if cfg["act"] == "relu" else 1.13
        mlp += L_act * spectral_norm(p["W_1"]) * spectral_norm(p["W_2"])
    return float(np.linalg.norm(p["w"])), mlp


def norm_measures(p, cfg):
    """Edelman Section 3's norm bounds for a parameter dict -> dict.
    Keys: B_X, L_after and its two factors readout_norm and mlp_factor
    (readout_and_mlp_factors), and per-head lists qk_spec, qk_21, qk_fro,
    v_spec, v_21, o_spec (spectral, (2,1) and Frobenius norms of the per-head matrices above);
    and where B_X comes from: ln1_gain_rms ||g||/sqrt(d) and ln1_shift_norm ||b|| of LN1 (nan
    without LayerNorm), B_X_token, the token of largest norm ("cls", "bit0" or "bit1": bit value
    b at a position), and B_X_position, its position t in 0..T-1 (-1 for [CLS]).
    These are norms of the parametrisation p: the model's exact symmetries (symmetry.py, e.g. LN1's
    gain against W_Q, W_K, W_V) move B_X and the single norms with every logit fixed. Taken of
    symmetry.canonical(p, cfg) they are measures of the function.
    """
    attn.check_params(p, cfg)
    bad = [k for k, v in p.items() if not np.isfinite(v).all()]   # a diverged run's weights
    _check_arg(not bad, f"params must be finite numbers, got nan or inf in {bad}")
    d, H = cfg["d"], cfg["heads"]
    e = d // H
    f64 = {k: np.asarray(p[k], np.float64) for k in attn.ATTN_KEYS}
    rows = np.concatenate([(p["E_tok"][:, None, :] + p["E_pos"]).reshape(-1, d),
                           p["cls"][None]]).astype(np.float64)      # the 2T + 1 distinct tokens
    if cfg["ln"]:
        rows = attn.layernorm_forward(rows, p["ln1_g"].astype(np.float64),
                                      p["ln1_b"].astype(np.float64))[0]
    norms = np.linalg.norm(rows, axis=1)                 # [2T + 1]: bit 0 at t, bit 1 at t, [CLS]
    i, T = int(np.argmax(norms)), cfg["T"]
    g, b = ((np.asarray(p[k], np.float64) for k in ("ln1_g", "ln1_b")) if cfg["ln"]
            else (np.full(d, np.nan), np.full(d, np.nan)))
    keys = ("qk_spec", "qk_21", "qk_fro", "v_spec", "v_21", "o_spec")
    readout, mlp = readout_and_mlp_factors(p, cfg)
    out = dict(B_X=float(np.hypot(norms[i], 1.0)), L_after=readout * mlp, readout_norm=readout,
               mlp_factor=mlp,
               ln1_gain_rms=float(np.linalg.norm(g) / math.sqrt(d)),
               ln1_shift_norm=float(np.linalg.norm(b)),
               B_X_token="cls" if i == 2 * T else f"bit{i // T}",
               B_X_position=-1 if i == 2 * T else i % T, **{k: [] for k in keys})
    for h in range(H):
        c = slice(h * e, (h + 1) * e)
        Q = np.vstack([f64["W_Q"][:, c], f64["b_Q"][c]])                # [d+1, e]
        K = np.vstack([f64["W_K"][:, c], f64["b_K"][c]])
        V = np.vstack([f64["W_V"][:, c], f64["b_V"][c]])
        W_QK = (Q @ K.T) * e ** -0.5                                       # [d+1, d+1]
        for k, v in zip(keys, (spectral_norm(W_QK), norm_21(W_QK), float(np.linalg.norm(W_QK)),
                               spectral_norm(V), norm_21(V), spectral_norm(f64["W_O"][c]))):
            out[k].append(v)
    return out


# 1c. The covering number and the generalization gap, in the RECONSTRUCTED shape (Edelman
#     Section 3 gives the shape; we could not confirm its exact constants, so these are ours, in
#     the style of Bartlett-Foster-Telgarsky 2017). For head h, with L_h = ||W_O,h||_2 * L_after:
#       scores   z~ W_QK x~_t = <W_QK, z~ x~_t^T> over the m(T+1) (sample, position) pairs: a
#                linear class in W_QK of scale a1 = ||W_QK||_F B_X^2 (Frobenius: it is <= the (2,1)
#                norm, and that of e_CLS u^T, ||u||_1, is loose by up to sqrt(d)); an l_inf error e1
#                in the scores is an l_1 error 2 e1 in the weights (1a): rho1 = 2 B_X ||W_V||_2 L_h
#       values   x~_t W_V over the m(T+1) tokens: a2 = ||W_V||_{2,1} B_X, rho2 = L_h
#       readout  the head output (norm <= B_X ||W_V||_2) read out: a3 = B_X ||W_V||_2 L_h, rho3 = 1
#     A linear class of scale a has an eps-cover with log N <= a^2 log(2 d n) / eps^2 (Zhang 2002's
#     lemma, n points). Splitting eps = sum_i rho_i eps_i optimally gives
#       log N_inf(F; eps) <= C * log(2 d m T) / eps^2,   C = (sum_{h,i} (a_i rho_i)^(2/3))^3
#     and the gap sqrt(C log(2 d m T) / m) (Dudley's integral, log factors dropped). T enters
#     only through the logarithm. The studies measure their trained runs with these functions
#     (studies/mechanism.py imports them: one copy, and theory imports no study).

def covering_constant(nm):
    """C of the reconstructed bound from norm_measures(...) output; see the comment above. Summed
    head by head and term by term, as the comment writes it (covering_parts regroups the same sum
    by factor, and a test holds the two equal)."""
    _check_nm(nm)
    B, total = nm["B_X"], 0.0
    for qkF, v2, v21, o2 in zip(nm["qk_fro"], nm["v_spec"], nm["v_21"], nm["o_spec"]):
        L = o2 * nm["L_after"]
        terms = ((qkF * B * B) * (2 * B * v2 * L), (v21 * B) * L, B * v2 * L)
        total += sum(t ** (2.0 / 3.0) for t in terms)
    return total ** 3


# C regrouped by factor (issue 38: what a separation in C is made of). Every term of a head is
# linear in L_after and in ||W_O,h||, the score term goes as B_X^3 and the two others as B_X, so
#     C = L_after^2 (B_X^2 S_scores + B_X^(2/3) (S_values + S_readout))^3
# with the head sums S_scores = sum_h (2 ||W_QK,h||_F ||W_V,h||_2 ||W_O,h||_2)^(2/3),
# S_values = sum_h (||W_V,h||_{2,1} ||W_O,h||_2)^(2/3),
# S_readout = sum_h (||W_V,h||_2 ||W_O,h||_2)^(2/3).
# Scaling every head's W_QK by a scales S_scores by a^(2/3); every W_V (or W_O) by a, all three
# sums by a^(2/3), so C by a^2; L_after by a, C by a^2. So five numbers per run give C, and C with
# any one factor changed, exactly.
COVERING_SUMS = ("heads_scores", "heads_values", "heads_readout")


def covering_parts(nm):
    """norm_measures(...) output -> dict of the head sums COVERING_SUMS (above)."""
    _check_nm(nm)
    o, v2, e = np.asarray(nm["o_spec"]), np.asarray(nm["v_spec"]), 2.0 / 3.0
    return dict(heads_scores=float(((2 * np.asarray(nm["qk_fro"]) * v2 * o) ** e).sum()),
                heads_values=float(((np.asarray(nm["v_21"]) * o) ** e).sum()),
                heads_readout=float(((v2 * o) ** e).sum()))


def covering_from_parts(B_X, L_after, heads_scores, heads_values, heads_readout):
    """C = L_after^2 (B_X^2 heads_scores + B_X^(2/3) (heads_values + heads_readout))^3 (above);
    numbers >= 0 or arrays of them (numpy broadcasts them together)."""
    parts = dict(B_X=B_X, L_after=L_after, heads_scores=heads_scores, heads_values=heads_values,
                 heads_readout=heads_readout)
    B, L_after, heads_scores, heads_values, heads_readout = (_check_reals(k, v, lo=0.0)
                                                             for k, v in parts.items())
    return L_after ** 2 * (B ** 2 * heads_scores + B ** (2.0 / 3.0) * (heads_values
                                                                       + heads_readout)) ** 3


def log_covering_bound(C, d, m, T, eps):
    """Reconstructed shape: log N_inf(F; eps; m samples of length T) <= C log(2 d m T) / eps^2."""
    C, eps = _check_number("C", C, real=True), _check_number("eps", eps, real=True)
    d, m, T = _check_number("d", d), _check_number("m", m), _check_number("T", T)
    return C * math.log(2 * d * m * T) / eps ** 2


def generalization_gap(C, d, m, T):
    """Reconstructed shape of the gap: sqrt(C log(2 d m T) / m) (constants not the paper's)."""
    return math.sqrt(log_covering_bound(C, d, m, T, 1.0) / m)


def samples_for_gap(C, d, T, gap):
    """Smallest m with generalization_gap(C, d, m, T) <= gap: solve m = C log(2dmT) / gap^2."""
    C, gap = _check_number("C", C, real=True), _check_number("gap", gap, real=True)
    d, T = _check_number("d", d), _check_number("T", T)
    _check_arg(gap * gap > 0 and C / (gap * gap) < 1e250, f"gap {gap} is too small for C = {C}: "
               f"the samples it needs leave a float's range")
    m = max(1.0, C / gap ** 2)
    for _ in range(100):                       # a contraction: the right side grows like log m
        m = C * math.log(2 * d * m * T) / gap ** 2
    return int(math.ceil(m))


def linear_class_samples(T, gap):
    """Halfspaces on the T bits have VC dimension T + 1; the VC bound's shape sqrt(VC log m / m)
    <= gap asks for m = (T + 1) log(m) / gap^2 samples. Grows like T."""
    T, gap = _check_number("T", T), _check_number("gap", gap, real=True)
    _check_arg(gap * gap > 0 and (T + 1) / (gap * gap) < 1e250, f"gap {gap} is too small for "
               f"T = {T}: the samples it needs leave a float's range")
    m = (T + 1) / gap ** 2
    for _ in range(100):
        m = (T + 1) * math.log(max(m, 2.0)) / gap ** 2
    return int(math.ceil(m))


# ======== 2. SPARSE VARIABLE CREATION (Edelman Section 4): weights built by hand, no training ===
# attn.py's model with cfg = default_config(T, d, heads=1, mlp=k, ln=False, act="relu",
# dtype="float64"). Coordinates of the residual stream, d = d_p + 3:
#   [0, d_p)  positional code p_t (random +-1/sqrt(d_p), unit norm; d_p = ceil(16 s ln T))
#   BIT       the token's bit (E_tok[b] = b e_BIT); in h it holds the head output
#   CLS       1 on the [CLS] token, 0 elsewhere
#   OUT       the MLP writes the decoded label here; the readout is w = e_OUT
# Scores: the [CLS] query reads its CLS coordinate, the keys read the codes:
#   W_QK = e_CLS u^T  with  u . p_i = r_i exactly for i in S  (u = P_S^T (P_S P_S^T)^-1 r, the dual
#   vectors of the codes; with u = sum_i p_i the cross terms p_i . p_j would make the s weights
#   unequal), so score(t) = u . p_t: r_i on S, about N(0, ||u||^2 / d_p) elsewhere, 0 for [CLS].
#     symmetric targets (and, or, parity, majority):  r_i = R
#     arbitrary targets (junta):                      r_j = R + (s - 1 - j) ln 2 for the j-th
#       position of S, so its weight is proportional to 2^(s-1-j) (first position most
#       significant, as in data.py) and the head output is an injective code of the s bits.
# Values: the bit. No key sees the bit, so the attention weights A are the same for every input
# and the head output is exactly o = sum_{i in S} A_i b_i + sum_{t not in S} A_t b_t
#   = level(bits) + leak,  0 <= leak <= delta = sum_{t not in S, t < T} A_t.
# R is the smallest value (bisection) with delta <= spacing / 4, spacing = the gap between adjacent
# levels (A_i on S for symmetric targets, the smallest A_i for a junta). This is the paper's
# R ~ log((T - s) / (s eps)): the QK norm grows like log T.
# Decoder: a ReLU MLP interpolating target +-1 at each level centre (level + delta/2), piecewise
# linear with a kink at every centre but the last (s + 1 levels, or 2^s for a junta). Its slopes
# are <= 2 / spacing, so within a level's interval the output moves by <= 1/4: |logit| >= 3/4.

def construction_width(T, s, code_factor=16.0):
    """The width d_p of the construction's positional codes, max(8, ceil(code_factor * s * ln T)):
    random +-1/sqrt(d_p) codes stay nearly orthogonal over T positions at about 16 s ln T (about
    8 ln T was seen to fail). build_sparse_head builds its heads with it; studies/lib/report.py's
    width table sets it beside the widths trained."""
    T = _check_number("T", T, real=True, lo=1)                 # T: a plot's axis too
    s = _check_number("s", s, hi=math.floor(T) + 1)            # s <= T
    code_factor = _check_number("code_factor", code_factor, real=True, hi=10**6)
    return max(8, int(math.ceil(code_factor * s * math.log(max(T, 2)))))


def paper_score_gap(T, s, eps):  # T: int or array -> float or array
    """The paper's score gap R = ln((T - s) / (s eps)) between S and the other positions, for which
    the T - s positions outside S hold attention mass about eps (Edelman Section 4): the QK norm
    the construction needs grows like log T."""
    Ts, s, eps = _check_reals("T", T), _check_number("s", s), _check_number("eps", eps, real=True)
    _check_arg(np.all(Ts > s) and np.all(Ts == np.round(Ts)), f"T must be integers > s = {s}, got "
               f"{_shown(T)}")
    return np.log((Ts - s) / (s * eps))


def positional_codes(T, d_p, rng):  # -> [T, d_p], rows of unit norm
    """Random +-1/sqrt(d_p) codes: nearly orthogonal once d_p ~ s ln T (Edelman Section 4)."""
    return rng.choice(np.array([-1.0, 1.0]), size=(T, d_p)) * d_p ** -0.5


def relu_interpolant(x, y):  # [n] increasing knots, [n] targets -> (knots, coefs, y0)
    """f(z) = y0 + sum_k coefs_k relu(z - knots_k): the piecewise-linear interpolant of (x, y),
    constant left of x[0]. Units whose slope change is zero are dropped."""
    slopes = np.diff(y) / np.diff(x)                       # [n-1]
    coefs = np.diff(np.concatenate([[0.0], slopes]))       # slope change at x[0..n-2]
    keep = coefs != 0
    return x[:-1][keep], coefs[keep], float(y[0])


def _level_bits(task):  # -> [n_levels, s] bit patterns, one per level, in level order
    s = task.s
    if task.name == "junta":
        idx = np.arange(2 ** s)
        return (idx[:, None] >> np.arange(s - 1, -1, -1)) & 1          # first bit most significant
    return (np.arange(s + 1)[:, None] > np.arange(s)).astype(np.int64)  # k ones, k = 0..s


def _solve_scores(P, S, offsets):  # P [T, d_p] codes, S [s], offsets [s]
    """-> (R, u, A, delta, spacing) for the smallest R with delta <= spacing / 4 (doubling, then 60
    bisection steps): u [d_p] with u . p_i = R + offsets_i on S, [CLS]'s attention A [T+1] (last:
    [CLS], whose key is 0), delta = A's mass outside S, spacing = the least A_i on S."""
    T, s = P.shape[0], len(S)
    dual = P[S].T @ np.linalg.inv(P[S] @ P[S].T)  # [d_p, s]: p_i . dual_j = 1 if i == j else 0
    outside = np.ones(T, bool)
    outside[S] = False
    def weights(R):
        u = dual @ (R + offsets)
        A = attn.softmax_forward(np.append(P @ u, 0.0))[0]
        return u, A, A[:T][outside].sum(), A[S].min()
    def leaky(R):                                 # once per R: the softmax over T+1 is the cost
        _, _, delta, spacing = weights(R)
        return delta > spacing / 4
    lo, hi = 0.0, 1.0
    while leaky(hi):
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise RuntimeError(f"no R makes the leak small for T={T}, s={s}; raise code_factor")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if leaky(mid) else (lo, mid)
    return (hi,) + weights(hi)


def build_sparse_head(task, rng, code_factor=16.0):
    """Weights for attn.py's one-head model computing task.label exactly -> (params, cfg, info).
    task: a data.SparseTask (data.make_task), any of data.TASKS. rng draws the codes.
    info: d_p, R, delta (mass outside S), spacing, mass_on_S, units, W1_fro, W2_fro,
    decoder_norm (their product), qk_spec (||W_QK||_2 = ||u||).
    See the comment block above for the construction.
    """
    _check_arg(isinstance(task, data.SparseTask), f"task must be a data.SparseTask, got "
               f"{_shown(task)}")
    _check_arg(isinstance(rng, np.random.Generator), f"rng must be a numpy Generator, got "
               f"{_shown(rng)}")
    T, s, S = task.T, task.s, task.S
    d_p = construction_width(T, s, code_factor)
    P = positional_codes(T, d_p, rng)                                   # [T, d_p]
    offsets = (s - 1 - np.arange(s)) * math.log(2.0) if task.name == "junta" else np.zeros(s)
    R, u, A, delta, spacing = _solve_scores(P, S, offsets)
    bits = _level_bits(task)                                            # [n_levels, s]
    levels = bits @ A[S]                                                # level of each pattern
    X_lv = np.zeros((len(bits), T), np.uint8)
    X_lv[:, S] = bits
    y_lv = 2.0 * task.label(X_lv) - 1.0                                 # +-1, from data.py's labels
    knots, coefs, y0 = relu_interpolant(levels + delta / 2, y_lv)
    d, BIT, CLS, OUT = d_p + 3, d_p, d_p + 1, d_p + 2
    cfg = attn.default_config(T=T, d=d, heads=1, mlp=len(knots), ln=False, act="relu",
                              dtype="float64")
    p = attn.init_params(cfg, rng, std=0.0)                             # all zeros, right shapes
    p["E_pos"][:, :d_p] = P
    p["E_tok"][1, BIT] = 1.0
    p["cls"][CLS] = 1.0
    p["W_Q"][CLS, 0] = d ** 0.5                       # undoes attn.py's 1/sqrt(e) score scale
    p["W_K"][:d_p, 0] = u                             # so W_QK = e_CLS u^T
    p["W_V"][BIT, 0] = 1.0                            # value = the bit
    p["W_O"][0, BIT] = 1.0                            # h[BIT] = head output ([CLS] has BIT = 0)
    p["W_1"][BIT, :] = 1.0
    p["b_1"][:] = -knots
    p["W_2"][:, OUT] = coefs
    p["b_2"][OUT] = y0
    p["w"][OUT] = 1.0
    info = dict(d_p=d_p, R=R, delta=float(delta), spacing=float(spacing),
                mass_on_S=float(A[S].sum()), units=len(knots),
                W1_fro=float(np.linalg.norm(p["W_1"])), W2_fro=float(np.linalg.norm(p["W_2"])),
                qk_spec=float(np.linalg.norm(u)))
    info["decoder_norm"] = info["W1_fro"] * info["W2_fro"]
    return p, cfg, info


def check_construction(p, cfg, task, rng, n_fill=2, path="fast"):
    """Run the model on every pattern of the s relevant bits, each with the other T - s bits all
    0, all 1 (the extreme leaks) and n_fill random fair fills -> dict(n, wrong, margin). margin =
    min over inputs of (logit if the label is 1 else -logit); > 0 means all correct. path: which
    exact form computes the logits: "fast" (fast.model_forward, what training runs; the
    default), "cls" (attn.model_forward, the [CLS] row) or "full" (attn.full_model_forward)."""
    _check_arg(path in ("fast", "cls", "full"), f"path must be 'fast', 'cls' or 'full', got "
               f"{_shown(path)}")
    attn.check_params(p, cfg)
    _check_arg(isinstance(task, data.SparseTask) and task.T == cfg["T"], f"task must be a "
               f"data.SparseTask with T={cfg['T']}, got {_shown(task)}")
    _check_arg(isinstance(rng, np.random.Generator), f"rng must be a numpy Generator, got "
               f"{_shown(rng)}")
    n_fill = _check_number("n_fill", n_fill, lo=0, hi=101)
    pats = ((np.arange(2 ** task.s)[:, None] >> np.arange(task.s)) & 1).astype(np.uint8)
    fills = [np.zeros((len(pats), task.T), np.uint8), np.ones((len(pats), task.T), np.uint8)]
    fills += [(rng.random((len(pats), task.T)) < 0.5).astype(np.uint8) for _ in range(n_fill)]
    X = np.concatenate(fills)
    X[:, task.S] = np.tile(pats, (len(fills), 1))
    forward = dict(fast=fast.model_forward, cls=attn.model_forward, full=attn.full_model_forward)
    z = forward[path](p, cfg, X)[0]
    signed = np.where(task.label(X) == 1, z, -z)
    return dict(n=len(X), wrong=int((signed <= 0).sum()), margin=float(signed.min()))


# ======== 3. THE PROBABILISTIC READING (Shim 2022 [S]; standard mathematics, not quotes of [S]) =
# Keys k_j are the rows of K [n, d]; a query q [d]. The categorical family over positions j with
# statistic k_j has log normaliser A(theta) = log sum_j exp(theta . k_j). With inverse
# temperature beta, lse_beta(z) = beta^-1 log sum_j exp(beta z_j), and
#   grad_q lse_beta(K q) = K^T softmax(beta K q)                 attention with values = keys
#   Hess_q lse_beta(K q) = beta Cov_p[k],  p = softmax(beta K q)  positive semidefinite
# Tied residual attention F(q) = q + K^T softmax(beta K q) is the gradient of the 1-strongly convex
# q.q/2 + lse_beta(K q), hence ||F(a) - F(b)|| >= ||a - b|| and det J_F = det(I + beta Cov) >= 1.

def lse(z, beta=1.0):  # [..., n] -> [...]
    """beta^-1 log sum_j exp(beta z_j), stabilised by the data's own max."""
    zb = beta * z
    M = zb.max(-1, keepdims=True)
    return (M[..., 0] + np.log(np.exp(zb - M).sum(-1))) / beta


def lse_grad(K, q, beta=1.0):  # [n, d], [..., d] -> [..., d]
    """K^T softmax(beta K q): the attention readout with values = keys (attn.softmax_forward)."""
    return attn.softmax_forward(beta * (q @ K.T))[0] @ K


def lse_hessian(K, q, beta=1.0):  # [n, d], [d] -> [d, d]
    """beta Cov_p[k] = beta (K^T diag(p) K - mu mu^T), p = softmax(beta K q), mu = K^T p."""
    p = attn.softmax_forward(beta * (K @ q))[0]
    mu = p @ K
    return beta * ((K.T * p) @ K - np.outer(mu, mu))


def head_as_lse_gradient(K, theta, beta=1.0):  # [n, d], [d] -> [d]
    """attn.attention_cls_forward, weights chosen so that its [CLS] output is the lse gradient.
    Tokens [k_j, 0] (j < n) and the [CLS] token [0, 1]; W_Q maps [CLS]'s last coordinate to
    beta sqrt(d+1) theta (undoing the 1/sqrt(e) scale), W_K = W_V = W_O = I. The [CLS] key is 0,
    so the head is the gradient of lse over the keys {k_j} and one extra key 0 (a null category).
    """
    n, d = K.shape
    Xn = np.zeros((1, n + 1, d + 1))
    Xn[0, :n, :d] = K
    Xn[0, n, d] = 1.0
    W_Q = np.zeros((d + 1, d + 1))
    W_Q[d, :d] = beta * (d + 1) ** 0.5 * theta
    eye, zero = np.eye(d + 1), np.zeros(d + 1)
    y, _ = attn.attention_cls_forward(Xn, dict(W_Q=W_Q, b_Q=zero, W_K=eye, b_K=zero, W_V=eye,
                                               b_V=zero, W_O=eye, b_O=zero), heads=1)
    return y[0, :d]


def tied_residual_step(K, x, beta=1.0):  # [n, d], [..., d] -> [..., d]
    """x + K^T softmax(beta K x): one gradient-ascent step on lse_beta with shared keys K."""
    return x + lse_grad(K, x, beta)


def layernorm_plain(x):  # [..., d] -> [..., d]: attn.layernorm_forward with gain 1, shift 0
    d = x.shape[-1]
    return attn.layernorm_forward(x, np.ones(d), np.zeros(d))[0]


def layernorm_jacobian_norm(x):  # [d] -> float: 1 / sqrt(sigma^2 + LN_EPS)
    """Spectral norm of LayerNorm's Jacobian (no affine). LN = centring, then scaling onto the
    sphere of radius sqrt(d): J = (I - 11^T/d - y y^T/d) / sqrt(sigma^2 + eps), and the bracket is
    the orthogonal projector off {1, y} (for d >= 3), so ||J|| = 1 / sqrt(sigma^2 + eps)."""
    return float(1.0 / np.sqrt(x.var() + attn.LN_EPS))


def infonce_loss(anchor, cands, beta=1.0):  # [d], [n, d] (row 0 the positive) -> scalar
    """-log softmax(beta cands @ anchor)[0]: the NLL of the positive in the categorical family."""
    z = beta * (cands @ anchor)
    return float(lse(z) - z[0])


def infonce_grad(anchor, cands, beta=1.0):  # -> [d]
    """beta (E_p[t] - t_+), p = softmax(beta cands @ anchor): an attention readout minus the
    positive (with beta = 1: E_p[T] - T_+)."""
    return beta * (lse_grad(cands, anchor, beta) - cands[0])


def pairwise_ratios(X, Y):  # [n, d], [n, d] -> [n(n-1)/2]: ||y_i - y_j|| / ||x_i - x_j||
    i, j = np.triu_indices(X.shape[0], 1)
    return np.linalg.norm(Y[i] - Y[j], axis=1) / np.linalg.norm(X[i] - X[j], axis=1)


# The checks of part 3: each returns numbers; the report prints and asserts them; the tests too.

def check_lse_gradient(rng, n=7, d=5, beta=1.7):
    """-> dict: rel errors of K^T softmax vs central differences of lse, and of attn.py's head
    (head_as_lse_gradient) vs the gradient of lse over the keys plus a 0 key."""
    K, q = rng.standard_normal((n, d)), rng.standard_normal(d)
    fd = numerical_jacobian(lambda x: lse(K @ x, beta), q)
    K0 = np.vstack([K, np.zeros(d)])
    fd0 = numerical_jacobian(lambda x: lse(K0 @ x, beta), q)
    return dict(formula=rel_error(lse_grad(K, q, beta), fd),
                head=rel_error(head_as_lse_gradient(K, q, beta), fd0),
                grad_norm=float(np.abs(fd).max()))


def check_lse_hessian(rng, n=7, d=5, beta=1.7):
    """-> dict: rel error of beta Cov vs differences of the gradient; min eigenvalue / max."""
    K, q = rng.standard_normal((n, d)), rng.standard_normal(d)
    Hm = lse_hessian(K, q, beta)
    fd = numerical_jacobian(lambda x: lse_grad(K, x, beta), q)
    ev = np.linalg.eigvalsh(0.5 * (fd + fd.T))
    return dict(rel_err=rel_error(Hm, fd), min_eig=float(ev.min()), max_eig=float(ev.max()),
                asym=float(np.abs(fd - fd.T).max()))


def check_tied_expansion(rng, trials=200, n=6, d=4):
    """Random K, beta, points: -> dict(min/max_ratio, min/max_logdet, min_lse_rise, jac_err).
    min_ratio:    min ||F(a) - F(b)|| / ||a - b|| over random and close pairs (theorem: >= 1)
    min_logdet:   min log det(I + beta Cov) (theorem: >= 0), and jac_err: analytic J vs
                  central differences of F at one point
    min_lse_rise: min lse(K F(x)) - lse(K x) (theorem: >= 0, by convexity of lse)
    """
    ratios, logdets, rises = [], [], []
    for _ in range(trials):
        K = rng.standard_normal((n, d)) * rng.uniform(0.3, 3)
        beta = 10 ** rng.uniform(-1, 1)
        a = rng.standard_normal(d) * rng.uniform(0.1, 3)
        b = a + rng.standard_normal(d) * 10 ** rng.uniform(-4, 0.5)
        Fa, Fb = tied_residual_step(K, a, beta), tied_residual_step(K, b, beta)
        ratios.append(np.linalg.norm(Fa - Fb) / np.linalg.norm(a - b))
        logdets.append(np.linalg.slogdet(np.eye(d) + lse_hessian(K, a, beta))[1])
        rises.append(lse(K @ tied_residual_step(K, a, beta), beta) - lse(K @ a, beta))
    J = np.eye(d) + lse_hessian(K, a, beta)
    jac_err = rel_error(J, numerical_jacobian(lambda x: tied_residual_step(K, x, beta), a))
    return dict(min_ratio=float(min(ratios)), max_ratio=float(max(ratios)),
                min_logdet=float(min(logdets)), max_logdet=float(max(logdets)),
                min_lse_rise=float(min(rises)), jac_err=jac_err)


def check_layernorm(rng, trials=20, d=16):
    """-> dict: worst rel error of ||J_LN|| (SVD of central differences of attn.layernorm_forward)
    against 1/sqrt(sigma^2 + eps) over sigma in [0.1, 10]; the range of 1/sigma seen; and the max
    pairwise distance ratio ||LN(a) - LN(b)|| / ||a - b|| over pairs whose sigma are >= 1."""
    errs, norms = [], []
    for _ in range(trials):
        x = rng.standard_normal(d) * 10 ** rng.uniform(-1, 1) + rng.uniform(-3, 3)
        J = numerical_jacobian(layernorm_plain, x, h=1e-6 * x.std())
        norms.append(layernorm_jacobian_norm(x))
        errs.append(abs(spectral_norm(J) - norms[-1]) / norms[-1])
    A = rng.standard_normal((400, d))
    A = A / A.std(1, keepdims=True) * rng.uniform(1.0, 4.0, (400, 1)) + rng.uniform(-2, 2, (400, 1))
    B = A + rng.standard_normal((400, d)) * 10 ** rng.uniform(-3, 0.5, (400, 1))
    ok = B.std(1) >= 1.0
    r = (np.linalg.norm(layernorm_plain(A[ok]) - layernorm_plain(B[ok]), axis=1)
         / np.linalg.norm(A[ok] - B[ok], axis=1))
    return dict(jac_rel_err=float(max(errs)), norm_min=float(min(norms)),
                norm_max=float(max(norms)), max_ratio_sigma_ge_1=float(r.max()),
                pairs=int(ok.sum()))


def check_infonce(rng, n=6, d=5, beta=0.8):
    """-> dict: rel error of beta (E_p[t] - t_+) vs central differences of the InfoNCE loss."""
    a, C = rng.standard_normal(d), rng.standard_normal((n, d))
    fd = numerical_jacobian(lambda x: infonce_loss(x, C, beta), a)
    return dict(rel_err=rel_error(infonce_grad(a, C, beta), fd), grad_norm=float(np.abs(fd).max()))


def demo_untied(rng, n=6, d=4, beta=2.0, tries=50):
    """Untied values V != keys K: F(x) = x + V^T softmax(beta K x) is not a gradient field. -> the
    smallest ||F(a) - F(b)|| / ||a - b|| found, b - a along J_F's smallest singular direction."""
    best = np.inf
    for _ in range(tries):
        K, V, a = rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.standard_normal(d)
        F = lambda x: x + attn.softmax_forward(beta * (x @ K.T))[0] @ V
        b = a + 1e-3 * np.linalg.svd(numerical_jacobian(F, a))[2][-1]
        best = min(best, np.linalg.norm(F(a) - F(b)) / 1e-3)
    return float(best)


def demo_energy(rng, trials=500, n=6, d=4):
    """Fraction of random (K, x, beta) where the residual step x + grad lse RAISES the modern
    Hopfield energy E(x) = x.x/2 - lse_beta(K x) (Ramsauer et al. 2020), and the largest rise
    (the plain update x <- grad lse is the one that descends)."""
    rises = []
    for _ in range(trials):
        K, beta = rng.standard_normal((n, d)), 10 ** rng.uniform(-1, 1)
        x = rng.standard_normal(d) * rng.uniform(0.1, 3)
        E = lambda y: 0.5 * (y * y).sum(-1) - lse(y @ K.T, beta)
        rises.append(E(tied_residual_step(K, x, beta)) - E(x))
    rises = np.array(rises)
    return float((rises > 0).mean()), float(rises.max())


def demo_post_ln_collapse(rng, n=12, d=16, blocks=6):
    """Tokens X [n, d] on LN's sphere through post-LN blocks X <- LN(X + SelfAttn(X)) built from
    attn.self_attention_forward (W_Q = I/d^0.25 and W_K = I/d^0.25: scores x_i.x_j/d, the cosine;
    W_V = W_O = I). -> mean pairwise distance after each block / before the first."""
    X = layernorm_plain(rng.standard_normal((n, d)))
    I, z = np.eye(d), np.zeros(d)
    Wq = I * d ** -0.25
    i, j = np.triu_indices(n, 1)
    dist0 = np.linalg.norm(X[i] - X[j], axis=1).mean()
    out = []
    for _ in range(blocks):
        Y, _ = attn.self_attention_forward(X[None], dict(W_Q=Wq, b_Q=z, W_K=Wq, b_K=z, W_V=I,
                                                          b_V=z, W_O=I, b_O=z), heads=1)
        X = layernorm_plain(X + Y[0])
        out.append(float(np.linalg.norm(X[i] - X[j], axis=1).mean() / dist0))
    return out


# ======== 4. THE REPORT ========================================================================

THM, MEAS, DEMO = "[theorem check]", "[measurement]", "[demonstration of a limit]"


def say(tag, text=""):
    """One line of the report: its tag (THM, MEAS, DEMO, or "" to go on) and its text."""
    print(f"  {tag} {text}" if tag else f"  {text}")


def heading(title):
    """A part's title, underlined."""
    print("\n" + title + "\n" + "-" * len(title))


def construction_cache():
    """construct(name, T, s) -> (params, cfg, info), built once per key from fixed seeds; the
    data.SparseTask of each key is kept in construct.tasks[(name, T, s)]."""
    built, tasks = {}, {}
    def construct(name, T, s):
        key = (name, T, s)
        if key not in built:
            seed = [T, s, data.TASKS.index(name)]
            tasks[key] = data.make_task(name, T, s, np.random.default_rng(seed))
            built[key] = build_sparse_head(tasks[key], np.random.default_rng(seed + [1]))
        return built[key]
    construct.tasks = tasks
    return construct


def _report_capacity(ctx):
    """Part 1: softmax's Lipschitz constant (asserted), then _report_sample_need."""
    heading("1. Capacity (Edelman Section 3)")
    r = softmax_lipschitz_search(np.random.default_rng(1))
    require(r["overall"] <= 2.0, f"softmax l_inf->l_1 ratio {r['overall']} > 2")
    require(r["overall"] <= 1.0 + 1e-9, f"softmax l_inf->l_1 ratio {r['overall']} > 1")
    say(THM, "softmax is Lipschitz from l_inf to l_1: largest ||softmax(a)-softmax(b)||_1 / "
        "||a-b||_inf seen")
    say("", f"  random pairs {r['random']:.4f}, constructed near-worst pairs "
        f"{r['constructed']:.8f}, hill-climbed {r['climbed']:.4f}")
    say("", f"  max {r['overall']:.8f} <= 2 (the paper's constant); also <= 1, the tight constant "
        "(our derivation, see 1a)")
    _report_sample_need(ctx)


def _report_sample_need(ctx, gap=0.1):
    """Part 1: samples the reconstructed bound asks for against T, head against halfspaces."""
    p, cfg, _ = ctx["construct"]("and", 100, 3)
    C_fix, d_fix = covering_constant(norm_measures(p, cfg)), cfg["d"]
    print()
    say(MEAS, f"samples the reconstructed bound asks for to make the gap <= {gap} (same formula, "
        "constants ours):")
    say("", f"  the head at fixed norms = the 3-sparse AND construction's at T=100 (C={C_fix:.3g},"
        f" d={d_fix}); the head built at each T;")
    say("", "  halfspaces on the T bits, VC dimension T+1, a class whose capacity grows like T")
    print("        T   head, fixed norms   head, built at T   halfspaces (VC=T+1)")
    first = None
    for T in (10, 100, 1000, 10000, 100000, 1000000):
        m_fix, m_lin = samples_for_gap(C_fix, d_fix, T, gap), linear_class_samples(T, gap)
        m_built = "-"
        if T <= max(ctx["qk_T"]):
            pT, cfgT, _ = ctx["construct"]("and", T, 3)
            C_T = covering_constant(norm_measures(pT, cfgT))
            m_built = f"{samples_for_gap(C_T, cfgT['d'], T, gap):.3g}"
        first = first or (m_fix, m_lin)
        print(f"  {T:>7}   {m_fix:17.4g}   {m_built:>16}   {m_lin:19.4g}")
    say("", f"  from T=10 to T=10^6 the fixed-norm head's need grows x{m_fix / first[0]:.2f} "
        f"(log T), the halfspaces' x{m_lin / first[1]:.3g} (T);")
    lo, hi = 1.0, 40.0                                   # bisect log10 T where the needs cross
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        T = int(10 ** mid)
        head_more = samples_for_gap(C_fix, d_fix, T, gap) > linear_class_samples(T, gap)
        lo, hi = (mid, hi) if head_more else (lo, mid)
    say("", f"  with these loose constants the halfspaces' need passes the head's only at "
        f"T ~ 10^{hi:.1f}: the bound is about growth, not absolute sizes.")
    say("", "  (the built head's norms grow like log T, so its need grows like a power of log T. "
        "log T is not unique to attention:")
    say("", "   an l1-bounded linear class has it too, but cannot represent sparse parity; one "
        "bounded-norm head can, part 2)")


def _report_construction(ctx):
    """Part 2, in three steps."""
    heading("2. Sparse variable creation (Edelman Section 4): weights built by hand, no training")
    rng = np.random.default_rng(2)
    _report_exactness(ctx, rng)
    _report_qk_norm(ctx)
    _report_decoder_norm(ctx)


def _report_exactness(ctx, rng):
    """Part 2: check_construction on each (T, s) of the grid and each task, asserted exact."""
    construct = ctx["construct"]
    say("", "attn.py's model, heads=1, ln=False, ReLU MLP, float64; W_QK = e_CLS u^T, u.p_i = R "
        "on S (R + (s-1-j) ln 2 for a junta),")
    say("", "d_p = ceil(16 s ln T) random +-1/sqrt(d_p) codes. Checked through fast.model_forward "
        "(path 'fast') on all 2^s patterns")
    say("", "of the relevant bits, each with the other T-s bits all 0, all 1, and 2 random fills.")
    say(THM, "every input classified correctly; cell = min over inputs of the signed logit")
    say("", "  (>= 0.75 by design; exactly 0.75 is reached by the all-0/all-1 fills, the largest "
        "leaks; 'all correct' is asserted)")
    print("        T  s    and     or parity majority  junta   inputs checked")
    total = 0
    for T in ctx["grid_T"]:
        for s in ctx["grid_s"]:
            # printed cell by cell, flushed: a cell at T=10^4 takes seconds
            print(f"  {T:>7} {s:>2}", end="", flush=True)
            n = 0
            for name in data.TASKS:
                if name == "majority" and s % 2 == 0:
                    print(f" {'-':>6}", end="", flush=True)
                    continue
                p, cfg, info = construct(name, T, s)
                c = check_construction(p, cfg, construct.tasks[(name, T, s)], rng)
                require(c["wrong"] == 0 and c["margin"] >= 0.5, f"construction {name} T={T} "
                        f"s={s}: {c['wrong']} wrong, margin {c['margin']}")
                print(f" {c['margin']:6.3f}", end="", flush=True)
                n += c["n"]
            total += n
            print(f"   {n:>6}")
    say("", f"  {total} inputs, all correct")


def _report_qk_norm(ctx):
    """Part 2: the 3-sparse AND head's R and |W_QK|_2 against T, and fits in ln T and T^k."""
    print()
    say(MEAS, "the QK norm against T (3-sparse AND): R from the bisection beside the paper's "
        "log((T-s)/(s eps)), eps = the leak allowed")
    print("        T     d      R   log((T-s)/(s eps))  |W_QK|_2  |W_QK|_2 / ln T  mass on S")
    norms = []
    for T in ctx["qk_T"]:
        p, cfg, info = ctx["construct"]("and", T, 3)
        qk = norm_measures(p, cfg)["qk_spec"][0]
        norms.append(qk)
        paper_R = paper_score_gap(T, 3, info["spacing"] / 4)
        print(f"  {T:>7} {cfg['d']:>5} {info['R']:6.2f}   {paper_R:18.2f}  {qk:8.2f}"
              f"  {qk / math.log(T):15.2f}  {info['mass_on_S']:9.4f}")
    a, b, r2 = fit_line(np.log(ctx["qk_T"]), norms)
    k, _, r2k = fit_line(np.log(ctx["qk_T"]), np.log(norms))
    say(MEAS, f"fit |W_QK|_2 = {a:.2f} ln T + {b:.2f} (R^2 {r2:.4f}); as a power law T^{k:.3f} "
        f"(R^2 {r2k:.4f}): grows like log T, no faster")


def _report_decoder_norm(ctx):
    """Part 2: decoder norm and ReLU units against s (T=100), power-law vs exponential fits."""
    print()
    say(MEAS, "decoder norm ||W_1||_F ||W_2||_F against s (T=100), with the ReLU units used")
    print("    s " + "".join(f"{n:>17}" for n in data.TASKS))
    table = {n: [] for n in data.TASKS}
    for s in ctx["dec_s"]:
        cells = []
        for name in data.TASKS:
            if name == "majority" and s % 2 == 0:
                cells.append(f"{'-':>17}")
                continue
            info = ctx["construct"](name, 100, s)[2]
            table[name].append((s, info["decoder_norm"]))
            cells.append(f"{info['decoder_norm']:10.1f} ({info['units']:>2}u)")
        print(f"  {s:>3} " + "".join(cells))
    for name in data.TASKS:
        ss, vs = np.array(table[name]).T
        kp, _, rp = fit_line(np.log(ss), np.log(vs))
        ke, _, re = fit_line(ss, np.log(vs))
        better = "polynomial" if rp >= re else "exponential"
        say(MEAS, f"{name:>8}: power law s^{kp:.2f} (R^2 {rp:.3f});  exponential "
            f"{math.exp(ke):.2f}^s (R^2 {re:.3f})  -> {better} fits better")


def _report_probabilistic(ctx):
    """Part 3: every check of the probabilistic reading asserted, then three limits shown."""
    heading("3. The probabilistic reading of Shim 2022 (as standard mathematics, not quotes "
            "of it)")
    rng = np.random.default_rng(5)
    g = check_lse_gradient(rng)
    require(g["formula"] < 1e-7 and g["head"] < 1e-7, f"lse gradient errors {g}")
    say(THM, "grad_q lse_beta(Kq) = K^T softmax(beta Kq): rel error vs central differences "
        f"{g['formula']:.1e}")
    say(THM, "attn.attention_cls_forward with values = keys is that gradient (the keys plus a "
        f"0 key for [CLS]): rel error {g['head']:.1e}")
    h = check_lse_hessian(rng)
    require(h["rel_err"] < 1e-6 and h["min_eig"] > -1e-8, f"Hessian check {h}")
    say(THM, f"Hessian = beta Cov_p[k]: rel error {h['rel_err']:.1e}; eigenvalues in "
        f"[{h['min_eig']:.2e}, {h['max_eig']:.3f}] (PSD)")
    t = check_tied_expansion(rng)
    require(t["min_ratio"] >= 1 - 1e-9 and t["min_logdet"] >= -1e-12
            and t["min_lse_rise"] >= -1e-12 and t["jac_err"] < 1e-6, f"tied expansion {t}")
    say(THM, "tied residual attention x + K^T softmax(beta Kx), 200 random (K, beta, pair): "
        f"distance ratios in [{t['min_ratio']:.6f}, {t['max_ratio']:.3f}], >= 1;")
    say("", f"  log det J in [{t['min_logdet']:.1e}, {t['max_logdet']:.2f}], >= 0 (J = I + beta "
        f"Cov, rel error vs differences {t['jac_err']:.1e}); lse rises along the step by "
        f">= {t['min_lse_rise']:.2e}")
    ln = check_layernorm(rng)
    require(ln["jac_rel_err"] < 1e-5 and ln["max_ratio_sigma_ge_1"] <= 1 + 1e-12,
            f"LayerNorm {ln}")
    say(THM, "LayerNorm (gain 1, shift 0) Jacobian norm = 1/sqrt(sigma^2 + eps): worst rel error "
        f"{ln['jac_rel_err']:.1e} over 1/sigma in [{ln['norm_min']:.2f}, {ln['norm_max']:.2f}]")
    say(THM, "LayerNorm contracts when sigma >= 1: max distance ratio "
        f"{ln['max_ratio_sigma_ge_1']:.4f} <= 1 over {ln['pairs']} pairs (below 1 it expands)")
    nce = check_infonce(rng)
    require(nce["rel_err"] < 1e-7, f"InfoNCE gradient {nce}")
    say(THM, "InfoNCE gradient in the anchor = beta (E_p[t] - t_+), an attention readout: rel "
        f"error {nce['rel_err']:.1e}")
    print()
    say(DEMO, f"untied values V != K: smallest distance ratio found {demo_untied(rng):.3f} "
        "(< 1: a pair shrinks)")
    frac, rise = demo_energy(rng)
    say(DEMO, f"the residual step raised the Hopfield energy x.x/2 - lse(Kx) in {100 * frac:.0f}% "
        f"of 500 random cases (largest rise {rise:.3g})")
    say(DEMO, "post-LN blocks LN(X + SelfAttn(X)), mean pairwise distance / initial, blocks 1..6: "
        + " ".join(f"{c:.3f}" for c in demo_post_ln_collapse(rng)))


# One screen of the report's settings (18 s with one BLAS thread, about 30 s with numpy's default
# threads while the other core is busy: measured on a 2-core AMD EPYC).
REPORT = dict(
    grid_T=(10, 100, 1000, 10000),    # part 2: every (T, s) construction is checked for exactness
    grid_s=(1, 2, 3, 4, 5),
    qk_T=(10, 30, 100, 300, 1000, 3000, 10000),  # part 2: |W_QK| against T (3-sparse AND)
    dec_s=(1, 2, 3, 4, 5, 6),         # part 2: decoder norms against s (T=100)
)

USAGE = """usage: theory.py [-h]

Print one report: the theory of Edelman et al. (ICML 2022) and the probabilistic reading of
attention, as checks on attn.py's model with hand-built and random weights (about 20-30 s on 2
cores). Tags: [theorem check] asserted, [measurement] no claim, [demonstration of a limit]
reported, not asserted. The same quantities measured on trained models: python -m
studies.theory_report
"""


def _print_report():
    """Parts 1-3, printed; AssertionError (require) when a theorem check fails."""
    t_start = time.perf_counter()
    print("theory.py: Edelman et al. (ICML 2022) and the probabilistic reading of attention, as "
          "checks on attn.py's model\ntags: [theorem check] asserted here and in test_all.py; "
          "[measurement] no claim; [demonstration of a limit] reported, not asserted")
    ctx = dict(REPORT, construct=construction_cache())
    _report_capacity(ctx)
    _report_construction(ctx)
    _report_probabilistic(ctx)
    heading("Notes")
    say(MEAS, f"time: {time.perf_counter() - t_start:.1f} s")
    say("", "bounds marked 'reconstructed' have the shape of Edelman et al.'s bound (log T, norms, "
        "1/eps^2); their constants are ours.")


def main(argv):  # `python theory.py`: the report on stdout; exit 0 when every check passes
    _check_arg(isinstance(argv, list) and all(isinstance(v, str) for v in argv),
               f"argv must be a list of strings, got {_shown(argv)}")
    if argv and argv[0] not in ("-h", "--help"):
        sys.stderr.write(f"theory.py: error: unrecognized arguments: {' '.join(argv)} (it takes "
                         f"none but -h)\n")
        return 2
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)     # every line shows at once under `> log`
    try:
        if argv:
            sys.stdout.write(USAGE)
        else:
            _print_report()
        sys.stdout.flush()
    except AssertionError as e:
        sys.stderr.write(f"theory.py: {e}\n")
        return 1
    except OSError as e:                # stdout closed (| head -c 1) or full (> /dev/full)
        return attn.stdout_lost("theory.py", e)
    return 0



def _interrupted(signum, frame):  # the report has nothing to save: one line, exit 130 now
    sys.stderr.write("\ntheory.py: interrupted\n")
    os._exit(130)


# ======== 5. THE DOORS' CHECKS =================================================================
# The doors a user calls check their arguments once, one line each: a ValueError naming the value
# and what is allowed (attn.check_params checks a model). Everything above them takes what numpy
# takes.

def _check_arg(ok, message):  # a door's check: ValueError(message) unless ok
    if not ok:
        raise ValueError(message)


def _check_number(name, v, real=False, lo=None, hi=math.inf):
    """v (a numpy scalar as the Python number) when it is an integer >= lo (1 by default) or, where
    real, a finite number > 0 (>= lo where given), and < hi; never a bool."""
    kinds = (int, float, np.integer, np.floating) if real else (int, np.integer)
    what = (f"a finite number {'> 0' if lo is None else f'>= {lo}'}" if real else
            f"an integer >= {1 if lo is None else lo}") + (f" and < {hi}" if hi < math.inf else "")
    lo = (math.ulp(0.0) if real else 1) if lo is None else lo
    _check_arg(isinstance(v, kinds) and not isinstance(v, (bool, np.bool_)) and lo <= v < hi
               and abs(v) <= sys.float_info.max, f"{name} must be {what}, got {_shown(v)}")
    return v.item() if isinstance(v, np.generic) else v


def _check_reals(name, a, ndim=None, lo=-math.inf):  # -> a as a float64 array of finite reals >= lo
    raw = np.asarray(a)
    _check_arg(raw.dtype.kind in "iuf" and raw.size and ndim in (None, raw.ndim)
               and np.all(np.isfinite(raw) & (raw >= lo)), f"{name} must be "
               f"{'a 1-D array' if ndim == 1 else 'a number or an array'} of finite real numbers"
               f"{f' >= {lo}' if lo > -math.inf else ''}, got {_shown(a)}")
    return raw.astype(np.float64)


def _check_nm(nm):  # covering_constant's and covering_parts': the dict of norm_measures
    keys = ("qk_fro", "v_21", "v_spec", "o_spec", "B_X", "L_after")
    _check_arg(isinstance(nm, dict) and set(keys) <= set(nm), f"nm must be the dict returned by "
               f"norm_measures, got {_shown(nm)}")
    for i, k in enumerate(keys):        # finite norms >= 0 (nan weights give nan): one per head
        _check_reals(f"nm[{k!r}]", nm[k], 1 if i < 4 else 0, lo=0.0)
    _check_arg(len({len(nm[k]) for k in keys[:4]}) == 1, f"nm's per-head lists must have one "
               f"length, got {[len(nm[k]) for k in keys[:4]]}")


def _shown(v):  # a value in a few words, on one line: an array's shape and dtype, else its repr
    if isinstance(v, np.ndarray):
        return f"shape {v.shape}, dtype {v.dtype}"
    return f"{' '.join(repr(v).split()):.60}"


if __name__ == "__main__":
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)    # Ctrl-C in the report: one line, no trace
    sys.exit(main(sys.argv[1:]))
