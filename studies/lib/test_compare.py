"""test_compare.py: the tests of studies/lib/compare.py.

Run from the repository's root: python -m pytest -q
"""
import json
import math
import os

import numpy as np
import pytest

import theory
from studies import sweep
from studies.lib import compare, folder, report, stats
from studies.conftest import (COMMAND, copy_folder, one_line_refusal, seed_rows, smoke_sweep,
                              run_cli, walk_modules)
from test_all import Walk


def test_compare_puts_protocols_side_by_side(tmp_path, capsys, smoke_ref):
    copy_folder(smoke_ref, tmp_path / "a")
    assert smoke_sweep(tmp_path / "b", "--protocol", "steps-500", "--steps", "100") == 0
    out = str(tmp_path / "cmp.md")
    assert sweep.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", out]) == 0
    table = open(out).read()                 # neither runs its protocol as named: the smoke preset
    assert "| ours (a) | 8 |" in table and "| steps-500 (b) | 16 |" in table   # and --steps 100
    assert "memorised" in table and "| ours |" not in table and "| steps-500 |" not in table
    smoke = dict(steps=150, n_test=500)      # a protocol that is the smoke preset: named alone
    md, _ = compare._compare_table([str(tmp_path / "a"), str(tmp_path / "b")], log=lambda *_: None,
                                 protocols={"ours": smoke, "steps-500": dict(smoke, steps=100)})
    assert "| ours | 8 |" in md and "| steps-500 | 16 |" in md
    assert sweep.main(["compare", str(tmp_path / "a"), str(tmp_path / "a"), "--out", out]) == 0
    assert table.count("| ours (a) |") * 2 == open(out).read().count("| ours (a) |")
    assert open(out).read().count("1.00 [1.00, 1.00]") == 2 * table.count("| ours (a) |")  # paired
    md, _ = compare._compare_table([str(tmp_path / "a")] * 2, log=lambda *_: None,
                                 protocols={"ours": smoke})
    assert "| ours |" not in md and md.count("| ours (a) |") == 2 * table.count("| ours (a) |")
    assert sweep.main(["compare", str(tmp_path / "a"), "--seeds", "1", "--Ts", "16", "--out",
                       out]) == 0             # the smoke preset is not ours: named by folder
    table = open(out).read()
    assert "| ours (a) | 16 |" in table and "| ours (a) | 8 |" not in table and "| 1 |" in table
    code, _, err = run_cli(capsys, "sweep", "compare", str(tmp_path / "nowhere"))
    assert code == 2 and "no folder" in err
    assert sweep.main(["compare", str(tmp_path / "a"), str(tmp_path / "a"), "--growth-from", "8",
                       "--out", out]) == 0                  # itself: no gap, none growing
    assert "- ours (a): (m50 / first) at T over the same at T = 8, paired 95% CI: T = 16: " \
           "1.00 [1.00, 1.00]" in open(out).read()
    c = copy_folder(tmp_path / "a", tmp_path / "c")              # c: a without its T = 8 runs
    (c / "runs.csv").write_text("".join(ln for ln in (c / "runs.csv").read_text().splitlines(
        keepends=True) if ln.split(",")[3] != "8"))            # column 3 is T
    assert sweep.main(["compare", str(tmp_path / "a"), str(c), "--growth-from", "8",
                       "--out", out]) == 0
    assert "ours (c): m50 / first at T over at T = 8: not paired (T = 8 missing or other " \
           "seeds)" in open(out).read() and "| ours (c) | 8 |" not in open(out).read()
    code, _, err = run_cli(capsys, "sweep", "compare", str(tmp_path / "a"), "--growth-from", "9")
    assert code == 2 and "--growth-from 9: no folder holds T = 9; T here: [8, 16]" in err


def test_compare_places_the_papers_mstar_only_for_the_papers_task(smoke_ref, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setattr(report, "PAPER_MSTAR", {8: 1.0, 16: 1e6})   # the smoke sweep's T
    md, _ = compare._compare_table([str(smoke_ref)], log=lambda *_: None)
    assert "majority m* interval (95%): below at T = 8; above at T = 16" in md
    assert "| 8 | " in md and " | 1.0 | " in md                      # the paper's m* column
    other = copy_folder(smoke_ref, tmp_path / "or")                          # the same runs, called OR
    meta = json.loads((other / "sweep.json").read_text())
    meta["options"]["task"] = "or"
    old, meta["sweep_id"] = meta["sweep_id"], folder.sweep_fingerprint(meta)
    (other / "sweep.json").write_text(json.dumps(meta))              # rows relabelled to match
    (other / "runs.csv").write_text((other / "runs.csv").read_text().replace(old, meta["sweep_id"])
                                    .replace("transformer,and,", "transformer,or,"))
    md, _ = compare._compare_table([str(other)], log=lambda *_: None)
    assert "paper's m*" not in md and " | 1.0 | " not in md


def test_paper_position_places_the_papers_mstar_against_each_interval():
    st = lambda lo, hi: dict(m_star_lo=lo, m_star_hi=hi, n_seeds=5)  # paper: 50 at 100, 69.2 at 300
    stats = {("transformer", 100): st(51, 68), ("transformer", 300): st(60, 69),
             ("transformer", 500): st(70, 90), ("transformer", 8): st(1, 2)}   # 8: not in it
    assert compare._paper_position("p", stats) == (
        "p: the paper's m* against this folder's majority m* interval (95%): inside at T = 500; "
        "below at T = 100; above at T = 300")
    assert compare._paper_position("p", {("transformer", 100): st(50, 50)}).endswith(
        "inside at T = 100 (every paper T held)")
    assert compare._paper_position("p", {("transformer", 100): dict(
        st(math.inf, math.inf), n_seeds=0)}).endswith("without a finished seed at T = 100")                         # the bounds count as inside
    assert compare._paper_position("p", {("transformer", 8): st(1, 2)}) is None


def test_headline_writes_its_table_and_pastes_it_between_the_markers(smoke_ref, wide_ref,
                                                                     tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# x\nbefore\n" + compare.BEGIN + "\nold\n" + compare.END + "\nafter\n")
    out, wide = tmp_path / "headline.md", wide_ref            # --d128 must be at d = 128
    args = ["headline", "--d64", str(smoke_ref), "--d128", str(wide), "--out", str(out),
            "--readme", str(readme)]
    assert sweep.main(args) == 0
    table = out.read_text()
    assert table.startswith("| T | the paper's m* (its figure's error bar) |") and "| 8 | - | " in table
    assert readme.read_text() == ("# x\nbefore\n" + compare.BEGIN + "\n" + table + compare.END
                                  + "\nafter\n")
    assert sweep.main(args) == 0 and readme.read_text().count("| 16 | - |") == 1   # idempotent
    readme.write_text("no markers\n")                                  # nowhere to paste: refused
    code, _, err = run_cli(capsys, "sweep", *args)
    assert code == 2 and "has no lines" in err and readme.read_text() == "no markers\n"
    code, _, err = run_cli(capsys, "sweep", "headline", "--d64", str(tmp_path / "none"))
    assert code == 2 and "no folder" in err


def test_a_width_screened_at_large_T_only_has_no_law_and_is_said_so(smoke_ref, tmp_path):
    """A screen of a new width runs at large T only: the table shows it, naming the missing law,
    instead of failing on the small-T fit it cannot make."""
    table, curves = compare._width_table([str(smoke_ref)], log=lambda line: None, fit_below=4)
    assert [c["dep"]["ratios"] for c in curves] == [{}]
    assert table.count("(no small-T law)") == 2 and "| no small-T law |" in table
    assert "no small-T law (fewer than 2 T <= 4 run)" in table
    table, curves = compare._width_table([str(smoke_ref)], log=lambda line: None, fit_below=16)
    assert "(fit range)" in table and "no small-T law" not in table


def test_width_study_pools_a_width_and_puts_widths_side_by_side(tmp_path, capsys, smoke_ref):
    assert smoke_sweep(tmp_path / "a24", "--Ts", "24") == 0            # smoke_ref's sweep, one more T
    assert smoke_sweep(tmp_path / "b", "--Ts", "8,16,24", "--protocol", "d-32", "--steps", "40") == 0
    out = tmp_path / "width.md"
    assert sweep.main(["width", str(tmp_path / "b"), str(smoke_ref), str(tmp_path / "a24"),
                       "--fit-below", "16", "--out", str(out)]) == 0
    table = out.read_text()
    assert table.index("| 32 | 8 |") < table.index("| 64 | 8 |")       # sorted by width
    assert "| 64 | 24 |" in table and "| 64 | 16 | " in table            # pooled: 3 T at d = 64
    assert "d_p = ceil(16 s ln T)" in table and "| 24 | 153 | " in table  # 16 * 3 * ln 24
    assert sweep.main(["width", str(tmp_path / "b"), "--Ts", "8,16", "--out", str(out)]) == 0
    assert "| 32 | 24 |" not in out.read_text()
    cut = copy_folder(tmp_path / "b", tmp_path / "cut")                  # an interrupted sweep at T = 24
    lines = (cut / "runs.csv").read_text().splitlines(keepends=True)
    last = max(i for i, ln in enumerate(lines) if ",3,24," in ln)      # a search's last run
    (cut / "runs.csv").write_text("".join(lines[:last] + lines[last + 1:]))
    assert sweep.main(["width", str(cut), "--out", str(out)]) == 0
    table = out.read_text()
    assert "| 32 | 24 |" not in table and "T = 24: 1 of 2 seeds' searches unfinished" in table
    code, _, err = run_cli(capsys, "sweep", "width", str(smoke_ref), str(smoke_ref))
    assert code == 2 and "both hold the run" in err
    other = copy_folder(smoke_ref, tmp_path / "lr")             # another protocol: options, rows and
    meta = json.loads((other / "sweep.json").read_text())                   # fingerprints agree
    old_id, meta["options"]["lr"] = meta["sweep_id"], 0.01
    meta["sweep_id"] = folder.sweep_fingerprint(meta)
    (other / "sweep.json").write_text(json.dumps(meta))
    (other / "runs.csv").write_text((other / "runs.csv").read_text().replace(old_id,
                                                                              meta["sweep_id"]))
    code, _, err = run_cli(capsys, "sweep", "width", str(smoke_ref), str(other))
    assert code == 2 and "other options" in err
    code, out, _ = run_cli(capsys, "sweep", "width", str(smoke_ref), "--fit-below", "8")
    assert code == 0 and "no small-T law (fewer than 2 T <= 8 run)" in out


def test_width_edges_find_the_narrowest_width_that_keeps_its_law():
    """Synthetic curves: at T = 300 d = 64 is above its law and 80 keeps it (64 < d <= 80); at
    T = 1000 every width tried is above it (d > 128); at T = 3000 all keep it (d <= 64); the first
    edge, 80 at T = 300, scaled like ln T; the fit range and a width not run say so."""
    def curve(d, above):
        ratios = {T: (1.5, 1.2, 2.0) if a else (0.9, 0.7, 1.1) for T, a in above.items()}
        return dict(d=d, s=3, est={T: {} for T in [10, 30] + list(above)},
                    dep=dict(ratios=ratios))
    curves = [curve(64, {300: True, 1000: True, 3000: False}),
              curve(80, {300: False, 1000: True, 3000: False}),
              curve(128, {300: False, 1000: True})]
    edges = {e["T"]: e for e in compare._width_edges(curves, fit_below=100)}
    assert edges[10]["edge"] is None and edges[10]["states"] == ["fit range"] * 3
    assert edges[300]["edge"] == (64, 80) and edges[300]["states"][:2] == ["above it",
                                                                            "consistent with it"]
    assert edges[1000]["edge"] == (128, None) and edges[3000]["edge"] == (None, 64)
    assert edges[3000]["states"][2] == "not run" and edges[10]["ln_T"] is None
    assert edges[300]["ln_T"] == 80 and edges[3000]["ln_T"] == round(80 * np.log(3000) / np.log(300))
    assert edges[300]["d_p"] == theory.construction_width(300, 3) == 274
    odd = [curve(64, {300: False, 1000: True}), curve(80, {300: True, 1000: False}),
           dict(curve(96, {}), est={10: {}, 30: {}, 300: {}}, dep=dict(ratios={}))]
    edges = {e["T"]: e for e in compare._width_edges(odd, fit_below=100)}
    assert edges[300]["edge"] == (None, 64)          # a wider width above it does not bound it
    assert edges[300]["states"][2] == "no small-T law" and edges[1000]["edge"] == (64, 80)
    late = [curve(64, {300: True, 1000: False})]     # the first judged T keeps no width
    edges = compare._width_edges(late, fit_below=100)
    assert [e["ln_T"] for e in edges] == [None, None, None, 64]

    base = seed_rows(4)                             # paired: 80 loses ground, 96 keeps its offset

    def paired(d, k100, k3000):
        rows = {T: [dict(r, T=T, m=k * r["m"]) for r in base] for T, k in ((100, k100),
                                                                           (3000, k3000))}
        return dict(d=d, s=3, est={T: stats.success_estimates(r) for T, r in rows.items()},
                    runs=rows, dep=dict(ratios={3000: (0.9, 0.7, 1.1)}))
    curves = [paired(80, 1.5, 3.0), paired(96, 1.5, 1.5), paired(128, 1.0, 1.0)]
    e = compare._width_edges(curves, fit_below=100)[-1]
    assert e["states"] == ["consistent with it; loses ground to d = 128", "consistent with it",
                           "consistent with it"]
    assert e["edge"] == (None, 80) and e["paired"] == (80, 96)

    class Axes:                                      # edge_panel without matplotlib: its calls
        def __init__(self):
            self.lines = []

        def plot(self, x, y, *a, **k):
            self.lines.append((list(x), list(y), k.get("label")))

        def __getattr__(self, name):              # set, legend, title.set_fontsize, ...
            return Axes.Any()

        class Any:
            def __call__(self, *a, **k):
                return None

            def __getattr__(self, name):
                return self
    ax = Axes()
    compare._edge_panel(ax, late, edges)
    scaled = [ln for ln in ax.lines if ln[2] and "scaled like ln T (from T = 1000)" in ln[2]]
    assert len(scaled) == 1 and scaled[0][1][0] == pytest.approx(64)   # starts at T = 1000's 64
    assert [ln[1] for ln in ax.lines if ln[0] == [1000] and not ln[2]] == [[64]]   # filled marker


def test_headline_refuses_a_folder_at_another_width_in_one_line(smoke_ref, tmp_path, capsys):
    out = tmp_path / "headline.md"                            # the smoke sweep runs at d = 64
    (tmp_path / "R.md").write_text(compare.BEGIN + "\n" + compare.END + "\n")
    code, _, err = run_cli(capsys, "sweep", "headline", "--d64", str(smoke_ref), "--d128",
                           str(smoke_ref), "--out", str(out), "--readme", str(tmp_path / "R.md"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and not out.exists()
    assert f"{smoke_ref} holds runs at d = 64, not 128" in err and "--d128" in err
    narrow = tmp_path / "d-32"
    assert smoke_sweep(narrow, "--d", "32", "--seeds", "1", "--Ts", "8") == 0
    code, _, err = run_cli(capsys, "sweep", "headline", "--d64", str(narrow), "--out", str(out),
                           "--readme", str(tmp_path / "R.md"))
    assert code == 2 and f"{narrow} holds runs at d = 32, not 64" in err and "--d64" in err


def test_headline_reads_its_readme_as_pages_do(smoke_ref, wide_ref, tmp_path, capsys):
    """A binary --readme, a missing one, one without the headline block, one whose headline
    markers do not pair up (a broken, missing or crossed end marker) or are near misses, or a
    link to a page outside the repository, is one line, and neither the README nor --out is
    written; a link inside it updates the page it links to, whose CRLF line ends are kept."""
    out, readme, wide = tmp_path / "headline.md", tmp_path / "README.md", wide_ref  # d = 128
    args = ["headline", "--d64", str(smoke_ref), "--d128", str(wide), "--out", str(out),
            "--readme", str(readme)]
    for text, msg in [(b"\xff\xfe\x00binary", "not a text file"),
                      (b"\x89PNG\r\n\x1a\n", "not UTF-8 text"),
                      ((compare.BEGIN + "\nold\n<!-- end results/headline.m -->\n").encode(),
                       "without its begin marker"),
                      ((compare.BEGIN + "\nold\n").encode(), "has no end marker"),
                      ((compare.END + "\nold\n" + compare.BEGIN + "\n").encode(),
                       "without its begin marker"),
                      (b"# notes\n", "has no lines"), (b"", "has no lines"),     # no block
                      (("<!-- BEGIN results/headline.md -->\nold\n<!-- END results/headline.md"
                        " -->\n").encode(), "looks like a marker"),
                      (("  " + compare.BEGIN + "\nold\n" + compare.END + "\n").encode(),
                       "looks like a marker")]:
        readme.write_bytes(text)
        code, _, err = run_cli(capsys, "sweep", *args)
        one_line_refusal(code, err, msg, "README.md")
        assert readme.read_bytes() == text and not out.exists()
    code, _, err = run_cli(capsys, "sweep", *args[:-1], str(tmp_path / "missing.md"))
    one_line_refusal(code, err, "missing.md: cannot read it")
    readme.write_text(compare.BEGIN + "\nold\n" + compare.END + "\n")
    os.symlink(readme, tmp_path / "elsewhere.md")
    code, _, err = run_cli(capsys, "sweep", *args[:-1], str(tmp_path / "elsewhere.md"))
    one_line_refusal(code, err, "elsewhere.md is a symbolic link to", "outside the repository")
    crlf = (compare.BEGIN + "\r\nOLD TABLE\r\n" + compare.END + "\r\n").encode()
    real = tmp_path / "real.md"
    real.write_bytes(crlf)
    os.symlink(real, tmp_path / "link.md")
    cwd = os.getcwd()
    os.chdir(tmp_path)                          # the repository: a link inside it is followed
    try:                                        # (the link's page updated, CRLF kept)
        assert run_cli(capsys, "sweep", *args[:-1], "link.md")[0] == 0
    finally:
        os.chdir(cwd)
    assert os.path.islink(tmp_path / "link.md") and b"OLD TABLE" not in real.read_bytes()
    assert real.read_bytes().count(b"\r\n") == real.read_bytes().count(b"\n") > 3   # CRLF kept


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    **{f"compare.{c}_command": Walk(lambda f: dict(a=None, fail=None), run=False,
                                    legal=dict(a={"*": COMMAND}, fail={"*": COMMAND}))
       for c in ("compare", "width", "headline")},
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over compare.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((compare,), WALK)
