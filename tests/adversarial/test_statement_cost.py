"""No statement outlives its budget, whatever one row costs inside SQLite (console/db/limits.py).

Each statement runs in a child process (a statement that is not stopped would otherwise hold the
test run for its whole length) on a connection `sqlite_connection` opens, with a 1 second budget;
the child prints the operator's sentence `explain` makes of what stopped it. The costs per row
range from a few instructions to a value of 3 MB built between two progress checks, in a
query, a recursive CTE or a trigger (SQLite announces each trigger run as a statement start).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import sys
    from console.db import limits
    from console.db.connection import sqlite_connection

    conn = sqlite_connection(":memory:")
    conn.execute("CREATE TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3000)])
    conn.execute("CREATE TRIGGER heavy AFTER UPDATE ON t BEGIN SELECT length(printf('%.*c', 3000000, 'x')); END")
    try:
        rows = conn.execute(sys.argv[1]).fetchall()
    except Exception as exc:
        said = limits.explain(exc, conn)
        print(said.reason if said else repr(exc))
    else:
        print("finished:", rows)
    """
)

COSTS = {
    "cheap rows, endless": "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c",
    "a 3 MB value per row": "SELECT sum(length(printf('%.*c', 3000000 + x, 'x'))) FROM t",
    "heavy rows, lazily": "SELECT length(printf('%.*c', 3000000 + x, 'x')) FROM t",
    "a recursive CTE building 3 MB per step": (
        "WITH RECURSIVE c(i, n) AS (SELECT 1, 0 UNION ALL SELECT i + 1, length(printf('%.*c', 3000000 + i, 'x')) "
        "FROM c WHERE i < 5000) SELECT sum(n) FROM c"
    ),
    "a trigger building 3 MB per row": "UPDATE t SET x = x + 1",
    "a join whose every pair costs": (
        "SELECT count(*) FROM t AS a, t AS b WHERE length(printf('%.*c', 1000 + a.x + b.x, 'x')) > 0"
    ),
}


@pytest.mark.parametrize("sql", list(COSTS.values()), ids=list(COSTS))
def test_a_statement_is_stopped_at_its_budget_whatever_a_row_costs(sql):
    env = {**os.environ, "ARCHON_CONSOLE_STATEMENT_SECONDS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, sql], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "a database statement ran longer than 1 seconds and was stopped" in done.stdout, done.stdout


def test_every_fetch_of_a_lazy_cursor_counts(monkeypatch):
    """Rows fetched one at a time: the time SQLite spends making each row counts, the caller's
    between rows does not, so heavy rows fetched lazily still end at the budget."""
    from console.db import limits
    from console.db.connection import scratch_connection
    import sqlite3

    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "1")
    conn = scratch_connection()
    cursor = conn.execute("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000) "
                          "SELECT length(printf('%.*c', 3000000 + i, 'x')) FROM c")
    with pytest.raises(sqlite3.OperationalError) as caught:
        for _row in cursor:
            pass
    said = limits.explain(caught.value, conn)
    assert said is not None and "ran longer than 1 seconds" in said.reason


def test_a_caller_pausing_between_heavy_rows_is_not_stopped(monkeypatch):
    """The other half: the caller's time between fetches (a pager, the TUI paging) is not the
    statement's, however heavy its rows; 20 rows of 2 MB cost SQLite far less than the budget."""
    from console.db.connection import scratch_connection
    import time

    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "1")
    conn = scratch_connection()
    cursor = conn.execute("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 20) "
                          "SELECT i, length(printf('%.*c', 2000000, 'x')) FROM c")
    seen = []
    for row in cursor:
        seen.append(row[0])
        time.sleep(0.1)  # the caller pausing (a pager), not a wait for a condition: 2 s in all
    assert seen == list(range(1, 21))
