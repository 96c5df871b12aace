"""Issue 18, finding 6 in the TUI: the profiles screen greys `A` with the service's sentence when the
database contradicts the console's reconstruction of archon's profile algorithms."""

from __future__ import annotations

import sqlite3

import pytest

from console.db import execution_profiles as ep
from console.db.connect import open_database
from console.tui.screens.reason import ReasonModal
from console.services import profiles
from tests.tui.pilot import db, ready, table, wait_until

pytestmark = pytest.mark.slow

SENTENCE = "so the console cannot promise what that start does with it"


async def test_contradicted_database_greys_activate_with_the_services_sentence(demo_db, make_app):
    path = demo_db()
    conn = sqlite3.connect(path)  # archon stored a check policy with a key the console's normaliser drops
    profile = {"provider_preference": "host", "eligible_workloads": ["build", "chat_build", "check"],
               "check_template_policy": {"mode": "agent_template", "agent": "opencode", "timeout": 5}}
    number = conn.execute("SELECT MAX(revision) + 1 FROM execution_profile_revisions "
                          "WHERE project_id = 'prj-atlas-api'").fetchone()[0]
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES ('prj-atlas-api:execution-profile:odd', 'prj-atlas-api', ?, 3, ?, ?)",
                 (number, ep.fingerprint(profile), ep.serialize(profile)))
    conn.commit()
    conn.close()
    handle = open_database(path, read_only=True)
    try:
        listed = [r for r in profiles.list_revisions(handle, "prj-atlas-api") if not r.active]
    finally:
        handle.close()
    target = next(r for r in listed if r.activation_refused and SENTENCE in r.activation_refused)
    active_before = db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'")
    await _activate_is_greyed(make_app, path, target, SENTENCE)
    assert db(path, "SELECT active_execution_profile_revision_id FROM projects WHERE id='prj-atlas-api'") == active_before


async def test_a_release_the_console_does_not_know_greys_activate_with_the_services_sentence(demo_db, make_app):
    """Attack round on issue 18, finding 1: on a partly 1.10.0 file the console cannot say which
    start comes next, so `A` is greyed for every revision with the service's sentence."""

    path = demo_db()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE service_run_details")
    conn.commit()
    conn.close()
    handle = open_database(path, read_only=True)
    try:
        listed = [r for r in profiles.list_revisions(handle, "prj-atlas-api") if not r.active]
    finally:
        handle.close()
    assert listed and all("cannot promise what archon's next start does" in r.activation_refused for r in listed)
    target = listed[0]
    await _activate_is_greyed(make_app, path, target, "cannot promise")


async def _activate_is_greyed(make_app, path, target, phrase: str) -> None:
    """On `target`'s row of the profiles screen `A` is greyed with the service's own sentence (one
    source), and pressing it says `phrase` in the detail head and opens no reason dialog."""
    from console.tui.screens.profiles import ProfilesScreen

    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        app.navigate("project", "atlas-api")
        await ready(pilot, app, ProfilesScreen)
        t = table(app)
        await wait_until(pilot, lambda: t.cursor_row is not None)
        while t.cursor_key != target.id:
            await pilot.press("down")
        await wait_until(pilot, lambda: "activate" in app.screen.unavailable())
        assert app.screen.unavailable()["activate"] == target.activation_refused  # one source: the service
        assert app.screen.check_action("activate", ()) is not True
        await pilot.press("A")
        await wait_until(pilot, lambda: phrase in str(app.screen.query_one("#detail-head").render()))
        assert not isinstance(app.screen, ReasonModal)
