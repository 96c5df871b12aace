"""Lines that wrap under their value, not at column 0 (a hanging indent).

A detail pane's `  requester agent:aider` or a JSON line's `    "command": "./scripts/migrate …"`
is one line whose value may not fit the pane. Rich wraps a long line back to column 0, so the
value's continuation landed under the key and keys and values read as separate lines. `Hanging`
wraps each line's value at the pane's width and starts every continuation line under the value's
first character. When the key takes too much of the width to leave a readable column, the
continuation starts under the line's own indentation instead (the key column is given up, the
text is never cut).

The key/value panes (widgets/key_values.py) and the JSON view (widgets/json_view.py) both draw
through it. `str()` of a `Hanging` is its plain text, unwrapped, for tests and copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

# A continuation column narrower than this reads worse than wrapping under the line's indentation.
MIN_VALUE_WIDTH = 16


@dataclass(frozen=True)
class Hanging:
    """`lines`: each logical line (no line breaks inside) and the character offset where its
    value starts: continuation lines are indented to that column."""

    lines: Sequence[tuple[Text, int]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width)
        for line, value_at in self.lines:
            yield from hang(line, value_at, width, console)

    def __str__(self) -> str:
        return "\n".join(line.plain for line, _ in self.lines)


def hang(line: Text, value_at: int, width: int, console: Console) -> Iterable[Text]:
    """`line` as screen lines of at most `width` cells, continuations under `value_at`."""
    if line.cell_len <= width:
        yield _one(line)
        return
    value_at = max(0, min(value_at, len(line.plain)))
    indent = cell_len(line.plain[:value_at])
    if width - indent < MIN_VALUE_WIDTH:
        # The key leaves no readable column: continue under the line's own indentation.
        value_at = len(line.plain) - len(line.plain.lstrip(" "))
        if width - value_at < MIN_VALUE_WIDTH:
            value_at = 0
        indent = value_at  # spaces: one cell each
    head, body = line.divide([value_at]) if value_at else (Text(""), line.copy())
    pieces = body.wrap(console, max(1, width - indent), overflow="fold", no_wrap=False)
    for i, piece in enumerate(pieces):
        out = head.copy() if i == 0 else Text(" " * indent)
        out.append_text(piece)
        yield _one(out)


def _one(text: Text) -> Text:
    """A screen line as it is drawn: no further wrapping, ended by a line break."""
    text = text.copy()
    text.end = "\n"
    text.no_wrap = True
    text.overflow = "crop"
    return text


__all__ = ["Hanging", "MIN_VALUE_WIDTH", "hang"]
