"""The console's record of which schema steps it applied to an archon database.

Two tables, written in the same transaction as the step they describe:

* `_sqlite_migrations`, created exactly as sqlite-utils' `Migrations.ensure_migrations_table`
  creates it, with migration set `archon-console`, so `sqlite-utils migrate --list` and anything
  else that reads sqlite-utils ledgers still understands the database;
* `_archon_console_ledger` beside it, for what sqlite-utils has no column for: position, safety
  class, checksum of the step's body, the release the run was aiming at, the snapshot taken before
  the run (path and SHA-256) and the console version.

The ledger must be an exact ordered prefix of the registry (akm's rule, docs/decisions.md, D10). Anything
else fails closed with `DatabaseUnusable`, each divergence with its own sentence, and nothing is
written: a newer console made it, someone edited it, or a released step was changed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

import console
from console.clock import db_time
from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE, MIGRATION_SET
from console.db.migrations.base import Migration
from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0, EARLIER_CHECKSUMS_0_1_0, LEGACY_TOOL_VERSION
from console.db.migrations.registry import MIGRATIONS
from console.errors import DatabaseUnusable

# Byte-for-byte what sqlite-utils 4 writes (checked against `ensure_migrations_table`).
CREATE_LEDGER = (
    'CREATE TABLE IF NOT EXISTS "_sqlite_migrations" (\n'
    '   "id" INTEGER PRIMARY KEY,\n'
    '   "migration_set" TEXT,\n'
    '   "name" TEXT,\n'
    '   "applied_at" TEXT\n'
    ")"
)
CREATE_LEDGER_INDEX = (
    'CREATE UNIQUE INDEX IF NOT EXISTS "idx__sqlite_migrations_migration_set_name"\n'
    '    ON "_sqlite_migrations" ("migration_set", "name")'
)
CREATE_META = f"""CREATE TABLE IF NOT EXISTS "{LEDGER_META_TABLE}" (
  name            TEXT PRIMARY KEY,
  position        INTEGER NOT NULL UNIQUE,
  safety          TEXT NOT NULL,
  checksum        TEXT NOT NULL,
  target_release  TEXT NOT NULL,
  snapshot_path   TEXT,
  snapshot_sha256 TEXT,
  tool_version    TEXT NOT NULL,
  applied_at      TEXT NOT NULL
)"""


@dataclass(frozen=True)
class LedgerEntry:
    name: str
    applied_at: str | None
    position: int | None = None
    safety: str | None = None
    checksum: str | None = None
    target_release: str | None = None
    snapshot_path: str | None = None
    snapshot_sha256: str | None = None
    tool_version: str | None = None
    has_meta: bool = False


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        is not None
    )


def read_entries(conn: sqlite3.Connection) -> list[LedgerEntry]:
    """Our rows, in the order sqlite-utils reads them (rowid), joined to their side rows.

    Side rows without a ledger row come back too (with `applied_at` None) so that a ledger
    edited by hand is noticed.
    """
    if not _exists(conn, LEDGER_TABLE):
        meta_only = _exists(conn, LEDGER_META_TABLE)
        if not meta_only:
            return []
    has_meta = _exists(conn, LEDGER_META_TABLE)
    entries: list[LedgerEntry] = []
    seen: set[str] = set()
    if _exists(conn, LEDGER_TABLE):
        meta_cols = (
            "m.position, m.safety, m.checksum, m.target_release, m.snapshot_path, "
            "m.snapshot_sha256, m.tool_version, m.name IS NOT NULL"
            if has_meta
            else "NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0"
        )
        join = f'LEFT JOIN "{LEDGER_META_TABLE}" m ON m.name = l.name' if has_meta else ""
        rows = conn.execute(
            f'SELECT l.name, l.applied_at, {meta_cols} FROM "{LEDGER_TABLE}" l {join} '
            "WHERE l.migration_set = ? ORDER BY l.rowid",
            (MIGRATION_SET,),
        ).fetchall()
        for row in rows:
            row = tuple(row)
            entries.append(LedgerEntry(row[0], row[1], *row[2:9], has_meta=bool(row[9])))
            seen.add(row[0])
    if has_meta:
        for row in conn.execute(
            f'SELECT name, position FROM "{LEDGER_META_TABLE}" ORDER BY position'
        ).fetchall():
            if row[0] not in seen:
                entries.append(LedgerEntry(row[0], None, row[1], has_meta=True))
    return entries


def verify(
    entries: Sequence[LedgerEntry], registry: Sequence[Migration] = MIGRATIONS
) -> tuple[str, ...]:
    """The applied ids, if the ledger is an exact ordered prefix of the registry; else refuse."""
    known = {m.id: m for m in registry}
    for entry in entries:
        if entry.name not in known:
            raise DatabaseUnusable(
                f"The database's upgrade ledger names step {entry.name!r}, which this console does not "
                "know: the database is newer than this console. Nothing was changed.",
                "Use the archon-console release that upgraded it, or a newer one.",
            )
    names = [e.name for e in entries]
    expected = [m.id for m in registry[: len(names)]]
    if names != expected:
        position = next(i for i, (a, b) in enumerate(zip(names, expected)) if a != b)
        if len(set(names)) != len(names) or sorted(names) == sorted(expected):
            problem = "lists its steps out of order"
        else:
            problem = f"skips step {expected[position]} (a gap)"
        raise DatabaseUnusable(
            f"The database's upgrade ledger {problem} at position {position + 1}: it is not the "
            "exact ordered history this console applies. Nothing was changed.",
            "The ledger was edited or written by another tool; restore a snapshot or inspect it by hand.",
        )
    for index, entry in enumerate(entries):
        migration = known[entry.name]
        if not entry.has_meta or entry.applied_at is None:
            raise DatabaseUnusable(
                f"The database's upgrade ledger is incomplete at step {entry.name} (one of its two "
                "tables lacks the row). Nothing was changed.",
                "The ledger was edited by hand or by another tool.",
            )
        if entry.position is not None and entry.position != index + 1:
            raise DatabaseUnusable(
                f"The database's upgrade ledger records step {entry.name} at position "
                f"{entry.position}, not {index + 1}. Nothing was changed.",
            )
        if not checksum_accepted(entry, migration):
            raise DatabaseUnusable(
                f"Step {entry.name} was applied with a different body than this console's "
                "(its checksum changed). Nothing was changed.",
                "A released step must never be edited; use the console release that applied it.",
            )
    return tuple(names)


def checksum_accepted(entry: LedgerEntry, migration: Migration) -> bool:
    """The row's checksum is this console's for the step, or one archon-console 0.1.0 recorded for
    an earlier body of it (a row that version wrote; console/db/migrations/legacy_checksums.py says
    what each means)."""
    if entry.checksum == migration.checksum:
        return True
    return (
        entry.tool_version == LEGACY_TOOL_VERSION
        and entry.checksum is not None
        and (entry.checksum == CHECKSUMS_0_1_0.get(entry.name)
             or entry.checksum in EARLIER_CHECKSUMS_0_1_0.get(entry.name, ()))
    )


def read_verified(conn: sqlite3.Connection) -> tuple[str, ...]:
    return verify(read_entries(conn))


def ensure_tables(conn: sqlite3.Connection) -> None:
    """Create both tables (inside the caller's transaction)."""
    conn.execute(CREATE_LEDGER)
    conn.execute(CREATE_LEDGER_INDEX)
    conn.execute(CREATE_META)


def record(
    conn: sqlite3.Connection,
    migration: Migration,
    *,
    position: int,
    target_release: str,
    now: datetime,
    snapshot_path: str | None = None,
    snapshot_sha256: str | None = None,
) -> None:
    """Write the step's two ledger rows, inside the step's own transaction."""
    ensure_tables(conn)
    applied_at = db_time(now)
    conn.execute(
        f'INSERT INTO "{LEDGER_TABLE}" (migration_set, name, applied_at) VALUES (?, ?, ?)',
        (MIGRATION_SET, migration.id, applied_at),
    )
    conn.execute(
        f'INSERT INTO "{LEDGER_META_TABLE}" (name, position, safety, checksum, target_release, '
        "snapshot_path, snapshot_sha256, tool_version, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            migration.id,
            position,
            migration.safety,
            migration.checksum,
            target_release,
            snapshot_path,
            snapshot_sha256,
            console.__version__,
            applied_at,
        ),
    )


def recorded_snapshots(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(path, SHA-256) for every snapshot the ledger remembers; a path taken twice has two rows."""
    if not _exists(conn, LEDGER_META_TABLE):
        return []
    return [
        (row[0], row[1])
        for row in conn.execute(
            f'SELECT DISTINCT snapshot_path, snapshot_sha256 FROM "{LEDGER_META_TABLE}" '
            "WHERE snapshot_path IS NOT NULL"
        )
    ]


__all__ = [
    "LedgerEntry",
    "checksum_accepted",
    "ensure_tables",
    "read_entries",
    "read_verified",
    "record",
    "recorded_snapshots",
    "verify",
]
