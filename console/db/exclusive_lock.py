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
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from console.db.connect import sqlite_connection

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


__all__ = ["CannotCheck", "InUse", "held_exclusively", "settle"]
