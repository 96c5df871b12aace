"""`restore SNAPSHOT`: verified first, refused while the database is in use, stale WAL files
removed before an atomic replace, the replaced file kept aside, a typed confirmation or --yes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest

from console.cli.cli import main
from console.errors import EXIT_REFUSED, EXIT_UNUSABLE, DatabaseUnusable, Refusal
from console.services.upgrade.restore import restore_snapshot
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import db_1820, dump, fingerprint_dir, ledger_names, run_cli, sha256

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
LATER = datetime(2026, 5, 1, 13, 0, 0, tzinfo=timezone.utc)


def _upgraded(tmp_path, *, wal=False):
    path = db_1820(tmp_path / "archon.db", wal=wal)
    before = dump(path)
    result = run_upgrade(path, force=True, now=NOW)
    return path, before, result


@pytest.mark.slow
@pytest.mark.parametrize("wal", [False, True])
def test_round_trip_restores_the_pre_upgrade_dump(tmp_path, capsys, wal):
    path, before, result = _upgraded(tmp_path, wal=wal)
    upgraded_sha = sha256(path)
    upgraded_dump = dump(path)
    if wal:  # leave a -wal/-shm pair behind, as a stopped archon may
        (tmp_path / "archon.db-wal").write_bytes(b"")
        (tmp_path / "archon.db-shm").write_bytes(b"\0" * 32768)
    code = main(["--db", str(path), "restore", result.snapshot_path, "--yes"])
    assert code == 0, capsys.readouterr().err
    assert dump(path) == before
    assert ledger_names(path) == []
    aside = [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
    assert len(aside) == 1 and dump(aside[0]) == upgraded_dump
    if not wal:
        assert sha256(aside[0]) == upgraded_sha
    assert not (tmp_path / "archon.db-wal").exists() and not (tmp_path / "archon.db-shm").exists()
    assert sha256(result.snapshot_path) == result.snapshot_sha256  # the snapshot itself is untouched
    # The restored file is a working archon database again: the upgrade plan sees 1.8.20.
    assert run_upgrade(path, force=True, now=LATER).applied[0].startswith("001")


@pytest.mark.slow
def test_without_yes_and_without_a_terminal_nothing_happens(tmp_path):
    path, _, result = _upgraded(tmp_path)
    before = fingerprint_dir(tmp_path)
    proc = run_cli("--db", str(path), "restore", result.snapshot_path)
    assert proc.returncode == EXIT_REFUSED
    assert "--yes" in proc.stderr
    assert fingerprint_dir(tmp_path) == before


def test_typed_confirmation(tmp_path):
    path, before, result = _upgraded(tmp_path)
    state = fingerprint_dir(tmp_path)
    asked = []
    with pytest.raises(Refusal, match="Not confirmed"):
        restore_snapshot(path, result.snapshot_path, confirm=lambda name, loss: asked.append((name, loss.lines())) or False,
                         now=LATER)
    # the prompt says what the restore loses: here the upgrade's own profile backfill
    assert asked[0][0] == "archon.db" and "  2 profile activations: proj-1, proj-2" in asked[0][1]
    assert fingerprint_dir(tmp_path) == state
    done = restore_snapshot(path, result.snapshot_path, confirm=lambda name, _loss: name == "archon.db", now=LATER)
    assert done.replaced_path.endswith("archon.db.replaced-20260501T130000Z")
    assert dump(path) == before


@pytest.mark.slow
def test_refused_while_another_process_reads_the_database(tmp_path):
    """More cases, by lock and not by path, in tests/adversarial/test_restore_while_open.py."""
    path, _, result = _upgraded(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3, sys, time
            conn = sqlite3.connect({str(path)!r}, isolation_level=None)
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM projects").fetchone()
            print("ready", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = fingerprint_dir(tmp_path)
        with pytest.raises(Refusal, match="in use"):
            restore_snapshot(path, result.snapshot_path, yes=True, now=LATER, busy_timeout_ms=100)
        assert fingerprint_dir(tmp_path) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


@pytest.mark.slow
def test_refused_while_the_writer_lock_is_held(tmp_path):
    path, _, result = _upgraded(tmp_path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        before = fingerprint_dir(tmp_path)
        with pytest.raises(Refusal, match="in use"):
            restore_snapshot(path, result.snapshot_path, yes=True, now=LATER, busy_timeout_ms=100)
        assert fingerprint_dir(tmp_path) == before
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.slow
def test_a_changed_snapshot_is_refused(tmp_path, capsys):
    path, _, result = _upgraded(tmp_path)
    conn = sqlite3.connect(result.snapshot_path)
    conn.execute("DELETE FROM archon_misc_log")
    conn.commit()
    conn.close()
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "restore", result.snapshot_path, "--yes"]) == EXIT_UNUSABLE
    assert "SHA-256" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"not sqlite at all" * 10])
def test_a_broken_snapshot_is_refused(tmp_path, content):
    path, _, _ = _upgraded(tmp_path)
    bogus = tmp_path / "bogus.sqlite3"
    bogus.write_bytes(content)
    before = fingerprint_dir(tmp_path)
    with pytest.raises(DatabaseUnusable):
        restore_snapshot(path, bogus, yes=True, now=LATER)
    assert fingerprint_dir(tmp_path) == before


def test_a_non_archon_snapshot_is_refused(tmp_path):
    path, _, _ = _upgraded(tmp_path)
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(DatabaseUnusable, match="not an archon one"):
        restore_snapshot(path, other, yes=True, now=LATER)
