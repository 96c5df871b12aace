"""sqlite-utils reads the schema over the console's own connection and changes nothing on it
(console/db/introspect.py; docs/decisions.md, D26).

`sqlite_utils.Database(conn)` with its defaults runs `PRAGMA recursive_triggers=on` on the
connection and hands it to every installed plugin; `schema_of` must do neither, and it must be
the only way into sqlite-utils from the console, so nothing else can give it a path to open.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlite_utils
from sqlite_utils import hookimpl
from sqlite_utils.plugins import pm

from console.db.connect import open_database
from console.db.introspect import schema_of
from console.services.doctor.context import table_names

ROOT = Path(__file__).resolve().parents[1]
HOME = "console/db/introspect.py"


def _statements(conn, action):
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        result = action()
    finally:
        conn.set_trace_callback(None)
    return result, seen


class _Plugin:
    calls = 0

    @hookimpl
    def prepare_connection(self, conn):
        _Plugin.calls += 1
        conn.create_function("planted", 0, lambda: 1)


def test_wrapping_a_connection_runs_nothing_and_calls_no_plugin(schema_db, monkeypatch):
    monkeypatch.setattr(sqlite_utils.plugins, "_plugins_loaded", True)  # no entry points of this machine
    plugin = _Plugin()
    pm.register(plugin)
    try:
        with open_database(schema_db(), read_only=True) as handle:
            before = handle.conn.execute("PRAGMA recursive_triggers").fetchone()[0]
            db, seen = _statements(handle.conn, lambda: schema_of(handle.conn))
            assert seen == []
            assert handle.conn.execute("PRAGMA recursive_triggers").fetchone()[0] == before == 0
            assert _Plugin.calls == 0
            assert db.conn is handle.conn
    finally:
        pm.unregister(plugin)


def test_it_reads_what_sqlite_master_holds(schema_db):
    with open_database(schema_db(), read_only=True) as handle:
        conn = handle.conn
        conn.execute("PRAGMA query_only = ON")  # the doctor's and the plan's connections
        expected = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert table_names(conn) == expected and "projects" in expected
        assert {t.name for t in schema_of(conn).triggers} == triggers and triggers


@pytest.mark.slow
def test_only_introspect_reaches_sqlite_utils():
    found = []
    for package in ("console", "widgets"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), filename=name)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(m.split(".")[0] == "sqlite_utils" for m in modules) and name != HOME:
                    found.append(f"{name}:{node.lineno}")
    assert not found, f"sqlite-utils is reached through {HOME} `schema_of` only: {found}"
