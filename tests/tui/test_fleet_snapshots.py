"""SVG snapshots of the fleet console at 80x24: the merged queue and the hosts screen, over fixed
hosts (tests/tui/fleet_helpers.py `FixedLink`) with the clock frozen: one host fine, one answering
from its cache (STALE), one read-only (a shared account), one refused, one black-holed.

Update after an intended change with `pytest tests/tui/test_fleet_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from tests.tui.fleet_helpers import NOW_TEXT, HostConfig, fleet_link, settled
from tests.tui.pilot import wait_until

pytestmark = pytest.mark.slow

def make_fleet_app(monkeypatch):
    from console.tui.fleet_app import FleetConsole

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW_TEXT)
    link = fleet_link()
    return FleetConsole([HostConfig(name) for name in link.hosts], link, poll_seconds=3600)


def test_merged_queue(snap_compare, monkeypatch):
    app = make_fleet_app(monkeypatch)

    async def run_before(pilot):
        await settled(pilot, app)  # the cursor on ap3's row (soonest expiry): read-only, a and d greyed

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_hosts_screen(snap_compare, monkeypatch):
    app = make_fleet_app(monkeypatch)

    async def run_before(pilot):
        await settled(pilot, app)
        await pilot.press("H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        await pilot.press("down")
        await settled(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
