"""What every check gets (`Ctx`), and the small helpers that turn rows into finding text.

The long scans run on worker connections of their own (`Ctx.start`/`Ctx.wait`): sqlite3 releases
the GIL while SQLite works, so on two cores they overlap with the integrity scan and each other.
"""

from __future__ import annotations

import sqlite3
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


class Ctx:
    """What every check gets: the connection, the clock, options, cached facts, and the results of
    the scans started in the background (`start`/`wait`) so that they overlap with the rest."""

    def __init__(self, conn, *, path: Path, now: datetime, stale_after: timedelta, full: bool,
                 names: Sequence[str] = (), pool: ThreadPoolExecutor | None = None):
        self.conn = conn
        self.path = path
        self.now = now
        self.now_text = db_time(now)
        self.stale_after = stale_after
        self.full = full
        self.names = tuple(names)
        self.pool = pool
        self._tables: set[str] | None = None
        self._shape = None
        self._tasks: dict[str, Future] = {}
        self.fk_events_by_count = False
        self.header: bytes | None = None  # the file's first bytes, read before connecting (checks_integrity)

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
        """Run `scan` on a connection of its own in a worker thread (sqlite3 releases the GIL while
        SQLite works, so scans overlap on separate cores). Without a pool (a caller's read-write
        handle cannot be duplicated safely) it runs later, on the main connection, in `wait`."""
        if key in self._tasks:
            return
        future: Future = Future()
        self._tasks[key] = future
        side = reconnect(self.conn) if self.pool is not None else None
        if side is None:
            future.scan = scan  # type: ignore[attr-defined]
            return

        def work() -> Any:
            try:
                return scan(side)
            finally:
                side.close()

        inner = self.pool.submit(work)
        inner.add_done_callback(lambda f: _copy_future(f, future))

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


def _copy_future(source: Future, target: Future) -> None:
    exc = source.exception()
    if exc is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


