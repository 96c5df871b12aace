"""No opener hands a connection to the garbage collector: a statement that configures a new connection
and fails (the operator's stop lands there: console/db/limits.py interrupts every statement) closes it
where it was opened.

Each opener used to run its PRAGMAs on the connection after console/db/connection.py
`sqlite_connection` returned it, so a failure there raised past a connection nobody held any more: it
stayed open, registered and holding whatever it held until the collector ran, at a moment nobody
chose. Now the PRAGMAs are `sqlite_connection(setup=...)`, which closes the connection when one fails.
The stop is played by the console's own statement path (`MeteredConnection.execute`) raising what an
interrupted statement raises, at the first PRAGMA: no timing.
"""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from console.db import limits, readonly
from console.db.connect import connect_raw
from console.db.file_guard import Connection
from console.errors import DatabaseUnusable
from console.services.upgrade import plan


def _open_connections() -> list[Connection]:
    """Every console connection alive in this process that is still open."""
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, Connection):
            try:
                obj.total_changes  # noqa: B018 - raises once closed
            except sqlite3.ProgrammingError:
                continue
            found.append(obj)
    return found


OPENERS = {
    "connect_raw": lambda path: connect_raw(path),
    "connect_raw read-only": lambda path: connect_raw(path, read_only=True),
    "open_read_only in place": lambda path: readonly.open_read_only(path),
    "open_read_only, WAL nobody has open": lambda path: readonly.open_read_only(path),
    "open_read_only, WAL in place": lambda path: readonly.open_read_only(path),
    "open_read_only private copy": lambda path: readonly.open_read_only(path, force_copy=True),
    "the upgrade's read-only connection": lambda path: plan._read_only_connection(path, allow_recovery=True),
    "reconnect": lambda path: readonly.reconnect(readonly.open_read_only(path)[0]),
}


@pytest.mark.parametrize("opener", OPENERS)
def test_a_failed_setup_closes_the_new_connection(make_db, monkeypatch, opener):
    wal = "WAL" in opener
    path: Path = make_db(projects=("p1",), wal=wal, cached=True)
    keep = None
    if opener == "open_read_only, WAL in place":  # -wal and -shm exist: another connection has it open
        keep = sqlite3.connect(path)
        keep.execute("SELECT count(*) FROM projects").fetchone()
    try:
        before = {id(conn) for conn in _open_connections()}
        stopped = []
        real = limits.MeteredConnection.execute

        def stop_at_pragma(self, sql, parameters=(), /):
            if sql.startswith("PRAGMA") and "journal_mode" not in sql and not stopped:
                stopped.append(sql)
                raise sqlite3.OperationalError("interrupted")
            return real(self, sql, parameters)

        if opener == "reconnect":  # the first connection opens normally; its second one is stopped
            first, cleanup, _how = readonly.open_read_only(path)
            before = {id(conn) for conn in _open_connections()}
            monkeypatch.setattr(limits.MeteredConnection, "execute", stop_at_pragma)
            with pytest.raises(sqlite3.OperationalError):
                readonly.reconnect(first)
            monkeypatch.undo()
            first.close()
            cleanup()
        else:
            monkeypatch.setattr(limits.MeteredConnection, "execute", stop_at_pragma)
            try:
                opened = OPENERS[opener](path)
            except (sqlite3.Error, DatabaseUnusable):
                opened = None
            monkeypatch.undo()
            if opened is not None:  # it fell back to another way in (a private copy): closed here
                conn, cleanup, _how = opened if isinstance(opened, tuple) else (opened, lambda: None, "")
                conn.close()
                cleanup()
        assert stopped, "no PRAGMA ran: the test did not reach the opener's setup"
        left = [conn for conn in _open_connections() if id(conn) not in before]
        assert left == [], f"{opener} left {len(left)} open connection(s) after {stopped[0]!r} failed"
    finally:
        if keep is not None:
            keep.close()
