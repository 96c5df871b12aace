"""Execution environments: state, leases and operation claims, with confirmations scaled to risk
(y/n to stop, typing the environment id to retire or to take over someone's stale claim)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from console.clock import parse_time
from console.screens.base import ConsoleScreen
from console.screens.confirm import ActionModal, ConfirmModal
from console.screens.reason import ReasonModal
from console.screens.sources import EnvironmentsSource
from console.screens.typed import TypedConfirmModal
from console.services import environments as envs
from widgets.humane import age, exact, plural, relative
from widgets.lazy_table import Column, LazyTable
from widgets.safe_text import clean, safe_text
from widgets.timeline import Timeline, TimelineEvent

STATE_STYLE = {
    "ready": "green", "running": "bold green", "stopped": "cyan", "retiring": "yellow",
    "cleanup_pending": "yellow", "retired": "dim", "failed": "bold red", "unavailable": "red",
    "queued": "dim", "preparing": "dim",
}
STATE_CYCLE = (None, *envs.STATES)
# action name -> operation it claims
CLAIM_ACTIONS = {"claim_stop": "stop", "claim_retire": "retire", "claim_reset": "reset",
                 "claim_cleanup": "cleanup_retry"}


class EnvironmentsScreen(ConsoleScreen):
    COMMAND = "envs"
    TITLE = "Environments"
    WRITE_ACTIONS = frozenset({*CLAIM_ACTIONS, "release", "complete", "takeover"})
    HELP_NOTES = (
        "A claim is an exclusive hold for one operation: while it is held no new run is placed on the\n"
        "environment. The console cannot stop or delete a container, so it never changes the state:\n"
        "complete hands the operation to archon (stop: idle_stop_at = now; retire: the retirement\n"
        "request stays; cleanup_retry: cleanup_retry_at = now) and clears the claim; release clears it\n"
        "with nothing handed off. A reset claim can only be released. The detail pane shows what archon\n"
        "has been handed and since when. A claim older than the stale limit\n"
        "(ARCHON_CONSOLE_STALE_MINUTES, default 15) can be taken over.\n\n"
        + envs.operations_help()
    )

    BINDINGS = [
        Binding("s", "claim_stop", "Stop", id="envs.claim_stop"),
        Binding("R", "claim_retire", "Retire", id="envs.claim_retire"),
        Binding("e", "claim_reset", "Reset", id="envs.claim_reset", show=False),
        Binding("u", "claim_cleanup", "Cleanup retry", id="envs.claim_cleanup", show=False),
        Binding("o", "complete", "Complete", id="envs.complete"),
        Binding("l", "release", "Release", id="envs.release"),
        Binding("t", "takeover", "Take over", id="envs.takeover"),
        Binding("f", "cycle_state", "State", id="envs.state"),
        Binding("x", "toggle_claimed", "Claimed only", id="envs.claimed", show=False),
    ]

    class Detail(Message):
        def __init__(self, env: dict[str, Any]) -> None:
            super().__init__()
            self.env = env

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.state: str | None = None
        self.claimed = False
        from console import views

        if views.is_expression(argument):  # `state=ready project=alpha claimed=yes`
            view = views.parse("envs", argument)
            self.argument = view.get("project")
            self.state = None if view.get("state") in (None, "any") else view.get("state")
            self.claimed = view.get("claimed") == "yes"
        self.detail: dict[str, Any] | None = None

    def compose_content(self) -> ComposeResult:
        yield Static(self._filter_text(), classes="filters", id="filters")
        with Horizontal(classes="main", id="main"):
            yield LazyTable(self._columns(), row_class=self._row_class, id="environments",
                            empty_message="No environments match.")
            with VerticalScroll(classes="detail", id="detail"):
                yield Static(Text("Select an environment.", style="dim"), id="detail-head")
                yield Static(Text("Lifecycle", style="bold"), classes="section")
                yield Timeline(id="detail-events")

    def on_mount(self) -> None:
        self.query_one("#main").set_class(self.app.size.width < 110, "narrow")
        table = self.query_one(LazyTable)
        table.focus()
        table.set_source(self._source())

    def on_resize(self, event) -> None:
        self.query_one("#main").set_class(event.size.width < 110, "narrow")

    def _source(self) -> EnvironmentsSource:
        return EnvironmentsSource(self.session, state=self.state, project=self.argument, claimed=self.claimed)

    def _columns(self) -> list[Column]:
        now = self.session.now
        return [
            Column("id", "environment", 18),
            Column("lifecycle_state", "state", 15,
                   render=lambda r: safe_text(r.get("lifecycle_state"), STATE_STYLE.get(r.get("lifecycle_state"), ""), one_line=True)),
            Column("claim", "claim", CLAIM_WIDTH, render=_claim_cell),
            Column("project_id", "project", 14),
            Column("active_lease_count", "lease", 5, render=lambda r: Text("yes" if r.get("active_lease_count") else "—")),
            Column("idle_stop_at", "idle stop", 14,
                   render=lambda r: Text(relative(parse_time(r.get("idle_stop_at")), now()) if r.get("idle_stop_at") else "—")),
        ]

    def _row_class(self, row: dict[str, Any]) -> str | None:
        if row.get("stale"):
            return "warning"
        if row.get("lifecycle_state") in ("retired",):
            return "muted"
        return None

    def _filter_text(self) -> Text:
        text = Text("state ", style="dim")
        text.append(self.state or "any", style="bold")
        text.append("  claims ", style="dim")
        text.append("held only" if self.claimed else "any", style="bold")
        text.append("  project ", style="dim")
        text.append_text(safe_text(self.argument or "all", "bold", one_line=True))
        table = self.query(LazyTable)
        if table and table.first().total is not None:
            text.append(f"   {plural(table.first().total, 'environment')}", style="dim")
        return text

    def _reload(self) -> None:
        self.query_one(LazyTable).set_source(self._source())
        self.query_one("#filters", Static).update(self._filter_text())

    def action_cycle_state(self) -> None:
        self.state = STATE_CYCLE[(STATE_CYCLE.index(self.state) + 1) % len(STATE_CYCLE)]
        self._reload()

    def action_toggle_claimed(self) -> None:
        self.claimed = not self.claimed
        self._reload()

    @on(LazyTable.Counted)
    def _counted(self, message: LazyTable.Counted) -> None:
        self.query_one("#filters", Static).update(self._filter_text())

    @on(LazyTable.CursorMoved)
    def _cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        if message.row is not None:
            self._later_detail(message.row["id"])

    @work(thread=True, exclusive=True, group="envs-detail", exit_on_error=False)
    def _load_detail(self, env_id: str) -> None:
        env = self.session.run(envs.show_environment, env_id, now=self.session.now(),
                               stale_after=envs.default_stale_after())
        self.post_message(self.Detail(env))

    def on_environments_screen_detail(self, message: Detail) -> None:
        self.detail = message.env
        self._show(message.env)
        self.refresh_bindings_if_changed()

    def _show(self, e: dict[str, Any]) -> None:
        now = self.session.now()
        head = safe_text(e.get("id"), "bold", one_line=True)
        head.append("\n")

        def when(col: str) -> str:
            t = parse_time(e.get(col))
            return f"{relative(t, now)} ({exact(t)})" if t else "—"

        claim = "none"
        if e.get("operation_claim_id"):
            claim = (f"{e.get('operation_kind')} by {e.get('claim_holder')}, {when('operation_claimed_at')}"
                     + (" — STALE" if e.get("stale") else ""))
        rows = [
            ("state", e.get("lifecycle_state")),
            ("project", e.get("project_id")),
            ("provider", f"{e.get('provider_kind')} {e.get('provider_version') or ''}"),
            ("leases", f"{e.get('active_lease_count') or 0} active; {e.get('admission_reason')}"),
            ("claim", claim),
            ("retirement", when("retirement_requested_at") if e.get("retirement_requested_at") else "not requested"),
            ("idle stop", when("idle_stop_at")),
            ("cleanup", f"retry {when('cleanup_retry_at')}, {e.get('cleanup_attempts') or 0} attempts"),
            ("last used", when("last_used_at")),
            ("created", when("created_at")),
        ]
        if e.get("failure_message"):
            rows.append(("failure", e.get("failure_message")))
        for name, value in rows:
            head.append(f"{name:>10} ", style="dim")
            head.append_text(safe_text(value, one_line=True))
            head.append("\n")
        for handoff in e.get("pending_handoffs") or []:
            head.append(f"{'handed off':>10} ", style="dim")
            head.append_text(safe_text(handoff["text"], "bold yellow" if handoff["overdue"] else "cyan", one_line=True))
            head.append(" — overdue: archon not running?\n" if handoff["overdue"] else "\n",
                        style="bold yellow")
        for action, why in self._row_reasons(e).items():
            if action in ("claim_stop", "claim_retire", "takeover", "complete", "release"):
                head.append(f"{action.replace('claim_', ''):>10} ", style="dim")
                head.append_text(safe_text(f"not possible: {why}\n", "yellow"))
        self.query_one("#detail-head", Static).update(head)
        events = []
        for ev in e.get("events") or []:
            title = str(ev.get("event_type") or "event")
            if ev.get("from_state") or ev.get("to_state"):
                title += f": {ev.get('from_state') or '∅'} → {ev.get('to_state') or '∅'}"
            detail = " · ".join(str(x) for x in (ev.get("actor_reference"), ev.get("reason")) if x)
            events.append(TimelineEvent(parse_time(ev.get("created_at")), title, detail))
        self.query_one("#detail-events", Timeline).show(events)

    # ------------------------------------------------------------ availability
    def _row_reasons(self, e: dict[str, Any]) -> dict[str, str]:
        """The service's reasons, keyed by this screen's action names."""
        action_of = {op: action for action, op in CLAIM_ACTIONS.items()}
        return {action_of.get(key, key): why for key, why in envs.unavailable_actions(e, self.session.actor).items()}

    def unavailable(self) -> dict[str, str]:
        reasons = super().unavailable()
        if reasons:
            return reasons
        if not self.session.handle.shape.has_claims:
            return {a: "operation claims need archon 1.10.0 (see :upgrade)" for a in self.WRITE_ACTIONS}
        row = self.query_one(LazyTable).cursor_row
        if self.detail is None or row is None or row.get("id") != self.detail.get("id"):
            return {a: "no environment selected" for a in self.WRITE_ACTIONS}
        return self._row_reasons(self.detail)

    # ------------------------------------------------------------ actions
    def _summary(self, head: str, body: str) -> Text:
        e = self.detail or {}
        text = Text(head, style="bold")
        text.append(" ")
        text.append_text(safe_text(e.get("id"), "bold", one_line=True))
        text.append_text(safe_text(
            f"\nstate {e.get('lifecycle_state')}, {e.get('active_lease_count') or 0} active lease(s)\n\n", "dim"))
        text.append_text(safe_text(body))
        return text

    def _guard(self, action: str) -> bool:
        if action in self.unavailable():
            self.action_why()
            return False
        return True

    def _claim(self, action: str) -> None:
        if not self._guard(action):
            return
        op = CLAIM_ACTIONS[action]
        env_id = self.detail["id"]
        body = (f"Claims {op}: no new run can be placed on it until you complete or release the claim. "
                f"Completing: {envs.completion_effect(op)}.")
        if op == "retire":
            body += " Retirement is requested and stays requested even if the claim is released."
            modal: ActionModal = TypedConfirmModal("Retire environment", self._summary("Retire", body),
                                                   expected=env_id, confirm_label="Retire", watch_key=env_id)
        else:
            modal = ConfirmModal(f"Claim {op}", self._summary(f"Claim {op} on", body), watch_key=env_id)
        self._open(modal, lambda reason: self.write(envs.claim, env_id, op, self.session.actor,
                                                      now=self.session.write_now(), stale_after=envs.default_stale_after()))

    def action_claim_stop(self) -> None:
        self._claim("claim_stop")

    def action_claim_retire(self) -> None:
        self._claim("claim_retire")

    def action_claim_reset(self) -> None:
        self._claim("claim_reset")

    def action_claim_cleanup(self) -> None:
        self._claim("claim_cleanup")

    def action_complete(self) -> None:
        if not self._guard("complete"):
            return
        e = self.detail
        op = e.get("operation_kind")
        body = (f"Completing {envs.completion_effect(op)}. The state stays {e.get('lifecycle_state')} until "
                "archon acts; the console cannot stop or delete a container itself.")
        modal = ConfirmModal(f"Complete {op}", self._summary(f"Hand {op} to archon for", body), watch_key=e["id"])
        self._open(modal, lambda reason: self.write(envs.complete, e["id"], self.session.actor, now=self.session.write_now()))

    def action_release(self) -> None:
        if not self._guard("release"):
            return
        e = self.detail
        mine = envs.held_by(e.get("operation_claim_id"), self.session.actor)
        body = f"The {e.get('operation_kind')} claim is dropped; the state stays {e.get('lifecycle_state')}."
        if mine:
            modal: ActionModal = ConfirmModal("Release claim", self._summary("Release your claim on", body),
                                              watch_key=e["id"])
        else:
            modal = ReasonModal("Release a stale claim", self._summary(f"Release {e.get('claim_holder')}'s stale claim on", body),
                                required=True, watch_key=e["id"], danger=True)
        self._open(modal, lambda reason: self.write(envs.release, e["id"], self.session.actor, now=self.session.write_now(),
                                                      takeover=not mine, reason=reason or None,
                                                      stale_after=envs.default_stale_after()))

    def action_takeover(self) -> None:
        if not self._guard("takeover"):
            return
        e = self.detail
        op = e.get("operation_kind")
        age = relative(parse_time(e.get("operation_claimed_at")), self.session.now())
        body = (f"{e.get('claim_holder')}'s {op} claim (taken {age}) is replaced by yours for {op}. "
                "Make sure they are no longer working on it.")
        modal = TypedConfirmModal("Take over a stale claim", self._summary("Take over", body), expected=e["id"],
                                  ask_reason=True, reason_required=True, confirm_label="Take over", watch_key=e["id"])
        self._open(modal, lambda reason: self.write(envs.claim, e["id"], op, self.session.actor, now=self.session.write_now(),
                                                      takeover=True, reason=reason,
                                                      stale_after=envs.default_stale_after()))

    def _open(self, modal: ActionModal, then) -> None:
        modal.seen = self._fingerprint(self.detail)  # type: ignore[attr-defined]
        self.modal = modal

        def done(value: Any) -> None:
            self.modal = None
            if value is None or value is False:
                return
            then(value if isinstance(value, str) else None)

        self.app.push_screen(modal, done)

    @staticmethod
    def _fingerprint(e: dict[str, Any] | None) -> tuple:
        e = e or {}
        return (e.get("lifecycle_state"), e.get("operation_claim_id"), e.get("retirement_requested_at"),
                e.get("active_lease_count"))

    # ------------------------------------------------------------ live
    modal: ActionModal | None = None

    def refresh_data(self) -> None:
        super().refresh_data()
        if self.modal is not None and self.modal.is_attached:
            self._recheck(self.modal)
        else:
            row = self.query_one(LazyTable).cursor_row
            if row is not None:
                self._load_detail(row["id"])

    @work(thread=True, group="envs-recheck", exit_on_error=False)
    def _recheck(self, modal: ActionModal) -> None:
        env = self.session.run(envs.show_environment, modal.watch_key, now=self.session.now(),
                               stale_after=envs.default_stale_after())
        self.post_message(self.Detail(env))
        self.call_from_thread(self._rechecked, modal, env)

    def _rechecked(self, modal: ActionModal, env: dict[str, Any]) -> None:
        if not modal.is_attached or self._fingerprint(env) == getattr(modal, "seen", None):
            return
        text = self._summary("Now:", f"state {env.get('lifecycle_state')}, claim "
                             f"{env.get('operation_kind') or 'none'} by {env.get('claim_holder') or 'nobody'}.")
        modal.changed_underneath(text, "The environment changed; cancel and look again.")

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return None, None
        payload = dict(self.detail) if self.detail and self.detail.get("id") == row["id"] else dict(row)
        return row["id"], payload


CLAIM_WIDTH = 30
SEP = " · "


def _claim_cell(row: dict[str, Any]) -> Text:
    """`stop · archon-worker:42 · 29d STALE` in CLAIM_WIDTH cells: the holder gives way (its head
    goes first, the distinguishing tail stays), never the operation, the age or STALE."""
    if not row.get("operation_claim_id"):
        return Text("—", style="dim")
    op = clean(row.get("operation_kind"), one_line=True)
    holder = clean(row.get("claim_holder"), one_line=True)
    how_old = age(row.get("claim_age_seconds"))
    stale = " STALE" if row.get("stale") else ""
    sep = SEP
    room = CLAIM_WIDTH - len(op) - 2 * len(sep) - len(how_old) - len(stale)
    if len(holder) > room and room < 10:  # tight (cleanup_retry): plain spaces leave the holder more
        sep = " "
        room += 2 * (len(SEP) - len(sep))
    if len(holder) > room:
        holder = "…" + holder[-(room - 1):] if room > 1 else "…"
    text = Text(f"{op}{sep}{holder}{sep}{how_old}", no_wrap=True, end="")
    if stale:
        text.append(stale, style="bold yellow")
    return text
