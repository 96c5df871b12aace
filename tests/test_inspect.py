"""Support mode without a terminal: `prepare_inspection` snapshots and leaves the original alone;
every `--read-only` command does too."""

from __future__ import annotations

import sqlite3
import stat
import tempfile

import pytest

from console.cli.cli import main
from console.cli.parser import build_parser
from console.cli.commands.inspect import prepare_inspection
from tests import damage
from tests.untouched import Holder, fingerprint_dir, without_shm


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", damage.NOW.isoformat())


def test_prepare_inspection_on_a_live_wal_database(tmp_path):
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    with Holder(db, "hold", rows=30):
        before = fingerprint_dir(tmp_path)
        inspection = prepare_inspection(db, now=damage.NOW)
        assert fingerprint_dir(tmp_path) == before
    try:
        assert inspection.snapshot.parent == inspection.workdir
        assert stat.S_IMODE(inspection.workdir.stat().st_mode) == 0o700
        conn = sqlite3.connect(inspection.snapshot)
        assert conn.execute("SELECT count(*) FROM support_probe").fetchone()[0] == 30
        conn.close()
        support = inspection.support
        assert support.original == db.resolve() and support.taken_at == damage.NOW
        assert support.original_path == str(db.resolve()) and support.snapshot_time == "2026-11-01 12:00:00 UTC"
        assert "SUPPORT" in support.badge
    finally:
        inspection.cleanup()
    assert not inspection.snapshot.exists()


def test_keep_snapshot(tmp_path):
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db")
    keep = tmp_path / "kept"
    inspection = prepare_inspection(db, keep, now=damage.NOW)
    inspection.cleanup()
    assert inspection.snapshot.exists() and inspection.snapshot.parent == keep
    assert inspection.snapshot.name == "archon.support-20261101T120000Z.sqlite"
    from console.errors import UsageError

    with pytest.raises(UsageError):
        prepare_inspection(db, tmp_path / "db", now=damage.NOW)


def test_inspect_opens_the_tui_on_the_snapshot(tmp_path, monkeypatch):
    """The command hands run_tui a read-only context on the snapshot and a SUPPORT badge, then cleans up."""
    import console.tui.tui

    db = damage.healthy(tmp_path / "archon.db", wal=True)
    before = fingerprint_dir(tmp_path)
    seen = {}

    def fake_run_tui(ctx, support=None, **_):
        seen.update(db=ctx.db_path, ro=ctx.read_only, support=support, exists=ctx.db_path.exists())
        return 0

    monkeypatch.setattr(console.tui.tui, "run_tui", fake_run_tui)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here
    assert main(["inspect", str(db)]) == 0
    assert seen["ro"] is True and seen["exists"] and seen["db"] != db
    assert seen["support"].original_path == str(db.resolve())
    assert not seen["db"].exists()  # removed on exit
    assert fingerprint_dir(tmp_path) == before


# --- every --read-only command -------------------------------------------------------------

READ_ONLY_COMMANDS = [
    ("console.cli.commands.approvals", ["approvals", "list"]),
    ("console.cli.commands.approvals", ["approvals", "show", "req-approved"]),
    ("console.cli.commands.envs", ["envs", "list"]),
    ("console.cli.commands.envs", ["envs", "show", "env-running"]),
    ("console.cli.commands.profiles", ["profiles", "list", "p1"]),
    ("console.cli.commands.projects", ["projects", "list"]),
    ("console.cli.commands.upgrade", ["upgrade", "--plan"]),
    ("console.cli.commands.doctor", ["doctor"]),
]



@pytest.mark.slow
@pytest.mark.parametrize("wal", ["rollback", "wal", "live-wal"])
@pytest.mark.parametrize("module,argv", READ_ONLY_COMMANDS, ids=[" ".join(a) for _m, a in READ_ONLY_COMMANDS])
def test_read_only_commands_leave_no_trace(tmp_path, capsys, monkeypatch, module, argv, wal):
    """On a live WAL database (issue 11 item 1) the command reads in place: nothing is created
    beside it or in TMPDIR, the main file and -wal keep every byte and mtime; the -shm only takes
    the read mark every SQLite reader writes (`without_shm`). Elsewhere every byte stays."""
    (tmp_path / "db").mkdir()
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # resolved TMPDIR (resolving it writes a probe file)
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=wal != "rollback")
    same = without_shm if wal == "live-wal" else (lambda fingerprint: fingerprint)
    holder = Holder(db, "hold", rows=5) if wal == "live-wal" else None
    if holder:
        holder.__enter__()
    try:
        before = fingerprint_dir(db.parent)
        tmp_mtime = tmp.stat().st_mtime_ns
        code = main(["--db", str(db), "--read-only", *argv])
        output = capsys.readouterr()
        assert code == 0, output.err
        assert same(fingerprint_dir(db.parent)) == same(before)
        # No private copy, not even one removed again: creating or removing an entry in a
        # directory changes its mtime.
        assert list(tmp.iterdir()) == [] and tmp.stat().st_mtime_ns == tmp_mtime
    finally:
        if holder:
            holder.__exit__(None, None, None)
    assert build_parser()  # the parser still builds with every module present


def test_read_only_commands_see_commits_only_in_the_live_wal(tmp_path, capsys, monkeypatch):
    """Read in place (issue 11 item 1), a live database's latest commits, still only in its -wal,
    are what `approvals list --read-only` and `upgrade --plan` read, and nothing is copied."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    with Holder(db, "hold", rows=5):
        conn = damage.connect(db)  # another commit, only in the -wal while the holder keeps it open
        damage.add_request(conn, "req-only-in-the-wal")
        conn.close()
        before = without_shm(fingerprint_dir(db.parent))
        assert before["archon.db-wal"][0] > 0
        tmp_mtime = tmp.stat().st_mtime_ns
        assert main(["--db", str(db), "--read-only", "approvals", "list", "--limit", "50"]) == 0
        assert "req-only-in-the-wal" in capsys.readouterr().out
        assert main(["--db", str(db), "upgrade", "--plan"]) == 0
        capsys.readouterr()
        assert without_shm(fingerprint_dir(db.parent)) == before
        assert list(tmp.iterdir()) == [] and tmp.stat().st_mtime_ns == tmp_mtime
