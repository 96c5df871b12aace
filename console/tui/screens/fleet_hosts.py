"""The hosts screen: one row per host, painted at once (every host starts as `connecting…`) and
updated row by row as each host answers, so a black-holed host never delays the others. The state
says in one sentence why a host is down; STALE rows carry their age."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll

from console.clock import parse_time
from console.tui.fleet_monitor import HostStatus
from console.tui.screens.fleet_base import FleetScreen, ListSource
from widgets.humane import age, countdown
from widgets.key_values import KeyValues
from widgets.lazy_table import LazyTable
from widgets.safe_text import safe_text
from widgets.table_column import Column

PHASE_STYLE = {"connecting": "dim", "ok": "green", "stale": "bold yellow", "down": "bold red"}


def state_label(status: HostStatus) -> str:
    """connecting… / ok / read-only / STALE 4m / down: the reason."""
    if status.phase == "connecting":
        return "connecting…"
    if status.phase == "stale":
        return f"STALE {age(status.age_now())}"
    if status.phase == "down":
        return f"down: {status.sentence or 'no answer'}"
    return "read-only" if status.read_only_reason else "ok"


def identity(status: HostStatus) -> str:
    if not status.actor:
        return "-"
    return f"{status.actor} ({status.actor_source})" if status.actor_source else status.actor


class FleetHostsScreen(FleetScreen):
    COMMAND = "hosts"
    TITLE = "Fleet hosts"
    HELP_NOTES = (
        "Each host's state: connecting…, ok, read-only, STALE with the age of its last good read, or down with\n"
        "the reason. d runs doctor on the selected host; r reads it again now; Enter shows its requests."
    )

    BINDINGS = [
        Binding("escape", "back", "Back", id="fleet.back"),
        Binding("d", "doctor", "Doctor", id="fleet.doctor"),
        Binding("r", "reconnect", "Read now", id="fleet.reconnect"),
    ]

    def compose_content(self) -> ComposeResult:
        with Horizontal(classes="main", id="main"):
            yield LazyTable(self._columns(), id="hosts", empty_message=self.fleet.problem or "No hosts selected.")
            with VerticalScroll(classes="detail", id="detail"):
                yield KeyValues(Text("Select a host.", style="dim"), id="host-detail")

    def _columns(self) -> list[Column]:
        return [
            Column("name", "host", 8),
            Column("phase", "state", 16, render=lambda s: safe_text(
                state_label(s), PHASE_STYLE.get(s.phase, ""), one_line=True)),
            Column("release", "release", 8, render=lambda s: safe_text(s.release or "-", one_line=True)),
            Column("pending", "pend", 4, render=lambda s: Text("-" if s.pending is None else str(s.pending))),
            Column("oldest", "oldest", 8, render=self._oldest_cell),
            Column("actor", "as", 12, render=lambda s: safe_text(identity(s), one_line=True)),
            Column("doctor", "doctor", 6, render=lambda s: safe_text(s.doctor or "d: run", one_line=True)),
        ]

    def _oldest_cell(self, status: HostStatus) -> Text:
        oldest = status.oldest_expiry
        return Text(countdown(parse_time(oldest), self.fleet.now()) if oldest else "-")

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(LazyTable)
        table.focus()
        self._rebuild()
        self.set_interval(1.0, table.refresh)  # ages and countdowns

    def _rebuild(self) -> None:
        rows = list(self.fleet.status.values())
        self.query_one(LazyTable).set_source(ListSource(rows, lambda s: s.name), keep_cursor=True)

    def host_changed(self, status: Any) -> None:
        if not self.query(LazyTable):  # a report before the screen was composed: on_mount reads it all
            return
        self._rebuild()
        selected = self.query_one(LazyTable).cursor_row
        if selected is not None and selected.name == status.name:
            self._show_detail(status)

    def on_lazy_table_cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        if message.row is not None:
            self._show_detail(self.fleet.status.get(message.row.name, message.row))

    def _show_detail(self, status: HostStatus) -> None:
        lines = [("host", status.name), ("state", state_label(status)),
                 ("reason", status.sentence or "-"), ("release", status.release or "-"),
                 ("as", identity(status)), ("writes", status.write_block() or "allowed"),
                 ("pending", "-" if status.pending is None else str(status.pending)),
                 ("oldest", status.oldest_expiry or "-"), ("doctor", status.doctor or "d runs it")]
        self.query_one("#host-detail", KeyValues).put([(label, safe_text(value, one_line=True))
                                                       for label, value in lines])

    def _selected(self) -> HostStatus | None:
        tables = self.query(LazyTable)
        return tables.first().cursor_row if tables else None

    def action_doctor(self) -> None:
        status, monitor = self._selected(), self.fleet.monitor
        if status is None or monitor is None:
            return
        if status.phase != "ok":
            self.notify(f"{status.name} is not connected; doctor runs once it is.", severity="warning", markup=False)
            return
        monitor.doctor(status.name)

    def action_reconnect(self) -> None:
        status, monitor = self._selected(), self.fleet.monitor
        if monitor is not None:
            monitor.refresh(status.name if status is not None else None)

    def on_lazy_table_row_activated(self, message: LazyTable.RowActivated) -> None:
        """Enter on a host: the queue, showing that host's requests."""
        self.fleet.show_screen("approvals", message.row.name)

    def action_back(self) -> None:
        self.fleet.show_screen("approvals")


__all__ = ["FleetHostsScreen", "identity", "state_label"]
