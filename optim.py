"""optim.py: the optimiser of the experiment (Edelman et al., Section 5, as reproductions read it).

Adam with bias correction (Kingma & Ba), weight decay added to the gradient (torch.optim.Adam) or
decoupled (torch.optim.AdamW), on every parameter, on DECAYED only or on all but the LayerNorms;
parameters frozen at their values (torch's requires_grad=False: never stepped, never decayed);
and clipping of the gradient's global L2 norm (torch.nn.utils.clip_grad_norm_). Every function
works on one run's parameter dict or on a stack of runs (a leading run axis on every array,
`runs=R`). numpy only.

adam_step is the formula, one parameter at a time. For speed a caller may first copy its
parameters into one flat buffer (one_buffer): the same arithmetic then runs as a dozen passes over
that buffer instead of a dozen small operations per parameter (at T = 100, numpy's per-call
overhead on 20 parameters costs about a tenth of a step); a test holds the two to the same bits.
"""
import math
import numbers
import reprlib

import numpy as np

# The weights of every Linear layer, which minGPT decays (decay="matrices"): attention's four
# projections, the MLP's two and the readout vector w (a Linear layer d -> 1). Not decayed there:
# biases, LayerNorm gains and shifts, the embeddings and [CLS].
DECAYED = ("W_Q", "W_K", "W_V", "W_O", "W_1", "W_2", "w")
# Each LayerNorm's gain and shift, by the LayerNorm's name: decay="except-ln" decays every
# parameter but these, and a run may freeze one LayerNorm's (issue 38's interventions).
LAYERNORMS = {"ln1": ("ln1_g", "ln1_b"), "ln2": ("ln2_g", "ln2_b"), "lnf": ("lnf_g", "lnf_b")}
DECAYS = ("all", "matrices", "except-ln")
STATE = {"t", "shapes", "decayed", "frozen", "flat", "m", "v"}   # the keys of every adam_init state


def one_buffer(params):
    """A new dict of the same parameters (same values, shapes and dtype) held as views of one new
    flat buffer, in params' order; the caller's dict and arrays are left as they are. adam_init
    and adam_step see such a dict and run on the flat buffer (the same numbers, faster)."""
    flat = np.concatenate([v.ravel() for v in params.values()])
    return _views(flat, {k: v.shape for k, v in params.items()})


def adam_init(params, decay="all", frozen=(), scales=None):
    """Adam's state for `params` (a dict of float arrays of one dtype): the step count t = 0, the
    first and second moments m and v (zeros like each parameter, by name), which parameters
    weight decay acts on (decay: "all"; "matrices": DECAYED only; "except-ln": all but the
    LAYERNORMS) and which are frozen (`frozen`: names of params that adam_step never moves and
    never decays). Parameters from one_buffer get moments in flat buffers of their own too
    (state["flat"]); the parameters are not touched.

    scales (name -> c > 0, default none): a parameter held at c times its natural scale,
    P = c W. Adam then steps P as the rescaled W: its gradient is 1/c of W's, so its lr is c lr,
    its eps eps / c, its weight decay wd / c^2 when added to the gradient (Adam) and wd / c when
    decoupled (AdamW: lr wd is unchanged). P / c then follows W's trajectory, step for step, and
    bit for bit when c is a power of 2 (every product and sum is then scaled exactly)."""
    _check_init(params, decay, frozen, scales)
    scales = {k: float(c) for k, c in (scales or {}).items()} or None
    frozen = frozenset(frozen)
    ln = {k for names in LAYERNORMS.values() for k in names}
    shapes = {k: v.shape for k, v in params.items()}
    decayed = frozenset(k for k in params if k not in frozen and (
        decay == "all" or (k in DECAYED if decay == "matrices" else k not in ln)))
    flat = _flat_buffer(params)
    state = dict(t=0, shapes=shapes, decayed=decayed, frozen=frozen, flat=flat, scales=scales)
    if flat is None:
        return dict(state, m={k: np.zeros_like(v) for k, v in params.items()},
                    v={k: np.zeros_like(v) for k, v in params.items()})
    m_flat, v_flat = np.zeros_like(flat), np.zeros_like(flat)
    per_entry = lambda keys: np.concatenate(              # 1 on the entries of `keys`, else 0
        [np.full(v.size, float(k in keys), flat.dtype) for k, v in params.items()])
    per_scale = None if not scales else np.concatenate(   # c on each entry (1: unscaled)
        [np.full(v.size, scales.get(k, 1.0), flat.dtype) for k, v in params.items()])
    return dict(state, m=_views(m_flat, shapes), v=_views(v_flat, shapes), m_flat=m_flat,
                v_flat=v_flat, views=dict(params), per_scale=per_scale,
                per_eps=None if per_scale is None else (      # 1 / c in float64, as adam_step's
                    1.0 / np.concatenate([np.full(v.size, scales.get(k, 1.0))   # Python floats,
                                          for k, v in params.items()]),         # and its scratch
                    np.empty_like(flat)),
                mask=None if len(decayed) == len(params) else per_entry(decayed),
                held=per_entry(frozen) if frozen else None,
                held_at=np.flatnonzero(per_entry(frozen)) if frozen else None,
                work=(np.empty_like(flat), np.empty_like(flat)))   # scratch: no new arrays a step


def adam_step(params, grads, state, lr, wd, b1=0.9, b2=0.999, eps=1e-8, decoupled=False):
    """One Adam step in place, as torch.optim.Adam (decoupled=False: weight decay added to the
    gradient, L2) or torch.optim.AdamW (decoupled=True) documents it, weight decay on the
    parameters state["decayed"] names; the frozen ones (state["frozen"]) are left exactly as they
    are, whatever their gradient. lr >= 0, wd >= 0, 0 <= b1, b2 < 1, eps >= 0, as torch asks. Each
    product is written in the order the flat buffer's step computes it (p wd lr, step_size m),
    so the two give the same bits."""
    _check_step(params, grads, state, lr, wd, b1, b2, eps, decoupled)
    state["t"] += 1
    t = state["t"]
    if state["flat"] is not None:
        return _flat_adam_step(grads, state, lr, wd, b1, b2, eps, decoupled)
    scales = state.get("scales") or {}
    for k, p in params.items():
        if k in state["frozen"]:
            continue
        g, m, v, c = grads[k], state["m"][k], state["v"][k], scales.get(k)
        if wd and k in state["decayed"]:
            if decoupled:
                p -= p * wd * lr                        # AdamW: p <- p - lr wd p
            else:
                g = g + (p * wd if c is None else p * wd / c / c)   # Adam: g <- g + wd p
        m[...] = b1 * m + (1 - b1) * g                  # m <- b1 m + (1 - b1) g
        v[...] = b2 * v + (1 - b2) * g ** 2             # v <- b2 v + (1 - b2) g^2
        v_hat = v / (1 - b2 ** t)                       # bias corrections: v_hat = v / (1 - b2^t)
        step_size = lr / (1 - b1 ** t)                  # and lr m_hat = step_size m
        if c is None:
            p -= step_size * m / (np.sqrt(v_hat) + eps)  # p <- p - lr m_hat / (sqrt(v_hat) + eps)
        else:                                           # held at c x: lr c, eps / c
            p -= step_size * m * c / (np.sqrt(v_hat) + eps * (1.0 / c))
    return None


def clip_gradients(grads, max_norm, runs=None):
    """Scale the gradients in place so that their global L2 norm is at most max_norm (as
    torch.nn.utils.clip_grad_norm_: factor max_norm / (norm + 1e-6) when below 1). For a stack of
    `runs` runs (a leading run axis on every array), each run's own norm. -> the norms."""
    _check_rules(("grads", grads, isinstance(grads, dict), "a dict of gradient arrays"),
                 ("max_norm", max_norm, _real(max_norm), "a finite number >= 0"))
    lead = (runs, -1) if runs else (1, -1)
    sq = sum((g.reshape(lead).astype(np.float64) ** 2).sum(1) for g in grads.values())
    norm = np.sqrt(sq)
    factor = np.minimum(1.0, max_norm / (norm + 1e-6))
    if np.any(factor < 1):
        for k, g in grads.items():
            g *= factor.astype(g.dtype).reshape((-1,) + (1,) * (g.ndim - 1)) if runs \
                else g.dtype.type(factor[0])
    return norm if runs else float(norm[0])


# ---------------------------------------------------------------- the flat buffer --------------

def _flat_adam_step(grads, state, lr, wd, b1, b2, eps, decoupled):
    """adam_step's arithmetic, operation for operation, on the flat buffers (p, m, v of every
    parameter at once); state["mask"] is 1 on the decayed parameters' entries, 0 elsewhere, and
    state["held"] 1 on the frozen ones': their gradient is zeroed, so their moments stay 0, and
    their denominator gets 1 added (0 elsewhere: the same bits), so their step is exactly 0 even
    at eps = 0."""
    p, m, v, mask, held = (state[k] for k in ("flat", "m_flat", "v_flat", "mask", "held"))
    scale = state.get("per_scale")        # parameters held at c x (adam_init's scales), or None
    c1, c2 = 1.0 - b1 ** state["t"], 1.0 - b2 ** state["t"]
    g, a = state["work"]
    np.concatenate([grads[k] for k in state["shapes"]], axis=None, out=g)   # each raveled
    if held is not None:
        g[state["held_at"]] = 0                                      # frozen: no gradient
    if wd:
        decay = np.multiply(p, wd, out=a)                            # p wd (* mask)
        if mask is not None:
            decay *= mask
        if decoupled:
            decay *= lr
            p -= decay                                               # p -= p wd lr
        else:
            if scale is not None:
                decay /= scale
                decay /= scale                                       # held at c x: wd / c^2
            g += decay                                               # g += p wd
    m *= b1
    m += np.multiply(g, 1.0 - b1, out=a)                             # m = b1 m + (1 - b1) g
    v *= b2
    np.multiply(g, g, out=g)
    v += np.multiply(g, 1.0 - b2, out=g)                             # v = b2 v + (1 - b2) g^2
    step = np.multiply(m, lr / c1, out=g)                            # p -= (lr / c1) m / denom
    denom = np.divide(v, c2, out=a)
    np.sqrt(denom, out=denom)
    if scale is None:
        denom += eps
    else:                                                            # held at c x: lr c, eps / c
        step *= scale
        inverse, eps_c = state["per_eps"]
        denom += np.multiply(inverse, eps, out=eps_c, casting="same_kind")   # eps (1 / c)
    if held is not None:
        denom += held                                                # frozen: step 0 / (.. + 1)
    step /= denom
    p -= step


def _views(flat, shapes):
    out, at = {}, 0
    for k, shape in shapes.items():
        size = math.prod(shape)
        out[k] = flat[at:at + size].reshape(shape)
        at += size
    return out


def _flat_buffer(params):
    """The buffer params' arrays are consecutive views of, in order (one_buffer's), else None."""
    arrays = list(params.values())
    flat = arrays[0].base
    if (not isinstance(flat, np.ndarray) or flat.ndim != 1 or not flat.flags.c_contiguous
            or flat.size != sum(a.size for a in arrays)):
        return None
    start, at = flat.__array_interface__["data"][0], 0
    for a in arrays:
        if (a.base is not flat or not a.flags.c_contiguous
                or a.__array_interface__["data"][0] != start + at * flat.itemsize):
            return None
        at += a.size
    return flat


BIG = float(np.finfo(np.float64).max)   # 10**400 is an int no float holds: refused


def _real(v, hi=math.inf):  # a real number (no bool) in [0, hi), within a float's range
    return isinstance(v, numbers.Real) and type(v) is not bool and 0 <= v < hi and v <= BIG


# ---------------------------------------------------------------- argument checks --------------
# adam_init's and adam_step's arguments, once a call, a few comparisons (no array is read): the
# first wrong one refused in one line that names it and says what is allowed

def _check_rules(*rules):  # each rule (name, value, ok, what is allowed): ValueError if not ok
    for name, v, _, allowed in (rule for rule in rules if not rule[2]):
        raise ValueError(f"{name} must be {allowed}, got {reprlib.repr(v)}".replace("\n", " "))


def _check_init(params, decay, frozen, scales):  # adam_init's
    names = params.keys() if isinstance(params, dict) else {}.keys()
    kinds = {str(getattr(v, "dtype", "")) for v in params.values()} if names else set()
    _check_rules(("params", params, kinds in ({"float32"}, {"float64"}), "a non-empty dict of "
                  "float32 or float64 arrays of one dtype (attn.init_params)"),
                 ("decay", decay, decay in DECAYS, f"one of {DECAYS}"),
                 ("frozen", frozen, isinstance(frozen, (tuple, list, set, frozenset))
                  and names >= set(frozen), "a collection of names of params"),
                 ("scales", scales, scales is None or isinstance(scales, dict) and scales.keys()
                  <= names and all(_real(c) and c > 0 for c in scales.values()), "{name: c > 0}"))


def _check_step(params, grads, state, lr, wd, b1, b2, eps, decoupled):  # adam_step's
    ok = isinstance(state, dict) and STATE <= state.keys() and type(state["t"]) is int
    same = lambda d: ok and isinstance(d, dict) and state["shapes"] == {
        k: getattr(d[k], "shape", None) for k in d}
    views = lambda d: isinstance(d, dict) and d.keys() == state["views"].keys() and all(
        d[k] is state["views"][k] for k in d)     # one_buffer's own views: shapes and all
    _check_rules(("state", state, ok and state["t"] >= 0, "adam_init's"),
                 ("params", params, ok and (same(params) if state["flat"] is None else
                                            views(params)), "adam_init's, in place"),
                 ("grads", grads, same(grads), "arrays of the parameters' names and shapes"),
                 ("lr, wd, b1, b2, eps", (lr, wd, b1, b2, eps), _real(lr) and _real(wd)
                  and _real(b1, 1) and _real(b2, 1) and _real(eps),
                  "finite numbers >= 0, b1 and b2 < 1"),
                 ("decoupled", decoupled, type(decoupled) is bool, "True or False"))
