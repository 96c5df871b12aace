"""Every connection is bounded: values, statement time, and an interrupt (console/db/limits.py).

In-process checks of the mechanism on the connections `sqlite_connection` opens; the hostile-file
tests (test_hostile_files.py) check it through every command.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from console.db import limits
from console.db.connection import scratch_connection, sqlite_connection

ENDLESS = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c"


def test_every_connection_has_the_value_limit(tmp_path):
    for conn in (scratch_connection(), sqlite_connection(str(tmp_path / "x.db"))):
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limits.MAX_VALUE_BYTES
        with pytest.raises(sqlite3.DataError):
            conn.execute("SELECT zeroblob(?)", (limits.MAX_VALUE_BYTES + 1,)).fetchone()
        conn.close()


def test_a_value_over_the_limit_names_its_table(tmp_path):
    path = tmp_path / "x.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE small (v)")
    raw.execute("CREATE TABLE big (v)")
    raw.execute("INSERT INTO small VALUES ('ok')")
    raw.execute("INSERT INTO big VALUES (zeroblob(5000000))")
    raw.commit()
    raw.close()
    conn = sqlite_connection(str(path))
    with pytest.raises(sqlite3.DataError) as caught:
        conn.execute("SELECT v FROM big").fetchall()
    said = limits.explain(caught.value, conn)
    assert said is not None and said.exit_code == 3
    assert said.reason.startswith("a value in table big is larger than 4,194,304 bytes")


def test_an_endless_statement_ends_at_its_budget(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "0.3")
    conn = scratch_connection()
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute(ENDLESS).fetchone()
    assert time.monotonic() - started < 10
    said = limits.explain(caught.value, conn)
    assert said is not None and "ran longer than 0.3 seconds" in said.reason


@pytest.mark.slow
def test_a_caller_that_consumes_rows_slowly_is_not_stopped(monkeypatch):
    """`audit | less`: the time the reader takes between rows is not the statement's."""
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "0.3")
    conn = scratch_connection()
    cursor = conn.execute("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 50000) "
                          "SELECT i FROM c")
    seen = 0
    for row in cursor:
        seen = row[0]
        if seen % 10000 == 0:
            time.sleep(0.2)  # the caller pausing (a pager), not a wait for a condition
    assert seen == 50000


def test_interrupt_all_stops_a_statement_in_another_thread():
    conn = scratch_connection(check_same_thread=False)
    failed: list[BaseException] = []
    running = threading.Event()

    def work() -> None:
        conn.execute("SELECT 1").fetchone()
        running.set()
        try:
            conn.execute(ENDLESS).fetchone()
        except sqlite3.Error as exc:
            failed.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    assert running.wait(10)
    try:
        limits.interrupt_all()
        worker.join(10)
    finally:
        limits.resume()
    assert not worker.is_alive()
    assert failed and "interrupt" in str(failed[0])
