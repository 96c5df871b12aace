"""The console's Static and DataTable: a plain `str` handed to them is shown as written.

Textual parses a `str` given to a `Static` (or a `Label`) or to a `DataTable` cell as markup:
`[@click=app.quit]` in a project name would become an action, and an unbalanced `[/` can fail a
render. These subclasses never parse markup and turn a `str` into `safe_text` (controls pictured),
so a caller that forgets to wrap database text still shows it safely. Everything in the console
imports Static and DataTable from here; `tests/adversarial/test_terminal_doors.py` forbids
Textual's own (and `Label`) anywhere else.
"""

from __future__ import annotations

from typing import Any

from textual import widgets as textual_widgets

from widgets.safe_text import safe_text


def _shown(content: Any, *, one_line: bool = False) -> Any:
    return safe_text(content, one_line=one_line) if isinstance(content, str) else content


class Static(textual_widgets.Static):
    """`textual.widgets.Static` with markup off and a `str` shown through `safe_text`."""

    def __init__(self, content: Any = "", **kwargs: Any) -> None:
        kwargs["markup"] = False
        super().__init__(_shown(content), **kwargs)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        super().update(_shown(content), layout=layout)


class DataTable(textual_widgets.DataTable):
    """`textual.widgets.DataTable` whose `str` cells and labels are `safe_text` on one line."""

    def add_column(self, label: Any, **kwargs: Any) -> Any:
        return super().add_column(_shown(label, one_line=True), **kwargs)

    def add_row(self, *cells: Any, label: Any = None, **kwargs: Any) -> Any:
        return super().add_row(*(_shown(c, one_line=True) for c in cells), label=_shown(label, one_line=True),
                               **kwargs)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **kwargs: Any) -> None:
        super().update_cell(row_key, column_key, _shown(value, one_line=True), **kwargs)

    def update_cell_at(self, coordinate: Any, value: Any, **kwargs: Any) -> None:
        super().update_cell_at(coordinate, _shown(value, one_line=True), **kwargs)


__all__ = ["DataTable", "Static"]
