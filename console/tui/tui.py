"""The one entry point that imports Textual: `archon-console` with no subcommand lands here."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from console.signals import graceful

from console.models.support import SupportInfo


def run_tui(ctx: Any, support: SupportInfo | None = None, *, start: str | None = None) -> int:
    """Open the console on `ctx.db_path`; returns the exit code. `support` shows a SUPPORT badge
    (the console is looking at a snapshot of someone else's database)."""
    from console.tui.app import ArchonConsole
    from console.services import navigation
    from console.tui.session import Session

    session = Session(ctx)  # opens and validates before the terminal is taken over
    if start is None:  # decided before the UI runs, so the first frame is the start screen
        try:
            start = session.run(navigation.start_screen)
        except Exception:
            start = None  # the app decides in a worker, and shows any error there
    return _run(ArchonConsole(ctx, support, session=session, start=start), session)


def run_fleet_tui(ctx: Any) -> int:
    """The fleet console over the hosts chosen by `--host/--group/--fleet` (console/cli/parser.py);
    no local database is opened."""
    return _run(fleet_app(ctx.args, read_only=bool(ctx.read_only)), None)


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


def _run(app: Any, session: Any) -> int:
    """Run `app` until it exits; SIGTERM/SIGHUP end it as quitting does (console/signals.py)."""
    def stop(signum: int) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if signum == signal.SIGHUP and hasattr(app, "attention"):  # the terminal is gone: write nothing more
            app.attention.terminal_gone = True
        loop.call_soon_threadsafe(lambda: app.exit(128 + signum))
        return True

    try:
        with graceful(stop):
            result = app.run()
    finally:
        if session is not None:
            session.close()  # on_unmount does this too; here it also holds when the app never got that far
    return int(result or 0) if isinstance(result, int) else (app.return_code or 0)


__all__ = ["fleet_app", "run_fleet_tui", "run_tui"]
