"""What every migration step is made of, and the SQL helpers steps share.

A step is a module with ID, RELEASE, SAFETY, DESCRIPTION, REBUILD, `up(conn)` and
`estimate(conn)`; its checksum is the SHA-256 of its source, so an edited released step is noticed.
Steps are idempotent against every archon shape from 1.8.20 on, using archon's own tests
(IF NOT EXISTS, column presence, marker substrings), so adopting a database archon already moved
forward replays them harmlessly.
"""

from __future__ import annotations

import hashlib
import inspect
import sqlite3
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

SAFETY_CLASSES = ("additive", "data-preserving-rebuild", "historical-destructive")


@dataclass(frozen=True)
class Migration:
    id: str
    release: str
    safety: str
    description: str
    rebuild: bool
    up: Callable[[sqlite3.Connection], None]
    estimate: Callable[[sqlite3.Connection], int]
    checksum: str
    module: str
    needed: Callable[[sqlite3.Connection], bool] | None = None

    @classmethod
    def from_module(cls, module: ModuleType) -> "Migration":
        source = inspect.getsource(module)
        return cls(
            id=module.ID,
            release=module.RELEASE,
            safety=module.SAFETY,
            description=module.DESCRIPTION,
            rebuild=getattr(module, "REBUILD", False),
            up=module.up,
            estimate=getattr(module, "estimate", lambda conn: 0),
            checksum=hashlib.sha256(source.encode("utf-8")).hexdigest(),
            module=module.__name__,
            needed=getattr(module, "needed", None),
        )


# --- introspection -------------------------------------------------------------------------

def table_sql(conn: sqlite3.Connection, table: str) -> str:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return (row[0] or "") if row else ""


def table_exists(conn: sqlite3.Connection, table: str) -> bool:
    return bool(table_sql(conn, table))


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def object_exists(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
        ).fetchone()
        is not None
    )


def count(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> int:
    try:
        return int(conn.execute(sql, params).fetchone()[0])
    except sqlite3.OperationalError:
        return 0


# --- writing -------------------------------------------------------------------------------

def execute_script(conn: sqlite3.Connection, script: str) -> None:
    """Run several statements inside the caller's transaction.

    `executescript()` would COMMIT the open transaction first, so statements are split with
    `sqlite3.complete_statement`, which understands trigger bodies.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement.strip(";").strip():
                conn.execute(statement)
    if buffer.strip():
        conn.execute(buffer)


def ensure_column(conn: sqlite3.Connection, table: str, column: str, declaration: str) -> bool:
    """Archon's `ensureColumn`: add the column with a bare declaration when it is missing."""
    if not table_exists(conn, table) or column in columns(conn, table):
        return False
    conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{column}" {declaration}')
    return True


def rebuild_table(
    conn: sqlite3.Connection,
    *,
    table: str,
    replacement: str,
    create_replacement_sql: str,
    copy_columns: list[str],
    trigger_like: str,
    trigger_overrides: dict[str, str] | None = None,
) -> None:
    """SQLite's table-rebuild procedure, as archon's 1.8.22 recipe does it.

    Runs inside the caller's transaction; the runner has turned `foreign_keys` off before BEGIN
    and checks `foreign_key_check` before COMMIT. Triggers that mention the table are dropped
    first (a RENAME re-parses every trigger and fails on one naming a missing table) and put back
    afterwards from their stored text, or from `trigger_overrides`; the table's own indexes too.
    """
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql LIKE ?",
        (f"%{trigger_like}%",),
    ).fetchall()
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
        (table,),
    ).fetchall()
    for name, _sql in triggers:
        conn.execute(f'DROP TRIGGER IF EXISTS "{name.replace(chr(34), chr(34) * 2)}"')
    conn.execute(f'DROP TABLE IF EXISTS "{replacement}"')
    execute_script(conn, create_replacement_sql)
    present = set(columns(conn, table))
    copied = [c for c in copy_columns if c in present]
    column_list = ", ".join(copied)
    conn.execute(
        f'INSERT INTO "{replacement}" ({column_list}) SELECT {column_list} FROM "{table}"'
    )
    conn.execute(f'DROP TABLE "{table}"')
    conn.execute(f'ALTER TABLE "{replacement}" RENAME TO "{table}"')
    for _name, sql in indexes:
        conn.execute(sql)
    overrides = dict(trigger_overrides or {})
    for name, sql in triggers:
        conn.execute(overrides.pop(name, sql))
    for sql in overrides.values():
        conn.execute(sql)
