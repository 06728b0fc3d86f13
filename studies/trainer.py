"""trainer.py (studies, a command): one run with every option a study uses.

    python -m studies.trainer                    the demo, as python train.py
    python -m studies.trainer --help             every option (train.py's and the studies')
    python -m studies.trainer --save run.npz     a checkpoint every --save-every steps, at the end
                                                 and on Ctrl-C or SIGTERM; --resume goes on
    python -m studies.trainer --plot run.png     the run drawn (needs matplotlib)

The run itself is studies/lib/training.py's study_run: train.py's loop with the studies' options
entered through its hooks. This file is the command line around it: the options read and checked
once, a checkpoint resumed, the summary printed, the run drawn.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.trainer")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import numpy as np

import train

from studies.lib import arithmetic, checks, training
from studies.lib.checkpoint import Interrupted, checkpoint_owner, load_checkpoint
from studies.lib.cli import integer
from studies.lib.run_options import (DEFAULTS, OPTIONS, RUN_KEYS, add_options, cli_flag,
                                     validate_options)
from studies.lib.training import Diverged, check_run_memory


def train_parser():
    ap = cli.OneLineParser(prog="python -m studies.trainer", description=(
        "Train the one-block Transformer of Edelman et al. (2022) on an s-sparse Boolean task, "
        "with every option the studies use (train.py keeps the paper's alone). With no options: "
        "the demo, 3-sparse AND at T=100 from 500 samples. The experiment: "
        "'python -m studies.sweep --help'."))
    add_options(ap, [name for name, *_ in OPTIONS])
    ap.add_argument("--json", metavar="PATH", help="also write the summary as JSON to PATH")
    ap.add_argument("--plot", metavar="PATH", help="also draw the run (losses, accuracies, each "
                    "head's [CLS] attention at the end, S marked) into PATH (.png, .pdf, .svg); "
                    "needs matplotlib")
    ap.add_argument("--save", metavar="PATH", help="checkpoint (.npz) written every --save-every "
                    "steps, at the end and on Ctrl-C or SIGTERM")
    ap.add_argument("--save-every", dest="save_every", type=integer(1), default=100,
                    help="steps between checkpoints (default %(default)s)")
    ap.add_argument("--resume", metavar="PATH", help="continue from this checkpoint with its "
                    "options and its run's length; only --steps, --log-every and --save may "
                    "be given anew")
    ap.add_argument("--threads", type=integer(1, 4096), default=1,
                    help="BLAS threads (default %(default)s; see the README on speed)")
    return ap


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (isinstance(argv, list) and all(isinstance(v, str) for v in argv)):
        raise checks.refuse("argv", argv, "None or a list of strings (the command line)", False)
    training.keep_freed_memory()
    ap = train_parser()
    a = ap.parse_args(argv)
    opts = vars(a).copy()
    out_json, plot, save, save_every, resume = (opts.pop(k) for k in (
        "json", "plot", "save", "save_every", "resume"))
    opts.pop("threads")
    ckpt = None
    if resume:
        ckpt = _resume_options(ap, argv, opts, resume)
        save = save or resume
    try:                                      # never over a file that is not this run's own
        cli.claim_outputs([(out_json, "summary", "--json"), (plot, "plot", "--plot"),
                           (save, "checkpoint", "--save", checkpoint_owner(resume))])
    except ValueError as e:
        ap.error(str(e))
    try:                                      # the door: every option checked, once
        o = validate_options(opts, cli_flag)
        check_run_memory(o, cli_flag)
    except ValueError as e:
        ap.error(str(e))
    at_end = bool(ckpt) and ckpt["step"] == o["steps"]
    print(f"{o['model']} on task {o['task']}  T={o['T']}  s={o['s']}  m={o['m']}  "
          f"steps={o['steps']}  lr={o['lr']}  wd={o['wd']}  d={o['d']}  heads={o['heads']}  "
          f"mlp={o['mlp']}  {o['dtype']}  seed={o['seed']}"
          + ((f"  (checkpoint at its last step {ckpt['step']}: evaluating it)" if at_end else
              f"  (resumed at step {ckpt['step']})") if ckpt else ""), flush=True)
    try:
        r = training.study_run(o, log=lambda line: print(line, flush=True), save=save,
                      save_every=save_every, resume=ckpt, curve=bool(plot))
    except Interrupted as e:
        print(_interrupted_message(e, o), file=sys.stderr)
        return e.code
    except (Diverged, ValueError) as e:       # ValueError: e.g. --data unambiguous, m too small
        print(f"studies.trainer: {e}", file=sys.stderr)
        return 1
    except MemoryError as e:
        sizes = " ".join(cli_flag(k, o[k]) for k in ("T", "m", "n_test", "val", "d", "mlp")
                         if k != "val" or o["val"])
        print(f"studies.trainer: out of memory ({e}) in a run with {sizes}: make one of them smaller",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:               # only without --save: with it, Interrupted
        print("\ninterrupted (no --save given, so nothing was kept; add --save PATH to be "
              "able to resume)", file=sys.stderr)
        return 130
    _print_summary(r, o, save)
    if out_json:
        summary = {k: v for k, v in r.items() if k not in ("params", "cfg", "cls_attention")}
        cli.write_json(out_json, summary)          # strict JSON: NaN is written as null
    if plot:
        _plot_run(r, o, plot)
    return 0


def _resume_options(ap, argv, opts, resume):
    """--resume: the checkpoint read and checked, its options put into `opts` (the run's length
    too, unless --steps was typed); an option typed anew that contradicts it, or a checkpoint
    past the steps asked for, is the parser's one-line error. -> the checkpoint."""
    explicit = cli.explicit_options(ap, argv)
    try:
        ckpt = load_checkpoint(resume)
    except ValueError as e:
        ap.error(str(e))
    clash = [f"--{k.replace('_', '-')} {opts[k]} (checkpoint: {ckpt['options'][k]})"
             for k in RUN_KEYS if k in explicit and opts[k] != ckpt["options"][k]]
    if clash:
        ap.error(f"{resume} was made for another configuration: " + ", ".join(clash))
    opts.update(ckpt["options"])          # RUN_KEYS only; the length, unless typed:
    if "steps" not in explicit:
        if not ckpt["run_steps"]:
            ap.error(f"{resume} does not record its run's length (an older checkpoint): "
                     f"give --steps, the length to train it to")
        opts["steps"] = ckpt["run_steps"]
    if ckpt["step"] > opts["steps"]:
        ap.error(f"{resume} is already at step {ckpt['step']}; ask for at least that many "
                 f"with --steps")
    return ckpt


def _plot_run(r, o, path):
    """The run in one picture: the training loss at every step and the accuracies at the steps
    measured for it (r["curve"]: each of the first 10, then log-spaced, on a log step axis, so
    the early rise is drawn where it happens); each head's mean [CLS] attention over the T
    positions at the end, S and the uniform level 1/(T+1) marked. Every line in a legend."""
    plt = cli.pyplot_or_hint("rerun with --plot")
    if plt is None:
        return None
    panels = 2 if r["cfg"] else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7.0, 3.2 * panels), squeeze=False)
    ax = axes[0, 0]
    steps = np.arange(r["steps"] - len(r["losses"]) + 1, r["steps"] + 1)
    lines = ax.plot(steps, np.maximum(r["losses"], 1e-12), color="0.3", lw=1,
                    label="training loss (left axis)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    acc = ax.twinx()
    points = r.get("curve") or r["logged"]
    for key, label, style in (("train_acc", "train accuracy", "b.-"),
                              ("acc", f"{r['logged_on']} accuracy", "r.-")):
        lines += acc.plot([e["step"] for e in points], [e[key] for e in points], style, ms=3,
                          lw=0.8, label=label + " (right axis)")
    acc.set_ylim(0.4, 1.02)
    acc.set_ylabel("accuracy")
    acc.legend(lines, [line.get_label() for line in lines], loc="center left", fontsize=8)
    ax.set_title(f"{o['model']} on {o['task']}, T={o['T']}, s={o['s']}, m={o['m']}, "
                 f"seed={o['seed']}: test accuracy {r['test_acc']:.3f} at the end", fontsize=9)
    if r["cfg"]:
        ax = axes[1, 0]
        A = r["cls_attention"][:-1]                                   # [T, H]; [CLS] left out
        for h in range(A.shape[1]):
            best = h == r["best_head"]
            first_other = h == (1 if r["best_head"] == 0 else 0)
            ax.plot(A[:, h], lw=1.6 if best else 0.6, color="C3" if best else "0.6",
                    label=f"head {h} (most mass on S)" if best else
                    "the other heads" if first_other else None)
        ax.axhline(1 / (o['T'] + 1), color="k", ls="--", lw=0.8,
                   label=f"uniform attention, 1/(T+1) = {1 / (o['T'] + 1):.3f}")
        for i, t in enumerate(r["S"]):
            ax.axvline(t, color="C0", ls=":", lw=1, label=f"S = {r['S']}" if i == 0 else None)
        ax.set_xlabel("position t")
        ax.set_ylabel("[CLS] attention")
        ax.set_title(f"each head's [CLS] attention at the end, mean over {min(200, o['n_test'])} "
                     f"test samples", fontsize=9)
        ax.legend(fontsize=8)
    cli.save_figure(plt, fig, path)
    print(f"plot: {path}")
    return path


def _interrupted_message(e, o):
    """What an Interrupted run kept, and the command that goes on from it."""
    again = (f"  python -m studies.trainer --resume {e.path}" +
             (f" --steps {o['steps']}" if o['steps'] != DEFAULTS["steps"] else ""))
    if not e.step:
        where = "before training started" if e.phase == "start" else "before a step was saved"
        return f"\n{e.word} {where}; nothing was saved in {e.path} yet"
    if e.phase == "evaluation" or (e.phase == "training" and e.step == o['steps']):
        when = "during the final evaluation" if e.phase == "evaluation" else "after the last step"
        return (f"\n{e.word} {when}; all {e.step} steps are saved in {e.path}. Evaluate and "
                f"report them with:\n{again}")
    if e.phase == "start":
        return (f"\n{e.word} before training went on; the checkpoint {e.path} is unchanged at "
                f"step {e.step}. Resume with:\n{again}")
    return (f"\n{e.word} after step {e.step}; checkpoint saved in {e.path}. Resume with:\n"
            f"{again}")


def _print_summary(r, o, save):
    """train.py's summary, with what the studies add: early stopping's step, the steps of this
    session, the checkpoint, the arithmetic's record."""
    if o['val']:
        print(f"\nearly stopping: the parameters of step {r['best_step']}, the lowest loss on "
              f"{o['val']} validation samples (checked every {o['val_every']} steps)", end="")
    train.print_summary(r, o)
    ran = len(r["losses"])
    if ran < r["steps"]:
        print(f"({ran} of the {r['steps']} steps in this session)")
    print((f"checkpoint {save}\n" if save else "") +
          f"arithmetic: {arithmetic.words(r['arithmetic'])} on {r['arithmetic']['cpu']}",
          flush=True)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.trainer", main))
