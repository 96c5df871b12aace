"""A vertical timeline: one line per event, time first, then what happened and who did it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from rich.text import Text

from widgets.humane import exact
from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


@dataclass(frozen=True)
class TimelineEvent:
    when: datetime | None
    title: str
    detail: str = ""
    style: str = ""


def timeline_text(events: Sequence[TimelineEvent]) -> Text:
    text = Text(end="")
    if not events:
        return Text("No events recorded.", style="dim")
    for i, event in enumerate(events):
        if i:
            text.append("\n")
        text.append("● " if i == len(events) - 1 else "○ ", style=event.style or "dim")
        text.append(exact(event.when).replace(" UTC", ""), style="dim")
        text.append("  ")
        text.append_text(safe_text(event.title, event.style or "bold", one_line=True))
        if event.detail:
            text.append("\n    ")
            text.append_text(safe_text(event.detail, "italic", one_line=True))
    return text


class Timeline(Static):
    DEFAULT_CSS = "Timeline { height: auto; }"

    def show(self, events: Sequence[TimelineEvent]) -> None:
        self.update(timeline_text(events))
