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
    app = ArchonConsole(ctx, support, session=session, start=start)

    def stop(signum: int) -> bool:
        """SIGTERM/SIGHUP: let the app shut down as on quit (console/signals.py says why)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if signum == signal.SIGHUP:  # the terminal is gone: write nothing more to it
            app.attention.terminal_gone = True
        loop.call_soon_threadsafe(lambda: app.exit(128 + signum))
        return True

    try:
        with graceful(stop):
            result = app.run()
    finally:
        session.close()  # on_unmount does this too; here it also holds when the app never got that far
    return int(result or 0) if isinstance(result, int) else (app.return_code or 0)


__all__ = ["run_tui"]
