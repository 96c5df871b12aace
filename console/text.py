"""Strings from the database are data: every plain-text output goes through `widgets.safe_text.clean`,
the one sanitiser, so the CLI, the TUI, notifications and bundle reports show the same thing. JSON from
the database is read only through `read_json` (widgets/safe_json.py: bounded depth and size)."""

from __future__ import annotations

import json
import re
from typing import Any

from widgets.safe_json import UnreadableJson, json_or_none, read_json, unparseable_note  # noqa: F401
from widgets.safe_text import UNSAFE, clean


def strip_control(value: object, *, keep_newlines: bool = True) -> str:
    """Printable text for a terminal: controls and bidi overrides pictured, never passed through."""
    return clean(value, one_line=not keep_newlines)


def one_line(value: object, width: int | None = None) -> str:
    text = clean(value, one_line=True)
    if width is not None and len(text) > width:
        return text[: max(0, width - 1)] + "…"
    return text


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def json_lines(values: Any) -> str:
    """JSON Lines for many values at once, as safe as `json_text`: one encoder and one escaping pass
    for the whole batch (a per-value `json.dumps` builds a new encoder each call; at millions of
    audit events that was most of the export's time)."""
    text = "\n".join(map(_LINE_ENCODER.encode, values))
    return json_escape(text) + "\n" if text else ""


def json_escape(text: str) -> str:
    """Already-encoded JSON made terminal-safe the way `json_text` does it (C1 controls and bidi
    overrides as \\uXXXX), e.g. JSON that SQLite's json_object produced."""
    return UNSAFE.sub(_json_escape, text)


def json_text(value: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """JSON that is safe on a terminal and still exact: `json` escapes C0 controls itself; C1
    controls and bidi overrides, which it leaves raw under `ensure_ascii=False`, become `\\uXXXX`."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str, sort_keys=sort_keys)
    return UNSAFE.sub(_json_escape, text)
