"""Execution environments: state, leases and operation claims, with confirmations scaled to risk
(y/n to stop, typing the environment id to retire or to take over someone's stale claim)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message

from console.clock import parse_time, relative
from console.tui.screens.approval_detail import SHORT_ID, short_id_cell
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.environment_cells import CLAIM_WIDTH, claim_cell
from console.tui.screens.list_filters import ListFilters
from console.tui.screens.confirm import ActionModal, ConfirmModal, Decision, Watched
from console.tui.screens.reason import ReasonModal
from console.tui.screens.pages import EnvironmentsSource
from console.tui.screens.typed import TypedConfirmModal
from console.services import environment_claims
from console.services.environment_queries import claims_supported, show_environment
from console.services.environment_rules import (STATES, bound_runs_words, claim_options, completion_effect,
                                                default_stale_after, foreign_claim_assumption, held_by,
                                                operations_help)
from console.models.environments import ClaimOptions, EnvironmentView
from console.services.identity import account_of
from console.text import one_line
from widgets.humane import exact, plural
from widgets.key_values import Entry, KeyValues
from widgets.lazy_table import LazyTable
from widgets.table_column import Column
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static
from widgets.timeline import Timeline, TimelineEvent

STATE_STYLE = {
    "ready": "green", "running": "bold green", "stopped": "cyan", "retiring": "yellow",
    "cleanup_pending": "yellow", "retired": "dim", "failed": "bold red", "unavailable": "red",
    "queued": "dim", "preparing": "dim",
}
STATE_CYCLE = (None, *STATES)
# action name -> operation it claims
CLAIM_ACTIONS = {"claim_stop": "stop", "claim_retire": "retire", "claim_reset": "reset",
                 "claim_cleanup": "cleanup_retry"}
# `environment_rules.claim_options` keys -> this screen's action names
ACTION_OF = {**{op: action for action, op in CLAIM_ACTIONS.items()},
             "complete": "complete", "release": "release", "takeover": "takeover"}


class EnvironmentsScreen(ListFilters, ConsoleScreen):
    COMMAND = "envs"
    TITLE = "Environments"
    WRITE_ACTIONS = frozenset({*CLAIM_ACTIONS, "release", "complete", "takeover"})
    HELP_NOTES = (
        "A claim is an exclusive hold for one operation: while it is held no new run is placed on the\n"
        "environment. The console cannot stop or delete a container, so it never changes the state:\n"
        "complete hands the operation to archon (stop: idle_stop_at = now; retire: the retirement\n"
        "request stays; cleanup_retry: cleanup_retry_at = now) and clears the claim; release clears it\n"
        "with nothing handed off. A reset claim can only be released. The detail pane shows what archon\n"
        "has been handed and since when. A stop cannot be completed while an execution lease is\n"
        "active or other work is placed in it (the detail says what only completing checks), nor a\n"
        "cleanup retry while archon holds its cleanup claim: wait for the run to end, or release the\n"
        "claim. A claim older than the stale limit\n"
        "(ARCHON_CONSOLE_STALE_MINUTES, default 15) can be taken over, for the operation it holds;\n"
        "to change the kind, release it first. For a claim the console did not create (archon's own)\n"
        "that limit is only the console's assumption, and archon may still be working on it: taking\n"
        "it over or releasing it asks you to type its holder.\n\n"
        + operations_help()
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
        Binding("p", "filter_project", "Project", id="envs.project", show=False),
        Binding("slash", "search", "Search", key_display="/", id="envs.search"),
    ]
    SEARCH_HINT = "text in id, project, state, provider or claim (as you type; Enter keeps it, Escape undoes)"

    class Detail(Message):
        """The selected environment as `environment_queries.show_environment` read it."""

        def __init__(self, env: EnvironmentView) -> None:
            super().__init__()
            self.env = env

    class ClaimsSupport(Message):
        """Whether this database's release has operation claims (archon 1.10.0), asked off the UI thread."""

        def __init__(self, supported: bool) -> None:
            super().__init__()
            self.supported = supported

    class Rechecked(Message):
        """The environment an open dialog acts on, read again after the database changed."""

        def __init__(self, modal: ActionModal, env: EnvironmentView) -> None:
            super().__init__()
            self.modal = modal
            self.env = env

    def __init__(self, argument: str | None = None, *, jump_to: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.jump_to = jump_to  # the cursor goes to this environment once the list is counted
        self.state: str | None = None
        self.claimed = False
        self.search: str | None = None
        from console.services import views

        if views.is_expression(argument):  # `state=ready project=alpha claimed=yes`
            view = views.parse("envs", argument)
            self.argument = view.get("project")
            self.state = None if view.get("state") in (None, "any") else view.get("state")
            self.claimed = view.get("claimed") == "yes"
            self.search = view.get("search")
        self.detail: EnvironmentView | None = None
        self.modal: ActionModal | None = None
        self.claims_supported: bool | None = None  # None until the service has answered

    def compose_content(self) -> ComposeResult:
        yield Static(self._filter_text(), classes="filters", id="filters")
        with Horizontal(classes="main", id="main"):
            yield LazyTable(self._columns(), row_class=self._row_class, id="environments",
                            empty_message="No environments match.")
            with VerticalScroll(classes="detail", id="detail"):
                yield KeyValues(Text("Select an environment.", style="dim"), id="detail-head")
                yield Static(Text("Lifecycle", style="bold"), classes="section")
                yield Timeline(id="detail-events")

    def on_mount(self) -> None:
        table = self.query_one(LazyTable)
        table.focus()
        table.set_source(self._source())
        self._load_claims_support()

    def _source(self) -> EnvironmentsSource:
        return EnvironmentsSource(self.session, state=self.state, project=self.argument, claimed=self.claimed,
                                  search=self.search)

    def _columns(self) -> list[Column]:
        """Id, project (by name, as the queue shows it), state and claim fit 78 columns (80 less a
        scrollbar, and the table's share at 120: app.tcss); the lease and idle stop may scroll."""
        now = self.session.now
        return [
            Column("id", "environment", SHORT_ID, render=short_id_cell),
            Column("project_name", "project", 14, render=lambda r: safe_text(r.project_name or r.project_id, one_line=True)),
            Column("lifecycle_state", "state", 15,
                   render=lambda r: safe_text(r.lifecycle_state, STATE_STYLE.get(r.lifecycle_state, ""), one_line=True)),
            Column("claim", "claim", CLAIM_WIDTH, render=claim_cell),
            Column("active_lease_count", "lease", 5, render=lambda r: Text("yes" if r.active_lease_count else "—")),
            Column("idle_stop_at", "idle stop", 14,
                   render=lambda r: Text(relative(r.idle_stop_at, now(), unknown="—", present="now") if r.idle_stop_at else "—")),
        ]

    def _row_class(self, row: EnvironmentView) -> str | None:
        if row.stale:
            return "warning"
        if row.lifecycle_state in ("retired",):
            return "muted"
        return None

    def _filter_text(self) -> Text:
        text = Text("state ", style="dim")
        text.append(self.state or "any", style="bold")
        text.append("  claims ", style="dim")
        text.append("held only" if self.claimed else "any", style="bold")
        text.append("  project ", style="dim")
        text.append_text(safe_text(self.argument or "all", "bold", one_line=True))
        if self.search:
            text.append("  text ", style="dim")
            text.append_text(safe_text(self.search, "bold", one_line=True))
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

    def current_filter(self, mode: str) -> str | None:
        return self.search if mode == "search" else self.argument

    def apply_filter(self, mode: str, value: str | None) -> None:
        if mode == "search":
            self.search = value
        else:
            self.argument = value
        self._reload()

    @on(LazyTable.Counted)
    def _counted(self, message: LazyTable.Counted) -> None:
        self.query_one("#filters", Static).update(self._filter_text())

    @on(LazyTable.CursorMoved)
    def _cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        if message.row is not None:
            self._later_detail(message.row.id)
        elif message.table.total == 0:  # the pane never shows an environment the filter removed
            self.detail = None
            self.query_one("#detail-head", Static).update(Text("No environment matches.", style="dim"))
            self.query_one("#detail-events", Timeline).show([])
            self.refresh_bindings_if_changed()

    @work(thread=True, exclusive=True, group="envs-detail", exit_on_error=False)
    def _load_detail(self, env_id: str) -> None:
        # a cursor move must stay an index seek (tests/tui/test_query_plans.py): what only a scan
        # finds is left to the write, and the detail says so (`holding_not_checked`)
        env = self.session.run(show_environment, env_id, now=self.session.now(),
                               stale_after=default_stale_after(), everywhere=False)
        self.post_message(self.Detail(env))

    @on(Detail)
    def _detail_loaded(self, message: Detail) -> None:
        row = self.query_one(LazyTable).cursor_row
        if row is None or row.id != message.env.id:
            return  # read for a row the cursor has left (a slower read arriving after a newer one)
        self.detail = message.env
        self._show(message.env)
        self.refresh_bindings_if_changed()

    def _show(self, e: EnvironmentView) -> None:
        self.query_one("#detail-head", KeyValues).show(lambda now: self._fields(e, now), self.session.now())
        events = []
        for ev in e.events or ():
            title = str(ev.event_type or "event")
            if ev.from_state or ev.to_state:
                title += f": {ev.from_state or '∅'} → {ev.to_state or '∅'}"
            account = account_of(ev.columns.get("metadata_json"))  # who acted (docs/decisions.md, D21)
            detail = " · ".join(str(x) for x in (ev.actor_reference and one_line(ev.actor_reference, 40), account and f"OS {account}", ev.reason) if x)
            events.append(TimelineEvent(parse_time(ev.created_at), title, detail))
        self.query_one("#detail-events", Timeline).show(events)

    def _fields(self, e: EnvironmentView, now: datetime) -> list[Entry]:
        """The detail's head at `now` (drawn again at every tick: widgets/key_values.py)."""
        def when(value: Any) -> str:
            t = parse_time(value)
            return f"{relative(t, now, unknown='—', present='now')} ({exact(t)})" if t else "—"

        claim = "none"
        if e.operation_claim_id:
            claim = (f"{e.operation_kind} by {e.claimed_by}, {when(e.operation_claimed_at)}"
                     + (" — STALE" if e.stale else ""))
        rows = [
            ("state", e.lifecycle_state),
            ("project", f"{e.project_name} ({e.project_id})" if e.project_name is not None else e.project_id),
            ("provider", f"{e.provider_kind} {e.provider_version or ''}"),
            ("leases", f"{e.active_lease_count or 0} active; {e.admission_reason}"),
            ("claim", claim),
            ("retirement", when(e.retirement_requested_at) if e.retirement_requested_at else "not requested"),
            ("idle stop", when(e.idle_stop_at)),
            ("cleanup", f"retry {when(e.cleanup_retry_at)}, {e.cleanup_attempts or 0} attempts"),
            ("last used", when(e.last_used_at)),
            ("created", when(e.created_at)),
        ]
        if e.failure_message:
            rows.append(("failure", e.failure_message))
        entries: list[Entry] = [safe_text(e.id, "bold", one_line=True)]
        entries += [(name, safe_text(value, one_line=True)) for name, value in rows]
        for handoff in e.pending_handoffs:
            value = safe_text(handoff.text, "bold yellow" if handoff.overdue else "cyan", one_line=True)
            if handoff.overdue:
                value.append(" — overdue: archon not running?", style="bold yellow")
            entries.append(("handed off", value))
        if e.operation_kind == "stop" and e.holding_not_checked:
            entries.append(("work", safe_text(f"{bound_runs_words(e.holding_work or ()) or 'none found'}; "
                                              f"{e.holding_not_checked}", one_line=True)))
        for action, why in self._row_reasons(e).items():
            if action in ("claim_stop", "claim_retire", "takeover", "complete", "release"):
                entries.append((action.replace("claim_", ""), safe_text(f"not possible: {why}", "yellow",
                                                                        one_line=True)))
        return entries

    # ------------------------------------------------------------ availability
    @work(thread=True, exclusive=True, group="envs-support", exit_on_error=False)
    def _load_claims_support(self) -> None:
        self.post_message(self.ClaimsSupport(self.session.run(claims_supported)))

    @on(ClaimsSupport)
    def _claims_support_known(self, message: ClaimsSupport) -> None:
        self.claims_supported = message.supported
        self.refresh_bindings_if_changed()

    def _row_reasons(self, e: EnvironmentView) -> dict[str, str]:
        """Why the service would refuse each action (`environment_rules.claim_options`), keyed by this screen's
        action names: the screen greys exactly what the write would refuse, and nothing else."""
        options: ClaimOptions = claim_options(e, self.session.actor, stale_after=default_stale_after())
        return {ACTION_OF[key]: why for key, why in options.unavailable().items()}

    def unavailable(self) -> dict[str, str]:
        reasons = super().unavailable()
        if reasons:
            return reasons
        if self.claims_supported is False:
            return {a: "operation claims need archon 1.10.0 (see :upgrade)" for a in self.WRITE_ACTIONS}
        row = self.query_one(LazyTable).cursor_row
        if self.claims_supported is None or self.detail is None or row is None or row.id != self.detail.id:
            return {a: "no environment selected" for a in self.WRITE_ACTIONS}
        return self._row_reasons(self.detail)

    # ------------------------------------------------------------ actions
    def _summary(self, head: str, body: str) -> Text:
        e = self.detail
        env_id, state, leases = (e.id, e.lifecycle_state, e.active_lease_count) if e else (None, None, 0)
        text = Text(head, style="bold")
        text.append(" ")
        text.append_text(safe_text(env_id, "bold", one_line=True))
        text.append_text(safe_text(f"\nstate {state}, {leases or 0} active lease(s)\n\n", "dim"))
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
        env_id = self.detail.id
        body = (f"Claims {op}: no new run can be placed on it until you complete or release the claim. "
                f"Completing: {completion_effect(op)}.")
        if op == "retire":
            body += " Retirement is requested and stays requested even if the claim is released."
            modal: ActionModal = TypedConfirmModal("Retire environment", self._summary("Retire", body),
                                                   expected=env_id, confirm_label="Retire", watching=self._watching(op))
        else:
            modal = ConfirmModal(f"Claim {op}", self._summary(f"Claim {op} on", body), watching=self._watching(op))
        self._open(modal, lambda reason: self.write(environment_claims.claim, env_id, op, self.session.actor,
                                                      now=self.session.write_now(), stale_after=default_stale_after()))

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
        op = e.operation_kind
        body = (f"Completing {completion_effect(op)}. The state stays {e.lifecycle_state} until "
                "archon acts; the console cannot stop or delete a container itself.")
        modal = ConfirmModal(f"Complete {op}", self._summary(f"Hand {op} to archon for", body),
                             watching=self._watching("complete"))
        self._open(modal, lambda reason: self.write(environment_claims.complete, e.id, self.session.actor, now=self.session.write_now()))

    def _foreign(self, e: EnvironmentView) -> str | None:
        """The holder to type before taking over or releasing a claim the console did not create."""
        return claim_options(e, self.session.actor, stale_after=default_stale_after()).confirm_holder

    def action_release(self) -> None:
        if not self._guard("release"):
            return
        e = self.detail
        mine = held_by(e.operation_claim_id, self.session.actor)
        holder = None if mine else self._foreign(e)
        body = f"The {e.operation_kind} claim is dropped; the state stays {e.lifecycle_state}."
        if mine:
            modal: ActionModal = ConfirmModal("Release claim", self._summary("Release your claim on", body),
                                              watching=self._watching("release"))
        elif holder is not None:
            body = (f"The {e.operation_kind} claim is dropped (the state stays {e.lifecycle_state}) and new runs may "
                    f"be placed on it, though {foreign_claim_assumption(default_stale_after(), brief=True)}.")
            modal = TypedConfirmModal("Release a claim the console did not create",
                                      self._summary(f"Release {e.claimed_by}'s stale claim on", body), expected=holder,
                                      ask_reason=True, reason_required=True, confirm_label="Release",
                                      watching=self._watching("release"))
        else:
            modal = ReasonModal("Release a stale claim", self._summary(f"Release {e.claimed_by}'s stale claim on", body),
                                required=True, watching=self._watching("release"), danger=True)
        self._open(modal, lambda reason: self.write(environment_claims.release, e.id, self.session.actor, now=self.session.write_now(),
                                                      takeover=not mine, reason=reason or None,
                                                      stale_after=default_stale_after(), confirm_holder=holder))

    def action_takeover(self) -> None:
        if not self._guard("takeover"):
            return
        e = self.detail
        op = e.operation_kind
        holder = self._foreign(e)
        age = relative(e.operation_claimed_at, self.session.now(), unknown="—", present="now")
        body = f"{e.claimed_by}'s {op} claim (taken {age}) becomes yours, still a {op} (a takeover keeps the kind). "
        if holder is None:
            body += "Make sure they are no longer working on it."
        else:
            body += f"Archon may still be working on it: {foreign_claim_assumption(default_stale_after(), brief=True)}."
        modal = TypedConfirmModal("Take over a stale claim", self._summary("Take over", body),
                                  expected=holder if holder is not None else e.id, ask_reason=True,
                                  reason_required=True, confirm_label="Take over", watching=self._watching("takeover"))
        self._open(modal, lambda reason: self.write(environment_claims.claim, e.id, op, self.session.actor, now=self.session.write_now(),
                                                      takeover=True, reason=reason,
                                                      stale_after=default_stale_after(), confirm_holder=holder))

    def _watching(self, action: str) -> Watched:
        """The shown environment, as the dialog about to open on it watches it."""
        return Watched(self.detail.id, action, self._fingerprint(self.detail))

    def _open(self, modal: ActionModal, then) -> None:
        self.modal = modal

        def done(value: Any) -> None:
            self.modal = None
            if value is None or value is False:
                return
            then(value.reason if isinstance(value, Decision) else None)

        self.app.push_screen(modal, done)

    @staticmethod
    def _fingerprint(e: EnvironmentView | None) -> tuple:
        if e is None:
            return (None, None, None, None)
        return (e.lifecycle_state, e.operation_claim_id, e.retirement_requested_at, e.active_lease_count)

    # ------------------------------------------------------------ live
    def refresh_data(self) -> None:
        super().refresh_data()
        self._load_claims_support()  # an upgrade from another screen changes the answer
        if self.modal is not None and self.modal.watching is not None and self.modal.is_attached:
            self._recheck(self.modal)
        else:
            row = self.query_one(LazyTable).cursor_row
            if row is not None:
                self._load_detail(row.id)

    @work(thread=True, group="envs-recheck", exit_on_error=False)
    def _recheck(self, modal: ActionModal) -> None:
        env = self.session.run(show_environment, modal.watching.key, now=self.session.now(),
                               stale_after=default_stale_after())
        self.post_message(self.Detail(env))
        self.post_message(self.Rechecked(modal, env))

    @on(Rechecked)
    def _rechecked(self, message: Rechecked) -> None:
        modal, env = message.modal, message.env
        if not modal.is_attached or modal is not self.modal or self._fingerprint(env) == modal.watching.seen:
            return
        text = self._summary("Now:", f"state {env.lifecycle_state}, claim "
                             f"{env.operation_kind or 'none'} by {env.claimed_by or 'nobody'}.")
        modal.changed_underneath(text, "The environment changed; cancel and look again.")

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return None, None
        payload = self.detail.to_json() if self.detail and self.detail.id == row.id else row.to_json()
        return row.id, payload
