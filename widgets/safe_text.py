"""The one door for untrusted strings into any output: controls made visible, markup never parsed.

Rich and Textual parse `[...]` in plain `str` renderables (`[@click=app.quit]` runs an action,
`[/` can crash a render) and pass ESC sequences to the terminal. Every string that came from a
database goes through `clean` (for plain text: the CLI, notifications, logs, bundle reports) or
`safe_text` (for a `Text` built with no markup parsing). Both show C0/C1 controls and DEL as their
Unicode pictures (ESC as `␛`) and the bidirectional controls, which can make a terminal show text in
an order other than the bytes' (a "Trojan Source" reordering), as `⟨U+202E⟩`, so the operator sees
they are there. This module imports nothing heavy: the CLI's start-up time includes it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only by `safe_text`, which only the TUI calls
    from rich.text import Text

# C0 controls except tab and newline, DEL, C1 controls, and the bidi embeddings, overrides and isolates
# (plus the invisible marks LRM, RLM and ALM that steer them).
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"\r\n|[\n\t]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0x9F:
        return "\ufffd"
    return f"\u27e8U+{code:04X}\u27e9"


def clean(value: object, *, one_line: bool = False) -> str:
    """Printable text: tab and newline kept (or blanked with `one_line`), everything else that could
    steer a terminal pictured."""
    if value is None:
        return ""
    text = str(value)
    if one_line:
        text = _LINE_BREAKS.sub(" ", text)
    return UNSAFE.sub(_picture, text)


def is_clean(text: str, *, allow_newlines: bool = True) -> bool:
    """True when nothing in `text` could steer a terminal (what the adversarial tests assert)."""
    if UNSAFE.search(text):
        return False
    return allow_newlines or not _LINE_BREAKS.search(text)


def safe_text(value: object, style: str = "", *, one_line: bool = False) -> "Text":
    """A `Text` of `value` exactly as written (never markup), with terminal controls pictured."""
    from rich.text import Text

    return Text(clean(value, one_line=one_line), style=style, no_wrap=one_line, end="")


__all__ = ["UNSAFE", "clean", "is_clean", "safe_text"]
