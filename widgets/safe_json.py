"""The one reader for untrusted JSON: bounded in depth and size, so no stored text can crash a reader.

Python's `json` recurses once per nesting level: 2 KB of `[` (well inside archon's size CHECKs)
raises `RecursionError`, which is not a `ValueError`, and every walk over a parsed value
(`json.dumps`, redaction, four-eyes' string search) recurses as deep again. So the depth is
measured first by a linear scan that never recurses, and text deeper than `MAX_DEPTH` or longer
than `MAX_CHARS` never reaches the parser. Whatever this returns is at most `MAX_DEPTH` deep, so
re-serialising or walking it is bounded too. Every parse of database JSON goes through `read_json`
(tests/adversarial/test_json_shapes.py checks that no other `json.loads` remains).

Like `safe_text`, it lives with the widgets (the JSON view uses it) and imports nothing of the console.
"""

from __future__ import annotations

import json
import math
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

# Archon's own documents are a handful of levels deep; its largest JSON column holds 64 KiB.
MAX_DEPTH = 64
MAX_CHARS = 256 * 1024

TOO_DEEP = "nested too deeply"
TOO_LARGE = "too large"
NOT_JSON = "not JSON"

# A JSON string (whole, escapes included), a bracket, or a quote that opens a string never closed.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.DOTALL)
_OPENERS = frozenset("[{")


_DECODER = json.JSONDecoder()


class UnreadableJson(ValueError):
    """Text that is not read as JSON; `reason` is TOO_DEEP, TOO_LARGE or NOT_JSON. A ValueError, so
    code that already treats invalid JSON as data keeps doing so."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"unparseable ({reason})")
        self.reason = reason

    @property
    def over_limit(self) -> bool:
        """Too deep or too large (not merely invalid): the text is not shown, only this note."""
        return self.reason != NOT_JSON


def limit_problem(text: Any, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_CHARS) -> str | None:
    """TOO_LARGE or TOO_DEEP when `text` is over a limit, else None. Linear in the text's length,
    and quick for ordinary documents (fewer openers than `max_depth` cannot nest deeper)."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_chars:
            return TOO_LARGE
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        return None
    if len(text) > max_chars:
        return TOO_LARGE
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in _OPENERS:
            depth += 1
            if depth > max_depth:
                return TOO_DEEP
        elif token == "]" or token == "}":
            depth -= 1
        elif token == '"':
            return None  # a string that never closes: the parser says "not JSON" without going deeper
    return None


def read_json(text: Any, *, decoder: json.JSONDecoder | None = None, max_depth: int = MAX_DEPTH,
              max_chars: int = MAX_CHARS) -> Any:
    """The value `text` holds, or UnreadableJson saying why not; never RecursionError. `decoder`: a
    caller's own (e.g. one keeping repeated keys), used only once the text is within the limits.

    Bytes are decoded as UTF-8 (with U+FFFD) *before* the depth scan, and only that text is parsed:
    `json.loads(bytes)` guesses UTF-16 or UTF-32 from the first bytes, so the scan and the parser
    would read different documents (a UTF-16 one 900 deep passed a UTF-8 scan)."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_chars:
            raise UnreadableJson(TOO_LARGE)
        text = bytes(text).decode("utf-8", "replace")
    problem = limit_problem(text, max_depth=max_depth, max_chars=max_chars)
    if problem is not None:
        raise UnreadableJson(problem)
    if not isinstance(text, str):
        raise UnreadableJson(NOT_JSON)
    try:
        return (decoder or _DECODER).decode(text)
    except (ValueError, RecursionError, TypeError) as exc:  # ValueError includes JSONDecodeError
        raise UnreadableJson(NOT_JSON) from exc


def json_or_none(text: Any) -> Any:
    """`read_json`, with None for anything unreadable (the caller shows the raw text or a note)."""
    try:
        return read_json(text)
    except UnreadableJson:
        return None


def unparseable_note(text: Any) -> str | None:
    """What to show instead of text over a limit ("unparseable (nested too deeply)"), else None: text
    that is merely not JSON is shown as stored, text over a limit is not shown at all."""
    problem = limit_problem(text)
    return None if problem is None else f"unparseable ({problem})"


# Strict JSON only: `json` would write a stored 1e999 or NaN (archon's JSON columns and REAL columns
# can hold them) as the bare tokens `Infinity`/`NaN`, which no strict parser (jq, JavaScript) reads. So
# a non-finite number is written as the string naming it (README.md, "JSON output").
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by its name as a string (called once a strict
    encoder refused `value`; values read from the database are bounded in depth)."""
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE.get(value, "NaN")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


__all__ = ["MAX_CHARS", "finite", "MAX_DEPTH", "NOT_JSON", "TOO_DEEP", "TOO_LARGE", "UnreadableJson", "json_or_none",
           "limit_problem", "read_json", "unparseable_note"]
