"""Shared fixtures: real SQLite files in tmp_path, built with the migration registry."""

from __future__ import annotations

import atexit
import os
import shutil
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


@pytest.fixture
def schema_db(tmp_path):
    """Factory: schema_db(release="1.10.0", name="archon.db", wal=False) -> Path."""

    def factory(release: str = "1.10.0", name: str = "archon.db", wal: bool = False) -> Path:
        return make_schema(tmp_path / name, release, wal=wal)

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
