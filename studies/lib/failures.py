"""failures.py (studies/lib): why runs fail (issue 38), from the mechanism study's runs and its arms.

Three reports on folders that mechanism.py writes (its commands `factors`, `paired` and
`trace-report` call them): C of Edelman et al.'s reconstructed bound split into the factors it
multiplies, each factor's separation of failures from successes, and the bound at its size
(factors_report); intervention arms against the study's runs of the same seeds (paired_report);
and trajectories over training, successes against failures at every logged step (trace_report).
The measures come from theory.py through mechanism.py's runs; this file only reads rows.
"""
import csv
import io
import math
import os

import numpy as np

from theory import COVERING_SUMS, covering_from_parts

from studies.lib import cli, folder, harness, intervals, row_kinds
from studies.lib.study import (EDGE_NOTE, fmt, is_final, load_runs, load_study, read_plan,
                               recorded_folder, same_folder, separation, study_files, study_rows,
                               weighted_median, word)


# From a study's runs, no new training: C split into the factors it multiplies, each factor's
# separation of failures from successes and C's with each factor held at its cell median, and the
# reconstructed bound's value per cell. From arms (studies.mechanism arm, then run): each run
# against the study's run of its seed, which shares its data and init. Intervals resample the
# seeds of each T on their own (cell_resamples), since runs at other T share no data (stats'
# design); the two widths at one T share each seed's training set, so where a table pools them
# (the paired table's last row) their seeds are drawn together; an arm's pair is resampled whole.

CELL_BOOT = 20_000      # resamples of each cell's seeds
CELL_RNG = 38           # their generator's seed: a table comes out the same at every run

# C's factors (theory.covering_parts): C = L_after^2 (B_X^2 S_scores + B_X^(2/3) (S_values +
# S_readout))^3, L_after = the readout's ||w|| times the MLP's factor, the head sums over every
# head's norms. A study's runs (row_kinds.MECHANISM_FACTORS) hold each factor and the sums, so C with
# one factor changed is computed again exactly, not through an exponent: held at its cell median,
# B_X enters as itself, the largest head's norms as a common scale a of every head's matrix
# (S_scores by a^(2/3) for W_QK, every sum for W_V and W_O), a head sum as itself, the readout and
# the MLP factor through L_after.
FACTORS = (  # key, name, the arguments of scaled() it scales
    ("covering_constant", "C", ()),
    ("B_X", "B_X (token norm after LN1)", ("B",)),
    ("qk_fro", "‖W_QK‖_F, largest head", ("qk",)),
    ("norm_V", "‖W_V‖_2, largest head", ("v",)),
    ("norm_O", "‖W_O‖_2, largest head", ("o",)),
    ("heads_scores", "S_scores, every head: Σ (2 ‖W_QK‖_F ‖W_V‖_2 ‖W_O‖_2)^⅔", ("scores",)),
    ("heads_values", "S_values, every head: Σ (‖W_V‖_2,1 ‖W_O‖_2)^⅔", ("values",)),
    ("heads_readout", "S_readout, every head: Σ (‖W_V‖_2 ‖W_O‖_2)^⅔", ("readout",)),
    ("readout_norm", "readout ‖w‖", ("L",)),
    ("mlp_factor", "MLP factor 1 + L_act ‖W_1‖_2 ‖W_2‖_2 (L_act 1.13, GELU)", ("L",)),
)
HELD = tuple((k, name.split(" (")[0].split(",")[0].split(":")[0], args)
             for k, name, args in FACTORS if args)


def _cell_resamples(n_seeds, rng, n_boot=None):  # -> [1 + n_boot, n_seeds]
    """How often each seed label of ONE cell is drawn: row 0 the data itself (all 1), then n_boot
    (default CELL_BOOT, read when called) resamples with replacement (intervals.seed_counts), drawn
    for this cell alone. The one place the tables of this section resample."""
    n_boot = CELL_BOOT if n_boot is None else n_boot
    return np.vstack([np.ones(n_seeds), intervals.seed_counts(rng, n_seeds, n_boot)])


def _scaled(r, B=1.0, qk=1.0, v=1.0, o=1.0, L=1.0, scores=1.0, values=1.0, readout=1.0):
    """C of a run (a row with C's factors) with B_X times B, every head's W_QK times qk, W_V
    times v, W_O times o, L_after times L, and the head sums times scores, values and readout
    (theory.covering_from_parts): exact."""
    a = (v * o) ** (2.0 / 3.0)
    return float(covering_from_parts(r["B_X"] * B, r["readout_norm"] * r["mlp_factor"] * L,
                                     r["heads_scores"] * a * qk ** (2.0 / 3.0) * scores,
                                     r["heads_values"] * a * values,
                                     r["heads_readout"] * a * readout))


def _b_x_exponent(r):
    """d ln C / d ln B_X of a run: 6 where the score term leads C, 2 where the other two do."""
    s1 = r["B_X"] ** 2 * r["heads_scores"]
    s23 = r["B_X"] ** (2.0 / 3.0) * (r["heads_values"] + r["heads_readout"])
    return 3 * (2 * s1 + (2.0 / 3.0) * s23) / (s1 + s23)


def _with_factors(rows):
    """rows with held_X: C with factor X held at the cell's median (the other factors the run's
    own), for every factor of HELD."""
    rows = [dict(r) for r in rows]
    for k, _, args in HELD:
        med = np.nanmedian([r[k] for r in rows])      # a diverged run (nan) is left out
        for r in rows:
            r["held_" + k] = _scaled(r, **{a: med / r[k] for a in args})
    return rows


def _check_factors(cells, path):
    """ValueError unless every run of `cells` carries C's factors and they give its C again (to
    1e-9); -> the largest relative difference."""
    rows = [r for rs in cells.values() for r in rs if np.isfinite(r["covering_constant"])]
    if not rows or any(not np.isfinite(r[k]) for r in rows for k in row_kinds.MECHANISM_FACTORS):
        raise ValueError(f"{path}'s runs do not carry C's factors ({', '.join(row_kinds.MECHANISM_FACTORS)}"
                         f"; runs.csv written before them): train them again with `python -m "
                         f"studies.mechanism arm OUT baseline-rerun --from {path} ...` and "
                         f"`python -m studies.mechanism run OUT`, then give --factors OUT")
    worst = max(abs(_scaled(r) / r["covering_constant"] - 1) for r in rows)
    if not worst < 1e-9:
        raise ValueError(f"{path}: C from its factors differs from runs.csv's C by {worst:.3g} "
                         f"(relative); the rows were edited or come from another definition of C")
    return worst


def _reproduction_line(study_cells, cells, path, study):
    """How closely the runs in `cells` give the study's run of the same seed again: the same
    success, the same test accuracy, B_X and C to 1e-9 (relative), and the median relative
    difference in C. Bit for bit on the machine that made the study; float32 training on another
    CPU (another BLAS kernel) rounds differently, and a run drifts."""
    ps = [p for v in _arm_pairs(study_cells, cells, shared=True).values() for p in v]
    rel = lambda b, r, k: abs(r[k] / b[k] - 1)
    count = lambda ok: sum(bool(ok(b, r)) for b, r in ps)
    return (f"The runs of {path} are {study}'s trained again, seed for seed: of {len(ps)}, "
            f"{count(lambda b, r: r['success'] == b['success'])} end with the same success, "
            f"{count(lambda b, r: r['test_acc'] == b['test_acc'])} with the same test accuracy, "
            f"{count(lambda b, r: rel(b, r, 'B_X') < 1e-9 and rel(b, r, 'covering_constant') < 1e-9)}"
            f" with the same B_X and C to 1e-9; the median relative difference in C is "
            f"{np.median([rel(b, r, 'covering_constant') for b, r in ps]):.2g}.")


def _factors_table(plan, cells, rng, design):
    """Per width, pooled over T (pairs within each cell): each factor's and each held C's medians
    (successes / failures) and P(failure > success), against 1/2. -> (lines, intervals)."""
    mine = {k: v for k, v in sorted(cells.items()) if k[0] == design}
    quantities = [(k, name) for k, name, _ in FACTORS] + [
        (f"held_{k}", f"C, {name} held at its cell median") for k, name, _ in HELD]
    lines = [f"Factors of C at the borderline m (design {design}), pooled over T per width "
             "(pairs within each T).", "",
             "| d | quantity | median: successes / failures | P(failure > success) [95% CI] | "
             "against 1/2 |", "|---|---|---|---|---|"]
    n = 0
    for d in sorted({k[1] for k in mine}):
        group = [_with_factors(rows) for k, rows in mine.items() if k[1] == d]
        W = [_cell_resamples(plan["seeds"], rng) for _ in group]
        for q, name in quantities:
            p, lo, hi = separation(group, q, W)
            n += np.isfinite(lo)
            med = [fmt(np.median([r[q] for rows in group for r in rows if r["success"] == ok]))
                   for ok in (1, 0)]
            lines.append(f"| {d} | {name} | {med[0]} / {med[1]} | {fmt(p, lo, hi)} | "
                         f"{word(lo, hi, 0.5)} |")
    return lines + ["", f"{CELL_BOOT} resamples of the seeds, each (d, T) cell on its own. 'held "
                    "at its cell median': C computed again from the run's factors with that one "
                    "factor at the median of its cell (for a head norm, every head's matrix "
                    "scaled by one number that brings the largest head's norm to the median), "
                    "the others the run's own; exact, by theory.covering_from_parts."], n


def _bound_table(cells, design):
    """Per cell of `design`: the reconstructed bound sqrt(C ln(2 d m T) / m) on each run's trained
    weights: its median [exact bootstrap 95% interval], its range, its ratio to 1."""
    lines = [f"The reconstructed bound sqrt(C ln(2 d m T) / m) on the trained weights, design "
             f"{design}: it bounds a test error (at most 1), so its value is its ratio to 1.", "",
             "| d | T | m | runs | median bound = ratio to 1 [95% CI] | smallest, largest |",
             "|---|---|---|---|---|---|"]
    for (g, d, T, m), rows in sorted(cells.items()):
        if g != design:
            continue
        b = np.sqrt(np.array([r["covering_constant"] for r in rows]) * math.log(2 * d * m * T)
                    / m)
        b = b[np.isfinite(b)]
        lo, hi = intervals.median_ci(b)
        lines.append(f"| {d} | {T} | {m} | {len(b)} | {fmt(float(np.median(b)), lo, hi)} | "
                     f"{fmt(b.min())}, {fmt(b.max())} |")
    return lines


def _check_rerun(study, factors, plan):
    """ValueError (one line) unless every cell of the folder `factors` (its plan) is a
    baseline-rerun of a cell of `study`."""
    def of_study(c):                # the study's folder as the plan recorded it, found from here
        src = c["source"].get("plan", "")
        return c["design"] == "baseline-rerun" and "/plan.json" in src and recorded_folder(
            src.rsplit("/plan.json", 1)[0], factors, study)
    foreign = next((c for c in plan["cells"] if not of_study(c)), None)
    if foreign:
        raise ValueError(f"{factors} is not a baseline-rerun of {study} (its cell d="
                         f"{foreign['d']} T={foreign['T']} is {foreign['design']}, from "
                         f"{foreign['source'].get('plan', 'no plan')}); --factors takes "
                         f"`python -m studies.mechanism arm OUT baseline-rerun --from {study} "
                         f"...`")


def _factor_notes(cells):
    """B_X's exponent in C run by run (median, range), and the correlation of ln B_X with the ln
    of each head sum within cells (each cell's means removed), per width: one sentence each."""
    runs = {k: [r for r in rs if np.isfinite(r["covering_constant"])] for k, rs in cells.items()}
    e = np.array([_b_x_exponent(r) for rs in runs.values() for r in rs])

    def within(d, k):
        v = [np.log([[r["B_X"], r[k]] for r in rs]) for key, rs in runs.items() if key[1] == d]
        x, y = (np.concatenate([u[:, i] - u[:, i].mean() for u in v]) for i in (0, 1))
        with np.errstate(invalid="ignore", divide="ignore"):     # a constant sum: nan
            return np.corrcoef(x, y)[0, 1]
    corr = "; ".join(f"d = {d}: " + ", ".join(f"{k} {within(d, k):.2f}" for k in COVERING_SUMS)
                     for d in sorted({k[1] for k in runs}))
    return (f"B_X's exponent in C, d ln C / d ln B_X run by run (6 where the score term leads): "
            f"median {np.median(e):.2f}, {e.min():.2f} to {e.max():.2f}. Correlation of ln B_X "
            f"with the ln of each head sum within cells: {corr}.")


def factors_report(study, out, factors=None):
    """The `factors` command: OUT (markdown) with factors_table from the runs of `factors` (a
    baseline-rerun of the study, whose runs carry C's factors; default the study's own runs),
    checked (check_rerun, check_factors, reproduction_line), and bound_table for each of the
    study's designs."""
    study = harness.check_path("study", study, "a study's folder", folder=True)
    out = harness.check_path("out", out, "a markdown file's path")
    if factors is not None:
        factors = harness.check_path("factors", factors, "a baseline-rerun's folder", folder=True)
    harness.claim_outputs([(out, "table", "--out")],
                          study_files(study) + (study_files(factors) if factors else []))
    plan, cells = load_runs(study, "the study")
    source = factors or study
    f_plan, f_cells = (plan, cells) if factors is None else load_runs(factors, "--factors")
    if factors is not None:
        _check_rerun(study, factors, f_plan)
    design = "borderline" if any(k[0] == "borderline" for k in f_cells) else \
        next(iter(f_cells), ("?",))[0]
    mine = {k: v for k, v in f_cells.items() if k[0] == design}
    worst = _check_factors(mine, source)
    lines, n = _factors_table(f_plan, f_cells, np.random.default_rng(CELL_RNG), design)
    head = [f"## What C's separation is made of, and the bound at its size ({source})", ""]
    if factors is not None:
        head += [_reproduction_line(cells, mine, factors, study), ""]
    lines = head + lines + ["", f"{n} intervals against 1/2. C from the factors equals the runs' "
                            f"C to {worst:.1g} (relative) or better. " + _factor_notes(mine), ""]
    for g in row_kinds.DESIGNS:
        if any(k[0] == g for k in cells):
            lines += _bound_table(cells, g) + [""]
    return _write_markdown(out, lines)


def _write_markdown(out, lines):
    path = cli.claim_output(out, "table", "the table")
    cli.write_text(path, "\n".join(lines) + "\n")
    print(f"wrote {path}")
    return path


PAIR_FIELDS = row_kinds.PAIR_FIELDS        # the CSV's columns: its one reader is row_kinds.read_whole


def _arm_pairs(study_cells, arm_cells, shared=False):
    """{(d, T, m): [(study row, arm row)] by seed} for every run of the arm; ValueError when the
    study lacks a run of the arm's (d, T, m, seed), unless `shared` (then only the runs both
    hold)."""
    base = {(r["d"], r["T"], r["m"], r["seed"]): r for rows in study_cells.values() for r in rows}
    out = {}
    for (_, d, T, m), rows in sorted(arm_cells.items()):
        for r in rows:
            b = base.get((d, T, m, r["seed"]))
            if b is None and shared:
                continue
            if b is None:
                raise ValueError(f"the study has no run d={d} T={T} m={m} seed={r['seed']} to pair "
                                 f"with")
            out.setdefault((d, T, m), []).append((b, r))
    return out


def _paired_rows(arm, pairs, rng, n_seeds):
    """The paired table's rows for one arm: per cell, then pooled per width and over all cells:
    pairs, successes, lost (study yes, arm no), gained, the success rate's paired difference
    [95% CI: each T's pairs resampled on their own, both widths together], and the arm's B_X
    against its pair's."""
    at_T = {}                 # the widths at one T share each seed's data: resampled together
    for d, T, m in pairs:
        if T not in at_T:
            at_T[T] = _cell_resamples(n_seeds, rng)
    W = {key: at_T[key[1]] for key in pairs}
    diff = {key: np.array([r["success"] - b["success"] for b, r in ps]) for key, ps in pairs.items()}

    def interval(keys):
        num = sum(W[k][:, [r["seed"] for _, r in pairs[k]]] @ diff[k] for k in keys)
        den = sum(W[k][:, [r["seed"] for _, r in pairs[k]]].sum(1) for k in keys)
        rep = num / den
        return (float(rep[0]), *intervals.percentile_ci(rep[1:]))

    cell_lines, pooled = [], []
    rng_of = lambda rs: "-".join(f"{f(x['B_X'] for x in rs):.2f}" for f in (min, max))
    med = lambda rs, k: fmt(float(np.median([x[k] for x in rs])))
    for key, ps in pairs.items():
        b, r = [p[0] for p in ps], [p[1] for p in ps]
        p, lo, hi = interval([key])
        cell_lines.append(
            f"| {arm} | {key[0]} | {key[1]} | {key[2]} | {len(ps)} | "
            f"{sum(x['success'] for x in b)} | {sum(x['success'] for x in r)} | "
            f"{int((diff[key] == -1).sum())} | {int((diff[key] == 1).sum())} | {fmt(p, lo, hi)} | "
            f"{rng_of(b)} / {rng_of(r)} | {med(b, 'covering_constant')} / "
            f"{med(r, 'covering_constant')} | {med(b, 'test_acc')} / {med(r, 'test_acc')} |")
    for d in sorted({k[0] for k in pairs}) + ["all"]:
        keys = [k for k in pairs if d in ("all", k[0])]
        x = np.concatenate([diff[k] for k in keys])
        p, lo, hi = interval(keys)
        above = sum(r["B_X"] > b["B_X"] for k in keys for b, r in pairs[k])
        pooled.append(f"| {arm} | {d} | {len(x)} | {int((x == -1).sum())} | {int((x == 1).sum())} "
                      f"| {fmt(p, lo, hi)} | {word(lo, hi, 0.0)} | {above} of {len(x)} |")
    return cell_lines, pooled


def _check_paired_folders(study, arms):
    """ValueError, one line, when an arm is the study's folder or another arm's (any spelling:
    study.same_folder): a study paired with itself is no comparison."""
    for i, path in enumerate(arms):
        if same_folder(path, study):
            raise ValueError(f"the arm {path} is the study's folder {study}; pair the study with "
                             f"its arms (python -m studies.mechanism arm ...), not with itself")
        twin = next((p for p in arms[:i] if same_folder(p, path)), None)
        if twin is not None:
            raise ValueError(f"the arm {path} is given twice ({twin}); give each arm once")


def paired_report(study, arms, out, pairs_csv=None):
    """The `paired` command: OUT (markdown) with each arm's runs against the study's run of the
    same seed (paired_rows; a baseline-rerun arm: reproduction_line), the CPU time of each arm; with
    pairs_csv, every pair as a CSV row (PAIR_FIELDS). Both outputs are claimed before anything is
    written (harness.claim_outputs: neither is an input nor the other), each written whole."""
    study = harness.check_path("study", study, "a study's folder", folder=True)
    if not (isinstance(arms, (list, tuple)) and arms):
        raise TypeError(f"arms must be a non-empty list of arm folders, got {harness.shown(arms)}")
    arms = [harness.check_path("arms", a, "a list of arm folders", folder=True) for a in arms]
    out = harness.check_path("out", out, "a markdown file's path")
    if pairs_csv is not None:
        pairs_csv = harness.check_path("pairs_csv", pairs_csv, "a CSV file's path")
    _check_paired_folders(study, arms)
    inputs = [f for path in [study] + arms for f in study_files(path)]
    harness.claim_outputs([(out, "table", "--out"), (pairs_csv, "pairs", "--pairs")], inputs)
    _, study_cells = load_runs(study, "the study")
    rng = np.random.default_rng(CELL_RNG)
    head, cells, pooled, cpu, csv_rows = [], [], [], {}, []
    for path in arms:
        plan, arm_cells = load_runs(path, "the arm")
        name = next(iter(arm_cells))[0]
        cpu[name] = sum(r["cpu_seconds"] for rows in arm_cells.values() for r in rows)
        if name == "baseline-rerun":
            head += [_reproduction_line(study_cells, arm_cells, path, study), ""]
            continue
        pairs = _arm_pairs(study_cells, arm_cells)
        c, p = _paired_rows(name, pairs, rng, plan["seeds"])
        cells, pooled = cells + c, pooled + p
        csv_rows += [dict(zip(PAIR_FIELDS, (name, d, T, m, r["seed"], b["success"], r["success"],
                                            b["test_acc"], r["test_acc"], b["B_X"], r["B_X"],
                                            b["covering_constant"], r["covering_constant"])))
                     for (d, T, m), ps in pairs.items() for b, r in ps]
    if pairs_csv:
        cli.write_text(pairs_csv, _csv_text(csv_rows), newline="")
    return _write_markdown(out, _paired_page(study, head, cells, pooled, cpu))


def _csv_text(rows):
    """The pairs as CSV text, as csv.DictWriter writes a file (its \\r\\n line ends)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=PAIR_FIELDS)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _paired_page(study, head, cells, pooled, cpu):
    """The paired page's lines: the per-cell table, the pooled one, the CPU time."""
    return [f"## Interventions paired by seed with {study}", ""] + head + [
        "| intervention | d | T | m | pairs | baseline successes | intervention successes | "
        "lost (base yes, int. no) | gained (base no, int. yes) | success rate, int. - base "
        "[95% CI] | B_X, smallest-largest: base / int. | median C: base / int. | median test "
        "acc: base / int. |", "|" + "---|" * 13] + cells + [
        "", "Pooled per width and over all cells (each T's seeds resampled on their own, both "
        f"widths' pairs of a seed at one T together; {CELL_BOOT} resamples). {EDGE_NOTE}", "",
        "| intervention | d | pairs | lost | gained | success rate, intervention - baseline "
        "[95% CI] | against 0 | B_X above the baseline pair's |", "|---|---|---|---|---|---|---|---|"
    ] + pooled + ["", "CPU time (the runs' own cpu_seconds, summed): " + "; ".join(
        f"{k} {v / 60:.1f} min" for k, v in cpu.items())
        + f"; total {sum(cpu.values()) / 60:.1f} CPU min."]


def plan_cost(plan, source):
    """The CPU minutes a plan's runs should take: each cell's mean cpu_seconds per run in the
    study `source` (its runs.csv, the CPU s/run its run.log prints) times the plan's seeds."""
    plan = folder.check_plan(plan, "plan")
    _, cells = load_study(harness.check_path("source", source, "a study's folder", folder=True))
    per = {(d, T, m): np.mean([r["cpu_seconds"] for r in rows]) for (_, d, T, m), rows in
           cells.items()}
    got = [(c, per.get((c["d"], c["T"], c["m"]))) for c in plan["cells"]]
    return [f"d={c['d']} T={c['T']} m={c['m']}: {s:.1f} CPU s/run" for c, s in got
            if s is not None], sum(s * plan["seeds"] for _, s in got if s is not None) / 60


# When a run becomes a success or a failure (issue 38, question 2): the trajectories of the
# borderline runs (studies.mechanism trace: train_trace's rows in OUT/trajectories.csv), eventual
# successes against eventual failures at every logged step. A split at a step is the difference
# of the two groups' medians; its interval resamples the cell's seeds (cell_resamples, the same
# resamples at every step of a cell), and a resample without a success or without a failure
# counts against both bounds, as in separation.

SPLITS = (  # key, name, sign: the difference is sign x (failures' median - successes' median)
    ("B_X", "B_X", 1), ("test_acc", "test acc", -1), ("mass_on_S", "mass on S, top head", -1),
    ("score_gap", "score gap, top head", -1))


def _load_trace(out):
    """(plan, {(d, T, m): {seed: [rows by step]}}) with numbers as floats, from
    OUT/trajectories.csv (finished runs only: those whose last step is written)."""
    plan = read_plan(out)
    if "every" not in plan:
        raise ValueError(f"{os.path.join(out, 'plan.json')}: every is missing; not the plan of a "
                         f"trajectories folder (python -m studies.mechanism trace writes it)")
    runs = {}
    for r in study_rows(out, plan, "trace"):
        r = dict(r, **{k: float(r[k]) for k in ("B_X", "score_gap", "mass_on_S", "train_loss",
                                                "test_acc", "final_test_acc", "cpu_seconds")},
                 **{k: int(r[k]) for k in ("d", "T", "m", "seed", "step", "steps", "top_head")},
                 **{k: float(r[k]) if r[k] != "" else math.nan      # "": a file from before
                    for k in ("ln1_gain_rms", "ln1_shift_norm", "B_X_in_S")},
                 success=r["success"] == "1")
        runs.setdefault((r["d"], r["T"], r["m"]), {}).setdefault(r["seed"], []).append(r)
    cells = {}
    for key, seeds in sorted(runs.items()):
        done = {s: sorted(rs, key=lambda r: r["step"]) for s, rs in sorted(seeds.items())
                if any(is_final(r) for r in rs)}
        for rs in done.values():
            _check_logged_steps(rs, plan["every"])
        if done:
            cells[key] = done
    return plan, cells


def _check_logged_steps(rs, every):
    """ValueError naming the file and line unless a finished run's rows (by step) hold every
    logged step, 1 and each multiple of `every` up to its steps: a gap would pair its runs'
    steps wrongly."""
    want = sorted({1} | set(range(every, rs[-1]["steps"] + 1, every)))
    have = [r["step"] for r in rs]
    if have != want:
        gap = next((i for i, (h, w) in enumerate(zip(have, want)) if h != w), len(have))
        r = rs[min(gap, len(rs) - 1)]
        raise ValueError(f"{r['line']}: the run d={r['d']} T={r['T']} m={r['m']} seed={r['seed']}"
                         f" has no row at step {want[gap]} (it logs 1 and every {every} steps to "
                         f"{r['steps']}); the file was cut or edited: restore it, or trace the "
                         f"run again")


def _split(runs, step, key, sign, W):
    """At `step`, sign x (median over the failures - median over the successes) of `key`, with
    its 95% interval over the seed resamples W [1 + B, n_seeds] -> (successes' median, failures'
    median, difference, lo, hi)."""
    seeds = np.array(sorted(runs))
    v = np.array([next(r[key] for r in runs[s] if r["step"] == step) for s in seeds])
    ok = np.array([runs[s][0]["success"] for s in seeds])
    keep = np.isfinite(v)
    med = [weighted_median(v[keep & g], W[:, seeds[keep & g]]) if (keep & g).any() else
           np.full(W.shape[0], np.nan) for g in (ok, ~ok)]
    diff = sign * (med[1] - med[0]) + 0.0                  # + 0.0: no -0 on the page
    rep = diff[1:]
    lo = intervals.percentile_ci(np.where(np.isnan(rep), -np.inf, rep))[0]
    hi = intervals.percentile_ci(np.where(np.isnan(rep), np.inf, rep))[1]
    return float(med[0][0]), float(med[1][0]), float(diff[0]), lo, hi


def _share_split(runs, step, token, W):
    """At `step`, the failures' share minus the successes' share of runs whose largest token
    after LN1 (B_X's) is `token` ("cls", "bit0", "bit1", or "in S": a bit at a position in S),
    with its 95% interval over the seed resamples W [1 + B, n_seeds], a resample without a
    success or a failure counted against both bounds -> (successes' count, failures' count,
    difference, lo, hi)."""
    seeds = np.array(sorted(runs))
    at = [next(r for r in runs[s] if r["step"] == step) for s in seeds]
    hit = np.array([r["B_X_in_S"] == 1 if token == "in S" else r["B_X_token"] == token
                    for r in at], np.float64)
    ok = np.array([runs[s][0]["success"] for s in seeds])
    w = W[:, seeds]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = [(w[:, g] * hit[g]).sum(1) / w[:, g].sum(1) for g in (ok, ~ok)]
    diff = share[1] - share[0] + 0.0
    rep = diff[1:]
    lo = intervals.percentile_ci(np.where(np.isnan(rep), -np.inf, rep))[0]
    hi = intervals.percentile_ci(np.where(np.isnan(rep), np.inf, rep))[1]
    return int(hit[ok].sum()), int(hit[~ok].sum()), float(diff[0]), lo, hi


SOURCE_TOKENS = ("cls", "bit0", "bit1", "in S")


def _source_table(plan, cells, rng):
    """Where B_X comes from, per cell and logged step: LN1's gain RMS ||g||/sqrt(d) and shift
    norm ||b|| (successes' / failures' medians, failures - successes [95% CI]), and how many
    successes / failures have B_X's token at [CLS], a bit 0, a bit 1, a position in S, with the
    failures' share minus the successes' [95% CI]. rng: the generator trace_table drew from, in
    its state before (the same resamples per cell). -> (lines, the number of intervals)."""
    head = ("| d | T | m | step | LN1 gain RMS: successes / failures | failures - successes "
            "[95% CI] | LN1 shift norm: successes / failures | failures - successes [95% CI] | "
            + " | ".join(f"B_X's token {t}: successes / failures | failures' share - successes' "
                         f"[95% CI]" for t in SOURCE_TOKENS) + " |")
    lines, n = [head, "|" + "---|" * (8 + 2 * len(SOURCE_TOKENS))], 0
    for (d, T, m), runs in cells.items():
        W = _cell_resamples(plan["seeds"], rng)
        ok = sum(rs[0]["success"] for rs in runs.values())
        for step in [r["step"] for r in next(iter(runs.values()))]:
            cols = []
            for key in ("ln1_gain_rms", "ln1_shift_norm"):
                s_med, f_med, diff, lo, hi = _split(runs, step, key, 1, W)
                w = word(lo, hi, 0.0)
                n += w != "n/a"
                cols.append(f"{fmt(s_med)} / {fmt(f_med)} | {fmt(diff, lo, hi)} {w}")
            for t in SOURCE_TOKENS:
                s_n, f_n, diff, lo, hi = _share_split(runs, step, t, W)
                w = word(lo, hi, 0.0)
                n += w != "n/a"
                cols.append(f"{s_n}/{ok} / {f_n}/{len(runs) - ok} | {fmt(diff, lo, hi)} {w}")
            lines.append(f"| {d} | {T} | {m} | {step} | " + " | ".join(cols) + " |")
    return lines, n


def _onset(steps, words):
    """The first step whose word is "established", and the first from which every later one is
    (None where there is none)."""
    first = next((s for s, w in zip(steps, words) if w == "established"), None)
    held = None
    for s, w in zip(steps, words):
        held = (held or s) if w == "established" else None
    return first, held


def _trace_table(plan, cells, rng):
    """Per cell and logged step: successes' / failures' medians of each quantity of SPLITS and
    their split [95% CI] with its word against 0; then per cell the first step each split is
    established and the step from which it stays so. -> (lines, onsets {cell: {key: (first,
    held)}}, the number of intervals)."""
    order = {1: "failures - successes", -1: "successes - failures"}
    head = "| d | T | m | step | " + " | ".join(
        f"{name}: successes / failures | {order[sign]} [95% CI]" for _, name, sign in SPLITS) + " |"
    lines, onsets, n = [head, "|" + "---|" * (4 + 2 * len(SPLITS))], {}, 0
    for (d, T, m), runs in cells.items():
        W = _cell_resamples(plan["seeds"], rng)
        steps = [r["step"] for r in next(iter(runs.values()))]
        words = {k: [] for k, _, _ in SPLITS}
        for step in steps:
            cols = []
            for key, _, sign in SPLITS:
                s_med, f_med, diff, lo, hi = _split(runs, step, key, sign, W)
                w = word(lo, hi, 0.0)
                words[key].append(w)
                n += w != "n/a"
                cols.append(f"{fmt(s_med)} / {fmt(f_med)} | {fmt(diff, lo, hi)} {w}")
            lines.append(f"| {d} | {T} | {m} | {step} | " + " | ".join(cols) + " |")
        onsets[(d, T, m)] = {k: _onset(steps, words[k]) for k, _, _ in SPLITS}
    return lines, onsets, n


def _onset_lines(cells, onsets):
    """Per cell: its successes and failures, and for each split the first step it is established
    and the step from which it stays established; then B_X's split against test accuracy's."""
    lines = ["| d | T | m | successes / failures | " + " | ".join(
        f"{name}: first established / established from" for _, name, _ in SPLITS)
        + " | B_X's split against test accuracy's |", "|" + "---|" * (5 + len(SPLITS))]
    for key, runs in cells.items():
        ok = sum(rs[0]["success"] for rs in runs.values())
        on = onsets[key]
        show = lambda s: "never" if s is None else str(s)
        b, a = on["B_X"][0], on["test_acc"][0]
        order = ("no B_X split" if b is None else "B_X splits, test accuracy never" if a is None
                 else "before" if b < a else "with (the same logged step)" if b == a else "after")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {ok} / {len(runs) - ok} | "
                     + " | ".join(f"{show(on[k][0])} / {show(on[k][1])}" for k, _, _ in SPLITS)
                     + f" | {order} |")
    return lines


def _trace_check_lines(out, plan, cells):
    """Whether the monitored runs of the folder OUT end where the study's unmonitored runs of the
    same cell and seed ended (the study named by each cell's source, found from here or from a
    folder above OUT: study.recorded_folder): how many give its final test accuracy,
    B_X, mass on S and score gap exactly."""
    studies = {c["source"]["plan"].rsplit("/plan.json", 1)[0] for c in plan["cells"]
               if "plan" in c["source"]}
    if not studies:
        return []
    base = {}
    for path in studies:
        found = recorded_folder(path, out)
        try:
            if found is None:
                raise ValueError("no such folder from here")
            base.update({(r["d"], r["T"], r["m"], r["seed"]): r for rows in
                         load_study(found)[1].values() for r in rows})
        except (OSError, ValueError) as e:
            return [f"The study {path} could not be read ({e}): no check of the runs' ends."]
    ends = [(key + (seed,), rs[-1]) for key, runs in cells.items() for seed, rs in runs.items()]
    pairs = [(base[k], r) for k, r in ends if k in base]
    same = {k: sum(b[k] == r[k] for b, r in pairs) for k in ("B_X", "mass_on_S", "score_gap")}
    acc = sum(b["test_acc"] == r["final_test_acc"] for b, r in pairs)
    return [f"The monitor only watches: of {len(ends)} runs, {len(pairs)} are runs of "
            f"{', '.join(sorted(studies))} (same d, T, m and seed), and {acc} of them end with "
            f"its final test accuracy exactly, {same['B_X']} with its B_X, {same['mass_on_S']} "
            f"with its mass on S and {same['score_gap']} with its score gap."]


def trace_report(out, log=print):
    """The `trace-report` command: OUT/table.md (trace_table, the onsets, the cost) and, with
    matplotlib, OUT/trajectories.png (plot_trace), both claimed before either is written
    (harness.claim_outputs). -> the table's text."""
    out = harness.check_path("out", out, "a trajectories folder", folder=True)
    harness.check_callable("log", log)
    harness.claim_outputs([(os.path.join(out, "table.md"), "table", "the table"),
                           (os.path.join(out, "trajectories.png"), "plot", "the plot")],
                          study_files(out), own=[out])
    plan, cells = _load_trace(out)
    if not cells:
        raise ValueError(f"{out}: no finished runs yet in trajectories.csv; run `python "
                         f"-m studies.mechanism trace {out} ...`")
    rng = np.random.default_rng(CELL_RNG)
    table, onsets, n = _trace_table(plan, cells, rng)
    runs = [rs for c in cells.values() for rs in c.values()]
    cpu = sum(rs[0]["cpu_seconds"] for rs in runs)
    text = "\n".join(
        [f"## When a run becomes a success or a failure ({out})", "",
         f"Borderline runs logged at step 1 and every {plan['every']} steps; successes and "
         f"failures by the final test accuracy (>= {plan['bar']}). Medians over the seeds of "
         f"each group; each split [95% CI: {CELL_BOOT} resamples of the cell's seeds, a "
         f"resample without a success or a failure counted against both bounds] against 0.", ""]
        + _onset_lines(cells, onsets)
        + ["", f"'first established': the first logged step whose interval excludes 0; "
               f"'established from': the step from which every later logged step's does. "
               f"{n} intervals looked at.", ""]
        + table
        + _source_lines(plan, cells)
        + ["", f"CPU time: {len(runs)} runs, {cpu / 60:.1f} CPU min (the runs' own "
               f"cpu_seconds, monitor included).", ""] + _trace_check_lines(out, plan, cells)) + "\n"
    path = cli.claim_output(os.path.join(out, "table.md"), "table", "the table")
    cli.write_text(path, text)
    log(f"wrote {path}")
    _plot_trace(out, plan, cells, log)
    return text


def _source_lines(plan, cells):
    """The page's section on where B_X comes from (source_table), or nothing when the file was
    written before those columns. Its resamples are trace_table's (the same generator seed)."""
    if any(r["B_X_token"] == "" for runs in cells.values() for rs in runs.values() for r in rs):
        return []
    table, n = _source_table(plan, cells, np.random.default_rng(CELL_RNG))
    return (["", "### Where B_X comes from", "",
             "B_X = sqrt(B^2 + 1), B the largest norm of the 2T + 1 distinct tokens after LN1 "
             "(each bit value at each position, and [CLS]). LN1's output is g * z + b with z "
             "normalised (||z|| = sqrt(d)), so its norm is about sqrt(d) times the gain's RMS "
             "when b is small. Per logged step: LN1's gain RMS ||g||/sqrt(d) and shift norm "
             "||b||, and which token reaches B's maximum (counts of successes / failures; the "
             "difference of the two groups' shares), with the same resamples of the cell's seeds "
             f"as above. {n} more intervals.", ""] + table)


def _plot_trace(out, plan, cells, log=print):
    """OUT/trajectories.png, one column per cell (a width at one T): above, B_X (left axis) and
    the test accuracy (right axis) over the steps, each run a thin line and each group's median
    a thick one, successes blue, failures red; below, the top head's mass on S and the training
    loss. Skipped with one line when matplotlib is missing."""
    plt = cli.pyplot_or_hint("rerun trace-report")
    if plt is None:
        return None
    fig, ax = plt.subplots(2, len(cells), figsize=(6.5 * len(cells), 8), squeeze=False)
    for j, ((d, T, m), runs) in enumerate(cells.items()):
        top, low = ax[0, j], ax[1, j]
        acc, loss = top.twinx(), low.twinx()
        for ok, colour, name in ((True, "C0", "successes"), (False, "C3", "failures")):
            group = [rs for rs in runs.values() if rs[0]["success"] == ok]
            if not group:
                continue
            steps = [r["step"] for r in group[0]]
            for axis, key, style in ((top, "B_X", "-"), (acc, "test_acc", "--"),
                                     (low, "mass_on_S", "-"), (loss, "train_loss", ":")):
                v = np.array([[r[key] for r in rs] for rs in group])
                for row in v:
                    axis.plot(steps, row, style, color=colour, lw=0.4, alpha=0.35)
                axis.plot(steps, np.nanmedian(v, 0), style, color=colour, lw=2,
                          label=f"{name} ({len(group)}): {KEY_NAMES[key]}, median")
        top.set_ylabel("B_X (solid)")
        acc.set_ylabel("test accuracy (dashed)")
        low.set_ylabel("mass on S, top head (solid)")
        loss.set_ylabel("training loss (dotted, log)")
        loss.set_yscale("log")
        top.set_title(f"d = {d}, T = {T}, m = {m}: B_X and test accuracy", fontsize=10)
        low.set_title("the top head's mass on S and the training loss", fontsize=10)
        for a, b in ((top, acc), (low, loss)):
            a.set_xlabel("step")
            handles = [h for h in a.get_lines() + b.get_lines() if not
                       h.get_label().startswith("_")]
            a.legend(handles, [h.get_label() for h in handles], fontsize=7, loc="center right")
    fig.suptitle(f"runs over training: eventual successes (final test accuracy >= "
                 f"{plan['bar']}) against failures\nthin lines: single runs; thick: medians",
                 fontsize=10)
    fig.tight_layout()
    path = cli.claim_output(os.path.join(out, "trajectories.png"), "plot", "the plot")
    cli.save_figure(plt, fig, path)
    log(f"wrote {path}")
    return path


KEY_NAMES = dict(B_X="B_X", test_acc="test acc", mass_on_S="mass on S", train_loss="train loss")
