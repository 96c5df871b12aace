"""The one way a name from a database becomes part of an SQL statement, and which columns are read.

Table, column, index, trigger and view names are database text, hence hostile: a table named
`x" WHERE 0 UNION ... WITH RECURSIVE ...` once made `doctor --bundle` run for ever. Every name
spliced into SQL passes `quote_identifier` (tests/adversarial/test_hostile_names.py feeds names
with `"`, `]`, backticks, quotes, newlines, control characters, `--` and `;` in every schema
position through every command that reads the schema).

It is `sqlite_utils.db.quote_identifier`'s rule (double quotes, `"` doubled), written here because
importing sqlite-utils costs ~50 ms at start-up and every read path names columns; it also quotes a
name that is not text (docs/decisions.md, D26).

`stored_columns` is how a read names its columns instead of `SELECT *`: a generated column is
computed by SQLite at every read from an expression the file's author chose (a 300 MB `printf`), so
it is never read; doctor reports it (services/doctor/checks_schema.py).
"""

from __future__ import annotations

import sqlite3


def quote_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier, whatever characters it holds."""
    return '"' + str(name).replace('"', '""') + '"'


def table_xinfo(conn: sqlite3.Connection, table: str) -> list[tuple]:
    """(cid, name, type, notnull, default, pk, hidden) per column; hidden 2 or 3 is generated."""
    return [tuple(r) for r in conn.execute(f"PRAGMA table_xinfo({quote_identifier(table)})")]


def generated_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in table_xinfo(conn, table) if r[6] in (2, 3)]


def stored_columns(conn: sqlite3.Connection, table: str, prefix: str = "") -> str:
    """The SQL list of `table`'s stored columns (`prefix.` before each): `SELECT *` minus what
    SQLite would compute at read time. Virtual-table hidden columns (hidden 1) are left out too."""
    names = [r[1] for r in table_xinfo(conn, table) if r[6] == 0]
    if not names:
        raise sqlite3.OperationalError(f"no such table: {table}")
    lead = f"{prefix}." if prefix else ""
    return ", ".join(lead + quote_identifier(n) for n in names)


def sqlite_lower(text: str) -> str:
    """`text` folded as SQLite's built-in lower() folds it: ASCII letters only. A search compares a
    needle with `lower(column)` in SQL; folded by Python's lower() instead, "É" would become "é" and
    never find the "É" SQLite left as it was."""
    return "".join(c.lower() if c.isascii() else c for c in text)


__all__ = ["generated_columns", "quote_identifier", "sqlite_lower", "stored_columns", "table_xinfo"]
