"""The lists' `/` and `p` (issue 21, items 6 and 10): the environments list shows and filters by
project names as the approval queue does, and `/` filters as you type on every list that has it
(Enter keeps the filter and leaves the box, Escape puts back the one in force before), with a
superseded read never painting over a newer one. The fleet queue's `/` is
tests/tui/test_fleet_screens.py's."""

from __future__ import annotations

import threading

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.pages import EnvironmentsSource
from tests.tui.pilot import db, notifications, ready, send_keys, settle, table, type_text, wait_until
from widgets.filter_box import FilterBox

pytestmark = pytest.mark.slow

SIZES = [(120, 40), (80, 24)]
size_ids = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")


def table_lines(app) -> list[str]:
    """The table's lines as drawn (header first), cut to what its width shows."""
    t = table(app)
    return [t.render_line(y).text for y in range(t.size.height)]


def env_ids(app) -> list[str]:
    t = table(app)
    return [t.row_at(i).id for i in range(t.total or 0)]


def box(app) -> FilterBox:
    return app.screen.query_one(FilterBox)


def matching_envs(path, needle: str) -> list[str]:
    """What `/` must find, read from the database: id, project id or name, state, provider, claim."""
    return [r[0] for r in db(path, """
        SELECT e.id FROM execution_environments e LEFT JOIN projects p ON p.id = e.project_id
        WHERE instr(lower(e.id || ' ' || e.project_id || ' ' || coalesce(p.name, '') || ' ' || e.lifecycle_state
              || ' ' || coalesce(e.provider_kind, '') || ' ' || coalesce(e.operation_kind, '') || ' '
              || coalesce(e.operation_claim_id, '')), ?) > 0 ORDER BY e.id""", needle)]


# ---------------------------------------------------------------- item 6: the project, by name
@size_ids
async def test_environments_show_each_project_by_name_beside_state_and_claim(demo_db, make_app, size):
    path = demo_db()
    names = dict(db(path, "SELECT e.id, p.name FROM execution_environments e JOIN projects p ON p.id = e.project_id"))
    app = make_app(path, start="envs")
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        lines = {line.split()[0]: line for line in table_lines(app)[1:] if line.strip().startswith("env-")}
        assert len(lines) >= 8
        for env_id, line in lines.items():
            shown = names[env_id] if len(names[env_id]) <= 14 else names[env_id][:13]  # a cell's ellipsis
            assert shown in line, (env_id, line)
        # the claim is whole beside it: the operation, the holder's tail, the age and STALE
        assert "retire" in lines["env-0003"] and lines["env-0003"].rstrip(" —y").endswith("STALE")
        assert "project" in table_lines(app)[0] and "claim" in table_lines(app)[0]


async def test_environment_list_rows_and_detail_carry_the_project_name(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        assert {table(app).row_at(i).project_name for i in range(table(app).total)} == {
            name for (name,) in db(path, "SELECT name FROM projects WHERE id IN "
                                   "(SELECT project_id FROM execution_environments)")}
        await wait_until(pilot, lambda: app.screen.detail is not None and app.screen.detail.id == "env-0001")
        head = str(app.screen.query_one("#detail-head").render())
        assert "atlas-api (prj-atlas-api)" in head


# ---------------------------------------------------------------- item 6: p
@size_ids
async def test_p_filters_environments_by_project_name_and_refuses_an_unknown_one(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        everything = table(app).total
        await send_keys(pilot, "p")
        await wait_until(pilot, lambda: box(app).has_focus, what="the project box")
        await type_text(pilot, "nosuchproject")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: any("No project 'nosuchproject'" in str(n.message)
                                            for n in notifications(app)), what="the refusal")
        assert app.screen.argument is None and table(app).total == everything
        await send_keys(pilot, "p")
        await wait_until(pilot, lambda: box(app).has_focus, what="the project box")
        await type_text(pilot, "ml-pipeline")
        await send_keys(pilot, "enter")
        want = [r[0] for r in db(path, "SELECT id FROM execution_environments WHERE project_id = 'prj-ml-pipeline' "
                                  "ORDER BY id")]
        await wait_until(pilot, lambda: table(app).visible_loaded and env_ids(app) == want, what="ml-pipeline only")
        assert want and "project ml-pipeline" in str(app.screen.query_one("#filters").render())
        assert table(app).has_focus and not box(app).display


# ---------------------------------------------------------------- item 6: / on the environments
async def test_slash_searches_environments_by_project_name_state_and_claim(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        for needle in ("billing", "ML-PIPE", "cleanup_pending", "archon-worker:42", "env-0007"):
            await send_keys(pilot, "slash")
            await wait_until(pilot, lambda: box(app).has_focus, what="the search box")
            await type_text(pilot, needle)
            await send_keys(pilot, "enter")
            want = matching_envs(path, needle.lower())
            assert want, needle
            await wait_until(pilot, lambda: app.screen.search == needle and table(app).total == len(want)
                             and table(app).visible_loaded and env_ids(app) == want, what=f"the search {needle!r}")
        assert "text env-0007" in str(app.screen.query_one("#filters").render())


# ---------------------------------------------------------------- item 10: as you type, everywhere
SCREENS = [
    pytest.param("approvals", ApprovalsScreen, "billing", "search", id="approvals"),
    pytest.param("envs", EnvironmentsScreen, "billing", "search", id="environments"),
]


def search_of(app) -> str | None:
    screen = app.screen
    return screen.filters.search if isinstance(screen, ApprovalsScreen) else screen.search


@pytest.mark.parametrize(("start", "screen_cls", "needle", "_mode"), SCREENS)
async def test_slash_filters_as_you_type_enter_keeps_escape_restores(demo_db, make_app, start, screen_cls,
                                                                      needle, _mode):
    path = demo_db()
    app = make_app(path, start=start)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, screen_cls)
        everything = table(app).total
        await send_keys(pilot, "slash")
        await wait_until(pilot, lambda: box(app).has_focus, what="the search box")
        await type_text(pilot, needle)  # no Enter: the list follows the text
        await wait_until(pilot, lambda: search_of(app) == needle and table(app).visible_loaded
                         and 0 < table(app).total < everything, what="filtered while typing")
        assert box(app).has_focus and box(app).display
        await settle(pilot, app)  # every read started by a keystroke has ended: the count is "billing"'s
        assert search_of(app) == needle
        filtered = table(app).total
        await send_keys(pilot, "enter")  # keeps the filter, leaves the box
        await wait_until(pilot, lambda: table(app).has_focus and not box(app).display, what="back in the table")
        assert search_of(app) == needle
        await send_keys(pilot, "slash")
        await wait_until(pilot, lambda: box(app).has_focus, what="the search box again")
        # it opens holding the filter in force, all selected: typing replaces it
        assert box(app).value == needle and box(app).selected_text == needle
        await type_text(pilot, "zz-nothing-has-this")
        await wait_until(pilot, lambda: search_of(app) == "zz-nothing-has-this" and table(app).total == 0,
                         what="the new text applied")
        await send_keys(pilot, "escape")  # puts back the filter in force when the box opened
        await wait_until(pilot, lambda: search_of(app) == needle and table(app).total == filtered
                         and table(app).visible_loaded, what="the filter restored")
        assert table(app).has_focus and not box(app).display
        assert isinstance(app.screen, screen_cls)  # Escape left the box, not the screen
        await send_keys(pilot, "slash")
        await wait_until(pilot, lambda: box(app).has_focus, what="the search box")
        await send_keys(pilot, "backspace")  # the selected text goes: everything, live
        await wait_until(pilot, lambda: search_of(app) is None and table(app).total == everything,
                         what="cleared while typing")
        await send_keys(pilot, "enter")
        await settle(pilot, app)
        assert search_of(app) is None and table(app).total == everything


async def test_a_superseded_search_never_paints_over_a_newer_one(demo_db, make_app, monkeypatch):
    """Typing `r e t`: the read for "re" is held until "ret" has painted, then let go. Its rows
    must not replace "ret"'s, and its count (the slow part on a large table) is never taken."""
    entered, gate, returned = threading.Event(), threading.Event(), threading.Event()
    counted: list[str | None] = []
    page, count = EnvironmentsSource.page, EnvironmentsSource.count

    def held_page(self, after, limit):
        if self.kwargs["search"] != "re":
            return page(self, after, limit)
        entered.set()
        gate.wait(60)
        try:
            return page(self, after, limit)
        finally:
            returned.set()

    def recorded_count(self):
        counted.append(self.kwargs["search"])
        return count(self)

    monkeypatch.setattr(EnvironmentsSource, "page", held_page)
    monkeypatch.setattr(EnvironmentsSource, "count", recorded_count)
    path = demo_db()
    want = matching_envs(path, "ret")
    assert 0 < len(want) < len(matching_envs(path, "re"))
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await send_keys(pilot, "slash")
        await wait_until(pilot, lambda: box(app).has_focus, what="the search box")
        await type_text(pilot, "re")
        await wait_until(pilot, lambda: entered.is_set(), what="the read for 're' under way")
        await type_text(pilot, "t")
        await wait_until(pilot, lambda: app.screen.search == "ret" and table(app).total == len(want)
                         and env_ids(app) == want, what="'ret' painted")
        gate.set()
        await wait_until(pilot, lambda: returned.is_set(), what="the read for 're' finished")
        await settle(pilot, app)
        assert app.screen.search == "ret" and env_ids(app) == want and table(app).total == len(want)
        assert "re" not in counted


# ---------------------------------------------------------------- a search is part of a saved view
async def test_an_environment_search_is_saved_with_the_view_and_the_cli_applies_it(demo_db, make_app, tmp_path,
                                                                                  monkeypatch, capsys):
    import json

    from console.cli.cli import main
    from console.services import views

    monkeypatch.setenv("ARCHON_CONSOLE_VIEWS", str(tmp_path / "config" / "views.toml"))
    monkeypatch.setenv("ARCHON_CONSOLE_CONFIG", str(tmp_path / "none.toml"))
    path = demo_db()
    want = matching_envs(path, "billing")
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await send_keys(pilot, "slash")
        await wait_until(pilot, lambda: box(app).has_focus, what="the search box")
        await type_text(pilot, "billing")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: env_ids(app) == want and table(app).visible_loaded, what="the search")
        app.navigate("save", "billing-envs")
        await wait_until(pilot, lambda: "billing-envs" in views.load()[0], what="the saved view")
    assert views.find("billing-envs").get("search") == "billing"
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: type(app.screen).__name__ == "OverviewScreen", what="the projects")
        app.navigate("view", "billing-envs")
        await ready(pilot, app, EnvironmentsScreen)
        await wait_until(pilot, lambda: env_ids(app) == want, what="the view reopened with its search")
        assert app.screen.search == "billing"
    capsys.readouterr()
    assert main(["--json", "envs", "list", "--db", str(path), "--view", "billing-envs"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == want


def test_every_list_with_slash_uses_the_one_filter_box():
    """A screen that binds `/` gets it from `ListFilters` (so it filters as you type, and Escape
    restores), never a box of its own; the fleet queue's is tests/tui/test_fleet_screens.py's."""
    from console.tui.screens.list_filters import ListFilters
    from console.tui.screens.registry import SCREENS

    with_slash = {entry.name: entry.screen_class() for entry in SCREENS
                  if any(b.key == "slash" for b in entry.screen_class().BINDINGS)}
    assert {"approvals", "envs"} <= set(with_slash)
    for name, cls in with_slash.items():
        assert issubclass(cls, ListFilters), name
        assert "action_search" not in vars(cls) and "on_input_submitted" not in vars(cls), name
