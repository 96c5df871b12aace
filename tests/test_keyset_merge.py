"""The lazy k-way merge (console/db/queries.py): a page reads about a page of rows, the last page
is read from the far end, and no statement stays open after a page."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.db.queries import KeysetQuery, fetch_last_page, fetch_merged_page, sqlite_sort_key


def counted_table(parts: int, per_part: int):
    """A partitioned table whose WHERE clause counts every row SQLite hands to the merge."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE t (part INTEGER, k INTEGER, id TEXT PRIMARY KEY)")
    conn.execute("CREATE INDEX t_part_k ON t (part, k, id)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)",
                     ((p, i * parts + p, f"{p}-{i}") for p in range(parts) for i in range(per_part)))
    seen = [0]

    def counted(_):
        seen[0] += 1
        return 1

    conn.create_function("counted", 1, counted)
    queries = [KeysetQuery("t", ("k", "id"), where=("part = ?", "counted(id)"), params=(p,)) for p in range(parts)]
    return conn, queries, seen


def test_a_page_over_many_partitions_reads_about_one_page_of_rows():
    conn, queries, seen = counted_table(parts=40, per_part=500)
    page = fetch_merged_page(conn, queries, limit=100)
    assert [r["k"] for r in page.rows] == list(range(100))
    # 101 rows are kept, plus at most one partly used chunk per partition: a few pages' worth,
    # where reading `limit + 1` rows from every partition would be 4,040.
    assert seen[0] < 3 * 101
    seen[0] = 0
    page = fetch_merged_page(conn, queries, cursor=page.next_cursor, limit=100)
    assert [r["k"] for r in page.rows] == list(range(100, 200))
    assert seen[0] < 3 * 101


def test_a_skewed_page_reads_in_growing_chunks_not_everything():
    conn, queries, seen = counted_table(parts=40, per_part=10)
    queries.append(KeysetQuery("t", ("k", "id"), where=("part = ?", "counted(id)"), params=(99,)))
    conn.executemany("INSERT INTO t VALUES (99, ?, ?)", ((-i, f"x{i}") for i in range(1, 5001)))
    page = fetch_merged_page(conn, queries, limit=1000)
    assert [r["k"] for r in page.rows] == list(range(-5000, -4000))
    assert seen[0] <= 2 * 1001 + 40 * 25


def test_the_last_page_is_read_from_the_far_end():
    conn, queries, seen = counted_table(parts=40, per_part=500)
    page = fetch_last_page(conn, queries, limit=30)
    assert [r["k"] for r in page.rows] == list(range(20000 - 30, 20000))
    assert page.has_previous and not page.has_next
    assert seen[0] < 3 * 31 + 40


@pytest.mark.slow
def test_no_statement_is_left_open_after_a_page(tmp_path):
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (part INTEGER, k INTEGER, id TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", ((p, i, f"{p}-{i}") for p in range(5) for i in range(50)))
    queries = [KeysetQuery("t", ("k", "id"), where=("part = ?",), params=(p,)) for p in range(5)]
    fetch_merged_page(conn, queries, limit=10)
    fetch_last_page(conn, queries, limit=10)
    # A statement left stepping would hold a shared lock, and this exclusive lock would fail.
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN EXCLUSIVE")
    other.execute("ROLLBACK")


rows_strategy = st.lists(
    st.tuples(st.sampled_from("abc"), st.text("xyz ", max_size=3), st.text("0123456789", min_size=1, max_size=4)),
    unique_by=lambda r: r[2],
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, limit=st.integers(1, 7), descending=st.booleans())
def test_the_last_page_is_the_tail_of_the_sorted_union(rows, limit, descending):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (part TEXT, k TEXT, id TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    queries = [KeysetQuery("t", ("k", "id"), where=("part = ?",), params=(p,), descending=descending) for p in "abc"]
    expected = sorted(((k, i) for _, k, i in rows), key=lambda key: tuple(map(sqlite_sort_key, key)), reverse=descending)
    page = fetch_last_page(conn, queries, limit=limit)
    assert [(r["k"], r["id"]) for r in page.rows] == expected[-limit:]
    assert page.has_previous == (len(expected) > limit)
