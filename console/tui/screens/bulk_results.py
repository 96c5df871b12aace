"""After a bulk decision: one line per request with what happened to it."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button

from console.errors import KeyFor
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


class BulkResultsModal(ModalScreen[None]):
    # Focus by the screen's own rule: an on_mount query raises when the app closes mid-mount.
    AUTO_FOCUS = "#close"

    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="bulk.close")]

    def __init__(self, title: str, results: Sequence[Any], key_for: KeyFor | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.results = list(results)
        self.key_for = key_for  # the screen's keys, for a refusal's way out (console/errors.py `Remedy`)

    def _message(self, result: Any) -> str:
        refusal = getattr(result, "refusal", None)
        if refusal is None:
            return result.message
        return " ".join(filter(None, refusal.render(self.key_for)))

    def compose(self) -> ComposeResult:
        done = sum(1 for r in self.results if r.ok)
        table = Table(box=None, expand=True, show_edge=False)
        table.add_column("", width=2)
        table.add_column("request", ratio=1, no_wrap=True)
        table.add_column("result", ratio=3)
        for r in self.results:
            mark = Text("✓", style="bold green") if r.ok else Text("✗", style="bold red")
            table.add_row(mark, safe_text(r.id, one_line=True), safe_text(self._message(r)))
        summary = Text(f"{done} of {len(self.results)} done", style="bold")
        if done < len(self.results):
            summary.append(f", {len(self.results) - done} refused", style="bold red")
        with Vertical(id="dialog", classes="wide"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(summary)
            with VerticalScroll(id="bulk-list"):
                yield Static(table)
            yield Button("Close", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
