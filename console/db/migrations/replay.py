"""A private in-memory copy of a database's schema, for running pending steps where nothing is written.

The preflight (console/db/migrations/preflight.py) runs the pending steps there to find a step that
fails on the schema itself, and the fixed-id prediction (console/db/migrations/fixed_ids.py) runs
them with the rows the profile steps read or update (and their FOREIGN KEY parents), to see what
each would insert and whether each runs to the end as the chain reaches it.
Rows are copied after the tables and before the triggers, so no trigger of the file fires on them.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from console.db.connection import scratch_connection
from console.db.sql import quote_identifier

ORDER = {"table": 0, "index": 1, "view": 2, "trigger": 3}


def replay_schema(conn: sqlite3.Connection, rows_of: Iterable[str] = ()) -> sqlite3.Connection:
    """The schema of `conn` in a new in-memory database, with the rows of the tables `rows_of`."""
    scratch = scratch_connection()
    entries = sorted(
        (ORDER.get(r[0], 4), i, r[0], r[1], r[2])
        for i, r in enumerate(conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY rowid"
        ))
    )
    copied = False
    wanted = _with_parents(conn, set(rows_of))
    for rank, _i, _type, _name, sql in entries:
        if rank > 0 and not copied:
            _copy_rows(conn, scratch, wanted)
            copied = True
        try:
            scratch.execute(sql)
        except sqlite3.Error:
            continue  # a virtual table's shadow tables and the like: not ours to judge
    if not copied:
        _copy_rows(conn, scratch, wanted)
    scratch.execute("PRAGMA foreign_keys = ON")
    return scratch


def _with_parents(conn: sqlite3.Connection, tables: set[str]) -> set[str]:
    """`tables` and every table they name in a FOREIGN KEY, at any depth: a rebuild's
    `foreign_key_check` in the copy must not see a copied row's parent missing only because its
    table was not copied."""
    wanted, todo = set(), list(tables)
    while todo:
        table = todo.pop()
        if table in wanted:
            continue
        wanted.add(table)
        try:
            todo.extend(r[2] for r in conn.execute(f"PRAGMA foreign_key_list({quote_identifier(table)})"))
        except sqlite3.Error:
            continue
    return wanted


def _copy_rows(conn: sqlite3.Connection, scratch: sqlite3.Connection, tables: set[str]) -> None:
    present = {r[0] for r in scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    # rows the file holds are copied as they are, even where a CHECK the file's writer bypassed
    # (PRAGMA ignore_check_constraints, a column added without it) rejects them: the steps meet them so
    scratch.execute("PRAGMA ignore_check_constraints = ON")
    try:
        _insert_rows(conn, scratch, sorted(tables & present))
    finally:
        scratch.execute("PRAGMA ignore_check_constraints = OFF")


def _insert_rows(conn: sqlite3.Connection, scratch: sqlite3.Connection, tables: list[str]) -> None:
    for table in tables:
        names = [r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")]
        if not names:
            continue
        cols = ", ".join(quote_identifier(n) for n in names)
        marks = ", ".join("?" for _ in names)
        rows = conn.execute(f"SELECT {cols} FROM {quote_identifier(table)}")
        scratch.executemany(f"INSERT INTO {quote_identifier(table)} ({cols}) VALUES ({marks})", rows)


__all__ = ["replay_schema"]
