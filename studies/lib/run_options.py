"""run_options.py (studies/lib): a study run's options, one table: defaults, checks, --help.

Each row of OPTIONS is (name, default, parser, help): train.py's rows (the paper's Section 5
options, taken from train.OPTIONS with their defaults and help) and the studies' own. The
studies' trainer's command line, a Python caller's dict and a sweep's options are all checked by
validate_options against it, and RUN_KEYS says which of them define a run (a checkpoint must
agree on them); attention_config and run_shapes say what model a run's options build.
"""
import argparse

import numpy as np

import attn
import data
import train

from studies.lib import baseline, checks
from studies.lib.cli import BadValue, choice, integer, number

def _ref(name, more=""):
    """train.py's row `name` in this table's form: its default and help (with `more` said after),
    and a parser of its type and range (lr strictly above 0: a step of 0 trains nothing)."""
    default, kind, allowed, text = next(row[1:] for row in train.OPTIONS if row[0] == name)
    parse = (choice(*allowed) if isinstance(allowed, tuple) else integer(allowed) if kind is int
             else number(allowed, strict=name == "lr"))
    return name, default, parse, text + more


OPTIONS = (  # name, default, parser, help: the one source of defaults, checks and --help
    ("model", "transformer", choice("transformer", "mlp"),
     "the paper's Transformer, or the baseline MLP on the raw bits"),
    _ref("task"),
    _ref("T"),
    _ref("s"),
    _ref("m"),
    ("data", "iid", choice("iid", "unambiguous"),
     "training set: iid = the first m samples of the seed's stream; unambiguous = the paper's "
     "protocol (Section 5), m samples redrawn until exactly one s-sparse hypothesis fits them"),
    _ref("n_test"),
    _ref("steps"),
    _ref("lr"),
    _ref("wd"),
    _ref("batch"),
    ("optimizer", "adam", choice("adam", "adamw"),
     "adam: weight decay added to the gradient (torch.optim.Adam); adamw: decoupled decay, "
     "p -= lr * wd * p before the step (torch.optim.AdamW)"),
    ("beta2", 0.999, number(0, hi=1, hi_strict=True),
     "Adam's second-moment decay, >= 0 and < 1 (minGPT: 0.95)"),
    ("decay", "all", choice("all", "matrices", "except-ln"),
     "what weight decay acts on: all parameters; the weights of every Linear layer only "
     "(matrices: optim.DECAYED, the weight matrices and the readout w, as minGPT decays them; not "
     "biases, LayerNorm gains, embeddings or [CLS]); or every parameter but the LayerNorms' gains "
     "and shifts (except-ln: ln1, ln2, lnf undecayed)"),
    ("freeze", "none", choice("none", "ln1", "lnf"),
     "parameters held at their init, never updated nor decayed: none; ln1 = the first "
     "LayerNorm's gain and shift (the scale of the tokens attention sees); lnf = the final "
     "LayerNorm's"),
    ("ln1_gain", 1.0, number(0, strict=True),
     "the first LayerNorm's gain at init (1: the usual); with --freeze ln1 every token attention "
     "sees keeps norm ln1_gain * sqrt(d)"),
    ("qk_ball", 0.0, number(0),
     "train inside the norm ball (0 = off): after every Adam step, each head's W_QK in its "
     "canonical form (symmetry.py: LN1's gain and shift folded in) is projected onto the "
     "Frobenius ball of radius qk_ball x ln((T - s) / (0.1 s)) / (2 (d + 1)): at 1 a head's "
     "scores can just span the construction's score gap (theory.paper_score_gap, eps 0.1); "
     "below 1 they cannot"),
    ("ball_qk", 0.0, number(0),
     "training inside the capacity bound's class (0 = off; with --ball-vo, --ball-w and "
     "--ball-mlp): after every Adam step each head's canonical ||W_QK,h||_F is brought within "
     "this absolute radius, the same at every T (symmetry.project_class_ball)"),
    ("ball_vo", 0.0, number(0),
     "the class's radius on each head's canonical ||W_V,h W_O,h||_F (0 = off): it bounds the "
     "bound's ||W_V||_2, ||W_V||_{2,1} and ||W_O||_2 of the canonical form"),
    ("ball_w", 0.0, number(0),
     "the class's radius on the readout's norm ||w|| with LNf's gain folded in (0 = off)"),
    ("ball_mlp", 0.0, number(0),
     "the class's radius on the MLP's factor ||W_1||_2 ||W_2||_2 with LN2's gain folded in "
     "(0 = off)"),
    ("qkv_init", 1.0, number(0, strict=True),
     "W_Q, W_K and W_V initialised this many times larger (1: the usual); with --qkv-step the "
     "same and --freeze ln1 --ln1-gain 1/c, the run is the gain-1 run held at c x (issue 47)"),
    ("qkv_step", 1.0, number(0, strict=True),
     "Adam steps W_Q, W_K and W_V as parameters held at this many times their scale (lr x c, "
     "eps / c, weight decay / c^2, or / c with adamw; optim.adam_init's scales): their steps "
     "c times larger against the same gradient's direction (1: the usual)"),
    ("clip", 0.0, number(0), "clip each step's gradient to this global L2 norm (0 = off; "
     "minGPT: 1.0)"),
    ("dropout", 0.0, number(0, hi=1, hi_strict=True), "dropout probability, >= 0 and < 1 "
     "(minGPT: 0.1), on the "
     "token embeddings, attention weights and residual branches; trains on the plain [CLS] "
     "path, one run at a time (much slower at large T)"),
    ("val", 0, integer(0), "early stopping (0 = off): this many validation samples, a stream of "
     "their own; the run ends with the parameters of its lowest validation loss, checked every "
     "--val-every steps. The test set is never used to choose"),
    ("val_every", 25, integer(1), "steps between validation checks when --val is on"),
    _ref("seed"),
    _ref("d"),
    _ref("heads"),
    _ref("mlp", "; the baseline's hidden width"),
    ("pos_init", "normal", choice("normal", "zero"),
     "positional embeddings start as N(0, 0.02^2) like every weight, or at 0 (minGPT)"),
    _ref("dtype"),
    _ref("log_every"),
)
DEFAULTS = {name: default for name, default, _, _ in OPTIONS}
PARSE = {name: parse for name, _, parse, _ in OPTIONS}
# what defines a run: a checkpoint must agree on these
RUN_KEYS = ("model", "task", "T", "s", "m", "data", "n_test", "lr", "wd", "batch", "seed", "d",
            "heads", "mlp", "dtype", "optimizer", "beta2", "decay", "freeze", "ln1_gain", "qk_ball",
            "ball_qk", "ball_vo", "ball_w", "ball_mlp", "qkv_init", "qkv_step", "clip", "dropout",
            "val", "val_every", "pos_init")


BALL = ("ball_qk", "ball_vo", "ball_w", "ball_mlp")   # symmetry.CLASS_NORMS' radii, in order


def ball_radii(o):
    """The radii of the class's ball the options `o` set: {norm: radius} for
    symmetry.project_class_ball, the norms without a radius left out; {} when training is free."""
    if not isinstance(o, dict):
        raise TypeError(f"o must be a dict of run options, got {type(o).__name__}")
    return {k[len("ball_"):]: o[k] for k in BALL if o.get(k, 0.0)}


def py_flag(name, value):       # how a Python caller names an option: "s=5"
    if not isinstance(name, str):
        raise TypeError(f"name must be an option's name (a str), got {name!r:.40}")
    return f"{name}={value!r}"


def cli_flag(name, value):      # how the command line names it: "--s 5"
    if not isinstance(name, str):
        raise TypeError(f"name must be an option's name (a str), got {name!r:.40}")
    return f"--{name.replace('_', '-')} {value}"


def cross_option_problem(o, flag=py_flag):
    """Cross-option checks one value cannot do; returns one line, or None when all is well.
    `flag` names an option with its value: as a Python keyword (default) or as a command-line
    flag (cli_flag), so each caller reads about what it typed. o: a dict holding at least s, T,
    task, d and heads (values parsed already)."""
    if not (isinstance(o, dict) and {"s", "T", "task", "d", "heads"} <= set(o)):
        raise TypeError(f"o must be a dict of options holding s, T, task, d and heads, got "
                        f"{o!r:.60}")
    if not callable(flag):
        raise TypeError(f"flag must be a function (name, value) -> text such as "
                        f"run_options.py_flag or cli_flag, got {flag!r:.40}")
    f = lambda k: flag(k, o[k])
    if o["s"] > o["T"]:
        return f"{f('s')} is larger than {f('T')}; s must be between 1 and T"
    if o["task"] == "majority" and o["s"] % 2 == 0:
        return f"task majority needs an odd s, got {f('s')}"
    if o["task"] == "junta" and o["s"] > data.JUNTA_MAX_S:
        return f"task junta keeps 2^s table rows: s must be <= {data.JUNTA_MAX_S}, got {f('s')}"
    if o["d"] % o["heads"]:
        return f"{f('heads')} must divide {f('d')}"
    if "m" in o and o.get("batch", 0) > o["m"]:
        return f"{f('batch')} is larger than {f('m')}; use batch 0 for full batch"
    if o.get("model") == "mlp" and o["mlp"] < 1:
        return f"model mlp needs at least 1 hidden unit, got {f('mlp')}"
    if not o.get("beta2", 0.5) < 1:
        return f"beta2 must be below 1, got {f('beta2')}"
    if not o.get("dropout", 0) < 1:
        return f"dropout must be below 1, got {f('dropout')}"
    if o.get("freeze", "none") != "none" and o.get("model") == "mlp":
        return f"freeze acts on the Transformer's LayerNorms only, got {f('freeze')} with model mlp"
    return _factor_problem(o, f)


def _factor_problem(o, f):
    """cross_option_problem's second half: the factors (LN1's gain, W_Q, W_K and W_V at c times
    their scale) and the balls, each against the model and the dtype. f names an option."""
    most = (float(np.finfo(o.get("dtype", "float32")).max) / o["d"]) ** 0.5
    if o.get("ln1_gain", 1.0) >= most:
        return (f"{f('ln1_gain')} is too large for {o.get('dtype', 'float32')}: the attention "
                f"scores grow like ln1_gain^2 d and would overflow; ask for less than {most:.3g}")
    if o.get("ln1_gain", 1.0) != 1.0 and o.get("model") == "mlp":
        return (f"ln1_gain acts on the Transformer's first LayerNorm only, got {f('ln1_gain')} "
                f"with model mlp")
    if o.get("qk_ball", 0.0) and o["T"] <= 1.1 * o["s"]:
        return f"qk_ball needs T > 1.1 s (a score gap ln((T - s) / (0.1 s)) > 0), got {f('T')}"
    for k in ("ln1_gain", "qkv_init", "qkv_step"):
        if k == "ln1_gain" and o.get("ln1_gain", 1.0) >= 1:
            continue                    # its top: the overflow check above
        if o.get(k, 1.0) != 1.0 and o.get("model") == "mlp":
            return f"{k} acts on the Transformer's attention only, got {f(k)} with model mlp"
        if not 2.0 ** -20 <= o.get(k, 1.0) <= 2.0 ** 20:
            return f"{f(k)} is out of range: ask for a factor in [2^-20, 2^20]"
    if o.get("qk_ball", 0.0) and o.get("model") == "mlp":
        return f"qk_ball acts on the Transformer's attention only, got {f('qk_ball')} with model mlp"
    ball = [k for k in BALL if o.get(k, 0.0)]
    tiny = [k for k in ball if o[k] < 2.0 ** -20]
    if tiny:
        return f"{f(tiny[0])} is out of range: a radius is 0 (off) or at least 2^-20"
    if ball and o.get("model") == "mlp":
        return f"{ball[0]} acts on the Transformer only, got {f(ball[0])} with model mlp"
    if ball and o.get("qk_ball", 0.0):
        return (f"qk_ball (a radius that grows with T) and the class's {ball[0]} cannot be "
                f"combined: use ball_qk for an absolute radius on W_QK")
    if o.get("ball_mlp", 0.0) and not o["mlp"]:
        return f"ball_mlp holds the MLP's factor, but the model has none ({f('mlp')})"
    if o.get("dropout") and o.get("model") == "mlp":
        return f"dropout acts on the Transformer only, got {f('dropout')} with model mlp"
    return None


class Options(dict):
    """A run's options, checked: Options(opts) fills in the defaults and checks every value
    (ValueError, one line naming the value and what is allowed; `flag` names an option: py_flag
    "s=5", or cli_flag "--s 5"), and the result is read-only (a change is a new dict, dict(o,
    m=50), checked again). The one type a run's options have, from the door (the command line,
    train_run, a sweep) to the line where each acts: a function given an Options knows it was
    checked and does not check again (validate_options passes one through)."""

    def __init__(self, opts, flag=py_flag, name="opts"):
        if not isinstance(opts, dict):
            raise TypeError(f"{name} must be a dict of options (the keys of "
                            f"run_options.DEFAULTS), got {type(opts).__name__}")
        if not callable(flag):
            raise TypeError(f"flag must be a function (name, value) -> text such as "
                            f"run_options.py_flag or cli_flag, got {flag!r:.40}")
        super().__init__(opts if isinstance(opts, Options) else _checked(opts, flag))

    def _read_only(self, *args, **kwargs):
        raise TypeError("run options are read-only once checked: make a new dict, "
                        "dict(o, name=value), and check it again (validate_options)")
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only
    __ior__ = _read_only

    def __reduce__(self):                       # pickled whole (a sweep's worker processes)
        return Options, (dict(self),)


def _checked(opts, flag):
    """opts with the defaults filled in, every value parsed and the cross-option checks passed."""
    unknown = sorted(set(opts) - set(DEFAULTS), key=repr)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(DEFAULTS)}")
    o = dict(DEFAULTS, **opts)
    for k in o:
        try:
            o[k] = PARSE[k](o[k])
        except BadValue as e:
            raise ValueError(f"{flag(k, o[k]).split()[0].split('=')[0]} {e}") from None
    problem = cross_option_problem(o, flag)
    if problem:
        raise ValueError(problem)
    return o


def validate_options(opts, flag=py_flag, name="opts"):
    """The run's options checked (Options(opts, flag); a wrong type is named `name`, the caller's
    argument); an Options is returned as it is."""
    return opts if isinstance(opts, Options) else Options(opts, flag, name)


def attention_config(o):
    """attn.py's config of the Transformer that options `o` train."""
    o = validate_options(o, name="o")
    return attn.default_config(T=o["T"], d=o["d"], heads=o["heads"], mlp=o["mlp"],
                               dtype=o["dtype"], dropout=o["dropout"], pos_init=o["pos_init"])


def run_shapes(o):
    """{name: shape} of the parameters of the model a run with options o trains (no allocation)."""
    o = validate_options(o, name="o")
    if o["model"] == "mlp":
        return baseline.param_shapes(o["T"], o["mlp"])
    return attn.param_shapes(attention_config(o))


def add_options(ap, names, defaults=None):
    """Add --NAME options from the OPTIONS table (help and default from the table, or from
    `defaults` where given)."""
    table = {name: (default, parse, text) for name, default, parse, text in OPTIONS}
    if not isinstance(ap, argparse.ArgumentParser):
        raise checks.refuse("ap", ap, "an argparse.ArgumentParser", False)
    if not (isinstance(names, (list, tuple)) and all(isinstance(n, str) and n in table
                                                     for n in names)):
        raise checks.refuse("names", names, f"a list of option names ({', '.join(table)})",
                          isinstance(names, (list, tuple)))
    if not (defaults is None or isinstance(defaults, dict) and set(defaults) <= set(table)):
        raise checks.refuse("defaults", defaults, "None or a dict of option defaults", False)
    for name in names:
        default, parse, text = table[name]
        default = (defaults or {}).get(name, default)
        kw = dict(choices=parse.choices) if hasattr(parse, "choices") else dict(type=parse)
        shown = "" if default is None else f" (default {default})"
        ap.add_argument("--" + name.replace("_", "-"), dest=name, default=default,
                        help=text + shown, **kw)


# train.py's options a sweep shares with every run are folder.MODEL_OPTIONS. Named protocols: each
# a small set of option values, recorded in sweep.json, so that one variant of the experiment is
# one command (--protocol NAME). Options given on the command line win.
MINGPT = dict(optimizer="adamw", lr=3e-4, beta2=0.95, wd=0.1, decay="matrices", clip=1.0,
              batch=64)              # minGPT's training defaults of 2020-22, without dropout


CLASS_TIGHT = dict(ball_qk=0.08, ball_vo=0.1, ball_w=1.0, ball_mlp=0.15)


PROTOCOLS = {
    "ours": {},                                      # train.py's defaults: iid data, 2000 test
    "paper-data": dict(data="unambiguous", n_test=10000),   # Section 5's data protocol
    # one choice changed at a time (training-protocol study)
    "steps-250": dict(steps=250), "steps-500": dict(steps=500), "steps-2000": dict(steps=2000),
    "early-stop": dict(val=1000, val_every=25),      # best of 1000 steps on 1000 validation
    "adamw": dict(optimizer="adamw", wd=0.01),       # torch's AdamW default decay, same lr
    "mingpt": MINGPT, "mingpt-dropout": dict(MINGPT, dropout=0.1),
    "lr-3e-4": dict(lr=3e-4), "lr-3e-3": dict(lr=3e-3),
    "heads-1": dict(heads=1), "heads-4": dict(heads=4),
    "d-32": dict(d=32), "d-128": dict(d=128), "d-256": dict(d=256),
    "float64": dict(dtype="float64"),
    # the paper's data protocol with the width that came closest to the paper's figure
    "paper-data-d-128": dict(data="unambiguous", n_test=10000, d=128),
    # minGPT's block, one architectural detail at a time: MLP width 4d, positions starting at 0
    "mlp-4d": dict(mlp=256), "pos-zero": dict(pos_init="zero"),
    "mlp-4d-pos-zero": dict(mlp=256, pos_init="zero"),
    "d-128-mlp-4d": dict(d=128, mlp=512), "d-128-pos-zero": dict(d=128, pos_init="zero"),
    "d-128-mlp-4d-pos-zero": dict(d=128, mlp=512, pos_init="zero"),
    # interventions on the token norm after LN1 (issue 38), one thing each; freeze-lnf a control
    "freeze-ln1": dict(freeze="ln1"), "decay-except-ln": dict(decay="except-ln"),
    "freeze-lnf": dict(freeze="lnf"),
    # and the token norm held fixed and low: LN1's gain frozen at 1/2 (B_X = sqrt(d / 4 + 1))
    "freeze-ln1-low": dict(freeze="ln1", ln1_gain=0.5),
    # the same with the attention's step restored (issue 47): W_Q, W_K, W_V initialised 2x and
    # stepped as held at 2x (the gain-1 run, reparametrised: freeze-ln1 bit for bit), or one of
    # the two factors alone
    "freeze-ln1-low-restored": dict(freeze="ln1", ln1_gain=0.5, qkv_init=2.0, qkv_step=2.0),
    "freeze-ln1-low-init": dict(freeze="ln1", ln1_gain=0.5, qkv_init=2.0),
    "freeze-ln1-low-step": dict(freeze="ln1", ln1_gain=0.5, qkv_step=2.0),
    # training inside the norm ball (issue 47): each head's canonical W_QK projected after every
    # step onto a radius of 0.5, 1 or 4 times what the construction's score gap needs at that T
    "qk-ball-0.5": dict(qk_ball=0.5), "qk-ball-1": dict(qk_ball=1.0), "qk-ball-4": dict(qk_ball=4.0),
    # training inside the capacity bound's class (issue 52): every norm the bound counts held
    # within one absolute radius, the same at every T. class-tight: W_QK at what the
    # construction's score gap needs at T = 10^4 (ln((10^4 - 3) / 0.3) / (2 (d + 1)) = 0.080 at
    # d = 64), the other three near the low end of what free training used in a 6-seed screen
    # at T = 100 (chosen before the study); class-loose: twice every radius
    "class-tight": CLASS_TIGHT,
    "class-loose": {k: 2 * v for k, v in CLASS_TIGHT.items()},
}
