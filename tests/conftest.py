"""Shared fixtures: real SQLite files in tmp_path, built with the migration registry."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sqlite3
import tempfile
from pathlib import Path

import pytest

# The audit hook of console/db/file_guard.py, for this process and (through the environment) every
# console process a test starts: a database file opened outside SQLite while this process holds a
# connection to it fails the test that did it (`_no_database_file_opened_under_a_connection`).
_AUDIT_LOG = Path(tempfile.mkdtemp(prefix="archon-console-audit-")) / "breaches.log"
_AUDIT_LOG.touch(mode=0o600)
atexit.register(shutil.rmtree, _AUDIT_LOG.parent, True)
os.environ["ARCHON_CONSOLE_AUDIT_FILES"] = str(_AUDIT_LOG)

from console.db import file_guard  # noqa: E402 - after the variable, which the import reads

file_guard.install(str(_AUDIT_LOG))

from console.db.migrations.registry import migrations_through
from console.db.migrations.runner import apply_all


def make_schema(path: Path, release: str = "1.10.0", *, wal: bool = False) -> Path:
    """An empty archon database of `release` shape, without our ledger (as archon leaves it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, migrations_through(release))
    conn.close()
    return path


def connect(path: Path, *, rows: bool = True) -> sqlite3.Connection:
    """A connection as archon's own code holds one, for writing rows the way archon does: autocommit,
    foreign keys on, up to 10 s for a lock; rows as sqlite3.Row unless `rows=False`."""
    conn = sqlite3.connect(path, isolation_level=None)
    if rows:
        conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def add_project(conn, project_id: str = "p1", name: str | None = None, *, repo: str | None = None,
                provider: str | None = None, deleting: str | bool | None = None) -> None:
    """A project as archon inserts it (its trigger adds revision 1 of the execution profile): named by its
    id in capitals, in /repo/<id>, on the column's default provider unless told; `deleting` is its
    deletion_started_at (True: 2026-10-31 08:00:00). Only the columns given are written, so any release works."""
    values = {"id": project_id, "name": name or project_id.upper(), "repo_path": repo or f"/repo/{project_id}"}
    if provider is not None:
        values["build_execution_provider"] = provider
    if deleting:
        values["deletion_started_at"] = "2026-10-31 08:00:00" if deleting is True else deleting
    conn.execute(f"INSERT INTO projects ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                 list(values.values()))


_BUILT: dict[tuple, Path] = {}


@pytest.fixture
def make_db(tmp_path, tmp_path_factory):
    """The one way a test gets an archon database file, in tmp_path:

    make_db(release="1.10.0", *, projects=(), fill=None, name="archon.db", wal=False, template=None,
            cached=False) -> Path

    The schema comes from the console's own migration registry (`make_schema`); then `projects` are
    added (`add_project`) and `fill(conn)` writes the module's rows through `connect`, with archon's
    triggers active. `template` instead copies that file byte for byte (a module-scoped database built
    some other way). `cached` builds once per test process for (release, projects, fill, wal) and
    copies the bytes afterwards: replaying the schema history is the slow part.
    """

    def factory(release: str = "1.10.0", *, projects=(), fill=None, name: str = "archon.db", wal: bool = False,
                template: Path | None = None, cached: bool = False) -> Path:
        target = tmp_path / name
        key = (release, tuple(projects), fill, wal)
        source = template if template is not None else _BUILT.get(key) if cached else None
        if source is not None:
            shutil.copyfile(source, target)
            return target
        make_schema(target, release, wal=wal)
        if projects or fill:
            conn = connect(target)
            for project_id in projects:
                add_project(conn, project_id)
            if fill:
                fill(conn)
            conn.close()
        if cached:
            _BUILT[key] = tmp_path_factory.mktemp("built") / name
            shutil.copyfile(target, _BUILT[key])
        return target

    return factory


@pytest.fixture
def db(make_db):
    """The approval tests' database (tests/approvals_helpers.py `seed`): projects p1 'Payments' and
    p2 'Web', requests apr-1..apr-7. A module that needs another database defines its own `db` on
    `make_db`."""
    from tests.approvals_helpers import seed

    return make_db(fill=seed, cached=True)


@pytest.fixture
def schema_db(make_db):
    """Factory: schema_db(release="1.10.0", name="archon.db", wal=False) -> Path (an empty archon schema)."""

    def factory(release: str = "1.10.0", name: str = "archon.db", wal: bool = False) -> Path:
        return make_db(release, name=name, wal=wal)

    return factory


def pin_real_clock(monkeypatch, at) -> None:
    """Make the *real* clock read `at` (a datetime or archon timestamp text) for a test.

    `$ARCHON_CONSOLE_NOW` only freezes what is shown; writes use the real clock (console/clock.py
    `write_clock`). Tests whose fixtures are dated at a fixed instant pin the real clock instead.
    """
    from console import clock

    when = clock.parse_time(at)
    monkeypatch.delenv("ARCHON_CONSOLE_NOW", raising=False)
    monkeypatch.setattr(clock, "real_clock", lambda: when)


@pytest.fixture(autouse=True)
def _no_database_file_opened_under_a_connection():
    """Fails the test during which any console process opened a database file (or its -wal, -shm,
    -journal) outside SQLite while it held a connection to it (console/db/file_guard.py)."""
    start = _AUDIT_LOG.stat().st_size
    yield
    with open(_AUDIT_LOG, "rb") as handle:
        handle.seek(start)
        found = handle.read().decode("utf-8", "replace")
    if found:
        pytest.fail("a database file was opened outside SQLite under a live connection "
                    "(closing it drops the process's locks):\n" + found[:6000], pytrace=False)


@pytest.fixture
def watches():
    """Starts `approvals watch` processes (tests/watch_helpers.py `Watch`) and kills them after the test."""
    from tests.watch_helpers import Watch

    started: list = []

    def start(*args, **kwargs):
        w = Watch(*args, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop(signal.SIGKILL)
