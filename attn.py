"""attn.py: the Transformer of Edelman, Goel, Kakade & Zhang (ICML 2022), by hand in NumPy.

"Inductive Biases and Variable Creation in Self-Attention Mechanisms", arXiv:2110.10090.
Section 3 (Figure 1) defines the modules; Section 5 (the experiment) uses them as

    x_t      = E_tok[b_t] + E_pos[t]           t = 0..T-1, b_t in {0, 1}   (one token per bit)
    x_[CLS]  = cls                              appended *after* x_T, at row index T
    h        = x_[CLS] + Attn(LN1(X))[CLS]      f_tf-head with context z = LN1(x_[CLS])
    h'       = h + MLP(LN2(h))                  pre-LayerNorm block
    logit    = w . LNf(h') + b                  scalar output f_tf-scalar read at [CLS]

The reference, in textbook numpy, one run at a time, top to bottom: the configuration; the ops,
each `thing_forward(...) -> (out, cache)` beside its `thing_backward(dout, cache) -> grads` whose
lines name the forward line they differentiate; the model in two exact forms (`model_forward` runs
only the [CLS] query row, the only one that reaches the output; `full_model_forward` the literal
f_tf-layer); the loss; the self-check: `python attn.py` checks every backward against central
differences and the definitions themselves, and prints one line; last, the argument checks. numpy
alone (training computes the same model with fast.py, pinned to this file by test_all.py).

Shape letters: B batch, T bits (N = T + 1 rows with [CLS]), d width, H heads, e = d / H a head's
width, k MLP hidden units. Parameters are a plain dict of named arrays, the configuration a plain
dict `cfg`; everything keeps the parameters' dtype (float32 or float64). The ops take what numpy
takes; the model's entry points (default_config, init_params, model_forward, full_model_forward,
model_backward, loss_and_grads, cls_attention) check the caller's arguments once, at the door: a
one-line ValueError naming the value and what is allowed.
"""
import collections
import os
import reprlib
import signal
import sys

import numpy as np

VOCAB = 2                                           # the tasks are Boolean: one token per bit
LN_EPS = 1e-5                                       # LayerNorm's variance floor
GELU_C = (2.0 / np.pi) ** 0.5                       # GELU's tanh form: C = sqrt(2 / pi)
ATTN_KEYS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")   # a head's weights
POS_INITS, FLOAT_DTYPES = ("normal", "zero"), ("float32", "float64")
FLOAT_MAX = float(np.finfo(np.float64).max)      # 10**400 is an int no float holds


# ---------------------------------------------------------------------------------------------
# configuration and parameters (Section 5: d = 64, 16 heads, MLP hidden 64, N(0, 0.02^2) init)

CONFIG_DEFAULTS = dict(   # the experiment's model; a cfg has exactly these keys
    T=100,                # bits: the context length
    d=64,                 # width (a multiple of heads)
    heads=16,
    mlp=64,               # MLP hidden units; 0: no MLP (f_tf-head alone: heads=1, mlp=0, ln=False)
    ln=True,              # the three LayerNorms on, or all off
    act="gelu",           # the MLP's activation, "gelu" (tanh form, as GPT-2) or "relu"
    dtype="float32",      # the parameters' and activations' dtype, "float32" or "float64"
    dropout=0.0,          # in [0, 1), as minGPT: embeddings, attention weights, both residual
                          # branches; it acts only when model_forward is given an rng (training)
    pos_init="normal")    # E_pos starts N(0, std^2) like every weight, or "zero" (minGPT's)


def default_config(**overrides):
    """CONFIG_DEFAULTS with `overrides`, checked. default_config(heads=1, mlp=0, ln=False) is the
    theory's single head f_tf-head."""
    return check_config({**CONFIG_DEFAULTS, **overrides})


def param_shapes(cfg):
    """{name: shape} of the model's parameters, in init order: the one list of them. Rows are
    samples (y = x @ W + b); head h's weights are the columns h*e:(h+1)*e of W_Q, W_K, W_V."""
    check_config(cfg)
    T, d, k = cfg["T"], cfg["d"], cfg["mlp"]
    shapes = dict(E_tok=(VOCAB, d), E_pos=(T, d), cls=(d,))
    for name in "QKVO":
        shapes["W_" + name], shapes["b_" + name] = (d, d), (d,)
    if k:
        shapes.update(W_1=(d, k), b_1=(k,), W_2=(k, d), b_2=(d,))
    if cfg["ln"]:
        for ln in ("ln1", "ln2", "lnf") if k else ("ln1", "lnf"):
            shapes[ln + "_g"], shapes[ln + "_b"] = (d,), (d,)
    shapes.update(w=(d,), b=(1,))
    return shapes


def init_params(cfg, rng, std=0.02):
    """Section 5 init: weights and embeddings N(0, std^2), biases 0, LayerNorm gain 1, shift 0.
    With pos_init "zero", E_pos is drawn and then set to 0, so every other parameter is the one
    the same rng gives with "normal" (paired comparisons)."""
    shapes, dt = param_shapes(cfg), np.dtype(cfg["dtype"])
    std, top = std.item() if isinstance(std, np.generic) else std, float(np.finfo(dt).max) / 10
    if not (isinstance(rng, np.random.Generator) and isinstance(std, (int, float))
            and not isinstance(std, bool) and 0 <= std <= top):     # 10 std stays finite in dt
        raise ValueError(f"init_params needs rng a numpy Generator and std a finite number >= 0,"
                         f" got rng={describe(rng)}, std={describe(std)} (std <= {top:.3g})")
    p = {}
    for name, shape in shapes.items():                # biases (b...) and shifts (..._b) 0, gains 1
        if name.startswith("b") or name.endswith(("_g", "_b")):
            p[name] = np.full(shape, 1.0 if name.endswith("_g") else 0.0, dt)
        else:
            p[name] = (std * rng.standard_normal(shape)).astype(dt)
    if cfg["pos_init"] == "zero":
        p["E_pos"][...] = 0
    return p


# ---------------------------------------------------------------------------------------------
# token + positional embedding, [CLS] appended after x_T (Section 3, f_tf-scalar)

def embed_forward(X, E_tok, E_pos, cls):  # [B, T] ints in {0,1}, [2,d], [T,d], [d] -> [B, N, d]
    B, T = X.shape
    out = np.empty((B, T + 1, E_pos.shape[1]), E_pos.dtype)
    out[:, :T] = E_tok[X] + E_pos
    out[:, T] = cls
    return out, X


def embed_backward(dout, X):  # [B, N, d] -> dE_tok [2, d], dE_pos [T, d], dcls [d]
    B, T = X.shape
    d_tok = dout[:, :T].reshape(B * T, -1)              # forward: out[:, t] = E_tok[X[:, t]] + ...
    onehot = (X.reshape(-1, 1) == np.arange(VOCAB)).astype(dout.dtype)  # [B*T, 2]
    dE_tok = onehot.T @ d_tok                           # sum of d_tok over the samples with bit v
    return dE_tok, dout[:, :T].sum(0), dout[:, T].sum(0)   # forward: + E_pos[t];  out[:, T] = cls


# ---------------------------------------------------------------------------------------------
# LayerNorm over the last axis, with gain g and shift b

def layernorm_forward(x, g, b):  # [..., d], [d], [d] -> [..., d]
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + LN_EPS)
    xhat = (x - mu) * rstd
    y = xhat * g + b
    return y, (xhat, rstd, g)


def layernorm_backward(dy, cache):  # [..., d] -> dx [..., d], dg [d], db [d]
    xhat, rstd, g = cache
    lead = tuple(range(dy.ndim - 1))
    dg = (dy * xhat).sum(axis=lead)                     # forward: y = xhat * g + b
    db = dy.sum(axis=lead)
    dxhat = dy * g
    # forward: xhat = (x - mu) * rstd, with mu and rstd functions of x as well
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dg, db


# ---------------------------------------------------------------------------------------------
# affine map over the last axis

def linear_forward(x, W, b):  # [..., n], [n, k], [k] -> [..., k]
    return x @ W + b, (x, W)


def linear_backward(dy, cache):  # [..., k] -> dx [..., n], dW [n, k], db [k]
    x, W = cache
    dx = dy @ W.T                                       # forward: y = x @ W + b
    dW = x.reshape(-1, x.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])   # summed over samples
    db = dy.sum(axis=tuple(range(dy.ndim - 1)))         # forward: + b, broadcast over samples
    return dx, dW, db


# ---------------------------------------------------------------------------------------------
# softmax over the last axis, stabilised by the data's own max

def softmax_forward(s):  # [..., n] -> [..., n]; its cache is its output
    e = np.exp(s - s.max(-1, keepdims=True))
    A = e / e.sum(-1, keepdims=True)
    return A, A


def softmax_backward(dA, A):  # forward: A = e / sum(e), e = exp(s - max s)
    return A * (dA - (dA * A).sum(-1, keepdims=True))


# ---------------------------------------------------------------------------------------------
# dropout (training only): zero each entry with probability p, scale the rest by 1 / (1 - p)

def dropout_forward(x, p, rng):  # [...] -> [...]; its cache is the scaled mask (None: off)
    if not p or rng is None:
        return x, None
    mask = (rng.random(x.shape) >= p).astype(x.dtype) / x.dtype.type(1.0 - p)
    return x * mask, mask


def dropout_backward(dy, mask):  # forward: y = x * mask
    return dy if mask is None else dy * mask


# ---------------------------------------------------------------------------------------------
# f_tf-head at the [CLS] query (Section 3): scores z^T W_Q W_K^T x_t, softmax over t, values

ClsAttentionCache = collections.namedtuple("ClsAttentionCache",
                                           "c_q c_k c_v c_o qh Kh Vh A Ad mask scale")


def attention_cls_forward(Xn, w, heads, drop=(0.0, None)):  # [B, N, d], weights -> [B, d]
    """Multi-head attention with one query, the last row ([CLS]). w: a dict holding ATTN_KEYS
    (the parameter dict itself will do): W_Q, W_K, W_V, W_O [d, d] and their biases [d].

    Per head h (width e = d/H, columns h*e:(h+1)*e):
      q = z W_Q + b_Q with z = Xn[:, -1];  K = Xn W_K + b_K;  V = Xn W_V + b_V
      A = softmax_t(q . K_t / sqrt(e));    mix = sum_t A_t V_t;   y = concat_h(mix) W_O + b_O
    Only the product W_Q^h W_K^h^T / sqrt(e) (the paper's W_QK for head h) and the bias terms
    enter the scores. drop = (p, rng): dropout on the attention weights A (training only).
    """
    B, N, d = Xn.shape
    e = d // heads
    q, c_q = linear_forward(Xn[:, -1], w["W_Q"], w["b_Q"])           # [B, d]
    K, c_k = linear_forward(Xn, w["W_K"], w["b_K"])                  # [B, N, d]
    V, c_v = linear_forward(Xn, w["W_V"], w["b_V"])
    qh, Kh, Vh = q.reshape(B, heads, e), K.reshape(B, N, heads, e), V.reshape(B, N, heads, e)
    scale = e ** -0.5
    A, _ = softmax_forward(np.einsum("bhe,bnhe->bhn", qh, Kh) * scale)  # [B, H, N]
    Ad, mask = dropout_forward(A, *drop)
    mix = np.einsum("bhn,bnhe->bhe", Ad, Vh).reshape(B, d)
    y, c_o = linear_forward(mix, w["W_O"], w["b_O"])
    return y, ClsAttentionCache(c_q, c_k, c_v, c_o, qh, Kh, Vh, A, Ad, mask, scale)


def attention_cls_backward(dy, c):  # [B, d] -> dXn [B, N, d], {W_Q: dW_Q, ..., b_O: db_O}
    B, H, e = c.qh.shape
    N = c.Kh.shape[1]
    g = {}
    dmix, g["W_O"], g["b_O"] = linear_backward(dy, c.c_o)  # forward: y = mix W_O + b_O
    dmix = dmix.reshape(B, H, e)
    dAd = np.einsum("bhe,bnhe->bhn", dmix, c.Vh)        # forward: mix = sum_n Ad_n V_n
    dVh = np.einsum("bhn,bhe->bnhe", c.Ad, dmix)
    dA = dropout_backward(dAd, c.mask)                  # forward: Ad = dropout(A)
    ds = softmax_backward(dA, c.A) * c.scale            # forward: A = softmax(s * scale)
    dqh = np.einsum("bhn,bnhe->bhe", ds, c.Kh)          # forward: s = q . K_n
    dKh = np.einsum("bhn,bhe->bnhe", ds, c.qh)
    dXn_v, g["W_V"], g["b_V"] = linear_backward(dVh.reshape(B, N, H * e), c.c_v)  # V = Xn W_V + b_V
    dXn, g["W_K"], g["b_K"] = linear_backward(dKh.reshape(B, N, H * e), c.c_k)    # K = Xn W_K + b_K
    dz, g["W_Q"], g["b_Q"] = linear_backward(dqh.reshape(B, H * e), c.c_q)        # q = z W_Q + b_Q
    dXn = dXn + dXn_v
    dXn[:, -1] += dz                                    # forward: z = Xn[:, -1]
    return dXn, g


# ---------------------------------------------------------------------------------------------
# f_tf-layer (Section 3): the same head applied at every position, z = x_t  -> [B, N, d]

SelfAttentionCache = collections.namedtuple("SelfAttentionCache",
                                            "c_q c_k c_v c_o Qh Kh Vh A scale")


def self_attention_forward(Xn, w, heads):  # [B, N, d], weights as attention_cls's -> [B, N, d]
    """Full self-attention, every row queries: scores [B, H, N, N]. The reference for the
    [CLS]-row shortcut; O(N^2) per example, so use it for checks, not for training."""
    B, N, d = Xn.shape
    e = d // heads
    Q, c_q = linear_forward(Xn, w["W_Q"], w["b_Q"])
    K, c_k = linear_forward(Xn, w["W_K"], w["b_K"])
    V, c_v = linear_forward(Xn, w["W_V"], w["b_V"])
    Qh, Kh, Vh = (M.reshape(B, N, heads, e) for M in (Q, K, V))
    scale = e ** -0.5
    A, _ = softmax_forward(np.einsum("bqhe,bkhe->bhqk", Qh, Kh) * scale)  # [B, H, N, N]
    mix = np.einsum("bhqk,bkhe->bqhe", A, Vh).reshape(B, N, d)
    y, c_o = linear_forward(mix, w["W_O"], w["b_O"])
    return y, SelfAttentionCache(c_q, c_k, c_v, c_o, Qh, Kh, Vh, A, scale)


def self_attention_backward(dy, c):  # [B, N, d] -> dXn [B, N, d], {W_Q: dW_Q, ..., b_O: db_O}
    B, N, H, e = c.Qh.shape
    g = {}
    dmix, g["W_O"], g["b_O"] = linear_backward(dy, c.c_o)  # forward: y = mix W_O + b_O
    dmix = dmix.reshape(B, N, H, e)
    dA = np.einsum("bqhe,bkhe->bhqk", dmix, c.Vh)       # forward: mix_q = sum_k A_qk V_k
    dVh = np.einsum("bhqk,bqhe->bkhe", c.A, dmix)
    ds = softmax_backward(dA, c.A) * c.scale            # forward: A = softmax(s * scale)
    dQh = np.einsum("bhqk,bkhe->bqhe", ds, c.Kh)        # forward: s_qk = Q_q . K_k
    dKh = np.einsum("bhqk,bqhe->bkhe", ds, c.Qh)
    dX_q, g["W_Q"], g["b_Q"] = linear_backward(dQh.reshape(B, N, H * e), c.c_q)  # Q = Xn W_Q + b_Q
    dX_k, g["W_K"], g["b_K"] = linear_backward(dKh.reshape(B, N, H * e), c.c_k)
    dX_v, g["W_V"], g["b_V"] = linear_backward(dVh.reshape(B, N, H * e), c.c_v)
    return dX_q + dX_k + dX_v, g


# ---------------------------------------------------------------------------------------------
# MLP: act(x W_1 + b_1) W_2 + b_2; act is GELU (tanh form, as in GPT-2/BERT) or ReLU

def gelu_forward(x):  # [...] -> [...]
    u = GELU_C * x * (1.0 + 0.044715 * (x * x))
    t = np.tanh(u)
    return 0.5 * x * (1.0 + t), (x, t)


def gelu_backward(dy, cache):
    x, t = cache  # forward: y = 0.5 x (1 + tanh(u)),  u = C (x + 0.044715 x^3)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))


def relu_forward(x):  # [...] -> [...]
    return np.maximum(x, 0), x


def relu_backward(dy, x):  # forward: y = max(x, 0)
    return dy * (x > 0)


ACTIVATIONS = {"gelu": (gelu_forward, gelu_backward), "relu": (relu_forward, relu_backward)}


def mlp_forward(x, W_1, b_1, W_2, b_2, act="gelu"):  # [..., d], [d,k], [k], [k,d], [d] -> [..., d]
    h, c1 = linear_forward(x, W_1, b_1)
    a, ca = ACTIVATIONS[act][0](h)
    y, c2 = linear_forward(a, W_2, b_2)
    return y, (c1, ca, c2, act)


def mlp_backward(dy, cache):  # -> dx, dW_1, db_1, dW_2, db_2
    c1, ca, c2, act = cache
    da, dW_2, db_2 = linear_backward(dy, c2)            # forward: y = a W_2 + b_2
    dh = ACTIVATIONS[act][1](da, ca)                    # forward: a = act(h)
    dx, dW_1, db_1 = linear_backward(dh, c1)            # forward: h = x W_1 + b_1
    return dx, dW_1, db_1, dW_2, db_2


# ---------------------------------------------------------------------------------------------
# the model (Section 5): one pre-LN block read out at [CLS], in its two exact forms

def _ln_forward(p, cfg, name, x):  # [..., d] -> [..., d]: LayerNorm `name` of p, or the identity
    if not cfg["ln"]:
        return x, None
    return layernorm_forward(x, p[name + "_g"], p[name + "_b"])


def _ln_backward(grads, cfg, name, dy, cache):  # stores grads[name_g], grads[name_b]; -> dx
    if not cfg["ln"]:
        return dy
    dx, grads[name + "_g"], grads[name + "_b"] = layernorm_backward(dy, cache)
    return dx


HeadCache = collections.namedtuple("HeadCache", "full emb m_emb ln1 attn N")


def head_forward(p, cfg, X, full=False, rng=None):  # [B, T] bits -> Attn(LN1(X))[CLS] [B, d]
    """Embedding, LN1 and the attention head on every example, read at [CLS], and the cache.
    full=False runs only the [CLS] query row; full=True the whole f_tf-layer, then takes its row.
    With an rng and cfg["dropout"] ([CLS] row only): dropout on the embeddings and attention.
    The model's steps (the doors below check the caller's arguments)."""
    x0, c_emb = embed_forward(X.astype(np.intp, copy=False), p["E_tok"], p["E_pos"], p["cls"])
    m_emb = None                    # dropout on the T token embeddings ([CLS] is a parameter)
    if cfg["dropout"] and rng is not None:
        tok, m_emb = dropout_forward(x0[:, :-1], cfg["dropout"], rng)
        x0 = np.concatenate([tok, x0[:, -1:]], axis=1)
    xn, c_ln1 = _ln_forward(p, cfg, "ln1", x0)
    if not full:
        out, c_a = attention_cls_forward(xn, p, cfg["heads"], drop=(cfg["dropout"], rng))
    else:
        out_all, c_a = self_attention_forward(xn, p, cfg["heads"])
        out = out_all[:, -1]
    return out, HeadCache(full, c_emb, m_emb, c_ln1, c_a, xn.shape[1])


def head_backward(dout, p, cfg, c):  # [B, d] -> {E_tok, E_pos, cls, ln1_g, ln1_b, W_Q, ..., b_O}
    if not c.full:
        dxn, g = attention_cls_backward(dout, c.attn)
    else:                                     # forward: out = out_all[:, -1]
        dy = np.zeros((dout.shape[0], c.N, dout.shape[1]), dout.dtype)
        dy[:, -1] = dout
        dxn, g = self_attention_backward(dy, c.attn)
    dx0 = _ln_backward(g, cfg, "ln1", dxn, c.ln1)  # forward: xn = LN1(x0)
    if c.m_emb is not None:                         # forward: tokens = dropout(tokens)
        dx0[:, :-1] *= c.m_emb
    g["E_tok"], g["E_pos"], g["cls"] = embed_backward(dx0, c.emb)
    return g


ModelCache = collections.namedtuple("ModelCache", "head m_attn ln2 mlp m_mlp lnf f")


def model_forward(p, cfg, X, rng=None):  # [B, T] bits -> logits [B], cache
    """Logits of the experiment's model on bit strings X [B, T], the [CLS] row only (exact).
    rng: a generator for dropout (training); without it dropout is off, as at evaluation."""
    check_call(p, cfg, X, rng)
    return _model_forward(p, cfg, X, False, rng)


def full_model_forward(p, cfg, X):  # [B, T] bits -> logits [B], cache
    """The same logits through the literal f_tf-layer (every position queries): the check that the
    [CLS] row alone is exact. O(B H N^2)."""
    check_call(p, cfg, X)
    return _model_forward(p, cfg, X, True, None)


def _model_forward(p, cfg, X, full, rng):
    attn, c_head = head_forward(p, cfg, X, full, rng)
    attn, m_attn = dropout_forward(attn, cfg["dropout"], rng)        # residual-branch dropout
    h = p["cls"] + attn                                              # residual at [CLS]
    c_ln2 = c_mlp = m_mlp = None
    if cfg["mlp"]:
        hn, c_ln2 = _ln_forward(p, cfg, "ln2", h)
        m, c_mlp = mlp_forward(hn, p["W_1"], p["b_1"], p["W_2"], p["b_2"], cfg["act"])
        m, m_mlp = dropout_forward(m, cfg["dropout"], rng)
        h = h + m                                                    # residual
    f, c_lnf = _ln_forward(p, cfg, "lnf", h)
    return f @ p["w"] + p["b"], ModelCache(c_head, m_attn, c_ln2, c_mlp, m_mlp, c_lnf, f)


def model_backward(dz, p, cfg, c):  # dz [B] -> {name: gradient of sum(dz * logits)}
    """Gradients for every parameter, of a call of model_forward or full_model_forward."""
    _check_backward(dz, p, cfg, c)
    return _model_backward(dz, p, cfg, c)


def _model_backward(dz, p, cfg, c):
    g = dict(w=c.f.T @ dz, b=dz.sum(0, keepdims=True))               # forward: z = f @ w + b
    dh = _ln_backward(g, cfg, "lnf", dz[:, None] * p["w"], c.lnf)   # forward: f = LNf(h)
    if cfg["mlp"]:                                          # forward: h = h + drop(MLP(LN2(h)))
        dm = dropout_backward(dh, c.m_mlp)
        dhn, g["W_1"], g["b_1"], g["W_2"], g["b_2"] = mlp_backward(dm, c.mlp)
        dh = dh + _ln_backward(g, cfg, "ln2", dhn, c.ln2)
    g.update(head_backward(dropout_backward(dh, c.m_attn), p, cfg, c.head))
    g["cls"] = g["cls"] + dh.sum(0)                         # forward: h = cls + drop(attn)
    return g


def cls_attention(p, cfg, X):  # [B, T] bits -> [B, H, T+1]
    """[CLS] attention weights per example and head (last column: [CLS] attending to itself)."""
    check_call(p, cfg, X)
    return head_forward(p, cfg, X)[1].attn.A


# ---------------------------------------------------------------------------------------------
# the loss: logistic on labels y in {0, 1}, from logits, stably: mean(softplus(z) - y z)

def logistic_forward(z, y):  # [..., B], [..., B] -> [...]: the mean over the last axis
    y = y.astype(z.dtype, copy=False)
    loss = np.maximum(z, 0) - y * z + np.log1p(np.exp(-np.abs(z)))
    w = 1.0 / z.shape[-1]                             # each sample's weight in the mean
    return (loss * w).sum(-1), (z, y, w)


def logistic_backward(dloss, cache):  # forward: loss = sum(w * (softplus(z) - y z))
    z, y, w = cache
    sig = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
    return dloss * w * (sig - y)


def loss_and_grads(p, cfg, X, y, rng=None):
    """Mean logistic loss, its gradient dict and the logits [B]. rng: dropout's generator, as in
    model_forward."""
    check_call(p, cfg, X, rng)
    check_binary("y", y, lambda s: s == X.shape[:1], f"of shape {X.shape[:1]} (labels)")
    z, cache = _model_forward(p, cfg, X, False, rng)
    loss, c_loss = logistic_forward(z, y)
    return loss, _model_backward(logistic_backward(1.0, c_loss), p, cfg, cache), z


# ---------------------------------------------------------------------------------------------
# the self-check: `python attn.py` checks every backward against central differences in float64,
# and the definitions (the two exact forms agree, dropout keeps each entry's mean)

RTOL, FORMS_TOL, DROPOUT_SE = 1e-6, 1e-10, 5.0   # the bars: gradients, the two forms, dropout
CHECK_CFGS = dict(model=dict(), **{"model, relu, no ln": dict(act="relu", ln=False),
                                   "model, dropout": dict(dropout=0.25),
                                   "model, no mlp": dict(mlp=0),
                                   "f_tf-head": dict(heads=1, mlp=0, ln=False)})


def rel_error(a, b):  # [...], [...] -> ||a - b|| / max(||a||, ||b||, 1e-300) (nan with a nan)
    if np.shape(a) != np.shape(b) or not all(np.asarray(v).dtype.kind in "biuf" for v in (a, b)):
        raise ValueError(f"a and b must be arrays of real numbers of one shape, got {describe(a)} "
                         f"and {describe(b)}")
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b), 1e-300))


def numerical_gradient(f, x, h=1e-6):  # f: () -> scalar reading x; x [...] float64 -> [...]
    """Central differences (f(x + h e_i) - f(x - h e_i)) / 2h, x moved in place and restored."""
    g = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


def check_model(name, rng):  # -> cfg, parameters away from init (gains != 1, shifts != 0), X
    cfg = default_config(**{**dict(T=5, d=8, heads=2, mlp=6, dtype="float64"), **CHECK_CFGS[name]})
    p = init_params(cfg, rng, std=0.5)
    for k in p:
        p[k] += 0.3 * rng.standard_normal(p[k].shape) + (0.2 if k.endswith("_g") else 0.0)
    return cfg, p, rng.integers(0, 2, (4, 5))


def gradient_checks(seed=0):
    """{check name: relative error} of every backward against central differences, op by op and
    for the whole model in every configuration: upstream gradient random (a sum or ones would
    leave softmax's and LayerNorm's input gradients exactly 0), inputs off-centre."""
    rng = np.random.default_rng(seed)
    r = lambda *shape: rng.standard_normal(shape) + 0.3          # off-centre
    errors = {}

    def check(name, op, inputs, backward):  # inputs {label: array}; backward(dout, cache)
        out, cache = op()
        dout = rng.standard_normal(np.shape(out))
        grads = backward(dout, cache)
        grads = (grads,) if isinstance(grads, np.ndarray) else grads   # one input: one array
        for (label, x), g in zip(inputs.items(), grads):
            num = numerical_gradient(lambda: float(np.sum(op()[0] * dout)), x)
            errors[f"{name}: d{label}"] = (rel_error(g, num) if label != "b_K" else  # scores
                                            max(np.abs(g).max(), np.abs(num).max()))  # shift: 0

    x, g_, b_, W, bW = r(3, 4, 5), r(5) + 1.0, r(5), r(5, 4), r(4)
    check("layernorm", lambda: layernorm_forward(x, g_, b_), dict(x=x, g=g_, b=b_),
          layernorm_backward)
    check("linear", lambda: linear_forward(x, W, bW), dict(x=x, W=W, b=bW), linear_backward)
    s = r(3, 6)
    check("softmax", lambda: softmax_forward(s), dict(s=s), softmax_backward)
    check("dropout", lambda: dropout_forward(x, 0.3, np.random.default_rng(1)), dict(x=x),
          dropout_backward)
    for act, (fwd, bwd) in ACTIVATIONS.items():
        check(act, lambda: fwd(x), dict(x=x), bwd)
    W1, b1, W2, b2 = r(5, 3), r(3), r(3, 5), r(5)
    check("mlp", lambda: mlp_forward(x, W1, b1, W2, b2), dict(x=x, W_1=W1, b_1=b1, W_2=W2, b_2=b2),
          mlp_backward)
    X, Et, Ep, cl = rng.integers(0, 2, (3, 4)), r(2, 5), r(4, 5), r(5)
    check("embed", lambda: embed_forward(X, Et, Ep, cl), dict(E_tok=Et, E_pos=Ep, cls=cl),
          embed_backward)
    z, y = r(6) * 3, rng.integers(0, 2, 6)
    check("logistic", lambda: logistic_forward(z, y), dict(z=z), logistic_backward)
    w = {k: r(8, 8) * 0.5 if k[0] == "W" else r(8) * 0.3 for k in ATTN_KEYS}
    Xn = r(3, 5, 8)
    for name, fwd, bwd in (("attention_cls", attention_cls_forward, attention_cls_backward),
                           ("self_attention", self_attention_forward, self_attention_backward)):
        check(name, lambda: fwd(Xn, w, 2), dict(Xn=Xn, **w),
              lambda d, c: (lambda dX, gw: [dX] + [gw[k] for k in ATTN_KEYS])(*bwd(d, c)))
    for name in ("model", "full model", *list(CHECK_CFGS)[1:]):
        cfg, p, X = check_model("model" if name == "full model" else name, rng)
        rng_drop = (lambda: np.random.default_rng(2)) if cfg["dropout"] else (lambda: None)
        fwd = (lambda: full_model_forward(p, cfg, X)) if name == "full model" else (
            lambda: model_forward(p, cfg, X, rng_drop()))
        check(name, fwd, p, lambda d, c: [model_backward(d, p, cfg, c)[k] for k in p])
    return errors


def definition_checks(seed=0, n=20000):
    """What a wrong forward breaks though its backward follows it: {"[CLS] row: " + configuration:
    relative error of the [CLS]-row model against the full model's [CLS] row, logits and every
    gradient but b_K's (0 by softmax's shift invariance)}, and {"dropout": the worst entry's
    |mean - x| over n masks in standard errors |x| sqrt(p / ((1 - p) n))}."""
    rng = np.random.default_rng(seed)
    errors = {}
    for name in CHECK_CFGS:
        cfg, p, X = check_model(name, rng)
        dz = rng.standard_normal(X.shape[0])
        (z, c), (z_full, c_full) = model_forward(p, cfg, X), full_model_forward(p, cfg, X)
        g, g_full = model_backward(dz, p, cfg, c), model_backward(dz, p, cfg, c_full)
        errors["[CLS] row: " + name] = max([rel_error(z, z_full)] + [
            rel_error(g[k], g_full[k]) for k in p if k != "b_K"])
    x, p = rng.standard_normal((3, 4)) + 0.3, 0.25
    mean = dropout_forward(np.broadcast_to(x, (n,) + x.shape), p, rng)[0].mean(0)
    errors["dropout"] = float((np.abs(mean - x) / (np.abs(x) * (p / (1 - p) / n) ** 0.5)).max())
    return errors


def self_check():
    """-> (the one line `python attn.py` prints, whether every check passed)."""
    grads, defs = gradient_checks(), definition_checks()
    forms = {k: v for k, v in defs.items() if k != "dropout"}
    g, f = max(grads, key=grads.get), max(forms, key=forms.get)
    failed = ([k for k, v in grads.items() if not v < RTOL]
              + [k for k, v in forms.items() if not v < FORMS_TOL]
              + (["dropout's mean"] if not defs["dropout"] < DROPOUT_SE else []))
    line = (f"attn.py: {len(grads)} gradients (every op and the whole model, float64, central "
            f"differences, random upstream gradient): worst relative error {grads[g]:.1e} ({g}); "
            f"definitions: the [CLS]-row model against the full model's [CLS] row in "
            f"{len(forms)} configurations, worst relative error {forms[f]:.1e} ({f[11:]}); "
            f"dropout's mean over 20000 masks within {defs['dropout']:.1f} standard errors of "
            f"each entry (bound {DROPOUT_SE:g})")
    if failed:
        line += f"; FAILED ({len(failed)}): {' | '.join(failed[:3])}{' | ...' * (len(failed) > 3)}"
    return line, not failed


def main(argv):  # `python attn.py`: one line on stdout; exit 0 when every check passes
    if argv:
        sys.stderr.write(f"attn.py: unknown argument(s) {' '.join(argv)}: it takes none "
                         f"(`python attn.py` checks itself and prints one line)\n")
        return 2
    line, ok = self_check()
    try:
        print(line, flush=True)
    except OSError as e:
        return stdout_lost("attn.py", e)
    return 0 if ok else 1


def stdout_lost(prog, e):  # -> the exit code of command `prog` whose stdout failed (OSError e)
    """The one way the root's commands (attn.py, train.py, theory.py) end when stdout fails: a
    closed pipe (`| head -c 1`) quietly, with 141 as a Unix tool that SIGPIPE ends; anything else
    (`> /dev/full`) in one line on stderr, with 1. stdout is pointed at /dev/null first, so that
    nothing is left to flush at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if not isinstance(e, BrokenPipeError):
        sys.stderr.write(f"{prog}: cannot write to stdout: {e.strerror or e}\n")
    return 141 if isinstance(e, BrokenPipeError) else 1


def _interrupted(signum, frame):  # `python attn.py` has nothing to save: one line, exit 130 now
    sys.stderr.write("\nattn.py: interrupted\n")
    os._exit(130)


# ---------------------------------------------------------------------------------------------
# the caller's arguments, checked once at the model's doors: one line naming the value

def describe(v):  # a caller's value in a few words, on one line: 5, 'cls', an array's shape
    return (f"an array of shape {v.shape} and dtype {v.dtype}" if isinstance(v, np.ndarray)
            else reprlib.repr(v).replace("\n", " "))


def check_config(cfg):  # -> cfg: exactly CONFIG_DEFAULTS' keys, each with a value the model takes
    if not isinstance(cfg, dict) or cfg.keys() != CONFIG_DEFAULTS.keys():
        raise ValueError("cfg must be a dict of default_config(...)'s keys, " + (
            f"missing or unknown: {sorted(cfg.keys() ^ CONFIG_DEFAULTS.keys(), key=str)}"
            if isinstance(cfg, dict) else f"got {describe(cfg)}"))
    whole = lambda k, lo=1: (isinstance(cfg[k], (int, np.integer)) and not isinstance(cfg[k], bool)
                             and lo <= cfg[k] < 2 ** 63)
    rules = dict(T=(whole("T"), "an integer from 1 to 2**63-1"), heads=(whole("heads"), "an "
                 "integer from 1 to 2**63-1"), mlp=(whole("mlp", 0), "an integer from 0 to 2**63-1"),
                 d=(whole("d") and whole("heads") and cfg["d"] % cfg["heads"] == 0,
                    f"a multiple of heads={cfg['heads']} below 2**63"),
                 ln=(isinstance(cfg["ln"], (bool, np.bool_)), "True or False"),
                 dropout=(isinstance(cfg["dropout"], (int, float, np.integer, np.floating))
                          and 0 <= cfg["dropout"] < 1, "a probability in [0, 1)"),
                 **{k: (str(cfg[k]) in v, " or ".join(map(repr, v))) for k, v in dict(
                     act=tuple(ACTIVATIONS), dtype=FLOAT_DTYPES, pos_init=POS_INITS).items()})
    for k in (k for k, (ok, _) in rules.items() if not ok):
        raise ValueError(f"{k} must be {rules[k][1]}, got {describe(cfg[k])}")
    return cfg


def check_params(p, cfg):  # p: exactly cfg's parameters, each an array of its shape and dtype
    want, dt = param_shapes(cfg), np.dtype(cfg["dtype"])
    if not isinstance(p, dict) or p.keys() != want.keys():
        raise ValueError(f"params must be the dict init_params(cfg, rng) gives, keys {list(want)}"
                         f", got {sorted(p, key=str) if isinstance(p, dict) else describe(p)}")
    for k in (k for k in want if not (isinstance(p[k], np.ndarray) and p[k].dtype == dt
                                      and p[k].shape == want[k])):
        raise ValueError(f"param {k} must be an array of shape {want[k]} and dtype {dt}, got "
                         f"{describe(p[k])}")


def check_binary(name, v, ok, form, values=True):  # v: a numpy array `form` (ok(shape)) of 0s, 1s
    if not (isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and ok(v.shape) and not (
            values and v.dtype != bool and ((v != 0) & (v != 1)).any())):
        raise ValueError(f"{name} must be a numpy array {form} of 0s and 1s, got {describe(v)}")


def check_call(p, cfg, X, rng=None):  # the model's doors: cfg, params, bits X, dropout's rng
    check_params(p, cfg)
    check_binary("X", X, lambda s: len(s) == 2 and s[0] >= 1 and s[1] == cfg["T"],
             f"[batch >= 1, T={cfg['T']}]")
    if not (rng is None or isinstance(rng, np.random.Generator)):
        raise ValueError(f"rng must be None or a numpy Generator, got {describe(rng)}")


def _check_backward(dz, p, cfg, c):  # model_backward's: dz of the logits' shape, its cache
    check_params(p, cfg)
    if not (isinstance(c, ModelCache) and isinstance(dz, np.ndarray) and dz.dtype.kind in "biuf"
            and dz.shape == c.f.shape[:1]):
        raise ValueError(f"model_backward needs the cache model_forward returned and dz, numbers "
                         f"of its logits' shape, got cache {describe(c)}, dz {describe(dz)}")

if __name__ == "__main__":
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not where it is ignored
        signal.signal(signal.SIGINT, _interrupted)    # Ctrl-C during the check: never a trace
    sys.exit(main(sys.argv[1:]))
