"""`Y` on the approval queue copies the request as JSON: archon's columns as stored (the two JSON
columns parsed), what the console derived and the history, without the actor's options."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from tests.tui.pilot import ready, select, wait_until

pytestmark = pytest.mark.slow

REQUEST = "apr-00000192"


def _stored(path, sql: str) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, (REQUEST,))]
    finally:
        conn.close()


async def test_copied_json_is_the_request_as_stored_and_derived(demo_db, make_app):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, REQUEST)
        await wait_until(pilot, lambda: getattr(app.screen.detail, "id", None) == REQUEST, what="detail")
        ident, payload = app.screen.copy_target()
    row = _stored(path, "SELECT * FROM approval_requests WHERE id = ?")[0]
    events = _stored(path, "SELECT * FROM approval_request_events WHERE approval_request_id = ? ORDER BY sequence")
    assert ident == REQUEST
    assert list(payload)[:len(row)] == list(row)
    assert payload["action_json"] == json.loads(row["action_json"])
    assert payload["authority_json"] == json.loads(row["authority_json"])
    assert {k: v for k, v in payload.items() if k in row and not k.endswith("_json")} == \
        {k: v for k, v in row.items() if not k.endswith("_json")}
    assert payload["events"] == events and payload["project_name"] and "overdue" in payload
    assert "options" not in payload and "confirm" in payload
