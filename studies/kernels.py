"""kernels.py (studies, a command): how much the arithmetic moves the science (issue 46).

    python -m studies.kernels STUDY RERUN --out FILE    one study's runs against the same runs
                                                        trained again under another BLAS kernel

A float32 run replays bit for bit only under the kernel that made it (arithmetic.py); a run near
the success bar can end on the other side under another kernel. This command pairs two folders of
the mechanism study's kind whose runs are the same runs (same cells d, T, m and seeds: the same
data and init, training.study_streams) made under two arithmetics, and asks what changes: per cell, how
many runs change outcome (with the exact two-sided sign test of the discordant pairs), and for
each quantity the study separates failures from successes with, its interval in each folder and
whether the verdict word moves or either point leaves the other's interval. Each folder's
intervals resample its own seeds with the same resample draws (study.seed_weights, seed 0), so
the two differ by the runs alone.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.kernels")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import os

import numpy as np

from studies.lib import harness, provenance
from studies.lib.cli import OneLineParser
from studies.lib.intervals import sign_test
from studies.lib.study import EDGE_NOTE, SEPARATED, fmt, load_study, seed_weights, separation, word


def _by_cell(cells):
    """{(d, T, m): {seed: row}} of a study's cells, whatever their design's name."""
    return {(d, T, m): {r["seed"]: r for r in rows} for (_, d, T, m), rows in cells.items()}


def _outcome_lines(a, b, name_a, name_b):
    """Table 1: per cell both folders hold, the runs paired by seed: successes in each, the runs
    that changed outcome, the sign test, and how many runs end with the same test accuracy."""
    lines = [f"| d | T | m | runs paired | successes: {name_a} / {name_b} | success lost / gained "
             f"| sign test p | same test accuracy |", "|" + "---|" * 8]
    totals = np.zeros(5, int)
    for key in sorted(set(a) & set(b)):
        seeds = sorted(set(a[key]) & set(b[key]))
        pa = [a[key][s] for s in seeds]
        pb = [b[key][s] for s in seeds]
        lost = sum(x["success"] and not y["success"] for x, y in zip(pa, pb))
        gained = sum(y["success"] and not x["success"] for x, y in zip(pa, pb))
        same_acc = sum(x["test_acc"] == y["test_acc"] for x, y in zip(pa, pb))
        ok = (sum(x["success"] for x in pa), sum(y["success"] for y in pb))
        totals += (len(seeds), lost, gained, same_acc, 1)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {len(seeds)} | {ok[0]} / {ok[1]} | "
                     f"{lost} / {gained} | {sign_test(lost, gained):.3g} | {same_acc} |")
    n, lost, gained, same_acc, cells = totals
    lines.append(f"| all | {cells} cells | - | {n} | - | {lost} / {gained} | "
                 f"{sign_test(lost, gained):.3g} | {same_acc} |")
    return lines, (int(n), int(lost), int(gained))


def _verdict_lines(cells_a, cells_b, name_a, name_b):
    """Table 2: per width, pooled over T, and per cell, each separated quantity's P(failure's X
    > success's X) [95% CI] and word in each folder; 'moves' where the word differs or a point
    lies outside the other's interval. -> (lines, verdicts compared, verdicts moved)."""
    keys = sorted(set(cells_a) & set(cells_b))
    Ts = sorted({T for _, T, _ in keys})
    n_seeds = max(len(v) for v in list(cells_a.values()) + list(cells_b.values()))
    W = seed_weights(n_seeds, Ts)
    lines = [f"| d | T | quantity | {name_a}: P [95% CI] | {name_b}: P [95% CI] | moves |",
             "|" + "---|" * 6]
    compared = moved = 0
    for d in sorted({k[0] for k in keys}):
        mine = [k for k in keys if k[0] == d]
        for group, label in [([k], str(k[1])) for k in mine] + [(mine, f"all {len(mine)} T")]:
            for key, name in SEPARATED:
                rows_a = [list(cells_a[k].values()) for k in group]
                rows_b = [list(cells_b[k].values()) for k in group]
                pa, pb = separation(rows_a, key, W), separation(rows_b, key, W)
                if not (np.isfinite(pa[1]) and np.isfinite(pb[1])):
                    continue
                wa, wb = word(pa[1], pa[2], 0.5), word(pb[1], pb[2], 0.5)
                out = not (pa[1] <= pb[0] <= pa[2] and pb[1] <= pa[0] <= pb[2])
                move = wa != wb or out
                compared, moved = compared + 1, moved + move
                lines.append(f"| {d} | {label} | {name} | {fmt(*pa)} {wa} | {fmt(*pb)} {wb} | "
                             f"{'yes' if move else 'no'} |")
    return lines, compared, moved


def kernels_table(study, rerun):
    """The two tables and their summary, for the study `study` and its runs made again `rerun`."""
    study = harness.check_path("study", study, "a study's folder", folder=True)
    rerun = harness.check_path("rerun", rerun, "a study's folder", folder=True)
    plan_a, cells_a = load_study(study)
    plan_b, cells_b = load_study(rerun)
    a, b = _by_cell(cells_a), _by_cell(cells_b)
    if not set(a) & set(b):
        raise ValueError(f"{study} and {rerun} share no cell (d, T, m): not the same runs")
    names = []
    for out, plan in ((study, plan_a), (rerun, plan_b)):
        rec = provenance.recorded_arithmetic(out, plan)
        names.append(f"{out} ({rec['kernel'] if rec else 'kernel not recorded'})")
    out_lines, (n, lost, gained) = _outcome_lines(a, b, *names)
    ver_lines, compared, moved = _verdict_lines(a, b, *names)
    return "\n".join(
        [f"## The same runs under two arithmetics: {names[0]} and {names[1]}", ""] + out_lines
        + ["", f"{lost + gained} of {n} runs change outcome ({lost} lost, {gained} gained; exact "
           f"two-sided sign test p = {sign_test(lost, gained):.3g}).", ""] + ver_lines
        + ["", f"{moved} of {compared} verdicts move (the word differs, or a point lies outside "
           f"the other's 95% interval). Intervals: the seeds of each T resampled on their own, "
           f"the same draws in both folders; wording against 1/2 as the study's pages word it. "
           + EDGE_NOTE,
           f"The arithmetic of each folder: studies.replay's finding or its recorded machines "
           f"(python -m studies.replay FOLDER --find). Written by python -m studies.kernels "
           f"{study} {rerun}."]) + "\n"


def main(argv=None):
    ap = OneLineParser(prog="studies.kernels", description=(
        "How much the arithmetic moves the science: a mechanism study's runs against the same "
        "runs made under another BLAS kernel (changed outcomes, moved verdicts)."))
    ap.add_argument("study", help="the study's folder (plan.json, runs.csv)")
    ap.add_argument("rerun", help="the same runs made under another arithmetic")
    ap.add_argument("--out", required=True, help="the table's file")
    a = ap.parse_args(harness.check_argv(argv))
    try:
        if os.path.realpath(a.study) == os.path.realpath(a.rerun):
            raise ValueError(f"{a.study} and {a.rerun} are one folder; give the study and its "
                             f"rerun")
        harness.claim_outputs([(a.out, "table", "--out")], folders=[a.study, a.rerun])
        path = a.out
        text = kernels_table(a.study, a.rerun)
    except ValueError as e:
        ap.error(str(e))
    cli.write_text(path, text)
    print(text.splitlines()[-4] if len(text.splitlines()) > 4 else text)
    note = provenance.kernels_differ([a.study, a.rerun])     # the point: two kernels
    print(note or f"note: {a.study} and {a.rerun} record one BLAS kernel, or none: the "
                  f"difference this table shows is not the kernel's alone")
    print(f"table: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.kernels", main))
