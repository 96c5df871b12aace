"""`environment_rules.claim_options` says "enabled" for a claim action exactly when the write would carry it out.

The environments screen greys its write keys from `claim_options` alone, so this is the promise
that the screen never offers a key the service refuses, nor hides one it would accept. Checked
for every environment of a demo database and of a crafted one covering each lifecycle state,
projects being deleted, fresh, stale, unreadable and own claims of every kind, leases, requests
already handed to archon, and the repeats the writes treat as no-ops. For each action, the write
runs on every environment of one copy of the database: a claim write touches only its own
environment's row and events, so the environments cannot influence each other.

"Carried out" means the write returned a result that is not a no-op; a no-op (claiming what you
hold, releasing what you released) is not offered, and every refusal is a `ConsoleError`.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from console.demo.writer import generate
from console.errors import ConsoleError
from console.models.environments import EnvironmentView
from console.services.environment_claims import claim, complete, release
from console.services.environment_queries import list_environments, show_environment
from console.services.environment_rules import (ADMITTING_STATES, CLAIM_ACTIONS, OPERATIONS, STATES,
                                                claim_options, held_by)
from console.services.base import claim_id_for
from tests.conftest import make_schema
from tests.environments_support import T0, add_env, add_lease, add_project, handle, raw, set_claim

pytestmark = pytest.mark.slow

ACTOR = "alice"
STALE_AFTER = timedelta(minutes=15)
DEMO_NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
FRESH, STALE, UNREADABLE = "2026-11-01 09:25:00", "2026-11-01 08:00:00", "not a time"


def perform(h, view: EnvironmentView, action: str, now: datetime):
    """What the environments screen runs for `action` (console/tui/screens/environments.py): for a claim
    the console did not create, the operator has typed the holder the options name."""
    holder = claim_options(view, ACTOR, stale_after=STALE_AFTER).confirm_holder
    if action in OPERATIONS:
        return claim(h, view.id, action, ACTOR, now=now, stale_after=STALE_AFTER)
    if action == "complete":
        return complete(h, view.id, ACTOR, now=now)
    if action == "release":
        mine = held_by(view.operation_claim_id, ACTOR)
        return release(h, view.id, ACTOR, now=now, takeover=not mine, reason=None if mine else "gone home",
                            stale_after=STALE_AFTER, confirm_holder=holder)
    assert action == "takeover"
    return claim(h, view.id, view.operation_kind, ACTOR, now=now, takeover=True, reason="gone home",
                      stale_after=STALE_AFTER, confirm_holder=holder)


def accepted(h, view: EnvironmentView, action: str, now: datetime) -> bool:
    try:
        result = perform(h, view, action, now)
    except ConsoleError:
        return False
    return result.ok and not result.noop


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> Path:
    path = make_schema(tmp_path_factory.mktemp("claim-options") / "crafted.db", "1.10.0")
    mine = claim_id_for(ACTOR)
    conn = raw(path)
    conn.execute("PRAGMA synchronous = OFF")  # a few hundred inserts, each its own transaction
    add_project(conn, "p1")
    add_project(conn, "gone", deleting=True)
    for state in STATES:
        add_env(conn, f"free-{state}", state)
        add_env(conn, f"gone-{state}", state, project_id="gone")
        add_env(conn, f"gone-claimed-{state}", state, project_id="gone")
        set_claim(conn, f"gone-claimed-{state}", mine, "reset", FRESH)
        add_env(conn, f"handed-{state}", state, idle_stop_at="2026-11-01 09:00:00",
                cleanup_retry_at="2026-10-31 09:00:00", retirement_requested_at="2026-11-01 07:00:00")
        for kind in OPERATIONS:
            for who, holder, at in (("theirs-fresh", "archon-worker:42", FRESH), ("theirs-stale", "archon-worker:42", STALE),
                                    ("theirs-unreadable", "archon-worker:42", UNREADABLE), ("mine", mine, FRESH),
                                    ("mine-stale", mine, STALE)):
                env_id = f"{who}-{kind}-{state}"
                add_env(conn, env_id, state)
                set_claim(conn, env_id, holder, kind, at)
    for state in ADMITTING_STATES:  # archon admits leases only here; a lease goes in before any claim
        add_env(conn, f"leased-{state}", state)
        add_lease(conn, f"leased-{state}", f"run-{state}")
        add_env(conn, f"leased-claimed-{state}", state)
        add_lease(conn, f"leased-claimed-{state}", f"run-claimed-{state}")
        set_claim(conn, f"leased-claimed-{state}", "archon-worker:9", "retire", STALE)
    for env_id in ("released-by-me", "completed-by-me"):
        add_env(conn, env_id, "running")
    conn.close()
    with handle(path) as h:  # repeats of what took effect are no-ops: not offered
        claim(h, "released-by-me", "stop", ACTOR, now=T0 - timedelta(minutes=5))
        release(h, "released-by-me", ACTOR, now=T0 - timedelta(minutes=4))
        claim(h, "completed-by-me", "stop", ACTOR, now=T0 - timedelta(minutes=5))
        complete(h, "completed-by-me", ACTOR, now=T0 - timedelta(minutes=4))
    return path


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("claim-options-demo") / "demo.db"
    generate(path, requests=20, seed=7, now="2025-06-01 12:00:00", wal=False)
    return path


def views_of(path: Path, now: datetime) -> list[EnvironmentView]:
    with handle(path, read_only=True) as h:
        return [show_environment(h, row.id, now=now, stale_after=STALE_AFTER)
                for row in list_environments(h, now=now, limit=0).rows]


@pytest.mark.parametrize("action", CLAIM_ACTIONS)
@pytest.mark.parametrize("database", ["crafted", "demo"])
def test_a_key_is_enabled_exactly_when_the_write_accepts_it(request, tmp_path, database, action):
    path = request.getfixturevalue(database)
    now = T0 if database == "crafted" else DEMO_NOW
    views = views_of(path, now)
    copy = Path(shutil.copy(path, tmp_path / "copy.db"))
    mismatches = []
    with handle(copy) as h:
        h.conn.execute("PRAGMA synchronous = OFF")  # a throwaway copy: no fsync per write
        for view in views:
            options = claim_options(view, ACTOR, stale_after=STALE_AFTER)
            if options.enabled(action) != accepted(h, view, action, now):
                mismatches.append(f"{view.id}: offered={options.enabled(action)} ({options.why(action)})")
    assert not mismatches, "\n".join(mismatches)
    assert len(views) >= (20 if database == "demo" else 240)


def test_crafted_rows_cover_every_answer(crafted):
    """Each action is both offered and refused somewhere, so the test above checks both directions."""
    options = [claim_options(view, ACTOR) for view in views_of(crafted, T0)]
    for action in CLAIM_ACTIONS:
        assert any(o.enabled(action) for o in options), action
        assert any(not o.enabled(action) for o in options), action


def test_a_project_being_deleted_greys_every_action(crafted):
    for view in views_of(crafted, T0):
        if view.id.startswith("gone-"):
            assert view.project_deleting
            assert claim_options(view, ACTOR).unavailable() == dict.fromkeys(
                CLAIM_ACTIONS, "its project is being deleted")
