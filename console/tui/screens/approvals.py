"""The approval queue: pending requests by time to expiry, decided through dialogs that say what
will happen. Rows come page by page from `services.approval_queue`; decisions go through
`services.approvals`, which re-checks everything inside its own transaction."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message

from console.errors import Refusal
from console.models.approvals import KINDS, ApprovalDetail, ApprovalRequest, DecisionBatch
from console.tui.screens.approval_detail import (
    SHORT_ID,
    VERB,
    age_cell,
    bulk_summary,
    expiry_cell,
    row_class,
    detail_events,
    detail_fields,
    short_id_cell,
    summary_cell,
    what_happens,
)
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.confirm import Watched
from console.tui.screens.list_filters import ListFilters
from console.services import approval_queue as queue
from console.services import approvals as decisions
from console.text import read_json
from widgets.humane import plural
from widgets.json_view import JsonView
from widgets.key_values import KeyValues
from widgets.lazy_table import LazyTable
from widgets.page_source import Preload
from widgets.table_column import Column
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static
from widgets.timeline import Timeline
from console.tui.screens.pages import ApprovalsSource

if TYPE_CHECKING:  # the dialogs are imported when first used, not at start-up
    from console.tui.screens.confirm import ActionModal, Decision

STATUS_CYCLE: tuple[tuple[str, ...] | None, ...] = (
    ("pending",), ("approved",), ("pending", "approved"), None,
    ("denied",), ("expired",), ("consumed",), ("cancelled", "invalidated"),
)
KIND_CYCLE = (None, *KINDS)
STATUS_STYLE = {
    "pending": "bold", "approved": "green", "denied": "red", "expired": "dim",
    "cancelled": "dim", "invalidated": "dim", "consumed": "cyan",
}
UNKNOWN_REQUESTER_CONFIRMATION = "not the requester"


def decision_greying(request: ApprovalDetail) -> dict[str, str]:
    """The decision keys' state for one request read by `show_request`: the service's
    `decision_options`, never re-derived here."""
    return request.unavailable()


class ApprovalsScreen(ListFilters, ConsoleScreen):
    COMMAND = "approvals"
    TITLE = "Approvals"
    WRITE_ACTIONS = frozenset({"approve", "deny", "revoke"})
    HELP_NOTES = (
        "Rows are ordered by time to expiry, soonest first (o orders by age, requester or project instead); "
        "yellow rows marked ! expire within the hour.\n"
        "space marks rows; a / d with marked rows decides all of them, each in its own transaction.\n"
        "Deny and revoke need a reason; approve takes an optional one. You cannot decide your own request."
    )

    BINDINGS = [
        Binding("a", "approve", "Approve", id="approvals.approve"),
        Binding("d", "deny", "Deny", id="approvals.deny"),
        Binding("r", "revoke", "Revoke", id="approvals.revoke"),
        Binding("space", "mark", "Mark", id="approvals.mark"),
        Binding("c", "clear_marks", "Clear marks", id="approvals.clear_marks", show=False),
        Binding("s", "cycle_status", "Status", id="approvals.status"),
        Binding("o", "cycle_sort", "Order", id="approvals.sort", show=False),
        Binding("k", "cycle_kind", "Kind", id="approvals.kind", show=False),
        Binding("p", "filter_project", "Project", id="approvals.project", show=False),
        Binding("slash", "search", "Search", key_display="/", id="approvals.search"),
    ]

    class Detail(Message):
        def __init__(self, request_id: str, request: ApprovalDetail) -> None:
            super().__init__()
            self.request_id = request_id
            self.request = request

    class Rechecked(Message):
        """The watched request, re-read while its dialog is open."""

        def __init__(self, modal: ActionModal[Decision | None], request: ApprovalDetail) -> None:
            super().__init__()
            self.modal, self.request = modal, request

    @staticmethod
    def initial_filters(argument: str | None) -> queue.Filters:
        """A project, or a filter expression (`status=pending kind=git_push expiring<60`)."""
        from console.services import views

        if views.is_expression(argument):
            return views.approval_filters(views.parse("approvals", argument))
        return queue.Filters(statuses=("pending",), project=argument)

    @classmethod
    def prefetch(cls, session, argument: str | None) -> Preload:
        return Preload(ApprovalsSource(session, cls.initial_filters(argument)))

    def __init__(self, argument: str | None = None, *, jump_to: str | None = None) -> None:
        super().__init__()
        self.filters = self.initial_filters(argument)
        self.argument = argument
        self.jump_to = jump_to  # the cursor goes to this request once the list is counted
        if jump_to is not None:  # every status: the request may be decided already
            self.filters = queue.Filters(statuses=None)
        self.detail: ApprovalDetail | None = None
        self.modal: ActionModal[Decision | None] | None = None

    # ------------------------------------------------------------ layout
    def compose_content(self) -> ComposeResult:
        yield Static(self._filter_text(), classes="filters", id="filters")
        with Horizontal(classes="main", id="main"):
            yield LazyTable(self._columns(), row_class=self._row_class, id="requests",
                            empty_message="No requests match these filters.")
            with VerticalScroll(classes="detail", id="detail"):
                yield KeyValues(Text("Select a request.", style="dim"), id="detail-head")
                yield Static(Text("Action", style="bold"), classes="section")
                yield JsonView(id="detail-action")
                yield Static(Text("Authority", style="bold"), classes="section")
                yield JsonView(id="detail-authority")
                yield Static(Text("Events", style="bold"), classes="section")
                yield Timeline(id="detail-events")

    def on_mount(self) -> None:
        table = self.query_one(LazyTable)
        table.focus()
        table.set_source(self.console_app.take_prefetched(self.COMMAND, self.argument) or self._source())
        # The countdowns and the detail's expiry count down with every screen's tick (base.py `tick`).

    def _source(self) -> ApprovalsSource:
        return ApprovalsSource(self.session, self.filters)

    def _columns(self) -> list[Column]:
        """The status column only when the filter shows more than one status. The table has about
        72 columns at 80x24 and 120x40 alike, so the kind has none: the action names it, `k` filters
        by it and the detail pane shows it."""
        single = self.filters.statuses is not None and len(self.filters.statuses) == 1
        return [
            Column("id", "id", SHORT_ID, render=short_id_cell),
            Column("expires_at", "expires", 8, render=self._render_expiry),
            *([] if single else [Column("status", "status", 9, render=lambda r: safe_text(
                r.status, STATUS_STYLE.get(r.status, ""), one_line=True))]),
            Column("created_at", "age", 4, render=lambda r: age_cell(r, self.session.now())),
            Column("requester", "requester", 12, render=lambda r: safe_text(r.requester or "—", one_line=True)),
            Column("project_name", "project", 12, render=lambda r: safe_text(r.project_name or r.project_id, one_line=True)),
            Column("summary", "action", 10, render=summary_cell),  # and every spare column
        ]

    def _render_expiry(self, row: ApprovalRequest) -> Text:
        return expiry_cell(row, self.session.now())

    def _row_class(self, row: ApprovalRequest) -> str | None:
        return row_class(row, self.session.now())

    def _filter_text(self) -> Text:
        f = self.filters
        text = Text("status ", style="dim")
        text.append(",".join(f.statuses) if f.statuses else "all", style="bold")
        text.append("  kind ", style="dim")
        text.append(f.kind or "any", style="bold")
        text.append("  project ", style="dim")
        text.append_text(safe_text(f.project or "all", "bold", one_line=True))
        if f.search:
            text.append("  text ", style="dim")
            text.append_text(safe_text(f.search, "bold", one_line=True))
        if f.expiring_within_minutes is not None:  # only a typed or saved view sets it
            text.append("  expiring ", style="dim")
            text.append(f"<{f.expiring_within_minutes:g} min", style="bold")
        text.append("  by ", style="dim")
        text.append(f.order.label, style="bold")
        table = self.query(LazyTable)
        if table and table.first().total is not None:
            t = table.first()
            count = plural(t.total, "request") if t.total_exact else f"{t.total:,}+ requests"
            text.append(f"   {count}", style="dim")
            if t.selected:
                text.append(f", {len(t.selected)} marked", style="bold")
        return text

    def _set_filters(self, filters: queue.Filters) -> None:
        self.filters = filters
        table = self.query_one(LazyTable)
        table.clear_selection()
        table.columns = self._columns()
        table.set_source(self._source())
        self.query_one("#filters", Static).update(self._filter_text())
        # The pane shows the new list's highlighted row once it is read, never the old one's.
        self._clear_detail("loading…")

    def _clear_detail(self, why: str) -> None:
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self.detail = None
        self.query_one("#detail-head", Static).update(Text(why, style="dim"))
        self.query_one("#detail-action", JsonView).clear()
        self.query_one("#detail-authority", JsonView).clear()
        self.query_one("#detail-events", Timeline).show([])
        self.refresh_bindings_if_changed()

    # ------------------------------------------------------------ filters
    def action_cycle_status(self) -> None:
        i = STATUS_CYCLE.index(self.filters.statuses) if self.filters.statuses in STATUS_CYCLE else -1
        self._set_filters(replace(self.filters, statuses=STATUS_CYCLE[(i + 1) % len(STATUS_CYCLE)]))

    def action_cycle_sort(self) -> None:
        """expiry -> age -> requester -> project: each its own keyset (services/approval_queue.py `SORTS`)."""
        names = list(queue.SORTS)
        i = names.index(self.filters.sort) if self.filters.sort in names else -1
        self._set_filters(replace(self.filters, sort=names[(i + 1) % len(names)]))

    def action_cycle_kind(self) -> None:
        i = KIND_CYCLE.index(self.filters.kind)
        self._set_filters(replace(self.filters, kind=KIND_CYCLE[(i + 1) % len(KIND_CYCLE)]))

    SEARCH_HINT = "text in id, project, kind or payload (as you type; Enter keeps it, Escape undoes)"

    def current_filter(self, mode: str) -> str | None:
        return self.filters.search if mode == "search" else self.filters.project

    def apply_filter(self, mode: str, value: str | None) -> None:
        self._set_filters(replace(self.filters, **{"search" if mode == "search" else "project": value}))

    # ------------------------------------------------------------ table events
    @on(LazyTable.Counted)
    def _counted(self, message: LazyTable.Counted) -> None:
        self.query_one("#filters", Static).update(self._filter_text())

    @on(LazyTable.CursorMoved)
    def _cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        if message.row is None:
            if message.table.total == 0:
                self._clear_detail("No request matches these filters.")
            return
        self._later_detail(message.row.id)

    def on_approvals_screen_detail(self, message: Detail) -> None:
        row = self.query_one(LazyTable).cursor_row
        if row is None or row.id != message.request_id:
            return  # read for a row the list no longer highlights (a filter changed meanwhile)
        self.detail = message.request
        self._show_detail(message.request)
        self.refresh_bindings_if_changed()

    @work(thread=True, exclusive=True, group="approvals-detail", exit_on_error=False)
    def _load_detail(self, request_id: str) -> None:
        request = self.session.run(queue.show_request, request_id, actor=self.session.actor, now=self.session.now())
        self.post_message(self.Detail(request_id, request))

    def _show_detail(self, r: ApprovalDetail) -> None:
        self.query_one("#detail-head", KeyValues).show(lambda now: detail_fields(r, now), self.session.now())
        dark = self.app.current_theme.dark
        self.query_one("#detail-action", JsonView).show(r.action_json, dark=dark)
        self.query_one("#detail-authority", JsonView).show(r.authority_json, dark=dark)
        self.query_one("#detail-events", Timeline).show(detail_events(r))

    # ------------------------------------------------------------ availability
    def _marked(self) -> list[ApprovalRequest]:
        return list(self.query_one(LazyTable).selected.values())

    def unavailable(self) -> dict[str, str]:
        reasons = super().unavailable()
        if reasons:
            return reasons
        if self._marked():
            return {"revoke": "revoke works on one request at a time; clear the marks (c)"}
        if self.detail is None:
            return {a: "no request selected" for a in self.WRITE_ACTIONS}
        current = self.query_one(LazyTable).cursor_row
        if current is None or current.id != self.detail.id:
            return {a: "loading the selected request" for a in self.WRITE_ACTIONS}
        return decision_greying(self.detail)

    # ------------------------------------------------------------ decisions
    def action_mark(self) -> None:
        table = self.query_one(LazyTable)
        if table.toggle_selected() is not None:
            table.action_cursor_down()
        self.query_one("#filters", Static).update(self._filter_text())
        self.refresh_bindings_if_changed()

    def action_clear_marks(self) -> None:
        self.query_one(LazyTable).clear_selection()
        self.query_one("#filters", Static).update(self._filter_text())
        self.refresh_bindings_if_changed()

    def action_approve(self) -> None:
        self._decide("approve")

    def action_deny(self) -> None:
        self._decide("deny")

    def action_revoke(self) -> None:
        self._decide("revoke")

    def _what_happens(self, verb: str, r: ApprovalDetail) -> Text:
        return what_happens(verb, r, self.session.now())

    def _decide(self, verb: str) -> None:
        if verb in self.unavailable():
            self.action_why()
            return
        from console.tui.screens.reason import ReasonModal

        marked = self._marked()
        required = verb != "approve"
        if marked:
            ids = [m.id for m in marked]
            summary = bulk_summary(verb, marked)
            modal: ActionModal[Decision | None] = ReasonModal(
                f"{VERB[verb]} {len(ids)} requests", summary, required=required,
                confirm_label=VERB[verb], danger=verb != "approve")
            requester_unknown_ok = False
        else:
            r = self.detail
            if r is None:  # `unavailable` refuses every decision until the detail is read
                return
            problem = (r.confirm or {}).get(verb)
            ids = [r.id]
            # The dialog watches the request: a change of these fields while it is open re-checks it.
            watching = Watched(r.id, verb, (r.status, r.decision_at))
            if problem:  # four-eyes cannot be checked: the approver confirms by typing (four_eyes.py)
                from console.tui.screens.typed import TypedConfirmModal

                summary = self._what_happens(verb, r)
                summary.append("\n\n")
                summary.append_text(safe_text(f"Four-eyes cannot be checked: {problem}.", "bold yellow"))
                summary.append("\nApprove only if you are not the person who requested it; your confirmation "
                               "is recorded with the decision.")
                modal = TypedConfirmModal(f"{VERB[verb]} request", summary, expected=UNKNOWN_REQUESTER_CONFIRMATION,
                                          ask_reason=True, confirm_label=VERB[verb], watching=watching)
            else:
                modal = ReasonModal(f"{VERB[verb]} request", self._what_happens(verb, r), required=required,
                                    confirm_label=VERB[verb], danger=verb != "approve", watching=watching)
            requester_unknown_ok = bool(problem)

        def done(decision: Decision | None) -> None:
            self.modal = None
            if decision is not None:
                self._run_decision(verb, ids, decision.reason or None, bulk=bool(marked),
                                   requester_unknown_ok=requester_unknown_ok)

        self.modal = modal
        self.app.push_screen(modal, done)

    def _run_decision(self, verb: str, ids: list[str], reason: str | None, bulk: bool,
                      requester_unknown_ok: bool = False) -> None:
        """Through the screens' one write path; the outcome comes back to `write_finished`."""
        self.write(decisions.decide_batch, ids, verb, actor=self.session.actor, reason=reason,
                   now=self.session.write_now(), requester_unknown_ok=requester_unknown_ok, bulk=bulk)

    def write_finished(self, message: ConsoleScreen.WriteDone) -> None:
        batch = message.result
        if message.error is not None or not isinstance(batch, DecisionBatch):
            # Refused before any request was touched (a marked batch): one error for all of them.
            self.show_error(message.error or Refusal("The decision returned nothing."))
        elif batch.bulk:
            from console.tui.screens.bulk_results import BulkResultsModal

            self.query_one(LazyTable).clear_selection()
            self.app.push_screen(BulkResultsModal(f"{VERB[batch.verb]}: results", batch.results, key_for=self.key_for))
        else:
            result = batch.results[0]
            if result.ok:
                self.notify_result(result.message)
            else:
                self.show_error(result.refusal or Refusal(result.message), context=self.session.write_note() or "")

    # ------------------------------------------------------------ live
    def refresh_data(self) -> None:
        super().refresh_data()
        row = self.query_one(LazyTable).cursor_row
        if row is not None:
            self._load_detail(row.id)
        if self.modal is not None and self.modal.watching is not None and self.modal.is_attached:
            self._recheck(self.modal)

    @work(thread=True, group="approvals-recheck", exit_on_error=False)
    def _recheck(self, modal: ActionModal[Decision | None]) -> None:
        request = self.session.run(queue.show_request, modal.watching.key, actor=self.session.actor,
                                   now=self.session.now())
        self.post_message(self.Rechecked(modal, request))

    def on_approvals_screen_rechecked(self, message: Rechecked) -> None:
        modal, r = message.modal, message.request
        watching = modal.watching
        if watching is None or not watching.action or not modal.is_attached:
            return
        if (r.status, r.decision_at) == watching.seen:
            return
        why = (r.options or {}).get(watching.action)
        modal.changed_underneath(self._what_happens(watching.action, r),
                                 f"It can no longer be done: {why}." if why else None)

    # ------------------------------------------------------------ copy
    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return None, None
        shown = self.detail if self.detail is not None and self.detail.id == row.id else row
        payload = shown.to_json()
        payload.pop("options", None)
        for key in ("action_json", "authority_json"):
            try:
                payload[key] = read_json(payload[key])
            except (KeyError, ValueError):  # not JSON, or over the reader's limits: copied as stored
                pass
        return row.id, payload
