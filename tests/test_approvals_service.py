"""Approval decisions through the service layer, on databases carrying archon's exact triggers."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from console.db.connect import open_database
from console.errors import Refusal, UsageError
from console.services import approvals, identity
from console.services.approval_expiry import expire_overdue
from console.services.approval_queue import Filters, count_requests, list_requests, show_request
from console.services.approval_transitions import DecisionRefused
from tests.approvals_helpers import (
    NOW,
    add_project,
    add_request,
    archon_move,
    connect,
    dump,
    events,
    seed,
    status_of,
)


def open_rw(path, **kw):
    return open_database(path, **kw)


def assert_unchanged(path, action):
    before = dump(path)
    with pytest.raises(Refusal) as info:
        action()
    assert dump(path) == before, "a refusal wrote something"
    return info.value


# --- transitions ---------------------------------------------------------------------------------

def test_approve_sets_status_decision_time_and_appends_one_event(db):
    with open_rw(db) as h:
        result = approvals.approve(h, "apr-1", actor="dave", reason="looks fine", now=NOW)
    assert result.ok and not result.noop and result.state == "approved"
    conn = connect(db)
    row = conn.execute("SELECT * FROM approval_requests WHERE id = 'apr-1'").fetchone()
    assert (row["status"], row["decision_at"], row["updated_at"]) == ("approved", "2026-11-01 09:30:00", "2026-11-01 09:30:00")
    evs = events(db, "apr-1")
    assert [e["sequence"] for e in evs] == [1, 2]
    last = evs[-1]
    assert (last["from_status"], last["to_status"], last["actor_classification"], last["actor_reference"], last["reason"]) == (
        "pending", "approved", "human", "dave", "looks fine")
    # archon's spelling for pending -> approved is reused (seeded as 'request_approved')
    assert last["event_type"] == "request_approved"
    assert last["project_id"] == "p1"


def test_deny_requires_a_reason_and_records_it(db):
    with open_rw(db) as h:
        assert_unchanged(db, lambda: approvals.deny(h, "apr-1", actor="dave", reason="  ", now=NOW))
        result = approvals.deny(h, "apr-1", actor="dave", reason="wrong branch", now=NOW)
    assert result.state == "denied"
    last = events(db, "apr-1")[-1]
    assert (last["from_status"], last["to_status"], last["reason"], last["event_type"]) == (
        "pending", "denied", "wrong branch", "request_denied")


def test_event_type_falls_back_to_the_target_status_when_the_database_shows_none(schema_db):
    path = schema_db()
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "r1", "p1")
    conn.close()
    with open_rw(path) as h:
        approvals.approve(h, "r1", actor="dave", now=NOW)
    assert events(path, "r1")[-1]["event_type"] == "approved"


def test_revoke_moves_approved_to_invalidated_and_keeps_decision_time(db):
    conn = connect(db)
    decided = conn.execute("SELECT decision_at FROM approval_requests WHERE id = 'apr-5'").fetchone()[0]
    with open_rw(db) as h:
        assert_unchanged(db, lambda: approvals.revoke(h, "apr-5", actor="dave", reason=None, now=NOW))
        result = approvals.revoke(h, "apr-5", actor="dave", reason="credentials leaked", now=NOW)
    assert result.state == "invalidated"
    row = conn.execute("SELECT status, decision_at FROM approval_requests WHERE id = 'apr-5'").fetchone()
    assert tuple(row) == ("invalidated", decided)
    last = events(db, "apr-5")[-1]
    assert (last["sequence"], last["from_status"], last["to_status"], last["reason"]) == (
        3, "approved", "invalidated", "credentials leaked")


def test_revoke_of_a_pending_request_is_refused_with_a_hint_to_deny(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.revoke(h, "apr-1", actor="dave", reason="x", now=NOW))
    assert "still pending" in err.reason and "deny" in err.hint


@pytest.mark.slow
@pytest.mark.parametrize("status", ["denied", "cancelled", "expired", "invalidated", "consumed"])
@pytest.mark.parametrize("decision", ["approve", "deny", "revoke"])
def test_terminal_statuses_refuse_every_decision_and_name_who(schema_db, status, decision):
    path = schema_db()
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "r1", "p1")
    if status == "consumed":
        archon_move(conn, "r1", "approved", actor="bob")
        archon_move(conn, "r1", "consumed", actor="executor-1", kind="action_executor")
    else:
        archon_move(conn, "r1", status, actor="erin", kind="human" if status == "denied" else "system")
    conn.close()
    with open_rw(path) as h:
        err = assert_unchanged(path, lambda: approvals.decide(h, "r1", decision, actor="dave", reason="r", now=NOW))
    assert isinstance(err, DecisionRefused) and err.state == status
    assert "4 minutes ago" in err.reason
    assert ("executor-1" if status == "consumed" else "erin") in err.reason


def test_approving_what_someone_else_denied_names_them_and_when(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "apr-6", actor="dave", now=NOW))
    assert err.reason == "apr-6 was already denied by carol 4 minutes ago; only a pending request can be approved."


def test_approving_what_someone_else_approved_is_refused_not_a_noop(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "apr-5", actor="dave", now=NOW))
    assert err.reason == "apr-5 was already approved by bob 4 minutes ago."


def test_denying_an_approved_request_points_to_revoke(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.deny(h, "apr-5", actor="dave", reason="no", now=NOW))
    assert "revoke" in err.hint


# --- idempotent repeats --------------------------------------------------------------------------

@pytest.mark.parametrize("decision,request_id", [("approve", "apr-1"), ("deny", "apr-1"), ("revoke", "apr-5")])
def test_repeating_my_own_decision_is_a_noop_without_a_second_event(db, decision, request_id):
    with open_rw(db) as h:
        first = approvals.decide(h, request_id, decision, actor="dave", reason="why", now=NOW)
        before = dump(db)
        again = approvals.decide(h, request_id, decision, actor="dave", reason="why", now=NOW + timedelta(minutes=2))
    assert first.ok and not first.noop
    assert again.ok and again.noop and again.state == first.state
    assert "already" in again.message and "by you 2 minutes ago" in again.message
    assert dump(db) == before


# --- four-eyes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("request_id,requester", [("apr-1", "alice"), ("apr-3", "carol")])
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_requester_may_not_decide(db, request_id, requester, decision):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.decide(h, request_id, decision, actor=requester, reason="r", now=NOW))
    assert "four-eyes" in err.reason and requester in err.reason


def test_four_eyes_ignores_case_and_refuses_surrounding_blanks(db):
    with open_rw(db) as h:
        assert_unchanged(db, lambda: approvals.approve(h, "apr-1", actor="ALICE", now=NOW))
        before = dump(db)
        with pytest.raises(UsageError, match="whitespace"):  # a declared name shows as what it is
            approvals.approve(h, "apr-1", actor=" Alice ", now=NOW)
        assert dump(db) == before


# --- expiry --------------------------------------------------------------------------------------

def test_approving_an_overdue_request_commits_the_expiry_then_refuses(db):
    with open_rw(db) as h:
        with pytest.raises(DecisionRefused) as info:
            approvals.approve(h, "apr-7", actor="dave", now=NOW)
    assert info.value.state == "expired"
    assert "expired 3 minutes ago" in info.value.reason and "marked expired" in info.value.reason
    assert status_of(db, "apr-7") == "expired"
    last = events(db, "apr-7")[-1]
    assert (last["from_status"], last["to_status"], last["actor_classification"], last["actor_reference"]) == (
        "pending", "expired", "system", "archon-console")
    assert json.loads(last["metadata_json"]) == {"during": "approve", "noticed_by": "dave",
                                                 **identity.event_metadata("dave")}  # who acted (issue 17)
    conn = connect(db)
    assert conn.execute("SELECT decision_at FROM approval_requests WHERE id = 'apr-7'").fetchone()[0] is None


def test_a_request_exactly_at_its_expiry_is_overdue(db):
    with open_rw(db) as h:
        with pytest.raises(DecisionRefused):
            approvals.approve(h, "apr-1", actor="dave", now=NOW + timedelta(minutes=12))
    assert status_of(db, "apr-1") == "expired"


def test_expire_sweep_moves_pending_and_approved_past_expiry(db):
    later = NOW + timedelta(hours=6)
    with open_rw(db) as h:
        results = expire_overdue(h, actor="dave", now=later)
        assert {r.id for r in results} == {"apr-1", "apr-2", "apr-3", "apr-4", "apr-5", "apr-7"}
        assert all(r.ok and r.state == "expired" for r in results)
        assert expire_overdue(h, now=later) == []
    conn = connect(db)
    statuses = dict(conn.execute("SELECT id, status FROM approval_requests").fetchall())
    assert statuses["apr-6"] == "denied"
    assert {k for k, v in statuses.items() if v == "expired"} == {f"apr-{i}" for i in (1, 2, 3, 4, 5, 7)}
    last = events(db, "apr-5")[-1]
    assert (last["from_status"], last["to_status"], last["actor_classification"], last["actor_reference"]) == (
        "approved", "expired", "system", "archon-console")
    # decision_at of the approved one is kept, the pending ones stay without one
    assert conn.execute("SELECT decision_at IS NOT NULL FROM approval_requests WHERE id = 'apr-5'").fetchone()[0] == 1
    assert conn.execute("SELECT decision_at FROM approval_requests WHERE id = 'apr-1'").fetchone()[0] is None


def test_sweep_understands_iso_expiry_times(schema_db):
    path = schema_db()
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "iso-past", "p1", expires_at="2026-11-01T09:29:59.000Z")
    add_request(conn, "iso-future", "p1", expires_at="2026-11-01T11:00:00+01:00")  # 10:00 UTC
    add_request(conn, "space-future", "p1", expires_at="2026-11-01 09:45:00")
    conn.close()
    with open_rw(path) as h:
        assert [r.id for r in expire_overdue(h, now=NOW)] == ["iso-past"]
        rows = list_requests(h, Filters(expiring_within_minutes=20), now=NOW).rows
    assert [r.id for r in rows] == ["space-future"]


# --- refusals with nothing written ---------------------------------------------------------------

def test_unknown_request_is_refused(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "nope", actor="dave", now=NOW))
    assert "No approval request 'nope'" in err.reason


def test_read_only_mode_refuses_and_writes_nothing(db):
    with open_database(db, read_only=True) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "apr-1", actor="dave", now=NOW))
        assert "read-only" in err.reason
        with pytest.raises(Refusal):
            approvals.decide_many(h, ["apr-1", "apr-2"], "approve", actor="dave", now=NOW)
        with pytest.raises(Refusal):
            expire_overdue(h, now=NOW)
    assert status_of(db, "apr-1") == "pending"


def test_reason_over_2000_bytes_is_refused_not_cut(db):
    reason = "é" * 1001  # 2002 bytes
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.deny(h, "apr-1", actor="dave", reason=reason, now=NOW))
        assert "2002 bytes" in err.reason
        approvals.deny(h, "apr-1", actor="dave", reason="é" * 1000, now=NOW)
    assert events(db, "apr-1")[-1]["reason"] == "é" * 1000


@pytest.mark.parametrize("actor", ["x" * 201, "é" * 101])  # "": a usage error (test_identity_kernel.py)
def test_actor_outside_1_to_200_bytes_is_refused(db, actor):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "apr-1", actor=actor, now=NOW))
    assert "1 to 200 bytes" in err.reason


def test_requests_of_a_project_being_deleted_cannot_be_decided(schema_db):
    path = schema_db()
    conn = connect(path)
    add_project(conn, "p9", "Old")
    add_request(conn, "r9", "p9")
    conn.execute("UPDATE projects SET deletion_started_at = '2026-11-01 09:00:00' WHERE id = 'p9'")
    conn.close()
    with open_rw(path) as h:
        err = assert_unchanged(path, lambda: approvals.approve(h, "r9", actor="dave", now=NOW))
        assert "being deleted" in err.reason
        assert expire_overdue(h, now=NOW + timedelta(days=1)) == []


def test_batch_decides_each_id_in_its_own_transaction_and_reports_each(db):
    with open_rw(db) as h:
        results = approvals.decide_many(h, ["apr-1", "apr-6", "apr-3", "nope", "apr-1", "apr-2"], "approve",
                                        actor="carol", now=NOW)
    assert [(r.id, r.ok, r.state) for r in results] == [
        ("apr-1", True, "approved"),
        ("apr-6", False, "denied"),
        ("apr-3", False, "pending"),   # carol requested it
        ("nope", False, None),
        ("apr-2", True, "approved"),
    ]
    assert status_of(db, "apr-2") == "approved"


def test_release_without_approvals_says_upgrade_required(schema_db):
    path = schema_db("1.8.20")
    with open_rw(path) as h:
        for call in (
            lambda: approvals.approve(h, "x", actor="dave", now=NOW),
            lambda: list_requests(h, now=NOW),
            lambda: expire_overdue(h, now=NOW),
        ):
            err = assert_unchanged(path, call)
            assert "upgrade required" in err.reason


def test_release_1_8_22_has_approvals(make_db):
    path = make_db("1.8.22", fill=seed)
    with open_rw(path) as h:
        assert approvals.approve(h, "apr-1", actor="dave", now=NOW).state == "approved"
        assert [r.id for r in list_requests(h, now=NOW).rows][:1] == ["apr-7"]


def test_a_trigger_refusal_is_translated_and_rolls_back(db, monkeypatch):
    """If the pre-checks had a hole, archon's trigger would still stop the write: plain words, nothing written."""
    from console.services import approvals as module

    monkeypatch.setitem(module.DECISIONS, "approve", ("pending", "consumed"))  # not a legal human move
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.approve(h, "apr-1", actor="dave", now=NOW))
    assert "CHECK" in err.hint or "archon's rule" in err.hint


# --- reading -------------------------------------------------------------------------------------

def test_list_orders_by_expiry_across_projects_with_derived_fields(db):
    with open_rw(db) as h:
        page = list_requests(h, now=NOW)
    ids = [r.id for r in page.rows]
    assert ids == ["apr-7", "apr-1", "apr-4", "apr-3", "apr-2"]
    first = page.rows[0]
    assert first.overdue is True and first.expires_in_seconds == -180
    assert page.rows[1].expires_in_seconds == 720 and page.rows[1].overdue is False
    assert page.rows[2].project_name == "Web"
    assert {"action_json", "authority_json", "decision_at", "consumed_at"} <= set(first.to_json())


def test_list_filters(db):
    with open_rw(db) as h:
        def ids(**kw):
            return [r.id for r in list_requests(h, Filters(**kw), now=NOW).rows]

        assert ids(project="p2") == ["apr-4"]
        assert ids(project="Web") == ["apr-4"]
        assert ids(kind="custom_check") == ["apr-2"]
        assert ids(expiring_within_minutes=45) == ["apr-7", "apr-1", "apr-4"]
        assert ids(statuses=None) == ["apr-7", "apr-1", "apr-4", "apr-3", "apr-2", "apr-5", "apr-6"]
        assert ids(statuses=("approved", "denied")) == ["apr-5", "apr-6"]
        assert ids(search="LINT") == ["apr-2"]
        assert ids(search="web") == ["apr-4"]
        assert ids(search="apr-3") == ["apr-3"]
        with pytest.raises(Refusal):
            ids(project="nowhere")


def test_a_search_folds_as_sqlite_folds_so_any_text_finds_itself(make_db):
    """Archon writes JSON as UTF-8 (`"Éclair"`, not `"\\u00c9clair"`); SQLite's lower() folds ASCII
    only, so a needle folded by Python's lower() ("éclair") never met the "Éclair" SQLite left."""
    def fill(conn):
        add_project(conn, "p1", "Payments")
        add_request(conn, "apr-1", "p1", kind="custom_check", action='{"command":["Éclair","--fast"]}')
        add_request(conn, "apr-2", "p1")

    with open_rw(make_db(fill=fill)) as h:
        def ids(text):
            return [r.id for r in list_requests(h, Filters(search=text), now=NOW).rows]

        assert ids("ÉCLAIR") == ["apr-1"]
        assert ids("\"--FAST\"") == ["apr-1"]
        assert sorted(ids("payments")) == ["apr-1", "apr-2"]  # the project name, folded the same way


def test_list_pages_with_cursors_forward_and_back(db):
    with open_rw(db) as h:
        f = Filters(statuses=None)
        first = list_requests(h, f, limit=3, now=NOW)
        second = list_requests(h, f, limit=3, cursor=first.next_cursor, now=NOW)
        third = list_requests(h, f, limit=3, cursor=second.next_cursor, now=NOW)
        back = list_requests(h, f, limit=3, cursor=second.previous_cursor, now=NOW)
    assert [r.id for r in first.rows] == ["apr-7", "apr-1", "apr-4"]
    assert [r.id for r in second.rows] == ["apr-3", "apr-2", "apr-5"]
    assert [r.id for r in third.rows] == ["apr-6"] and third.next_cursor is None
    assert [r.id for r in back.rows] == ["apr-7", "apr-1", "apr-4"]


def test_count_is_capped(db):
    with open_rw(db) as h:
        assert str(count_requests(h, Filters(statuses=None), now=NOW)) == "7"
        assert str(count_requests(h, Filters(statuses=None), cap=3, now=NOW)) == ">3"


def test_show_parses_action_authority_events_and_options(db):
    with open_rw(db) as h:
        shown = show_request(h, "apr-3", actor="carol", now=NOW)
        other = show_request(h, "apr-7", actor="dave", now=NOW)
    assert shown.action["branch"] == "main" and shown.requester == "carol"
    assert [e.to_status for e in shown.events] == ["pending"]
    assert shown.options["approve"] == "you requested it (four-eyes rule)"
    assert shown.options["revoke"] == "it is pending, not approved"
    assert other.options["approve"].startswith("overdue")


def test_revoking_a_denied_request_says_only_approved_ones_can_be(db):
    with open_rw(db) as h:
        err = assert_unchanged(db, lambda: approvals.revoke(h, "apr-6", actor="dave", reason="x", now=NOW))
    assert err.reason == "apr-6 was already denied by carol 4 minutes ago; only an approved request can be revoked."


# --- the cost of a decision (issue 22, item 5) ---------------------------------------------------

_SCHEMA_READS = ("pragma table_info", "pragma table_xinfo", "sqlite_master", "sqlite_schema")


def _traced(conn, work) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        work()
    finally:
        conn.set_trace_callback(None)
    return seen


def test_a_decision_runs_the_same_statements_and_reads_no_schema_after_the_first(db):
    """A decision's per-call work does not depend on how many came before: after the first on a
    connection, none reads the schema again (the stored-column lists are kept per connection and
    schema version), so ten decisions run exactly ten times the statements of one."""
    conn = connect(db)
    for n in range(11, 23):
        add_request(conn, f"apr-{n}", "p1", expires_at=NOW + timedelta(hours=2))
    conn.commit()
    conn.close()
    with open_rw(db) as h:
        approvals.approve(h, "apr-11", actor="dave", now=NOW)  # the first: reads the columns once
        one = _traced(h.conn, lambda: approvals.approve(h, "apr-12", actor="dave", now=NOW))
        ten = _traced(h.conn, lambda: [approvals.approve(h, f"apr-{n}", actor="dave", now=NOW)
                                       for n in range(13, 23)])
    assert len(ten) == 10 * len(one)
    schema = [s for s in one + ten if any(word in s.lower() for word in _SCHEMA_READS)]
    assert not schema, schema
    assert [status_of(db, f"apr-{n}") for n in range(11, 23)] == ["approved"] * 12


def test_a_schema_change_between_decisions_is_read(db):
    """The kept column list is the schema's of this transaction: a column archon adds between two
    decisions on one connection is read by the next (schema_version, read under the write lock)."""
    from console.db.tx import write_transaction
    from console.services.approval_transitions import load_for_decision

    with open_rw(db) as h:
        with write_transaction(h.conn) as conn:
            assert "added_later" not in load_for_decision(conn, "apr-1").row
        other = connect(db)
        other.execute("ALTER TABLE approval_requests ADD COLUMN added_later TEXT DEFAULT 'x'")
        other.commit()
        other.close()
        with write_transaction(h.conn) as conn:
            assert load_for_decision(conn, "apr-1").row["added_later"] == "x"
        assert approvals.approve(h, "apr-2", actor="dave", now=NOW).state == "approved"
