"""sweep.py (studies, a command): the paper's experiment, the critical sample size m*(T) (Edelman et
al. 2022, Section 5). Run from the repository's root:

    python -m studies.sweep --preset paper        T = 100..1100: the paper's figure
    python -m studies.sweep --preset extended     T = 10..10^4, 30 seeds (hours: shard it)
    python -m studies.sweep --help                every option, and the other commands:
    python -m studies.sweep compare DIR DIR ...   one table over sweeps of different protocols
    python -m studies.sweep width DIR DIR ...     widths side by side, where each leaves its log law
    python -m studies.sweep families DIR DIR ...  other tasks and sparsities side by side
    python -m studies.sweep limit                 the statistical limit per T, no training
    python -m studies.sweep headline              the front page's table, from the committed folders
    python -m studies.sweep pages PAGE ...        copy again the tables results pages show

For each T and seed, training runs (training.study_stack) at training-set sizes m on a grid say
whether the model reaches test accuracy >= 0.99; a search per seed (stats.bisect_search) picks the
m to run. Every run is one CSV row, written as it finishes (folder.py), so an interrupted sweep
loses nothing and resumes where it stopped; the tables and plots come from report.py.

The file reads top to bottom: the presets and named protocols, the command line, a sweep's steps
(options, its folder, its searches on a pool of worker processes).
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.sweep")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import os
import time
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np

import data

from studies.lib import (arithmetic, compare, families, folder, folder_write, harness, limits,
                         provenance, report, row_kinds, run_options, seed_laws, training,
                         workers)
from studies.lib.cli import OneLineParser, int_list, integer, number
from studies.lib.stats import SEARCHES, m_grid, replay

# ---------------------------------------------------------------- presets and protocols --------

PRESETS = {
    "paper": dict(T=[100, 300, 500, 700, 900, 1100], seeds=10),
    "extended": dict(T=[10, 30, 100, 300, 500, 700, 900, 1100, 3000, 10000], seeds=30),
    "smoke": dict(T=[8, 16], seeds=2, steps=150, n_test=500,
                  grid_max={"transformer": 64, "mlp": 64}),
}


# ---------------------------------------------------------------- the command line -------------

def _model_list(text):
    vals = [v.strip() for v in text.split(",")]
    bad = [v for v in vals if v not in ("transformer", "mlp")]
    if bad or len(set(vals)) < len(vals):
        raise cli.BadValue(f"allowed: transformer, mlp, each once; got {text!r}")
    return sorted(set(vals))                 # one order everywhere: shards split the same list


def _shard_spec(text):
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise cli.BadValue(f"must look like i/n with 0 <= i < n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise cli.BadValue(f"needs 0 <= i < n, got {text!r}")
    return i, n


COMMANDS = ("compare", "width", "families", "laws", "limit", "headline", "pages")


def _sweep_parser(commands=True):
    """The sweep's options, and (commands=True) the other commands as subcommands, each with its
    own --help. main leaves the subcommands out when none is named, so that a stray word after a
    mistyped option ("--model mlp") is reported as unrecognized, not as an unknown command."""
    ap = OneLineParser(prog="studies.sweep", description=(
        "Critical sample size m*(T) of a sparse task (the paper's Section 5 figure). Runs are "
        "saved as they finish, one CSV row each, in OUT/runs*.csv; rerunning the same command "
        "resumes. Shards (--shard i/n) split the (model, T, seed) searches across machines; copy "
        "their CSVs into one OUT and run with --report to merge."))
    ap.add_argument("--preset", choices=sorted(PRESETS), default="paper",
                    help="paper: T=100..1100, 10 seeds; extended: T=10..10^4, 30 seeds "
                         "(default %(default)s)")
    ap.add_argument("--Ts", type=int_list, help="comma-separated T values (overrides preset)")
    ap.add_argument("--seeds", type=integer(1), help="seeds per T (preset paper: 10, extended: 30)")
    ap.add_argument("--models", type=_model_list, default=None,
                    help="comma-separated: transformer,mlp (default transformer; with --report, "
                         "every model in the folder)")
    ap.add_argument("--search", choices=("bisect", "grid"), default="bisect",
                    help="bisect each seed's critical m on the grid (assumes success is monotone "
                         "in m), or run every grid m (default %(default)s)")
    ap.add_argument("--grid-min", dest="grid_min", type=integer(1), default=8,
                    help="smallest m (default %(default)s)")
    ap.add_argument("--grid-max", dest="grid_max", type=integer(1),
                    help="m at most this (default: transformer 600; "
                         "mlp 30*max(T) capped at 20000)")
    ap.add_argument("--grid-ratio", dest="grid_ratio", type=number(0, strict=True), default=1.05,
                    help="ratio of consecutive grid sizes, in (1, 10] (default %(default)s)")
    ap.add_argument("--bar", type=number(0, strict=True), default=0.99,
                    help="success: test accuracy >= bar, in (0, 1] (default %(default)s)")
    ap.add_argument("--out", default=None, help="results folder (default runs/PRESET)")
    ap.add_argument("--shard", type=_shard_spec, default=(0, 1), metavar="I/N",
                    help="run share I of N (0 <= I < N)")
    ap.add_argument("--workers", type=integer(1, os.cpu_count() or 1), default=os.cpu_count() or 1,
                    help="processes, at most the number of cores (default %(default)s)")
    provenance.add_other_arithmetic(ap)
    ap.add_argument("--report", action="store_true",
                    help="only merge OUT/runs*.csv and report (by default every model, T and "
                         "seed in the folder; sweep.json is left as it is)")
    ap.add_argument("--stack", type=integer(1), default=16,
                    help="at most this many Transformer runs with the same T and m trained as one "
                         "stack by one worker; fewer at large T, where big stacks run slower "
                         "(default %(default)s; 1 = one run at a time)")
    ap.add_argument("--protocol", choices=sorted(run_options.PROTOCOLS), default="ours",
                    help="named option set (PROTOCOLS in studies/lib/run_options.py): ours = train.py's "
                         "defaults; paper-data = training sets redrawn until one hypothesis fits, "
                         "10^4 test samples; the others change one training choice (default "
                         "%(default)s)")
    run_options.add_options(ap, folder.MODEL_OPTIONS, defaults={k: None for k in folder.MODEL_OPTIONS})
    if not commands:
        return ap
    sub = ap.add_subparsers(dest="command", parser_class=OneLineParser,
                            title="other commands (python -m studies.sweep COMMAND --help)",
                            metavar="{" + ",".join(COMMANDS) + "}")
    for add in (_add_compare_command, _add_width_command, _add_families_command,
                _add_laws_command, _add_limit_command, _add_headline_command, _add_pages_command):
        add(sub)
    return ap


def _folder_args(c, folders_help, seeds_help=None):
    """The arguments of a command over finished folders: the folders, --out, and (with
    seeds_help) the --seeds and --Ts filters."""
    c.add_argument("folders", nargs="+", help=folders_help)
    c.add_argument("--out", help="also write the table to this markdown file")
    if seeds_help:
        c.add_argument("--seeds", type=integer(1), help=seeds_help)
        c.add_argument("--Ts", type=int_list, help="only these T")


def _add_compare_command(sub):
    c = sub.add_parser("compare", help="one table over sweeps of different protocols",
                       description=(
        "One table over sweep folders, one protocol each (e.g. results/paper-range-ours "
        "results/paper-range-paper-data): m50, m90, memorisation, attention on S, CPU time."))
    _folder_args(c, "sweep output folders", "only seeds 0..N-1 (the same in every folder)")
    c.add_argument("--plot", help="also draw m50 [95%% CI] per protocol and T into this image "
                                  "(needs matplotlib)")
    c.add_argument("--growth-from", type=integer(1), metavar="T0",
                   help="also each folder's m50 over the first folder's at every T > T0, divided "
                        "by the same at T0, with a paired CI: does the gap grow with T?")
    c.set_defaults(run=compare.compare_command, parser=c, protocols=run_options.PROTOCOLS)


def _add_width_command(sub):
    c = sub.add_parser("width", help="widths side by side, and where each leaves its log T law",
                       description=(
        "Width against the log T law: sweep folders of several widths d (results/width/d-*): m50 "
        "and m90 per d and T, where each d's curve leaves the log law it follows at small T, the "
        "positional overlap of S, and the construction's width d_p beside the widths that stay "
        "on their law."))
    _folder_args(c, "sweep output folders; those of one width are pooled (same options, "
                   "different runs)", "only seeds 0..N-1")
    c.add_argument("--fit-below", dest="fit_below", type=number(0, strict=True), default=100,
                   help="the small-T log law is fitted over T <= this (default %(default)s)")
    c.add_argument("--plot", help="also draw the curves into this image (needs matplotlib)")
    c.set_defaults(run=compare.width_command, parser=c)


def _add_families_command(sub):
    c = sub.add_parser("families", help="other tasks and sparsities side by side",
                       description=(
        "Sweep folders of different tasks or sparsities s (results/families/*): per task, s "
        "and T, m50 and majority m* with 95%% intervals, the seeds that succeed by the largest m "
        "tried, the statistical limit, P(label = 1) on draws, CPU time; the fits against ln T, "
        "T and T^k per family where at least 3 T are determined, and against s (power law or "
        "exponential) per task and T where at least 3 s are."))
    _folder_args(c, "sweep output folders, one task and s each", "only seeds 0..N-1")
    c.add_argument("--plot", help="also draw the majority m* against T per family and against s "
                                  "per task into this image (needs matplotlib)")
    c.set_defaults(run=families.families_command, parser=c)


def _add_limit_command(sub):
    c = sub.add_parser("limit", help="the statistical limit per T, no training", description=(
        "The statistical limit of a sparse task, no training: per T, the smallest m at which a "
        "seed's training stream leaves exactly one compatible hypothesis (median and 5-95%% over "
        "seeds), and the probability that a random training set of m samples is ambiguous."))
    c.add_argument("--Ts", type=int_list, default=[10, 100, 1000, 10000, 100000],
                   help="T values (default 10,100,1000,10000,100000)")
    c.add_argument("--ms", type=int_list, default=[25, 50, 100],
                   help="m values for the ambiguity probability (default 25,50,100)")
    c.add_argument("--seeds", type=integer(1, 100000), default=limits.LIMIT_SEEDS,
                   help="streams per T, at most 100000 (default %(default)s)")
    c.add_argument("--sets", type=integer(1, 1000000), default=1000,
                   help="random training sets per (T, m) for the probability, at most 10^6 "
                        "(default %(default)s)")
    c.add_argument("--task", choices=data.TASKS, default="and", help="task (default and)")
    c.add_argument("--s", type=integer(1), default=3, help="sparsity (default 3)")
    c.add_argument("--out", help="also write the table (markdown) and JSON to this folder")
    c.set_defaults(run=limits.limit_command, parser=c)


def _add_laws_command(sub):
    c = sub.add_parser("laws", help="four laws fitted to every seed's critical m",
                       description=(
        "Per sweep folder, the laws a + b ln T, a + b T, a + b (ln T)^2 and a T^k fitted to "
        "every seed's critical m by maximum likelihood (lognormal seed noise; a seed above the "
        "grid censored at its top), compared by AIC, with intervals from resampling each T's "
        "seeds; from the second folder on, its exponent k minus the first's, paired seed by seed "
        "where the two hold the same T and seeds."))
    _folder_args(c, "sweep output folders (the first is the reference)", "only seeds 0..N-1")
    c.set_defaults(run=seed_laws.laws_command, parser=c)


def _add_headline_command(sub):
    c = sub.add_parser("headline", help="the front page's table, from the committed folders",
                       description=(
        "The README's short table: per T, the paper's m*, our majority m* with its 95%% "
        "interval at d = 64 and at d = 128, and the statistical limit; written to --out and pasted "
        "between the markers '<!-- begin results/headline.md -->' and '<!-- end "
        "results/headline.md -->' of --readme, which must have them."))
    c.add_argument("--d64", default="results/extended", help="folder of runs at d = 64; one at "
                                                            "another width is refused (default "
                                                            "%(default)s)")
    c.add_argument("--d128", nargs="+", default=["results/width/d-128"],
                   help="folder(s) of runs at d = 128, pooled; one at another width is refused "
                        "(default %(default)s)")
    c.add_argument("--out", default="results/headline.md", help="default %(default)s")
    c.add_argument("--readme", default="README.md", help="default %(default)s")
    c.add_argument("--plot", help="also draw m* per width, the paper's points and the limit into "
                                  "this image (needs matplotlib), e.g. results/headline.png")
    c.set_defaults(run=compare.headline_command, parser=c)


def _add_pages_command(sub):
    c = sub.add_parser("pages", help="copy the tables results pages show from their files again",
                       description=(
        "A results page copies each table from the file a command wrote, between the lines "
        "'<!-- begin PATH -->' and '<!-- end PATH -->'; this copies every such file into its "
        "block again (run from the repository's root: only regular text files inside it are "
        "read; markers that do not pair up, or a line that looks like a marker and is not "
        "exactly one, are an error; a page that is a link to a page inside the repository "
        "updates that page; line ends are kept)."))
    c.add_argument("pages", nargs="+", help="markdown pages, e.g. README.md results/*/README.md")
    c.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 if a block differs from its file")
    c.set_defaults(run=harness.pages_command, parser=c)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else harness.check_argv(argv)
    training.keep_freed_memory()
    named = bool(argv) and argv[0] in COMMANDS
    ap = _sweep_parser(commands=named or "-h" in argv or "--help" in argv)
    a = ap.parse_args(argv)
    if getattr(a, "command", None):
        return a.run(a, a.parser.error)
    return _main_sweep(ap, a, argv)


# ---------------------------------------------------------------- one sweep, step by step ------

def _main_sweep(ap, a, argv):
    """A sweep (or, with --report, only its report): its options, its folder, its searches, its
    report. Every problem before the first run is one line through ap.error."""
    if a.out is not None and not a.out.strip():
        ap.error(f"--out must name a folder, got {a.out!r}")
    out = a.out or os.path.join("runs", a.preset)     # never the committed results/
    meta_old, found = {}, []
    if os.path.isdir(out):
        try:
            folder.check_folder_kind(out, "sweep.json")
        except ValueError as e:
            ap.error(str(e))
    if a.report:
        if not os.path.isdir(out):
            ap.error(f"--report: no folder {out}")
        try:
            meta_old = folder.read_meta(out)
            if not meta_old and not folder.csv_paths(out):
                raise ValueError(f"--report: {out} holds no sweep (no sweep.json, no runs*.csv); "
                                 f"give the folder a sweep wrote")
            found = folder.folder_runs(out, meta_old.get("bar"),        # read again below:
                                       warn=lambda line: None)            # warned once, there
        except ValueError as e:
            ap.error(str(e))
        _take_folder_options(ap, a, argv, meta_old, found)
    Ts, n_seeds = _sweep_options(ap, a, argv)
    grids = _sweep_grids(ap, a, argv, Ts, meta_old.get("grids") if a.report else None)
    base = {k: getattr(a, k) for k in folder.MODEL_OPTIONS}
    if os.path.exists(out) and not os.path.isdir(out):
        ap.error(f"--out {out} is a file; give a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        ap.error(f"--out {out}: cannot create the folder ({e.strerror})")
    try:                 # a report too: it never writes between a sweep's rows and its report
        lock = folder_write.lock_folder(out, a.shard, f"a report, pid {os.getpid()}" if a.report
                                  else None)
    except ValueError as e:
        ap.error(str(e) + ("; for a table of a running sweep, copy its runs*.csv and sweep.json "
                           "into another folder and --report that" if a.report else ""))
    try:
        try:                 # the report's files: free, or this report's own (cli.claim_output)
            cli.claim_outputs([(os.path.join(out, name), kind, "--out")
                               for name, kind in report.FOLDER_OUTPUTS])
        except ValueError as e:
            ap.error(str(e))
        meta, accepted = _folder_meta(ap, a, out, base, grids, Ts, n_seeds,
                                     meta_old if a.report else None)
        return _run_and_report(ap, a, out, meta, accepted, base, Ts, n_seeds)
    finally:
        if lock:
            lock.close()


def _take_folder_options(ap, a, argv, meta, found):
    """--report: the folder decides what is reported unless the command line says otherwise (a
    report never drops rows): its options, bar, search and protocol, and every model, T and seed
    it holds or planned."""
    plan = meta.get("plan", {}) if isinstance(meta.get("plan"), dict) else {}
    if isinstance(meta.get("options"), dict):
        typed = cli.explicit_options(ap, argv)
        for k, v in meta["options"].items():
            if k in folder.MODEL_OPTIONS and k not in typed:
                setattr(a, k, v)
        for k in ("bar", "search", "protocol"):
            if k in meta and k not in typed:
                setattr(a, k, meta[k])
    a.models = a.models or sorted({r["model"] for r in found} | set(plan.get("models", [])))
    a.Ts = a.Ts or sorted({int(r["T"]) for r in found} | set(plan.get("Ts", [])))
    a.seeds = a.seeds or max([1 + int(r["seed"]) for r in found] + [plan.get("seeds", 1)])


def _sweep_options(ap, a, argv):
    """Every model option from the command line, else the protocol, the preset, train.py's
    default; checked together. -> (Ts, n_seeds)."""
    preset = PRESETS[a.preset]
    a.models = a.models or ["transformer"]
    Ts = a.Ts or preset["T"]
    n_seeds = a.seeds or preset["seeds"]
    try:                                  # before any list of searches is built from them
        folder.check_plan_size(len(a.models), len(Ts), n_seeds)
    except ValueError as e:
        ap.error(str(e))
    for key in folder.MODEL_OPTIONS:
        if getattr(a, key) is None:
            setattr(a, key, run_options.PROTOCOLS[a.protocol].get(key, preset.get(key, run_options.DEFAULTS[key])))
    if not (0 < a.bar <= 1):
        ap.error(f"--bar must be in (0, 1], got {a.bar}")
    if not 1 < a.grid_ratio <= 10:
        ap.error(f"--grid-ratio must be in (1, 10], got {a.grid_ratio}")
    problem = run_options.cross_option_problem(dict(vars(a), T=min(Ts)), flag=run_options.cli_flag)
    if problem:
        ap.error(problem.replace("--T", "the smallest T"))
    return Ts, n_seeds


def _sweep_grids(ap, a, argv, Ts, grids_of_folder=None):
    """{model: m grid}: the folder's own grid for a report (unless --grid-* are typed), else
    m_grid(--grid-min, --grid-max, --grid-ratio); the largest run of each is checked to fit in
    memory before anything runs."""
    preset, grids = PRESETS[a.preset], {}
    typed = cli.explicit_options(ap, argv)
    for model in a.models:
        if grids_of_folder and model in grids_of_folder and not (
                {"grid_min", "grid_max", "grid_ratio"} & typed):
            grids[model] = list(grids_of_folder[model])
            continue
        hi = a.grid_max or preset.get("grid_max", {}).get(model) or (
            600 if model == "transformer" else min(20000, 30 * max(Ts)))
        if hi < a.grid_min:
            ap.error(f"--grid-max {hi} is below --grid-min {a.grid_min}")
        try:
            grids[model] = m_grid(a.grid_min, hi, a.grid_ratio)
            training.check_run_memory(dict(run_options.DEFAULTS, model=model, T=max(Ts),
                                        m=grids[model][-1], n_test=a.n_test, dtype=a.dtype, d=a.d,
                                        heads=a.heads, mlp=a.mlp, val=a.val),
                                   flag=run_options.cli_flag)
        except ValueError as e:
            ap.error(str(e))
    return grids


def _folder_meta(ap, a, out, base, grids, Ts, n_seeds, old=None):
    """This sweep's sweep.json, merged with the folder's (which must describe the same
    experiment: options, bar, search and grids). A sweep writes it (_run_and_report, once the
    folder's rows are read and checked, so a refusal changes nothing); a report never does: it
    writes no fingerprint it did not run (a folder without sweep.json is reported with the
    options given, checked against the rows' own fingerprints). old: the folder's sweep.json
    when the caller has read it already (folder.read_meta: every field checked).
    -> (meta, the fingerprints whose rows belong to this sweep)."""
    meta_path = os.path.join(out, "sweep.json")
    here = provenance.machine(base["dtype"])
    meta = dict(options=base, bar=a.bar, search=a.search, grids=grids, protocol=a.protocol,
                machines=[here])
    meta["sweep_id"] = folder.sweep_fingerprint(meta)
    meta["plan"] = dict(models=a.models, Ts=Ts, seeds=n_seeds)
    accepted = {meta["sweep_id"]}
    if os.path.lexists(meta_path):
        try:
            old = dict(old or folder.read_meta(out))
        except ValueError as e:
            ap.error(str(e))
        if not a.report:                   # one arithmetic per folder, unless asked
            try:
                provenance.check_arithmetic(out, old, here, a.other_arithmetic)
            except ValueError as e:
                ap.error(str(e))
            was = provenance.recorded_arithmetic(out, old)
            if was is not None and arithmetic.differences(was, here):
                a.arithmetic_of = provenance.arithmetic_id(here)   # each new row records its own
                try:                      # beside the rows: free or ours, before sweep.json changes
                    folder_write.arithmetic_record(os.path.join(out, "runs.csv"))
                except ValueError as e:
                    ap.error(str(e))
        old_grids = dict(old.get("grids", {}))
        old["options"] = folder.full_options(old["options"])
        for key in ("options", "bar", "search"):
            if old.get(key) != meta[key]:
                ap.error(f"{out} holds a sweep with other {key} ({old.get(key)}); "
                         f"use another --out or the same options")
        for model, grid in grids.items():
            if model in old_grids and old_grids[model] != grid:
                ap.error(f"{out} holds a {model} sweep on another m grid; use another --out or "
                         f"the same --grid-min/--grid-max/--grid-ratio")
        meta["grids"] = dict(old_grids, **grids)
        if old.get("sweep_id"):            # same options (checked above), older fingerprint
            accepted.add(old["sweep_id"])
        was = old.get("plan", {})
        meta["plan"] = dict(models=sorted(set(a.models) | set(was.get("models", []))),
                            Ts=sorted(set(Ts) | set(was.get("Ts", []))),
                            seeds=max(n_seeds, was.get("seeds", 0)))
        meta["machines"] = old.get("machines", []) + [m for m in meta["machines"]
                                                      if m not in old.get("machines", [])]
        if "protocol" in old and old["protocol"] != a.protocol and a.report:
            meta["protocol"] = old["protocol"]      # same options, the name it was run under
    return meta, accepted            # written by _run_and_report, once the rows are read


def _run_and_report(ap, a, out, meta, accepted, base, Ts, n_seeds):
    """Run this shard's searches (unless --report), then report every finished run asked for."""
    i, n = a.shard
    csv_path = os.path.join(out, "runs.csv" if n == 1 else f"runs-shard-{i}-of-{n}.csv")

    def load_done():         # every row checked (folder.check_rows) before it is resumed or used
        rows = folder.folder_runs(out, a.bar, accepted)
        return {(r["model"], int(r["T"]), int(r["seed"]), int(r["m"])): r for r in rows}
    try:
        done = load_done()
    except ValueError as e:
        ap.error(str(e))
    if not a.report:                 # the rows read and checked: a refusal has changed nothing
        cli.write_json(os.path.join(out, "sweep.json"), meta)
        code = _run_searches(a, Ts, n_seeds, meta["grids"], base, csv_path, done, (i, n),
                            meta["sweep_id"])
        if code:
            return code
        done = load_done()
    rows = [r for (model, T, seed, m), r in done.items()
            if model in a.models and T in Ts and seed < n_seeds]
    if not rows:
        print(f"no finished runs in {out} for models {a.models}, T in {Ts}, seeds < {n_seeds}")
        return 0
    missing = folder.missing_searches(rows, a.models, Ts, n_seeds, meta["grids"], a.search)
    if missing:
        shown = ", ".join(f"{mo} T={T} seed {sd}" for mo, T, sd in missing[:6])
        print(f"warning: {len(missing)} of {len(a.models) * len(Ts) * n_seeds} searches are "
              f"missing or unfinished in {out} ({shown}{', ...' if len(missing) > 6 else ''}): "
              f"a missing shard or an interrupted run; the table below uses what is there")
    try:
        report.folder_report(out, rows, meta["grids"], a, meta["protocol"], missing)
    except KeyboardInterrupt:
        print(f"\ninterrupted during the report; every finished run is saved in {out}, and "
              f"`python -m studies.sweep --out {out} --report` makes the report again",
              file=sys.stderr)
        return 130
    return 0


# ---------------------------------------------------------------- the searches on a worker pool

class RunFailed(Exception):
    pass


Terminated = cli.Terminated        # SIGTERM arrived (cli.sigterm_raises): stop like Ctrl-C


def _take_stack(queue, most, dropout=False):
    """Pop from the queue of (job, m) probes the largest group that shares (model, T, m), at most
    most(T) probes (one for the MLP): the runs one worker trains as one stack."""
    groups = {}
    for i, ((model, T, _), m) in enumerate(queue):
        groups.setdefault((model, T, m), []).append(i)
    key = max(groups, key=lambda k: len(groups[k]))
    take = groups[key][:most(key[1]) if key[0] == "transformer" and not dropout else 1]
    probes = [queue[i] for i in take]
    for i in reversed(take):
        queue.pop(i)
    return probes


RowWriter = folder_write.RowWriter     # a sweep's CSV of runs (folder_write.py)


class _Searches:
    """Every (model, T, seed) search of a shard: each a generator of stats.SEARCHES driven by the
    runs saved so far, and a queue of the (job, m) probes to run next."""

    def __init__(self, jobs, grids, search, done):
        self.saved = {job: {} for job in jobs}     # job -> {m: success}, the runs on disk
        for (model, T, seed, m), r in done.items():
            if (model, T, seed) in self.saved:
                self.saved[(model, T, seed)][m] = bool(r["success"])
        self.gens, self.queue, self.finished = {}, [], set()
        for job in jobs:
            self.gens[job] = SEARCHES[search](grids[job[0]])
            self.answer(job, None)

    def answer(self, job, success, m=None):
        """Tell a search the outcome of its run at m (None: start it); queue its next probe."""
        if m is not None:
            self.saved[job][m] = bool(success)
        state, nxt = replay(self.gens[job], self.saved[job], success)
        if state == "run":
            self.queue.append((job, nxt))
        else:
            self.finished.add(job)


def _writers(csv_path, a, base):
    """The shard's CSV of runs and, inside a class ball, the ball-of-runs CSV beside it (each a
    RowWriter) -> (runs, ball or None); ValueError, one line, for a CSV that is a link or of
    another header's."""
    out = RowWriter(csv_path, arithmetic_of=getattr(a, "arithmetic_of", None))
    ball = RowWriter(os.path.join(os.path.dirname(out.path), "ball-of-" + os.path.basename(
        out.path)), kind=row_kinds.BALL_ROWS) if run_options.ball_radii(base) else None
    return out, ball


def _run_searches(a, Ts, n_seeds, grids, base, csv_path, done, shard, sweep_id=""):
    """Drive every (model, T, seed) search of this shard; run probes on a process pool, write
    each finished run as a CSV row at once (so an interrupted sweep loses nothing finished).
    Returns the exit code: 0, 130 (Ctrl-C), 143 (SIGTERM) or 1 (a run failed)."""
    jobs = [(model, T, seed) for model in a.models for T in Ts for seed in range(n_seeds)]
    jobs = [j for k, j in enumerate(jobs) if k % shard[1] == shard[0]]
    try:                     # a CSV that is a link, or of another header's: one line
        out, ball = _writers(csv_path, a, base)
    except ValueError as e:
        print(f"studies.sweep: error: {e}", file=sys.stderr)
        return 2
    per_search = (len(next(iter(grids.values()))) if a.search == "grid"
                  else int(np.ceil(np.log2(max(len(g) for g in grids.values()) + 1))))
    searches = _Searches(jobs, grids, a.search, done)
    expected = max(1, len(jobs) * per_search - sum(len(v) for v in searches.saved.values()))
    print(f"sweep: {len(jobs)} searches (model, T, seed) in this shard, about {per_search} runs "
          f"each; {len(done)} runs already saved; about {expected} to run; writing {out.path}",
          flush=True)
    progress = _SweepProgress(expected, len(jobs))
    pool = harness.worker_pool(a.workers) if a.workers > 1 else None

    def finish(probes, rows):
        """Record a stack's rows and queue each search's next probe."""
        for (job, m), row in zip(probes, rows):
            record = row.pop("ball", None)       # the class ball's record, beside the runs
            if ball and record:                  # (a diverged run has none)
                ball.write(dict(record, model=job[0], T=job[1], seed=job[2], m=m))
            row = dict(row, success=int(row["test_acc"] >= a.bar),   # nan (diverged) fails
                       sweep_id=sweep_id)
            out.write(row)
            done[job + (m,)] = dict(row, success=bool(row["success"]))
            progress.line(job, m, row, len(searches.finished))
            searches.answer(job, row["success"], m)

    try:
        with cli.sigterm_raises():      # SIGTERM as Ctrl-C: one line, the rows kept
            _drive(searches, pool, a.workers, finish,
                  lambda probes: [dict(base, model=job[0], T=job[1], seed=job[2], m=m)
                                  for job, m in probes],
                  lambda T: workers.stack_size(T, a.stack, base["d"], base["heads"],
                                       np.dtype(base["dtype"]).itemsize),
                  bool(base.get("dropout")))
    except (KeyboardInterrupt, Terminated) as e:
        print(f"\n{'terminated (SIGTERM)' if isinstance(e, Terminated) else 'interrupted'}: "
              f"{progress.n_run} runs of this session are saved in {out.path}; rerun the same "
              f"command to resume", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    except RunFailed as e:
        print(f"studies.sweep: {e}; the {progress.n_run} runs finished before it are saved in "
              f"{out.path}", file=sys.stderr)
        return 1
    finally:
        if pool:                  # running workers are stopped, not left to finish for nobody
            pool.stop()
        out.close()
        if ball:
            ball.close()
    print(f"sweep: {progress.n_run} runs in {progress.minutes():.1f} min")
    return 0


def _drive(searches, pool, n_workers, finish, options_of, stack_of, dropout):
    """Take stacks of probes from the searches' queue and train them (in this process, or on the
    pool, at most `n_workers` stacks at a time) until every search is finished. A run that raises
    is RunFailed, after the stacks already finished are recorded."""
    pending = {}
    while searches.queue or pending:
        while searches.queue and (pool is None or len(pending) < n_workers):
            probes = _take_stack(searches.queue, stack_of, dropout)
            if pool is None:                 # the same one-line report as from a pool
                try:
                    rows = workers.sweep_worker(options_of(probes))
                except (KeyboardInterrupt, Terminated):
                    raise
                except Exception as e:
                    raise RunFailed(_failed(probes, e)) from None
                finish(probes, rows)
            else:
                pending[pool.submit(workers.sweep_worker, options_of(probes))] = probes
        if pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: f.exception() is not None):
                probes = pending.pop(fut)
                if fut.exception() is not None:      # record the others first, then stop
                    raise RunFailed(_failed(probes, fut.exception()))
                finish(probes, fut.result())


def _failed(probes, e):
    (model, T, seed), m = probes[0]
    return f"run {model} T={T} seed={seed} m={m} failed: {type(e).__name__}: {e}"


class _SweepProgress:
    """One line per finished run: the run, its outcome, elapsed time and an estimate of the rest."""

    def __init__(self, expected, n_jobs):
        self.expected, self.n_jobs, self.n_run, self.t0 = expected, n_jobs, 0, time.perf_counter()

    def minutes(self):
        return (time.perf_counter() - self.t0) / 60

    def line(self, job, m, row, n_finished):
        self.n_run += 1
        el = time.perf_counter() - self.t0
        eta = el / self.n_run * max(0, self.expected - self.n_run)
        print(f"[{self.n_run:4d}/~{self.expected}] {job[0]:11s} T={job[1]:<5d} seed={job[2]:<3d} "
              f"m={m:<6d} test acc {row['test_acc']:.4f} {'ok  ' if row['success'] else 'fail'} "
              f"{row['seconds']:6.1f}s  elapsed {el / 60:5.1f} min, about {eta / 60:.0f} min "
              f"left ({max(self.n_jobs - n_finished, 0)} searches open)", flush=True)


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.sweep", main))
