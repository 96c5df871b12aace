"""No frame is lost to a batch: what was drawn while updates were held is drawn when they resume.

Textual holds every repaint while a batch is open (`App.batch_update`; each `Widget.recompose`,
such as the Footer's after a change of bindings or a resize, opens one while it removes and mounts
its children). A frame composed during the batch is dropped by `App._display`, after the screen
has already marked itself clean, and the end of the batch only wakes the app, not the screen. So a
dialog pushed while any Footer was recomposing (a worker's refusal arriving just as the screen
under it changed its keys) stayed off the terminal, for good: the screen under it showed, the
dialog had the keyboard, and only a resize (a full layout of every widget) painted it. Pushing
more dialogs did not help when each arrived with its own recompose (each poll that saw another
process commit re-read the screens and refreshed their keys).

`NoLostFrames` is mixed into every console app before Textual's `App`: it notes a frame dropped
inside a batch, repaints the whole current screen when the last batch ends, and wakes the screens
that are showing, so any layout or repaint they skipped while held runs then.
"""

from __future__ import annotations

from typing import Any


class NoLostFrames:
    _frame_lost = False

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None and getattr(self, "_batch_count"):
            self._frame_lost = True  # `App._display` returns without writing it
        super()._display(screen, renderable)  # type: ignore[misc]

    def _end_batch(self) -> None:
        super()._end_batch()  # type: ignore[misc]
        app: Any = self
        if app._batch_count or not app._screen_stack:
            return
        screen = app.screen
        if self._frame_lost:
            self._frame_lost = False
            screen.refresh()
        for shown in (screen, *app._background_screens):
            shown.check_idle()


__all__ = ["NoLostFrames"]
