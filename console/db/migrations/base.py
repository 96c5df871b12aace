"""What every migration step is made of, and the SQL helpers steps share.

A step is a module with ID, RELEASE, SAFETY, DESCRIPTION, REBUILD, `up(conn)` and
`estimate(conn)`. Its checksum covers everything of this project that decides what it writes: the
source of the step module and of every module of the project's packages (`PROJECT_PACKAGES`) it
names in an import, at any depth (shared DDL such as steps/approval_ddl.py, backfills.py,
profile_triggers.py, this file's helpers, and console/db/execution_profiles.py, whose defaults,
normalisation, serialisation and fingerprint steps 004-007 and 020-022 write), and of the runner
that applies every step (`RUNNER`) and the modules it imports. So editing any module
a released step reaches changes that step's checksum and is noticed (`step_checksum`; the
checksums earlier console versions recorded are in legacy_checksums.py). A package's `__init__`
is followed only when a step names the package itself: it runs on every import, but a step uses
only what it names. The standard library and third-party packages are not followed.
Steps are idempotent against every archon shape from 1.8.20 on, using archon's own tests
(IF NOT EXISTS, column presence, marker substrings), so adopting a database archon already moved
forward replays them harmlessly.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import re
import sqlite3
from dataclasses import dataclass
from collections.abc import Collection
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
        return cls(
            id=module.ID,
            release=module.RELEASE,
            safety=module.SAFETY,
            description=module.DESCRIPTION,
            rebuild=getattr(module, "REBUILD", False),
            up=module.up,
            estimate=getattr(module, "estimate", lambda conn: 0),
            checksum=step_checksum(module),
            module=module.__name__,
            needed=getattr(module, "needed", None),
        )


# The project's own top-level packages (pyproject.toml `[tool.setuptools.packages.find]`; a test
# keeps the two equal): modules under them are followed into a step's checksum.
PROJECT_PACKAGES = ("console", "widgets")


def _ours(name: str) -> bool:
    return name.split(".")[0] in PROJECT_PACKAGES


@functools.lru_cache(maxsize=None)
def _imports_of(name: str) -> frozenset[str]:
    """`_imported_project_modules` of the module `name`, parsed once per process: the registry
    checksums 29 steps that share most of their sources, and every CLI command imports it."""
    return frozenset(_imported_project_modules(importlib.import_module(name)))


def _imported_project_modules(module: ModuleType) -> set[str]:
    """Project modules that `module` names in an import anywhere in its source (also inside
    functions and conditionals: a step that imports lazily still depends on what it imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if _ours(a.name))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
                base = importlib.util.resolve_name("." * node.level + base, package)
            if not _ours(base):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if _is_module(submodule) else base)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# The module that applies every step (console/db/migrations/runner.py): it decides what a step
# writes as much as the step does (foreign keys off around a rebuild, so DROP TABLE cascades
# nothing; the transaction; the foreign-key check before COMMIT), so it and whatever it imports are
# sources of every step, by this mechanism rather than by each step importing it.
RUNNER = "console.db.migrations.runner"


def step_sources(module: ModuleType) -> list[str]:
    """The step module's name, then every project module it or the runner reaches by imports, sorted."""
    seen: set[str] = set()
    todo = [module.__name__, RUNNER]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_imports_of(name))
    return [module.__name__] + sorted(seen - {module.__name__})


def step_checksum(module: ModuleType) -> str:
    """SHA-256 over the name and source of every module in `step_sources`, in that order."""
    digest = hashlib.sha256()
    for name in step_sources(module):
        source = inspect.getsource(importlib.import_module(name))
        for part in (name, source):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()


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
    copy_columns: list[str] | None,
    trigger_like: str,
    trigger_overrides: dict[str, str] | None = None,
    release_triggers: dict[str, str] | None = None,
    index_overrides: dict[str, str] | None = None,
    left_out: Collection[str] = (),
) -> None:
    """SQLite's table-rebuild procedure, as archon's 1.8.22 recipe does it.

    Runs inside the caller's transaction; the runner has turned `foreign_keys` off before BEGIN
    and checks `foreign_key_check` before COMMIT. Triggers that mention the table are dropped
    first (a RENAME re-parses every trigger and fails on one naming a missing table) and put back
    afterwards. A trigger archon re-creates unconditionally after the same rebuild comes back with
    the release's text (`release_triggers`, by name; only if it was there), so the result is what
    archon's own run leaves even when the old database held an older text; `trigger_overrides`
    (and `index_overrides`) are put in place whether or not they were there. Any other trigger,
    and the table's other indexes, come back from their stored text, except those named in
    `left_out`: archon's start re-creates them only later (a later step does), so the rebuild commits
    without them, as archon's does.
    `copy_columns` None copies every column the old table has (a replacement built from the
    table's own stored text has them all).
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
    present = columns(conn, table)
    copied = present if copy_columns is None else [c for c in copy_columns if c in set(present)]
    column_list = ", ".join(f'"{c}"' for c in copied)
    conn.execute(
        f'INSERT INTO "{replacement}" ({column_list}) SELECT {column_list} FROM "{table}"'
    )
    conn.execute(f'DROP TABLE "{table}"')
    conn.execute(f'ALTER TABLE "{replacement}" RENAME TO "{table}"')
    index_text = dict(index_overrides or {})
    for name, sql in indexes:
        conn.execute(index_text.pop(name, sql))
    for sql in index_text.values():
        conn.execute(sql)
    overrides = dict(trigger_overrides or {})
    release = release_triggers or {}
    for name, sql in triggers:
        if name not in left_out:
            conn.execute(overrides.pop(name, None) or release.get(name, sql))
    for name, sql in overrides.items():
        if name not in left_out:
            conn.execute(sql)


def statements_by_name(script: str) -> dict[str, str]:
    """The CREATE TRIGGER/INDEX statements of a script, by object name, as SQLite would store them.

    SQLite keeps a statement's text from its name to its end, behind a "CREATE TRIGGER " (or
    INDEX/TABLE) of its own, so without IF NOT EXISTS and without the final semicolon; a release's
    text compared or installed by name is cut the same way.
    """
    found: dict[str, str] = {}
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip().rstrip(";").rstrip()
            buffer = ""
            match = _CREATE_NAME.match(statement)
            if match:
                unique = "UNIQUE " if match.group("unique") else ""
                kind = match.group("kind").upper()
                found[match.group("name")] = f"CREATE {unique}{kind} " + statement[match.start("from"):]
    return found


_CREATE_NAME = re.compile(
    r"CREATE\s+(?P<unique>UNIQUE\s+)?(?P<kind>TRIGGER|INDEX|TABLE)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(?P<from>\"?(?P<name>\w+))",
    re.IGNORECASE,
)
