"""The keyset pager (console/db/queries.py): pages over merged partitions equal one sorted list."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.db.queries import (
    CappedCount,
    Cursor,
    KeysetQuery,
    count_capped,
    count_queries_capped,
    describe_count,
    fetch_merged_page,
    fetch_page,
    sqlite_sort_key,
)


def table(rows):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (part TEXT, k TEXT, id TEXT PRIMARY KEY)")
    conn.execute("CREATE INDEX t_part_k ON t (part, k, id)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return conn


rows_strategy = st.lists(
    st.tuples(st.sampled_from("abc"), st.text("xyz ", max_size=3), st.text("0123456789", min_size=1, max_size=4)),
    unique_by=lambda r: r[2],
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(rows=rows_strategy, limit=st.integers(1, 7), descending=st.booleans())
def test_paging_forward_then_back_visits_every_row_once_in_order(rows, limit, descending):
    conn = table(rows)
    queries = [
        KeysetQuery("t", ("k", "id"), where=("part = ?",), params=(p,), descending=descending) for p in "abc"
    ]
    expected = sorted(((k, i) for _, k, i in rows), key=lambda key: tuple(map(sqlite_sort_key, key)), reverse=descending)
    seen, pages, cursor = [], [], None
    while True:
        page = fetch_merged_page(conn, queries, cursor=cursor, limit=limit)
        keys = [(r["k"], r["id"]) for r in page.rows]
        pages.append(keys)
        seen.extend(keys)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected
    assert all(len(p) == limit for p in pages[:-1])
    # and back again from the last page
    if len(pages) > 1:
        back = fetch_merged_page(conn, queries, cursor=Cursor((pages[-1][0]), "before"), limit=limit)
        assert [(r["k"], r["id"]) for r in back.rows] == pages[-2]


def test_single_query_page_uses_row_values_and_the_index():
    conn = table([("a", "x", "1"), ("a", "x", "2"), ("a", "y", "0"), ("b", "x", "9")])
    q = KeysetQuery("t", ("k", "id"), where=("part = ?",), params=("a",))
    first = fetch_page(conn, q, limit=2)
    assert [r["id"] for r in first.rows] == ["1", "2"] and first.has_next and not first.has_previous
    second = fetch_page(conn, q, cursor=first.next_cursor, limit=2)
    assert [r["id"] for r in second.rows] == ["0"] and not second.has_next and second.has_previous
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT * FROM t WHERE part = 'a' AND (k, id) > ('x', '1') ORDER BY k, id").fetchall()
    assert "t_part_k" in str(plan) and "TEMP B-TREE" not in str(plan)


def test_cursor_round_trips_through_json():
    cursor = Cursor(("2026-11-01 09:30:00", "apr-1"), "before")
    assert Cursor.from_json(cursor.to_json()) == cursor
    assert Cursor.from_json(None) is None
    with pytest.raises(ValueError):
        Cursor.from_json({"key": [1], "direction": "sideways"})


def test_mismatched_partitions_are_refused():
    conn = table([])
    with pytest.raises(ValueError):
        fetch_merged_page(conn, [KeysetQuery("t", ("k", "id")), KeysetQuery("t", ("id",))])


def test_capped_counts():
    conn = table([("a", str(i), str(i)) for i in range(30)] + [("b", "x", "b1")])
    assert count_capped(conn, "t", cap=500) == CappedCount(31)
    assert str(count_capped(conn, "t", cap=10)) == ">10"
    assert str(count_capped(conn, "t", ("part = ?",), ("b",), cap=10)) == "1"
    parts = [KeysetQuery("t", ("k", "id"), where=("part = ?",), params=(p,)) for p in "ab"]
    assert count_queries_capped(conn, parts, cap=500) == CappedCount(31)
    assert count_queries_capped(conn, parts, cap=30) == CappedCount(30, exact=False)
    assert describe_count(50, CappedCount(500, exact=False)) == "50 of >500"


def test_sqlite_ordering_of_mixed_types_is_mirrored():
    values = ["b", 2, None, b"z", 1.5, "a"]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE v (x)")
    conn.executemany("INSERT INTO v VALUES (?)", [(v,) for v in values])
    assert [r[0] for r in conn.execute("SELECT x FROM v ORDER BY x")] == sorted(values, key=sqlite_sort_key)
