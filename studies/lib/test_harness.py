"""test_harness.py: the tests of studies/lib/harness.py.

Run from the repository's root: python -m pytest -q
"""
import glob
import os
import shutil
import signal
import time


from studies import classball, kernels, mechanism, steps, sweep, symmetries
from studies.lib import harness
from studies.conftest import (ARGV, COMMAND, STEPS_TINY, copy_folder, one_line_refusal, snapshot,
                              synthetic_study, walk_path, run_cli, run_cli_main, walk_modules)
from test_all import HERE, LITERAL, Walk


def test_results_pages_show_their_tables_as_the_files_the_commands_wrote(tmp_path, capsys):
    """Every table a committed page copies between its markers is, byte for byte, the file a
    command wrote (a retyped or stale table fails here); `python -m studies.sweep pages` copies them
    again."""
    pages = ["README.md"] + sorted(os.path.relpath(p, HERE) for p in
                                   glob.glob(os.path.join(HERE, "results", "**", "README.md"),
                                             recursive=True))
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        assert run_cli(capsys, "sweep", "pages", "--check", *pages)[0] == 0
    finally:
        os.chdir(cwd)
    assert sum(len(harness.marked_files(open(os.path.join(HERE, p)).read())) for p in pages) >= 8
    os.chdir(tmp_path)
    try:
        (tmp_path / "t.md").write_text("| a |\n")
        page = tmp_path / "page.md"
        page.write_text("x\n<!-- begin t.md -->\n| retyped |\n<!-- end t.md -->\ny\n")
        code, out, _ = run_cli(capsys, "sweep", "pages", "--check", "page.md")
        assert code == 1 and "differs from its files" in out
        assert run_cli(capsys, "sweep", "pages", "page.md")[0] == 0
        assert page.read_text() == "x\n<!-- begin t.md -->\n| a |\n<!-- end t.md -->\ny\n"
    finally:
        os.chdir(cwd)


def test_pages_read_only_text_files_of_the_repository(tmp_path, capsys):
    """`studies.sweep pages` copies only regular text files inside the repository (the folder it runs
    in) of bounded size; anything else (an absolute path, `..`, a symlink out, a folder, a FIFO,
    a huge or binary file, a binary page, the page itself, a file holding markers, markers that
    do not pair up, with --check too) is one line naming it, and no page is written."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "t.md").write_text("| a |\n")
    (tmp_path / "outside.md").write_text("| secret |\n")
    os.symlink(tmp_path / "outside.md", repo / "link.md")
    (repo / "adir").mkdir()
    os.mkfifo(repo / "fifo.md")
    (repo / "big.md").write_bytes(b"x" * ((16 << 20) + 1))         # the bound: 16 MiB
    (repo / "bin.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (repo / "marked.md").write_text("<!-- begin t.md -->\n| a |\n<!-- end t.md -->\n")
    block = lambda path: f"<!-- begin {path} -->\nold\n<!-- end {path} -->\n"
    variants = [(block("/etc/hostname"), "an absolute path"),
                (block("../outside.md"), "outside the repository"),
                (block("link.md"), "outside the repository"),
                (block("adir"), "not a regular file"), (block("fifo.md"), "not a regular file"),
                (block("big.md"), "larger than"), (block("bin.md"), "not a text file"),
                (block("page.md"), "is the page itself"),
                (block("marked.md"), "holds marker lines itself"),
                ("<!-- begin t.md -->\nold\n", "has no end marker"),
                ("<!-- begin t.md -->\nold\n<!-- end t.m -->\n", "without its begin marker"),
                ("old\n<!-- end t.md -->\n", "without its begin marker"),
                ("<!-- begin t.md -->\n<!-- begin x.md -->\n<!-- end t.md -->\n", "inside the "
                                                                                  "block of")]
    page = repo / "page.md"
    for text, msg in variants:
        page.write_text("x\n" + text + "y\n")
        for check in (["--check"], []):
            code, out, err = _in(repo, capsys, "pages", *check, "page.md")
            one_line_refusal(code, err, msg, "page.md")
            assert page.read_text() == "x\n" + text + "y\n" and out == "", (text, err)
    page.write_bytes(b"\xff\xfe<!-- begin t.md -->\n")                       # a binary page
    code, _, err = _in(repo, capsys, "pages", "page.md")
    one_line_refusal(code, err, "page page.md is not UTF-8 text")
    good = repo / "good.md"
    good.write_text("x\n" + block("t.md"))
    page.write_text(block("/etc/hostname"))                         # a bad page after a good one:
    code, _, err = _in(repo, capsys, "pages", "good.md", "page.md")  # nothing written at all
    one_line_refusal(code, err, "/etc/hostname")
    assert "old" in good.read_text()
    assert _in(repo, capsys, "pages", "good.md")[0] == 0 and good.read_text() == (
        "x\n<!-- begin t.md -->\n| a |\n<!-- end t.md -->\n")


def test_pages_outside_the_repository_are_not_written(tmp_path, capsys):
    page = tmp_path / "p.md"
    page.write_text("<!-- begin results/headline.md -->\nold\n<!-- end results/headline.md -->\n")
    before = page.read_text()
    code, _, err = run_cli(capsys, "sweep", "pages", str(page))
    assert code == 2 and err.count("\n") == 1 and "outside the repository" in err
    assert page.read_text() == before


def _in(folder_path, capsys, *argv):
    cwd = os.getcwd()
    os.chdir(folder_path)
    try:
        return run_cli(capsys, "sweep", *argv)
    finally:
        os.chdir(cwd)


def test_pages_refuse_near_miss_markers_follow_links_inside_and_keep_line_ends(tmp_path, capsys):
    """A line that looks like a marker but is not exactly one (a trailing space, indented, without
    spaces, upper case, a path holding a space) is one line naming the page and line, with
    --check too, and no byte of the page changes; a page that is a symbolic link updates the page
    it links to inside the repository (the link stays a link) and is refused when that page lies
    outside; a CRLF page stays CRLF."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "t.md").write_text("| a |\n")
    (repo / "my t.md").write_text("| b |\n")
    page = repo / "page.md"
    for begin, end in [("<!-- begin t.md --> ", "<!-- end t.md --> "),
                       ("  <!-- begin t.md -->", "  <!-- end t.md -->"),
                       ("<!--begin t.md-->", "<!--end t.md-->"),
                       ("<!-- BEGIN t.md -->", "<!-- END t.md -->"),
                       ("<!-- Begin t.md -->", "<!-- end t.md -->"),
                       ("<!-- begin my t.md -->", "<!-- end my t.md -->"),
                       ("<!-- begin t.md -->", "<!-- end t.md --> ")]:
        text = f"x\n{begin}\nold\n{end}\ny\n".encode()
        page.write_bytes(text)
        for check in (["--check"], []):
            code, out, err = _in(repo, capsys, "pages", *check, "page.md")
            one_line_refusal(code, err, "page.md line ", "looks like a marker but is not exactly one")
            assert page.read_bytes() == text and out == "", (begin, err)
    block = "<!-- begin t.md -->\nold\n<!-- end t.md -->\n"
    (repo / "near.md").write_text("| a |\n<!-- END x.md -->\n")        # a block file too
    page.write_text(block.replace("t.md", "near.md"))
    one_line_refusal(*_in(repo, capsys, "pages", "page.md")[::2], "holds marker lines itself")
    crlf = b"x\r\n" + block.replace("\n", "\r\n").encode() + b"y\r\n"
    page.write_bytes(crlf)
    assert _in(repo, capsys, "pages", "page.md")[0] == 0
    assert page.read_bytes() == crlf.replace(b"old", b"| a |")
    assert _in(repo, capsys, "pages", "--check", "page.md")[0] == 0
    (repo / "real.md").write_text(block)
    os.symlink("real.md", repo / "link.md")
    assert _in(repo, capsys, "pages", "link.md")[0] == 0
    assert os.path.islink(repo / "link.md") and (repo / "real.md").read_text() == \
        block.replace("old", "| a |")
    (tmp_path / "outside.md").write_text(block)
    os.symlink(tmp_path / "outside.md", repo / "out.md")
    for check in (["--check"], []):
        code, _, err = _in(repo, capsys, "pages", *check, "out.md")
        one_line_refusal(code, err, "out.md is a symbolic link to", "outside the repository")
    assert os.path.islink(repo / "out.md") and (tmp_path / "outside.md").read_text() == block


def test_a_stopped_pool_leaves_no_thread_to_race_the_exit():
    """pool.stop() returns once the pool's manager thread is gone: left running, it raced the
    pool's exit hook, and a Ctrl-C'd sweep printed "Exception ignored ... Bad file descriptor"
    under its one line (4 of 40 trials on a busy machine)."""
    pool = harness.worker_pool(2)
    futures = [pool.submit(time.sleep, 30) for _ in range(2)]
    deadline = time.time() + 60
    while not all(f.running() for f in futures) and time.time() < deadline:
        time.sleep(0.05)
    manager = pool._executor_manager_thread
    pool.stop()
    assert not manager.is_alive()


def test_workers_start_with_ctrl_c_held_and_ignore_it(capfd):
    """Every command's workers come from harness.worker_pool: Ctrl-C reaching a worker while it starts
    (the terminal sends it to the whole process group) is dropped, never a traceback or a dead
    worker; the worker then answers its task."""
    for delay in (0.0, 0.05, 0.3):
        pool = harness.worker_pool(1)
        try:
            fut = pool.submit(os.getpid)
            (pid,) = list(pool._processes)
            time.sleep(delay)
            os.kill(pid, signal.SIGINT)
            assert fut.result(timeout=60) == pid
            assert pool.submit(signal.getsignal, signal.SIGINT).result(timeout=60) == \
                signal.SIG_IGN
        finally:
            pool.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_pages_refuse_markers_that_match_once_unicode_and_spacing_are_folded(tmp_path, capsys):
    """Issue 45: a zero-width space after '<!--', '<! --' or a full-width '＜', on either end of a
    block or on both, is a near miss: one line naming the page and line, with --check too, and no
    byte of the page changes (before, both ends missed and the block was never copied)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "t.md").write_text("| a |\n")
    page = repo / "page.md"
    good = ("<!-- begin t.md -->", "<!-- end t.md -->")
    for near in (lambda m: m.replace("<!--", "<!--\u200b"), lambda m: m.replace("<!--", "<! --"),
                 lambda m: m.replace("<", "\uff1c"), lambda m: m.replace(" t.md", "\u200bt.md"),
                 lambda m: m.replace("--", "\u2014")):
        for begin, end, line in ((near(good[0]), near(good[1]), 2), (near(good[0]), good[1], 2),
                                 (good[0], near(good[1]), 4)):
            text = f"x\n{begin}\nold\n{end}\ny\n".encode()
            page.write_bytes(text)
            for check in (["--check"], []):
                code, out, err = _in(repo, capsys, "pages", *check, "page.md")
                one_line_refusal(code, err, f"page.md line {line}:",
                          "looks like a marker but is not exactly one")
                assert page.read_bytes() == text and out == "", (begin, end, err)


def test_no_command_writes_a_study_folders_own_file(smoke_ref, tmp_path, capsys):
    """harness.claim_outputs: in a folder holding a study (sweep.json, steps.json, plan.json), a
    name its own commands write (table.md, runs.csv, ...) is never another command's output; a
    file of another name there (a comparison beside the runs) still is; --pairs never replaces a
    markdown table."""
    study, arm, sw = tmp_path / "study", tmp_path / "arm", tmp_path / "sweep"
    synthetic_study(str(study))
    copy_folder(study, arm)
    copy_folder(smoke_ref, sw)
    pairs = tmp_path / "pairs.csv"
    shutil.copy("results/mechanism-interventions/full/pairs.csv", pairs)
    md = tmp_path / "cells.md"
    shutil.copy("results/symmetries/cells-full.md", md)
    refused = [(kernels, [str(study), str(arm), "--out", str(sw / "table.md")]),
               (mechanism, ["factors", str(study), "--out", str(arm / "table.md")]),
               (symmetries, ["interaction", str(pairs), str(sw / "table.md")]),
               (symmetries, ["cells", str(pairs), str(study / "runs.csv")]),
               (sweep, ["compare", str(smoke_ref), "--out", str(sw / "table.md")]),
               (mechanism, ["paired", str(study), str(arm), "--out", str(tmp_path / "p.md"),
                            "--pairs", str(md)])]
    for module, argv in refused:
        before = snapshot(tmp_path)
        code, _, err = run_cli_main(capsys, module.main, argv)
        if isinstance(code, str):
            code, err = 1, err + code + "\n"
        assert code not in (0, None) and err.count("\n") == 1, (argv, err)
        assert "own file" in err or "not a paired CSV" in err or "is not" in err, (argv, err)
        assert snapshot(tmp_path) == before, argv
    code, _, err = run_cli_main(capsys, sweep.main, ["compare", str(smoke_ref), "--out",
                                                     str(sw / "compare.md")])
    assert code in (0, None) and (sw / "compare.md").exists(), err


def test_one_folder_given_twice_is_refused_however_it_is_spelled(smoke_ref, steps_ref, tmp_path,
                                                                  capsys):
    """A command that compares folders, given one folder twice (as x, x/ or a link to x),
    compares it with itself: one line naming both, nothing written."""
    link = tmp_path / "link"
    link.symlink_to(smoke_ref)
    study = tmp_path / "study"
    synthetic_study(str(study))
    out = str(tmp_path / "o.md")
    # (sweep compare takes one folder twice: the self-comparison its own tests use as a check)
    cases = [(classball, [str(smoke_ref), str(smoke_ref) + "/", "--out", out]),
             (symmetries, ["same", str(study), str(study) + "/.", out]),
             (symmetries, ["ball", str(smoke_ref), str(link), "--Ts", "8", "--out", out]),
             (kernels, [str(study), str(study) + "/", "--out", out]),
             (steps, ["--report", "--out", str(steps_ref), "--against", str(steps_ref) + "/"]
              + STEPS_TINY)]
    for module, argv in cases:
        code, _, err = run_cli_main(capsys, module.main, argv)
        if isinstance(code, str):
            code, err = 1, err + code + "\n"
        assert code not in (0, None) and err.count("\n") == 1 and "one folder" in err, (argv, err)
        assert not os.path.exists(out), argv


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # harness.py
    "harness.worker_pool": Walk(lambda f: dict(workers=1), run=False),
    "harness.claim_outputs": Walk(lambda f: dict(claims=[(walk_path("c.md"), "table", "--out")],
                                                 inputs=()),
                                  legal=dict(inputs={"list": "a list", "short": "no inputs"})),
    "harness.paste_tables": Walk(lambda f: dict(text="<!-- begin t.md -->\nold\n<!-- end t.md -->\n",
                                                files={"t.md": "| a |\n"}),
                                 legal=dict(text={"'bogus'": "a page without blocks"},
                                            files={"missing key": "no file: its block left"})),
    "harness.marked_files": Walk(lambda f: dict(text="<!-- begin t.md -->\n<!-- end t.md -->\n"),
                                 legal=dict(text={"'bogus'": "a page without blocks"})),
    "harness.check_markers": Walk(lambda f: dict(text="<!-- begin t.md -->\n<!-- end t.md -->\n",
                                                 page="page.md"),
                                  legal=dict(text={"'bogus'": "a page without blocks"},
                                             page={"*": LITERAL})),
    "harness.check_distinct": Walk(lambda f: dict(folders=["results", "studies"], what="w"),
                                   legal=dict(what={"*": LITERAL})),
    "harness.page_target": Walk(lambda f: dict(page="README.md", root=HERE, what="page"),
                                legal=dict(page={"'bogus'": "not a link: the page itself"},
                                           what={"*": LITERAL})),
    "harness.pages_command": Walk(lambda f: dict(a=None, fail=None), run=False,
                                  legal=dict(a={"*": COMMAND}, fail={"*": COMMAND})),
    "harness.check_argv": Walk(lambda f: dict(argv=["a"]), legal=dict(argv=ARGV)),
    "harness.check_runs": Walk(lambda f: dict(runs=[dict(m=1)], keys=("m",)),
                               legal=dict(keys={"list": "a list", "short": "no keys"})),
    "harness.check_path": Walk(lambda f: dict(name="x", v="a", what="a path", folder=False),
                               legal=dict(name={"*": LITERAL}, what={"*": LITERAL},
                                          v={"'bogus'": "a path"}),
                               names=dict(v=r"\bx\b")),
    "harness.check_callable": Walk(lambda f: dict(name="x", v=print),
                                   legal=dict(name={"*": LITERAL}), names=dict(v=r"\bx\b")),
    "harness.need": Walk(lambda f: dict(ok=True, name="x", v=1, what="y", error=TypeError),
                            legal=dict(ok={"*": "any truth value: the caller's test"},
                                       v={"*": "anything is shown"}, name={"*": LITERAL},
                                       what={"*": LITERAL}, error={"*": LITERAL})),
    "harness.shown": Walk(lambda f: dict(v=1, most=60), legal=dict(v={"*": "anything is shown"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over harness.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((harness,), WALK)
