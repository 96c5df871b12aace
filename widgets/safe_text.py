"""The one door for untrusted strings into the screen: controls made visible, markup never parsed.

Rich and Textual parse `[...]` in plain `str` renderables (`[@click=app.quit]` runs an action,
`[/` can crash a render) and pass ESC sequences to the terminal. Every string that came from a
database goes through `safe_text`, which returns a `Text` built with no markup parsing, and shows
control characters as their Unicode pictures (ESC as `␛`) so the operator sees they are there.
"""

from __future__ import annotations

import re

from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def clean(value: object, *, one_line: bool = False) -> str:
    """Printable text: tab and newline kept (or blanked with `one_line`), other controls pictured."""
    if value is None:
        return ""
    text = str(value)
    if one_line:
        text = text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return _CONTROL.sub(_picture, text)


def safe_text(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """A `Text` of `value` exactly as written (never markup), with terminal controls pictured."""
    return Text(clean(value, one_line=one_line), style=style, no_wrap=one_line, end="")


__all__ = ["clean", "safe_text"]
