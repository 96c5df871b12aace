"""Reading a user's database without leaving a trace next to it.

Why not just `mode=ro`? On a WAL database SQLite's read-only connection still opens the `-shm`
read-write and creates `-shm` *and* `-wal` when they are missing and the directory is writable
(checked on 3.40.1: a `mode=ro` read of a WAL file with no `-wal` leaves both files behind), and
a reader writes its read marks into the shared `-shm`. `immutable=1` leaves no trace but ignores
the `-wal`, so uncheckpointed commits are silently missing. Neither keeps the promise "no byte,
mtime or directory entry next to the original changes".

Two kinds of reader therefore live here. Read-only commands (`open_read_only`) read in place
whenever SQLite can do it without creating anything: a WAL file whose `-wal` and `-shm` both exist
and are readable is opened `mode=ro`, like any archon reader (the main file and `-wal` are never
written; the `-shm` changes only by the read mark every reader writes). Support mode (`inspect`,
`snapshot_copy`) promises more, every byte including the `-shm` unchanged. Where SQLite would have
to create a side file, neither copies the database: a WAL file with no `-wal` (a `-shm` alone, or
nothing), or an empty one and no `-shm`, holds every commit in its main file and is read
`immutable=1`; one with a `-wal` but no `-shm` (a crashed archon), and in support mode any WAL file
with a `-wal`, is read where it is beside a private copy of its `-wal` alone
(console/db/private_wal.py). A side file this user cannot read is refused in one sentence before
anything is copied. Only a leftover rollback journal (SQLite must roll it back, which writes), a
file SQLite cannot read that way (damage), or `force_copy` go through a private copy of the whole
file taken under SQLite's own read locks (console/db/locked_copy.py), where SQLite replays the WAL
(or rolls back a hot journal) in our own directory; it is removed when the connection is closed
(the `how` of each reader says which it is).

`snapshot_copy` runs the SQLite backup API from such a reader straight into the snapshot file, a
single rollback-journal file: the database is written once.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from functools import partial as partial_
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Callable

from urllib.parse import quote

from console.db.connection import sqlite_connection
from console.db.file_guard import Connection, read_head
from console.db.rows import text_row
from console.db.files import (
    create_exclusive,
    create_exclusive_at,
    open_output_dir,
    private_dir,
    publish_at,
    reached,
    remove_stale,
    require_output_dir,
    temp_prefix,
)
from console.db.locked_copy import (
    DEFAULT_LOCK_TIMEOUT_S,
    WHY_SHM,
    WHY_WAL,
    CopyResult,
    check_header,
    is_wal_header,
    private_copy,
    unreadable_side,
)
from console.db.paths import nonempty_file, require_database_file, sidecars
from console.errors import DatabaseUnusable, UsageError

__all__ = [
    "open_read_only",
    "reconnect",
    "ro_uri",
    "snapshot_copy",
    "stat_token",
]


def ro_uri(path: Path, **extra: str) -> str:
    params = {"mode": "ro", **extra}
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(Path(path).resolve()))}?{query}"


class ReadOnlyConnection(Connection):
    """A connection that remembers how to open another one on the same file without side effects
    (`source_uri`), e.g. for doctor's integrity scan on a second thread."""

    source_uri: str | None = None


def _connect(uri_or_path: str, *, uri: bool, setup: tuple[str, ...] = ()) -> ReadOnlyConnection:
    source = uri_or_path if uri else ro_uri(Path(uri_or_path))
    conn = sqlite_connection(uri_or_path, uri=uri, setup=setup, check_same_thread=False, factory=ReadOnlyConnection)
    conn.source_uri = source
    conn.row_factory = text_row  # a BLOB reads as text (console/db/rows.py)
    return conn


def reconnect(conn: sqlite3.Connection) -> sqlite3.Connection | None:
    """A second read-only connection on the same file, or None when unsafe to make one."""
    uri = getattr(conn, "source_uri", None)
    if not uri:
        return None
    return sqlite_connection(uri, uri=True, setup=("PRAGMA query_only = ON",), check_same_thread=False)


def _open_copy(copy: CopyResult, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open the private copy read-write (in our directory) so SQLite replays its WAL/journal."""
    return _connect(str(copy.path), uri=False, setup=(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}",))


def snapshot_copy(
    path: str | Path,
    dest_dir: str | Path,
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    option: str = "The snapshot directory",
) -> Path:
    """A consistent single-file copy of `path` made with the backup API, in `dest_dir`.

    The snapshot is in rollback-journal mode (no -wal needed beside it) and contains every commit
    that was in the original's -wal when the copy was taken. All scratch work (the private copy,
    the backup) happens in a private 0700 directory in the temp directory; `dest_dir` must be safe
    to write in (console/db/files.py `require_output_dir`: `option` names it in refusals) and only
    receives the finished bytes, through a descriptor held on that directory, in a file created
    exclusively (0600) and published without following or replacing anything. A failed write (a
    full disk) removes what it wrote and says so in one sentence (exit 3).
    """
    path = Path(path).expanduser()
    dest_dir = require_output_dir(dest_dir, option, create=True)
    final = dest_dir / (name or f"{path.stem}.snapshot.sqlite")
    if os.path.lexists(final):
        raise UsageError(f"{final} already exists; a snapshot never overwrites a file (or follows a link).",
                         "Choose another directory, or move that file away.")
    remove_stale(dest_dir)  # what killed runs left here: it takes space and holds user data
    # From here on the directory checked is the one written: renaming it, or putting another in its
    # place, changes nothing about where the snapshot lands.
    dir_fd: int | None = open_output_dir(dest_dir, option)
    scratch: Path | None = None
    partial: str | None = None
    try:
        try:
            scratch = private_dir("scratch")
        except OSError as exc:
            raise _no_private_copy(path, exc) from None
        reached("scratch")
        out_fd, partial = create_exclusive_at(dir_fd, temp_prefix("keep") + final.name + ".", ".partial")
        if not _backup_in_place(path, scratch, dir_fd, partial, out_fd, timeout_s):
            # A hot journal, or damage the backup API stops at: replayed in a private copy first.
            # Room for the private copy and the backup made from it, both in `scratch`.
            copy = private_copy(path, scratch, timeout_s=timeout_s, room_factor=2)
            reached("copied")
            made = create_exclusive(scratch, "snapshot.", ".sqlite")
            _backup_into(copy, made, path)
            for leftover in (copy.path, *sidecars(copy.path).values()):
                leftover.unlink(missing_ok=True)  # room in the temp directory before the next copy
            reached("backed-up")
            _write_all(made, out_fd)
        reached("partial")
        publish_at(dir_fd, partial, final.name)
        partial = None
        os.fsync(dir_fd)
    except FileExistsError:
        raise UsageError(f"{final} appeared while the snapshot was being written; it was left alone.",
                         "Choose another directory.") from None
    except (OSError, sqlite3.OperationalError) as exc:
        raise _write_failed(dest_dir, exc, "snapshot") from None
    finally:
        if partial is not None and dir_fd is not None:
            try:
                os.unlink(partial, dir_fd=dir_fd)
            except OSError:
                pass
        if dir_fd is not None:
            os.close(dir_fd)
        if scratch is not None:
            _remove_tree(scratch)
    return final


def _backup_in_place(path: Path, scratch: Path, dir_fd: int, partial: str, out_fd: int, timeout_s: float) -> bool:
    """The backup API from the file where it is (a rollback file without a journal, in place; a WAL
    file with a private copy of its -wal alone, its -shm locked against checkpoints meanwhile, or
    immutable with none: console/db/private_wal.py) straight into the partial file, so a snapshot
    costs one write of the database. False, with the partial left empty, when it must be copied."""
    from console.db.private_wal import backup_through, no_commits_beside, open_quiet_wal, open_with_private_wal

    require_database_file(path)
    check_header(path, read_head(path, 100), os.stat(path).st_size)
    setup = _read_only(int(timeout_s * 1000))
    opened = None
    if not is_wal_header(read_head(path, 100)):
        if not nonempty_file(sidecars(path)["-journal"]):
            opened = _connect(ro_uri(path), uri=True, setup=setup), (lambda: None), "in place"
    elif no_commits_beside(path):
        opened = open_quiet_wal(path, partial_(_connect, uri=True, setup=setup), ro_uri, timeout_s=timeout_s)
    else:
        opened = open_with_private_wal(path, partial_(_connect, uri=True, setup=setup), ro_uri, timeout_s=timeout_s,
                                       live_ok=True)
    if opened is None:
        return False
    conn, release, _how = opened
    try:
        reached("copied")
        rw = os.open(partial, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if (os.fstat(rw).st_dev, os.fstat(rw).st_ino) != (os.fstat(out_fd).st_dev, os.fstat(out_fd).st_ino):
                raise FileExistsError(errno.EEXIST, "the partial file was replaced", partial)
            pages, page_size = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
            vfs = os.fstatvfs(rw)
            if pages * page_size > vfs.f_bavail * vfs.f_frsize:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # before a byte is written
            if not backup_through(conn, rw, scratch):
                return False
            os.fsync(rw)
        finally:
            os.close(rw)
        reached("backed-up")
        os.close(out_fd)
        return True
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            os.close(out_fd)
            raise
        os.ftruncate(out_fd, 0)  # damage: the private copy's bytes let doctor describe it
        return False
    except BaseException:
        os.close(out_fd)
        raise
    finally:
        conn.close()
        release()


def _write_all(source: Path, out_fd: int) -> None:
    """Copy the finished snapshot into the open partial file (bounded by its size), then fsync;
    refuse first when the directory cannot hold it."""
    with open(source, "rb") as src, open(out_fd, "wb") as out:
        size = os.fstat(src.fileno()).st_size
        vfs = os.fstatvfs(out.fileno())
        if size > vfs.f_bavail * vfs.f_frsize:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # before a byte is written
        remaining = size
        while remaining > 0:
            chunk = src.read(min(8 << 20, remaining))
            if not chunk:
                break
            out.write(chunk)
            remaining -= len(chunk)
        out.flush()
        os.fsync(out.fileno())


def _write_failed(where: Path, exc: BaseException, what: str) -> DatabaseUnusable:
    reason = getattr(exc, "strerror", None) or str(exc)
    return DatabaseUnusable(
        f"The {what} could not be written in {where} ({reason}); what was written is removed and nothing else changed.",
        "Free some space there (or choose another directory) and run the command again.",
    )


def _backup_into(copy: CopyResult, partial: Path, path: Path) -> None:
    """Copy the replayed private copy into the existing empty file `partial` with the backup API."""
    import shutil  # only on the private-copy path, not at every start

    try:
        src = _open_copy(copy)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"{path} cannot be opened as a SQLite database ({exc}).") from None
    try:
        try:
            src.execute("PRAGMA journal_mode = DELETE")  # fold the WAL into the copy
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError:
            pass  # corrupt files still get copied page by page below
        dst = sqlite_connection(str(partial))
        try:
            src.backup(dst)
            try:
                dst.execute("PRAGMA journal_mode = DELETE")
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError:
                pass
        finally:
            dst.close()
    except sqlite3.OperationalError:
        raise  # a full disk, an I/O error: the caller removes the partial file
    except sqlite3.DatabaseError as exc:
        # The backup API stops on pages it cannot read; fall back to the replayed copy itself
        # so that `doctor` can still describe the damage.
        src.close()
        src = None
        with open(copy.path, "rb") as source, open(partial, "r+b") as out:
            out.truncate()
            shutil.copyfileobj(source, out)
        copy.notes.append(f"backup API failed ({exc}); kept a byte copy instead")
    finally:
        if src is not None:
            src.close()


def open_read_only(
    path: str | Path, *, busy_timeout_ms: int = 5000, force_copy: bool = False
) -> tuple[sqlite3.Connection, Callable[[], None], str]:
    """A `query_only` connection that never touches anything next to `path`.

    Returns (connection, cleanup, how): `how` starts with "in place" (a rollback-journal file with
    no journal beside it, or a WAL file whose -wal and -shm exist and are readable, opened with
    mode=ro: such readers create nothing; or a WAL file nobody has open, opened immutable) or with
    "private copy (why)" (a leftover journal, a -shm or -wal SQLite cannot use in place, or
    `force_copy`): the copy lives in a 0700 temp directory that `cleanup` removes.
    """
    path = Path(path).expanduser()
    size = require_database_file(path).st_size
    try:
        header = read_head(path, 100)
    except OSError as exc:
        raise DatabaseUnusable(f"Cannot read {path}: {exc.strerror or exc}.") from None
    check_header(path, header, size)
    side = sidecars(path)
    journal = side["-journal"]
    wal = is_wal_header(header)
    if not force_copy and not wal and not nonempty_file(journal):
        try:
            conn = _connect(ro_uri(path), uri=True, setup=_read_only(busy_timeout_ms))
        except sqlite3.Error as exc:
            raise DatabaseUnusable(f"Cannot open {path}: {exc}.") from None
        return conn, (lambda: None), "in place"
    reason = "forced" if force_copy else ("a leftover -journal" if not wal else None)
    if not force_copy and wal:
        opened = _open_wal_without_copy(path, side, busy_timeout_ms)
        if not isinstance(opened, str):
            return opened
        reason = opened
    try:
        workdir = private_dir("ro")
    except OSError as exc:
        raise _no_private_copy(path, exc) from None
    conn = None
    try:
        copy = private_copy(path, workdir, timeout_s=max(1.0, busy_timeout_ms / 1000))
        reached("private-copy")
        # Read-write on *our* copy, so a leftover journal can be rolled back; query_only after.
        conn = _open_copy(copy, busy_timeout_ms=busy_timeout_ms)
        workdir_left = not _unlink_open_copy(conn, workdir)
        reached("private-copy-open")
        for statement in _read_only(busy_timeout_ms):
            conn.execute(statement)
    except BaseException as exc:
        if conn is not None:  # closed here, not left to the garbage collector
            conn.close()
        _remove_tree(workdir)
        if isinstance(exc, (OSError, sqlite3.OperationalError)):
            raise _no_private_copy(path, exc) from None
        raise

    def cleanup() -> None:
        if workdir_left:
            _remove_tree(workdir)

    return conn, cleanup, f"private copy ({reason})" if reason else "private copy"


def _unlink_open_copy(conn: ReadOnlyConnection, workdir: Path) -> bool:
    """Fold the copy's WAL into its main file, then remove the copy's directory while SQLite keeps
    the file open: the user's data then lives only as long as this process's descriptor, so no
    signal, not even SIGKILL, can leave it in the temp directory. SQLite reads an unlinked
    rollback-journal file normally (the hot-journal check finds no journal in a directory that is
    gone). A copy SQLite cannot switch (a corrupt one) keeps its name until `cleanup`.

    False when the copy keeps its path; a second connection (`reconnect`) is then possible.
    """
    try:
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError:
        return False
    _remove_tree(workdir)
    conn.source_uri = None  # nothing is left at that path to reconnect to
    return True


def _remove_tree(path: Path) -> None:
    import shutil  # only on the private-copy path, not at every start

    shutil.rmtree(path, ignore_errors=True)


def _open_wal_without_copy(path: Path, side: dict[str, Path], busy_timeout_ms: int):
    """Open a WAL file without copying its main file, or say (a string) why it needs the copy.

    Looked at with `stat` and `os.access` only: opening and closing these files here would drop the
    POSIX locks of any SQLite connection this process holds on them (tests/adversarial/test_locks.py).
    No -wal (a -shm alone or nothing), or an empty -wal and no -shm: every commit is in the main file
    (immutable); a -wal and a -shm, both readable: in place, as any archon reader; a -wal without
    its -shm (a crashed archon): the main file in place beside a private copy of the -wal
    (console/db/private_wal.py). Each way re-checks under its lock and answers None when the files
    changed meanwhile: then they are looked at again.
    """
    from console.db.private_wal import no_commits_beside, open_quiet_wal, open_with_private_wal

    timeout_s = max(1.0, busy_timeout_ms / 1000)
    connect = partial_(_connect, uri=True, setup=_read_only(busy_timeout_ms))
    for _attempt in range(3):
        if no_commits_beside(path):
            opened = open_quiet_wal(path, connect, ro_uri, timeout_s=timeout_s)
            if opened is not None:
                return opened
            continue
        for suffix, why in (("-wal", WHY_WAL), ("-shm", WHY_SHM)):
            if os.path.exists(side[suffix]) and not _readable(side[suffix]):
                raise unreadable_side(side[suffix], PermissionError(errno.EACCES, os.strerror(errno.EACCES)), why)
        if os.path.exists(side["-shm"]):
            opened = _open_live_wal(path, busy_timeout_ms)
            if isinstance(opened, str):
                return opened
        else:
            try:
                opened = open_with_private_wal(path, connect, ro_uri, timeout_s=timeout_s)
            except (OSError, sqlite3.OperationalError) as exc:
                raise _no_private_copy(path, exc, "the -wal") from None
            if opened is None and not os.path.exists(side["-shm"]) and os.path.exists(side["-wal"]):
                return "SQLite could not read it through a private copy of the -wal"
        if opened is not None:
            return opened
    return "its -wal and -shm kept changing while they were looked at"


def _readable(side: Path) -> bool:
    return os.access(side, os.R_OK, effective_ids=os.access in os.supports_effective_ids)


def _open_live_wal(path: Path, busy_timeout_ms: int):
    """Read a WAL database in place, as any archon reader does: `mode=ro` with its -wal and -shm
    present creates nothing and never writes the main file or the -wal (a read-only connection
    neither checkpoints nor, on close, deletes the -wal); it may write its read mark into the
    -shm, as every reader does. Returns the reason in words when SQLite cannot read it so.

    Once a read has run the connection holds SQLite's shared lock for its lifetime, so the last
    archon connection cannot checkpoint and delete the -wal under it; the only window is between
    the existence check above and that first read (microseconds).
    """
    conn = None
    try:
        conn = _connect(ro_uri(path), uri=True, setup=_read_only(busy_timeout_ms))
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        return f"SQLite could not read it in place: {exc}"
    return conn, (lambda: None), "in place (WAL, mode=ro)"


def _no_private_copy(path: Path, exc: BaseException, what: str = "the database") -> DatabaseUnusable:
    """A WAL database is read through a private copy in the temp directory; it could not be made."""
    import tempfile  # only on the private-copy path, not at every start
    reason = getattr(exc, "strerror", None) or str(exc)
    return DatabaseUnusable(
        f"Cannot read {path} without a private copy, and the copy in {tempfile.gettempdir()} failed ({reason}); "
        "nothing was changed and the partial copy was removed.",
        f"Free space there, or point TMPDIR at a directory with room for a copy of {what}.",
    )


def stat_token(path: str | Path) -> tuple:
    """What changes when anyone writes the database: size and mtime of the file and its -wal."""
    token = []
    for p in (Path(path), sidecars(Path(path))["-wal"]):
        try:
            st = p.stat()
            token.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            token.append(None)
    return tuple(token)


def _read_only(busy_timeout_ms: int) -> tuple[str, str]:
    """The statements that make a connection a reader's (console/db/connection.py `sqlite_connection` runs them)."""
    return f"PRAGMA busy_timeout = {int(busy_timeout_ms)}", "PRAGMA query_only = ON"
