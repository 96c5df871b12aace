"""A detail read that arrives after the cursor moved on never paints (issue 21 item 10's stale
results, one step on). Each cursor move starts a read in a thread; reads wait for the one session,
and two waiting threads get it in no set order, so the read for the row left behind may answer last.
The approvals screen dropped such an answer; the environments screen painted it: the pane showed the
row the cursor had left, and the write keys stayed greyed "loading" for ever (no further read came)."""

from __future__ import annotations

import pytest

from console.tui.screens.environments import EnvironmentsScreen
from tests.tui.pilot import ready, select, settle
from tests.tui.pilot import detail_text

pytestmark = pytest.mark.slow


async def test_a_late_detail_for_the_row_left_behind_does_not_paint(demo_db, make_app):
    app = make_app(demo_db(), start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0004")
        left_behind = app.screen.detail
        await select(pilot, app, "env-0006")
        screen = app.screen
        screen.post_message(EnvironmentsScreen.Detail(left_behind))  # the slower read answering last
        await settle(pilot, app)
        assert screen.detail.id == "env-0006"
        assert "env-0004" not in detail_text(app) and "env-0006" in detail_text(app)
