"""Driving the TUI as an operator does, for the adversarial tests."""

from __future__ import annotations

from tests.tui.test_flows import type_text, wait_until


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
