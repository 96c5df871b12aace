"""The one entry point that imports Textual: `archon-console` with no subcommand lands here.

Every way into a console (no command, `inspect`, `--fleet` with no command) runs its app through
`_run`, which first asks `require_terminal`: the one door, so no way in can forget it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Callable

from console.signals import graceful

from console.models.support import SupportInfo


def run_tui(ctx: Any, support: SupportInfo | None = None, *, start: str | None = None) -> int:
    """Open the console on `ctx.db_path`; returns the exit code. `support` shows a SUPPORT badge
    (the console is looking at a snapshot of someone else's database)."""
    def build() -> tuple[Any, Any]:
        from console.tui.app import ArchonConsole
        from console.services import navigation
        from console.tui.session import Session

        session = Session(ctx)  # opens and validates before the terminal is taken over
        first = start
        if first is None:  # decided before the UI runs, so the first frame is the start screen
            try:
                first = session.run(navigation.start_screen)
            except Exception:
                first = None  # the app decides in a worker, and shows any error there
        return ArchonConsole(ctx, support, session=session, start=first), session

    return _run(ctx, build)


def run_fleet_tui(ctx: Any) -> int:
    """The fleet console over the hosts chosen by `--host/--group/--fleet` (console/cli/parser.py);
    no local database is opened."""
    app = fleet_app(ctx.args, read_only=bool(ctx.read_only))  # an unknown host is said first; nothing connects yet
    return _run(ctx, lambda: (app, None))


def fleet_app(args: Any, *, read_only: bool = False, poll_seconds: float | None = None) -> Any:
    """The fleet console, not yet running. An unknown host or group is a usage error (exit 2)
    before the terminal is taken over; a missing or unusable hosts file is not: the console starts
    and says so in one sentence."""
    from console.errors import UsageError
    from console.fleet.hosts import load_fleet, select
    from console.tui.fleet_app import FleetConsole
    from console.tui.fleet_link import ClientLink

    try:
        fleet = load_fleet()
    except UsageError as exc:
        return FleetConsole([], None, problem=" ".join(p for p in (exc.reason, exc.hint) if p))
    hosts = select(fleet, getattr(args, "fleet_hosts", None) or (), getattr(args, "fleet_groups", None) or (),
                   bool(getattr(args, "fleet_all", False)))
    link = ClientLink(fleet, hosts, parallel=int(getattr(args, "parallel", 8) or 8))
    return FleetConsole(hosts, link, read_only=read_only, poll_seconds=poll_seconds)


def require_terminal(*, as_json: bool) -> None:
    """A console needs a terminal: Textual reads keys from stdin and draws on stderr, and what the
    console prints at exit goes to stdout. Without one (cron, nohup, `< /dev/null > out`) the app
    found no keys and redrew for nobody, using most of a core and never exiting; so, like lazygit and
    k9s, it is refused in one sentence (exit 2) before anything is opened. `--json` asks for an answer
    a program can read, which a console is not."""
    from console.errors import UsageError

    if as_json:
        raise UsageError("--json answers commands, and the console itself is not one: leave --json out, "
                         "or run a command such as `archon-console approvals list --json`.")
    missing = [name for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")) if not os.isatty(fd)]
    if missing:
        named = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
        raise UsageError(f"The console needs a terminal and {named} {'is' if len(missing) == 1 else 'are'} "
                         "not one; in scripts, cron and pipes run a command instead (`archon-console help` "
                         "lists them).")


def _run(ctx: Any, build: Callable[[], tuple[Any, Any]]) -> int:
    """The one door every console goes through: refused without a terminal (`require_terminal`),
    else `build()` opens what the app needs and the app runs until it exits; SIGTERM/SIGHUP end it as
    quitting does (console/signals.py)."""
    require_terminal(as_json=bool(getattr(ctx, "json", False)))
    app, session = build()

    def stop(signum: int) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if signum == signal.SIGHUP and hasattr(app, "attention"):  # the terminal is gone: write nothing more
            app.attention.terminal_gone = True
        loop.call_soon_threadsafe(lambda: app.exit(128 + signum))
        return True

    gone = _TerminalWatch(app)
    try:
        with graceful(stop):
            result = app.run()
    finally:
        gone.stop()
        if session is not None:
            session.close()  # on_unmount does this too; here it also holds when the app never got that far
    return int(result or 0) if isinstance(result, int) else (app.return_code or 0)


class _TerminalWatch:
    """Ends the app when its terminal goes away, whatever SIGHUP's disposition: with SIGHUP ignored
    (`trap '' HUP`, a parent that ignores it, a terminal that is not the controlling one) closing
    the terminal left Textual's input thread reading end-of-file in a loop, about half a core for
    ever. poll(2) asked for no events reports only POLLHUP, POLLERR and POLLNVAL, so this thread
    reads no key and wakes twice a second at most; the app then exits as on SIGHUP (exit 129)."""

    def __init__(self, app: Any):
        import threading

        self._app = app
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="terminal-watch", daemon=True).start()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        import select

        poller = select.poll()
        for fd in (0, 1, 2):
            poller.register(fd, 0)
        gone = select.POLLHUP | select.POLLERR | select.POLLNVAL
        while not self._done.is_set():
            if not any(mask & gone for _, mask in poller.poll(500)):
                continue
            if hasattr(self._app, "attention"):  # the terminal is gone: write nothing more
                self._app.attention.terminal_gone = True
            while not self._done.is_set():
                try:
                    self._app.call_from_thread(self._app.exit, 128 + signal.SIGHUP)
                    return
                except RuntimeError:  # not running yet (or any more): ask again shortly
                    self._done.wait(0.1)


__all__ = ["fleet_app", "require_terminal", "run_fleet_tui", "run_tui"]
