"""Strings from the database are data: strip what a terminal would obey, never parse markup."""

from __future__ import annotations

import re

# C0 and C1 controls except tab and newline, plus DEL; ESC sequences go with their ESC.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_control(value: object, *, keep_newlines: bool = True) -> str:
    """Printable text for a terminal: control characters become U+FFFD-free blanks (removed)."""
    if value is None:
        return ""
    text = str(value)
    text = _CONTROL.sub("", text)
    if not keep_newlines:
        text = text.replace("\n", " ").replace("\t", " ")
    return text


def one_line(value: object, width: int | None = None) -> str:
    text = strip_control(value, keep_newlines=False)
    if width is not None and len(text) > width:
        return text[: max(0, width - 1)] + "…"
    return text
