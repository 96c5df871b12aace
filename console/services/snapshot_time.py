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
them) are read, never a whole table, so a 10 GB file costs what a small one does. Only stored
columns are read (a generated column is computed by the file's author's expression,
console/db/sql.py), at most `VALUE_CHARS` of each value, and a table SQLite cannot read that way
(a virtual table, a `WITHOUT ROWID` table) is passed over. Values that are not times are ignored;
times ahead of the moment the snapshot was taken are clamped by the caller.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from console.clock import parse_time
from console.db.connect import ArchonDatabase
from console.db.sql import quote_identifier, table_xinfo

WRITE_TIME_COLUMNS = ("created_at", "updated_at")
TAIL_ROWS = 1000
VALUE_CHARS = 64  # the longest stored form of an instant, with room; a longer value is not a time


def newest_write_time(handle: ArchonDatabase) -> datetime | None:
    """The newest instant any table's recent rows were created or updated at; None when no row says."""
    conn = handle.conn
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%'")]
    newest: datetime | None = None
    for table in tables:
        try:
            columns = [r[1] for r in table_xinfo(conn, table) if r[6] == 0 and r[1] in WRITE_TIME_COLUMNS]
            if not columns:
                continue
            picked = ", ".join(f"substr({quote_identifier(c)}, 1, {VALUE_CHARS})" for c in columns)
            rows = conn.execute(f"SELECT {picked} FROM {quote_identifier(table)} "
                                f"ORDER BY rowid DESC LIMIT {TAIL_ROWS}").fetchall()
        except sqlite3.OperationalError:  # no rowid, or a table this SQLite cannot read
            continue
        for row in rows:
            for value in row:
                at = parse_time(value)
                if at is not None and (newest is None or at > newest):
                    newest = at
    return newest


__all__ = ["TAIL_ROWS", "WRITE_TIME_COLUMNS", "newest_write_time"]
