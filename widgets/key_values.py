"""A detail pane's fields: the one widget every key/value pane draws with.

Keys are right-aligned in a column as wide as the longest key; a value too long for the pane
wraps under the value column (widgets/hanging.py), never back under the key. The pane is drawn
from a function of the time, not from finished text: the screen's tick (console/tui/screens/base.py)
calls `age(now)` every second, so "in 3 minutes" and "5 minutes ago" keep counting while the
pane stays open, without reading the database again. A tick that changes no word changes nothing
on screen.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Sequence, Union

from rich.text import Text

from widgets.hanging import Hanging
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static

# One entry of a pane: a (key, value) field, or a line of its own (a title, a note).
Entry = Union[Text, tuple[str, Union[Text, str]]]
Fields = Callable[[datetime], Sequence[Entry]]


def layout(entries: Sequence[Entry], key_style: str = "dim") -> Hanging:
    """The entries as lines with their value column; database text arrives as `Text` already made
    safe, and a plain `str` value is made safe here."""
    keys = [entry[0] for entry in entries if isinstance(entry, tuple)]
    width = max((len(key) for key in keys), default=0)
    lines: list[tuple[Text, int]] = []
    for entry in entries:
        if isinstance(entry, Text):
            lines.append((entry, 0))
            continue
        key, value = entry
        line = Text(f"{key:>{width}} ", style=key_style, end="")
        line.append_text(value if isinstance(value, Text) else safe_text(value, one_line=True))
        lines.append((line, width + 1))
    return Hanging(lines)


class KeyValues(Static):
    DEFAULT_CSS = "KeyValues { height: auto; }"

    _fields: Fields | None = None
    _shown: Hanging | None = None

    def show(self, fields: Fields, now: datetime) -> None:
        """Draw `fields(now)`, and again at every `age(now)`."""
        self._fields = fields
        self._draw(fields(now))

    def put(self, entries: Sequence[Entry]) -> None:
        """Draw entries that say nothing relative to now (they never age)."""
        self._fields = None
        self._draw(entries)

    def age(self, now: datetime) -> None:
        if self._fields is not None:
            drawn = layout(self._fields(now))
            if drawn != self._shown:  # same words and styles: nothing to redraw
                self._put(drawn)

    def _draw(self, entries: Sequence[Entry]) -> None:
        self._put(layout(entries))

    def _put(self, drawn: Hanging) -> None:
        self._shown = drawn
        super().update(drawn)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        """Anything else shown here (a "loading…" line) stops the ageing of what was shown before."""
        self._fields = None
        self._shown = None
        super().update(content, layout=layout)

    def render(self) -> Any:
        # The renderable itself, so `str(pane.render())` is the pane's text.
        return self._shown if self._shown is not None else super().render()


__all__ = ["Entry", "Fields", "KeyValues", "layout"]
