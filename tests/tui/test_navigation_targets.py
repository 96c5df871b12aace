"""Every way into a screen that names something (a table, a project a doctor finding names) checks
that it exists before anything is pushed: a refused navigation leaves you where you were, with "did
you mean", never an empty screen loading for ever behind a dialog (issue 21 item 7, one step on:
`:tables NAME` and doctor's jumps)."""

from __future__ import annotations

import sqlite3

import pytest

from console.tui.screens.doctor import DoctorScreen
from console.tui.screens.error import ErrorModal
from console.tui.screens.profiles import ProfilesScreen
from console.tui.screens.projects import OverviewScreen
from console.tui.screens.registry import SCREENS
from console.tui.screens.tables import TableScreen
from tests.tui.pilot import db, ready, settle, wait_until
from tests.tui.pilot import command, notes, stack

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("typed, meant", [
    ("tables tickts", ":tables tickets"),
    ("tables exection_runs", ":tables execution_runs"),
    ("t projcts", ":tables projects"),
])
async def test_a_table_typo_leaves_you_where_you_were_with_did_you_mean(demo_db, make_app, typed, meant):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, typed)
        await wait_until(pilot, lambda: any("No table" in n for n in notes(app)), what="the refusal")
        await settle(pilot, app)
        assert stack(app) == ["OverviewScreen"], stack(app)  # no dead Table screen, no dialog
        assert any(meant in n for n in notes(app) if "Did you mean" in n), notes(app)


@pytest.mark.parametrize("typed, table", [("tables TICKETS", "tickets"), ("tables ticket_dep", "ticket_dependencies")])
async def test_a_table_named_in_another_case_or_by_its_start_opens_that_table(demo_db, make_app, typed, table):
    """SQLite's names are case-blind: `:tables TICKETS` is the tickets table; a unique start opens
    the table it starts (as `:project` does)."""
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, typed)
        await ready(pilot, app, TableScreen)
        await wait_until(pilot, lambda: app.screen.table_shape is not None, what="the shape")
        assert app.screen.table_shape.name == table
        assert not any(isinstance(s, ErrorModal) for s in app.screen_stack)


@pytest.mark.parametrize("table", ["projects", "execution_profile_revisions"])
async def test_a_doctor_jump_to_a_project_that_is_gone_stays_on_doctor(demo_db, make_app, table):
    """A finding names a project, or a revision whose project was deleted since (an orphan, just what
    doctor reports): the jump says it is gone and stays on doctor, no empty Profiles screen."""
    path = demo_db()
    revision, project = db(path, "SELECT id, project_id FROM execution_profile_revisions LIMIT 1")[0]
    _delete_project(path, project)
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        screen = DoctorScreen()
        app.push_screen(screen)
        await wait_until(pilot, lambda: app.screen is screen, what="doctor")
        screen.go_to({"table": table, "id": project if table == "projects" else revision})
        await wait_until(pilot, lambda: any("is gone" in n for n in notes(app)), what="the note")
        await settle(pilot, app)
        assert app.screen is screen, stack(app)


def _delete_project(path, project: str) -> None:
    """Deleted as a careless tool would: behind archon's triggers and foreign keys."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys=OFF")
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("DELETE FROM projects WHERE id = ?", (project,))
    conn.commit()
    conn.close()


async def test_a_doctor_jump_to_an_existing_project_opens_it(demo_db, make_app):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        screen = DoctorScreen()
        app.push_screen(screen)
        await wait_until(pilot, lambda: app.screen is screen, what="doctor")
        screen.go_to({"table": "projects", "id": "prj-atlas-api"})
        await ready(pilot, app, ProfilesScreen)
        assert app.screen.argument == "prj-atlas-api"


NO_ARGUMENT = [entry.name for entry in SCREENS if not (entry.argument or entry.optional)]


async def test_a_word_after_a_screen_that_takes_none_is_said_not_dropped(demo_db, make_app):
    """`:doctor foo` opened doctor as if `foo` had not been typed (a typo of `:tables foo`, say):
    every screen that takes nothing after its name says so and opens nothing."""
    assert NO_ARGUMENT  # doctor, upgrade, projects
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, OverviewScreen)
        for name in NO_ARGUMENT:
            await command(pilot, app, f"{name} tickets")
            await wait_until(pilot, lambda: any(f":{name} takes nothing after it" in n for n in notes(app)),
                             what=f"the note for :{name}")
            await settle(pilot, app)
            assert stack(app) == ["OverviewScreen"], (name, stack(app))


@pytest.mark.parametrize("meanwhile", ["tables", "escape"])
async def test_a_command_resolved_after_the_operator_moved_on_opens_nothing(demo_db, make_app, meanwhile):
    """`:project atlas-api` is resolved in a thread; on a busy file that takes a while. Typing
    `:tables` (or Escape) meanwhile is where the operator wants to be: the late answer must not push
    the project over it."""
    import threading

    from console.tui.screens.tables import TablesScreen

    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await command(pilot, app, "tables")
        await ready(pilot, app, TablesScreen)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:  # another thread holds the session, as a slow read would
            with app.session.lock:
                held.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        await command(pilot, app, "project atlas-api")
        await wait_until(pilot, lambda: any(w.group == "navigate" and not w.is_finished for w in app.workers),
                         what="the resolution running")
        if meanwhile == "tables":
            await command(pilot, app, "sql")
            expected = ["OverviewScreen", "TablesScreen", "SqlScreen"]
        else:
            await pilot.press("escape")
            expected = ["OverviewScreen"]
        await wait_until(pilot, lambda: stack(app) == expected, what=f"{expected}")
        release.set()
        holder.join()
        await wait_until(pilot, lambda: not any(w.group == "navigate" and not w.is_finished for w in app.workers),
                         what="the resolution done")
        await settle(pilot, app)
        assert stack(app) == expected


@pytest.mark.parametrize("how", ["project atlas-api", "project", "enter", "approvals", "approvals atlas-api", "a"])
async def test_a_screen_the_release_lacks_is_refused_before_anything_opens(demo_db, make_app, how):
    """On an archon 1.8.20 file (no profile revisions, no approval queue) `:project NAME`, `:project`,
    Enter on a project, `:approvals` and the overview's approvals key pushed their screen, which
    stayed empty ("loading…") behind "needs 1.8.22". Refused first: you stay where you were, told
    what the TUI offers (`:upgrade`)."""
    app = make_app(demo_db(release="1.8.20", requests=20), start="projects")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, OverviewScreen)
        if how in ("enter", "a"):
            await pilot.press(how)
        else:
            await command(pilot, app, how)
        await wait_until(pilot, lambda: any("archon 1.8.22 or later" in n for n in notes(app)), what="the refusal")
        await settle(pilot, app)
        assert stack(app) == ["OverviewScreen"], stack(app)
        note = next(n for n in notes(app) if "archon 1.8.22 or later" in n)
        assert ":upgrade" in note and "archon-console upgrade" not in note, note


def test_the_profiles_refusal_is_for_the_release_alone(demo_db):
    """It closes once the file is upgraded, like every refusal made for the release alone."""
    from console.db.connect import open_database
    from console.services.base import ReleaseRefusal
    from console.services.profiles import require_profiles

    with open_database(demo_db(release="1.8.20", requests=20), read_only=True) as handle:
        with pytest.raises(ReleaseRefusal) as caught:
            require_profiles(handle)
    assert caught.value.release == "1.8.20"


@pytest.mark.parametrize("typed, expect", [
    ("bill", "prj-billing-worker"),  # a unique start, as `:project bill`
    ("atlas-apx", "Did you mean :approvals atlas-api?"),  # a typo: did you mean
    ("prj-", "ChooseModal"),  # several: offered
])
async def test_the_p_filter_finds_a_project_as_project_does(demo_db, make_app, typed, expect):
    """`p` took only an exact id or name ("no project matches 'bill'") while `:project bill` opened
    billing-worker: one way to name a project, wherever one is named."""
    from console.tui.screens.approvals import ApprovalsScreen
    from tests.tui.pilot import send_keys, type_text

    app = make_app(demo_db())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        screen = app.screen
        await send_keys(pilot, "p")
        await type_text(pilot, typed)
        await send_keys(pilot, "enter")
        if expect == "ChooseModal":
            await wait_until(pilot, lambda: type(app.screen).__name__ == "ChooseModal", what="the candidates")
            await send_keys(pilot, "enter")
            await wait_until(pilot, lambda: screen.filters.project is not None, what="the filter")
            assert screen.filters.project.startswith("prj-")
        elif expect.startswith("prj-"):
            await wait_until(pilot, lambda: screen.filters.project == expect, what="the filter")
        else:
            await wait_until(pilot, lambda: any(expect in n for n in notes(app)), what="the hint")
            assert screen.filters.project is None
