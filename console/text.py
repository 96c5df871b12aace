"""Strings from the database are data: every plain-text output goes through `widgets.safe_text.clean`,
the one sanitiser, so the CLI, the TUI, notifications and bundle reports show the same thing. JSON from
the database is read only through `read_json` (widgets/safe_json.py: bounded depth and size)."""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from widgets.safe_json import (  # noqa: F401
    MAX_CHARS, MAX_DEPTH, UnreadableJson, finite, json_or_none, limit_problem, read_json, unparseable_note)
from widgets.safe_text import clean, is_clean, is_shell_word, replace_unsafe  # noqa: F401


def strip_control(value: object, *, keep_newlines: bool = True) -> str:
    """Printable text for a terminal: controls and bidi overrides pictured, never passed through."""
    return clean(value, one_line=not keep_newlines)


def shell_quote(value: str) -> str:
    """One shell word that reads back as exactly `value`, printed on one clean line: shlex's '...'
    where `value` is printable, else bash's $'...' with every other byte as \\xNN. A newline inside
    '...' would print a second line (and, pasted, run it as a command of its own)."""
    import shlex

    try:
        if is_clean(value, allow_newlines=False) and value.encode("utf-8"):
            return shlex.quote(value)
    except UnicodeEncodeError:  # a file name's undecodable bytes (surrogate escapes)
        pass
    return "$'" + "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x27, 0x5C) else f"\\x{b:02x}"
                          for b in value.encode("utf-8", "surrogateescape")) + "'"


def cells(text: str) -> int:
    """How many terminal columns `text` takes (a CJK character two, a combining mark none), as Rich
    counts them; after `clean` that is what terminals draw too (the fillers they disagree on are
    pictured). ASCII text is its length, and never imports Rich."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def one_line(value: object, width: int | None = None) -> str:
    """`value` cleaned onto one line and, with `width`, cut to at most that many cells."""
    text = clean(value, one_line=True)
    if width is not None and cells(text) > width:
        if text.isascii():
            return text[: max(0, width - 1)] + "…"
        from rich.cells import set_cell_size

        return set_cell_size(text, max(0, width - 1)) + "…"
    return text


def line(*fields: object, sep: str = "  ") -> str:
    """One output line from several fields, each passed through `one_line` here (a field a caller
    forgot cannot carry a line break and forge the next line). A field is a value, or a
    `(value, width)` pair to cut at `width` cells; text the console writes itself passes through
    unchanged, since `one_line` leaves such text as it is."""
    return sep.join(one_line(*f) if isinstance(f, tuple) else one_line(f) for f in fields)


def _json_escape(match: re.Match[str]) -> str:
    """Every character of what the sanitiser would picture (one, or a run of combining marks) as
    JSON's own escape, characters beyond U+FFFF as their UTF-16 pair: the value stays exact."""
    out = []
    for char in match.group():
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def _default(value: Any) -> str:
    """What JSON cannot hold as it is: bytes (a BLOB archon never declares) decoded as UTF-8 with
    U+FFFD, like every stored text (console/db/connect.py); anything else as its `str`."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_default, allow_nan=False)

def _line(value: Any) -> str:
    try:
        return _LINE_ENCODER.encode(value)
    except ValueError:  # a non-finite float somewhere
        return _LINE_ENCODER.encode(finite(value))


def json_lines(values: Any) -> str:
    """JSON Lines for many values at once, as safe as `json_text`: one encoder and one escaping pass
    for the whole batch (a per-value `json.dumps` builds a new encoder each call; at millions of
    audit events that was most of the export's time)."""
    text = "\n".join(map(_line, values))
    return json_escape(text) + "\n" if text else ""


def json_escape(text: str) -> str:
    """Already-encoded JSON made terminal-safe the way `json_text` does it (C1 controls and bidi
    overrides as \\uXXXX), e.g. JSON that SQLite's json_object produced."""
    return replace_unsafe(text, _json_escape)


def json_text(value: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """JSON that is safe on a terminal and still exact: `json` escapes C0 controls itself; C1
    controls and bidi overrides, which it leaves raw under `ensure_ascii=False`, become `\\uXXXX`."""
    options = {"indent": indent, "ensure_ascii": False, "default": _default, "sort_keys": sort_keys,
               "allow_nan": False}
    try:
        text = json.dumps(value, **options)
    except ValueError:  # a non-finite float somewhere: strict JSON names it as a string
        text = json.dumps(finite(value), **options)
    return replace_unsafe(text, _json_escape)
