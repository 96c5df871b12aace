"""Verified snapshots: a complete single file or nothing, never overwriting another."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from console.db import snapshot as snapshots
from console.db.snapshot_check import SnapshotFailed, check_pieces, table_counts, verify_copy
from console.errors import DatabaseUnusable
from tests.snapshot_damage import _index_out_of_step, _page_in_two_trees, _page_never_used, _two_tables
from tests.upgrade_helpers import db_1822, dump, sha256

AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.slow
@pytest.mark.parametrize("wal", [False, True])
@pytest.mark.parametrize("check_workers", [1, 2])
def test_snapshot_is_verified_single_file_copy(tmp_path, wal, check_workers):
    path = db_1822(tmp_path / "archon.db", wal=wal)
    if wal:  # a committed row only the WAL holds must be in the copy
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO archon_misc_log (note) VALUES ('only in the wal')")
    ticks = []
    try:
        snap = snapshots.take_snapshot(
            path,
            snapshots.snapshot_target(path, AT),
            progress=lambda d, t: ticks.append((d, t)),
            step_pages=8,
            check_workers=check_workers,
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


@pytest.mark.slow
def test_never_overwrites_an_existing_snapshot(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    target = snapshots.snapshot_target(path, AT)
    target.write_bytes(b"an older snapshot, precious")
    first = snapshots.take_snapshot(path, target)
    second = snapshots.take_snapshot(path, target)
    assert target.read_bytes() == b"an older snapshot, precious"
    assert first.path.name == "archon.db.pre-upgrade-20260501T120000Z-2.sqlite3"
    assert second.path.name == "archon.db.pre-upgrade-20260501T120000Z-3.sqlite3"


@pytest.mark.parametrize("check, asked", [("verify_copy", {"full_check": True}),
                                          ("quick_check_copy", {"quick_check": True}), ("verify_written", {})])
def test_failed_snapshot_leaves_no_partial_file(tmp_path, monkeypatch, check, asked):
    path = db_1822(tmp_path / "archon.db")
    before = sorted(p.name for p in tmp_path.iterdir())

    def broken(*_, **__):
        raise SnapshotFailed("row counts differ (simulated)")

    monkeypatch.setattr(snapshots, check, broken)
    with pytest.raises(SnapshotFailed):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), **asked)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_failed_hash_or_fsync_beside_the_check_leaves_no_partial_file(tmp_path, monkeypatch):
    path = db_1822(tmp_path / "archon.db")
    before = sorted(p.name for p in tmp_path.iterdir())

    def unreadable(copy, *_, **__):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(snapshots, "verify_written", unreadable)  # the copy is read back beside the fsync
    with pytest.raises(SnapshotFailed, match="Input/output error"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    monkeypatch.undo()
    monkeypatch.setattr(snapshots.os, "fsync", unreadable)
    with pytest.raises(SnapshotFailed, match="Input/output error"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.slow
def test_a_copy_killed_midway_leaves_only_a_temporary_file_the_next_run_removes(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    target = snapshots.snapshot_target(path, AT)
    killed = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from console.db import snapshot as s\n"
        "def die(done, total):\n"
        "    if done < total: os.kill(os.getpid(), signal.SIGKILL)\n"
        "s.take_snapshot(Path(sys.argv[1]), Path(sys.argv[2]), progress=die, step_pages=8)\n"
    )
    proc = subprocess.run([sys.executable, "-c", killed, str(path), str(target)])
    assert proc.returncode == -signal.SIGKILL
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(snapshots.TMP_PREFIX)]
    assert len(leftovers) == 1 and not target.exists()
    # A temporary file of a process that is still running is somebody's copy in progress.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f"{snapshots.TMP_PREFIX}.{sleeper.pid}.{target.name}.abcd.tmp"
        live.write_bytes(b"being written")
        snap = snapshots.take_snapshot(path, target)
        assert snap.path == target and dump(snap.path) == dump(path)
        assert not leftovers[0].exists() and live.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert snapshots.remove_stale_temporaries(tmp_path) == [live]
    unrelated = tmp_path / ".someone-elses.123.tmp"
    unrelated.write_bytes(b"not ours")
    assert snapshots.remove_stale_temporaries(tmp_path) == [] and unrelated.exists()


def test_no_space_is_refused_before_writing(tmp_path, monkeypatch):
    path = db_1822(tmp_path / "archon.db")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(snapshots, "free_bytes", lambda d: 4096)
    with pytest.raises(SnapshotFailed, match="Not enough free space"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_verify_copy_catches_corruption_and_count_drift(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    snap = snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    counts = table_counts(sqlite3.connect(path))
    assert verify_copy(snap.path, counts)[1] == sum(counts.values())
    with pytest.raises(SnapshotFailed, match="row counts differ"):
        verify_copy(snap.path, {**counts, "projects": counts["projects"] + 1})
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
    with pytest.raises((DatabaseUnusable, SnapshotFailed)):
        verify_copy(snap.path, counts)


# The split check (a whole-file quick_check plus integrity_check(T) for every table) must find
# everything the plain integrity_check finds. Each damage below is found by only one half of it.


def _pragma(path, sql):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute(sql)]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "damage, only_found_by",
    [(_index_out_of_step, "table"), (_page_never_used, "file"), (_page_in_two_trees, None)],
)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_split_integrity_check_finds_what_integrity_check_finds(tmp_path, damage, only_found_by, workers):
    path = _two_tables(tmp_path / "copy.sqlite3")
    counts = table_counts(sqlite3.connect(path))
    assert verify_copy(path, counts, workers=workers) == (2, 6000)
    damage(path)
    assert _pragma(path, "PRAGMA integrity_check") != ["ok"]  # the damage is real
    pieces = check_pieces(sqlite3.connect(path), counts)
    assert sorted(pieces) == sorted(  # the whole file once, then every table, sqlite_schema included
        ["PRAGMA quick_check", 'PRAGMA integrity_check("a")', 'PRAGMA integrity_check("b")',
         "PRAGMA integrity_check(sqlite_master)"]
    )
    if only_found_by == "table":  # the whole-file quick_check does not look inside indexes
        assert _pragma(path, "PRAGMA quick_check") == ["ok"]
    if only_found_by == "file":  # a per-table check skips the whole-file page accounting
        assert all(_pragma(path, piece) == ["ok"] for piece in pieces if piece != "PRAGMA quick_check")
    with pytest.raises(DatabaseUnusable, match="integrity check"):
        verify_copy(path, counts, workers=workers)
