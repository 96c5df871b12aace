"""When a database was last written, as the database itself proves it: the time a support
snapshot is shown "as of" (console/models/support.py `SupportInfo.as_of`, console/clock.py
`ScreenClock`).

Why the database and not the file's modification time: a customer's file reaches support copied
(scp, a ticket attachment, a restore), and a copy's mtime is the copy's, often a day after archon
last wrote it; what archon wrote says when archon wrote. Archon stamps every row it inserts
(`created_at`) and every row it changes in place (`updated_at`), and each decision, claim or
lifecycle change also appends an event row; so the newest `created_at`/`updated_at` among the
newest rows is the newest write archon recorded.

Bounded on any size: each table's newest `TAIL_ROWS` rows (by rowid, the order SQLite appended
them) are read, never a whole table, so a 10 GB file costs what a small one does; and at most
`TOTAL_ROWS` over all tables, so a file of thousands of tables costs what archon's does. Only stored
columns are read (a generated column is computed by the file's author's expression,
console/db/sql.py), and a table SQLite cannot read that way (a virtual table, a `WITHOUT ROWID`
table) is passed over. Each table's newest time is found by SQLite itself (`_NEWEST_SQL`), one
number per table: a file with thousands of tables of a thousand rows each costs a second, not the
minutes that making every value a Python datetime took, before the console painted.

Values that are not times are ignored: NULL, BLOBs, text longer than `VALUE_CHARS`, text neither a
number nor an ISO 8601 time SQLite's `julianday` reads. A number (or numeric text) is epoch seconds,
or epoch milliseconds beyond 1e11 (JavaScript's `Date.now()`), as console/clock.py `parse_time`
reads them. Times after `not_after` (the moment the snapshot was taken) are ignored, not clamped:
one row stamped in the future (a writer's clock ahead, a hostile file) would otherwise pin the
whole view to the snapshot's moment, and every countdown would again run against then.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

from console.db.connect import ArchonDatabase
from console.db.sql import quote_identifier, table_xinfo

WRITE_TIME_COLUMNS = ("created_at", "updated_at")
TAIL_ROWS = 1000
# Rows read over all tables: archon's thirty-odd tables each get their `TAIL_ROWS`; a file of
# thousands of tables gets fewer from each (never fewer than `MIN_TAIL_ROWS`), not minutes before the
# console paints.
TOTAL_ROWS = 100_000
MIN_TAIL_ROWS = 10
VALUE_CHARS = 64  # the longest stored form of an instant, with room; a longer value is not a time

# A value `v` as epoch seconds, or NULL when it is not a time (module docstring).
# An ISO 8601 time starts with a four-digit year and a dash; a number is epoch seconds or milliseconds
# (text that is a number too: `julianday` would read it as a Julian day number).
_SECONDS = ("CASE WHEN typeof(v) = 'text' AND v GLOB '[0-9][0-9][0-9][0-9]-*' "
            f"THEN (CASE WHEN length(v) <= {VALUE_CHARS} THEN (julianday(replace(v, 'z', 'Z')) - 2440587.5) * 86400.0 END) "
            "WHEN typeof(v) IN ('integer', 'real') OR (typeof(v) = 'text' AND length(v) <= 32 "
            "AND trim(v) NOT GLOB '*[^0-9.eE+-]*') "
            "THEN (CASE WHEN CAST(v AS REAL) > 1e11 THEN CAST(v AS REAL) / 1000.0 ELSE CAST(v AS REAL) END) END")
# {tail}: one `SELECT column AS v FROM (the table's newest rows)` per write-time column, UNION ALL'd.
# `LIMIT -1` keeps SQLite from flattening the subquery, which would compute `s` once per use.
_NEWEST_SQL = "SELECT max(CASE WHEN s > 0 AND s <= ? THEN s END) FROM (SELECT {seconds} AS s FROM ({tail}) LIMIT -1)"


def _tail(table: str, column: str, rows: int) -> str:
    return (f"SELECT {quote_identifier(column)} AS v FROM (SELECT {quote_identifier(column)} FROM "
            f"{quote_identifier(table)} ORDER BY rowid DESC LIMIT {int(rows)})")


def newest_write_time(handle: ArchonDatabase, not_after: datetime | None = None) -> datetime | None:
    """The newest instant, not after `not_after` (default: now), any table's recent rows were
    created or updated at; None when no row says."""
    ceiling = (not_after or datetime.now(timezone.utc)).timestamp()
    conn = handle.conn
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%'")]
    rows = max(MIN_TAIL_ROWS, min(TAIL_ROWS, TOTAL_ROWS // max(1, len(tables))))
    newest: float | None = None
    for table in tables:
        try:
            columns = [r[1] for r in table_xinfo(conn, table) if r[6] == 0 and r[1] in WRITE_TIME_COLUMNS]
            if not columns:
                continue
            tail = " UNION ALL ".join(_tail(table, c, rows) for c in columns)
            (found,), = conn.execute(_NEWEST_SQL.format(seconds=_SECONDS, tail=tail), (ceiling,)).fetchall()
        except sqlite3.OperationalError:  # no rowid, or a table this SQLite cannot read
            continue
        if isinstance(found, (int, float)) and (newest is None or found > newest):
            newest = float(found)
    if newest is None:
        return None
    try:
        return datetime.fromtimestamp(round(newest, 3), timezone.utc)  # julianday's float: to the ms
    except (ValueError, OverflowError, OSError):
        return None


__all__ = ["MIN_TAIL_ROWS", "TAIL_ROWS", "TOTAL_ROWS", "WRITE_TIME_COLUMNS", "newest_write_time"]
