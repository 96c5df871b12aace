"""Errors become a dialog, never a crash: a refusal's sentence and hint, or an unexpected error."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button

from console.errors import ConsoleError, KeyFor
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


def describe_error(error: BaseException, key_for: KeyFor | None = None) -> tuple[str, Text]:
    """Title and body; a refusal's way out (`Remedy`) as the key `key_for` names, where the screen
    that shows it has one (console/errors.py)."""
    if isinstance(error, ConsoleError):
        reason, hint = error.render(key_for)
        body = safe_text(reason)
        if hint:
            body.append("\n\n")
            body.append_text(safe_text(hint, "italic"))
        title = "Refused" if error.exit_code == 1 else "The database cannot be used"
        return title, body
    return "Unexpected error", safe_text(f"{type(error).__name__}: {error}")


class ErrorModal(ModalScreen[None]):
    # Focus by the screen's own rule, not an on_mount query: a modal closed while it mounts (the app
    # shutting down) would otherwise raise NoMatches from a handler.
    AUTO_FOCUS = "#close"

    BINDINGS = [
        Binding("escape,enter,q", "close", "Close", id="error.close"),
    ]

    def __init__(self, error: BaseException, *, context: str = "", key_for: KeyFor | None = None) -> None:
        super().__init__()
        self.error = error
        self.context = context
        self.key_for = key_for
        self.stale = False  # what it says no longer holds (the release changed): gone when uncovered

    def on_screen_resume(self) -> None:
        if self.stale:
            self.dismiss(None)

    @property
    def says(self) -> tuple[str, str]:
        """What the dialog shows: two dialogs that say the same are one too many."""
        title, body = describe_error(self.error, self.key_for)
        return title, f"{self.context}\n{body.plain}"

    def compose(self) -> ComposeResult:
        title, body = describe_error(self.error, self.key_for)
        if self.context:
            head = Text(self.context + "\n\n", style="bold")
            head.append_text(body)
            body = head
        with Vertical(id="dialog", classes="danger"):
            yield Static(Text(title, style="bold"), id="dialog-title")
            yield Static(body, id="dialog-summary")
            yield Button("Close", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
