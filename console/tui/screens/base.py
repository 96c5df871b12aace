"""What every console screen shares: the frame, copying, refresh on change, and worker errors.

A screen composes `compose_content()` between the header/badge bar and the Footer. Database work
runs in thread workers started by the screen; a worker that raises ends in `ErrorModal`, never a
crash (`exit_on_error=False` plus `on_worker_state_changed`). Write actions are listed in
`WRITE_ACTIONS`; `check_action` greys them out in read-only mode and while an upgrade runs
(console/tui/session.py `hold_writes`), and `unavailable()` says why for
every greyed action (`w` shows it, the help screen lists it, and pressing the greyed key itself
shows it: `ArchonConsole.run_action` calls `explain_unavailable`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header
from textual.worker import Worker, WorkerState

from console.errors import Refusal
from console.services.base import ReleaseRefusal
from console.tui.session import UPGRADE_REASON
from console.tui.screens.error import ErrorModal
from widgets import clipboard
from widgets.badge import Badge
from widgets.fitted_line import FittedLine, Part
from widgets.key_footer import KeyFooter
from widgets.key_values import KeyValues
from widgets.lazy_table import LazyTable
from widgets.safe_text import clean, safe_text
from widgets.terminal_guard import SafeTitles

if TYPE_CHECKING:
    from console.tui.session import Session
    from console.models.support import SupportInfo

READ_ONLY_REASON = "read-only mode (--read-only): nothing can be written"
SUPPORT_REASON = "support snapshot: read-only"
EXPLAIN_AGAIN_AFTER = 4.0  # seconds before the same reason is shown again for a repeated key
TICK_SECONDS = 1.0  # how often countdowns and "… ago" are drawn again (`ConsoleScreen.tick`)


class WriteOutcome(Protocol):
    """What a write returns to its screen: at least the sentence saying what happened."""

    @property
    def message(self) -> str: ...


class ConsoleApp(Protocol):
    """What a screen uses of the running app (console/tui/app.py `ArchonConsole`), named here: the
    app imports the screens, so a screen cannot import the app back."""

    session: Session
    support: SupportInfo | None
    release: str | None
    release_label: str
    WritesHeldChanged: type[Message]

    def navigate(self, name: str, argument: str | None = None) -> None: ...

    def take_prefetched(self, command: str, argument: str | None) -> Any | None: ...

    def post_message(self, message: Message) -> bool: ...


class GreyedKeys:
    """Write keys greyed in the Footer while they cannot act, and why: `w`, the help screen, and
    the greyed key itself (the app's `run_action` calls `explain_unavailable`) say it in one
    sentence per key. Mixed into every screen with write keys, local (`ConsoleScreen`) or fleet
    (console/tui/screens/fleet_base.py)."""

    WRITE_ACTIONS: frozenset[str] = frozenset()

    def unavailable(self) -> dict[str, str]:
        """action -> why it cannot act now."""
        return {}

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.WRITE_ACTIONS and action in self.unavailable():
            return None  # greyed in the Footer; `w` says why
        return True

    def _reason_lines(self, reasons: dict[str, str]) -> str:
        names = {ab.binding.action: ab.binding.description for ab in self.active_bindings.values()}
        return "\n".join(f"{names.get(a, a)}: {r}" for a, r in sorted(reasons.items()))

    def action_why(self) -> None:
        reasons = self.unavailable()
        if not reasons:
            self.notify("Every action on this screen can act now.", title="Why greyed?")
            return
        self.notify(clean(self._reason_lines(reasons)), title="Why greyed?", timeout=8, markup=False)

    _explained: tuple[str, float] | None = None

    def explain_unavailable(self, action: str) -> bool:
        """A greyed key was pressed: say why, in `w`'s words (once while the same toast shows)."""
        why = self.unavailable().get(action)
        if not why:
            return False
        text = clean(self._reason_lines({action: why}))
        now = time.monotonic()
        if self._explained is None or self._explained[0] != text or now - self._explained[1] > EXPLAIN_AGAIN_AFTER:
            self._explained = (text, now)
            self.notify(text, title="Why greyed?", severity="warning", timeout=EXPLAIN_AGAIN_AFTER, markup=False)
        return True

    def refresh_bindings_if_changed(self) -> None:
        """The Footer is re-laid out on every refresh_bindings; do it only when something changed."""
        state = tuple(sorted(self.unavailable().items()))
        if state != getattr(self, "_binding_state", None):
            self._binding_state = state
            self.refresh_bindings()


class ConsoleScreen(SafeTitles, GreyedKeys, Screen):
    COMMAND = ""  # the `:name` that opens this screen
    TITLE = ""
    HELP_NOTES = ""  # what this screen's words mean, for the help screen

    BINDINGS = [
        Binding("escape", "app.back", "Back", id="nav.back"),
        Binding("y", "copy_id", "Copy id", id="copy.id"),
        Binding("Y", "copy_json", "Copy JSON", id="copy.json", show=False),
        Binding("w", "why", "Why greyed?", id="help.why", show=False),
    ]

    @classmethod
    def prefetch(cls, session: "Session", argument: str | None) -> Any | None:
        """Start reading what this screen shows first, before it exists (the start screen, while
        Textual starts up); the screen takes it back with `console_app.take_prefetched`."""
        return None

    @property
    def console_app(self) -> ConsoleApp:
        return self.app  # type: ignore[return-value]

    @property
    def session(self) -> "Session":
        return self.console_app.session

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        with Horizontal(id="badges"):
            yield from self.badges()
        yield from self.compose_content()
        yield KeyFooter()

    def badges(self) -> ComposeResult:
        app = self.console_app
        yield Badge(self.TITLE or self.COMMAND, "info", id="screen-badge")
        if app.support is not None:  # the mode says read-only itself: the write keys say why they are grey
            yield Badge("SUPPORT", "error", id="support-badge")
        elif app.session.read_only:
            yield Badge("READ-ONLY", "warning", id="read-only-badge")
        yield FittedLine(self.header_parts, id="db-label")

    def header_parts(self) -> list[Part]:
        """What the header line says after the badges, most important first when short of room:
        the release (never dropped: support's first question), the clock the times are shown
        against (a snapshot only), the database's name, who acts, then where a snapshot came from.
        Asked at every render, so a refreshed header shows the release and clock of the moment."""
        app = self.console_app
        support = app.support
        name = support.original.name if support is not None else app.session.db_path.name
        parts = [Part(_shortened(name, 24), rank=2),
                 Part((Text(app.release_label),), rank=0, keep=True)]
        if support is not None:
            clock = app.session.clock
            parts.append(Part((Text(clock.label, style="bold" if clock.as_of else ""),), rank=1))
        parts.append(Part((safe_text(f"as {app.session.actor}", one_line=True),), rank=3))
        if support is not None:
            taken = f"taken {support.taken_at.strftime('%Y-%m-%d %H:%MZ')}"
            parts.append(Part((safe_text(f"snapshot of {support.original_path} {taken}", one_line=True),
                               Text(f"snapshot {taken}")), rank=4))
        return parts

    def compose_content(self) -> ComposeResult:
        return
        yield

    def on_mount(self) -> None:
        """Also sets the app's breakpoint class (`-narrow`/`-wide`) before the first frame. Textual
        sets it on the screen's first Resize, which arrives after the first paint: a 100-column
        terminal saw the wide layout (and its extra rows, read for nothing) flash before the narrow
        one. (Textual calls one Mount handler per class, `_on_mount` before `on_mount`: this one
        must stay `on_mount` or it would hide itself.)"""
        self.sub_title = ""
        if self._ticker is None:  # a screen whose on_mount calls this one too is mounted once
            self._ticker = self.set_interval(TICK_SECONDS, self.tick)
        breakpoints = self.app.HORIZONTAL_BREAKPOINTS or []
        chosen = None
        for minimum, name in breakpoints:
            if self.app.size.width >= minimum:
                chosen = name
        self.update_classes({name: name == chosen for _, name in breakpoints}, animate=False)

    # ------------------------------------------------------------ time
    _ticker: Any = None

    def tick(self) -> None:
        """Every second, on the screen in front: the lists' countdowns and the detail panes'
        "… ago" drawn again from the one clock (console/tui/session.py `Session.now`), without
        reading the database. One mechanism for every screen (widgets/key_values.py)."""
        if not self.is_current:
            return
        for table in self.query(LazyTable):
            table.refresh()
        panes = self.query(KeyValues)
        if panes:
            now = self.session.now()
            for pane in panes:
                pane.age(now)

    def clock_changed(self) -> None:
        """The one clock switched (a snapshot's time or now, console/tui/app.py `action_toggle_clock`):
        the header says which, and what was read against the other clock is read again (a list's
        "pending" depends on the time, and so does a detail pane's every sentence)."""
        for line in self.query(FittedLine):
            line.refresh()
        self.refresh_data()

    # ------------------------------------------------------------ availability
    def unavailable(self) -> dict[str, str]:
        """action -> why it cannot act now. Screens extend this with row-specific reasons."""
        if self.session.read_only:
            why = SUPPORT_REASON if self.console_app.support is not None else READ_ONLY_REASON
            return {a: why for a in self.WRITE_ACTIONS}
        if self.session.upgrading:  # console/tui/session.py `hold_writes` says why
            return {a: UPGRADE_REASON for a in self.WRITE_ACTIONS}
        return {}

    # ------------------------------------------------------------ data
    def release_changed(self) -> None:
        """The file's release changed under this screen (console/tui/app.py `ReleaseChanged`): the
        header, the greyed keys and what is shown are re-read. Screens that keep more derived from
        the release (which features exist) extend this."""
        for label in self.query("#db-label"):
            label.refresh()  # the fitted line reads the release at every render (`header_parts`)
        self.refresh_bindings()
        self.refresh_data()

    def refresh_data(self) -> None:
        """Another process changed the database: reload what is visible, keep the selection."""
        for table in self.query(LazyTable):
            table.reload(keep_cursor=True)

    # ------------------------------------------------------------ jump to a row
    jump_to: str | None = None  # a list screen's `jump_to=` argument: the row to put the cursor on

    class JumpResolved(Message):
        """Where the `jump_to` row sits in the counted list (None: it is not in the list)."""

        def __init__(self, table: LazyTable, key: str, index: int | None) -> None:
            super().__init__()
            self.table, self.key, self.index = table, key, index

    @on(LazyTable.Counted)
    def _jump_once_counted(self, message: LazyTable.Counted) -> None:
        if self.jump_to is None:
            return
        key, self.jump_to = self.jump_to, None
        self._jump_worker(message.control, key)

    @work(thread=True, group="jump", exit_on_error=False)
    def _jump_worker(self, table: LazyTable, key: str) -> None:
        source = table.source
        index = source.index_of(key) if source is not None and hasattr(source, "index_of") else None
        self.post_message(self.JumpResolved(table, key, index))

    @on(JumpResolved)
    def _jump_resolved(self, message: "ConsoleScreen.JumpResolved") -> None:
        if message.index is None:
            self.notify(f"{message.key} is not in this list (any more).", severity="warning", markup=False)
            return
        # After the next refresh: the table's new height must be laid out before it can scroll there.
        message.table.call_after_refresh(setattr, message.table, "cursor", message.index)

    _detail_timer = None
    DETAIL_DELAY = 0.12

    def _later_detail(self, key: str) -> None:
        """Load the detail pane once the cursor rests: scrolling through a million rows must not
        start (and lay out) a detail read per row passed."""
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(self.DETAIL_DELAY, lambda: self._load_detail(key))

    def _load_detail(self, key: str) -> None:  # screens with a detail pane override this
        pass

    # ------------------------------------------------------------ writes
    class WriteDone(Message):
        """A service write finished: what it returned (an `ActionResult`, or any result that says
        what happened in `message`), or the `Refusal` that stopped it."""

        def __init__(self, result: "WriteOutcome | None" = None, error: Refusal | None = None) -> None:
            super().__init__()
            self.result, self.error = result, error

    def write(self, fn: "Callable[..., WriteOutcome]", *args: Any, **kwargs: Any) -> None:
        """The one way a screen writes: run `fn(handle, *args, **kwargs)` (a service write) off the
        UI thread; its outcome comes back as `WriteDone`, which `write_finished` shows."""
        self.write_call(lambda: self.session.run(fn, *args, **kwargs))

    def write_call(self, call: "Callable[[], WriteOutcome]") -> None:
        """`write` for work that does not take the session's handle (it opens the file itself)."""
        self._write_worker(call)

    @work(thread=True, group="write", exit_on_error=False)
    def _write_worker(self, call: "Callable[[], WriteOutcome]") -> None:
        try:
            # Under the session's lock, so an upgrade cannot start between the check and the write
            # (`Session.hold_writes` takes the same lock to begin one).
            with self.session.lock:
                if self.session.upgrading:
                    raise Refusal(f"Nothing was written: {UPGRADE_REASON}.")
                result = call()
        except Refusal as exc:
            self.post_message(self.WriteDone(error=exc))
            return
        self.post_message(self.WriteDone(result=result))

    @on(WriteDone)
    def _write_done(self, message: "ConsoleScreen.WriteDone") -> None:
        self.write_finished(message)
        self.after_write()

    def write_finished(self, message: "ConsoleScreen.WriteDone") -> None:
        """Show a write's outcome; a screen whose writes say more (a bulk result) overrides this."""
        if message.error is not None:
            self.show_error(message.error, context=self.session.write_note() or "")
        elif message.result is not None:
            self.notify_result(message.result.message)

    def after_write(self) -> None:
        self.refresh_data()

    # ------------------------------------------------------------ copy
    def copy_target(self) -> tuple[str | None, Any]:
        """(id, JSON-able row or payload) of what is selected; override."""
        return None, None

    def action_copy_id(self) -> None:
        ident, _ = self.copy_target()
        if ident is None:
            self.notify("Nothing selected to copy.", severity="warning")
            return
        try:
            how = clipboard.copy(self.app, str(ident))
        except clipboard.CopyRefused as refused:
            self.notify(f"The id was not copied: {refused.reason}. Y copies the row as JSON, with every "
                        "special character escaped.", severity="warning", timeout=8)
            return
        self.notify(f"Copied the id to the {how}.")

    def action_copy_json(self) -> None:
        _, payload = self.copy_target()
        if payload is None:
            self.notify("Nothing selected to copy.", severity="warning")
            return
        how = clipboard.copy_json(self.app, payload)
        self.notify(f"Copied the row as JSON to the {how}.")

    # ------------------------------------------------------------ errors
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_error(event.worker.error)

    def on_lazy_table_load_failed(self, message: LazyTable.LoadFailed) -> None:
        self.show_error(message.error, context="Could not read the list.")

    def show_error(self, error: BaseException, *, context: str = "") -> None:
        if not isinstance(error, Refusal):
            self.log.error(repr(error))
        if isinstance(error, ReleaseRefusal) and error.release != self.console_app.release:
            return  # decided on a release the file no longer has: the re-read says what holds now
        modal = ErrorModal(error, context=context, key_for=self.key_for)
        # A read refused again on every refresh (another process commits twice a second) says so
        # once: the same dialog is not stacked again while one is open.
        if any(isinstance(s, ErrorModal) and s.says == modal.says for s in self.app.screen_stack):
            return
        self.app.push_screen(modal)

    def key_for(self, action: str) -> str | None:
        """The key this screen runs `action` with, as the footer shows it (keymap included), or None:
        how a refusal's `Remedy` is said here (console/errors.py)."""
        for bindings in self._bindings.key_to_bindings.values():
            for binding in bindings:
                if binding.action == action:
                    return self.app.get_key_display(binding)
        return None

    def notify_result(self, message: str, *, ok: bool = True) -> None:
        """A write's outcome; says so when `$ARCHON_CONSOLE_NOW` was ignored for it (console/clock.py)."""
        note = self.session.write_note()
        self.notify(clean(f"{message} {note}" if note else message), severity="information" if ok else "error",
                    markup=False)


def _shortened(text: str, cells: int) -> tuple[Text, ...]:
    """`text` whole, then (when longer) cut to `cells` with an ellipsis: a header's forms."""
    whole = safe_text(text, one_line=True)
    if whole.cell_len <= cells:
        return (whole,)
    short = whole.copy()
    short.truncate(cells, overflow="ellipsis")
    return whole, short


def label(text: str, style: str = "bold") -> Text:
    return Text(text, style=style)
