"""The k9s-style `:` command line: one input at the bottom, completing screen names."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input

from widgets.line_input import LineInput

from console.tui.screens.registry import SCREENS, command_words


def _suggestions() -> list[str]:
    words = []
    for entry in SCREENS:
        words.append(entry.name + (" " if entry.argument else ""))
    words += ["help", "quit", "q"]
    return words


class CommandLine(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="command.cancel")]

    def compose(self) -> ComposeResult:
        yield LineInput(placeholder=f"{command_words()} | help | quit",
                    suggester=SuggestFromList(_suggestions(), case_sensitive=False), id="command-input")

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.border_title = ":"
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
