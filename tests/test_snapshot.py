"""Verified snapshots: a complete single file or nothing, never overwriting another."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest

from console.db import snapshot as snapshots
from console.errors import DatabaseUnusable
from tests.upgrade_helpers import db_1822, dump, sha256

AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("wal", [False, True])
def test_snapshot_is_verified_single_file_copy(tmp_path, wal):
    path = db_1822(tmp_path / "archon.db", wal=wal)
    if wal:  # a committed row only the WAL holds must be in the copy
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO archon_misc_log (note) VALUES ('only in the wal')")
    ticks = []
    try:
        snap = snapshots.take_snapshot(
            path, snapshots.snapshot_target(path, AT), progress=lambda d, t: ticks.append((d, t)), step_pages=8
        )
    finally:
        if wal:
            writer.close()
    assert snap.path == tmp_path / "archon.db.pre-upgrade-20260501T120000Z.sqlite3"
    assert snap.sha256 == sha256(snap.path) and snap.size == snap.path.stat().st_size
    assert dump(snap.path) == dump(path)
    conn = sqlite3.connect(snap.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    assert ticks[-1][0] == ticks[-1][1] and len(ticks) > 1  # paged, so a bar can move
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_never_overwrites_an_existing_snapshot(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    target = snapshots.snapshot_target(path, AT)
    target.write_bytes(b"an older snapshot, precious")
    first = snapshots.take_snapshot(path, target)
    second = snapshots.take_snapshot(path, target)
    assert target.read_bytes() == b"an older snapshot, precious"
    assert first.path.name == "archon.db.pre-upgrade-20260501T120000Z-2.sqlite3"
    assert second.path.name == "archon.db.pre-upgrade-20260501T120000Z-3.sqlite3"


def test_failed_snapshot_leaves_no_partial_file(tmp_path, monkeypatch):
    path = db_1822(tmp_path / "archon.db")
    before = sorted(p.name for p in tmp_path.iterdir())

    def broken(copy, expected=None):
        raise snapshots.SnapshotFailed("row counts differ (simulated)")

    monkeypatch.setattr(snapshots, "verify_copy", broken)
    with pytest.raises(snapshots.SnapshotFailed):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_no_space_is_refused_before_writing(tmp_path, monkeypatch):
    path = db_1822(tmp_path / "archon.db")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(snapshots, "free_bytes", lambda d: 4096)
    with pytest.raises(snapshots.SnapshotFailed, match="Not enough free space"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_verify_copy_catches_corruption_and_count_drift(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    snap = snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    counts = snapshots.table_counts(sqlite3.connect(path))
    assert snapshots.verify_copy(snap.path, counts)[1] == sum(counts.values())
    with pytest.raises(snapshots.SnapshotFailed, match="row counts differ"):
        snapshots.verify_copy(snap.path, {**counts, "projects": counts["projects"] + 1})
    # Garble the cells of a table holding rows: integrity_check must say so.
    conn = sqlite3.connect(snap.path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tickets'").fetchone()[0]
    conn.close()
    data = bytearray(snap.path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    start = page_size * (root - 1)
    data[start + 8 : start + page_size] = bytes([0x5A]) * (page_size - 8)
    snap.path.chmod(0o600)
    snap.path.write_bytes(bytes(data))
    with pytest.raises((DatabaseUnusable, snapshots.SnapshotFailed)):
        snapshots.verify_copy(snap.path, counts)
