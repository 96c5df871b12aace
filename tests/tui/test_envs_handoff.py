"""The environments screen under the hand-off model (issue 8, rule 2), driven through Pilot.

On main the complete key applied reset (a failed environment became ready) and the detail pane
did not say what archon had been handed.
"""

from __future__ import annotations

import pytest

from console.tui.screens.confirm import ConfirmModal
from console.tui.screens.environments import EnvironmentsScreen
from tests.tui.pilot import db, detail_text, field, ready, select, settle, wait_until

pytestmark = pytest.mark.slow




async def test_complete_is_greyed_on_a_reset_claim_and_a_failed_env_stays_failed(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0009")
        assert app.screen.detail.lifecycle_state == "failed"
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        await pilot.press("y")
        await wait_until(pilot, lambda: db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0009'")[0][0] == "reset")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvironmentsScreen)
                         and field(app.screen.detail, "operation_kind") == "reset", what="detail with the claim")
        assert app.screen.check_action("complete", ()) is None  # greyed
        assert app.screen.unavailable()["complete"].startswith("a reset claim cannot be completed")
        assert app.screen.check_action("release", ()) is True
        assert "complete" in detail_text(app) and "a reset claim cannot be completed" in detail_text(app)
        await pilot.press("o")
        await settle(pilot, app)
        assert not isinstance(app.screen, ConfirmModal)
    assert db(path, "SELECT lifecycle_state, operation_kind FROM execution_environments WHERE id='env-0009'") == [("failed", "reset")]


async def test_detail_pane_shows_what_archon_has_been_handed(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0004")  # running, idle_stop_at 7 minutes before the frozen clock
        text = detail_text(app)
        assert "handed off" in text
        assert "stop requested 7 minutes ago; archon's idle-stop sweep performs it" in text
        await select(pilot, app, "env-0006")  # retiring: archon's retirement path is under way
        assert "retirement requested 18 minutes ago; archon's retirement path performs it (under way: retiring)" \
            in detail_text(app)


async def test_work_placed_in_the_environment_greys_complete_and_the_detail_says_what_it_leaves(demo_db, make_app):
    """Attack round 2 (c1, c2): the cursor's read stays a seek; a service run of the environment's
    project greys `complete` with the write's words, and on a stop claim the detail says that records
    under another project (and check runs) are only checked when completing."""
    from console.services.environment_rules import lease_blocks_stop
    from console.services.base import claim_id_for
    from tests.environments_support import add_service_run, add_validation, raw, set_claim

    path = demo_db()
    conn = raw(path)
    env_id, project = conn.execute(
        "SELECT id, project_id FROM execution_environments e WHERE lifecycle_state IN ('ready', 'running') AND "
        "operation_claim_id IS NULL AND NOT EXISTS (SELECT 1 FROM execution_environment_run_bindings b WHERE "
        "b.environment_id = e.id AND b.released_at IS NULL) ORDER BY id LIMIT 1").fetchone()
    other = conn.execute("SELECT id FROM projects WHERE id <> ? AND deletion_started_at IS NULL ORDER BY id LIMIT 1",
                         (project,)).fetchone()[0]
    set_claim(conn, env_id, claim_id_for("alice"), "stop", "2026-11-01 09:00:00")
    add_service_run(conn, env_id, "svc-tui", project)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = "
                       "'validate_execution_environment_binding_identity'").fetchone()[0]
    conn.execute("DROP TRIGGER validate_execution_environment_binding_identity")  # a row from before 1.8.22
    add_validation(conn, env_id, "val-tui", project_id=other)
    conn.execute(sql)
    conn.commit() if conn.in_transaction else None
    conn.close()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, env_id)
        assert app.screen.check_action("complete", ()) is None  # greyed
        assert app.screen.unavailable()["complete"] == lease_blocks_stop((("service_run", "svc-tui"),))
        text = " ".join(detail_text(app).split())
        assert "a service run is active (run svc-tui)" in text
        assert "recorded under another project, and check runs, are only checked when completing" in text
