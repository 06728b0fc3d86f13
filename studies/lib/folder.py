"""folder.py (studies/lib): a results folder on disk, a sweep's, steps.py's or mechanism.py's: its
description (sweep.json, steps.json, plan.json, curves.json) read and checked, its rows checked
against it and against each other (check_rows), and the one reader of every file kind (READERS).
Every command that writes runs into a folder stands on it; the kinds of rows and the reading of one
row are rows.py's, the writing (RowWriter) and the folder's lock folder_write.py's.

A folder holds one experiment: every run is one row of OUT/runs*.csv (written and flushed as it
finishes, so an interrupted sweep loses nothing), and OUT/sweep.json records the options, the m
grids, the search, the success bar, the plan (models, T, seeds) and the machines (each with
the arithmetic it ran: arithmetic.py's record), with a fingerprint of what defines the experiment
(sweep_fingerprint) that every row carries too. Shards write CSVs of their own into one folder;
reports read them all. steps.py's folder is the same kind: OUT/steps.csv (STEPS_ROWS) read,
written and checked by the same functions.

The file reads top to bottom: the readers, the rows against their folder, the fingerprint and the
checks that rows belong to one sweep, sweep.json, a study's plan.json, the steps study's files;
the machine and the arithmetic a folder's rows were made by (arithmetic.json) are provenance.py's.
"""
import glob
import hashlib
import json
import os
import re

from studies.lib import cli, run_options
from studies.lib.checks import INTS, check_number
from studies.lib.harness import check_path, shown
from studies.lib.row_kinds import (DESIGNS, MAX_SEARCHES, MECHANISM_ROWS, MODELS, STEPS_ROWS,
                                   SWEEP_ROWS, TRAJECTORY_ROWS, check_bar, check_kind,
                                   check_row_list, header_state, own_file, read_rows)
from studies.lib.stats import SEARCHES, seed_outcome


# Every file a study writes and another reads, and its one reader. Every command reads these files
# through them, and no other code parses one (folder.parse_json, csv.reader, np.load): a test scans
# every module of studies/ and holds the parsing to READERS and PARSE_HELPERS. A new file kind
# joins by its line here, and the damage suite (studies/test_studies.py) applies every standard
# damage to every kind listed.
READERS = {
    "runs*.csv of a sweep, steps.csv, runs.csv of a study, trajectories.csv, ball-of-runs.csv":
        "row_kinds.read_rows",                    # one schema per kind (KINDS), written a row at a time
    "pairs.csv": "row_kinds.read_whole",          # PAIR_ROWS, written whole
    "sweep.json": "folder.read_meta",
    "plan.json": "folder.read_plan",
    "arithmetic.json": "provenance.read_finding",
    "steps.json": "folder.read_steps_meta",
    "curves.json": "folder.read_curves",
    "limits.json": "limits.statistical_limits",   # a cache: a damaged one is set aside with a
                                                  # warning, its limits computed again
    "a checkpoint (.npz)": "checkpoint.load_checkpoint",
    "a results page, and the tables its markers name": "harness._page_files",
}   # table.md, critical.json, the plots: written for readers, read by no command
PARSE_HELPERS = {   # parsing that is not a reader of its own: what the readers above stand on
    "folder.read_json": "the JSON text of a file, for the readers of JSON kinds",
    "folder.parse_json": "JSON text, a key twice or nesting too deep refused (every JSON reader)",
    "row_kinds.csv_header": "a CSV's header line, for RowWriter's check of a file it appends to",
    "row_kinds._header_of": "a CSV's header line, for read_rows",
    "row_kinds._row_of": "one line of a CSV as a row, for read_rows",
    "row_kinds._fields": "one CSV line's fields (a field past the csv module's limit refused)",
    "cli._json_file": "claim_output's recognition of a file the project wrote (never an input)",
}


# ---------------------------------------------------------------- rows against their folder ----
# check_rows' two checks beyond a row alone (rows.py reads and checks each row by itself): a row
# against its folder's description (sweep.json, steps.json or plan.json), and the rows of one
# folder against each other.

def _mechanism_row_in(r, plan, bar):
    """What makes a mechanism row contradict its folder's plan (None when nothing does): success
    against its test accuracy under the plan's bar (nan, a diverged run, is a failure); its
    (design, d, T, m) a cell of the plan, its seed one of the plan's, its task, s and step count
    the cell's options."""
    acc, ok = float(r["test_acc"]), r["success"] == "1"
    if bar is not None and ok != (acc >= bar):
        return (f"success {int(ok)} contradicts its test accuracy {r['test_acc']} (the plan's "
                f"bar is test accuracy >= {bar}); the row was edited or belongs to another study")
    return _plan_problem(r, plan, ("task", "s", "steps")) if plan else None


def _plan_problem(r, plan, options):
    """What makes a study's row contradict its plan (None when nothing does): its (design, d, T,
    m) not a cell of the plan, its seed not one of the plan's, or one of `options` (task, s,
    steps) not its cell's."""
    key = (r["design"], int(r["d"]), int(r["T"]), int(r["m"]))
    cell = next((c for c in plan["cells"] if (c["design"], c["d"], c["T"], c["m"]) == key), None)
    if cell is None:
        return (f"{key[0]} d={key[1]} T={key[2]} m={key[3]} is not a cell of the folder's plan "
                f"(plan.json); the row was edited or belongs to another study")
    if int(r["seed"]) >= plan["seeds"]:
        return (f"seed {r['seed']} is not one of the plan's seeds 0..{plan['seeds'] - 1} "
                f"(plan.json); the row was edited or belongs to another study")
    for k in options:
        if (r[k] if k == "task" else int(r[k])) != cell["options"][k]:
            return (f"{k} {r[k]} is not its cell's {k} {cell['options'][k]} (plan.json); the row "
                    f"was edited or belongs to another study")
    return None


def _trajectory_row_in(r, plan, bar):
    """What makes a trajectory row contradict its folder's plan (None when nothing does): its
    success against its final test accuracy under the bar, its step one the plan logs (1 or a
    multiple of the plan's `every`), and what a mechanism row must agree with (its cell, seed,
    step count)."""
    acc, ok = float(r["final_test_acc"]), r["success"] == "1"
    if bar is not None and ok != (acc >= bar):
        return (f"success {int(ok)} contradicts its final test accuracy {r['final_test_acc']} "
                f"(the plan's bar is test accuracy >= {bar}); the row was edited or belongs to "
                f"another study")
    if not plan:
        return None
    step = int(r["step"])
    if step != 1 and step % plan["every"]:
        return (f"step {step} is not a logged step (1 and every {plan['every']}, plan.json); the "
                f"row was edited or belongs to another study")
    return _plan_problem(r, plan, ("steps",))


def _trajectories_together(rows, plan):
    """The first row (and what is wrong) whose run's rows disagree on its final test accuracy:
    every row of one run carries the same outcome."""
    final = {}
    for r in rows:
        key = (int(r["d"]), int(r["T"]), int(r["m"]), int(r["seed"]))
        first = final.setdefault(key, r)
        if r["final_test_acc"] != first["final_test_acc"]:
            return r, (f"final test accuracy {r['final_test_acc']} of d={key[0]} T={key[1]} "
                       f"m={key[2]} seed={key[3]} differs from {first['final_test_acc']} in "
                       f"{first.get('line', 'another row')}; one run has one end")
    return None


def _sweep_row_in(r, meta, bar):
    """What makes a sweep row contradict its folder (None when nothing does): its success flag
    against its test accuracy under `bar` (without a bar, the contradictions no bar in (0, 1]
    allows: success 1 with accuracy nan or 0, success 0 with accuracy 1); and, with the folder's
    sweep.json `meta`, its task, s and step count against the sweep's options and its m against
    the folder's grid of its model."""
    acc, ok = float(r["test_acc"]), bool(r["success"])
    if bar is not None:
        bad, rule = ok != (acc >= bar), f"the folder's bar is test accuracy >= {bar}"
    else:
        bad, rule = (ok and not acc > 0) or (not ok and acc >= 1), "no bar in (0, 1] gives that"
    if bad:
        return (f"success {int(ok)} contradicts its test accuracy {r['test_acc']} ({rule}); the "
                f"row was edited or belongs to another sweep")
    if not meta:
        return None
    o = full_options(meta["options"])
    for k in ("task", "s", "steps"):
        if (r[k] if k == "task" else int(r[k])) != o[k]:
            return (f"{k} {r[k]} is not the folder's {k} {o[k]} (sweep.json); the row was edited "
                    f"or belongs to another sweep")
    grid = meta.get("grids", {}).get(r["model"])
    if grid and int(r["m"]) not in grid:
        return (f"m {r['m']} is not on the folder's {r['model']} grid (sweep.json: {grid[0]}.."
                f"{grid[-1]}, {len(grid)} sizes); the row was edited or belongs to another sweep")
    return None


def _steps_row_in(r, meta, bar=None):
    """What makes a steps row contradict its folder's steps.json `meta` (None when nothing
    does): the task, s and m of its options, its budget and check interval."""
    if not meta:
        return None
    want = dict(task=meta["options"]["task"], s=meta["options"]["s"], m=meta["options"]["m"],
                budget=meta["budget"], every=meta["every"])
    for k, v in want.items():
        if r[k] != v:                              # read_rows typed the row (_steps_row)
            return (f"{k} {r[k]} is not the folder's {k} {v} (steps.json); the row was edited "
                    f"or belongs to another folder")
    return None


def _sizes_searched(grid, saved):
    """Every m a bisection over `grid` may run, given the outcomes saved {m: success}: its path
    through the saved runs, and at a size not saved (a row lost to a torn line, or a search not
    finished) both ways on (at most about 2^7 paths)."""
    seen = set()

    def walk(answers):
        gen = SEARCHES["bisect"](grid)
        try:
            m = next(gen)
            for answer in answers:
                m = gen.send(answer)
            while True:
                seen.add(m)
                if m not in saved:
                    walk(answers + [True])
                    walk(answers + [False])
                    return
                answers = answers + [saved[m]]
                m = gen.send(saved[m])
        except StopIteration:
            return
    walk([])
    return seen


def _sweep_rows_searched(rows, meta):
    """The first row (and what is wrong) at an m its seed's bisection never runs: replaying the
    folder's search (sweep.json: search, grids) over the seed's runs, every m they hold must be
    on its path (_sizes_searched). A bisection runs about 7 sizes of its grid; a row at another
    size was edited or belongs elsewhere, and would move m50 and m* without a word. None when
    every row can be a probe (a grid walk runs every size)."""
    if not meta or meta.get("search") != "bisect":
        return None
    by_seed = {}
    for r in rows:
        by_seed.setdefault((r["model"], int(r["T"]), int(r["seed"])), []).append(r)
    for (model, T, seed), runs in by_seed.items():
        grid = meta.get("grids", {}).get(model)
        if not grid:
            continue
        searched = _sizes_searched(grid, {int(r["m"]): bool(r["success"]) for r in runs})
        stray = next((r for r in runs if int(r["m"]) not in searched), None)
        if stray:
            return stray, (f"m {stray['m']} is not a size the folder's bisect search runs for "
                           f"{model} T={T} seed={seed} (its grid in sweep.json, given that "
                           f"seed's other runs); the row was edited or belongs to another sweep")
    return None


def check_rows(rows, bar=None, meta=None, kind=SWEEP_ROWS):
    """The one row validator, used by resume, merge and report of sweeps (folder_runs) and of
    steps.py: rows must agree with themselves, with their folder and with each other, or
    ValueError names the file and line.
      - A row must agree with its folder's description `meta` (sweep.json, steps.json) and a
        sweep row with the folder's `bar` (kind["agrees"]: task, s, step count or budget, grid).
      - Two rows of one run with different outcomes are refused. The same run recorded twice
        with the same outcome (a shard's CSV copied in twice) counts once: the first row read is
        kept, the others dropped.
      - The runs of one seed must be the sizes its search runs (kind["together"]: a sweep's
        bisection replayed over its grid).
    -> the rows, each run once."""
    check_row_list(rows)
    check_bar(bar)
    check_kind(kind)
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"meta must be the folder's description (a dict) or None, got "
                        f"{shown(meta)}")
    if meta and kind in (MECHANISM_ROWS, TRAJECTORY_ROWS):
        meta = check_plan(meta, "meta (the study's plan)")
    agrees, together = _agreement(kind)
    kept, seen = [], {}
    for r in rows:
        where = r.get("line", "a row")
        missing = [k for k in kind["fields"] if k not in kind["optional"] and k not in r]
        if missing:
            raise ValueError(f"{where}: not {kind['what']}'s row (no {', '.join(missing)}); rows "
                             f"are read by row_kinds.read_rows")
        problem = agrees(r, meta, bar)
        if problem:
            raise ValueError(f"{where}: {problem}")
        key = kind["run"](r)
        if key in seen:
            first = seen[key]
            a, b = kind["outcome"](r), kind["outcome"](first)
            if a != b:
                raise ValueError(f"{where} and {first.get('line', 'another row')} record the run "
                                 f"{kind['name'](key)} with opposite outcomes ({kind['show'](a)} "
                                 f"and {kind['show'](b)}); keep the right one")
            continue
        seen[key] = r
        kept.append(r)
    stray = together(kept, meta)
    if stray:
        raise ValueError(f"{stray[0].get('line', 'a row')}: {stray[1]}")
    return kept


def study_csvs(path, kind, what):
    """The existing CSVs of one kind of rows that `path` (NAME.csv) stands for: itself and the
    continuations NAME-partK.csv that RowWriter opens beside a file of an older header, in K's
    order. A file whose header is neither the kind's fields nor those without its optional
    columns nor one of its older headers (kind["older"]; written before them: read with the
    missing columns empty) is refused, one line naming it."""
    path = check_path("path", path, "a CSV's path (NAME.csv)")
    if not path.endswith(".csv"):
        raise ValueError(f"path must name a CSV (NAME.csv), got {path!r}")
    check_kind(kind)
    stem = path[:-len(".csv")]
    part = re.compile(re.escape(stem) + r"-part(\d+)\.csv$")
    parts = [path] + sorted((p for p in glob.glob(glob.escape(stem) + "-part*.csv")
                             if part.match(p)), key=lambda p: int(part.match(p).group(1)))
    headers = [kind["fields"], [k for k in kind["fields"] if k not in kind["optional"]]] + [
        list(h) for h in kind.get("older", ())]
    for p in parts:
        if os.path.lexists(p) and not os.path.isfile(p):       # never opened: a FIFO never ends
            raise ValueError(f"{p} is not a regular file (a folder, device or pipe); refusing "
                             f"to read it")
        if all(header_state(p, h) == "other" for h in headers):
            raise ValueError(f"{p} is not {what} (another header, or no CSV at all); move it "
                             f"away or use another folder")
    return [p for p in parts if os.path.exists(p)]


def _agreement(kind):
    """(agrees, together) of check_rows for a kind of rows: a row against the folder's description
    (-> the problem in words, or None), and the kept rows against each other (-> (row, problem)
    or None)."""
    none = lambda rows, meta: None
    return {SWEEP_ROWS["what"]: (_sweep_row_in, _sweep_rows_searched),
            STEPS_ROWS["what"]: (_steps_row_in, none),
            MECHANISM_ROWS["what"]: (_mechanism_row_in, none),
            TRAJECTORY_ROWS["what"]: (_trajectory_row_in, _trajectories_together),
            }.get(kind["what"], (none, none))


# ---------------------------------------------------------------- one sweep per folder

# train.py's options a sweep shares with every run. Not --model: a sweep takes --models (a list),
# and with abbreviations off, --model is an error rather than a silent prefix of --models.
MODEL_OPTIONS = ("task", "s", "data", "steps", "lr", "wd", "n_test", "d", "heads", "mlp", "dtype",
                 "batch", "optimizer", "beta2", "decay", "freeze", "ln1_gain", "qk_ball",
                 "ball_qk", "ball_vo", "ball_w", "ball_mlp", "qkv_init", "qkv_step", "clip", "dropout", "val", "val_every", "pos_init")


def full_options(options):
    """A sweep.json's options with train.py's default for every model option it does not name
    (folders written before an option existed ran at its default)."""
    if not isinstance(options, dict):
        raise TypeError(f"options must be a dict of train.py's options, got {shown(options)}")
    unknown = sorted(set(options) - set(run_options.DEFAULTS), key=str)
    if unknown:
        raise ValueError(f"options has {unknown[0]!r}, not one of train.py's options")
    return dict({k: run_options.DEFAULTS[k] for k in MODEL_OPTIONS}, **options)


def sweep_fingerprint(meta):
    """12 hex digits naming a sweep's options, success bar and search: rows of one experiment
    share it, whatever shard or machine wrote them."""
    if not (isinstance(meta, dict) and isinstance(meta.get("options"), dict) and
            {"bar", "search"} <= set(meta)):
        raise ValueError(f"meta must be a sweep.json's dict (options, bar, search), got "
                         f"{shown(meta)}")
    options = {k: v for k, v in meta["options"].items() if v != run_options.DEFAULTS.get(k, object())}
    key = json.dumps(dict(options=options, bar=meta["bar"], search=meta["search"]),
                     sort_keys=True)    # options at their default are left out, so a new option
    return hashlib.sha1(key.encode()).hexdigest()[:12]   # at its default changes no fingerprint


def _check_one_sweep(rows, sweep_ids, out):
    """ValueError unless every row with a fingerprint carries one of `sweep_ids` (this sweep's,
    and the one the folder's sweep.json recorded for the same options); rows written before
    fingerprints existed carry none and are trusted to the folder's sweep.json (a folder without
    one, e.g. of copied shard CSVs, is reported only from rows that carry a fingerprint, and it
    must be the one of the options given)."""
    ids = {}
    for r in rows:
        if r["sweep_id"]:
            ids[r["sweep_id"]] = ids.get(r["sweep_id"], 0) + 1
    other = {k: n for k, n in ids.items() if k not in sweep_ids}
    bare = not os.path.lexists(os.path.join(out, "sweep.json"))
    blank = next((r for r in rows if not r["sweep_id"]), None) if bare else None
    if blank:
        raise ValueError(f"{blank.get('line', out)}: a row without a fingerprint, and {out} "
                         f"has no sweep.json to say which options made it; restore the "
                         f"folder's sweep.json")
    if other:
        found = ", ".join(f"{n} rows of sweep {k}" for k, n in other.items())
        raise ValueError(f"{out} holds runs of another sweep ({found}; "
                         + (f"the options given make sweep {min(sweep_ids)}) and no sweep.json: "
                            f"give the options the runs were made with (--protocol, --steps, "
                            f"--bar, --search, ...)" if bare else
                            f"these options make sweep {min(sweep_ids)}): a shard run with other "
                            f"--steps/--bar/--protocol options? Keep one sweep per folder"))


                         # far below what a list of them costs in memory


def check_plan_size(n_models, n_Ts, n_seeds):
    """A ValueError naming --seeds (or --Ts) when a plan of n_models x n_Ts x n_seeds searches is
    larger than MAX_SEARCHES: checked before any list of jobs is built from it."""
    for name, v in (("n_models", n_models), ("n_Ts", n_Ts), ("n_seeds", n_seeds)):
        check_number(name, v, INTS, 1, 2 ** 1000)
    total = n_models * n_Ts * n_seeds
    if total > MAX_SEARCHES:
        culprit = f"--seeds {n_seeds}" if n_seeds >= max(n_Ts, n_models) else \
            f"--Ts (with {n_Ts} values)" if n_Ts >= n_models else f"n_models {n_models}"
        raise ValueError(f"{culprit}: {n_models} model(s) x {n_Ts} T x {n_seeds} seeds is "
                         f"{total} searches, more than the {MAX_SEARCHES} one folder may plan; "
                         f"give fewer seeds or T")


def missing_searches(rows, models, Ts, n_seeds, grids, search):
    """The (model, T, seed) searches asked for that are not finished in `rows`: absent (a
    missing shard) or stopped half way (an interrupted run)."""
    check_row_list(rows)
    for name, v in (("models", models), ("Ts", Ts)):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{name} must be a list, got {shown(v)}")
    if any(m not in MODELS for m in models):
        raise ValueError(f"models must hold {' or '.join(MODELS)}, got {shown(models)}")
    for T in Ts:
        check_number("Ts", T, INTS, 1)
    check_plan_size(len(models) or 1, len(Ts) or 1, n_seeds)
    if not (isinstance(grids, dict) and all(m in grids for m in models)):
        raise ValueError(f"grids must hold a grid of each model ({', '.join(models)}), got "
                         f"{shown(grids)}")
    if not (isinstance(search, str) and search in SEARCHES):
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {shown(search)}")
    have = {}
    for r in rows:
        have.setdefault((r["model"], int(r["T"]), int(r["seed"])), {})[int(r["m"])] = r["success"]
    return [(model, T, seed) for model in models for T in Ts for seed in range(n_seeds)
            if seed_outcome(grids[model], search, have.get((model, T, seed), {}))[0] != "done"]

# ---------------------------------------------------------------- sweep.json, and the rows a report reads

DESCRIPTIONS = {"sweep.json": "a sweep's folder (python -m studies.sweep)",
                "steps.json": "a steps folder (python -m studies.steps)",
                "plan.json": "a study's folder (python -m studies.mechanism)"}


def check_folder_kind(out, own):
    """out, when it holds no other command's description than `own` (one of DESCRIPTIONS): a
    folder holds one kind of runs, and no command adds runs or reports into another's folder.
    ValueError, one line naming the folder and what it is, otherwise."""
    out = check_path("out", out, "a folder")
    if not (isinstance(own, str) and own in DESCRIPTIONS):
        raise ValueError(f"own must be one of {', '.join(DESCRIPTIONS)}, got {shown(own)}")
    for name, what in DESCRIPTIONS.items():
        if name != own and os.path.lexists(os.path.join(out, name)):
            raise ValueError(f"{out} holds {name}: it is {what}, not {DESCRIPTIONS[own]}; use "
                             f"another folder")
    return out


def read_meta(folder):
    """The folder's sweep.json as a dict, checked (check_meta); {} when there is none. A file that
    is not a sweep description is a ValueError naming it and what is wrong."""
    path = os.path.join(check_path("folder", folder, "a sweep folder"), "sweep.json")
    if not os.path.lexists(path):
        return {}
    check_folder_kind(folder, "sweep.json")
    meta = read_json(path, "a sweep description", "use another --out, or restore it")
    return _check_meta(meta, path)


def parse_json(text):
    """The JSON value of `text`, as every reader of the project's JSON files parses it: a key
    given twice in one object, or nesting too deep for Python's parser, is a ValueError (json
    itself keeps the last of two keys, and dies of RecursionError), never a value believed."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {shown(text)}")

    def one_each(pairs):                  # linear: a count per key would be quadratic
        d = dict(pairs)
        if len(d) < len(pairs):
            seen = set()
            twice = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise ValueError(f"the key {twice!r} twice in one object")
        return d
    try:
        return json.loads(text, object_pairs_hook=one_each)
    except RecursionError:
        raise ValueError("nested too deeply to be a file of this project") from None


def read_json(path, what, advice):
    """The JSON a folder file holds, read as cli.read_text_file reads (a FIFO, a device or a huge
    file is refused, not read); a one-line ValueError naming the file, `what` it should be and
    the `advice` when it is not JSON."""
    own_file(check_path("path", path, "a JSON file's path"))
    try:
        return parse_json(cli.read_text_file(path, os.path.basename(path)))
    except ValueError as e:
        raise ValueError(f"{path} is not {what} ({type(e).__name__}: damaged?); {advice}") from None


def _check_meta(meta, path="sweep.json"):
    """A sweep.json's fields, each checked: options (train.py's values for MODEL_OPTIONS), bar in
    (0, 1], search, grids {model: increasing m >= 1}, plan (models, Ts, seeds), protocol,
    machines; and the recorded fingerprint must be the one of its options, bar and search
    (sweep_fingerprint), so that options edited while the old fingerprint was kept cannot
    relabel the runs. ValueError naming the file and the field; returns meta."""
    def bad(field, problem):
        return ValueError(f"{path}: field {field!r} {problem}; not a sweep description this "
                          f"sweep.py wrote (edited or damaged?)")
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is not a sweep description (a JSON {type(meta).__name__}, not "
                         f"an object; damaged?)")
    for field in ("options", "bar", "search"):
        if field not in meta:
            raise bad(field, "is missing")
    if not isinstance(meta["options"], dict):
        raise bad("options", f"must be an object, got {type(meta['options']).__name__}")
    for k, v in meta["options"].items():
        problem = _option_problem(k, v)
        if problem:
            raise bad("options", problem)
    bar = meta["bar"]
    if not (isinstance(bar, (int, float)) and not isinstance(bar, bool) and 0 < bar <= 1):
        raise bad("bar", f"must be a number in (0, 1], got {bar!r}")
    if meta["search"] not in SEARCHES:
        raise bad("search", f"must be one of {', '.join(SEARCHES)}, got {meta['search']!r}")
    positive = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1
    grids = meta.get("grids", {})
    if not isinstance(grids, dict) or not all(
            model in MODELS and isinstance(g, list) and g and all(map(positive, g))
            and g == sorted(set(g)) for model, g in grids.items()):
        raise bad("grids", "must map transformer/mlp to increasing lists of m >= 1")
    plan = meta.get("plan", {})
    if not isinstance(plan, dict) or not (
            isinstance(plan.get("models", []), list) and set(plan.get("models", [])) <= set(MODELS)
            and isinstance(plan.get("Ts", []), list) and all(map(positive, plan.get("Ts", [])))
            and positive(plan.get("seeds", 1))):
        raise bad("plan", f"must hold models (of {', '.join(MODELS)}), Ts (integers >= 1) and "
                          f"seeds (an integer >= 1), got {plan!r:.80}")
    if not isinstance(meta.get("protocol", ""), str):
        raise bad("protocol", "must be a name")
    if not isinstance(meta.get("machines", []), list):
        raise bad("machines", "must be a list")
    if "sweep_id" in meta and meta["sweep_id"] != sweep_fingerprint(meta):
        raise bad("sweep_id", f"is {meta['sweep_id']!r}, but its options, bar and search make "
                              f"sweep {sweep_fingerprint(meta)}")
    return meta


def _option_problem(k, v):
    """What is wrong with v as the value of the model option k in a folder's description (None
    when nothing): an option of MODEL_OPTIONS, of its default's kind, a value train.py takes."""
    if k not in MODEL_OPTIONS:
        return f"names {k!r}, not an option of a sweep"
    try:
        ok = (isinstance(v, str) == isinstance(run_options.DEFAULTS[k], str)
              and not isinstance(v, bool) and run_options.PARSE[k](v) == v)
    except (ValueError, TypeError):
        ok = False
    return None if ok else f"has {k} = {v!r:.40}, not a value train.py takes"


# ---------------------------------------------------------------- a study's plan (plan.json)
# mechanism.py's folder: OUT/plan.json (the cells, each a design, d, T, m and the training
# options, the seeds and the bar) and OUT/runs.csv (MECHANISM_ROWS), read and checked here as a
# sweep's sweep.json and runs are.

def read_plan(out, command="python -m studies.mechanism plan"):
    """OUT/plan.json as a dict, every field checked (check_plan), each cell's options completed
    with train.py's defaults; a one-line ValueError naming the file otherwise (missing: how to
    write it)."""
    path = os.path.join(check_path("out", out, "a study's folder"), "plan.json")
    if not os.path.lexists(path):
        raise ValueError(f"{path} is missing: write it first with `{command} {out} FOLDER ...`")
    check_folder_kind(out, "plan.json")
    plan = read_json(path, "a plan", "restore it, or use another folder")
    return check_plan(plan, path)


def check_plan(plan, path="plan.json"):
    """A study's plan, each field checked: seeds an integer >= 1, bar a number in (0, 1], cells a
    non-empty list of distinct cells, each with design (DESIGNS), d, T and m integers >= 1 and
    options (train.py's values, their d the cell's d, valid together at the cell's T and m);
    every (a trace's logged steps, when given) an integer >= 1 dividing each cell's steps;
    cells x seeds at most MAX_SEARCHES runs. ValueError naming the file and the field; returns
    the plan with every cell's options completed (full_options)."""
    def bad(field, problem):
        return ValueError(f"{path}: {field} {problem}; not a plan mechanism.py wrote (edited or "
                          f"damaged?)")
    positive = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1
    if not isinstance(plan, dict):
        raise ValueError(f"{path} is not a plan (a JSON {type(plan).__name__}, not an object); "
                         f"restore it, or use another folder")
    for field in ("seeds", "bar", "cells"):
        if field not in plan:
            raise bad(field, "is missing")
    if not positive(plan["seeds"]):
        raise bad("seeds", f"must be an integer >= 1, got {plan['seeds']!r:.40}")
    bar = plan["bar"]
    if not (isinstance(bar, (int, float)) and not isinstance(bar, bool) and 0 < bar <= 1):
        raise bad("bar", f"must be a number in (0, 1], got {bar!r:.40}")
    if not (isinstance(plan["cells"], list) and plan["cells"]):
        raise bad("cells", f"must be a non-empty list of cells, got {plan['cells']!r:.40}")
    cells, seen = [], {}
    for i, c in enumerate(plan["cells"]):
        cells.append(_check_cell(c, f"cells[{i}]", bad))
        key = (c["design"], c["d"], c["T"], c["m"])
        if key in seen:
            raise bad(f"cells[{i}]", f"repeats cells[{seen[key]}] ({key[0]} d={key[1]} T={key[2]} "
                                     f"m={key[3]})")
        seen[key] = i
    if not isinstance(plan.get("machines", []), list):
        raise bad("machines", "must be a list")
    every = plan.get("every", 1)
    if not positive(every) or any(c["options"]["steps"] % every for c in cells):
        raise bad("every", f"= {every!r:.40} must be an integer >= 1 that divides every cell's "
                           f"steps (the last step is logged)")
    if len(cells) * plan["seeds"] > MAX_SEARCHES:
        raise bad("seeds", f"= {plan['seeds']} makes {len(cells)} cells x {plan['seeds']} seeds "
                           f"= {len(cells) * plan['seeds']} runs, more than the {MAX_SEARCHES} "
                           f"one folder may plan")
    return dict(plan, cells=cells)


def _check_cell(c, field, bad):
    """check_plan's check of one cell (`field` names it, `bad` makes the error) -> the cell with
    its options completed."""
    positive = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1
    if not isinstance(c, dict):
        raise bad(field, f"must be an object, got {c!r:.40}")
    for k in ("design", "d", "T", "m", "options"):
        if k not in c:
            raise bad(field, f"has no {k}")
    if c["design"] not in DESIGNS:
        raise bad(field, f"has design {c['design']!r:.40}, not one of {', '.join(DESIGNS)}")
    for k in ("d", "T", "m"):
        if not positive(c[k]):
            raise bad(field, f"has {k} = {c[k]!r:.40}, not an integer >= 1")
    if not isinstance(c["options"], dict):
        raise bad(field, f"has options {c['options']!r:.40}, not an object")
    for k, v in c["options"].items():
        problem = _option_problem(k, v)
        if problem:
            raise bad(field + ".options", problem)
    options = full_options(c["options"])
    if options["d"] != c["d"]:
        raise bad(field, f"has d = {c['d']} but its options train d = {options['d']}")
    try:
        run_options.validate_options(dict(options, T=c["T"], m=c["m"]))
    except ValueError as e:
        raise bad(field, f"cannot be trained ({e})") from None
    src = c.get("source", {})                 # where m came from: a sweep's m*, the plan copied
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    kinds = dict(folder=str, plan=str, mstars_from=positive, T_folder=positive, m_star=positive,
                 n_seeds=positive, m_star_lo=number, m_star_hi=number, factor=number)
    if not (isinstance(src, dict) and all(
            k in kinds and (isinstance(v, str) if kinds[k] is str else kinds[k](v))
            for k, v in src.items())):
        raise bad(field + ".source", f"must say where m came from (each of {', '.join(kinds)} "
                                     f"of its type, or none), got {src!r:.60}")
    return dict(c, options=options)


def csv_paths(folder, stem="runs"):
    """The folder's runs*.csv files (stem "steps": steps*.csv), in name order."""
    check_path("folder", folder, "a folder")
    if stem not in ("runs", "steps"):
        raise ValueError(f"stem must be 'runs' or 'steps', got {shown(stem)}")
    return sorted(glob.glob(os.path.join(glob.escape(folder), f"{stem}*.csv")))


def folder_runs(folder, bar=None, sweep_ids=None, warn=None, meta=None):
    """Every finished run in the folder's runs*.csv files (read_rows; warn: its warnings), checked:
    with sweep_ids, every row with a fingerprint carries one of them (check_one_sweep); then
    check_rows against the folder's sweep.json (`meta`, default: read from the folder; its task,
    s, steps and grids) and under `bar` (default: the bar of that sweep.json, when there is one).
    Each run once."""
    check_path("folder", folder, "a sweep folder", folder=True)
    rows = read_rows(csv_paths(folder), warn)
    if sweep_ids is not None:
        _check_one_sweep(rows, sweep_ids, folder)
    meta = read_meta(folder) if meta is None else meta
    return check_rows(rows, meta.get("bar") if bar is None else bar, meta)


def folder_rows(folder, n_seeds=None, Ts=None):
    """(sweep.json as a dict, the folder's Transformer rows) for seeds < n_seeds and T in Ts
    (None = all), checked as folder_runs does (against the bar and the fingerprint of the
    folder's sweep.json). The bootstrap pairs folders by seed label (parse_rows), whatever the
    order."""
    check_path("folder", folder, "a sweep folder", folder=True)
    if n_seeds is not None:
        check_number("n_seeds", n_seeds, INTS, 1)
    if Ts is not None and not (isinstance(Ts, (list, tuple, set)) and all(
            isinstance(T, int) and not isinstance(T, bool) for T in Ts)):
        raise TypeError(f"Ts must be a list of integers T or None, got {shown(Ts)}")
    meta = read_meta(folder)
    ids = {meta["sweep_id"]} if meta.get("sweep_id") else None
    found = [r for r in folder_runs(folder, meta.get("bar"), ids, meta=meta)
             if r["model"] == "transformer"]
    rows = [r for r in found if (n_seeds is None or int(r["seed"]) < n_seeds)
            and (Ts is None or int(r["T"]) in Ts)]
    if not rows:
        held = sorted({int(r["T"]) for r in found})
        if Ts is not None and found and not set(Ts) & set(held):
            raise ValueError(f"{folder}: no Transformer runs at T = {', '.join(map(str, Ts))} "
                             f"(--Ts); it holds T = {', '.join(map(str, held))}")
        raise ValueError(f"{folder}: no Transformer runs (runs*.csv)")
    return meta, rows


# ---------------------------------------------------------------- the steps study's files ----

STEPS_OPTIONS = ("task", "s", "m", "lr", "wd", "batch", "d", "heads", "mlp", "dtype", "optimizer",
           "beta2", "decay", "clip", "n_test")


def read_done(path, meta=None):
    """{(T, seed): row} of the finished runs in the steps CSVs of the folder of `path`
    (OUT/steps.csv, and steps-part*.csv continued aside from an older header), each read and
    checked by py's one reader and validator (read_rows, check_rows): a
    torn or NUL row is skipped (with a warning unless it is a file's last line); a row that
    contradicts itself (a censored flag against its steps_to_bar), its folder's steps.json
    `meta` (task, s, m, budget, every) or another row of the same run is one line naming the
    file and line."""
    check_path("path", path, "the path of a folder's steps.csv")
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"meta must be a steps.json's dict or None, got {shown(meta)}")
    out = os.path.dirname(path) or "."
    rows = check_rows(read_rows(csv_paths(out, "steps"), kind=STEPS_ROWS), meta=meta,
                      kind=STEPS_ROWS)        # a steps.csv that is no regular file: refused
    return {(r["T"], r["seed"]): r for r in rows}


def read_steps_meta(out):
    """OUT/steps.json as a dict, every field checked (options: train.py's values, budget and every
    integers >= 1, Ts integers >= 1, seeds an integer >= 1), or a one-line ValueError naming the
    file and the field."""
    check_path("out", out, "a steps.py folder")
    path = os.path.join(out, "steps.json")
    if os.path.islink(path):
        own_file(path)                  # a link to a file elsewhere: said as such
    try:
        meta = parse_json(cli.read_text_file(path, "steps.json"))
    except ValueError:
        meta = None
    if not (isinstance(meta, dict) and isinstance(meta.get("options"), dict)):
        raise ValueError(f"{out} holds no readable steps.json with options: not a steps.py "
                         f"folder")
    positive = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1
    problems = [f"options has {k} = {meta['options'].get(k)!r}" for k in STEPS_OPTIONS
                if not _is_value_of(k, meta["options"].get(k))]
    problems += [f"{k} = {meta.get(k)!r} is not an integer >= 1" for k in ("budget", "every",
                                                                            "seeds")
                 if not positive(meta.get(k))]
    if not (isinstance(meta.get("Ts"), list) and meta["Ts"] and all(map(positive, meta["Ts"]))
            and len(set(meta["Ts"])) == len(meta["Ts"])):
        problems.append(f"Ts = {meta.get('Ts')!r:.60} is not a list of distinct integers >= 1")
    problems += [f"options has {k!r}, not an option of steps.py" for k in meta["options"]
                 if k not in STEPS_OPTIONS]
    if not isinstance(meta.get("machines", []), list):
        problems.append("machines is not a list")

    if problems:
        raise ValueError(f"{path}: {problems[0]}; not a steps.json steps.py wrote (edited or "
                         f"damaged?)")
    return meta


def _is_value_of(k, v):
    """Whether v is a value train.py takes for option k (of the same kind as its default)."""
    try:
        return (isinstance(v, str) == isinstance(run_options.DEFAULTS[k], str)
                and not isinstance(v, bool) and run_options.PARSE[k](v) == v)
    except (ValueError, TypeError, KeyError):
        return False


def read_curves(out):
    """OUT/curves.json: {"T|seed": {step, test_acc, loss: lists of one length: increasing steps
    >= 1, accuracies in [0, 1], losses >= 0, either null for a nan}}, {} when there is none yet,
    or a one-line ValueError naming the file (damaged: restore it, or remove it and lose the
    curves of the plot)."""
    path = os.path.join(check_path("out", out, "a steps.py folder"), "curves.json")
    if not os.path.lexists(path):
        return {}
    own_file(path)
    try:
        curves = parse_json(cli.read_text_file(path, "curves.json", most=256 << 20))
        real = lambda v, hi: v is None or (isinstance(v, (int, float)) and not isinstance(
            v, bool) and 0 <= v <= hi)                 # None: a nan, as strict JSON writes it
        ok = isinstance(curves, dict) and all(
            re.fullmatch(r"[1-9][0-9]*\|(0|[1-9][0-9]*)", key) and isinstance(c, dict)
            and all(isinstance(c.get(k), list) for k in ("step", "test_acc", "loss"))
            and len(c["step"]) == len(c["test_acc"]) == len(c["loss"])
            and all(isinstance(t, int) and not isinstance(t, bool) and t >= 1
                    for t in c["step"]) and c["step"] == sorted(set(c["step"]))
            and all(real(v, 1) for v in c["test_acc"]) and all(real(v, 1e300) for v in c["loss"])
            for key, c in curves.items())
    except ValueError as e:
        raise ValueError(f"{path} is not the curves steps.py writes ({e}); restore it, or "
                         f"remove it (the plot then lacks those curves)") from None
    if not ok:
        raise ValueError(f"{path} is not the curves steps.py writes (damaged or edited?); "
                         f"restore it, or remove it (the plot then lacks those curves)")
    return curves
