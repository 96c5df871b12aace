"""Driving the TUI as an operator does, for the adversarial tests."""

from __future__ import annotations


async def open_screen(pilot, command: str) -> None:
    """Escape to the list, then `:command` Enter, typed key by key."""
    await pilot.press("escape")
    await pilot.press(":")
    await pilot.pause(0.1)
    for ch in command:
        await pilot.press("space" if ch == " " else ch)
    await pilot.press("enter")
