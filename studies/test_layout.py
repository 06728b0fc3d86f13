"""test_layout.py: the house: commands over one library, imports that point down (the library never
imports a command, no command another, the root never the studies), the map in studies/README.md
and the front page against the tree, a test file beside each module, the size limits, names that
mean one thing, one entry prologue, and regenerate.sh writing every table.

Run from the repository's root: python -m pytest -q
"""
import ast
import glob
import os
import re

from test_all import HERE, find_cycles, project_graph, source_tree

STUDIES = os.path.join(HERE, "studies")
# modules that share one test file (a small group with one job), module -> its test file's module
TESTED_WITH = {"row_kinds": "folder", "folder_write": "folder", "provenance": "arithmetic"}


def wing(folder):
    """The modules of studies/ (folder "") or studies/lib/ ("lib"), tests and conftest left out."""
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(STUDIES, folder, "*.py"))
                  if not os.path.basename(p).startswith("test_")
                  and os.path.basename(p) not in ("__init__.py", "conftest.py"))


def test_the_two_wings_point_down_and_never_back():
    """Commands import the library and the root; the library imports the root and itself, never
    a command; no command imports another; nothing of studies/ sits in a circle. Each can fail:
    the scan sees every import (the library does import the root, the commands the library)."""
    graph, unused = project_graph()
    commands = {f"studies.{m}" for m in wing("")}
    library = {f"studies.lib.{m}" for m in wing("lib")}
    assert commands and library and "studies.sweep" in commands and "studies.lib.stats" in library
    assert any(i in library for m in commands for i in graph[m])          # the scan sees them
    assert "train" in graph["studies.lib.training"]
    up = {m: sorted(i for i in graph[m] if i in commands) for m in library}
    assert not any(up.values()), f"library modules importing a command: {up}"
    across = {m: sorted(i for i in graph[m] if i in commands) for m in commands}
    assert not any(across.values()), f"commands importing a command: {across}"
    ours = commands | library
    cycle = find_cycles({m: graph[m] & ours for m in ours})
    assert not cycle, cycle
    assert not {m: u for m, u in unused.items() if u and m in ours}, {
        m: sorted(u) for m, u in unused.items() if u and m in ours}


def _named(text):
    """The modules a map's items name: each line "- `name.py`: its job"."""
    return set(re.findall(r"^- `(\w+)\.py`", text, re.M))


def test_the_map_names_every_module_in_its_wing():
    """studies/README.md lists every command under "The commands" and every library module under
    "The library", each once, and nothing that is not there."""
    text = open(os.path.join(STUDIES, "README.md")).read()
    commands = text[text.index("## The commands"):text.index("## The library")]
    library = text[text.index("## The library"):text.index("## The tests")]
    assert _named(commands) == set(wing("")), _named(commands) ^ set(wing(""))
    assert _named(library) == set(wing("lib")), _named(library) ^ set(wing("lib"))
    for name in wing("") + wing("lib"):
        line = next(ln for ln in text.splitlines() if ln.startswith(f"- `{name}.py`:"))
        assert len(line.split(":", 1)[1].split()) >= 5, line                  # its one job


def test_the_front_page_lists_the_studies_as_the_map_groups_them():
    """README.md's file list names every command and every library module, in its wing."""
    text = open(os.path.join(HERE, "README.md")).read()
    files = text[text.index("## The files"):text.index("## The answer")]
    commands = files[files.index("- The commands"):files.index("- The library")]
    library = files[files.index("- The library"):files.index("- Their tests")]
    named = lambda part: set(re.findall(r"`(\w+)\.py`", part))
    assert named(commands) == set(wing("")), named(commands) ^ set(wing(""))
    assert named(library) == set(wing("lib")), named(library) ^ set(wing("lib"))


def test_every_module_has_its_test_file_beside_it():
    """studies/test_X.py beside each command, studies/lib/test_X.py beside each library module
    (or the test file of its group, TESTED_WITH); no test file without its module."""
    for folder in ("", "lib"):
        for name in wing(folder):
            own = TESTED_WITH.get(name, name)
            assert os.path.exists(os.path.join(STUDIES, folder, f"test_{own}.py")), (folder, name)
    shared = {"commands", "damage", "layout"}
    for path in glob.glob(os.path.join(STUDIES, "**", "test_*.py"), recursive=True):
        folder = "lib" if os.sep + "lib" + os.sep in path else ""
        tested = os.path.basename(path)[5:-3]
        assert tested in wing(folder) or folder == "" and tested in shared, path


def _lines(path):
    return open(path).read().count("\n")


def test_no_module_past_its_size_and_no_function_past_sixty_lines():
    """No module of studies/ over 800 lines, no function over 60, no test file over 1,500."""
    big, long_functions = [], []
    for path in glob.glob(os.path.join(STUDIES, "**", "*.py"), recursive=True):
        test = os.path.basename(path).startswith("test_")
        if _lines(path) > (1500 if test else 800):
            big.append((os.path.relpath(path, HERE), _lines(path)))
        if test:
            continue
        for node in ast.walk(source_tree(path)):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60:
                long_functions.append(f"{os.path.relpath(path, HERE)}:{node.name}")
    assert not big, big
    assert not long_functions, long_functions


def _defined(path):
    tree = source_tree(path)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_no_function_of_the_studies_reuses_a_name_of_train_py():
    """A reader who knows train.py reads the studies right: no module of studies/ defines a
    function or class under a name train.py uses for another (main and parser aside: every
    command has its own). Can fail: train.py's names include train_run and train_stack."""
    ours = {n for n in _defined(os.path.join(HERE, "train.py")) if not n.startswith("_")} - {
        "main", "parser", "OneLineParser"}
    assert {"train_run", "train_stack", "draw_run", "build_model", "seeds_for"} <= ours
    clashes = [f"{os.path.relpath(p, HERE)}:{n}" for p in glob.glob(
        os.path.join(STUDIES, "**", "*.py"), recursive=True)
        if not os.path.basename(p).startswith("test_") for n in _defined(p) & ours]
    assert not clashes, clashes


GUARD = re.compile(r'\nimport sys\nif not __package__ and __import__\("importlib.util"\)\.util\.'
                   r'find_spec\("studies"\) is None:\n    sys\.exit\(f"\{__file__\} is a command of '
                   r"the package studies: run it from the \"\n +\"repository's root as python -m "
                   r'studies\.(\w+)"\)   # \(run as a file\)\n\nfrom studies\.lib import cli   # '
                   r"first: importing it is every command's entry prologue\n")


def test_every_command_starts_with_the_one_prologue():
    """Each command begins with its docstring, the three-line guard for a run as a file, and the
    import of cli (whose import runs the entry prologue, cli._start_command); no other code of
    studies/ installs the start-up's Ctrl-C handler or reads --threads. Can fail: a command's own name is read
    from its guard."""
    for name in wing(""):
        text = open(os.path.join(STUDIES, name + ".py")).read()
        m = GUARD.search(text)
        assert m and m.group(1) == name, name
        assert text[:m.start()].count('"""') == 2, name                    # only the docstring
    for path in glob.glob(os.path.join(STUDIES, "**", "*.py"), recursive=True):
        if os.path.basename(path).startswith("test_") or path.endswith(os.sep + "cli.py"):
            continue
        calls = re.findall(r"\b(quiet_interrupts|threads_from_argv)\(", open(path).read())
        assert not calls, (path, calls)


def test_regenerate_sh_writes_every_table_under_results():
    # a table over several folders that results/regenerate.sh does not write could not be made
    # again from the runs: each is named there (its variables expanded), or listed as left out
    script = open(os.path.join(HERE, "results", "regenerate.sh")).read()
    named = script.replace("$S/", "results/protocols/").replace("$W/", "results/width/") \
        .replace("$F/", "results/families/")
    for path in glob.glob(os.path.join(HERE, "results", "**", "*.md"), recursive=True):
        rel = os.path.relpath(path, HERE).replace(os.sep, "/")
        where = os.path.dirname(path)
        own = os.path.basename(rel) in ("table.md", "against.md") and any(
            os.path.exists(os.path.join(where, f)) for f in ("sweep.json", "steps.json", "plan.json"))
        if os.path.basename(rel) != "README.md" and not own:
            assert rel in named, f"{rel}: not written by results/regenerate.sh"
    assert "results/protocols/mingpt-summed-batch.md (the old minGPT table" in script


def _module_of(file):
    """The module a claim's `file.py` names: a command, a library module or a root file."""
    import importlib
    for where in ("studies.", "studies.lib.", ""):
        name = where + file
        if importlib.util.find_spec(name.split(".")[0]) and os.path.exists(
                os.path.join(HERE, *name.split(".")) + ".py"):
            return importlib.import_module(name)
    raise AssertionError(f"{file}.py: no such module of the project")


def test_every_claim_names_its_command_and_the_functions_that_compute_it():
    """Each verdict bullet of the front page has its row in the table under it (the command, the
    functions), each numbered claim and each study of results/README.md its "Made by ...;
    computed by ..." line; every `file.py:function` named on the two pages exists. Can fail: a
    name that is not there is refused (the scan reads them)."""
    front = open(os.path.join(HERE, "README.md")).read()
    verdict = front[front.index("## Verdict"):front.index("## The demo")]
    bullets = re.findall(r"^- \*\*(.+?)\*\*", verdict, re.M)
    rows = re.findall(r"^\| ([a-z][^|]+?) \| `python", verdict, re.M)
    assert len(bullets) == len(rows) >= 5, (bullets, rows)
    page = open(os.path.join(HERE, "results", "README.md")).read()
    claims = page[page.index("1. **"):page.index("## Runs you can trust")]
    items = re.split(r"\n(?=\d\. \*\*|- \[)", claims)
    on_page = ("#not-run-yet", "#where-each", "#runs-you-can", "#bisection")
    for item in items:
        if not any(k in item.split("\n")[0] for k in on_page):
            assert "*Made by* `python -m studies." in item and "*computed by* `" in item, item[:80]
    named = set(re.findall(r"`(\w+)\.py:(\w+)`", front + page))
    assert len(named) >= 20
    missing = [f"{f}.py:{n}" for f, n in sorted(named) if not hasattr(_module_of(f), n)]
    assert not missing, missing


# the calls that write, create or move a file: (module, function), None for any receiver
_WRITES = {("os", f) for f in ("replace", "rename", "renames", "mkfifo", "mknod", "symlink",
                               "link", "truncate")} | {
    ("shutil", f) for f in ("copy", "copyfile", "copy2", "copytree", "move")} | {
    ("tempfile", f) for f in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile")} | {
    (np, f) for np in ("np", "numpy") for f in ("save", "savez", "savez_compressed", "savetxt")} | {
    ("json", "dump"), (None, "savefig"), (None, "tofile"), (None, "truncate")}
WRITES_OWN = {   # where a file is written other than through cli.replace_atomically, and why
    "cli.replace_atomically": "the one helper: a temporary of its own, renamed over its target",
    "cli._check_writable": "the write's first step tried (a temporary made and removed)",
    "cli._stdout_gone": "standard output pointed at /dev/null",
    "folder_write._open_csv": "a CSV of runs, appended to row by row as runs finish",
    "folder_write._drop_torn_tail": "a torn last row of a CSV of ours cut away",
    "folder_write.RowWriter._record_arithmetic": "the record of each new row's arithmetic, "
                                                 "appended row by row",
    "folder_write._no_follow": "the lock file's opener (never through a link)",
    "folder_write._open_lock": "the folder's lock file",
    "folder_write.lock_folder": "the lock's holder written into it",
}


def _write_call(node):
    """Whether a Call writes, creates or moves a file: a call of _WRITES, open() in a mode that
    writes, os.open with flags that may, Path.write_text or write_bytes (not cli's)."""
    f = node.func
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    if (owner, name) in _WRITES or (None, name) in _WRITES:
        return True
    if name in ("write_text", "write_bytes"):
        return isinstance(f, ast.Attribute) and owner != "cli"
    if name == "open" and owner is None:
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        return mode is not None and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                                        and set(c.value) & set("wax+") for c in ast.walk(mode))
    if name == "open" and owner == "os":         # flags named, or given as getattr(os, "O_...")
        parts = list(ast.walk(node.args[1])) if len(node.args) > 1 else []
        flags = {c.attr for c in parts if isinstance(c, ast.Attribute)} | {
            c.value for c in parts if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        return not parts or bool(flags - {"O_RDONLY", "O_NONBLOCK", "O_NOCTTY"}) or any(
            isinstance(c, ast.Name) and c.id not in ("os", "getattr") for c in parts)
    return False


def _write_sites():
    """(module.function, line) of every call of studies/ (tests aside) that writes a file and is
    not inside the arguments of a call of replace_atomically (its `write`)."""
    sites = []
    for path in glob.glob(os.path.join(STUDIES, "**", "*.py"), recursive=True):
        name = os.path.basename(path)[:-3]
        if name.startswith("test_") or name == "conftest":
            continue

        def visit(node, where, helped):
            for child in ast.iter_child_nodes(node):
                inner = f"{where}.{child.name}" if isinstance(
                    child, (ast.FunctionDef, ast.ClassDef)) else where
                call = isinstance(child, ast.Call)
                here = helped or call and getattr(child.func, "attr", getattr(
                    child.func, "id", None)) == "replace_atomically"
                if call and not here and _write_call(child):
                    sites.append((inner, child.lineno))
                visit(child, inner, here)
        visit(source_tree(path), name, False)
    return sites


def test_every_file_a_command_writes_whole_goes_through_the_one_helper():
    """Every write of studies/ is cli.replace_atomically's (a temporary made new and exclusively
    under a random name, renamed over its target: never a name a user chose, never through a
    link), called with a function that fills the file it is given, or one of WRITES_OWN, each
    with its reason. Can fail: the scan sees the helper's own calls, and np.savez in its lambda
    is let through only there."""
    sites = _write_sites()
    assert {"cli.replace_atomically", "folder_write._open_csv"} <= {s for s, _ in sites}
    stray = [s for s in sites if s[0] not in WRITES_OWN]
    assert not stray, f"files written outside cli.replace_atomically: {stray}"
    assert set(WRITES_OWN) <= {s for s, _ in sites}, set(WRITES_OWN) - {s for s, _ in sites}
