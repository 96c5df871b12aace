"""High risk: the operator types the exact name (environment id, database file) to confirm."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Input

from console.tui.screens.confirm import ActionModal, Decision
from console.tui.screens.reason import ReasonBox
from widgets.line_input import LineInput
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


class TypedConfirmModal(ActionModal["Decision | None"]):
    """Returns the `Decision` with the reason typed (maybe '') once `expected` was typed exactly;
    None when cancelled."""

    def __init__(self, title: str, summary: Text, *, expected: str, ask_reason: bool = False,
                 reason_required: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("danger", True)
        super().__init__(title, summary, **kwargs)
        self.expected = expected
        self.ask_reason = ask_reason
        self.reason_required = reason_required

    def compose_body(self) -> ComposeResult:
        prompt = Text("Type ", style="bold")
        prompt.append_text(safe_text(self.expected, "bold reverse"))
        prompt.append(" to confirm:", style="bold")
        yield Static(prompt, id="typed-prompt")
        yield LineInput(id="typed", placeholder=self.expected[:40])
        if self.ask_reason:
            label = "Reason (required)" if self.reason_required else "Reason (optional)"
            yield Static(Text(label, style="bold"))
            yield ReasonBox(id="reason", placeholder="why; recorded in the audit trail")
        yield Static("", id="typed-error")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#typed", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "typed" and self.ask_reason:
            self.query_one("#reason", ReasonBox).focus()
            return
        self.action_confirm()

    def on_reason_box_submitted(self, event: ReasonBox.Submitted) -> None:
        event.stop()
        self.action_confirm()

    def _reason(self) -> str:
        return self.query_one("#reason", ReasonBox).value.strip() if self.ask_reason else ""

    def can_confirm(self) -> bool:
        if not super().can_confirm():
            return False
        error = self.query_one("#typed-error", Static)
        if not self.typed_matches(self.query_one("#typed", Input).value):
            error.update(Text("That is not the exact name; nothing was done.", style="bold red"))
            return False
        if self.reason_required and not self._reason():
            error.update(Text("A reason is required.", style="bold red"))
            return False
        return True

    def typed_matches(self, typed: str) -> bool:
        """What was typed names `expected`, whitespace around it aside: a pasted id comes with a
        leading space or a trailing newline more often than not (the CLI's typed confirmation,
        console/cli/commands/upgrade.py, strips its answer the same way)."""
        return typed.strip() == self.expected.strip() != "" or typed == self.expected

    def result_value(self) -> Decision | None:
        return Decision(self._reason())

    def cancel_value(self) -> Decision | None:
        return None
