"""The snapshot reads its source once (issue 22 item 3): each page of the image is read, hashed and
written in one pass, and the copy is proven by reading it back, not by reading the source again; on a
live file the `-wal`'s frames are the read snapshot's (up to the `-shm`'s mxFrame); SQLite's checks
run only when asked for.

Bytes read are the kernel's count (`/proc/self/io` `rchar`, which includes the child processes this
one has waited for: the copier), so they cover every read by every process of the snapshot.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.db import snapshot as snapshots
from console.db import snapshot_check, snapshot_pages
from console.db.snapshot_check import SnapshotFailed
from tests.upgrade_helpers import dump, sha256

AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
ROWS = 8000  # of 4,000 bytes each: a file of about 33 MB, large against a child's start-up reads
START_UP = 8 * 1024 * 1024  # what a child interpreter reads importing the console (about 2.2 MB)


def _rchar() -> int:
    with open("/proc/self/io") as handle:
        return int(dict(line.split(": ") for line in handle.read().splitlines())["rchar"])


def _big(path: Path, *, wal: bool = False) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO blobs (body) VALUES (?)", ((os.urandom(4000),) for _ in range(ROWS)))
    conn.execute("COMMIT")
    conn.close()
    return path


@pytest.fixture
def live(tmp_path):
    """A WAL file held open by a writer that commits without checkpointing: a hot -wal."""
    path = _big(tmp_path / "archon.db", wal=True)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    for n in range(50):
        writer.execute("UPDATE blobs SET body = ? WHERE id = ?", (os.urandom(4000), 1 + n * 97))
    assert os.path.getsize(f"{path}-wal") > 0
    yield path, writer
    writer.close()


def _take(path: Path, **kw) -> tuple[snapshots.Snapshot, dict[str, float], int]:
    timings: dict[str, float] = {}
    before = _rchar()
    snap = snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), timings=timings, **kw)
    return snap, timings, _rchar() - before


def test_an_idle_file_is_read_once(tmp_path):
    path = _big(tmp_path / "archon.db")
    size = path.stat().st_size
    snap, timings, read = _take(path)
    # The source once and the copy once (its read-back), and a child's start-up: no second read of
    # the source (the comparison read both files again).
    assert read <= 2.1 * size + START_UP, f"{read:,} bytes read for a {size:,}-byte file"
    assert timings["source bytes read"] == size  # the page reader's own count: every page, once
    assert snap.path.read_bytes() == path.read_bytes() and snap.sha256 == sha256(snap.path)


def test_a_live_file_is_read_once(live):
    path, writer = live
    size, wal = path.stat().st_size, os.path.getsize(f"{path}-wal")
    committed = dump(path)
    snap, timings, read = _take(path)
    assert "copy (one pass, -wal frames applied)" in timings  # not SQLite's backup API
    # The -wal is read twice at most (its frames checked, then the newest copy of each page).
    assert timings["source bytes read"] <= size + 2 * wal
    assert read <= 2.1 * size + 2 * wal + START_UP, f"{read:,} bytes read for {size:,} + {wal:,} bytes"
    assert dump(snap.path) == committed and snap.sha256 == sha256(snap.path)
    conn = sqlite3.connect(f"file:{snap.path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def _counting_checks(monkeypatch) -> list[str]:
    calls: list[str] = []
    for module, name in ((snapshot_check, "quick_check"), (snapshots, "quick_check_copy"),
                         (snapshots, "verify_copy"), (snapshot_check, "verify_copy")):
        real = getattr(module, name)

        def counting(*a, _real=real, _name=name, **k):
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(module, name, counting)
    if hasattr(snapshots, "quick_check"):  # imported by name where the copy used to be checked
        real_quick = snapshots.quick_check

        def counting_quick(*a, **k):
            calls.append("quick_check")
            return real_quick(*a, **k)

        monkeypatch.setattr(snapshots, "quick_check", counting_quick)
    return calls


@pytest.mark.parametrize("wal", [False, True], ids=["idle", "live"])
def test_no_sqlite_check_runs_unless_asked(tmp_path, monkeypatch, request, wal):
    """Neither quick_check nor integrity_check judges the source unless the caller asks (the upgrade
    asks with --full-check): the copy is proven by its bytes."""
    path = request.getfixturevalue("live")[0] if wal else _big(tmp_path / "archon.db")
    calls = _counting_checks(monkeypatch)
    snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT))
    assert calls == []
    snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), quick_check=True)
    assert calls == ["quick_check_copy", "quick_check"]


@pytest.mark.slow
def test_the_upgrade_runs_no_quick_check_without_full_check(tmp_path, monkeypatch):
    from console.services.upgrade.run import run_upgrade
    from tests.upgrade_helpers import db_1820

    path = db_1820(tmp_path / "archon.db")
    calls = _counting_checks(monkeypatch)
    result = run_upgrade(path, force=True, now=AT)
    assert result.status == "upgraded" and result.snapshot_sha256 == sha256(Path(result.snapshot_path))
    assert calls == []


# The WAL's running checksum (SQLite's walChecksumBytes), shared by the scripts that write frames.
WAL_CHECKSUM = """
import struct, sys

def checksum(data, s0, s1, order):
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1
"""


GHOST = WAL_CHECKSUM + """
path, size = sys.argv[1], 4096
with open(path + "-shm", "rb") as shm:
    last = struct.unpack("=I", shm.read(20)[16:20])[0]  # the WAL-index header's mxFrame
with open(path + "-wal", "r+b") as wal:
    header = wal.read(32)
    order = ">" if struct.unpack(">I", header[:4])[0] & 1 else "<"
    s = checksum(header[:24], 0, 0, order)
    for n in range(last):  # the published frames: their cumulative checksum, page 1's newest copy
        frame = wal.read(24 + size)
        s = checksum(frame[24:], *checksum(frame[:8], *s, order), order)
        pages = struct.unpack(">I", frame[4:8])[0] or pages
        if struct.unpack(">I", frame[:4])[0] == 1:
            page = bytearray(frame[24:])
    page[60:64] = (77).to_bytes(4, "big")  # user_version
    head = struct.pack(">2I", 1, pages)  # page 1, committing at the same size
    s = checksum(bytes(page), *checksum(head, *s, order), order)
    wal.seek(32 + last * (24 + size))
    wal.write(head + header[16:24] + struct.pack(">2I", *s) + bytes(page))
"""


def _ghost_commit(path: Path) -> None:
    """Append to the -wal a valid commit frame that the -shm does not publish, as a writer killed
    between writing its commit and updating the WAL-index leaves it: page 1 with user_version 77.
    Written by a child process: opening the -shm here would drop the writer's locks on it."""
    subprocess.run([sys.executable, "-c", GHOST, str(path)], check=True, cwd=Path(__file__).parent.parent)


def test_a_commit_the_shm_does_not_publish_is_not_in_the_snapshot(live):
    """The frames are the read snapshot's, up to the -shm's mxFrame, not every frame that looks
    committed: the snapshot is the state readers see (and the upgrade starts from)."""
    path, writer = live
    writer.execute("PRAGMA user_version = 5")  # page 1 is in the -wal
    committed = dump(path)
    _ghost_commit(path)
    recovered = path.parent / "recovered" / "copy.db"  # its -wal without the -shm: SQLite recovers it
    recovered.parent.mkdir()
    for suffix in ("", "-wal"):
        subprocess.run(["cp", f"{path}{suffix}", f"{recovered}{suffix}"], check=True)
    conn = sqlite3.connect(recovered)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 77  # a real commit, unpublished
    conn.close()
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert reader.execute("PRAGMA user_version").fetchone()[0] == 5  # readers do not see it
    reader.close()
    snap, timings, _ = _take(path)
    assert "copy (one pass, -wal frames applied)" in timings
    conn = sqlite3.connect(f"file:{snap.path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    conn.close()
    assert dump(snap.path) == committed


def test_the_shm_must_vouch_for_the_frames(live, tmp_path):
    """read_snapshot_frames answers why, instead of frames, when the WAL-index header is not whole or
    its -wal does not match it (the snapshot then falls back to SQLite's backup API). Read on a copy
    of the live files, made by `cp`: opening the -shm here would drop the writer's locks on it."""
    path, writer = live
    copy = tmp_path / "elsewhere" / "copy.db"
    copy.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):
        subprocess.run(["cp", f"{path}{suffix}", f"{copy}{suffix}"], check=True)
    page_size = 4096
    pages = snapshot_pages.SHM_HEADER.unpack(snapshot_pages.wal_index_header(copy))[7]  # nPage
    frames, header, parsed = snapshot_pages.read_snapshot_frames(copy, page_size, pages)
    assert frames == snapshot_pages.wal_frames(Path(f"{copy}-wal"), page_size) and frames and parsed > 0
    assert "page count" in snapshot_pages.read_snapshot_frames(copy, page_size, pages + 1)
    shm = bytearray(Path(f"{copy}-shm").read_bytes())
    shm[16] ^= 0x01  # mxFrame of the first header copy only
    Path(f"{copy}-shm").write_bytes(bytes(shm))
    assert "no valid WAL-index header" in snapshot_pages.read_snapshot_frames(copy, page_size, pages)
    shm[16] ^= 0x01
    Path(f"{copy}-shm").write_bytes(bytes(shm))
    wal = bytearray(Path(f"{copy}-wal").read_bytes())
    wal[snapshot_pages.WAL_HEADER + snapshot_pages.FRAME_HEADER + 100] ^= 0x01  # the first frame's page
    Path(f"{copy}-wal").write_bytes(bytes(wal))
    assert "not the ones" in snapshot_pages.read_snapshot_frames(copy, page_size, pages)


@pytest.mark.parametrize("when", ["before the copy", "during the copy"])
def test_a_commit_after_the_read_transaction_began_is_refused(live, monkeypatch, when):
    """The copier goes by the -shm as it finds it; a commit by another connection after the snapshot's
    read transaction began would make that a later state than the one the transaction pins. Before
    the copy, PRAGMA data_version sees it; during it, the -shm's header changes under the copier."""
    path, writer = live
    original = snapshots.copy_pages
    commits = []

    def commit() -> None:
        if not commits:
            writer.execute("UPDATE blobs SET body = zeroblob(10) WHERE id = 2")
            commits.append(1)

    def commit_first(source, pages, tmp, wal, progress, step_pages):
        commit()
        return original(source, pages, tmp, wal, progress, step_pages)

    if when == "before the copy":
        monkeypatch.setattr(snapshots, "copy_pages", commit_first)
        expected = "another connection committed while it was copied"
    else:
        # Seen by the copier if the commit lands before it reads the header again, else by data_version.
        expected = "-wal changed while it was copied|another connection committed while it was copied"
    before = sorted(p.name for p in path.parent.iterdir())
    with pytest.raises(SnapshotFailed, match=expected):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), step_pages=64,
                                progress=lambda done, total: commit())
    assert commits and sorted(p.name for p in path.parent.iterdir()) == before


def test_frames_the_shm_does_not_vouch_for_go_through_the_backup_api(live):
    """A published frame whose checksum fails: readers still read it (SQLite trusts its index), so the
    copier leaves the -wal to SQLite's backup API, whose copy is then compared with the source
    parsed as SQLite's recovery would: they differ, and nothing is kept."""
    path, writer = live
    last = os.path.getsize(f"{path}-wal") - 4096 + 100  # inside the last frame's page
    with open(f"{path}-wal", "r+b") as wal:  # nobody locks the -wal itself
        wal.seek(last)
        byte = wal.read(1)
        wal.seek(last)
        wal.write(bytes([byte[0] ^ 0x01]))
    before = sorted(p.name for p in path.parent.iterdir())
    timings: dict[str, float] = {}
    with pytest.raises(SnapshotFailed, match="differs from the database"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), timings=timings)
    assert "copy (backup API)" in timings
    assert sorted(p.name for p in path.parent.iterdir()) == before


def test_without_the_shm_s_word_the_backup_api_copies_and_its_copy_is_compared(live, monkeypatch):
    """When the copier answers that the -shm does not vouch for the frames, SQLite's backup API makes
    the copy in the read transaction, and a child compares it with the source page by page."""
    path, writer = live
    committed = dump(path)
    real = snapshots._raw_reader
    asked = []

    def refusing_frames(function, *args, **kwargs):
        asked.append(function)
        if function == "copy_from_source":
            return snapshot_pages.Copied(fallback="simulated: the -shm holds no valid WAL-index header")
        return real(function, *args, **kwargs)

    monkeypatch.setattr(snapshots, "_raw_reader", refusing_frames)
    timings: dict[str, float] = {}
    snap = snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), timings=timings)
    assert asked == ["copy_from_source", "compare_with_source"] and "copy (backup API)" in timings
    assert dump(snap.path) == committed and snap.sha256 == sha256(snap.path)


FORGE = WAL_CHECKSUM + """
source, forged, suffix, size = sys.argv[1], sys.argv[2], sys.argv[3], 4096
data = bytearray(open(source + suffix, "rb").read())
if suffix == "":  # the main file: one byte of its last page, a blob the -wal does not hold
    data[-100] ^= 0x01
else:  # the -wal: one byte of its last frame's page, its last 8 bytes chosen to keep every checksum
    with open(source + "-shm", "rb") as shm:
        last = struct.unpack("=I", shm.read(20)[16:20])[0]  # the WAL-index header's mxFrame
    order = ">" if struct.unpack(">I", data[:4])[0] & 1 else "<"
    s = checksum(bytes(data[:24]), 0, 0, order)
    for n in range(last):
        at = 32 + n * (24 + size)
        head = checksum(bytes(data[at : at + 8]), *s, order)
        if n == last - 1:
            data[at + 24 + 100] ^= 0x01
            a, b = checksum(bytes(data[at + 24 : at + 24 + size - 8]), *head, order)
            want = struct.unpack(">2I", data[at + 16 : at + 24])
            x0 = (want[0] - a - b) & 0xFFFFFFFF
            data[at + 24 + size - 8 : at + 24 + size] = struct.pack(f"{order}2I", x0, (want[1] - b - want[0]) & 0xFFFFFFFF)
        s = checksum(bytes(data[at + 24 : at + 24 + size]), *head, order)
    assert s == struct.unpack(">2I", data[32 + (last - 1) * (24 + size) + 16 : 32 + last * (24 + size) - size])
open(forged, "wb").write(bytes(data))
"""


@pytest.mark.parametrize("suffix", ["", "-wal", "hard link", "symbolic link"],
                         ids=["main file", "-wal", "main file a hard link to the -wal", "main file a symbolic link to the -wal"])
def test_a_file_swapped_under_the_read_transaction_is_refused(live, monkeypatch, suffix):
    """Another local user renames a forged file over the database's main file or its -wal after the
    snapshot's read transaction began: SQLite's connections keep reading the files they opened, so
    the image the upgrade starts from is unchanged, but the copier opens files by name. The -wal's
    forgery keeps every checksum (its last 8 bytes are chosen), so the -shm still vouches for it. A
    link named as the main file leads to a file the process does hold open, but under another name.
    The copier reads only the files this process's connections hold open under those names; else
    SQLite's backup API copies, the comparison with the files named finds the forgery, nothing is kept."""
    path, writer = live
    original = snapshots.copy_pages
    forged = path.parent / "forged"

    def swap_first(source, pages, tmp, wal, progress, step_pages):
        # Written by a child process: opening the database's files here would drop the writer's locks.
        if suffix == "hard link":
            os.link(f"{path}-wal", forged)
        elif suffix == "symbolic link":
            os.symlink(f"{path}-wal", forged)
        else:
            subprocess.run([sys.executable, "-c", FORGE, str(path), str(forged), suffix], check=True)
        os.rename(forged, f"{path}{suffix if suffix in ('', '-wal') else ''}")
        return original(source, pages, tmp, wal, progress, step_pages)

    monkeypatch.setattr(snapshots, "copy_pages", swap_first)
    before = sorted(p.name for p in path.parent.iterdir())
    timings: dict[str, float] = {}
    with pytest.raises(SnapshotFailed, match="differs from the database"):
        snapshots.take_snapshot(path, snapshots.snapshot_target(path, AT), timings=timings)
    assert "copy (backup API)" in timings
    assert sorted(p.name for p in path.parent.iterdir()) == before
