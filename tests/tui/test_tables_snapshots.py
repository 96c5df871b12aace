"""SVG snapshots of `:tables`, a table and `:sql` at 80x24 (frozen clock, seeded demo data), kept beside
tests/tui/test_snapshots.py with the same scene machinery (tests/tui/scenes.py).

Update after an intended change with `pytest tests/tui/test_tables_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from tests.tui.scenes import Scene, settle

pytestmark = pytest.mark.slow


def _loaded(name: str):
    def ready(app) -> bool:
        if type(app.screen).__name__ != name:
            return False
        table = app.screen.query_one("LazyTable")
        return table.total_exact and table.visible_loaded and not table._pending and bool(table.columns)
    return ready


def _sql_counted(app) -> bool:
    return _loaded("SqlScreen")(app) and "rows" in str(app.screen.query_one("#sql-status").render())


SCENES = (
    Scene("tables", "tables", ("down", "down"), _loaded("TablesScreen")),
    Scene("table", "tables tickets", ("down",), _loaded("TableScreen")),
    Scene("sql", "sql SELECT id, project_id, title, x'00ff' AS b, NULL AS n FROM tickets ORDER BY id", ("down",),
          _sql_counted),
    Scene("sql-refused", "sql DELETE FROM tickets", (),
          lambda app: "Refused" in str(app.screen.query_one("#sql-status").render())),
)


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.name)
def test_screen(scene, snap_compare, demo_db, make_app):
    path = demo_db()
    app = make_app(path, start=scene.start, poll_seconds=3600)

    async def run_before(pilot):
        await settle(pilot, app, scene)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)

