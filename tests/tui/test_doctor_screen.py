"""The Doctor screen: findings appear (coloured by severity) and Enter goes to the row concerned."""

from __future__ import annotations

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.doctor import DoctorScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.profiles import ProfilesScreen
from tests.tui.pilot import settle, wait_until
from textual.widgets import DataTable
from widgets.lazy_table import LazyTable

pytestmark = pytest.mark.slow


def findings_table(app) -> DataTable:
    return app.screen.query_one("#findings", DataTable)


async def open_doctor(pilot, app) -> DoctorScreen:
    await wait_until(pilot, lambda: app.screen.query(LazyTable), what="start screen")
    screen = DoctorScreen()
    app.push_screen(screen)
    await wait_until(pilot, lambda: screen.report is not None and findings_table(app).row_count > 0,
                     timeout=15, what="doctor findings")
    return screen


async def cursor_on(pilot, app, screen_cls, key):
    await wait_until(pilot, lambda: isinstance(app.screen, screen_cls)
                     and app.screen.query_one(LazyTable).cursor_key == key, timeout=10,
                     what=f"{screen_cls.__name__} on {key}")


async def test_findings_appear_and_enter_goes_to_the_row(demo_db, make_app):
    db = demo_db()
    app = make_app(db)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_doctor(pilot, app)
        table = findings_table(app)
        ids = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        # worst first; the demo's clock leaves two requests pending past expiry
        assert ids[0] == "approvals.pending_past_expiry" and "database.info" in ids
        severity = table.get_row_at(0)[0]
        assert str(severity) == "warning" and "yellow" in str(severity.style)
        detail = str(screen.query_one("#finding-detail").render())
        assert "Why it matters" in detail and "What to do" in detail
        first = screen.findings[0].rows[0]["id"]

        await pilot.press("enter")  # the finding's first row, in the approval queue
        await cursor_on(pilot, app, ApprovalsScreen, first)
        assert app.screen.filters.statuses is None  # every status: the row may be decided

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="back on doctor")
        envs_index = next(i for i, f in enumerate(screen.findings) if f.id == "environments.stale_claims")
        table.move_cursor(row=envs_index)
        second = screen.findings[envs_index].rows[1]["id"]
        rows = screen.query_one("#finding-rows", DataTable)
        for _ in range(3):  # Tab into the rows list (past the scrollable detail pane), then the second row
            if rows.has_focus:
                break
            await pilot.press("tab")
        assert rows.has_focus
        await pilot.press("down", "enter")
        await cursor_on(pilot, app, EnvironmentsScreen, second)


async def test_rows_of_projects_open_the_project(demo_db, make_app):
    db = demo_db()
    app = make_app(db)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_doctor(pilot, app)
        screen.go_to({"table": "projects", "id": "prj-atlas-api"})
        await wait_until(pilot, lambda: isinstance(app.screen, ProfilesScreen), what="project screen")
        assert app.screen.argument == "prj-atlas-api"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="back on doctor")
        screen.go_to({"table": "sqlite_master", "id": "idx_x"})  # nothing lists schema objects
        await settle(pilot, app)
        assert app.screen is screen
