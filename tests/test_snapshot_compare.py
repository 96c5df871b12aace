"""The snapshot is the source's image, read once and proven written (console/db/snapshot_pages.py);
quick_check and the full integrity_check run only when asked for (issue 11 item 4, issue 22 item 3).

A byte changed in the copy between the copy and its verification must be refused, wherever the
byte is and whether or not the -wal holds frames, and a check that was asked for must run.
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.db import snapshot as snapshots
from console.db.snapshot_check import SnapshotFailed, verify_copy
from console.db import snapshot_pages
from console.errors import DatabaseUnusable
from tests.snapshot_damage import _index_out_of_step, _page_never_used, _two_tables
from tests.upgrade_helpers import db_1822, dump, sha256

AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def wal_source(tmp_path):
    """A WAL database whose -wal holds committed frames (a page written twice among them) and, after
    them, frames of a transaction still open: only what is committed belongs in the snapshot."""
    path = db_1822(tmp_path / "archon.db", wal=True)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    for n in range(3):
        writer.execute("INSERT INTO archon_misc_log (note) VALUES (?)", (f"only in the wal {n}",))
    committed = dump(path)
    writer.execute("PRAGMA cache_size = 5")  # spill: uncommitted frames reach the -wal
    writer.execute("BEGIN")
    writer.executemany("INSERT INTO archon_misc_log (note) VALUES (?)", [("x" * 300,)] * 400)
    assert snapshot_pages.wal_frames(Path(f"{path}-wal"), 4096)  # the parser finds the committed frames
    yield path, committed
    writer.execute("ROLLBACK")
    writer.close()


def _take(path: Path, **kw) -> snapshots.Snapshot:
    return snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), **kw)


def test_a_wal_source_snapshot_holds_exactly_its_committed_state(wal_source):
    path, committed = wal_source
    timings: dict[str, float] = {}
    snap = _take(path, timings=timings, step_pages=8)
    assert "copy (one pass, -wal frames applied)" in timings  # the frames of the read snapshot, not the open ones
    assert dump(snap.path) == committed and snap.sha256 == sha256(snap.path)


def test_a_source_without_wal_frames_is_block_copied(tmp_path):
    path = db_1822(tmp_path / "archon.db")
    timings: dict[str, float] = {}
    snap = _take(path, timings=timings, step_pages=8)
    assert "copy (one pass)" in timings
    assert dump(snap.path) == dump(path) and snap.sha256 == sha256(snap.path)
    conn = sqlite3.connect(f"file:{snap.path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def _corrupting(monkeypatch, where):
    """Change one byte of the copy after it is written and before it is verified."""
    original = snapshots.copy_pages

    def copy_then_corrupt(source, pages, tmp, wal, progress, step_pages):
        copied = original(source, pages, tmp, wal, progress, step_pages)
        data = bytearray(tmp.read_bytes())
        at = where(data)
        data[at] ^= 0x01
        tmp.write_bytes(bytes(data))
        return copied

    monkeypatch.setattr(snapshots, "copy_pages", copy_then_corrupt)


WHERE = {
    "user_version in page 1's header": lambda data: 60,
    "the schema on page 1": lambda data: 200,
    "a middle page": lambda data: (len(data) // 4096 // 2) * 4096 + 1000,
    "the last byte": lambda data: len(data) - 1,
}


@pytest.mark.slow
@pytest.mark.parametrize("where", list(WHERE), ids=list(WHERE))
@pytest.mark.parametrize("wal", [False, True], ids=["main-file", "wal-frames"])
def test_a_copy_one_byte_off_is_refused(tmp_path, monkeypatch, request, where, wal):
    if wal:
        path, _ = request.getfixturevalue("wal_source")
    else:
        path = db_1822(tmp_path / "archon.db")
    before = _entries(tmp_path)
    _corrupting(monkeypatch, WHERE[where])
    with pytest.raises(SnapshotFailed, match="differs from the database"):
        _take(path)
    assert _entries(tmp_path) == before  # nothing under a snapshot's name, no temporary file


def test_quick_check_runs_only_when_asked_for(tmp_path):
    """A damaged source makes an identical, damaged copy: without a check asked for it is copied
    exactly (judging the source is doctor's job); with quick_check asked for, it is refused."""
    path = _two_tables(tmp_path / "archon.db")
    _page_never_used(path)
    before = _entries(tmp_path)
    with pytest.raises(DatabaseUnusable, match="quick_check"):
        _take(path, quick_check=True)
    assert _entries(tmp_path) == before
    snap = _take(path)
    assert snap.path.read_bytes() == path.read_bytes() and snap.rows is None and snap.tables == 2


def test_the_full_integrity_check_runs_only_when_asked_for(tmp_path):
    """An index out of step with its rows passes quick_check; the full check finds it."""
    path = _two_tables(tmp_path / "archon.db")
    _index_out_of_step(path)
    quick = _take(path)
    assert quick.rows is None and quick.tables == 2
    with pytest.raises(DatabaseUnusable, match="integrity check"):
        _take(path, full_check=True)
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)


def test_full_check_counts_rows(tmp_path):
    path = _two_tables(tmp_path / "archon.db")
    snap = _take(path, full_check=True, check_workers=2)
    assert (snap.tables, snap.rows) == (2, 6000)


def test_a_copy_with_wal_frames_is_quick_checked_itself_when_asked(wal_source, monkeypatch):
    """quick_check asked for: the copy's own quick_check runs (here, on a copy the -wal's frames made)."""
    path, _ = wal_source
    calls = []

    def refusing(copy):
        calls.append(copy)
        raise DatabaseUnusable("simulated: the copy failed SQLite's quick_check")

    monkeypatch.setattr(snapshots, "quick_check_copy", refusing)
    with pytest.raises(DatabaseUnusable, match="quick_check"):
        _take(path, quick_check=True)
    assert len(calls) == 1


@pytest.mark.slow
@pytest.mark.parametrize("full_check", [False, True])
def test_the_upgrade_runs_integrity_check_only_with_full_check(tmp_path, monkeypatch, full_check):
    from console.services.upgrade.run import run_upgrade
    from tests.upgrade_helpers import db_1820

    path = db_1820(tmp_path / "archon.db")
    calls = []
    real = verify_copy

    def counting(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(snapshots, "verify_copy", counting)
    result = run_upgrade(path, force=True, now=AT, full_check=full_check)
    assert result.status == "upgraded" and result.snapshot_sha256 == sha256(Path(result.snapshot_path))
    assert len(calls) == (1 if full_check else 0)
