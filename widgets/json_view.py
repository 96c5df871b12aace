"""Pretty, syntax-highlighted JSON from untrusted text, safe to render.

Rich's `Syntax` never interprets markup; the text is read by the bounded reader (widgets/safe_json.py)
and pretty-printed by `json` (which escapes every control character as `\\uXXXX`); text that is not
JSON is shown literally, text over the reader's limits only as a note saying so. A line too long
for the pane wraps under its value (widgets/hanging.py): `"command":` keeps its value beside it,
and the value's continuation lines start under the value's first character.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.text import Text

from widgets.hanging import Hanging
from widgets.safe_json import UnreadableJson, read_json, unparseable_note
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


def pretty_json(value: Any) -> str | None:
    """Indented JSON; None for text that is not JSON (shown as stored); for text over the reader's
    limits, the note that says so ("unparseable (nested too deeply)"), never the text itself."""
    if isinstance(value, (str, bytes, bytearray)):
        try:
            value = read_json(value)
        except UnreadableJson as exc:
            return str(exc) if exc.over_limit else None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


# Highlighting runs on the UI thread: 80,000 lines of a wide array took 11 s. The pane shows the
# first lines and says how many more there are (the CLI's `show` and the `Y` copy keep everything).
MAX_LINES = 2000


def _head(text: str) -> tuple[str, int]:
    lines = text.split("\n", MAX_LINES)
    if len(lines) <= MAX_LINES:
        return text, 0
    return "\n".join(lines[:MAX_LINES]), lines[MAX_LINES].count("\n") + 1


def _more(hidden: int) -> Text:
    return Text(f"… {hidden} more lines", style="dim")


def json_renderable(value: Any, *, theme: str = "ansi_dark"):
    note = unparseable_note(value)
    if note is not None:
        return Text(note, style="dim")
    text = pretty_json(value)
    if text is None:
        shown, hidden = _head(value if isinstance(value, str) else str(value))
        return Group(safe_text(shown), _more(hidden)) if hidden else safe_text(shown)
    from rich.syntax import Syntax  # pygments is slow to import; not needed for the first paint

    shown, hidden = _head(safe_text(text).plain)  # ensure_ascii=False keeps non-ASCII; controls stay escaped
    highlighted = Syntax(shown, "json", theme=theme, background_color="default").highlight(shown)
    highlighted.rstrip()
    lines = Hanging([(line, value_column(line.plain)) for line in highlighted.split("\n")])
    return Group(lines, _more(hidden)) if hidden else lines


def value_column(line: str) -> int:
    """Where a pretty-printed JSON line's value starts: after `"key": `, else after the indentation."""
    indent = len(line) - len(line.lstrip(" "))
    if line.startswith('"', indent):
        try:
            _, end = json.decoder.scanstring(line, indent + 1)
        except ValueError:
            return indent
        if line.startswith(": ", end):
            return end + 2
    return indent


class JsonView(Static):
    DEFAULT_CSS = "JsonView { height: auto; }"

    def show(self, value: Any, *, dark: bool = True) -> None:
        self.update(json_renderable(value, theme="ansi_dark" if dark else "ansi_light"))

    def clear(self, message: str = "") -> None:
        self.update(Text(message, style="dim"))
