"""symmetry.py (studies/lib): the model's exact symmetries, and a canonical form that folds them out.

The reference's side (the root); it imports attn.py and numpy only. A trained network is one
point of many that compute the same function: each function below moves a parameter dict
(attn.py's names) along one exact symmetry and returns a copy whose logits are the same,
through attn.model_forward and fast.model_forward alike, for every input (test_all.py applies
each with random factors to a trained model). A norm that one of them moves measures the
parametrisation, not the learned function; canonical() folds them out, so a norm of its output
is a measure of the function (studies/symmetries.py measures which norm respects which).

Why each is exact, in attn.py's row convention (y = x @ W + b; head h owns the columns
h*e:(h+1)*e of W_Q, W_K, W_V and the rows h*e:(h+1)*e of W_O):
  scale_ln(ln1, c)   LN1(x) = g * xhat + b feeds only q, K and V: (c g * xhat + c b) (W / c) + b_W
                     is unchanged for W in W_Q, W_K, W_V, with b_Q, b_K, b_V *not* scaled.
  scale_ln(ln2, c)   the same for LN2 against W_1: the pre-activation LN2(h) W_1 + b_1 is
                     unchanged, so it is exact whatever the activation (GELU too).
  scale_ln(lnf, c)   the same for LNf against the readout w: w . LNf(h) + b.
  shift_ln_null      xhat has mean 0, so (g * xhat) . (1 / g) = 0: W + (1/g) u^T moves LN(x) W by
                     the constant (b . (1/g)) u, which b_W - (b . (1/g)) u takes back (g != 0).
  mix_qk(M)          per head, [W_Q; b_Q] M and [W_K; b_K] M^-T: q . k = q M M^-1 k (M invertible,
                     e x e; a number c is M = c I: W_Q and b_Q times c, W_K and b_K over c).
  mix_vo(M)          per head, [W_V; b_V] M and M^-1 W_O: the head's output mix W_O is unchanged.
  shift_key_bias(v)  b_K + v adds q . v to every key's score alike ([CLS]'s own too): softmax
                     takes it back.
  shift_embeddings   E_tok + v and E_pos - v give every token the same x_t; with LayerNorm on,
                     adding a multiple of the all-ones vector to a row of E_tok or E_pos too
                     (LN1 subtracts each token's mean; [CLS] feeds the residual, so not cls).
  permute_heads      heads relabelled: their columns of W_Q, W_K, W_V and rows of W_O together.
  scale_mlp_units(c) W_1's column j and b_1[j] times c_j > 0, W_2's row j over c_j: exact for
                     ReLU (positively homogeneous) only; for GELU it is not, and refused.
A non-symmetry, for contrast (the tests check that it moves the logits): W_Q alone times c.

canonical(p, cfg) picks one point of each orbit: every LayerNorm's gain 1 and shift 0, folded
into what reads it (W <- P diag(g) W, b_W <- b_W + b W, P the projection off the all-ones
vector, which LayerNorm's output never has); b_K = 0; per head the score matrix
[W_Q; b_Q][W_K; 0]^T and the value-output matrix [W_V; b_V] W_O factored again by their SVD,
U sqrt(S) and sqrt(S) V^T, so the two factors have equal singular values; E_pos centred over
the positions and every token row centred over its coordinates (with LayerNorm on); with ReLU,
each hidden unit's in-weights ([W_1; b_1] column) and out-weights (W_2 row) of equal norm. Its
logits are the input's (to rounding), and applying any symmetry above before it changes none of
the norms theory.norm_measures takes of it (up to rounding; head order aside).
"""
import math

import numpy as np

import attn

from studies.lib import checks
from studies.lib.checks import REALS, check_number, refuse

LN_READERS = dict(ln1=(("W_Q", "b_Q"), ("W_K", "b_K"), ("W_V", "b_V")),  # what reads each LN
                  ln2=(("W_1", "b_1"),), lnf=(("w", "b"),))


# ---------------------------------------------------------------------------------------------
# argument checks (attn.py's vocabulary)

def _check(p, cfg):  # -> a float64 copy of p (every symmetry returns a new dict)
    attn.check_params(p, cfg)
    return {k: np.array(v, np.float64) for k, v in p.items()}


def _real_array(v):  # v as float64 if it is a list, tuple or array of real numbers, else None
    if not isinstance(v, (list, tuple, np.ndarray)):
        return None
    try:
        a = np.asarray(v)
    except ValueError:                                       # ragged
        return None
    return a.astype(np.float64) if a.dtype.kind in "iuf" else None


def _factors(name, c, n):  # a number or n numbers, finite and nonzero -> [n] float64
    what = "a finite nonzero number" + (f" or a list of {n} of them" if n > 1 else "")
    if n > 1 and isinstance(c, (list, tuple, np.ndarray)):
        a = _real_array(c)
        if a is None:
            raise refuse(name, c, what, False)
    else:
        check_number(name, c, REALS, -checks.FLOAT_MAX, what=what)
        a = np.full(n, float(c))
    if a.shape != (n,) or not np.all(np.isfinite(a)) or np.any(a == 0):
        raise refuse(name, c, what, True)
    return a


def _factors_any(name, v, n):  # n finite numbers (zeros allowed) -> [n] float64
    a = _real_array(v) if isinstance(v, np.ndarray) else None
    if a is None or a.shape != (n,) or not np.all(np.isfinite(a)):
        raise refuse(name, v, f"a finite numpy array of shape ({n},)", a is not None)
    return a


def _check_ln(cfg, ln):
    if not isinstance(ln, str) or ln not in LN_READERS:
        raise refuse("ln", ln, "one of ln1, ln2, lnf", isinstance(ln, str))
    if not cfg["ln"] or (ln == "ln2" and not cfg["mlp"]):
        raise ValueError(f"ln must be a LayerNorm the model has: {ln} is absent from this cfg "
                         f"(ln={cfg['ln']}, mlp={cfg['mlp']})")


def _mixers(name, M, H, e):  # -> [H, e, e] invertible
    a = _real_array(M) if isinstance(M, np.ndarray) else None
    if a is None or a.shape != (H, e, e) or not np.all(np.isfinite(a)):
        raise refuse(name, M, f"a finite real numpy array [heads={H}, e={e}, e={e}]", a is not None)
    M = a
    if np.any(np.linalg.cond(M) > 1e8):
        raise ValueError(f"{name} must hold invertible matrices (condition number <= 1e8)")
    return M


def _head(cfg, h):  # -> the columns (rows of W_O) of head h
    e = cfg["d"] // cfg["heads"]
    return slice(h * e, (h + 1) * e)


# ---------------------------------------------------------------------------------------------
# the symmetries: each returns a float64 copy computing the same logits

def scale_ln(p, cfg, ln, c):
    """LayerNorm `ln`'s gain and shift times c, every matrix that reads it over c (its bias kept):
    ln1 against W_Q, W_K, W_V; ln2 against W_1; lnf against the readout w."""
    q = _check(p, cfg)
    _check_ln(cfg, ln)
    c = _factors("c", c, 1)[0]
    q[ln + "_g"] *= c
    q[ln + "_b"] *= c
    for W, _ in LN_READERS[ln]:
        q[W] /= c
    return q


def shift_ln_null(p, cfg, ln, u):
    """Add (1 / g) u_W^T to each matrix W reading LayerNorm `ln` and take (b . (1/g)) u_W off its
    bias: u a dict {W: array of W's bias's shape} (w's: shape (1,)), a missing W 0. Needs every
    gain nonzero."""
    q = _check(p, cfg)
    _check_ln(cfg, ln)
    g, b = q[ln + "_g"], q[ln + "_b"]
    if np.any(g == 0):
        raise ValueError(f"{ln}_g must be nonzero everywhere for shift_ln_null")
    if not isinstance(u, dict):
        raise refuse("u", u, "a dict {name of a matrix reading the LayerNorm: its shift}", False)
    for W, bW in LN_READERS[ln]:
        uW = _factors_any(f"u[{W!r}]", u.get(W, np.zeros(q[bW].shape)), q[bW].shape[0])
        if W == "w":
            q[W] = q[W] + uW[0] / g
            q[bW] = q[bW] - (b / g).sum() * uW
        else:
            q[W] = q[W] + np.outer(1.0 / g, uW)
            q[bW] = q[bW] - (b / g).sum() * uW
    return q


def _per_head(M, cfg):  # -> [heads, e, e]: the mixers, from a number, one a head, or matrices
    H, e = cfg["heads"], cfg["d"] // cfg["heads"]
    if not isinstance(M, np.ndarray) or M.ndim == 1:
        M = _factors("M", M, H)[:, None, None] * np.eye(e)
    return _mixers("M", M, H, e)


def mix_qk(p, cfg, M):
    """Per head h, [W_Q; b_Q]_h M_h and [W_K; b_K]_h M_h^-T: M [heads, e, e] invertible, or a
    number or one number per head (M_h = c_h I)."""
    q, M = _check(p, cfg), _per_head(M, cfg)
    for h in range(cfg["heads"]):
        s = _head(cfg, h)
        Minv_T = np.linalg.inv(M[h]).T
        q["W_Q"][:, s], q["b_Q"][s] = q["W_Q"][:, s] @ M[h], q["b_Q"][s] @ M[h]
        q["W_K"][:, s], q["b_K"][s] = q["W_K"][:, s] @ Minv_T, q["b_K"][s] @ Minv_T
    return q


def mix_vo(p, cfg, M):
    """Per head h, [W_V; b_V]_h M_h and M_h^-1 W_O,h (W_O's rows of head h): M as mix_qk's."""
    q, M = _check(p, cfg), _per_head(M, cfg)
    for h in range(cfg["heads"]):
        s = _head(cfg, h)
        q["W_V"][:, s], q["b_V"][s] = q["W_V"][:, s] @ M[h], q["b_V"][s] @ M[h]
        q["W_O"][s] = np.linalg.solve(M[h], q["W_O"][s])
    return q


def shift_key_bias(p, cfg, v):
    """b_K + v, v [d]: every key's score moves by the same q . v, which softmax takes back."""
    q = _check(p, cfg)
    q["b_K"] = q["b_K"] + _factors_any("v", v, cfg["d"])
    return q


def shift_embeddings(p, cfg, v, a_tok=None, a_pos=None):
    """E_tok + v and E_pos - v (v [d]): the same tokens. With LayerNorm on, a_tok [2] and a_pos
    [T] add that multiple of the all-ones vector to each row of E_tok and E_pos (LN1 takes it
    off); without LayerNorm they must be None."""
    q = _check(p, cfg)
    v = _factors_any("v", v, cfg["d"])
    q["E_tok"], q["E_pos"] = q["E_tok"] + v, q["E_pos"] - v
    for name, a, n in (("E_tok", a_tok, attn.VOCAB), ("E_pos", a_pos, cfg["T"])):
        if a is not None:
            if not cfg["ln"]:
                raise ValueError(f"a_{name[2:]} must be None without LayerNorm (not a symmetry)")
            q[name] = q[name] + _factors_any(f"a_{name[2:]}", a, n)[:, None]
    return q


def permute_heads(p, cfg, order):
    """Heads relabelled: head h of the result is head order[h] of p."""
    q = _check(p, cfg)
    H, e = cfg["heads"], cfg["d"] // cfg["heads"]
    if not (isinstance(order, (list, tuple, np.ndarray)) and sorted(np.asarray(order).tolist())
            == list(range(H))):
        raise refuse("order", order, f"a permutation of 0..{H - 1}", True)
    cols = np.concatenate([np.arange(H * e, dtype=np.intp)[_head(cfg, int(h))] for h in order])
    for k in ("W_Q", "W_K", "W_V"):
        q[k] = q[k][:, cols]
    for k in ("b_Q", "b_K", "b_V", "W_O"):
        q[k] = q[k][cols]
    return q


def scale_mlp_units(p, cfg, c):
    """ReLU only: W_1's column j and b_1[j] times c_j > 0, W_2's row j over c_j (c: a number or
    one per hidden unit). GELU is not positively homogeneous: refused (not a symmetry)."""
    q = _check(p, cfg)
    if not cfg["mlp"] or cfg["act"] != "relu":
        raise ValueError(f"scale_mlp_units needs an MLP with ReLU (a symmetry only there), got "
                         f"mlp={cfg['mlp']}, act={cfg['act']!r}")
    c = _factors("c", c, cfg["mlp"])
    if np.any(c < 0):
        raise refuse("c", c, "positive (ReLU commutes with positive scales only)", True)
    q["W_1"], q["b_1"], q["W_2"] = q["W_1"] * c, q["b_1"] * c, q["W_2"] / c[:, None]
    return q


SYMMETRIES = ("scale_ln", "shift_ln_null", "mix_qk", "mix_vo", "shift_key_bias",
              "shift_embeddings", "permute_heads", "scale_mlp_units")


# ---------------------------------------------------------------------------------------------
# the canonical form

def _fold_ln(q, d, ln):  # LayerNorm ln -> gain 1, shift 0; its readers absorb them
    g, b = q[ln + "_g"], q[ln + "_b"]
    P = np.eye(d) - 1.0 / d                              # off the all-ones vector
    for W, bW in LN_READERS[ln]:
        if W == "w":
            q[bW] = q[bW] + b @ q[W]
            q[W] = P @ (g * q[W])
        else:
            q[bW] = q[bW] + b @ q[W]
            q[W] = P @ (g[:, None] * q[W])
    q[ln + "_g"], q[ln + "_b"] = np.ones(d), np.zeros(d)


def _balanced(A, e):  # [n, k] of rank <= e -> (L [n, e], R [e, k]), A = L R
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    U, S, Vt = U[:, :e], S[:e], Vt[:e]
    flip = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(e)])   # one sign per pair
    flip[flip == 0] = 1.0
    r = np.sqrt(S)
    return U * (flip * r), (flip * r)[:, None] * Vt


def canonical(p, cfg):
    """The canonical form of p (see the module docstring): a float64 dict of the same names whose
    logits equal p's (to rounding) and which every symmetry above leaves with the same norms."""
    q = _check(p, cfg)
    d, H, e = cfg["d"], cfg["heads"], cfg["d"] // cfg["heads"]
    if cfg["ln"]:
        for ln in ("ln1", "ln2", "lnf") if cfg["mlp"] else ("ln1", "lnf"):
            _fold_ln(q, d, ln)
        q["E_tok"] = q["E_tok"] - q["E_tok"].mean(1, keepdims=True)
        q["E_pos"] = q["E_pos"] - q["E_pos"].mean(1, keepdims=True)
    v = q["E_pos"].mean(0)
    q["E_tok"], q["E_pos"] = q["E_tok"] + v, q["E_pos"] - v
    q["b_K"] = np.zeros(d)
    for h in range(H):
        s = _head(cfg, h)
        Q = np.vstack([q["W_Q"][:, s], q["b_Q"][s]])                 # [d+1, e]
        K = q["W_K"][:, s]                                             # [d, e] (b_K = 0)
        L, R = _balanced(Q @ K.T, e)
        q["W_Q"][:, s], q["b_Q"][s], q["W_K"][:, s] = L[:d], L[d], R.T
        V = np.vstack([q["W_V"][:, s], q["b_V"][s]])                 # [d+1, e]
        L, R = _balanced(V @ q["W_O"][s], e)
        q["W_V"][:, s], q["b_V"][s], q["W_O"][s] = L[:d], L[d], R
    if cfg["mlp"] and cfg["act"] == "relu":
        n_in = np.linalg.norm(np.vstack([q["W_1"], q["b_1"]]), axis=0)
        n_out = np.linalg.norm(q["W_2"], axis=1)
        ok = (n_in > 0) & (n_out > 0)
        c = np.where(ok, np.sqrt(n_out / np.where(ok, n_in, 1.0)), 1.0)
        q["W_1"], q["b_1"], q["W_2"] = q["W_1"] * c, q["b_1"] * c, q["W_2"] / c[:, None]
    return q

# ---------------------------------------------------------------------------------------------
# training inside the ball: each head's canonical W_QK kept within a Frobenius radius

def qk_norms(p, cfg):  # -> [H], or [R, H] for a stack's parameters ({name: [R, ...]})
    """||W_QK,h||_F of the canonical form per head, without building it: W_QK,h = Q_h K_h^T /
    sqrt(e) with Q_h = [P diag(g) W_Q; b W_Q + b_Q]_h and K_h = [P diag(g) W_K]_h (LN1's gain g
    and shift b folded in, P off the all-ones vector, b_K dropped), through the e x e Gram
    matrices: ||Q K^T||_F^2 = sum(Q^T Q * K^T K). Exactly norm_measures(canonical(p))'s qk_fro."""
    attn.check_config(cfg)
    d, H = cfg["d"], cfg["heads"]
    need = ("W_Q", "b_Q", "W_K") + (("ln1_g", "ln1_b") if cfg["ln"] else ())
    if not (isinstance(p, dict) and all(isinstance(p.get(k), np.ndarray) and p[k].dtype.kind
                                        == "f" for k in need)):
        raise refuse("p", p, f"a dict of float arrays holding {', '.join(need)}", False)
    W_Q, W_K = p["W_Q"], p["W_K"]
    lead = W_Q.shape[:-2]
    if W_Q.shape[-2:] != (d, d) or W_K.shape != W_Q.shape or p["b_Q"].shape != lead + (d,) or (
            cfg["ln"] and not p["ln1_g"].shape == p["ln1_b"].shape == lead + (d,)):
        raise refuse("p", W_Q, f"parameters of cfg (W_Q [..., {d}, {d}])", True)
    e = d // H
    g = p["ln1_g"] if cfg["ln"] else np.ones(lead + (d,), W_Q.dtype)
    b = p["ln1_b"] if cfg["ln"] else np.zeros(lead + (d,), W_Q.dtype)

    def folded(W):
        A = g[..., :, None] * W
        return A - A.mean(-2, keepdims=True)                       # P diag(g) W
    Q = np.concatenate([folded(W_Q), (np.einsum("...d,...dk->...k", b, W_Q)
                                      + p["b_Q"])[..., None, :]], axis=-2)   # [..., d+1, d]
    K = folded(W_K)
    gram = lambda A: np.einsum("...nhe,...nhf->...hef", *(A.reshape(A.shape[:-1] + (H, e)),) * 2)
    return np.sqrt((gram(Q) * gram(K)).sum((-1, -2)) / e)


def project_qk_ball(p, cfg, radius):
    """In place: every head whose canonical ||W_QK,h||_F (qk_norms) exceeds `radius` has W_Q,h,
    b_Q,h and W_K,h scaled by sqrt(radius / norm), which scales its canonical W_QK by radius /
    norm exactly (the nearest point of the ball along that head's ray). p: one run's parameters
    or a stack's. -> the norms before the projection."""
    check_number("radius", radius, REALS, math.ulp(0.0), what="a finite number > 0")
    n = qk_norms(p, cfg).astype(np.float64)
    shrink = np.divide(radius, n, out=np.ones_like(n), where=n > radius)   # NaN: left alone
    if p["W_Q"].dtype.kind != "f" or not p["W_Q"].flags.writeable:
        raise refuse("p", p["W_Q"], "writable float arrays (changed in place)", False)
    s = np.sqrt(shrink)
    cols = np.repeat(s, cfg["d"] // cfg["heads"], axis=-1).astype(p["W_Q"].dtype)   # [..., d]
    p["W_Q"] *= cols[..., None, :]
    p["b_Q"] *= cols
    p["W_K"] *= cols[..., None, :]
    return n

# ---------------------------------------------------------------------------------------------
# training inside the bound's class: every norm the capacity bound counts held within a radius

CLASS_NORMS = ("qk", "vo", "w", "mlp")   # the norms of theory.covering_constant, one radius each


def _folded(W, g):  # W [..., d, k], LayerNorm gain g [..., d] -> P diag(g) W (P off the ones)
    A = g[..., :, None] * W
    return A - A.mean(-2, keepdims=True)


def _vo_norms(p, cfg):  # -> [..., H]: ||[W_V; b_V]_h W_O,h||_F of the canonical form
    d, H = cfg["d"], cfg["heads"]
    e, lead = d // H, p["W_V"].shape[:-2]
    g = p["ln1_g"] if cfg["ln"] else np.ones(lead + (d,), p["W_V"].dtype)
    b = p["ln1_b"] if cfg["ln"] else np.zeros(lead + (d,), p["W_V"].dtype)
    V = np.concatenate([_folded(p["W_V"], g), (np.einsum("...d,...dk->...k", b, p["W_V"])
                                               + p["b_V"])[..., None, :]], axis=-2)
    V = V.reshape(V.shape[:-1] + (H, e)).astype(np.float64)        # [..., d+1, H, e]
    O = p["W_O"].reshape(lead + (H, e, d)).astype(np.float64)        # [..., H, e, d]
    gram_V = np.einsum("...nhe,...nhf->...hef", V, V)
    gram_O = np.einsum("...hed,...hfd->...hef", O, O)
    return np.sqrt((gram_V * gram_O).sum((-1, -2)))


def class_norms(p, cfg):
    """The norms the capacity bound counts (theory.covering_constant, Edelman Section 3), each of
    the canonical form (so no exact symmetry moves it), computed without building the form. For
    one run's parameters or a stack's ({name: [R, ...]}): dict of float64 arrays
      qk   [..., H]  ||W_QK,h||_F, the score matrix (qk_norms): it bounds ||W_QK,h||_2
      vo   [..., H]  ||W_VO,h||_F, W_VO,h = [W_V; b_V]_h W_O,h (LN1 folded in): canonically
                     ||W_V,h||_2 = ||W_O,h||_2 = sqrt(||W_VO,h||_2) and ||W_V,h||_{2,1} =
                     sum_i sqrt(sigma_i(W_VO,h)), so it bounds all three
      w    [...]     ||P diag(g_f) w||, the readout with LNf's gain folded in
      mlp  [...]     ||P diag(g_2) W_1||_2 ||W_2||_2, the MLP's factor without its 1 + (LN2
                     folded in; no symmetry moves it with GELU; 0 without an MLP)
    The fifth quantity, B_X, is held by LayerNorm itself: canonically (gain 1, shift 0) every
    token has norm <= sqrt(d), so B_X <= sqrt(d + 1) with the bias coordinate, at every T."""
    attn.check_config(cfg)
    need = ("W_Q", "b_Q", "W_K", "W_V", "b_V", "W_O", "w") + (
        ("ln1_g", "ln1_b", "lnf_g") if cfg["ln"] else ()) + (("W_1", "W_2") if cfg["mlp"] else ()) + (
        ("ln2_g",) if cfg["ln"] and cfg["mlp"] else ())
    if not (isinstance(p, dict) and all(isinstance(p.get(k), np.ndarray) and p[k].dtype.kind
                                        == "f" for k in need)):
        raise refuse("p", p, f"a dict of float arrays holding {', '.join(need)}", False)
    lead = p["W_Q"].shape[:-2]
    if p["W_V"].shape != p["W_Q"].shape or p["W_O"].shape != p["W_Q"].shape or \
            p["w"].shape != lead + (cfg["d"],):
        raise refuse("p", p["W_V"], f"parameters of cfg (W_V [..., {cfg['d']}, {cfg['d']}])", True)
    ones = np.ones(lead + (cfg["d"],))
    w = p["w"].astype(np.float64) * (p["lnf_g"] if cfg["ln"] else ones)
    out = dict(qk=qk_norms(p, cfg).astype(np.float64), vo=_vo_norms(p, cfg),
               w=np.linalg.norm(w - w.mean(-1, keepdims=True) if cfg["ln"] else w, axis=-1))
    if cfg["mlp"]:
        W_1 = _folded(p["W_1"].astype(np.float64), p["ln2_g"] if cfg["ln"] else ones)
        out["mlp"] = (np.linalg.svd(W_1, compute_uv=False)[..., 0]
                      * np.linalg.svd(p["W_2"].astype(np.float64), compute_uv=False)[..., 0])
    else:
        out["mlp"] = np.zeros(lead)
    return out


def project_class_ball(p, cfg, radii):
    """In place: each norm of class_norms above its radius (radii: {name in CLASS_NORMS: radius >
    0}, a name left out or None is not held) brought just inside it along its own ray (the factor
    radius / norm, less 8 ulp so that rounding cannot leave the ball):
      qk   W_Q,h, b_Q,h and W_K,h times sqrt(factor)    vo   W_V,h, b_V,h and W_O,h times sqrt(factor)
      w    w times factor                               mlp  W_2 times factor (its output)
    p: one run's parameters or a stack's. -> class_norms before the projection."""
    if not (isinstance(radii, dict) and set(radii) <= set(CLASS_NORMS)):
        raise refuse("radii", radii, f"a dict of radii by name ({', '.join(CLASS_NORMS)})", False)
    for k, r in radii.items():
        if r is not None:
            check_number(f"radii[{k!r}]", r, REALS, math.ulp(0.0), what="a finite number > 0")
    n = class_norms(p, cfg)                                    # p and cfg checked there
    for k in ("W_Q", "b_Q", "W_K", "W_V", "b_V", "W_O", "w") + (("W_2",) if cfg["mlp"] else ()):
        if not p[k].flags.writeable:
            raise refuse("p", p[k], "writable float arrays (changed in place)", False)
    e, dt = cfg["d"] // cfg["heads"], p["W_Q"].dtype
    keep = 1.0 - 8 * float(np.finfo(dt).eps)

    def factor(k):   # radius / norm where the norm is above the radius, else 1 (nan: left alone)
        r = radii.get(k)
        return None if r is None or not np.any(n[k] > r) else np.divide(
            r * keep, n[k], out=np.ones_like(n[k]), where=n[k] > r)
    f = factor("qk")
    if f is not None:
        c = np.repeat(np.sqrt(f), e, axis=-1).astype(dt)                  # [..., d]
        p["W_Q"] *= c[..., None, :]
        p["b_Q"] *= c
        p["W_K"] *= c[..., None, :]
    f = factor("vo")
    if f is not None:
        c = np.repeat(np.sqrt(f), e, axis=-1).astype(dt)
        p["W_V"] *= c[..., None, :]
        p["b_V"] *= c
        p["W_O"] *= c[..., :, None]
    f = factor("w")
    if f is not None:
        p["w"] *= f[..., None].astype(dt)
    f = factor("mlp") if cfg["mlp"] else None
    if f is not None:
        p["W_2"] *= f[..., None, None].astype(dt)
    return n
