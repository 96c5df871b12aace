"""Where a `LazyTable` (widgets/lazy_table.py) reads its rows, and how it reaches a page.

The data comes from a `PageSource` (any object with `count`, `page` and `key`). Optional methods
make jumps and "keep the selection after a reload" cheap: `index_of(key)`, `cursor_of(key)`,
`advance(cursor, n)` and `retreat(cursor, n)` (where `retreat(None, n)` starts the last n rows).
A page whose start cursor is unknown is reached from the nearest known cursor below, above, or
from the end of the list, whichever reads fewest rows (`cheapest_route`): End on a million rows
reads one page.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Hashable, Mapping, Protocol


class PageSource(Protocol):
    """Where rows come from. Methods run in worker threads; they must be thread-safe."""

    def count(self) -> int: ...

    def page(self, after: Any | None, limit: int) -> tuple[list[Any], Any | None]:
        """Up to `limit` rows after keyset cursor `after` (None = from the start), and the cursor
        of the last row returned."""

    def key(self, row: Any) -> Hashable: ...


class JumpingSource(PageSource, Protocol):
    """What a source may add so that jumps read a page, not every row in between."""

    def index_of(self, key: Hashable) -> int | None:
        """How many rows sort before the row `key` (None when it is gone)."""

    def cursor_of(self, key: Hashable) -> Any | None:
        """The cursor just after the row `key`."""

    def advance(self, cursor: Any | None, count: int) -> Any | None:
        """The cursor `count` rows after `cursor` (None = the start)."""

    def retreat(self, cursor: Any | None, count: int) -> Any | None:
        """The cursor `count` rows before `cursor`, where None is the END of the list."""


class Preload:
    """The first page of `source`, fetched in a plain thread before any table exists.

    A screen that will surely open (the one the console starts on) can ask for its first page
    while Textual is still starting; `set_source(preload)` then shows the rows in the very first
    frame instead of a placeholder frame and a second layout pass.
    """

    def __init__(self, source: PageSource, page_size: int = 100) -> None:
        self.source = source
        self.page_size = page_size
        self._future: Future = Future()
        threading.Thread(target=self._run, name="lazy-table-preload", daemon=True).start()

    def _run(self) -> None:
        try:
            self._future.set_result(self.source.page(None, self.page_size))
        except BaseException as exc:  # handed to whoever asks for the page
            self._future.set_exception(exc)

    def ready(self) -> bool:
        return self._future.done() and self._future.exception() is None

    def wait(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds (only before the UI runs); whether the page is here."""
        try:
            self._future.exception(timeout)
        except TimeoutError:
            return False
        return self.ready()

    def result(self) -> tuple[list[Any], Any | None]:
        return self._future.result()



# How to reach the start of a page: ("at", cursor) known; ("forward", cursor, rows) from a known
# cursor below; ("back", cursor, rows) from a known cursor above, or from the end when cursor is None.
Route = tuple


def cursor_for(source: PageSource, page_no: int, route: Route, page_size: int) -> Any | None:
    """The keyset cursor before page `page_no`, by `route` (see `cheapest_route`). Runs in a
    worker: reads no shared state."""
    if page_no == 0:
        return None
    if route[0] == "at":
        return route[1]
    _, cursor, rows = route
    if route[0] == "back":
        return source.retreat(cursor, rows)  # type: ignore[attr-defined]
    if hasattr(source, "advance"):
        return source.advance(cursor, rows)
    for _ in range(rows // page_size):
        _, cursor = source.page(cursor, page_size)
    return cursor


def cheapest_route(starts: Mapping[int, Any], page_no: int, page_size: int, *, can_retreat: bool,
                   total: int | None) -> Route:
    """The cheapest way to the start of page `page_no` from what is known (`starts`: page -> the
    cursor before its first row): its own cursor, the nearest known page start below or above, or
    the end of the list when `total` is exact (End, Page Up from the end). Cost is counted in rows
    read."""
    if page_no in starts:
        return ("at", starts[page_no])
    size = page_size
    below = max((p for p in starts if p < page_no), default=0)
    routes = [((page_no - below) * size, ("forward", starts.get(below) if below else None, (page_no - below) * size))]
    if can_retreat:
        above = min((p for p in starts if p > page_no), default=None)
        if above is not None:
            routes.append(((above - page_no) * size, ("back", starts[above], (above - page_no) * size)))
        if total is not None:
            from_end = total - page_no * size
            routes.append((from_end, ("back", None, from_end)))
    return min(routes, key=lambda r: r[0])[1]


__all__ = ["JumpingSource", "PageSource", "Preload", "Route", "cheapest_route", "cursor_for"]
