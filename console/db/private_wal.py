"""Reading a WAL database through a private copy of its `-wal` alone, the main file where it is.

A crashed archon leaves a `-wal` without its `-shm`. SQLite can read that only by building a new
`-shm` beside the `-wal`, and it names both after the database's path with every symbolic link
resolved (a symlink in a private directory leads it straight back to the user's directory), so
until now the console copied the whole database to read a few megabytes of `-wal`. A hard link
instead would change the user's file (its link count and ctime, which `restore` counts) and cannot
cross file systems.

What SQLite needs is a *name* in a private directory and the user's *bytes* behind it. So:

1. the main file is opened `O_RDONLY` here and locked as a reader locks it, and the `-wal` is
   copied under that lock into a private 0700 directory (console/db/locked_copy.py `hold_wal`);
2. SQLite opens an empty placeholder of the database's name in that directory (`mode=ro`); SQLite
   opens a database's main file when the connection is made and reads nothing of it before the
   first statement that needs a page;
3. before that statement, the descriptor SQLite holds on the placeholder is replaced, with
   `dup2`, by ours on the user's main file (`borrow_descriptor`). Every read and every lock SQLite
   makes on "the database" from then on goes to the user's main file, through a descriptor that
   cannot write (the kernel refuses a write, and a write lock, on an `O_RDONLY` descriptor), while
   the `-wal` it reads and the `-shm` it builds are the private ones, named after the placeholder;
4. once SQLite has opened them (the first read), the private directory is removed: the copy then
   lives only as long as the connection's descriptors, so not even SIGKILL leaves it behind.

Nothing beside the database is created, opened for writing or changed; the temp directory holds
the `-wal`'s size and a `-shm`. The reader's SHARED lock on the main file stays held for the
connection's life, as any reader's does, so no last archon connection can checkpoint and delete the
`-wal` under it. What it cannot stop is a *new* archon, started meanwhile, checkpointing commits made
after the copy into the main file (the same limit as an `immutable=1` read, `open_quiet_wal`
below); console/db/readonly.py `stat_token` before and after tells a caller that must be exact.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from pathlib import Path
from typing import Callable

from console.db.connection import sqlite_connection
from console.db.file_guard import Connection, hold_descriptor, release_descriptor
from console.db.files import private_dir, reached
from console.db.locked_copy import WAL_HEADER_SIZE, HeldWal, hold_wal, take_shared_lock
from console.db.paths import sidecars

__all__ = ["backup_through", "borrow_descriptor", "no_commits_beside", "open_quiet_wal", "open_with_private_wal"]


def _placeholder(path: Path) -> int:
    """An empty 0600 file created exclusively: the name SQLite is given (nothing of the user's in it).

    Its descriptor is kept until the connection is closed: SQLite knows a file by device and inode
    for the life of the process (one lock table per inode), and a freed inode number is given to the
    next new file, which SQLite would then take for this one (a backup into it waits for ever on
    the reader's own lock). The placeholder holds no lock, so closing it later drops nothing.
    """
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def borrow_descriptor(conn: Connection, placeholder_fd: int, fd: int, path: Path | None) -> None:
    """Point the descriptor SQLite holds on `placeholder` at what `fd` is open on (`dup2`).

    SQLite's descriptor is the only one open on the placeholder besides ours, `placeholder_fd` (it
    was created by us in a 0700 directory), found by device and inode among this process's descriptors. Anything else, none
    found (a SQLite that opened the file lazily) or several, is an `OSError`: the caller then reads
    another way, since SQLite would otherwise read the empty placeholder.

    The connection is then registered as holding `path` (console/db/file_guard.py), whose locks it
    now takes, or nothing (None: a file of our own); never the placeholder, whose inode number the
    file system gives the next new file once it is removed.
    """
    placeholder = os.fstat(placeholder_fd)
    key = (placeholder.st_dev, placeholder.st_ino)
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            status = os.fstat(int(name))
        except (OSError, ValueError):
            continue
        if (status.st_dev, status.st_ino) == key and int(name) != placeholder_fd:
            found.append(int(name))
    if len(found) != 1:
        raise OSError(errno.EBADF, f"SQLite holds {len(found)} descriptors on its placeholder, not one")
    os.dup2(fd, found[0], inheritable=False)
    status = os.fstat(fd)
    conn.locked_file = os.path.realpath(path) if path is not None else None
    conn.locked_inode = (status.st_dev, status.st_ino) if path is not None else None


def open_with_private_wal(
    path: Path, connect: Callable[[str], Connection], uri: Callable[[Path], str], *,
    timeout_s: float, live_ok: bool = False,
) -> tuple[Connection, Callable[[], None], str] | None:
    """Read the WAL database `path` through a private copy of its -wal (module docstring).

    `connect(uri(placeholder))` opens a read-only connection (the caller's PRAGMAs run in it; none
    reads the database). With `live_ok`, a -shm beside the -wal is locked against checkpoints until
    `cleanup` (support mode: a running archon's file, every byte of it left alone); without it, a
    -shm means SQLite can read in place, and None is returned, as when the -wal is gone. A side file
    that cannot be read is refused before anything is created (`hold_wal`).
    """
    import shutil  # only here, not on every open of a WAL file

    held: HeldWal | None = hold_wal(path, timeout_s=timeout_s, live_ok=live_ok)
    if held is None:
        return None
    workdir: Path | None = None
    conn = None
    placeholder_fd: int | None = None
    registered = unborrowed = False
    try:
        workdir = private_dir("ro")
        held.copy_wal(workdir / f"{path.name}-wal")
        placeholder_fd = _placeholder(workdir / path.name)
        # From here this process reads the user's file through SQLite: nothing else here may open
        # and close it (console/db/file_guard.py), and its locks are counted as a connection's.
        hold_descriptor(held.main_fd, path)
        registered = True
        reached("private-copy")
        conn = connect(uri(workdir / path.name))
        try:
            borrow_descriptor(conn, placeholder_fd, held.main_fd, path)
        except OSError:
            unborrowed = True
            raise
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the -wal, builds the -shm
        shutil.rmtree(workdir, ignore_errors=True)
        workdir = None
        reached("private-copy-open")
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        if registered:
            release_descriptor(held.main_fd)
        held.release()
        if placeholder_fd is not None:
            os.close(placeholder_fd)
        if unborrowed or (isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)):
            return None  # no descriptor to borrow, or damage: the caller's private copy (doctor describes it)
        raise
    conn.source_uri = None  # nothing is left at the placeholder's path to reconnect to

    def cleanup() -> None:
        release_descriptor(held.main_fd)
        held.release()
        os.close(placeholder_fd)

    return conn, cleanup, ("private copy of the -wal, the main file read in place ("
                           + ("a running archon's file, held still" if held.shm_fd is not None
                              else "no -shm beside it: a reader would create one") + ")")


def backup_through(source: sqlite3.Connection, fd: int, scratch: Path) -> bool:
    """Copy `source` with the backup API into the empty file open read-write on `fd`, as a single
    rollback-journal file; False (nothing written) when SQLite's descriptor cannot be borrowed.

    The same borrowing as above, the other way: SQLite writes through `fd` (a partial file created
    exclusively in a directory held by descriptor, console/db/readonly.py `snapshot_copy`) while
    the names it derives, the journal and the -wal the switch to rollback mode passes through, are
    in the private `scratch` directory. So the snapshot is written once, where it is kept.
    """
    name = scratch / "snapshot.sqlite"
    placeholder_fd = _placeholder(name)
    try:
        dst = sqlite_connection(str(name))
    except BaseException:
        os.close(placeholder_fd)
        raise
    try:
        try:
            borrow_descriptor(dst, placeholder_fd, fd, None)
        except OSError:
            return False
        source.backup(dst)
        try:
            dst.execute("PRAGMA journal_mode = DELETE").fetchone()  # page 1 was copied in WAL mode
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError:
            pass  # the pages are copied; a damaged page 1 stays as it was
    finally:
        dst.close()
        os.close(placeholder_fd)
    return True


def no_commits_beside(path: Path) -> bool:
    """No -wal, or (no -shm and) a -wal no longer than its header: SQLite reads no frame of it, so
    every commit is in the main file. The side files are SQLite's (`sidecars`: beside a symlink's target)."""
    side = sidecars(path)
    try:
        size = os.stat(side["-wal"]).st_size
    except FileNotFoundError:
        return True
    return size <= WAL_HEADER_SIZE and not os.path.exists(side["-shm"])


def _let_go(fd: int) -> None:
    release_descriptor(fd)
    try:
        os.close(fd)
    except OSError:
        pass


def open_quiet_wal(path: Path, connect: Callable[[str], Connection], uri: Callable[..., str], *,
                   timeout_s: float) -> tuple[Connection, Callable[[], None], str] | None:
    """A WAL file nobody has open (`no_commits_beside`: a -shm alone counts, no connection lives
    without its -wal): every commit is in the main file.

    `immutable=1` reads it without locks or side files. We hold a SQLite SHARED lock through our
    own descriptor meanwhile, so a connection that opens and closes in between cannot checkpoint
    and delete under us; a checkpoint by a newly started archon is still possible, which is why
    callers that must be exact compare `stat_token` before and after (doctor does). None when the
    files changed before the lock was taken: the caller looks again.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    hold_descriptor(fd, path)  # its lock counts like a connection's (console/db/file_guard.py)
    try:
        take_shared_lock(fd, time.monotonic() + timeout_s)
        if not no_commits_beside(path):  # someone opened it meanwhile: look again
            _let_go(fd)
            return None
        conn = connect(uri(path, immutable="1"))
    except BaseException:
        _let_go(fd)
        raise

    def cleanup() -> None:
        _let_go(fd)

    return conn, cleanup, ("in place (immutable: no -wal)" if not os.path.exists(sidecars(path)["-wal"])
                           else "in place (immutable: an empty -wal)")
