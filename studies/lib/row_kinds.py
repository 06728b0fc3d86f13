"""row_kinds.py (studies/lib): the kinds of rows a study's CSV holds, each read and checked alone.

Every run a study trains is one CSV row, written and flushed as it finishes (folder_write.py), so
that an interrupted study loses nothing. Each kind of rows (KINDS: a sweep's runs, steps.py's,
a mechanism study's runs and trajectories, a class ball's record, a paired CSV) is one dict here:
its columns, the columns older files lack, how one row is typed and checked by itself (a BadRow
names what is wrong), what identifies its run and its outcome. read_rows reads the CSVs of one
kind written row by row (a torn last line, the trace of a killed run, skipped with a warning),
read_whole a CSV written whole. Whether rows agree with their folder's description and with each
other is folder.py's (check_rows).
"""
import csv
import math
import os
import sys

from studies.lib import cli
from studies.lib.checks import REALS, check_number
from studies.lib.harness import check_callable, check_path, shown


ROW_FIELDS = ("model", "task", "s", "T", "m", "seed", "test_acc", "train_acc", "success",
              "attn_on_S", "steps", "seconds", "best_step", "pos_overlap", "sweep_id")


OPTIONAL_FIELDS = ("best_step", "pos_overlap", "sweep_id")   # older rows lack them


# pos_overlap: training.position_overlap of the trained model (the width study's measurement)
# sweep_id: a fingerprint of the sweep's options, bar and search (see sweep_fingerprint), in every
# row, so that CSVs merged from shards or machines are checked to be one experiment.
ROW_TYPES = dict(T=int, m=int, seed=int, s=int, steps=int, test_acc=float, train_acc=float,
                 attn_on_S=float, seconds=float)


# steps.py's rows (OUT/steps.csv): one run each, the first checked step at which its test accuracy
# reached the bar, or censored (steps_to_bar blank) when it did not within its budget.
STEPS_FIELDS = ("task", "s", "T", "m", "seed", "steps_to_bar", "censored", "budget", "every",
                "final_test_acc", "seconds")


class BadRow(ValueError):
    """A complete row that is wrong inside, or contradicts its folder; the message says how."""


def _sweep_row(r):
    """A sweep row, typed as reports read it (success a bool; optional fields defaulted)."""
    try:
        for k, kind in ROW_TYPES.items():
            kind(r[k])
        ok = (r["model"] in MODELS and r["success"] in ("0", "1") and int(r["T"]) >= 1
              and int(r["m"]) >= 1 and 0 <= int(r["seed"]) < MAX_SEARCHES and int(r["s"]) >= 1
              and all(0 <= float(r[k]) <= 1 for k in ("test_acc", "train_acc", "attn_on_S")
                      if r[k].strip().lower() != "nan")
              and not float(r["seconds"]) < 0
              and not abs(float(r.get("pos_overlap", "nan"))) > 1 + 1e-6        # a cosine
              and 0 <= int(r.get("best_step", r["steps"])) <= int(r["steps"]))
    except (ValueError, TypeError):
        ok = False
    if not ok:
        bad = {k: r[k] for k in ("model", "T", "m", "seed", "test_acc", "success")}
        raise BadRow(f"not a valid run row {bad}")
    r["success"] = r["success"] == "1"
    r.setdefault("sweep_id", "")
    r.setdefault("best_step", r["steps"])
    r.setdefault("pos_overlap", "nan")
    return r


def _steps_row(r):
    """A steps.py row, typed (ints, steps_to_bar None when censored), and checked against its own
    numbers: censored 1 exactly when steps_to_bar is blank, and a first hit is a checked step
    (a multiple of every) within the budget."""
    try:
        t = {k: int(r[k]) for k in ("s", "T", "m", "seed", "censored", "budget", "every")}
        hit = int(r["steps_to_bar"]) if r["steps_to_bar"].strip() else None
        acc, seconds = float(r["final_test_acc"]), float(r["seconds"])
        ok = (r["task"] and min(t["s"], t["T"], t["m"], t["budget"], t["every"]) >= 1
              and t["seed"] >= 0 and t["censored"] in (0, 1) and seconds >= 0
              and (acc != acc or 0 <= acc <= 1))
    except (ValueError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise BadRow(f"not a valid steps row {dict((k, r.get(k)) for k in STEPS_FIELDS)}")
    if t["censored"] != (hit is None):
        raise BadRow(f"censored {t['censored']} contradicts its steps_to_bar "
                     f"{r['steps_to_bar'] or '(blank)'} (censored 1 exactly when no step reached "
                     f"the bar)")
    if hit is not None and not (t["every"] <= hit <= t["budget"] and hit % t["every"] == 0):
        raise BadRow(f"steps_to_bar {hit} is not a checked step (a multiple of every = "
                     f"{t['every']} up to the budget {t['budget']})")
    return dict(r, **t, steps_to_bar=hit)


# What each kind of results CSV holds: its columns (those older files may lack), the columns a
# finished row always fills (blank: torn), how a row is typed and checked alone (raises BadRow),
# which run it records (two rows of one run must agree) and its outcome.
SWEEP_ROWS = dict(fields=ROW_FIELDS, optional=OPTIONAL_FIELDS, filled=("seconds", "success"),
                  parse=_sweep_row, what="a sweep CSV",
                  run=lambda r: (r["model"], int(r["T"]), int(r["seed"]), int(r["m"])),
                  outcome=lambda r: bool(r["success"]),
                  name=lambda k: f"{k[0]} T={k[1]} seed={k[2]} m={k[3]}",
                  show=lambda v: f"success {int(v)}")


STEPS_ROWS = dict(fields=STEPS_FIELDS, optional=(), filled=("seconds", "censored"),
                  parse=_steps_row, what="a steps.py CSV",
                  run=lambda r: (int(r["T"]), int(r["seed"])),
                  outcome=lambda r: r["steps_to_bar"],
                  name=lambda k: f"T={k[0]} seed={k[1]}",
                  show=lambda v: "censored" if v is None else f"{v} steps")


# mechanism.py's rows (OUT/runs.csv): one trained run of a planned cell each, its outcome (the
# final test accuracy against the plan's bar), what the monitor saw, the loss and the mechanism's
# measurements (nan where the run diverged).
# C's other factors (issue 38; theory.norm_measures, theory.COVERING_SUMS): files written before
# these columns are still read, their rows with the columns empty.
MECHANISM_FACTORS = ("readout_norm", "mlp_factor", "qk_fro", "v_21", "heads_scores",
                     "heads_values", "heads_readout")


# The same norms on the model's canonical form (issue 47; symmetry.canonical): measures of the
# learned function, which no exact symmetry of the model moves. Files written before these
# columns are read with them empty, as for the factors.
MECHANISM_CANONICAL = ("canon_C", "canon_score_scale", "canon_top_score_scale", "canon_norm_V",
                       "canon_norm_O", "canon_qk_fro", "canon_v_21", "canon_readout_norm",
                       "canon_mlp_factor")


_MECHANISM_GROUPS = (MECHANISM_FACTORS, MECHANISM_CANONICAL)   # each all empty or all numbers


MECHANISM_FIELDS = ("design", "d", "T", "m", "seed", "success", "test_acc", "best_test_acc",
                    "best_step", "train_acc", "final_loss", "min_loss", "loss_jump",
                    "covering_constant", "B_X", "score_scale", "norm_V", "norm_O", "top_head",
                    "mass_on_S", "score_gap", "heads_on_S", "top_score_scale", "top_norm_V",
                    "top_norm_O", "attn_on_S", "model", "task", "s", "steps", "seconds",
                    "cpu_seconds") + MECHANISM_FACTORS + MECHANISM_CANONICAL


# A cell's design: its m the folder's m* (borderline) or a factor times one width's (fixed); or an
# arm of issue 38's interventions, planned from a study's cells (studies.mechanism arm --from): the
# baseline trained again (baseline-rerun), or one of the INTERVENTIONS, sweep.py's protocols of
# the same names, each changing one option.
INTERVENTIONS = ("freeze-ln1", "decay-except-ln", "freeze-lnf", "freeze-ln1-low",
                 "freeze-ln1-low-restored", "freeze-ln1-low-init", "freeze-ln1-low-step")


DESIGNS = ("borderline", "fixed", "baseline-rerun") + INTERVENTIONS


_MECHANISM_INTS = ("d", "T", "m", "seed", "s", "steps", "best_step")


_MECHANISM_SIGNED = ("score_gap", "loss_jump")   # every other measure is a norm, share or time >= 0


_MECHANISM_TEXT = ("design", "model", "task", "success")


def _mechanism_row(r):
    """A mechanism row, checked alone (the strings kept, as the report converts them): integers
    in range (best_step <= steps), a design and model we write, success 0 or 1, accuracies and
    attn_on_S in [0, 1] or nan (test and training accuracy nan together: a diverged
    run, whose seconds may be nan too), every other field a finite number or nan, >= 0 but for
    the score gap and the loss's jump; C's other factors (MECHANISM_FACTORS) and the canonical
    measures (MECHANISM_CANONICAL) each either all empty (a file written before them: filled in as
    "") or all numbers >= 0 or nan."""
    optional = MECHANISM_FACTORS + MECHANISM_CANONICAL
    r = dict(r, **{k: r.get(k, "") for k in optional})
    try:
        t = {k: int(r[k]) for k in _MECHANISM_INTS}
        f = {k: float(r[k]) for k in MECHANISM_FIELDS
             if k not in _MECHANISM_INTS + _MECHANISM_TEXT + optional}
        groups_ok = all(not any(r[k] != "" for k in group) or all(
            r[k] != "" and not float(r[k]) < 0 for k in group) for group in _MECHANISM_GROUPS)
        ok = (groups_ok and r["design"] in DESIGNS and r["model"] == "transformer" and r["task"]
              and r["success"] in ("0", "1") and t["seed"] >= 0 and t["best_step"] >= 0
              and min(t[k] for k in ("d", "T", "m", "s", "steps")) >= 1
              and all(f[k] != f[k] or 0 <= f[k] <= 1 for k in ("test_acc", "best_test_acc",
                                                               "train_acc"))
              and math.isnan(f["test_acc"]) == math.isnan(f["train_acc"])    # diverged: both
              and (f["seconds"] >= 0 or math.isnan(f["seconds"]) and math.isnan(f["test_acc"]))
              and f["cpu_seconds"] >= 0 and t["best_step"] <= t["steps"]
              and not any(math.isinf(float(r[k])) for k in optional if r[k] != "")
              and not any(math.isinf(v) for v in f.values())
              and not any(v < 0 for k, v in f.items() if k not in _MECHANISM_SIGNED)
              and not f["attn_on_S"] > 1)
    except (ValueError, TypeError, AttributeError):
        ok = False
    if not ok:
        bad = {k: r.get(k) for k in ("design", "d", "T", "m", "seed", "test_acc", "success")
               + tuple(k for g in _MECHANISM_GROUPS if any(r.get(k) for k in g) for k in g)}
        raise BadRow(f"not a valid mechanism row {bad} (C's factors, the canonical measures: "
                     f"each all empty, or all numbers >= 0 or nan)")
    return r


MECHANISM_ROWS = dict(fields=MECHANISM_FIELDS, optional=MECHANISM_FACTORS + MECHANISM_CANONICAL,
                      older=[tuple(k for k in MECHANISM_FIELDS if k not in MECHANISM_CANONICAL)],
                      filled=("seconds", "success"),
                      parse=_mechanism_row, what="a mechanism.py CSV",
                      run=lambda r: (int(r["d"]), int(r["T"]), int(r["m"]), int(r["seed"])),
                      outcome=lambda r: r["success"] == "1",
                      name=lambda k: f"d={k[0]} T={k[1]} m={k[2]} seed={k[3]}",
                      show=lambda v: f"success {int(v)}")


# mechanism.py trace's rows (OUT/trajectories.csv): one trained run of a planned cell at one logged
# step (step 1 and every `every` steps of plan.json) each: what the monitor measured then, and
# the run's final test accuracy and success (the same in every row of the run).
# Where B_X comes from (theory.norm_measures, issue 38): LN1's gain RMS and shift norm, and the
# token of largest norm (its kind, position and whether that is in S); files written before these
# columns are still read, their rows with the columns empty.
TRAJECTORY_SOURCE = ("ln1_gain_rms", "ln1_shift_norm", "B_X_token", "B_X_position", "B_X_in_S")


TRAJECTORY_FIELDS = ("design", "d", "T", "m", "seed", "step", "B_X", "score_gap", "mass_on_S",
                     "top_head") + TRAJECTORY_SOURCE + (
                     "train_loss", "test_acc", "success", "final_test_acc", "steps", "cpu_seconds")


_TRAJECTORY_INTS = ("d", "T", "m", "seed", "step", "top_head", "steps")


B_X_TOKENS = ("cls", "bit0", "bit1", "none")       # "none": a diverged run, nothing measured


def _trajectory_row(r):
    """A trajectory row, checked alone (strings kept): integers in range (top_head -1 for a
    diverged run), a design we write, success 0 or 1, accuracies in [0, 1] or nan, the step
    within the run, every other field a number, CPU time >= 0; where B_X comes from either all
    empty (a file written before those columns: filled in as "") or all given: the gain RMS and
    shift norm >= 0 or nan, the token one of B_X_TOKENS at a position in -1..T-1 (-1 exactly for
    [CLS] and "none"), B_X_in_S 0 or 1 (0 for [CLS] and "none")."""
    r = dict(r, **{k: r.get(k, "") for k in TRAJECTORY_SOURCE})
    try:
        t = {k: int(r[k]) for k in _TRAJECTORY_INTS}
        f = {k: float(r[k]) for k in TRAJECTORY_FIELDS
             if k not in _TRAJECTORY_INTS + TRAJECTORY_SOURCE + ("design", "success")}
        given = [r[k] != "" for k in TRAJECTORY_SOURCE]
        if any(given):
            g, b, pos = float(r["ln1_gain_rms"]), float(r["ln1_shift_norm"]), int(r["B_X_position"])
            on = (r["B_X_token"] in ("bit0", "bit1"))
            source_ok = (all(given) and not g < 0 and not b < 0 and r["B_X_token"] in B_X_TOKENS
                         and r["B_X_in_S"] in ("0", "1")
                         and (0 <= pos < t["T"] if on else pos == -1)
                         and (on or r["B_X_in_S"] == "0"))
        else:
            source_ok = True
        ok = (r["design"] in DESIGNS and r["success"] in ("0", "1") and t["seed"] >= 0
              and t["top_head"] >= -1 and min(t[k] for k in ("d", "T", "m", "steps")) >= 1
              and 1 <= t["step"] <= t["steps"] and f["cpu_seconds"] >= 0
              and all(f[k] != f[k] or 0 <= f[k] <= 1 for k in ("test_acc", "final_test_acc"))
              and source_ok)
    except (ValueError, TypeError, AttributeError):
        ok = False
    if not ok:
        bad = {k: r.get(k) for k in ("design", "d", "T", "m", "seed", "step", "success")
               + TRAJECTORY_SOURCE}
        raise BadRow(f"not a valid trajectory row {bad}")
    return r


TRAJECTORY_ROWS = dict(fields=TRAJECTORY_FIELDS, optional=TRAJECTORY_SOURCE,
                       filled=("cpu_seconds", "success"),
                       parse=_trajectory_row, what="a mechanism.py trace CSV",
                       run=lambda r: (int(r["d"]), int(r["T"]), int(r["m"]), int(r["seed"]),
                                      int(r["step"])),
                       outcome=lambda r: r["success"] == "1",
                       name=lambda k: f"d={k[0]} T={k[1]} m={k[2]} seed={k[3]} step={k[4]}",
                       show=lambda v: f"success {int(v)}")


# A sweep inside the capacity bound's class (run options ball_*) writes beside runs.csv
# ball-of-runs.csv: one row per run, training.ball_record's columns. A held norm's final value is
# within its radius (to float32 rounding), its projection count within the run's steps.
BALL_NORMS = ("qk", "vo", "w", "mlp")            # symmetry.CLASS_NORMS


BALL_FIELDS = ("model", "T", "m", "seed") + tuple(
    f"{k}_{x}" for k in BALL_NORMS for x in ("radius", "active", "worst", "final"))


def _ball_row(r):
    """A ball-of-runs row, typed, checked alone: radii >= 0, counts >= 0, a held norm's final
    value within its radius (relative 1e-5: the norm is taken in float64 of float32 numbers) and
    its worst ratio a number; a norm not held has count 0 and worst blank or nan."""
    try:
        t = dict(model=r["model"], T=int(r["T"]), m=int(r["m"]), seed=int(r["seed"]))
        ok = t["model"] == "transformer" and min(t["T"], t["m"]) >= 1 and t["seed"] >= 0
        for k in BALL_NORMS:
            radius, active = float(r[f"{k}_radius"]), int(r[f"{k}_active"])
            worst, final = float(r[f"{k}_worst"] or "nan"), float(r[f"{k}_final"])
            held = radius > 0
            ok = ok and radius >= 0 and active >= 0 and final >= 0 and math.isfinite(radius) and (
                (final <= radius * (1 + 1e-5) and worst >= 0) if held else
                (active == 0 and worst != worst))
            t.update({f"{k}_radius": radius, f"{k}_active": active, f"{k}_worst": worst,
                      f"{k}_final": final})
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise BadRow(f"not a valid ball row {dict((k, r.get(k)) for k in BALL_FIELDS[:8])}...")
    return t


BALL_ROWS = dict(fields=BALL_FIELDS, optional=(), filled=("mlp_final",), parse=_ball_row,
                 what="a ball-of-runs CSV",
                 run=lambda r: (r["model"], int(r["T"]), int(r["seed"]), int(r["m"])),
                 outcome=lambda r: int(r["qk_active"]),
                 name=lambda k: f"{k[0]} T={k[1]} seed={k[2]} m={k[3]}",
                 show=lambda v: f"{v} projections")


# failures.py paired's CSV (--pairs): one (study run, arm run) pair of one seed per row, written
# whole (never appended to): a torn row, a duplicated pair or a file without pairs is damage.
PAIR_FIELDS = ("intervention", "d", "T", "m", "seed", "base_success", "int_success",
               "base_test_acc", "int_test_acc", "base_B_X", "int_B_X", "base_C", "int_C")


def _pair_row(r):
    """A pairs row, typed and checked alone: an intervention of DESIGNS, sizes >= 1, seed >= 0,
    successes 0 or 1, accuracies in [0, 1] (nan: diverged), B_X and C numbers >= 0 or nan."""
    try:
        t = {k: int(r[k]) for k in ("d", "T", "m", "seed", "base_success", "int_success")}
        f = {k: float(r[k]) for k in PAIR_FIELDS[7:]}
        ok = (r["intervention"] in DESIGNS and min(t["d"], t["T"], t["m"]) >= 1
              and t["seed"] >= 0 and t["base_success"] in (0, 1) and t["int_success"] in (0, 1)
              and all(v != v or 0 <= v <= 1 for k, v in f.items() if k.endswith("test_acc"))
              and all(v != v or 0 <= v < math.inf for v in f.values()))
    except (ValueError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise BadRow(f"not a valid pair row {dict((k, r.get(k)) for k in PAIR_FIELDS[:7])} (an "
                     f"intervention of {', '.join(INTERVENTIONS)}; sizes >= 1, seed >= 0, "
                     f"successes 0 or 1, accuracies in [0, 1])")
    return dict(r, **t, **f)


PAIR_ROWS = dict(fields=PAIR_FIELDS, optional=(), filled=PAIR_FIELDS, parse=_pair_row,
                 what="a paired CSV (failures.py paired --pairs)", whole=True,
                 run=lambda r: (r["intervention"], int(r["d"]), int(r["T"]), int(r["m"]),
                                int(r["seed"])),
                 outcome=lambda r: (int(r["base_success"]), int(r["int_success"])),
                 name=lambda k: f"{k[0]} d={k[1]} T={k[2]} m={k[3]} seed={k[4]}",
                 show=lambda v: f"successes {v}")


KINDS = dict(SWEEP_ROWS="a sweep's runs", STEPS_ROWS="steps.py's runs",
             MECHANISM_ROWS="a study's runs", TRAJECTORY_ROWS="a study's trajectories",
             BALL_ROWS="a class ball's record", PAIR_ROWS="a paired CSV")


def check_kind(kind):
    """kind one of this module's kinds of rows (SWEEP_ROWS, ...), the very dict."""
    if not any(kind is globals()[k] for k in KINDS):
        raise ValueError(f"kind must be one of row_kinds.{', row_kinds.'.join(KINDS)}, got "
                         f"{shown(kind)}")
    return kind


def check_row_list(rows):
    if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
        raise TypeError(f"rows must be a list of rows (dicts, as read_rows reads them), got "
                        f"{shown(rows)}")
    return rows


def check_bar(bar):
    if bar is not None:
        check_number("bar", bar, REALS, 0, 1 + 1e-12, "a number in (0, 1]")
        if not bar > 0:
            raise ValueError(f"bar must be a number in (0, 1], got {bar!r}")
    return bar


def read_rows(paths, warn=None, kind=SWEEP_ROWS):
    """The finished runs in CSV files of one kind (SWEEP_ROWS: runs*.csv, STEPS_ROWS: steps.csv),
    each row with "line" ("FILE line N") added. A row that is complete but wrong inside (a number
    that is not one, an accuracy outside [0, 1], a model or flag we never write, numbers that
    contradict each other) is a ValueError naming the file and line: a damaged results file must
    not turn into a quietly different table. A torn row (too few fields, or NUL bytes, as a
    crash leaves) is skipped with a warning naming the file and line (`warn`, a function of one
    line; default: print to stderr): as the file's last line, the trace of a run killed
    mid-write, which a resumed run makes again; anywhere else, something else damaged the file."""
    if not (isinstance(paths, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) and not
                                                     isinstance(p, bytes) for p in paths)):
        raise TypeError(f"paths must be a list of CSV paths, got {shown(paths)}")
    check_kind(kind)
    warn = check_callable("warn", warn) if warn is not None else (
        lambda text: print(text, file=sys.stderr, flush=True))
    rows = []
    for path in paths:
        own_file(path)
        with cli.open_regular(path, "the CSV") as f:      # a FIFO or a device: never opened
            text = f.read().decode("utf-8", "replace")
        lines = text[:text.rfind("\n") + 1].splitlines()
        if not lines:                         # empty, or a header torn mid-write: no runs yet
            continue
        if kind.get("whole") and text and not text.endswith("\n"):
            raise ValueError(f"{path} line {len(lines) + 1}: the file ends mid-row; {kind['what']} "
                             f"is written whole, so it was cut or damaged: write it again")
        header = _header_of(path, lines[0], kind)
        last = len(lines) if text.endswith("\n") else None    # else a torn tail follows
        for line, text_line in enumerate(lines[1:], start=2):
            r = _row_of(f"{path} line {line}", text_line, header, kind, warn,
                        KILLED if line == last else "the file was damaged there")
            if r is not None:
                rows.append(r)
        if text[text.rfind("\n") + 1:]:                   # the tail after the last line end
            warn(f"warning: {path} line {len(lines) + 1}: the last row is cut mid-line, "
                 f"skipped; {KILLED}")
    return rows


def _header_of(path, first, kind):
    """The columns of a CSV's first line, checked: no column empty or twice, every column of
    `kind` there but those older files lack."""
    header = _fields(f"{path} line 1", first, kind)
    odd = [k for k in header if not k.strip() or header.count(k) > 1]
    if odd:
        what = "an empty column" if not odd[0].strip() else f"the column {odd[0]!r} twice"
        raise ValueError(f"{path} line 1: the header has {what}; not {kind['what']} as "
                         f"written (damaged?)")
    missing = [k for k in kind["fields"] if k not in kind["optional"] and k not in header]
    if missing:
        raise ValueError(f"{path}: not {kind['what']} (no column {', '.join(missing)})")
    return header


def _fields(where, line, kind):
    """The fields of one CSV line; a line the csv module cannot read (a field past its limit,
    csv.field_size_limit) is a ValueError naming `where` ("FILE line N")."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as e:
        raise ValueError(f"{where}: not {kind['what']} as written ({e}; damaged?)") from None


def _row_of(where, text_line, header, kind, warn, torn_because):
    """One line of a CSV under `header` as a row of `kind` (parsed and checked alone, "line"
    added), or None for a blank or torn line, skipped with a warning (a torn line of a file
    written whole is an error). where: "FILE line N"."""
    torn = "NUL bytes" if "\x00" in text_line else None
    if not torn:
        fields = _fields(where, text_line, kind)
        if not fields:                                 # a blank line: never written
            warn(f"warning: {where}: a blank line, skipped; the file was edited or damaged there")
            return None
        if len(fields) > len(header):
            raise ValueError(f"{where}: {len(fields) - len(header)} more fields than the header "
                             f"has columns (rows appended under another header?)")
        r = dict(zip(header, fields))
        odd = next((v for v in fields if v != v.strip() or "_" in v or not v.isascii()),
                   None)            # int() takes ' 8 ', '2_8' and '٣'; we write none
        if odd is not None:
            raise ValueError(f"{where}: the value {odd!r} is not one this project writes "
                             f"(spaces, '_' or a non-ASCII character)")
        if len(fields) < len(header) or "" in (r.get(k) for k in kind["filled"]):
            torn = f"{len(fields)} of {len(header)} fields"
    if torn and kind.get("whole"):
        raise ValueError(f"{where}: a torn row ({torn}); {kind['what']} is written whole, so it "
                         f"was damaged: write it again")
    if torn:
        warn(f"warning: {where}: a torn row ({torn}), skipped; {torn_because}")
        return None
    try:
        r = kind["parse"](r)
    except BadRow as e:
        raise ValueError(f"{where}: {e}") from None
    r["line"] = where
    return r


KILLED = "a run killed while writing it leaves this, and resuming runs it again"


def own_file(path):
    """path, when it is a file of its own folder: a symbolic link to a file elsewhere is a
    ValueError naming both (a study's files are its own; the file behind a link can change, or
    be appended to, under another name)."""
    path = check_path("path", path, "a file's path")
    if os.path.islink(path):
        target = os.path.realpath(path)
        if os.path.dirname(target) != os.path.realpath(os.path.dirname(os.path.abspath(path))):
            raise ValueError(f"{path} is a link to {target}, outside its folder; a study's files "
                             f"are its own: copy the file in instead")
    return path


def read_whole(path, kind):
    """The rows of one file of a kind written whole (kind["whole"]: PAIR_ROWS), every one checked
    (read_rows): ValueError, one line naming the file (and line), when it holds no row, a torn
    or wrong row, or one run twice."""
    path = check_path("path", path, f"{kind['what'] if isinstance(kind, dict) else 'a'} file")
    check_kind(kind)
    if not os.path.isfile(path):
        raise ValueError(f"path {path} is not a file ({kind['what']} expected)")
    rows = read_rows([path], kind=kind)
    if not rows:
        raise ValueError(f"{path} holds no rows ({kind['what']}: a header and at least one row)")
    seen = {}
    for r in rows:
        k = kind["run"](r)
        if k in seen:
            raise ValueError(f"{r['line']}: {kind['name'](k)} again (first at {seen[k]}); each "
                             f"is written once")
        seen[k] = r["line"].rsplit(" ", 1)[-1]
    return rows


def csv_header(path):
    """The column names of a CSV's first complete line, or None when it has none yet (or is no
    regular file); a first line the csv module cannot read is a ValueError naming the file."""
    if not os.path.isfile(check_path("path", path, "a CSV file's path")):
        return None
    with cli.open_regular(path, "the CSV") as f:
        first = f.readline().decode("utf-8", "replace")
    try:
        return next(csv.reader([first])) if first.endswith("\n") else None
    except csv.Error as e:                     # a field past the csv module's limit
        raise ValueError(f"{path} line 1: not a CSV header ({e})") from None


def header_state(path, fields):
    """Whose CSV `path` is, read before a byte of it is changed: "fresh" (missing, empty, or the
    start of the header this project writes, torn mid-write), "ours" (its header is `fields`),
    or "other" (another header, or bytes that are no CSV header at all: never cut, never
    overwritten)."""
    check_path("path", path, "a CSV file's path")
    if not (isinstance(fields, (list, tuple)) and fields and all(isinstance(k, str) for k in fields)):
        raise TypeError(f"fields must be a CSV's column names (a list of str), got {shown(fields)}")
    if not os.path.lexists(path):
        return "fresh"
    if not os.path.isfile(path):
        return "other"
    try:
        header = csv_header(path)
    except ValueError:                         # no CSV header at all
        return "other"
    if header is not None:
        return "ours" if header == list(fields) else "other"
    with cli.open_regular(path, "the CSV") as f:
        head = f.read(len(",".join(fields)) + 3)
    return "fresh" if (",".join(fields) + "\r\n").encode().startswith(head) else "other"


MAX_SEARCHES = 10 ** 6   # (model, T, seed) searches one folder may plan: far beyond any study,


MODELS = ("transformer", "mlp")
