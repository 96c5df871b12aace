"""Hostile database files, and a console process that may use at most 1 GB and a minute.

The failure condition of the hostile-file tests is the machine's, not the console's: a command that
takes more memory than `MEMORY_BYTES` (`ulimit -v`, RLIMIT_AS in the child) or longer than its
timeout fails the test, whatever it printed.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BYTES = 1 << 30
TIMEOUT = 90

# A statement that never ends in practice: six copies of the schema table joined (~10^12 rows).
ENDLESS_SELECT = ("SELECT count(*) FROM sqlite_master a, sqlite_master b, sqlite_master c, sqlite_master d, "
                  "sqlite_master e, sqlite_master f")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def console(*argv: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run `archon-console ARGV` in its own bounded process; a timeout fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "console", *argv], capture_output=True, text=True, cwd=ROOT,
            env={**os.environ, "ARCHON_CONSOLE_DEBUG": "", **(env or {})}, preexec_fn=_limit_memory,
            timeout=timeout, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`archon-console {' '.join(argv)}` ran longer than {timeout} s")


def popen(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "console", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, **(env or {})}, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL,
    )


def ended_cleanly(result: subprocess.CompletedProcess) -> None:
    """Exit 0 or 1 (findings, refusals), or 2/3 with one sentence; never a traceback or a crash."""
    err = result.stderr
    assert result.returncode in (0, 1, 2, 3), (result.returncode, err[-2000:])
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
    assert "unexpected" not in err, err[-2000:]
    if result.returncode in (2, 3) and result.stdout.startswith("{"):  # --json: the error is the output
        import json

        answer = json.loads(result.stdout)
        assert answer["ok"] is False and answer["exit"] == result.returncode and "\n" not in answer["error"]
    elif result.returncode in (2, 3):
        assert err.startswith("archon-console: "), err[-2000:]
        assert len(err.strip().splitlines()) <= 2, err[-2000:]  # the sentence and its hint


def without_triggers(conn: sqlite3.Connection):
    """Archon's triggers forbid editing events and decided requests: set aside, put back after."""
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for name, _ in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    return triggers


def add_generated_columns(path: Path, tables=("projects", "approval_requests", "approval_request_events",
                                              "execution_environments", "execution_environment_events",
                                              "execution_profile_revisions", "execution_profile_audit_events",
                                              "execution_environment_run_bindings"),
                          expression: str = "printf('%.*c', 300000000, 'x')") -> None:
    """A 300 MB value computed at every read of every row (the 905 KB file of issue 17).

    SQLite's `printf` loops over its whole width even past the length limit (~3 s a row, inside one
    step: integrity checks, which compute every column, pay it per row); `zeroblob` fails at once."""
    conn = sqlite3.connect(path)
    for table in tables:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN zz TEXT AS ({expression}) VIRTUAL")
    conn.commit()
    conn.close()


def add_oversize_value(path: Path, table: str, column: str, size: int = 5 * 1024 * 1024) -> None:
    """A stored value over the console's 4 MB limit (archon's CHECKs are set aside to write it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("BEGIN")
    triggers = without_triggers(conn)
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM {table})",
                 ("x" * size,))
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()


def add_events(path: Path, request_id: str, count: int) -> None:
    """`count` more events on one request, as archon appends them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    triggers = without_triggers(conn)
    project, top = conn.execute(
        "SELECT r.project_id, max(e.sequence) FROM approval_requests r JOIN approval_request_events e "
        "ON e.approval_request_id = r.id WHERE r.id = ?", (request_id,)).fetchone()
    template = conn.execute(
        "SELECT * FROM approval_request_events WHERE approval_request_id = ? ORDER BY sequence DESC LIMIT 1",
        (request_id,)).fetchone()
    names = [d[1] for d in conn.execute("PRAGMA table_info(approval_request_events)")]
    row = dict(zip(names, template))
    rows = []
    for n in range(count):
        item = dict(row, sequence=top + 1 + n, event_type="note", reason=f"note {n}")
        if "id" in item:
            item["id"] = f"{request_id}:bulk:{n}"
        rows.append([item[c] for c in names])
    conn.executemany(f"INSERT INTO approval_request_events ({', '.join(names)}) VALUES "
                     f"({', '.join('?' * len(names))})", rows)
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    assert project


def add_endless_triggers(path: Path, tables=("approval_requests", "approval_request_events",
                                             "execution_environments", "execution_environment_events",
                                             "execution_profile_audit_events", "projects")) -> None:
    """A write to any of `tables` runs a statement that never ends."""
    conn = sqlite3.connect(path)
    for table in tables:
        for when in ("INSERT", "UPDATE"):
            conn.execute(f"CREATE TRIGGER zz_endless_{when.lower()}_{table} AFTER {when} ON {table} "
                         f"BEGIN {ENDLESS_SELECT}; END")
    conn.commit()
    conn.close()


def cpu_seconds(pid: int) -> float:
    """CPU time `pid` has used: how a test knows a process is deep in its work, not how long it ran."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def holds_write_lock(path: Path) -> bool:
    """True while another process holds `path`'s write lock (its transaction is running)."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc) or "busy" in str(exc)
    finally:
        conn.close()
