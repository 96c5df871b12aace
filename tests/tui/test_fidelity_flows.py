"""Issue 8 in the console: four-eyes confirmation, the rollback refusal, and the real write clock."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.reason import ReasonModal
from console.tui.screens.typed import TypedConfirmModal
from tests.approvals_helpers import set_authority
from tests.tui.pilot import db, ready, select, settle, table, type_text, wait_until

pytestmark = pytest.mark.slow


async def test_unknown_requester_asks_for_a_typed_confirmation_naming_the_problem(demo_db, make_app):
    path = demo_db()
    set_authority(path, "apr-00000192", '{"requested_by": "bob",}')
    set_authority(path, "apr-00000195", '{"requested_by": "alice",}')
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        assert "approve" not in app.screen.unavailable()
        await select(pilot, app, "apr-00000195")  # malformed, but it names alice: no approving at all
        assert "names you" in app.screen.unavailable()["approve"]
        await pilot.press("a")
        await settle(pilot, app)
        assert not isinstance(app.screen, (ReasonModal, TypedConfirmModal))
        while table(app).cursor_key != "apr-00000192":
            await pilot.press("up")
        await wait_until(pilot, lambda: getattr(app.screen.detail, "id", None) == "apr-00000192", what="detail")
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal), what="typed confirmation")
        modal = app.screen
        assert "its authority_json is not valid JSON" in modal.summary.plain
        await type_text(pilot, "yes")
        await pilot.press("enter", "enter")
        await settle(pilot, app)
        assert isinstance(app.screen, TypedConfirmModal)
        assert db(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0] == "pending"
        modal.query_one("#typed").value = ""
        modal.query_one("#typed").focus()
        await type_text(pilot, "not the requester")
        await pilot.press("enter")
        await type_text(pilot, "checked with bob")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0]
                         == "approved", what="approved")
    [(actor, reason, metadata)] = db(path, "SELECT actor_reference, reason, metadata_json FROM approval_request_events "
                                           "WHERE approval_request_id='apr-00000192' ORDER BY sequence DESC LIMIT 1")
    assert (actor, reason) == ("alice", "checked with bob")
    assert "not valid JSON" in json.loads(metadata)["requester_unknown_confirmed"]
    assert db(path, "SELECT status FROM approval_requests WHERE id='apr-00000195'")[0][0] == "pending"


async def test_rollback_dialog_refuses_a_revision_archon_would_replace_before_any_reason(demo_db, make_app):
    from console.db import execution_profiles as ep
    from console.tui.screens.profiles import ProfilesScreen

    path = demo_db()
    profile = {"provider_preference": "host", "eligible_workloads": ["build", "check"],
               "check_template_policy": {"mode": "agent_template", "agent": "opencode"}}
    conn = sqlite3.connect(path)
    number = conn.execute("SELECT MAX(revision) + 1 FROM execution_profile_revisions "
                          "WHERE project_id = 'prj-atlas-api'").fetchone()[0]
    rev_id = "prj-atlas-api:execution-profile:no-chat"
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES (?, 'prj-atlas-api', ?, 3, ?, ?)",
                 (rev_id, number, ep.fingerprint(profile), ep.serialize(profile)))
    conn.commit()
    conn.close()
    active_before = db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'")
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        app.navigate("project", "atlas-api")
        await ready(pilot, app, ProfilesScreen)
        t = table(app)
        await wait_until(pilot, lambda: t.cursor_row is not None)
        while t.cursor_key != rev_id:
            await pilot.press("down")
        why = app.screen.unavailable()["activate"]
        assert why.startswith("archon 1.10.0 would replace it at its next start with a new revision it would create")
        assert "lacks chat_build" in why
        assert app.screen.check_action("activate", ()) is not True
        await pilot.press("A")
        await settle(pilot, app)  # the key was handled and opened nothing
        assert not isinstance(app.screen, ReasonModal)
        assert "cannot be activated: archon 1.10.0" in str(app.screen.query_one("#detail-head").render())
    assert db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'") == active_before


async def test_frozen_clock_drives_the_screen_but_not_the_write(demo_db, monkeypatch):
    """The demo database is dated 2025-06-01 (NOW); frozen there, the queue shows apr-00000192 as
    pending, but by the real clock it expired long ago, so approving it is refused and it is
    marked expired at the real time, and the dialog says the real clock was used."""
    import argparse
    from datetime import datetime, timezone

    from console.tui.app import ArchonConsole
    from console.cli.cli import Context
    from console.clock import parse_time, system_clock
    from console.tui.screens.error import ErrorModal
    from tests.tui.conftest import NOW_TEXT

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW_TEXT)
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", "/nonexistent/keymap.toml")
    path = demo_db()
    ctx = Context(db_path=path, actor="alice", read_only=False, json=False, busy_timeout_ms=2000,
                  clock=system_clock, args=argparse.Namespace())  # the real console's clocks
    app = ArchonConsole(ctx, start=None, poll_seconds=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        assert app.screen.unavailable().get("approve") is None  # as shown at the frozen instant
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="refusal")
        assert "this write used the real clock" in app.screen.context
    status, decision_at, updated_at = db(path, "SELECT status, decision_at, updated_at FROM approval_requests "
                                               "WHERE id='apr-00000192'")[0]
    assert status == "expired" and decision_at is None
    assert abs((parse_time(updated_at) - datetime.now(timezone.utc)).total_seconds()) < 60
