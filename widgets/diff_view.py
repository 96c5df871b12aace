"""A unified diff of two JSON documents, coloured line by line, every line rendered literally."""

from __future__ import annotations

import difflib
from typing import Any

from rich.text import Text

from widgets.json_view import pretty_json
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


def diff_text(old: Any, new: Any, *, old_label: str = "old", new_label: str = "new") -> Text:
    a = (pretty_json(old) or str(old)).splitlines()
    b = (pretty_json(new) or str(new)).splitlines()
    lines = list(difflib.unified_diff(a, b, old_label, new_label, lineterm="", n=3))
    if not lines:
        return Text("No differences.", style="dim")
    out = Text(end="")
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        out.append_text(safe_text(line, style))
    return out


class DiffView(Static):
    DEFAULT_CSS = "DiffView { height: auto; }"

    def show(self, old: Any, new: Any, *, old_label: str = "old", new_label: str = "new") -> None:
        self.update(diff_text(old, new, old_label=old_label, new_label=new_label))
