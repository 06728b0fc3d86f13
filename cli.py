"""cli.py: what the project's commands share: BLAS threads, option values, one-line errors, files.

train.py, sweep.py and theory.py are commands; they promise the same things to the person typing
them, and this file is where those promises are kept once:
  - numpy's BLAS runs on one thread unless asked otherwise (set before numpy is first imported);
  - a bad option value is one line that names the value and what is allowed, never a traceback
    (integer, number, choice, int_list; OneLineParser; one_line_errors);
  - a file is written whole or not at all, and never over a file that is not the command's own
    (write_json, check_writable).
Standard library only, so that the thread setting can run before numpy is imported.
"""
import argparse
import json
import math
import numbers
import os
import sys

# ---------------------------------------------------------------- threads and memory -----------

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_blas_threads(n=None):
    """numpy's BLAS on n threads, or, when n is None, on one thread unless the environment already
    says otherwise. Takes effect in this process only if numpy is not imported yet, and in every
    process started after (a sweep's workers). One thread because the training step's matrices
    are small: a second thread buys little, and while another process kept a core busy numpy's
    default threads made a run 10 to 16 times slower (the README's performance page)."""
    for var in BLAS_VARS:
        if n is None:
            os.environ.setdefault(var, "1")
        else:
            os.environ[var] = str(n)


def option_value(argv, flag):
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
    n = option_value(argv, "--threads")
    set_blas_threads(int(n) if n is not None and n.strip().isdigit() and int(n) >= 1 else None)


def keep_freed_memory():
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the system.

    A training step allocates the same large arrays every time; by default glibc serves each with
    fresh pages from the kernel (mmap) and hands them back when freed, so every step pays for
    zero-filling and page faults. Raising the mmap threshold to its maximum (32 MiB) and the trim
    threshold makes the heap reuse them. Returns whether it applied: on other C libraries (macOS,
    musl) nothing happens and training is only slower. The numbers computed are the same."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
                    and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False


# ---------------------------------------------------------------- option values ----------------

class BadValue(ValueError, argparse.ArgumentTypeError):
    """A bad option value: a ValueError in Python, a one-line usage error on the command line."""


def _is_integer(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and \
        type(v).__name__ != "bool_"


def integer(lo, hi=None):
    """Parser for an integer option in [lo, hi]: accepts an int (numpy's too) or its text."""
    allowed = f"an integer >= {lo}" if hi is None else f"an integer between {lo} and {hi}"

    def parse(v):
        if isinstance(v, str):
            try:
                v = int(v.strip())
            except ValueError:
                raise BadValue(f"must be {allowed}, got {v!r}") from None
        if not _is_integer(v) or v < lo or (hi is not None and v > hi):
            raise BadValue(f"must be {allowed}, got {v!r}")
        return int(v)
    parse.allowed = allowed
    return parse


def number(lo, strict=False, hi=None):
    """Parser for a finite float option, > lo (strict) or >= lo, and <= hi when given."""
    allowed = (f"a finite number {'>' if strict else '>='} {lo}"
               + (f" and <= {hi}" if hi is not None else ""))

    def parse(v):
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                raise BadValue(f"must be {allowed}, got {v!r}") from None
        if (not isinstance(v, numbers.Real) or isinstance(v, bool) or type(v).__name__ == "bool_"
                or not math.isfinite(v) or v < lo or (strict and v == lo)
                or (hi is not None and v > hi)):
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
    """Parser for comma-separated integers >= 1 (e.g. --Ts 100,300): sorted, without repeats."""
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise BadValue(f"must be comma-separated integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise BadValue(f"must be comma-separated integers >= 1, got {text!r}")
    return sorted(set(vals))


# ---------------------------------------------------------------- the command line -------------

class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr (exit status 2), never a traceback, and which
    never accepts an abbreviated option (--seed is not --seeds)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def explicit_options(ap, argv):
    """The dests the user actually typed (parsing again with every default set to a marker)."""
    marker = object()
    ap2 = OneLineParser(add_help=False)
    for action in ap._actions:
        if action.option_strings and action.dest != "help":
            kind = (dict(action="store_true") if action.nargs == 0 else
                    dict(action="store", type=action.type, choices=action.choices))
            ap2.add_argument(*action.option_strings, dest=action.dest, default=marker, **kind)
    return {k for k, v in vars(ap2.parse_args(argv)).items() if v is not marker}


def one_line_errors(prog, main, argv=None):
    """Run a command's main; a file that cannot be written or read (OSError: read-only folder,
    full disk, ...) or memory that runs out becomes one line naming what failed, exit code 1.
    Whatever was saved before stays saved (rows and checkpoints are written as they finish)."""
    try:
        return main(argv)
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        print(f"{prog}: cannot access{where}: {e.strerror or e}", file=sys.stderr)
    except MemoryError:
        print(f"{prog}: out of memory; use smaller sizes (T, m, n_test, d, mlp) or fewer "
              f"workers", file=sys.stderr)
    return 1


# ---------------------------------------------------------------- files ------------------------

def json_safe(x):
    """x with every non-finite float as None and numpy scalars and arrays as Python values."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):     # numpy arrays and scalars
        return json_safe(x.tolist())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x


def write_json(path, obj):
    """Strict JSON (NaN and inf become null, never the non-JSON NaN), written atomically: a
    temporary file beside it, then renamed, so a reader never sees half a file."""
    tmp = f"{path}.{os.getpid()}.tmp"                 # shards may write at the same time
    try:
        with open(tmp, "w") as f:
            json.dump(json_safe(obj), f, indent=1, allow_nan=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def check_writable(path, what):
    """One line if `path` cannot be written (its folder is missing or read-only), else None."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{what} {path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{what} {path}: folder {folder} is not writable"
    if os.path.isdir(path):
        return f"{what} {path} is a folder; give a file name"
    for target in (path, path + ".tmp.npz") if what == "--save" else (path,):
        if os.path.isdir(target):       # e.g. a leftover temporary that is now a folder
            return f"{what} {path}: {target} is a folder in the way; remove it"
        existed = os.path.exists(target)
        try:                            # the only reliable test: open it for writing, now
            with open(target, "ab"):
                pass
        except OSError as e:
            return f"{what} {path}: cannot write {target} ({e.strerror})"
        if not existed:
            os.remove(target)
    return None


def write_text(path, text):
    """A text file written whole or not at all (a temporary beside it, then renamed), so a full
    disk never leaves an empty or half table behind."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
