"""The approver's queue (issue 21, item 11): who asked and how long ago in the list, ageing as time
passes, and `o` ordering it by expiry, age, requester or project, the filter line naming the order,
every order paged (first rows, the end of the list, a request found by id) as the service orders it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from console.db.connect import open_database
from console.services import approval_queue as queue
from console.tui.screens.approvals import ApprovalsScreen
from tests.tui.conftest import NOW
from tests.tui.pilot import ready, send_keys, table, wait_until

pytestmark = pytest.mark.slow


def header(app) -> str:
    return app.screen.query_one("#filters").render().plain


def cells(app, index: int) -> list[str]:
    t = table(app)
    return [c.cell(t.row_at(index)).plain for c in t.columns]


def service_order(path, sort: str) -> list[str]:
    with open_database(path, read_only=True) as h:
        return [r.id for r in queue.list_requests(h, queue.Filters(sort=sort), limit=500, now=NOW).rows]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_queue_shows_who_asked_and_how_long_ago(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    clock = [NOW]
    app.session.clock.live = lambda: clock[0]  # the screens' one clock (console/clock.py ScreenClock)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        t = table(app)
        labels = [c.label for c in t.columns]
        assert labels[:5] == ["id", "expires", "age", "requester", "project"]
        assert sum(c.width + 2 for c in t.columns) + 2 <= t.size.width  # every column on screen, none scrolled off
        row = t.row_at(0)
        assert cells(app, 0)[3] == row.requester and row.requester  # as `approvals list` prints it
        before = cells(app, 0)[2]
        clock[0] = NOW + timedelta(hours=30)  # the countdowns' tick ages it
        await wait_until(pilot, lambda: cells(app, 0)[2] != before, what="the age to move on")
        assert cells(app, 0)[2].endswith("d") or cells(app, 0)[2].endswith("h")


async def test_o_orders_the_queue_and_the_filter_line_says_by_what(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        assert "by expiry" in header(app)
        for sort, label in (("age", "by age, oldest first"), ("requester", "by requester"),
                            ("project", "by project"), ("expiry", "by expiry")):
            await send_keys(pilot, "o")
            await wait_until(pilot, lambda: app.screen.filters.sort == sort and table(app).visible_loaded,
                             what=f"ordered by {sort}")
            assert label in header(app)
            expected = service_order(path, sort)
            t = table(app)
            assert t.total == len(expected)
            shown = [t.source.key(t.row_at(i)) for i in range(min(10, len(expected)))]
            assert shown == expected[:10]
            await send_keys(pilot, "end")  # the last page is read from the far end, in the same order
            await wait_until(pilot, lambda: t.cursor == len(expected) - 1 and t.cursor_key == expected[-1],
                             what=f"the end of the {sort} order")
            await send_keys(pilot, "home")
            await wait_until(pilot, lambda: t.cursor == 0 and t.cursor_key == expected[0], what="the start")
