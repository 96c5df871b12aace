"""Hostile JSON for every JSON column of a real archon database (for tests/adversarial/test_json_shapes.py).

Archon checks most JSON columns for size only, and a column added by `ensureColumn` on an upgraded
database carries no CHECK at all, so the shapes are written with `ignore_check_constraints` and
archon's triggers set aside (put back unchanged afterwards): the console then reads a database
whose shape and guards are archon's and whose JSON is an attacker's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import strategies as st

# The instance of issue 17: 2.2 KB, 1,100 deep, well inside archon's 2..65536-byte CHECK.
DEEP_1100 = "[" * 1100 + "]" * 1100


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int) -> str:
    return '{"requested_by":' * depth + '"alice"' + "}" * depth


def deep_mixed(depth: int) -> str:
    """Arrays and objects in turn, with strings that hold brackets (a scan that ignores strings
    would count them)."""
    opened = "".join('[{"k[":' if i % 2 else '{"a{":[' for i in range(depth // 2))
    closed = "".join("}]" if i % 2 else "]}" for i in reversed(range(depth // 2)))
    return opened + '"x]}"' + closed


def unterminated(depth: int) -> str:
    return "[" * depth + '"never closes \\"'


def wide(width: int) -> str:
    return "[" + ",".join(["[]"] * width) + "]"


def large(size: int) -> str:
    return '{"requested_by":"alice","blob":"' + "x" * size + '"}'


def big_number(digits: int) -> str:
    return "[" + "9" * digits + "]"


SHAPES = {
    "deep_array": deep_array,
    "deep_object": deep_object,
    "deep_mixed": deep_mixed,
    "unterminated": unterminated,
    "wide": wide,
    "large": large,
    "big_number": big_number,
}


@st.composite
def json_shapes(draw) -> tuple[str, int]:
    """(kind, n): depth up to 10,000, width up to 100,000, size up to 300 KB (beyond the reader's
    limit). `shape_text` makes the text; a failing example prints as its kind and size."""
    kind = draw(st.sampled_from(sorted(SHAPES)))
    if kind in ("deep_array", "deep_object", "deep_mixed", "unterminated"):
        n = draw(st.one_of(st.integers(60, 70), st.integers(900, 1200), st.integers(1, 10_000)))
    elif kind == "wide":
        n = draw(st.integers(1, 100_000))
    elif kind == "large":
        n = draw(st.sampled_from([1_000, 65_536, 262_144, 300_000]))
    else:
        n = draw(st.sampled_from([10, 4_301, 20_000]))
    return kind, n


def shape_text(shape: tuple[str, int]) -> str:
    kind, n = shape
    return SHAPES[kind](n)


def json_columns(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every column of archon's tables that holds JSON: `*_json`, and the `*_ids` arrays of projects."""
    found = []
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name")]
    for table in tables:
        for row in conn.execute(f'PRAGMA table_info("{table}")'):
            if row[1].endswith(("_json", "_ids")):
                found.append((table, row[1]))
    return found


def poison_json(path: Path, text: str, *, only: set[str] | None = None) -> list[tuple[str, str]]:
    """Write `text` into every JSON column of every row (of the tables in `only`, when given), and
    move the pending requests' expiry far ahead so decisions reach their four-eyes checks."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA ignore_check_constraints = ON")
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    columns = [(t, c) for t, c in json_columns(conn) if only is None or t in only]
    conn.execute("BEGIN IMMEDIATE")
    for name, _ in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    for table, column in columns:
        conn.execute(f'UPDATE "{table}" SET "{column}" = ?', (text,))
    conn.execute("UPDATE approval_requests SET expires_at = '2099-01-01 00:00:00' WHERE status = 'pending'")
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    return columns


def first_pending(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id FROM approval_requests WHERE status = 'pending' ORDER BY id").fetchone()[0]
    finally:
        conn.close()
