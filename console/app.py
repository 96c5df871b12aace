"""The console application: navigation, live refresh, themes, and the command palette.

Screens are pushed as the operator navigates (`:envs`, Enter on a project) and popped by Escape,
like k9s. A timer polls `PRAGMA data_version` in a thread worker; when another process committed,
every screen on the stack reloads what it shows (keeping the selection) and an open action dialog
re-checks the row it acts on.
"""

from __future__ import annotations

from typing import Any

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.message import Message

from console.idle_gc import IdleCollector
from console.keymap import load_keymap
from console.screens.base import ConsoleScreen
from console.screens.registry import parse_command
from console.services import navigation
from console.workers import Session, SupportInfo
from widgets.safe_text import clean

POLL_SECONDS = 0.5


def _navigation_commands() -> type:
    """The palette's provider, imported when the palette first opens: `textual.command` and the
    widgets it brings cost ~50 ms that the first paint should not wait for."""
    from console.palette import NavigationCommands

    return NavigationCommands


class ArchonConsole(App):
    CSS_PATH = "app.tcss"
    TITLE = "archon-console"
    COMMANDS = App.COMMANDS | {_navigation_commands}
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("colon", "command_line", "Command", key_display=":", id="app.command_line"),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="app.help"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="app.theme", show=False),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    class DataChanged(Message):
        """Another connection committed."""

    def __init__(self, ctx: Any, support: SupportInfo | None = None, *, session: Session | None = None,
                 start: str | None = None, poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__()
        self.ctx = ctx
        self.support = support
        self.session = session or Session(ctx)
        self.start = start
        self.poll_seconds = poll_seconds
        self._data_version: int | None = None
        self._collector = IdleCollector()
        shape = self.session.handle.shape
        self.release_label = f"archon {shape.release}" if shape.release else "unknown release"
        overrides, self.keymap_warning = load_keymap()
        if overrides:
            self.set_keymap(overrides)

    # ------------------------------------------------------------ start
    def on_mount(self) -> None:
        self.title = "archon-console"
        self.sub_title = clean(str(self.session.db_path), one_line=True)
        if self.keymap_warning:
            self.notify(self.keymap_warning, severity="warning", markup=False)
        if self.start:
            self.navigate(self.start)
        else:
            self._choose_start()
        self.set_interval(self.poll_seconds, self._poll)
        self.set_interval(1.0, self._idle_gc)

    def _idle_gc(self) -> None:
        if self._collector.started:
            self._collector.tick()
        else:
            self._collector.start()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            self._collector.note_input()
        await super().on_event(event)

    @work(thread=True, exclusive=True, group="start", exit_on_error=False)
    def _choose_start(self) -> None:
        """The approval queue when anything is pending, else the overview (read in a thread)."""
        try:
            name = self.session.run(navigation.start_screen)
        except Exception:
            name = "projects"
        self.call_from_thread(self.navigate, name)

    # ------------------------------------------------------------ navigation
    def navigate(self, name: str, argument: str | None = None) -> None:
        entry, arg, word = parse_command(f"{name} {argument}" if argument else name)
        if word in ("q", "quit"):
            self.exit(0)
            return
        if word in ("help", "?"):
            self.action_help()
            return
        if entry is None:
            self.notify(f"No screen called {clean(word, one_line=True)!r}. Try :approvals, :envs, :projects, "
                        ":project NAME, :upgrade.", severity="warning", markup=False)
            return
        if entry.argument and not arg:
            self.notify(f":{entry.name} needs {entry.argument}.", severity="warning", markup=False)
            return
        top = self.screen
        if isinstance(top, ConsoleScreen) and top.COMMAND == entry.name and getattr(top, "argument", None) == arg:
            return
        self.push_screen(entry.build(arg))

    def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()

    def action_command_line(self) -> None:
        from console.screens.command_line import CommandLine

        def done(value: str | None) -> None:
            if value:
                self.navigate(value)

        self.push_screen(CommandLine(), done)

    def action_help(self) -> None:
        from console.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    # ------------------------------------------------------------ live refresh
    def _poll(self) -> None:
        self._poll_worker()

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll_worker(self) -> None:
        version = self.session.data_version()
        if self._data_version is not None and version != self._data_version:
            self.post_message(self.DataChanged())
        self._data_version = version

    def on_archon_console_data_changed(self, message: DataChanged) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen):
                screen.refresh_data()

    def on_unmount(self) -> None:
        self._collector.stop()
        self.session.close()
