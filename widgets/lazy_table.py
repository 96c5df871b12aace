"""A table for lists that may hold a million rows: keyset pages fetched on demand, never all rows.

The widget follows Textual's Line API (`ScrollView` + `render_line` + `virtual_size`) the way
toolong's log view does: it keeps only an LRU of pages and the keyset cursors where pages start;
a line whose page is not cached renders as a placeholder and queues a fetch in a thread worker,
which posts the rows back as a message. Memory therefore depends on the screen, not the table.
Where the rows come from, and how a page is reached cheaply, is widgets/page_source.py.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence

from rich.style import Style
from rich.text import Text
from textual import events, work
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import Worker, WorkerState

from widgets.page_source import PageSource, Preload, Route, cheapest_route, cursor_for
from widgets.safe_text import safe_text
from widgets.table_column import Column, render_cells


class LazyTable(ScrollView, can_focus=True):
    """A keyset-paged table. `source=None` shows an empty table until `set_source` is called."""

    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False, id="table.up"),
        Binding("down", "cursor_down", "Down", show=False, id="table.down"),
        Binding("pageup", "page_up", "Page up", show=False, id="table.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="table.page_down"),
        Binding("home", "first", "First", show=False, id="table.first"),
        Binding("end", "last", "Last", show=False, id="table.last"),
        Binding("enter", "activate", "Open", show=False, id="table.activate"),
    ]

    COMPONENT_CLASSES = {
        "lazy-table--header",
        "lazy-table--cursor",
        "lazy-table--selected",
        "lazy-table--placeholder",
        "lazy-table--warning",
        "lazy-table--muted",
    }

    DEFAULT_CSS = """
    LazyTable { height: 1fr; background: $surface; }
    LazyTable > .lazy-table--header { text-style: bold; background: $panel; color: $text; }
    LazyTable > .lazy-table--cursor { background: $block-cursor-blurred-background; }
    LazyTable:focus > .lazy-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold; }
    LazyTable > .lazy-table--selected { color: $accent; text-style: bold; }
    LazyTable > .lazy-table--placeholder { color: $text-muted; }
    LazyTable > .lazy-table--warning { color: $warning; }
    LazyTable > .lazy-table--muted { color: $text-muted; }
    """

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    class CursorMoved(Message):
        """The highlighted row changed, or its data arrived (`row` is None while loading)."""

        def __init__(self, table: "LazyTable", index: int, row: Any | None) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.row = row

        @property
        def control(self) -> "LazyTable":
            return self.table

    class RowActivated(Message):
        def __init__(self, table: "LazyTable", index: int, row: Any) -> None:
            super().__init__()
            self.table = table
            self.index = index
            self.row = row

        @property
        def control(self) -> "LazyTable":
            return self.table

    class Counted(Message):
        def __init__(self, table: "LazyTable", total: int) -> None:
            super().__init__()
            self.table = table
            self.total = total

        @property
        def control(self) -> "LazyTable":
            return self.table

    class LoadFailed(Message):
        """A fetch raised; the app decides how to show it."""

        def __init__(self, table: "LazyTable", error: BaseException) -> None:
            super().__init__()
            self.table = table
            self.error = error

    class _PageLoaded(Message):
        def __init__(self, generation: int, page_no: int, rows: list, start: Any, end: Any) -> None:
            super().__init__()
            self.generation, self.page_no, self.rows = generation, page_no, rows
            self.start, self.end = start, end

    class _Reloaded(Message):
        def __init__(
            self, generation: int, total: int, index: int | None, first_page: tuple | None, exact: bool
        ) -> None:
            super().__init__()
            self.generation, self.total, self.index = generation, total, index
            self.first_page, self.exact = first_page, exact

    def __init__(
        self,
        columns: Sequence[Column],
        source: PageSource | None = None,
        *,
        page_size: int = 100,
        max_pages: int = 16,
        row_class: Callable[[Any], str | None] | None = None,
        empty_message: str = "Nothing to show.",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = list(columns)
        self.source = source
        self.page_size = page_size
        self.max_pages = max_pages
        self.row_class = row_class
        self.empty_message = empty_message
        self.total: int | None = None
        self.total_exact = False
        self.selected: dict[Hashable, Any] = {}
        self._pages: OrderedDict[int, list] = OrderedDict()
        self._starts: OrderedDict[int, Any] = OrderedDict()  # page -> cursor before its first row
        self._pending: set[int] = set()
        self._generation = 0
        self._reloading = False  # till a reload's first result, rows/count/routes are the old source's
        self._last_reported: tuple[int, Hashable | None] | None = None

    # ----------------------------------------------------------------- public API
    def set_source(self, source: PageSource | Preload | None, *, keep_cursor: bool = False) -> None:
        """Show another source (a new filter); the cursor goes to the top unless kept. A
        `Preload` of this table's page size is shown at once if its first page has arrived."""
        preload = None
        if isinstance(source, Preload):
            preload, source = (source if source.page_size == self.page_size else None), source.source
        self.source = source
        if not keep_cursor:
            self.cursor = 0
            self.scroll_to(y=0, animate=False)
        self.reload(keep_cursor=keep_cursor, preload=preload)

    def reload(self, *, keep_cursor: bool = True, preload: Preload | None = None) -> None:
        """Forget every cached page and count again; the highlighted row is found again by key."""
        self._generation += 1
        self._pending.clear()
        self._reloading = self.source is not None
        key = self.cursor_key if keep_cursor else None
        if self.source is None:
            self._pages.clear()
            self._starts.clear()
            self.total, self.total_exact = 0, True
            self._resize()
            self.refresh()
            return
        if preload is not None and key is None and preload.ready():
            rows, end = preload.result()
            self._apply_reload(self._Reloaded(self._generation, self._guess(0, rows), None, (0, rows, None, end), False))
            self._reload_worker(self._generation, self.source, None, counting_only=True)
            return
        self._reload_worker(self._generation, self.source, key, preload=preload if key is None else None)

    @property
    def cursor_row(self) -> Any | None:
        return self.row_at(self.cursor)

    @property
    def cursor_key(self) -> Hashable | None:
        row = self.cursor_row
        return None if row is None or self.source is None else self.source.key(row)

    def row_at(self, index: int) -> Any | None:
        page_no, offset = divmod(index, self.page_size)
        page = self._pages.get(page_no)
        if page is None or offset >= len(page):
            return None
        return page[offset]

    @property
    def visible_loaded(self) -> bool:
        """Every row on screen holds the latest reload's data, counted (for tests and the benchmark)."""
        if self._reloading or self.total is None or not self.total_exact:
            return False
        first = int(self.scroll_offset.y)
        last = min(self.total, first + self._body_height())
        pages = {i // self.page_size for i in range(first, last)}
        return all(p in self._pages for p in pages)

    def toggle_selected(self) -> bool | None:
        """Mark or unmark the highlighted row; returns the new state (None if no row)."""
        row = self.cursor_row
        if row is None or self.source is None:
            return None
        key = self.source.key(row)
        if key in self.selected:
            del self.selected[key]
            state = False
        else:
            self.selected[key] = row
            state = True
        self.refresh()
        return state

    def clear_selection(self) -> None:
        self.selected.clear()
        self.refresh()

    # ----------------------------------------------------------------- workers
    def _guess(self, page_no: int, rows: list) -> int:
        """Rows known to exist, plus a page when this one is full: until the count arrives."""
        return page_no * self.page_size + len(rows) + (self.page_size if len(rows) == self.page_size else 0)

    @work(thread=True, exclusive=True, group="lazy-table-count", exit_on_error=False)
    def _reload_worker(self, generation: int, source: PageSource, key: Hashable | None, *,
                       preload: Preload | None = None, counting_only: bool = False) -> None:
        # The screen around the kept row first (one round trip before the first paint), then
        # the exact count, which may take longer on a large table.
        if not counting_only:
            self._first_page(generation, source, key, preload)
        if generation != self._generation:
            return  # superseded (a newer filter, typed on): its count would never be shown
        total = source.count()
        self.post_message(self._Reloaded(generation, total, None, None, exact=True))

    def _first_page(self, generation: int, source: PageSource, key: Hashable | None, preload: Preload | None) -> None:
        """The page holding the kept row (else the cursor's), posted before the count."""
        index = None
        if key is not None and hasattr(source, "index_of"):
            index = source.index_of(key)
        target = index if index is not None else self.cursor
        page_no = target // self.page_size
        route: Route = ("forward", None, page_no * self.page_size)
        if page_no and index is not None and hasattr(source, "cursor_of") and hasattr(source, "retreat"):
            after_row = source.cursor_of(key)
            if after_row is not None:  # back from the kept row to its page's start: under a page
                route = ("back", after_row, index % self.page_size + 1)
        if preload is not None and page_no == 0:
            start, (rows, end) = None, preload.result()
        else:
            start = cursor_for(source, page_no, route, self.page_size)
            rows, end = source.page(start, self.page_size)
        if not rows and page_no:
            page_no, start = 0, None
            rows, end = source.page(None, self.page_size)
        self.post_message(self._Reloaded(generation, self._guess(page_no, rows), index, (page_no, rows, start, end),
                                         exact=False))

    @work(thread=True, group="lazy-table-page", exit_on_error=False)
    def _page_worker(self, generation: int, source: PageSource, page_no: int, route: Route) -> None:
        start = cursor_for(source, page_no, route, self.page_size)
        rows, end = source.page(start, self.page_size)
        self.post_message(self._PageLoaded(generation, page_no, rows, start, end))

    def _route(self, page_no: int) -> Route:
        exact = self.total if self.total_exact else None
        can_retreat = self.source is not None and hasattr(self.source, "retreat")
        return cheapest_route(self._starts, page_no, self.page_size, can_retreat=can_retreat, total=exact)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group.startswith("lazy-table") and event.state == WorkerState.ERROR:
            self._pending.clear()
            self.post_message(self.LoadFailed(self, event.worker.error))

    # ----------------------------------------------------------------- messages
    def on_lazy_table__reloaded(self, message: _Reloaded) -> None:
        message.stop()
        self._apply_reload(message)

    def _apply_reload(self, message: _Reloaded) -> None:
        if message.generation != self._generation:
            return
        self._reloading = False
        if message.first_page is not None:
            self._pages.clear()
            self._starts.clear()
            page_no, rows, start, end = message.first_page
            self._store(page_no, rows, start, end)
        self.total = message.total
        self.total_exact = message.exact
        self._resize()
        if message.index is not None:
            self.cursor = message.index
        else:
            self.cursor = min(self.cursor, max(0, self.total - 1))
        self._last_reported = None
        self._report_cursor()
        self.refresh()
        self.call_after_refresh(self._scroll_to_cursor)  # the new size may add or drop a scrollbar
        if message.exact:
            self.post_message(self.Counted(self, self.total))

    def on_lazy_table__page_loaded(self, message: _PageLoaded) -> None:
        message.stop()
        self._pending.discard(message.page_no)
        if message.generation != self._generation:
            return
        self._store(message.page_no, message.rows, message.start, message.end)
        if not self.total_exact and self.total is not None:
            # Until the count arrives the table grows as full pages come in.
            end = message.page_no * self.page_size + len(message.rows)
            grown = end + (self.page_size if len(message.rows) == self.page_size else 0)
            if grown > self.total:
                self.total = grown
                self._resize()
        self.refresh()
        if self.cursor // self.page_size == message.page_no:
            self._report_cursor()

    def _store(self, page_no: int, rows: list, start: Any, end: Any) -> None:
        self._pages[page_no] = rows
        self._pages.move_to_end(page_no)
        while len(self._pages) > self.max_pages:
            self._pages.popitem(last=False)
        self._remember_start(page_no, start)
        if len(rows) == self.page_size:
            self._remember_start(page_no + 1, end)

    def _remember_start(self, page_no: int, cursor: Any) -> None:
        self._starts[page_no] = cursor
        self._starts.move_to_end(page_no)
        while len(self._starts) > 4096:
            self._starts.popitem(last=False)

    def _want(self, page_no: int) -> None:
        if self.source is None or self.total is None or self._reloading:
            return
        if page_no < 0 or page_no * self.page_size >= self.total:
            return
        if page_no in self._pages or page_no in self._pending:
            return
        self._pending.add(page_no)
        self._page_worker(self._generation, self.source, page_no, self._route(page_no))

    # ----------------------------------------------------------------- cursor
    def _report_cursor(self) -> None:
        row = self.cursor_row
        key = None if row is None or self.source is None else self.source.key(row)
        marker = (self.cursor, key, id(row))
        if marker == self._last_reported:
            return
        self._last_reported = marker
        self.post_message(self.CursorMoved(self, self.cursor, row))

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        if self.total is not None:
            self._report_cursor()

    def validate_cursor(self, value: int) -> int:
        if not self.total:
            return 0
        return max(0, min(value, self.total - 1))

    def _body_height(self) -> int:
        """Rows fully on screen: the height less the header and the horizontal scrollbar, which
        is drawn over the last rows (a row under it is not visible)."""
        return max(1, self.size.height - 1 - self.scrollbar_size_horizontal)

    def _scroll_to_cursor(self) -> None:
        top = int(self.scroll_offset.y)
        height = self._body_height()
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_page_down(self) -> None:
        height = self._body_height()
        self.scroll_to(y=int(self.scroll_offset.y) + height, animate=False, immediate=True)
        self.cursor += height

    def action_page_up(self) -> None:
        height = self._body_height()
        self.scroll_to(y=max(0, int(self.scroll_offset.y) - height), animate=False, immediate=True)
        self.cursor -= height

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = (self.total or 1) - 1

    def action_activate(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.RowActivated(self, self.cursor, row))

    def on_click(self, event: events.Click) -> None:
        y = event.y
        if y >= 1:
            self.cursor = int(self.scroll_offset.y) + y - 1

    # ----------------------------------------------------------------- rendering
    def _content_width(self) -> int:
        return sum(c.width for c in self.columns) + 2 * len(self.columns) + 2

    def _resize(self) -> None:
        width = max(self._content_width(), self.size.width)
        self.virtual_size = Size(width, (self.total or 0) + 1)

    def on_resize(self, event: events.Resize) -> None:
        self._resize()
        self._scroll_to_cursor()
        # The horizontal scrollbar appears or goes with the layout that follows a resize: look
        # again once it is settled.
        self.call_after_refresh(self._scroll_to_cursor)

    def _widths(self, width: int) -> list[int]:
        widths = [c.width for c in self.columns]
        spare = width - self._content_width()
        if spare > 0 and widths:
            widths[-1] += spare
        return widths

    def _line(self, cells: list[Text], widths: list[int], style: Style, marker: str) -> Strip:
        return render_cells(self.app.console, cells, widths, style, marker)

    def render_line(self, y: int) -> Strip:
        width = max(self.size.width, self._content_width())
        widths = self._widths(width)
        scroll_x, scroll_y = int(self.scroll_offset.x), int(self.scroll_offset.y)
        base = self.rich_style
        if y == 0:
            style = self.get_component_rich_style("lazy-table--header")
            cells = [safe_text(c.label, one_line=True) for c in self.columns]  # a label may be database text (:sql)
            strip = self._line(cells, widths, style, "  ")
        else:
            index = scroll_y + y - 1
            strip = self._row_strip(index, widths)
            if strip is None:
                return Strip.blank(self.size.width, base)
        return strip.crop_extend(scroll_x, scroll_x + self.size.width, base)

    def _row_strip(self, index: int, widths: list[int]) -> Strip | None:
        if self.total is None:
            if index == 0:
                style = self.get_component_rich_style("lazy-table--placeholder")
                return self._line([Text("loading…")], [sum(widths)], style, "  ")
            return None
        if self.total == 0:
            if index == 0:
                style = self.get_component_rich_style("lazy-table--placeholder")
                return self._line([Text(self.empty_message)], [sum(widths)], style, "  ")
            return None
        if index >= self.total:
            return None
        row = self.row_at(index)
        page_no = index // self.page_size
        if row is None:
            self._want(page_no)
            style = self.get_component_rich_style("lazy-table--placeholder")
            return self._line([Text("…")], [sum(widths)], style, "  ")
        offset = index % self.page_size
        if offset >= self.page_size // 2:
            self._want(page_no + 1)  # read ahead: the next page is fetched while this one is read
        elif offset < 10:
            self._want(page_no - 1)
        self._pages.move_to_end(page_no)
        style = Style()
        if self.row_class is not None:
            name = self.row_class(row)
            if name:
                style += self.get_component_rich_style(f"lazy-table--{name}")
        key = self.source.key(row) if self.source is not None else None
        selected = key in self.selected
        if selected:
            style += self.get_component_rich_style("lazy-table--selected")
        if index == self.cursor:
            style += self.get_component_rich_style("lazy-table--cursor")
        cells = [c.cell(row) for c in self.columns]
        return self._line(cells, widths, style, "● " if selected else "  ")


__all__ = ["LazyTable"]
