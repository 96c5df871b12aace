"""A decision that records why: the action dialog with a reason field (required or optional)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from console.tui.screens.confirm import ActionModal, Decision
from console.services.base import REASON_MAX_BYTES
from widgets.safe_widgets import Static


class ReasonModal(ActionModal["Decision | None"]):
    """Returns the `Decision` with its reason ('' when optional and left empty), or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="modal.cancel"),
        Binding("ctrl+s", "confirm", "Confirm", id="modal.confirm"),
    ]

    def __init__(self, title: str, summary: Text, *, required: bool, **kwargs: Any) -> None:
        super().__init__(title, summary, **kwargs)
        self.required = required

    def compose_body(self) -> ComposeResult:
        label = "Reason (required)" if self.required else "Reason (optional)"
        yield Static(Text(label, style="bold"), id="reason-label")
        yield Input(placeholder="why; recorded in the audit trail", id="reason",
                    max_length=REASON_MAX_BYTES)
        yield Static("", id="reason-error")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#reason", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_confirm()

    def reason(self) -> str:
        return self.query_one("#reason", Input).value.strip()

    def can_confirm(self) -> bool:
        if not super().can_confirm():
            return False
        if self.required and not self.reason():
            self.query_one("#reason-error", Static).update(Text("A reason is required.", style="bold red"))
            return False
        if len(self.reason().encode()) > REASON_MAX_BYTES:
            self.query_one("#reason-error", Static).update(
                Text(f"At most {REASON_MAX_BYTES} bytes; it is never cut silently.", style="bold red"))
            return False
        return True

    def result_value(self) -> Decision | None:
        return Decision(self.reason())

    def cancel_value(self) -> Decision | None:
        return None
