"""Is anybody else using this database? Asked of the locks themselves, never of path names.

A path comparison (`/proc/*/fd`) misses archon running as another user, and access through a bind
mount or a container's path. Every SQLite connection, whoever runs it and by whatever path it found
the file, takes POSIX record locks on the same inode, and the kernel answers for all of them:

* a connection inside a transaction holds a lock in the main file's lock range (SQLite's unix VFS:
  PENDING_BYTE 0x40000000, the RESERVED byte after it, then the 510-byte SHARED range);
* a connection to a WAL database holds a SHARED lock on the main file and a read lock on the
  WAL-index's DMS byte (byte 128 of `-shm`) for as long as it is open, busy or idle.

So taking SQLite's EXCLUSIVE lock (a write lock over that whole range) and a write lock over the
`-shm` lock bytes, without waiting, succeeds only when nobody else holds a lock there. What no lock
can show is a connection to a rollback-journal database that is open but idle: SQLite itself holds
nothing then, and neither can anyone see it.

POSIX locks belong to a process and a file: closing any descriptor of the file drops all the
process's locks on it. `settle` therefore works only through one SQLite connection, and
`held_exclusively` only through raw descriptors, and the caller runs them one after the other,
never with a connection open while `held_exclusively` opens or closes the files.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import struct
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator
from urllib.parse import quote

from console.db import file_guard
from console.db.connection import sqlite_connection
from console.text import one_line

# sqlite3 os_unix.c / sqliteInt.h
PENDING_BYTE = 0x40000000
LOCK_RANGE = 2 + 510  # PENDING, RESERVED and the SHARED range
SHM_LOCK_FIRST = 120  # WALINDEX_LOCK_OFFSET: WRITE, CKPT, RECOVER, READ0..4, then DMS at 128
SHM_LOCK_BYTES = 9


class InUse(Exception):
    """Another process (of any user) holds a SQLite lock on the file."""


class CannotCheck(Exception):
    """The lock could not be tried at all (permissions, the file changed under us)."""


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def settle(path: Path, busy_timeout_ms: int) -> None:
    """Through SQLite's own protocol: take the EXCLUSIVE lock, fold a WAL into the main file, let go.

    `locking_mode = EXCLUSIVE` makes even a WAL connection take the main file's EXCLUSIVE lock, which
    it gets only when no other connection holds its SHARED one. The WAL is checkpointed into the file
    under that lock (its journal mode stays as it is), and closing the connection, the last one,
    removes the emptied `-wal`: the file is self-contained afterwards.
    A file SQLite cannot read (damaged) raises nothing here: `held_exclusively` still checks it.
    """
    uri = f"file:{quote(str(path.resolve()))}?mode=rw"
    try:
        conn = sqlite_connection(uri, uri=True, timeout=max(busy_timeout_ms, 0) / 1000)
    except sqlite3.Error as exc:
        raise CannotCheck(str(exc)) from None
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("ROLLBACK")  # the lock stays: locking_mode is EXCLUSIVE
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
            if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
                raise InUse()
    except sqlite3.OperationalError as exc:
        if _busy(exc):
            raise InUse() from None
        if "readonly" in str(exc):
            raise CannotCheck(str(exc)) from None
        # anything else: a damaged file, which is what a restore replaces; the raw check follows
    except sqlite3.DatabaseError:
        pass
    finally:
        conn.close()


def _try_write_lock(fd: int, start: int, length: int) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise InUse() from None
        raise CannotCheck(exc.strerror or str(exc)) from None


@contextmanager
def held_exclusively(path: Path) -> Iterator[tuple[int, os.stat_result]]:
    """Hold SQLite's EXCLUSIVE lock on `path` and the `-shm` lock bytes, without waiting.

    Raises `InUse` if anyone holds a lock there. While held, no SQLite connection anywhere can start
    a transaction on the file. Yields the locked descriptor (read the file through it: opening and
    closing another descriptor would drop the locks) and the file's status (owner, group, mode). The
    process must hold no SQLite connection to the file meanwhile (see the module docstring).
    """
    fds: list[int] = []
    try:
        try:
            main = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise CannotCheck(exc.strerror or str(exc)) from None
        fds.append(main)
        _try_write_lock(main, PENDING_BYTE, LOCK_RANGE)
        shm = Path(f"{path}-shm")
        try:
            shm_fd = os.open(shm, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            shm_fd = None
        except OSError as exc:
            raise CannotCheck(f"{shm}: {exc.strerror or exc}") from None
        if shm_fd is not None:
            fds.append(shm_fd)
            _try_write_lock(shm_fd, SHM_LOCK_FIRST, SHM_LOCK_BYTES)
        status = os.fstat(main)
        try:
            now = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise CannotCheck(exc.strerror or str(exc)) from None
        if (now.st_dev, now.st_ino) != (status.st_dev, status.st_ino):
            raise CannotCheck("the file was replaced while its lock was taken")
        yield main, status
    finally:
        for fd in reversed(fds):  # closing drops the locks: only ours, no connection is open here
            os.close(fd)


# --- who holds it: asked without taking anything -----------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """A process holding a SQLite lock on the file: its pid (None when the kernel cannot name it:
    another pid namespace) and its command line (None when /proc does not show it to us)."""

    pid: int | None
    command: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "a process the kernel does not name to this console (another container or pid namespace)"
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


def _command(pid: int) -> str | None:
    """The holder's command line, bounded; None when /proc hides it (another user under hidepid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    return one_line(" ".join(words), 200) or None


def _key(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def _overlaps(start: str, end: str, first: int, length: int) -> bool:
    try:
        lo = int(start)
        hi = float("inf") if end == "EOF" else int(end)
    except ValueError:
        return True
    return lo <= first + length - 1 and hi >= first


_TABLE_READS = 8  # whole reads of /proc/locks at most, while other processes keep changing it


def _lock_table() -> list[str] | None:
    """Every row of /proc/locks seen while asking; None when it cannot be read.

    The kernel hands the table out one page (4 KB) per read, each read resuming at a row number: when
    any process takes or lets go of a lock between two of them, a row is shown twice or skipped, and
    a skipped row is a holder missed (tests/adversarial/test_proc_locks.py). So the table is read
    whole until two reads in a row agree byte for byte (nothing moved between them), at most
    `_TABLE_READS` times, and the rows of every read count: a lock held throughout is missed only if
    every read skipped it, and one let go meanwhile still counts, on the safe side (a caller that
    waits asks again)."""
    rows: dict[str, None] = {}
    previous = None
    for _ in range(_TABLE_READS):
        try:
            with open("/proc/locks", encoding="ascii", errors="replace") as table:
                text = table.read()
        except OSError:
            return None
        rows.update(dict.fromkeys(text.splitlines()))
        if text == previous:
            break
        previous = text
    return list(rows)


def _from_proc_locks(path: Path) -> set[int | None] | None:
    """Pids holding a lock in SQLite's ranges of the main file or its `-shm`, from /proc/locks (which
    lists every process's locks, of any user, by device and inode); None when it cannot be read."""
    ranges = {}
    main = _key(str(path))
    if main is not None:
        ranges[main.lower()] = (PENDING_BYTE, LOCK_RANGE)
    shm = _key(f"{path}-shm")
    if shm is not None:
        ranges[shm.lower()] = (SHM_LOCK_FIRST, SHM_LOCK_BYTES)
    lines = _lock_table()
    if lines is None:
        return None
    pids: set[int | None] = set()
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 8 or fields[1] not in ("POSIX", "OFDLCK"):
            continue  # a waiter, or a flock(2) lock (SQLite takes none)
        wanted = ranges.get(fields[5].lower())
        if wanted is None or not _overlaps(fields[6], fields[7], *wanted):
            continue
        try:
            pid = int(fields[4])
        except ValueError:
            pid = 0
        pids.add(pid if pid > 0 else None)  # 0: another pid namespace; -1: an OFD lock
    return pids


_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid


def _from_getlk(path: Path) -> set[int | None]:
    """The kernel's F_GETLK, where /proc/locks is unreadable: one holder at most, never this process.
    Opens and closes the files, so only for a process without a connection to them."""
    pids: set[int | None] = set()
    for name, first, length in ((str(path), PENDING_BYTE, LOCK_RANGE), (f"{path}-shm", SHM_LOCK_FIRST, SHM_LOCK_BYTES)):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, first, length, 0))
        except OSError:
            pids.add(None)  # cannot ask: count it as in use (fail closed)
            continue
        finally:
            os.close(fd)
        kind, _whence, _start, _len, pid = _FLOCK.unpack(answer[:_FLOCK.size])
        if kind != fcntl.F_UNLCK:
            pids.add(pid if pid > 0 else None)
    return pids


def holders(path: Path, *, ignore: Iterable[int] = ()) -> list[Holder]:
    """Every other process holding a SQLite lock on `path` (main file or `-shm`), whoever runs it.

    Nothing is taken, so nobody is disturbed, and this process's own connections never count; nor
    do the pids in `ignore` (the TUI that started an isolated upgrade: its own connection holds a
    SHARED lock on a WAL file for its whole life). /proc/locks names every holder; where it cannot
    be read the kernel's F_GETLK names one (only in a process without a connection to the file: it
    opens and closes the files, which would drop that connection's locks). Blind to what no lock shows: a connection to a
    rollback-journal file that is open but idle (the module docstring).
    """
    skip = {os.getpid(), *ignore}
    pids = _from_proc_locks(path)
    if pids is None:
        pids = set() if file_guard.connected_file(path) is not None else _from_getlk(path)
    return [Holder(pid, _command(pid) if pid is not None else None)
            for pid in sorted((p for p in pids if p not in skip), key=lambda p: (p is None, p or 0))]


def wait_until_free(path: Path, seconds: float, *, ignore: Iterable[int] = (), poll: float = 0.05) -> list[Holder]:
    """`holders`, asked again until there are none or `seconds` have passed (the busy-timeout bound)."""
    deadline = time.monotonic() + max(seconds, 0.0)
    ignore = tuple(ignore)
    while True:
        found = holders(path, ignore=ignore)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))


__all__ = ["CannotCheck", "Holder", "InUse", "held_exclusively", "holders", "settle", "wait_until_free"]
