"""Driving the TUI as an operator does, for the adversarial tests."""

from __future__ import annotations

from widgets.safe_text import is_clean


async def open_screen(pilot, command: str) -> None:
    """Escape to the list, then `:command` Enter, typed key by key."""
    await pilot.press("escape")
    await pilot.press(":")
    await pilot.pause(0.1)
    for ch in command:
        await pilot.press("space" if ch == " " else ch)
    await pilot.press("enter")


def _segments(app):
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            yield segment.text


async def _assert_screen_clean(pilot, app, where: str, seen: list[str]):
    await pilot.pause(0.4)
    texts = list(_segments(app))
    bad = [t for t in texts if not is_clean(t, allow_newlines=False)]
    assert not bad, f"{where}: {bad[:3]!r}"
    seen.append("".join(texts))
