"""The fleet console: `archon-console --fleet` (or `--host A --host B`, `--group G`) with no command.

It opens on the merged approval queue (console/tui/screens/fleet_queue.py); `H` or `:hosts` shows
every host's state (console/tui/screens/fleet_hosts.py). The app paints before any host has
answered: the hosts are known from the hosts file, each starts as `connecting…`, and the monitor
(console/tui/fleet_monitor.py) reports each host's answers from its own thread as they arrive; the
app turns each report into a message, so widgets change only on the UI thread. It always starts:
with every host down or no hosts file it says so in one sentence. Quitting closes the sessions
(the client's `ssh -O exit`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterable

from textual.app import App
from textual.binding import Binding
from textual.message import Message

from console.clock import system_clock
from console.tui.interrupt import INTERRUPT, QuitGuard
from console.tui.last_resort import LastResort
from console.tui.fleet_monitor import Arrival, Decided, FleetMonitor, HostLink, HostStatus, Shown
from console.tui.screens.command_line import CommandLine
from console.tui.screens.fleet_base import FleetScreen
from console.tui.screens.fleet_hosts import FleetHostsScreen
from console.tui.screens.fleet_queue import FleetQueueScreen
from widgets import plain_filter
from widgets.safe_text import clean
from widgets.no_lost_frames import NoLostFrames
from widgets.terminal_guard import GuardedApp

FLEET_COMMANDS = ("approvals", "hosts", "host NAME", "help", "quit")


class FleetCommandLine(CommandLine):
    """The `:` line with the fleet's words."""

    def compose(self) -> Any:
        from textual.suggester import SuggestFromList
        from widgets.line_input import LineInput

        yield LineInput(placeholder=" | ".join(FLEET_COMMANDS),
                        suggester=SuggestFromList(["approvals", "hosts", "host ", "quit"], case_sensitive=False),
                        id="command-input")


class FleetConsole(GuardedApp, NoLostFrames, LastResort, QuitGuard, App):
    STOPPED = ("archon-console: the fleet console stopped on an unexpected {name}; decisions already sent "
               "stand. Rerun with ARCHON_CONSOLE_DEBUG=1 to see where it happened.")

    CSS_PATH = "app.tcss"
    TITLE = "archon-console"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS = [
        Binding("colon", "command_line", "Command", key_display=":", id="app.command_line"),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="app.help"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="app.theme", show=False),
        Binding("q", "quit", "Quit", id="app.quit"),
        INTERRUPT,
    ]

    class Reported(Message):
        """Something the monitor learned (a `HostStatus`, an `Arrival`, a `Decided`)."""

        def __init__(self, value: Any) -> None:
            super().__init__()
            self.value = value

    def __init__(self, hosts: Iterable[Any], link: HostLink | None, *, problem: str | None = None,
                 read_only: bool = False, poll_seconds: float | None = None,
                 clock: Callable[[], datetime] = system_clock) -> None:
        super().__init__()
        plain_filter.install(self)  # NO_COLOR: the terminal's own colours, not Textual's greys
        self.install_clean_filter()
        self.problem = problem  # why there is nothing to connect to (no hosts file), one sentence
        self.clock = clock
        hosts = list(hosts)
        self.monitor: FleetMonitor | None = None
        if link is not None and hosts:
            kwargs = {} if poll_seconds is None else {"poll_seconds": poll_seconds}
            self.monitor = FleetMonitor(link, hosts, self._from_monitor, read_only=read_only, **kwargs)
            self.status: dict[str, HostStatus] = dict(self.monitor.status)
        else:
            self.status = {h.name: HostStatus(h.name, phase="down", sentence=problem) for h in hosts}

    def now(self) -> datetime:
        return self.clock()

    # ------------------------------------------------------------ start and stop
    def get_default_screen(self) -> Any:
        return FleetQueueScreen()

    def on_mount(self) -> None:
        self.title = "archon-console"
        self.sub_title = "fleet"
        if self.problem:
            self.notify(self.problem, severity="warning", timeout=12, markup=False)
        if self.monitor is not None:
            self.monitor.start()

    def writes_in_flight(self) -> int:
        """Decisions sent to a host whose answer has not come back (console/tui/fleet_monitor.py)."""
        return self.monitor.writes_in_flight if self.monitor is not None else 0

    def on_unmount(self) -> None:
        if self.monitor is not None:
            self.monitor.close()

    # ------------------------------------------------------------ reports
    def _from_monitor(self, value: Any) -> None:
        """Called on the monitor's thread: hand over to the UI thread."""
        self.post_message(self.Reported(value))

    def on_fleet_console_reported(self, message: Reported) -> None:
        value = message.value
        if isinstance(value, HostStatus):
            self.status[value.name] = value
            for screen in self.screen_stack:
                if isinstance(screen, FleetScreen):
                    screen.host_changed(value)
                    screen.refresh_bindings_if_changed()
        elif isinstance(value, Shown):
            for screen in self.screen_stack:
                if isinstance(screen, FleetQueueScreen):
                    screen.shown(value)
        elif isinstance(value, Arrival):
            self._arrived(value)
        elif isinstance(value, Decided):
            severity = "information" if value.ok else ("warning" if value.ok is None else "error")
            self.notify(f"{value.host}: {value.sentence}", severity=severity, timeout=10, markup=False)

    def _arrived(self, arrival: Arrival) -> None:
        rows = arrival.rows
        if len(rows) == 1:
            row = rows[0]
            what = f"{row.get('id')} ({row.get('action_kind')}, {row.get('project_name') or row.get('project_id')})"
            self.notify(f"New request on {arrival.host}: {what}", title="Approvals", markup=False)
        else:
            self.notify(f"{len(rows)} new requests on {arrival.host}", title="Approvals", markup=False)

    # ------------------------------------------------------------ navigation
    def show_screen(self, name: str, argument: str | None = None) -> None:
        if name == "hosts":
            if not isinstance(self.screen, FleetHostsScreen):
                self.push_screen(FleetHostsScreen())
            return
        while len(self.screen_stack) > 1 and not isinstance(self.screen, FleetQueueScreen):
            self.pop_screen()
        queue = self.screen
        if isinstance(queue, FleetQueueScreen) and (argument is not None or name == "host"):
            queue.set_host(argument)

    def action_command_line(self) -> None:
        def done(value: str | None) -> None:
            if value:
                self.command(value)

        self.push_screen(FleetCommandLine(), done)

    def command(self, text: str) -> None:
        words = text.strip().lstrip(":").split(maxsplit=1)
        word = words[0].lower() if words else ""
        argument = words[1].strip() if len(words) > 1 else None
        if word in ("q", "quit"):
            self.request_quit()
        elif word in ("hosts", "h"):
            self.show_screen("hosts")
        elif word in ("help", "?"):
            self.action_help()
        elif word in ("approvals", "a", "queue"):
            self.show_screen("approvals")
        elif word == "host":
            if argument is not None and argument not in self.status:
                known = ", ".join(sorted(self.status)) or "none"
                self.notify(clean(f"No host called {argument!r} here; hosts: {known}.", one_line=True),
                            severity="warning", markup=False)
                return
            self.show_screen("host", argument)
        else:
            self.notify(clean(f"No command {word!r}. Try :{', :'.join(FLEET_COMMANDS)}.", one_line=True),
                        severity="warning", markup=False)

    def action_help(self) -> None:
        from console.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """A greyed key says why instead of nothing (as console/tui/app.py does)."""
        if await super().run_action(action, default_namespace, namespaces):
            return True
        if isinstance(action, str) and isinstance(default_namespace, FleetScreen):
            target, name, params = self._parse_action(action, default_namespace, namespaces)
            if target is default_namespace and target.check_action(name, params) is None:
                return target.explain_unavailable(name)
        return False


__all__ = ["FleetConsole"]
