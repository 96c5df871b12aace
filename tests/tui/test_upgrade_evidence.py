"""The upgrade screen shows rule 1's evidence gate: a contradiction is the refusal, and `U` cannot run."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.tui.screens.upgrade import UpgradeScreen
from tests.tui.pilot import settle, wait_until

pytestmark = pytest.mark.slow


def _contradict(path) -> str:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER preserve_execution_profile_revision")
    rev_id, profile_json = conn.execute(
        "SELECT id, profile_json FROM execution_profile_revisions ORDER BY id LIMIT 1").fetchone()
    spaced = json.dumps(json.loads(profile_json), sort_keys=True)  # same fingerprint, other bytes
    conn.execute("UPDATE execution_profile_revisions SET profile_json = ? WHERE id = ?", (spaced, rev_id))
    conn.close()
    return rev_id


async def test_refused_plan_names_the_row_and_disables_the_run(demo_db, make_app):
    path = demo_db(release="1.8.22", requests=20)
    rev_id = _contradict(path)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None,
                         timeout=15)
        screen = app.screen
        assert screen.plan.profile_evidence.contradicted
        reason = screen.unavailable()["run_upgrade"]
        assert "start archon 1.10.0 once" in reason
        rendered = screen._render_plan(screen.plan)
        text = "".join(getattr(r, "plain", "") for r in getattr(rendered, "renderables", [rendered]))
        assert "Refused: " in text and rev_id in text
        await pilot.press("U")  # greyed: nothing is written
        await settle(pilot, app)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = '_sqlite_migrations'").fetchone()[0] == 0
    conn.close()
