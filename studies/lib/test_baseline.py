"""test_baseline.py: the tests of studies/lib/baseline.py.

Run from the repository's root: python -m pytest -q
"""

import numpy as np
import pytest

import attn
import fast
from studies.lib import baseline
from studies.conftest import walk_modules
from test_all import NO_ALLOC, P_NAMES, WX, Walk, api_case, bit_damages, refused_in_one_line, check


def test_baseline_mlp_gradients():
    rng = np.random.default_rng(11)
    p = baseline.init(7, 5, rng, "float64", std=0.7)
    for k in p:
        p[k] += 0.3 * rng.standard_normal(p[k].shape)
    X = rng.integers(0, 2, (6, 7))
    dz = rng.standard_normal(6)
    g = baseline.backward(dz, baseline.forward(p, X)[1])
    for k in p:
        check(f"baseline {k}", g[k], lambda: baseline.forward(p, X)[0] @ dz, p[k])


def test_api_takes_numpy_arrays_and_generators_only():
    """Issue 23: X as a list (or a tuple, a scalar), of the wrong dtype, shape or values is refused
    by name at every door, never read by numpy deep inside; rng must be a numpy Generator (None
    where dropout may be off); dropout's p and params are checked at the door too."""
    cfg, p, X, y = api_case()
    pb = baseline.init(4, 3, np.random.default_rng(0))
    for bad in (X.tolist(), tuple(map(tuple, X)), 7, None, X.astype(complex), X.astype(str),
                X[None], X[:0], X * 2, X - 0.5):
        refused_in_one_line(r"X must be a numpy array \[batch >= 1, T(=4)?\] .*of 0s and 1s, got",
                             lambda: attn.model_forward(p, cfg, bad),
                             lambda: attn.full_model_forward(p, cfg, bad),
                             lambda: attn.loss_and_grads(p, cfg, bad, y),
                             lambda: attn.cls_attention(p, cfg, bad),
                             lambda: fast.cls_attention_mean(p, cfg, bad))
        if not (isinstance(bad, np.ndarray) and bad.ndim == 3):           # a stack, to fast.py
            refused_in_one_line(r"X must be a numpy array \[batch >= 1, T(=4)?\] \(or \[runs",
                                 lambda: fast.model_forward(p, cfg, bad),
                                 lambda: fast.loss_and_grads(p, cfg, bad, y),
                                 lambda: fast.two_versions(bad, np.float32))
    for bad in (X.tolist(), 7, None):
        refused_in_one_line(r"X must be a numpy array \[batch", lambda: baseline.forward(pb, bad),
                             kind=TypeError)
    cfg_d = attn.default_config(**dict(cfg, dropout=0.2))
    for bad in (5, "seed", np.random.RandomState(0), [1, 2]):
        refused_in_one_line(r"rng (must be None or )?a numpy Generator",
                             lambda: attn.init_params(cfg, bad),
                             lambda: attn.loss_and_grads(p, cfg_d, X, y, rng=bad),
                             lambda: attn.model_forward(p, cfg_d, X, rng=bad),
                             lambda: attn.model_forward(p, cfg, X, rng=bad))
    refused_in_one_line(r"init_params needs rng a numpy Generator .*, got rng=None",
                         lambda: attn.init_params(cfg, None))
    for bad in (1.0, -0.1, float("nan"), "0.1"):               # dropout's p, at the entry point
        refused_in_one_line(r"dropout must be a probability in \[0, 1\)",
                             lambda: attn.model_forward(p, dict(cfg_d, dropout=bad), X,
                                                        rng=np.random.default_rng()))
    for bad in ([1], None, "params", {}):
        refused_in_one_line(r"params must be the dict init_params\(cfg, rng\) gives",
                             lambda: attn.model_forward(bad, cfg, X),
                             lambda: fast.model_forward(bad, cfg, X))


def test_baseline_refuses_unusable_hidden_sizes_dtypes_and_arguments():
    """Issue 23: baseline.init with 0 hidden units or an integer dtype returned parameters that
    no step could use; now every argument is named, and the forward and backward check theirs."""
    rng = np.random.default_rng(0)
    for bad in (0, -3):
        refused_in_one_line(f"hidden must be an integer >= 1, got {bad}",
                             lambda: baseline.init(4, bad, rng))
    for bad in (2.5, "4", True, None):
        refused_in_one_line("hidden must be an integer >= 1",
                             lambda: baseline.init(4, bad, rng), kind=TypeError)
    for bad in (0, -1, 4.0):
        refused_in_one_line("T must be an integer >= 1", lambda: baseline.init(bad, 3, rng))
    for bad in ("int32", np.int64, "float16", None, "bogus", "complex128"):
        refused_in_one_line("dtype must be 'float32' or 'float64'",
                             lambda: baseline.init(4, 3, rng, bad))
    for bad in (-0.1, float("nan"), float("inf"), "0.02", None):
        refused_in_one_line(r"std must be a finite number >= 0",
                             lambda: baseline.init(4, 3, rng, std=bad))
        refused_in_one_line(r"init_params needs .* std a finite number >= 0, got .*std=",
                             lambda: attn.init_params(attn.default_config(T=4, d=4, heads=1),
                                                      rng, std=bad))
    refused_in_one_line("GiB for its parameters", lambda: baseline.init(10**6, 10**6, rng))
    a = baseline.init(4, 3, np.random.default_rng(1), np.float64)    # a numpy type, as before
    b = baseline.init(4, 3, np.random.default_rng(1), "float64")
    assert all(np.array_equal(a[k], b[k]) and a[k].dtype == np.float64 for k in a)
    X = np.array([[0, 1, 0, 1], [1, 1, 0, 0]], np.uint8)
    z, cache = baseline.forward(a, X)
    refused_in_one_line("act must be one of", lambda: baseline.forward(a, X, act="tanh"),
                         lambda: baseline.forward(a, X, act=["relu"]))
    refused_in_one_line(r"param W_1 must be .* of float32 or float64, got .* dtype int64",
                         lambda: baseline.forward({k: v.astype(np.int64)
                                                        for k, v in a.items()}, X))
    refused_in_one_line(r"param b_2 must be .* in W_1's dtype float64, got .* dtype float32",
                         lambda: baseline.forward(dict(a, b_2=a["b_2"].astype(np.float32)), X))
    refused_in_one_line(r"params must have exactly the keys \['W_1', 'b_1', 'W_2', 'b_2'\]",
                         lambda: baseline.forward({k: a[k] for k in a if k != "b_2"}, X),
                         lambda: baseline.forward(dict(a, W_3=a["W_2"]), X))
    refused_in_one_line(r"param W_2 must be a numpy array of shape \(3, 1\)",
                         lambda: baseline.forward(dict(a, W_2=a["W_2"][:2]), X))
    refused_in_one_line(r"dz must be a numpy array of numbers in the logits' shape \(2,\)",
                         lambda: baseline.backward(np.ones(3), cache),
                         lambda: baseline.backward(np.ones((2, 1)), cache),
                         lambda: baseline.backward([1.0, 1.0], cache))


def test_python_api_refuses_what_it_cannot_use():
    rng = np.random.default_rng(0)
    pb = baseline.init(6, 4, rng)
    for X, msg in [(np.full((3, 6), 2), "X must hold bits 0 and 1 only, got 2"),
                   (np.zeros((3, 5)), r"X must be a numpy array \[batch >= 1, T=6\] .* \(3, 5\)"),
                   (np.zeros(6), r"X must be a numpy array \[batch >= 1, T=6\] .* \(6,\)")]:
        with pytest.raises(ValueError, match=msg):
            baseline.forward(pb, X)
    cfg = attn.default_config(T=6, d=8, heads=2, mlp=4)
    p = attn.init_params(cfg, rng)
    X = rng.integers(0, 2, (5, 6))
    for other, msg in [(dict(mlp=8), r"param W_1 must be .* shape \(8, 8\) .*, got .* \(8, 4\)"),
                       (dict(ln=False), r"params must be the dict init_params\(cfg, rng\) gives, "
                                        r"keys \[.*\], got \[.*'ln1_b'"),
                       (dict(d=16, heads=2), r"param E_tok must be .* shape \(2, 16\)"),
                       (dict(dtype="float64"), r"param E_tok must be .* dtype float64, .*float32")]:
        with pytest.raises(ValueError, match=msg):
            attn.loss_and_grads(p, attn.default_config(T=6, **dict(dict(d=8, heads=2, mlp=4),
                                                                  **other)), X, np.ones(5))
    for y, msg in [(np.array([-1, 1, 1, 1, 1]), r"y must be a numpy array of shape \(5,\)"),
                   (np.array([1.0]), r"y must be a numpy array of shape \(5,\)"),
                   (np.array([0, 1, np.nan, 0, 1]), r"y must be .* of 0s and 1s, got an array")]:
        with pytest.raises(ValueError, match=msg):
            attn.loss_and_grads(p, cfg, X, y)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # baseline.py
    "baseline.param_shapes": Walk(lambda f: dict(T=4, hidden=3),
                                  legal=dict(T={"10**12": NO_ALLOC},
                                             hidden={"10**12": NO_ALLOC})),
    "baseline.init": Walk(lambda f: dict(T=4, hidden=3, rng=f["rng"], dtype="float64", std=0.5),
                          legal=dict(std={"0": "all weights 0 is an init",
                                          "10**12": "any finite std is an init"})),
    "baseline.forward": Walk(lambda f: dict(p=f["pb"], X=f["X"], act="relu"),
                             extra=dict(X=bit_damages(WX)), names=P_NAMES),
    "baseline.backward": Walk(lambda f: dict(dz=f["z"],
                                             cache=baseline.forward(f["pb"], f["X"])[1])),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over baseline.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((baseline,), WALK)
