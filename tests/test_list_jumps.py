"""Jumps in paged lists: positions, cursors forward, and cursors back from the end equal the
positions in a plain walk of the pages (approval queue and environments)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from console.db.connect import open_database
from console.services import approval_queue as queue
from console.services import environment_pages as pages
from console.services.environment_queries import list_environments
from console.services.environment_rules import STATES
from tests.conftest import make_schema
from tests.approvals_helpers import NOW, add_request, archon_move, connect
from tests.approvals_helpers import add_project as add_approval_project
from tests.environments_support import T0, add_env, add_project, raw, set_claim


@pytest.fixture
def approvals_db(db):
    return db


@pytest.mark.parametrize("statuses", [None, ("pending",), ("approved", "denied")])
def test_queue_positions_and_cursors_match_the_walk(approvals_db, statuses):
    f = queue.Filters(statuses=statuses)
    with open_database(approvals_db) as h:
        everything = [r.id for r in queue.list_requests(h, f, limit=100, now=NOW).rows]
        n = len(everything)
        assert n >= 2

        def ids_from(cursor):
            return [r.id for r in queue.list_requests(h, f, limit=100, cursor=cursor, now=NOW).rows]

        for i, request_id in enumerate(everything):
            assert queue.request_position(h, f, request_id, now=NOW) == i
            assert ids_from(queue.cursor_of(h, request_id)) == everything[i + 1:]
        for k in range(n + 2):
            assert ids_from(queue.advance_cursor(h, f, None, k, now=NOW)) == everything[k:]
            assert ids_from(queue.retreat_cursor(h, f, None, k, now=NOW)) == (everything[n - k:] if k <= n else everything)
        # back from a row: `retreat(cursor after row i, k)` is where row i - k + 1 starts
        last = queue.cursor_of(h, everything[-1])
        for k in range(1, n + 1):
            assert ids_from(queue.retreat_cursor(h, f, last, k, now=NOW)) == everything[n - k:]
        assert queue.request_position(h, f, "no-such-request", now=NOW) is None


def test_a_request_that_left_the_filter_keeps_its_place(approvals_db):
    pending = queue.Filters(statuses=("pending",))
    everything = queue.Filters(statuses=None)
    with open_database(approvals_db) as h:
        pending_ids = [r.id for r in queue.list_requests(h, pending, limit=100, now=NOW).rows]
        all_rows = queue.list_requests(h, everything, limit=100, now=NOW).rows
        other = next(r for r in all_rows if r.status != "pending")
        expected = sum(1 for r in all_rows if r.status == "pending"
                       and (r.expires_at, r.id) < (other.expires_at, other.id))
        assert queue.request_position(h, pending, other.id, now=NOW) == expected
        assert expected <= len(pending_ids)


def test_any_pending(approvals_db, schema_db):
    with open_database(approvals_db) as h:
        assert queue.any_pending(h)
    with open_database(schema_db(name="empty.db")) as h:
        assert not queue.any_pending(h)


def test_any_pending_walks_past_projects_without_pending_requests(approvals_db):
    """The per-project seek (ANY_PENDING_SQL) answers as the plain `status = 'pending'` query
    does, whichever project holds the pending requests, and when none does."""
    conn = connect(approvals_db)
    add_approval_project(conn, "p0", "Alpha")  # sorts first; only a decided request
    add_request(conn, "apr-0", "p0", expires_at=NOW)
    archon_move(conn, "apr-0", "denied")
    add_approval_project(conn, "p3", "Zeta")  # sorts last; nothing at all

    def plain():
        return conn.execute("SELECT 1 FROM approval_requests WHERE status = 'pending' LIMIT 1").fetchone() is not None

    with open_database(approvals_db) as h:
        assert queue.any_pending(h) is plain() is True
        for request_id in ("apr-1", "apr-2", "apr-3", "apr-7"):  # p1 has none pending left, p2 has
            archon_move(conn, request_id, "cancelled")
            assert queue.any_pending(h) is plain() is True
        archon_move(conn, "apr-4", "cancelled")
        assert queue.any_pending(h) is plain() is False
        add_request(conn, "apr-9", "p3", expires_at=NOW)  # only the last project's
        assert queue.any_pending(h) is plain() is True
    conn.close()


@pytest.fixture(scope="module")
def envs_template(tmp_path_factory):
    path = make_schema(tmp_path_factory.mktemp("jumps") / "template.db", "1.10.0")
    conn = raw(path)
    add_project(conn, "p1")
    add_project(conn, "p2")
    for i in range(23):
        add_env(conn, f"env-{i:02d}", STATES[i % 3], project_id="p1" if i % 2 else "p2")
    set_claim(conn, "env-04", "claim-x", "stop", T0)
    conn.close()
    return path


@pytest.mark.parametrize("filters", [{}, {"state": "ready"}, {"project": "p1"}, {"claimed": True}])
def test_environment_counts_positions_and_cursors_match_the_walk(envs_template, tmp_path, filters):
    path = Path(shutil.copy(envs_template, tmp_path / "archon.db"))
    kwargs = {"now": NOW, **filters}
    with open_database(path) as h:
        everything = [r.id for r in list_environments(h, limit=0, **kwargs).rows]
        n = len(everything)
        assert pages.count_environments(h, **kwargs) == n

        def ids_from(after):
            return [r.id for r in list_environments(h, after=after, limit=0, **kwargs).rows]

        for i, env_id in enumerate(everything):
            assert pages.environment_position(h, env_id, **kwargs) == i
        for k in range(n + 1):
            assert ids_from(pages.advance_after(h, None, k, **kwargs)) == everything[k:]
            assert ids_from(pages.retreat_after(h, None, k, **kwargs)) == everything[n - k:]
