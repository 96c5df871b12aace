"""Issue 18, findings 2 and 8: what archon does next with a claim the console took over or a stop it
was handed.

Finding 2 (on main): `envs claim --op stop --takeover` on archon's 41-minute-old retire claim, then
`complete`, left the environment ready, unclaimed, with no retirement request and admitting new
leases: archon's retirement was dropped silently. `release --takeover` of archon's 3-hour-old reset
claim reopened lease admission while archon may still be resetting, with no more than a reason.
Now a takeover keeps the operation it takes over (to change it, release first, with the reason
recorded), and taking over or releasing a claim the console did not create needs its holder named
(`--confirm-holder`, or the holder typed in the TUI); the refusal, the help and docs/decisions.md
state the stale threshold as the console's assumption.

Finding 8 (on main): `envs complete` of a stop wrote `idle_stop_at = now` while a run held an
execution lease, promising that "the console does not interrupt its run", which nothing in archon's
text supports. Now the completion is refused while a lease is active (checked inside the write
transaction), and the TUI greys it with the same words.

The scenarios run the real CLI in its own process on a real SQLite file carrying archon's
triggers; the generated test drives the services and `claim_options` over every combination.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from console.clock import db_time
from console.errors import ConsoleError
from console.services.environment_claims import claim, complete, release
from console.services.environment_queries import show_environment
from console.services.environment_rules import (ADMITTING_STATES, OPERATIONS, STATES, claim_holder,
                                                claim_options, held_by, lease_blocks_stop)
from console.services.base import claim_id_for
from tests.conftest import make_schema
from tests.environments_support import (
    T0,
    add_env,
    add_lease,
    add_project,
    add_service_run,
    add_validation,
    ago,
    console,
    dump,
    env_row,
    events,
    handle,
    raw,
    release_lease,
    set_claim,
    set_cleanup_claim,
)

ROOT = Path(__file__).resolve().parents[1]
ARCHON = "archon-worker:7"


@pytest.fixture
def db(make_db) -> Path:
    return make_db(projects=["p1"])


@pytest.mark.slow
def test_a_stop_takeover_of_archons_stale_retire_claim_is_refused_and_keeps_the_kind(db):
    conn = raw(db)
    add_env(conn, "env-1", "ready")
    set_claim(conn, "env-1", ARCHON, "retire", ago(41))
    conn.close()
    before = dump(db)
    for extra in ((), ("--confirm-holder", ARCHON)):
        done = console(db, "envs", "claim", "env-1", "--op", "stop", "--takeover", "--reason", "stuck", *extra)
        assert done.returncode == 1, done.stderr
        assert "the claim on env-1 is a retire" in done.stderr.lower()
        assert "takeover keeps the operation it takes over" in done.stderr
        assert "release it first with --takeover --reason TEXT" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert dump(db) == before
    # Without --op the takeover is a retire; it still needs archon's holder named.
    done = console(db, "envs", "claim", "env-1", "--takeover", "--reason", "stuck")
    assert done.returncode == 1 and dump(db) == before
    assert "the console assumes a claim it did not create is abandoned once it is older than 15 minutes" in done.stderr
    assert f"--confirm-holder {ARCHON}" in done.stderr
    done = console(db, "envs", "claim", "env-1", "--takeover", "--reason", "stuck", "--confirm-holder", "archon-worker:8")
    assert done.returncode == 1 and "must be the claim's" in done.stderr and dump(db) == before
    done = console(db, "envs", "claim", "env-1", "--takeover", "--reason", "stuck", "--confirm-holder", ARCHON, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["operation_kind"] == "retire" and f"You confirmed the holder {ARCHON}" in result["message"]
    row = env_row(db, "env-1")
    assert row["operation_kind"] == "retire" and row["operation_claim_id"].startswith("console:alice@")
    assert row["retirement_requested_at"] is not None  # the retirement archon was doing stays requested
    [event] = events(db, "env-1")
    meta = json.loads(event["metadata_json"])
    assert event["event_type"] == "operation_taken_over" and event["reason"] == "stuck"
    assert (meta["previous_claim_id"], meta["previous_operation_kind"], meta["operation_kind"]) == (ARCHON, "retire", "retire")
    assert meta["confirmed_holder"] == ARCHON and meta["console_claim"] is False
    # Completing it hands the retirement on: the environment never admits leases again.
    done = console(db, "envs", "complete", "env-1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(console(db, "envs", "show", "env-1", "--json").stdout)["admits_leases"] is False


@pytest.mark.slow
def test_release_takeover_of_archons_reset_claim_needs_its_holder_named(db):
    conn = raw(db)
    add_env(conn, "env-2", "stopped")
    set_claim(conn, "env-2", ARCHON, "reset", ago(180))
    conn.close()
    before = dump(db)
    done = console(db, "envs", "release", "env-2", "--takeover", "--reason", "archon restarted")
    assert done.returncode == 1 and dump(db) == before
    assert "env-2 is claimed for reset by archon-worker:7" in done.stderr
    assert "the console assumes a claim it did not create is abandoned once it is older than 15 minutes" in done.stderr
    assert "archon may still be working on it" in done.stderr and f"--confirm-holder {ARCHON}" in done.stderr
    done = console(db, "envs", "release", "env-2", "--takeover", "--reason", "archon restarted",
                   "--confirm-holder", "env-2")
    assert done.returncode == 1 and dump(db) == before
    done = console(db, "envs", "release", "env-2", "--takeover", "--reason", "archon restarted",
                   "--confirm-holder", ARCHON, "--json")
    assert done.returncode == 0, done.stderr
    assert f"You confirmed the holder {ARCHON}" in json.loads(done.stdout)["message"]
    row = env_row(db, "env-2")
    assert (row["operation_claim_id"], row["operation_kind"], row["lifecycle_state"]) == (None, None, "stopped")
    [event] = events(db, "env-2")
    meta = json.loads(event["metadata_json"])
    assert event["event_type"] == "operation_released" and event["reason"] == "archon restarted"
    assert meta["confirmed_holder"] == ARCHON and meta["takeover"] is True and meta["console_claim"] is False


@pytest.mark.slow
def test_a_console_claim_needs_no_holder_named(db):
    """Another operator's stale console claim is taken over with a reason alone, as before."""
    conn = raw(db)
    add_env(conn, "env-3", "ready")
    set_claim(conn, "env-3", claim_id_for("bob"), "stop", ago(60))
    conn.close()
    done = console(db, "envs", "claim", "env-3", "--takeover", "--reason", "bob went home", "--json")
    assert done.returncode == 0, done.stderr
    assert env_row(db, "env-3")["operation_kind"] == "stop"
    done = console(db, "envs", "claim", "env-3")  # only a takeover may leave out --op
    assert done.returncode == 2 and "--op" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_completing_a_stop_while_a_run_holds_the_environment_is_refused(db):
    conn = raw(db)
    add_env(conn, "env-4", "running")
    add_lease(conn, "env-4", "run-77")
    conn.close()
    assert console(db, "envs", "claim", "env-4", "--op", "stop").returncode == 0
    before = dump(db)
    done = console(db, "envs", "complete", "env-4")
    assert done.returncode == 1, done.stdout
    assert "an execution lease is active (run run-77)" in done.stderr
    assert "wait for the run to end, or release the claim" in done.stderr and "your claim stays" in done.stderr
    assert "does not interrupt" not in done.stderr + done.stdout
    assert dump(db) == before and env_row(db, "env-4")["idle_stop_at"] is None
    with handle(db, read_only=True) as h:  # the TUI greys `complete` with the same words
        view = show_environment(h, "env-4", now=datetime.now(timezone.utc))
    why = claim_options(view, "alice").why("complete")
    assert why == ("an execution lease is active (run run-77), and the console does not hand a stop to archon's "
                   "idle-stop sweep while a run holds the environment: wait for the run to end, or release the claim")
    assert why in done.stderr
    conn = raw(db)
    release_lease(conn, "run-77")  # archon ended the run
    conn.close()
    done = console(db, "envs", "complete", "env-4", "--json")
    assert done.returncode == 0, done.stderr
    assert env_row(db, "env-4")["idle_stop_at"] is not None


@pytest.mark.slow
def test_a_validation_binding_blocks_the_stop_hand_off_too(db):
    """Attack round, finding 8 (on main): with the execution lease released and a validation binding
    still active, `complete` wrote idle_stop_at = now "with no run holding it"."""
    conn = raw(db)
    add_env(conn, "env-6", "ready")
    add_lease(conn, "env-6", "run-6", released=True)
    add_validation(conn, "env-6", "val-6")
    conn.close()
    assert console(db, "envs", "claim", "env-6", "--op", "stop").returncode == 0
    before = dump(db)
    done = console(db, "envs", "complete", "env-6")
    assert done.returncode == 1, done.stdout
    assert "a validation binding is active (run val-6)" in done.stderr and "your claim stays" in done.stderr
    assert dump(db) == before and env_row(db, "env-6")["idle_stop_at"] is None
    with handle(db, read_only=True) as h:  # the TUI greys `complete` with the same words
        view = show_environment(h, "env-6", now=datetime.now(timezone.utc))
    why = claim_options(view, "alice").why("complete")
    assert why == lease_blocks_stop((("validation", "val-6"),)) and why in done.stderr
    shown = console(db, "envs", "show", "env-6")
    assert "Other runs bound to it, not released:" in shown.stdout and "val-6" in shown.stdout


def test_help_states_the_assumption_and_the_rules():
    for command in ("claim", "release"):
        done = subprocess.run([sys.executable, "-m", "console", "envs", command, "--help"], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)
        text = " ".join(done.stdout.split())
        assert done.returncode == 0
        assert "--confirm-holder HOLDER" in text
        assert "only the console's assumption (how long archon keeps its claims is not known" in text
        assert "A takeover keeps the operation it takes over" in text
        assert "a stop cannot be completed while an execution lease is active" in text


# ---------------------------------------------------------------- generated: every combination
ACTOR = "alice"
STALE_AFTER = timedelta(minutes=15)
HOLDERS = ("mine", "console", "archon", "lookalike")
LOOKALIKE = "console:archon-worker@7"  # the console's prefix, not its shape (attack round, finding 7)
FOREIGN = {"archon": ARCHON, "lookalike": LOOKALIKE}
_counter = itertools.count()


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory) -> Path:
    """One file for every example: each example writes only its own two new environments."""
    path = make_schema(tmp_path_factory.mktemp("takeovers") / "archon.db", "1.10.0")
    conn = raw(path)
    add_project(conn)
    conn.close()
    return path


def _claim_id(holder: str) -> str:
    return {"mine": claim_id_for(ACTOR), "console": claim_id_for("bob"), **FOREIGN}[holder]


def _environment(path: Path, state: str, kind: str, holder: str, age, lease: str, cleanup: bool = False) -> str:
    env_id = f"env-{next(_counter)}"
    conn = raw(path)
    try:
        add_env(conn, env_id, state)
        if lease == "execution":  # archon admits a lease only before the claim
            add_lease(conn, env_id, f"run-{env_id}")
        elif lease == "validation":  # archon's admission does not look at these: any state
            add_validation(conn, env_id, f"val-{env_id}")
        elif lease == "service_run":  # a service run placed in it, not completed, no binding
            add_service_run(conn, env_id, f"svc-{env_id}")
        if cleanup:  # archon's cleanup worker holding its cleanup claim
            set_cleanup_claim(conn, env_id, "archon-cleanup-worker:3", db_time(T0 - timedelta(minutes=2)))
        at = "not a time" if age is None else db_time(T0 - timedelta(minutes=age))
        if holder is not None:
            set_claim(conn, env_id, _claim_id(holder), kind, at)
    finally:
        conn.close()
    return env_id


def _attempt(h, env_id: str, action: str, op, confirm):
    try:
        if action == "claim":
            result = claim(h, env_id, op, ACTOR, now=T0)
        elif action == "takeover":
            result = claim(h, env_id, op, ACTOR, now=T0, takeover=True, reason="checked",
                                stale_after=STALE_AFTER, confirm_holder=confirm)
        elif action == "release":
            result = release(h, env_id, ACTOR, now=T0, takeover=True, reason="checked",
                                  stale_after=STALE_AFTER, confirm_holder=confirm)
        else:
            result = complete(h, env_id, ACTOR, now=T0)
    except ConsoleError:
        return False
    return result.ok and not result.noop


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    state=st.sampled_from(STATES),
    kind=st.sampled_from(OPERATIONS),
    holder=st.sampled_from(HOLDERS),
    age=st.one_of(st.none(), st.integers(min_value=0, max_value=300)),
    op=st.one_of(st.none(), st.sampled_from(OPERATIONS)),
    lease=st.sampled_from(("none", "execution", "validation", "service_run")),
    cleanup=st.booleans(),
    confirm=st.sampled_from(("none", "holder", "shown", "other")),
    action=st.sampled_from(("takeover", "release", "complete", "claim")),
)
# The attack rounds' cases, always run: a service run under a stop (c2), archon's cleanup claim
# under a cleanup retry's claim and completion (c3).
@example(state="running", kind="stop", holder="mine", age=1, op=None, lease="service_run", cleanup=False,
         confirm="none", action="complete")
@example(state="cleanup_pending", kind="cleanup_retry", holder="mine", age=1, op=None, lease="none", cleanup=True,
         confirm="none", action="claim")
@example(state="cleanup_pending", kind="cleanup_retry", holder="mine", age=1, op=None, lease="none", cleanup=True,
         confirm="none", action="complete")
def test_no_takeover_changes_the_kind_or_skips_the_holder_and_greying_agrees(
        shared_db, state, kind, holder, age, op, lease, cleanup, confirm, action):
    lease = "none" if lease == "execution" and state not in ADMITTING_STATES else lease
    claim_id = _claim_id(holder)
    given_confirm = {"none": None, "holder": claim_id, "shown": claim_holder(claim_id),
                     "other": "archon-worker:8"}[confirm]
    foreign = holder in FOREIGN
    # One environment for the operator's own attempt, an identical one for what the screen does.
    unclaimed = action == "claim"  # a new claim on an environment nobody holds
    tried = _environment(shared_db, state, kind, None if unclaimed else holder, age, lease, cleanup)
    screen = _environment(shared_db, state, kind, None if unclaimed else holder, age, lease, cleanup)
    with handle(shared_db) as h:
        before = env_row(shared_db, tried)
        accepted = _attempt(h, tried, action, kind if unclaimed else op, given_confirm)
        after = env_row(shared_db, tried)
        if unclaimed:
            if accepted:
                assert not (kind == "cleanup_retry" and cleanup), "a cleanup retry claimed over archon's cleanup claim"
            else:
                assert after == before
            view = show_environment(h, screen, now=T0, stale_after=STALE_AFTER)
            options = claim_options(view, ACTOR, stale_after=STALE_AFTER)
            carried = _attempt(h, screen, action, kind, None)
            assert options.enabled(kind) == carried, (kind, options.why(kind))
            return
        if accepted and action == "takeover":
            assert after["operation_kind"] == kind, "a takeover changed the claim's kind"
        if accepted and foreign and action in ("takeover", "release"):
            assert given_confirm == claim_id, "a claim the console did not create went without its holder named"
        if accepted and action == "complete" and kind == "stop":
            assert lease == "none", "a stop was handed to archon while a run held the environment"
        if accepted and kind == "cleanup_retry" and action in ("complete", "claim"):
            assert not cleanup, "a cleanup retry went ahead over archon's cleanup claim"
        if not accepted:
            assert after == before
        # The screen: the key is enabled exactly when the write, as the screen runs it, is carried out.
        view = show_environment(h, screen, now=T0, stale_after=STALE_AFTER)
        options = claim_options(view, ACTOR, stale_after=STALE_AFTER)
        assert (options.confirm_holder is not None) == foreign
        if foreign:  # never described by a name parsed out of an id the console did not write
            assert view.claim_holder == claim_id
        mine = held_by(view.operation_claim_id, ACTOR)
        if action == "release" and mine:
            carried = _accepted_plain(h, screen)
        else:
            carried = _attempt(h, screen, action, kind if action == "takeover" else None, options.confirm_holder)
        assert options.enabled(action) == carried, (action, options.why(action))


def _accepted_plain(h, env_id: str) -> bool:
    try:
        result = release(h, env_id, ACTOR, now=T0)
    except ConsoleError:
        return False
    return result.ok and not result.noop


def test_a_hostile_holder_is_confirmed_as_shown_and_never_printed_raw(db):
    """A holder with terminal controls is named as every output shows it (controls pictured; results
    are cleaned where they are printed, refusals where they are born)."""
    hostile = "archon\x1b[2J\u202eworker:9"
    conn = raw(db)
    add_env(conn, "env-5", "ready")
    set_claim(conn, "env-5", hostile, "stop", db_time(T0 - timedelta(hours=1)))
    conn.close()
    with handle(db) as h:
        view = show_environment(h, "env-5", now=T0, stale_after=STALE_AFTER)
        shown = claim_options(view, ACTOR, stale_after=STALE_AFTER).confirm_holder
        assert shown and "\x1b" not in shown and "\u202e" not in shown
        with pytest.raises(ConsoleError) as refused:
            claim(h, "env-5", None, ACTOR, now=T0, takeover=True, reason="r", stale_after=STALE_AFTER)
        assert "\x1b" not in str(refused.value) and shown in str(refused.value)
        result = claim(h, "env-5", None, ACTOR, now=T0, takeover=True, reason="r", stale_after=STALE_AFTER,
                            confirm_holder=shown)
    assert result.ok
    assert env_row(db, "env-5")["operation_kind"] == "stop"
