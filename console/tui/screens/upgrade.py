"""The guarded upgrade: what release the file has, what the ledger says, every pending step with
its safety class, where the snapshot goes and whether it fits; then the run, with progress and a
log. Anything that needs --force is confirmed by typing the database file's name."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.worker import Worker, WorkerState
from textual.widgets import ProgressBar, RichLog

from console.errors import ConsoleError
from console.isolation import call_isolated
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.confirm import ConfirmModal
from console.tui.screens.typed import TypedConfirmModal
from console.services.profile_gate import UNVERIFIED_LINE
from console.services.upgrade.model import UpgradePlan, UpgradeProgress, UpgradeResult
from widgets.humane import size
from widgets.key_values import layout
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static

SAFETY_STYLE = {
    "additive": "green",
    "data-preserving-rebuild": "yellow",
    "historical-destructive": "bold red",
}


def snapshot_label(plan: UpgradePlan) -> str:
    """Where the snapshot goes, said the same way on the screen and in the dialog: its name when
    it is next to the database, else its full path."""
    snapshot = Path(plan.snapshot_path)
    if snapshot.parent == Path(plan.path).absolute().parent:  # the planned path is absolute
        return f"{snapshot.name} (next to the database)"
    return str(snapshot)


class UpgradeScreen(ConsoleScreen):
    COMMAND = "upgrade"
    TITLE = "Upgrade"
    WRITE_ACTIONS = frozenset({"run_upgrade"})
    HELP_NOTES = ("A verified snapshot is taken before the first step; each step runs in its own locked "
                  "transaction and is recorded in the ledger.\nSteps that need --force are confirmed by "
                  "typing the database file name.")

    BINDINGS = [
        Binding("U", "run_upgrade", "Run upgrade", id="upgrade.run"),
        Binding("g", "replan", "Re-plan", id="upgrade.replan"),
    ]

    class Planned(Message):
        """The plan, or the refusal planning ended in (a preflight that stops before the first write)."""

        def __init__(self, plan: UpgradePlan | None, refusal: ConsoleError | None = None) -> None:
            super().__init__()
            self.plan, self.refusal = plan, refusal

    class Progress(Message):
        def __init__(self, event: UpgradeProgress) -> None:
            super().__init__()
            self.event = event

    class Finished(Message):
        """The run's outcome. Not `ConsoleScreen.write`'s `WriteDone`: see `_run`."""

        def __init__(self, result: UpgradeResult | None = None, error: ConsoleError | None = None) -> None:
            super().__init__()
            self.result, self.error = result, error

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.plan: UpgradePlan | None = None
        self.refusal: ConsoleError | None = None
        self.running = False

    def compose_content(self) -> ComposeResult:
        with VerticalScroll(id="upgrade-body"):
            yield Static(Text("Planning…", style="dim"), id="upgrade-plan")
        yield ProgressBar(id="upgrade-progress", show_eta=False)
        yield RichLog(id="upgrade-log", markup=False, highlight=False, max_lines=500)

    def on_mount(self) -> None:
        # The bar and the log appear when an upgrade starts: idle, the plan has the whole screen.
        self.query_one(ProgressBar).display = False
        self.query_one(RichLog).display = False
        self._plan()

    def action_replan(self) -> None:
        if not self.running:
            self._plan()

    @work(thread=True, exclusive=True, group="upgrade-plan", exit_on_error=False)
    def _plan(self) -> None:
        # Planning and running open the database's files: in a child process, so this process's
        # connection keeps its locks (console/isolation.py says why).
        # This process's own connection holds a lock on the file too: it is not "another user".
        try:
            plan = self.session.isolated("console.services.upgrade.plan:plan_upgrade", self.session.db_path, "current",
                                         now=self.session.now(), others_ignored=(os.getpid(),))
        except ConsoleError as exc:  # the preflight refused: shown here, as `upgrade --plan` prints it
            self.post_message(self.Planned(None, exc))
            return
        self.post_message(self.Planned(plan))

    def on_upgrade_screen_planned(self, message: Planned) -> None:
        self.plan, self.refusal = message.plan, message.refusal
        body = self.query_one("#upgrade-plan", Static)
        if message.refusal is not None:
            text = Text("Refused: ", style="bold red")
            text.append_text(safe_text(message.refusal.reason))
            if message.refusal.hint:
                text.append("\n")
                text.append_text(safe_text(message.refusal.hint))
            text.append("\n\nNothing was written. Re-plan with g.", style="dim")
            body.update(text)
        else:
            body.update(self._render_plan(message.plan))
        self.refresh_bindings()

    def _render_plan(self, plan: UpgradePlan) -> RenderableType:
        detected = plan.detected_release or "no known release"
        if plan.shape_reason != f"archon {plan.detected_release} shape":  # not the release again
            detected += f" ({plan.shape_reason})"
        rows = [
            ("database", Path(plan.path).name),
            ("detected", detected),
            ("target", plan.target),
            ("ledger", f"{plan.ledger_state}, {len(plan.applied)} step(s) recorded"),
            ("snapshot", snapshot_label(plan)),
            ("space", f"needs {size(plan.snapshot_bytes)}, {size(plan.free_bytes)} free"
                      + ("" if plan.enough_space else "  NOT ENOUGH")),
        ]
        fields = layout([(name, safe_text(value, "bold red" if "NOT ENOUGH" in str(value) else "", one_line=True))
                         for name, value in rows])  # long values wrap under their column (widgets/key_values.py)
        text = Text(end="")
        if plan.up_to_date:
            text.append("\nUp to date: nothing to apply.", style="bold green")
            return Group(fields, text)
        if plan.in_use_by:
            text.append("\nRefused: ", style="bold red")
            text.append_text(safe_text(f"in use by {'; '.join(plan.in_use_by)}: stop archon first, then "
                                       "re-plan (g)."))
            text.append("\n")
        gate = plan.profile_evidence
        if gate is not None and gate.contradicted:
            text.append("\nRefused: ", style="bold red")
            text.append_text(safe_text(f"{gate.refusal}. Start archon {gate.release} once to let it upgrade "
                                       "this database itself."))
            text.append("\n")
            for item in gate.evidence.get("contradictions", [])[:20]:
                text.append("  differs: ", style="red")
                text.append_text(safe_text(f"{item['row_id']}: {item['what']}", one_line=True))
                text.append("\n")
        elif gate is not None and gate.force_reason:
            text.append("\nUnverified: ", style="bold yellow")
            text.append_text(safe_text((gate.unverified or UNVERIFIED_LINE) + "."))
            text.append("\n")
        elif gate is not None:
            text.append("\nprofile evidence: ", style="dim")
            text.append_text(safe_text(gate.summary))
            text.append("\n")
        if plan.force_required:
            # The CLI's `--force` is, here, the run key and the file's name typed in its dialog.
            key = self.key_for("run_upgrade") or "the run key"
            text.append(f"\nAccepted only by typing the file's name after {key}: ", style="bold red")
            text.append_text(safe_text("; ".join(plan.force_reasons)))
            text.append("\n")
        for change in plan.policy_changes:
            text.append("policy: ", style="yellow")
            text.append_text(safe_text(change))
            text.append("\n")
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        table.add_column("step", no_wrap=True)
        table.add_column("release", no_wrap=True)
        table.add_column("safety", no_wrap=True)
        table.add_column("rows", justify="right", no_wrap=True)
        table.add_column("what", ratio=1)
        for step in plan.pending:
            table.add_row(safe_text(step.id, one_line=True), safe_text(step.release),
                          Text(step.safety, style=SAFETY_STYLE.get(step.safety, "")),
                          Text("?" if step.rows is None else f"{step.rows:,}"),
                          safe_text(step.description))
        return Group(fields, text, Text(f"\n{len(plan.pending)} pending step(s):", style="bold"), table)

    def unavailable(self) -> dict[str, str]:
        reasons = super().unavailable()
        if reasons:
            return reasons
        if self.running:
            return {"run_upgrade": "an upgrade is running"}
        if self.refusal is not None:
            return {"run_upgrade": "the plan was refused: " + self.refusal.reason}
        if self.plan is None:
            return {"run_upgrade": "still planning"}
        if self.plan.up_to_date:
            return {"run_upgrade": "the database is up to date"}
        if self.plan.in_use_by:
            return {"run_upgrade": "another process holds the database (" + "; ".join(self.plan.in_use_by)
                                   + "): stop archon first"}
        if not self.plan.enough_space:
            return {"run_upgrade": "not enough free space for the snapshot"}
        gate = self.plan.profile_evidence
        if gate is not None and gate.contradicted:
            return {"run_upgrade": f"the database contradicts the console's profile algorithms; start archon "
                                   f"{gate.release} once to let it upgrade this database itself"}
        return {}

    def action_run_upgrade(self) -> None:
        if "run_upgrade" in self.unavailable():
            self.action_why()
            return
        plan = self.plan
        summary = Text(f"Apply {len(plan.pending)} step(s) to reach {plan.target}.\n", style="bold")
        summary.append("A verified snapshot is written first to ", style="dim")
        summary.append_text(safe_text(snapshot_label(plan), one_line=True))
        summary.append(".\nStop archon first: older archon versions may not run on the upgraded file.")
        if plan.force_required:
            summary.append("\n\nRisks you accept by typing the name: ", style="bold red")
            summary.append_text(safe_text("; ".join(plan.force_reasons)))
            modal = TypedConfirmModal("Upgrade, accepting its risks", summary, expected=self.session.db_path.name,
                                      confirm_label="Upgrade")
        else:
            modal = ConfirmModal("Upgrade", summary)

        def done(value: object) -> None:  # True, or the typed name; None or False: cancelled
            if value is not None and value is not False:
                self._run(force=plan.force_required)

        self.app.push_screen(modal, done)

    @work(thread=True, exclusive=True, group="upgrade-run", exit_on_error=False)
    def _run(self, force: bool) -> None:
        """The one write that does not go through `ConsoleScreen.write` (console/tui/screens/base.py):
        that path holds the session's lock for the call, and an upgrade runs for minutes in a child
        process that needs no connection of ours (any read another screen makes on the UI thread
        would freeze until it ends); and it reports only a `Refusal` back, while an upgrade also
        stops with `DatabaseUnusable` (exit 3), after which this screen must leave its running state."""
        self.post_message(self.Progress(UpgradeProgress("start", 0, 1, "Starting the upgrade…")))
        # Nothing this console does writes while the child runs: its holder check ignores our pid
        # (console/tui/session.py `hold_writes`). Every screen's write keys grey at once and come back
        # however the run ends (a refusal, a worker error, the app exiting).
        try:
            with self.session.hold_writes():
                self.console_app.post_message(self.console_app.WritesHeldChanged())
                result = call_isolated(
                    "console.services.upgrade.run:run_upgrade",
                    self.session.db_path, target="current", force=force, now=self.session.write_now(),
                    progress=lambda event: self.post_message(self.Progress(event)),
                    busy_timeout_ms=self.session.ctx.busy_timeout_ms, others_ignored=(os.getpid(),),
                )
        except ConsoleError as exc:
            self.post_message(self.Finished(error=exc))
            return
        finally:  # after `hold_writes` ended: the screens re-read `upgrading` as False
            self.console_app.post_message(self.console_app.WritesHeldChanged())
        self.post_message(self.Finished(result=result))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A run that failed with something other than a refusal (the child died) leaves the
        running state too; the error itself is shown by `ConsoleScreen`'s handler (Textual calls
        one handler per class, so this one does not call it again)."""
        if event.worker.group == "upgrade-run" and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self.running = False
            self.query_one(ProgressBar).display = False
            self.refresh_bindings()
            self._plan()

    def on_upgrade_screen_progress(self, message: Progress) -> None:
        if not self.running:
            self.running = True
            self.query_one(ProgressBar).display = True
            self.query_one(RichLog).display = True
        self.refresh_bindings()
        event = message.event
        bar = self.query_one(ProgressBar)
        bar.update(total=max(1, event.total), progress=event.done)
        if event.message:
            self.query_one(RichLog).write(safe_text(f"[{event.kind}] {event.message}"))

    def on_upgrade_screen_finished(self, message: Finished) -> None:
        self.running = False
        self.query_one(ProgressBar).display = False  # the log stays: it is the run's record
        log = self.query_one(RichLog)
        if message.error is not None:
            log.write(safe_text(f"refused: {message.error.reason}", "bold red"))
            self.show_error(message.error)
        else:
            log.write(safe_text(message.result.message, "bold green"))
            if message.result.undo_command:  # names --db: ARCHON_DB_PATH may name another file
                log.write(safe_text(f"To undo: {message.result.undo_command}"))
            self.notify_result(message.result.message)  # the new release reaches every screen by
            # the app's poll (`ArchonConsole.ReleaseChanged`), as an upgrade made elsewhere does
        self._plan()

    def refresh_data(self) -> None:
        if not self.running:
            self._plan()
