"""The environments screen greys a write key exactly when the service would refuse it.

On main the screen re-derived the claim rules (`_row_reasons` over `unavailable_actions`) and
missed two of the service's: a project being deleted refuses every claim write, and taking over a
stale claim needs the state its operation allows. The screen offered those keys; the service then
refused. The keys now come from `environment_rules.claim_options` (tests/test_environment_claim_options.py
holds it to the writes for every row).

Also on main: an open claim dialog never re-checked its environment when the database changed.
The re-check worker called `self.call_from_thread`, which a Screen does not have, so the worker
failed (an error dialog over the claim dialog) and the dialog still let the claim be confirmed.
It now reports back with a typed message (`EnvironmentsScreen.Rechecked`).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from console.tui.screens.confirm import ActionModal, ConfirmModal
from console.tui.screens.typed import TypedConfirmModal
from console.tui.screens.environments import EnvironmentsScreen
from console.services.environment_rules import lease_blocks_stop
from tests.tui.pilot import db, ready, select, settle, type_text, wait_until

pytestmark = pytest.mark.slow


def execute(path, sql: str) -> None:
    """Another process's commit (the console sees it through PRAGMA data_version)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


async def test_a_project_being_deleted_greys_every_claim_key(demo_db, make_app):
    path = demo_db()
    execute(path, "UPDATE projects SET deletion_started_at = '2025-06-01 11:00:00' WHERE id = 'prj-atlas-api'")
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0011")  # ready, unclaimed, in prj-atlas-api
        screen = app.screen
        for action in ("claim_stop", "claim_retire", "claim_reset", "claim_cleanup", "complete", "release", "takeover"):
            assert screen.check_action(action, ()) is None, action
            assert screen.unavailable()[action] == "its project is being deleted", action
        await pilot.press("s")
        await settle(pilot, app)
        assert app.screen is screen  # no dialog for a write the service refuses
    assert db(path, "SELECT operation_claim_id FROM execution_environments WHERE id = 'env-0011'") == [(None,)]


async def test_taking_over_a_stale_claim_the_state_no_longer_allows_is_greyed(demo_db, make_app):
    path = demo_db()
    execute(path, "UPDATE execution_environments SET operation_claim_id = 'archon-worker:5', operation_kind = 'stop', "
                  "operation_claimed_at = '2025-06-01 10:00:00' WHERE id = 'env-0008'")  # retired, stale stop claim
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0008")
        assert app.screen.check_action("takeover", ()) is None
        assert app.screen.unavailable()["takeover"].startswith("it is retired: only something running or ready")
        assert app.screen.check_action("release", ()) is True  # the stale claim can still be released


async def test_a_claim_taken_while_the_dialog_is_open_blocks_it(demo_db, make_app):
    path = demo_db()
    app = make_app(path, poll_seconds=0.2, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0011")
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        modal = app.screen
        await asyncio.to_thread(
            execute, path, "UPDATE execution_environments SET operation_claim_id = 'archon-worker:5', "
                           "operation_kind = 'retire', operation_claimed_at = '2025-06-01 11:59:00' WHERE id = 'env-0011'")
        await wait_until(pilot, lambda: modal.blocked_reason is not None, what="the dialog to re-check")
        assert "changed" in modal.blocked_reason
        await pilot.press("y")
        await settle(pilot, app)
        assert isinstance(app.screen, ActionModal)
    assert db(path, "SELECT operation_claim_id FROM execution_environments WHERE id = 'env-0011'") == [("archon-worker:5",)]


async def test_a_release_without_claims_greys_every_claim_key_and_says_why(demo_db, make_app):
    path = demo_db(release="1.8.22")
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await wait_until(pilot, lambda: app.screen.claims_supported is False, what="the service's answer")
        for action in EnvironmentsScreen.WRITE_ACTIONS:
            assert app.screen.check_action(action, ()) is None, action
            assert app.screen.unavailable()[action] == "operation claims need archon 1.10.0 (see :upgrade)"


async def test_releasing_archons_stale_claim_asks_for_its_holder(demo_db, make_app):
    """Issue 18, finding 2: on main `l` asked for a reason only and reopened lease admission on
    env-0005 while archon-worker:13 may still be resetting it."""
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0005")  # stopped, archon-worker:13's reset claim, 3 hours old
        await pilot.press("l")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        assert app.screen.expected == "archon-worker:13"
        assert "only assumes archon has abandoned it (older than 15 minutes)" in app.screen.summary.plain
        app.screen.query_one("#typed").value = "archon-worker:13"
        await pilot.press("enter")
        await type_text(pilot, "archon restarted")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT operation_claim_id FROM execution_environments "
                                                 "WHERE id = 'env-0005'") == [(None,)], what="the release")
    [(reason, metadata)] = db(path, "SELECT reason, metadata_json FROM execution_environment_events "
                                    "WHERE environment_id = 'env-0005' AND event_type = 'operation_released'")
    assert reason == "archon restarted" and '"confirmed_holder": "archon-worker:13"' in metadata


async def test_completing_a_stop_while_a_run_holds_the_environment_is_greyed(demo_db, make_app):
    """Issue 18, finding 8: the key is greyed with the service's own words, and pressing it opens no dialog."""
    path = demo_db()
    [(idle_stop_at,)] = db(path, "SELECT idle_stop_at FROM execution_environments WHERE id = 'env-0015'")
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0015")  # running, a run holds its execution lease
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen.check_action("complete", ()) is None
                         and "execution lease" in app.screen.unavailable().get("complete", ""), what="greyed")
        bound = db(path, "SELECT relationship, execution_run_id FROM execution_environment_run_bindings WHERE "
                         "environment_id = 'env-0015' AND released_at IS NULL ORDER BY bound_at")
        assert ("execution",) in {(relationship,) for relationship, _ in bound}
        assert app.screen.unavailable()["complete"] == lease_blocks_stop(tuple(map(tuple, bound)))
        screen = app.screen
        await pilot.press("o")
        await settle(pilot, app)
        assert app.screen is screen
    assert db(path, "SELECT idle_stop_at, operation_kind FROM execution_environments WHERE id = 'env-0015'") == [
        (idle_stop_at, "stop")]  # archon's own schedule, untouched
