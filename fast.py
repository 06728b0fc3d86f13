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
  - The doors a caller uses (model_forward, model_backward, loss_and_grads, two_versions,
    cls_attention_mean) check its arguments once, in one line each (the checks at the end); the
    ops inside (layernorm_forward, linear_forward, mlp_forward, ...) take what numpy takes.
  - Caches are named tuples; an attention cache's `kind` says which of the four made it.
  - ws, a workspace: where an op takes the arrays it writes (_Workspace). loss_and_grads keeps
    them from one step to the next; every other door, whose caches and results are the caller's,
    takes new ones (_FRESH). Either way the same operations run on the same numbers.

The shortcut (_attention_forward): before LN1 each position holds one of only two vectors and the
[CLS] query is the same for every sample, so each head's output is a ratio of two linear functions
of the bit vector: a batch costs one (B, 2T) @ (2T, H + d) matrix product, not O(B T d^2).
The studies' MLP baseline (studies/lib/baseline.py) runs on this file's linear and MLP ops.
Shape letters as in attn.py: B batch, T bits, d width, H heads, e = d/H, k hidden, R runs.
"""
import collections
import functools
import threading

import numpy as np

import attn

SAFE_EXP = {np.dtype("float32"): 60.0, np.dtype("float64"): 600.0}   # exp(x) far from overflow


# ---------------------------------------------------------------------------------------------
# where a step's arrays live: kept from step to step by loss_and_grads, new for everyone else

class _Workspace:
    """The arrays a training step writes, kept for the next step. A step at T = 1000 writes
    dozens of arrays of half a megabyte and more. Given back to the allocator, such an array
    goes back to the kernel (past glibc's mmap threshold) and returns as fresh pages the next
    step: a page fault every 4 kB, hundreds a step, more or fewer as what the process allocated
    before has moved glibc's threshold. Each array has a role, the name it is taken by (one per
    purpose, said where it is taken), and is made again only when its shape or dtype changes
    (another T, batch or stack: the new one replaces it, so the workspace holds one step's
    arrays, about fast.activation_bytes). No array of a workspace leaves loss_and_grads: the
    loss, gradients and logits it returns are new arrays."""

    def __init__(self):
        self.arrays = {}

    def empty(self, role, shape, dtype):  # -> the role's array of this shape and dtype
        a = self.arrays.get(role)
        if a is None or a.shape != shape or a.dtype != dtype:
            a = self.arrays[role] = np.empty(shape, dtype)
        return a


class _Fresh:
    """The workspace of every door but loss_and_grads: each array new, as the caller may keep
    the caches and results (model_forward's cache goes to model_backward, maybe twice)."""

    @staticmethod
    def empty(role, shape, dtype):
        return np.empty(shape, dtype)


_FRESH = _Fresh()
_STEPS = threading.local()      # each thread's loss_and_grads workspace (two threads: two)


def _step_workspace():  # -> this thread's workspace for loss_and_grads, made at its first step
    ws = getattr(_STEPS, "ws", None)
    if ws is None:
        ws = _STEPS.ws = _Workspace()
    return ws


@functools.lru_cache(maxsize=64)
def _ones(n, dtype):  # -> [n] ones, read-only: the vector of _row_sum and of the biases' sums
    ones = np.ones(n, dtype)
    ones.flags.writeable = False
    return ones


# ---------------------------------------------------------------------------------------------
# tuned ops: LayerNorm, affine map and MLP for a stack of runs

def _row_sum(a, out=None):  # [..., n] -> [...]
    """Sum over the last axis as a matrix-vector product: numpy's own reduction over a short last
    axis (LayerNorm's d, a head's width) is much slower than BLAS on the same numbers."""
    return np.matmul(a, _ones(a.shape[-1], a.dtype), out=out)


def layernorm_forward(x, g, b):  # [R, n, d], [R, d], [R, d] -> [R, n, d]
    """attn.layernorm_forward per run; means by _row_sum, xhat written over x - mu (one buffer
    less)."""
    return _layernorm_forward(x, g, b, _FRESH, "ln")


def _layernorm_forward(x, g, b, ws, role):  # layernorm_forward, its arrays from ws
    inv_d, rows, dt = 1.0 / x.shape[-1], x.shape[:-1], x.dtype
    mu = _row_sum(x, ws.empty(role + " mean", rows, dt))
    mu *= inv_d
    xc = np.subtract(x, mu[..., None], out=ws.empty(role + " xhat", x.shape, dt))
    var = _row_sum(np.multiply(xc, xc, out=ws.empty(role + " scratch", x.shape, dt)),
                   ws.empty(role + " rstd", rows, dt))
    var *= inv_d
    var += attn.LN_EPS
    rstd = np.divide(1.0, np.sqrt(var, out=var), out=var)[..., None]
    xhat = np.multiply(xc, rstd, out=xc)
    y = np.multiply(xhat, g[:, None, :], out=ws.empty(role + " y", x.shape, np.promote_types(
        dt, g.dtype)))
    y += b[:, None, :]                                  # in place: no second [R, n, d] array
    return y, (xhat, rstd, g)


def layernorm_backward(dy, cache):  # [R, n, d] -> dx [R, n, d], dg [R, d], db [R, d]
    return _layernorm_backward(dy, cache, _FRESH, "ln")


def _layernorm_backward(dy, cache, ws, role):  # layernorm_backward, its arrays from ws
    xhat, rstd, g = cache
    dt, rows = np.promote_types(dy.dtype, xhat.dtype), dy.shape[:-1]
    scratch = ws.empty(role + " scratch", dy.shape, dt)
    dg, db = np.multiply(dy, xhat, out=scratch).sum(1), dy.sum(1)   # forward: y = xhat * g + b
    dx = np.multiply(dy, g[:, None, :], out=ws.empty(role + " dx", dy.shape, dt))   # dxhat
    inv_d = 1.0 / dy.shape[-1]                          # forward: xhat = (x - mu) * rstd
    mean_dxhat = _row_sum(dx, ws.empty(role + " mean", rows, dt))
    mean_dxhat *= inv_d
    mean_dxhat_xhat = _row_sum(np.multiply(dx, xhat, out=scratch),
                               ws.empty(role + " mean dxhat xhat", rows, dt))
    mean_dxhat_xhat *= inv_d
    dx -= mean_dxhat[..., None]                         # dx = dxhat - mean(dxhat), over dxhat
    dx -= np.multiply(xhat, mean_dxhat_xhat[..., None], out=scratch)
    dx *= rstd
    return dx, dg, db


def _ln_forward(p, cfg, name, x, ws):  # attn.py's _ln_forward, a stack: LayerNorm `name` or x
    if not cfg["ln"]:
        return x, None
    return _layernorm_forward(x, p[name + "_g"], p[name + "_b"], ws, name)


def _ln_backward(grads, cfg, name, dy, cache, ws):  # stores grads[name_g], grads[name_b]; -> dx
    if not cfg["ln"]:
        return dy
    dx, grads[name + "_g"], grads[name + "_b"] = _layernorm_backward(dy, cache, ws, name)
    return dx


def linear_forward(x, W, b):
    """y = x @ W + b, leading axes reshaped away so that each run is one BLAS product.
    A stack of R runs: x [R, ..., n], W [R, n, k], b [R, k]. One run: x [..., n], W [n, k], b [k]
    (the studies' MLP baseline)."""
    return _linear_forward(x, W, b, _FRESH, "linear")


def _linear_forward(x, W, b, ws, role):  # linear_forward, a stack's y from ws (one run's new)
    if W.ndim == 2:
        y = x.reshape(-1, x.shape[-1]) @ W
        y += b
        return y.reshape(x.shape[:-1] + (W.shape[1],)), (x, W)
    x3 = x.reshape(W.shape[0], -1, x.shape[-1])
    y = np.matmul(x3, W, out=ws.empty(role, x3.shape[:2] + W.shape[2:],
                                      np.promote_types(x.dtype, W.dtype)))
    y += b[:, None, :]
    return y.reshape(x.shape[:-1] + (W.shape[-1],)), (x, W)


def linear_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW, db
    """db by ones @ dy: numpy's column sum over many short rows is slower than BLAS."""
    return _linear_backward(dy, cache, _FRESH, "linear", need_dx)


def _linear_backward(dy, cache, ws, role, need_dx=True):  # linear_backward, a stack's dx from ws
    x, W = cache
    if W.ndim == 2:
        x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        dx = (dy2 @ W.T).reshape(x.shape) if need_dx else None
        return dx, x2.T @ dy2, _ones(dy2.shape[0], dy2.dtype) @ dy2
    R = W.shape[0]
    x3, dy3 = x.reshape(R, -1, x.shape[-1]), dy.reshape(R, -1, dy.shape[-1])
    dx = None if not need_dx else np.matmul(dy3, W.transpose(0, 2, 1), out=ws.empty(
        role + " dx", x3.shape, np.promote_types(dy.dtype, W.dtype))).reshape(x.shape)
    return dx, x3.transpose(0, 2, 1) @ dy3, _ones(dy3.shape[1], dy3.dtype) @ dy3


def _gelu_forward(x, ws, role):  # attn.gelu_forward, operation for operation, into ws arrays
    u, t = ws.empty(role + " u", x.shape, x.dtype), ws.empty(role + " tanh", x.shape, x.dtype)
    c = np.multiply(x, x, out=t)
    c *= 0.044715
    c += 1.0                                            # 1 + 0.044715 x^2
    u = np.multiply(attn.GELU_C, x, out=u)
    u *= c                                              # u = C x (1 + 0.044715 x^2)
    t = np.tanh(u, out=t)
    y = np.add(1.0, t, out=ws.empty(role + " y", x.shape, x.dtype))
    y *= np.multiply(0.5, x, out=u)                     # y = 0.5 x (1 + tanh(u))
    return y, (x, t)


def _gelu_backward(dy, cache, ws, role):  # attn.gelu_backward, operation for operation
    x, t = cache                  # forward: y = 0.5 x (1 + tanh(u)),  u = C (x + 0.044715 x^3)
    slope, a, b = (ws.empty(role + name, x.shape, x.dtype) for name in (" slope", " u", " t^2"))
    slope = np.add(1.0, t, out=slope)
    slope *= 0.5                                        # 0.5 (1 + t)
    a = np.multiply(0.5, x, out=a)
    a *= np.subtract(1.0, np.multiply(t, t, out=b), out=b)
    a *= attn.GELU_C                                    # 0.5 x (1 - t^2) C
    b = np.multiply(3 * 0.044715, x, out=b)
    b *= x
    b += 1.0                                            # 1 + 3 0.044715 x^2
    a *= b
    slope += a
    return np.multiply(dy, slope, out=ws.empty(role + " dx", dy.shape, np.promote_types(
        dy.dtype, slope.dtype)))


def _relu_forward(x, ws, role):  # attn.relu_forward into a ws array
    return np.maximum(x, 0, out=ws.empty(role + " y", x.shape, x.dtype)), x


def _relu_backward(dy, x, ws, role):  # attn.relu_backward into ws arrays
    return np.multiply(dy, np.greater(x, 0, out=ws.empty(role + " x > 0", x.shape, bool)),
                       out=ws.empty(role + " dx", dy.shape, dy.dtype))


# attn.ACTIVATIONS, the same arithmetic with its arrays from a workspace (the [R, B, k] arrays of
# attn's, new at every call, cost a large batch or stack page faults every step)
_ACTIVATIONS = {"gelu": (_gelu_forward, _gelu_backward), "relu": (_relu_forward, _relu_backward)}


def mlp_forward(x, W_1, b_1, W_2, b_2, act="gelu"):  # attn.mlp_forward on linear_forward
    return _mlp_forward(x, W_1, b_1, W_2, b_2, act, _FRESH)


def _mlp_forward(x, W_1, b_1, W_2, b_2, act, ws):  # mlp_forward, its arrays from ws
    h, c1 = _linear_forward(x, W_1, b_1, ws, "W_1")
    a, ca = _ACTIVATIONS[act][0](h, ws, act)
    y, c2 = _linear_forward(a, W_2, b_2, ws, "W_2")
    return y, (c1, ca, c2, act)


def mlp_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW_1, db_1, dW_2, db_2
    return _mlp_backward(dy, cache, _FRESH, need_dx)


def _mlp_backward(dy, cache, ws, need_dx=True):  # mlp_backward, its arrays from ws
    c1, ca, c2, act = cache
    da, dW_2, db_2 = _linear_backward(dy, c2, ws, "W_2")             # forward: y = a W_2 + b_2
    dh = _ACTIVATIONS[act][1](da, ca, ws, act)                        # forward: a = act(h)
    dx, dW_1, db_1 = _linear_backward(dh, c1, ws, "W_1", need_dx)     # forward: h = x W_1 + b_1
    return dx, dW_1, db_1, dW_2, db_2


# ---------------------------------------------------------------------------------------------
# the exact shortcut: two versions per position, a head output is a ratio of linear functions

@functools.lru_cache(maxsize=16)
def _head_spread(H, e, dtype):  # -> [H, H e], read-only (a constant: made once)
    """Row h is 1 on head h's e columns, 0 elsewhere. A [..., H] @ _head_spread gives each head's
    value on its e columns in one BLAS call, exactly (each entry is one product by 1, the rest are
    products by 0), where broadcasting along a length-e axis (e = 4 in the experiment) runs
    numpy's inner loop 4 elements at a time."""
    spread = np.repeat(np.eye(H, dtype=dtype), e, axis=1)
    spread.flags.writeable = False
    return spread


def two_versions(X, dtype):  # [R, B, T] (or [B, T]) bits -> [R, B, 2T]: [1 - X, X]
    """Which version of each position a sample holds: column t is bit 0, column T + t bit 1.
    dtype: the model's, float32 or float64. A full-batch run builds it once and passes it to
    model_forward as `versions`, which then does not rebuild (or re-read) it every step."""
    _check_versions_call(X, dtype)
    return _two_versions(X, np.dtype(dtype))


def _two_versions(X, dtype, ws=_FRESH):  # two_versions on checked bits (a minibatch's, every step)
    T = X.shape[-1]
    Xb = ws.empty("Xb", X.shape[:-1] + (2 * T,), dtype)
    np.subtract(1, X, out=Xb[..., :T], dtype=dtype)
    Xb[..., T:] = X
    return Xb


AttentionCache = collections.namedtuple(
    "AttentionCache", "kind Xb ln1 c_q rn u c_v c_o qh V E Ed Z Zd mix scale spread")


def _attention_forward(p, cfg, X, versions=None, ws=_FRESH):
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
    ws: where its arrays are taken (the fallbacks take new ones).
    """
    R, B, T = X.shape
    d, H = cfg["d"], cfg["heads"]
    e, dt = d // H, p["E_pos"].dtype
    rows = ws.empty("rows", (R, 2 * T + 1, d), dt)                  # v0 rows | v1 rows | cls
    np.add(p["E_tok"][:, :, None, :], p["E_pos"][:, None], out=rows[:, :2 * T].reshape(R, 2, T, d))
    rows[:, 2 * T] = p["cls"]
    rn, c_ln1 = _ln_forward(p, cfg, "ln1", rows, ws)
    q, c_q = _linear_forward(rn[:, -1:], p["W_Q"], p["b_Q"], ws, "q")  # [R, 1, d]
    qh = q.reshape(R, H, e)
    # the keys are only ever dotted with the one query: fold it in, s = rn @ u + c  (no K)
    u = np.einsum("rdhe,rhe->rdh", p["W_K"].reshape(R, d, H, e), qh)  # [R, d, H]: W_K q per head
    scale = e ** -0.5
    s = np.matmul(rn, u, out=ws.empty("scores", (R, 2 * T + 1, H), dt))   # [R, 2T+1, H]
    s += _row_sum(p["b_K"].reshape(R, H, e) * qh)[:, None]
    s *= scale
    lower = np.minimum(s[:, :T], s[:, T:2 * T], out=ws.empty("lower scores", (R, T, H), dt))
    M = np.maximum(lower.max(1), s[:, 2 * T])                         # [R, H]
    s -= M[:, None]
    top = s.reshape(R, -1).max(1)                                     # [R]: each run's spread
    if top.max() > SAFE_EXP[s.dtype]:
        return _attention_forward_split(p, cfg, X, versions, top)
    V, c_v = _linear_forward(rn, p["W_V"], p["b_V"], ws, "V")        # [R, 2T+1, d]
    E_EV = ws.empty("E_EV", (R, 2 * T + 1, H + d), dt)  # [E | E * V] per row: one product for both
    E = np.exp(s, out=E_EV[..., :H])
    spread = _head_spread(H, e, dt)
    Ed = np.matmul(E, spread, out=ws.empty("Ed", V.shape, dt))  # each head's weight on its columns
    np.multiply(Ed, V, out=E_EV[..., H:])
    Xb = _two_versions(X, dt, ws) if versions is None else versions  # [R, B, 2T]
    Z, Zd, mix = _mix(Xb, E_EV, spread, ws)
    y, c_o = _linear_forward(mix, p["W_O"], p["b_O"], ws, "attention")
    return y, AttentionCache("fast", Xb, c_ln1, c_q, rn, u, c_v, c_o, qh, V, E, Ed, Z, Zd, mix,
                             scale, spread)


def _mix(Xb, E_EV, spread, ws):  # -> Z [R, B, H], Zd [R, B, d], mix [R, B, d]
    """The shortcut's one product: [Z | N] = Xb @ [E | E * V] over the 2T position rows, plus the
    [CLS] row, which every sample holds; then mix = N / Z, Z spread over its head's columns."""
    (R, B, twoT), (H, d) = Xb.shape, spread.shape
    Z_N = np.matmul(Xb, E_EV[:, :twoT], out=ws.empty("Z_N", (R, B, H + d), E_EV.dtype))
    Z_N += E_EV[:, twoT:]                                             # the [CLS] row, every sample
    Z = Z_N[..., :H]                                                  # [R, B, H]
    Zd = np.matmul(Z, spread, out=ws.empty("Zd", (R, B, d), Z.dtype))  # [R, B, d]: Z per column
    return Z, Zd, np.divide(Z_N[..., H:], Zd, out=ws.empty("mix", Zd.shape, Zd.dtype))


def _shortcut_backward(dy, p, cfg, c, ws=_FRESH):  # the backward of _attention_forward's shortcut
    R, B, twoT = c.Xb.shape
    T, d, H = twoT // 2, cfg["d"], cfg["heads"]
    e, dt = d // H, dy.dtype
    g = {}
    dmix, g["W_O"], g["b_O"] = _linear_backward(dy, c.c_o, ws, "attention")  # y = mix W_O + b_O
    dE_EV = _mix_backward(dmix, c, ws)
    dEV = dE_EV[..., H:]                                              # forward: EV = Ed * V
    scratch = ws.empty("ln1 scratch", c.V.shape, dt)                  # (LayerNorm 1's: free here)
    dE = _row_sum(np.multiply(dEV, c.V, out=scratch).reshape(R, -1, H, e),
                  ws.empty("dE", (R, twoT + 1, H), dt))
    dE = np.add(dE_EV[..., :H], dE, out=dE)                           # forward: Ed = E @ spread
    dV = np.multiply(dEV, c.Ed, out=ws.empty("dV", c.Ed.shape, dt))
    ds = np.multiply(dE, c.E, out=dE)        # forward: E = exp(s - M), M a constant shift
    ds *= c.scale
    du = c.rn.transpose(0, 2, 1) @ ds        # forward: s = (rn @ u + b_K . q) * scale
    dc = ds.sum(1)                           # [R, H]
    query_blocks = c.spread * c.qh.reshape(R, 1, d)  # [R, H, d]: row h is head h's query, 0 else
    g["W_K"] = du @ query_blocks             # forward: u = W_K q per head (exact: one term each)
    g["b_K"] = (dc[:, None] @ query_blocks)[:, 0]
    dqh = (np.einsum("rdhe,rdh->rhe", p["W_K"].reshape(R, d, H, e), du)
           + p["b_K"].reshape(R, H, e) * dc[..., None])
    drn, g["W_V"], g["b_V"] = _linear_backward(dV, c.c_v, ws, "V")   # forward: V = rn W_V + b_V
    drn += np.matmul(ds, c.u.transpose(0, 2, 1), out=scratch)
    drn_q, g["W_Q"], g["b_Q"] = _linear_backward(dqh.reshape(R, 1, d), c.c_q, ws, "q")
    drn[:, -1:] += drn_q                     # forward: q = rn[-1] W_Q + b_Q
    drows = _ln_backward(g, cfg, "ln1", drn, c.ln1, ws)
    d_rows_by_version = drows[:, :2 * T].reshape(R, 2, T, d)  # forward: rows = E_tok[v] + E_pos[t]
    g["E_tok"], g["E_pos"] = d_rows_by_version.sum(2), d_rows_by_version.sum(1)
    g["cls"] = drows[:, 2 * T]               # a view: _backward adds the residual's, a new array
    return g


def _mix_backward(dmix, c, ws):  # -> dE_EV [R, 2T+1, H + d], the gradient of [E | E * V]
    (R, B, twoT), (H, d) = c.Xb.shape, c.spread.shape
    dt = dmix.dtype
    dZ_N = ws.empty("dZ_N", (R, B, H + d), dt)  # forward: mix = N / Z, Z spread as Zd = Z @ spread
    dN = np.divide(dmix, c.Zd, out=dZ_N[..., H:])
    dN_mix = np.multiply(dN, c.mix, out=ws.empty("dN mix", dN.shape, dt))
    np.negative(_row_sum(dN_mix.reshape(R, B, H, d // H), ws.empty("dZ", (R, B, H), dt)),
                out=dZ_N[..., :H])
    dE_EV = ws.empty("dE_EV", (R, twoT + 1, H + d), dt)  # forward: Z_N = Xb @ E_EV[:2T] + E_EV[2T]
    np.matmul(c.Xb.transpose(0, 2, 1), dZ_N, out=dE_EV[:, :twoT])
    dE_EV[:, twoT] = dZ_N.sum(1)
    return dE_EV


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


def _attention_backward(dy, p, cfg, c, ws=_FRESH):
    """Backward of _attention_forward, on whichever path its forward took: {E_tok, E_pos, cls,
    ln1_g, ln1_b, W_Q, ..., b_O}, each with the leading run axis (the fallbacks' arrays new)."""
    if c.kind == "fast":
        return _shortcut_backward(dy, p, cfg, c, ws)
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
    T, d, H = cfg["T"], cfg["d"], cfg["heads"]
    n = 3 * B * T + 12 * (2 * T + 1) * (d + H) + 8 * B * (d + H + max(cfg["mlp"], 1))
    return R * n * np.dtype(cfg["dtype"]).itemsize


ModelCache = collections.namedtuple("ModelCache", "attn ln2 mlp lnf f single")


def model_forward(p, cfg, X, versions=None):
    """Logits of attn.model_forward for a stack: X [R, B, T] -> [R, B] (one run: [B, T] -> [B]),
    and the cache. versions: two_versions(X, dtype) kept by a caller whose X never changes (a
    full-batch run); it must be exactly that matrix (its shape and dtype are checked, not its
    values). No dropout here: its per-sample masks break the two versions (attn.py runs it)."""
    _check_call(p, cfg, X, versions)
    return _model_forward(p, cfg, X, versions)


def _model_forward(p, cfg, X, versions, ws=_FRESH):  # one run as a stack of one, or a stack
    if X.ndim == 2:
        z, c = _forward({k: v[None] for k, v in p.items()}, cfg, X[None],
                        None if versions is None else versions[None], ws)
        return z[0], c._replace(single=True)
    return _forward(p, cfg, X, versions, ws)


def _forward(p, cfg, X, versions, ws):  # -> logits (new), cache (its arrays from ws)
    a, c_attn = _attention_forward(p, cfg, X, versions, ws)
    h = np.add(p["cls"][:, None, :], a, out=ws.empty("h", a.shape, a.dtype))   # residual, [CLS]
    c_ln2 = c_mlp = None
    if cfg["mlp"]:
        hn, c_ln2 = _ln_forward(p, cfg, "ln2", h, ws)
        m, c_mlp = _mlp_forward(hn, p["W_1"], p["b_1"], p["W_2"], p["b_2"], cfg["act"], ws)
        h = np.add(h, m, out=ws.empty("h + mlp", h.shape, h.dtype))  # residual
    f, c_lnf = _ln_forward(p, cfg, "lnf", h, ws)
    z = (f @ p["w"][:, :, None])[:, :, 0] + p["b"][:, :1]            # readout at [CLS]
    return z, ModelCache(c_attn, c_ln2, c_mlp, c_lnf, f, False)


def model_backward(dz, p, cfg, c):  # dz [R, B] (or [B] for one run) -> gradient dict
    """Gradients of sum(dz * logits) for every parameter, of one model_forward call."""
    _check_backward(dz, p, cfg, c)
    return _model_backward(dz, p, cfg, c)


def _model_backward(dz, p, cfg, c, ws=_FRESH):
    if c.single:
        g = _backward(dz[None], {k: v[None] for k, v in p.items()}, cfg, c, ws)
        return {k: v[0] for k, v in g.items()}
    return _backward(dz, p, cfg, c, ws)


def _backward(dz, p, cfg, c, ws):  # -> the gradients (new arrays); the rest from ws
    g = {}
    g["w"] = (dz[:, None, :] @ c.f)[:, 0, :]                        # forward: z = f @ w + b
    g["b"] = dz.sum(-1)[:, None]
    df = np.multiply(dz[:, :, None], p["w"][:, None, :], out=ws.empty(
        "df", c.f.shape, np.promote_types(dz.dtype, p["w"].dtype)))   # dz's dtype, or the model's
    dh = _ln_backward(g, cfg, "lnf", df, c.lnf, ws)
    if cfg["mlp"]:                                                   # forward: h = h + MLP(LN2(h))
        dhn, g["W_1"], g["b_1"], g["W_2"], g["b_2"] = _mlp_backward(dh, c.mlp, ws)
        dh = np.add(dh, _ln_backward(g, cfg, "ln2", dhn, c.ln2, ws),
                    out=ws.empty("dh + dmlp", dh.shape, dh.dtype))
    g.update(_attention_backward(dh, p, cfg, c.attn, ws))            # forward: h = cls + attn
    g["cls"] = g["cls"] + dh.sum(-2)
    return g


def logistic_forward(z, y, weights=None):  # [R, B], [R, B] -> [R] (or [B], [B] -> a number)
    """attn.logistic_forward, or sum(weights * loss) per run where weights [..., B] are given (a
    stack of minibatch runs gives its padding samples weight 0 and the others 1/m). Its cache
    goes to attn.logistic_backward."""
    y = y.astype(z.dtype, copy=False)
    loss = np.maximum(z, 0) - y * z + np.log1p(np.exp(-np.abs(z)))
    w = 1.0 / z.shape[-1] if weights is None else weights
    return (loss * w).sum(-1), (z, y, w)


def loss_and_grads(p, cfg, X, y, weights=None, versions=None):
    """attn.loss_and_grads for a stack (X [R, B, T], y [R, B]): each run's loss [R] (sum(weights *
    loss) per run when weights [R, B] are given), each run's gradients of its own loss, and the
    logits; or for one run as a stack of one. versions: see model_forward."""
    _check_call(p, cfg, X, versions)
    _check_targets(y, weights, X.shape[:-1])
    ws = _step_workspace()                     # the cache stays here: its arrays are kept
    z, cache = _model_forward(p, cfg, X, versions, ws)
    loss, c_loss = logistic_forward(z, y, weights)
    return loss, _model_backward(attn.logistic_backward(1.0, c_loss), p, cfg, cache, ws), z


def cls_attention_mean(p, cfg, X):  # one run, X [B, T] -> [T+1], [T+1, H]
    """Mean over samples and heads of the [CLS] attention weights (last: [CLS] itself), and the
    mean over samples of each head's, [T+1, H]: both from one forward.

    Exact and cheap from the shortcut: sample b puts weight E[v, t] / Z[b] on position t when its
    bit there is v, so the mean over samples is E0 * ((1 - X)^T @ 1/Z) + E1 * (X^T @ 1/Z).
    """
    attn.check_call(p, cfg, X)
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
# the doors' checks, on attn.py's: one line naming the value

def _check_call(p, cfg, X, versions=None):
    """The doors' arguments: X bits [B, T] or [R, B, T] (their values unless `versions` were kept
    from them), p one run's parameters or each with a leading axis of R runs, versions X's two
    versions in the model's dtype."""
    attn.check_config(cfg)
    attn.check_binary("X", X, lambda s: len(s) in (2, 3) and s[-2] >= 1 and s[-1] == cfg["T"],
                      f"[batch >= 1, T={cfg['T']}] (or [runs, batch, T])", values=versions is None)
    _check_stack(p, cfg, X.shape[0] if X.ndim == 3 else None)
    shape, dt = X.shape[:-1] + (2 * cfg["T"],), np.dtype(cfg["dtype"])
    if versions is not None and not (isinstance(versions, np.ndarray) and versions.dtype == dt
                                     and versions.shape == shape):
        raise ValueError(f"versions must be None or two_versions(X, dtype), an array of shape "
                         f"{shape} and dtype {dt}, got {attn.describe(versions)}")


def _check_targets(y, weights, shape):  # the loss's labels 0 and 1, weights >= 0, of `shape`
    attn.check_binary("y", y, lambda s: s == shape, f"of shape {shape} (labels)")
    if weights is not None and not (isinstance(weights, np.ndarray) and weights.dtype.kind in "biuf"
                                    and weights.shape == shape and not (weights.size and not (
                                        weights.min() >= 0 and weights.max() < np.inf))):
        raise ValueError(f"weights must be None or finite numbers >= 0 of shape {shape}, got "
                         f"{attn.describe(weights)}")


def _check_stack(p, cfg, R):  # attn.check_params on a stack of R runs (R None: one run)
    if R is not None and not (isinstance(p, dict) and all(isinstance(v, np.ndarray) and
                                                          v.shape[:1] == (R,) for v in p.values())):
        raise ValueError(f"params must each have a leading axis of R={R} runs, as X [runs, batch, "
                         f"T] has, got {attn.describe(p)}")
    attn.check_params(p if R is None else {k: v[0] for k, v in p.items()}, cfg)


def _check_backward(dz, p, cfg, c):  # model_backward's: the forward's cache, dz of its logits
    if not (isinstance(c, ModelCache) and isinstance(dz, np.ndarray) and dz.dtype.kind in "biuf"
            and dz.shape == c.f.shape[c.single:-1]):
        raise ValueError(f"model_backward needs the cache fast.model_forward returned and dz, "
                         f"numbers of its logits' shape, got cache {attn.describe(c)}, dz "
                         f"{attn.describe(dz)}")
    _check_stack(p, cfg, None if c.single else c.f.shape[0])


def _check_versions_call(X, dtype):  # two_versions': bits [B, T] or [R, B, T], a float dtype
    attn.check_binary("X", X, lambda s: len(s) in (2, 3) and s[-2] >= 1,
                      "[batch >= 1, T] (or [runs, batch, T])")
    if dtype not in ("float32", "float64", np.float32, np.float64):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {attn.describe(dtype)}")
