"""What `:tables`, a table and `:sql` share: the read-only handle they query through, the page
sources of their `LazyTable`s, and how a value from the file is drawn.

The handle is console/services/query.py's `Queries` (a second, locked-down, read-only connection,
console/db/adhoc.py), never the session's: an operator's statement cannot reach the connection the
console writes with, and a slow statement does not hold up the other screens (they wait on the
session's lock, not this one). It opens in a worker at first use; the screen that opened it closes
it when it goes, off the UI thread (a statement may still be running: it is interrupted first).
"""

from __future__ import annotations

import threading
from typing import Any, Hashable

from rich.text import Text

from console.services.query import RESULT_ROW_CAP, Queries, TableShape, open_queries
from console.tui.session import Session
from widgets.safe_text import safe_text
from widgets.table_column import Column

CELL_CHARS = 200  # what a cell may draw of a value (a value may be 4 MB); `Y` copies it whole


class QueryLink:
    """`Queries` for one screen, opened on first use (in a worker: opening reads the file)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._queries: Queries | None = None
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> Queries:
        with self._lock:
            if self._closed:
                raise RuntimeError("the screen that read this handle has gone")
            if self._queries is None:
                self._queries = open_queries(self.session.db_path,
                                             busy_timeout_ms=self.session.ctx.busy_timeout_ms)
            return self._queries

    def close(self) -> None:
        """Stop a running statement (it ends within one progress check, console/db/limits.py), then
        close, here and now: a private copy is removed with it, and no connection outlives the screen
        (a test, or the app exiting, may touch the file right after)."""
        with self._lock:
            self._closed = True
            queries, self._queries = self._queries, None
        if queries is not None:
            queries.interrupt()
            queries.close()


def value_text(value: Any) -> Text:
    """One cell: NULL marked as such (dim, so it is not the text 'NULL'), the rest through the one
    sanitiser, cut to `CELL_CHARS` before it is cleaned."""
    if value is None:
        return Text("NULL", style="dim italic", end="")
    text = value if isinstance(value, str) else str(value)
    return safe_text(text[:CELL_CHARS], one_line=True)


def _width(name: str, sample: list[tuple], i: int) -> int:
    """As wide as the name and the first rows' values need, from 8 cells (a rowid far down the table
    is longer than the first rows') to 32."""
    widest = max((value_text(row[i]).cell_len for row in sample if i < len(row)), default=0)
    return max(8, min(32, max(len(name), widest)))


def value_columns(names: list[str], pick, sample: list[tuple] = ()) -> list[Column]:
    """A column per name, sized by the values of `sample` (the first rows); `pick(row, i)` reads the
    i-th value of a row."""
    sample = list(sample)
    return [Column(str(i), str(name), _width(str(name), sample, i),
                   render=lambda row, i=i: value_text(pick(row, i))) for i, name in enumerate(names)]


class TableSource:
    """A table's rows by key: each page one short statement (console/services/query.py)."""

    def __init__(self, link: QueryLink, table_shape: TableShape) -> None:
        self.link, self.table_shape = link, table_shape

    def count(self) -> int:
        return self.link.get().table_count(self.table_shape)

    def page(self, after: Any | None, limit: int) -> tuple[list[Any], Any | None]:
        return self.link.get().table_page(self.table_shape, after, limit)

    def key(self, row: Any) -> Hashable:
        return row[0]

    def index_of(self, key: Hashable) -> int | None:
        return self.link.get().index_of(self.table_shape, key)

    def cursor_of(self, key: Hashable) -> Any | None:
        return key

    def advance(self, cursor: Any | None, count: int) -> Any | None:
        return self.link.get().advance(self.table_shape, cursor, count)

    def retreat(self, cursor: Any | None, count: int) -> Any | None:
        return self.link.get().retreat(self.table_shape, cursor, count)


class ResultSource:
    """A statement's rows: each page runs the statement again and skips to it (why:
    console/services/query.py); the cursor is the row offset, a row is (index, values). The count
    stops at `RESULT_ROW_CAP` (`capped` says so)."""

    def __init__(self, link: QueryLink, sql: str) -> None:
        self.link, self.sql = link, sql
        self.capped = False

    def count(self) -> int:
        total, self.capped = self.link.get().count(self.sql, RESULT_ROW_CAP)
        return total

    def page(self, after: Any | None, limit: int) -> tuple[list[Any], Any | None]:
        start = after or 0
        limit = max(0, min(limit, RESULT_ROW_CAP - start))
        if not limit:
            return [], start
        result = self.link.get().run(self.sql, offset=start, limit=limit)
        rows = [(start + i, values) for i, values in enumerate(result.rows)]
        return rows, start + len(rows)

    def key(self, row: Any) -> Hashable:
        return row[0]

    def advance(self, cursor: Any | None, count: int) -> Any:
        return min((cursor or 0) + count, RESULT_ROW_CAP)

    def index_of(self, key: Hashable) -> int | None:
        return key if isinstance(key, int) else None

    def cursor_of(self, key: Hashable) -> Any | None:
        return key + 1 if isinstance(key, int) else None


__all__ = ["CELL_CHARS", "QueryLink", "ResultSource", "TableSource", "value_columns", "value_text"]
