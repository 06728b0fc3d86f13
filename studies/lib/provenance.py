"""provenance.py (studies/lib): where and with what arithmetic a folder's runs were made (issue 46).

A float32 run replays bit for bit only under the BLAS kernel that made it (arithmetic.py). Every
session that adds runs to a folder records its machine in the folder's description (sweep.json,
steps.json, plan.json: machine); a session whose arithmetic is not the folder's is refused
(check_arithmetic) unless the command is given --other-arithmetic (add_other_arithmetic), and
then writes each new row's arithmetic beside it (folder_write.RowWriter's arithmetic_of, an
arithmetic_id). Folders made before these records: what studies.replay --find found
(OUT/arithmetic.json, read by read_finding), as recorded_arithmetic reports it.
"""
import argparse
import os

from studies.lib import arithmetic, folder
from studies.lib.harness import check_path, shown


def machine(dtype="float32"):
    """Where and with what arithmetic a session adds runs to a folder: the cores and
    arithmetic.record(dtype) (the BLAS library, the kernel it runs, threads, numpy, Python, the
    CPU). Borderline runs flip between kernels (float32 rounding differs), so a folder's
    description keeps every machine that added runs to it, and a continuation under another
    arithmetic is refused (check_arithmetic) unless asked for."""
    return dict(cores=os.cpu_count(), **arithmetic.record(dtype))


# Which arithmetic made a folder's rows (issue 46): the last machine of its description that names
# a kernel (every session since the move writes one), else what a replay found
# (OUT/arithmetic.json, studies.replay --find); a session that continues a folder under another
# arithmetic, allowed by --other-arithmetic, writes each of its rows' arithmetic beside them
# (OUT/arithmetic-of-NAME.csv: the run's name and the arithmetic's id).

def arithmetic_id(rec):
    """'OpenBLAS 0.3.31.188.0 SkylakeX': the library, its version and kernel of a record."""
    if not isinstance(rec, dict):
        raise TypeError(f"rec must be a record of arithmetic.record (a dict), got {shown(rec)}")
    return " ".join(str(rec.get(k, arithmetic.UNREAD)) for k in ("blas", "blas_version", "kernel"))


def recorded_arithmetic(out, meta):
    """The arithmetic the folder `out` records (a record with at least arithmetic.DECIDING's
    fields), from its description `meta` or its replay finding; None when it records none."""
    out = check_path("out", out, "a folder")
    if not (isinstance(meta, dict) and isinstance(meta.get("machines", []), list)):
        raise TypeError(f"meta must be a folder's description (a dict whose machines is a list), "
                        f"got {shown(meta)}")
    named = [m for m in meta.get("machines", []) if isinstance(m, dict) and "kernel" in m]
    if named:
        return named[-1]
    path = os.path.join(out, "arithmetic.json")
    if os.path.lexists(path):
        found = read_finding(path)["found"]   # its one reader: damage (a FIFO too) is one line
        if found is not None:
            return found
    return None


def read_finding(path):
    """A folder's arithmetic.json (find's finding), every key find writes checked: found (None or
    a dict of the arithmetic's blas, blas_version, kernel, dtype), tried (a non-empty list of
    {kernel, replayed, of}), cpu, and with found None, closest (None or {kernel,
    worst_relative_difference, worst_column}) and rows_by_kernel (None or {row: kernel or None}).
    ValueError, one line naming the file and the key, otherwise."""
    check_path("path", path, "an arithmetic.json's path")
    if not os.path.isfile(path):
        raise ValueError(f"path {path} is not a regular file (missing, a folder, a device or a "
                         f"pipe; a folder's arithmetic.json expected)")
    f = folder.read_json(path, "a replay's finding (arithmetic.json)", "write it again with --find")
    if not isinstance(f, dict):
        raise ValueError(f"{path} is not a replay's finding (a JSON {type(f).__name__}, not an "
                         f"object); write it again with --find")
    text = lambda v: isinstance(v, str)
    count = lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10 ** 9
    kernel = lambda v: v in arithmetic.KERNEL_FLAGS or v == "not OpenBLAS"
    tried = f.get("tried") if isinstance(f.get("tried"), list) else []
    checks = [
        ("found", f.get("found") is None or (isinstance(f["found"], dict) and all(
            text(f["found"].get(k)) for k in ("blas", "blas_version", "kernel", "dtype"))
            and kernel(f["found"]["kernel"])),
         "None or the arithmetic that replays (blas, blas_version, a kernel, dtype)"),
        ("tried", isinstance(f.get("tried"), list) and f["tried"] and all(
            isinstance(t, dict) and kernel(t.get("kernel")) and count(t.get("replayed"))
            and count(t.get("of")) and t["replayed"] <= t["of"] for t in f["tried"]),
         f"a list of the kernels tried ({{kernel of {', '.join(arithmetic.KERNEL_FLAGS)}, "
         f"replayed <= of}})"),
        ("found", f.get("found") is None or any(
            isinstance(t, dict) and t.get("kernel") == f["found"]["kernel"]
            and t.get("replayed") == t.get("of") for t in tried),
         "a kernel whose tried entry replayed every row it tried"),
        ("cpu", text(f.get("cpu")), "the processor's name"),
        ("closest", f.get("closest") is None or (isinstance(f["closest"], dict) and text(
            f["closest"].get("kernel")) and text(f["closest"].get("worst_column")) and isinstance(
            f["closest"].get("worst_relative_difference"), (int, float))
            and not f["closest"]["worst_relative_difference"] < 0),
         "None or {kernel, worst_relative_difference, worst_column}"),
        ("rows_by_kernel", f.get("rows_by_kernel") is None or (isinstance(
            f["rows_by_kernel"], dict) and all(v is None or text(v)
                                               for v in f["rows_by_kernel"].values())),
         "None or {row: the kernel that replays it, or None}")]
    for key, ok, want in checks:
        if not ok:
            raise ValueError(f"{path}: {key} is not {want} (damaged? write it again with --find)")
    return f


def add_other_arithmetic(ap):
    """The option every command that adds runs to a folder takes (check_arithmetic's allow)."""
    if not isinstance(ap, argparse.ArgumentParser):
        raise TypeError(f"ap must be an argparse.ArgumentParser, got {shown(ap)}")
    ap.add_argument("--other-arithmetic", dest="other_arithmetic", action="store_true",
                    help="continue a folder made by another arithmetic (BLAS kernel) than this "
                         "machine's, each new row recording its own (refused otherwise)")


def check_arithmetic(out, meta, here, allow=False, flag="--other-arithmetic"):
    """ValueError, one line naming both, when the folder `out` records another arithmetic than
    `here` (a record): its rows and this session's would be two arithmetics in one table, which
    no single machine replays. allow (the command's `flag`): continue, each new row recording
    its own. A folder that records none is continued (its finding is studies.replay --find's)."""
    if not isinstance(here, dict):
        raise TypeError(f"here must be a record of arithmetic.record (a dict), got {shown(here)}")
    if not isinstance(allow, bool):
        raise TypeError(f"allow must be True or False, got {shown(allow)}")
    if not (isinstance(flag, str) and flag):
        raise TypeError(f"flag must be the option's name (a str), got {shown(flag)}")
    was = recorded_arithmetic(out, meta)
    if allow or was is None or not arithmetic.differences(was, here):
        return
    kernel = was.get("kernel", arithmetic.UNREAD)
    how = (f"OPENBLAS_CORETYPE={kernel} python -m ... (this CPU can run it)" if kernel in
           arithmetic.kernels_here() else f"a machine whose OpenBLAS runs {kernel}")
    raise ValueError(f"{out} was made by {arithmetic.words(dict(was, threads=1))}; this machine "
                     f"runs {arithmetic.words(dict(here, threads=1))}: continuing would mix two "
                     f"arithmetics in one table. Continue it with {how}, or give {flag} to "
                     f"continue here, each new row recording its own")


# ---------------------------------------------------------------- folders side by side ---------
# A table that sets folders side by side (sweep compare, width, families, headline; mechanism
# paired and factors; symmetries ball and same; kernels; classball) compares their runs, and a
# borderline run may succeed under one BLAS kernel and fail under another: the command says so
# when their kernels differ (kernels_differ).

def _description(out):
    """The folder's description (sweep.json, steps.json or plan.json), read and checked by its
    one reader; {} for a folder that holds none."""
    if os.path.lexists(os.path.join(out, "steps.json")):
        return folder.read_steps_meta(out)
    if os.path.lexists(os.path.join(out, "plan.json")):
        return folder.read_plan(out)
    return folder.read_meta(out)


def folder_arithmetics(out):
    """The arithmetics (arithmetic_id: library, version, kernel) the folder `out` records for
    its runs, each once, in order: every machine of its description that names a kernel, else
    its replay finding's (recorded_arithmetic); [] when it records none."""
    out = check_path("out", out, "a study folder", folder=True)
    desc = _description(out)
    ids = [arithmetic_id(m) for m in desc.get("machines", []) if isinstance(m, dict)
           and "kernel" in m]
    if not ids:
        rec = recorded_arithmetic(out, desc)
        ids = [arithmetic_id(rec)] if rec else []
    return list(dict.fromkeys(ids))


def kernels_differ(folders):
    """None when the folders set side by side record one arithmetic between them (or none that
    differ); else one line naming each folder and the arithmetic (BLAS kernel) it records ("not
    recorded" for a folder that records none), for a command to print beside its table."""
    if not (isinstance(folders, (list, tuple)) and folders and all(
            isinstance(f, (str, os.PathLike)) and not isinstance(f, bytes) for f in folders)):
        raise TypeError(f"folders must be a non-empty list of study folders, got {shown(folders)}")
    ids = {os.fspath(f): folder_arithmetics(f) for f in folders}
    if len({i for v in ids.values() for i in v}) < 2:
        return None
    return ("note: these folders' runs were made under different arithmetics (BLAS kernels); a "
            "borderline run can succeed under one and fail under another (studies.kernels): "
            + "; ".join(f"{f}: {' and '.join(v) or 'not recorded'}" for f, v in ids.items()))
