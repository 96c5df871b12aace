"""Applying one step: foreign keys off before BEGIN for rebuilds, `BEGIN IMMEDIATE`, the step,
`foreign_key_check` empty before COMMIT, the ledger row in the same transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from console.db.migrations.base import Migration


class MigrationFailed(Exception):
    def __init__(self, migration: Migration, message: str):
        super().__init__(f"Migration {migration.id} failed and was rolled back: {message}")
        self.migration = migration
        self.message = message


def apply_migration(
    conn: sqlite3.Connection,
    migration: Migration,
    *,
    record: Callable[[sqlite3.Connection, Migration], None] | None = None,
    begin: bool = True,
) -> None:
    """Run `migration` in its own transaction (or the caller's when `begin` is False)."""
    if migration.rebuild:
        if conn.in_transaction:
            raise MigrationFailed(migration, "a table rebuild must start outside a transaction")
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        if begin:
            conn.execute("BEGIN IMMEDIATE")
        try:
            migration.up(conn)
            if migration.rebuild:
                violations = conn.execute("PRAGMA foreign_key_check").fetchall()
                if violations:
                    first = tuple(violations[0])
                    raise MigrationFailed(
                        migration, f"the rebuild left an invalid foreign key: {first!r}"
                    )
            if record is not None:
                record(conn, migration)
            if begin:
                conn.execute("COMMIT")
        except BaseException as exc:
            if begin and conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, MigrationFailed):
                raise
            if isinstance(exc, Exception):
                raise MigrationFailed(migration, str(exc)) from exc
            raise
    finally:
        if migration.rebuild:
            conn.execute("PRAGMA foreign_keys = ON")


def apply_all(conn: sqlite3.Connection, migrations, *, record=None) -> None:
    for migration in migrations:
        apply_migration(conn, migration, record=record)
