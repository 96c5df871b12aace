"""Shared fixtures: real SQLite files in tmp_path, built with the migration registry."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

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
