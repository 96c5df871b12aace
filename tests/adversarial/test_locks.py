"""The TUI never drops its own connection's locks (issue 9, finding 1).

POSIX record locks belong to the process: closing any descriptor of the database file drops all of
them. When doctor or upgrade opened and closed the database's files inside the TUI, its connection
lost its WAL-index lock; archon, closing, then believed it was the last user, checkpointed and
deleted `-wal`/`-shm` under the live connection, and a later approve in the TUI was reported as
done but never reached the file. These tests read the process's locks from /proc/locks around every
screen, and replay that scenario with a second process as archon.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.clock import db_time, system_clock
from tests.adversarial import proc_locks
from tests.adversarial.tui import open_screen
from tests.tui.pilot import settle, wait_until

pytestmark = [pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks"), pytest.mark.slow]


def locks_held(pid: int, *paths: Path) -> list[tuple[str, str, str]]:
    """(file, mode, range) of every POSIX lock `pid` holds on `paths`, from /proc/locks."""
    held = []
    for path in paths:
        try:
            rows = proc_locks.held(pid, path)
        except FileNotFoundError:
            continue
        held += [(path.name, f[3], f"{f[6]}-{f[7]}") for f in rows if f[1] == "POSIX"]
    return sorted(held)


def wal_demo(tmp_path: Path) -> Path:
    """A WAL demo database whose requests are pending by the real clock."""
    from console.demo.writer import generate

    path = tmp_path / "archon.db"
    generate(path, release="current", requests=60, seed=7, now=db_time(datetime.now(timezone.utc)),
             overwrite=True, wal=True)
    return path


def files(path: Path) -> tuple[Path, Path]:
    return path, Path(f"{path}-shm")


def make_live_app(path: Path, monkeypatch, tmp_path: Path, read_only: bool = False):
    from console.tui.app import ArchonConsole
    from console.cli.cli import Context

    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(tmp_path / "no-keymap.toml"))
    ctx = Context(db_path=path, actor="alice", read_only=read_only, json=False, busy_timeout_ms=2000,
                  clock=system_clock, args=argparse.Namespace())
    return ArchonConsole(ctx, start="approvals", poll_seconds=0.2)


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only-in-place"])
async def test_every_screen_keeps_the_connections_locks(tmp_path, monkeypatch, read_only):
    """Read-only too: a live WAL database is read in place (issue 11 item 1), so the read-only
    session's connection holds the same locks on the original as a read-write one."""
    from tests.untouched import Holder

    path = wal_demo(tmp_path)
    holder = Holder(path, "hold", rows=3) if read_only else None  # archon running: -wal and -shm exist
    if holder:
        holder.__enter__()
    try:
        await _every_screen(path, monkeypatch, tmp_path, read_only)
    finally:
        if holder:
            holder.__exit__(None, None, None)


async def _every_screen(path: Path, monkeypatch, tmp_path: Path, read_only: bool) -> None:
    from console.tui.screens.doctor import DoctorScreen
    from console.tui.screens.upgrade import UpgradeScreen

    app = make_live_app(path, monkeypatch, tmp_path, read_only=read_only)
    pid = os.getpid()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)  # the first screen has read
        before = locks_held(pid, *files(path))
        assert before, "a WAL connection holds its WAL-index lock while open"
        await open_screen(pilot, "doctor")
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.report is not None,
                       what="the doctor report", timeout=20)
        assert set(before) <= set(locks_held(pid, *files(path))), "doctor dropped the connection's locks"
        await open_screen(pilot, "upgrade")
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None,
                       what="the upgrade plan", timeout=20)
        assert set(before) <= set(locks_held(pid, *files(path))), "upgrade planning dropped the connection's locks"
        for command in ("envs", "projects", "approvals", "help"):
            await open_screen(pilot, command)
            await settle(pilot, app)  # the screen has read
            assert set(before) <= set(locks_held(pid, *files(path))), f"{command} dropped the connection's locks"


ARCHON = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA journal_mode")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE projects SET name = name")
    conn.execute("COMMIT")
    conn.close()  # the last connection checkpoints and deletes -wal/-shm: it must not think it is last
""")


async def test_an_approval_after_doctor_reaches_the_file_when_archon_restarts(tmp_path, monkeypatch):
    """The reported scenario, end to end: doctor in the TUI, archon stops and starts, approve."""
    from console.tui.screens.doctor import DoctorScreen
    from console.services import approvals

    path = wal_demo(tmp_path)
    probe = sqlite3.connect(path)
    pending = probe.execute(
        "SELECT id FROM approval_requests WHERE status = 'pending' AND expires_at > ? "
        "AND authority_json NOT LIKE '%alice%' ORDER BY id LIMIT 1",
        (db_time(datetime.now(timezone.utc)),)).fetchone()[0]
    probe.close()
    app = make_live_app(path, monkeypatch, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await open_screen(pilot, "doctor")
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.report is not None,
                       what="the doctor report", timeout=20)
        for _ in range(2):  # archon stops, starts, stops
            subprocess.run([sys.executable, "-c", ARCHON, str(path)], check=True, timeout=30)
        assert Path(f"{path}-wal").exists(), "archon deleted the WAL under the console's live connection"
        result = app.session.run(approvals.approve, pending, actor="alice", reason="ok",
                                 now=datetime.now(timezone.utc))
        assert result.ok
    fresh = sqlite3.connect(path)
    assert fresh.execute("SELECT status FROM approval_requests WHERE id = ?", (pending,)).fetchone()[0] == "approved"


def test_in_process_service_calls_keep_the_connections_locks(tmp_path):
    """Every service the TUI calls in its own process works through the connection only."""
    from console.db.connect import open_database
    from console.services import approvals, profiles, projects
    from console.services.environment_claims import claim, release
    from console.services.environment_queries import list_environments

    path = wal_demo(tmp_path)
    handle = open_database(path, busy_timeout_ms=2000)
    try:
        now = datetime.now(timezone.utc)
        handle.conn.execute("SELECT count(*) FROM projects").fetchone()  # a WAL reader locks on first use
        before = locks_held(os.getpid(), *files(path))
        assert before
        pending = handle.conn.execute(
            "SELECT id FROM approval_requests WHERE status = 'pending' AND expires_at > ? ORDER BY id LIMIT 2",
            (db_time(now),)).fetchall()
        env = handle.conn.execute(
            "SELECT id FROM execution_environments WHERE operation_claim_id IS NULL "
            "AND lifecycle_state IN ('ready', 'running') LIMIT 1").fetchone()
        project = handle.conn.execute("SELECT id FROM projects LIMIT 1").fetchone()[0]
        calls = [
            lambda: projects.list_projects(handle, now=now),
            lambda: list_environments(handle, now=now),
            lambda: profiles.list_revisions(handle, project),
            lambda: approvals.approve(handle, pending[0][0], actor="operator-x", reason="ok", now=now),
            lambda: approvals.deny(handle, pending[1][0], actor="operator-x", reason="no", now=now),
            lambda: claim(handle, env[0], "stop", "operator-x", now=now),
            lambda: release(handle, env[0], "operator-x", now=now),
        ]
        for call in calls:
            try:
                call()
            except Exception as exc:  # a refusal is fine here; a dropped lock is not
                from console.errors import ConsoleError

                assert isinstance(exc, ConsoleError), exc
            assert set(before) <= set(locks_held(os.getpid(), *files(path))), call
    finally:
        handle.close()
