"""The one door to SQLite: every connection the console makes is opened here.

Below everything else that opens a database (console/db/connect.py `open_database`, the read-only
readers in console/db/readonly.py, the private copies and snapshots), so each of them can use it
without importing the others. Keeping the one `sqlite3.connect` in this module (tests/test_layers.py
checks it) leaves one place to read which files the console opens and how.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Iterable

from console.db.file_guard import Connection, keep_connection, register, sqlite_target_refused
from console.db.limits import guard
from console.errors import DatabaseUnusable

SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def sqlite_connection(target: str | Path, *, uri: bool = False, setup: Iterable[str] = (),
                      **options: Any) -> sqlite3.Connection:
    """Every SQLite connection the console makes is opened here, in autocommit mode.

    `isolation_level=None`: a deferred `BEGIN` that reads and then writes fails with SQLITE_BUSY at
    once, so writes issue their own `BEGIN IMMEDIATE` (tx.py). Keeping the one `sqlite3.connect`
    in this module (tests/test_layers.py checks it) leaves one place to read which files the
    console opens and how; the callers name the file and its URI flags. Every connection is a
    `Connection` (a `factory` must subclass it), registered while open (console/db/file_guard.py),
    bounded (value size, statement time) and interruptible by a signal (console/db/limits.py `guard`).

    `setup`: statements (the caller's PRAGMAs) run before the connection is handed out. One that
    fails (a stop, a busy file) closes the connection here: no caller holds a connection it could
    not configure, so none is left for the garbage collector to close at some later moment (with
    its locks, if it holds any, until then).
    """
    options.setdefault("factory", Connection)
    if not issubclass(options["factory"], Connection):
        raise TypeError("a connection factory must subclass console.db.file_guard.Connection")
    refused = sqlite_target_refused(target, uri)  # a planted or swapped name leading to our own files
    if refused is not None:
        raise DatabaseUnusable(f"refused to open {refused}: closing it would drop that connection's locks.")
    conn = sqlite3.connect(target, uri=uri, isolation_level=None, **options)
    refused = sqlite_target_refused(target, uri)  # swapped in between the check and the open
    if refused is not None:
        keep_connection(conn)
        raise DatabaseUnusable(f"refused to open {refused}: closing it would drop that connection's locks.")
    conn.text_factory = _TEXT
    conn = register(guard(conn), target, uri)
    try:
        for statement in setup:
            conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn


# The one decoding of stored text, for every connection. TEXT that is not valid UTF-8 (archon's
# columns carry no encoding CHECK; `CAST(x'ff' AS TEXT)` is one statement away) decodes with U+FFFD
# instead of raising `OperationalError` for the whole result: one such row must not make a list, the
# audit trail or a decision unreadable. A C-level callable, so the cost per value stays that of
# sqlite3's own decoder (tests/adversarial/test_hostile_values.py). Not `detect_types` converters for
# BLOBs in TEXT columns: in Python 3.11 they read '' as None (console/text.py `as_text` instead).
_TEXT = partial(str, encoding="utf-8", errors="replace")


def scratch_connection(*, on_disk: bool = False, **options: Any) -> sqlite3.Connection:
    """A private database no other connection can name: in memory (a replayed schema), or `on_disk`
    (a redacted copy as big as the original) SQLite's own temporary database, whose pages beyond
    the cache go to a file SQLite creates exclusively, mode 0600, in SQLITE_TMPDIR and unlinks
    as soon as it is open: memory stays bounded however big the copy grows, and nothing outlives
    the connection."""
    return sqlite_connection("" if on_disk else ":memory:", **options)
