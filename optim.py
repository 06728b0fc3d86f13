"""optim.py: the optimiser of the experiment (Edelman et al., Section 5, as reproductions read it).

Adam with bias correction (Kingma & Ba), weight decay added to the gradient (torch.optim.Adam) or
decoupled (torch.optim.AdamW), on every parameter, on the weight matrices only or on all but the
LayerNorms, parameters frozen at their init (requires_grad=False), and clipping of
the gradient's global L2 norm (torch.nn.utils.clip_grad_norm_). Every function works on one run's
parameter dict or on a stack of runs (a leading run axis on every array, `runs=R`). numpy only.
"""
import numpy as np

MATRICES = ("W_Q", "W_K", "W_V", "W_O", "W_1", "W_2", "w")   # what decay="matrices" acts on
LAYERNORMS = ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "lnf_g", "lnf_b")  # decay="except-ln" spares
DECAYS = ("all", "matrices", "except-ln")
FROZEN = {"none": (), "ln1": ("ln1_g", "ln1_b"), "lnf": ("lnf_g", "lnf_b")}  # freeze=NAME holds


def adam_init(params, decay="all", freeze="none"):
    """Adam's state for `params` (a dict of arrays of one dtype). The parameters move into one flat
    buffer: each params[k] becomes a view of it (same values, shape and dtype), so that a step is a
    dozen passes over one array instead of a dozen small operations per parameter (at T = 100,
    numpy's per-call overhead on 20 parameters costs about a tenth of a step). state["m"][k] and
    state["v"][k]
    are views in the same way; state["work"] holds two scratch arrays of the flat size, so a step
    makes no new arrays. decay: "all", "matrices" (weight decay only on MATRICES) or "except-ln"
    (on every parameter but LAYERNORMS). freeze: a key of FROZEN, whose parameters keep their
    values exactly: their gradient is zeroed and they are not decayed (state["keep"] 0 on them)."""
    if not isinstance(params, dict) or not params or not all(
            isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in params.values()):
        raise TypeError("params must be a non-empty dict of float arrays (attn.init_params)")
    if decay not in DECAYS:
        raise ValueError(f"decay must be one of {', '.join(DECAYS)}, got {decay!r}")
    if freeze not in FROZEN:
        raise ValueError(f"freeze must be one of {', '.join(FROZEN)}, got {freeze!r}")
    keys = list(params)
    dtypes = {params[k].dtype for k in keys}
    if len(dtypes) != 1:
        raise ValueError(f"adam_init needs parameters of one dtype, got {sorted(map(str, dtypes))}")

    def views(flat):
        out, at = {}, 0
        for k in keys:
            out[k] = flat[at:at + params[k].size].reshape(params[k].shape)
            at += params[k].size
        return out

    flat = np.concatenate([params[k].ravel() for k in keys])
    m, v = np.zeros_like(flat), np.zeros_like(flat)
    per_key = lambda f: np.concatenate([np.full(params[k].size, float(f(k)), flat.dtype)
                                        for k in keys])
    keep = per_key(lambda k: k not in FROZEN[freeze]) if FROZEN[freeze] else None
    mask = None
    if decay != "all" or keep is not None:
        mask = per_key(lambda k: k not in FROZEN[freeze] and (
            decay == "all" or (k in MATRICES if decay == "matrices" else k not in LAYERNORMS)))
    params.update(views(flat))
    return dict(t=0, keys=keys, flat=flat, views=dict(params), m_flat=m, v_flat=v, m=views(m),
                v=views(v), mask=mask, keep=keep, frozen=FROZEN[freeze],
                work=(np.empty_like(flat), np.empty_like(flat)))


def clip_gradients(grads, max_norm, runs=None):
    """Scale the gradients in place so that their global L2 norm is at most max_norm (as
    torch.nn.utils.clip_grad_norm_: factor max_norm / (norm + 1e-6) when below 1). For a stack of
    `runs` runs (a leading run axis on every array), each run's own norm. -> the norms."""
    lead = (runs, -1) if runs else (1, -1)
    sq = sum((g.reshape(lead).astype(np.float64) ** 2).sum(1) for g in grads.values())
    norm = np.sqrt(sq)
    factor = np.minimum(1.0, max_norm / (norm + 1e-6))
    if np.any(factor < 1):
        for k, g in grads.items():
            g *= factor.astype(g.dtype).reshape((-1,) + (1,) * (g.ndim - 1)) if runs \
                else g.dtype.type(factor[0])
    return norm if runs else float(norm[0])


def adam_step(params, grads, state, lr, wd, b1=0.9, b2=0.999, eps=1e-8, decoupled=False):
    """One Adam step in place (Kingma & Ba, with bias correction). Weight decay wd: added to the
    gradient, g <- g + wd * p (torch.optim.Adam), or with decoupled=True applied to the
    parameters first, p <- p - lr * wd * p (torch.optim.AdamW); on the parameters state["mask"]
    selects (all when None). Frozen parameters (state["keep"] 0) get a zero gradient, so their
    moments stay 0 and their step is exactly 0. `params` must still hold the views adam_init gave
    it."""
    keys = state["keys"]
    if any(params[k] is not state["views"][k] for k in keys):
        raise ValueError("adam_step: a parameter was replaced after adam_init; update it in place "
                         "(params[k][...] = value) so the optimiser still sees it")
    state["t"] += 1
    t = state["t"]
    c1, c2 = 1.0 - b1 ** t, 1.0 - b2 ** t
    p, m, v, mask = state["flat"], state["m_flat"], state["v_flat"], state["mask"]
    g, a = state["work"]              # two scratch buffers: no new arrays, the same arithmetic
    np.concatenate([grads[k].ravel() for k in keys], out=g)
    if state.get("keep") is not None:
        g *= state["keep"]                                           # frozen: no gradient
    if wd:
        decay = np.multiply(p, wd, out=a)                            # wd * p (* mask)
        if mask is not None:
            decay *= mask
        if decoupled:
            decay *= lr
            p -= decay
        else:
            g += decay
    m *= b1
    m += np.multiply(g, 1.0 - b1, out=a)                             # m = b1 m + (1 - b1) g
    v *= b2
    np.multiply(g, g, out=g)
    v += np.multiply(g, 1.0 - b2, out=g)                             # v = b2 v + (1 - b2) g^2
    step = np.multiply(m, lr / c1, out=g)                            # p -= (lr / c1) m / denom
    denom = np.divide(v, c2, out=a)
    np.sqrt(denom, out=denom)
    denom += eps
    step /= denom
    p -= step
