"""harness.py (studies/lib): what the study commands share beyond cli.py's promises: the pool of
worker processes every sweep runs on, the checks at the door of every public function, the one
claim before a command writes, and the pages that copy tables.

  - worker_pool: fresh interpreters that start with Ctrl-C held, then ignore it (the parent
    handles it: saves, reports, stops them), and exit within a second of their parent's death;
  - check_argv, check_runs, check_path, check_callable, need: what a public function takes,
    refused in one line naming the argument (ValueError or TypeError);
  - claim_outputs: every output of a command claimed (free or its own kind, neither an input
    nor another output) before any is written, each then written whole under a temporary name;
  - a page never retypes a table: it copies the file a command wrote between the lines
    "<!-- begin PATH -->" and "<!-- end PATH -->" (PATH from the repository's root), and
    `python -m studies.sweep pages` (pages_command) copies every such file again.
"""
import os
import re
import signal
import unicodedata

from studies.lib import cli
from studies.lib.cli import read_text_file, write_text

# ---------------------------------------------------------------- the worker pool ---------------



def _worker_start(parent=None):
    """A worker process's start-up (ProcessPoolExecutor's initializer): ignore Ctrl-C, which a
    terminal sends to the whole process group while the parent handles it (saves, reports, stops
    its workers), and, given the parent's pid, exit as soon as that parent is gone (killed, even
    by SIGKILL or SIGTERM, which no handler of the parent may see) instead of training on for
    nobody. A worker of worker_pool starts with Ctrl-C blocked, so one pressed while it imports
    numpy is dropped here, never a traceback."""
    import signal
    import threading
    import time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})   # a pending one: dropped
    if parent is not None:
        def watch():
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)
        threading.Thread(target=watch, daemon=True).start()


class _SigintHeld:
    """Ctrl-C held back (blocked, not lost) in this thread while a worker is started: the new
    process inherits the block and starts with Ctrl-C held until worker_start ignores it; in this
    process a press in between is delivered when the block ends (CPython's resource tracker
    starts its process the same way)."""

    def __enter__(self):
        self.old = None
        if hasattr(signal, "pthread_sigmask"):
            self.old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def __exit__(self, *exc):
        if self.old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


MAX_WORKERS = 512      # worker processes in one pool at most: each is an interpreter


def worker_pool(workers):
    """The one pool of worker processes of every command (sweeps, steps.py, the bench): `workers`
    fresh interpreters (spawn: no copy of the parent's state), one BLAS thread each, that start
    with Ctrl-C held (_SigintHeld) and then ignore it (worker_start), and exit within a second of their
    parent's death, however it died (SIGKILL, SIGTERM, a crash). pool.stop() terminates the
    workers still running and returns at once (Ctrl-C, SIGTERM or a failed run: nothing is left
    running for nobody)."""
    if not (isinstance(workers, int) and not isinstance(workers, bool) and
            1 <= workers <= MAX_WORKERS):
        raise ValueError(f"workers must be an integer in [1, {MAX_WORKERS}], got {shown(workers)}")
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    cli.set_blas_threads()       # one BLAS thread per worker (unless the environment says): the
                                 # pool is the parallelism

    class WorkerPool(ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):      # workers start here, on demand
            with _SigintHeld():
                return super().submit(fn, *args, **kwargs)

        def stop(self):
            manager = getattr(self, "_executor_manager_thread", None)
            for proc in list((getattr(self, "_processes", None) or {}).values()):
                proc.terminate()
            self.shutdown(wait=False, cancel_futures=True)
            if manager is not None:    # it sees the terminated workers at once; left running, it
                manager.join(timeout=10)   # raced the pool's exit hook, which then printed
                                           # "Exception ignored ... Bad file descriptor"

    return WorkerPool(workers, mp_context=mp.get_context("spawn"), initializer=_worker_start,
                      initargs=(os.getpid(),))


# ---------------------------------------------------------------- what a public function takes --
# The checks the studies' public functions make at their door, one message each: a ValueError or
# TypeError naming the argument (the walker of studies/test_studies.py holds every one to it).

def check_argv(argv):
    """A command's words: a list of strings, or None for the command line (sys.argv[1:]); a
    string would be read letter by letter. -> argv (a list, or None)."""
    if argv is not None and not (isinstance(argv, (list, tuple)) and
                                 all(isinstance(w, str) for w in argv)):
        raise TypeError(f"argv must be a list of strings (the command's words) or None, got "
                        f"{shown(argv)}")
    return None if argv is None else list(argv)


def check_runs(runs, keys=()):
    """A stack of runs a worker trains: a non-empty list of run options (dicts; train.py checks
    their values), each holding `keys`. -> runs."""
    if not (isinstance(keys, (tuple, list)) and all(isinstance(k, str) for k in keys)):
        raise TypeError(f"keys must be a tuple of option names, got {shown(keys)}")
    if not (isinstance(runs, list) and runs and all(isinstance(o, dict) for o in runs)):
        raise TypeError(f"runs must be a non-empty list of run options (dicts), got {shown(runs)}")
    missing = [k for k in keys for o in runs if k not in o]
    if missing:
        raise ValueError(f"runs: a run has no {missing[0]!r}")
    return runs


def shown(v, most=60):
    """What a caller gave, on one line and at most `most` characters (an array's repr is not)."""
    if not (isinstance(most, int) and not isinstance(most, bool) and 1 <= most <= 10 ** 6):
        raise ValueError(f"most must be an integer in [1, 10**6], got {most!r:.40}")
    return " ".join(repr(v).split())[:most]


def check_path(name, v, what="a path", folder=False):
    """v a non-empty path (str or os.PathLike, not bytes), else TypeError naming `name`; with
    `folder`, an existing folder, else ValueError. -> the path as a str."""
    if not isinstance(v, (str, os.PathLike)) or isinstance(v, bytes) or not os.fspath(v):
        raise TypeError(f"{name} must be {what} (a non-empty str), got {shown(v)}")
    if not isinstance(folder, bool):
        raise TypeError(f"folder must be True or False, got {shown(folder)}")
    if folder and not os.path.isdir(v):
        raise ValueError(f"{name} {os.fspath(v)} is not a folder (no such folder from here)")
    return os.fspath(v)


def need(ok, name, v, what, error=TypeError):
    """Unless ok: error (TypeError, or ValueError for a value of the right type) "{name} must be
    {what}, got {v}", one line. The studies' one message for an argument a check refuses."""
    if not ok:
        raise error(f"{name} must be {what}, got {shown(v)}")
    return v


def check_callable(name, v):
    if not callable(v):
        raise TypeError(f"{name} must be a function, got {shown(v)}")
    return v


# ---------------------------------------------------------------- the outputs of a command ------

def check_distinct(folders, what="folders"):
    """folders, when no two of them are one folder (by inode or real path, whatever the
    spelling: x, ./x/, a link to x): a command given one folder twice compares it with itself.
    ValueError, one line naming both, otherwise."""
    if not (isinstance(folders, (list, tuple)) and all(isinstance(f, (str, os.PathLike))
                                                       for f in folders)):
        raise TypeError(f"{what} must be a list of folders, got {shown(folders)}")
    for i, f in enumerate(folders):
        for g in folders[:i]:
            if os.path.exists(f) and os.path.exists(g) and cli.same_file(f, g):
                raise ValueError(f"{g} and {f} are one folder, given twice; give each once")
    return folders


STUDY_FILES = ("sweep.json", "steps.json", "plan.json")   # what makes a folder a study's
FOLDERS_OWN = re.compile(r"(table\.md|critical\.json|limits\.json|arithmetic\.json|curves\.json|"
                         r"(mstar|mechanism|trajectories|steps)\.png|(sweep|steps|plan)\.json|"
                         r"(runs|steps|trajectories|ball-of-runs|arithmetic-of-runs|pairs)"
                         r"[\w.-]*\.csv)")   # the names a study folder's own commands write


def claim_outputs(claims, inputs=(), folders=(), own=()):
    """The one claim a study command makes before it writes anything: no output (each claim is
    cli.claim_outputs's (path, kind, what), None where not asked for) is one of the files the
    command reads (`inputs`: a CSV of runs written over by its own report would be lost), no two
    outputs are one file, and each is free or already this command's kind of output
    (cli.claim_outputs); nor inside one of the `folders` the command reads (their files are their
    own commands' outputs: a folder's table.md is its sweep's); nor, in any study's folder (one
    holding a STUDY_FILES) but the command's `own`, a name that folder's own commands write
    (FOLDERS_OWN: its table.md is its report). ValueError, one line naming the output. Every output is then written whole to a temporary name and renamed (cli.write_text),
    a full disk naming the file."""
    if not (isinstance(claims, (list, tuple)) and all(
            isinstance(c, (list, tuple)) and len(c) in (3, 4) for c in claims)):
        raise TypeError(f"claims must be a list of (path, kind, what[, ours]), got "
                        f"{shown(claims)}")
    for name, v in (("inputs", inputs), ("folders", folders), ("own", own)):
        if not (isinstance(v, (list, tuple)) and all(isinstance(f, (str, os.PathLike)) for f in v)):
            raise TypeError(f"{name} must be a list of the {'files' if name == 'inputs' else name}"
                            f" the command reads, got {shown(v)}")
    check_distinct(folders)                            # the folders a command reads: each once
    for path, _, what, *_ in claims:
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
            continue                                   # cli.claim_outputs names it
        for f in inputs:
            if os.path.lexists(f) and cli.same_file(path, f):
                raise ValueError(f"{what} {path} is {f}, a file this command reads; give the "
                                 f"output a path of its own")
        where = os.path.dirname(os.path.abspath(path))
        for f in folders:
            if os.path.isdir(f) and cli.same_file(where, f):
                raise ValueError(f"{what} {path} is inside {f}, a folder this command reads "
                                 f"(its files are its own commands'); write it elsewhere")
        study = next((n for n in STUDY_FILES if os.path.lexists(os.path.join(where, n))), None)
        if (study and FOLDERS_OWN.fullmatch(os.path.basename(path))
                and not any(os.path.isdir(f) and cli.same_file(where, f) for f in own)):
            raise ValueError(f"{what} {path}: {os.path.basename(path)} in {where} is that "
                             f"folder's own file (it holds {study}); write it elsewhere")
    cli.claim_outputs(claims)


# ---------------------------------------------------------------- pages that copy tables -------



MARKER = re.compile(r"<!-- (begin|end) (\S+) -->")      # a marker line, whole


NEAR_MARKER = re.compile(r"\s*<\s*!\s*(?:-\s*)+(begin|end)\b", re.I)  # one, once folded


def _looks_like_marker(line):
    """Whether a line reads as a marker to a person: after Unicode normalisation (NFKC: a
    full-width '＜' is '<'), with invisible format characters dropped (a zero-width space), every
    dash a hyphen and any spacing or dashes after '<!' allowed ('<! --', '<!—'), it starts with '<!-- begin' or
    '<!-- end' in any case. An invisible character is read as nothing and as a space."""
    if line.isascii():         # NFKC, the dashes and the format characters leave it as it is
        return bool(NEAR_MARKER.match(line))
    line = "".join("-" if unicodedata.category(c) == "Pd" else c
                   for c in unicodedata.normalize("NFKC", line))
    return any(NEAR_MARKER.match("".join(gap if unicodedata.category(c) == "Cf" else c
                                         for c in line)) for gap in ("", " "))


def _page_lines(text):
    """[(line, its end)] of a page: the end as written ('\\r\\n', '\\n', '\\r', or '' for a last
    line without one), so that a page written back keeps its line ends."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"([^\r\n]*)(\r\n|\n|\r|\Z)", text)
            if m.group(0)]


def _check_text(text):
    if not isinstance(text, str):
        raise TypeError(f"text must be a page's text (a str), got {shown(text)}")


def paste_tables(text, files):
    """text with the block of each marked PATH replaced by files[PATH] (blocks of other paths, and
    a begin marker without its end, are left as they are). The copied lines take the line end of
    their begin marker's line: a CRLF page stays CRLF."""
    _check_text(text)
    if not (isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in files.items())):
        raise TypeError(f"files must be a dict {{PATH: text}}, got {shown(files)}")
    out, path, held = [], None, []
    for line, end in _page_lines(text):
        m = MARKER.fullmatch(line)
        if path is None:
            out.append(line + end)
            if m and m.group(1) == "begin" and m.group(2) in files and end:
                path, eol, held = m.group(2), end, []
        elif m and m.group(1) == "end" and m.group(2) == path:
            body = files[path].replace("\r\n", "\n").replace("\r", "\n")
            body += "" if body.endswith("\n") or not body else "\n"   # the end marker: own line
            out.append(body.replace("\n", eol) + line + end)
            path, held = None, []                            # the old block: replaced
        else:
            held.append(line + end)
    return "".join(out + held)


def marked_files(text):
    """The PATHs of a page's marked blocks (a begin marker and, later, its end marker), in order."""
    _check_text(text)
    paths, open_paths = [], []
    for line, _ in _page_lines(text):
        m = MARKER.fullmatch(line)
        if m and m.group(1) == "begin":
            open_paths.append(m.group(2))
        elif m and m.group(2) in open_paths:
            paths.append(m.group(2))
            open_paths = open_paths[:open_paths.index(m.group(2))]
    return paths


def check_markers(text, page):
    """ValueError, one line naming the page and line, unless its marker lines pair up: each
    `<!-- begin PATH -->` line is followed by its `<!-- end PATH -->` line before any other
    marker line (a missing, misspelt or crossed end marker would leave a block never copied),
    and every line that looks like a marker (starts with `<!-- begin` or `<!-- end`, in any
    case or spacing) is exactly one: a near miss (a trailing space, indented, upper case, a path
    holding a space) would otherwise be ignored in silence."""
    _check_text(text)
    block = None                                  # (line, PATH) of the open block
    for n, (line, _) in enumerate(_page_lines(text), start=1):
        m = MARKER.fullmatch(line)
        if not m:
            if _looks_like_marker(line):
                raise ValueError(f"{page} line {n}: {line!r} looks like a marker but is not "
                                 f"exactly one ('<!-- begin PATH -->' or '<!-- end PATH -->' "
                                 f"alone on its line, lower case, PATH without spaces)")
            continue
        kind, path = m.groups()
        if kind == "begin" and block:
            raise ValueError(f"{page} line {n}: a begin marker for {path} inside the block of "
                             f"{block[1]} (line {block[0]}), whose end marker is missing")
        if kind == "end" and (not block or block[1] != path):
            raise ValueError(f"{page} line {n}: an end marker for {path} without its begin "
                             f"marker" + (f" (the open block is {block[1]}, line {block[0]})"
                                          if block else ""))
        block = (n, path) if kind == "begin" else None
    if block:
        raise ValueError(f"{page} line {block[0]}: the begin marker for {block[1]} has no end "
                         f"marker '<!-- end {block[1]} -->'")


def page_target(page, root, what="page", write=True):
    """The file a page's new text is written to: the page itself, or, when the page is a
    symbolic link, the file it links to, which must lie inside `root` (the repository): a link
    is followed, never replaced by a regular file; with `write`, one that can be written now (a
    read-only folder is said before anything is computed). ValueError, one line, otherwise."""
    check_path("page", page, "a page's path")
    check_path("root", root, "the repository's folder", folder=True)
    if not isinstance(write, bool):
        raise TypeError(f"write must be True or False, got {shown(write)}")
    target, top = page, os.path.realpath(root)
    if os.path.islink(page):
        target = os.path.realpath(page)
        if os.path.commonpath([target, top]) != top:
            raise ValueError(f"{what} {page} is a symbolic link to {target}, outside the "
                             f"repository ({top}); refusing to write through it")
    return cli.check_writable(target, what) if write else target


def _page_files(page, text, root):
    """{PATH: text} of the files a page's blocks copy, each read as a file the project did not
    write (cli.read_text_file: inside `root`, the repository, a regular text file of bounded
    size). A page never copies itself or a file that holds markers (it would nest deeper on
    every copy): ValueError, one line."""
    check_markers(text, page)
    files = {}
    for path in marked_files(text):
        where = f"{page}: the block file"
        body = read_text_file(path, where, root=root)
        if os.path.realpath(os.path.join(root, path)) == os.path.realpath(page):
            raise ValueError(f"{where} {path} is the page itself; a block copies another file")
        if any(MARKER.fullmatch(line) or _looks_like_marker(line) for line in body.split("\n")):
            raise ValueError(f"{where} {path} holds marker lines itself; copying it would nest "
                             f"blocks deeper on every run")
        files[path] = body
    return files


def pages_command(a, fail):
    """`python -m studies.sweep pages PAGE ...`: copy each marked file into its block again;
    --check only says which blocks differ from their files (exit 1 if any). Every page and file
    is read and checked first (page_files; markers that do not pair up or near misses are an
    error, with --check too; a link to a page outside the repository is refused: page_target),
    so a problem is one line and no page is written. A page is written back with its own line
    ends."""
    root, stale, plan = os.getcwd(), [], []
    try:
        for page in a.pages:
            # the folder holding the page must be the repository's (a link inside it to a
            # file elsewhere is page_target's to refuse)
            where = os.path.realpath(os.path.dirname(os.path.abspath(page)))
            if os.path.commonpath([where, os.path.realpath(root)]) != os.path.realpath(root):
                raise ValueError(f"page {page} is outside the repository ({root}); results "
                                 f"pages are written only inside it (run from its root)")
            text = read_text_file(page, "page", keep_line_ends=True)
            files = _page_files(page, text, root)
            plan.append((page, page_target(page, root, write=not a.check), text, files,
                         paste_tables(text, files)))
    except ValueError as e:
        fail(str(e))
    for page, target, text, files, new in plan:
        if new != text:
            stale.append(page)
            if not a.check:
                write_text(target, new, newline="")
        print(f"{page}: {len(files)} tables, {'differs from its files' if new != text else 'as its files'}"
              + ("" if a.check or new == text else "; copied again"))
    return 1 if a.check and stale else 0
