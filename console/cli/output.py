"""Printing results for a shell: aligned tables with humanized times, or JSON.

Plain `print` to stdout, no Rich markup, control characters stripped: database strings cannot
steer the terminal.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Iterable, Sequence, TextIO

from console.errors import EXIT_REFUSED
from console.text import cells as cell_count
from console.text import json_text, one_line
from widgets.safe_text import clean


def json_document(value: Any, *, indent: int | None = 2) -> str:
    """The one way a command's `--json` value becomes text: every instant in the one form
    (console/clock.py `json_times`), then `json_text`'s strict, terminal-safe JSON. `emit_json`, the
    watches' lines and a hook's stdin all come through here (tests/test_json_times.py)."""
    from console.clock import json_times

    return json_text(json_times(value), indent=indent)


def emit_json(value: Any) -> None:
    sys.stdout.write(json_document(value))
    sys.stdout.write("\n")


LONGEST_WORD = 200  # characters of one word a refusal echoes (a path, an id, a typo)


def bounded_words(text: str | None) -> str | None:
    """`text` with every word longer than `LONGEST_WORD` shortened to its start and end around an
    ellipsis that says how long it was. A refusal echoes what was typed ("No project 'x...'", "invalid
    choice: 'x...'"), and a 5,000-character word came back whole, from every command; every refusal
    the CLI says passes here (console/cli/cli.py `_report`, `report_usage`, and `error_json`)."""
    if text is None or len(text) <= LONGEST_WORD:
        return text
    import re

    def cut(match: "re.Match[str]") -> str:
        word = match.group(0)
        return f"{word[:LONGEST_WORD // 2]}…({len(word):,} characters)…{word[-40:]}"

    return re.sub(r"\S{%d,}" % (LONGEST_WORD + 1), cut, text)


def error_json(reason: str, hint: str | None, code: int, /, **extra: Any) -> dict[str, Any]:
    """The one shape of a failure under `--json`: `ok`, `error`, `hint`, `exit`, then `wrote: []`
    for a refusal (exit 1: nothing was written), then what the command adds (`extra`, in order).
    Every command builds its error object here, so scripts read one shape whatever failed."""
    value: dict[str, Any] = {"ok": False, "error": bounded_words(reason), "hint": bounded_words(hint), "exit": code}
    if code == EXIT_REFUSED:
        value["wrote"] = []
    return {**value, **extra}


def emit_error(reason: str, hint: str | None, code: int, /, **extra: Any) -> None:
    """A failure under `--json`: a single object on stdout, nothing else there."""
    emit_json(error_json(reason, hint, code, **extra))


class SafeStream:
    """stdout or stderr with the one sanitiser in front: nothing written through it can steer the
    terminal, whatever a command forgot. The console's own progress bars use `write_trusted`.

    Writing never raises on encoding: on a stream that cannot encode a character (PYTHONIOENCODING=
    latin-1, an ASCII locale; the sanitiser's own `␛` and `⟨U+…⟩` pictures are not Latin-1) it
    becomes its backslash escape (`\\u241b`), never "unexpected UnicodeEncodeError"."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def _write(self, text: str) -> int:
        # A text stream encodes the whole string before writing any of it, so nothing is doubled.
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(self._stream, "encoding", None) or "ascii"
            return self._stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))

    def write(self, text: str) -> int:
        self._write(clean(text))
        return len(text)

    def write_trusted(self, text: str) -> int:
        return self._write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def write_trusted(stream: Any, text: str) -> None:
    """Write the console's own terminal controls (a `\\r` progress bar), past the sanitiser."""
    getattr(stream, "write_trusted", stream.write)(text)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, max_width: int = 48) -> str:
    cells = [[one_line(h) for h in headers]] + [
        [one_line(c, max_width) for c in row] for row in rows
    ]
    # Widths and padding by terminal cells, not characters: a wide or zero-width character would
    # otherwise push every later column of its row.
    widths = [max(cell_count(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(c + " " * (widths[i] - cell_count(c)) for i, c in enumerate(row)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def wrapped(text: str, *, first: str = "", rest: str = "") -> list[str]:
    """A sentence the reader must see whole (a risk `--force` accepts) as lines at the terminal's
    width (`$COLUMNS`, else 100 when not a terminal), never cut with `…`: words are never split, and
    never at a hyphen, so a step id (`005-profile-backfill-initial`) stays one word."""
    import shutil
    import textwrap

    width = max(40, shutil.get_terminal_size((100, 24)).columns)
    return textwrap.wrap(one_line(text), width=width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


# What a spreadsheet would run as a formula at the start of a cell (`=HYPERLINK(...)`, `@SUM`, `+cmd|...`).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string it would run as a formula gets a leading `'`
    (OWASP's advice for CSV injection). Every CSV the console writes (audit, query) passes here."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def say(message: str, *, err: bool = False) -> None:
    print(clean(message), file=sys.stderr if err else sys.stdout)
