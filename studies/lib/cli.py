"""cli.py (studies/lib): what the project's commands share: BLAS threads, option values, one-line
errors, files.

train.py and the study commands (python -m studies.sweep, ...) promise the same things to the
person typing them, and this file is where those promises are kept once:
  - numpy's BLAS runs on one thread unless asked otherwise (set before numpy is first imported);
  - a bad option value is one line that names the value and what is allowed, never a traceback
    (integer, number, choice, int_list; OneLineParser; one_line_errors);
  - a file is written whole or not at all (write_json, write_text, replace_atomically), and
    never over a file that is not the command's own kind of output (claim_output: the one check
    of every path the project writes);
  - Ctrl-C is one line and exit status 130, SIGTERM one line and 143, from the first line a
    command runs (quiet_interrupts, installed while this file is imported by a command of this
    project, before its other imports; one_line_errors, whose watchdog stops a command whose code
    swallowed the signal).
The studies' worker pool and the pages that copy tables are studies/lib/harness.py's.
Standard library only, so that the thread setting can run before numpy is imported.
"""
import os
import signal
import sys
import threading

# ---------------------------------------------------------------- argument checks ---------------
# First in the file: quiet_interrupts checks its argument while this file is still loading.

def _need(name, v, ok, what):
    """The one-line refusal of this file's functions: TypeError "{name} must be {what}"."""
    if not ok:
        shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
        raise TypeError(f"{name} must be {what}, got {shown}")


def _strings(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_path(v):
    return isinstance(v, (str, os.PathLike)) and not isinstance(v, bytes) and bool(os.fspath(v))


# ---------------------------------------------------------------- Ctrl-C while starting ---------
# First in this file, before its own imports: a command's first line is `import cli`, and Ctrl-C
# during that import is the command's too.

def _stop_at_once(prog, what, code):
    def handler(signum, frame):
        # os._exit, not SystemExit: an exception raised here lands in whatever code was running
        # (an import's own `except BaseException:`, a finalizer) and can be swallowed, and the
        # command would then run on after saying it would not. Nothing has run: nothing to save.
        try:
            sys.stderr.write(f"\n{prog}: {what}\n")
            sys.stderr.flush()
        finally:
            os._exit(code)
    return handler


def _interrupted_while_starting(prog):
    handler = _stop_at_once(prog, "interrupted while starting; nothing was run", 130)
    handler.while_starting = True
    return handler


def _terminated_while_starting(prog):
    handler = _stop_at_once(prog, "terminated (SIGTERM) while starting; nothing was run", 143)
    handler.while_starting = True
    return handler


def quiet_interrupts(prog):
    """Ctrl-C while the command `prog` is still starting (importing cli's own modules and numpy,
    building its parser) is one line and exit status 130 at once, never a traceback from inside
    an import and never swallowed by the code it lands in. Installed while this file is imported
    by a command of this project (_command_name), and called again (a no-op then) under each command's
    `if __name__ == "__main__"`, which says so where a reader looks. one_line_errors hands Ctrl-C
    kept. SIGTERM alike: one line and exit status 143 (one_line_errors then raises Terminated
    for it)."""
    _need("prog", prog, isinstance(prog, str) and prog, "a command's name (a str)")
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not when ignored
            signal.signal(signal.SIGINT, _interrupted_while_starting(prog))
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _terminated_while_starting(prog))
    except ValueError:                       # not the main thread: leave signals alone
        pass
    if hasattr(signal, "pthread_sigmask"):   # a Ctrl-C the command held back (its first lines
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})   # block it) lands here now


def _command_name(path):
    """The name a command of this project goes by: `train.py` for a file beside this one,
    `studies.sweep` for a module of a package below it (run as `python -m studies.sweep`); None
    for a file outside the project."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo
    rel = os.path.relpath(os.path.abspath(path), root)
    if rel.startswith(os.pardir) or not rel.endswith(".py"):
        return None
    return rel if os.sep not in rel else rel[:-3].replace(os.sep, ".")


# ---------------------------------------------------------------- BLAS threads -----------------

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_blas_threads(n=None):
    """numpy's BLAS on n threads, or, when n is None, on one thread unless the environment already
    says otherwise. Takes effect in this process only if numpy is not imported yet, and in every
    process started after (a sweep's workers). One thread because the training step's matrices
    are small: a second thread buys little, and while another process kept a core busy numpy's
    default threads made a run 10 to 16 times slower (the README's performance page)."""
    _need("n", n, n is None or isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 4096, "None or a number of threads "
          "from 1 to 4096")
    for var in BLAS_VARS:
        if n is None:
            os.environ.setdefault(var, "1")
        else:
            os.environ[var] = str(n)


def _option_value(argv, flag):
    """The text given to `flag` in argv (`--threads 2` or `--threads=2`), or None. For the few
    settings that must act before argparse runs (threads: before numpy is imported)."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def threads_from_argv(argv):
    """set_blas_threads with the --threads N of argv when it is a positive integer, else the
    default; a bad value is left for argparse to report."""
    _need("argv", argv, _strings(argv), "a list of strings (the command line)")
    n = _option_value(argv, "--threads")
    set_blas_threads(int(n) if n is not None and n.strip().isdigit() and 1 <= int(n) <= 4096 else None)


def _start_command(name, argv):
    """Every command's entry prologue, run once as the command starts (it imports this module
    first): Ctrl-C and SIGTERM while it starts are one line (quiet_interrupts), and numpy's BLAS
    takes the command's --threads N, else one thread (set before numpy is imported, and inherited
    by the worker processes: one thread each, the pool is the parallelism)."""
    quiet_interrupts(name)
    threads_from_argv(argv)


_main = getattr(sys.modules.get("__main__"), "__file__", None) or ""
if _main and _command_name(_main):          # a command of this project is starting
    _start_command(_command_name(_main), sys.argv[1:])

import argparse  # noqa: E402  (after the guard: Ctrl-C while these load is one line too)
import errno  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import numbers  # noqa: E402
import re  # noqa: E402
import stat  # noqa: E402
import tempfile  # noqa: E402

# ---------------------------------------------------------------- option values ----------------

class BadValue(ValueError, argparse.ArgumentTypeError):
    """A bad option value: a ValueError in Python, a one-line usage error on the command line."""


def is_integer(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and \
        type(v).__name__ != "bool_"


def integer(lo, hi=None):
    """Parser for an integer option in [lo, hi]: accepts an int (numpy's too) or its text."""
    allowed = f"an integer >= {lo}" if hi is None else f"an integer between {lo} and {hi}"

    def parse(v):
        if isinstance(v, str):            # ASCII digits only: int() also takes '3_0' and '٣'
            if not re.fullmatch(r"-?[0-9]+", v):
                raise BadValue(f"must be {allowed}, got {v!r}")
            v = int(v)
        if not is_integer(v) or v < lo or (hi is not None and v > hi):
            raise BadValue(f"must be {allowed}, got {v!r}")
        return int(v)
    parse.allowed = allowed
    return parse


def number(lo, strict=False, hi=None, hi_strict=False):
    """Parser for a finite float option, > lo (strict) or >= lo, and <= hi (< hi when hi_strict)
    when hi is given."""
    allowed = (f"a finite number {'>' if strict else '>='} {lo}"
               + (f" and {'<' if hi_strict else '<='} {hi}" if hi is not None else ""))

    def parse(v):
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                raise BadValue(f"must be {allowed}, got {v!r}") from None
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2 ** 1023:
            raise BadValue(f"must be {allowed}, got an integer beyond a float's range")
        if (not isinstance(v, numbers.Real) or isinstance(v, bool) or type(v).__name__ == "bool_"
                or not math.isfinite(v) or v < lo or (strict and v == lo)
                or (hi is not None and (v > hi or (hi_strict and v == hi)))):
            raise BadValue(f"must be {allowed}, got {v!r}")
        return float(v)
    parse.allowed = allowed
    return parse


def choice(*allowed):
    """Parser for one of the given strings."""
    def parse(v):
        if v not in allowed:
            raise BadValue(f"must be one of {', '.join(allowed)}, got {v!r}")
        return v
    parse.allowed, parse.choices = "one of " + ", ".join(allowed), allowed
    return parse


def int_list(text):
    """Parser for comma-separated integers >= 1 (e.g. --Ts 100,300), each given once: sorted."""
    if not isinstance(text, str):
        raise BadValue(f"must be comma-separated integers (text), got {text!r:.40}")
    items = [v.strip() for v in text.split(",")]
    if not all(re.fullmatch(r"[0-9]+", v) for v in items) or min(map(int, items)) < 1:
        raise BadValue(f"must be comma-separated integers >= 1, got {text!r} (e.g. 100,300)")
    vals = [int(v) for v in items]
    if len(set(vals)) < len(vals):
        raise BadValue(f"names {next(v for v in vals if vals.count(v) > 1)} twice: {text!r}")
    return sorted(vals)


# ---------------------------------------------------------------- the command line -------------

class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (exit status 2), never a traceback, and which
    never accepts an abbreviated option (--seed is not --seeds)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _parse_optional(self, arg_string):
        """A word that starts with '-' and then a digit or '.' (-1/2, -5,3, -.5) and is not an
        option of this parser is a value, never an option: `--shard -1/2` reaches --shard's own
        check ("needs 0 <= i < n") instead of failing as "expected one argument"."""
        if (len(arg_string) > 1 and arg_string[0] == "-" and arg_string[1] in "0123456789."
                and arg_string not in self._option_string_actions):
            return None
        return super()._parse_optional(arg_string)


def explicit_options(ap, argv):
    """The dests the user actually typed (parsing again with every default set to a marker)."""
    _need("ap", ap, isinstance(ap, argparse.ArgumentParser), "an argparse.ArgumentParser")
    _need("argv", argv, _strings(argv), "a list of strings (the command line)")
    marker = object()
    ap2 = OneLineParser(add_help=False)
    for action in ap._actions:
        if action.option_strings and action.dest != "help":
            kind = (dict(action="store_true") if action.nargs == 0 else
                    dict(action="store", type=action.type, choices=action.choices))
            ap2.add_argument(*action.option_strings, dest=action.dest, default=marker, **kind)
    return {k for k, v in vars(ap2.parse_args(argv)).items() if v is not marker}


class Terminated(BaseException):
    """SIGTERM (what `kill`, `timeout` and job schedulers send) arrived: a command stops as on
    Ctrl-C and says so in one line, exit status 143. A BaseException, as KeyboardInterrupt is,
    so that no `except Exception` swallows it."""


def _raise_terminated(signum, frame):
    raise Terminated()


_raise_terminated.raises_terminated = True


class sigterm_raises:
    """Context: SIGTERM is raised as Terminated inside the block (main thread only), for code that
    catches it to stop its workers and say what was kept; a command's own handler from
    one_line_errors (which raises Terminated too) is kept as it is."""

    def __enter__(self):
        self.old = None
        if threading.current_thread() is threading.main_thread() and not getattr(
                signal.getsignal(signal.SIGTERM), "raises_terminated", False):
            self.old = signal.signal(signal.SIGTERM, _raise_terminated)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)
        return False


STOP_GRACE = 10.0   # seconds a command's main has to stop after Ctrl-C or SIGTERM reached it


def _raise_on_signal(prog, exc, what, code, pressed):
    """The handler one_line_errors installs: raise `exc` (KeyboardInterrupt, Terminated) where
    the signal lands, and, the first time, start a watchdog: code that swallows what lands in it
    (numpy importing numpy.random on first use catches it) cannot keep the command running past
    STOP_GRACE seconds; then one line and exit status `code` (os._exit)."""
    def handler(signum, frame):
        if not pressed:
            pressed.update(code=code, what=what)
            timer = threading.Timer(STOP_GRACE, _stop_at_once(prog, what, code), (signum, None))
            timer.daemon = True
            timer.start()
            pressed["timer"] = timer
        raise exc()
    handler.raises_terminated = exc is Terminated
    return handler


class _Watched:
    """sys.stdout while a command's main runs (one_line_errors): the same stream, which notes its
    own failure (an OSError of standard output names no file, nor does a worker pool's pipe; and
    once met, the stream drops what it held, so a later flush cannot tell)."""

    def __init__(self, stream):
        self.stream, self.failed = stream, None

    def __getattr__(self, name):
        if self.stream is None:                  # no standard output at all (pythonw)
            return lambda *args: None
        attr = getattr(self.stream, name)
        if name not in ("write", "flush"):
            return attr

        def watched(*args):
            try:
                return attr(*args)
            except OSError as e:
                self.failed = e
                raise
        return watched


def _stdout_gone(prog, e):
    """A command's end when its standard output failed with e: a closed pipe (`| head`) ends
    it quietly with exit status 141 (128 + SIGPIPE, as a Unix tool stopped by it); anything
    else (`> /dev/full`) is one line, exit status 1. Standard output is pointed at /dev/null
    first, so that the interpreter's own last flush finds nothing more to complain of."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # no descriptor of its own (a test's capture)
        pass
    if e.errno == errno.EPIPE:
        return 141
    print(f"{prog}: cannot write its standard output: {e.strerror or e}", file=sys.stderr)
    return 1


_STOPS = {signal.SIGINT: (KeyboardInterrupt, "interrupted", 130),
          signal.SIGTERM: (Terminated, "terminated (SIGTERM)", 143)}


def _raise_signals(prog, pressed):
    """one_line_errors' handlers of Ctrl-C and SIGTERM installed (not where a signal is ignored,
    nor Ctrl-C where it is left at its default) -> the handlers they replaced."""
    old = {}
    try:
        for sig, (exc, what, code) in _STOPS.items():
            if signal.getsignal(sig) not in (signal.SIG_IGN, None) and not (
                    sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_DFL):
                old[sig] = signal.signal(sig, _raise_on_signal(prog, exc, what, code, pressed))
    except ValueError:                       # not the main thread: leave signals alone
        pass
    return old


def _run_watched(main, argv, out):
    """main(argv), with what it printed sent out after it in every case (out: the watched
    standard output, which notes a failure)."""
    try:
        return main(argv)
    finally:
        if out.failed is None:
            try:
                out.flush()
            except (OSError, ValueError):
                pass


def one_line_errors(prog, main, argv=None):
    """Run a command's main; a file that cannot be written or read (OSError: read-only folder,
    full disk, ...) or memory that runs out becomes one line naming what failed, exit code 1;
    Ctrl-C that main does not handle itself is one line, exit code 130, and SIGTERM (raised as
    Terminated from the first line of main to its last) one line, exit code 143. A standard
    output that fails ends it as it ends a Unix tool: a closed pipe quietly (exit code 141), a
    full disk in one line (_stdout_gone). Whatever was saved before stays saved (rows and
    checkpoints are written as they finish)."""
    _need("prog", prog, isinstance(prog, str) and prog, "a command's name (a str)")
    _need("main", main, callable(main), "a function of argv")
    _need("argv", argv, argv is None or _strings(argv), "None or a list of strings")
    pressed = {}               # the first signal's code and line
    old = _raise_signals(prog, pressed)
    out = sys.stdout = _Watched(sys.stdout)
    try:
        code = _run_watched(main, argv, out)
        if out.failed is not None:
            return _stdout_gone(prog, out.failed)
        if pressed and code not in (130, 143):   # swallowed where it landed, and main ran on
            print(f"\n{prog}: {pressed['what']}", file=sys.stderr)
            return pressed["code"]
        return code
    except SystemExit:                # argparse's --help and errors: their text went out first
        if out.failed is not None:
            return _stdout_gone(prog, out.failed)
        raise
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print(f"\n{prog}: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except OSError as e:
        if out.failed is e:           # standard output's: a closed pipe, a full disk
            return _stdout_gone(prog, e)
        where = f" {e.filename}" if e.filename else ""
        print(f"{prog}: cannot access{where}: {e.strerror or e}", file=sys.stderr)
    except MemoryError as e:
        what = f" ({e})" if str(e) else ""
        print(f"{prog}: out of memory{what}; use smaller sizes (T, m, n_test, d, mlp, --seeds) "
              f"or fewer workers", file=sys.stderr)
    finally:
        if sys.stdout is out:
            sys.stdout = out.stream
        if "timer" in pressed:
            pressed["timer"].cancel()
        for sig, handler in old.items():   # the caller's handler again; for a command, whose
            _, what, code = _STOPS[sig]    # handler said "while starting", one line to its exit
            signal.signal(sig, _stop_at_once(prog, what, code)
                          if getattr(handler, "while_starting", False) else handler)
    return 1


# ---------------------------------------------------------------- files ------------------------

def _json_safe(x):
    """x with every non-finite float as None and numpy scalars and arrays as Python values."""
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):     # numpy arrays and scalars
        return _json_safe(x.tolist())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x


_UMASK = os.umask(0o022)   # the process's umask, read while the command starts (no thread runs)
os.umask(_UMASK)


def replace_atomically(path, write):
    """Write `path` whole or not at all: the one way a study command writes a whole file. The
    temporary is no one else's: tempfile.mkstemp creates it new and exclusively in path's folder
    under a random hidden name (".NAME.XXXXXXXX.tmp") that no user chose and no earlier run
    left; write(f) fills it (f: that file, open for writing bytes); it is synced, given path's
    permissions (a new file: the umask's) and renamed over path. No other name is opened,
    followed or removed: a link or a stranger's file beside path stays as it is. Any failure (a
    full disk, Ctrl-C) removes the temporary and leaves path as it was; an OSError names path,
    not the temporary."""
    _need("path", path, _is_path(path), "a file path (a non-empty str)")
    _need("write", write, callable(write), "a function of the temporary file (open for bytes)")
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~_UMASK
    except OSError:
        mode = 0o666 & ~_UMASK
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name[:100]}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            if hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), os.fspath(path)) from None
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass


def write_json(path, obj):
    """Strict JSON (NaN and inf become null, never the non-JSON NaN), written atomically
    (replace_atomically), so a reader never sees half a file."""
    try:
        text = json.dumps(_json_safe(obj), indent=1, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"obj must be JSON data (dicts, lists, numbers, text), got "
                        f"{type(obj).__name__}: {e}") from None
    replace_atomically(path, lambda f: f.write(text.encode("utf-8")))


def write_text(path, text, newline=None):
    """A text file in UTF-8, written whole or not at all (replace_atomically), so a full disk
    never leaves an empty or half table behind. Line ends as text mode writes them: newline=None
    the system's, '' text's own as they are (a page), '\\n' or '\\r\\n' that end."""
    _need("text", text, isinstance(text, str), "a str")
    _need("newline", newline, newline in (None, "", "\n", "\r\n"), "None, '', '\\n' or '\\r\\n'")
    end = os.linesep if newline is None else newline
    data = text if end in ("", "\n") else text.replace("\n", end)
    replace_atomically(path, lambda f: f.write(data.encode("utf-8")))


def check_writable(path, what):
    """path, when a file can be written there now (its folder exists and takes a file, it is no
    folder); else a ValueError, one line naming `what` and the path. For a file written in place
    of one the project does not own by kind (a page between its markers): claim_output checks
    the others."""
    _need("path", path, _is_path(path), "a file path (a non-empty str)")
    _need("what", what, isinstance(what, str), "a few words naming the file (a str)")
    problem = _check_writable(path, what)
    if problem:
        raise ValueError(problem)
    return path


def _check_writable(path, what):
    """One line if `path` cannot be written (its folder is missing or takes no new file, it is a
    folder, or it is a file made read-only), else None. The test is the write's own first step,
    now: a temporary made in the folder (and removed); the path itself is never opened."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{what} {path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{what} {path}: folder {folder} is not writable"
    if os.path.isdir(path):
        return f"{what} {path} is a folder; give a file name"
    if os.path.isfile(path) and not os.path.islink(path) and not os.access(path, os.W_OK):
        return f"{what} {path}: cannot write {path} (it is read-only)"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".write-test.", suffix=".tmp", dir=folder)
    except OSError as e:
        return f"{what} {path}: cannot write in {folder} ({e.strerror})"
    os.close(fd)
    os.remove(tmp)
    return None


TEXT_MOST = 16 << 20     # bytes: far above any page, table or cache the project reads


def read_text_file(path, what, root=None, most=TEXT_MOST, keep_line_ends=False):
    """The one way to read a file the project did not write itself just now (a page and the
    files its markers name, a --readme, a cache, a folder's JSON): `path` must be a regular file
    (not a folder, device or pipe: /dev/zero never ends) of at most `most` bytes, holding UTF-8
    text without NUL bytes; with `root`, `path` must also be relative and stay inside root after
    every symlink and `..` (a page may copy files of its repository, never /etc/hostname).
    Otherwise a ValueError, one line naming `what` and the path. -> the text, with newlines
    read as text mode reads them, or, with keep_line_ends, as they are (a page written back
    keeps its CRLF)."""
    _need("path", path, _is_path(path), "a file path (a non-empty str)")
    _need("what", what, isinstance(what, str), "a few words naming the file (a str)")
    _need("root", root, root is None or _is_path(root), "None or a folder")
    _need("most", most, is_integer(most) and most >= 1, "a number of bytes >= 1")
    _need("keep_line_ends", keep_line_ends, isinstance(keep_line_ends, bool), "True or False")
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what}: not a file path: {path!r}")
    full = path
    if root is not None:
        top = os.path.realpath(root)
        full = os.path.join(top, path)
        if os.path.isabs(path):
            raise ValueError(f"{what} {path}: an absolute path; only files inside the "
                             f"repository ({top}) may be read, named relative to it")
        if os.path.commonpath([os.path.realpath(full), top]) != top:
            raise ValueError(f"{what} {path}: outside the repository ({top}); only files "
                             f"inside it may be read")
    with open_regular(full, what, shown=path) as f:
        try:
            data = f.read(most + 1)
        except OSError as e:
            raise ValueError(f"{what} {path}: cannot read it ({e.strerror})") from None
    if len(data) > most:
        raise ValueError(f"{what} {path} is larger than {most} bytes; not a text file this "
                         f"project reads")
    if b"\x00" in data:
        raise ValueError(f"{what} {path} is not a text file (it holds NUL bytes: binary?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte {e.start} is not: binary?)") \
            from None
    return text if keep_line_ends else text.replace("\r\n", "\n").replace("\r", "\n")


# What each kind of output may replace: only a file that is already that kind of output, which
# the project itself writes and rewrites (a newer summary, a report of the same folder redrawn).
# Anything else at the path (a checkpoint, a CSV of runs, a README, notes, an empty file, a
# device) is never replaced. A checkpoint is replaced only by the run that continues it: the
# caller says which file that is (`ours`).
TABLE_HEADS = ("| model | T |", "| protocol | T |", "| d | T |", "| T |", "| task | s |",
               "INCOMPLETE:", "## What C's separation is made of",     # studies.mechanism factors,
               "## Interventions paired by seed", "## When a run becomes a success or a failure",
               "| folder | the arithmetic that replays",                  # studies.replay --table
               "## The same runs under two arithmetics",                     # studies.kernels
               "## The studies' measures under", "## The arm x T interaction",
               "## Paired cells with an exact test", "## The study's measures, raw and",
               "## Runs of two folders compared", "## The norm ball against",  # symmetries
               "## m*(T) inside the capacity bound", "## The slack, separated",   # classball
               "## The laws fitted to every seed")                        # sweep laws
SUMMARY_KEYS = {"model", "task", "T", "s", "m", "seed", "train_acc", "test_acc", "steps"}


def open_regular(path, what, shown=None):
    """`path` opened for reading bytes when it is a regular file (a link to one is followed);
    a folder, a pipe (a FIFO never ends, or never starts), a device or a socket is refused
    before it is opened, and again if one took the file's place meanwhile (opened without
    blocking, checked on the open file). ValueError, one line naming `what` and the path
    (`shown`, default path), otherwise. The one way the studies open a file to read it."""
    _need("path", path, _is_path(path), "a file path (a non-empty str)")
    _need("what", what, isinstance(what, str), "a few words naming the file (a str)")
    _need("shown", shown, shown is None or _is_path(shown), "None or the path as given")
    shown = os.fspath(path if shown is None else shown)
    refuse = ValueError(f"{what} {shown} is not a regular file (a folder, device or pipe); "
                        f"refusing to read it")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise refuse
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise ValueError(f"{what} {shown}: cannot read it ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refuse
    return os.fdopen(fd, "rb")


def _head(path, n):
    """The first n bytes of a regular file (b"" when it cannot be read)."""
    try:
        with open_regular(path, "a file") as f:
            return f.read(n)
    except (OSError, ValueError):
        return b""


def _json_file(path, most=64 << 20):
    """The JSON value in the file, or None when it is too large or not JSON."""
    data = _head(path, most + 1)
    try:
        return None if len(data) > most else json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):   # UnicodeDecodeError is a ValueError
        return None


def _json_is(test):          # a recogniser of a JSON output: its value passes `test`
    return lambda path: test(_json_file(path))


def _starts(head):           # a recogniser of a text output: its first line starts with `head`
    return lambda path: _head(path, 64).decode("utf-8", "replace").startswith(head)


PAIRS_HEAD = "intervention,d,T,m,seed,"          # studies.mechanism paired --pairs
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")  # savefig's

OUTPUT_KINDS = {   # kind: (what a file must be to be replaced, how to tell)
    "summary": ("a JSON summary of a run (train.py --json)",
                _json_is(lambda j: isinstance(j, dict) and SUMMARY_KEYS <= set(j))),
    "table": ("a table this project wrote (a markdown table)", _starts(TABLE_HEADS)),
    "plot": ("a plot (an image matplotlib drew)",    # matplotlib names itself in every image
             lambda path: os.path.getsize(path) <= 256 << 20 and b"matplotlib" in _head(
                 path, 256 << 20).lower()),
    "pairs": ("a paired CSV of studies.mechanism paired --pairs", _starts(PAIRS_HEAD)),
    "critical": ("a sweep report's critical.json", _json_is(lambda j: isinstance(j, list) and all(
        isinstance(e, dict) and "n_seeds" in e for e in j))),
    "limit": ("a limit.json of studies.sweep limit",
              _json_is(lambda j: isinstance(j, dict) and {"task", "s", "rows"} <= set(j))),
    "limits": ("a cache of statistical limits (limits.json)", _json_is(
        lambda j: isinstance(j, dict) and all(isinstance(v, dict) for v in j.values()))),
    "checkpoint": ("a checkpoint of this run", None),
    "replay": ("a replay's finding (arithmetic.json of studies.replay --find)",
               _json_is(lambda j: isinstance(j, dict) and {"found", "tried", "rows"} <= set(j))),
}


def same_file(a, b):
    """Whether paths a and b name one file (the same inode, or one real path)."""
    _need("a", a, _is_path(a), "a path")
    _need("b", b, _is_path(b), "a path")
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def claim_output(path, kind, what=None, ours=None):
    """The one check before the project writes a file: ValueError (one line, naming `what` and
    the path) unless `path` can be written and is free or holds this command's own kind of
    output (OUTPUT_KINDS): a JSON summary may be replaced by a new summary, a table by a table, a
    plot by a plot, a report's JSON by the same report's JSON; never a file of another kind or a
    file we cannot recognise (not even an empty one), a folder or a device. `ours(path)` decides
    instead, for a checkpoint: True (the run continues this very file), or a sentence saying
    why not. Returns the path."""
    _need("what", what, what is None or isinstance(what, str), "None or a few words (a str)")
    _need("ours", ours, ours is None or callable(ours), "None or a function of the path")
    if not (isinstance(kind, str) and kind in OUTPUT_KINDS):
        raise ValueError(f"kind must be one of {', '.join(OUTPUT_KINDS)}, got {kind!r}")
    what = what or kind
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise TypeError(f"{what} must be a file path (str), got {type(path).__name__}")
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{what} must be a file path, got an empty string")
    description, recognise = OUTPUT_KINDS[kind]
    if os.path.isdir(path):
        raise ValueError(f"{what} {path} is a folder, not {description}; give a file name")
    if os.path.lexists(path):
        if not os.path.isfile(path) or os.path.islink(path):
            raise ValueError(f"{what} {path} exists and is not a regular file (a link, a device "
                             f"or a pipe); refusing to write through it")
        verdict = ours(path) if ours else recognise(path) if recognise else False
        if isinstance(verdict, str):
            raise ValueError(f"{what} {path} {verdict}")
        if verdict is not True:
            raise ValueError(f"{what} {path} exists and is not {description}; refusing to "
                             f"overwrite it (move it away or give another path)")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if kind == "plot" and ext not in PLOT_FORMATS:
        raise ValueError(f"{what} {path}: the image's extension must be one of "
                         f"{', '.join(PLOT_FORMATS)}, got {ext or 'none'!r}")
    problem = _check_writable(path, what)
    if problem:
        raise ValueError(problem)
    return path


def claim_outputs(claims):
    """claim_output for each (path, kind, what[, ours]) of one command, after checking that no two
    of them are one file (`--json x.npz --save x.npz` would write a summary over the checkpoint).
    Claims whose path is None (an output not asked for) are skipped."""
    _need("claims", claims, isinstance(claims, (list, tuple)) and all(
        isinstance(c, tuple) and 3 <= len(c) <= 4 for c in claims), "a list of (path, kind, what[, ours])")
    claims = [c for c in claims if c[0] is not None]
    for i, (p, _, w, *_) in enumerate(claims):
        for q, _, v, *_ in claims[:i]:
            if isinstance(p, (str, os.PathLike)) and isinstance(q, (str, os.PathLike)) and \
                    same_file(p, q):
                raise ValueError(f"{v} and {w} are the same file {p}; give each output a path "
                                 f"of its own")
    for c in claims:
        claim_output(*c)


# ---------------------------------------------------------------- plots (optional) -------------

def pyplot_or_hint(then):
    """matplotlib.pyplot on the file-only Agg backend; None, with a one-line hint ending in
    `then`, when matplotlib is not installed (plots are optional)."""
    _need("then", then, isinstance(then, str), "what to do after installing it (a str)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no plot: matplotlib is not installed (pip install matplotlib, then {then})")
        return None
    return plt


def _image_format(path):
    """savefig's format for a file name (its extension; PLOT_FORMATS), png without one."""
    return os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or "png"


def save_figure(plt, fig, path):
    """The figure into `path`, whole or not at all (cli.replace_atomically)."""
    _need("plt", plt, hasattr(plt, "close"), "matplotlib.pyplot (pyplot_or_hint's)")
    _need("fig", fig, hasattr(fig, "savefig") and hasattr(fig, "tight_layout"), "a figure")
    _need("path", path, _is_path(path), "a file path (a non-empty str)")
    fig.tight_layout()
    try:
        replace_atomically(path, lambda f: fig.savefig(f, dpi=120, format=_image_format(path)))
    finally:
        plt.close(fig)
    return path
