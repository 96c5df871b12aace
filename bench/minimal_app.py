"""The first-paint baseline: a minimal Textual app (Header, Footer, a DataTable of ROWS rows).

`python bench/minimal_app.py [ROWS]` (default 50). Row ids look like the console's (`apr-%08d`),
so bench/bench_tui.py detects its rows in the terminal's byte stream the same way; with more rows
it is also the page-down baseline.
"""

import sys

from textual.app import App
from textual.widgets import DataTable, Footer, Header


class Minimal(App):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows

    def compose(self):
        yield Header()
        yield DataTable(cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("id", "status", "project", "kind", "expires")
        table.add_rows([(f"apr-{i:08d}", "pending", "atlas", "git_push", "5m") for i in range(self.rows)])
        table.focus()


if __name__ == "__main__":
    Minimal(int(sys.argv[1]) if len(sys.argv) > 1 else 50).run()
