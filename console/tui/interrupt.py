"""Ctrl-C quits, as in every terminal program (k9s, lazygit, less): Textual's default only says
"press ctrl+q to quit". Mixed in before Textual's `App` by the local console (console/tui/app.py)
and the fleet console (console/tui/fleet_app.py), each listing `INTERRUPT` in its BINDINGS (Textual
reads bindings from DOM classes only) and saying what "a write in flight" is for it (`writes_in_flight`).

While a write is in flight the first Ctrl-C asks instead: quitting then leaves its outcome to be read
back later (the decision may or may not have been committed). A second Ctrl-C quits anyway.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding

# priority: a focused text box (whose own Ctrl-C copies its selection) does not keep the app running
INTERRUPT = Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, id="app.interrupt")

ASK = ("A write is still in flight: quitting now leaves its outcome unknown until you look again. "
       "Press ctrl+c again to quit anyway.")


class QuitOnInterrupt:
    _interrupt_asked = False

    def writes_in_flight(self) -> int:
        """How many writes have been started and not finished; each app says what they are."""
        return 0

    def action_interrupt(self) -> None:
        app: Any = self
        if self.writes_in_flight() and not self._interrupt_asked:
            self._interrupt_asked = True
            app.notify(ASK, title="Quit?", severity="warning", timeout=10)
            return
        app.exit()


__all__ = ["ASK", "INTERRUPT", "QuitOnInterrupt"]
