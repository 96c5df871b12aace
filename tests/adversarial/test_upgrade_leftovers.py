"""Leftovers of interrupted upgrades and restores (issue 9, finding 9, the upgrade's part).

A rerun after `kill -9` used to write a second full-size snapshot beside the first; it now keeps the
interrupted run's one once it proves intact and current (console/db/snapshot_reuse.py). And a damaged
snapshot handed to `restore` said "nothing was migrated", a sentence from the upgrade.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from console.db.migrations.registry import MIGRATIONS
from console.errors import EXIT_UNUSABLE
from tests.upgrade_helpers import db_1820, dump, fingerprint_dir, ledger_names, run_cli, run_cli_crashing_at, sha256

pytestmark = pytest.mark.slow

ALL_IDS = [m.id for m in MIGRATIONS]


def _snapshots(directory: Path) -> list[Path]:
    return sorted(directory.glob("archon.db.pre-upgrade-*.sqlite3"))


def _crash_at(path: Path, boundary: str) -> Path:
    """Upgrade until killed at `boundary`; returns the snapshot it left."""
    crashed = run_cli_crashing_at(boundary, "--db", str(path), "upgrade", "--force")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    [snapshot] = _snapshots(path.parent)
    return snapshot


def _rerun(path: Path) -> dict:
    proc = run_cli("--db", str(path), "--json", "upgrade", "--force")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _recorded_snapshots(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT DISTINCT snapshot_path FROM _archon_console_ledger")}
    finally:
        conn.close()


@pytest.mark.parametrize("boundary", ["after-snapshot", "mid:001-archon-1.8.20-baseline",
                                      "after:005-profile-backfill-initial"])
def test_a_resumed_upgrade_keeps_its_snapshot(tmp_path, boundary):
    path = db_1820(tmp_path / "archon.db")
    original = dump(path)
    snapshot = _crash_at(path, boundary)
    taken = sha256(snapshot)
    result = _rerun(path)
    assert _snapshots(tmp_path) == [snapshot]  # no second full-size copy
    assert result["snapshot_reused"] is True and result["snapshot_path"] == str(snapshot)
    assert result["snapshot_sha256"] == taken == sha256(snapshot)
    assert ledger_names(path) == ALL_IDS
    assert _recorded_snapshots(path) == {str(snapshot)}
    # and it is still the undo for the whole upgrade
    restored = run_cli("--db", str(path), "restore", str(snapshot), "--yes")
    assert restored.returncode == 0, restored.stderr
    assert dump(path) == original


def test_the_cli_says_it_kept_the_snapshot(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    _crash_at(path, "after-snapshot")
    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == 0, proc.stderr
    assert "kept from the interrupted run" in proc.stdout


def test_a_database_written_since_gets_a_new_snapshot(tmp_path):
    """Archon ran between the crash and the rerun: the old snapshot no longer holds what is there."""
    path = db_1820(tmp_path / "archon.db")
    first = _crash_at(path, "after-snapshot")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO archon_misc_log (note) VALUES ('written by archon meanwhile')")
    conn.commit()
    conn.close()
    result = _rerun(path)
    assert result["snapshot_reused"] is False
    assert len(_snapshots(tmp_path)) == 2 and result["snapshot_path"] != str(first)


def test_a_changed_snapshot_is_not_reused(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    first = _crash_at(path, "after-snapshot")
    conn = sqlite3.connect(first)
    conn.execute("UPDATE projects SET name = 'tampered'")
    conn.commit()
    conn.close()
    result = _rerun(path)
    assert result["snapshot_reused"] is False
    assert len(_snapshots(tmp_path)) == 2


def _damage(snapshot: Path) -> None:
    """Zero a b-tree page past the header: still a SQLite file, failing its integrity check."""
    page_size = int.from_bytes(snapshot.read_bytes()[16:18], "big")
    with open(snapshot, "r+b") as handle:
        handle.seek(page_size * 2)
        handle.write(b"\xff" * page_size)


def test_restoring_a_damaged_snapshot_says_nothing_was_restored(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == 0, proc.stderr
    [snapshot] = _snapshots(tmp_path)
    _damage(snapshot)
    before = fingerprint_dir(tmp_path)
    proc = run_cli("--db", str(path), "restore", str(snapshot), "--yes")
    assert proc.returncode == EXIT_UNUSABLE, proc.stderr
    assert "nothing was restored" in proc.stderr.lower()
    assert "migrated" not in proc.stderr and "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == before
