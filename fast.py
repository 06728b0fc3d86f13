"""fast.py: the fast path, training's arithmetic for attn.py's model (Edelman et al., Section 5).

attn.py defines the model, one run at a time, in textbook numpy. This file computes the same
logits and gradients the way training needs them, and is where every speed trick lives, each with
the reason it exists. test_all.py pins it to attn.py: the same logits and parameter gradients (to
rounding) and each tuned op against its textbook op. Its arithmetic is frozen (the same
operations in the same order) so that runs repeat bit for bit.

Names, said once:
  - attn.thing_forward is the reference; fast.thing_forward is the same op tuned for training.
  - Every function here takes a STACK of R runs: each parameter with a leading run axis [R, ...],
    bits X [R, B, T]. model_forward, model_backward and loss_and_grads also take one run
    (parameters as attn.init_params gives them, X [B, T]), computed as a stack of one.
  - float32 or float64 is the dtype of the parameters. The attention (_attention_forward) falls
    back, run by run, where exp could overflow: the same shortcut in float64 for a float32 run, or
    attn.head_forward run by run; _attention_forward_split sends each run to the one it needs.
  - The public functions check their arguments (the checks at the end); the model's steps inside
    call the unchecked private ops (_layernorm_forward, ...), which the public ones wrap.
  - Caches are named tuples; an attention cache's `kind` says which of the four made it.

The shortcut (_attention_forward): before LN1 each position holds one of only two vectors and the
[CLS] query is the same for every sample, so each head's output is a ratio of two linear functions
of the bit vector: a batch costs one (B, 2T) @ (2T, H + d) matrix product, not O(B T d^2).
baseline.py's MLP runs on this file's linear and MLP ops.
Shape letters as in attn.py: B batch, T bits, d width, H heads, e = d/H, k hidden, R runs.
"""
import collections

import numpy as np

import attn

SAFE_EXP = {np.dtype("float32"): 60.0, np.dtype("float64"): 600.0}   # exp(x) far from overflow


# ---------------------------------------------------------------------------------------------
# tuned ops: LayerNorm, affine map and MLP for a stack of runs

def _row_sum(a):  # [..., n] -> [...]
    """Sum over the last axis as a matrix-vector product: numpy's own reduction over a short last
    axis (LayerNorm's d, a head's width) is much slower than BLAS on the same numbers."""
    return a @ np.ones(a.shape[-1], a.dtype)


def _layernorm_forward(x, g, b):  # [R, n, d], [R, d], [R, d] -> [R, n, d]
    """attn.layernorm_forward per run; means by _row_sum, xhat written over x - mu (one buffer
    less)."""
    inv_d = 1.0 / x.shape[-1]
    xc = x - (_row_sum(x) * inv_d)[..., None]
    rstd = 1.0 / np.sqrt(_row_sum(xc * xc) * inv_d + attn.LN_EPS)[..., None]
    xhat = np.multiply(xc, rstd, out=xc)
    y = xhat * g[:, None, :]
    y += b[:, None, :]                                  # in place: no second [R, n, d] array
    return y, (xhat, rstd, g)


def _layernorm_backward(dy, cache):  # [R, n, d] -> dx [R, n, d], dg [R, d], db [R, d]
    xhat, rstd, g = cache
    dg, db = (dy * xhat).sum(1), dy.sum(1)              # forward: y = xhat * g + b
    dxhat = dy * g[:, None, :]
    inv_d = 1.0 / dy.shape[-1]                          # forward: xhat = (x - mu) * rstd
    dx = dxhat - (_row_sum(dxhat) * inv_d)[..., None]
    dx -= xhat * (_row_sum(dxhat * xhat) * inv_d)[..., None]
    dx *= rstd
    return dx, dg, db


def _ln_forward(p, cfg, name, x):  # attn.py's _ln_forward, a stack: LayerNorm `name` or identity
    if not cfg["ln"]:
        return x, None
    return _layernorm_forward(x, p[name + "_g"], p[name + "_b"])


def _ln_backward(grads, cfg, name, dy, cache):  # stores grads[name_g], grads[name_b]; -> dx
    if not cfg["ln"]:
        return dy
    dx, grads[name + "_g"], grads[name + "_b"] = _layernorm_backward(dy, cache)
    return dx


def _linear_forward(x, W, b):
    """y = x @ W + b, leading axes reshaped away so that each run is one BLAS product.
    A stack of R runs: x [R, ..., n], W [R, n, k], b [R, k]. One run: x [..., n], W [n, k], b [k]
    (baseline.py's MLP)."""
    if W.ndim == 3:
        y = x.reshape(W.shape[0], -1, x.shape[-1]) @ W
        y += b[:, None, :]
        return y.reshape(x.shape[:-1] + (W.shape[-1],)), (x, W)
    y = x.reshape(-1, x.shape[-1]) @ W
    y += b
    return y.reshape(x.shape[:-1] + (W.shape[1],)), (x, W)


def _linear_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW, db
    """db by ones @ dy: numpy's column sum over many short rows is slower than BLAS."""
    x, W = cache
    if W.ndim == 3:
        R = W.shape[0]
        x3, dy3 = x.reshape(R, -1, x.shape[-1]), dy.reshape(R, -1, dy.shape[-1])
        dx = (dy3 @ W.transpose(0, 2, 1)).reshape(x.shape) if need_dx else None
        return dx, x3.transpose(0, 2, 1) @ dy3, (np.ones(dy3.shape[1], dy3.dtype) @ dy3)
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dx = (dy2 @ W.T).reshape(x.shape) if need_dx else None
    return dx, x2.T @ dy2, np.ones(dy2.shape[0], dy2.dtype) @ dy2


def _mlp_forward(x, W_1, b_1, W_2, b_2, act="gelu"):  # attn.mlp_forward on linear_forward
    h, c1 = _linear_forward(x, W_1, b_1)
    a, ca = attn.ACTIVATIONS[act][0](h)
    y, c2 = _linear_forward(a, W_2, b_2)
    return y, (c1, ca, c2, act)


def _mlp_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW_1, db_1, dW_2, db_2
    c1, ca, c2, act = cache
    da, dW_2, db_2 = _linear_backward(dy, c2)           # forward: y = a W_2 + b_2
    dh = attn.ACTIVATIONS[act][1](da, ca)               # forward: a = act(h)
    dx, dW_1, db_1 = _linear_backward(dh, c1, need_dx)  # forward: h = x W_1 + b_1
    return dx, dW_1, db_1, dW_2, db_2


# ---------------------------------------------------------------------------------------------
# the exact shortcut: two versions per position, a head output is a ratio of linear functions

def _head_spread(H, e, dtype):  # -> [H, H e]
    """Row h is 1 on head h's e columns, 0 elsewhere. A [..., H] @ _head_spread gives each head's
    value on its e columns in one BLAS call, exactly (each entry is one product by 1, the rest are
    products by 0), where broadcasting along a length-e axis (e = 4 in the experiment) runs
    numpy's inner loop 4 elements at a time."""
    return np.repeat(np.eye(H, dtype=dtype), e, axis=1)


def float_dtype(name, v):
    """v as np.dtype float32 or float64 (a name, a dtype or a numpy type), or ValueError."""
    try:
        dt = None if v is None else np.dtype(v)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.name not in attn.FLOAT_DTYPES:
        raise ValueError(f"{name} must be 'float32' or 'float64', got {attn.describe(v)}")
    return dt


def two_versions(X, dtype):  # [R, B, T] (or [B, T]) bits -> [R, B, 2T]: [1 - X, X]
    """Which version of each position a sample holds: column t is bit 0, column T + t bit 1.
    dtype: the model's, float32 or float64. A full-batch run builds it once and passes it to
    model_forward as `versions`, which then does not rebuild (or re-read) it every step."""
    check_batch(X)
    return _two_versions(X, float_dtype("dtype", dtype))


def _two_versions(X, dtype):  # two_versions on checked bits (every step)
    T = X.shape[-1]
    Xb = np.empty(X.shape[:-1] + (2 * T,), dtype)
    np.subtract(1, X, out=Xb[..., :T], dtype=dtype)
    Xb[..., T:] = X
    return Xb


AttentionCache = collections.namedtuple(
    "AttentionCache", "kind Xb ln1 c_q rn u c_v c_o qh V E Ed Z Zd mix scale spread")


def _attention_forward(p, cfg, X, versions=None):
    """Attn(LN1(X))[CLS] for a stack of R runs, in O(B T (H + d)) instead of O(B T d^2).
    p: every parameter with a leading run axis; X [R, B, T] -> [R, B, d], and the cache.

    Before LN1, position t holds E_tok[0] + E_pos[t] or E_tok[1] + E_pos[t]; the [CLS] row is the
    same for every sample. So per head the scores exist in two versions, s0[t] and s1[t], and
    with one-hot bits Xb = [1 - X, X]  [B, 2T]  and weights E_v[t] = exp(s_v[t] - M):
        Z = E_c + Xb @ E                 (softmax denominator)   [B, H]
        N = E_c V_c + Xb @ (E * V)       (weighted values)       [B, H, e]
        mix = N / Z, exactly the [CLS] row of softmax attention: one (B, 2T) @ (2T, H + d) product.
    Every term of Z is positive, so nothing cancels (writing Z with e1 - e0 would lose all
    precision when one version's weight is huge). M = max(s_c, max_t min(s0[t], s1[t])) is a
    lower bound on every sample's max score, so Z >= 1. If some score of a run exceeds M by more
    than SAFE_EXP (exp could overflow), that run falls back (_attention_forward_split). The keys
    meet only the one query, so the scores are rn @ (W_K q) per head: no [2T+1, d] key matrix.
    """
    R, B, T = X.shape
    d, H = cfg["d"], cfg["heads"]
    e = d // H
    rows = np.empty((R, 2 * T + 1, d), p["E_pos"].dtype)            # v0 rows | v1 rows | cls
    rows[:, :2 * T] = (p["E_tok"][:, :, None, :] + p["E_pos"][:, None]).reshape(R, 2 * T, d)
    rows[:, 2 * T] = p["cls"]
    rn, c_ln1 = _ln_forward(p, cfg, "ln1", rows)
    q, c_q = _linear_forward(rn[:, -1:], p["W_Q"], p["b_Q"])         # [R, 1, d]
    qh = q.reshape(R, H, e)
    # the keys are only ever dotted with the one query: fold it in, s = rn @ u + c  (no K)
    u = np.einsum("rdhe,rhe->rdh", p["W_K"].reshape(R, d, H, e), qh)  # [R, d, H]: W_K q per head
    scale = e ** -0.5
    s = (rn @ u + _row_sum(p["b_K"].reshape(R, H, e) * qh)[:, None]) * scale  # [R, 2T+1, H]
    M = np.maximum(np.minimum(s[:, :T], s[:, T:2 * T]).max(1), s[:, 2 * T])   # [R, H]
    s -= M[:, None]
    top = s.reshape(R, -1).max(1)                                     # [R]: each run's spread
    if top.max() > SAFE_EXP[s.dtype]:
        return _attention_forward_split(p, cfg, X, versions, top)
    V, c_v = _linear_forward(rn, p["W_V"], p["b_V"])                 # [R, 2T+1, d]
    E_EV = np.empty((R, 2 * T + 1, H + d), s.dtype)   # [E | E * V] per row: one product for both
    E = np.exp(s, out=E_EV[..., :H])
    spread = _head_spread(H, e, s.dtype)
    Ed = E @ spread                        # [R, 2T+1, d]: each head's weight over its e columns
    np.multiply(Ed, V, out=E_EV[..., H:])
    Xb = _two_versions(X, s.dtype) if versions is None else versions  # [R, B, 2T]
    Z_N = Xb @ E_EV[:, :2 * T]       # [Z | N]: softmax denominators and numerators, [R, B, H + d]
    Z_N += E_EV[:, 2 * T:]                                            # the [CLS] row, every sample
    Z = Z_N[..., :H]                                                  # [R, B, H]
    Zd = Z @ spread                                                   # [R, B, d]: Z per column
    mix = Z_N[..., H:] / Zd
    y, c_o = _linear_forward(mix, p["W_O"], p["b_O"])
    return y, AttentionCache("fast", Xb, c_ln1, c_q, rn, u, c_v, c_o, qh, V, E, Ed, Z, Zd, mix,
                             scale, spread)


def _shortcut_backward(dy, p, cfg, c):  # the backward of _attention_forward's shortcut
    R, B, twoT = c.Xb.shape
    T, d, H = twoT // 2, cfg["d"], cfg["heads"]
    e = d // H
    g = {}
    dmix, g["W_O"], g["b_O"] = _linear_backward(dy, c.c_o)    # forward: y = mix W_O + b_O
    dZ_N = np.empty((R, B, H + d), dmix.dtype)  # forward: mix = N / Z, Z spread as Zd = Z @ spread
    dN = np.divide(dmix, c.Zd, out=dZ_N[..., H:])
    dZ_N[..., :H] = -_row_sum((dN * c.mix).reshape(R, B, H, e))
    dE_EV = np.empty((R, 2 * T + 1, H + d), dmix.dtype)  # forward: Z_N = Xb @ E_EV[:2T] + E_EV[2T]
    np.matmul(c.Xb.transpose(0, 2, 1), dZ_N, out=dE_EV[:, :2 * T])
    dE_EV[:, 2 * T] = dZ_N.sum(1)
    dEV = dE_EV[..., H:]                                              # forward: EV = Ed * V
    dE = dE_EV[..., :H] + _row_sum((dEV * c.V).reshape(R, -1, H, e))  # forward: Ed = E @ spread
    dV = dEV * c.Ed
    ds = dE * c.E * c.scale                  # forward: E = exp(s - M), M a constant shift
    du = c.rn.transpose(0, 2, 1) @ ds        # forward: s = (rn @ u + b_K . q) * scale
    dc = ds.sum(1)                           # [R, H]
    query_blocks = c.spread * c.qh.reshape(R, 1, d)  # [R, H, d]: row h is head h's query, 0 else
    g["W_K"] = du @ query_blocks             # forward: u = W_K q per head (exact: one term each)
    g["b_K"] = (dc[:, None] @ query_blocks)[:, 0]
    dqh = (np.einsum("rdhe,rdh->rhe", p["W_K"].reshape(R, d, H, e), du)
           + p["b_K"].reshape(R, H, e) * dc[..., None])
    drn, g["W_V"], g["b_V"] = _linear_backward(dV, c.c_v)     # forward: V = rn W_V + b_V
    drn += ds @ c.u.transpose(0, 2, 1)
    drn_q, g["W_Q"], g["b_Q"] = _linear_backward(dqh.reshape(R, 1, d), c.c_q)
    drn[:, -1:] += drn_q                     # forward: q = rn[-1] W_Q + b_Q
    drows = _ln_backward(g, cfg, "ln1", drn, c.ln1)
    d_rows_by_version = drows[:, :2 * T].reshape(R, 2, T, d)  # forward: rows = E_tok[v] + E_pos[t]
    g["E_tok"], g["E_pos"] = d_rows_by_version.sum(2), d_rows_by_version.sum(1)
    g["cls"] = drows[:, 2 * T]
    return g


# ---------------------------------------------------------------------------------------------
# the fallbacks, where a run's scores spread past exp's range

SplitCache = collections.namedtuple("SplitCache", "kind parts")            # parts: (idx, cache)
Float64Cache = collections.namedtuple("Float64Cache", "kind p64 inner")
ByReferenceCache = collections.namedtuple("ByReferenceCache", "kind runs")


def _attention_forward_split(p, cfg, X, versions, top):
    """Run by run: top [R] is each run's largest shifted score. Runs within SAFE_EXP stay on the
    shortcut, float32 runs within float64's SAFE_EXP rerun it in float64, the rest take the
    reference; each group is computed as a stack of its own, so every run gets exactly the numbers
    it gets alone, whatever its stackmates. -> [R, B, d], and the groups' caches."""
    f64 = SAFE_EXP[np.dtype("float64")]
    safe = top <= SAFE_EXP[top.dtype]
    wide = ~safe & (top <= f64) if top.dtype == np.float32 else np.zeros_like(safe)
    groups = [(idx, forward) for idx, forward in (
        (np.flatnonzero(safe), lambda q, x, v: _attention_forward(q, cfg, x, v)),
        (np.flatnonzero(wide), lambda q, x, v: _attention_forward_in_float64(q, cfg, x)),
        (np.flatnonzero(~safe & ~wide),
         lambda q, x, v: _attention_forward_by_reference(q, cfg, x)))
        if idx.size]
    parts, y = [], None
    for idx, forward in groups:
        y_g, c_g = forward({k: v[idx] for k, v in p.items()}, X[idx],
                           None if versions is None else versions[idx])
        if len(groups) == 1:
            return y_g, c_g
        if y is None:
            y = np.empty((X.shape[0],) + y_g.shape[1:], y_g.dtype)
        y[idx] = y_g
        parts.append((idx, c_g))
    return y, SplitCache("split", parts)


def _attention_forward_in_float64(p, cfg, X):
    """For a float32 stack whose scores spread past float32's exp: the same shortcut in float64,
    result rounded to float32. Exact like the shortcut and about twice its cost, where the
    reference costs O(B T d^2) a step. -> [R, B, d]."""
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    y, inner = _attention_forward(p64, cfg, X)        # past float64's range it falls back again
    return y.astype(np.float32), Float64Cache("float64", p64, inner)


def _attention_forward_by_reference(p, cfg, X):
    """The exact fallback: attn.head_forward ([CLS] row), run by run. -> [R, B, d]."""
    outs, caches = zip(*(attn.head_forward({k: v[r] for k, v in p.items()}, cfg, X[r])
                         for r in range(X.shape[0])))
    return np.stack(outs), ByReferenceCache("reference", caches)


def _attention_backward(dy, p, cfg, c):
    """Backward of _attention_forward, on whichever path its forward took: {E_tok, E_pos, cls,
    ln1_g, ln1_b, W_Q, ..., b_O}, each with the leading run axis."""
    if c.kind == "fast":
        return _shortcut_backward(dy, p, cfg, c)
    if c.kind == "float64":
        g = _attention_backward(dy.astype(np.float64), c.p64, cfg, c.inner)
        return {k: v.astype(np.float32) for k, v in g.items()}
    if c.kind == "reference":
        grads = [attn.head_backward(dy[r], {k: v[r] for k, v in p.items()}, cfg, cr)
                 for r, cr in enumerate(c.runs)]
        return {k: np.stack([g[k] for g in grads]) for k in grads[0]}
    g = {}                                                            # "split"
    for idx, part in c.parts:
        for k, v in _attention_backward(dy[idx], {k: v[idx] for k, v in p.items()}, cfg,
                                       part).items():
            if k not in g:
                g[k] = np.empty((dy.shape[0],) + v.shape[1:], v.dtype)
            g[k][idx] = v
    return g


# ---------------------------------------------------------------------------------------------
# the model on the fast path: attn.model_forward's block, for a stack

def activation_bytes(cfg, B, R=1):
    """Rough peak bytes of the activations (forward caches plus backward) of one batch of R runs."""
    attn.check_config(cfg)
    for name, v in (("B", B), ("R", R)):
        attn.check_number(name, v, attn.INTS, 1, np.inf, "an integer >= {lo}")
    return _activation_bytes(cfg, B, R)


def _activation_bytes(cfg, B, R):
    T, d, H = cfg["T"], cfg["d"], cfg["heads"]
    n = 3 * B * T + 12 * (2 * T + 1) * (d + H) + 8 * B * (d + H + max(cfg["mlp"], 1))
    return R * n * np.dtype(cfg["dtype"]).itemsize


def _check_call(p, cfg, X, versions):
    """model_forward's arguments: types, shapes and dtypes, and the values of the batch only (never
    those of the parameters): each costs far less than a step."""
    attn.check_config(cfg)
    attn.check_array("X", X, "biuf", lambda s: len(s) in (2, 3), "a numpy array [batch, T] (or "
                     "[runs, batch, T]) of bits (dtype bool, integer or float)")
    B, R = X.shape[-2], X.shape[0] if X.ndim == 3 else 1
    attn.check_memory(_activation_bytes(cfg, B, R), f"T={cfg['T']} with a batch of {B} (x {R} "
                      f"runs)", "of activations on the fast path", "use a smaller batch or T")
    check_stack_params(p, cfg, X.shape[0] if X.ndim == 3 else None)
    if versions is None:                # kept versions: the bits were read when they were built
        check_batch(X, cfg["T"])
        return
    if X.shape[-1] != cfg["T"] or B < 1:
        check_batch(X[..., :1, :], cfg["T"])                 # names T, or the empty batch
    dt = np.dtype(cfg["dtype"])
    attn.check_array("versions", versions, (dt,), X.shape[:-1] + (2 * X.shape[-1],), f"None or "
                     f"two_versions(X, dtype): a numpy array of shape {{shape}} in the model's "
                     f"dtype {dt}")


ModelCache = collections.namedtuple("ModelCache", "attn ln2 mlp lnf f single")


def model_forward(p, cfg, X, versions=None):
    """Logits of attn.model_forward for a stack: X [R, B, T] -> [R, B] (one run: [B, T] -> [B]),
    and the cache. versions: two_versions(X, dtype) kept by a caller whose X never changes (a
    full-batch run); it must be exactly that matrix (its shape and dtype are checked, not its
    values). No dropout here: its per-sample masks break the two versions (attn.py runs it)."""
    _check_call(p, cfg, X, versions)
    if X.ndim == 2:
        z, c = _forward({k: v[None] for k, v in p.items()}, cfg, X[None],
                        None if versions is None else versions[None])
        return z[0], c._replace(single=True)
    return _forward(p, cfg, X, versions)


def _forward(p, cfg, X, versions):
    a, c_attn = _attention_forward(p, cfg, X, versions)
    h = p["cls"][:, None, :] + a                                     # residual at [CLS]
    c_ln2 = c_mlp = None
    if cfg["mlp"]:
        hn, c_ln2 = _ln_forward(p, cfg, "ln2", h)
        m, c_mlp = _mlp_forward(hn, p["W_1"], p["b_1"], p["W_2"], p["b_2"], cfg["act"])
        h = h + m                                                    # residual
    f, c_lnf = _ln_forward(p, cfg, "lnf", h)
    z = (f @ p["w"][:, :, None])[:, :, 0] + p["b"][:, :1]            # readout at [CLS]
    return z, ModelCache(c_attn, c_ln2, c_mlp, c_lnf, f, False)


def model_backward(dz, p, cfg, c):  # dz [R, B] (or [B] for one run) -> gradient dict
    """Gradients of sum(dz * logits) for every parameter, of one model_forward call."""
    check_cache(c, ModelCache, "fast.model_forward")
    check_stack_params(p, cfg, None if c.single else c.f.shape[0])
    return _model_backward(dz, p, cfg, c)


def _model_backward(dz, p, cfg, c):  # model_backward after loss_and_grads' forward checked p
    if not isinstance(c, ModelCache):
        raise attn.WrongType(f"cache must be the cache that fast.model_forward returned, got "
                             f"{attn.describe(c)}")
    attn.check_array("dz", dz, "biuf", c.f.shape[1 if c.single else 0:-1],
                     "a numpy array of numbers in the logits' shape {shape}")
    if c.single:
        g = _backward(dz[None], {k: v[None] for k, v in p.items()}, cfg, c)
        return {k: v[0] for k, v in g.items()}
    return _backward(dz, p, cfg, c)


def _backward(dz, p, cfg, c):
    g = {}
    g["w"] = (dz[:, None, :] @ c.f)[:, 0, :]                        # forward: z = f @ w + b
    g["b"] = dz.sum(-1)[:, None]
    dh = _ln_backward(g, cfg, "lnf", dz[:, :, None] * p["w"][:, None, :], c.lnf)
    if cfg["mlp"]:                                                   # forward: h = h + MLP(LN2(h))
        dhn, g["W_1"], g["b_1"], g["W_2"], g["b_2"] = _mlp_backward(dh, c.mlp)
        dh = dh + _ln_backward(g, cfg, "ln2", dhn, c.ln2)
    g.update(_attention_backward(dh, p, cfg, c.attn))                # forward: h = cls + attn
    g["cls"] = g["cls"] + dh.sum(-2)
    return g


def logistic_forward(z, y, weights=None):  # [R, B], [R, B] -> [R] (or [B], [B] -> a number)
    """attn.logistic_forward, or sum(weights * loss) per run where weights [..., B] are given (a
    stack of minibatch runs gives its padding samples weight 0 and the others 1/m). Its cache
    goes to attn.logistic_backward."""
    attn.check_array("z", z, "f", lambda s: len(s) >= 1 and s[-1] >= 1,
                     "a numpy array [..., batch >= 1] of float logits")
    check_targets(y, weights, z.shape, "z")
    y = y.astype(z.dtype, copy=False)
    loss = np.maximum(z, 0) - y * z + np.log1p(np.exp(-np.abs(z)))
    w = 1.0 / z.shape[-1] if weights is None else weights
    return (loss * w).sum(-1), (z, y, w)


def loss_and_grads(p, cfg, X, y, weights=None, versions=None):
    """attn.loss_and_grads for a stack (X [R, B, T], y [R, B]): each run's loss [R] (sum(weights *
    loss) per run when weights [R, B] are given), each run's gradients of its own loss, and the
    logits; or for one run as a stack of one. versions: see model_forward."""
    attn.check_array("X", X, "biuf", lambda s: len(s) in (2, 3), "a numpy array [batch, T] (or "
                     "[runs, batch, T]) of bits (dtype bool, integer or float)")
    check_targets(y, weights, X.shape[:-1], "X's rows")
    z, cache = model_forward(p, cfg, X, versions)
    loss, c_loss = logistic_forward(z, y, weights)
    return loss, _model_backward(attn.logistic_backward(1.0, c_loss), p, cfg, cache), z


def cls_attention_mean(p, cfg, X):  # one run, X [B, T] -> [T+1], [T+1, H]
    """Mean over samples and heads of the [CLS] attention weights (last: [CLS] itself), and the
    mean over samples of each head's, [T+1, H]: both from one forward.

    Exact and cheap from the shortcut: sample b puts weight E[v, t] / Z[b] on position t when its
    bit there is v, so the mean over samples is E0 * ((1 - X)^T @ 1/Z) + E1 * (X^T @ 1/Z).
    """
    attn.check_params(p, cfg)
    check_batch(X, cfg["T"], stack=False)
    _, c = _attention_forward({k: v[None] for k, v in p.items()}, cfg, X[None])
    if c.kind == "float64":
        c = c.inner
    if c.kind != "fast":                                # the fallback already holds the weights
        A = c.runs[0].attn.A                                          # [B, H, T+1]
        return A.mean(axis=(0, 1)), A.mean(axis=0).T
    Xb, E, Z = c.Xb[0], c.E[0], c.Z[0]
    T, B = cfg["T"], X.shape[0]
    W = E[:2 * T] * (Xb.T @ (1.0 / Z))                                # [2T, H]: v0 rows, v1 rows
    A = np.concatenate([W[:T] + W[T:], E[2 * T:] * (1.0 / Z).sum(0)])  # [T+1, H]
    return A.mean(1) / B, A / B


# ---------------------------------------------------------------------------------------------
# the checks of a stack's arguments, on attn.py's helpers (attn.py checks one run's)

def check_batch(X, T=None, stack=True):
    """X a numpy array of bits [batch >= 1, T] (or [runs, batch, T] where `stack`), with the
    model's T when it is given; dtype bool, integer or float, values 0 and 1."""
    form = "[batch, T]" + (" (or [runs, batch, T])" if stack else "")
    attn.check_array("X", X, "biuf", lambda s: len(s) == 2 or (len(s) == 3 and stack),
                     f"a numpy array {form} of bits (dtype bool, integer or float)")
    if T is not None and X.shape[-1] != T:
        raise ValueError(f"X has T={X.shape[-1]} columns but the model has T={T}")
    if X.shape[-2] < 1:
        raise ValueError("X must hold at least one example")
    attn.check_01("X", X, "bits")


def check_stack_params(p, cfg, R):
    """attn.check_params(p, cfg), each parameter with a leading axis of R runs (R None: one run)."""
    if R is not None and isinstance(p, dict):
        for k, v in p.items():
            if isinstance(v, np.ndarray) and (v.ndim == 0 or v.shape[0] != R):
                raise ValueError(f"param {k} must have a leading axis of R={R} runs, as X "
                                 f"[runs, batch, T] has, got {attn.describe(v)}")
        p = {k: v[0] if isinstance(v, np.ndarray) else v for k, v in p.items()}
    attn.check_params(p, cfg)


def check_floats(**arrays):
    """Each argument name=(v, shape[, form]) a numpy float array: of `shape` (a tuple), or passing
    the test `shape` (a function of the shape, described by form), or with an axis (shape None)."""
    for name, (v, shape, *form) in arrays.items():
        if shape is None:
            shape, form = (lambda s: len(s) >= 1), ["[..., n]"]
        attn.check_array(name, v, "f", shape, "a numpy float array " + (form[0] if form else
                                                                         "of shape {shape}"))


def check_cache(c, kind, made_by):  # the cache an op's forward returned: its type, or a tuple
    if not (isinstance(c, kind) if isinstance(kind, type) else  # of `kind` entries -> c
            isinstance(c, tuple) and len(c) == kind):
        raise attn.WrongType(f"cache must be the cache that {made_by} returned, got "
                             f"{attn.describe(c)}")
    return c


def check_targets(y, weights, shape, of):
    """The loss's labels y (0 and 1, attn.check_labels) and per-sample weights (None, or finite
    numbers >= 0), each of the logits' `shape`, which `of` names."""
    attn.check_labels(y, shape, of)
    if weights is None:
        return
    attn.check_array("weights", weights, "biuf", shape, "None or a numpy array of shape {shape} "
                     f"(one weight per example) of numbers >= 0, as {of}")
    if weights.size and not (weights.min() >= 0 and weights.max() < np.inf):  # NaN fails both
        bad = weights[~((weights >= 0) & np.isfinite(weights))].flat[0].item()
        raise ValueError(f"weights must be finite and >= 0, got {bad!r}")


# ---------------------------------------------------------------------------------------------
# the tuned ops for a caller: checked, then the unchecked op the model's steps call

def layernorm_forward(x, g, b):  # [R, n, d], [R, d], [R, d] -> [R, n, d]
    check_floats(x=(x, lambda s: len(s) == 3, "[R, n, d]"))
    check_floats(g=(g, x.shape[::2]), b=(b, x.shape[::2]))
    return _layernorm_forward(x, g, b)


def layernorm_backward(dy, cache):  # [R, n, d] -> dx [R, n, d], dg [R, d], db [R, d]
    check_cache(cache, 3, "fast.layernorm_forward")
    check_floats(dy=(dy, cache[0].shape))
    return _layernorm_backward(dy, cache)


def linear_forward(x, W, b):  # [R, ..., n], [R, n, k], [R, k] (one run: [..., n], [n, k], [k])
    check_floats(x=(x, None))
    check_affine(x.shape, W, b, of="x")
    return _linear_forward(x, W, b)


def linear_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW, db
    x, W = check_cache(cache, 2, "fast.linear_forward")
    check_need_dx(need_dx)
    check_floats(dy=(dy, x.shape[:-1] + W.shape[-1:]))
    return _linear_backward(dy, cache, need_dx)


def mlp_forward(x, W_1, b_1, W_2, b_2, act="gelu"):  # attn.mlp_forward's shapes, or a stack's
    attn.check_choice("act", act, attn.ACTIVATIONS)
    check_floats(x=(x, None))
    check_affine(check_affine(x.shape, W_1, b_1, "W_1", "b_1", "x"), W_2, b_2, "W_2", "b_2",
                 "W_1's output")
    return _mlp_forward(x, W_1, b_1, W_2, b_2, act)


def mlp_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW_1, db_1, dW_2, db_2
    a, W_2 = check_cache(cache, 4, "fast.mlp_forward")[2]
    check_need_dx(need_dx)
    check_floats(dy=(dy, a.shape[:-1] + W_2.shape[-1:]))
    return _mlp_backward(dy, cache, need_dx)


def check_affine(x_shape, W, b, W_name="W", b_name="b", of="x"):  # -> the output's shape
    """W [R, n, k] with b [R, k] for inputs [R, ..., n], or W [n, k] with b [k] for [..., n]; `of`
    names the input."""
    n = x_shape[-1]
    check_floats(**{W_name: (W, lambda s: len(s) in (2, 3) and s[-2] == n and (
        len(s) == 2 or s[0] == x_shape[0]), f"[R, n, k] or [n, k] with {of}'s n={n} (and R its "
        f"first axis)")})
    check_floats(**{b_name: (b, W.shape[::2] if W.ndim == 3 else W.shape[1:])})
    return x_shape[:-1] + W.shape[-1:]


def check_need_dx(need_dx):
    if not isinstance(need_dx, (bool, np.bool_)):
        raise attn.refuse("need_dx", need_dx, "True or False", False)
