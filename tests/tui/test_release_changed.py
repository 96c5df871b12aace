"""After a write that changes the release, everything derived from it is re-read (issue 21 item 8):
the header of every screen, the screens' cached state and greyed keys, and no dialog built from the
old release is left over (a "needs 1.8.22" refusal, read while the upgrade ran, stayed over the
upgrade's success)."""

from __future__ import annotations

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.error import ErrorModal
from console.tui.screens.projects import OverviewScreen
from console.tui.screens.upgrade import UpgradeScreen
from tests.tui.pilot import notifications, ready, settle, type_text, wait_until
from tests.tui.upgrade_hold import held_run

pytestmark = pytest.mark.slow


def labels(app) -> list[str]:
    return [str(s.query_one("#db-label").render()) for s in app.screen_stack if isinstance(s, ConsoleScreen)]


async def test_an_upgrade_in_the_console_refreshes_everything_derived_from_the_release(demo_db, make_app,
                                                                                    monkeypatch):
    path = demo_db(release="1.8.20", requests=20)
    reached, release = held_run(monkeypatch)
    app = make_app(path, start="projects")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app, OverviewScreen)
            assert all("archon 1.8.20" in label for label in labels(app))
            app.navigate("envs")
            await ready(pilot, app, EnvironmentsScreen)
            await wait_until(pilot, lambda: app.screen.claims_supported is not None, what="claims support read")
            assert app.screen.claims_supported is False
            app.navigate("upgrade")
            await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None,
                             timeout=60, what="the plan")
            await pilot.press("U")
            await wait_until(pilot, lambda: type(app.screen).__name__ in ("TypedConfirmModal", "ConfirmModal"))
            if type(app.screen).__name__ == "TypedConfirmModal":
                await type_text(pilot, path.name)
            await pilot.press("enter")
            await wait_until(pilot, reached.is_set, timeout=60, what="the upgrade's first step")
            # Mid-run the operator looks at the queue: the file still has the old release, so nothing
            # opens (tests/tui/test_navigation_targets.py) and a note says why.
            app.navigate("approvals")
            await wait_until(pilot, lambda: any("1.8.22" in str(n.message) for n in notifications(app)),
                             what="the approvals refusal")
            assert not any(isinstance(s, ApprovalsScreen) for s in app.screen_stack)
            release.set()
            upgrade = next(s for s in app.screen_stack if isinstance(s, UpgradeScreen))
            await wait_until(pilot, lambda: not app.session.upgrading and upgrade.plan is not None
                             and upgrade.plan.up_to_date, timeout=120,
                             what=f"the upgrade's outcome {[str(n.message) for n in notifications(app)]}")
            new = app.session.release
            assert new not in (None, "1.8.20")
            # The release as every screen says it, after the poll that follows the run.
            await wait_until(pilot, lambda: all(f"archon {new}" in label for label in labels(app)),
                             what=f"every header on {new}: {labels(app)}")
            await wait_until(pilot, lambda: not any(isinstance(s, ErrorModal) for s in app.screen_stack),
                             what=f"no dialog from the old release: {[type(s).__name__ for s in app.screen_stack]}")
            for _ in range(3):  # and none comes back with the polls after it: three polls, each run to its end
                await wait_until(pilot, lambda: not app._polling, what="the poll under way to end")
                app._poll()
                await wait_until(pilot, lambda: not app._polling, what="this poll to end")
                await settle(pilot, app)
            assert not [str(s.error) for s in app.screen_stack if isinstance(s, ErrorModal)]
            app.navigate("approvals")  # upgraded: the queue opens
            await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen), what="the queue")
            # The screens re-read what they had derived from the old release.
            await wait_until(pilot, lambda: app.screen.query_one("LazyTable").total is not None, what="the queue")
            envs = next(s for s in app.screen_stack if isinstance(s, EnvironmentsScreen))
            await wait_until(pilot, lambda: envs.claims_supported is True, what="claims support re-read")
            assert all("1.8.20" not in label for label in labels(app))
    finally:
        release.set()
