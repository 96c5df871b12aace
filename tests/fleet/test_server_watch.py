"""`approvals.watch` over `serve`: changes as `approvals.changed` notifications carrying the watch's
own cursor, delivered once across sessions when the client resumes from the last cursor (issue 20)."""

from __future__ import annotations

import json

from console.fleet import protocol as wire
from tests.approvals_helpers import live_request
from tests.watch_helpers import new_request


def watching(servers, db, **params):
    server = servers("--actor", "dave", db=db)
    server.hello()
    result = server.call("approvals.watch", poll=0.05, **params)
    assert result["exit"] == 0 and result["output"]["watching"] is True, result
    return server, result["output"]["cursor"]


def test_each_change_is_a_notification_with_the_line_approvals_watch_prints(servers, db):
    server, _start = watching(servers, db)
    new_request(db, "apr-new")
    (first,) = server.changes(1)
    assert first["change"]["change"] == "new" and first["change"]["request_id"] == "apr-new"
    assert set(first["change"]) >= {"change", "request_id", "project_id", "kind", "to_status", "event_id", "at"}
    assert first["cursor"]["event_id"] == first["change"]["event_id"]
    assert server.request("shutdown")["result"] == {"ok": True}
    assert server.proc.wait(timeout=30) == 0


def test_a_watching_session_is_dedicated_and_sees_decisions_made_on_another(servers, db):
    live = live_request(db)
    server, _start = watching(servers, db)
    other = servers("--actor", "dave", db=db)
    other.hello()
    assert other.call("approvals.approve", ids=[live])["exit"] == 0
    (change,) = server.changes(1)
    assert change["change"]["change"] == "approved" and change["change"]["actor"] == "dave"
    for method in ("approvals.watch", "approvals.list", "hello", "approvals.approve"):
        answer = server.request(method, {})
        assert answer["error"]["code"] == wire.STREAM_BUSY, answer


def test_resuming_from_the_last_cursor_delivers_each_change_once(servers, db):
    server, _start = watching(servers, db)
    new_request(db, "apr-a")
    (a,) = server.changes(1)
    assert server.close() == 0
    new_request(db, "apr-b")  # while no one watches
    new_request(db, "apr-c")
    again, start = watching(servers, db, cursor=a["cursor"])
    assert start["event_id"] == a["cursor"]["event_id"]
    seen = [c["change"]["request_id"] for c in again.changes(2)]
    assert seen == ["apr-b", "apr-c"]
    new_request(db, "apr-d")
    assert [c["change"]["request_id"] for c in again.changes(1)] == ["apr-d"]


def test_filters_are_the_cli_watchs_and_checked_by_its_parser(servers, db):
    server = servers("--actor", "dave", db=db)
    server.hello()
    bad = server.call("approvals.watch", kind="nonsense")
    assert bad["exit"] == 2 and bad["output"]["ok"] is False
    assert server.call("approvals.watch", poll=0)["exit"] == 2
    assert server.request("approvals.watch", {"cursor": {"rowid": -1}})["error"]["code"] == wire.INVALID_PARAMS
    assert server.request("approvals.watch", {"exec_command": "sh"})["error"]["code"] == wire.INVALID_PARAMS
    result = server.call("approvals.watch", project="p2", poll=0.05)
    assert result["exit"] == 0
    new_request(db, "apr-p1", "p1")
    new_request(db, "apr-p2", "p2")
    (change,) = server.changes(1)
    assert change["change"]["request_id"] == "apr-p2"


def test_a_watch_on_a_database_without_approvals_answers_as_the_cli(servers, schema_db):
    server = servers("--actor", "dave", db=schema_db("1.8.20"))
    server.hello()
    result = server.call("approvals.watch")
    assert result["exit"] == 1 and "no approval tables" in result["output"]["error"]
    for line in server.raw:
        json.loads(line)


def test_a_watch_and_commands_on_a_wal_database_open_no_file_under_a_connection(servers, make_db):
    """The watch holds a connection for its session; the commands of another session open and close
    theirs: no process opens the database's files outside SQLite while it holds a connection
    (console/db/file_guard.py; the audit hook reports a breach and tests/conftest.py fails the test).
    It failed while a watching session still answered other methods beside its stream."""
    from tests.approvals_helpers import seed

    db = make_db(fill=seed, wal=True, name="wal.db")
    live = live_request(db)
    server, _start = watching(servers, db)
    other = servers("--actor", "dave", db=db)
    assert other.hello()["instance_id"]
    assert other.call("approvals.list")["exit"] == 0
    assert other.call("approvals.approve", ids=[live])["exit"] == 0
    assert other.call("doctor")["exit"] in (0, 1)
    assert other.call("upgrade.plan")["exit"] in (0, 1)
    (change,) = server.changes(1)
    assert change["change"]["request_id"] == live


def test_reminders_are_in_the_cursor_so_a_resumed_watch_does_not_repeat_them(servers, db):
    server, _start = watching(servers, db, expiring_within=60 * 24 * 365 * 10)
    reminded = server.changes(5)  # every pending request of the seed (apr-1..4 and the overdue apr-7)
    assert {c["change"]["change"] for c in reminded} == {"expiring"}
    ids = {c["change"]["request_id"] for c in reminded}
    assert ids == {"apr-1", "apr-2", "apr-3", "apr-4", "apr-7"}
    last = reminded[-1]["cursor"]
    assert set(last["reminded"]) == ids
    assert server.close() == 0
    again, _start = watching(servers, db, cursor=last, expiring_within=60 * 24 * 365 * 10)
    new_request(db, "apr-later")
    changes = again.changes(2)  # the new request, then its own reminder: nothing reminded twice
    assert [(c["change"]["change"], c["change"]["request_id"]) for c in changes] == [
        ("new", "apr-later"), ("expiring", "apr-later")]
