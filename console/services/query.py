"""An operator's own reads: every table with its row count, any table a page at a time, and one
read-only SQL statement (`archon-console query`, the TUI's `:tables` and `:sql`).

The connection is console/db/adhoc.py's (`query_database`): reads only by construction; this module
refuses to run on any other (`Queries` checks it), and turns what SQLite refused into one sentence.

Never all rows, and never a read transaction held open between pages: archon's WAL checkpoints wait
for the oldest reader. A table is paged by key (its rowid, or its primary key when it has none), each
page one short statement. A statement's result is paged by running the statement again for each page
and skipping the rows before it: arbitrary SQL has no key to seek by, wrapping it in
`SELECT * FROM (...) LIMIT` breaks on a trailing comment or a PRAGMA, and keeping one cursor open
between pages would hold the read transaction for as long as the operator looks at the screen. Each
run is bounded by the statement deadline (console/db/limits.py); a page far down costs the rows
before it, so a result is shown up to `RESULT_ROW_CAP` rows. Rows may shift between pages if archon
writes meanwhile; a re-read shows the present.

Values are data: a BLOB is never shown as bytes but as `<blob N bytes>`, text is shown through the
one sanitiser by whoever prints it (widgets/safe_text.py `clean`, console/cli/output.py `SafeStream`),
and what one page may hold is bounded (`MAX_RESULT_BYTES`).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.db.adhoc import DENIED_FUNCTIONS, check_statement, is_locked_down, last_refusal, query_database
from console.db.limits import MAX_VALUE_BYTES, explain, over_temp_space
from console.db.sql import quote_identifier, table_xinfo
from console.errors import DatabaseUnusable, UsageError
from console.text import one_line

COUNT_CAP = 100_000  # `:tables` counts up to here and shows "≥ 100,000" beyond: never a full scan of a big table
RESULT_ROW_CAP = 10_000  # a statement's result in the TUI: rows beyond are not paged to (say so)
MAX_RESULT_BYTES = 16 * 1024 * 1024  # what one page or one CLI result may hold in memory
# Rows skipped or counted per fetch: each is made into Python values and dropped, and a value may be
# 4 MB, so a batch holds at most 64 MB at once.
_SKIP_BATCH = 16
_ROWID_NAMES = ("rowid", "_rowid_", "oid")
_WITHOUT_ROWID = re.compile(r"\bWITHOUT\s+ROWID\b", re.I)


def blob_text(value: bytes) -> str:
    return f"<blob {len(value):,} bytes>"


def shown(value: Any) -> Any:
    """A value as every front end shows it: a BLOB as `<blob N bytes>`, the rest as it is."""
    return blob_text(value) if isinstance(value, (bytes, bytearray, memoryview)) else value


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 8


@dataclass(frozen=True)
class ResultPage:
    columns: list[str]
    rows: list[tuple]
    more: bool  # rows exist after these
    cut_by_size: bool = False  # `more` because the page reached `MAX_RESULT_BYTES`


@dataclass(frozen=True)
class TableSummary:
    name: str
    rows: int
    exact: bool  # False: at least `rows` (the count stopped at `COUNT_CAP`)
    columns: int
    without_rowid: bool

    @property
    def rows_text(self) -> str:
        return f"{self.rows:,}" if self.exact else f"≥ {self.rows:,}"


@dataclass(frozen=True)
class TableShape:
    """How a table is paged: its stored columns, and the key it is ordered and sought by."""

    name: str
    columns: list[str]
    key: list[str]

    @property
    def keys_sql(self) -> str:
        return ", ".join(quote_identifier(k) for k in self.key)

    def placeholders(self) -> str:
        return ", ".join("?" for _ in self.key)


def _refused(exc: sqlite3.Error, conn: sqlite3.Connection) -> Exception:
    """The one sentence for what SQLite (or the authorizer, console/db/adhoc.py) refused."""
    why = last_refusal(conn)
    text = str(exc)
    if why is not None or "not authorized" in text:
        return UsageError(f"Refused: {why or 'the statement is not a read'}; only reads run here, and nothing was run.")
    missing = re.fullmatch(r"no such function: (\w+)", text)
    if missing and missing.group(1).lower() in DENIED_FUNCTIONS:  # this build lacks it: refused all the same
        return UsageError(f"Refused: the function {missing.group(1).lower()}() reaches outside the database; "
                          "only reads run here, and nothing was run.")
    budget = over_temp_space(conn)
    if budget is not None:
        return UsageError(f"Stopped: the statement needed more than {budget // (1024 * 1024):,} MB of "
                          "temporary disk space (a sort or a UNION too big for memory); add a LIMIT, or ORDER BY an "
                          "indexed column. Nothing was written to the database.")
    if "one statement at a time" in text:
        return UsageError("Refused: give one statement; a second one (after ';') is not run, nor is the first.")
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_TOOBIG" or "string or blob too big" in text:
        return DatabaseUnusable(f"A value in the result is larger than {MAX_VALUE_BYTES:,} bytes, the console's "
                                "limit; nothing more was read.",
                                "Select less of it: substr(), length() or hex(substr()).")
    over = explain(exc, conn)  # the statement deadline
    if over is not None:
        return over
    if isinstance(exc, (sqlite3.OperationalError, sqlite3.ProgrammingError, sqlite3.Warning)):
        return UsageError(f"SQLite could not run the statement: {one_line(text, 200)}.")
    return exc


class Queries:
    """A locked-down read-only handle, shared by worker threads one call at a time."""

    def __init__(self, handle: Any) -> None:
        if not is_locked_down(handle.conn):
            raise RuntimeError("Queries runs only on console/db/adhoc.py's locked-down connection")
        self.handle = handle
        self.lock = threading.Lock()

    def interrupt(self) -> None:
        """Stop the statement running now, if any (from any thread; a later one is not affected)."""
        self.handle.conn.interrupt()

    def close(self) -> None:
        with self.lock:
            self.handle.close()

    def __enter__(self) -> "Queries":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _cursor(self) -> sqlite3.Cursor:
        cursor = self.handle.conn.cursor()
        cursor.row_factory = None  # plain tuples: a BLOB stays bytes, to be shown as `<blob N bytes>`
        return cursor

    def _all(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A statement of the console's own (bounded by its LIMIT), read to its end at once."""
        with self.lock:
            cursor = self._cursor()
            try:
                return cursor.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise _refused(exc, self.handle.conn) from None
            finally:
                cursor.close()

    # ------------------------------------------------------------------ one statement
    def run(self, sql: str, *, offset: int = 0, limit: int = 100,
            max_bytes: int = MAX_RESULT_BYTES) -> ResultPage:
        """Rows `offset` to `offset + limit` of `sql`'s result, and whether more follow. The statement
        ends (and its read transaction with it) before this returns."""
        check_statement(sql)
        with self.lock:
            cursor = self._cursor()
            try:
                cursor.execute(sql)
                columns = [d[0] for d in cursor.description or ()]
                skipped = 0
                while skipped < offset:
                    batch = cursor.fetchmany(min(_SKIP_BATCH, offset - skipped))
                    if not batch:
                        return ResultPage(columns, [], False)
                    skipped += len(batch)
                rows: list[tuple] = []
                size = 0
                while len(rows) < limit:
                    row = cursor.fetchone()
                    if row is None:
                        return ResultPage(columns, rows, False)
                    size += sum(map(_size, row))
                    if rows and size > max_bytes:
                        return ResultPage(columns, rows, True, cut_by_size=True)
                    rows.append(tuple(map(shown, row)))
                return ResultPage(columns, rows, cursor.fetchone() is not None)
            except sqlite3.Error as exc:
                raise _refused(exc, self.handle.conn) from None
            finally:
                cursor.close()

    def count(self, sql: str, cap: int = RESULT_ROW_CAP) -> tuple[int, bool]:
        """How many rows `sql` returns, up to `cap`: (rows, whether there are more than `cap`)."""
        check_statement(sql)
        with self.lock:
            cursor = self._cursor()
            try:
                cursor.execute(sql)
                total = 0
                while total <= cap:
                    batch = cursor.fetchmany(min(_SKIP_BATCH, cap + 1 - total))
                    if not batch:
                        return total, False
                    total += len(batch)
                return cap, True
            except sqlite3.Error as exc:
                raise _refused(exc, self.handle.conn) from None
            finally:
                cursor.close()

    # ------------------------------------------------------------------ tables
    def _table_names(self) -> list[tuple[str, bool]]:
        """(name, WITHOUT ROWID) of every table, by name."""
        # The statement, not `pragma_table_list`: SQLite asks the authorizer to UPDATE sqlite_master
        # while it builds a table-valued PRAGMA, and that is refused (console/db/adhoc.py).
        rows = self._all("PRAGMA table_list")
        if rows:
            return sorted((r[1], bool(r[4])) for r in rows if r[0] == "main" and r[2] == "table")
        # SQLite before 3.37 has no table_list (an unknown PRAGMA returns nothing): the options after the last ')'
        rows = self._all("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        return [(name, bool(_WITHOUT_ROWID.search((sql or "").rpartition(")")[2]))) for name, sql in rows]

    def tables(self, cap: int = COUNT_CAP) -> list[TableSummary]:
        """Every table with its row count up to `cap` (each count reads at most `cap` rows)."""
        out = []
        for name, without_rowid in self._table_names():
            table = quote_identifier(name)
            try:
                (rows,), = self._all(f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT ?)", (cap + 1,))
                columns = len(self._all(f"PRAGMA table_xinfo({table})"))
            except UsageError:  # a table SQLite cannot read (a virtual table whose module is missing)
                rows, columns = 0, 0
            out.append(TableSummary(name, min(rows, cap), rows <= cap, columns, without_rowid))
        return out

    def table_shape(self, name: str) -> TableShape:
        """How `name` is paged; refused when there is no such table."""
        known = dict(self._table_names())
        if name not in known:
            raise UsageError(f"There is no table called {one_line(name, 80)!r}; `:tables` lists them.")
        with self.lock:
            info = table_xinfo(self.handle.conn, name)
        columns = [r[1] for r in info if r[6] == 0]  # never a generated column (console/db/sql.py)
        lowered = {str(c).lower() for c in (r[1] for r in info)}
        primary = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        if known[name]:
            key = primary
        else:
            free = [n for n in _ROWID_NAMES if n not in lowered]
            key = [free[0]] if free else primary
        if not key:
            raise UsageError(f"Table {one_line(name, 80)!r} has no rowid or primary key to page it by.")
        return TableShape(name, columns, key)

    def table_page(self, shape: TableShape, after: tuple | None, limit: int) -> tuple[list[tuple], tuple | None]:
        """Up to `limit` rows (key, values) after key `after`, and the key of the last one."""
        where = f"WHERE ({shape.keys_sql}) > ({shape.placeholders()}) " if after is not None else ""
        cols = ", ".join(quote_identifier(c) for c in shape.columns)
        rows = self._all(f"SELECT {shape.keys_sql}, {cols} FROM {quote_identifier(shape.name)} {where}"
                         f"ORDER BY {shape.keys_sql} LIMIT ?", (*(after or ()), limit))
        width = len(shape.key)
        out = [(tuple(r[:width]), tuple(map(shown, r[width:]))) for r in rows]
        return out, (out[-1][0] if out else after)

    def table_count(self, shape: TableShape) -> int:
        """The exact count (for the paged table; a worker reads it after the first page is shown)."""
        (total,), = self._all(f"SELECT count(*) FROM {quote_identifier(shape.name)}")
        return int(total)

    def _key_at(self, shape: TableShape, cursor: tuple | None, offset: int, *, back: bool) -> tuple | None:
        op, order = ("<=", "DESC") if back else (">", "ASC")
        where = f"WHERE ({shape.keys_sql}) {op} ({shape.placeholders()}) " if cursor is not None else ""
        order_by = ", ".join(f"{quote_identifier(k)} {order}" for k in shape.key)
        rows = self._all(f"SELECT {shape.keys_sql} FROM {quote_identifier(shape.name)} {where}"
                         f"ORDER BY {order_by} LIMIT 1 OFFSET ?", (*(cursor or ()), offset))
        return tuple(rows[0]) if rows else None

    def advance(self, shape: TableShape, cursor: tuple | None, count: int) -> tuple | None:
        """The key `count` rows after `cursor` (None = the start); the last key when there are fewer."""
        if count <= 0:
            return cursor
        found = self._key_at(shape, cursor, count - 1, back=False)
        return found if found is not None else (self._key_at(shape, None, 0, back=True) or cursor)

    def retreat(self, shape: TableShape, cursor: tuple | None, count: int) -> tuple | None:
        """The key `count` rows before `cursor` (None = the end); None (the start) when there are fewer."""
        return self._key_at(shape, cursor, count, back=True)

    def index_of(self, shape: TableShape, key: tuple) -> int | None:
        rows = self._all(f"SELECT count(*), (SELECT 1 FROM {quote_identifier(shape.name)} WHERE ({shape.keys_sql}) = "
                         f"({shape.placeholders()})) FROM {quote_identifier(shape.name)} "
                         f"WHERE ({shape.keys_sql}) < ({shape.placeholders()})", (*key, *key))
        before, present = rows[0]
        return int(before) if present else None


def open_queries(path: str | Path, *, busy_timeout_ms: int) -> Queries:
    """The database at `path`, opened for an operator's reads (console/db/adhoc.py)."""
    return Queries(query_database(path, busy_timeout_ms=busy_timeout_ms))


__all__ = ["COUNT_CAP", "MAX_RESULT_BYTES", "RESULT_ROW_CAP", "Queries", "ResultPage", "TableShape", "TableSummary",
           "blob_text", "open_queries", "shown"]
