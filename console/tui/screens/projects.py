"""Every project at a glance: active profile and provider, approvals waiting (and expiring within
the hour), environments by state, held and stale claims. Enter opens the project's profiles."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding

from console.models.projects import ProjectSummary
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.pages import ListSource
from console.services import projects as projects_service
from widgets.lazy_table import LazyTable
from widgets.table_column import Column
from widgets.safe_text import clean, safe_text
from widgets.safe_widgets import Static


def _envs(row: ProjectSummary) -> Text:
    states = row.environments
    if not states:
        return Text("—", style="dim")
    return safe_text(" ".join(f"{s}:{n}" for s, n in sorted(states.items())), one_line=True)


def _pending(row: ProjectSummary) -> Text:
    """`12 (1 <1h, 2 overdue)`: the count, then what needs attention soon, in one bracket."""
    n = row.pending_approvals
    if n is None:
        return Text("n/a", style="dim")
    text = Text(str(n), style="bold" if n else "dim")
    notes = []
    if row.pending_expiring_within_hour:
        notes.append((f"{row.pending_expiring_within_hour} <1h", "yellow"))
    if row.pending_overdue:
        notes.append((f"{row.pending_overdue} overdue", "red"))
    if notes:
        text.append(" (")
        for i, (note, style) in enumerate(notes):
            text.append(", " if i else "")
            text.append(note, style=style)
        text.append(")")
    return text


NAME_WIDTH = 26
DELETING = " [being deleted]"


def _name(row: ProjectSummary) -> Text:
    """The project's name, marked `[being deleted]` as the CLI marks it (in words, not by a muted
    colour alone); the name gives way to the mark."""
    name = clean(row.name, one_line=True)
    if not row.deleting:
        return Text(name, no_wrap=True, end="")
    room = NAME_WIDTH - len(DELETING)
    if len(name) > room:
        name = name[: room - 1] + "…"
    return Text(name, no_wrap=True, end="").append(DELETING, style="bold")


def _claims(row: ProjectSummary) -> Text:
    held = row.claims_held
    if held is None:
        return Text("n/a", style="dim")
    text = Text(str(held), style="bold" if held else "dim")
    if row.claims_stale:
        text.append(f" ({row.claims_stale} stale)", style="yellow")
    return text


class OverviewScreen(ConsoleScreen):
    COMMAND = "projects"
    TITLE = "Projects"
    HELP_NOTES = "Enter opens a project's execution profile revisions. `a` and `e` open its approvals and environments."

    BINDINGS = [
        Binding("enter", "open_project", "Profiles", id="projects.open"),
        Binding("a", "project_approvals", "Approvals", id="projects.approvals"),
        Binding("e", "project_envs", "Environments", id="projects.envs"),
    ]

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument

    def compose_content(self) -> ComposeResult:
        yield Static(Text("every project; Enter opens its profiles", style="dim"), classes="filters", id="filters")
        yield LazyTable([
            Column("name", "project", NAME_WIDTH, render=_name),
            Column("build_execution_provider", "provider", 12),
            Column("active_revision", "profile", 7, render=lambda r: Text(f"r{r.active_revision}" if r.active_revision else "—")),
            Column("pending_approvals", "pending approvals", 22, render=_pending),
            Column("environments", "environments", 27, render=_envs),
            Column("claims_held", "claims", 12, render=_claims),
        ], row_class=lambda r: "muted" if r.deleting else None, id="projects",
            empty_message="No projects in this database.")

    def on_mount(self) -> None:
        table = self.query_one(LazyTable)
        table.focus()
        table.set_source(self._source())

    def _source(self) -> ListSource:
        return ListSource(lambda: self.session.run(projects_service.list_projects, now=self.session.now()))

    def refresh_data(self) -> None:
        self.query_one(LazyTable).set_source(self._source(), keep_cursor=True)

    def _project(self) -> ProjectSummary | None:
        return self.query_one(LazyTable).cursor_row

    @on(LazyTable.RowActivated)
    def _activated(self, message: LazyTable.RowActivated) -> None:
        self.console_app.navigate("project", message.row.id)

    def action_open_project(self) -> None:
        row = self._project()
        if row:
            self.console_app.navigate("project", row.id)

    def action_project_approvals(self) -> None:  # as `:approvals ID`: refused on a file without a queue
        row = self._project()
        if row:
            self.console_app.navigate("approvals", row.id)

    def action_project_envs(self) -> None:
        row = self._project()
        if row:
            self.console_app.navigate("envs", row.id)

    def copy_target(self) -> tuple[str | None, Any]:
        row = self._project()
        return (row.id, row.to_json()) if row else (None, None)
