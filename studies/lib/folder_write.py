"""folder_write.py (studies/lib): a results folder's writing side, split from folder.py, which reads:
a session's CSV of runs written row by row (RowWriter: flushed and synced as each run finishes, a
torn tail cut away first, a file of an older header continued aside) and the folder's lock
(lock_folder: one command at a time per folder). What a row must be is row_kinds.py's."""
import csv
import errno
import os
import re
import stat

from studies.lib import row_kinds
from studies.lib.harness import check_path, shown


def _open_csv(path, fields=row_kinds.ROW_FIELDS):
    """(file, writer, fresh): `path` opened for appending rows, a header written first when the
    file is missing or has no complete header line yet (header_state "fresh"); a file of another
    header or of bytes that are no CSV is refused (ValueError naming it), never overwritten. A
    header that cannot be written (a full disk) leaves no file behind, and the OSError names the
    file."""
    state = row_kinds.header_state(path, fields)
    if state == "other":
        raise ValueError(f"{path} is not a CSV of runs this command writes (another header, or "
                         f"no CSV at all); refusing to write into it: move it away or use "
                         f"another folder")
    fresh = state == "fresh"
    fh = open(path, "w" if fresh else "a", newline="")
    writer = csv.DictWriter(fh, fieldnames=fields)
    if fresh:
        try:
            writer.writeheader()
            fh.flush()
        except OSError as e:
            try:
                fh.close()                   # flushes again, and fails again: still closed
            except OSError:
                pass
            try:
                os.remove(path)
            except OSError:
                pass
            raise OSError(e.errno, e.strerror or str(e), path) from None
    return fh, writer, fresh


def _drop_torn_tail(path):
    """Cut a CSV back to its last complete line, so appending cannot glue onto a torn row."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        text = f.read()
        if text and not text.endswith(b"\n"):
            f.truncate(text.rfind(b"\n") + 1)


def arithmetic_record(path):
    """The record of each run's arithmetic beside the CSV of runs `path` (OUT/arithmetic-of-
    NAME.csv, for rows a session adds under another arithmetic than its folder's), when it is
    free or a record this project wrote; a link, a folder, a device or a file of another header
    is a ValueError, one line naming it, never written into. Commands check it before they
    write anything (their folder's description): a refusal changes nothing."""
    path = check_path("path", path, "a CSV's path")
    name = os.path.basename(re.sub(r"(-part\d+)?(-shard-\d+-of-\d+)?\.csv$", "", path))
    side = os.path.join(os.path.dirname(path), f"arithmetic-of-{name}.csv")
    if os.path.lexists(side) and (os.path.islink(side) or row_kinds.header_state(
            side, ("run", "arithmetic")) == "other"):
        raise ValueError(f"{side} is not a record of runs' arithmetic this command wrote "
                         f"(another header, no CSV, a folder or a link); refusing to write into "
                         f"it: move it away")
    return side


class RowWriter:
    """This session's CSV of runs of one kind (SWEEP_ROWS, STEPS_ROWS): each row written, flushed
    and synced as it finishes, after a torn last line (a crash mid-write) is cut away, never
    appended to; a file under another header (an older version's) is never touched but
    continued aside (runs-part2.csv). If something replaces or removes the file under the
    command (a `git checkout` of a tracked results file did once: every later row went to a
    deleted file), the file is reopened and this session's rows it no longer holds are written
    back. Every OSError (a full disk) names the file."""

    def __init__(self, path, kind=row_kinds.SWEEP_ROWS, arithmetic_of=None):
        path = check_path("path", path, "a CSV's path")
        self.kind, self.sidecar = row_kinds.check_kind(kind), None
        if arithmetic_of is not None:  # the session's arithmetic differs from the folder's
            self.sidecar = (arithmetic_record(path), arithmetic_of)
        if os.path.islink(path):
            raise ValueError(f"{path} is a link; refusing to write rows through it (to a file "
                             f"that may lie outside the folder): move it away")
        k = 1
        while row_kinds.header_state(path, kind["fields"]) == "other":
            k += 1                 # written by an older version: never touched, continued aside
            path = re.sub(r"(-part\d+)?\.csv$", f"-part{k}.csv", path)
        if row_kinds.header_state(path, kind["fields"]) == "ours":
            _drop_torn_tail(path)   # only a file of ours is ever cut
        self.path, self.rows = path, []
        self.fh, self.writer, _ = _open_csv(path, kind["fields"])

    def write(self, row):
        if not isinstance(row, dict) or set(self.kind["fields"]) - set(self.kind["optional"]) - \
                set(row) or set(row) - set(self.kind["fields"]):
            raise ValueError(f"row must be a dict of the columns {', '.join(self.kind['fields'])}"
                             f" (the optional ones may be left out), got {shown(row)}")
        try:
            self._still_ours()
            self.writer.writerow(row)
            self.fh.flush()
            os.fsync(self.fh.fileno())
        except OSError as e:                # a full disk: one line that names the file
            raise OSError(e.errno, e.strerror or str(e), self.path) from None
        self.rows.append(row)
        if self.sidecar:
            self._record_arithmetic(row)

    def _record_arithmetic(self, row):
        """The row's arithmetic beside it: the run's name and the arithmetic's id (arithmetic_of:
        provenance.arithmetic_id of the session's record) in the sidecar."""
        path, rec = self.sidecar
        try:
            fresh = not os.path.exists(path)
            with open(path, "a", newline="") as f:
                w = csv.writer(f)
                if fresh:
                    w.writerow(["run", "arithmetic"])
                w.writerow([self.kind["name"](self.kind["run"](row)), rec])
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), path) from None

    def _still_ours(self):
        try:
            if os.stat(self.path).st_ino == os.fstat(self.fh.fileno()).st_ino:
                return
        except OSError:                            # removed
            pass
        self.close()
        if row_kinds.header_state(self.path, self.kind["fields"]) == "ours":
            _drop_torn_tail(self.path)
        self.fh, self.writer, fresh = _open_csv(self.path, self.kind["fields"])
        key = self.kind["run"]
        on_disk = {key(r) for r in ([] if fresh else row_kinds.read_rows([self.path], kind=self.kind))}
        back = [r for r in self.rows if key(r) not in on_disk]
        self.writer.writerows(back)
        print(f"warning: {self.path} was replaced or removed while this command wrote to it; "
              f"reopened it and wrote back {len(back)} rows of this session", flush=True)

    def close(self):
        try:
            self.fh.close()
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), self.path) from None


# ---------------------------------------------------------------- the lock and the machine

def lock_folder(out, shard=(0, 1), holder=None):
    """Hold an exclusive lock on OUT/.lock for this process's life, whatever the shard: one folder
    runs one command at a time (a sweep, a steps.py run, a report), so a second sweep, a shard
    beside the whole sweep, or shards of different splits (0/2 and 0/3) can never run the same
    searches twice and write duplicate rows, and a report never writes between a sweep's rows
    and its final report. A busy folder is a ValueError naming the process that holds it
    (`holder`, default: this pid and shard). The lock is the kernel's (flock), so a killed sweep
    never leaves a stale one. Where fcntl does not exist (Windows) there is no lock; None is
    returned. The lock file is removed when the lock is let go (close()). Shards that run at
    the same time write to folders of their own; copy their runs-shard-*.csv into one folder and
    report it."""
    check_path("out", out, "a folder")
    if not (isinstance(shard, (tuple, list)) and len(shard) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in shard)
            and 0 <= shard[0] < shard[1]):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shown(shard)}")
    if holder is not None and not isinstance(holder, str):
        raise TypeError(f"holder must be a str or None, got {shown(holder)}")
    try:
        import fcntl
    except ImportError:
        return None
    path = os.path.join(out, ".lock")
    for _ in range(10):
        fh = _open_lock(out, path)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            held = fh.read().strip() or "another process"
            fh.close()
            raise ValueError(f"{out} is in use by another sweep, steps.py run or report ({held}); "
                             f"one command writes into a folder at a time: wait for it, or use "
                             f"another --out") from None
        if _same_file(path, fh):
            break
        fh.close()           # its holder let it go and removed it meanwhile: take the new one
    else:
        raise ValueError(f"{out}: its lock file {path} keeps being replaced; is another command "
                         f"starting and stopping in it? Try again")
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(holder or f"pid {os.getpid()}, shard {shard[0]}/{shard[1]}")
        fh.flush()
    except OSError as e:                  # a full disk: one line naming the lock file
        _FolderLock(fh, path).close()
        raise OSError(e.errno, e.strerror or str(e), path) from None
    return _FolderLock(fh, path)


def _no_follow(path, flags):
    """open()'s opener for a lock file: never through a link (O_NOFOLLOW), never waiting on a
    FIFO (O_NONBLOCK)."""
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
                   0o666)


def _open_lock(out, path):
    """OUT/.lock opened (made when missing), when it is a regular file of its own: a link, a
    folder, a FIFO or a device at that name is refused, one line, and never opened."""
    def refuse():
        return ValueError(f"{path} is not a lock file (a link, a folder, a device or a pipe); a "
                          f"folder's lock is a regular file of its own: move it away")
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise refuse()
    try:
        fh = open(path, "a+", opener=_no_follow)
    except OSError as e:
        if e.errno == errno.ELOOP:                       # a link put there meanwhile
            raise refuse() from None
        raise ValueError(f"{out}: cannot lock the folder ({path}: {e.strerror}); a command "
                         f"that writes into a folder needs it writable") from None
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise refuse()
    return fh


def _same_file(path, fh):
    """Whether `path` still names the file open as fh."""
    try:
        a, b = os.lstat(path), os.fstat(fh.fileno())
    except OSError:
        return False
    return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)


class _FolderLock:
    """A folder's lock, held (lock_folder's). close() lets it go, and first removes OUT/.lock
    when it is still the file held: a folder holds a lock file only while a command runs in it,
    and a command that refused leaves none behind. One that opened the old file meanwhile sees
    it gone once it holds it (_same_file), and takes the new one."""

    def __init__(self, fh, path):
        self.fh, self.path = fh, path

    def close(self):
        if self.fh.closed:
            return
        if _same_file(self.path, self.fh):
            try:
                os.remove(self.path)
            except OSError:
                pass
        self.fh.close()
