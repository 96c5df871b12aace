"""SVG snapshots of every screen at 80x24 and 120x40 (frozen clock, seeded demo data).

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from console import isolation
from tests.tui.scenes import FREE_BYTES, SCENES, fixed_free_space, settle

pytestmark = pytest.mark.slow

SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.name)
def test_screen(scene, size, snap_compare, demo_db, make_app, monkeypatch):
    monkeypatch.setattr("console.db.snapshot.free_bytes", lambda path: FREE_BYTES)
    monkeypatch.setattr("console.tui.session.call_isolated", fixed_free_space(isolation.call_isolated))
    for name, value in scene.env:
        monkeypatch.setenv(name, value)
    path = demo_db(release=scene.release, requests=200 if scene.release == "current" else 20)
    app = make_app(path, read_only=scene.read_only, start=scene.start, poll_seconds=3600)

    async def run_before(pilot):
        await settle(pilot, app, scene)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
