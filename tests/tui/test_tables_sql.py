"""`:tables` and `:sql` as an operator (or a support engineer) uses them: list every table, open one,
page down to its end; run a statement, see its rows; a write is refused under the prompt and the
file is left alone, in read-write, read-only and support mode alike; hostile names and values are
pictured, never sent to the terminal.
"""

from __future__ import annotations

import sqlite3

import pytest

from console.tui.screens.sql import SqlScreen
from console.tui.screens.tables import TableScreen, TablesScreen
from tests.adversarial.tui import open_screen
from tests.tui.pilot import settle, type_text, wait_until
from tests.untouched import fingerprint_dir
from widgets.lazy_table import LazyTable
from widgets.safe_text import is_clean

pytestmark = pytest.mark.slow


def rows_table(app) -> LazyTable:
    return app.screen.query_one(LazyTable)


def loaded(app, cls) -> bool:
    if not isinstance(app.screen, cls):
        return False
    t = rows_table(app)
    return t.total is not None and t.total_exact and t.visible_loaded


async def laid_out(pilot, t: LazyTable) -> None:
    """The table's height for its counted rows is laid out: a jump issued before that scrolls no
    further than the old height, leaving the cursor's row unpainted and so never fetched."""
    await wait_until(pilot, lambda: t.max_scroll_y >= (t.total or 0) + 1 - t.size.height, what="the layout")


def painted(app) -> list[str]:
    """What the screen draws of database text: every line of its table, its filter line, its title."""
    t = rows_table(app)
    texts = [segment.text for y in range(t.size.height) for segment in t.render_line(y)]
    texts += [str(w.render()) for w in app.screen.query("#filters, #sql-status")]
    return texts + [app.title, app.sub_title, app.screen.title or "", app.screen.sub_title or ""]


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
async def test_tables_then_a_table_then_page_down_to_its_end(demo_db, make_app, read_only):
    path = demo_db()
    before = fingerprint_dir(path.parent)
    app = make_app(path, read_only=read_only, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows_table(app).visible_loaded, what="projects")
        await open_screen(pilot, "tables")
        await wait_until(pilot, lambda: loaded(app, TablesScreen), what=":tables listed")
        t = rows_table(app)
        names = [t.row_at(i).name for i in range(t.total)]
        assert {"tickets", "build_sequences", "execution_runs", "approval_request_events"} <= set(names)
        events = names.index("approval_request_events")
        with sqlite3.connect(path) as conn:
            total = conn.execute("SELECT count(*) FROM approval_request_events").fetchone()[0]
            last_rowid = conn.execute("SELECT max(rowid) FROM approval_request_events").fetchone()[0]
        assert t.row_at(events).rows == total > 100  # more than one page of the table below
        t.cursor = events
        await pilot.press("enter")
        await wait_until(pilot, lambda: loaded(app, TableScreen), what="the table opened")
        t = rows_table(app)
        assert t.total == total and [c.label for c in t.columns][:2] == ["id", "project_id"]
        assert t.cursor_row[0] == (1,)
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: t.cursor > 0 and t.cursor_row is not None, what="a page down")
        assert t.cursor_row[0] == (t.cursor + 1,)  # rowids 1..n in order
        await laid_out(pilot, t)
        await pilot.press("end")
        await wait_until(pilot, lambda: t.cursor == total - 1 and t.cursor_row is not None, what="the end")
        assert t.cursor_row[0] == (last_rowid,)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, TablesScreen), what="back to :tables")
    assert fingerprint_dir(path.parent) == before


async def _run_sql(pilot, app, sql: str) -> None:
    box = app.screen.query_one("#sql-input")
    box.value = ""
    box.focus()
    await type_text(pilot, sql)
    await pilot.press("enter")


def status(app) -> str:
    return str(app.screen.query_one("#sql-status").render())


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
async def test_sql_shows_the_rows_and_refuses_a_write_under_the_prompt(demo_db, make_app, read_only):
    path = demo_db()
    before = fingerprint_dir(path.parent)
    app = make_app(path, read_only=read_only, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows_table(app).visible_loaded, what="projects")
        await open_screen(pilot, "sql")
        await wait_until(pilot, lambda: isinstance(app.screen, SqlScreen)
                         and app.focused is app.screen.query_one("#sql-input"), what=":sql")
        await _run_sql(pilot, app, "SELECT id, title, x'00ff' AS b FROM tickets ORDER BY id")
        await wait_until(pilot, lambda: loaded(app, SqlScreen) and "row" in status(app), what="the result")
        t = rows_table(app)
        with sqlite3.connect(path) as conn:
            tickets = conn.execute("SELECT id FROM tickets ORDER BY id").fetchall()
        assert t.total == len(tickets) and [c.label for c in t.columns] == ["id", "title", "b"]
        assert t.row_at(0)[1][0] == tickets[0][0] and t.row_at(0)[1][2] == "<blob 2 bytes>"
        assert status(app).startswith(f"{len(tickets)} rows")

        await _run_sql(pilot, app, "DELETE FROM tickets")
        await wait_until(pilot, lambda: "Refused" in status(app), what="the refusal")
        assert "DELETE is not one" in status(app) and rows_table(app).total == 0  # no old rows left
        assert isinstance(app.screen, SqlScreen)  # no dialog: the prompt keeps the focus
        await _run_sql(pilot, app, "SELECT 1; DELETE FROM tickets")
        await wait_until(pilot, lambda: "give one statement" in status(app), what="two statements refused")
    assert fingerprint_dir(path.parent) == before


async def test_sql_pages_a_long_result_by_re_running_it(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="sql WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 250) "
                              "SELECT i, printf('row %d', i) AS label FROM r")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: loaded(app, SqlScreen), what="the result")
        t = rows_table(app)
        assert t.total == 250
        await laid_out(pilot, t)
        await pilot.press("end")
        await wait_until(pilot, lambda: t.cursor == 249 and t.cursor_row is not None, what="the last row")
        assert t.cursor_row[1] == (250, "row 250")


async def test_hostile_names_and_values_are_pictured(demo_db, make_app, tmp_path):
    path = demo_db()
    hostile = "t\x1b]2;PWN\x07\u202eevil\x9b"
    with sqlite3.connect(path) as conn:
        conn.execute(f'CREATE TABLE "{hostile}" ("c\x1b[31m" TEXT, v BLOB)')
        conn.execute(f'INSERT INTO "{hostile}" VALUES (?, ?)', ("\x1b[2J\x1b]0;TITLE\x07\u2066x", b"\x1b[2J"))
    app = make_app(path, start="tables")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: loaded(app, TablesScreen), what=":tables")
        t = rows_table(app)
        index = next(i for i in range(t.total) if t.row_at(i).name == hostile)
        t.cursor = index
        await settle(pilot, app)
        assert [t for t in painted(app) if not is_clean(t, allow_newlines=False)] == []
        await pilot.press("enter")
        await wait_until(pilot, lambda: loaded(app, TableScreen), what="the hostile table")
        text = "".join(painted(app))
        assert [t for t in painted(app) if not is_clean(t, allow_newlines=False)] == []
        assert "PWN" in text and "<blob 4 bytes>" in text and "\x1b" not in text


async def test_support_mode_runs_sql_and_tables_on_its_snapshot(make_db, tmp_path):
    """`inspect` of a live WAL file another process holds: `:sql` and `:tables` read the snapshot
    (the holder's commits still in its -wal included) and the original's directory is not touched,
    -shm included (support mode's promise)."""
    from console.cli.commands.inspect import prepare_inspection
    from console.tui.app import ArchonConsole
    from tests.tui.conftest import NOW, make_ctx
    from tests.untouched import Holder

    original = make_db(wal=True, name="live.db")
    with Holder(original, "hold", 30):
        before = fingerprint_dir(original.parent)
        inspection = prepare_inspection(original, now=NOW)
        try:
            app = ArchonConsole(make_ctx(inspection.snapshot, read_only=True), inspection.support,
                                start="sql SELECT count(*) AS n FROM support_probe", poll_seconds=3600)
            async with app.run_test(size=(120, 40)) as pilot:
                await wait_until(pilot, lambda: loaded(app, SqlScreen), what="the result")
                assert rows_table(app).row_at(0)[1] == (30,)
                await open_screen(pilot, "tables")
                await wait_until(pilot, lambda: loaded(app, TablesScreen), what=":tables")
                t = rows_table(app)
                probe = {t.row_at(i).name: t.row_at(i).rows for i in range(t.total)}
                assert probe["support_probe"] == 30
        finally:
            inspection.cleanup()
        assert fingerprint_dir(original.parent) == before
