"""A decision that records why: the action dialog with a reason field (required or optional).

The field is a `ReasonBox`, a few-line text area: a pasted reason keeps every line, as
`--reason` on the command line does (the services accept newlines; console/services/base.py
`validate_reason`), so the same text stores the same reason from either front end. A one-line
Input kept only the first line of a paste, silently. Enter still confirms, as in every dialog.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from console.tui.screens.confirm import ActionModal, Decision
from console.services.base import REASON_MAX_BYTES
from widgets.safe_widgets import Static


class ReasonBox(TextArea):
    """A reason field that keeps a pasted text whole (every line) and confirms on Enter."""

    class Submitted(Message):
        def __init__(self, box: "ReasonBox") -> None:
            super().__init__()
            self.box = box

    def __init__(self, *, placeholder: str, id: str) -> None:
        super().__init__(id=id, soft_wrap=True, tab_behavior="focus", show_line_numbers=False,
                         placeholder=placeholder)

    @property
    def value(self) -> str:
        """The reason as typed or pasted, every line of it."""
        return self.text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":  # typing Enter confirms; a newline comes only with a paste
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self))
            return
        await super()._on_key(event)


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
        yield ReasonBox(placeholder="why; recorded in the audit trail", id="reason")
        yield Static("", id="reason-error")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#reason", ReasonBox).focus()

    def on_reason_box_submitted(self, event: ReasonBox.Submitted) -> None:
        event.stop()
        self.action_confirm()

    def reason(self) -> str:
        return self.query_one("#reason", ReasonBox).value.strip()

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
