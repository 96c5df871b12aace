"""The one-line box a list opens under its filter line: `/` (search) and `p` (project).

Search filters as you type, as k9s and lazygit do: every change posts `Applied` and the screen
re-queries. The box does not wait or count keystrokes; a screen re-reads through
`LazyTable.set_source`, whose newer read supersedes an older one (a stale result never paints, and a
superseded read skips its count: widgets/lazy_table.py). Enter keeps the filter and leaves the box;
Escape puts back the filter that was in force when the box opened. A box that is not `live` (the
project, which must be known before a list can be read by it) applies only on Enter.

The box opens holding the filter in force, all of it selected: typing replaces it (as k9s's empty
prompt would), while an arrow key keeps it for editing, and the box never shows one filter while
the list is read by another.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input
from textual.widgets.input import Selection

from widgets.line_input import LineInput


class FilterBox(LineInput):
    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False)]

    class Applied(Message):
        """The filter `mode` is now `value` (None: no filter). `done`: the box has closed."""

        def __init__(self, box: "FilterBox", mode: str, value: str | None, done: bool) -> None:
            super().__init__()
            self.box, self.mode, self.value, self.done = box, mode, value, done

        @property
        def control(self) -> "FilterBox":
            return self.box

    def __init__(self) -> None:
        super().__init__(id="filter-input")
        self.mode: str | None = None
        self.live = False
        self.before: str | None = None  # the filter in force when the box opened
        self.sent: str | None = None  # the value last posted while open
        self._return_to: Widget | None = None

    @classmethod
    def open_on(cls, screen: Any, mode: str, value: str | None, placeholder: str, *, live: bool,
                after: str = "#filters") -> "FilterBox":
        """Show the screen's box (mounted under `after` the first time) for filter `mode`."""
        boxes = screen.query(cls)
        box = boxes.first() if boxes else cls()
        focused = screen.focused
        if not boxes:
            screen.mount(box, after=after)
        box.start(mode, value, placeholder, live=live, return_to=focused)
        return box

    def start(self, mode: str, value: str | None, placeholder: str, *, live: bool,
              return_to: Widget | None = None) -> None:
        """Open for `mode` holding `value`; leaving gives the focus back to `return_to`."""
        if return_to is not None and return_to is not self:
            self._return_to = return_to
        self.mode, self.live, self.before, self.sent = mode, live, value, value
        self.placeholder = placeholder
        with self.prevent(Input.Changed):
            self.value = value or ""
        self.display = True
        self.focus()
        self.selection = Selection(0, len(self.value))

    @staticmethod
    def _normal(text: str) -> str | None:
        return text.strip() or None

    def _post(self, value: str | None, done: bool) -> None:
        if self.mode is None:
            return
        if done or value != self.sent:
            self.sent = value
            self.post_message(self.Applied(self, self.mode, value, done))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is not self:
            return
        event.stop()
        if self.live and self.display:
            self._post(self._normal(event.value), done=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is not self:
            return
        event.stop()
        value = self._normal(event.value)
        self._close()
        self._post(value, done=True)
        self.mode = None

    def action_cancel(self) -> None:
        """Leave the box; the filter is what it was when the box opened."""
        applied = self.live and self.sent != self.before
        self._close()
        if applied:
            self._post(self.before, done=True)
        self.mode = None

    def _close(self) -> None:
        self.display = False
        target = self._return_to
        if target is not None and target.is_attached and target.screen is self.screen:
            target.focus()


__all__ = ["FilterBox"]
