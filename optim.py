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
STATE_KEYS = {"t", "shapes", "decayed", "frozen", "flat", "m", "v"}   # adam_init's, in every state


def one_buffer(params):
    """A new dict of the same parameters (same values, shapes and dtype) held as views of one new
    flat buffer, in params' order; the caller's dict and arrays are left as they are. adam_init
    and adam_step see such a dict and run on the flat buffer (the same numbers, faster)."""
    _check_params(params)
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
    _check_params(params)
    scales = _check_scales(scales, params)
    if decay not in DECAYS:
        raise ValueError(f"decay must be one of {', '.join(DECAYS)}, got {decay!r}")
    if isinstance(frozen, str) or not isinstance(frozen, (tuple, list, set, frozenset)) or not all(
            isinstance(k, str) and k in params for k in frozen):
        raise ValueError(f"frozen must be a collection of parameter names of params, got "
                         f"{frozen!r:.60}")
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
    _check_params(grads, "grads")
    check_number("max_norm", max_norm, REALS, math.ulp(0.0), what="a finite number > 0")
    if runs is not None:
        check_number("runs", runs, INTS, 1, what="None or an integer >= 1")
        if any(g.ndim < 1 or len(g) != runs for g in grads.values()):
            raise ValueError(f"grads must each have a leading run axis of length runs={runs}")
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
    np.concatenate([grads[k].ravel() for k in state["shapes"]], out=g)
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


# ---------------------------------------------------------------- argument checks --------------
# One vocabulary for every check (WrongType .. check_number): attn.py, data.py and optim.py each
# keep the part they use, word for word (each file stands alone; test_all.py pins the copies
# equal). Then optim.py's own: a parameter dict, a step's arguments.

class WrongType(ValueError, TypeError):
    """A wrong type: a ValueError like every refusal here, a TypeError for callers expecting one."""


def describe(v):  # what a caller gave, in a few words: 5, 'cls', [[0, 1], ...], an array's shape
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    plain = (type(None), int, float, complex, str, list, tuple, dict, type, np.generic, np.dtype)
    return reprlib.repr(v) if isinstance(v, plain) else f"an object of type {type(v).__name__}"


def refuse(name, v, what, right_type, hint=""):  # the one-line error; WrongType: a wrong type
    return (ValueError if right_type else WrongType)(
        f"{name} must be {what}, got {describe(v)}{hint}")


INTS, REALS = (int, np.integer), (int, float, np.integer, np.floating)
FLOAT_MAX = float(np.finfo(np.float64).max)       # 10**400 is an int no float holds: refused


def check_number(name, v, types, lo, hi=math.inf, what=None, bools=False):
    """v (a numpy scalar as the Python number) when it is of `types` (INTS or REALS; bools only
    where `bools`), lo <= v < hi and within a float's range; else refuse's one line "{name} must
    be {what}", '{lo}' and '{hi}' filled in (by default "an integer >= {lo}" or "a finite number
    >= {lo}", and "< {hi}" where hi is finite)."""
    right_type = isinstance(v, types) and (bools or not isinstance(v, (bool, np.bool_)))
    if not (right_type and lo <= v < hi and -FLOAT_MAX <= v <= FLOAT_MAX):
        if what is None:
            what = ("an integer" if types == INTS else "a finite number") + " >= {lo}" + (
                " and < {hi}" if hi < math.inf else "")
        raise refuse(name, v, what.format(lo=lo, hi=hi), right_type)
    return v.item() if isinstance(v, np.generic) else v




def _check_params(params, name="params"):
    if not isinstance(params, dict) or not params or not all(
            isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in params.values()):
        raise TypeError(f"{name} must be a non-empty dict of float arrays (attn.init_params), got "
                        f"{type(params).__name__}")
    dtypes = {v.dtype for v in params.values()}
    if len(dtypes) != 1:
        raise ValueError(f"{name} must hold arrays of one dtype, got {sorted(map(str, dtypes))}")


def _check_scales(scales, params):  # -> {name: float c > 0} or None
    if scales is None:
        return None
    if not isinstance(scales, dict) or not all(isinstance(k, str) and k in params for k in scales):
        raise refuse("scales", scales, "None or a dict of parameter names of params to numbers "
                     "> 0", isinstance(scales, dict))
    return {k: float(check_number(f"scales[{k!r}]", c, REALS, math.ulp(0.0),
                                  what="a finite number > 0")) for k, c in scales.items()} or None


def _check_step(params, grads, state, lr, wd, b1, b2, eps, decoupled):
    """adam_step's arguments: a few comparisons a step, no arrays touched."""
    if not isinstance(state, dict) or not STATE_KEYS <= state.keys():
        raise TypeError(f"state must be the dict optim.adam_init returned, got "
                        f"{type(state).__name__}" + (f" without {sorted(STATE_KEYS - state.keys())}"
                                                     if isinstance(state, dict) else ""))
    shapes = state["shapes"]
    for name, d in (("params", params), ("grads", grads)):
        if not isinstance(d, dict):
            raise TypeError(f"{name} must be a dict of arrays by name, got {type(d).__name__}")
        if d.keys() != shapes.keys():
            raise ValueError(f"{name} must hold the parameters adam_init was given: missing "
                             f"{sorted(shapes.keys() - d.keys())}, unknown "
                             f"{sorted(d.keys() - shapes.keys(), key=str)}")
    for k, shape in shapes.items():
        if not isinstance(grads[k], np.ndarray) or grads[k].shape != shape:
            raise ValueError(f"grads[{k!r}] must be an array of shape {shape}, got "
                             f"{getattr(grads[k], 'shape', type(grads[k]).__name__)}")
    if state["flat"] is not None:
        if any(params[k] is not state["views"][k] for k in shapes):
            raise ValueError("params: a parameter was replaced after adam_init; update it in place "
                             "(params[k][...] = value) so the optimiser still sees it")
    elif any(params[k].shape != shape for k, shape in shapes.items()):
        raise ValueError("params: a parameter changed shape after adam_init")
    for name, v, hi in (("lr", lr, math.inf), ("wd", wd, math.inf), ("b1", b1, 1), ("b2", b2, 1),
                        ("eps", eps, math.inf)):
        check_number(name, v, REALS, 0, hi)
    if not isinstance(decoupled, (bool, np.bool_)):
        raise TypeError(f"decoupled must be True or False, got {decoupled!r}")
