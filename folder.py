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

import numpy as np

import train
from stats import seed_outcome

ROW_FIELDS = ("model", "task", "s", "T", "m", "seed", "test_acc", "train_acc", "success",
              "attn_on_S", "steps", "seconds", "best_step", "pos_overlap", "sweep_id")
OPTIONAL_FIELDS = ("best_step", "pos_overlap", "sweep_id")   # older rows lack them
# pos_overlap: train.position_overlap of the trained model (the width study's measurement)
# sweep_id: a fingerprint of the sweep's options, bar and search (see sweep_fingerprint), in every
# row, so that CSVs merged from shards or machines are checked to be one experiment.
ROW_TYPES = dict(T=int, m=int, seed=int, s=int, steps=int, test_acc=float, train_acc=float,
                 attn_on_S=float, seconds=float)


def read_rows(paths):
    """The finished runs in CSV files; a torn last line (a run killed mid-write) is skipped.
    A row that is complete but wrong inside (a missing column, a number that is not one, a model
    or success flag we never write) is a ValueError naming the file and line: a damaged results
    file must not turn into a quietly different table."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        if not complete:                      # empty, or a header torn mid-write: no runs yet
            continue
        reader = csv.DictReader(complete.splitlines())
        missing = [k for k in ROW_FIELDS
                   if k not in OPTIONAL_FIELDS and k not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a sweep CSV (no column {', '.join(missing)})")
        for line, r in enumerate(reader, start=2):
            if None in r:                                  # more fields than the header
                raise ValueError(f"{path} line {line}: {len(r[None])} more fields than the "
                                 f"header has columns (rows appended under another header?)")
            if None in r.values() or "" in (r.get("seconds"), r.get("success")):
                continue                                   # a torn row
            try:
                for k, kind in ROW_TYPES.items():
                    kind(r[k])
                if r["model"] not in ("transformer", "mlp") or r["success"] not in ("0", "1"):
                    raise ValueError
                if int(r["T"]) < 1 or int(r["m"]) < 1 or int(r["seed"]) < 0:
                    raise ValueError
            except (ValueError, TypeError):
                bad = {k: r[k] for k in ("model", "T", "m", "seed", "test_acc", "success")}
                raise ValueError(f"{path} line {line}: not a valid run row {bad}") from None
            r["success"] = r["success"] == "1"
            r.setdefault("sweep_id", "")
            r.setdefault("best_step", r["steps"])
            r.setdefault("pos_overlap", "nan")
            rows.append(r)
    return rows


def csv_header(path):
    """The column names of a CSV's first complete line, or None when it has none yet."""
    with open(path, newline="") as f:
        first = f.readline()
    return next(csv.reader([first])) if first.endswith("\n") else None


def open_csv(path):
    """(file, writer, fresh): `path` opened for appending rows, a header written first when the
    file is missing or has no complete header line yet."""
    fresh = not os.path.exists(path) or csv_header(path) is None
    fh = open(path, "w" if fresh else "a", newline="")
    writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS)
    if fresh:
        writer.writeheader()
        fh.flush()
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
                     sort_keys=True)             # an option added later, at its default, keeps
    return hashlib.sha1(key.encode()).hexdigest()[:12]   # the fingerprint of older rows


def check_one_sweep(rows, sweep_ids, out):
    """ValueError unless every row with a fingerprint carries one of `sweep_ids` (this sweep's,
    and the one the folder's sweep.json recorded for the same options); rows written before
    fingerprints existed carry none and are trusted to the folder's sweep.json."""
    ids = {}
    for r in rows:
        if r["sweep_id"]:
            ids[r["sweep_id"]] = ids.get(r["sweep_id"], 0) + 1
    other = {k: n for k, n in ids.items() if k not in sweep_ids}
    if other:
        found = ", ".join(f"{n} rows of sweep {k}" for k, n in other.items())
        raise ValueError(f"{out} holds runs of another sweep ({found}; these options make sweep "
                         f"{min(sweep_ids)}): a shard run with other --steps/--bar/--protocol "
                         f"options? Keep one sweep per folder")


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
    """The folder's sweep.json as a dict, or {} when there is none or it is not a JSON object."""
    try:
        with open(os.path.join(folder, "sweep.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def folder_runs(folder):
    """Every finished run in the folder's runs*.csv files (read_rows)."""
    return read_rows(sorted(glob.glob(os.path.join(folder, "runs*.csv"))))


def folder_rows(folder, n_seeds=None, Ts=None):
    """(sweep.json as a dict, the folder's Transformer rows) for seeds < n_seeds and T in Ts
    (None = all). The bootstrap pairs folders by seed label (parse_rows), whatever the order."""
    rows = [r for r in folder_runs(folder)
            if r["model"] == "transformer" and (n_seeds is None or int(r["seed"]) < n_seeds)
            and (Ts is None or int(r["T"]) in Ts)]
    if not rows:
        raise ValueError(f"{folder}: no Transformer runs (runs*.csv)")
    return read_meta(folder), rows


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
