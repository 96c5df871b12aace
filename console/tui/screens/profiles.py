"""One project's execution profile revisions: the JSON, a diff of any two, the audit trail, and
activation of an older revision (a rollback) after seeing the diff and the provider change."""

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
from console.models.profiles import ProfileRevision
from console.models.projects import ProfileAuditEvent, Project
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.confirm import Decision, Watched
from console.tui.screens.reason import ReasonModal
from console.tui.screens.pages import ListSource
from console.services import approval_queue as queue
from console.services import navigation
from console.services import profiles as profiles_service
from widgets.diff_view import diff_text
from widgets.humane import exact
from widgets.json_view import JsonView
from widgets.key_values import Entry, KeyValues
from widgets.lazy_table import LazyTable
from widgets.table_column import Column
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static
from widgets.timeline import Timeline, TimelineEvent


def activation_greying(row: ProfileRevision | None, project: Project | None) -> dict[str, str]:
    """The activate key's state for the highlighted revision: the service's answer, never re-derived."""
    if row is None:
        return {"activate": "no revision selected"}
    why = profiles_service.activation_problem(row, project)
    return {"activate": why} if why else {}


class ProfilesScreen(ConsoleScreen):
    COMMAND = "project"
    TITLE = "Profiles"
    WRITE_ACTIONS = frozenset({"activate"})
    HELP_NOTES = (
        "Revisions are immutable; activating an older one is a rollback and is recorded in the audit trail.\n"
        "m marks a revision; D shows the diff of the marked revision (or the active one) against the highlighted one."
    )

    BINDINGS = [
        Binding("m", "mark", "Mark for diff", id="profiles.mark"),
        Binding("D", "diff", "Diff", id="profiles.diff"),
        Binding("A", "activate", "Activate", id="profiles.activate"),
    ]

    class Loaded(Message):
        def __init__(self, project: Project, audit: list[ProfileAuditEvent]) -> None:
            super().__init__()
            self.project, self.audit = project, audit

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.project: Project | None = None
        self.audit: list[ProfileAuditEvent] = []
        self.marked: ProfileRevision | None = None
        self.showing_diff = False

    def compose_content(self) -> ComposeResult:
        yield Static(Text("loading project…", style="dim"), classes="filters", id="filters")
        with Horizontal(classes="main", id="main"):
            yield LazyTable([
                Column("revision", "rev", 4, render=lambda r: Text(f"r{r.revision}", style="bold" if r.active else "")),
                Column("active", "", 6, render=lambda r: Text("active", style="green bold") if r.active else Text("")),
                Column("schema_version", "schema", 6),
                Column("provider_preference", "provider", 14),
                Column("fingerprint_short", "fingerprint", 12),
                Column("created_at", "created", 19),
            ], id="revisions", empty_message="No revisions.")
            with VerticalScroll(classes="detail", id="detail"):
                yield KeyValues("", id="detail-head")
                yield JsonView(id="detail-json")
                yield Static(Text("Audit", style="bold"), classes="section")
                yield Timeline(id="detail-audit")

    def on_mount(self) -> None:
        self.query_one(LazyTable).focus()
        self._load_project()

    @work(thread=True, exclusive=True, group="profiles-load", exit_on_error=False)
    def _load_project(self) -> None:
        project, audit = self.session.run(navigation.project_with_audit, self.argument)
        self.post_message(self.Loaded(project, audit))

    def on_profiles_screen_loaded(self, message: Loaded) -> None:
        first = self.project is None
        self.project, self.audit = message.project, message.audit
        head = Text("project ", style="dim")
        head.append_text(safe_text(self.project.name, "bold", one_line=True))
        head.append("  id ", style="dim")
        head.append_text(safe_text(self.project.id, one_line=True))
        head.append("  provider ", style="dim")
        head.append_text(safe_text(self.project.build_execution_provider, "bold", one_line=True))
        if self.marked:
            head.append("  marked ", style="dim")
            head.append(f"r{self.marked.revision}", style="bold")
        self.query_one("#filters", Static).update(head)
        pid = self.project.id
        self.query_one(LazyTable).set_source(
            ListSource(lambda: self.session.run(profiles_service.list_revisions, pid)), keep_cursor=not first)
        self._show_audit()

    def _show_audit(self) -> None:
        events = []
        for e in self.audit:
            title = f"{e.event_type}: {e.profile_revision_id}"
            detail = f"previous {e.previous_profile_revision_id}" if e.previous_profile_revision_id else ""
            meta = queue.parse_json_field(e.metadata_json) or {}
            if isinstance(meta, dict) and meta.get("reason"):
                detail = " · ".join(x for x in (detail, f"by {meta.get('actor')}: {meta.get('reason')}") if x)
            events.append(TimelineEvent(parse_time(e.created_at), title, detail))
        self.query_one("#detail-audit", Timeline).show(events)

    @on(LazyTable.CursorMoved)
    def _cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        self.showing_diff = False
        if message.row is not None:
            self._show_revision(message.row)
        self.refresh_bindings_if_changed()

    def _show_revision(self, r: ProfileRevision) -> None:
        self.query_one("#detail-head", KeyValues).show(lambda now: _revision_fields(r, now), self.session.now())
        self.query_one("#detail-json", JsonView).show(r.profile_json, dark=self.app.current_theme.dark)

    def _active(self) -> ProfileRevision | None:
        source = self.query_one(LazyTable).source
        rows = source._all() if isinstance(source, ListSource) and source._rows is not None else []
        return next((r for r in rows if r.active), None)

    def action_mark(self) -> None:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return
        self.marked = None if self.marked and self.marked.id == row.id else row
        self.notify(f"Marked r{row.revision} for diff." if self.marked else "Mark cleared.", markup=False)

    def action_diff(self) -> None:
        row = self.query_one(LazyTable).cursor_row
        base = self.marked or self._active()
        if row is None or base is None:
            return
        if self.showing_diff:
            self.showing_diff = False
            self._show_revision(row)
            return
        self.showing_diff = True
        head = Text(f"diff r{base.revision} → r{row.revision}", style="bold")
        self.query_one("#detail-head", Static).update(head)
        self.query_one("#detail-json", JsonView).update(
            diff_text(base.profile_json, row.profile_json,
                      old_label=f"r{base.revision}", new_label=f"r{row.revision}"))

    def unavailable(self) -> dict[str, str]:
        reasons = super().unavailable()
        if reasons:
            return reasons
        return activation_greying(self.query_one(LazyTable).cursor_row, self.project)

    def action_activate(self) -> None:
        if "activate" in self.unavailable():
            self.action_why()
            return
        row = self.query_one(LazyTable).cursor_row
        active = self._active()
        summary = Text("Activate ", style="bold")
        summary.append_text(safe_text(f"r{row.revision} ({row.id})", "bold", one_line=True))
        summary.append("\nreplacing ", style="dim")
        summary.append_text(safe_text(f"r{active.revision}" if active else "none", one_line=True))
        old_provider = self.project.build_execution_provider if self.project is not None else None
        new_provider = row.provider_preference
        summary.append("\nbuild provider ", style="dim")
        summary.append_text(safe_text(f"{old_provider} → {new_provider}", "bold yellow" if old_provider != new_provider else "", one_line=True))
        summary.append("\n\n")
        if active:
            summary.append_text(diff_text(active.profile_json, row.profile_json,
                                          old_label=f"r{active.revision} (active)", new_label=f"r{row.revision}"))
        modal = ReasonModal("Activate profile revision", summary, required=True, confirm_label="Activate",
                            danger=old_provider != new_provider, watching=Watched(row.id, "activate"))

        def done(decision: Decision | None) -> None:
            if decision is not None and decision.reason:
                self.write(profiles_service.activate, row.id, self.session.actor,
                           reason=decision.reason, now=self.session.write_now())

        self.app.push_screen(modal, done)

    def refresh_data(self) -> None:
        if self.argument:
            self._load_project()

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return None, None
        payload = row.to_json()
        payload["profile_json"] = queue.parse_json_field(row.profile_json)
        return row.id, payload


def _revision_fields(r: ProfileRevision, now: datetime) -> list[Entry]:
    """A revision's head at `now` (drawn again at every tick: widgets/key_values.py)."""
    created = parse_time(r.created_at)
    entries: list[Entry] = [safe_text(r.id, "bold", one_line=True)]
    entries += [(name, safe_text(value, one_line=True)) for name, value in (
        ("revision", f"{r.revision}{'  (active)' if r.active else ''}"),
        ("schema", r.schema_version),
        ("provider", r.provider_preference),
        ("created", f"{relative(created, now, unknown='—', present='now')} ({exact(created)})"),
        ("activated", ", ".join(exact(parse_time(t)) for t in r.activated_at) or "never"),
        ("fingerprint", r.fingerprint),
    )]
    if not r.fingerprint_matches:
        entries.append(Text("fingerprint does not match the profile JSON (shown, not fixed)", style="yellow"))
    if r.activation_refused:
        entries.append(safe_text(f"cannot be activated: {r.activation_refused}", "yellow", one_line=True))
    return entries
