"""`:tables`: every table of the file with its row count, and any of them opened in the paged table.

For the tables the console has no screen of its own for (tickets, build_sequences, execution_runs,
...). Read-only by construction, in every mode, support mode included: the rows come through the
locked-down connection of console/screens/query_pages.py, never the session's. Counts stop at
`COUNT_CAP` ("≥ 100,000"), so listing a file with a million-row table reads no table whole; a table
is paged by its rowid (or primary key), one short statement per page, the exact count afterwards.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message

from console.errors import ConsoleError
from console.services.query import COUNT_CAP, TableShape, TableSummary
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.pages import ListSource
from console.tui.screens.query_pages import QueryLink, TableSource, value_columns
from widgets.lazy_table import LazyTable
from widgets.safe_text import clean
from widgets.safe_widgets import Static
from widgets.table_column import Column

SAMPLE_ROWS = 20  # the rows that size a table's columns


def _rows(row: TableSummary) -> Text:
    return Text(row.rows_text, style="" if row.rows else "dim", justify="right", end="")


class TablesScreen(ConsoleScreen):
    COMMAND = "tables"
    TITLE = "Tables"
    HELP_NOTES = (f"Every table in the file with its row count (counted up to {COUNT_CAP:,}: '≥' beyond). "
                  "Enter opens a table, a page at a time, read-only. `s` opens the SQL prompt (:sql).")

    BINDINGS = [
        Binding("enter", "open_table", "Open", id="tables.open"),
        Binding("s", "sql", "SQL", id="tables.sql"),
    ]

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.queries: QueryLink | None = None  # opened on mount: the screen's session is the app's

    def compose_content(self) -> ComposeResult:
        yield Static(Text("every table, read-only; Enter opens it, s runs SQL", style="dim"),
                     classes="filters", id="filters")
        yield LazyTable([
            Column("name", "table", 34),
            Column("rows", "rows", 11, render=_rows),
            Column("columns", "columns", 7, render=lambda r: Text(str(r.columns), justify="right", end="")),
            Column("without_rowid", "paged by", 11,
                   render=lambda r: Text("primary key" if r.without_rowid else "rowid", style="dim", end="")),
        ], id="tables", empty_message="No tables in this file.")

    def on_mount(self) -> None:
        self.queries = QueryLink(self.session)
        table = self.query_one(LazyTable)
        table.focus()
        table.set_source(self._source())
        if self.argument:
            self.app.push_screen(TableScreen(self.argument, self.queries))

    def on_unmount(self) -> None:
        if self.queries is not None:
            self.queries.close()

    def _source(self) -> ListSource:
        queries = self.queries
        assert queries is not None
        return ListSource(lambda: queries.get().tables(), key="name")

    def refresh_data(self) -> None:
        self.query_one(LazyTable).set_source(self._source(), keep_cursor=True)

    def _open(self, row: TableSummary | None) -> None:
        if row is not None:
            self.app.push_screen(TableScreen(row.name, self.queries))

    @on(LazyTable.RowActivated, "#tables")
    def _activated(self, message: LazyTable.RowActivated) -> None:
        self._open(message.row)

    def action_open_table(self) -> None:
        self._open(self.query_one(LazyTable).cursor_row)

    def action_sql(self) -> None:
        self.console_app.navigate("sql")

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        return (row.name, {"table": row.name, "rows": row.rows, "exact": row.exact}) if row else (None, None)


class TableScreen(ConsoleScreen):
    """One table's rows, paged by key; columns known once its shape is read (in a worker)."""

    COMMAND = "tables"
    TITLE = "Table"
    HELP_NOTES = "A table's rows, read-only, in rowid (or primary key) order. Y copies the row as JSON."

    class ShapeRead(Message):
        def __init__(self, shape: TableShape | None, sample: list[tuple], error: ConsoleError | None = None) -> None:
            super().__init__()
            self.table_shape, self.sample, self.error = shape, sample, error

    def __init__(self, name: str, queries: QueryLink | None = None) -> None:
        super().__init__()
        self.argument = name
        self.owns_queries = queries is None
        self.queries = queries  # else opened on mount
        self.table_shape: TableShape | None = None

    def compose_content(self) -> ComposeResult:
        yield Static(Text(f"table {clean(self.argument, one_line=True)} · reading…", style="dim"),
                     classes="filters", id="filters")
        yield LazyTable([Column("none", "", 1)], id="rows", empty_message="This table is empty.")

    def on_mount(self) -> None:
        if self.queries is None:
            self.queries = QueryLink(self.session)
        self.query_one(LazyTable).focus()
        self._read_shape()

    def on_unmount(self) -> None:
        if self.owns_queries and self.queries is not None:
            self.queries.close()

    @work(thread=True, group="shape", exit_on_error=False)
    def _read_shape(self) -> None:
        assert self.queries is not None
        try:
            queries = self.queries.get()
            shape = queries.table_shape(self.argument)
            rows, _ = queries.table_page(shape, None, SAMPLE_ROWS)  # to size the columns
            self.post_message(self.ShapeRead(shape, [values for _, values in rows]))
        except ConsoleError as exc:
            self.post_message(self.ShapeRead(None, [], exc))

    @on(ShapeRead)
    def _shape_read(self, message: "TableScreen.ShapeRead") -> None:
        if message.error is not None:
            self.query_one("#filters", Static).update(Text(clean(message.error.reason, one_line=True), style="red"))
            self.show_error(message.error)
            return
        self.table_shape = shape = message.table_shape
        assert shape is not None
        key = "rowid" if shape.key in (["rowid"], ["_rowid_"], ["oid"]) else "primary key " + ", ".join(shape.key)
        self.query_one("#filters", Static).update(Text(
            f"table {clean(shape.name, one_line=True)} · {len(shape.columns)} columns · in {clean(key, one_line=True)} "
            "order · read-only", style="dim"))
        table = self.query_one(LazyTable)
        table.columns = value_columns(shape.columns, lambda row, i: row[1][i], message.sample)
        assert self.queries is not None
        table.set_source(TableSource(self.queries, shape))

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None or self.table_shape is None:
            return None, None
        key = ", ".join(map(str, row[0]))
        return key, dict(zip(self.table_shape.columns, row[1]))
