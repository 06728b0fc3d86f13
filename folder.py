"""folder.py: a sweep's results folder on disk: its CSV rows, its sweep.json and its lock.

A folder holds one experiment: every run is one row of OUT/runs*.csv (written and flushed as it
finishes, so an interrupted sweep loses nothing), and OUT/sweep.json records the options, the m
grids, the search, the success bar, the plan (models, T, seeds) and the machines, with a
fingerprint of what defines the experiment (sweep_fingerprint) that every row carries too. Shards
write CSVs of their own into one folder; reports read them all.

The file reads top to bottom: the rows (fields, reading, appending), the fingerprint and the
checks that rows belong to one sweep, sweep.json, the lock, the machine.
"""
import csv
import glob
import hashlib
import json
import os
import platform
import sys

import numpy as np

import train
from stats import SEARCHES, seed_outcome

ROW_FIELDS = ("model", "task", "s", "T", "m", "seed", "test_acc", "train_acc", "success",
              "attn_on_S", "steps", "seconds", "best_step", "pos_overlap", "sweep_id")
OPTIONAL_FIELDS = ("best_step", "pos_overlap", "sweep_id")   # older rows lack them
# pos_overlap: train.position_overlap of the trained model (the width study's measurement)
# sweep_id: a fingerprint of the sweep's options, bar and search (see sweep_fingerprint), in every
# row, so that CSVs merged from shards or machines are checked to be one experiment.
ROW_TYPES = dict(T=int, m=int, seed=int, s=int, steps=int, test_acc=float, train_acc=float,
                 attn_on_S=float, seconds=float)


def read_rows(paths, warn=None):
    """The finished runs in CSV files, each row with "line" ("FILE line N") added. A row that is
    complete but wrong inside (a number that is not one, an accuracy outside [0, 1], a model or
    success flag we never write) is a ValueError naming the file and line: a damaged results file
    must not turn into a quietly different table. A torn row (too few fields, or NUL bytes, as a
    crash leaves) is skipped: silently when it is the file's last line (a run killed
    mid-write), and with a warning naming the file and line anywhere else (`warn`, a function of
    one line; default: print to stderr), since something else damaged the file there."""
    warn = warn or (lambda text: print(text, file=sys.stderr, flush=True))
    rows = []
    for path in paths:
        with open(path, newline="", errors="replace") as f:
            text = f.read()
        lines = text[:text.rfind("\n") + 1].splitlines()
        if not lines:                         # empty, or a header torn mid-write: no runs yet
            continue
        last = len(lines) if text.endswith("\n") else None    # else a torn tail follows
        header = next(csv.reader([lines[0]]), [])
        missing = [k for k in ROW_FIELDS if k not in OPTIONAL_FIELDS and k not in header]
        if missing:
            raise ValueError(f"{path}: not a sweep CSV (no column {', '.join(missing)})")
        for line, text_line in enumerate(lines[1:], start=2):
            torn = "NUL bytes" if "\x00" in text_line else None
            if not torn:
                fields = next(csv.reader([text_line]), [])
                if not fields:                                 # a blank line
                    continue
                if len(fields) > len(header):
                    raise ValueError(f"{path} line {line}: {len(fields) - len(header)} more "
                                     f"fields than the header has columns (rows appended under "
                                     f"another header?)")
                r = dict(zip(header, fields))
                if len(fields) < len(header) or "" in (r.get("seconds"), r.get("success")):
                    torn = f"{len(fields)} of {len(header)} fields"
            if torn:
                if line != last:
                    warn(f"warning: {path} line {line}: a torn row ({torn}), skipped; the file "
                         f"was damaged there")
                continue
            try:
                for k, kind in ROW_TYPES.items():
                    kind(r[k])
                if r["model"] not in ("transformer", "mlp") or r["success"] not in ("0", "1"):
                    raise ValueError
                if int(r["T"]) < 1 or int(r["m"]) < 1 or int(r["seed"]) < 0:
                    raise ValueError
                if any(not 0 <= float(r[k]) <= 1 for k in ("test_acc", "train_acc")
                       if r[k].strip().lower() != "nan"):
                    raise ValueError
            except (ValueError, TypeError):
                bad = {k: r[k] for k in ("model", "T", "m", "seed", "test_acc", "success")}
                raise ValueError(f"{path} line {line}: not a valid run row {bad}") from None
            r["success"] = r["success"] == "1"
            r.setdefault("sweep_id", "")
            r.setdefault("best_step", r["steps"])
            r.setdefault("pos_overlap", "nan")
            r["line"] = f"{path} line {line}"
            rows.append(r)
    return rows


def check_rows(rows, bar=None):
    """The one row validator, used by resume, merge and report (folder_runs): rows must agree
    with themselves and with each other, or ValueError names the file and line.
      - A row's success flag must be its test accuracy against the folder's `bar` (success 1:
        test_acc >= bar; success 0: below it, or nan, a diverged run). Without a bar, the
        contradictions no bar in (0, 1] allows: success 1 with accuracy nan or 0, success 0
        with accuracy 1.
      - Two rows of one run (model, T, seed, m) with opposite outcomes are refused. The same run
        recorded twice with the same outcome (a shard's CSV copied in twice) counts once: the
        first row read is kept, the others dropped.
    -> the rows, each run once."""
    kept, seen = [], {}
    for r in rows:
        acc, ok = float(r["test_acc"]), bool(r["success"])
        where = r.get("line", "a row")
        if bar is not None:
            bad = ok != (acc >= bar)                      # nan >= bar is False: a failure
            rule = f"the folder's bar is test accuracy >= {bar}"
        else:
            bad = (ok and not acc > 0) or (not ok and acc >= 1)
            rule = "no bar in (0, 1] gives that"
        if bad:
            raise ValueError(f"{where}: success {int(ok)} contradicts its test accuracy "
                             f"{r['test_acc']} ({rule}); the row was edited or belongs to "
                             f"another sweep")
        key = (r["model"], int(r["T"]), int(r["seed"]), int(r["m"]))
        if key in seen:
            first = seen[key]
            if bool(first["success"]) != ok:
                raise ValueError(f"{where} and {first.get('line', 'another row')} record the run "
                                 f"{key[0]} T={key[1]} seed={key[2]} m={key[3]} with opposite "
                                 f"outcomes (success {int(ok)} and {int(bool(first['success']))})"
                                 f"; keep the right one")
            continue
        seen[key] = r
        kept.append(r)
    return kept


def csv_header(path):
    """The column names of a CSV's first complete line, or None when it has none yet."""
    with open(path, newline="") as f:
        first = f.readline()
    return next(csv.reader([first])) if first.endswith("\n") else None


def open_csv(path):
    """(file, writer, fresh): `path` opened for appending rows, a header written first when the
    file is missing or has no complete header line yet. A header that cannot be written (a full
    disk) leaves no empty file behind, and the OSError names the file."""
    fresh = not os.path.exists(path) or csv_header(path) is None
    fh = open(path, "w" if fresh else "a", newline="")
    writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS)
    if fresh:
        try:
            writer.writeheader()
            fh.flush()
        except OSError as e:
            fh.close()
            os.remove(path)
            raise OSError(e.errno, e.strerror or str(e), path) from None
    return fh, writer, fresh


def drop_torn_tail(path):
    """Cut a CSV back to its last complete line, so appending cannot glue onto a torn row."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        text = f.read()
        if text and not text.endswith(b"\n"):
            f.truncate(text.rfind(b"\n") + 1)

# ---------------------------------------------------------------- one sweep per folder

# train.py's options a sweep shares with every run. Not --model: a sweep takes --models (a list),
# and with abbreviations off, --model is an error rather than a silent prefix of --models.
MODEL_OPTIONS = ("task", "s", "data", "steps", "lr", "wd", "n_test", "d", "heads", "mlp", "dtype",
                 "batch", "optimizer", "beta2", "decay", "clip", "dropout", "val", "val_every",
                 "pos_init")


def full_options(options):
    """A sweep.json's options with train.py's default for every model option it does not name
    (folders written before an option existed ran at its default)."""
    return dict({k: train.DEFAULTS[k] for k in MODEL_OPTIONS}, **options)


def sweep_fingerprint(meta):
    """12 hex digits naming a sweep's options, success bar and search: rows of one experiment
    share it, whatever shard or machine wrote them."""
    options = {k: v for k, v in meta["options"].items() if v != train.DEFAULTS.get(k, object())}
    key = json.dumps(dict(options=options, bar=meta["bar"], search=meta["search"]),
                     sort_keys=True)    # options at their default are left out, so a new option
    return hashlib.sha1(key.encode()).hexdigest()[:12]   # at its default changes no fingerprint


def check_one_sweep(rows, sweep_ids, out):
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


def missing_searches(rows, models, Ts, n_seeds, grids, search):
    """The (model, T, seed) searches asked for that are not finished in `rows`: absent (a
    missing shard) or stopped half way (an interrupted run)."""
    have = {}
    for r in rows:
        have.setdefault((r["model"], int(r["T"]), int(r["seed"])), {})[int(r["m"])] = r["success"]
    return [(model, T, seed) for model in models for T in Ts for seed in range(n_seeds)
            if seed_outcome(grids[model], search, have.get((model, T, seed), {}))[0] != "done"]

# ---------------------------------------------------------------- sweep.json, and the rows a report reads

def read_meta(folder):
    """The folder's sweep.json as a dict, checked (check_meta); {} when there is none. A file that
    is not a sweep description is a ValueError naming it and what is wrong."""
    path = os.path.join(folder, "sweep.json")
    if not os.path.lexists(path):
        return {}
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not a sweep description ({type(e).__name__}: damaged?); "
                         f"use another --out, or restore it") from None
    return check_meta(meta, path)


def check_meta(meta, path="sweep.json"):
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
        if k not in MODEL_OPTIONS:
            raise bad("options", f"names {k!r}, not an option of a sweep")
        try:
            ok = (isinstance(v, str) == isinstance(train.DEFAULTS[k], str)
                  and train.PARSE[k](v) == v)
        except ValueError:
            ok = False
        if not ok:
            raise bad("options", f"has {k} = {v!r}, not a value train.py takes")
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


MODELS = ("transformer", "mlp")


def csv_paths(folder):
    """The folder's runs*.csv files, in name order."""
    return sorted(glob.glob(os.path.join(folder, "runs*.csv")))


def folder_runs(folder, bar=None, sweep_ids=None, warn=None):
    """Every finished run in the folder's runs*.csv files (read_rows; warn: its warnings), checked:
    with sweep_ids, every row with a fingerprint carries one of them (check_one_sweep); then
    check_rows under `bar` (default: the bar of the folder's sweep.json, when there is one).
    Each run once."""
    rows = read_rows(csv_paths(folder), warn)
    if sweep_ids is not None:
        check_one_sweep(rows, sweep_ids, folder)
    if bar is None:
        bar = read_meta(folder).get("bar")
    return check_rows(rows, bar)


def folder_rows(folder, n_seeds=None, Ts=None):
    """(sweep.json as a dict, the folder's Transformer rows) for seeds < n_seeds and T in Ts
    (None = all), checked as folder_runs does (against the bar and the fingerprint of the
    folder's sweep.json). The bootstrap pairs folders by seed label (parse_rows), whatever the
    order."""
    meta = read_meta(folder)
    ids = {meta["sweep_id"]} if meta.get("sweep_id") else None
    rows = [r for r in folder_runs(folder, meta.get("bar"), ids)
            if r["model"] == "transformer" and (n_seeds is None or int(r["seed"]) < n_seeds)
            and (Ts is None or int(r["T"]) in Ts)]
    if not rows:
        raise ValueError(f"{folder}: no Transformer runs (runs*.csv)")
    return meta, rows


# ---------------------------------------------------------------- the lock and the machine

def lock_folder(out, shard=(0, 1)):
    """Hold an exclusive lock on OUT/.lock for this process's life, whatever the shard: one folder
    runs one sweep at a time, so a second sweep, a shard beside the whole sweep, or shards of
    different splits (0/2 and 0/3) can never run the same searches twice and write duplicate rows.
    A busy folder is a ValueError naming the process that holds it. The lock is the kernel's
    (flock), so a killed sweep never leaves a stale one. Where fcntl does not exist (Windows)
    there is no lock; None is returned. Shards that run at the same time write to folders of
    their own; copy their runs-shard-*.csv into one folder and report it."""
    try:
        import fcntl
    except ImportError:
        return None
    fh = open(os.path.join(out, ".lock"), "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise ValueError(f"{out} is in use by another sweep ({holder}); one sweep runs in a folder "
                         f"at a time: wait for it, or use another --out") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}, shard {shard[0]}/{shard[1]}")
    fh.flush()
    return fh


def machine():
    """Where a sweep ran: CPU, BLAS library and threads, numpy. Borderline runs can flip between
    machines (float rounding differs with the BLAS kernels), so sweep.json keeps every machine
    that added runs to a folder."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas.get('name')} {blas.get('version')}"
    except Exception:                 # older numpy: no dict form; the version is still recorded
        blas = "unknown"
    return dict(cpu=cpu, cores=os.cpu_count(), blas=blas,
                blas_threads=os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                numpy=np.__version__, python=platform.python_version())
