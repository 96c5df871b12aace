"""What every check gets (`Ctx`), and the small helpers that turn rows into finding text.

Every check reads one snapshot of the file, however many connections read it. The long scans run
on connections of their own in worker threads (each takes the next scan when free: the integrity
scan, the parts of the approvals pass, foreign_key_check), since sqlite3 releases the GIL while SQLite works, so
on two cores they overlap with each other and with the short checks on the main connection.
Before any check runs, `pin_snapshot` starts a read transaction on every connection and proves
they all began on the same commit (`PRAGMA data_version`, below); a live file written meanwhile
cannot make one check compare rows another check read at a different commit. When that cannot be
proved, or no second connection can be opened without side effects (a caller's read-write handle,
a private copy already unlinked), everything runs on the main connection, in one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from console.db.sql import quote_identifier
from console.clock import db_time
from console.db.detect import detect_shape
from console.db.introspect import schema_of
from console.db.readonly import reconnect
from console.services.doctor.report import ROW_LIMIT, SHOWN_IDS
from console.text import one_line

DEFAULT_STALE_AFTER = timedelta(minutes=15)
# Worker connections: the long scans (the integrity scan first, then the approvals pass in parts,
# then foreign_key_check) share them, each taken by the first one free.
WORKERS = max(2, min(4, os.cpu_count() or 2))
PIN_ATTEMPTS = 20  # a writer committing between two of our BEGINs only costs another try

# --- helpers ---------------------------------------------------------------------------------


def ids_text(ids: Sequence[str], total: int) -> str:
    shown = ", ".join(one_line(i, 80) for i in ids[:SHOWN_IDS])
    more = total - min(len(ids), SHOWN_IDS)
    return shown + (f" and {more} more" if more > 0 else "")


def rows_of(table: str, ids: Iterable[Any]) -> list[dict[str, str]]:
    return [{"table": table, "id": str(i)} for i in list(ids)[:ROW_LIMIT]]


def table_names(conn: sqlite3.Connection) -> set[str]:
    return set(schema_of(conn).table_names())


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}


# --- one snapshot on several connections -------------------------------------------------------


def _end(conn: sqlite3.Connection) -> None:
    """End this read transaction (nothing was written in it); a failure leaves nothing to undo."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def pin_snapshot(main: sqlite3.Connection, sides: Sequence[sqlite3.Connection]) -> bool:
    """Begin a read transaction on `main` and on every side connection, all on the same commit.

    `PRAGMA data_version` on a connection changes when, since that connection's previous read,
    another connection committed. It is read on `main` outside a transaction, then every side begins
    its read, then `main` begins its own and reads it again: the same value means no commit landed
    between the first read and the last BEGIN, so every BEGIN in between saw that same commit (in
    WAL mode and in rollback mode alike; SQLite compares the WAL index, or the header's change
    counter, at the start of every read). A different value: end them all and try again.
    False (nothing left open) when it could not be proved, or a read could not begin (busy).
    """
    for _ in range(PIN_ATTEMPTS):
        try:
            before = main.execute("PRAGMA data_version").fetchone()[0]
            for side in sides:
                side.execute("BEGIN")
                side.execute("PRAGMA data_version").fetchone()  # the read that fixes its snapshot
            main.execute("BEGIN")
            after = main.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.DatabaseError:
            after = before = None
        if before is not None and after == before:
            return True
        for conn in (*sides, main):
            _end(conn)
        if before is None:
            return False
    return False


class _Workers:
    """Worker threads, each with its own connection: a scan goes to whichever is free first, in
    the order the scans were started; every connection reads the same snapshot (`pin_snapshot`)."""

    def __init__(self, conns: Sequence[sqlite3.Connection]):
        self.conns = list(conns)
        free = list(conns)
        self.local = threading.local()

        def take() -> None:  # each thread keeps one connection for its life
            self.local.conn = free.pop()

        self.pool = ThreadPoolExecutor(max_workers=len(conns), thread_name_prefix="doctor", initializer=take)

    def submit(self, scan: Callable[[sqlite3.Connection], Any]) -> Future:
        return self.pool.submit(lambda: scan(self.local.conn))

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for conn in self.conns:
            _end(conn)
            conn.close()


class Ctx:
    """What every check gets: the connection, the clock, options, cached facts, and the results of
    the scans started in the background (`start`/`wait`) so that they overlap with the rest."""

    def __init__(self, conn, *, path: Path, now: datetime, stale_after: timedelta, full: bool,
                 names: Sequence[str] = (), parallel: bool = True):
        self.conn = conn
        self.path = path
        self.now = now
        self.now_text = db_time(now)
        self.stale_after = stale_after
        self.full = full
        self.names = tuple(names)
        self._tables: set[str] | None = None
        self._shape = None
        self._tasks: dict[str, Future] = {}
        self.counted_fks: set[str] = set()  # tables whose foreign keys the approvals pass counts
        self.tables_in_order: list[str] = []  # every table, in sqlite_master order (foreign_key_check)
        self.constraint_plan: Any = None  # checks_constraints.Plan, once made
        # Tables whose constraints the approvals pass evaluates as it reads their rows (name -> its
        # checks_constraints.TablePlan), and how to wait for the pass's tallies of them (name ->
        # a checks_constraints.Tally per constraint; a table it cannot vouch for is left out).
        self.folded: dict[str, Any] = {}
        self.fold_tallies: Callable[[], dict[str, list]] | None = None
        self.header: bytes | None = None  # the file's first bytes, read before connecting (checks_integrity)
        self._workers: _Workers | None = None
        self._own_transaction = False
        if parallel:
            self._open_workers()
        if self._workers is None and not conn.in_transaction:
            try:
                conn.execute("BEGIN")
                conn.execute("PRAGMA data_version").fetchone()
                self._own_transaction = True
            except sqlite3.DatabaseError:  # busy: each check meets it and says so
                _end(conn)

    def _open_workers(self) -> None:
        sides: list[sqlite3.Connection] = []
        try:
            for _ in range(WORKERS):
                side = reconnect(self.conn)
                if side is None:
                    break
                sides.append(side)
            if len(sides) == WORKERS:
                timeout = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
                for side in sides:
                    side.execute(f"PRAGMA busy_timeout = {int(timeout)}")
                if not self.conn.in_transaction and pin_snapshot(self.conn, sides):
                    self._workers = _Workers(sides)
                    self._own_transaction = True
                    return
        except sqlite3.DatabaseError:
            pass
        for side in sides:
            _end(side)
            side.close()

    @property
    def parallel(self) -> bool:
        """Whether scans run on pinned worker connections (else on the main one, when waited for)."""
        return self._workers is not None

    def close(self) -> None:
        """Wait for every scan, close the worker connections and end the read transaction."""
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._own_transaction:
            _end(self.conn)
            self._own_transaction = False

    @property
    def tables(self) -> set[str]:
        if self._tables is None:
            self._tables = table_names(self.conn)
        return self._tables

    @property
    def shape(self):
        if self._shape is None:
            self._shape = detect_shape(self.conn)
        return self._shape

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    def start(self, key: str, scan: Callable[[sqlite3.Connection], Any]) -> None:
        """Run `scan(conn)` on a worker connection in its thread, once the scans started before
        it are under way; it reads the same snapshot as every other check. Without worker
        connections it runs later, on the main connection, in `wait`."""
        if key in self._tasks:
            return
        if self._workers is None:
            future: Future = Future()
            future.scan = scan  # type: ignore[attr-defined]
            self._tasks[key] = future
            return
        self._tasks[key] = self._workers.submit(scan)

    def wait(self, key: str) -> Any:
        future = self._tasks[key]
        scan = getattr(future, "scan", None)
        if scan is not None and not future.done():
            try:
                future.set_result(scan(self.conn))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter below
                future.set_exception(exc)
        return future.result()

    def started(self, key: str) -> bool:
        return key in self._tasks

    def started_with(self, prefix: str) -> list[str]:
        return [key for key in self._tasks if key.startswith(prefix)]
