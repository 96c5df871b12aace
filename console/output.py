"""Printing results for a shell: aligned tables with humanized times, or JSON.

Plain `print` to stdout, no Rich markup, control characters stripped: database strings cannot
steer the terminal.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any, Iterable, Sequence

import humanize

from console.clock import parse_time
from console.text import one_line


def emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def relative(value: Any, now: datetime) -> str:
    """'in 12 minutes' / '3 hours ago' for a stored time; '-' for none."""
    at = parse_time(value)
    if at is None:
        return "-"
    delta = at - now
    if delta.total_seconds() >= 0:
        return "in " + humanize.naturaldelta(delta)
    return humanize.naturaldelta(-delta) + " ago"


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, max_width: int = 48) -> str:
    cells = [[one_line(h) for h in headers]] + [
        [one_line(c, max_width) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def say(message: str, *, err: bool = False) -> None:
    print(one_line(message) if "\n" not in message else message, file=sys.stderr if err else sys.stdout)
