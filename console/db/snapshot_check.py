"""Checking a snapshot's copy: SQLite's own checks, whole-file or split over connections.

An upgrade's snapshot is proven by its bytes (console/db/snapshot.py, one pass over the source);
SQLite's checks judge the source, doctor's job, and run only when asked: `quick_check_copy` for
`take_snapshot(quick_check=True)`, `verify_copy`, the full `integrity_check`, for
`take_snapshot(full_check=True)` (`upgrade --full-check`) and for `restore`, which has no source to
compare a snapshot with.

Why the full check is split over connections
--------------------------------------------
`integrity_check` looks every row of every table up in each of the table's indexes. It is
CPU-bound (a bigger page cache or mmap do not help), so it is split over connections on their own
threads (sqlite3 releases the GIL while a statement runs). The pieces are
`PRAGMA integrity_check(T)` for every table T, sqlite_schema included, plus one
`PRAGMA quick_check` of the whole file. Together they check exactly what `integrity_check` does: a
per-table check is "partial" and skips the whole-file page accounting (freelist, pages never used,
a page claimed by two trees), which is precisely the B-tree pass that the whole-file quick_check
runs; the per-row checks (NOT NULL, CHECK, every index entry against its row, UNIQUE, index entry
counts) never span two tables. The price is that B-tree pass twice (about a quarter more CPU in
all), so the split pays only when a second CPU is free; with one CPU the plain whole-file
`integrity_check` runs instead.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from console.db.sql import quote_identifier
from console.db.connection import sqlite_connection
from console.errors import EXIT_UNUSABLE, DatabaseUnusable, Refusal

# More checking connections than this gain nothing: the largest table's check bounds the time.
MAX_CHECK_WORKERS = 4


class SnapshotFailed(Refusal):
    """The snapshot could not be made; no migration ran and no partial file is left."""


class SnapshotWriteFailed(SnapshotFailed):
    """Writing the snapshot failed (a full disk, an I/O error): the target cannot be used (exit 3)."""

    exit_code = EXIT_UNUSABLE


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {name: conn.execute(f"SELECT count(*) FROM {quote_identifier(name)}").fetchone()[0] for name in names}


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def open_ro(path: Path, *, any_thread: bool = False) -> sqlite3.Connection:
    return sqlite_connection(
        f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True, check_same_thread=not any_thread,
    )


def check_pieces(conn: sqlite3.Connection, counts: dict[str, int]) -> list[str]:
    """Statements whose findings, together, are exactly those of `PRAGMA integrity_check`.

    Ordered biggest expected work first, so that connections pulling from the list finish at
    about the same time (longest-processing-time-first). A table's check looks each row up in
    every index of the table: rows x (1 + indexes). The whole-file quick_check passes over every
    row once: the sum of the rows.
    """
    tables = conn.execute(
        "SELECT t.name, (SELECT count(*) FROM sqlite_master i WHERE i.type = 'index' AND i.tbl_name = t.name) "
        "FROM sqlite_master t WHERE t.type = 'table'"
    ).fetchall()
    weighted = [
        (counts.get(name, 0) * (1 + indexes), f"PRAGMA integrity_check({quote_identifier(name)})")
        for name, indexes in tables
    ]
    weighted.append((sum(counts.values()), "PRAGMA quick_check"))
    weighted.sort(key=lambda item: -item[0])  # stable: equal weights keep schema order
    return [sql for _, sql in weighted] + ["PRAGMA integrity_check(sqlite_master)"]


def integrity_messages(path: Path, pieces: list[str], workers: int) -> list[str]:
    """Run the check statements over `workers` connections; returns the problems found (none: [])."""
    pending = list(reversed(pieces))
    lock = threading.Lock()
    stop = threading.Event()
    live: list[sqlite3.Connection] = []
    found: list[str] = []

    def work() -> None:
        conn = open_ro(path)
        with lock:
            live.append(conn)
        try:
            while not stop.is_set():
                with lock:
                    if not pending:
                        return
                    sql = pending.pop()
                try:
                    rows = [str(row[0]) for row in conn.execute(sql)]
                except sqlite3.DatabaseError as exc:
                    if stop.is_set():  # interrupted because another piece failed
                        return
                    rows = [f"{sql} could not finish: {exc}"]  # damage bad enough to stop the check
                if rows != ["ok"]:
                    with lock:
                        found.extend(rows)
                    halt(conn)
        except BaseException:
            halt(conn)
            raise
        finally:
            with lock:
                live.remove(conn)
            conn.close()

    def halt(me: sqlite3.Connection | None) -> None:
        """One failure decides the verdict: stop the others instead of letting them finish."""
        stop.set()
        with lock:
            for other in live:
                if other is not me:
                    other.interrupt()

    if workers <= 1:
        work()
        return found
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="integrity-check") as pool:
        futures = [pool.submit(work) for _ in range(workers)]
        try:
            errors = [f.exception() for f in futures]
        except BaseException:  # Ctrl-C: do not sit out the remaining pieces
            halt(None)
            raise
    if found:
        return found
    for error in errors:
        if error is not None:
            raise error
    return found


def verify_copy(
    path: Path, expected_counts: dict[str, int] | None = None, *, workers: int | None = None
) -> tuple[int, int]:
    """Reopen a copy read-only and check it; returns (tables, rows). Raises on any difference.

    `workers` connections share the integrity check (default: one per CPU, at most four; with
    one, it is the plain whole-file `PRAGMA integrity_check`).
    """
    path = Path(path)
    workers = min(MAX_CHECK_WORKERS, usable_cpus()) if workers is None else max(1, workers)
    conn = open_ro(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        try:
            counts = table_counts(conn)
        except sqlite3.DatabaseError:
            counts = None  # a damaged table; the check below names the damage
        if counts is None or workers == 1:
            pieces = ["PRAGMA integrity_check"]
        else:
            pieces = check_pieces(conn, counts)
    finally:
        conn.close()
    result = integrity_messages(path, pieces, workers if len(pieces) > 1 else 1)
    if result or counts is None:
        shown = "; ".join(result[:3]) if result else "its tables cannot be counted"
        raise DatabaseUnusable(
            f"The copy at {path} failed SQLite's integrity check ({shown}).",
            "The source database itself is probably damaged; nothing was migrated.",
        )
    if mode.lower() != "delete":
        raise SnapshotFailed(f"The copy at {path} is in journal mode {mode}, not DELETE.")
    if expected_counts is not None and counts != expected_counts:
        differing = sorted(
            name for name in set(counts) | set(expected_counts) if counts.get(name) != expected_counts.get(name)
        )
        raise SnapshotFailed(
            f"The copy's row counts differ from the database's ({', '.join(differing[:5])}).",
        )
    return len(counts), sum(counts.values())


MMAP_BYTES = 1 << 31  # quick_check reads every page: through mmap, without a system call each


def quick_check(conn: sqlite3.Connection, what: str) -> int:
    """`PRAGMA quick_check` on `conn` (in whatever transaction it holds); returns the number of tables.

    Every B-tree well-formed, every page accounted for, NOT NULL and CHECK hold; what it leaves out
    (every index entry against its row) is integrity_check's, which `full_check` adds. `what` names
    the file in the refusal.
    """
    try:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        found = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        tables = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchone()[0]
    except sqlite3.DatabaseError as exc:
        found, tables = [f"it could not finish: {exc}"], 0
    if found != ["ok"]:
        raise DatabaseUnusable(
            f"{what} failed SQLite's quick_check ({'; '.join(found[:3])}).",
            "The snapshot is page for page the database, so the database itself is damaged; nothing "
            "was migrated. Run `archon-console doctor` on it.",
        )
    return int(tables)


def quick_check_copy(path: Path) -> int:
    """`quick_check` of a finished copy, which must be in journal mode DELETE; returns its tables."""
    conn = open_ro(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        tables = quick_check(conn, f"The copy at {path}")
    finally:
        conn.close()
    if mode.lower() != "delete":
        raise SnapshotFailed(f"The copy at {path} is in journal mode {mode}, not DELETE.")
    return tables


__all__ = [
    "SnapshotFailed",
    "SnapshotWriteFailed",
    "check_pieces",
    "integrity_messages",
    "open_ro",
    "quick_check",
    "quick_check_copy",
    "table_counts",
    "usable_cpus",
    "verify_copy",
]
