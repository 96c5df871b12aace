"""Where a `:` command goes (issue 21 item 7): a navigation that is refused leaves you where you were,
`:project` takes a prefix and offers candidates (k9s's `:ns`), and every typo gets "did you mean"."""

from __future__ import annotations

import sqlite3

import pytest

from console.tui.screens.registry import SCREENS
from console.tui.screens.error import ErrorModal
from console.tui.screens.profiles import ProfilesScreen
from console.tui.screens.projects import OverviewScreen
from tests.tui.pilot import command, notes, ready, send_keys, settle, stack, wait_until

pytestmark = pytest.mark.slow








async def test_a_project_typo_leaves_you_where_you_were_with_did_you_mean(demo_db, make_app):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, "project atlas-apx")
        await wait_until(pilot, lambda: any("No project 'atlas-apx'" in n for n in notes(app)), what="the refusal")
        await settle(pilot, app)
        assert stack(app) == ["OverviewScreen"]  # no empty Profiles screen, no dialog to escape
        assert any("Did you mean :project atlas-api?" in n for n in notes(app)), notes(app)
        await pilot.press("down")  # the screen under it still answers keys
        assert isinstance(app.screen, OverviewScreen)


async def test_a_unique_prefix_opens_the_project(demo_db, make_app):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, "project bill")
        await ready(pilot, app, ProfilesScreen)
        assert app.screen.argument == "prj-billing-worker"
        await wait_until(pilot, lambda: app.screen.project is not None, what="the project read")
        assert app.screen.project.name == "billing-worker"


async def test_several_candidates_are_offered_to_pick(demo_db, make_app):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, "project prj-")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ChooseModal", what="the candidates")
        assert len(app.screen.choices) == 6
        await pilot.press("escape")  # changed my mind: where I was
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))
        await command(pilot, app, "project prj-")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ChooseModal", what="the candidates again")
        wanted = next(value for label, value in app.screen.choices if "ml-pipeline" in label)
        index = [value for _, value in app.screen.choices].index(wanted)
        await send_keys(pilot, *["down"] * index)
        await pilot.press("enter")
        await ready(pilot, app, ProfilesScreen)
        assert app.screen.argument == wanted == "prj-ml-pipeline"
        assert stack(app) == ["OverviewScreen", "ProfilesScreen"]


def _typo(word: str) -> str:
    """The word with one letter dropped (`aprovals`), or doubled when that would leave too little."""
    return word[0] + word[2:] if len(word) > 3 else word + word[-1]


WORDS = {word: entry.name for entry in SCREENS for word in (entry.name, *entry.aliases)}
WORDS.update({word: word for word in ("help", "quit", "save", "view")})
TYPOS = sorted({(_typo(w), target) for w, target in WORDS.items() if len(w) > 2 and _typo(w) not in WORDS})


async def test_every_command_word_typo_gets_did_you_mean(demo_db, make_app):
    """Every screen's name and alias, and help/quit/save/view, misspelt: nothing opens and the note
    names the command meant."""
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        for typo, target in TYPOS:
            app.navigate(typo)
            await wait_until(pilot, lambda: any(f"No screen called {typo!r}" in n for n in notes(app)),
                             what=f"the note for {typo}")
            note = next(n for n in notes(app) if f"No screen called {typo!r}" in n)
            assert "Did you mean" in note and f":{target}" in note.split("Try")[0], (typo, note)
        await settle(pilot, app)
        assert stack(app) == ["OverviewScreen"]


@pytest.mark.parametrize("typed, meant", [
    ("envs clam", ":envs claimed=yes"),
    ("approvals pendng", ":approvals status=pending"),
    ("approvals stauts=pending", "status=pending"),
    ("approvals status=pendng", "status=pending"),
    ("envs state=redy", "state=ready"),
    ("envs project=atlas-apx", ":envs project=atlas-api"),
])
async def test_argument_typos_get_did_you_mean_and_open_nothing(demo_db, make_app, typed, meant):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, typed)
        await wait_until(pilot, lambda: any("Did you mean" in n for n in notes(app)), what="the hint")
        await settle(pilot, app)
        assert any(meant in n for n in notes(app) if "Did you mean" in n), notes(app)
        assert stack(app) == ["OverviewScreen"]


async def test_a_refusal_repeated_by_every_refresh_is_one_dialog(demo_db, make_app):
    """A screen whose read is refused, on a live database (another process commits): each refresh is
    refused again, and was stacked as another dialog (six Escapes were needed)."""
    path = demo_db()
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        app.push_screen(ProfilesScreen("prj-vanishing"))
        await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="the refusal")
        for name in ("one", "two", "three"):
            conn = sqlite3.connect(path)
            conn.execute("UPDATE projects SET name = ? WHERE id = 'prj-atlas-api'", (f"atlas-{name}",))
            conn.commit()
            conn.close()
            before = app._data_version
            await wait_until(pilot, lambda: app._data_version != before, what="the poll")
            await settle(pilot, app)
        assert stack(app) == ["OverviewScreen", "ProfilesScreen", "ErrorModal"]


async def test_the_refusal_paints_in_a_long_open_console_without_a_resize(demo_db, make_app):
    """A console open a long time on a live file: full collections have run while idle
    (console/tui/idle_gc.py) and another process commits. The refusal still reaches the terminal
    in the next frame: a frame is sent (`App._display`) after it, with no resize."""
    path = demo_db()
    app = make_app(path, start="projects")
    frames: list[object] = []
    real_display = app._display

    def display(screen, renderable):
        frames.append(screen)
        return real_display(screen, renderable)

    app._display = display
    real_notify = app.notify

    def notify(message, **kwargs):
        frames.append("notified")
        return real_notify(message, **kwargs)

    app.notify = notify
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        app._collector.clock = lambda: float("inf")  # idle for ever: every tick may collect
        for name in ("one", "two"):
            conn = sqlite3.connect(path)
            conn.execute("UPDATE projects SET name = ? WHERE id = 'prj-atlas-api'", (f"atlas-{name}",))
            conn.commit()
            conn.close()
            before = app._data_version
            await wait_until(pilot, lambda: app._data_version != before, what="the poll")
            assert app._collector.tick() or True
        await settle(pilot, app)
        frames.clear()
        await command(pilot, app, "project nosuch")
        await wait_until(pilot, lambda: any("No project 'nosuch'" in n for n in notes(app)), what="the refusal")
        await wait_until(pilot, lambda: app.screen in frames[frames.index("notified"):], what="a frame after it")
        assert stack(app) == ["OverviewScreen"]


async def test_project_alone_offers_the_projects(demo_db, make_app):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, "project")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ChooseModal", what="the projects")
        assert "prj-atlas-api" in [value for _, value in app.screen.choices]
        await pilot.press("enter")  # the first, by name
        await ready(pilot, app, ProfilesScreen)
