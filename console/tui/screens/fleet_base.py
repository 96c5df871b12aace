"""What the fleet screens share: the frame, a host's status arriving, and greyed keys that say why.

The fleet console (console/tui/fleet_app.py) has no local database, so its screens are not
`ConsoleScreen`s; they keep the same frame (header, badge bar, KeyFooter) and the same greyed write
keys that say why (console/tui/screens/base.py `GreyedKeys`).
Every string a host sent is data: it reaches the screen through widgets/safe_widgets.py and
widgets/safe_text.py only.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Header

from console.tui.screens.base import GreyedKeys
from widgets.badge import Badge
from widgets.key_footer import KeyFooter
from widgets.terminal_guard import SafeTitles

if TYPE_CHECKING:
    from console.tui.fleet_monitor import FleetMonitor, HostStatus


class FleetApp(Protocol):
    """What a fleet screen uses of the running app (console/tui/fleet_app.py `FleetConsole`)."""

    status: dict[str, "HostStatus"]
    monitor: "FleetMonitor | None"
    problem: str | None

    def now(self) -> datetime: ...

    def show_screen(self, name: str, argument: str | None = None) -> None: ...


class FleetScreen(SafeTitles, GreyedKeys, Screen):
    COMMAND = ""
    TITLE = ""

    BINDINGS = [Binding("w", "why", "Why greyed?", id="fleet.why", show=False)]

    @property
    def fleet(self) -> FleetApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        with Horizontal(id="badges"):
            yield Badge(self.TITLE, "info", id="screen-badge")
            yield Badge(f"FLEET {len(self.fleet.status)} hosts", "warning", id="fleet-badge")
        yield from self.compose_content()
        yield KeyFooter()

    def compose_content(self) -> ComposeResult:
        return
        yield

    def on_mount(self) -> None:
        self.sub_title = ""
        chosen = None
        for minimum, name in self.app.HORIZONTAL_BREAKPOINTS or []:
            if self.app.size.width >= minimum:
                chosen = name
        self.update_classes({name: name == chosen for _, name in self.app.HORIZONTAL_BREAKPOINTS or []},
                            animate=False)

    def host_changed(self, status: "HostStatus") -> None:
        """A host's status changed (called by the app on the UI thread)."""


class ListSource:
    """A `LazyTable` source over rows already in memory (a merged snapshot of every host's answer):
    immutable once built, so the table's worker threads may read it."""

    def __init__(self, rows: list[Any], key: Any) -> None:
        self.rows = list(rows)
        self._key = key
        self._index = {key(r): i for i, r in enumerate(self.rows)}

    def count(self) -> int:
        return len(self.rows)

    def page(self, after: Any | None, limit: int) -> tuple[list[Any], Any | None]:
        start = 0 if after is None else after
        rows = self.rows[start:start + limit]
        return rows, start + len(rows)

    def key(self, row: Any) -> Any:
        return self._key(row)

    def index_of(self, key: Any) -> int | None:
        return self._index.get(key)

    def cursor_of(self, key: Any) -> Any | None:
        index = self._index.get(key)
        return None if index is None else index + 1

    def advance(self, cursor: Any | None, count: int) -> Any | None:
        return min(len(self.rows), (cursor or 0) + count)

    def retreat(self, cursor: Any | None, count: int) -> Any | None:
        end = len(self.rows) if cursor is None else cursor
        return max(0, end - count)
