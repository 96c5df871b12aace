"""How a row read from archon's database reaches the console: a BLOB is text.

SQLite keeps a BLOB as a BLOB in a TEXT column, and archon's CHECKs (`length(CAST(x AS BLOB))`) and
triggers accept one: `bytes` where every reader expects `str` was a TypeError in lists, the audit
trail and the environment rules. Archon declares no BLOB column, so every BLOB it holds stands where
text (or a time) belongs; it is read decoded as UTF-8 with U+FFFD, like every stored text
(console/db/connection.py `_TEXT`), and shown, never changed in the file. Not sqlite3's `detect_types`
converters: in Python 3.11 they read '' as None.

`text_row` is the row factory of every connection that reads archon's tables (console/db/connect.py,
console/db/readonly.py); readers that take plain tuples for speed pass them through `textual`.
"""

from __future__ import annotations

import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any


def textual(values: tuple) -> tuple:
    """`values` with every bytes value decoded; the same tuple when there is none (the usual case,
    decided at C speed)."""
    if bytes not in map(type, values):
        return values
    return tuple(v.decode("utf-8", "replace") if type(v) is bytes else v for v in values)


def text_row(cursor: sqlite3.Cursor, values: tuple) -> sqlite3.Row:
    """`sqlite3.Row` (names, index, `keys()`), with BLOBs read as text."""
    return sqlite3.Row(cursor, textual(values))


def as_text(value: Any) -> Any:
    """One value as `textual` reads it."""
    return value.decode("utf-8", "replace") if type(value) is bytes else value


__all__ = ["as_text", "text_row", "textual"]
