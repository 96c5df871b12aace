"""Ctrl-C quits, as in every terminal program (k9s, lazygit, less): Textual's default only says
"press ctrl+q to quit". Mixed in before Textual's `App` by the local console (console/tui/app.py)
and the fleet console (console/tui/fleet_app.py), each listing `INTERRUPT` in its BINDINGS (Textual
reads bindings from DOM classes only) and saying what "a write in flight" is for it (`writes_in_flight`).

One rule for every way to quit (q, ctrl+q, ctrl+c, `:quit`): while a write is in flight the first
one asks instead, since quitting then leaves its outcome to be read back later (the decision may or
may not have been committed); a second one quits anyway.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding

# priority: a focused text box (whose own Ctrl-C copies its selection) does not keep the app running
INTERRUPT = Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="app.interrupt")

ASK = ("A write is still in flight: quitting now leaves its outcome unknown until you look again. "
       "Quit again to quit anyway.")


class QuitGuard:
    _quit_asked = False

    def writes_in_flight(self) -> int:
        """How many writes have been started and not finished; each app says what they are."""
        return 0

    async def action_quit(self) -> None:  # q, ctrl+q, ctrl+c
        self.request_quit()

    def request_quit(self) -> None:
        """Quit, unless a write is in flight and this is the first time of asking."""
        app: Any = self
        if self.writes_in_flight() and not self._quit_asked:
            self._quit_asked = True
            app.notify(ASK, title="Quit?", severity="warning", timeout=10)
            return
        app.exit(0)


__all__ = ["ASK", "INTERRUPT", "QuitGuard"]
