"""Pretty, syntax-highlighted JSON from untrusted text, safe to render.

Rich's `Syntax` never interprets markup; the text is read by the bounded reader (widgets/safe_json.py)
and pretty-printed by `json` (which escapes every control character as `\\uXXXX`); text that is not
JSON is shown literally, text over the reader's limits only as a note saying so.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.widgets import Static

from widgets.safe_json import UnreadableJson, read_json, unparseable_note
from widgets.safe_text import safe_text


def pretty_json(value: Any) -> str | None:
    """Indented JSON; None for text that is not JSON (shown as stored); for text over the reader's
    limits, the note that says so ("unparseable (nested too deeply)"), never the text itself."""
    if isinstance(value, (str, bytes, bytearray)):
        try:
            value = read_json(value)
        except UnreadableJson as exc:
            return str(exc) if exc.over_limit else None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def json_renderable(value: Any, *, theme: str = "ansi_dark"):
    note = unparseable_note(value)
    if note is not None:
        return Text(note, style="dim")
    text = pretty_json(value)
    if text is None:
        return safe_text(value)
    from rich.syntax import Syntax  # pygments is slow to import; not needed for the first paint

    text = safe_text(text).plain  # ensure_ascii=False keeps non-ASCII; controls stay escaped
    return Syntax(text, "json", theme=theme, word_wrap=True, background_color="default")


class JsonView(Static):
    DEFAULT_CSS = "JsonView { height: auto; }"

    def show(self, value: Any, *, dark: bool = True) -> None:
        self.update(json_renderable(value, theme="ansi_dark" if dark else "ansi_light"))

    def clear(self, message: str = "") -> None:
        self.update(Text(message, style="dim"))
