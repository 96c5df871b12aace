"""Small SQLite files and the damage only one half of the split integrity check finds
(tests/test_snapshot.py, tests/test_snapshot_compare.py)."""

from __future__ import annotations

import sqlite3


def _two_tables(path):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        """
        CREATE TABLE a (id INTEGER PRIMARY KEY, x TEXT NOT NULL, y TEXT NOT NULL);
        CREATE INDEX a_x ON a (x);
        CREATE TABLE b (id INTEGER PRIMARY KEY, note TEXT);
        BEGIN;
        """
    )
    conn.executemany("INSERT INTO a (x, y) VALUES (?, ?)", [(f"x{i:05}", f"y{9999 - i:05}") for i in range(3000)])
    conn.executemany("INSERT INTO b (note) VALUES (?)", [("n" * 300,)] * 3000)
    conn.execute("COMMIT")
    conn.close()
    return path


def _index_out_of_step(path):
    """Every B-tree stays well-formed, but index a_x no longer matches its rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX a_x ON a (y)' WHERE name = 'a_x'")
    conn.close()


def _page_never_used(path):
    """One more page in the file that no tree and no freelist owns."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    pages = int.from_bytes(data[28:32], "big")
    data[28:32] = (pages + 1).to_bytes(4, "big")
    data += bytes(page_size)
    path.write_bytes(bytes(data))


def _page_in_two_trees(path):
    """The freelist claims b's root page, which b still uses."""
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'b'").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    data[32:36] = root.to_bytes(4, "big")
    data[36:40] = (1).to_bytes(4, "big")
    path.write_bytes(bytes(data))
