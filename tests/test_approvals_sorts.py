"""The queue's orders (issue 21, item 11): expiry, age, requester and project, each its own keyset
ending in the id, so paging forward, back, jumping and finding a row's position agree with one
plain sort of the rows, whatever the requesters and projects hold (ties, none, not JSON)."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from console.db.connect import open_database
from console.db.queries import sqlite_sort_key
from console.services import approval_queue as queue
from tests.approvals_helpers import NOW, add_project, add_request, archon_move, ts

AUTHORITIES = [
    {"requested_by": "dave"}, {"requested_by": "dave"}, {"requester": "carol"}, {"requested_by": "agent:codex"},
    {"requested_by": "  "}, {"requested_by": 7, "requester": "erin"}, {"run_id": "r"}, "[1, 2]", "not json",
    {"requested_by": "\u00e9lodie"}, {"requested_by": "Zed"}, {"requested_by": "\u3000"},
]


def fill(conn: sqlite3.Connection) -> None:
    add_project(conn, "p1", "Payments")
    add_project(conn, "p2", "Web")
    add_project(conn, "p3", "Payments")  # two projects, one name: the id breaks the tie
    for n in range(36):
        project = ("p1", "p2", "p3")[n % 3]
        authority = AUTHORITIES[n % len(AUTHORITIES)]
        add_request(conn, f"apr-{n:02d}", project, expires_at=NOW + timedelta(minutes=(n * 7) % 50),
                    created_at=NOW - timedelta(minutes=(n * 11) % 40), authority=authority)
        if n % 4 == 1:
            archon_move(conn, f"apr-{n:02d}", "approved")
        elif n % 4 == 2:
            archon_move(conn, f"apr-{n:02d}", "denied")


@pytest.fixture(scope="module")
def sorted_db(tmp_path_factory):
    from tests.conftest import connect, make_schema

    path = tmp_path_factory.mktemp("sorts") / "archon.db"
    make_schema(path, "1.10.0")
    conn = connect(path)
    fill(conn)
    conn.close()
    return path


def expected_order(rows, sort: str) -> list[str]:
    """The order computed in Python from the fields the lists show."""
    def key(r):
        head = {"expiry": (r.expires_at,), "age": (r.created_at,),
                "requester": (queue.requester_of(queue.parse_json_field(r.authority_json)) or "", r.expires_at),
                "project": (r.project_name or r.project_id, r.expires_at)}[sort]
        return tuple(map(sqlite_sort_key, (*head, r.id)))
    return [r.id for r in sorted(rows, key=key)]


@pytest.mark.parametrize("sort", list(queue.SORTS))
@pytest.mark.parametrize("statuses", [None, ("pending",), ("approved", "denied")])
def test_every_order_pages_jumps_and_positions_like_one_sort(sorted_db, sort, statuses):
    f = queue.Filters(statuses=statuses, sort=sort)
    with open_database(sorted_db) as h:
        everything = queue.list_requests(h, queue.Filters(statuses=statuses), limit=500, now=NOW).rows
        expected = expected_order(everything, sort)
        assert len(expected) >= 9

        def ids_from(cursor, limit=500):
            return [r.id for r in queue.list_requests(h, f, limit=limit, cursor=cursor, now=NOW).rows]

        walked, cursor = [], None
        while True:  # small pages forward, each continuing from the last one's cursor
            page = queue.list_requests(h, f, limit=4, cursor=cursor, now=NOW)
            walked += [r.id for r in page.rows]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert walked == expected
        for i, request_id in enumerate(expected):
            assert queue.request_position(h, f, request_id, now=NOW) == i
            assert ids_from(queue.cursor_of(h, request_id, f)) == expected[i + 1:]
        n = len(expected)
        for k in range(0, n + 2, 3):
            assert ids_from(queue.advance_cursor(h, f, None, k, now=NOW)) == expected[k:]
            assert ids_from(queue.retreat_cursor(h, f, None, k, now=NOW)) == (expected[n - k:] if k <= n else expected)


def test_the_list_shows_the_requester_it_sorts_by(sorted_db):
    with open_database(sorted_db) as h:
        rows = queue.list_requests(h, queue.Filters(statuses=None, sort="requester"), limit=500, now=NOW).rows
    by_id = {r.id: r.requester for r in rows}
    assert by_id["apr-00"] == "dave" and by_id["apr-02"] == "carol" and by_id["apr-05"] == "erin"
    assert by_id["apr-04"] is None and by_id["apr-07"] is None and by_id["apr-08"] is None  # blank, not JSON
    assert [r.requester or "" for r in rows] == sorted(r.requester or "" for r in rows)


def test_a_requester_with_a_nul_is_listed_whole(tmp_path):
    """SQLite reads `"dave\\u0000-mallory"` as `dave`: the list never shows that name as dave."""
    from tests.conftest import connect, make_schema

    path = make_schema(tmp_path / "nul.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "apr-nul", "p1", authority='{"requested_by": "dave\\u0000-mallory"}')
    conn.close()
    with open_database(path) as h:
        for sort in queue.SORTS:
            [row] = queue.list_requests(h, queue.Filters(sort=sort), now=NOW).rows
            assert row.requester == "dave\x00-mallory"


def test_an_unknown_sort_is_one_sentence():
    from console.errors import UsageError

    with pytest.raises(UsageError, match="Unknown sort 'size'; use expiry, age, requester, project"):
        _ = queue.Filters(sort="size").order


# Without NUL: SQLite's json_extract ends a string at an escaped NUL (see the next test).
names = st.one_of(st.text(st.characters(blacklist_characters="\x00"), max_size=6), st.integers(), st.none(),
                  st.booleans(), st.sampled_from(["dave", " ", "\u00a0", "\u2003x", "\t", "\u3000"]))


@settings(max_examples=300, deadline=None)
@given(authority=st.one_of(
    st.dictionaries(st.sampled_from(["requested_by", "requester", "run_id"]), names, max_size=3),
    st.lists(names, max_size=2), names, st.text(max_size=8)))
def test_the_sql_requester_is_requester_of(authority):
    """REQUESTER_SQL (the sort key) agrees with `requester_of` (the list's column, the detail pane and
    `approvals list`) on whatever `authority_json` holds, JSON or not."""
    surrogate = isinstance(authority, str) and any("\ud800" <= c <= "\udfff" for c in authority)
    assume(not surrogate)  # text, not JSON: a database's text cannot hold a lone surrogate
    text = authority if isinstance(authority, str) else json.dumps(authority)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE approval_requests (authority_json)")
    conn.execute("INSERT INTO approval_requests VALUES (?)", (text,))
    [(in_sql,)] = conn.execute(f"SELECT {queue.REQUESTER_KEY} FROM approval_requests").fetchall()
    # SQLite writes an escaped lone surrogate ("\ud800") as its three bytes, as surrogatepass does.
    assert in_sql == (queue.requester_of(queue.parse_json_field(text)) or "").encode("utf-8", "surrogatepass")


def _every_order_pages_whole(path, count: int) -> None:
    """Walked one row at a time, every order meets exactly the rows one large page lists."""
    for sort in queue.SORTS:
        f = queue.Filters(statuses=None, sort=sort)
        with open_database(path) as h:
            everything = [r.id for r in queue.list_requests(h, f, limit=500, now=NOW).rows]
        assert len(everything) == count
        assert _walk_pages(path, f) == everything, sort


def _walk_pages(path, f, limit=1) -> list[str]:
    with open_database(path) as h:
        walked, cursor = [], None
        while True:
            page = queue.list_requests(h, f, limit=limit, cursor=cursor, now=NOW)
            walked += [r.id for r in page.rows]
            if page.next_cursor is None or len(walked) > 200:
                return walked
            cursor = page.next_cursor


def test_requesters_that_are_not_utf8_page_whole(tmp_path):
    """JSON.stringify writes a lone surrogate as "\\ud800", and json_extract turns it into bytes
    that are not UTF-8. Read back as text (with U+FFFD), the sort key of the page's last row was not
    the key SQLite compares: walking the requester order one row at a time met 9 of 20 requests
    (the CI run of stop 28 found the disagreement)."""
    from tests.conftest import connect, make_schema

    path = make_schema(tmp_path / "surrogates.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    names = ["\\ud800", "a\\udfff", "\\ud83d", "zz", "\uffff", "\ufffd", "\ufffdz", "ed", "\\udbff\\udbff", "x\\ud800y"]
    for n, name in enumerate(names * 2):
        add_request(conn, f"apr-{n:02d}", "p1", expires_at=NOW + timedelta(minutes=n % 3),
                    authority='{"requested_by": "%s"}' % name)
    conn.close()
    _every_order_pages_whole(path, 20)


def test_a_key_stored_as_a_blob_pages_whole(tmp_path):
    """A list shows a BLOB as text (console/db/rows.py), but its page's cursor is the stored BLOB
    (console/db/queries.py `KeyedRow`): the shown text as a cursor compares below every BLOB, and
    the walk went round for ever."""
    from tests.conftest import connect, make_schema

    path = make_schema(tmp_path / "blobs.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    for n in range(12):
        expires = ts(NOW + timedelta(minutes=n % 2))
        add_request(conn, f"apr-{n:02d}", "p1", expires_at=expires.encode() if n > 5 else expires)
    conn.close()
    _every_order_pages_whole(path, 12)


def _plan(h, q) -> str:
    sql = f"SELECT {q.columns} FROM {q.source} WHERE {' AND '.join(q.where)} ORDER BY {', '.join(q.keys)} LIMIT 50"
    return " | ".join(r[3] for r in h.conn.execute("EXPLAIN QUERY PLAN " + sql, q.params))


def test_the_orders_read_archons_indexes_and_sort_only_what_the_filter_selects(sorted_db):
    """The console adds no index to archon's file (console/services/approval_queue.py `SORTS`, with
    timings on 100,000 requests): within a status every order searches
    idx_approval_requests_project_status_expiry for its (project, status) rows, and only expiry needs
    no sort; over every status, age walks idx_approval_requests_project_created in order."""
    with open_database(sorted_db) as h:
        for sort in queue.SORTS:
            [q] = queue.partition_queries(h, queue.Filters(statuses=("pending",), project="p1", sort=sort), NOW)
            plan = _plan(h, q)
            assert "idx_approval_requests_project_status_expiry (project_id=? AND status=?)" in plan, plan
            assert ("TEMP B-TREE" in plan) == (sort != "expiry"), (sort, plan)
        [q] = queue.partition_queries(h, queue.Filters(statuses=None, project="p1", sort="age"), NOW)
        plan = _plan(h, q)
        assert "idx_approval_requests_project_created (project_id=?)" in plan and "TEMP B-TREE" not in plan, plan
