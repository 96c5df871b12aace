"""The merged approval queue: every reachable host's pending requests in one table, HOST first,
soonest expiry first across hosts. A decision goes to the row's own host (console/tui/fleet_monitor.py
`FleetMonitor.decide`), which re-checks everything in its own transaction with the actor it resolved;
the console asserts nothing. Rows of a host whose last read is not current are marked STALE and
cannot be decided; a read-only host's write keys are greyed with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll

from console.clock import parse_time
from console.services.approval_queue import action_summary, parse_json_field, requester_of
from console.services.projects import EXPIRING_SOON
from console.text import one_line
from console.tui.fleet_monitor import SAID_WIDTH
from console.tui.screens.fleet_base import FleetScreen, ListSource
from widgets.humane import countdown, plural
from widgets.key_values import Entry, KeyValues
from widgets.lazy_table import LazyTable
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static
from widgets.table_column import Column

FAR_FUTURE = datetime.max.replace(tzinfo=None)
VERB = {"approve": "Approve", "deny": "Deny"}
DETAIL_DELAY = 0.15  # seconds the cursor rests on a row before its host is asked for it


@dataclass(frozen=True)
class QueueRow:
    """One pending request as its host sent it, with what the table shows of it."""

    host: str
    id: str
    project: str
    kind: str
    expires_at: str | None
    requester: str
    summary: str
    stale: bool

    @property
    def key(self) -> tuple[str, str]:
        return (self.host, self.id)


def queue_row(host: str, row: dict, stale: bool) -> QueueRow:
    kind = row.get("action_kind")
    return QueueRow(
        host=host, id=row["id"],
        project=str(row.get("project_name") or row.get("project_id") or "-"),
        kind=str(kind or "-"),
        expires_at=row.get("expires_at") if isinstance(row.get("expires_at"), str) else None,
        requester=requester_of(parse_json_field(row.get("authority_json"))) or "-",
        summary=action_summary(kind, parse_json_field(row.get("action_json")), row.get("action_json")),
        stale=stale,
    )


def _expiry_key(row: QueueRow) -> tuple:
    when = parse_time(row.expires_at)
    return (when.replace(tzinfo=None) if when is not None else FAR_FUTURE, row.host, row.id)


class FleetQueueScreen(FleetScreen):
    COMMAND = "approvals"
    TITLE = "Fleet approvals"
    WRITE_ACTIONS = frozenset({"approve", "deny"})
    HELP_NOTES = (
        "Pending requests of every host, soonest expiry first across hosts; the host column says where each lives.\n"
        "a / d send the decision to that host only; it re-checks everything (four-eyes too) and records who you\n"
        "are as the host resolved it. STALE rows come from a host's last good read and cannot be decided.\n"
        "h cycles the host filter (:host NAME picks one, :host alone shows all); H or :hosts shows each host."
    )

    BINDINGS = [
        Binding("a", "approve", "Approve", id="fleet.approve"),
        Binding("d", "deny", "Deny", id="fleet.deny"),
        Binding("h", "cycle_host", "Host", id="fleet.host"),
        Binding("slash", "search", "Search", key_display="/", id="fleet.search"),
        Binding("H", "hosts", "Hosts", id="fleet.hosts"),
    ]

    def __init__(self, host: str | None = None) -> None:
        super().__init__()
        self.host_filter = host
        self.search: str | None = None
        self.rows: list[QueueRow] = []
        # The highlighted request as its host read it for the actor it resolved (`approvals show`):
        # its `options` grey a decision the host would refuse, its `confirm` asks for a typed one.
        self.detail: tuple[tuple[str, str], dict] | None = None
        self._detail_timer: Any = None

    # ------------------------------------------------------------ layout
    def compose_content(self) -> ComposeResult:
        yield Static(self._filter_text(), classes="filters", id="filters")
        with Horizontal(classes="main", id="main"):
            yield LazyTable(self._columns(), row_class=self._row_class, id="requests",
                            empty_message=self._empty_message())
            with VerticalScroll(classes="detail", id="detail"):
                yield KeyValues(Text("Select a request.", style="dim"), id="detail-head")

    def _columns(self) -> list[Column]:
        return [
            Column("host", "host", 11, render=self._host_cell),
            Column("id", "id", 12, render=lambda r: safe_text(
                r.id if len(r.id) <= 12 else "…" + r.id[-11:], one_line=True)),
            Column("project", "project", 10),
            Column("kind", "kind", 9),
            Column("expires_at", "expires", 8, render=self._expiry_cell),
            Column("requester", "requester", 8),
            Column("summary", "action", 5),
        ]

    def _host_cell(self, row: QueueRow) -> Text:
        text = safe_text(row.host, one_line=True)
        if row.stale:
            text.append(" STALE", style="bold yellow")
        return text

    def _expiry_cell(self, row: QueueRow) -> Text:
        when = parse_time(row.expires_at)
        label = countdown(when, self.fleet.now())
        if label == "expired":
            return Text(label, style="bold red")
        if when is not None and when - self.fleet.now() <= EXPIRING_SOON:
            return Text(f"! {label}", style="bold yellow")
        return Text(label)

    def _row_class(self, row: QueueRow) -> str | None:
        if row.stale:
            return "muted"
        when = parse_time(row.expires_at)
        if when is not None and when - self.fleet.now() <= EXPIRING_SOON:
            return "warning"
        return None

    def _empty_message(self) -> str:
        if self.fleet.problem:
            return self.fleet.problem
        phases = [s.phase for s in self.fleet.status.values()]
        if phases and all(p == "connecting" for p in phases):
            return "Connecting to the hosts…"
        if phases and all(p == "down" for p in phases):
            return "No host answered; H shows each host's reason."
        return "No pending requests on the hosts shown."

    def _filter_text(self) -> Text:
        text = Text("host ", style="dim")
        text.append_text(safe_text(self.host_filter or "all", "bold", one_line=True))
        if self.search:
            text.append("  text ", style="dim")
            text.append_text(safe_text(self.search, "bold", one_line=True))
        states = [s.phase for s in self.fleet.status.values()]
        text.append(f"   {plural(len(self.rows), 'request')}", style="dim")
        waiting = sum(1 for p in states if p == "connecting")
        down = sum(1 for p in states if p in ("down", "stale"))
        if waiting:
            text.append(f", {waiting} connecting", style="dim")
        if down:
            text.append(f", {down} not current", style="bold yellow")
        return text

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(LazyTable)
        table.focus()
        self._rebuild()
        self.set_interval(1.0, table.refresh)  # live countdown

    # ------------------------------------------------------------ rows
    def _rebuild(self) -> None:
        rows: list[QueueRow] = []
        for name, status in self.fleet.status.items():
            if self.host_filter and name != self.host_filter:
                continue
            stale = status.phase != "ok"
            rows += [queue_row(name, r, stale) for r in status.rows]
        if self.search:
            needle = self.search.casefold()
            rows = [r for r in rows if any(needle in str(v).casefold()
                                           for v in (r.host, r.id, r.project, r.kind, r.requester, r.summary))]
        rows.sort(key=_expiry_key)
        self.rows = rows
        table = self.query_one(LazyTable)
        table.empty_message = self._empty_message()
        table.set_source(ListSource(rows, lambda r: r.key), keep_cursor=True)
        self.query_one("#filters", Static).update(self._filter_text())

    def host_changed(self, status: Any) -> None:
        # A report before the screen is composed (on_mount reads it all), or while it is being taken
        # down (its widgets leave one by one): nothing to update.
        if not self._composed():
            return
        self._rebuild()

    @property
    def selected(self) -> QueueRow | None:
        tables = self.query(LazyTable)
        return tables.first().cursor_row if tables else None

    def on_lazy_table_cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        row = message.row
        if self.detail is not None and (row is None or self.detail[0] != row.key):
            self.detail = None
        self._show_detail(row)
        self.refresh_bindings_if_changed()
        if self._detail_timer is not None:
            self._detail_timer.stop()
        if row is not None and not row.stale and self.fleet.monitor is not None:
            # Once the cursor rests: scrolling past rows asks no host for each of them.
            self._detail_timer = self.set_timer(DETAIL_DELAY, lambda: self._ask_detail(row))

    def _ask_detail(self, row: QueueRow) -> None:
        monitor = self.fleet.monitor
        if monitor is not None and self.selected is not None and self.selected.key == row.key:
            monitor.show(row.host, row.id)

    def shown(self, value: Any) -> None:
        """The host's reading of a request arrived (called by the app on the UI thread)."""
        row = self.selected
        if row is None or (row.host, row.id) != (value.host, value.request_id):
            return  # read for a row the list no longer highlights
        self.detail = (row.key, value.data)
        self._show_detail(row)
        self.refresh_bindings_if_changed()

    def _host_says(self, field: str) -> dict[str, str]:
        """`options` or `confirm` of the highlighted request, as its host sent them (strings only)."""
        row = self.selected
        if self.detail is None or row is None or self.detail[0] != row.key:
            return {}
        value = self.detail[1].get(field)
        if not isinstance(value, dict):
            return {}
        return {a: one_line(why, SAID_WIDTH) for a, why in value.items()
                if a in self.WRITE_ACTIONS and isinstance(why, str) and why}

    def _composed(self) -> bool:
        """Every widget a host's report or a read updates is there: not before the screen is
        composed, nor while it is taken down at exit (its widgets leave one by one)."""
        return self.is_mounted and all(self.query(selector) for selector in (LazyTable, "#filters", "#detail-head"))

    def _show_detail(self, row: QueueRow | None) -> None:
        if not self._composed():
            return
        head = self.query_one("#detail-head", KeyValues)
        if row is None:
            head.update(Text(self._empty_message() if not self.rows else "Select a request.", style="dim"))
            return
        entries: list[Entry] = [
            (label, safe_text(value, one_line=True))
            for label, value in (("host", row.host), ("id", row.id), ("project", row.project), ("kind", row.kind),
                                 ("expires", row.expires_at or "-"), ("requester", row.requester),
                                 ("action", row.summary))]
        status = self.fleet.status.get(row.host)
        block = status.write_block() if status is not None else None
        if block:
            entries.append(safe_text(block, "bold yellow", one_line=True))
        for verb, why in sorted(self._host_says("options").items()):
            entries.append((verb, safe_text(f"not possible: {why}", "yellow", one_line=True)))
        head.put(entries)

    # ------------------------------------------------------------ filters
    def action_cycle_host(self) -> None:
        names = [None, *self.fleet.status]
        i = names.index(self.host_filter) if self.host_filter in names else 0
        self.set_host(names[(i + 1) % len(names)])

    def set_host(self, name: str | None) -> None:
        self.host_filter = name
        self._rebuild()

    def action_search(self) -> None:
        from widgets.filter_box import FilterBox

        FilterBox.open_on(self, "search", self.search, "text in host, id, project, kind, requester or action "
                          "(as you type; Enter keeps it, Escape undoes)", live=True)

    def on_filter_box_applied(self, message: Any) -> None:
        message.stop()
        if message.value != self.search:
            self.search = message.value
            self._rebuild()

    def action_hosts(self) -> None:
        self.fleet.show_screen("hosts")

    # ------------------------------------------------------------ decisions
    def unavailable(self) -> dict[str, str]:
        row = self.selected
        if row is None:
            return {a: "no request selected" for a in self.WRITE_ACTIONS}
        status = self.fleet.status.get(row.host)
        block = status.write_block() if status is not None else "unknown host"
        if block:
            return {a: block for a in self.WRITE_ACTIONS}
        return self._host_says("options")  # what the host would refuse, as it said it

    def action_approve(self) -> None:
        self._decide("approve")

    def action_deny(self) -> None:
        self._decide("deny")

    def _decide(self, verb: str) -> None:
        row = self.selected
        if row is None or verb in self.unavailable():
            self.action_why()
            return
        from console.tui.screens.confirm import Decision
        from console.tui.screens.reason import ReasonModal

        summary = Text(f"{VERB[verb]} ", end="")
        summary.append_text(safe_text(row.id, "bold", one_line=True))
        summary.append(" on host ")
        summary.append_text(safe_text(row.host, "bold", one_line=True))
        summary.append("\n")
        summary.append_text(safe_text(f"{row.kind} for {row.project}: {row.summary}", one_line=True))
        summary.append("\nrequested by ")
        summary.append_text(safe_text(row.requester, one_line=True))
        summary.append(f", expires {countdown(parse_time(row.expires_at), self.fleet.now())}")
        summary.append("\nThe host checks everything again (four-eyes too) and records the actor it resolved.",
                       style="dim")
        problem = self._host_says("confirm").get(verb)
        modal: Any
        if problem:  # four-eyes cannot be checked on the host: the approver confirms by typing, as locally
            from console.tui.screens.approvals import UNKNOWN_REQUESTER_CONFIRMATION
            from console.tui.screens.typed import TypedConfirmModal

            summary.append("\n\n")
            summary.append_text(safe_text(f"Four-eyes cannot be checked: {problem}.", "bold yellow"))
            summary.append("\nApprove only if you are not the person who requested it; your confirmation "
                           "is recorded with the decision.")
            modal = TypedConfirmModal(f"{VERB[verb]} request on {row.host}", summary,
                                      expected=UNKNOWN_REQUESTER_CONFIRMATION, ask_reason=True,
                                      confirm_label=VERB[verb])
        else:
            modal = ReasonModal(f"{VERB[verb]} request on {row.host}", summary, required=verb != "approve",
                                confirm_label=VERB[verb], danger=verb != "approve")

        def done(decision: Decision | None) -> None:
            monitor = self.fleet.monitor
            if decision is not None and monitor is not None:
                monitor.decide(row.host, verb, row.id, decision.reason or None, requester_unknown_ok=bool(problem))

        self.app.push_screen(modal, done)


__all__ = ["FleetQueueScreen", "QueueRow", "queue_row"]
