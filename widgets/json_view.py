"""Pretty, syntax-highlighted JSON from untrusted text, safe to render.

Rich's `Syntax` never interprets markup; the text is pretty-printed by `json` (which escapes
every control character as `\\uXXXX`), and text that is not JSON is shown literally.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


def pretty_json(value: Any) -> str | None:
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except (TypeError, ValueError):
            return None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def json_renderable(value: Any, *, theme: str = "ansi_dark"):
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
