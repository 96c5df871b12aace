"""The console application: navigation, live refresh, themes, and the command palette.

Screens are pushed as the operator navigates (`:envs`, Enter on a project) and popped by Escape,
like k9s. A timer polls `PRAGMA data_version` in a thread worker; when another process committed,
every screen on the stack reloads what it shows (keeping the selection) and an open action dialog
re-checks the row it acts on.
"""

from __future__ import annotations

from typing import Any

from textual import events, on, work
from textual.app import App
from textual.binding import Binding
from textual.message import Message

from console.tui.attention import Attention, load_notify_config
from console.tui.idle_gc import IdleCollector
from console.tui.interrupt import INTERRUPT, QuitGuard
from console.tui.keymap import known_binding_ids, load_keymap, unknown_ids
from console.tui.last_resort import LastResort
from console.tui.screens.base import ConsoleScreen
from console.services import views
from console.errors import ConsoleError, UsageError
from console.suggest import did_you_mean
from console.tui.screens.registry import SCREENS, command_words, lookup, parse_command
from console.services import navigation
from console.services.snapshot_time import newest_write_time
from console.services.watch import arrivals, own_changes, pending_count, start_position
from console.models.support import SupportInfo
from console.tui.session import Session
from widgets import plain_filter
from widgets.safe_text import clean
from widgets.no_lost_frames import NoLostFrames
from widgets.terminal_guard import GuardedApp

POLL_SECONDS = 0.5
# Every word a `:` command may start with -> the command it is (aliases to their screen), for "did you mean".
COMMAND_WORDS = {word: entry.name for entry in SCREENS for word in (entry.name, *entry.aliases)}
COMMAND_WORDS.update({word: word for word in ("help", "quit", "save", "view")})
# The worker groups that write: every screen's `write` (screens/base.py) and the upgrade's run (screens/upgrade.py).
WRITE_GROUPS = frozenset({"write", "upgrade-run"})
PREFETCH_WAIT_SECONDS = 0.1


def _navigation_commands() -> type:
    """The palette's provider, imported when the palette first opens: `textual.command` and the
    widgets it brings cost ~50 ms that the first paint should not wait for."""
    from console.tui.palette import NavigationCommands

    return NavigationCommands


class ArchonConsole(GuardedApp, NoLostFrames, LastResort, QuitGuard, App):
    """`GuardedApp` first: its `notify`, title validators and `copy_to_clipboard` clean or refuse database
    text whatever the caller did, and its filter pictures any control left in a painted line.
    `NoLostFrames` repaints what Textual drew while a batch held updates (widgets/no_lost_frames.py).
    `LastResort` ends the app in one sentence on whatever escaped (console/tui/last_resort.py)."""

    CSS_PATH = "app.tcss"
    TITLE = "archon-console"
    COMMANDS = App.COMMANDS | {_navigation_commands}
    ENABLE_COMMAND_PALETTE = True
    # Below 110 columns every screen carries `-narrow` and app.tcss stacks the table over the detail.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS = [
        Binding("colon", "command_line", "Command", key_display=":", id="app.command_line"),
        Binding("question_mark,f1", "help", "Help", key_display="?", id="app.help"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="app.theme", show=False),
        # Only over a support snapshot (`check_action`): its screens' times as of the snapshot, or now.
        Binding("at", "toggle_clock", "Clock", key_display="@", id="app.clock"),
        Binding("q", "quit", "Quit", id="app.quit"),
        INTERRUPT,
    ]

    class DataChanged(Message):
        """Another connection committed."""

    class ReleaseChanged(Message):
        """The file's schema changed (an upgrade, here or elsewhere): its release and shape were
        detected again, and everything derived from them is re-read (`_release_changed`)."""

        def __init__(self, release: str | None) -> None:
            super().__init__()
            self.release = release

    class WritesHeldChanged(Message):
        """An upgrade started or ended (console/tui/session.py `hold_writes`): every screen's write
        keys grey or come back."""

    class StartChosen(Message):
        """Where the console opens, read in a thread (`_choose_start`)."""

        def __init__(self, screen: str) -> None:
            super().__init__()
            self.screen = screen

    class TargetResolved(Message):
        """Where a `:` command goes, read in a thread (`_resolve_target`): only then is a screen pushed."""

        def __init__(self, entry: Any, target: "navigation.Target", seq: int) -> None:
            super().__init__()
            self.entry, self.target, self.seq = entry, target, seq

    class PendingChanged(Message):
        """New pending requests arrived (maybe none) and how many wait now (None: no approvals)."""

        def __init__(self, arrived: tuple[Any, ...], count: int | None) -> None:
            super().__init__()
            self.arrived = arrived
            self.count = count

    def __init__(self, ctx: Any, support: SupportInfo | None = None, *, session: Session | None = None,
                 start: str | None = None, poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__()
        plain_filter.install(self)  # NO_COLOR: the terminal's own colours, not Textual's greys
        self.install_clean_filter()
        self.ctx = ctx
        self.support = support
        self.session = session or Session(ctx)
        if support is not None:
            # A snapshot is shown as of the time it was last written, not against now: a day-old
            # customer file would otherwise show every request expired (`@` switches to now).
            self.session.clock.pin(*support.as_of(self.session.run(newest_write_time, not_after=support.taken_at)))
        self.start = start
        self.poll_seconds = poll_seconds
        # The baseline is taken before anything is read (and before the UI runs), so a commit
        # made while the first screen loads is seen by the first poll.
        self._data_version: int | None = self.session.data_version()
        self._collector = IdleCollector()
        # Arrivals are counted from here: what was pending before the console opened is no news.
        quiet = bool(getattr(getattr(ctx, "args", None), "quiet", False))
        notify_config, self.notify_warning = load_notify_config(quiet=quiet)
        self.attention = Attention(notify_config, self._terminal_write)
        self._arrival_position = self.session.run(start_position)
        self._own_changes: int | None = None
        self._polling = False
        # Counts navigations: a `:` command resolved (in a thread) after a newer one, or after Escape,
        # is dropped, never pushed over where the operator went meanwhile.
        self._navigation = 0
        self.release = self.session.release
        self.release_label = self.label_of(self.release)
        self._prefetched: tuple[str, str | None, Any] | None = None
        self._start_entry = self._start_screen_entry()
        if self._start_entry is not None:
            entry, arg = self._start_entry
            try:
                prefetched = entry.screen_class().prefetch(self.session, arg)
            except Exception:  # the screen reads again on mount, and reports errors there
                prefetched = None
            if prefetched is not None:
                # The UI is not running yet: a short wait here lets the first frame show rows
                # (the thread gets the whole interpreter); a slow database just misses it.
                prefetched.wait(PREFETCH_WAIT_SECONDS)
                self._prefetched = (entry.name, arg, prefetched)
        overrides, self.keymap_warning = load_keymap()
        if overrides:
            unknown = unknown_ids(overrides, known_binding_ids(ArchonConsole))
            if unknown:
                self.keymap_warning = f"{self.keymap_warning} {unknown}" if self.keymap_warning else unknown
            self.set_keymap(overrides)

    # ------------------------------------------------------------ start
    def on_mount(self) -> None:
        self.title = "archon-console"
        self.sub_title = clean(str(self.session.db_path), one_line=True)
        if self.keymap_warning:
            self.notify(self.keymap_warning, severity="warning", markup=False)
        if self.notify_warning:
            self.notify(self.notify_warning, severity="warning", markup=False)
        if not isinstance(self.screen, ConsoleScreen):  # no start screen was given, or not a valid one
            if self.start:
                self.navigate(self.start)
            else:
                self._choose_start()
        self.set_interval(self.poll_seconds, self._poll)
        self._collector.start()
        self.set_interval(1.0, self._collector.tick)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            self._collector.note_input()
        await super().on_event(event)

    def _start_screen_entry(self) -> tuple[Any, str | None] | None:
        if self.start:
            entry, arg, _ = parse_command(self.start)
            if entry is not None and (arg or not entry.argument):
                return entry, arg
        return None

    def get_default_screen(self) -> Any:
        """The start screen itself, when known, is the bottom of the stack: the first frame shows
        it (no blank frame, no push). Otherwise a blank screen until `_choose_start` decides."""
        if self._start_entry is not None:
            entry, arg = self._start_entry
            return entry.build(arg)
        return super().get_default_screen()

    def take_prefetched(self, command: str, argument: str | None) -> Any | None:
        """What `ConsoleScreen.prefetch` started for the start screen, handed over once."""
        prefetched, self._prefetched = self._prefetched, None
        if prefetched is not None and prefetched[:2] == (command, argument):
            return prefetched[2]
        return None

    @work(thread=True, exclusive=True, group="start", exit_on_error=False)
    def _choose_start(self) -> None:
        """The approval queue when anything is pending, else the overview (read in a thread)."""
        try:
            name = self.session.run(navigation.start_screen)
        except Exception:
            name = "projects"
        self.post_message(self.StartChosen(name))

    @on(StartChosen)
    def _start_chosen(self, message: StartChosen) -> None:
        self.navigate(message.screen)

    # ------------------------------------------------------------ navigation
    def navigate(self, name: str, argument: str | None = None) -> None:
        entry, arg, word = parse_command(name)
        if argument:  # a row's exact key: never re-split or stripped (an id may end in a line break)
            arg = argument
        if word in ("q", "quit"):
            self.request_quit()
            return
        if word in ("help", "?"):
            self.action_help()
            return
        if word in ("save", "view"):
            self._view_command(word, arg)
            return
        if entry is not None and arg and entry.name in views.KEYS and views.is_expression(arg):
            try:
                views.parse(entry.name, arg)
            except UsageError as exc:
                self.notify(exc.reason, severity="warning", markup=False)
                return
        if entry is None:
            tries = ", ".join(f":{w}" for w in command_words().split(" | "))
            hint = did_you_mean(word, COMMAND_WORDS, show=lambda w: f":{COMMAND_WORDS[w]}")
            self.notify(f"No screen called {clean(word, one_line=True)!r}. {hint + ' ' if hint else ''}Try {tries}.",
                        severity="warning", markup=False)
            return
        if arg and not (entry.argument or entry.optional):
            self.notify(f":{entry.name} takes nothing after it; {clean(arg, one_line=True)!r} was not used. "
                        f"Type :{entry.name} alone.", severity="warning", markup=False)
            return
        if entry.argument and not arg:  # `:project` alone offers the projects, as k9s's `:ns` does
            self.open_screen(entry, "")
            return
        self.open_screen(entry, arg)

    def open_screen(self, entry: Any, argument: str | None) -> None:
        """The one way a `:` command, the palette, a saved view or the start choice opens a screen:
        what it names is resolved first (in a thread) and the screen is pushed only when it exists,
        so a refused navigation leaves you where you were, with "did you mean" (a screen pushed
        first and refused after would stay behind its error, empty, loading for ever)."""
        self._navigation += 1
        if argument is None and entry.feature is None:
            self._push_target(entry, None)
            return
        self._resolve_target(entry, argument, self._navigation)

    @work(thread=True, group="navigate", exit_on_error=False)
    def _resolve_target(self, entry: Any, argument: str | None, seq: int) -> None:
        try:
            target = self.session.run(navigation.resolve_target, entry.name, argument, entry.feature)
        except ConsoleError as exc:
            target = navigation.Target(refusal=f"{exc.reason} {exc.hint or ''}".strip())
        except Exception as exc:  # a damaged file: said in one sentence, nothing pushed
            target = navigation.Target(refusal=f"Could not open :{entry.name}: {type(exc).__name__}: {exc}")
        self.post_message(self.TargetResolved(entry, target, seq))

    @on(TargetResolved)
    def _target_resolved(self, message: TargetResolved) -> None:
        if message.seq != self._navigation:
            return  # the operator went elsewhere while it was read
        entry, target = message.entry, message.target
        if target.refusal is not None:
            self.notify(target.refusal, severity="warning", timeout=8, markup=False)
        elif target.choices:
            from console.tui.screens.choose import ChooseModal

            def chosen(value: str | None) -> None:
                if value is not None:
                    self._push_target(entry, value)

            self.push_screen(ChooseModal(f"Which one? :{entry.name} opens the one you pick", target.choices),
                             chosen)
        else:
            self._push_target(entry, target.argument)

    def _push_target(self, entry: Any, argument: str | None) -> None:
        top = self.screen
        if isinstance(top, ConsoleScreen) and top.COMMAND == entry.name and getattr(top, "argument", None) == argument:
            return
        self.push_screen(entry.build(argument))

    def _view_command(self, word: str, name: str | None) -> None:
        """`:save NAME` keeps this list and its filters; `:view NAME` opens a saved one. The views
        file is the user's, but its text is shown like database text: through the one sanitiser."""
        def say(text: str, severity: str = "information") -> None:
            self.notify(clean(text, one_line=True), severity=severity, markup=False)

        if not name:
            say(f":{word} needs a NAME (saved views: {', '.join(sorted(views.load()[0])) or 'none yet'}).",
                "warning")
            return
        try:
            if word == "save":
                view = self._current_view()
                if view is None:
                    say("Only the approvals and envs lists can be saved as views.", "warning")
                    return
                path = views.save(name, view)
                say(f"Saved view {name}: :{view.screen} {view.expression()} (in {path}).")
                return
            view, note = self.session.run(views.open_view, name)
        except UsageError as exc:
            say(exc.reason, "warning")
            return
        except OSError as exc:
            say(f"Could not save the view: {exc.strerror or exc}.", "error")
            return
        if note:
            say(note, "warning")
        self.open_screen(lookup(view.screen), view.expression() or None)

    def _current_view(self) -> "views.View | None":
        screen: Any = self.screen
        if getattr(screen, "COMMAND", None) == "approvals":
            return views.approvals_view(screen.filters)
        if getattr(screen, "COMMAND", None) == "envs":
            return views.env_view(screen.state, screen.argument, screen.claimed, screen.search)
        return None

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """A key whose action cannot act now (greyed in the Footer) says why instead of nothing."""
        if await super().run_action(action, default_namespace, namespaces):
            return True
        if isinstance(action, str) and isinstance(default_namespace, ConsoleScreen):
            target, name, params = self._parse_action(action, default_namespace, namespaces)
            if target is default_namespace and target.check_action(name, params) is None:
                return target.explain_unavailable(name)
        return False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":  # hidden where there is nothing to go back to (the first screen)
            return self._can_go_back()
        if action == "toggle_clock":  # a live database has only one time: now
            return self.session.clock.snapshot_at is not None
        return True

    def _can_go_back(self) -> bool:
        """Whether a console screen lies under the topmost one (a dialog over it does not count)."""
        screens = [s for s in self.screen_stack if isinstance(s, ConsoleScreen)]
        return len(screens) > 1

    def action_back(self) -> None:
        """Pop back to the previous console screen; the first one stays."""
        self._navigation += 1  # a `:` command still being resolved no longer opens anything
        stack = self.screen_stack
        if len(stack) > 1 and isinstance(stack[-2], ConsoleScreen):
            self.pop_screen()

    def action_command_line(self) -> None:
        from console.tui.screens.command_line import CommandLine

        def done(value: str | None) -> None:
            if value:
                self.navigate(value)

        self.push_screen(CommandLine(), done)

    def action_help(self) -> None:
        from console.tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def action_toggle_clock(self) -> None:
        """Every screen's times as of the snapshot, or as of now: the one clock changes
        (console/clock.py `ScreenClock`), and every screen on the stack shows it again."""
        clock = self.session.clock
        if not clock.toggle():
            return
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen):
                screen.clock_changed()
        self.notify(f"{clock.sentence} Press @ for {'now' if clock.as_of else 'the snapshot time'}.",
                    markup=False)

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def writes_in_flight(self) -> int:
        """Screens' writes (console/tui/screens/base.py `write`) and an upgrade's run still going."""
        return sum(1 for w in self.workers if w.group in WRITE_GROUPS and not w.is_finished)

    # ------------------------------------------------------------ live refresh
    def _poll(self) -> None:
        # A poll still running (a slow disk, a long read holding the session) is left to finish:
        # cancelling it would only lose its answer, and the next tick asks again.
        if self._polling:
            return
        self._polling = True
        self._poll_worker()

    @work(thread=True, group="poll", exit_on_error=False)
    def _poll_worker(self) -> None:
        try:
            self._poll_once()
        finally:
            self._polling = False

    def _poll_once(self) -> None:
        if self.session.upgrading:
            # Held while an upgrade runs: refreshing every screen after each step would read a
            # schema between two steps with the shape detected before the run, and every read
            # holds the file's lock a step is waiting for. The first poll after the run sees the
            # changed data_version and refreshes everything once.
            return
        version = self.session.data_version()
        changed = self._data_version is not None and version != self._data_version
        if changed and self.session.reread_shape():
            self.post_message(self.ReleaseChanged(self.session.release))  # re-reads every screen too
        elif changed:
            self.post_message(self.DataChanged())
        self._data_version = version
        # Another process committed, or the console wrote itself (or this is the first poll):
        # look for new pending requests and recount what waits.
        own = self.session.run(own_changes)
        if changed or own != self._own_changes:
            self._own_changes = own
            arrived, self._arrival_position = self.session.run(arrivals, self._arrival_position)
            self.post_message(self.PendingChanged(tuple(arrived), self.session.run(pending_count)))

    def on_archon_console_pending_changed(self, message: PendingChanged) -> None:
        self.attention.count(message.count)
        self.attention.arrived(self, message.arrived)

    def _terminal_write(self, sequence: str) -> None:
        """Raw escape sequences (title, desktop notification), sent the way `App.bell` sends BEL."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(sequence)

    def on_archon_console_writes_held_changed(self, message: WritesHeldChanged) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen):
                screen.refresh_bindings()

    @staticmethod
    def label_of(release: str | None) -> str:
        return f"archon {release}" if release else "unknown release"

    def on_archon_console_release_changed(self, message: ReleaseChanged) -> None:
        """The one place a change of release reaches the screens: the label every header shows,
        every screen's derived state (`ConsoleScreen.release_changed`), and the dialogs that said
        what the old release could not do (a refusal still true is said again by the re-read)."""
        from console.services.base import ReleaseRefusal
        from console.tui.screens.error import ErrorModal

        self.release, self.release_label = message.release, self.label_of(message.release)
        for screen in self.screen_stack:
            if isinstance(screen, ErrorModal) and isinstance(screen.error, ReleaseRefusal):
                screen.stale = True  # closes itself when it comes to the top (console/tui/screens/error.py)
        if isinstance(self.screen, ErrorModal) and self.screen.stale:
            self.screen.dismiss(None)
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen):
                screen.release_changed()

    def on_archon_console_data_changed(self, message: DataChanged) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, ConsoleScreen):
                screen.refresh_data()

    def on_unmount(self) -> None:
        self.attention.restore()
        self._collector.stop()
        self.session.close()
