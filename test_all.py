"""test_all.py: the reference's tests (attn, data, optim, fast, train, theory).
Run with the studies' tests: python -m pytest -q

The sections follow the root's files, in this order: attn.py, data.py, optim.py, fast.py,
train.py, theory.py; then the root's hostile-value walk (its WALK table sits with the walker's
machinery in attn.py's section, where the walked entry points are), and the house and the front
page. Each test sits in the section of the file whose behaviour it specifies. Helpers that several
sections use (small run options, run_cli) come first. It imports nothing of studies/: the studies'
tests sit beside their modules (studies/test_*.py, studies/lib/test_*.py) and import the
walker's machinery and a few helpers from here.

Gradient checks (attn.py's section): float64 central differences (theory.numerical_jacobian) of
sum(out * dout) with a random upstream gradient dout, inputs off-centre, LayerNorm gain != 1 and
shift != 0, and parameters moved well away from their initial values.

A test that cannot fail is a defect, so: every pytest.raises names the error it expects (match=);
a gradient check refuses a numerical gradient of ~0 and a backward pass that returns fewer
gradients than it has inputs; a loop over results checks that there were results.
"""
import argparse
import errno
import functools
import glob
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import attn
import data
import fast
import optim
import theory
import train




_NUMBER = r"~?-?(?:\d[\d,]*(?:\.\d+)?(?:e\+\d+)?|inf)"   # ~: widened (intervals.bound_text)


# ===============================================================================================
# shared by the sections: paths, small runs, the command line, the smoke sweep
# ===============================================================================================

HERE = os.path.dirname(os.path.abspath(__file__))


PATHS = ("fast", "cls", "full")   # fast.py's shortcut, attn.py's [CLS] row, attn.py's full layer


def forward(p, cfg, X, path="fast"):
    """The model's logits and cache on one of the three exact ways of computing it."""
    return {"fast": fast.model_forward, "cls": attn.model_forward,
            "full": attn.full_model_forward}[path](p, cfg, X)


def backward(dz, p, cfg, cache):
    """The backward of whichever forward made `cache`."""
    return (fast if isinstance(cache, fast.ModelCache) else attn).model_backward(dz, p, cfg, cache)


def loss_grads(p, cfg, X, y, path="fast", **kw):
    return (fast if path == "fast" else attn).loss_and_grads(p, cfg, X, y, **kw)
SMALL = dict(T=12, m=40, steps=30, seed=2, log_every=0, d=8, heads=2, mlp=4, n_test=200)
TINY = ["--T", "12", "--m", "40", "--d", "8", "--heads", "2", "--mlp", "4", "--n-test", "100",
        "--log-every", "0", "--steps", "5"]


def run_cli(capsys, *argv):
    """(exit code, stdout, stderr) of train.main(argv) (the study commands' own: studies/conftest.py)."""
    capsys.readouterr()
    try:
        code = train.main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err

def run_python(*args, **kw):
    return subprocess.Popen([sys.executable, *args], cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


# ===============================================================================================
# attn.py: the model (the reference ops, numerics, the door checks, the walker, the self-check)
# ===============================================================================================

# ---------------- gradient checks: central differences against every backward pass -------------

RTOL = 1e-6          # the bar: relative error of every backward pass in float64
WORST = {}           # largest relative error seen per check (printed by the last test)


@pytest.fixture(scope="session", autouse=True)
def report_worst_gradient_error():
    """After the session, print the largest relative gradient error (run pytest with -s)."""
    yield
    if WORST:
        name = max(WORST, key=WORST.get)
        print(f"\nlargest relative gradient error: {WORST[name]:.2e} ({name}), {len(WORST)} checks")


rel_error = attn.rel_error   # the project's one relative error


def numeric_grad(f, x):
    """Central differences of the scalar f() with respect to array x (moved in place)."""
    return theory.numerical_jacobian(lambda _: f(), x)


def check(name, analytic, f, x):
    num = numeric_grad(f, x)
    assert np.linalg.norm(num) > 1e-6, f"{name}: numeric gradient is ~0, the check cannot fail"
    err = rel_error(analytic, num)
    WORST[name] = err
    assert err < RTOL, f"{name}: relative error {err:.2e}"


def check_each(prefix, names, grads, f, arrays):
    for name, g, x in zip(names, grads, arrays, strict=True):   # one gradient per input
        check(f"{prefix} {name}", g, f, x)


def offcentre(rng, *shape):
    return 0.7 + 1.3 * rng.standard_normal(shape)


# ---------------- the reference ops, one by one ------------------------------------------------

def test_grad_layernorm():
    rng = np.random.default_rng(1)
    x, g, b = offcentre(rng, 3, 4, 6), offcentre(rng, 6), offcentre(rng, 6)
    dy = rng.standard_normal((3, 4, 6))
    f = lambda: np.sum(attn.layernorm_forward(x, g, b)[0] * dy)
    grads = attn.layernorm_backward(dy, attn.layernorm_forward(x, g, b)[1])
    check_each("layernorm", ("dx", "dg", "db"), grads, f, (x, g, b))
    g3, b3 = offcentre(rng, 3, 6), offcentre(rng, 3, 6)          # a stack of 3 runs: [R, d]
    f = lambda: np.sum(fast.layernorm_forward(x, g3, b3)[0] * dy)
    grads = fast.layernorm_backward(dy, fast.layernorm_forward(x, g3, b3)[1])
    assert grads[1].shape == grads[2].shape == (3, 6)
    check_each("layernorm, stacked", ("dx", "dg", "db"), grads, f, (x, g3, b3))


def test_grad_linear_softmax_gelu_relu_loss():
    rng = np.random.default_rng(2)
    x, W, b = offcentre(rng, 2, 3, 5), offcentre(rng, 5, 4), offcentre(rng, 4)
    dy = rng.standard_normal((2, 3, 4))
    f = lambda: np.sum(attn.linear_forward(x, W, b)[0] * dy)
    grads = attn.linear_backward(dy, attn.linear_forward(x, W, b)[1])
    check_each("linear", ("dx", "dW", "db"), grads, f, (x, W, b))

    s, dA = offcentre(rng, 3, 7), rng.standard_normal((3, 7))
    f = lambda: np.sum(attn.softmax_forward(s)[0] * dA)
    check("softmax", attn.softmax_backward(dA, attn.softmax_forward(s)[1]), f, s)

    for act in ("gelu", "relu"):
        h = offcentre(rng, 4, 5)
        h[np.abs(h) < 1e-3] = 0.5          # keep ReLU off its kink
        fwd, bwd = attn.ACTIVATIONS[act]
        dy = rng.standard_normal(h.shape)
        check(act, bwd(dy, fwd(h)[1]), lambda: np.sum(fwd(h)[0] * dy), h)

    z, y = 3 * rng.standard_normal(9), rng.integers(0, 2, 9).astype(float)
    f = lambda: attn.logistic_forward(z, y)[0] * 1.7
    check("logistic", attn.logistic_backward(1.7, attn.logistic_forward(z, y)[1]), f, z)
    w = rng.random(9)                 # fast.py's per-sample weights: sum(w * loss), same backward
    f = lambda: fast.logistic_forward(z, y, w)[0] * 1.7
    check("logistic, weighted", attn.logistic_backward(1.7, fast.logistic_forward(z, y, w)[1]), f,
          z)
    zs, ys = 3 * rng.standard_normal((2, 9)), rng.integers(0, 2, (2, 9))
    assert np.array_equal(fast.logistic_forward(zs, ys)[0], attn.logistic_forward(zs, ys)[0])


def test_grad_embed_and_mlp():
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, (4, 5))
    E_tok, E_pos, cls = offcentre(rng, 2, 3), offcentre(rng, 5, 3), offcentre(rng, 3)
    dout = rng.standard_normal((4, 6, 3))
    f = lambda: np.sum(attn.embed_forward(X, E_tok, E_pos, cls)[0] * dout)
    check_each("embed", ("E_tok", "E_pos", "cls"), attn.embed_backward(dout, X), f,
               (E_tok, E_pos, cls))

    x = offcentre(rng, 3, 4)
    ws = [offcentre(rng, 4, 6), offcentre(rng, 6), offcentre(rng, 6, 4), offcentre(rng, 4)]
    dy = rng.standard_normal((3, 4))
    f = lambda: np.sum(attn.mlp_forward(x, *ws, act="gelu")[0] * dy)
    grads = attn.mlp_backward(dy, attn.mlp_forward(x, *ws, act="gelu")[1])
    check_each("mlp", ("x", "W_1", "b_1", "W_2", "b_2"), grads, f, [x] + ws)


def _attn_args(rng, d):
    return [0.5 * offcentre(rng, *((d, d) if i % 2 == 0 else (d,))) for i in range(8)]


@pytest.mark.parametrize("which", ["cls", "full"])
def test_grad_attention(which):
    rng = np.random.default_rng(4)
    B, N, d, H = 2, 5, 6, 2
    Xn = offcentre(rng, B, N, d)
    args = _attn_args(rng, d)
    fwd, bwd = {"cls": (attn.attention_cls_forward, attn.attention_cls_backward),
                "full": (attn.self_attention_forward, attn.self_attention_backward)}[which]
    dy = rng.standard_normal((B, d) if which == "cls" else (B, N, d))
    w = dict(zip(attn.ATTN_KEYS, args, strict=True))
    f = lambda: np.sum(fwd(Xn, w, H)[0] * dy)
    dX, gw = bwd(dy, fwd(Xn, w, H)[1])
    assert set(gw) == set(attn.ATTN_KEYS)
    check(f"{which}-attention dX", dX, f, Xn)
    for name, g, v in zip(attn.ATTN_KEYS, [gw[k] for k in attn.ATTN_KEYS], args, strict=True):
        if name == "b_K":   # softmax is shift-invariant: the key bias has exactly zero gradient
            assert np.abs(g).max() < 1e-12
            assert np.abs(numeric_grad(f, v)).max() < 1e-7
            continue
        check(f"{which}-attention {name}", g, f, v)


# ---------------- the whole model: every parameter's gradient ----------------------------------

def moved_params(cfg, seed):
    """Parameters far from init: weights O(0.5), gains != 1, shifts != 0."""
    rng = np.random.default_rng(seed)
    p = attn.init_params(cfg, rng, std=0.4)
    for k in p:
        p[k] += 0.3 * rng.standard_normal(p[k].shape) + (0.2 if k.endswith("_g") else 0.0)
    return p


MODEL_CFGS = {
    "experiment": dict(T=6, d=8, heads=2, mlp=5, dtype="float64"),
    "single head": dict(T=5, d=6, heads=1, mlp=0, ln=False, act="relu", dtype="float64"),
    "relu mlp, ln": dict(T=4, d=4, heads=4, mlp=3, act="relu", dtype="float64"),
}


@pytest.mark.parametrize("name", MODEL_CFGS)
@pytest.mark.parametrize("path", PATHS)
def test_grad_whole_model(name, path):
    cfg = attn.default_config(**MODEL_CFGS[name])
    p = moved_params(cfg, 5)
    rng = np.random.default_rng(6)
    X = rng.integers(0, 2, (3, cfg["T"]))
    dz = rng.standard_normal(3)
    z, cache = forward(p, cfg, X, path)
    g = backward(dz, p, cfg, cache)
    assert set(g) == set(p)
    f = lambda: forward(p, cfg, X, path)[0] @ dz
    for k in p:
        if k == "b_K":
            assert np.abs(g[k]).max() < 1e-12
            continue
        check(f"model[{name}, {path}] {k}", g[k], f, p[k])


def test_grad_dropout_op_and_whole_model_with_dropout():
    """Dropout (training, path "cls"): the op and the whole model, embeddings included, with the
    same masks in every evaluation (a generator re-seeded each time)."""
    rng = np.random.default_rng(12)
    x, dy = offcentre(rng, 4, 5), rng.standard_normal((4, 5))
    y, mask = attn.dropout_forward(x, 0.3, np.random.default_rng(1))
    assert 0 < (mask == 0).sum() < mask.size and np.allclose(mask[mask > 0], 1 / 0.7)
    check("dropout", attn.dropout_backward(dy, mask),
          lambda: attn.dropout_forward(x, 0.3, np.random.default_rng(1))[0].ravel() @ dy.ravel(), x)
    cfg = attn.default_config(T=6, d=8, heads=2, mlp=5, dtype="float64", dropout=0.25)
    p = moved_params(cfg, 13)
    X = rng.integers(0, 2, (4, 6))
    dz = rng.standard_normal(4)
    fwd = lambda: attn.model_forward(p, cfg, X, rng=np.random.default_rng(2))
    z, cache = fwd()
    z_off = forward(p, cfg, X, "cls")[0]           # no rng: dropout off
    assert not np.allclose(z, z_off)
    assert np.allclose(z_off, forward(p, cfg, X, "fast")[0])
    g = backward(dz, p, cfg, cache)
    for k in p:
        if k == "b_K":
            continue
        check(f"model[dropout, cls] {k}", g[k], lambda: fwd()[0] @ dz, p[k])


FALLBACK_CFG = dict(T=9, d=8, heads=2, mlp=3)   # LayerNorm and MLP on, as in the experiment


# ---------------- numerics and dtypes ----------------------------------------------------------

def test_stability_huge_logits_constant_rows_T1():
    z = np.array([1e4, -1e4, 0.0, 800.0])
    y = np.array([1.0, 0.0, 1.0, 0.0])
    loss, c = attn.logistic_forward(z, y)
    assert np.isfinite(loss) and abs(loss - (np.log(2) + 800) / 4) < 1e-9
    assert np.all(np.isfinite(attn.logistic_backward(1.0, c)))
    A, _ = attn.softmax_forward(np.array([[1e4, 0.0, -1e4]]))
    assert np.allclose(A, [[1, 0, 0]])
    x = np.full((2, 8), 3.0)                          # a constant row: variance 0
    g, b = np.ones(8), np.full(8, 0.5)
    out, c = attn.layernorm_forward(x, g, b)
    assert np.allclose(out, 0.5)
    # with gain 1 and dy = ones the true dx is 0 (sum(out) does not depend on x), and finiteness
    # alone passes a wrong backward: a random dy, checked against central differences
    # (dx is of order 1 / sqrt(LN_EPS) here)
    dy = np.random.default_rng(3).standard_normal((2, 8))
    dx = attn.layernorm_backward(dy, c)[0]
    assert np.all(np.isfinite(dx))
    check("layernorm, constant rows", dx,
          lambda: np.sum(attn.layernorm_forward(x, g, b)[0] * dy), x)
    cfg = attn.default_config(T=1, d=8, heads=2, mlp=4, dtype="float64")
    p = attn.init_params(cfg, np.random.default_rng(0))
    X = np.array([[0], [1]])
    zs = [forward(p, cfg, X, path)[0] for path in PATHS]
    assert np.all(np.isfinite(zs[0])) and np.allclose(zs[0], zs[1]) and np.allclose(zs[0], zs[2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_preserved(dtype):
    cfg = attn.default_config(T=12, d=8, heads=2, mlp=4, dtype=dtype)
    p = attn.init_params(cfg, np.random.default_rng(0))
    assert all(v.dtype == np.dtype(dtype) for v in p.values())
    X = np.random.default_rng(1).integers(0, 2, (5, 12)).astype(np.uint8)
    y = np.random.default_rng(2).integers(0, 2, 5)
    for path in PATHS:
        loss, g, z = loss_grads(p, cfg, X, y, path)
        assert z.dtype == np.dtype(dtype) and np.asarray(loss).dtype == np.dtype(dtype)
        assert all(g[k].dtype == np.dtype(dtype) and g[k].shape == p[k].shape for k in p), path
    state = optim.adam_init(p)
    optim.adam_step(p, g, state, 1e-3, 1e-4)
    assert all(v.dtype == np.dtype(dtype) for v in p.values())


# ---------------- the checks: at the model's doors, once, one line naming the value -----------

def test_config_errors():
    for bad, msg in [(dict(d=10, heads=3), r"d must be a multiple of heads=3 below 2\*\*63, got 10"),
                     (dict(T=0), r"T must be an integer from 1 to 2\*\*63-1, got 0"),
                     (dict(act="tanh"), "act must be 'gelu' or 'relu', got 'tanh'"),
                     (dict(dtype="float16"), "dtype must be 'float32' or 'float64'"),
                     (dict(heads=2.0), r"heads must be an integer from 1 to .*, got 2\.0"),
                     (dict(mlp=False), "mlp must be an integer from 0 to .*, got False"),
                     (dict(ln="True"), "ln must be True or False, got 'True'"),
                     (dict(T=10**400), r"T must be an integer from 1 to 2\*\*63-1, got 1000"),
                     (dict(d=2**64, heads=1), r"d must be a multiple of heads=1 below 2\*\*63"),
                     (dict(depth=2), r"cfg must be a dict of default_config\(\.\.\.\)'s keys, "
                                     r"missing or unknown: \['depth'\]")]:
        refused_in_one_line(msg, lambda: attn.default_config(**bad))
    cfg = attn.default_config(T=5, d=4, heads=1)
    p = attn.init_params(cfg, np.random.default_rng(0))
    for path in PATHS:
        with pytest.raises(ValueError, match=r"X must be a numpy array \[batch >= 1, T=5\]"):
            forward(p, cfg, np.zeros((2, 6), np.uint8), path)


def refused_in_one_line(msg, *calls, kind=ValueError):
    """Each call raises `kind` matching msg, in one line (issue 23: never numpy's traceback)."""
    for f in calls:
        with pytest.raises(kind, match=msg) as e:
            f()
        assert "\n" not in str(e.value), str(e.value)


def api_case():
    cfg = attn.default_config(T=4, d=4, heads=1, mlp=3)
    p = attn.init_params(cfg, np.random.default_rng(0))
    X = np.array([[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], np.uint8)
    return cfg, p, X, np.array([0, 1, 1])


def test_hand_made_config_names_missing_and_unknown_keys():
    """Issue 23: a cfg dict built by hand without a key (pos_init and dropout came later) or with a
    key the model does not know is refused by every entry point, naming the keys; values of the
    wrong type are named, never hashed or compared as arrays."""
    cfg, p, X, y = api_case()
    for keys, bad in [(["pos_init"], {k: v for k, v in cfg.items() if k != "pos_init"}),
                      (["dropout", "pos_init"], {k: v for k, v in cfg.items()
                                                 if k not in ("dropout", "pos_init")}),
                      (["depth"], dict(cfg, depth=2)), ([3, "T2"], {**cfg, 3: 1, "T2": 3})]:
        refused_in_one_line(rf"cfg must be a dict of default_config\(\.\.\.\)'s keys, missing or "
                             rf"unknown: {re.escape(str(keys))}$",
                             lambda: attn.check_config(bad),
                             lambda: attn.init_params(bad, np.random.default_rng(0)),
                             lambda: attn.model_forward(p, bad, X),
                             lambda: forward(p, bad, X, "full"),
                             lambda: attn.loss_and_grads(p, bad, X, y),
                             lambda: fast.loss_and_grads(p, bad, X, y),
                             lambda: attn.cls_attention(p, bad, X),
                             lambda: fast.cls_attention_mean(p, bad, X))
    for bad in (None, [("T", 4)], "cfg"):
        refused_in_one_line(r"cfg must be a dict of default_config\(\.\.\.\)'s keys, got",
                             lambda: attn.check_config(bad),
                             lambda: attn.init_params(bad, np.random.default_rng(0)),
                             lambda: attn.model_forward(p, bad, X))
    for key, value, msg in [("act", ["gelu"], r"act must be 'gelu' or 'relu', got \['gelu'\]"),
                            ("pos_init", np.array(["zero", "normal"]),
                             "pos_init must be 'normal' or 'zero', got an array of shape"),
                            ("pos_init", None, "pos_init must be 'normal' or 'zero', got None"),
                            ("mlp", 3.0, r"mlp must be an integer from 0 to .*, got 3\.0"),
                            ("dropout", float("nan"), "dropout must be a probability")]:
        refused_in_one_line(msg, lambda: attn.check_config(dict(cfg, **{key: value})),
                             lambda: attn.model_forward(p, dict(cfg, **{key: value}), X))
    assert attn.check_config(dict(cfg)) == cfg            # a complete hand-made cfg is fine


def test_loss_refuses_bad_weights_labels_and_logits():
    """Issue 23: NaN weights gave a NaN loss, negative ones a wrong loss, a weight vector of the
    wrong shape numpy's broadcast error; labels other than 0/1 went into the loss silently. The
    loss's doors (attn.loss_and_grads, fast.loss_and_grads) refuse them by name, on one run and
    on a stack; the losses themselves (attn.logistic_forward, fast.logistic_forward) are
    textbook ops."""
    cfg, p, X, y = api_case()
    for bad in (np.array([0.3, np.nan, 0.3]), np.array([0.5, -0.5, 0.5]),
                np.array([np.inf, 0.0, 0.0]), np.array([1, -1, 1]), np.ones(2), np.ones((1, 3)),
                np.ones(()), [1 / 3] * 3, 0.5, np.array(["1", "1", "1"])):
        refused_in_one_line(r"weights must be None or finite numbers >= 0 of shape \(3,\), got",
                             lambda: fast.loss_and_grads(p, cfg, X, y, weights=bad))
    P = {k: np.stack([v, v]) for k, v in p.items()}
    w = np.full((2, 3), 1 / 3)
    w[1, 2] = np.nan
    refused_in_one_line(r"weights must be None or finite numbers >= 0 of shape \(2, 3\)",
                         lambda: fast.loss_and_grads(P, cfg, np.stack([X, X]), np.stack([y, y]),
                                                     weights=w))
    for bad in (np.array([0, 2, 1]), np.array([0.5, 1, 0]), np.array([np.nan, 0, 1]),
                np.array([-1, 0, 1]), np.array([0, 1]), np.array([[0, 1, 1]]), np.array(1),
                [0, 1, 1], (0, 1, 1), np.array(["0", "1", "1"]), None):
        refused_in_one_line(r"y must be a numpy array of shape \(3,\) \(labels\) of 0s and 1s",
                             lambda: attn.loss_and_grads(p, cfg, X, bad),
                             lambda: fast.loss_and_grads(p, cfg, X, bad))
    loss, *_ = fast.loss_and_grads(p, cfg, X, y.astype(bool), weights=np.array([1, 0, 2]))
    assert np.isfinite(loss)                           # bool labels and integer weights still run


def test_backward_and_kept_versions_name_mismatched_shapes():
    """Issue 23: a dz of the wrong shape reached numpy's matmul ('core dimension') or broadcast
    silently; kept versions given as a list, or in the other dtype (a silent upcast), were not
    named either."""
    cfg, p, X, y = api_case()
    for path in PATHS:
        z, cache = forward(p, cfg, X, path)
        mod = fast if path == "fast" else attn
        for bad in (np.ones(2), np.ones((3, 1)), np.ones(()), [1.0, 1.0, 1.0]):
            refused_in_one_line(r"model_backward needs the cache (fast\.)?model_forward returned "
                                 r"and dz, numbers of its logits' shape, got cache .*, dz",
                                 lambda: backward(bad, p, cfg, cache))
        refused_in_one_line(r"model_backward needs the cache (fast\.)?model_forward returned",
                             lambda: mod.model_backward(np.ones(3), p, cfg, {}),
                             lambda: mod.model_backward(np.ones(3), p, cfg, z))
        refused_in_one_line(r"param W_Q must be an array of shape \(4, 4\)",
                             lambda: mod.model_backward(z, dict(p, W_Q=p["W_Q"][:2]), cfg, cache))
    Xf = X.astype(np.float32)
    for bad in (fast.two_versions(Xf, np.float32).tolist(), 1.0):
        refused_in_one_line(r"versions must be None or two_versions\(X, dtype\)",
                             lambda: fast.loss_and_grads(p, cfg, Xf, y, versions=bad))
    refused_in_one_line(r"versions must be .* dtype float32, got .* dtype float64",
                         lambda: fast.loss_and_grads(p, cfg, Xf, y,
                                                     versions=fast.two_versions(Xf, np.float64)))
    for bad in (np.int32, "float16", None, np.dtype("float16")):
        refused_in_one_line("dtype must be 'float32' or 'float64'",
                             lambda: fast.two_versions(Xf, bad))


# ---------------- the walker: every public function refuses hostile values by name (issue 39) ---
# One valid call per public function (and public method) of each module of ROOT_WALKED, and for each
# argument the hostile values of its kind (_hostile): each substitute must raise a one-line
# ValueError or TypeError naming the argument, unless the entry says that value is legal and why.
# An argument's hostile values follow its valid value's type: NaN, inf, -1, 0, booleans, 1j, 10**12
# and strings for a number; None, a list, complex and text dtypes, a 0-d and a wrong shape for an
# array; None, a list of items and a missing key for a dict. The values inside float arrays are
# not walked (an op computes on any floats: NaN in, NaN out, as in numpy); arrays whose values are
# constrained (bits, labels, weights) get theirs as extra hostile values. To cover a module, add
# it to ROOT_WALKED and one Walk per public function to WALK, keyed "module.function" (the
# studies walk their modules with this machinery, each table beside its module's tests).



class Walk:
    """A valid call and what its walk allows. args: a function of walk_fixtures() returning
    {argument: valid value} (built afresh for each call); legal: {argument: {label: reason}}
    (the label "*": every value, e.g. describe's); extra: {argument: {label: value}} walked too;
    names: {argument: regex} where the message names it otherwise (params, cache); run=False
    where the valid call is too slow to make (its hostile calls must be refused before work)."""

    def __init__(self, args, legal=None, extra=None, names=None, run=True):
        self.args, self.legal, self.extra = args, legal or {}, extra or {}
        self.names, self.run = names or {}, run


LITERAL = "a literal of the calling code (a name, a message, a type), never a user's value"
NO_ALLOC = "a size is computed, nothing is allocated"
NO_DROPOUT = "None: no dropout (evaluation)"
NO_WEIGHTS = "None: the plain mean"
WX, WY = np.array([[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], np.uint8), np.array([0, 1, 1])
KEYS_MLP, RNGS = ("W_1", "b_1", "W_2", "b_2"), {"5": 5, "RandomState": np.random.RandomState(0)}
P_NAMES = dict(p=r"params?", P=r"params?", c="cache")   # the messages' words for p and c


def any_literal(*names):  # legal for every value: the arguments a check helper's caller writes
    return {n: {"*": LITERAL} for n in names}


def bit_damages(X):  # extra hostile values of a bits array
    return {"2": X * 2, "-1": -X.astype(np.int64), "0.5": X * 0.5}


WALK = {
    # attn.py: the configuration and parameters
    "attn.default_config": Walk(lambda f: dict(T=4, d=4, heads=2, mlp=3),
                                legal=dict(T={"10**12": NO_ALLOC}, d={"10**12": NO_ALLOC},
                                           mlp={"0": "no MLP", "10**12": NO_ALLOC})),
    "attn.param_shapes": Walk(lambda f: dict(cfg=f["cfg"])),
    "attn.init_params": Walk(lambda f: dict(cfg=f["cfg"], rng=f["rng"], std=0.5),
                             legal=dict(std={"0": "all weights 0 is an init",
                                             "10**12": "an std whose draws stay finite"}),
                             extra=dict(std={"float32 inf": np.float32("inf"),
                                             "1e308": 1e308})),
    # attn.py: the model's doors (head_forward and head_backward are its steps: WALK_EXEMPT)
    "attn.model_forward": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"], rng=f["rng"]),
                               extra=dict(X=bit_damages(WX)), names=P_NAMES,
                               legal=dict(rng={"None": NO_DROPOUT})),
    "attn.full_model_forward": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"]),
                                    extra=dict(X=bit_damages(WX)), names=P_NAMES),
    "attn.model_backward": Walk(lambda f: dict(dz=f["z"], p=f["p"], cfg=f["cfg"],
                                               c=attn.model_forward(f["p"], f["cfg"], f["X"])[1]),
                                names=P_NAMES),
    "attn.cls_attention": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"]),
                               extra=dict(X=bit_damages(WX)), names=P_NAMES),
    "attn.loss_and_grads": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"], y=f["y"],
                                               rng=f["rng"]),
                                extra=dict(X=bit_damages(WX), y=bit_damages(WY)),
                                names=P_NAMES, legal=dict(rng={"None": NO_DROPOUT})),
    # attn.py: the door checks (their arguments other than the value checked are the caller's
    # literals)
    "attn.describe": Walk(lambda f: dict(v=f["X"]), legal=dict(v={"*": "describes any value"})),
    "attn.check_binary": Walk(lambda f: dict(name="v", v=f["X"], ok=lambda s: len(s) == 2,
                                             form="[batch, T]", values=True),
                              legal=any_literal("name", "ok", "form", "values"),
                              extra=dict(v=bit_damages(WX))),
    "attn.check_config": Walk(lambda f: dict(cfg=f["cfg"])),
    "attn.check_params": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"]), names=P_NAMES),
    "attn.check_call": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"], rng=None),
                            extra=dict(X=bit_damages(WX), rng=RNGS), names=P_NAMES),
    # attn.py: the self-check
    "attn.rel_error": Walk(lambda f: dict(a=f["z"], b=f["z"] + 1),
                           legal=dict(a={"list": "array-likes are read by np.asarray"},
                                      b={"list": "array-likes are read by np.asarray"})),
}
WALK.update({
    # fast.py: the model on a stack (its tuned ops are textbook ops: WALK_EXEMPT)
    "fast.two_versions": Walk(lambda f: dict(X=f["XX"], dtype="float64"), extra=dict(X=bit_damages(WX))),
    "fast.model_forward": Walk(lambda f: dict(p=f["P"], cfg=f["cfg"], X=f["XX"],
                                              versions=fast.two_versions(f["XX"], "float64")),
                               extra=dict(X=bit_damages(np.stack([WX, WX]))), names=P_NAMES,
                               legal=dict(versions={"None": "None: built from X"}, X=dict.fromkeys(
                                   ("2", "-1", "0.5"), "kept versions: the bits were read when "
                                   "two_versions built them, only X's shape is checked"))),
    "fast.model_backward": Walk(lambda f: dict(dz=np.ones((2, 3)), p=f["P"], cfg=f["cfg"],
                                               c=fast.model_forward(f["P"], f["cfg"], f["XX"])[1]),
                                names=P_NAMES),
    "fast.loss_and_grads": Walk(lambda f: dict(p=f["P"], cfg=f["cfg"], X=f["XX"], y=f["yy"],
                                               weights=None, versions=None),
                                extra=dict(X=bit_damages(np.stack([WX, WX])),
                                           y=bit_damages(np.stack([WY, WY])),
                                           weights={"nan": np.full((2, 3), np.nan), "list":
                                                    [[1.0] * 3] * 2, "1.0": 1.0,
                                                    "-1": -np.ones((2, 3))},
                                           versions={"list": [[1.0] * 8] * 3}),
                                names=P_NAMES),
    "fast.cls_attention_mean": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"], X=f["X"]),
                                    extra=dict(X=bit_damages(WX)), names=P_NAMES),
    # data.py: its doors (make_task is SparseTask's other name)
    "data.make_task": Walk(lambda f: dict(name="and", T=4, s=2, rng=f["rng"]),
                           names=dict(name="task"), legal=dict(T={"10**12": "the support is "
                                                                  "drawn without a T-array"}),
                           extra=dict(rng={"an array (a repr of lines)": np.arange(100)})),
    "data.SparseTask": Walk(lambda f: dict(name="junta", T=4, s=3, rng=f["rng"]),
                            names=dict(name="task"), legal=dict(T={"10**12": "a task keeps S "
                                                                   "only"})),
    "data.bit_probability": Walk(lambda f: dict(name="or", s=3), names=dict(name="task"),
                                 legal=dict(s={"10**12": "any s of the task: a number"})),
    "data.SparseTask.label": Walk(lambda f: dict(self=f["task"], X=f["X"]), legal=dict(
        X={"list": "array-likes (np.asarray)"}), extra=dict(X=bit_damages(WX))),
    "data.SparseTask.sample": Walk(lambda f: dict(self=f["task"], m=3, rng=f["rng"]),
                                  legal=dict(m={"10**12": "numpy's MemoryError: the reference "
                                                "checks no memory (the studies do)"}),
                                  extra=dict(m={"10**400": 10**400})),
})
ANY_LR = "any finite value >= 0 is one torch takes"


def _state(p, **kw):
    return optim.adam_init(p, **kw)
ARRAY_LIKE = "array-likes are read by np.asarray"
WALK.update({
    # optim.py
    "optim.clip_gradients": Walk(lambda f: dict(grads={k: np.ones_like(v) for k, v in
                                                    f["p"].items()}, max_norm=1.0, runs=None),
                                 legal=dict(max_norm={"0": "zeroes every gradient (torch's too)",
                                                      "10**12": "a cap that never acts"},
                                            grads={"missing key": "any dict of gradients"},
                                            runs={"*": "the caller's stack size (train.py)"})),
    "optim.adam_init": Walk(lambda f: dict(params=f["p"], decay="all", frozen=("ln1_g",)),
                            legal=dict(params={"missing key": "any dict of parameters"},
                                       frozen={"list": "a list of names", "short": "no name"}),
                            extra=dict(frozen={"'ln1_g'": "ln1_g", "['bogus']": ["bogus"],
                                               "[5]": [5], "5": 5})),
    "optim.adam_step": Walk(lambda f: dict(params=f["p"], grads={k: np.ones_like(v) for k, v in
                                                                  f["p"].items()},
                                           state=_state(f["p"]), lr=1e-3, wd=1e-4, b1=0.9,
                                           b2=0.999, eps=1e-8, decoupled=False),
                            legal=dict(lr={"0": ANY_LR, "10**12": ANY_LR},
                                       wd={"0": ANY_LR, "10**12": ANY_LR},
                                       b1={"0": "0 <= b1 < 1"}, b2={"0": "0 <= b2 < 1"},
                                       eps={"0": ANY_LR, "10**12": ANY_LR},
                                       decoupled={"*": "a flag, read as Python reads any if"}),
                            extra=dict(state={"other params": {"t": 0}})),
})









WALK.update({
})


# attn.py's ops are the textbook reference (issue 40): their bodies are the arithmetic alone, so a
# wrong argument gets numpy's own error; the model's entry points (walked) check the caller's.
OP_EXEMPT = "a textbook op of the reference: numpy's own errors; the model's entry points check " \
            "the caller's arguments"


# the reference's other modules (issue 45): train, checkpoint, run_options, arithmetic
ROWS = "any array's rows are drawn: the sampling reads no value"
ANY_DICT = "a missing option takes its default"






WALK.update({       # train.py: its doors check (the options, the runs, the command line)
    "train.train_run": Walk(lambda f: dict(opts=dict(SMALL, steps=2), log=None, hooks=None),
                            legal=dict(opts={"missing key": ANY_DICT}),
                            extra=dict(hooks={"5": 5, "'x'": "x"}, log={"5": 5, "'x'": "x"})),
    "train.train_stack": Walk(lambda f: dict(runs=[dict(SMALL, steps=2)], hooks=None),
                              extra=dict(hooks={"5": 5, "Hooks class": train.Hooks})),
    "train.check_options": Walk(lambda f: dict(opts=dict(SMALL), name="opts"),
                                legal=dict(opts={"missing key": ANY_DICT}, name={"*": LITERAL})),
    "train.main": Walk(lambda f: dict(argv=["--help"]), run=False,
                       legal=dict(argv={"None": "the process's own arguments"})),
})
LOOP = "the loop's inside: train_run, train_stack and check_options check at the door"
TRAIN_INSIDE = {k: LOOP for k in (
    "train.seeds_for", "train.draw_run", "train.model_config", "train.build_model",
    "train.train_loop", "train.draw_batch", "train.measure", "train.log_progress",
    "train.set_up_run", "train.finish_run", "train.set_up_stack", "train.stack_results",
    "train.chunked", "train.accuracy", "train.attention_on_support", "train.summarise",
    "train.best_head", "train.over_the_run", "train.parser", "train.print_summary", "train.blas",
    "train.Hooks", "train.Hooks.draw", "train.Hooks.build", "train.Hooks.adam", "train.Hooks.step",
    "train.Hooks.after_step", "train.LossHistory", "train.LossHistory.put", "train.Progress",
    "train.Progress.printed", "train.Transformer", "train.Transformer.keep",
    "train.Transformer.loss_and_grads", "train.Transformer.logits", "train.OneLineParser",
    "train.OneLineParser.error", "train.OneLineParser.print_help")}
WALK.update({
})


# theory.py: the paper's theory (issue 45: every module walked)
def _theory_head():  # -> params, cfg, task of a hand-built 3-sparse AND head at T = 10
    task = data.make_task("and", 10, 3, np.random.default_rng(0))
    p, cfg, _ = theory.build_sparse_head(task, np.random.default_rng(1))
    return p, cfg, task


FIXED = "a literal of the report's code"
WALK_CFG = attn.default_config(T=4, d=4, heads=2, mlp=3, dtype="float64")   # walk_fixtures'
_NM = dict(qk_fro=[1.0, 2.0], v_21=[1.0, 1.0], v_spec=[1.0, 1.0], o_spec=[1.0, 1.0], B_X=2.0,
           L_after=1.5)
NM_DAMAGES = {"nan norms (nan weights)": dict(_NM, qk_fro=[np.nan, 1.0]),       # were nan
              "nan B_X": dict(_NM, B_X=np.nan), "negative": dict(_NM, v_21=[-1.0, 1.0]),
              "lists of two lengths": dict(_NM, o_spec=[1.0]),                   # were zipped
              "a number for a list": dict(_NM, v_spec=1.0)}
POSITIVE = {"10**12": "a large positive number"}
# theory.py's and data.py's internals (what their doors and the report call) take what numpy
# takes: exempt, and the exemption fails if one of them checks its arguments after all
THEORY_INTERNAL = "an internal of theory.py: the report and the doors call it; numpy's own errors"
INTERNALS_EXEMPT = {f"theory.{n}": THEORY_INTERNAL for n in (
    "softmax_l1_linf_ratio", "balanced_direction", "softmax_lipschitz_search", "spectral_norm",
    "norm_21", "readout_and_mlp_factors", "positional_codes", "relu_interpolant", "lse",
    "lse_grad", "lse_hessian", "head_as_lse_gradient", "tied_residual_step", "layernorm_plain",
    "layernorm_jacobian_norm", "infonce_loss", "infonce_grad", "pairwise_ratios", "demo_untied",
    "demo_energy", "demo_post_ln_collapse", "say", "heading", "construction_cache")}
WALK.update({
    # the theorem checks (and require) run on the report's own values: every value walks through
    **{f"theory.{name}": Walk(lambda f, kw=kw: dict(rng=f["rng"], **kw), legal={
        k: {"*": THEORY_INTERNAL} for k in ("rng", *kw)}) for name, kw in (
        ("check_lse_gradient", dict(n=3, d=2, beta=1.7)),
        ("check_lse_hessian", dict(n=3, d=2, beta=1.7)),
        ("check_tied_expansion", dict(trials=2, n=3, d=2)),
        ("check_layernorm", dict(trials=2, d=4)), ("check_infonce", dict(n=3, d=2, beta=0.8)))},
    "theory.require": Walk(lambda f: dict(ok=True, what="x"), legal=dict(
        ok={"*": "any truth value"}, what={"*": "the words of the report's check"})),
    # the doors a user calls
    "theory.numerical_jacobian": Walk(lambda f: dict(f=lambda x: (x ** 2).sum(), x=np.ones(3),
                                                     h=1e-6),
                                      legal=dict(h={"10**12": "a huge step is a (useless) step"},
                                                 x={"0-d": "a number in an array",
                                                    "wrong shape": "any shape"})),
    "theory.fit_line": Walk(lambda f: dict(x=np.array([1.0, 2, 3]), y=np.array([2.0, 4, 7])),
                            legal=dict(x={"list": ARRAY_LIKE}, y={"list": ARRAY_LIKE})),
    "theory.norm_measures": Walk(lambda f: dict(p=f["p"], cfg=f["cfg"]), names=P_NAMES,
                                 extra=dict(p={"nan weights (a diverged run's)": {
                                     k: np.full(shape, np.nan) for k, shape in attn.param_shapes(
                                         WALK_CFG).items()}})),
    "theory.covering_constant": Walk(lambda f: dict(nm=theory.norm_measures(f["p"], f["cfg"])),
                                     extra=dict(nm=NM_DAMAGES)),
    "theory.covering_parts": Walk(lambda f: dict(nm=theory.norm_measures(f["p"], f["cfg"])),
                                  extra=dict(nm=NM_DAMAGES)),
    "theory.covering_from_parts": Walk(lambda f: dict(B_X=2.0, L_after=1.5, heads_scores=0.3,
                                                      heads_values=4.0, heads_readout=1.9),
                                       legal={k: dict(POSITIVE, **{"0": "a sum of none (C = 0)"})
                                              for k in ("B_X", "L_after", "heads_scores",
                                                        "heads_values", "heads_readout")}),
    "theory.log_covering_bound": Walk(lambda f: dict(C=1e5, d=64, m=100, T=100, eps=0.1),
                                      legal=dict(C=POSITIVE, d=POSITIVE, m=POSITIVE, T=POSITIVE,
                                                 eps=POSITIVE)),
    "theory.generalization_gap": Walk(lambda f: dict(C=1e5, d=64, m=100, T=100),
                                      legal=dict(C=POSITIVE, d=POSITIVE, m=POSITIVE,
                                                 T=POSITIVE)),
    "theory.samples_for_gap": Walk(lambda f: dict(C=1e5, d=64, T=100, gap=0.1),
                                   legal=dict(C=POSITIVE, d=POSITIVE, T=POSITIVE, gap=POSITIVE)),
    "theory.linear_class_samples": Walk(lambda f: dict(T=100, gap=0.1),
                                        legal=dict(T=POSITIVE, gap=POSITIVE)),
    "theory.construction_width": Walk(lambda f: dict(T=100, s=3, code_factor=16.0),
                                      legal=dict(T=dict(POSITIVE, **{"2.5": "a number of T"})),
                                      extra=dict(s={"T + 1": 101})),
    "theory.paper_score_gap": Walk(lambda f: dict(T=100, s=3, eps=0.1),
                                   legal=dict(T=POSITIVE, eps=POSITIVE)),
    "theory.build_sparse_head": Walk(lambda f: dict(task=_theory_head()[2], rng=f["rng"],
                                                    code_factor=16.0)),
    "theory.check_construction": Walk(lambda f: dict(zip(("p", "cfg", "task"), _theory_head()),
                                                     rng=f["rng"], n_fill=1, path="fast"),
                                      names=P_NAMES, legal=dict(n_fill={"0": "no random fill"})),
    "theory.main": Walk(lambda f: dict(argv=["--help"]), run=False),
})




WALK.update({
})


def walk_fixtures():
    """The small model, data and caches the valid calls use (float64, fresh for each walk)."""
    rng = np.random.default_rng(0)
    cfg = dict(WALK_CFG)
    p = attn.init_params(cfg, rng, std=0.5)
    X, y, xs = WX.copy(), WY.copy(), rng.standard_normal((3, 5, 4))
    P, XX, yy = {k: np.stack([v, v]) for k, v in p.items()}, np.stack([X, X]), np.stack([y, y])
    task = data.make_task("and", 4, 2, rng)
    return dict(rng=rng, cfg=cfg, p=p, X=X, y=y, xs=xs, P=P, XX=XX, yy=yy, task=task,
                R=rng.standard_normal((2, 5, 4)), g=rng.standard_normal(4) + 1,
                z=np.array([0.5, -1.0, 2.0]), W=rng.standard_normal((4, 3)))
WALK_EXEMPT = {f"attn.{op}_{way}": OP_EXEMPT for way in ("forward", "backward") for op in (
    "embed", "layernorm", "linear", "softmax", "dropout", "attention_cls", "self_attention",
    "gelu", "relu", "mlp", "logistic", "head")}
WALK_EXEMPT.update({f"fast.{op}_{way}": OP_EXEMPT for way in ("forward", "backward") for op in (
    "layernorm", "linear", "mlp")})
WALK_EXEMPT.update({
    "fast.logistic_forward": OP_EXEMPT, "fast.activation_bytes": "a formula of sizes: numpy's "
    "own errors (train.py checks the options it reads)", "optim.one_buffer": "a copy into one "
    "buffer: numpy's own errors; adam_init checks what it is given",
    **dict.fromkeys(("attn.numerical_gradient", "attn.check_model", "attn.gradient_checks",
                     "attn.definition_checks", "attn.self_check"), "the self-check's own steps, "
                    "called with its literals"),
    "attn.main": "the command line: sys.argv's strings, each unknown one named in one line",
    "attn.stdout_lost": "the commands' own last step, given the OSError they caught"})
HUGE_WALKED = ("attn", "data", "fast", "optim", "train", "theory")   # the root's: all

WALK_EXEMPT.update(INTERNALS_EXEMPT)                       # theory's and data's internals


def public_functions(module):
    """{"module.name": the function, class or method} of every public one defined in module (not
    imported; named tuples and exceptions are data, not calls)."""
    out, short = {}, module.__name__.rsplit(".", 1)[-1]      # studies.stats: "stats.name"
    for name, v in vars(module).items():
        if name.startswith("_") or getattr(v, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(v):
            out[f"{short}.{name}"] = v
        elif inspect.isclass(v) and not issubclass(v, (tuple, BaseException)):
            out[f"{short}.{name}"] = v
            for m, f in vars(v).items():
                if not m.startswith("_") and inspect.isfunction(f):
                    out[f"{short}.{name}.{m}"] = f
    return out


def _hostile(v, huge=False):
    """{label: substitute} of issue 39's hostile values for an argument whose valid value is v;
    huge: a number also gets 10**400, an integer no float holds."""
    nan, inf = float("nan"), float("inf")
    if v is None:                                   # an optional argument: its extras only
        return {}
    if isinstance(v, (bool, np.bool_)):
        return {"None": None, "2": 2, "'yes'": "yes", "1j": 1j}
    if isinstance(v, (int, np.integer, float, np.floating)):
        return {"None": None, "nan": nan, "inf": inf, "-inf": -inf, "-1": -1, "0": 0,
                "True": True, "False": False, "1j": 1j, "10**12": 10**12, "'1'": "1",
                **({"2.5": 2.5} if isinstance(v, (int, np.integer)) else {}),
                **({"10**400": 10**400} if huge else {})}
    if isinstance(v, str):
        return {"None": None, "'bogus'": "bogus", "1": 1, "[v]": [v]}
    if isinstance(v, np.ndarray):
        return {"None": None, "list": v.tolist(), "complex": v.astype(complex),
                "text": v.astype(str), "0-d": np.array(v.flat[0]), "wrong shape":
                np.stack([v, v], -1)}
    if isinstance(v, dict):
        return {"None": None, "items": list(v.items()),
                "missing key": {k: v[k] for k in list(v)[1:]}}
    if isinstance(v, np.random.Generator):
        return {"None": None, "5": 5, "RandomState": np.random.RandomState(0)}
    if isinstance(v, data.SparseTask) or type(v).__module__.startswith("studies."):  # a task, a budget
        return {"None": None, "5": 5, "'and'": "and"}
    if inspect.isgenerator(v):                      # a search (stats.bisect_search)
        return {"None": None, "5": 5, "list": [8]}
    if isinstance(v, tuple):                        # a cache, or (p, rng)
        return {"None": None, "list": list(v), "short": tuple(v)[:-1]}
    if isinstance(v, list):
        return {"None": None, "'--x'": "--x", "[5]": [5]}
    if isinstance(v, argparse.ArgumentParser):
        return {"None": None, "5": 5, "'ap'": "ap"}
    if callable(v):
        return {"None": None, "5": 5}
    raise AssertionError(f"no hostile values for {type(v).__name__}: extend _hostile")


def _walk(key, fn, walk, fixtures=None, huge=None):
    """-> (number of hostile calls, [failure descriptions]) of one WALK entry. fixtures: the
    maker of what the valid calls use (default walk_fixtures); huge: whether numbers also get
    10**400 (default: for the modules of HUGE_WALKED)."""
    fixtures = fixtures or walk_fixtures
    huge = key.split(".")[0] in HUGE_WALKED if huge is None else huge
    args = walk.args(fixtures())
    failures, n = [], 0
    if walk.run:
        fn(**args)                                  # the valid call itself runs
    for arg, valid in args.items():
        if arg == "self":
            continue
        legal = walk.legal.get(arg, {})
        if "*" in legal:
            continue
        for label, bad in {**_hostile(valid, huge),
                           **walk.extra.get(arg, {})}.items():
            if label in legal:
                continue
            n += 1
            call = {**walk.args(fixtures()), arg: bad}   # fresh: a call may use them up
            name = walk.names.get(arg, rf"\b{re.escape(arg)}\b")
            try:
                fn(**call)
            except (ValueError, TypeError) as e:
                if not re.search(name, str(e)) or "\n" in str(e):
                    failures.append(f"{key}({arg}={label}): {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 (any other error is the failure reported)
                failures.append(f"{key}({arg}={label}): {type(e).__name__}: {e}")
            else:
                failures.append(f"{key}({arg}={label}): no error")
    return n, failures


ROOT_WALKED = (attn, data, fast, optim, train, theory)   # the reference (the studies walk theirs)


def walk_table(modules):
    """WALK's entries of `modules` (their short names) -> {key: Walk}."""
    names = {m.__name__.rsplit(".", 1)[-1] for m in modules}
    return {k: w for k, w in WALK.items() if k.split(".")[0] in names}


def assert_walked(public, table, least, fixtures=None, huge=None):
    """Every entry of a walk table walked (_walk): more than `least` hostile calls, none failed."""
    n, failures = 0, []
    for key in sorted(table):
        k, f = _walk(key, public[key], table[key], fixtures, huge)
        n, failures = n + k, failures + f
    assert n > least and not failures, f"{len(failures)} of {n} hostile calls:\n" + "\n".join(
        failures)


# ---------------- copied alone: the README's snippets, each with only the files it names -------

def readme_snippets():
    """(files, code) for each snippet of the README's "Copying a file" section: the files are the
    `x.py` names on the bold line before the ```python block."""
    text = open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    section = text.split("## Copying a file into your project", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^\*\*(.+?)\*\*.*?\n```python\n(.*?)```", section, re.M | re.S)
    return [(re.findall(r"`(\w+\.py)`", head), code) for head, code in found]


def run_alone(files, argv, tmp_path):
    """Run python argv in an empty folder holding only `files` (copied from here), with nothing
    of this checkout on the path."""
    p = start_alone(files, argv, tmp_path)
    try:
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def start_alone(files, argv, tmp_path):
    """run_alone's process, started and not awaited (the test works on while it runs)."""
    for name in files:
        shutil.copy(os.path.join(HERE, name), tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.Popen([sys.executable, "-E", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_attn_py_alone_proves_itself(tmp_path, monkeypatch):
    """python attn.py in an empty folder: every backward against central differences, the worst
    relative error printed and below 1e-6; and the check fails on a wrong backward (LayerNorm's
    without its mean term, softmax's without its correction)."""
    p = start_alone(["attn.py"], ["attn.py"], tmp_path)   # on the other core while this checks
    try:
        _in_process_gradient_checks(monkeypatch)
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    worst = float(re.search(r"worst relative error (\S+) ", stdout).group(1))
    assert p.returncode == 0 and worst < 1e-6, stdout + stderr
    assert int(re.search(r"attn\.py: (\d+) gradients", stdout).group(1)) > 100
    assert len(stdout.splitlines()) == 1 and not stderr and "5 configurations" in stdout


def _in_process_gradient_checks(monkeypatch):
    """test_attn_py_alone_proves_itself's checks in this process: every gradient within RTOL,
    each part checked, and the check failing on a LayerNorm and a softmax backward made wrong."""
    errors = attn.gradient_checks()
    assert max(errors.values()) < 1e-6 and any(k.startswith("full model:") for k in errors)
    assert {k.split(":")[0] for k in errors} >= {"layernorm", "linear", "softmax", "dropout",
                                                 "gelu", "relu", "mlp", "embed", "logistic",
                                                 "attention_cls", "self_attention", "model",
                                                 "full model", "model, dropout", "model, no mlp",
                                                 "model, relu, no ln", "f_tf-head"}
    real = attn.layernorm_backward
    monkeypatch.setattr(attn, "layernorm_backward", lambda dy, c: (
        lambda dx, dg, db: (dx + c[1] * (dy * c[2]).mean(-1, keepdims=True), dg, db))(*real(dy, c)))
    monkeypatch.setattr(attn, "softmax_backward", lambda dA, A: A * dA)
    bad = attn.gradient_checks()                              # both wrong: one run of the check
    assert bad["layernorm: dx"] > 1e-3 and bad["model: dE_pos"] > 1e-3
    assert bad["softmax: ds"] > 1e-3


# forwards planted wrong in a copy of attn.py, each wrong the same way in its backward where it has
# one (so every gradient still agrees with central differences): the definitions must see them
ATTN_PLANTS = {
    "the query read from row 0": [('linear_forward(Xn[:, -1], w["W_Q"]',
                                   'linear_forward(Xn[:, 0], w["W_Q"]', 1),
                                  ("dXn[:, -1] += dz", "dXn[:, 0] += dz", 1)],
    "scores scaled by 1/e in the [CLS]-row form": [("scale = e ** -0.5", "scale = e ** -1.0", 1)],
    "scores scaled by 1/e in the full form": [("scale = e ** -0.5", "scale = e ** -1.0", 2)],
    "dropout without its 1/(1-p)": [(" / x.dtype.type(1.0 - p)", "", 1)],
}


def planted_attn(tmp_path, name):
    """A copy of attn.py with the plant `name` (each (old, new, n): the n-th `old` replaced),
    imported as a module of its own."""
    import importlib.util
    text = open(os.path.join(HERE, "attn.py"), encoding="utf-8").read()
    for old, new, n in ATTN_PLANTS[name]:
        at = [m.start() for m in re.finditer(re.escape(old), text)][n - 1]
        text = text[:at] + new + text[at + len(old):]
    path = tmp_path / f"attn_{len(list(tmp_path.iterdir()))}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_attn_py_self_check_sees_forwards_planted_wrong(tmp_path):
    """Issue 40: a forward wrong the same way in its backward passed a check of derivatives alone.
    `python attn.py` checks the definitions too: the [CLS]-row model against the full model's
    [CLS] row in every configuration (LN on and off, GELU and ReLU, with and without the MLP) and
    dropout's mean; each plant fails them, and the one printed line says FAILED. The first plant,
    run as the command, passes every gradient and still exits 1."""
    clean = attn.definition_checks()
    assert max(v for k, v in clean.items() if k != "dropout") < attn.FORMS_TOL
    assert clean["dropout"] < attn.DROPOUT_SE
    assert {k for k in clean if k != "dropout"} == {"[CLS] row: " + k for k in attn.CHECK_CFGS}
    cfgs = [attn.default_config(**c) for c in attn.CHECK_CFGS.values()]
    assert {(c["ln"], c["act"], c["mlp"] > 0) for c in cfgs} >= {
        (True, "gelu", True), (False, "relu", True), (True, "gelu", False), (False, "gelu", False)}
    for name in ATTN_PLANTS:
        m = planted_attn(tmp_path, name)
        bad = m.definition_checks()
        if name.startswith("dropout"):
            assert bad["dropout"] > 10 * attn.DROPOUT_SE, (name, bad)
        else:
            assert min(v for k, v in bad.items() if k != "dropout") > 1e-3, (name, bad)
        m.gradient_checks = lambda: {"layernorm: dx": 1e-9}      # the definitions alone here
        line, ok = m.self_check()
        assert not ok and "FAILED" in line and "\n" not in line, (name, line)
    r = run_alone([], ["-c", "import attn_0, sys; sys.exit(attn_0.main([]))"], tmp_path)
    assert r.returncode == 1 and "FAILED" in r.stdout and len(r.stdout.splitlines()) == 1, r
    assert float(re.search(r"worst relative error (\S+) ", r.stdout).group(1)) < attn.RTOL


def test_attn_py_command_is_one_line_on_bad_arguments_and_ctrl_c(tmp_path):
    """Issue 39: `python attn.py --bogus` ran and exited 0; Ctrl-C was a traceback. Now: unknown
    arguments, one line and exit 2; Ctrl-C, one line and exit 130 (a closed or full stdout:
    test_every_root_entry_point_ends_quietly_on_a_closed_pipe_and_in_one_line_on_a_full_disk)."""
    r = run_alone(["attn.py"], ["attn.py", "--bogus"], tmp_path)
    assert r.returncode == 2 and not r.stdout and r.stderr.count("\n") == 1, r
    assert "unknown argument(s) --bogus" in r.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    go = ("import runpy, sys, numpy; print('go', flush=True); sys.argv = ['attn.py']; "
          "runpy.run_path('attn.py', run_name='__main__')")    # numpy loaded: Ctrl-C lands in it
    for wait in (0.3, 0.15, 0.05, 0.4, 0.2):   # a press that lands after the check has ended
        p = subprocess.Popen([sys.executable, "-E", "-c", go], cwd=tmp_path, env=env,   # (it
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # takes
        assert p.stdout.readline() == "go\n"              # 0.7 s on a fast machine) is tried
        time.sleep(wait)                                  # again, sooner
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        if p.returncode != 0:
            break
        assert "worst relative error" in out and not err, (out, err)    # finished before it
    assert p.returncode == 130 and err == "\nattn.py: interrupted\n" and not out, (out, err)


# ===============================================================================================
# data.py: sparse Boolean tasks
# ===============================================================================================

# ---------------- tasks, labels and samples ----------------------------------------------------

@pytest.mark.parametrize("name,s", [("and", 3), ("or", 2), ("parity", 4), ("majority", 5),
                                    ("junta", 3), ("and", 1)])
def test_labels_balanced(name, s):
    task = data.make_task(name, 40, s, np.random.default_rng(0))
    X, y = task.sample(40000, np.random.default_rng(1))
    assert X.shape == (40000, 40) and y.shape == (40000,) and set(np.unique(y)) <= {0, 1}
    assert abs(y.mean() - 0.5) < 0.015, y.mean()


def test_label_definitions():
    """The convention: 1 = true (AND of all, odd parity, majority of ones), on known inputs."""
    rng = np.random.default_rng(0)
    for name, expect in [("and", [0, 0, 0, 1]), ("or", [0, 1, 1, 1]), ("parity", [0, 1, 1, 0])]:
        task = data.make_task(name, 6, 2, rng)
        X = np.zeros((4, 6), np.uint8)
        X[[1, 3], task.S[1]] = 1
        X[[2, 3], task.S[0]] = 1
        assert task.label(X).tolist() == expect, name
    task = data.make_task("majority", 7, 3, rng)
    X = np.zeros((2, 7), np.uint8)
    X[0, task.S[:2]] = 1
    X[1, task.S[:1]] = 1
    X[1, [i for i in range(7) if i not in task.S]] = 1     # bits outside S never matter
    assert task.label(X).tolist() == [1, 0]
    junta = data.make_task("junta", 8, 3, rng)
    assert junta.table.sum() == 4
    X = np.zeros((8, 8), np.uint8)
    for row in range(8):
        X[row, junta.S] = [(row >> 2) & 1, (row >> 1) & 1, row & 1]
    assert junta.label(X).tolist() == junta.table.tolist()


def test_label_rejects_non_bits():
    """label's one check: X [m, T] of 0/1 numbers or bools; the first non-bits are shown."""
    task = data.make_task("and", 6, 2, np.random.default_rng(14))
    X = np.zeros((3, 6))
    for bad, shown in [(np.nan, "nan"), (2, "2."), (-1, "-1."), (0.5, "0.5")]:
        Xb = X.copy()
        Xb[1, 4] = bad
        with pytest.raises(ValueError, match=r"X must be bits 0/1 \(or bools\) of shape \[m, 6\], "
                                             rf"got shape \(3, 6\), dtype float64, non-bits "
                                             rf"\[{re.escape(shown)}\]$"):
            task.label(Xb)
    for bad, shown in [(np.full((2, 6), 2, np.int64), "dtype int64, non-bits [2 2 2]"),
                       (np.full((2, 6), 255, np.uint8), "dtype uint8, non-bits [255 255 255]"),
                       (np.full((2, 6), "1"), "dtype <U1"), (np.zeros((2, 5)), "shape (2, 5)"),
                       (np.zeros(6), "shape (6,)")]:
        with pytest.raises(ValueError, match=re.escape(shown)) as e:
            task.label(bad)
        assert "\n" not in str(e.value)
    Xbool = np.ones((2, 6), bool)
    assert task.label(Xbool).tolist() == [1, 1]
    assert task.label(Xbool.astype(float)).tolist() == [1, 1]


def test_data_deterministic_and_independent():
    a = data.make_task("and", 50, 3, np.random.default_rng(7))
    b = data.make_task("and", 50, 3, np.random.default_rng(7))
    assert a.S.tolist() == b.S.tolist()
    X1, y1 = a.sample(100, np.random.default_rng(3))
    X2, y2 = b.sample(100, np.random.default_rng(3))
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    rng = np.random.default_rng(3)
    Xtr, _ = a.sample(100, rng)
    Xte, _ = a.sample(100, rng)
    assert np.array_equal(Xtr, X1) and not np.array_equal(Xtr, Xte)
    S = {tuple(data.make_task("and", 50, 3, np.random.default_rng(i)).S) for i in range(20)}
    assert len(S) > 15                                # the support really is drawn


def test_data_errors():
    """The doors (make_task or SparseTask, sample, label, bit_probability) refuse in one line
    naming the value; their checks come after the maths in data.py. bit_probability of a task
    that is not one was 0.5; a junta's short truth table, an IndexError at the first label: the
    table is drawn with the task now, never given."""
    rng = np.random.default_rng(0)
    for args, msg in [(("and", 10, 0), "s must be an integer from 1 to T, .*, got 0"),
                      (("and", 10, 11), "s must be an integer from 1 to T, .*, got 11"),
                      (("xor", 10, 2), "task must be one of and, or, parity, majority, junta, "
                                       "got 'xor'"),
                      (("and", 10.0, 2), "T must be an integer .*, got 10.0"),
                      (("and", True, 1), "T must be an integer .*, got True"),
                      (("majority", 10, 2), r"s must be .*odd for majority.*, got 2"),
                      (("junta", 30, 25), r"s must be .*<= 24 for a junta, got 25")]:
        with pytest.raises(ValueError, match=msg) as e:
            data.make_task(*args, rng)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="rng must be a numpy Generator, got 5"):
        data.make_task("and", 10, 2, 5)
    task = data.make_task("and", 10, 2, rng)
    for m in (0, -3, 2.5):
        with pytest.raises(ValueError, match=f"m must be an integer from 1 .*, got {m}"):
            task.sample(m, rng)
    with pytest.raises(ValueError, match="rng must be a numpy Generator, got 123"):
        task.sample(5, 123)
    with pytest.raises(ValueError, match="task must be one of .*, got 'bogus'"):
        data.bit_probability("bogus", 3)
    with pytest.raises(ValueError, match="s must be an integer from 1 to T, .*, got 0"):
        data.bit_probability("and", 0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'table'"):
        data.SparseTask("junta", 5, 3, rng, table=np.array([0, 1]))
    a, b = data.SparseTask("junta", 9, 3, np.random.default_rng(4)), data.make_task(
        "junta", 9, 3, np.random.default_rng(4))
    assert a.S.tolist() == b.S.tolist() and a.table.tolist() == b.table.tolist()
    assert a.table.sum() == 4 and a.p == 0.5 and data.bit_probability("and", 3) == 2 ** (-1 / 3)
    src = inspect.getsource(data)
    assert src.index("def _check_arg(") > src.index("def make_task(") > src.index("def _label(")


def test_a_sample_no_machine_holds_is_numpys_memory_error():
    """The reference checks no memory (the studies check theirs before they draw): 10**13 rows of
    12 bits is numpy's MemoryError at once, before anything is drawn; m and rng are still checked
    first, and the generator's stream is untouched."""
    rng = np.random.default_rng(0)
    task = data.make_task("and", 12, 3, rng)
    state = rng.bit_generator.state
    with pytest.raises(MemoryError):
        task.sample(10**13, rng)
    assert rng.bit_generator.state == state
    with pytest.raises(ValueError, match="rng must be a numpy Generator"):
        task.sample(10**13, 5)
    assert task.sample(3, rng)[0].shape == (3, 12)


def test_plain_stream_is_prefix_stable():
    """The plain protocol's sets are prefixes of one stream; first_identifying_m relies on it."""
    task = data.make_task("and", 37, 3, np.random.default_rng(10))
    X, y = task.sample(20, np.random.default_rng(11))
    rng = np.random.default_rng(11)
    parts = [task.sample(k, rng) for k in (3, 9, 8)]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), X)
    assert np.array_equal(np.concatenate([p[1] for p in parts]), y)


# the house's helpers (its tests are in the last section)

def source_tree(path):
    """The syntax tree of the Python file at `path`, parsed once per version of the file (its
    path, size and modification time): the house's tests, here and in studies/, read the same
    sources again and again. Shared: read it, never change it."""
    st = os.stat(path)
    return _source_tree(os.path.abspath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _source_tree(path, mtime_ns, size):
    import ast
    return ast.parse(open(path, encoding="utf-8").read())


def module_imports(path):
    """-> (the project modules the file at `path` imports, anywhere in it, lazy imports too, as
    dotted names: 'attn', 'studies.stats'; the top-level names it imports and never uses)."""
    import ast
    tree = source_tree(path)
    root_mods = {os.path.basename(f)[:-3] for f in glob.glob(os.path.join(HERE, "*.py"))}
    mods, bound = set(), {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                mods.add(a.name)
                bound[a.asname or a.name.split(".")[0]] = n
        elif isinstance(n, ast.ImportFrom) and n.module:
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                is_mod = n.module == "studies" or os.path.exists(
                    os.path.join(HERE, *sub.split(".")) + ".py")
                mods.add(sub if is_mod else n.module)
                bound[a.asname or a.name] = n
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.value.id for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    unused = {name for name in bound if name not in used}
    ours = {m for m in mods if m.split(".")[0] in root_mods or m.startswith("studies.")}
    return ours, unused


def project_graph():
    """{module: the project modules it imports} over the root's files and studies/ (tests left
    out), with each module's unused imports."""
    files = [f for f in glob.glob(os.path.join(HERE, "*.py")) + glob.glob(
        os.path.join(HERE, "studies", "**", "*.py"), recursive=True) if not os.path.basename(f).startswith("test_")]
    graph, unused = {}, {}
    for f in files:
        rel = os.path.relpath(f, HERE)[:-3].replace(os.sep, ".")
        if rel.endswith("__init__"):
            continue
        graph[rel], unused[rel] = module_imports(f)
    return graph, unused


INTERVAL = re.compile(rf"\[({_NUMBER}), ({_NUMBER})\]")


# ===============================================================================================
# optim.py: Adam as its formula, the flat buffer, frozen and rescaled parameters, clipping
# ===============================================================================================

def test_adamw_step_against_a_hand_computed_one():
    rng = np.random.default_rng(0)
    p = {"W_Q": rng.standard_normal((3, 2)), "b_Q": rng.standard_normal(2)}
    g = {"W_Q": rng.standard_normal((3, 2)), "b_Q": rng.standard_normal(2)}
    p0 = {k: v.copy() for k, v in p.items()}
    lr, wd, b1, b2, eps = 0.01, 0.1, 0.9, 0.95, 1e-8
    state = optim.adam_init(p, decay="matrices")
    optim.adam_step(p, g, state, lr, wd, b1=b1, b2=b2, decoupled=True)
    for k in p:                       # torch.optim.AdamW's first step, by hand
        decayed = p0[k] * (1 - lr * wd) if k == "W_Q" else p0[k]
        m, v = (1 - b1) * g[k], (1 - b2) * g[k] ** 2
        expect = decayed - lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
        assert np.allclose(p[k], expect, rtol=1e-12, atol=1e-15), k
    q = {k: v.copy() for k, v in p0.items()}          # coupled (L2) decay differs
    state = optim.adam_init(q)
    optim.adam_step(q, g, state, lr, wd, b1=b1, b2=b2)
    assert not np.allclose(q["W_Q"], p["W_Q"])


def torch_adam_step(p, g, m, v, t, lr, wd, b1, b2, eps, decoupled):
    """One step of torch.optim.Adam / AdamW as their documentation writes it, in float64."""
    if decoupled:
        p = p - lr * wd * p
    else:
        g = g + wd * p
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_is_the_documented_formula_and_its_flat_buffer_the_same_bits(dtype):
    """adam_step against torch's documented algorithm (float64, 30 steps, both decays, decay on
    all, on DECAYED or on all but the LayerNorms, a LayerNorm frozen or not); the flat buffer
    (one_buffer) gives the plain formula's very bits; a frozen parameter keeps its very bits;
    and neither one_buffer nor adam_init swaps the caller's arrays for views."""
    rng = np.random.default_rng(5)
    shapes = dict(E_pos=(4, 3), ln1_g=(3,), W_Q=(3, 3), b_Q=(3,), w=(3,), b=(1,))
    assert "w" in optim.DECAYED and not {"b_Q", "b", "E_pos"} & set(optim.DECAYED)
    decays = {"all": lambda k: True, "matrices": lambda k: k in optim.DECAYED,
              "except-ln": lambda k: k != "ln1_g"}
    for decoupled, decay, frozen in ((False, "all", ()), (True, "all", ()),
                                     (False, "matrices", ()), (True, "matrices", ()),
                                     (False, "except-ln", ()), (True, "all", ("ln1_g",)),
                                     (False, "all", ("ln1_g", "b"))):
        p = {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}
        mine, p0 = dict(p), {k: v.copy() for k, v in p.items()}
        q = optim.one_buffer(p)
        state_p, state_q = optim.adam_init(p, decay, frozen), optim.adam_init(q, decay, frozen)
        assert all(p[k] is mine[k] for k in p) and all(q[k] is not p[k] for k in p)
        assert state_p["flat"] is None and state_q["flat"] is not None
        ref = {k: (v.astype(np.float64), 0.0, 0.0) for k, v in p.items()}
        for t in range(1, 31):
            g = {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}
            optim.adam_step(p, g, state_p, 0.01, 0.1, b2=0.95, decoupled=decoupled)
            optim.adam_step(q, {k: v.copy() for k, v in g.items()}, state_q, 0.01, 0.1, b2=0.95,
                            decoupled=decoupled)
            ref = {k: ref[k] if k in frozen else torch_adam_step(
                *ref[k][:1], g[k].astype(np.float64), *ref[k][1:], t, 0.01,
                0.1 if decays[decay](k) else 0.0, 0.9, 0.95, 1e-8, decoupled) for k in ref}
        for k in p:
            assert np.array_equal(p[k], q[k]), (k, decoupled, decay)
            assert np.array_equal(state_p["v"][k], state_q["v"][k]), k
            assert np.allclose(p[k], ref[k][0], rtol=1e-4 if dtype == "float32" else 1e-10,
                               atol=1e-6 if dtype == "float32" else 1e-13), (k, decoupled, decay)
            assert np.array_equal(p[k], p0[k]) == (k in frozen), (k, frozen)
        assert all(p[k] is mine[k] for k in p)


@pytest.mark.parametrize("flat", [False, True])
def test_frozen_parameters_stay_exact_even_at_eps_zero_and_with_any_gradient(flat):
    """A frozen parameter never moves: not by its gradient (however large), not by weight decay
    (either kind), not at eps = 0, where a zero moment would give 0 / 0; the others step."""
    rng = np.random.default_rng(4)
    shapes = dict(W_Q=(3, 2), ln1_g=(2,), ln1_b=(2,), lnf_g=(2,), lnf_b=(2,))
    p = {k: rng.standard_normal(s) + 0.5 for k, s in shapes.items()}
    p = optim.one_buffer(p) if flat else p
    p0 = {k: v.copy() for k, v in p.items()}
    state = optim.adam_init(p, frozen=optim.LAYERNORMS["ln1"])
    for i in range(4):
        g = {k: 1e30 * rng.standard_normal(s) for k, s in shapes.items()}
        optim.adam_step(p, g, state, 0.01, 0.1, eps=0.0, decoupled=bool(i % 2))
    for k in p:
        assert np.array_equal(p[k], p0[k]) == k.startswith("ln1_"), k
        assert np.isfinite(p[k]).all(), k
    with pytest.raises(ValueError, match="frozen must be a collection of names of params"):
        optim.adam_init(p0, frozen=("ln2_g",))
    with pytest.raises(ValueError, match="frozen must be"):
        optim.adam_init(p0, frozen="ln1_g")


@pytest.mark.parametrize("decoupled", [False, True])
def test_decay_except_ln_spares_exactly_the_layernorms(decoupled):
    """With a zero gradient only the weight decay moves a parameter: every LayerNorm gain and
    shift stays, everything else (embeddings, biases, [CLS], matrices) moves."""
    p = attn.init_params(attn.default_config(T=6, d=8, heads=2, mlp=4, dtype="float64"),
                         np.random.default_rng(0))
    for k in p:
        p[k] += 0.3                        # no parameter at 0, where decay could not show
    p0 = {k: v.copy() for k, v in p.items()}
    for q in (p, optim.one_buffer(p)):
        q = {k: v.copy() for k, v in p0.items()} if q is p else q
        state = optim.adam_init(q, decay="except-ln")
        optim.adam_step(q, {k: np.zeros_like(v) for k, v in q.items()}, state, 0.01, 0.1,
                        decoupled=decoupled)
        assert {k for k in q if np.array_equal(q[k], p0[k])} == {
            k for names in optim.LAYERNORMS.values() for k in names}


def test_optimiser_refuses_impossible_values_in_one_line_naming_them():
    """adam_init and adam_step, the optimiser's doors, refuse what they cannot use in one line
    naming it and leave everything as it was: the state's step count and every parameter."""
    rng = np.random.default_rng(0)
    p = {"W_Q": rng.standard_normal((3, 2)), "b_Q": rng.standard_normal(2)}
    g = {k: np.ones_like(v) for k, v in p.items()}
    before = {k: v.copy() for k, v in p.items()}
    for flat in (False, True):
        q = optim.one_buffer(p) if flat else p
        state = optim.adam_init(q)
        step = lambda **kw: optim.adam_step(kw.pop("params", q), kw.pop("grads", g),
                                            kw.pop("state", state), kw.pop("lr", 1e-3),
                                            kw.pop("wd", 0.0), **kw)
        for kw, name in [(dict(lr=np.nan), "lr, wd"), (dict(lr=np.inf), "lr, wd"),
                         (dict(lr=-1), "lr, wd"), (dict(lr=True), "lr, wd"),
                         (dict(wd=-1), "lr, wd"), (dict(wd=np.nan), "lr, wd"),
                         (dict(b1=1.5), "lr, wd, b1"), (dict(b2=1), "lr, wd, b1, b2"),
                         (dict(b2=np.nan), "lr, wd, b1, b2"), (dict(eps=-1), "lr, .*eps"),
                         (dict(lr=1j), "lr, wd"), (dict(lr=10**400), "lr, wd"),
                         (dict(grads={"W_Q": g["W_Q"]}), "grads"),
                         (dict(grads=dict(g, b_Q=np.ones(3))), "grads"),
                         (dict(params=dict(q, b_Q=np.ones(3))), "params"),
                         (dict(params={k: v.copy() for k, v in q.items()} if flat else {}),
                          "params"), (dict(state=None), "state"), (dict(state={"t": 0}), "state")]:
            with pytest.raises(ValueError, match=f"^{name}.* must be ") as e:
                step(**kw)
            assert "\n" not in str(e.value)
        assert state["t"] == 0 and all(np.array_equal(q[k], before[k]) for k in p)
    for kw, name in [(dict(params=[1, 2]), "params"), (dict(params={}), "params"),
                     (dict(decay="some"), "decay"), (dict(frozen="W_Q"), "frozen"),
                     (dict(frozen=["W_K"]), "frozen"), (dict(scales={"W_Q": -1.0}), "scales")]:
        with pytest.raises(ValueError, match=f"^{name} must be "):
            optim.adam_init(**dict(dict(params=p), **kw))


def test_clipping_scales_each_runs_gradient_to_the_norm():
    rng = np.random.default_rng(1)
    g = {"a": rng.standard_normal((3, 4, 5)), "b": rng.standard_normal((3, 2))}
    g["a"][1] *= 1e-3                                   # run 1 is already below the norm
    g["b"][1] *= 1e-3
    before = {k: v.copy() for k, v in g.items()}
    norms = optim.clip_gradients(g, 1.0, runs=3)
    after = np.sqrt(sum((v.reshape(3, -1) ** 2).sum(1) for v in g.values()))
    assert np.allclose(after[[0, 2]], 1.0 / (1 + 1e-6 / norms[[0, 2]]), rtol=1e-9)
    assert np.array_equal(g["a"][1], before["a"][1]) and np.array_equal(g["b"][1], before["b"][1])
    one = {k: v[0].copy() for k, v in before.items()}
    assert np.isclose(optim.clip_gradients(one, 1.0), norms[0])
    assert all(np.allclose(one[k], g[k][0]) for k in one)


@pytest.mark.parametrize("flat", [False, True])
def test_a_parameter_held_at_c_times_its_scale_follows_the_unscaled_one_bit_for_bit(flat):
    """optim.adam_init's scales: Adam on P = c W with gradient g / c (lr c, eps / c, wd / c^2 or
    / c decoupled) gives P = c W after every step, bit for bit at c = 2 and 1/4, for both decays,
    on the plain and the flat path; at c = 3 to rounding only; and without the scales the two
    part, so the check can fail."""
    rng = np.random.default_rng(47)
    shapes = dict(W_Q=(3, 4), b_Q=(4,), ln1_g=(4,), w=(4,))
    for c, decoupled in ((2.0, False), (2.0, True), (0.25, False), (3.0, False), (2.0, None)):
        W = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        P = dict(W, W_Q=W["W_Q"] * np.float32(c))
        P0 = {k: v.copy() for k, v in P.items()}
        W, P = (optim.one_buffer(x) if flat else {k: v.copy() for k, v in x.items()}
                for x in (W, P))
        sw = optim.adam_init(W, frozen=("ln1_g",))
        sp = optim.adam_init(P, frozen=("ln1_g",), scales=None if decoupled is None else
                             {"W_Q": c})
        gs = []
        for _ in range(25):
            g = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
            gs.append(g)
            optim.adam_step(W, g, sw, 0.01, 0.1, decoupled=bool(decoupled))
            optim.adam_step(P, dict(g, W_Q=g["W_Q"] / np.float32(c)), sp, 0.01, 0.1,
                            decoupled=bool(decoupled))
        if flat and decoupled is not None:     # the flat buffer: the plain formula's very bits
            Q = dict(P0)
            sq = optim.adam_init(Q, frozen=("ln1_g",), scales={"W_Q": c})
            for g in gs:
                optim.adam_step(Q, dict(g, W_Q=g["W_Q"] / np.float32(c)), sq, 0.01, 0.1,
                                decoupled=bool(decoupled))
            assert all(np.array_equal(P[k], Q[k]) for k in P), (c, decoupled)
        same = np.array_equal(P["W_Q"], W["W_Q"] * np.float32(c))
        assert same == (c in (2.0, 0.25) and decoupled is not None), (c, decoupled)
        assert np.allclose(P["W_Q"] / c, W["W_Q"], rtol=1e-5) == (decoupled is not None)
        assert all(np.array_equal(P[k], W[k]) for k in ("b_Q", "ln1_g", "w"))
    for bad in ({"W_X": 2.0}, {"W_Q": 0.0}, {"W_Q": 10**400}, ["W_Q"]):
        with pytest.raises(ValueError, match="scales"):
            optim.adam_init(P, scales=bad)


# ===============================================================================================
# fast.py: the fast path computes what the reference computes
# ===============================================================================================

def test_fast_ops_match_reference_ops():
    """The path test of the tuned ops: each run of a stack through fast.layernorm, fast.linear and
    fast.mlp agrees with the textbook op to rounding, forward and backward; and the stacked
    fast.linear and fast.mlp pass their own central-difference checks."""
    rng = np.random.default_rng(14)
    R, n, d, k = 3, 4, 6, 5
    x, dy = offcentre(rng, R, n, d), rng.standard_normal((R, n, d))
    g, b = offcentre(rng, R, d), offcentre(rng, R, d)                  # gain != 1, shift != 0
    y, c = fast.layernorm_forward(x, g, b)
    grads = fast.layernorm_backward(dy, c)
    W, bW, dyW = offcentre(rng, R, d, k), offcentre(rng, R, k), rng.standard_normal((R, n, k))
    yl, cl = fast.linear_forward(x, W, bW)
    gl = fast.linear_backward(dyW, cl)
    ws = [offcentre(rng, R, d, k), offcentre(rng, R, k), offcentre(rng, R, k, d),
          offcentre(rng, R, d)]
    ym, cm = fast.mlp_forward(x, *ws)
    gm = fast.mlp_backward(dy, cm)
    for r in range(R):
        y_r, c_r = attn.layernorm_forward(x[r], g[r], b[r])
        assert rel_error(y[r], y_r) < 1e-13
        for got, ref in zip(grads, attn.layernorm_backward(dy[r], c_r), strict=True):
            assert rel_error(got[r], ref) < 1e-13
        yl_r, cl_r = attn.linear_forward(x[r], W[r], bW[r])
        assert rel_error(yl[r], yl_r) < 1e-13
        for got, ref in zip(gl, attn.linear_backward(dyW[r], cl_r), strict=True):
            assert rel_error(got[r], ref) < 1e-13
        ym_r, cm_r = attn.mlp_forward(x[r], *[w[r] for w in ws])
        assert rel_error(ym[r], ym_r) < 1e-13
        for got, ref in zip(gm, attn.mlp_backward(dy[r], cm_r), strict=True):
            assert rel_error(got[r], ref) < 1e-13
    x2, W2, b2 = offcentre(rng, 7, d), offcentre(rng, d, k), offcentre(rng, k)
    dy2 = rng.standard_normal((7, k))
    for got, ref in zip(fast.linear_backward(dy2, fast.linear_forward(x2, W2, b2)[1]),
                         attn.linear_backward(dy2, attn.linear_forward(x2, W2, b2)[1]),
                         strict=True):
        assert rel_error(got, ref) < 1e-13                                # one run: 2-D weights
    f = lambda: np.sum(fast.linear_forward(x, W, bW)[0] * dyW)
    check_each("fast linear, stacked", ("dx", "dW", "db"), gl, f, (x, W, bW))
    f = lambda: np.sum(fast.mlp_forward(x, *ws)[0] * dy)
    check_each("fast mlp, stacked", ("x", "W_1", "b_1", "W_2", "b_2"), gm, f, [x] + ws)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_three_paths_agree(dtype):
    """The [CLS]-row shortcut and the two-version fast path are exact: same logits, same grads."""
    cfg = attn.default_config(T=37, d=16, heads=4, mlp=8, dtype=dtype)
    p = moved_params(cfg, 7)
    p = {k: v.astype(dtype) for k, v in p.items()}
    rng = np.random.default_rng(8)
    X = rng.integers(0, 2, (11, 37)).astype(np.uint8)
    dz = rng.standard_normal(11).astype(dtype)
    out = {}
    for path in PATHS:
        z, c = forward(p, cfg, X, path)
        out[path] = (z, backward(dz, p, cfg, c))
    tol = 1e-12 if dtype == "float64" else 2e-5
    for path in ("cls", "fast"):
        assert rel_error(out[path][0], out["full"][0]) < tol
        for k in p:
            if k != "b_K":
                assert rel_error(out[path][1][k], out["full"][1][k]) < tol, (path, k)


def test_fast_path_float32_when_one_version_dominates():
    """Token 0 scores 40 above token 1 at every position, in float32. A sample of all ones then
    has softmax denominator Z ~ T, while token 0's weights are e^40 ~ 2e17: writing Z with
    e1 - e0 cancels to garbage (Z = 0, NaN logits); the fast path must not."""
    T = 50
    cfg = attn.default_config(T=T, d=4, heads=1, mlp=0, ln=False, dtype="float64")
    rng = np.random.default_rng(12)
    p = attn.init_params(cfg, rng, std=0.1)
    p["E_tok"][:] = [[2.0, 0, 0, 0], [0, 2.0, 0, 0]]
    p["E_pos"][:, :2] = 0.0
    p["cls"][:] = [0, 0, 1.0, 0]
    p["W_Q"][:] = 0.0
    p["W_Q"][2, 0] = 40.0                  # q = [40, 0, 0, 0]: s0 = 0.5 * 40 * 2 = 40, s1 = 0
    p["W_K"][:], p["W_V"][:] = np.eye(4), np.eye(4) + 0.3 * rng.standard_normal((4, 4))
    X = rng.integers(0, 2, (8, T)).astype(np.uint8)
    X[0], X[1], X[2, 1:] = 1, 1, 1
    X[1, 7] = 0
    ref = forward(p, cfg, X, "cls")[0]
    cfg32 = dict(cfg, dtype="float32")
    p32 = {k: v.astype("float32") for k, v in p.items()}
    z, cache = forward(p32, cfg32, X, "fast")
    assert cache.attn.kind == "fast"           # really on the fast path, not the fallback
    assert np.all(np.isfinite(z)) and rel_error(z, ref) < 1e-5, (z, ref)


def fallback_stack(dtype, factors):
    """A stack of runs whose query and key weights are scaled by `factors`: the larger, the
    further apart the attention scores (10: past float32's exp range, 20: past float64's)."""
    cfg = attn.default_config(**FALLBACK_CFG, dtype=dtype)
    runs = []
    for seed, factor in zip((9, 3, 4), factors):
        run = {k: v.astype(dtype) for k, v in moved_params(cfg, seed).items()}
        run["W_Q"] *= factor
        run["W_K"] *= factor
        runs.append(run)
    X = np.random.default_rng(10).integers(0, 2, (len(runs), 5, 9))
    dz = np.random.default_rng(11).standard_normal((len(runs), 5)).astype(dtype)  # upstream grad
    return cfg, runs, {k: np.stack([r[k] for r in runs]) for k in runs[0]}, X, dz


def grad_error(g, ref):
    """max over parameters of ||g_k - ref_k|| / max(||ref_k||, 1e-3 ||ref||): relative per
    parameter, except that a gradient which (nearly) vanishes, as the query's and key's do under
    a saturated softmax (and b_K's always), is measured against the whole gradient's scale."""
    floor = 1e-3 * math.sqrt(sum(float((v.astype(np.float64) ** 2).sum()) for v in ref.values()))
    return max(np.linalg.norm((g[k] - ref[k]).astype(np.float64)) /
               max(np.linalg.norm(ref[k].astype(np.float64)), floor) for k in ref)


@pytest.mark.parametrize("dtype, factor, path", [("float32", 10.0, "float64"),
                                                  ("float32", 20.0, "reference"),
                                                  ("float64", 20.0, "reference")])
def test_fast_path_fallbacks_on_huge_scores(dtype, factor, path):
    """Scores far apart force the fast path onto a fallback: float32 first reruns the shortcut in
    float64, and past float64's range the reference path takes over. Both runs of the stack keep
    their logits and every gradient, in the stack's dtype."""
    cfg, runs, p, X, dz = fallback_stack(dtype, (factor, factor))
    z_fast, c_fast = forward(p, cfg, X, "fast")
    assert c_fast.attn.kind == path                             # the fallback was taken
    g_fast = backward(dz, p, cfg, c_fast)
    assert z_fast.dtype == dtype and all(g.dtype == dtype for g in g_fast.values())
    assert set(g_fast) == set(p)
    tol = 1e-12 if dtype == "float64" else 1e-5
    ref = "float64" if path == "float64" else dtype  # float32's full path is off by 2% on
    cfg_ref = dict(cfg, dtype=ref)                            # W_Q there: the float64 rerun is not
    for r, run in enumerate(runs):
        run = {k: v.astype(ref) for k, v in run.items()}
        z_full, c_full = forward(run, cfg_ref, X[r], "full")
        g_full = backward(dz[r].astype(ref), run, cfg_ref, c_full)
        assert np.all(np.isfinite(z_fast[r])) and rel_error(z_fast[r], z_full) < tol
        assert grad_error({k: v[r] for k, v in g_fast.items()}, g_full) < 10 * tol


def test_each_run_of_a_stack_falls_back_alone():
    """A stack of a normal run, one past float32's exp range and one past float64's: each takes
    its own path and gets bit for bit the logits and gradients it gets as a stack of one, so a
    run's numbers never depend on its stackmates."""
    cfg, runs, p, X, dz = fallback_stack("float32", (1.0, 10.0, 20.0))
    z, cache = forward(p, cfg, X, "fast")
    assert cache.attn.kind == "split"
    assert [c.kind for _, c in cache.attn.parts] == ["fast", "float64",
                                                              "reference"]
    g = backward(dz, p, cfg, cache)
    for r, run in enumerate(runs):
        alone = {k: v[None] for k, v in run.items()}
        z_r, c_r = forward(alone, cfg, X[r:r + 1], "fast")
        g_r = backward(dz[r:r + 1], alone, cfg, c_r)
        assert np.array_equal(z[r], z_r[0])
        assert all(np.array_equal(g[k][r], g_r[k][0]) for k in p), r


@pytest.mark.parametrize("factor, path", [(1.0, "fast"), (20.0, "float64"),
                                           (60.0, "reference")])
def test_cls_attention_mean_is_the_reference_weights_on_every_path(factor, path):
    """The attention on S that train.py reports: the [CLS] row of softmax attention, averaged over
    samples and heads, whichever path the shortcut takes."""
    cfg = attn.default_config(T=9, d=4, heads=2, mlp=0, ln=False, dtype="float32")
    p = {k: v.astype("float32") for k, v in moved_params(cfg, 9).items()}
    p["W_Q"] *= factor
    p["W_K"] *= factor
    X = np.random.default_rng(10).integers(0, 2, (5, 9))
    cache = fast.model_forward(p, cfg, X)[1].attn             # the attention's cache, a stack of 1
    assert cache.kind == path
    p64, cfg64 = {k: v.astype("float64") for k, v in p.items()}, dict(cfg, dtype="float64")
    A = forward(p64, cfg64, X, "cls")[1].head.attn.A   # [B, H, T + 1]
    mean, by_head = fast.cls_attention_mean(p, cfg, X)
    assert rel_error(mean, A.mean(axis=(0, 1))) < 1e-5
    assert rel_error(by_head, A.mean(axis=0).T) < 1e-5


def test_kept_two_versions_give_the_same_step_and_are_checked():
    cfg = attn.default_config(T=9, d=8, heads=2, mlp=4)
    p = attn.init_params(cfg, np.random.default_rng(0))
    X = np.random.default_rng(1).integers(0, 2, (6, 9)).astype(np.float32)
    y = np.arange(6) % 2
    a = fast.loss_and_grads(p, cfg, X, y)
    b = fast.loss_and_grads(p, cfg, X, y, versions=fast.two_versions(X, np.float32))
    assert a[0] == b[0] and all(np.array_equal(a[1][k], b[1][k]) for k in p)
    with pytest.raises(ValueError, match=r"versions must be .* of shape \(6, 18\) .*, got an "
                                         r"array of shape \(6, 9\)"):
        fast.loss_and_grads(p, cfg, X, y, versions=np.zeros((6, 9), np.float32))


def test_fast_activations_are_attn_s_bit_for_bit():
    """fast.py computes GELU and ReLU into its workspace's arrays, operation for operation as
    attn.py does: fast.mlp_forward and mlp_backward (one run and a stack of one) give attn's
    logits, dx and weight gradients bit for bit, also for a float64 dy on float32 weights."""
    rng = np.random.default_rng(0)
    checked = 0
    for dt in ("float32", "float64"):
        x = rng.standard_normal((37, 8)).astype(dt)
        ws = [rng.standard_normal(s).astype(dt) for s in ((8, 5), (5,), (5, 8), (8,))]
        for act, dy_dt in (("gelu", dt), ("relu", dt), ("gelu", "float64"), ("relu", "float64")):
            dy = rng.standard_normal((37, 8)).astype(dy_dt)
            y, c = attn.mlp_forward(x, *ws, act=act)
            dx, dW_1, _, dW_2, _ = attn.mlp_backward(dy, c)
            for stack in (False, True):
                lift = (lambda a: a[None]) if stack else (lambda a: a)
                y_f, c_f = fast.mlp_forward(lift(x), *map(lift, ws), act=act)
                dx_f, dW_1f, _, dW_2f, _ = fast.mlp_backward(lift(dy), c_f)
                got = [a[0] if stack else a for a in (y_f, dx_f, dW_1f, dW_2f)]
                for want, have in zip((y, dx, dW_1, dW_2), got):
                    assert have.dtype == want.dtype and np.array_equal(have, want), (dt, act)
                    checked += 1
    assert checked == 64


def test_loss_and_grads_keeps_its_arrays_and_returns_new_ones():
    """loss_and_grads takes a step's arrays from a workspace it keeps, so that a step asks for
    no memory but what it returns: after a first step, a step's new memory peaks at about the
    gradients' and logits' bytes (24 times that without the workspace, T = 2000). What it returns
    is new: a later step leaves the loss, gradients and logits of an earlier one as they were,
    and a cache of model_forward outlives loss_and_grads. The workspace changes no bits: the step
    equals model_forward, the loss and model_backward (new arrays) bit for bit."""
    import tracemalloc
    cfg = attn.default_config(T=2000, d=8, heads=2, mlp=4, dtype="float64")
    p, q = (attn.init_params(cfg, np.random.default_rng(s)) for s in (0, 1))
    X = np.random.default_rng(2).integers(0, 2, (10, 2000)).astype(np.float64)
    y = np.arange(10) % 2
    versions = fast.two_versions(X, np.float64)
    first = fast.loss_and_grads(p, cfg, X, y, versions=versions)
    kept = [first[0].copy(), {k: v.copy() for k, v in first[1].items()}, first[2].copy()]
    z, cache = fast.model_forward(p, cfg, X)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    second = fast.loss_and_grads(q, cfg, X, y, versions=versions)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    returned = sum(v.nbytes for v in second[1].values()) + second[2].nbytes
    assert peak < 1.5 * returned, (peak, returned)
    assert first[0] == kept[0] and np.array_equal(first[2], kept[2])
    assert all(np.array_equal(first[1][k], kept[1][k]) for k in p)
    grads = fast.model_backward(attn.logistic_backward(1.0, fast.logistic_forward(z, y)[1]), p,
                                cfg, cache)
    assert np.array_equal(z, kept[2]) and all(np.array_equal(grads[k], kept[1][k]) for k in p)
    P = {k: np.stack([p[k], q[k]]) for k in p}           # a stack, twice: kept arrays, the same bits
    XX, yy = np.stack([X, X]), np.stack([y, y])
    loss, g, zz = fast.loss_and_grads(P, cfg, XX, yy)
    again = fast.loss_and_grads(P, cfg, XX, yy)
    assert np.array_equal(loss, again[0]) and np.array_equal(zz, again[2])
    assert all(np.array_equal(g[k], again[1][k]) for k in P)


# ===============================================================================================
# train.py: runs and stacks, the options' door, the command line
# ===============================================================================================

def test_learns_sparse_and_small_T():
    r = train.train_run(dict(T=20, m=200, steps=300, n_test=1000, seed=1, log_every=0))
    assert r["test_acc"] >= 0.99
    assert r["top_attended"] == r["S"]


def test_stack_equals_single_runs():
    """R = 4 runs stacked (same T and m, other seeds) against the 4 runs alone, 200 float64 steps:
    every loss within 1e-9 relative, same accuracies. Then a stack with different m (the shorter
    sets padded with weight-0 samples): it sums in another order, so it agrees to rounding, which
    training amplifies slowly; same outcome."""
    base = dict(T=30, steps=200, n_test=300, dtype="float64", d=16, heads=4, mlp=8, log_every=0)
    for ms, tol, first in (((60, 60, 60, 60), 1e-9, 200), ((40, 60, 25, 60), 1e-9, 40)):
        runs = [dict(base, seed=seed, m=m) for seed, m in enumerate(ms)]
        stacked = train.train_stack(runs)
        for o, st in zip(runs, stacked, strict=True):
            alone = train.train_run(o, log=None)
            a, b = np.array(alone["losses"]), np.array(st["losses"])
            assert a.shape == b.shape == (200,)
            assert np.max(np.abs(a - b)[:first] / np.abs(a[:first])) < tol, (o, ms)
            assert abs(alone["test_acc"] - st["test_acc"]) <= 1 / 300
            assert (alone["test_acc"] >= 0.99) == (st["test_acc"] >= 0.99)
            assert alone["train_acc"] == st["train_acc"] and alone["S"] == st["S"]
    with pytest.raises(ValueError, match="differ in"):
        train.train_stack([dict(base, seed=0, m=20), dict(base, seed=1, m=20, T=31)])


def test_accuracy_is_computed_in_chunks(monkeypatch):
    """The final accuracies go through the model EVAL_CHUNK rows at a time, every row once, and
    give the accuracies of one pass over the whole set."""
    whole = train.train_run(SMALL)
    monkeypatch.setattr(train, "EVAL_CHUNK", 7)
    seen = []                                  # rows of every forward pass of the evaluation
    real = fast.model_forward                  # training's forwards see the whole set (40 rows)
    monkeypatch.setattr(fast, "model_forward", lambda p, c, X, *a: (
        seen.append(len(X)) if len(X) != SMALL["m"] else None) or real(p, c, X, *a))
    chunked = train.train_run(SMALL)
    assert seen and max(seen) <= 7 and sum(seen) == SMALL["m"] + SMALL["n_test"], seen
    assert chunked["test_acc"] == whole["test_acc"]
    assert chunked["train_acc"] == whole["train_acc"]


def test_progress_reaches_a_pipe_while_the_run_goes_on():
    p = run_python("train.py", "--T", "12", "--m", "40", "--d", "8", "--heads", "2", "--mlp", "4",
                "--steps", "1000000", "--log-every", "10")
    try:
        lines = [p.stdout.readline() for _ in range(2)]
        assert p.poll() is None and lines[1].lstrip().startswith("step"), lines
    finally:
        p.kill()
        p.communicate()


@pytest.mark.parametrize("argv", [["sweep", "--mode", "mlp"], ["sweep", "--seed", "3"],
                                  ["--ste", "5"], ["bench", "--T", "100"], ["--sav", "x.npz"]])
def test_no_option_is_taken_by_its_prefix(argv, capsys):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "unrecognized arguments" in err and not out


def test_the_studies_options_are_refused_naming_the_command_where_they_live(capsys):
    """`train.py --save x.npz` said "unrecognized arguments": 23 options moved to the studies'
    trainer. train.STUDY_OPTIONS (plain data: train.py imports no study) is held to what
    `python -m studies.trainer --help` lists beyond train.py's own options, read as text; each
    is refused in one line naming `python -m studies.trainer` with the option as typed."""
    helps = subprocess.run([sys.executable, "-m", "studies.trainer", "--help"], cwd=HERE,
                           capture_output=True, text=True, timeout=60)
    assert helps.returncode == 0, helps.stderr
    theirs = set(re.findall(r"^  (--[\w-]+)", helps.stdout, re.M))
    ours = set(re.findall(r"^  (--[\w-]+)", train.parser().format_help(), re.M))
    moved = {"--" + name.replace("_", "-") for name in train.STUDY_OPTIONS}
    assert len(theirs) > 30 and "--save" in theirs and "--T" in ours and "--save" not in ours
    assert moved == theirs - ours and not moved & ours, (moved ^ (theirs - ours))
    for option in sorted(moved):
        code, out, err = run_cli(capsys, *TINY, option, "v")
        assert code == 2 and not out and err == (f"train.py: error: {option} is an option of the "
                                                 f"studies' trainer: python -m studies.trainer "
                                                 f"{option} v\n"), err
    assert "python -m studies.trainer --clip 1.0" in run_cli(capsys, "--clip=1.0")[2]
    assert "python -m studies.trainer --resume\n" in run_cli(capsys, "--resume")[2]


@pytest.mark.parametrize("argv,named", [
    (["--n-test", "101010101010101010101010101010"], "n_test=101010101010101010101010101010 is "
                                                     "too large"),
    (["--d", "100000", "--heads", "1"], "d=100000 is too large"),
    (["--m", "10000000000000"], "m=10000000000000 is too large"),
    (["--wd", "1e308"], "wd=1e+308 must be below 1.84e+19 in float32"),
    (["--wd", "1e200", "--dtype", "float64"], "wd=1e+200 must be below 1.34e+154 in float64"),
    (["--T", "10000000000000000000000"], "T must be an integer from 1 to 2**63-1"),
    (["--json", ""], "--json '': it is neither a new file nor a summary train.py wrote")])
def test_every_refusal_names_the_value_that_caused_it(argv, named, capsys):
    """Issue "trust at the edges": a test set no machine holds was "m must be an integer", a
    weight decay that overflows Adam's second moment "try a smaller --lr", `--json ''` was taken
    and nothing written. Each is refused before any training, in one line naming its value."""
    code, out, err = run_cli(capsys, *TINY, *argv)
    assert code == 2 and not out and err.count("\n") == 1 and named in err, err


def test_hooks_and_log_that_are_not_are_refused_by_name():
    with pytest.raises(TypeError, match="^hooks must be None or a train.Hooks, got 5$"):
        train.train_run(dict(SMALL, steps=1), hooks=5)
    with pytest.raises(TypeError, match="^hooks must be None or a train.Hooks, got 'x'$"):
        train.train_stack([dict(SMALL, steps=1)], hooks="x")
    with pytest.raises(TypeError, match="^log must be None or a function of one line, got 5$"):
        train.train_run(dict(SMALL, steps=1), log=5)


def test_json_output_is_strict_json(tmp_path, capsys):
    out = str(tmp_path / "r.json")
    assert run_cli(capsys, *TINY, "--log-every", "0", "--json", out)[0] == 0  # nothing logged:
    text = open(out).read()                                                   # the best is nan
    json_strict = json.loads(text, parse_constant=lambda c: pytest.fail(c))
    assert json_strict["best_logged_acc"] is None and json_strict["test_acc"] > 0


ROOT_ENTRY_POINTS = {   # every root file a user runs, and the files it reads and writes
    "attn.py": "reads and writes nothing: checks itself",
    "theory.py": "reads and writes nothing: the theory's checks",
    "train.py": "reads nothing; writes --json, checked before training (the tests below), through "
                "a file it creates new under a name no user chose",
}
QUICK_RUNS = {   # each root entry point, run so that it writes to stdout at once
    "attn.py": [["-c", "import sys, attn; attn.self_check = lambda: ('attn.py: a line', True); "
                       "sys.exit(attn.main([]))"]],   # main's printing, not the 2 s check
    "theory.py": [["-c", "import sys, theory; theory._print_report = lambda: print('a line'); "
                         "sys.exit(theory.main([]))"], ["theory.py", "--help"]],
    "train.py": [["train.py", *TINY], ["train.py", *TINY, "--log-every", "1"],
                 ["train.py", "--help"]],
}


def start_into(stdout, args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, *args], cwd=HERE, stdout=stdout, env=env,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("name", sorted(QUICK_RUNS))
def test_every_root_entry_point_ends_quietly_on_a_closed_pipe_and_in_one_line_on_a_full_disk(name):
    """`python train.py | head -c 1`, `python train.py > /dev/full` and `python theory.py >
    /dev/full` were BrokenPipeError and OSError tracebacks. Every root command now ends as
    attn.stdout_lost says: a closed pipe quietly, exit 141 (as a Unix tool that SIGPIPE ends);
    a full disk in one line on stderr, exit 1. The pipe's reading end is closed before the
    command starts, so its first write fails."""
    assert set(QUICK_RUNS) == set(ROOT_ENTRY_POINTS)
    for args, where, code, err in into_failing_stdout(QUICK_RUNS[name], start_into, 120):
        if where == "pipe":
            assert code == 141 and err == "", (args, code, err)
        else:
            assert code == 1 and err == (f"{name}: cannot write to stdout: No space left on "
                                         f"device\n"), (args, err)


def into_failing_stdout(argvs, start, timeout):
    """Each argv run into a pipe whose reader has gone (`| head -c 0`) and into /dev/full (where
    the system has one), all started first, then each awaited: side by side. start(stdout,
    argv) -> a Popen with stderr a text pipe. -> [(argv, "pipe" or "full", exit status,
    stderr)]; every process is gone when it returns."""
    runs = []
    try:
        for argv in argvs:
            read, write = os.pipe()
            os.close(read)                                    # the reader has gone
            try:
                runs.append((argv, "pipe", start(write, argv)))
            finally:
                os.close(write)
            if os.path.exists("/dev/full"):
                with open("/dev/full", "w") as full:
                    runs.append((argv, "full", start(full, argv)))
        assert len(runs) >= len(argvs)
        errs = [r.communicate(timeout=timeout)[1] for _, _, r in runs]
        return [(argv, where, r.returncode, err) for (argv, where, r), err in zip(runs, errs)]
    finally:
        for _, _, r in runs:
            if r.poll() is None:
                r.kill()
                r.communicate()


def test_every_root_entry_point_is_declared_with_what_it_reads():
    """By construction: a new root command joins the list above (and, if it reads a file, the
    damage suite of studies/test_damage.py) by being written."""
    mains = {os.path.basename(p) for p in glob.glob(os.path.join(HERE, "*.py"))
             if re.search(r'^if __name__ == "__main__":', open(p).read(), re.M)}
    assert mains == set(ROOT_ENTRY_POINTS), mains ^ set(ROOT_ENTRY_POINTS)


def test_json_output_never_touches_a_file_or_link_at_a_name_it_did_not_choose(tmp_path, capsys):
    """`--json out.json` wrote out.json.tmp and renamed it: a user's file of that name was lost,
    and a link of that name had its target cut, even outside the folder. The summary is now
    written to a file created new and exclusively under a random name (".train-*.tmp"), then
    renamed: the file and the link at the old name, and the link's target, are as they were, and
    no temporary file is left."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target").write_text("someone's data\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "a.json.tmp").write_text("notes\n")
    (run_dir / "b.json.tmp").symlink_to(outside / "target")
    for name in ("a.json", "b.json"):
        assert run_cli(capsys, *TINY, "--json", str(run_dir / name))[0] == 0
        assert json.loads((run_dir / name).read_text())["T"] == 12
    assert (run_dir / "a.json.tmp").read_text() == "notes\n"
    assert os.readlink(run_dir / "b.json.tmp") == str(outside / "target")
    assert (outside / "target").read_text() == "someone's data\n"
    assert sorted(p.name for p in run_dir.iterdir()) == ["a.json", "a.json.tmp", "b.json",
                                                         "b.json.tmp"]
    assert (run_dir / "a.json").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_json_with_no_room_is_refused_before_training_and_a_failed_write_is_one_line(
        tmp_path, capsys, monkeypatch):
    """--json onto a full disk was a traceback after the training. Its folder must now take a new
    file with the summary's room reserved (os.posix_fallocate) before any training: no room is a
    one-line refusal naming --json, exit 2, nothing trained. A write that still fails at the end
    is one line naming --json, exit 1, the path as it was and no temporary file left."""
    calls = []

    def full_after(n):
        def fallocate(fd, offset, size):
            calls.append(size)
            if len(calls) > n:
                raise OSError(errno.ENOSPC, "No space left on device")
        return fallocate
    path = tmp_path / "s.json"
    monkeypatch.setattr(os, "posix_fallocate", full_after(0), raising=False)
    code, out, err = run_cli(capsys, *TINY, "--json", str(path))
    assert code == 2 and not out and err == (f"train.py: error: --json '{path}': No space left "
                                             f"on device\n"), err
    assert calls and calls[0] >= 4096 and not list(tmp_path.iterdir())
    calls.clear()
    monkeypatch.setattr(os, "posix_fallocate", full_after(1), raising=False)
    code, out, err = run_cli(capsys, *TINY, "--json", str(path))
    assert code == 1 and "test accuracy" in out and err == (f"train.py: --json '{path}': No space "
                                                            f"left on device\n"), err
    assert len(calls) == 2 and not list(tmp_path.iterdir())


def test_json_output_never_replaces_what_train_py_did_not_write(tmp_path, capsys, monkeypatch):
    """--json is checked before any training: someone's notes, a cut summary, a link to a summary,
    a folder, a pipe, a missing folder, a read-only folder: one line naming the path, exit 2,
    nothing written; a summary train.py wrote is replaced, whole."""
    summary = tmp_path / "old.json"
    assert run_cli(capsys, *TINY, "--json", str(summary))[0] == 0
    cases = {"notes.json": "notes\n", "cut.json": summary.read_text()[:50], "folder": None,
             "link.json": summary, "fifo": "fifo", "missing/x.json": "missing"}
    for name, content in cases.items():
        path = tmp_path / name
        if name == "folder":
            path.mkdir()
        elif name == "link.json":
            path.symlink_to(content)
        elif content == "fifo":
            os.mkfifo(path)
        elif content != "missing":
            path.write_text(content)
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()
                  and p.name != "fifo"}
        code, out, err = run_cli(capsys, *TINY, "--json", str(path))
        assert code == 2 and err.count("\n") == 1 and str(path) in err and not out, (name, err)
        assert {p: p.read_bytes() for p in before} == before and not list(
            tmp_path.rglob("*.tmp")), name
    real = open
    monkeypatch.setattr("builtins.open", lambda f, mode="r", *a, **k: (_ for _ in ()).throw(
        OSError(30, "Read-only file system")) if "w" in mode or "x" in mode else real(
        f, mode, *a, **k))
    code, out, err = run_cli(capsys, *TINY, "--json", str(tmp_path / "new.json"))
    assert code == 2 and "Read-only file system" in err and str(tmp_path / "new.json") in err
    monkeypatch.undo()
    first = summary.read_text()
    assert run_cli(capsys, *TINY, "--seed", "1", "--json", str(summary))[0] == 0
    assert summary.read_text() != first and json.loads(summary.read_text())["seed"] == 1


# ===============================================================================================
# theory.py: the numerical helpers, capacity, the hand-built head, the probabilistic reading, its command line
# ===============================================================================================

def cubic(x):  # f(X) = sum(X^3) + X[0, 1] X[1, 2]; X [2, 3]
    return float((x ** 3).sum() + x[0, 1] * x[1, 2])


def cubic_grad(x):  # -> [2, 3]
    g = 3 * x ** 2
    g[0, 1] += x[1, 2]
    g[1, 2] += x[0, 1]
    return g


def test_numerical_jacobian_of_a_scalar_is_a_known_gradient_on_a_2x3_array():
    x = np.random.default_rng(0).standard_normal((2, 3)) + 0.5
    before = x.copy()
    g = theory.numerical_jacobian(cubic, x)
    assert g.shape == (2, 3) and g.dtype == np.float64
    assert attn.rel_error(g, cubic_grad(x)) < 1e-8
    assert np.array_equal(x, before)                   # every element restored exactly


def test_numerical_jacobian_can_fail():
    x = np.random.default_rng(1).standard_normal((2, 3)) + 0.5
    wrong = 3 * x ** 2                                  # forgets the cross term X[0,1] X[1,2]
    assert attn.rel_error(theory.numerical_jacobian(cubic, x), wrong) > 1e-2


def test_numerical_jacobian_sees_x_through_a_closure():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    params = {"x": x}                                   # f reads x elsewhere, ignores its argument
    g = theory.numerical_jacobian(lambda _: float((params["x"] ** 2).sum()), x)
    assert attn.rel_error(g, 2 * x) < 1e-9


def test_numerical_jacobian_restores_x_when_f_raises():
    x = np.zeros(3)

    def boom(v):
        raise RuntimeError("f failed")
    with pytest.raises(RuntimeError, match="f failed"):
        theory.numerical_jacobian(boom, x)
    assert np.array_equal(x, np.zeros(3))


def test_numerical_jacobian_shape_and_values():
    x = np.random.default_rng(2).standard_normal((2, 3))
    M = np.random.default_rng(3).standard_normal((4, 2, 3))
    J = theory.numerical_jacobian(lambda v: np.tensordot(M, v, axes=2), x)   # [4] -> [4, 2, 3]
    assert J.shape == (4, 2, 3) and attn.rel_error(J, M) < 1e-9
    v = np.array([1.0, -2.0, 0.5])
    J = theory.numerical_jacobian(lambda u: 2 * u ** 2, v)                    # [k, d] for 1-D
    assert J.shape == (3, 3) and attn.rel_error(J, np.diag(4 * v)) < 1e-9


def test_rel_error_known_values():
    assert attn.rel_error(np.ones((2, 2)), np.ones((2, 2))) == 0.0
    assert attn.rel_error([3.0, 4.0], [0.0, 0.0]) == 1.0            # 5 / max(5, 0)
    assert attn.rel_error([1.0, 0.0], [-1.0, 0.0]) == 2.0           # the largest possible
    assert abs(attn.rel_error([3.0, 4.0], [3.0, 4.5]) - 0.5 / np.hypot(3, 4.5)) < 1e-15
    assert attn.rel_error(0.0, 0.0) == 0.0                           # 0 / 1e-300
    assert np.isnan(attn.rel_error([np.nan], [1.0]))                 # `< tol` then fails
    # L2 over all entries, not the max-abs ratio: (3, 4) vs (3, 0) is 4/5, not 4/4
    assert abs(attn.rel_error([3.0, 4.0], [3.0, 0.0]) - 0.8) < 1e-15


def test_softmax_lipschitz_at_most_2_and_search_reaches_near_1():
    r = theory.softmax_lipschitz_search(np.random.default_rng(0), n_random=1200, n_climb=150)
    assert r["overall"] <= 2.0                       # the paper's Corollary A.7
    assert r["overall"] <= 1.0 + 1e-9                # the tight constant
    assert r["constructed"] > 0.99                   # the search really approaches the worst case


def test_softmax_ratio_known_value():
    # a = 0, b = (+e, -e): ||softmax(a) - softmax(b)||_1 = tanh(e), ratio tanh(e) / e
    for e in (1e-2, 0.5, 3.0):
        r = theory.softmax_l1_linf_ratio(np.zeros(2), np.array([e, -e]))
        assert abs(r - math.tanh(e) / e) < 1e-12


def test_norm_measures_known_matrices():
    cfg = attn.default_config(T=3, d=4, heads=2, mlp=0, ln=False, dtype="float64")
    p = attn.init_params(cfg, np.random.default_rng(0), std=0.0)
    p["W_Q"][:] = np.diag([2.0, 1.0, 1.0, 1.0])
    p["W_K"][:] = np.diag([3.0, 1.0, 1.0, 1.0])
    p["W_V"][:] = np.eye(4)
    p["W_O"][:] = 5 * np.eye(4)
    p["E_pos"][0, 0] = 3.0                               # the longest token row, norm 3 (bit 0)
    p["w"][0] = 2.0
    nm = theory.norm_measures(p, cfg)
    e = 2
    assert abs(nm["qk_spec"][0] - 6.0 / math.sqrt(e)) < 1e-12   # diag(2,1) diag(3,1) / sqrt(e)
    assert abs(nm["qk_fro"][1] - math.sqrt(2) / math.sqrt(e)) < 1e-12
    assert abs(nm["v_21"][0] - 2.0) < 1e-12
    assert abs(nm["o_spec"][0] - 5.0) < 1e-12
    assert abs(nm["B_X"] - math.hypot(3.0, 1.0)) < 1e-12       # bias coordinate folded in
    assert nm["L_after"] == 2.0
    assert (nm["B_X_token"], nm["B_X_position"]) == ("bit0", 0)     # where B_X comes from
    assert math.isnan(nm["ln1_gain_rms"]) and math.isnan(nm["ln1_shift_norm"])   # no LN1


def test_bound_grows_like_log_T_and_halfspaces_like_T():
    C, d = 1e4, 64
    head = [theory.samples_for_gap(C, d, T, 0.1) for T in (10, 10 ** 6)]
    lin = [theory.linear_class_samples(T, 0.1) for T in (10, 10 ** 6)]
    assert 1.0 < head[1] / head[0] < 1.6
    assert lin[1] / lin[0] > 1e5
    m = theory.samples_for_gap(C, d, 100, 0.1)
    assert theory.generalization_gap(C, d, m, 100) <= 0.1
    assert theory.generalization_gap(C, d, m - 5, 100) > 0.1


def _build(name, T, s, seed=0):
    task = data.make_task(name, T, s, np.random.default_rng([T, s, seed]))
    p, cfg, info = theory.build_sparse_head(task, np.random.default_rng([T, s, seed, 1]))
    return task, p, cfg, info


def test_construction_width_and_the_papers_score_gap():
    """The code width max(8, ceil(16 s ln T)) the head is built with, and the paper's gap
    R = ln((T - s)/(s eps)), which the built head's R follows within a constant (eps = its leak)."""
    assert theory.construction_width(300, 3) == 274 and theory.construction_width(2, 1) == 12
    assert theory.construction_width(1, 1, code_factor=1.0) == 8                 # the floor
    assert abs(theory.paper_score_gap(103, 3, 0.01) - math.log(100 / 0.03)) < 1e-12
    assert np.allclose(theory.paper_score_gap([13, 103], 3, 0.1), np.log([10 / 0.3, 100 / 0.3]))
    for T in (100, 1000):
        info = _build("and", T, 3)[3]
        assert info["d_p"] == theory.construction_width(T, 3)
        assert abs(info["R"] - theory.paper_score_gap(T, 3, info["spacing"] / 4)) < 1.0


@pytest.mark.parametrize("T,s", [(10, 1), (10, 5), (100, 3), (1000, 4), (10000, 2)])
def test_construction_exact(T, s):
    for name in data.TASKS:
        if name == "majority" and s % 2 == 0:
            continue
        task, p, cfg, info = _build(name, T, s)
        c = theory.check_construction(p, cfg, task, np.random.default_rng(9), n_fill=3)
        assert c["n"] == 2 ** s * 5
        assert c["wrong"] == 0, (name, T, s, c)
        assert c["margin"] >= 0.5, (name, T, s, c)


def test_construction_exact_on_a_larger_junta():
    task, p, cfg, info = _build("junta", 200, 6)
    c = theory.check_construction(p, cfg, task, np.random.default_rng(2), n_fill=1)
    assert c["wrong"] == 0 and c["margin"] >= 0.5 and info["units"] > 6


def test_construction_same_on_all_three_paths():
    task, p, cfg, info = _build("parity", 20, 3)
    X = task.sample(16, np.random.default_rng(3))[0]
    z = [forward(p, cfg, X, path)[0] for path in PATHS]
    assert np.abs(z[0] - z[1]).max() < 1e-9 and np.abs(z[0] - z[2]).max() < 1e-9
    A = attn.cls_attention(p, cfg, X)[:, 0]
    assert np.allclose(A[:, task.S].sum(1), info["mass_on_S"], atol=1e-12)


def test_construction_check_can_fail():
    task, p, cfg, info = _build("majority", 50, 3)
    bad = dict(p, w=-p["w"])                                   # readout flipped: every answer wrong
    c = theory.check_construction(bad, cfg, task, np.random.default_rng(0))
    assert c["wrong"] == c["n"]
    weak = dict(p, W_K=p["W_K"] * 0.2)                          # R too small: the leak breaks it
    assert theory.check_construction(weak, cfg, task, np.random.default_rng(0))["wrong"] > 0


def test_qk_norm_grows_like_log_T():
    q = [_build("and", T, 3)[3]["qk_spec"] for T in (10, 100, 1000)]
    assert q[0] < q[1] < q[2]
    ratios = [v / math.log(T) for v, T in zip(q, (10, 100, 1000))]
    assert all(1.0 < r < 4.0 for r in ratios)                  # ~ log T, not a power of T


def test_junta_decoder_grows_faster_than_parity():
    junta = [_build("junta", 50, s)[3]["decoder_norm"] for s in (2, 4)]
    parity = [_build("parity", 50, s)[3]["decoder_norm"] for s in (2, 4)]
    assert junta[1] / junta[0] > 2 * parity[1] / parity[0]


def test_lse_gradient_is_attention():
    g = theory.check_lse_gradient(np.random.default_rng(11))
    assert g["formula"] < 1e-7 and g["head"] < 1e-7
    assert g["grad_norm"] > 0.1                                # not 0 against 0
    K, q = np.random.default_rng(1).standard_normal((5, 3)), np.ones(3)
    fd = theory.numerical_jacobian(lambda x: theory.lse(K @ x, 2.0), q)
    assert attn.rel_error(theory.lse_grad(K, q, 1.0), fd) > 1e-3   # a wrong beta is caught


def test_lse_hessian_is_beta_covariance_and_psd():
    h = theory.check_lse_hessian(np.random.default_rng(12))
    assert h["rel_err"] < 1e-6 and h["min_eig"] > -1e-8 and h["max_eig"] > 0.1
    assert h["asym"] < 1e-6


def test_tied_residual_attention_expands():
    t = theory.check_tied_expansion(np.random.default_rng(13), trials=150)
    assert t["min_ratio"] >= 1 - 1e-9
    assert t["min_logdet"] >= -1e-12 and t["min_lse_rise"] >= -1e-12 and t["jac_err"] < 1e-6
    # the same measurement on an untied map finds a shrinking pair, so the check can fail
    assert theory.demo_untied(np.random.default_rng(13), tries=10) < 1.0


def test_layernorm_jacobian_norm_is_one_over_sigma():
    ln = theory.check_layernorm(np.random.default_rng(14))
    assert ln["jac_rel_err"] < 1e-5
    assert ln["norm_max"] > 2 and ln["norm_min"] < 0.5            # both regimes were tested
    assert ln["max_ratio_sigma_ge_1"] <= 1 + 1e-12 and ln["pairs"] > 100
    x = np.array([0.0, 0.1, -0.1, 0.05])                           # sigma << 1: LN expands
    assert theory.layernorm_jacobian_norm(x) > 5


def test_infonce_gradient_is_attention_readout():
    r = theory.check_infonce(np.random.default_rng(15))
    assert r["rel_err"] < 1e-7 and r["grad_norm"] > 0.05


@pytest.mark.parametrize("call,match", [
    # theory.py's doors; its internals (lse, positional_codes, ...) take what numpy takes
    (lambda: theory.samples_for_gap(-1.0, 8, 10, 0.1), "C must be a finite number > 0, got -1.0"),
    (lambda: theory.samples_for_gap(1.0, 8, 0, 0.1), "T must be an integer >= 1, got 0"),
    (lambda: theory.samples_for_gap(1.0, 8, 10, 1e-300), "gap 1e-300 is too small for C = 1.0"),
    (lambda: theory.linear_class_samples(10, 1e-300), "gap 1e-300 is too small for T = 10"),
    (lambda: train.accuracy(np.array([1.0, -1.0]), np.array([2, 0])), "y must hold labels 0 and 1"),
    (lambda: theory.build_sparse_head("and", np.random.default_rng(0)),
     "task must be a data.SparseTask, got 'and'"),
    (lambda: theory.build_sparse_head(data.make_task("and", 10, 3, np.random.default_rng(0)), 42),
     "rng must be a numpy Generator, got 42"),
    (lambda: theory.construction_width(100, 3, code_factor=0), "code_factor must be a finite "
                                                               "number > 0 and < 1000000, got 0"),
    (lambda: theory.paper_score_gap([10, 3], 3, 0.1), r"T must be integers > s = 3, got \[10, 3\]"),
    (lambda: theory.covering_constant({"B_X": 1.0}), "nm must be the dict returned by norm_"),
    (lambda: theory.construction_width(T=3, s=5), "s must be an integer >= 1 and < 4, got 5"),
    (lambda: theory.covering_constant(NM_DAMAGES["nan norms (nan weights)"]), re.escape(
        "nm['qk_fro'] must be a 1-D array of finite real numbers >= 0.0, got [nan, 1.0]")),
    (lambda: theory.covering_parts(NM_DAMAGES["lists of two lengths"]), re.escape(
        "nm's per-head lists must have one length, got [2, 2, 2, 1]")),
    (lambda: theory.covering_from_parts(2.0, -1.0, 0.3, 4.0, 1.9), "L_after must be a number or "
                                                                   "an array of finite real "
                                                                   "numbers >= 0.0, got -1.0"),
    (lambda: theory.fit_line([1.0, 1.0], [2.0, 3.0]), "at least 2 distinct values"),
    (lambda: theory.numerical_jacobian(len, [1.0]), "float64 numpy array"),
    (lambda: theory.check_construction(*_theory_head(), np.random.default_rng(0), path="slow"),
     "path must be 'fast', 'cls' or 'full', got 'slow'"),
    (lambda: theory.main("--help"), "argv must be a list of strings, got '--help'"),
])
def test_bad_arguments_raise_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as e:
        call()
    assert "\n" not in str(e.value)


def run_theory(*args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "theory.py", *args], cwd=HERE, capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_and_does_not_run_the_report(flag):
    r = run_theory(flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: theory.py")
    assert "Lipschitz" not in r.stdout and "theorem check failed" not in r.stdout
    assert "training" not in r.stdout and r.stderr == ""


@pytest.mark.parametrize("args", [["--bogus"], ["--he"], ["extra"]])
def test_unknown_argument_is_one_line_and_exit_2(args):
    r = run_theory(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("theory.py: error:"), r.stderr
    assert args[0] in lines[0]


def test_covering_constant_regrouped_by_factor_is_the_same_sum():
    """Issue 38: C = L_after^2 (B_X^2 S_scores + B_X^(2/3) (S_values + S_readout))^3 from the
    head sums (theory.covering_parts) equals covering_constant's head-by-head sum, on trained-like
    random weights (ReLU MLP, GELU MLP, no MLP); and the regrouping's promise holds against the
    norms measured again: every W_O (or W_V) times a gives C times a^2, the readout w times a
    gives C times a^2, every W_QK (through W_Q) times a changes only S_scores, by a^(2/3)."""
    rng = np.random.default_rng(5)
    for mlp, act in ((16, "relu"), (16, "gelu"), (0, "relu")):
        cfg = attn.default_config(T=7, d=8, heads=2, mlp=mlp, act=act, dtype="float64")
        p = attn.init_params(cfg, rng, std=0.7)
        nm = theory.norm_measures(p, cfg)
        parts = theory.covering_parts(nm)
        C = theory.covering_constant(nm)
        assert abs(theory.covering_from_parts(nm["B_X"], nm["L_after"], **parts) / C - 1) < 1e-12
        assert nm["L_after"] == nm["readout_norm"] * nm["mlp_factor"]
        assert (nm["mlp_factor"] == 1.0) == (mlp == 0)
        a = 1.7
        for key in ("W_O", "w", "W_V", "W_Q"):
            q = dict(p)
            q[key] = p[key] * a
            if key == "W_V":
                q["b_V"] = p["b_V"] * a
            if key == "W_Q":
                q["b_Q"] = p["b_Q"] * a
            nq = theory.norm_measures(q, cfg)
            if key == "W_Q":
                pq = theory.covering_parts(nq)
                assert abs(pq["heads_scores"] / parts["heads_scores"] - a ** (2 / 3)) < 1e-12
                assert pq["heads_values"] == parts["heads_values"]
                want = theory.covering_from_parts(nm["B_X"], nm["L_after"],
                                                  parts["heads_scores"] * a ** (2 / 3),
                                                  parts["heads_values"], parts["heads_readout"])
            else:
                want = C * a ** 2
            assert abs(theory.covering_constant(nq) / want - 1) < 1e-12, key
    with pytest.raises(ValueError, match="must be the dict returned by norm_measures"):
        theory.covering_parts({"B_X": 1.0})


# ===============================================================================================
# the root's hostile-value walk: every public function of the reference refuses by name (the WALK table above)
# ===============================================================================================

def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """Issue 39: fast.activation_bytes(B=-1) returned a size, optim.adam_step(state without 't')
    a KeyError, and other functions beyond attn.py's entry points took impossible values. The
    walker calls every public function of the reference (ROOT_WALKED) with issue 39's hostile
    values in each argument; a public function without a WALK entry fails too, so that a new one
    cannot escape the walk. attn.py's ops are exempt in one place (WALK_EXEMPT, issue 40:
    textbook bodies), and an exempt op that checks its arguments fails; train.py's inside is
    exempt behind its doors (TRAIN_INSIDE, issue 51)."""
    public = {k: v for m in ROOT_WALKED for k, v in public_functions(m).items()}
    table, exempt = walk_table(ROOT_WALKED), {**WALK_EXEMPT, **TRAIN_INSIDE}
    assert not set(table) & set(exempt)
    assert not set(public) - set(table) - set(exempt), f"public functions without a WALK " \
        f"entry: {sorted(set(public) - set(table) - set(exempt))}"
    stale = {k for k in {**table, **exempt} if k not in public}
    assert not stale, f"WALK entries of no public function: {sorted(stale)}"
    checking = [k for k in WALK_EXEMPT if re.search(r"\bcheck_(?!model\()\w+\(|\brefuse\(|\braise\b",
                                                     inspect.getsource(public[k]))]
    assert not checking, f"exempt ops that check their arguments after all: {checking}"
    assert_walked(public, table, least=800)


# ===============================================================================================
# the house and the front page: files copied alone, maths first, imports that point down, the pages' numbers
# ===============================================================================================

def test_readme_snippets_run_with_only_their_files(tmp_path):
    """Vendoring as the README shows it: each snippet, verbatim, in an empty folder with only the
    files its line names; every copyable file has one; a file it does not name is missing."""
    snippets = readme_snippets()
    assert {f for files, _ in snippets for f in files} == {"attn.py", "data.py", "fast.py",
                                                           "optim.py", "train.py"}
    runs = []                   # every snippet started first, then each awaited: side by side
    try:
        for i, (files, code) in enumerate(snippets):
            where = tmp_path / str(i)
            where.mkdir()
            runs.append((files, start_alone(files, ["-c", code], where)))
        files, code = next(s for s in snippets if s[0] == ["attn.py", "fast.py"])
        (tmp_path / "short").mkdir()
        short = start_alone(["attn.py"], ["-c", code], tmp_path / "short")   # without fast.py
        runs.append((None, short))
        for files, p in runs:
            out, err = p.communicate(timeout=120)
            if p is short:                                                     # it fails
                assert p.returncode == 1 and "No module named 'fast'" in err, err
            else:
                assert p.returncode == 0 and out.strip(), (files, err)
    finally:
        for _, p in runs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_attn_py_is_the_reference_alone_and_no_module_uses_anothers_private_names():
    """attn.py imports numpy and the standard library only; its model functions take no path
    switch (the fast path is fast.py's); no project file imports or reads another's _name."""
    import ast
    import inspect
    project = {os.path.basename(f)[:-3] for f in glob.glob(os.path.join(HERE, "*.py"))}
    tree = source_tree(os.path.join(HERE, "attn.py"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                     if isinstance(n, ast.ImportFrom)}
    assert imported <= {"collections", "math", "os", "reprlib", "signal", "sys", "numpy"}, \
        imported
    for f in (attn.model_forward, attn.full_model_forward, attn.model_backward,
              attn.loss_and_grads, attn.cls_attention, fast.model_forward, fast.loss_and_grads):
        assert "path" not in inspect.signature(f).parameters, f.__name__
    offences = []
    for path in sorted(glob.glob(os.path.join(HERE, "*.py"))):
        name = os.path.basename(path)[:-3]
        for n in ast.walk(source_tree(path)):
            if isinstance(n, ast.ImportFrom) and n.module in project - {name}:
                offences += [f"{name}: from {n.module} import {a.name}" for a in n.names
                             if a.name.startswith("_")]
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id in project - {name} and n.attr.startswith("_")
                    and not n.attr.startswith("__")):
                offences.append(f"{name}: {n.value.id}.{n.attr}")
    assert not offences, offences


def test_the_reference_files_put_their_maths_first_and_their_checks_last():
    """attn.py, fast.py, optim.py and data.py read maths first: every argument check (describe, check_*,
    _check_*, but not the self-check's check_model) is defined after every other function, and
    no process bookkeeping (a signal handler) runs before the maths is defined. The test can
    fail: a check helper moved up, or a handler installed at import."""
    import ast
    for m in (attn, fast, optim, data):
        src = inspect.getsource(m)
        defs = [(n.lineno, n.name) for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)]
        is_check = lambda name: re.match(r"(_?check_|describe$)", name) and name != "check_model"
        checks = [line for line, name in defs if is_check(name)]
        maths = [line for line, name in defs if not is_check(name)]
        assert checks and maths and min(checks) > max(maths), m.__name__
        top = src[:src.index('if __name__ == "__main__":')] if m is attn else src
        assert "signal.signal(" not in top, m.__name__


def test_the_house_points_down_with_no_cycle_and_no_unused_import():
    """Issue 44: the reference at the root imports no study; theory.py imports only attn, data
    and fast (it can be copied beside them); attn.py and data.py import no project file; no
    cycle among the root's modules; none imports a name it never uses. Issue 51: train.py's whole
    import closure is attn, data, fast and optim (the five files run the demo alone). The check
    that the root imports no study can fail: the scan reads the studies' imports too, and they do
    reach the root (mechanism -> theory, trainer -> train). The studies' own structure is
    studies/test_layout.py's."""
    graph, unused = project_graph()
    root = {m for m in graph if not m.startswith("studies.")}
    assert {"attn", "data", "fast", "train", "theory"} <= root and "studies.sweep" in graph
    up = {m: sorted(i for i in graph[m] if i.startswith("studies")) for m in root}
    assert not any(up.values()), {m: v for m, v in up.items() if v}
    assert graph["theory"] <= {"attn", "data", "fast"}, sorted(graph["theory"])
    assert not graph["attn"] and not graph["data"], (graph["attn"], graph["data"])
    assert "theory" in graph["studies.mechanism"] and "train" in graph["studies.trainer"]
    closure, todo = set(), ["train"]
    while todo:
        for n in graph[todo.pop()] - closure:
            closure.add(n)
            todo.append(n)
    assert closure == {"attn", "data", "fast", "optim"}, sorted(closure)
    cycle = find_cycles({m: graph[m] & root for m in root})
    assert not cycle, cycle
    assert not {m: u for m, u in unused.items() if u and m in root}, {
        m: sorted(u) for m, u in unused.items() if u and m in root}


def find_cycles(graph):
    """[the path of each cycle found] in {module: the modules it imports} (depth first)."""
    state, cycle = {}, []

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                cycle.append(path + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycle


def test_theory_defines_no_name_another_module_defines():
    """One contract per name: a function or constant theory.py defines is defined nowhere else in
    the project, the studies included (attn.py's numerical_gradient calls f(); theory's
    numerical_jacobian calls f(x))."""
    import ast

    def defined(path):
        tree = source_tree(path)
        return ({n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
                | {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Name)})
    ours = {n for n in defined(os.path.join(HERE, "theory.py")) if not n.startswith("_")} - {
        "main"}                                                                 # each command's
    assert {"norm_measures", "covering_constant", "construction_width", "numerical_jacobian",
            "fit_line"} <= ours
    files = glob.glob(os.path.join(HERE, "*.py")) + glob.glob(os.path.join(HERE, "studies", "**", "*.py"),
                                                        recursive=True)
    clashes = {os.path.relpath(f, HERE) + f":{n}" for f in files
               if os.path.basename(f) != "theory.py" and not os.path.basename(f).startswith("test_")
               for n in ours & defined(f)}
    assert not clashes, sorted(clashes)


def _intervals(text):
    """Every interval written [a, b] in a text, thousands separators dropped: {"[a, b]"}."""
    return {f"[{a.replace(',', '')}, {b.replace(',', '')}]" for a, b in INTERVAL.findall(text)}


def test_every_interval_on_the_front_page_and_the_study_pages_is_one_a_results_file_holds():
    held = set()
    for ext in ("md", "json", "csv"):
        for path in glob.glob(os.path.join(HERE, "results", "**", f"*.{ext}"), recursive=True):
            if os.path.basename(path) != "README.md":      # a page is not where numbers come from
                held |= _intervals(open(path).read())
    page = open(os.path.join(HERE, "README.md")).read()
    front = _intervals(re.sub(r"```.*?```", "", page, flags=re.S))   # code holds shapes, [300, 200]
    assert len(front) >= 20                               # the table's and the verdict's
    assert not front - held, f"intervals no results file holds: {sorted(front - held)}"
    for path in glob.glob(os.path.join(HERE, "results", "**", "README.md"), recursive=True):
        study = _intervals(re.sub(r"```.*?```", "", open(path).read(), flags=re.S))
        assert not study - held, f"{path}: intervals no results file holds: {sorted(study - held)}"
    assert _intervals("1,360 [475, 2,850] and [-17.1, -3.7], [580, inf]") == {
        "[475, 2850]", "[-17.1, -3.7]", "[580, inf]"}      # the pattern itself
    assert _intervals("[~40, ~6e+06]") == {"[~40, ~6e+06]"}


def test_the_verdict_is_at_most_six_short_bullets_each_with_an_interval_and_a_link():
    page = open(os.path.join(HERE, "README.md")).read()
    verdict = page[page.index("## Verdict"):]
    verdict = verdict[:verdict.index("\n## ")]
    bullets = re.findall(r"^- (.*?)(?=^- |\n\n|\Z)", verdict, re.S | re.M)
    assert 1 <= len(bullets) <= 6
    for b in bullets:
        assert len(b.split()) <= 60, b
        assert _intervals(b) and re.search(r"\]\((results/[^)]+README\.md)\)", b), b
    assert page.index("## Run it") < page.index("## The answer") < page.index("## Verdict")
    assert len(page[:page.index("## Run it")].split()) < 200      # the commands on the first screen
