"""The screen of issue 38's interventions on the token norm, and its tables (a screen's script).

    python results/mechanism-interventions/screen.py plan     one plan.json per arm
    nice -n 10 python mechanism.py run results/mechanism-interventions/ARM --workers 1
    python results/mechanism-interventions/screen.py report   tables.md (no training)

Each arm is results/mechanism/plan.json's borderline cells at T = 100 and 1000 (d = 64, 128), its
options unchanged but one: freeze-ln1 (--freeze ln1), decay-except-ln (--decay except-ln),
freeze-lnf (--freeze lnf, the control); baseline-rerun reruns the baseline itself at this commit,
to check that the runs of results/mechanism/runs.csv reproduce exactly (then the arms pair with
them: the same seed draws the same data and init, test_interventions_pair_with_the_baseline_by_seed).
Run from the repository's root.
"""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

ARMS = {"baseline-rerun": {}, "freeze-ln1": dict(freeze="ln1"),
        "decay-except-ln": dict(decay="except-ln"), "freeze-lnf": dict(freeze="lnf")}
SCREEN_T = (100, 1000)
SCREEN_SEEDS = 5


def write_plans():
    with open(os.path.join(ROOT, "results", "mechanism", "plan.json")) as f:
        base = json.load(f)
    cells = [c for c in base["cells"] if c["design"] == "borderline" and c["T"] in SCREEN_T]
    for arm, change in ARMS.items():
        plan = dict(seeds=SCREEN_SEEDS, bar=base["bar"], cells=[])
        for c in cells:
            c = copy.deepcopy(c)
            c["design"], c["options"] = arm, dict(c["options"], **change)
            c["source"]["plan"] = "results/mechanism/plan.json (borderline)"
            plan["cells"].append(c)
        os.makedirs(os.path.join(HERE, arm), exist_ok=True)
        with open(os.path.join(HERE, arm, "plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        print(f"{arm}: {len(plan['cells'])} cells x {SCREEN_SEEDS} seeds, change {change or '-'}")


if __name__ == "__main__":
    if sys.argv[1:] == ["plan"]:
        write_plans()
    elif sys.argv[1:] == ["report"]:
        import analysis
        analysis.main(HERE)
    else:
        sys.exit("usage: screen.py plan | report")
