"""NO_COLOR honoured to the letter: no colour, no grey, no bold, only the terminal's own text.

Textual answers `NO_COLOR` with its `Monochrome` filter, which turns every colour into a shade of
grey (a grey the NO_COLOR user asked not to get) and keeps bold and dim. This filter replaces it:
every segment gets the terminal's default foreground and background, and loses bold and dim.
Reverse and underline stay: the console's stylesheet uses them under `:nocolor` for the cursor
and the table headers, and every meaning a colour carries is also written as a word or a symbol
(`expired`, `!` for within the hour, `STALE`, the safety class, `[being deleted]`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter

PLAIN = Style(color=RichColor.default(), bgcolor=RichColor.default(), bold=False, dim=False)


@lru_cache(1024)
def plain_style(style: Style) -> Style:
    return style + PLAIN


class PlainFilter(LineFilter):
    """Every segment in the terminal's default colours, without bold or dim."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, None if style is None else plain_style(style), control)
                for text, style, control in segments]


def install(app: Any) -> None:
    """Under NO_COLOR, `PlainFilter` instead of Textual's greys, for any of the console's apps
    (called in their `__init__`, before the first frame)."""
    if app.no_color:
        from textual.filter import Monochrome, NoColor

        app._filters = [f for f in app._filters if not isinstance(f, (Monochrome, NoColor))] + [PlainFilter()]


__all__ = ["PlainFilter", "install"]
