"""`make screenshots`: SVGs of every screen at 80x24 and 120x40 into screenshots/.

The same scenes as the snapshot tests, on a demo database generated with a fixed seed and
clock, so the pictures only change when the console does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path
from unittest import mock

from tests.tui.conftest import NOW_TEXT, make_ctx
from console import isolation
from tests.tui.scenes import SCENES, fixed_free_space, settle

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZES = ((80, 24), (120, 40))


async def shoot(scene, size, db: Path, out: Path) -> Path:
    from console.tui.app import ArchonConsole

    with mock.patch.dict(os.environ, dict(scene.env)):  # NO_COLOR is read when the app is made
        app = ArchonConsole(make_ctx(db, read_only=scene.read_only), start=scene.start, poll_seconds=3600)
    async with app.run_test(size=size, notifications=True) as pilot:  # toasts are part of some scenes
        await settle(pilot, app, scene)
        name = f"{scene.name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(name, str(out))
    return out / name


FLEET_SHOTS = ("fleet-approvals", "fleet-hosts")


async def shoot_fleet(name: str, size, out: Path) -> Path:
    """The fleet console over the fixed hosts of its snapshot tests (tests/tui/fleet_helpers.py `fleet_link`, as in the snapshot tests:
    one fine, one STALE, one read-only shared account, one refused, one black-holed)."""
    from console.tui.fleet_app import FleetConsole
    from tests.tui.fleet_helpers import HostConfig, fleet_link, settled
    from tests.tui.pilot import wait_until

    link = fleet_link()
    app = FleetConsole([HostConfig(host) for host in link.hosts], link, poll_seconds=3600)
    async with app.run_test(size=size) as pilot:
        await settled(pilot, app)
        if name == "fleet-hosts":
            await pilot.press("H")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
            await settled(pilot, app)
        file = f"{name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(file, str(out))
    return out / file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["ARCHON_CONSOLE_KEYMAP"] = "/nonexistent/keymap.toml"
    from console.demo.writer import generate

    with tempfile.TemporaryDirectory() as tmp, \
            mock.patch("console.db.snapshot.free_bytes", lambda path: 42 * 1024**3), \
            mock.patch("console.tui.session.call_isolated", fixed_free_space(isolation.call_isolated)):
        masters = {}
        for scene in SCENES:
            for size in SIZES:
                if scene.release not in masters:
                    master = Path(tmp) / f"master-{scene.release}.db"
                    generate(master, release=scene.release, requests=200, seed=7, now=NOW_TEXT,
                             overwrite=True, wal=False)
                    masters[scene.release] = master
                db = Path(tmp) / f"{scene.name}-{size[0]}" / "archon.db"
                db.parent.mkdir()
                db.write_bytes(masters[scene.release].read_bytes())
                print(asyncio.run(shoot(scene, size, db, args.out)))
    with mock.patch.dict(os.environ, {"ARCHON_CONSOLE_NOW": NOW_TEXT}):
        for name in FLEET_SHOTS:
            for size in SIZES:
                print(asyncio.run(shoot_fleet(name, size, args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
