"""The environments screen under the hand-off model (issue 8, rule 2), driven through Pilot.

On main the complete key applied reset (a failed environment became ready) and the detail pane
did not say what archon had been handed.
"""

from __future__ import annotations

from textual.widgets import Static

from console.screens.confirm import ConfirmModal
from console.screens.environments import EnvironmentsScreen
from tests.tui.test_flows import db, field, ready, select, settle, wait_until


def detail_text(app) -> str:
    return str(app.screen.query_one("#detail-head", Static).render())


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
