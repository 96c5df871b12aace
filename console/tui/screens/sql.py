"""`:sql`: one read-only statement, its rows in the paged table; the TUI side of `archon-console query`.

The statement runs through console/services/query.py on the locked-down connection of
console/db/adhoc.py (console/tui/screens/query_pages.py), in every mode, support mode included: a
write, ATTACH, a transaction or a second statement is refused in one sentence, shown under the
prompt. Pages re-run the statement (never a read transaction held open while the operator reads);
a result is paged up to `RESULT_ROW_CAP` rows, and the line under the prompt says when it has more.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from console.errors import ConsoleError
from console.services.query import RESULT_ROW_CAP
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.query_pages import QueryLink, ResultSource, value_columns
from widgets.lazy_table import LazyTable
from widgets.line_input import SqlInput
from widgets.safe_text import clean
from widgets.safe_widgets import Static
from widgets.table_column import Column

NO_COLUMNS = (Column("none", "", 1),)  # the table's message line takes the width (no column: no room)
EMPTY = "The statement returned no rows."
SAMPLE_ROWS = 20  # the first run reads these, to name and size the columns
PROMPT = "one read-only statement: SELECT, WITH, VALUES, EXPLAIN or PRAGMA table_info(...); Enter runs it"


class SqlScreen(ConsoleScreen):
    COMMAND = "sql"
    TITLE = "SQL"
    HELP_NOTES = ("One statement that only reads, on a read-only connection: writes, ATTACH, transactions, "
                  "PRAGMAs that set something and a second statement are refused before they run. "
                  f"The result is paged (up to {RESULT_ROW_CAP:,} rows). Tab moves between the prompt and the rows.")

    BINDINGS = [Binding("ctrl+l", "edit", "Edit SQL", id="sql.edit")]

    DEFAULT_CSS = """
    SqlScreen #sql-input { height: 1; border: none; padding: 0 1; background: $boost; }
    SqlScreen #sql-input:focus { border: none; background: $accent 20%; }
    SqlScreen #sql-status { height: auto; max-height: 4; padding: 0 1; color: $text-muted; }
    SqlScreen #sql-status.-refused { color: $error; }
    """

    class Ran(Message):
        """The statement's first page came back (its column names), or why it was refused."""

        def __init__(self, sql: str, columns: list[str] | None, sample: list[tuple],
                     error: ConsoleError | None = None) -> None:
            super().__init__()
            self.sql, self.columns, self.sample, self.error = sql, columns, sample, error

    def __init__(self, argument: str | None = None) -> None:
        super().__init__()
        self.argument = argument
        self.queries: QueryLink | None = None
        self.source: ResultSource | None = None

    def compose_content(self) -> ComposeResult:
        yield SqlInput(value=self.argument or "", placeholder=PROMPT, id="sql-input")
        yield Static(Text("Type a statement and press Enter.", style="dim"), id="sql-status")
        yield LazyTable(list(NO_COLUMNS), id="result", empty_message="Nothing run yet.")

    def on_mount(self) -> None:
        self.queries = QueryLink(self.session)
        box = self.query_one("#sql-input", Input)
        box.border_title = "SQL"
        box.focus()
        if self.argument:
            self._run(self.argument)

    def on_unmount(self) -> None:
        if self.queries is not None:
            self.queries.close()

    def _status(self, text: str, *, refused: bool = False) -> None:
        status = self.query_one("#sql-status", Static)
        status.set_class(refused, "-refused")
        status.update(Text(clean(text, one_line=True), end=""))

    @on(Input.Submitted, "#sql-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        sql = event.value.strip()
        if sql:
            self._run(sql)

    def _run(self, sql: str) -> None:
        self._status("running…")
        self._first_page(sql)

    @work(thread=True, exclusive=True, group="sql", exit_on_error=False)
    def _first_page(self, sql: str) -> None:
        """Run it once for its column names (and its refusal, if any) before the table pages it."""
        assert self.queries is not None
        try:
            page = self.queries.get().run(sql, limit=SAMPLE_ROWS)
        except ConsoleError as exc:
            self.post_message(self.Ran(sql, None, [], exc))
            return
        self.post_message(self.Ran(sql, page.columns, page.rows))

    @on(Ran)
    def _ran(self, message: "SqlScreen.Ran") -> None:
        table = self.query_one(LazyTable)
        if message.error is not None:  # no rows left on screen that could pass for this statement's
            self._status(message.error.reason, refused=True)
            self.source = None
            table.columns, table.empty_message = list(NO_COLUMNS), "Nothing was run."
            table.set_source(None)
            return
        assert self.queries is not None and message.columns is not None
        if not message.columns:
            self._status("The statement returns no columns (nothing to show).")
            table.columns = list(NO_COLUMNS)
            table.set_source(None)
            return
        self._status("counting rows…")
        table.empty_message = EMPTY
        table.columns = value_columns(message.columns, lambda row, i: row[1][i], message.sample)
        self.source = ResultSource(self.queries, message.sql)
        table.set_source(self.source)
        table.focus()

    @on(LazyTable.Counted, "#result")
    def _counted(self, message: LazyTable.Counted) -> None:
        more = self.source is not None and self.source.capped
        rows = f"{message.total:,} row{'' if message.total == 1 else 's'}"
        self._status(f"the first {rows} (the statement returns more; narrow it with WHERE or LIMIT)" if more
                     else f"{rows} · read-only · Ctrl+L edits the statement")

    def on_lazy_table_load_failed(self, message: LazyTable.LoadFailed) -> None:
        if isinstance(message.error, ConsoleError):
            self._status(message.error.reason, refused=True)
            return
        super().on_lazy_table_load_failed(message)

    def action_edit(self) -> None:
        self.query_one("#sql-input", Input).focus()

    def copy_target(self) -> tuple[str | None, Any]:
        row = self.query_one(LazyTable).cursor_row
        if row is None:
            return None, None
        columns = [c.label for c in self.query_one(LazyTable).columns]
        return str(row[0] + 1), dict(zip(columns, row[1]))
