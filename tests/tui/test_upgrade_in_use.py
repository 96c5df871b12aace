"""The upgrade screen refuses while another process holds the database (issue 18, finding 12).

The TUI's own connection holds a SHARED lock on a WAL file for its whole life; that is this
console, not another user, so the plan must not count it. A second process that has the file open
(as archon does) is named in the plan's refusal, and `U` is greyed with "stop archon first".
"""

from __future__ import annotations

import sqlite3

import pytest

from console.db import execution_profiles as profiles
from console.tui.screens.typed import TypedConfirmModal
from console.tui.screens.upgrade import UpgradeScreen
from tests.adversarial.holder import Holder
from tests.tui.pilot import plan_text, settle, type_text, upgrade_planned, wait_until

pytestmark = pytest.mark.slow


def _wal(path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    conn.close()






async def test_the_screen_names_the_holder_and_greys_the_run(demo_db, make_app):
    path = demo_db(release="1.8.22", requests=20)
    _wal(path)
    holder = Holder(path, "idle")
    try:
        app = make_app(path, start="upgrade")
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, upgrade_planned(app), timeout=15)
            screen = app.screen
            assert [h.split()[1] for h in screen.plan.in_use_by] == [str(holder.proc.pid)]
            assert "stop archon first" in screen.unavailable()["run_upgrade"]
            text = plan_text(screen)
            assert "Refused: " in text and f"pid {holder.proc.pid}" in text and "stop archon first" in text
            await pilot.press("U")  # greyed: nothing is written
            await settle(pilot, app)
    finally:
        holder.stop()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = '_sqlite_migrations'").fetchone()[0] == 0
    conn.close()


async def test_its_own_connection_is_not_another_user(demo_db, make_app):
    path = demo_db(release="1.8.22", requests=20)
    _wal(path)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, upgrade_planned(app), timeout=15)
        screen = app.screen
        assert screen.plan.in_use_by == []
        assert "stop archon" not in screen.unavailable().get("run_upgrade", "")


async def test_a_refused_plan_is_shown_and_greys_the_run(demo_db, make_app):
    """A preflight that refuses (here: a fixed revision id step 021 would insert is held by another
    project) ends the plan in a refusal the screen shows, as `upgrade --plan` prints it; the worker
    does not fail and `U` is greyed with the same reason."""
    path = demo_db(release="1.8.22", requests=20)
    conn = sqlite3.connect(path, isolation_level=None)
    projects = [r[0] for r in conn.execute("SELECT id FROM projects ORDER BY id LIMIT 2")]
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    conn.execute("BEGIN")
    for name, _sql in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    profile = profiles.normalize({"provider_preference": "host", "eligible_workloads": ["check"]}, 2).profile
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES (?, ?, 900, 2, ?, ?)",
                 (f"{projects[0]}:execution-profile:v3", projects[1], profiles.fingerprint(profile),
                  profiles.serialize(profile)))
    for _name, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.refusal is not None,
                         timeout=15)
        await settle(pilot, app)  # the plan's worker ended without an error
        screen = app.screen
        assert f"{projects[0]}:execution-profile:v3" in screen.refusal.reason
        assert screen.unavailable()["run_upgrade"].startswith("the plan was refused: ")
        await pilot.press("U")
        await settle(pilot, app)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = '_sqlite_migrations'").fetchone()[0] == 0
    conn.close()


@pytest.mark.slow
async def test_its_own_connection_does_not_stop_any_step(demo_db, make_app):
    """The run re-asks who holds the file under every step's lock (atk18 upgrade finding 2); the
    TUI's own WAL connection stays open through the whole run, so its pid must reach every one of
    those checks (`others_ignored`), or the run would stop at its first step."""
    path = demo_db(release="1.8.22", requests=20)
    _wal(path)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, upgrade_planned(app), timeout=15)
        assert app.screen.plan.in_use_by == [] and app.screen.plan.force_required
        await pilot.press("U")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        await type_text(pilot, path.name)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None
                         and app.screen.plan.up_to_date, timeout=60, what="upgrade finished")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()[0] == 29
    conn.close()
