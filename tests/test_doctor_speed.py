"""How doctor reads a file (issue 22 item 2, issue 23 item 4): one snapshot on every connection, the
integrity scan on a connection of its own while the other checks run, a fixed number of statements
whatever the size, and the file read about once beyond what `quick_check` reads itself.

The mechanism is asserted, never a timing (timings are `make bench`'s).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import console.services.doctor as doctor
from console.db import limits
from console.services.doctor import CHECKS, run_doctor
from tests import damage
from tests.untouched import Holder

ROOT = Path(__file__).resolve().parents[1]
NOW = "2026-11-01T12:00:00+00:00"


@pytest.fixture(scope="module")
def sized(tmp_path_factory):
    """Demo databases of N and 10N requests (WAL files nobody holds: doctor reads them in place)."""
    from console.demo.writer import generate

    made = {}
    for n in (300, 3000):
        path = tmp_path_factory.mktemp(f"r{n}") / "archon.db"
        generate(path, requests=n, seed=7, now=NOW)
        made[n] = path
    return made


def _rchar() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def test_a_commit_during_the_run_is_seen_by_no_check(tmp_path, monkeypatch):
    """Every connection doctor reads with is pinned to the commit current when it started: a
    request another process commits while the first check runs (a status with no event, which the
    approvals pass on a worker connection would report) is in no finding. On main the worker
    connections began their reads later, each at its own commit."""
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    check_file = CHECKS["file"]
    committed = []

    def file_then_commit(ctx):
        subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; from tests import damage; "
             "c = damage.connect(Path(sys.argv[1])); damage.damage_status_mismatch(c); c.close()", str(db)],
            cwd=ROOT, check=True, timeout=120)
        committed.append(True)
        return check_file(ctx)

    with Holder(db, "hold", rows=5):  # a live file: a -wal and -shm beside it
        monkeypatch.setitem(CHECKS, "file", file_then_commit)
        report = run_doctor(db, now=damage.NOW)
        monkeypatch.setitem(CHECKS, "file", check_file)
        assert committed and report.opened == "in place (WAL, mode=ro)"
        assert [f.id for f in report.findings if f.severity != "info"] == []
        again = run_doctor(db, now=damage.NOW)  # the commit is there, for the next run
    assert again.finding("approvals.status_mismatch").count == 1


def test_quick_check_runs_beside_the_other_checks_on_the_same_snapshot(tmp_path, monkeypatch):
    """The integrity scan runs on a connection of its own, in a worker thread, inside a read
    transaction begun on the commit the other checks read, and it is still running while they run
    (it waits here until the approvals check has started; run one after the other it never would).
    On main it ran outside any transaction, so nothing tied it to the other checks' commit."""
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    seen: dict = {}
    approvals_started = threading.Event()
    opened = []
    real_open, real_messages, real_approvals = doctor.open_read_only, doctor.integrity_messages, CHECKS["approvals"]

    def open_read_only(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    def integrity_messages(conn, full):
        seen.update(thread=threading.current_thread(), conn=conn, in_transaction=conn.in_transaction)
        seen["overlapped"] = approvals_started.wait(timeout=120)  # a condition, not a duration
        return real_messages(conn, full)

    def approvals(ctx):
        approvals_started.set()
        return real_approvals(ctx)

    monkeypatch.setattr(doctor, "open_read_only", open_read_only)
    monkeypatch.setattr(doctor, "integrity_messages", integrity_messages)
    monkeypatch.setitem(CHECKS, "approvals", approvals)
    report = run_doctor(db, now=damage.NOW)
    assert [f.id for f in report.findings if f.severity != "info"] == []
    assert seen["thread"] is not threading.main_thread()
    assert seen["conn"] is not opened[0][0]
    assert seen["overlapped"]
    assert seen["in_transaction"]


def _counted(monkeypatch, path: Path) -> tuple[int, list]:
    """Statements doctor executes on `path` (every connection, every thread)."""
    lock = threading.Lock()
    calls = [0]
    real = limits.MeteredCursor.execute

    def execute(self, sql, parameters=(), /):
        with lock:
            calls[0] += 1
        return real(self, sql, parameters)

    monkeypatch.setattr(limits.MeteredCursor, "execute", execute)
    try:
        report = run_doctor(path, now=damage.NOW)
    finally:
        monkeypatch.setattr(limits.MeteredCursor, "execute", real)
    return calls[0], [(f.id, f.count) for f in report.findings if f.severity != "info"]


def test_the_checks_make_the_same_statements_at_ten_times_the_size(sized, monkeypatch):
    """Set-based checks: the number of statements does not grow with the rows (N and 10N requests)."""
    run_doctor(sized[300], now=damage.NOW)  # imports and the reference schema, once
    small, small_findings = _counted(monkeypatch, sized[300])
    large, large_findings = _counted(monkeypatch, sized[3000])
    assert small == large, (small, large)
    assert small < 500  # a fixed cost: the constraints check replays the registry once (checks_constraints.py)


def test_doctor_reads_the_file_about_once_beyond_quick_check(sized):
    """Issue 23 item 4: once for the integrity check (what `quick_check` itself reads) and once for
    everything else. On main doctor read the requests table four times and the events twice."""
    path = sized[3000]
    size = path.stat().st_size
    run_doctor(sized[300], now=damage.NOW)  # imports and the reference schema, once
    before = _rchar()
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
    quick_check = _rchar() - before
    before = _rchar()
    run_doctor(path, now=damage.NOW)
    read = _rchar() - before
    assert quick_check < 2 * size
    assert read <= quick_check + size, (read / size, quick_check / size)


@pytest.mark.parametrize("full", [False, True], ids=["quick", "full"])
def test_a_request_without_its_run_or_project_is_found(tmp_path, full):
    """The requests' foreign keys are counted in the approvals pass (quick mode) or checked by
    foreign_key_check (--full); either way the rows are listed exactly."""
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    conn = damage.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    damage.add_request(conn, "req-no-run", status="pending")
    conn.execute("DELETE FROM execution_runs WHERE id = 'run-req-no-run'")
    damage.add_request(conn, "req-no-project", project="p-gone", status="pending")
    conn.close()
    report = run_doctor(db, now=damage.NOW, full=full)
    finding = report.finding("foreign_keys.violations")
    assert finding.count == 3  # the run, and the project of both the request and its run
    assert {r["id"] for r in finding.rows} >= {"req-no-run", "req-no-project", "run-req-no-project"}


_PARENTS = {
    "standard": ("id TEXT PRIMARY KEY", "UNIQUE (id, project_id)", "project_id TEXT"),
    "nocase_parent": ("id TEXT COLLATE NOCASE PRIMARY KEY", "UNIQUE (id, project_id)", "project_id TEXT"),
    "integer_child": ("id TEXT PRIMARY KEY", "UNIQUE (id, project_id)", "project_id INTEGER"),
    "no_unique_pair": ("id TEXT PRIMARY KEY", "CHECK (1)", "project_id TEXT"),
}


@pytest.mark.parametrize("shape", sorted(_PARENTS))
def test_foreign_keys_are_counted_only_where_counting_is_exact(tmp_path, shape):
    """Counting compares BINARY on TEXT columns; only a schema where foreign_key_check compares the
    same way (TEXT columns, a unique BINARY index on the parent key, archon's exact keys) is counted.
    Anything else (a NOCASE parent, an INTEGER child column, no unique parent index) goes to
    foreign_key_check itself."""
    from console.services.doctor.checks_approvals import fk_countable

    project_key, run_unique, child_project = _PARENTS[shape]
    conn = sqlite3.connect(tmp_path / "shape.db")
    conn.executescript(f"""
        CREATE TABLE projects ({project_key});
        CREATE TABLE execution_runs (id TEXT PRIMARY KEY, project_id TEXT, {run_unique});
        CREATE TABLE approval_requests (id TEXT PRIMARY KEY, {child_project} REFERENCES projects(id),
            execution_run_id TEXT, FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id));
    """)
    assert fk_countable(conn, "approval_requests") == (shape == "standard")
    conn.execute("ALTER TABLE approval_requests ADD COLUMN other TEXT REFERENCES projects(id)")
    assert not fk_countable(conn, "approval_requests")  # a key archon does not declare
    conn.close()
