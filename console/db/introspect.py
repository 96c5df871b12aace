"""sqlite-utils' reading of a schema, over a connection the console has already opened.

`sqlite_utils.Database` is given our connection, never a path: only console/db/connect.py opens
SQLite (tests/test_layers.py), so the file checks, locks and limits there hold for what it reads.
By default `Database(conn)` also runs `PRAGMA recursive_triggers=on` on the connection (archon's
triggers would then fire differently for every later write on it) and lets every installed
sqlite-utils plugin register functions on it (`prepare_connection`); both are switched off, so
constructing it runs no statement and changes nothing, and it works on a `query_only` connection.

What the console reads with it and what it keeps hand-written, and why: docs/decisions.md, D26.
The import is inside the function: sqlite-utils costs ~60 ms, which the commands a shell runs most
never pay (tests/test_cli_startup.py).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils


def schema_of(conn: sqlite3.Connection) -> "sqlite_utils.Database":
    """sqlite-utils' view of `conn`'s schema, for reading: it runs nothing until asked."""
    import sqlite_utils

    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


__all__ = ["schema_of"]
