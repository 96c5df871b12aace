"""A column of a `LazyTable` (widgets/lazy_table.py), and how a row of cells becomes a line.

Every cell goes through `safe_text` unless its renderer built a `Text` itself: database strings are
never parsed as markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from widgets.safe_text import safe_text


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    render: Callable[[Any], Text | str] | None = None
    justify: str = "left"

    def cell(self, row: Any) -> Text:
        value = self.render(row) if self.render else _get(row, self.key)
        if isinstance(value, Text):
            return value.copy()
        return safe_text(value, one_line=True)


def _get(row: Any, key: str) -> Any:
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return getattr(row, key, "")


def render_cells(console: Console, cells: list[Text], widths: list[int], style: Style, marker: str) -> Strip:
    """One table line: `marker`, then each cell cut or padded to its width, two spaces apart."""
    line = Text(marker, end="")
    for cell, width in zip(cells, widths):
        cell.truncate(width, overflow="ellipsis", pad=True)
        line.append_text(cell)
        line.append("  ")
    segments = list(line.render(console))
    strip = Strip(segments, line.cell_len)
    return strip.apply_style(style) if style else strip


__all__ = ["Column", "render_cells"]
