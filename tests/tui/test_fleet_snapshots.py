"""SVG snapshots of the fleet console at 80x24: the merged queue and the hosts screen, over fixed
hosts (tests/tui/fleet_helpers.py `FixedLink`) with the clock frozen: one host fine, one answering
from its cache (STALE), one read-only (a shared account), one refused, one black-holed.

Update after an intended change with `pytest tests/tui/test_fleet_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from tests.tui.fleet_helpers import NOW_TEXT, FixedLink, HostConfig, request_row
from tests.tui.pilot import wait_until

pytestmark = pytest.mark.slow

HELLO = {"archon_release": "1.10.0", "actor": "alice", "actor_source": "forced_command", "read_only": False}


def fleet_link() -> FixedLink:
    return FixedLink({
        "eu1": ("ok", HELLO, [
            request_row("apr-00000011", "billing", "git_push", "2025-06-01 12:40:00", "dave",
                        {"remote": "origin", "branch": "main"}),
            request_row("apr-00000019", "atlas-api", "custom_check", "2025-06-01 15:00:00", "erin",
                        {"command": "make test"}),
        ]),
        "us2": ("stale", dict(HELLO, archon_release="1.8.22"), [
            request_row("apr-00000007", "ml-pipeline", "git_push", "2025-06-01 13:10:00", "carol",
                        {"remote": "origin", "branch": "feature/x"}),
        ], "us2: ssh: connect to host us2 port 22: Connection timed out", 240),
        "ap3": ("ok", dict(HELLO, actor="ops", actor_source="shared_account", read_only=True), [
            request_row("apr-00000003", "docs", "custom_check", "2025-06-01 12:20:00", "frank",
                        {"command": "lint"}),
        ]),
        "sa4": ("down", "sa4: ssh: connect to host sa4 port 22: Connection refused"),
        "bh5": ("hang",),
    })


def make_fleet_app(monkeypatch):
    from console.tui.fleet_app import FleetConsole

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW_TEXT)
    link = fleet_link()
    return FleetConsole([HostConfig(name) for name in link.hosts], link, poll_seconds=3600)


async def settled(pilot, app) -> None:
    """Every host but the black-holed one has answered (the STALE one twice: rows, then its age)."""
    app.animation_level = "none"
    await wait_until(pilot, lambda: [s.phase for s in app.status.values()]
                     == ["ok", "stale", "ok", "down", "connecting"], what="every host's answer")
    await wait_until(pilot, lambda: len(app.screen.rows) == 4 if hasattr(app.screen, "rows") else True,
                     what="the merged rows")
    app.screen.refresh_bindings()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


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
