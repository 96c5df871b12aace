"""The apps' last line of defence: whatever escaped a screen, worker or timer ends the app with one
sentence and exit 3, as console/cli/cli.py `_unexpected` does for a command.

Textual's own handler prints a Rich traceback with every frame's local variables: database or host
text (a request's JSON, its ids) on the operator's terminal. The sentence names only the
exception's type, never its message (which can quote that text). `ARCHON_CONSOLE_DEBUG=1` keeps
Textual's traceback. Mixed in before Textual's `App` by the local console (console/tui/app.py) and
the fleet console (console/tui/fleet_app.py), each with its own `STOPPED` words.
"""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text

from console.errors import EXIT_UNUSABLE


class LastResort:
    # `{name}` is the exception's type.
    STOPPED = ("archon-console: the console stopped on an unexpected {name}; nothing further was written. "
               "Rerun with ARCHON_CONSOLE_DEBUG=1 to see where it happened.")

    def _handle_exception(self, error: Exception) -> None:
        app: Any = self
        if os.environ.get("ARCHON_CONSOLE_DEBUG"):
            super()._handle_exception(error)  # type: ignore[misc]
            return
        app._return_code = EXIT_UNUSABLE
        if app._exception is None:  # the first one is the cause; what follows is the app unwinding
            app._exception = error  # Pilot re-raises it after the test, so the suite still sees it
            app._exception_event.set()
            from textual.worker import WorkerFailed

            cause = error.error if isinstance(error, WorkerFailed) else error
            app._exit_renderables.clear()
            app.exit(None, EXIT_UNUSABLE, Text(self.STOPPED.format(name=type(cause).__name__)))
        else:  # failing again while it shuts down: stop processing at once, as Textual would
            app._close_messages_no_wait()


__all__ = ["LastResort"]
