"""Every operator flow driven through Pilot, each checked in the database afterwards."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys

import pytest
from textual import events
from textual.keys import KEY_NAME_REPLACEMENTS, REPLACED_KEYS, key_to_character

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.bulk_results import BulkResultsModal
from console.tui.screens.confirm import ActionModal, ConfirmModal
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.error import ErrorModal
from console.tui.screens.profiles import ProfilesScreen
from console.tui.screens.reason import ReasonModal
from console.tui.screens.typed import TypedConfirmModal
from console.tui.screens.upgrade import UpgradeScreen
from tests.tui.pilot import db, notifications, ready, select, settle, table, type_text, wait_until

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------- approvals
async def test_approve_one(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await type_text(pilot, "looks fine")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0] == "approved",
                         what="approved in the database")
    events = db(path, "SELECT to_status, actor_reference, reason FROM approval_request_events "
                      "WHERE approval_request_id='apr-00000192' ORDER BY sequence DESC LIMIT 1")
    assert events == [("approved", "alice", "looks fine")]


async def test_deny_requires_reason(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000195")
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await pilot.press("enter")  # empty reason: refused by the dialog
        await settle(pilot, app)
        assert isinstance(app.screen, ReasonModal)
        assert db(path, "SELECT status FROM approval_requests WHERE id='apr-00000195'")[0][0] == "pending"
        await type_text(pilot, "wrong branch")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000195'")[0][0] == "denied")
    assert db(path, "SELECT reason FROM approval_request_events WHERE approval_request_id='apr-00000195' "
                    "ORDER BY sequence DESC LIMIT 1") == [("wrong branch",)]


async def test_bulk_approve_with_one_refusal(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        await pilot.press("space", "space", "space")  # 192, 194 (alice's own), 195
        assert set(table(app).selected) == {"apr-00000192", "apr-00000194", "apr-00000195"}
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkResultsModal), what="results screen")
        results = {r.id: r.ok for r in app.screen.results}
        assert results == {"apr-00000192": True, "apr-00000194": False, "apr-00000195": True}
    statuses = dict(db(path, "SELECT id, status FROM approval_requests WHERE id IN "
                             "('apr-00000192','apr-00000194','apr-00000195')"))
    assert statuses == {"apr-00000192": "approved", "apr-00000194": "pending", "apr-00000195": "approved"}


async def test_revoke_an_approval(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("s")  # status: approved
        await wait_until(pilot, lambda: app.screen.filters.statuses == ("approved",) and table(app).visible_loaded)
        await select(pilot, app, "apr-00000193")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await type_text(pilot, "pushed to the wrong remote")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000193'")[0][0] != "approved")


async def test_filter_by_text(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        before = table(app).total
        await pilot.press("slash")
        await type_text(pilot, "billing")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.filters.search == "billing" and table(app).visible_loaded)
        t = table(app)
        assert 0 < t.total < before
        rows = [t.row_at(i) for i in range(t.total)]
        assert all("billing" in (r.project_id + r.action_json).lower() for r in rows)


async def test_read_only_greys_writes(demo_db, make_app):
    path = demo_db()
    app = make_app(path, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        assert app.screen.query_one("#read-only-badge")
        await select(pilot, app, "apr-00000192")
        assert app.screen.check_action("approve", ()) is None
        assert "read-only" in app.screen.unavailable()["approve"]
        await pilot.press("a")
        await settle(pilot, app)
        assert isinstance(app.screen, ApprovalsScreen)
    assert db(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0] == "pending"


async def test_copy_id_and_json(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        await pilot.press("y")
        assert app.clipboard == "apr-00000192"
        assert any("OSC 52" in n.message for n in notifications(app))
        await pilot.press("Y")
        assert '"id": "apr-00000192"' in app.clipboard and '"action_json": {' in app.clipboard


async def test_colon_navigation_and_back(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("colon")
        await type_text(pilot, "envs")
        await pilot.press("enter")
        await ready(pilot, app, EnvironmentsScreen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen))
        await pilot.press("colon")
        await type_text(pilot, "project atlas-api")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ProfilesScreen) and table(app).visible_loaded)
        assert app.screen.project.id == "prj-atlas-api"
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("escape", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen))


async def test_start_screen_is_the_bottom_of_the_stack(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="approvals")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        assert app._prefetched is None  # the start screen took its first page
        await pilot.press("escape")
        await settle(pilot, app)
        assert isinstance(app.screen, ApprovalsScreen)  # nothing below it
        await pilot.press("colon")
        await type_text(pilot, "envs")
        await pilot.press("enter")
        await ready(pilot, app, EnvironmentsScreen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen))


async def test_palette_offers_projects_by_name(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("ctrl+p")
        await type_text(pilot, "project atlas-api")
        await wait_until(pilot, lambda: "project atlas-api" in str(app.screen.query("CommandList").first().get_option_at_index(0).prompt),
                         what="palette hit for the project")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ProfilesScreen) and table(app).visible_loaded)
        assert app.screen.project.id == "prj-atlas-api"


# ---------------------------------------------------------------- environments
async def test_claim_stop(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0011")
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_until(pilot, lambda: db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0011'")[0][0] == "stop")
    claim = db(path, "SELECT operation_claim_id FROM execution_environments WHERE id='env-0011'")[0][0]
    assert claim.startswith("console:alice@")


async def test_retire_needs_the_typed_id(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0013")
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        await type_text(pilot, "env-0012")
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, TypedConfirmModal)
        assert db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0013'")[0][0] is None
        app.screen.query_one("#typed").value = ""
        await type_text(pilot, "env-0013")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0013'")[0][0] == "retire")
    assert db(path, "SELECT retirement_requested_at FROM execution_environments WHERE id='env-0013'")[0][0]


async def test_takeover_of_a_stale_claim(demo_db, make_app):
    """archon-worker:13's claim is not the console's: the dialog asks for the holder, not the id
    (issue 18, finding 2), and the takeover keeps its kind."""
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0005")
        assert app.screen.check_action("takeover", ()) is True
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        assert app.screen.expected == "archon-worker:13"
        assert "only assumes archon has abandoned it (older than 15 minutes)" in app.screen.summary.plain
        await type_text(pilot, "env-0005")
        await pilot.press("enter")
        await type_text(pilot, "worker 13 died")
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, TypedConfirmModal)  # the environment id does not name the holder
        app.screen.query_one("#typed").value = "archon-worker:13"
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT operation_claim_id FROM execution_environments WHERE id='env-0005'")[0][0].startswith("console:alice@"))
    assert db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0005'")[0][0] == "reset"
    [(metadata,)] = db(path, "SELECT metadata_json FROM execution_environment_events WHERE environment_id='env-0005' "
                             "AND event_type='operation_taken_over'")
    assert '"confirmed_holder": "archon-worker:13"' in metadata


async def test_fresh_claim_cannot_be_taken_over(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0004")
        assert app.screen.check_action("takeover", ()) is None
        assert "not stale" in app.screen.unavailable()["takeover"]


# ---------------------------------------------------------------- profiles and upgrade
async def test_profile_rollback(demo_db, make_app):
    path = demo_db()
    active_before = db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'")[0][0]
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        app.navigate("project", "atlas-api")
        await ready(pilot, app, ProfilesScreen)
        t = table(app)
        older = next(t.row_at(i) for i in range(t.total) if not t.row_at(i).active)
        while t.cursor_key != older.id:
            await pilot.press("down")
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        assert "build provider" in app.screen.summary.plain
        await type_text(pilot, "rollback")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'")[0][0] == older.id)
    assert older.id != active_before
    assert db(path, "SELECT count(*) FROM execution_profile_audit_events WHERE profile_revision_id=? "
                    "AND event_type='revision_activated' AND previous_profile_revision_id=?", older.id, active_before)[0][0] == 1


@pytest.mark.slow
async def test_upgrade_with_force_confirmation(demo_db, make_app):
    path = demo_db(release="1.8.22", requests=20)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None)
        assert app.screen.plan.force_required
        await pilot.press("U")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        await type_text(pilot, "archon.db")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None
                         and app.screen.plan.up_to_date, timeout=30, what="upgrade finished")
        # the undo line names the database (issue 18, finding 11): ARCHON_DB_PATH may name another
        logged = "".join(seg.text for strip in app.screen.query_one("RichLog").lines for seg in strip)
        assert f"To undo: archon-console --db {shlex.quote(str(path.resolve()))} restore " in logged
    ledger = db(path, "SELECT count(*) FROM _sqlite_migrations")[0][0]
    assert ledger == 29


# ---------------------------------------------------------------- live
WRITER = """
import sys
from console.db.connect import open_database
from console.services import approvals
from console.clock import parse_time
with open_database(sys.argv[1]) as handle:
    approvals.deny(handle, sys.argv[2], actor="bob", reason="from another process",
                   now=parse_time("2025-06-01 12:00:00"))
"""


async def test_another_process_write_shows_within_two_seconds(demo_db, make_app):
    """The app polls `PRAGMA data_version` every POLL_SECONDS; the first poll after another process
    commits reloads what is on screen. The test runs that one poll itself and waits on the app's
    workers instead of the wall clock, which a loaded machine stretches."""
    from console.tui.app import POLL_SECONDS

    assert POLL_SECONDS <= 1.0  # the first poll after a write comes within a second, the reload after it
    path = demo_db()
    app = make_app(path, poll_seconds=3600)  # no timer: the poll below is the only one
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000195")
        keys_before = {table(app).row_at(i).id for i in range(table(app).total)}
        assert "apr-00000192" in keys_before
        await asyncio.to_thread(subprocess.run, [sys.executable, "-c", WRITER, str(path), "apr-00000192"], check=True)
        await settle(pilot, app)
        assert "apr-00000192" in {table(app).row_at(i).id for i in range(table(app).total)}  # not polled yet
        app._poll()  # what the app's timer runs
        await settle(pilot, app)
        await wait_until(pilot, lambda: table(app).total_exact and all(
            table(app).row_at(i).id != "apr-00000192" for i in range(table(app).total)), timeout=10,
            what="the denial to leave the pending queue after one poll")
        assert table(app).cursor_key == "apr-00000195"  # selection kept


async def test_change_under_open_dialog_blocks_it(demo_db, make_app):
    path = demo_db()
    app = make_app(path, poll_seconds=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await asyncio.to_thread(subprocess.run, [sys.executable, "-c", WRITER, str(path), "apr-00000192"], check=True)
        modal = app.screen
        await wait_until(pilot, lambda: modal.blocked_reason is not None, what="the dialog to re-check")
        assert "denied" in modal.blocked_reason
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, ActionModal)
    assert db(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0] == "denied"


async def test_refusal_becomes_a_dialog(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        app.screen._run_decision("approve", ["apr-00000194"], None, bulk=False)  # alice's own request
        await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="error dialog")
        assert app.is_running
