"""The demo database: shape per release, determinism, coverage of states, archon's guards."""

from __future__ import annotations

import sqlite3

import pytest

from console.db.detect import detect_shape
from console.demo import generate

NOW = "2026-05-01T12:00:00Z"


@pytest.mark.parametrize("release, expected", [("1.8.20", "1.8.20"), ("1.8.22", "1.8.22"),
                                               ("current", "1.10.0")])
def test_release_shape_is_detected(tmp_path, release, expected):
    path = tmp_path / "demo.db"
    generate(path, release=release, now=NOW)
    conn = sqlite3.connect(path)
    assert detect_shape(conn).release == expected
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
