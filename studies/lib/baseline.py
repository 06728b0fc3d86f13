"""baseline.py (studies/lib): the baseline without attention, an MLP on the raw bits (Section 5's
comparison).

    logit = act(x W_1 + b_1) W_2 + b_2        x [T] bits, W_1 [T, hidden], W_2 [hidden, 1]

The paper sets it beside the Transformer: an MLP on the bits is rotation invariant, so it cannot
find the s bits that matter without seeing of the order of T samples, where the Transformer's
attention needs of the order of log T. the studies' trainer trains it with `--model mlp`.

It runs on fast.py's tuned MLP ops (mlp_forward and mlp_backward, which test_all.py checks
against attn.py's textbook ops) and uses attn.py's argument checks, so it needs fast.py, attn.py
and numpy; copy the three.
Shapes: B batch, T bits, k = hidden units.
"""
import numpy as np

import attn
import fast

from studies.lib import checks
from studies.lib.checks import WrongType, check_01, check_array, check_choice, describe

KEYS = ("W_1", "b_1", "W_2", "b_2")


def param_shapes(T, hidden):
    """{name: shape} of the parameters, in init order."""
    for name, v in (("T", T), ("hidden", hidden)):
        checks.check_number(name, v, checks.INTS, 1, float("inf"), "an integer >= {lo}")
    return dict(W_1=(T, hidden), b_1=(hidden,), W_2=(hidden, 1), b_2=(1,))


def init(T, hidden, rng, dtype="float32", std=0.02):
    """The parameters W_1 [T, k], b_1 [k], W_2 [k, 1], b_2 [1]: the Transformer's init, weights
    N(0, std^2) and biases 0."""
    dt = _check_init(T, hidden, rng, dtype, std)
    return dict(W_1=(std * rng.standard_normal((T, hidden))).astype(dt), b_1=np.zeros(hidden, dt),
                W_2=(std * rng.standard_normal((hidden, 1))).astype(dt), b_2=np.zeros(1, dt))


def forward(p, X, act="gelu"):  # [B, T] bits -> logits [B], cache
    _check_forward(p, X, act)
    z, cache = fast.mlp_forward(X.astype(p["W_1"].dtype, copy=False), p["W_1"], p["b_1"],
                                p["W_2"], p["b_2"], act)
    return z[:, 0], cache


def backward(dz, cache):  # dL/dlogits [B] -> gradients of the parameters, by name
    _check_dz(dz, cache)
    _, dW_1, db_1, dW_2, db_2 = fast.mlp_backward(dz[:, None], cache, need_dx=False)  # no dX
    return dict(W_1=dW_1, b_1=db_1, W_2=dW_2, b_2=db_2)


# ---------------------------------------------------------------------------------------------
# the checks: one line that names the bad argument and says what is allowed (as in attn.py)

def _check_init(T, hidden, rng, dtype, std):
    """init's arguments and the memory of its parameters; -> the dtype."""
    param_shapes(T, hidden)                           # checks T and hidden
    dt = checks.float_dtype("dtype", dtype)
    checks.check_rng(rng)
    checks.check_number("std", std, checks.REALS, 0, float("inf"), "a finite number >= 0 (the init's "
                      "standard deviation)")
    checks.check_memory((T + 2) * hidden * (dt.itemsize + 8),
                       f"a baseline of T={T} and {hidden} hidden units", "for its parameters",
                       "use a smaller T or fewer hidden units")
    return dt


def _check_forward(p, X, act):
    """The parameters as init gives them (all of one float dtype), the activation and the bits
    X [batch >= 1, T]."""
    if not isinstance(p, dict):
        raise WrongType(f"params must be a dict {list(KEYS)} from baseline.init, got {describe(p)}")
    if set(p) != set(KEYS):
        raise ValueError(f"params must have exactly the keys {list(KEYS)} of baseline.init, got "
                         f"{sorted(p, key=str)}")
    W_1 = p["W_1"]
    check_array("param W_1", W_1, attn.FLOAT_DTYPES, lambda s: len(s) == 2 and min(s) >= 1,
                 "a numpy array [T, hidden] of float32 or float64")
    what = f"a numpy array of shape {{shape}} (hidden={W_1.shape[1]}) in W_1's dtype {W_1.dtype}"
    for name, shape in (("b_1", W_1.shape[1:]), ("W_2", W_1.shape[1:] + (1,)), ("b_2", (1,))):
        check_array("param " + name, p[name], (W_1.dtype,), shape, what)
    check_choice("act", act, attn.ACTIVATIONS)
    T = W_1.shape[0]
    check_array("X", X, "biuf", lambda s: len(s) == 2 and s[1] == T and s[0] >= 1,
                 f"a numpy array [batch >= 1, T={T}] of bits (dtype bool, integer or float)")
    check_01("X", X, "bits")


def _check_dz(dz, cache):
    """dz: a number per logit of the forward call that made `cache`, which forward returned."""
    if not (isinstance(cache, tuple) and len(cache) == 4 and isinstance(cache[0], tuple)):
        raise WrongType(f"cache must be the cache that baseline.forward returned, got "
                        f"{describe(cache)}")
    want = cache[0][0].shape[:1]                                      # the cache's X [B, T]
    check_array("dz", dz, "biuf", want, "a numpy array of numbers in the logits' shape {shape}")
