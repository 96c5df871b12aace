"""The upgrade screen says what a key does, not the CLI's option (issue 21 item 10, "TUI refusals give
CLI advice where a key does it", one step on): a plan that needs the CLI's `--force` said "Needs
--force" on the screen and titled its dialog "Upgrade with --force", where `U` and the typed name do
it and no option can be passed."""

from __future__ import annotations

import re

import pytest

from console.tui.screens.typed import TypedConfirmModal
from console.tui.screens.upgrade import UpgradeScreen
from tests.tui.pilot import send_keys, wait_until
from tests.tui.pilot import plan_text, upgrade_planned

pytestmark = pytest.mark.slow
CLI_OPTION = re.compile(r"--(force|yes|takeover|reason|as)\b")


async def test_a_plan_needing_force_names_the_key_not_the_option(demo_db, make_app):
    app = make_app(demo_db(release="1.8.20", requests=20), start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, upgrade_planned(app), timeout=30)
        screen = app.screen
        assert screen.plan.force_required
        text = plan_text(screen)
        assert not CLI_OPTION.search(text), CLI_OPTION.search(text)
        assert "after U" in text
        await send_keys(pilot, "U")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal), what="the dialog")
        modal = app.screen
        said = modal.title_text + " " + modal.summary.plain
        assert not CLI_OPTION.search(said), said
        await send_keys(pilot, "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen), what="back")
