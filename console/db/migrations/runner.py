"""Applying one step: foreign keys off before BEGIN for rebuilds, `BEGIN IMMEDIATE`, the step,
`foreign_key_check` empty before COMMIT, the ledger row in the same transaction.

`locked` runs right after `BEGIN IMMEDIATE`, under the writer lock and before the step: the
guarded upgrade re-reads the ledger there (another upgrader may have applied the step meanwhile;
returning False skips it) and takes its snapshot. Its exceptions pass through unchanged, after
the rollback, so a refusal stays a refusal instead of becoming "migration failed".
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from console.db.migrations.base import Migration
from console.db.tx import rollback


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
    locked: Callable[[sqlite3.Connection, Migration], bool] | None = None,
) -> bool:
    """Run `migration` in its own transaction (or the caller's when `begin` is False).

    Returns False when `locked` said the step is no longer pending (nothing was written).

    A rebuild step whose table already has the new shape (`needed` says no) runs like any other
    step: foreign keys stay on and the whole-database `foreign_key_check` (most of its cost on a
    large file) is skipped. The shape is read again under the lock; should it have changed in
    between, the step stops rather than rebuild with foreign keys on (which would cascade).
    """
    rebuilding = migration.rebuild and (migration.needed is None or migration.needed(conn))
    if rebuilding:
        if conn.in_transaction:
            raise MigrationFailed(migration, "a table rebuild must start outside a transaction")
        conn.execute("PRAGMA foreign_keys = OFF")
    try:
        if begin:
            conn.execute("BEGIN IMMEDIATE")
        if locked is not None:
            try:
                proceed = locked(conn, migration)
            except BaseException:
                if begin:
                    rollback(conn)
                raise
            if not proceed:
                if begin:
                    rollback(conn)
                return False
        try:
            if migration.rebuild and not rebuilding and migration.needed(conn):
                raise MigrationFailed(
                    migration,
                    "the table changed shape while the upgrade waited for the lock; nothing was "
                    "written, run the upgrade again",
                )
            migration.up(conn)
            if rebuilding:
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
            if begin:
                rollback(conn)
            if isinstance(exc, MigrationFailed):
                raise
            if isinstance(exc, Exception):
                raise MigrationFailed(migration, str(exc)) from exc
            raise
    finally:
        if rebuilding:
            conn.execute("PRAGMA foreign_keys = ON")
    return True


def apply_all(conn: sqlite3.Connection, migrations, *, record=None) -> None:
    for migration in migrations:
        apply_migration(conn, migration, record=record)
