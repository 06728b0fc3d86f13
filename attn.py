"""attn.py: the Transformer of Edelman, Goel, Kakade & Zhang (ICML 2022), by hand in NumPy.

"Inductive Biases and Variable Creation in Self-Attention Mechanisms", arXiv:2110.10090.
Section 3 (Figure 1) defines the modules; Section 5 (the experiment) uses them as

    x_t      = E_tok[b_t] + E_pos[t]           t = 0..T-1, b_t in {0, 1}   (one token per bit)
    x_[CLS]  = cls                              appended *after* x_T, at row index T
    h        = x_[CLS] + Attn(LN1(X))[CLS]      f_tf-head with context z = LN1(x_[CLS])
    h'       = h + MLP(LN2(h))                  pre-LayerNorm block
    logit    = w . LNf(h') + b                  scalar output f_tf-scalar read at [CLS]

The file is the model's documentation and reads top to bottom in three sections:
  1. THE REFERENCE: every op as a pair `thing_forward(...) -> (out, cache)` and
     `thing_backward(dout, cache) -> grads`, in textbook numpy: paths "cls" and "full".
  2. THE FAST PATH: path "fast", the model as training runs it, a stack of R runs at once; every
     speed trick lives here, each with the reason it exists.
  3. THE CHECKS: configuration, parameters, inputs and memory. Every public function refuses a
     wrong argument with one line that names it and says what is allowed: a ValueError, or
     WrongType (both a ValueError and a TypeError) when the argument's type is wrong. Arrays are
     taken as numpy arrays only (a list is refused, never guessed at); generators as numpy
     Generators only; a cfg only with exactly the keys of default_config.

Shape letters: B batch (samples), T bits (context length; N = T + 1 rows with [CLS]), d width,
H heads, e = d / H a head's width, k MLP hidden units, R runs in a stack. Parameters are a plain
dict of named arrays (`init_params`); the configuration is a plain dict `cfg` (`default_config`).
Everything keeps the dtype of the parameters (float32 or float64).

Three exact ways to compute the same 1-layer model (`model_forward(..., path=...)`):
  "full": f_tf-layer, every position queries (B x H x N x N scores); the literal model.
  "cls":  only the [CLS] query row (B x H x N); exact, since no other row reaches the output.
  "fast": before LN1 each position holds one of only two vectors and the [CLS] query is the same
          for every sample, so each head's output is a ratio of two linear functions of the bit
          vector: a batch costs one (B, 2T) @ (2T, H + d) matrix product. Used for training.
The path tests of test_all.py pin the fast path to the reference: the same logits and parameter
gradients (to rounding), and each tuned op against its textbook op.

This file needs numpy alone; copy it anywhere.
"""
import math
import os
import reprlib

import numpy as np

VOCAB = 2                                           # the tasks are Boolean: one token per bit
POS_INITS = ("normal", "zero")                      # E_pos starts N(0, std^2), or 0 as in minGPT
LN_EPS = 1e-5                                       # LayerNorm's variance floor
GELU_C = (2.0 / np.pi) ** 0.5                       # GELU's tanh form: C = sqrt(2 / pi)
ATTN_KEYS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")
PATHS = ("fast", "cls", "full")


# ==============================================================================================
# 1. THE REFERENCE: the model's definition, op by op in textbook numpy (paths "cls" and "full")
# ==============================================================================================

# ---------------------------------------------------------------------------------------------
# configuration and initialisation (Section 5: d = 64, 16 heads, MLP hidden 64, N(0, 0.02^2))

CONFIG_DEFAULTS = dict(T=100, d=64, heads=16, mlp=64, ln=True, act="gelu", dtype="float32",
                       dropout=0.0, pos_init="normal")   # a cfg has exactly these keys


def default_config(**overrides):
    """The experiment's model: one pre-LN block, d=64, 16 heads, GELU MLP with 64 hidden units.

    Keys: T (context length), d (width), heads, mlp (hidden units; 0 = no MLP), ln (LayerNorms on
    or off), act ("gelu" or "relu"), dtype ("float32" or "float64"), dropout (probability in
    [0, 1), as minGPT: on the embeddings, the attention weights and both residual branches; it
    acts only when model_forward is given an rng, on path "cls"), pos_init
    ("normal": E_pos ~ N(0, std^2) like every weight; "zero": minGPT's positional embedding,
    a parameter that starts at 0).
    The theory's single head f_tf-head is `default_config(heads=1, mlp=0, ln=False)`.
    """
    cfg = dict(CONFIG_DEFAULTS)
    unknown = set(overrides) - set(cfg)
    if unknown:
        raise ValueError(f"unknown config key(s) {sorted(unknown)}; allowed: {sorted(cfg)}")
    cfg.update(overrides)
    return check_config(cfg)


def param_shapes(cfg):
    """{name: (shape, init kind)} of the model's parameters, in init order: the one list of them."""
    T, d, k = cfg["T"], cfg["d"], cfg["mlp"]
    shapes = dict(E_tok=((VOCAB, d), "normal"), E_pos=((T, d), "normal"), cls=((d,), "normal"))
    for name in "QKVO":
        shapes["W_" + name], shapes["b_" + name] = ((d, d), "normal"), ((d,), "zero")
    if k:
        shapes.update(W_1=((d, k), "normal"), b_1=((k,), "zero"), W_2=((k, d), "normal"),
                      b_2=((d,), "zero"))
    if cfg["ln"]:
        for ln in ("ln1", "ln2", "lnf") if k else ("ln1", "lnf"):
            shapes[ln + "_g"], shapes[ln + "_b"] = ((d,), "one"), ((d,), "zero")
    shapes.update(w=((d,), "normal"), b=((1,), "zero"))
    return shapes


def init_params(cfg, rng, std=0.02):
    """Section 5 init: weights and embeddings N(0, std^2), biases 0, LayerNorm gain 1, shift 0.

    Shapes: E_tok [2, d], E_pos [T, d], cls [d]; W_Q, W_K, W_V, W_O [d, d] (row convention
    y = x @ W + b, heads are consecutive blocks of e = d/H columns); W_1 [d, k], W_2 [k, d];
    readout w [d], b [1]. With cfg["pos_init"] == "zero", E_pos is drawn and then set to 0, so
    every other parameter is the one the same rng gives with "normal" (paired comparisons).
    """
    _check_init(cfg, rng, std)
    dt = np.dtype(cfg["dtype"])
    p = {}
    for name, (shape, kind) in param_shapes(cfg).items():
        p[name] = ((std * rng.standard_normal(shape)).astype(dt) if kind == "normal"
                   else np.full(shape, 1.0 if kind == "one" else 0.0, dt))
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

def dropout_forward(x, p, rng):  # [...] -> [...]; its cache is the scaled mask
    _check_dropout(p, rng)
    if not p or rng is None:
        return x, None
    mask = (rng.random(x.shape) >= p).astype(x.dtype) / x.dtype.type(1.0 - p)
    return x * mask, mask


def dropout_backward(dy, mask):  # forward: y = x * mask
    return dy if mask is None else dy * mask


# ---------------------------------------------------------------------------------------------
# f_tf-head at the [CLS] query (Section 3): scores z^T W_Q W_K^T x_t, softmax over t, values

def attention_cls_forward(Xn, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, heads, drop=(0.0, None)):
    """Multi-head attention with one query, the last row ([CLS]).  [B, N, d] -> [B, d].

    Per head h (width e = d/H, columns h*e:(h+1)*e):
      q = z W_Q + b_Q with z = Xn[:, -1];  K = Xn W_K + b_K;  V = Xn W_V + b_V
      A = softmax_t(q . K_t / sqrt(e));    o = sum_t A_t V_t;    y = concat_h(o) W_O + b_O
    Only the product W_Q^h W_K^h^T / sqrt(e) (the paper's W_QK for head h) and the bias terms
    enter the scores. drop = (p, rng): dropout on the attention weights A (training only).
    """
    B, N, d = Xn.shape
    e = d // heads
    q, c_q = linear_forward(Xn[:, -1], W_Q, b_Q)                     # [B, d]
    K, c_k = linear_forward(Xn, W_K, b_K)                            # [B, N, d]
    V, c_v = linear_forward(Xn, W_V, b_V)
    qh, Kh, Vh = q.reshape(B, heads, e), K.reshape(B, N, heads, e), V.reshape(B, N, heads, e)
    scale = e ** -0.5
    A, _ = softmax_forward(np.einsum("bhe,bnhe->bhn", qh, Kh) * scale)  # [B, H, N]
    Ad, mask = dropout_forward(A, *drop)
    o = np.einsum("bhn,bnhe->bhe", Ad, Vh).reshape(B, d)
    y, c_o = linear_forward(o, W_O, b_O)
    return y, dict(c_q=c_q, c_k=c_k, c_v=c_v, c_o=c_o, qh=qh, Kh=Kh, Vh=Vh, A=A, Ad=Ad,
                   mask=mask, scale=scale)


def attention_cls_backward(dy, cache):  # [B, d] -> dXn [B, N, d], dW_Q, db_Q, ..., dW_O, db_O
    c_q, c_k, c_v, c_o, qh, Kh, Vh, A, Ad, mask, scale = (cache[k] for k in (
        "c_q", "c_k", "c_v", "c_o", "qh", "Kh", "Vh", "A", "Ad", "mask", "scale"))
    B, H, e = qh.shape
    N = Kh.shape[1]
    do, dW_O, db_O = linear_backward(dy, c_o)           # forward: y = o W_O + b_O
    do = do.reshape(B, H, e)
    dAd = np.einsum("bhe,bnhe->bhn", do, Vh)            # forward: o = sum_n Ad_n V_n
    dVh = np.einsum("bhn,bhe->bnhe", Ad, do)
    dA = dropout_backward(dAd, mask)                    # forward: Ad = dropout(A)
    ds = softmax_backward(dA, A) * scale                # forward: A = softmax(s * scale)
    dqh = np.einsum("bhn,bnhe->bhe", ds, Kh)            # forward: s = q . K_n
    dKh = np.einsum("bhn,bhe->bnhe", ds, qh)
    dXn_v, dW_V, db_V = linear_backward(dVh.reshape(B, N, H * e), c_v)  # forward: V = Xn W_V + b_V
    dXn, dW_K, db_K = linear_backward(dKh.reshape(B, N, H * e), c_k)    # forward: K = Xn W_K + b_K
    dz, dW_Q, db_Q = linear_backward(dqh.reshape(B, H * e), c_q)        # forward: q = z W_Q + b_Q
    dXn = dXn + dXn_v
    dXn[:, -1] += dz                                    # forward: z = Xn[:, -1]
    return dXn, dW_Q, db_Q, dW_K, db_K, dW_V, db_V, dW_O, db_O


# ---------------------------------------------------------------------------------------------
# f_tf-layer (Section 3): the same head applied at every position, z = x_t  -> [B, N, d]

def self_attention_forward(Xn, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, heads):
    """Full self-attention, every row queries: scores [B, H, N, N]. The reference for the
    [CLS]-row shortcut; O(N^2) per example, so use it for checks, not for training."""
    B, N, d = Xn.shape
    e = d // heads
    Q, c_q = linear_forward(Xn, W_Q, b_Q)
    K, c_k = linear_forward(Xn, W_K, b_K)
    V, c_v = linear_forward(Xn, W_V, b_V)
    Qh, Kh, Vh = (M.reshape(B, N, heads, e) for M in (Q, K, V))
    scale = e ** -0.5
    A, _ = softmax_forward(np.einsum("bqhe,bkhe->bhqk", Qh, Kh) * scale)  # [B, H, N, N]
    o = np.einsum("bhqk,bkhe->bqhe", A, Vh).reshape(B, N, d)
    y, c_o = linear_forward(o, W_O, b_O)
    return y, dict(c_q=c_q, c_k=c_k, c_v=c_v, c_o=c_o, Qh=Qh, Kh=Kh, Vh=Vh, A=A, scale=scale)


def self_attention_backward(dy, cache):  # [B, N, d] -> dXn [B, N, d], dW_Q, db_Q, ..., db_O
    c_q, c_k, c_v, c_o, Qh, Kh, Vh, A, scale = (cache[k] for k in (
        "c_q", "c_k", "c_v", "c_o", "Qh", "Kh", "Vh", "A", "scale"))
    B, N, H, e = Qh.shape
    do, dW_O, db_O = linear_backward(dy, c_o)           # forward: y = o W_O + b_O
    do = do.reshape(B, N, H, e)
    dA = np.einsum("bqhe,bkhe->bhqk", do, Vh)           # forward: o_q = sum_k A_qk V_k
    dVh = np.einsum("bhqk,bqhe->bkhe", A, do)
    ds = softmax_backward(dA, A) * scale                # forward: A = softmax(s * scale)
    dQh = np.einsum("bhqk,bkhe->bqhe", ds, Kh)          # forward: s_qk = Q_q . K_k
    dKh = np.einsum("bhqk,bqhe->bkhe", ds, Qh)
    dX_q, dW_Q, db_Q = linear_backward(dQh.reshape(B, N, H * e), c_q)   # forward: Q = Xn W_Q + b_Q
    dX_k, dW_K, db_K = linear_backward(dKh.reshape(B, N, H * e), c_k)
    dX_v, dW_V, db_V = linear_backward(dVh.reshape(B, N, H * e), c_v)
    return dX_q + dX_k + dX_v, dW_Q, db_Q, dW_K, db_K, dW_V, db_V, dW_O, db_O


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
# logistic loss on labels y in {0, 1}, from logits, stably: mean(softplus(z) - y z)

def logistic_forward(z, y, weights=None):  # [..., B], [..., B] -> [...]
    """Mean over the last axis, or sum(weights * loss) when per-sample weights are given (a stack
    of runs gives its padding samples weight 0 and the others 1/m): finite, >= 0, z's shape."""
    _check_loss_inputs(z, y, weights)
    return _logistic_forward(z, y, weights)


def _logistic_forward(z, y, weights):  # logistic_forward on checked inputs
    loss = np.maximum(z, 0) - y * z + np.log1p(np.exp(-np.abs(z)))
    w = 1.0 / z.shape[-1] if weights is None else weights
    return (loss * w).sum(-1), (z, y, w)


def logistic_backward(dloss, cache):  # forward: loss = sum(w * (softplus(z) - y z))
    z, y, w = cache
    sig = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
    return dloss * w * (sig - y)


# ---------------------------------------------------------------------------------------------
# the model (Section 5): one pre-LN block read out at [CLS], on the plain paths "cls" and "full"

def _ln_forward(p, cfg, name, x):  # [..., d] -> [..., d]
    """LayerNorm `name` of p (gain p[name_g], shift p[name_b]), or the identity when ln is off."""
    if not cfg["ln"]:
        return x, None
    return layernorm_forward(x, p[name + "_g"], p[name + "_b"])


def _ln_backward(grads, cfg, name, dy, cache):  # stores grads[name_g], grads[name_b]; -> dx
    if not cfg["ln"]:
        return dy
    dx, grads[name + "_g"], grads[name + "_b"] = layernorm_backward(dy, cache)
    return dx


def plain_attention_forward(p, cfg, X, path="cls", rng=None):
    """Embedding, LN1 and the head, on every example: Attn(LN1(X))[CLS] -> [B, d], and the cache.
    path "cls" runs only the [CLS] query row, "full" the whole f_tf-layer (then takes its row).
    With an rng and cfg["dropout"] (path "cls"): dropout on the embeddings and attention weights."""
    x0, c_emb = embed_forward(X.astype(np.intp, copy=False), p["E_tok"], p["E_pos"], p["cls"])
    m_emb = None                    # dropout on the T token embeddings ([CLS] is a parameter)
    if cfg["dropout"] and rng is not None:
        tok, m_emb = dropout_forward(x0[:, :-1], cfg["dropout"], rng)
        x0 = np.concatenate([tok, x0[:, -1:]], axis=1)
    xn, c_ln1 = _ln_forward(p, cfg, "ln1", x0)
    args = [p[k] for k in ATTN_KEYS]
    if path == "cls":
        attn, c_a = attention_cls_forward(xn, *args, cfg["heads"], drop=(cfg["dropout"], rng))
    else:
        attn_all, c_a = self_attention_forward(xn, *args, cfg["heads"])
        attn = attn_all[:, -1]
    return attn, dict(path=path, emb=c_emb, m_emb=m_emb, ln1=c_ln1, attn=c_a, N=xn.shape[1])


def plain_attention_backward(dattn, p, cfg, cache):
    """Backward of plain_attention_forward: {E_tok, E_pos, cls, ln1_g, ln1_b, W_Q, ..., b_O}."""
    g = {}
    if cache["path"] == "cls":
        dxn, *dattn_params = attention_cls_backward(dattn, cache["attn"])
    else:                                     # forward: attn = attn_all[:, -1]
        dy = np.zeros((dattn.shape[0], cache["N"], dattn.shape[1]), dattn.dtype)
        dy[:, -1] = dattn
        dxn, *dattn_params = self_attention_backward(dy, cache["attn"])
    g.update(zip(ATTN_KEYS, dattn_params))
    dx0 = _ln_backward(g, cfg, "ln1", dxn, cache["ln1"])   # forward: xn = LN1(x0)
    if cache["m_emb"] is not None:                  # forward: tokens = dropout(tokens)
        dx0[:, :-1] *= cache["m_emb"]
    g["E_tok"], g["E_pos"], g["cls"] = embed_backward(dx0, cache["emb"])
    return g


def reference_forward(p, cfg, X, path="cls", rng=None):  # [B, T] bits -> logits [B], cache
    """The experiment's model on one run, on path "cls" or "full" (dropout: see default_config)."""
    c = dict(path=path)
    attn, c["attn"] = plain_attention_forward(p, cfg, X, path, rng)
    attn, c["m_attn"] = dropout_forward(attn, cfg["dropout"], rng)  # residual-branch dropout
    h = p["cls"] + attn                                              # residual at [CLS]
    if cfg["mlp"]:
        hn, c["ln2"] = _ln_forward(p, cfg, "ln2", h)
        m, c["mlp"] = mlp_forward(hn, p["W_1"], p["b_1"], p["W_2"], p["b_2"], cfg["act"])
        m, c["m_mlp"] = dropout_forward(m, cfg["dropout"], rng)
        h = h + m                                                    # residual
    f, c["lnf"] = _ln_forward(p, cfg, "lnf", h)
    c["f"] = f
    return f @ p["w"] + p["b"], c                                    # readout at [CLS]


def reference_backward(dz, p, cfg, c):  # dz [B] -> {name: gradient of sum(dz * logits)}
    f = c["f"]
    g = dict(w=f.T @ dz, b=dz.sum(0, keepdims=True))                 # forward: z = f @ w + b
    dh = _ln_backward(g, cfg, "lnf", dz[:, None] * p["w"], c["lnf"])  # forward: f = LNf(h)
    if cfg["mlp"]:                                          # forward: h = h + drop(MLP(LN2(h)))
        dm = dropout_backward(dh, c["m_mlp"])
        dhn, g["W_1"], g["b_1"], g["W_2"], g["b_2"] = mlp_backward(dm, c["mlp"])
        dh = dh + _ln_backward(g, cfg, "ln2", dhn, c["ln2"])
    g.update(plain_attention_backward(dropout_backward(dh, c["m_attn"]), p, cfg, c["attn"]))
    g["cls"] = g["cls"] + dh.sum(0)                         # forward: h = cls + drop(attn)
    return g


def model_forward(p, cfg, X, path="fast", rng=None, versions=None):
    """Logits [B] of the experiment's model on bit strings X [B, T]; returns (logits, cache).

    On path "fast", a stack of R runs trains as one: every parameter with a leading run axis
    [R, ...], X [R, B, T] -> logits [R, B]; each run's numbers are those of the run alone.
    rng: a generator for dropout (training, path "cls" only: per-sample masks on tokens and
    attention weights break the fast path's two versions per position); without it dropout is
    off, as at evaluation. versions: two_versions(X, dtype) kept by a caller whose X never changes
    (a full-batch run), so the fast path does not rebuild it every step; it must be exactly that
    matrix (its shape and dtype are checked, its values are not)."""
    _check_call(p, cfg, X, path, rng, versions)
    if path == "fast":
        return fast_forward(p, cfg, X, versions)
    return reference_forward(p, cfg, X, path, rng)


def model_backward(dz, p, cfg, cache):
    """Gradients of sum(dz * logits) for every parameter: a dict with the keys of p.
    One backward per forward call of model_forward, in reverse order."""
    _check_dz(dz, cache)
    if cache["path"] == "fast":
        return fast_backward(dz, p, cfg, cache)
    return reference_backward(dz, p, cfg, cache)


def loss_and_grads(p, cfg, X, y, path="fast", weights=None, rng=None, versions=None):
    """Mean logistic loss, its gradient dict, and the logits [B]. For a stack of runs (X [R, B, T],
    y [R, B]): each run's loss [R] (sum(weights * loss) per run when weights [R, B] are given),
    and each run's gradients (of its own loss). rng, versions: see model_forward."""
    _check_choice("path", path, PATHS)
    _check_x(X, path)                         # X's type and shape first: y's shape follows from it
    _check_targets(y, weights, X.shape[:-1])
    z, cache = model_forward(p, cfg, X, path, rng, versions)
    loss, c_loss = _logistic_forward(z, y.astype(z.dtype, copy=False), weights)
    return loss, model_backward(logistic_backward(1.0, c_loss), p, cfg, cache), z


def cls_attention(p, cfg, X):
    """[CLS] attention weights [B, H, T+1] (last column: [CLS] attending to itself)."""
    _check_inputs(p, cfg, X, "cls", stack=False)
    _, cache = plain_attention_forward(p, cfg, X, "cls")
    return cache["attn"]["A"]


# ==============================================================================================
# 2. THE FAST PATH: training's code. The model's parameters carry a leading run axis R (one run
#    is a stack of one); baseline.py's MLP runs on the same tuned ops. Its arithmetic is frozen
#    (the same operations in the same order), so that runs repeat bit for bit.
# ==============================================================================================

# ---------------------------------------------------------------------------------------------
# tuned ops: LayerNorm, affine map and MLP for a stack of runs

def row_sum(a):  # [..., n] -> [...]
    """Sum over the last axis as a matrix-vector product: numpy's own reduction over a short last
    axis (LayerNorm's d, a head's width) is much slower than BLAS on the same numbers."""
    return a @ np.ones(a.shape[-1], a.dtype)


def stack_layernorm_forward(x, g, b):  # [R, n, d], [R, d], [R, d] -> [R, n, d]
    """layernorm_forward per run; means by row_sum, xhat written over x - mu (one buffer less)."""
    inv_d = 1.0 / x.shape[-1]
    xc = x - (row_sum(x) * inv_d)[..., None]
    rstd = 1.0 / np.sqrt(row_sum(xc * xc) * inv_d + LN_EPS)[..., None]
    xhat = np.multiply(xc, rstd, out=xc)
    y = xhat * g[:, None, :]
    y += b[:, None, :]                                  # in place: no second [R, n, d] array
    return y, (xhat, rstd, g)


def stack_layernorm_backward(dy, cache):  # [R, n, d] -> dx [R, n, d], dg [R, d], db [R, d]
    xhat, rstd, g = cache
    dg, db = (dy * xhat).sum(1), dy.sum(1)              # forward: y = xhat * g + b
    dxhat = dy * g[:, None, :]
    inv_d = 1.0 / dy.shape[-1]                          # forward: xhat = (x - mu) * rstd
    dx = dxhat - (row_sum(dxhat) * inv_d)[..., None]
    dx -= xhat * (row_sum(dxhat * xhat) * inv_d)[..., None]
    dx *= rstd
    return dx, dg, db


def _stack_ln_forward(p, cfg, name, x):  # [R, n, d] -> [R, n, d]; the identity when ln is off
    if not cfg["ln"]:
        return x, None
    return stack_layernorm_forward(x, p[name + "_g"], p[name + "_b"])


def _stack_ln_backward(grads, cfg, name, dy, cache):  # stores grads[name_g], grads[name_b]
    if not cfg["ln"]:
        return dy
    dx, grads[name + "_g"], grads[name + "_b"] = stack_layernorm_backward(dy, cache)
    return dx


def fast_linear_forward(x, W, b):
    """y = x @ W + b, leading axes reshaped away so that each run is one BLAS product.
    One run: x [..., n], W [n, k], b [k].
    A stack of R runs: x [R, ..., n], W [R, n, k], b [R, k]."""
    if W.ndim == 3:
        y = x.reshape(W.shape[0], -1, x.shape[-1]) @ W
        y += b[:, None, :]
        return y.reshape(x.shape[:-1] + (W.shape[-1],)), (x, W)
    y = x.reshape(-1, x.shape[-1]) @ W
    y += b
    return y.reshape(x.shape[:-1] + (W.shape[1],)), (x, W)


def fast_linear_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW, db
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


def fast_mlp_forward(x, W_1, b_1, W_2, b_2, act="gelu"):  # mlp_forward on fast_linear_forward
    h, c1 = fast_linear_forward(x, W_1, b_1)
    a, ca = ACTIVATIONS[act][0](h)
    y, c2 = fast_linear_forward(a, W_2, b_2)
    return y, (c1, ca, c2, act)


def fast_mlp_backward(dy, cache, need_dx=True):  # -> dx (None unless need_dx), dW_1, ..., db_2
    c1, ca, c2, act = cache
    da, dW_2, db_2 = fast_linear_backward(dy, c2)       # forward: y = a W_2 + b_2
    dh = ACTIVATIONS[act][1](da, ca)                    # forward: a = act(h)
    dx, dW_1, db_1 = fast_linear_backward(dh, c1, need_dx)   # forward: h = x W_1 + b_1
    return dx, dW_1, db_1, dW_2, db_2


# ---------------------------------------------------------------------------------------------
# the exact shortcut: two versions per position, a head output is a ratio of linear functions

SAFE_EXP = {np.dtype("float32"): 60.0, np.dtype("float64"): 600.0}   # exp(x) far from overflow


def head_spread(H, e, dtype):  # -> [H, H e]
    """Row h is 1 on head h's e columns, 0 elsewhere. A [..., H] @ head_spread gives each head's
    value on its e columns in one BLAS call, exactly (each entry is one product by 1, the rest are
    products by 0), where broadcasting along a length-e axis (e = 4 in the experiment) runs
    numpy's inner loop 4 elements at a time."""
    return np.repeat(np.eye(H, dtype=dtype), e, axis=1)


def two_versions(X, dtype):  # [R, B, T] (or [B, T]) bits -> [R, B, 2T]: [1 - X, X]
    """Which version of each position a sample holds: column t is bit 0, column T + t bit 1.
    dtype: the model's, float32 or float64. X is checked here, once: model_forward does not
    read the bits of the versions it is given."""
    _check_x(X)
    _float_dtype("dtype", dtype)
    _check_01("X", X, "bits")
    return _two_versions(X, dtype)


def _two_versions(X, dtype):  # two_versions on checked bits (the fast path's own, every step)
    T = X.shape[-1]
    Xb = np.empty(X.shape[:-1] + (2 * T,), dtype)
    np.subtract(1, X, out=Xb[..., :T], dtype=dtype)
    Xb[..., T:] = X
    return Xb


def fast_attention_forward(p, cfg, X, versions=None):
    """Attn(LN1(X))[CLS] for a stack of R runs, in O(B T (H + d)) instead of O(B T d^2).
    p: every parameter with a leading run axis; X [R, B, T] -> [R, B, d].

    Before LN1, position t holds E_tok[0] + E_pos[t] or E_tok[1] + E_pos[t]; the [CLS] row is the
    same for every sample. So per head the scores exist in two versions, s0[t] and s1[t], and
    with one-hot bits Xb = [1 - X, X]  [B, 2T]  and weights E_v[t] = exp(s_v[t] - M):
        Z = E_c + Xb @ E                 (softmax denominator)   [B, H]
        N = E_c V_c + Xb @ (E * V)       (weighted values)       [B, H, e]
        o = N / Z,  exactly the [CLS] row of softmax attention: one (B, 2T) @ (2T, H + d) product.
    Every term of Z is positive, so nothing cancels (writing Z with e1 - e0 would lose all
    precision when one version's weight is huge). M = max(s_c, max_t min(s0[t], s1[t])) is a
    lower bound on every sample's max score, so Z >= 1. If some score of a run exceeds M by more
    than SAFE_EXP (exp could overflow), that run falls back (split_attention_forward): in float32
    it reruns this in float64, whose exp reaches ten times further, and past that the reference
    path "cls" takes over. The other runs of the stack stay here, so a run's numbers never depend
    on its stackmates. The keys meet only the one query, so the scores are rn @ (W_K q) per head:
    no [2T+1, d] key matrix.
    """
    R, B, T = X.shape
    d, H = cfg["d"], cfg["heads"]
    e = d // H
    rows = np.empty((R, 2 * T + 1, d), p["E_pos"].dtype)            # v0 rows | v1 rows | cls
    rows[:, :2 * T] = (p["E_tok"][:, :, None, :] + p["E_pos"][:, None]).reshape(R, 2 * T, d)
    rows[:, 2 * T] = p["cls"]
    rn, c_ln1 = _stack_ln_forward(p, cfg, "ln1", rows)
    q, c_q = fast_linear_forward(rn[:, -1:], p["W_Q"], p["b_Q"])     # [R, 1, d]
    qh = q.reshape(R, H, e)
    # the keys are only ever dotted with the one query: fold it in, s = rn @ u + c  (no K)
    u = np.einsum("rdhe,rhe->rdh", p["W_K"].reshape(R, d, H, e), qh)  # [R, d, H]: W_K q per head
    scale = e ** -0.5
    s = (rn @ u + row_sum(p["b_K"].reshape(R, H, e) * qh)[:, None]) * scale  # [R, 2T+1, H]
    M = np.maximum(np.minimum(s[:, :T], s[:, T:2 * T]).max(1), s[:, 2 * T])   # [R, H]
    s -= M[:, None]
    top = s.reshape(R, -1).max(1)                                     # [R]: each run's spread
    if top.max() > SAFE_EXP[s.dtype]:
        return split_attention_forward(p, cfg, X, versions, top)
    V, c_v = fast_linear_forward(rn, p["W_V"], p["b_V"])             # [R, 2T+1, d]
    E_EV = np.empty((R, 2 * T + 1, H + d), s.dtype)   # [E | E * V] per row: one product for both
    E = np.exp(s, out=E_EV[..., :H])
    spread = head_spread(H, e, s.dtype)
    Ed = E @ spread                        # [R, 2T+1, d]: each head's weight over its e columns
    np.multiply(Ed, V, out=E_EV[..., H:])
    Xb = _two_versions(X, s.dtype) if versions is None else versions  # [R, B, 2T]
    Z_N = Xb @ E_EV[:, :2 * T]       # [Z | N]: softmax denominators and numerators, [R, B, H + d]
    Z_N += E_EV[:, 2 * T:]                                            # the [CLS] row, every sample
    Z = Z_N[..., :H]                                                  # [R, B, H]
    Zd = Z @ spread                                                   # [R, B, d]: Z per column
    o = Z_N[..., H:] / Zd
    y, c_o = fast_linear_forward(o, p["W_O"], p["b_O"])
    return y, dict(path="fast", Xb=Xb, ln1=c_ln1, c_q=c_q, rn=rn, u=u, c_v=c_v, c_o=c_o, qh=qh,
                   V=V, E=E, Ed=Ed, Z=Z, Zd=Zd, o=o, scale=scale, spread=spread)


def fast_attention_backward(dy, p, cfg, cache):
    """Backward of fast_attention_forward: {E_tok, E_pos, cls, ln1_g, ln1_b, W_Q, ..., b_O}, each
    with the leading run axis."""
    Xb, c_ln1, c_q, rn, u, c_v, c_o, qh, V, E, Ed, Zd, o, scale, spread = (cache[k] for k in (
        "Xb", "ln1", "c_q", "rn", "u", "c_v", "c_o", "qh", "V", "E", "Ed", "Zd", "o", "scale",
        "spread"))
    R, B, twoT = Xb.shape
    T, d, H = twoT // 2, cfg["d"], cfg["heads"]
    e = d // H
    g = {}
    do, g["W_O"], g["b_O"] = fast_linear_backward(dy, c_o)     # forward: y = o W_O + b_O
    dZ_N = np.empty((R, B, H + d), do.dtype)      # forward: o = N / Z, Z spread as Zd = Z @ spread
    dN = np.divide(do, Zd, out=dZ_N[..., H:])
    dZ_N[..., :H] = -row_sum((dN * o).reshape(R, B, H, e))
    dE_EV = np.empty((R, 2 * T + 1, H + d), do.dtype)  # forward: Z_N = Xb @ E_EV[:2T] + E_EV[2T]
    np.matmul(Xb.transpose(0, 2, 1), dZ_N, out=dE_EV[:, :2 * T])
    dE_EV[:, 2 * T] = dZ_N.sum(1)
    dEV = dE_EV[..., H:]                                              # forward: EV = Ed * V
    dE = dE_EV[..., :H] + row_sum((dEV * V).reshape(R, -1, H, e))   # forward: Ed = E @ spread
    dV = dEV * Ed
    ds = dE * E * scale                      # forward: E = exp(s - M), M a constant shift
    du = rn.transpose(0, 2, 1) @ ds          # forward: s = (rn @ u + b_K . q) * scale
    dc = ds.sum(1)                           # [R, H]
    query_blocks = spread * qh.reshape(R, 1, d)  # [R, H, d]: row h is head h's query, 0 elsewhere
    g["W_K"] = du @ query_blocks             # forward: u = W_K q per head (exact: one term each)
    g["b_K"] = (dc[:, None] @ query_blocks)[:, 0]
    dqh = (np.einsum("rdhe,rdh->rhe", p["W_K"].reshape(R, d, H, e), du)
           + p["b_K"].reshape(R, H, e) * dc[..., None])
    drn, g["W_V"], g["b_V"] = fast_linear_backward(dV, c_v)    # forward: V = rn W_V + b_V
    drn += ds @ u.transpose(0, 2, 1)
    drn_q, g["W_Q"], g["b_Q"] = fast_linear_backward(dqh.reshape(R, 1, d), c_q)
    drn[:, -1:] += drn_q                     # forward: q = rn[-1] W_Q + b_Q
    drows = _stack_ln_backward(g, cfg, "ln1", drn, c_ln1)
    d_rows_by_version = drows[:, :2 * T].reshape(R, 2, T, d)   # forward: rows = E_tok[v] + E_pos[t]
    g["E_tok"], g["E_pos"] = d_rows_by_version.sum(2), d_rows_by_version.sum(1)
    g["cls"] = drows[:, 2 * T]
    return g


def split_attention_forward(p, cfg, X, versions, top):
    """The fast path's fallbacks, run by run: top [R] is each run's largest shifted score. Runs
    within SAFE_EXP stay on the fast path, float32 runs within float64's SAFE_EXP rerun it in
    float64 (wide_attention_forward), the rest take the reference path (stack_attention_forward);
    each group is computed as a stack of its own, so every run gets exactly the numbers it gets
    alone. -> [R, B, d], and the groups' caches."""
    f64 = SAFE_EXP[np.dtype("float64")]
    safe = top <= SAFE_EXP[top.dtype]
    wide = ~safe & (top <= f64) if top.dtype == np.float32 else np.zeros_like(safe)
    groups = [(idx, forward) for idx, forward in (
        (np.flatnonzero(safe), lambda q, x, v: fast_attention_forward(q, cfg, x, v)),
        (np.flatnonzero(wide), lambda q, x, v: wide_attention_forward(q, cfg, x)),
        (np.flatnonzero(~safe & ~wide), lambda q, x, v: stack_attention_forward(q, cfg, x)))
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
    return y, dict(path="split", parts=parts)


def split_attention_backward(dy, p, cfg, cache):
    g = {}
    for idx, c in cache["parts"]:
        for k, v in attention_backward(dy[idx], {k: v[idx] for k, v in p.items()}, cfg, c).items():
            if k not in g:
                g[k] = np.empty((dy.shape[0],) + v.shape[1:], v.dtype)
            g[k][idx] = v
    return g


def wide_attention_forward(p, cfg, X):
    """The fast path's first fallback, for a float32 stack whose scores spread past float32's exp:
    the same shortcut in float64, result rounded to float32. Exact like the fast path and about
    twice its cost, where the reference path costs O(B T d^2) a step. -> [R, B, d]."""
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    y, inner = fast_attention_forward(p64, cfg, X)    # past float64's range it falls back again
    return y.astype(np.float32), dict(path="fast-in-float64", p=p64, inner=inner)


def wide_attention_backward(dy, p, cfg, cache):
    g = attention_backward(dy.astype(np.float64), cache["p"], cfg, cache["inner"])
    return {k: v.astype(np.float32) for k, v in g.items()}


def stack_attention_forward(p, cfg, X):
    """The fast path's exact fallback: the reference path "cls", run by run. -> [R, B, d]."""
    outs, caches = zip(*(plain_attention_forward({k: v[r] for k, v in p.items()}, cfg, X[r], "cls")
                         for r in range(X.shape[0])))
    return np.stack(outs), dict(path="stack-of-cls", runs=caches)


def stack_attention_backward(dy, p, cfg, cache):
    grads = [plain_attention_backward(dy[r], {k: v[r] for k, v in p.items()}, cfg, c)
             for r, c in enumerate(cache["runs"])]
    return {k: np.stack([g[k] for g in grads]) for k in grads[0]}


def attention_backward(dy, p, cfg, cache):
    """Backward of fast_attention_forward, on whichever path its forward took."""
    backward = {"fast": fast_attention_backward, "fast-in-float64": wide_attention_backward,
                "stack-of-cls": stack_attention_backward, "split": split_attention_backward
                }[cache["path"]]
    return backward(dy, p, cfg, cache)


# ---------------------------------------------------------------------------------------------
# the model on the fast path: the head of reference_forward, for a stack

def fast_forward(p, cfg, X, versions=None):
    """Logits of model_forward on path "fast" (its inputs checked): X [R, B, T] -> [R, B], or one
    run X [B, T] -> [B] as a stack of one."""
    if X.ndim == 2:
        z, cache = fast_forward({k: v[None] for k, v in p.items()}, cfg, X[None],
                                None if versions is None else versions[None])
        return z[0], dict(cache, single=True)
    c = dict(path="fast")
    attn, c["attn"] = fast_attention_forward(p, cfg, X, versions)
    h = p["cls"][:, None, :] + attn                                  # residual at [CLS]
    if cfg["mlp"]:
        hn, c["ln2"] = _stack_ln_forward(p, cfg, "ln2", h)
        m, c["mlp"] = fast_mlp_forward(hn, p["W_1"], p["b_1"], p["W_2"], p["b_2"], cfg["act"])
        h = h + m                                                    # residual
    f, c["lnf"] = _stack_ln_forward(p, cfg, "lnf", h)
    z = (f @ p["w"][:, :, None])[:, :, 0] + p["b"][:, :1]            # readout at [CLS]
    c["f"] = f
    return z, c


def fast_backward(dz, p, cfg, cache):  # dz [R, B] (or [B] for one run) -> gradient dict
    if cache.get("single"):
        g = fast_backward(dz[None], {k: v[None] for k, v in p.items()}, cfg,
                          dict(cache, single=False))
        return {k: v[0] for k, v in g.items()}
    g = {}
    g["w"] = (dz[:, None, :] @ cache["f"])[:, 0, :]                 # forward: z = f @ w + b
    g["b"] = dz.sum(-1)[:, None]
    dh = _stack_ln_backward(g, cfg, "lnf", dz[:, :, None] * p["w"][:, None, :], cache["lnf"])
    if cfg["mlp"]:                                                   # forward: h = h + MLP(LN2(h))
        dhn, g["W_1"], g["b_1"], g["W_2"], g["b_2"] = fast_mlp_backward(dh, cache["mlp"])
        dh = dh + _stack_ln_backward(g, cfg, "ln2", dhn, cache["ln2"])
    g.update(attention_backward(dh, p, cfg, cache["attn"]))          # forward: h = cls + attn
    g["cls"] = g["cls"] + dh.sum(-2)
    return g


def cls_attention_mean(p, cfg, X):
    """Mean over samples and heads of the [CLS] attention weights, [T+1] (last: [CLS] itself).

    Exact and cheap from the fast path: sample b puts weight E[v, t] / Z[b] on position t when
    its bit there is v, so the mean over samples is E0 * ((1 - X)^T @ 1/Z) + E1 * (X^T @ 1/Z).
    """
    _check_inputs(p, cfg, X, stack=False)
    _, cache = fast_attention_forward({k: v[None] for k, v in p.items()}, cfg, X[None])
    if cache["path"] == "fast-in-float64":
        cache = cache["inner"]
    if cache["path"] != "fast":                         # the fallback already holds the weights
        return cache["runs"][0]["attn"]["A"].mean(axis=(0, 1))
    Xb, E, Z = cache["Xb"][0], cache["E"][0], cache["Z"][0]
    T, B = cfg["T"], X.shape[0]
    W = E[:2 * T] * (Xb.T @ (1.0 / Z))                                # [2T, H]: v0 rows, v1 rows
    A = np.concatenate([W[:T] + W[T:], E[2 * T:] * (1.0 / Z).sum(0)])  # [T+1, H]
    return A.mean(1) / B


# ==============================================================================================
# 3. THE CHECKS: configuration, parameters, inputs and memory; general helpers first. The
#    per-step ones (model_forward, loss_and_grads, model_backward, and baseline.py's) read
#    types, shapes and dtypes, and the values of the batch only (X, y, weights), never those of
#    the parameters: each costs far less than a step. A message is built only to refuse.
# ==============================================================================================

FLOAT_DTYPES = ("float32", "float64")
_INTS, _REALS = (int, np.integer), (int, float, np.integer, np.floating)


class WrongType(ValueError, TypeError):
    """An argument of the wrong type: a ValueError like every other refusal of this file (the
    command line turns those into one line), and a TypeError for Python callers who expect one."""


def _got(v):
    """What a caller gave, in a few words: '5', "'fast'", '[[0, 1], ...]', 'None', an array's shape
    and dtype, or another object's type."""
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    if isinstance(v, (type(None), int, float, complex, str, list, tuple, dict, type, np.generic,
                      np.dtype)):
        return reprlib.repr(v)
    return f"an object of type {type(v).__name__}"


def _refuse(message, wrong_type):
    raise (WrongType if wrong_type else ValueError)(message)


def _check_number(name, v, types, lo, hi, what, bools=False):
    """lo <= v < hi for a v of `types` (a bool only where `bools`), else "{name} must be {what}"
    ('{lo}' filled in): WrongType for the wrong type, ValueError for a value out of range."""
    right_type = isinstance(v, types) and (bools or not isinstance(v, bool))
    if not (right_type and lo <= v < hi):
        _refuse(f"{name} must be {what.format(lo=lo)}, got {_got(v)}", not right_type)


def _check_int(name, v, lo):
    _check_number(name, v, _INTS, lo, math.inf, "an integer >= {lo}")


def _check_choice(name, v, allowed):
    """v one of the strings `allowed` (a str is required: a list or an array is never hashed)."""
    if not (isinstance(v, str) and v in allowed):
        _refuse(f"{name} must be one of {', '.join(allowed)}, got {_got(v)}",
                not isinstance(v, str))


def _check_rng(rng, optional=False):
    """A numpy Generator (np.random.default_rng(seed)); None too where optional (dropout off)."""
    if not (isinstance(rng, np.random.Generator) or (optional and rng is None)):
        raise WrongType(f"rng must be a numpy Generator such as np.random.default_rng(seed)"
                        f"{' or None' if optional else ''}, got {_got(rng)}")


def _float_dtype(name, v):
    """v as np.dtype float32 or float64 (a name, a dtype or a numpy type), or ValueError."""
    try:
        dt = None if v is None else np.dtype(v)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.name not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be 'float32' or 'float64', got {_got(v)}")
    return dt


def _check_array(name, v, kinds, shape, what):
    """v a numpy array whose dtype has a kind in `kinds` ("biuf": bool, integer or float) or is one
    of `kinds` (a tuple of dtypes), else WrongType; of `shape` (a tuple, or a test of the shape),
    else ValueError. Both say "{name} must be {what}", '{shape}' filled in."""
    if not isinstance(v, np.ndarray) or (v.dtype.kind not in kinds if isinstance(kinds, str)
                                         else v.dtype not in kinds):
        wrong_type = True
    elif (v.shape != shape) if isinstance(shape, tuple) else not shape(v.shape):
        wrong_type = False
    else:
        return
    hint = f": pass np.asarray({name})" if isinstance(v, (list, tuple)) else ""
    _refuse(f"{name} must be {what.format(shape=shape)}, got {_got(v)}{hint}", wrong_type)


def _check_01(name, v, what):
    """v's values 0 and 1 only: one scan, none for a bool array."""
    if v.dtype != np.bool_:
        bad = (v != 0) & (v != 1)                                    # NaN fails both comparisons
        if bad.any():
            raise ValueError(f"{name} must hold {what} 0 and 1 only, got {v[bad].flat[0].item()!r}")


def _check_memory(need, what, of, advice):
    """need bytes within half of physical memory, or ValueError: what needs about .. GiB `of`."""
    limit = 0.5 * physical_memory()
    if need > limit:
        raise ValueError(f"{what} needs about {need / 2**30:.1f} GiB {of}; this machine allows "
                         f"{limit / 2**30:.1f} GiB: {advice}")


def physical_memory():
    """Bytes of physical memory (8 GiB if the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


# ---------------------------------------------------------------------------------------------
# the model's configuration, initialisation and parameters

def check_config(cfg):
    """Raise ValueError naming the bad value and what is allowed; return cfg unchanged."""
    if not isinstance(cfg, dict):
        raise WrongType(f"cfg must be a dict from default_config(...), got {_got(cfg)}")
    missing = sorted(set(CONFIG_DEFAULTS) - set(cfg))
    if missing:
        raise ValueError(f"cfg is missing key(s) {missing}: build it with default_config(...), "
                         f"which fills in every key it is not given")
    unknown = sorted(set(cfg) - set(CONFIG_DEFAULTS), key=str)
    if unknown:
        raise ValueError(f"unknown config key(s) {unknown} in cfg; allowed: "
                         f"{sorted(CONFIG_DEFAULTS)}: build it with default_config(...)")
    for key, lo in (("T", 1), ("d", 1), ("heads", 1), ("mlp", 0)):
        _check_int(key, cfg[key], lo)
    if cfg["d"] % cfg["heads"]:
        raise ValueError(f"d={cfg['d']} must be a multiple of heads={cfg['heads']}")
    _check_choice("act", cfg["act"], ACTIVATIONS)
    _check_choice("pos_init", cfg["pos_init"], POS_INITS)
    if str(cfg["dtype"]) not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {_got(cfg['dtype'])}")
    if not isinstance(cfg["ln"], (bool, np.bool_)):
        raise WrongType(f"ln must be True or False, got {_got(cfg['ln'])}")
    _check_number("dropout", cfg["dropout"], _REALS, 0, 1, "a probability in [0, 1)", bools=True)
    return cfg


def _check_draw(rng, std):
    """An init's generator and standard deviation (init_params and baseline.init)."""
    _check_rng(rng)
    _check_number("std", std, _REALS, 0, math.inf,
                  "a finite number >= 0 (the init's standard deviation)")


def _check_init(cfg, rng, std):
    """init_params' arguments, and the memory its parameters take."""
    check_config(cfg)
    _check_draw(rng, std)
    n = sum(math.prod(shape) for shape, _ in param_shapes(cfg).values())   # ints: no overflow
    _check_memory(n * (np.dtype(cfg["dtype"]).itemsize + 8),
                  f"a model of T={cfg['T']}, d={cfg['d']}, mlp={cfg['mlp']}",
                  "for its parameters", "use a smaller T, d or mlp")


def _check_dropout(p, rng):
    """dropout_forward's probability p in [0, 1) (0 or False: off) and generator (None: off)."""
    _check_number("dropout p", p, _REALS, 0, 1, "a probability in [0, 1)", bools=True)
    _check_rng(rng, optional=True)


def check_params(p, cfg, runs=None):
    """ValueError unless p has exactly the parameters of cfg, with their shapes and dtype (with a
    leading axis of `runs` for a stack of runs)."""
    want = param_shapes(check_config(cfg))
    if not isinstance(p, dict):
        raise WrongType(f"params must be a dict of arrays from init_params(cfg, rng), got "
                        f"{_got(p)}")
    if set(p) != set(want):
        raise ValueError(f"params do not match cfg (mlp={cfg['mlp']}, ln={cfg['ln']}): missing "
                         f"{sorted(set(want) - set(p))}, unexpected "
                         f"{sorted(set(p) - set(want), key=str)}")
    lead, dt = () if runs is None else (runs,), np.dtype(cfg["dtype"])
    what = (f"a numpy array of shape {{shape}} and dtype {dt}, as cfg (T={cfg['T']}, d={cfg['d']}, "
            f"mlp={cfg['mlp']}) needs")
    for k, (shape, _) in want.items():
        _check_array("param " + k, p[k], (dt,), lead + shape, what)


# ---------------------------------------------------------------------------------------------
# the model's inputs: the bits X and their memory, labels y, weights, dz and kept versions

def activation_bytes(cfg, B, path, R=1):
    """Rough peak bytes of the activations (forward caches plus backward) of one batch."""
    T, d, H = cfg["T"], cfg["d"], cfg["heads"]
    item = np.dtype(cfg["dtype"]).itemsize
    if path == "fast":
        n = 3 * B * T + 12 * (2 * T + 1) * (d + H) + 8 * B * (d + H + max(cfg["mlp"], 1))
    else:
        n = 12 * B * (T + 1) * d + 4 * B * H * (T + 1)
        if path == "full":
            n += 4 * B * H * (T + 1) ** 2
    return R * n * item


def _check_x(X, path="fast", stack=True):
    """X's type, rank and dtype: bits [batch, T], or [runs, batch, T] on path "fast" where `stack`.
    Its values: _check_01."""
    form = "[batch, T]" + (" (or [runs, batch, T] on path 'fast')" if stack else "")
    ok = lambda s: len(s) == 2 or (len(s) == 3 and stack and path == "fast")
    _check_array("X", X, "biuf", ok, f"a numpy array {form} of bits (dtype bool, integer or float)")


def _check_inputs(p, cfg, X, path="fast", bits=True, stack=True):
    """X [B, T] bits for one run, or [R, B, T] for a stack of R runs (path "fast" only; stack=False:
    one run only), with cfg, the parameters and the memory. bits=False: X's values not scanned."""
    check_config(cfg)
    _check_x(X, path, stack)
    B, R = X.shape[-2], X.shape[0] if X.ndim == 3 else 1
    _check_memory(activation_bytes(cfg, B, path, R), f"T={cfg['T']} with a batch of {B} (x {R} "
                  f"runs)", f"of activations on path {path!r}",
                  "use a smaller batch or T" + (", or path='fast'" if path != "fast" else ""))
    check_params(p, cfg, X.shape[0] if X.ndim == 3 else None)
    if X.shape[-1] != cfg["T"]:
        raise ValueError(f"X has T={X.shape[-1]} columns but the model has T={cfg['T']}")
    if B < 1:
        raise ValueError("X must hold at least one example")
    if bits:
        _check_01("X", X, "bits")


def _check_call(p, cfg, X, path, rng, versions):
    """model_forward's arguments: the path, the inputs, dropout's path and the kept versions."""
    _check_choice("path", path, PATHS)
    _check_rng(rng, optional=True)
    _check_inputs(p, cfg, X, path, bits=versions is None)
    if rng is not None and cfg["dropout"] and path != "cls":
        raise ValueError(f"dropout runs on path 'cls' only, got path {path!r}")
    if versions is not None:
        dt = np.dtype(cfg["dtype"])
        _check_array("versions", versions, (dt,), X.shape[:-1] + (2 * X.shape[-1],), f"None or "
                     f"two_versions(X, dtype): a numpy array of shape {{shape}} in the model's "
                     f"dtype {dt}")
        if path != "fast":
            raise ValueError(f"versions are taken on path 'fast' only, got path {path!r}")


def _check_targets(y, weights, shape):
    """The loss's labels y (0 and 1) and per-example weights (None, or finite numbers >= 0), each
    of the logits' `shape`: two reductions over y's size each."""
    _check_array("y", y, "biuf", shape, "a numpy array of shape {shape} (one label per example) "
                 "of labels 0 and 1 (dtype bool, integer or float)")
    _check_01("y", y, "labels")
    if weights is None:
        return
    _check_array("weights", weights, "biuf", shape, "None or a numpy array of shape {shape} (one "
                 "weight per example) of numbers >= 0")
    if weights.size and not (weights.min() >= 0 and weights.max() < np.inf):  # NaN fails both
        bad = weights[~((weights >= 0) & np.isfinite(weights))].flat[0].item()
        raise ValueError(f"weights must be finite and >= 0, got {bad!r}")


def _check_loss_inputs(z, y, weights):
    """logistic_forward's logits z [..., batch >= 1] (floats), labels y and weights of z's shape."""
    _check_array("z", z, "f", lambda s: len(s) >= 1 and s[-1] >= 1,
                 "a numpy array [..., batch >= 1] of float logits")
    _check_targets(y, weights, z.shape)


def _check_dz(dz, cache):
    """model_backward's dz: a number per logit of the forward call that made `cache`, which must be
    one that model_forward returned."""
    if not (isinstance(cache, dict) and cache.get("path") in PATHS and "f" in cache):
        raise WrongType(f"cache must be the cache that model_forward returned, got {_got(cache)}")
    want = cache["f"].shape[1 if cache.get("single") else 0:-1]
    _check_array("dz", dz, "biuf", want, "a numpy array of numbers in the logits' shape {shape}")
