"""A private byte copy of a database, or of its `-wal` alone, taken under SQLite's own read locks.

Where SQLite cannot read a WAL file in place without creating a side file, or must not write even
its read mark (support mode), the `-wal` is copied here (`hold_wal`) and the main file read where it
is (console/db/private_wal.py); a file whose hot journal must be rolled back, or that is damaged, is
copied whole (`private_copy`, console/db/readonly.py's fallback). Either way:

1. open the main file `O_RDONLY` and take the same POSIX read lock a SQLite reader takes (PENDING
   byte, then the 510-byte SHARED range). In rollback-journal mode that keeps writers from
   committing while we copy; in WAL mode it stops the last connection from checkpointing and
   deleting the `-wal` under us;
2. in WAL mode, when `-shm` exists, open it `O_RDONLY` and read-lock the checkpoint byte (shm lock
   offset 120 + 1, as os_unix.c does). No checkpoint can then write the main file, so the main file
   is stable and the `-wal` only grows (or restarts, which happens only once everything is in the
   main file); because WAL recovery keeps only the valid prefix of salted, checksummed frames up
   to the last commit, any byte copy of it taken now is a consistent commit point;
3. copy the main file and the `-wal` (or a leftover `-journal`) into a private 0700 directory and
   release the locks (`hold_wal` copies the `-wal` alone and keeps the locks until its reader is
   done). SQLite then replays the WAL (or rolls back the hot journal) in our own directory.

The lock trick relies on POSIX advisory locks, which are per process: never open the *original*
with SQLite in the same process while copying (closing our descriptor would drop its locks).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from console.records import dataclass, field
from pathlib import Path

from console.db.connection import SQLITE_HEADER
from console.db.files import private_dir
from console.db.paths import chosen_by, no_database, nonempty_file, require_database_file, sidecars
from console.errors import DatabaseUnusable, Refusal

PENDING_BYTE = 0x40000000
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
SHM_LOCK_BASE = 120  # (22 + SQLITE_SHM_NLOCK) * 4 in os_unix.c
WAL_CKPT_LOCK = 1
DEFAULT_LOCK_TIMEOUT_S = 10.0
COPY_CHUNK = 8 << 20

__all__ = [
    "DEFAULT_LOCK_TIMEOUT_S",
    "CopyResult",
    "HeldWal",
    "WAL_HEADER_SIZE",
    "hold_wal",
    "unreadable_side",
    "WHY_SHM",
    "WHY_WAL",
    "check_header",
    "is_wal_header",
    "private_copy",
    "take_shared_lock",
]


def is_wal_header(header: bytes) -> bool:
    """File format bytes 18 and 19 are 2 in WAL mode."""
    return len(header) >= 20 and header[18] == 2 and header[19] == 2


def check_header(path: Path, header: bytes, size: int) -> None:
    """Refuse an empty file or one without the SQLite header, in one sentence."""
    if size == 0:
        raise DatabaseUnusable(f"{path} is empty (0 bytes), not an archon database.", chosen_by(path))
    if header[: len(SQLITE_HEADER)] != SQLITE_HEADER:
        raise DatabaseUnusable(f"{path} is not a SQLite database (its header is wrong).", chosen_by(path))


def _lock(fd: int, start: int, length: int, deadline: float, what: str) -> None:
    """A shared POSIX lock, retried until `deadline` (a writer holds these for milliseconds)."""
    delay = 0.002
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, length, start, os.SEEK_SET)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            raise Refusal(
                f"The database is busy: another process held {what} for too long to take a consistent copy.",
                "Nothing was changed. Try again in a moment, or stop archon first.",
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _unlock(fd: int, start: int, length: int) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_UN, length, start, os.SEEK_SET)
    except OSError:
        pass


def take_shared_lock(fd: int, deadline: float) -> None:
    """SQLite's own SHARED lock on the main file: the PENDING byte first (so a waiting writer is
    not starved), then the SHARED range, then let go of PENDING. Held until `fd` is closed."""
    _lock(fd, PENDING_BYTE, 1, deadline, "the write lock")
    try:
        _lock(fd, SHARED_FIRST, SHARED_SIZE, deadline, "the write lock")
    finally:
        _unlock(fd, PENDING_BYTE, 1)


def _copy_fd(src_fd: int, dest: Path, limit: int) -> int:
    """Copy at most `limit` bytes (the size stat'ed before the room was checked) from an open
    descriptor into a new 0600 file (kernel copy where possible): a file that grows meanwhile
    cannot fill the disk, and a WAL prefix is still a consistent commit point (module docstring)."""
    copied = 0
    out_fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(out_fd, "wb") as out:
        try:
            while copied < limit:
                n = os.copy_file_range(src_fd, out_fd, min(COPY_CHUNK, limit - copied), copied, copied)
                if n == 0:
                    break
                copied += n
        except OSError:
            # Fall back to plain reads (filesystems without copy_file_range).
            out.seek(0)
            out.truncate()
            copied = 0
            while copied < limit:
                chunk = os.pread(src_fd, min(COPY_CHUNK, limit - copied), copied)
                if not chunk:
                    break
                out.write(chunk)
                copied += len(chunk)
    return copied


def _open_side(side: Path) -> int | None:
    """A sidecar opened without following a link or waiting on a FIFO (`O_NOFOLLOW|O_NONBLOCK`),
    and only when it is a regular file (console/db/paths.py `require_regular_sidecars` said so
    already; this closes the gap between that `lstat` and the open). None when it is absent."""
    try:
        fd = os.open(side, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DatabaseUnusable(f"{side} is a symbolic link; SQLite's side file must be a regular file, "
                                   "so the database is not read.") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DatabaseUnusable(f"{side} is not a regular file; SQLite's side file must be one, so the "
                               "database is not read.")
    return fd


def _require_room(path: Path, workdir: Path, sizes: list[int], room_factor: int) -> None:
    """Refuse before copying when the copy cannot fit: apparent sizes count (a sparse 20 GB file
    takes 20 GB once copied), so the temp directory is never filled before the error."""
    needed = sum(sizes) * room_factor
    vfs = os.statvfs(workdir)
    free = vfs.f_bavail * vfs.f_frsize
    if needed > free:
        raise DatabaseUnusable(
            f"{path} needs a private copy of {needed:,} bytes and {workdir.parent} has {free:,} free; "
            "nothing was copied.", "Point TMPDIR at a directory with room for a copy of the database.")


@dataclass
class CopyResult:
    """A private byte copy of a database and its WAL or journal, not yet opened."""

    path: Path
    workdir: Path
    wal: bool
    copied: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def private_copy(
    path: str | Path,
    workdir: str | Path | None = None,
    *,
    timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    room_factor: int = 1,
) -> CopyResult:
    """Copy `path` (and its -wal / -journal) into a private directory under SQLite's read locks.

    Never creates, opens for writing, or modifies anything next to `path`. Side files are opened
    `O_NOFOLLOW|O_NONBLOCK` and must be regular; every copy is bounded by the size stat'ed before
    the free-space check (`room_factor` copies of it must fit: a caller that copies again).
    """
    path = Path(path).expanduser()
    if workdir is None:
        workdir = private_dir("copy")
    workdir = Path(workdir)
    workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The main file and its side files are regular files (lstat only, before anything is opened).
    require_database_file(path)
    real = os.path.realpath(path)  # the file its side files are named after (`sidecars`)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not hang us
    except FileNotFoundError:  # removed since the stat above
        raise no_database(path) from None
    except OSError as exc:
        raise DatabaseUnusable(f"Cannot read {path}: {exc.strerror or exc}.") from None
    dest = workdir / path.name
    result = CopyResult(path=dest, workdir=workdir, wal=False)
    shm_fd: int | None = None
    deadline = time.monotonic() + timeout_s
    side_fds: dict[str, int] = {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DatabaseUnusable(f"{path} is not a regular file, so it is not a database file.")
        size = st.st_size
        header = os.pread(fd, 100, 0)
        check_header(path, header, size)
        take_shared_lock(fd, deadline)
        header = os.pread(fd, 100, 0)  # re-read under the lock
        result.wal = is_wal_header(header)
        side = sidecars(Path(real))
        if result.wal:
            try:
                shm_fd = _open_side(side["-shm"])
            except OSError as exc:
                result.notes.append(f"-shm unreadable ({exc.strerror}); copied without the checkpoint lock")
            if shm_fd is None:
                result.notes.append("no -shm: no live connection, nothing can checkpoint meanwhile")
            else:
                _lock(shm_fd, SHM_LOCK_BASE + WAL_CKPT_LOCK, 1, deadline, "the checkpoint lock")
            wanted = "-wal"
        else:
            # A journal beside a file we hold SHARED on is either hot (a crashed writer: the copy
            # must roll it back) or an active writer's pre-images, equal to the main file while we
            # hold the lock: rolling it back in the copy is harmless either way.
            wanted = "-journal" if nonempty_file(side["-journal"]) else None
        if wanted is not None:
            fd_side = _open_side(side[wanted])
            if fd_side is not None:
                side_fds[wanted] = fd_side
        sizes = {"main": os.fstat(fd).st_size, **{k: os.fstat(v).st_size for k, v in side_fds.items()}}
        _require_room(path, workdir, list(sizes.values()), room_factor)
        result.copied["main"] = _copy_fd(fd, dest, sizes["main"])
        for suffix, side_fd in side_fds.items():
            result.copied[suffix] = _copy_fd(side_fd, Path(f"{dest}{suffix}"), sizes[suffix])
    finally:
        for side_fd in side_fds.values():
            os.close(side_fd)
        if shm_fd is not None:
            os.close(shm_fd)  # releases the checkpoint lock
        os.close(fd)  # releases the SHARED lock
    return result


WAL_HEADER_SIZE = 32  # a -wal no longer than its header holds no frame (SQLite's wal.c reads none)
SHM_ROOM = 1 << 16  # the fresh -shm SQLite builds beside a private -wal: 32 KiB per 4096 frames


@dataclass
class HeldWal:
    """A WAL database held still under SQLite's read locks, its `-wal` open and not yet copied.

    `main_fd` carries the SHARED lock on the main file (no last connection can checkpoint and
    delete the -wal); `shm_fd`, when a -shm exists, the checkpoint lock (no checkpoint can write the
    main file). Both stay held until `release`: while they are, the main file does not change, so
    reading it where it is beside a copy of the -wal is reading one commit point.
    """

    path: Path
    main_fd: int
    shm_fd: int | None
    wal_fd: int | None
    wal_size: int

    def copy_wal(self, dest: Path) -> int:
        """Copy the -wal (as long as it was when held) to the new file `dest`, after checking the
        room for it and the index SQLite builds beside it; the -wal's descriptor is closed."""
        try:
            _require_room(self.path, dest.parent, [self.wal_size + SHM_ROOM], 1)
            return _copy_fd(self.wal_fd, dest, self.wal_size)
        finally:
            os.close(self.wal_fd)
            self.wal_fd = None

    def release(self) -> None:
        for fd in (self.wal_fd, self.shm_fd, self.main_fd):  # the main file last: its SHARED lock
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.wal_fd = self.shm_fd = None


WHY_WAL = "it holds commits that are not in the main file yet"
WHY_SHM = "without it nothing keeps a running archon from checkpointing into the main file while it is read"


def unreadable_side(side: Path, exc: OSError, why: str) -> DatabaseUnusable:
    """The one sentence for a -wal or -shm this user cannot read (exit 3), said before any copy."""
    return DatabaseUnusable(
        f"{side} cannot be read ({exc.strerror or exc}): {why}, so the database is not read and nothing "
        "was copied.", "Run the command as a user who can read the database's -wal and -shm (archon's own).")


def hold_wal(path: Path, *, timeout_s: float, live_ok: bool) -> HeldWal | None:
    """Lock the WAL database `path` as a reader and open its -wal, copying nothing yet.

    None when the files are no longer what the caller saw: the -wal is gone (a last connection
    checkpointed and deleted it), or a -shm exists and `live_ok` is False (a connection opened it:
    SQLite can read it in place). A side file that exists but cannot be read is refused here, in
    one sentence, before anything is created or copied.
    """
    real = os.path.realpath(path)  # the file its side files are named after, whatever a link names later
    side = sidecars(Path(real))
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise no_database(path) from None
    except OSError as exc:
        raise DatabaseUnusable(f"Cannot read {path}: {exc.strerror or exc}.") from None
    shm_fd = wal_fd = None
    held = False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DatabaseUnusable(f"{path} is not a regular file, so it is not a database file.")
        deadline = time.monotonic() + timeout_s
        take_shared_lock(fd, deadline)
        try:
            shm_fd = _open_side(side["-shm"])
        except PermissionError as exc:
            raise unreadable_side(side["-shm"], exc, WHY_SHM) from None
        if shm_fd is not None:
            if not live_ok:
                return None
            _lock(shm_fd, SHM_LOCK_BASE + WAL_CKPT_LOCK, 1, deadline, "the checkpoint lock")
        try:
            wal_fd = _open_side(side["-wal"])
        except PermissionError as exc:
            raise unreadable_side(side["-wal"], exc, WHY_WAL) from None
        if wal_fd is None:
            return None
        held = True
        return HeldWal(path, fd, shm_fd, wal_fd, os.fstat(wal_fd).st_size)
    finally:
        if not held:
            for other in (wal_fd, shm_fd, fd):
                if other is not None:
                    os.close(other)
