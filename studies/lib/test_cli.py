"""test_cli.py: the tests of studies/lib/cli.py.

Run from the repository's root: python -m pytest -q
"""
import os

import pytest

from studies.lib import cli
from studies.conftest import walk_modules
from test_all import Walk, any_literal


def _walk_tmp(name="x.json"):
    """A fresh file path in a folder of its own, for the walks of functions that write files."""
    import tempfile
    return os.path.join(tempfile.mkdtemp(), name)


ANY_TEXT = "any text: the caller's words"


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "cli.quiet_interrupts": Walk(lambda f: dict(prog="x"), run=False,
                                 legal=dict(prog={"'bogus'": ANY_TEXT})),
    "cli.set_blas_threads": Walk(lambda f: dict(n=None), legal=dict(n={"10**12": "refused"})),
    "cli.threads_from_argv": Walk(lambda f: dict(argv=["--threads", "1"]),
                                  legal=dict(argv={"'--x'": "refused", "[5]": "refused"})),
    "cli.is_integer": Walk(lambda f: dict(v=3), legal=dict(v={"*": "it answers for any value"})),
    "cli.integer": Walk(lambda f: dict(lo=1, hi=None), legal=any_literal("lo", "hi")),
    "cli.number": Walk(lambda f: dict(lo=0, strict=False, hi=None, hi_strict=False),
                       legal=any_literal("lo", "strict", "hi", "hi_strict")),
    "cli.choice": Walk(lambda f: dict()),
    "cli.int_list": Walk(lambda f: dict(text="100,300"), names=dict(text="integers"),
                         legal=dict(text={"'bogus'": "refused"})),
    "cli.OneLineParser": Walk(lambda f: dict(prog="x"),
                              legal=dict(prog={"*": "argparse's own argument"})),
    "cli.OneLineParser.error": Walk(lambda f: dict(self=cli.OneLineParser(prog="x"),
                                                   message="m"), run=False,
                                    legal=dict(message={"*": "it exits, by design"})),
    "cli.explicit_options": Walk(lambda f: dict(ap=cli.OneLineParser(prog="x"), argv=[]),
                                 legal=dict(argv={"'--x'": "refused", "[5]": "refused"})),
    "cli.sigterm_raises": Walk(lambda f: dict()),
    "cli.one_line_errors": Walk(lambda f: dict(prog="x", main=lambda argv: 0, argv=[]),
                                legal=dict(prog={"'bogus'": ANY_TEXT},
                                           argv={"'--x'": "refused", "[5]": "refused",
                                                 "None": "the process's own arguments"})),
    "cli.replace_atomically": Walk(lambda f: dict(path=_walk_tmp(), write=lambda f: f.write(
        b"")), legal=dict(path={"'bogus'": "a new file name"})),
    "cli.write_json": Walk(lambda f: dict(path=_walk_tmp(), obj={"a": 1}), legal=dict(
        path={"'bogus'": "a new file name"}, obj={"None": "JSON null", "items": "a JSON list",
                                                  "missing key": "any JSON object"})),
    "cli.write_text": Walk(lambda f: dict(path=_walk_tmp(), text="t", newline=None),
                           legal=dict(path={"'bogus'": "a new file name"},
                                      text={"'bogus'": ANY_TEXT})),
    "cli.read_text_file": Walk(lambda f: dict(path=__file__, what="w", root=None,
                                              most=1 << 24, keep_line_ends=False),
                               names=dict(path=r"\bpath\b|bogus"),   # or names the file
                               legal=dict(what={"'bogus'": ANY_TEXT},
                                          most={"10**12": "a cap", "10**400": "refused"})),
    "cli.open_regular": Walk(lambda f: dict(path=__file__, what="w", shown=None),
                             names=dict(path=r"\bpath\b|bogus"),   # or names the file
                             legal=dict(what={"'bogus'": ANY_TEXT},
                                        shown={"'bogus'": "how the path is shown"})),
    "cli.check_writable": Walk(lambda f: dict(path=_walk_tmp(), what="w"),
                               legal=dict(path={"'bogus'": "a new file name"},
                                          what={"'bogus'": ANY_TEXT})),
    "cli.same_file": Walk(lambda f: dict(a="x", b="y"),
                          legal=dict(a={"'bogus'": "a path"}, b={"'bogus'": "a path"})),
    "cli.claim_output": Walk(lambda f: dict(path=_walk_tmp(), kind="summary", what=None,
                                            ours=None),
                             legal=dict(path={"'bogus'": "a new file name"})),
    "cli.claim_outputs": Walk(lambda f: dict(claims=[(_walk_tmp(), "summary", "--json")])),
    "cli.pyplot_or_hint": Walk(lambda f: dict(then="x"), legal=dict(then={"'bogus'": ANY_TEXT})),
    "cli.save_figure": Walk(lambda f: dict(plt=None, fig=None, path="x.png"), run=False,
                            legal=dict(path={"*": "plt, first, is refused: no matplotlib here"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument(walk_tmp):
    """The walker of test_all.py over cli.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((cli,), WALK)


# ---------------- a standard output that closes: as a Unix tool ends ------------------------------

def _printing(n):
    def main(argv):
        for i in range(n):
            print(f"line {i} of a long table")
        return 0
    return main


def test_a_closed_pipe_on_standard_output_ends_a_command_quietly(monkeypatch, capsys):
    """`python -m studies.sweep limit | head -c 1`: the pipe's reader is gone; the command ends
    quietly with exit status 141 (128 + SIGPIPE), as a Unix tool does: nothing on stderr. A
    command that printed less than a buffer meets it when one_line_errors flushes, after main."""
    import io
    for n in (100000, 3):
        r, w = os.pipe()
        os.close(r)                                          # the reader has gone
        out = io.TextIOWrapper(io.FileIO(w, "w"), line_buffering=False)
        monkeypatch.setattr("sys.stdout", out)
        code = cli.one_line_errors("studies.x", _printing(n), [])
        monkeypatch.undo()
        assert code == 141 and capsys.readouterr().err == "", n
        out.flush()                                          # stdout now goes nowhere, quietly
        out.close()


def test_a_full_disk_on_standard_output_is_one_line(monkeypatch, capsys):
    """`... > /dev/full`: one line naming standard output and the error, exit status 1, for text
    met inside main and for text still buffered when it returns; argparse's --help too."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    for main in (_printing(100000), _printing(3),
                 lambda argv: cli.OneLineParser(prog="x").parse_args(["--help"])):
        out = open("/dev/full", "w")
        monkeypatch.setattr("sys.stdout", out)
        code = cli.one_line_errors("studies.x", main, [])
        monkeypatch.undo()
        err = capsys.readouterr().err
        assert code == 1 and err == ("studies.x: cannot write its standard output: No space "
                                     "left on device\n"), err
        out.close()                                          # flushed to /dev/null: no error
    assert cli.one_line_errors("studies.x", _printing(3), []) == 0     # capsys: a stdout that works
    assert capsys.readouterr().out.count("\n") == 3
