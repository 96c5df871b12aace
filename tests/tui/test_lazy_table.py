"""The paged table: pages arrive through workers, memory is bounded, selection survives reloads."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from textual.app import App, ComposeResult

from tests.tui.pilot import wait_until
from widgets.lazy_table import LazyTable
from widgets.page_source import Preload
from widgets.table_column import Column


class NumbersSource:
    """Keyset pages over a real SQLite table of n rows (n, label)."""

    def __init__(self, path, where: str = "") -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.lock = threading.Lock()
        self.where = where
        self.page_calls = 0

    def count(self) -> int:
        with self.lock:
            return self.conn.execute(f"SELECT count(*) FROM t {self.where}").fetchone()[0]

    def page(self, after, limit):
        self.page_calls += 1
        clause = self.where or "WHERE 1"
        with self.lock:
            rows = self.conn.execute(
                f"SELECT n, label FROM t {clause} AND n > ? ORDER BY n LIMIT ?",
                (-1 if after is None else after, limit),
            ).fetchall()
        return [dict(r) for r in rows], (rows[-1]["n"] if rows else after)

    def key(self, row):
        return row["n"]

    def index_of(self, key):
        with self.lock:
            return self.conn.execute(f"SELECT count(*) FROM t {self.where or 'WHERE 1'} AND n < ?", (key,)).fetchone()[0]


def make_numbers(tmp_path, n: int):
    path = tmp_path / "numbers.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, label TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((i, f"row {i}") for i in range(n)))
    conn.execute("INSERT INTO t VALUES (?, ?)", (n, "[@click=app.quit]x[/] \x1b[2J"))
    conn.commit()
    conn.close()
    return path


class TableApp(App):
    def __init__(self, source):
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        yield LazyTable([Column("n", "N", 8), Column("label", "Label", 30)], self.source, page_size=50, max_pages=4)

    def on_mount(self) -> None:
        self.query_one(LazyTable).reload()


async def wait_loaded(pilot, table):
    await wait_until(pilot, lambda: table.visible_loaded and not table._pending, what="the table loaded")


@pytest.mark.slow
async def test_pages_on_demand_and_bounded_memory(tmp_path):
    source = NumbersSource(make_numbers(tmp_path, 5000))
    app = TableApp(source)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await wait_loaded(pilot, table)
        assert table.total == 5001
        assert table.cursor_row["n"] == 0
        for _ in range(60):
            await pilot.press("pagedown")
        await wait_loaded(pilot, table)
        step = table._body_height()  # rows on screen: less the header and the scrollbar
        assert table.cursor == 60 * step
        assert table.cursor_row["n"] == 60 * step
        assert len(table._pages) <= 4
        await pilot.press("end")
        await wait_loaded(pilot, table)
        assert table.cursor_row["n"] == 5000
        # Untrusted text rendered literally, never as markup: the app is still running.
        await pilot.pause()
        line = "".join(seg.text for seg in table.render_line(table._body_height()))
        assert "[@click=app.quit]x[/]" in line and "\x1b" not in line and "␛[2J" in line
        assert app.is_running


async def test_reload_keeps_cursor_on_same_row(tmp_path):
    path = make_numbers(tmp_path, 300)
    source = NumbersSource(path)
    app = TableApp(source)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await wait_loaded(pilot, table)
        table.cursor = 120
        await wait_loaded(pilot, table)
        assert table.cursor_key == 120
        with source.lock:
            source.conn.execute("DELETE FROM t WHERE n < 10")
            source.conn.commit()
        table.reload()
        await wait_loaded(pilot, table)
        assert table.cursor_key == 120
        assert table.cursor == 110


async def test_selection_and_empty(tmp_path):
    source = NumbersSource(make_numbers(tmp_path, 10))
    app = TableApp(source)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await wait_loaded(pilot, table)
        assert table.toggle_selected() is True
        await pilot.press("down")
        table.toggle_selected()
        assert set(table.selected) == {0, 1}
        table.set_source(NumbersSource(source_path := tmp_path / "numbers.db", where="WHERE n > 999"))
        await wait_loaded(pilot, table)
        assert table.total == 0 and table.cursor_row is None


class JumpingNumbersSource(NumbersSource):
    """NumbersSource with the optional jump methods; counts every row it reads."""

    def __init__(self, path, where: str = "") -> None:
        super().__init__(path, where)
        self.rows_read = 0

    def page(self, after, limit):
        rows, end = super().page(after, limit)
        self.rows_read += len(rows)
        return rows, end

    def _ns(self, sql, params):
        with self.lock:
            ns = [r[0] for r in self.conn.execute(sql, params)]
        self.rows_read += len(ns)
        return ns

    def cursor_of(self, key):
        return key

    def advance(self, cursor, count):
        ns = self._ns("SELECT n FROM t WHERE n > ? ORDER BY n LIMIT ?", (-1 if cursor is None else cursor, count))
        return ns[-1] if ns else cursor

    def retreat(self, cursor, count):
        if cursor is None:
            ns = self._ns("SELECT n FROM t ORDER BY n DESC LIMIT ?", (count + 1,))
            return ns[-1] if len(ns) == count + 1 else None
        ns = self._ns("SELECT n FROM t WHERE n < ? ORDER BY n DESC LIMIT ?", (cursor, count))
        return ns[-1] if len(ns) == count else None


@pytest.mark.slow
async def test_end_reads_the_last_page_from_the_end_not_every_row(tmp_path):
    source = JumpingNumbersSource(make_numbers(tmp_path, 20000))
    app = TableApp(source)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await wait_loaded(pilot, table)
        source.rows_read = 0
        await pilot.press("end")
        await wait_loaded(pilot, table)
        assert table.cursor_row["n"] == 20000
        assert source.rows_read <= 3 * table.page_size  # a walk would read 20,000
        # Page Up from the end continues backwards from the known page start.
        source.rows_read = 0
        for _ in range(8):
            await pilot.press("pageup")
        await wait_loaded(pilot, table)
        assert table.cursor_row["n"] == 20000 - 8 * table._body_height()
        assert source.rows_read <= 8 * table.page_size
        # A reload keeps the row and finds its page by stepping back from it, not from the start.
        source.rows_read = 0
        table.reload()
        await wait_loaded(pilot, table)
        assert table.cursor_row["n"] == 20000 - 8 * table._body_height()
        assert source.rows_read <= 4 * table.page_size  # the step back, its page and the pages beside it


async def test_a_ready_preload_is_on_screen_without_another_read(tmp_path):
    source = NumbersSource(make_numbers(tmp_path, 500))
    preload = Preload(source, page_size=50)
    assert preload.wait(10)
    app = TableApp(None)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await pilot.pause()
        table.set_source(preload)
        assert table.row_at(0)["n"] == 0 and table.row_at(49)["n"] == 49  # before any worker ran
        await wait_loaded(pilot, table)
        assert table.total == 501 and table.total_exact
        assert source.page_calls == 1


class GatedNumbersSource(NumbersSource):
    """Every read waits for `gate`: the test, not the scheduler, decides when a page arrives."""

    def __init__(self, path, where: str = "") -> None:
        super().__init__(path, where)
        self.gate = threading.Event()
        self.asked = 0  # reads started, whether or not through the gate yet

    def page(self, after, limit):
        self.asked += 1
        assert self.gate.wait(60), "the test never opened the gate"
        return super().page(after, limit)


async def test_a_preload_still_running_is_awaited_by_the_reload(tmp_path):
    # Issue 21 item 2: on a loaded machine the table said "loaded" while the preload was still
    # running (the empty table it had before counted as loaded), and row 0 was None.
    source = GatedNumbersSource(make_numbers(tmp_path, 500))
    preload = Preload(source, page_size=50)  # its read waits at the gate until the table exists
    app = TableApp(None)
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await pilot.pause()
        assert table.visible_loaded and table.total == 0  # no source: loaded, and empty
        table.set_source(preload)
        await pilot.pause()
        assert table.row_at(0) is None
        assert not table.visible_loaded  # the empty table is the old source's, not this one's
        source.gate.set()
        await wait_loaded(pilot, table)
        assert table.row_at(0)["n"] == 0 and table.total == 501
        assert source.page_calls == 1


async def test_a_reload_of_another_source_is_not_loaded_until_its_rows_are(tmp_path):
    path = make_numbers(tmp_path, 500)
    app = TableApp(NumbersSource(path))
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LazyTable)
        await wait_loaded(pilot, table)
        gated = GatedNumbersSource(path, where="WHERE n >= 100")
        table.set_source(gated)
        await pilot.pause()
        assert not table.visible_loaded  # rows 0.. on screen are the old source's
        table.scroll_to(y=120, animate=False, immediate=True)
        await pilot.pause()
        await wait_until(pilot, lambda: gated.asked == 1, what="the reload's first read")
        await pilot.pause()
        assert gated.asked == 1 and not table._pending  # no page fetched by the old source's routes
        gated.gate.set()
        await wait_loaded(pilot, table)
        assert table.row_at(0)["n"] == 100 and table.total == 401
