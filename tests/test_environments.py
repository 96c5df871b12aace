"""Operation claims on a 1.10.0 database carrying archon's triggers: every transition and refusal."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from console.errors import Refusal, UsageError
from console.services import environment_rules
from console.services.environment_claims import claim, complete, release
from console.services.environment_queries import list_environments, show_environment
from console.services.environment_rules import (ALLOWED_STATES, OPERATIONS, WHY_ALLOWED, claim_holder,
                                                claim_options, default_stale_after, held_by)
from console.services.base import claim_id_for
from tests.environments_support import (
    T0,
    add_env,
    add_lease,
    add_project,
    dump,
    env_row,
    events,
    handle,
    raw,
    set_claim,
)

STATES = environment_rules.STATES


def _rows(conn) -> None:
    """Built once per test process (29 migration steps); each test gets its own copy."""
    add_project(conn, "p1")
    add_project(conn, "gone", deleting=True)
    for state in STATES:
        add_env(conn, f"env-{state}", state)
    add_env(conn, "env-doomed", "ready", project_id="gone")


@pytest.fixture
def db(make_db):
    return make_db(fill=_rows, cached=True)


def refused(path, fn, *args, match=None, **kwargs):
    """Call a write that must be refused, and prove nothing was written."""
    before = dump(path)
    with handle(path) as h:
        with pytest.raises(Refusal) as info:
            fn(h, *args, **kwargs)
    assert dump(path) == before
    if match:
        assert match in info.value.reason, info.value.reason
    return info.value


def run(path, fn, *args, **kwargs):
    with handle(path) as h:
        return fn(h, *args, **kwargs)


@pytest.mark.parametrize("op", OPERATIONS)
@pytest.mark.parametrize("state", STATES)
def test_claim_is_allowed_exactly_in_the_documented_states(db, op, state):
    env = f"env-{state}"
    if state in ALLOWED_STATES[op]:
        result = run(db, claim, env, op, "alice", now=T0)
        assert result.ok and not result.noop
        row = env_row(db, env)
        assert row["operation_kind"] == op
        assert row["operation_claim_id"] == result.claim_id
        assert row["operation_claim_id"].startswith("console:alice@")
        assert row["operation_claimed_at"] == "2026-11-01 09:30:00"
        assert row["updated_at"] == "2026-10-01 00:00:00"  # Q8: claims leave updated_at alone
        assert (row["retirement_requested_at"] is not None) == (op == "retire")
        [event] = events(db, env)
        assert event["event_type"] == "operation_claimed" and event["sequence"] == 1
        assert event["actor_classification"] == "human" and event["actor_reference"] == "alice"
        meta = json.loads(event["metadata_json"])
        assert meta["operation_kind"] == op and meta["claim_id"] == row["operation_claim_id"]
    else:
        error = refused(db, claim, env, op, "alice", now=T0, match=f"{env} is {state}")
        assert WHY_ALLOWED[op] in error.reason


def test_stop_completion_hands_off_to_the_idle_stop_sweep_and_never_writes_the_state(db):
    """Regression (issue 8, rule 2): completing stop used to write `stopped` for a container the
    console never stopped. It now sets idle_stop_at and clears the claim in one UPDATE."""
    run(db, claim, "env-running", "stop", "alice", now=T0)
    later = T0 + timedelta(minutes=3)
    result = run(db, complete, "env-running", "alice", now=later)
    assert result.ok and result.state == "running"
    assert "archon's idle-stop sweep" in result.message
    assert result.handoff.to_json() == {"kind": "stop", "column": "idle_stop_at", "since": "2026-11-01 09:33:00",
                                        "performed_by": "archon's idle-stop sweep"}
    row = env_row(db, "env-running")
    assert row["lifecycle_state"] == "running" and row["stopped_at"] is None
    assert row["idle_stop_at"] == "2026-11-01 09:33:00"
    assert row["updated_at"] == "2026-10-01 00:00:00"  # no state change, nothing for the cleanup index
    assert (row["operation_claim_id"], row["operation_kind"], row["operation_claimed_at"]) == (None, None, None)
    evs = events(db, "env-running")
    assert [e["event_type"] for e in evs] == ["operation_claimed", "operation_completed"]
    assert [e["sequence"] for e in evs] == [1, 2]
    assert (evs[1]["from_state"], evs[1]["to_state"]) == ("running", "running")
    assert json.loads(evs[1]["metadata_json"])["handoff"] == "idle_stop_at"
    with handle(db) as h:
        env = show_environment(h, "env-running", now=later + timedelta(minutes=2))
    [handoff] = env.pending_handoffs
    assert handoff.kind == "stop" and handoff.since == "2026-11-01 09:33:00" and not handoff.overdue
    assert handoff.text == "stop requested 2 minutes ago; archon's idle-stop sweep performs it"


def test_retire_completion_keeps_the_request_and_the_state_even_with_a_lease(schema_db):
    """Regression (issue 8, rule 2): completing retire used to write `retired` (refused only while a
    lease was active). It now clears the claim and leaves retirement_requested_at to archon."""
    path = schema_db("1.10.0")
    conn = raw(path)
    add_project(conn)
    add_env(conn, "env-1", "running")
    add_lease(conn, "env-1", "run-1")
    conn.close()
    result = run(path, claim, "env-1", "retire", "alice", now=T0)
    assert "Retirement is now requested" in result.message
    assert env_row(path, "env-1")["retirement_requested_at"] == "2026-11-01 09:30:00"
    result = run(path, complete, "env-1", "alice", now=T0 + timedelta(minutes=20))
    assert result.state == "running" and "archon's retirement path" in result.message
    assert "lease is still active" in result.message
    row = env_row(path, "env-1")
    assert row["lifecycle_state"] == "running" and row["retired_at"] is None
    assert row["retirement_requested_at"] == "2026-11-01 09:30:00"
    assert row["operation_claim_id"] is None
    last = events(path, "env-1")[-1]
    assert (last["event_type"], last["from_state"], last["to_state"]) == ("operation_completed", "running", "running")
    assert json.loads(last["metadata_json"])["handoff"] == "retirement_requested_at"
    with handle(path) as h:
        [handoff] = show_environment(h, "env-1", now=T0 + timedelta(hours=3)).pending_handoffs
    assert handoff.kind == "retire" and not handoff.overdue  # a run still holds the lease
    assert handoff.text.startswith("retirement requested 3 hours ago; archon's retirement path")
    conn = raw(path)
    conn.execute("UPDATE execution_environment_run_bindings SET released_at = '2026-11-01 09:40:00'")
    conn.close()
    with handle(path) as h:
        [handoff] = show_environment(h, "env-1", now=T0 + timedelta(hours=3)).pending_handoffs
    assert handoff.overdue


@pytest.mark.parametrize("state", ["failed", "unavailable", "stopped", "ready"])
def test_reset_cannot_be_completed_and_a_failed_environment_never_becomes_ready(db, state):
    """Regression (issue 8, rule 2): `envs complete` on a reset made a failed environment ready,
    and archon's lease admission then accepted runs on it."""
    env = f"env-{state}"
    run(db, claim, env, "reset", "alice", now=T0)
    error = refused(db, complete, env, "alice", now=T0, match="a reset claim cannot be completed")
    assert f"archon-console envs release {env}" in error.reason and "your claim stays" in error.reason
    row = env_row(db, env)
    assert row["lifecycle_state"] == state and row["operation_kind"] == "reset"
    conn = raw(db)
    with pytest.raises(Exception, match="not admitting leases"):  # the hold still holds
        add_lease(conn, env, "run-after-reset")
    conn.close()
    result = run(db, release, env, "alice", now=T0)
    assert result.ok and env_row(db, env)["lifecycle_state"] == state


def test_cleanup_retry_sets_the_retry_time_and_keeps_the_state(db):
    run(db, claim, "env-cleanup_pending", "cleanup_retry", "alice", now=T0)
    result = run(db, complete, "env-cleanup_pending", "alice", now=T0)
    row = env_row(db, "env-cleanup_pending")
    assert result.state == "cleanup_pending" == row["lifecycle_state"]
    assert row["cleanup_retry_at"] == "2026-11-01 09:30:00"
    assert row["updated_at"] == "2026-10-01 00:00:00"
    assert row["operation_claim_id"] is None
    assert json.loads(events(db, "env-cleanup_pending")[-1]["metadata_json"])["handoff"] == "cleanup_retry_at"


@pytest.mark.parametrize("op", OPERATIONS)
def test_no_completion_writes_the_lifecycle_state(db, op):
    """Whatever the operation, the state and every state timestamp stay as archon left them."""
    env = f"env-{ALLOWED_STATES[op][0]}"
    run(db, claim, env, op, "alice", now=T0)
    before = env_row(db, env)
    try:
        run(db, complete, env, "alice", now=T0 + timedelta(minutes=1))
    except Refusal:
        assert op == "reset"
    after = env_row(db, env)
    for column in ("lifecycle_state", "updated_at", "stopped_at", "retired_at", "ready_at", "retirement_started_at",
                   "cleanup_pending_at", "failed_at"):
        assert after[column] == before[column], column


def test_claim_options_follow_the_service_rules(db):
    conn = raw(db)
    set_claim(conn, "env-ready", "archon-worker:42", "stop", "2026-11-01 09:00:00")
    conn.close()
    with handle(db) as h:
        theirs = show_environment(h, "env-ready", now=T0)
        reasons = claim_options(theirs, "alice").unavailable()
        assert "not yours" in reasons["complete"] and "release" not in reasons and "takeover" not in reasons
        assert "already claimed for stop" in reasons["retire"]
    run(db, claim, "env-failed", "reset", "alice", now=T0)
    with handle(db) as h:
        mine = show_environment(h, "env-failed", now=T0)
    reasons = claim_options(mine, "alice").unavailable()
    assert reasons["complete"].startswith("a reset claim cannot be completed") and "release" not in reasons
    assert reasons["takeover"] == "you hold this claim"
    with handle(db) as h:
        free = show_environment(h, "env-stopped", now=T0)
    reasons = claim_options(free, "alice").unavailable()
    assert reasons["complete"] == "no claim is held" and "it is stopped" in reasons["stop"]
    assert "retire" not in reasons and "reset" not in reasons


def test_claim_held_by_someone_else_is_refused_with_who_and_since(db):
    conn = raw(db)
    set_claim(conn, "env-ready", "archon-worker:42", "stop", "2026-11-01 09:30:00")
    conn.close()
    error = refused(db, claim, "env-ready", "stop", "bob", now=T0 + timedelta(hours=3))
    assert error.reason.startswith(
        "env-ready is claimed for stop by archon-worker:42 since 2026-11-01 09:30 UTC (3 hours ago)"
    )
    assert "--takeover" in error.reason


def test_takeover_of_a_fresh_claim_is_refused_and_of_a_stale_one_succeeds(db):
    run(db, claim, "env-ready", "stop", "alice", now=T0)
    old_claim = env_row(db, "env-ready")["operation_claim_id"]
    error = refused(db, claim, "env-ready", "stop", "bob", now=T0 + timedelta(minutes=10),
                    takeover=True, reason="alice went home", match="a fresh claim cannot be taken over")
    assert "in 5 minutes" in error.reason
    refused(db, claim, "env-ready", "stop", "bob", now=T0 + timedelta(minutes=20), takeover=True,
            match="A reason is required")
    refused(db, claim, "env-ready", "retire", "bob", now=T0 + timedelta(minutes=20), takeover=True,
            reason="alice went home", match="a takeover keeps the operation it takes over")
    result = run(db, claim, "env-ready", None, "bob", now=T0 + timedelta(minutes=20),
                 takeover=True, reason="alice went home")
    assert result.ok and "taken over" in result.message and result.operation_kind == "stop"
    row = env_row(db, "env-ready")
    assert row["operation_kind"] == "stop" and row["operation_claim_id"].startswith("console:bob@")
    assert row["retirement_requested_at"] is None
    last = events(db, "env-ready")[-1]
    assert last["event_type"] == "operation_taken_over" and last["reason"] == "alice went home"
    meta = json.loads(last["metadata_json"])
    assert meta["previous_claim_id"] == old_claim and meta["previous_operation_kind"] == "stop"
    assert meta["console_claim"] is True and "confirmed_holder" not in meta
    # alice can no longer complete or release it
    refused(db, complete, "env-ready", "alice", now=T0 + timedelta(minutes=21), match="claimed for stop by bob")
    refused(db, release, "env-ready", "alice", now=T0 + timedelta(minutes=21), match="only its holder")


def test_stale_threshold_is_configurable(db):
    run(db, claim, "env-ready", "stop", "alice", now=T0)
    result = run(db, claim, "env-ready", "stop", "bob", now=T0 + timedelta(minutes=2),
                 takeover=True, reason="short threshold", stale_after=timedelta(minutes=1))
    assert result.ok


def test_takeover_needs_the_state_to_allow_the_operation(db):
    conn = raw(db)
    set_claim(conn, "env-stopped", "archon-worker:1", "stop", "2026-11-01 08:00:00")
    conn.close()
    refused(db, claim, "env-stopped", "stop", "bob", now=T0, takeover=True, reason="x",
            confirm_holder="archon-worker:1", match="env-stopped is stopped; a stop claim needs ready or running")


def test_idempotent_repeats(db):
    first = run(db, claim, "env-ready", "stop", "alice", now=T0)
    before = dump(db)
    again = run(db, claim, "env-ready", "stop", "alice", now=T0 + timedelta(minutes=1))
    assert again.ok and again.noop and "already claimed for stop by you" in again.message
    assert again.claim_id == first.claim_id
    assert dump(db) == before
    refused(db, claim, "env-ready", "retire", "alice", now=T0, match="already hold a stop claim")
    run(db, release, "env-ready", "alice", now=T0)
    before = dump(db)
    again = run(db, release, "env-ready", "alice", now=T0)
    assert again.ok and again.noop and "already released by you" in again.message
    assert dump(db) == before
    refused(db, release, "env-ready", "bob", now=T0, match="holds no operation claim")
    run(db, claim, "env-ready", "stop", "alice", now=T0)
    run(db, complete, "env-ready", "alice", now=T0)
    before = dump(db)
    again = run(db, complete, "env-ready", "alice", now=T0)
    assert again.noop and "already completed by you" in again.message
    assert dump(db) == before
    refused(db, complete, "env-ready", "bob", now=T0, match="holds no operation claim")
    assert [e["sequence"] for e in events(db, "env-ready")] == [1, 2, 3, 4]


def test_release_own_claim_clears_the_triple_and_keeps_the_retirement_request(db):
    run(db, claim, "env-stopped", "retire", "alice", now=T0)
    result = run(db, release, "env-stopped", "alice", now=T0)
    assert "retirement request stays" in result.message
    row = env_row(db, "env-stopped")
    assert (row["operation_claim_id"], row["operation_kind"], row["operation_claimed_at"]) == (None, None, None)
    assert row["retirement_requested_at"] == "2026-11-01 09:30:00"
    assert row["lifecycle_state"] == "stopped"
    assert events(db, "env-stopped")[-1]["event_type"] == "operation_released"


def test_release_of_someone_elses_claim_needs_takeover_staleness_and_reason(db):
    conn = raw(db)
    set_claim(conn, "env-ready", "archon-worker:42", "stop", "2026-11-01 09:30:00")
    conn.close()
    refused(db, release, "env-ready", "bob", now=T0 + timedelta(hours=1), match="only its holder")
    refused(db, release, "env-ready", "bob", now=T0 + timedelta(minutes=5), takeover=True, reason="r",
            match="a fresh claim cannot be released")
    refused(db, release, "env-ready", "bob", now=T0 + timedelta(hours=1), takeover=True,
            match="A reason is required")
    refused(db, release, "env-ready", "bob", now=T0 + timedelta(hours=1), takeover=True, reason="stuck",
            match="needs its holder named")
    result = run(db, release, "env-ready", "bob", now=T0 + timedelta(hours=1), takeover=True, reason="stuck",
                 confirm_holder="archon-worker:42")
    assert "archon-worker:42's stale stop claim" in result.message
    event = events(db, "env-ready")[-1]
    meta = json.loads(event["metadata_json"])
    assert event["reason"] == "stuck" and meta["takeover"] is True and meta["confirmed_holder"] == "archon-worker:42"


def test_complete_rechecks_the_state(db):
    run(db, claim, "env-ready", "stop", "alice", now=T0)
    conn = raw(db)
    conn.execute("UPDATE execution_environments SET lifecycle_state = 'failed' WHERE id = 'env-ready'")
    conn.close()
    error = refused(db, complete, "env-ready", "alice", now=T0, match="env-ready is failed; completing stop needs")
    assert error.hint == "Release the claim instead: archon-console envs release env-ready"


def test_project_being_deleted_is_refused(db):
    for fn, args in ((claim, ("env-doomed", "stop", "alice")), (release, ("env-doomed", "alice")),
                     (complete, ("env-doomed", "alice"))):
        refused(db, fn, *args, now=T0, match="being deleted")


def test_unknown_environment_and_operation(db):
    refused(db, claim, "nope", "stop", "alice", now=T0, match="There is no environment nope")
    with handle(db) as h, pytest.raises(UsageError):
        claim(h, "env-ready", "explode", "alice", now=T0)


def test_read_only_mode_writes_nothing(db):
    before = dump(db)
    with handle(db, read_only=True) as h:
        with pytest.raises(Refusal, match="read-only"):
            claim(h, "env-ready", "stop", "alice", now=T0)
    assert dump(db) == before


def test_oversized_actor_and_reason_are_refused(db):
    refused(db, claim, "env-ready", "stop", "x" * 201, now=T0, match="1 to 200 bytes")
    conn = raw(db)
    set_claim(conn, "env-ready", "w", "stop", "2026-11-01 08:00:00")
    conn.close()
    refused(db, claim, "env-ready", "stop", "bob", now=T0, takeover=True, reason="é" * 1001, match="2002 bytes")


def test_long_actor_names_still_recognise_their_cut_claim_id(db):
    actor = "a" * 190
    claim_id = claim_id_for(actor)
    assert len(claim_id) == 128 and held_by(claim_id, actor) and not held_by(claim_id, "a")
    run(db, claim, "env-ready", "stop", actor, now=T0)
    assert run(db, claim, "env-ready", "stop", actor, now=T0).noop
    assert run(db, complete, "env-ready", actor, now=T0).state == "ready"


def test_actor_with_at_sign_is_not_confused_with_a_prefix():
    claim_id = claim_id_for("bob@x")
    assert claim_holder(claim_id) == "bob@x"
    assert held_by(claim_id, "bob@x") and not held_by(claim_id, "bob")
    # A hand-written id naming bob@x is nobody's: only the id this account created owns (issue 17).
    assert not held_by("console:bob@x@host:0123456789ab", "bob@x")


def test_pre_1_10_database_says_upgrade_required(schema_db):
    path = schema_db("1.8.22")
    conn = raw(path)
    add_project(conn)
    add_env(conn, "env-1", "ready")
    conn.close()
    refused(path, claim, "env-1", "stop", "alice", now=T0, match="upgrade required")
    with handle(path) as h:
        page = list_environments(h, now=T0)
        assert [r.id for r in page.rows] == ["env-1"]
        with pytest.raises(Refusal, match="upgrade required"):
            list_environments(h, now=T0, claimed=True)


def test_unknown_events_table_skips_the_event_and_says_so(schema_db):
    path = schema_db("1.10.0")
    conn = raw(path)
    conn.execute("DROP TABLE execution_environment_events")
    conn.execute(
        "CREATE TABLE execution_environment_events (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, "
        "environment_id TEXT NOT NULL, sequence INTEGER NOT NULL, event_type TEXT NOT NULL, "
        "payload_digest TEXT NOT NULL)"
    )
    add_project(conn)
    add_env(conn, "env-1", "ready")
    conn.close()
    result = run(path, claim, "env-1", "stop", "alice", now=T0)
    assert result.ok and result.event_written is False
    assert "No environment event was written" in result.message
    assert env_row(path, "env-1")["operation_kind"] == "stop"


def test_list_filters_derived_fields_and_keyset_pages(db):
    conn = raw(db)
    set_claim(conn, "env-ready", "archon-worker:42", "stop", "2026-11-01 09:00:00")
    set_claim(conn, "env-stopped", "console:alice@h:0123456789abcdef-0123456789ab", "retire", "2026-11-01 09:25:00")
    add_lease(conn, "env-running", "run-1")
    conn.close()
    with handle(db) as h:
        claimed = list_environments(h, now=T0, claimed=True)
        assert [r.id for r in claimed.rows] == ["env-ready", "env-stopped"]
        stale = list_environments(h, now=T0, stale=True)
        assert [r.id for r in stale.rows] == ["env-ready"]
        row = stale.rows[0]
        assert row.claim_age_seconds == 1800 and row.stale is True
        assert row.claim_holder == "archon-worker:42" and row.admits_leases is False
        assert "claimed for stop" in row.admission_reason
        running = list_environments(h, now=T0, state="running").rows[0]
        assert running.active_lease_count == 1 and not running.admits_leases
        assert list_environments(h, now=T0, state="stopped").rows[0].claim_holder == "alice"
        assert list_environments(h, now=T0, project="gone").rows[0].id == "env-doomed"
        seen, after = [], None
        while True:
            page = list_environments(h, now=T0, limit=3, after=after)
            seen += [r.id for r in page.rows]
            if page.next_after is None:
                break
            after = page.next_after
        assert seen == sorted(f"env-{s}" for s in STATES + ("doomed",))
        with pytest.raises(UsageError):
            list_environments(h, now=T0, state="sleeping")


def test_show_has_leases_claim_times_and_timeline(db):
    conn = raw(db)
    add_lease(conn, "env-running", "run-1")
    conn.execute("UPDATE execution_environments SET idle_stop_at = '2026-11-01 10:00:00' WHERE id = 'env-running'")
    conn.close()
    run(db, claim, "env-running", "stop", "alice", now=T0)
    with handle(db) as h:
        env = show_environment(h, "env-running", now=T0 + timedelta(minutes=20))
    assert [l.execution_run_id for l in env.active_leases] == ["run-1"]
    assert env.claim_holder == "alice" and env.stale and env.claim_age_seconds == 1200
    assert env.idle_stop_at == "2026-11-01 10:00:00" and "cleanup_retry_at" in env.columns
    assert [e.event_type for e in env.events] == ["operation_claimed"]
    with handle(db) as h, pytest.raises(Refusal, match="no environment"):
        show_environment(h, "missing", now=T0)


def test_a_claim_stops_lease_admission_in_archons_trigger(db):
    run(db, claim, "env-ready", "stop", "alice", now=T0)
    conn = raw(db)
    with pytest.raises(Exception, match="not admitting leases"):
        add_lease(conn, "env-ready", "run-9")
    conn.close()


def test_stale_after_from_environment(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_STALE_MINUTES", "2.5")
    assert default_stale_after() == timedelta(minutes=2.5)
    monkeypatch.setenv("ARCHON_CONSOLE_STALE_MINUTES", "soon")
    with pytest.raises(UsageError):
        default_stale_after()


def test_an_unreadable_claim_time_counts_as_stale_everywhere(db):
    conn = raw(db)
    set_claim(conn, "env-ready", "archon-worker:7", "stop", "not a time")
    conn.close()
    with handle(db) as h:
        [row] = list_environments(h, now=T0, stale=True).rows
    assert row.id == "env-ready" and row.stale and row.claim_age_seconds is None
    result = run(db, claim, "env-ready", "stop", "bob", now=T0, takeover=True, reason="garbled claim",
                 confirm_holder="archon-worker:7")
    assert result.ok and "taken over" in result.message
