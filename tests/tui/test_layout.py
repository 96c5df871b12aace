"""The narrow layout follows the terminal's width through Textual's HORIZONTAL_BREAKPOINTS: below
110 columns the table stacks over the detail, on every list screen, and a resize switches it on
the visible screen and on the screens beneath it."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def _until(pilot, predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


def _layout(screen) -> str | None:
    """The layout of the screen's table-and-detail row, None until the screen has composed it."""
    found = screen.query("#main")
    return found.first().styles.layout.name if found else None


async def test_resizing_switches_the_layout_of_every_screen(demo_db, make_app):
    app = make_app(demo_db())
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: isinstance(app.screen, ApprovalsScreen), "the approvals screen")
        approvals = app.screen
        await _until(pilot, lambda: _layout(approvals) == "horizontal", "the wide layout")

        await pilot.resize_terminal(80, 24)
        await _until(pilot, lambda: _layout(approvals) == "vertical", "the narrow layout")

        await pilot.press("colon", *"envs", "enter")
        await _until(pilot, lambda: isinstance(app.screen, EnvironmentsScreen), "the environments screen")
        envs = app.screen
        await _until(pilot, lambda: _layout(envs) is not None, "the environments table")
        assert _layout(envs) == "vertical"  # a screen opened while narrow starts narrow

        await pilot.resize_terminal(130, 36)
        await _until(pilot, lambda: _layout(envs) == "horizontal", "the wide layout")
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is approvals, "back on approvals")
        await _until(pilot, lambda: _layout(approvals) == "horizontal", "the screen beneath to follow")


def test_no_screen_measures_the_width_itself():
    """Breakpoints live in the app (HORIZONTAL_BREAKPOINTS) and sizes in app.tcss, not in screens."""
    pattern = re.compile(r"set_class\([^)]*width|styles\.(height|width)\s*=")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "console" / "tui" / "screens").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_the_first_frame_of_a_narrow_terminal_is_already_narrow(demo_db):
    """A real process on a 100-column pseudo-terminal: its first complete frame shows the narrow
    layout's dozen rows, not the wide layout's two dozen (Textual applies breakpoints on the first
    Resize, after the first paint; the wide layout flashed and read rows for nothing)."""
    import sys

    from bench.pty_term import FRAME_END, ROW_ID, Terminal

    path = demo_db()
    env = dict(os.environ, ARCHON_CONSOLE_NOW="2025-06-01 12:00:00", ARCHON_CONSOLE_KEYMAP="/nonexistent",
               ARCHON_CONSOLE_CONFIG="/nonexistent")
    term = Terminal([sys.executable, "-m", "console", "--db", str(path)], env, 100, 30)
    try:
        term.wait_new_ids(0, 5, timeout=60)
        first = term.buffer.find(FRAME_END)
        ids = {m.group() for m in ROW_ID.finditer(term.buffer, 0, first)}
    finally:
        term.close()
    assert 5 <= len(ids) <= 15, len(ids)
