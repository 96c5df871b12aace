"""The redacted copy a redacted support bundle is made from, streamed through bounded memory.

Doctor runs again on this copy (console/services/bundle.py), so the report in a redacted bundle is
the console's own sentences around redacted values. The copy is as big as the original, so it
lives in SQLite's own temporary database (console/db/connection.py `scratch_connection(on_disk=True)`:
pages beyond a fixed cache go to an unlinked private file), not in memory, and rows travel from
the original in chunks of `CHUNK` through the redactor into it: peak memory does not depend on the
number of rows (tests/test_bundle_streaming.py measures it).

The copy is the same as one made row by row with `Redactor.column`, placeholder for placeholder:
tables in the same order, each table's rows in rowid order and each row's cells left to right
through the same redactor (`Redactor.cell` only skips the cells whose answer is already known), so
every placeholder is made at the same moment and numbered alike (tests/test_bundle_streaming.py
compares the two on the same databases).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

from console.db.connection import scratch_connection
from console.db.sql import quote_identifier, stored_columns
from console.errors import EXIT_UNUSABLE, ConsoleError
from console.services.redaction import Redactor, archon_object, known_definition, known_tables

# Rows per read from the original: enough to keep the per-call cost small, few enough to keep the
# memory flat.
CHUNK = 512
# The copy's page cache (KiB, SQLite's negative cache_size), for each of its schemas.
CACHE_KIB = 4096
ROWID = "__archon_console_rowid"


class CopyNotMade(ConsoleError):
    """The copy ran out of space (SQLITE_FULL): no bundle, rather than one from a partial copy."""

    exit_code = EXIT_UNUSABLE


def _full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def redacted_copy(conn: sqlite3.Connection, redactor: Redactor) -> sqlite3.Connection:
    """A database with `conn`'s schema as a redacted bundle may show it, and every row passed
    through `redactor`.

    A table whose definition is archon's DDL (`known_definition`) is created from that text; any
    other goes through console/services/redaction_schema.py (placeholder names, no text). Rows go in
    before indexes and triggers exist (archon's triggers would refuse some of them and nothing here
    should fire), with CHECK constraints off (a placeholder can be longer or shorter than what a CHECK
    measures); a table SQLite cannot read stays empty, as doctor reports it.
    """
    from console.services import redaction_schema as rebuilt

    copy = scratch_connection(on_disk=True, check_same_thread=False)
    try:
        _fill(conn, copy, redactor, rebuilt)
    except BaseException as exc:
        copy.close()
        if _full(exc):
            raise CopyNotMade("The redacted copy did not fit in the temporary directory (it needs about as much free "
                              "space as the database); free some space there, or point SQLITE_TMPDIR at a "
                              "directory with room, and run the command again.") from None
        raise
    copy.row_factory = sqlite3.Row
    return copy


def _fill(conn: sqlite3.Connection, copy: sqlite3.Connection, redactor: Redactor, rebuilt: Any) -> None:
    copy.execute("PRAGMA ignore_check_constraints = ON")
    copy.execute(f"ATTACH '' AS {rebuilt.STAGING}")  # a non-archon table's original rows: on disk too
    for schema in ("main", rebuilt.STAGING):
        # Nothing here needs to survive a crash: the copy is gone with the connection.
        copy.execute(f"PRAGMA {schema}.journal_mode = OFF")
        copy.execute(f"PRAGMA {schema}.cache_size = {-CACHE_KIB}")
    for pragma in ("user_version", "application_id"):
        copy.execute(f"PRAGMA {pragma} = {int(conn.execute(f'PRAGMA {pragma}').fetchone()[0])}")
    objects = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, rowid"
    ).fetchall()
    copy.execute("BEGIN")
    staged = []
    for kind, name, _tbl, sql in objects:
        if kind != "table" or name.startswith("sqlite_"):
            continue
        known = known_definition(name, sql)
        try:
            if known is not None:
                copy.execute(known)
            else:
                rebuilt.stage(conn, copy, name)
                staged.append(name)
        except sqlite3.DatabaseError as exc:
            if _full(exc):
                raise
            continue  # a virtual table whose module this SQLite lacks
        try:
            _copy_rows(conn, copy, name, redactor)
        except sqlite3.DatabaseError as exc:
            if _full(exc):
                raise  # never a bundle made from a copy cut short by a full disk
            continue
    for name in staged:
        try:
            rebuilt.move(conn, copy, name, redactor, known_tables(name))
        except sqlite3.DatabaseError as exc:
            if _full(exc):
                raise
            continue
    for kind, name, tbl, sql in objects:
        if kind == "table" or name.startswith("sqlite_"):
            continue
        known = known_definition(name, sql)
        try:
            if known is not None:
                copy.execute(known)
            elif archon_object(name):
                rebuilt.stand_in(copy, kind, name, tbl, redactor, conn)
            else:
                rebuilt.renamed_rule(copy, kind, name, redactor, conn)
        except sqlite3.DatabaseError as exc:
            if _full(exc):
                raise
            continue  # e.g. a UNIQUE index that damaged rows violate
    copy.execute("COMMIT")
    copy.execute(f"DETACH {rebuilt.STAGING}")
    copy.execute("PRAGMA ignore_check_constraints = OFF")


def _copy_rows(conn: sqlite3.Connection, copy: sqlite3.Connection, table: str, redactor: Redactor) -> None:
    """Rows keep their rowids (doctor's foreign-key findings name them); WITHOUT ROWID tables have none.

    A table SQLite stops reading part-way (a damaged page) keeps every row read before the damage,
    as when rows went in one by one: the chunk the error cut short is read again row by row."""
    name, stored = quote_identifier(table), stored_columns(conn, table)  # generated ones are never read
    select = f"SELECT rowid AS {quote_identifier(ROWID)}, {stored} FROM {name}"
    try:
        cur = conn.execute(select)
    except sqlite3.OperationalError:
        select = f"SELECT {stored} FROM {name}"
        cur = conn.execute(select)
    columns = [d[0] for d in cur.description]
    targets = ", ".join("rowid" if c == ROWID else quote_identifier(c) for c in columns)
    insert = f'INSERT INTO {name} ({targets}) VALUES ({", ".join("?" * len(columns))})'
    cells: list[Callable[[Any], Any]] = [
        (lambda value: value) if c == ROWID else redactor.cell(table, c) for c in columns]
    done = 0
    while True:
        try:
            chunk = cur.fetchmany(CHUNK)
        except sqlite3.DatabaseError:
            break
        if not chunk:
            return
        # A generator: executemany asks for a row only after the one before went in, so an insert
        # that fails (a NOT NULL the damaged row breaks) leaves the rows after it unredacted, as
        # before; the error ends this table's rows.
        copy.executemany(insert, ([cell(v) for cell, v in zip(cells, row)] for row in chunk))
        done += len(chunk)
    cur = conn.execute(select)
    while done > 0:  # read again, not redacted again
        skipped = cur.fetchmany(min(done, CHUNK))
        if not skipped:
            return
        done -= len(skipped)
    for row in cur:  # raises again where SQLite stopped
        copy.execute(insert, [cell(v) for cell, v in zip(cells, row)])


__all__ = ["CopyNotMade", "redacted_copy"]
