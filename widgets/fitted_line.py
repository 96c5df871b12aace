"""One line of labelled parts that keeps the most important ones when the line is short.

A header line cut by the terminal loses whatever comes last, however much it matters; at 120
columns a long snapshot path pushed the release (support's first question) off the screen. Here
every part has a rank (0 first) and forms from longest to shortest; while the line is too wide the
least important part still shortenable gives up its longest form, then drops out. A part marked
`keep` is never dropped: when even its shortest form does not fit with nothing else left, the
line is cut at the end with an ellipsis, never elsewhere. The parts keep their order on the line.

The parts are asked for at every render (a callable), so the line shows the state of the moment
(a release after an upgrade, the clock after a toggle) whenever it is refreshed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from rich.text import Text
from textual.widget import Widget

SEPARATOR = " · "


@dataclass(frozen=True)
class Part:
    forms: tuple[Text, ...]  # longest first; every one already safe to draw
    rank: int  # 0 is kept longest
    keep: bool = False  # never dropped


def fit(parts: Sequence[Part], width: int, separator: str = SEPARATOR) -> Text:
    """The parts that fit `width` cells, the least important given up first."""
    if width <= 0:
        return Text("")
    chosen = [0] * len(parts)  # index into each part's forms; len(forms) means dropped

    def line() -> Text:
        shown = [p.forms[i] for p, i in zip(parts, chosen) if i < len(p.forms)]
        return Text(separator).join(shown) if shown else Text("")

    order = sorted(range(len(parts)), key=lambda i: (-parts[i].rank, -i))
    while line().cell_len > width:
        for i in order:
            last = len(parts[i].forms) - (1 if parts[i].keep else 0)
            if chosen[i] < last:
                chosen[i] += 1
                break
        else:
            text = line()
            text.truncate(max(0, width), overflow="ellipsis")
            return text
    return line()


class FittedLine(Widget):
    """`parts()` fitted to the widget's width at every render."""

    DEFAULT_CSS = "FittedLine { height: 1; }"

    def __init__(self, parts: Callable[[], Sequence[Part]], *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._parts = parts

    def render(self) -> Any:
        return fit(self._parts(), self.size.width)

    def full_text(self) -> str:
        """Every part in its longest form (what the line says with room enough)."""
        return SEPARATOR.join(p.forms[0].plain for p in self._parts() if p.forms)


__all__ = ["FittedLine", "Part", "SEPARATOR", "fit"]
