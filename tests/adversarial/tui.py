"""Driving the TUI as an operator does, for the adversarial tests."""

from __future__ import annotations

from tests.tui.pilot import settle, type_text, wait_until
from widgets.safe_text import is_clean


async def open_screen(pilot, command: str) -> None:
    """Escape to the list, then `:command` Enter, typed key by key into the command line once it
    has the focus."""
    from console.tui.screens.command_line import CommandLine

    app = pilot.app
    await pilot.press("escape")
    await pilot.press(":")
    await wait_until(pilot, lambda: isinstance(app.screen, CommandLine)
                     and app.focused is app.screen.query_one("#command-input"), what="the command line")
    await type_text(pilot, command)
    await pilot.press("enter")


def _segments(app):
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            yield segment.text


async def _assert_screen_clean(pilot, app, where: str, seen: list[str]):
    await settle(pilot, app)  # what the last key started has finished and is painted
    texts = list(_segments(app))
    bad = [t for t in texts if not is_clean(t, allow_newlines=False)]
    assert not bad, f"{where}: {bad[:3]!r}"
    seen.append("".join(texts))
