"""`:doctor` -- doctor's findings in the TUI, with a detail pane and Enter to go to the row concerned.

Doctor runs in a thread worker on the session's database *path*, not on the session's connection:
it opens its own read-only connections (in place, or through a private copy where
SQLite cannot read in place) and runs its
long scans in parallel, and the UI thread never waits for it. Every string shown comes from the
database or a finding built from it, so it goes through `safe_text` (no markup, controls pictured).

Enter on a finding goes to its first row; Tab into the rows list and Enter goes to that row. A row
of approval_requests opens the approval queue (every status) with the cursor on it; an environment
opens :envs on it; a project or one of its profile revisions opens `:project ID`. The target
screens are used as they are: their `jump_to=` argument puts the cursor on the key once the list
has counted its rows. Workers report back with typed messages (`Progress`, `Finished`, `Resolved`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.containers import Horizontal, VerticalScroll

from console.tui.screens.base import UPGRADE_REASON, ConsoleScreen
from widgets.humane import plural
from widgets.safe_text import safe_text
from widgets.safe_widgets import DataTable, Static

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
# table of a finding's rows -> what can show it
NAVIGABLE = ("approval_requests", "execution_environments", "projects", "execution_profile_revisions")


class DoctorScreen(ConsoleScreen):
    COMMAND = "doctor"
    TITLE = "doctor"
    HELP_NOTES = (
        "Doctor's checks on this database, worst first. Enter on a finding goes to its first row; "
        "Tab to the rows list and Enter goes to that row. r runs the checks again, f runs the slower "
        "full integrity_check. Doctor never writes."
    )
    BINDINGS = [
        Binding("r", "rerun", "Run again", id="doctor.rerun"),
        Binding("f", "full", "Full check", id="doctor.full"),
    ]

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.report = None
        self.findings: list = []
        self.full = False

    # ------------------------------------------------------------ layout
    def compose_content(self) -> ComposeResult:
        yield Static(Text("Running doctor...", style="dim"), classes="filters", id="doctor-summary")
        with Horizontal(classes="main", id="main"):
            table = DataTable(id="findings", cursor_type="row", zebra_stripes=True)
            table.add_columns("severity", "id", "title", "found")
            yield table
            with VerticalScroll(classes="detail", id="detail"):
                yield Static(Text("Select a finding.", style="dim"), id="finding-detail")
                yield Static(Text("Rows", style="bold"), classes="section")
                rows = DataTable(id="finding-rows", cursor_type="row")
                rows.add_columns("table", "id")
                yield rows

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#findings", DataTable).focus()
        self._start(self.full)

    # ------------------------------------------------------------ running
    def action_rerun(self) -> None:
        self._start(self.full)

    def action_full(self) -> None:
        self.full = True
        self._start(True)

    def _start(self, full: bool) -> None:
        if self.session.upgrading:
            # Doctor runs in a child process, which the upgrade's per-step holder check would see as
            # another user of the file and stop the upgrade part-way for (console/tui/session.py
            # `hold_writes`).
            self._summary(Text(f"Doctor waits: {UPGRADE_REASON}; its checks would open the file beside the "
                               "upgrade and stop it. Press r once the upgrade has finished.", style="yellow"))
            return
        self._summary(Text(f"Running doctor ({'full integrity_check' if full else 'quick_check'})...",
                           style="dim"))
        self._run_doctor(full)

    def refresh_data(self) -> None:
        """Another process committed: doctor is a snapshot, the operator re-runs it with r."""

    def clock_changed(self) -> None:
        """Doctor judged the file against the other clock (a claim's staleness, an expiry): run again."""
        super().clock_changed()
        self.action_rerun()

    class Finished(Message):
        """Doctor's report, from the worker that ran it in a child process."""

        def __init__(self, report: Any) -> None:
            super().__init__()
            self.report = report

    class Resolved(Message):
        """Where a finding's row is shown: the screen to open, or why there is none."""

        def __init__(self, table: str, key: str, project: str | None) -> None:
            super().__init__()
            self.table, self.key, self.project = table, key, project

    @work(thread=True, exclusive=True, group="doctor", exit_on_error=False)
    def _run_doctor(self, full: bool) -> None:
        # In a child process: doctor opens the database's files, and closing them here would drop
        # the locks of this process's own connection (console/isolation.py says why).
        report = self.session.isolated("console.services.doctor:run_doctor", self.session.db_path, full=full,
                                       now=self.session.now())
        self.post_message(self.Finished(report))

    @on(Finished)
    def _finished(self, message: Finished) -> None:
        self._show(message.report)

    def _summary(self, text: Text) -> None:
        self.query_one("#doctor-summary", Static).update(text)

    def _show(self, report) -> None:
        self.report = report
        self.findings = sorted(report.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
        counts = report.counts()
        summary = Text()
        for severity in ("error", "warning", "info"):
            summary.append(f"{plural(counts[severity], severity, 'info' if severity == 'info' else None)}  ",
                           SEVERITY_STYLE[severity])
        summary.append(f"· {report.mode} mode at {report.generated_at} UTC · exit code {report.exit_code()}",
                       "dim")
        self._summary(summary)
        table = self.query_one("#findings", DataTable)
        table.clear()
        for index, finding in enumerate(self.findings):
            table.add_row(
                safe_text(finding.severity, SEVERITY_STYLE.get(finding.severity, ""), one_line=True),
                safe_text(finding.id, one_line=True),
                safe_text(finding.title, one_line=True),
                safe_text(finding.found, one_line=True),
                key=str(index),
            )
        if self.findings:
            table.move_cursor(row=0)
            self._detail(self.findings[0])

    # ------------------------------------------------------------ detail
    def current(self):
        table = self.query_one("#findings", DataTable)
        if not self.findings or table.cursor_row is None or table.cursor_row >= len(self.findings):
            return None
        return self.findings[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "findings" and self.findings and event.cursor_row < len(self.findings):
            self._detail(self.findings[event.cursor_row])

    def _detail(self, finding) -> None:
        text = Text()
        text.append_text(safe_text(finding.severity.upper(), SEVERITY_STYLE.get(finding.severity, "")))
        text.append(" ")
        text.append_text(safe_text(finding.id, "bold"))
        text.append("\n")
        text.append_text(safe_text(finding.title, "bold"))
        for heading, body in (("Found", finding.found), ("Why it matters", finding.why),
                              ("What to do", finding.what_to_do)):
            if body:
                text.append(f"\n\n{heading}\n", "bold")
                text.append_text(safe_text(body))
        if finding.count and finding.rows and finding.count > len(finding.rows):
            text.append(f"\n\n{len(finding.rows)} of {finding.count} rows listed below.", "dim")
        self.query_one("#finding-detail", Static).update(text)
        rows = self.query_one("#finding-rows", DataTable)
        rows.clear()
        for index, row in enumerate(finding.rows):
            style = "" if row.get("table") in NAVIGABLE else "dim"
            rows.add_row(safe_text(row.get("table"), style, one_line=True),
                         safe_text(row.get("id"), style, one_line=True), key=str(index))

    def copy_target(self) -> tuple[str | None, Any]:
        finding = self.current()
        return (None, None) if finding is None else (finding.id, finding.to_json())

    # ------------------------------------------------------------ going to the row
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        finding = self.current()
        if finding is None:
            return
        if event.data_table.id == "findings":
            if not finding.rows:
                self.notify("This finding names no row.", markup=False)
                return
            self.go_to(finding.rows[0])
        elif event.data_table.id == "finding-rows" and event.cursor_row < len(finding.rows):
            self.go_to(finding.rows[event.cursor_row])

    def go_to(self, row: dict[str, str]) -> None:
        table, key = row.get("table"), row.get("id")
        if table not in NAVIGABLE or not key:
            self.notify(f"No screen lists rows of {table}.", severity="warning", markup=False)
            return
        self._resolve_worker(table, key)

    @work(thread=True, group="doctor-jump", exit_on_error=False)
    def _resolve_worker(self, table: str, key: str) -> None:
        from console.services.doctor import project_to_open

        project = None
        if table in ("projects", "execution_profile_revisions"):
            project = self.session.run(project_to_open, table, key)
        self.post_message(self.Resolved(table, key, project))

    @on(Resolved)
    def _resolved(self, message: Resolved) -> None:
        from console.tui.screens.approvals import ApprovalsScreen
        from console.tui.screens.environments import EnvironmentsScreen
        from console.tui.screens.profiles import ProfilesScreen

        if message.table == "approval_requests":
            self.app.push_screen(ApprovalsScreen(jump_to=message.key))
        elif message.table == "execution_environments":
            self.app.push_screen(EnvironmentsScreen(jump_to=message.key))
        elif message.project is None:
            self.notify(f"{message.key} is gone.", severity="warning", markup=False)
        else:
            self.app.push_screen(ProfilesScreen(message.project))


__all__ = ["DoctorScreen"]
