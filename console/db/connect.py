"""One way to open an archon database, read-write or read-only.

Opening validates before it touches: a missing, empty, non-SQLite, corrupt or non-archon file is
refused with exit code 3 and left byte-for-byte as it was. Read-write connections run with
`isolation_level=None` so writes issue their own `BEGIN IMMEDIATE` (see `tx.py`), with
`foreign_keys=ON` (archon's cascades and FK checks depend on it) and a busy timeout.
"""

from __future__ import annotations

import os
import sqlite3
from console.records import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Callable

from urllib.parse import quote

from console.db.connection import SQLITE_HEADER, sqlite_connection
from console.db.file_guard import read_head
from console.db.limits import explain
from console.db.paths import chosen_by, require_database_file, sidecars
from console.db.rows import text_row
from console.errors import DatabaseUnusable

DEFAULT_BUSY_TIMEOUT_MS = 5000

# Tables every archon release we know has had since 1.8.20.
ARCHON_CORE_TABLES = ("projects", "execution_environments", "execution_runs")


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.resolve()))}?{query}"


def check_file(path: Path) -> None:
    """Refuse what is plainly not a SQLite database, reading only its first bytes."""
    size = require_database_file(path).st_size
    if size == 0:
        raise DatabaseUnusable(f"{path} is empty (0 bytes), not an archon database.", chosen_by(path))
    try:
        header = read_head(path, len(SQLITE_HEADER))
    except OSError as exc:
        raise DatabaseUnusable(f"Cannot read {path}: {exc.strerror or exc}.") from None
    if header != SQLITE_HEADER:
        raise DatabaseUnusable(f"{path} is not a SQLite database (its header is wrong).", chosen_by(path))


def untouched_read_uri(path: Path) -> str:
    """A read-only URI that creates no file beside the database.

    A `mode=ro` connection to a WAL database whose `-wal` is absent creates `-wal` and `-shm`
    (checked with SQLite 3.40). When there is no `-wal`, every committed page is in the main
    file, so `immutable=1` reads it without locks or side files; with a `-wal` present the normal
    read-only mode is needed to see it (it uses, and may update, the existing `-shm` index).
    """
    if is_wal_file(path) and not sidecars(path)["-wal"].exists():
        return _uri(path, mode="ro", immutable="1")
    return _uri(path, mode="ro")


def check_size(path: Path) -> None:
    """Refuse a file shorter than the page count its header promises (a truncated copy).

    The header and the size are read without a lock, so a file being written can look short for a
    moment: in rollback-journal mode a commit writes page 1 (the new page count) before the pages
    that extend the file, with its `-journal` present until the commit is whole; a `-wal` may hold
    pages the main file has not received yet. Either side file means the main file is not the
    whole story (SQLite finishes or rolls back from it), so the check is left to SQLite. A writer
    can finish between our reads and delete its journal, so a short file is read again before it
    is refused: a truncated file stays short, a commit in flight does not.
    """
    for _ in range(3):
        header = read_head(path, 100)
        if len(header) < 100:
            raise DatabaseUnusable(f"{path} is truncated (shorter than a SQLite header).")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        change_counter = header[24:28]
        pages = int.from_bytes(header[28:32], "big")
        valid_for = header[92:96]
        size = path.stat().st_size
        if any(sidecars(path)[side].exists() for side in ("-wal", "-journal")):
            return
        if not (pages and change_counter == valid_for and size < pages * page_size):
            return
    raise DatabaseUnusable(
        f"{path} is truncated: its header promises {pages * page_size:,} bytes, the file has {size:,}.",
        "Restore it from a snapshot or a backup.",
    )


def is_wal_file(path: Path) -> bool:
    """True when the header says WAL mode (bytes 18 and 19 are 2)."""
    header = read_head(path, 20)
    return len(header) >= 20 and header[18] == 2 and header[19] == 2


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED past the busy timeout: another process's lock, not damage."""
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("database is locked" in text or "database is busy" in text)


def unreadable(path: Path, exc: sqlite3.Error, hint: str | None = None) -> Exception:
    """What a first read that failed means. "database is locked" is an `OperationalError`, which
    is a `DatabaseError`: another process (archon mid-write, a VACUUM) holding the lock past the
    busy timeout is busy, not damage, and must never send an operator to restore a snapshot over a
    healthy file."""
    from console.db.tx import BUSY_HINT
    from console.errors import Refusal

    if is_busy(exc):
        return Refusal(f"{path} is busy: another process held its lock past the busy timeout; nothing was read.",
                       BUSY_HINT)
    return DatabaseUnusable(f"{path} cannot be read as a SQLite database ({exc}).", hint)


def _probe(conn: sqlite3.Connection, path: Path) -> set[str]:
    try:
        names = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
    except sqlite3.DatabaseError as exc:
        raise unreadable(path, exc, "It may be corrupt or encrypted; run `archon-console doctor` on a copy.") from None
    missing = [t for t in ARCHON_CORE_TABLES if t not in names]
    if missing:
        raise DatabaseUnusable(
            f"{path} is a SQLite database but not an archon one "
            f"(no {', '.join(missing)} table).",
        )
    return names


@dataclass
class ArchonDatabase:
    """An open archon database."""

    path: Path
    conn: sqlite3.Connection
    read_only: bool
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    _shape: Any = field(default=None, repr=False)
    # Read-only handles may sit on a private copy (see readonly.py); closing removes it.
    cleanup: Callable[[], None] | None = field(default=None, repr=False)
    # How a read-only handle reads the file ("in place ...", "private copy (why)"; readonly.py).
    opened: str = ""

    @property
    def shape(self):
        """The detected release shape, read once per open (see `detect.py`)."""
        if self._shape is None:
            from console.db.detect import detect_shape

            self._shape = detect_shape(self.conn)
        return self._shape

    def forget_shape(self) -> None:
        self._shape = None

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        if self.cleanup is not None:
            self.cleanup()
            self.cleanup = None

    def __enter__(self) -> "ArchonDatabase":
        return self

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        try:
            # A value or statement over the limits, named while the connection can still say where.
            better = explain(exc, self.conn) if exc is not None else None
            if better is not None:
                raise better from None
        finally:
            self.close()


def _setup(busy_timeout_ms: int, read_only: bool) -> tuple[str, str]:
    return (f"PRAGMA busy_timeout = {int(busy_timeout_ms)}",
            "PRAGMA query_only = ON" if read_only else "PRAGMA foreign_keys = ON")


def connect_raw(
    path: Path, *, read_only: bool = False, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """A configured connection without validation; for snapshots and tests."""
    setup = _setup(busy_timeout_ms, read_only)
    if read_only:
        conn = sqlite_connection(_uri(path, mode="ro"), uri=True, setup=setup, check_same_thread=False)
    else:
        conn = sqlite_connection(str(path), setup=setup, check_same_thread=False)
    conn.row_factory = text_row  # a BLOB reads as text (console/db/rows.py)
    return conn


def open_database(
    path: str | Path,
    *,
    read_only: bool = False,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    require_archon: bool = True,
) -> ArchonDatabase:
    """Validate, then open. Validation reads through a read-only connection only."""
    path = Path(path).expanduser()
    check_file(path)
    check_size(path)
    if read_only:
        return _open_read_only(path, busy_timeout_ms=busy_timeout_ms, require_archon=require_archon)
    try:
        probe = sqlite_connection(untouched_read_uri(path), uri=True,
                                  setup=(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}",))
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"Cannot open {path}: {exc}.") from None
    try:
        if require_archon:
            _probe(probe, path)
        else:
            try:
                probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as exc:
                raise unreadable(path, exc) from None
    finally:
        probe.close()
    _require_wal_files_writable(path)
    try:
        conn = connect_raw(path, read_only=read_only, busy_timeout_ms=busy_timeout_ms)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"Cannot open {path}: {exc}.") from None
    return ArchonDatabase(path=path, conn=conn, read_only=read_only, busy_timeout_ms=busy_timeout_ms)


def _require_wal_files_writable(path: Path) -> None:
    """A WAL database is written through its -wal and -shm: SQLite must create them (a writable
    directory) or find them writable. Otherwise its first statement fails with "unable to open
    database file" or "attempt to write a readonly database"; say why before anything is tried."""
    if not is_wal_file(path) or os.access(path.parent, os.W_OK | os.X_OK):
        return
    sidecars = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    if all(p.exists() and os.access(p, os.R_OK | os.W_OK) for p in sidecars):
        return
    raise DatabaseUnusable(
        f"{path} is in WAL mode and its directory {path.parent} cannot be written, so SQLite cannot "
        f"create or write {path.name}-wal and {path.name}-shm to change it; nothing was written.",
        "Make the directory writable for this user, or read it with --read-only.",
    )


def _open_read_only(path: Path, *, busy_timeout_ms: int, require_archon: bool) -> ArchonDatabase:
    """Hands a WAL original to SQLite only where `mode=ro` creates nothing (readonly.py)."""
    from console.db.readonly import open_read_only

    conn, cleanup, how = open_read_only(path, busy_timeout_ms=busy_timeout_ms)
    try:
        if require_archon:
            _probe(conn, path)
        else:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as exc:
                raise unreadable(path, exc) from None
    except BaseException:
        conn.close()
        cleanup()
        raise
    return ArchonDatabase(
        path=path, conn=conn, read_only=True, busy_timeout_ms=busy_timeout_ms, cleanup=cleanup, opened=how
    )
