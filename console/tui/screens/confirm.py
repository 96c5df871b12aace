"""Confirmation that scales with risk: the shared action dialog and its y/n form.

An action dialog shows what will happen before it happens. A dialog that acts on a row is given
`watching=Watched(key, action, seen)` when it is built: the one way a dialog watches its row. While
it is open the screen re-reads row `key`, and if the fields in `seen` changed (another process
decided the request, released the claim) it calls `changed_underneath`; the dialog says so, shows
the new situation, and refuses to confirm if the action no longer applies. The service re-checks in
its own transaction regardless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Hashable, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button

from widgets.safe_widgets import Static


@dataclass(frozen=True)
class Decision:
    """What a dialog with a reason field returns when confirmed ('' when optional and left empty);
    a cancelled dialog returns None instead, never an empty Decision."""

    reason: str


@dataclass(frozen=True)
class Watched:
    """The row a dialog acts on, as the screen saw it when the dialog opened: the screen re-reads
    row `key` while the dialog is open and compares what it finds with `seen` (the fields that
    decide whether `action` still applies)."""

    key: Hashable
    action: str = ""
    seen: tuple[Any, ...] = ()


T = TypeVar("T")


class ActionModal(ModalScreen[T], Generic[T]):
    """Title, what will happen, an optional warning line, and confirm/cancel buttons.

    Subclasses say what a confirmation returns (`result_value`) and what cancel returns
    (`cancel_value`): `ConfirmModal` is a `ModalScreen[bool]` (False on cancel), the dialogs with a
    reason are `ModalScreen[Decision | None]` (None on cancel)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="modal.cancel")]

    def __init__(self, title: str, summary: Text, *, confirm_label: str = "Confirm",
                 danger: bool = False, watching: Watched | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.summary = summary
        self.confirm_label = confirm_label
        self.danger = danger
        self.watching = watching  # fixed when the dialog is built: what the screen re-checks
        self.blocked_reason: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="danger" if self.danger else ""):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(self.summary, id="dialog-summary")
            yield Static("", id="dialog-warning")
            yield from self.compose_body()
            with Horizontal(id="dialog-buttons"):
                yield Button(self.confirm_label, id="confirm", variant="error" if self.danger else "primary")
                yield Button("Cancel", id="cancel")

    def compose_body(self) -> ComposeResult:
        return
        yield

    def on_mount(self) -> None:
        self.query_one("#dialog-warning").display = False

    def changed_underneath(self, summary: Text, blocked_reason: str | None) -> None:
        """The row changed while the dialog was open: show the new state; block if it no longer applies."""
        self.summary = summary
        self.blocked_reason = blocked_reason
        self.query_one("#dialog-summary", Static).update(summary)
        warning = Text("Changed while this dialog was open. ", style="bold")
        warning.append(blocked_reason or "Review the new state above before confirming.")
        box = self.query_one("#dialog-warning", Static)
        box.update(warning)
        box.display = True
        self.query_one("#confirm", Button).disabled = blocked_reason is not None

    def result_value(self) -> T:
        raise NotImplementedError

    def cancel_value(self) -> T:
        raise NotImplementedError

    def can_confirm(self) -> bool:
        return self.blocked_reason is None

    def action_confirm(self) -> None:
        if self.can_confirm():
            self.dismiss(self.result_value())

    def action_cancel(self) -> None:
        self.dismiss(self.cancel_value())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()


class ConfirmModal(ActionModal[bool]):
    """Low risk: y confirms (True), n or Escape cancels (False)."""

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="modal.yes"),
        Binding("n", "cancel", "No", id="modal.no"),
        Binding("escape", "cancel", "Cancel", id="modal.cancel"),
    ]

    def __init__(self, title: str, summary: Text, **kwargs: Any) -> None:
        kwargs.setdefault("confirm_label", "Yes (y)")
        super().__init__(title, summary, **kwargs)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#confirm", Button).focus()

    def result_value(self) -> bool:
        return True

    def cancel_value(self) -> bool:
        return False
