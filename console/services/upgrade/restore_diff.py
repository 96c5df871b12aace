"""Every table of two archon files compared row by row, in bounded memory: what a restore would undo.

A restore puts back the snapshot's bytes, so whatever any table holds now and the snapshot does not
(rows added, changed or deleted since, in tables the console knows and in tables it does not) is
undone. So no table is picked by name: every table of either file is compared, except SQLite's own
(`sqlite_*`) and the console's ledger (console/db/detect.py), which describes the upgrades and goes
with the snapshot anyway.

Rows are matched by primary key (the rowid where a table declares none, or where the two files
declare different ones). Each side is one cursor in key order (`ORDER BY key COLLATE BINARY`: the
primary key's own index where it has one), merged as it is read (`_merge`), so memory holds two rows
and the first `FIRST` ids of each kind of change whatever the tables hold. Python orders the keys
the way SQLite does: by storage class (NULL, numbers, text, blob), numbers by value, text by its
bytes (read as bytes, as the BINARY collation compares them), never by a decoded string, which
replaces the bytes it cannot decode. Columns only one file has are named, and the rows compared on
the columns both have.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE
from console.db.sql import quote_identifier
from console.text import one_line

FIRST = 5  # ids shown per table and kind of change
SKIPPED = frozenset({LEDGER_TABLE, LEDGER_META_TABLE})

# on_row(id, row now or None, row in the snapshot or None): each row that differs, as {column: value}
RowCallback = Callable[[str, "dict[str, Any] | None", "dict[str, Any] | None"], None]


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The file's tables, but SQLite's own, the console's ledger and virtual tables (their contents
    live in shadow tables, which are compared as tables)."""
    return {
        str(name) for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
        if not str(name).lower().startswith("sqlite_") and str(name) not in SKIPPED
        and not str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
    }


@dataclass
class Change:
    count: int = 0
    first: list[str] = field(default_factory=list)  # raw ids: JSON carries them as they are

    def add(self, key: str) -> None:
        self.count += 1
        if len(self.first) < FIRST:
            self.first.append(key)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.first}


@dataclass
class TableDiff:
    """How a table differs between the database (now) and the snapshot."""

    table: str
    only_in: str | None = None  # "database" (the snapshot predates it) or "snapshot"; None: both
    columns_only_in_database: list[str] = field(default_factory=list)
    columns_only_in_snapshot: list[str] = field(default_factory=list)
    added: Change = field(default_factory=Change)  # rows the snapshot lacks: lost
    changed: Change = field(default_factory=Change)  # rows that go back to the snapshot's values
    deleted: Change = field(default_factory=Change)  # rows deleted since: they come back
    unreadable: str | None = None  # why the rows could not be compared (what was counted before stays)

    @property
    def differs(self) -> bool:
        return bool(self.unreadable or self.only_in or self.columns_only_in_database or self.columns_only_in_snapshot
                    or self.added.count or self.changed.count or self.deleted.count)

    def line(self) -> str:
        """One line, every id on it cleaned onto one line (a newline in an id would forge a line)."""
        parts = []
        for word, change in (("added", self.added), ("changed", self.changed), ("deleted", self.deleted)):
            if change.count:
                ids = ", ".join(one_line(key) for key in change.first)
                more = ", …" if change.count > len(change.first) else ""
                parts.append(f"{change.count} {word} ({ids}{more})")
        if self.only_in == "database":
            parts.insert(0, "only in the database (the snapshot predates it; the table is lost)")
        elif self.only_in == "snapshot":
            parts.insert(0, "only in the snapshot (the table comes back)")
        if self.columns_only_in_database:
            parts.append("columns only in the database, lost: "
                         + ", ".join(one_line(c) for c in self.columns_only_in_database))
        if self.columns_only_in_snapshot:
            parts.append("columns only in the snapshot: " + ", ".join(one_line(c) for c in self.columns_only_in_snapshot))
        if self.columns_only_in_database or self.columns_only_in_snapshot:
            parts.append("rows compared on the columns both have")
        if self.unreadable:
            parts.append(f"the rows cannot be compared ({one_line(self.unreadable)}): what it loses is not known")
        return f"{one_line(self.table)}: {'; '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        return {"unreadable": self.unreadable, "only_in": self.only_in, "columns_only_in_database": self.columns_only_in_database,
                "columns_only_in_snapshot": self.columns_only_in_snapshot, "added": self.added.to_json(),
                "changed": self.changed.to_json(), "deleted": self.deleted.to_json()}


def _columns(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[str]]:
    """(columns, primary-key columns in key order) of the table; generated columns included."""
    info = list(conn.execute(f"PRAGMA table_xinfo({quote_identifier(table)})"))
    columns = [str(row[1]) for row in info if row[6] in (0, 2, 3)]
    keys = [str(row[1]) for row in sorted((row for row in info if row[5]), key=lambda row: row[5])]
    return columns, keys


def _sortable(expr: str) -> str:
    """A value as Python orders it the way SQLite's BINARY collation does: storage class, then the
    value (text read as its bytes, `_raw`)."""
    return (f"CASE typeof({expr}) WHEN 'null' THEN 0 WHEN 'integer' THEN 1 WHEN 'real' THEN 1 "
            f"WHEN 'text' THEN 2 ELSE 3 END, {expr}")


def _rows(conn: sqlite3.Connection, table: str, keys: list[str], columns: list[str]) -> Iterator[tuple]:
    """Every row as (sort key..., shown key..., `columns`...), in key order; `keys` empty: the rowid.
    Text is read as its bytes (`_raw`): compared exactly, and not decoded for the rows that are equal."""
    exprs = [quote_identifier(k) for k in keys] or ["rowid"]
    picked = "".join(", " + quote_identifier(c) for c in columns)
    order = ", ".join(f"{e} COLLATE BINARY" if keys else e for e in exprs)
    with _raw(conn):
        cursor = conn.execute(
            f"SELECT {', '.join(_sortable(e) for e in exprs)}, {', '.join(exprs)}{picked} "
            f"FROM {quote_identifier(table)} ORDER BY {order}"
        )
    while True:
        with _raw(conn):
            batch = cursor.fetchmany(1024)
        if not batch:
            return
        yield from batch


@contextmanager
def _raw(conn: sqlite3.Connection) -> Iterator[None]:
    """Text fetched as bytes meanwhile (the connection's own factory decodes, which costs most of the
    time of a large table and replaces bytes it cannot decode, hiding a difference)."""
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        yield
    finally:
        conn.text_factory = factory


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class _Layout:
    """Where a row's parts are: sort key [0, shown), shown key [shown, common), compared columns
    [common, own), the side's own columns [own, ...)."""

    shown: int
    common: int
    own: int
    rowid: bool

    def key(self, row: tuple) -> str:
        shown = row[self.shown:self.common]
        if self.rowid:
            return f"rowid {shown[0]}"
        return (str(_text(shown[0])) if len(shown) == 1
                else "/".join("NULL" if v is None else str(_text(v)) for v in shown))


def _merge(now: Iterator[tuple], then: Iterator[tuple], at: _Layout) -> Iterator[tuple[tuple | None, tuple | None]]:
    """The rows of both sides paired by key, where they differ in the compared columns, or where a
    column only one side has holds a value (no change to count, but maybe a named kind to read);
    (row, None): only now. Equal rows of equal layout are passed over by one tuple comparison."""
    s, c, o = at.shown, at.common, at.own
    a, b = next(now, None), next(then, None)
    while a is not None and b is not None:
        if a == b:
            a, b = next(now, None), next(then, None)
            continue
        ka, kb = a[:s], b[:s]
        if ka < kb:
            yield a, None
            a = next(now, None)
        elif kb < ka:
            yield None, b
            b = next(then, None)
        else:
            if a[c:o] != b[c:o] or any(v is not None for v in a[o:]) or any(v is not None for v in b[o:]):
                yield a, b
            a, b = next(now, None), next(then, None)
    while a is not None:
        yield a, None
        a = next(now, None)
    while b is not None:
        yield None, b
        b = next(then, None)


def diff_table(now: sqlite3.Connection, then: sqlite3.Connection, table: str, in_now: bool, in_then: bool,
               on_row: RowCallback | None = None) -> TableDiff:
    """Compare `table` in both files (`in_now`/`in_then`: which files have it)."""
    diff = TableDiff(table, only_in=None if in_now and in_then else "database" if in_now else "snapshot")
    cols_now, keys_now = _columns(now, table) if in_now else ([], [])
    cols_then, keys_then = _columns(then, table) if in_then else ([], [])
    if in_now and in_then:
        common = [c for c in cols_now if c in cols_then]
        diff.columns_only_in_database = [c for c in cols_now if c not in cols_then]
        diff.columns_only_in_snapshot = [c for c in cols_then if c not in cols_now]
        keys = keys_now if keys_now == keys_then else []
    else:
        common = []
        keys = keys_now or keys_then
    # each side: the common columns (compared), then its own (handed to on_row)
    side_now = common + [c for c in cols_now if c not in common]
    side_then = common + [c for c in cols_then if c not in common]
    n = max(1, len(keys))
    at = _Layout(shown=2 * n, common=3 * n, own=3 * n + len(common), rowid=not keys)
    rows_now = iter(_rows(now, table, keys, side_now)) if in_now else iter(())
    rows_then = iter(_rows(then, table, keys, side_then)) if in_then else iter(())
    for a, b in _merge(rows_now, rows_then, at):
        if a is not None and b is not None:
            if a[at.common:at.own] != b[at.common:at.own]:
                diff.changed.add(at.key(a))
        elif a is not None:
            diff.added.add(at.key(a))
        else:
            diff.deleted.add(at.key(b))
        if on_row is not None:
            on_row(at.key(a if a is not None else b),
                   None if a is None else {c: _text(v) for c, v in zip(side_now, a[at.common:])},
                   None if b is None else {c: _text(v) for c, v in zip(side_then, b[at.common:])})
    return diff


__all__ = ["Change", "FIRST", "RowCallback", "TableDiff", "diff_table", "table_names"]
