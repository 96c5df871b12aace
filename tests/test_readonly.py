"""Reading without a trace: snapshots and read-only opens leave the original exactly as it was."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path

import pytest

from console.db.connect import open_database
from console.db.locked_copy import private_copy
from console.db.readonly import open_read_only, ro_uri, snapshot_copy
from console.errors import DatabaseUnusable
from tests import damage
from tests.untouched import Holder, fingerprint_dir, without_shm


def count(path: Path, table: str = "support_probe") -> int:
    conn = sqlite3.connect(ro_uri(path), uri=True)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_plain_mode_ro_on_wal_would_leave_files(tmp_path):
    """Why readonly.py exists: SQLite's own read-only mode creates -wal/-shm beside a WAL file."""
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    assert sorted(os.listdir(tmp_path)) == ["archon.db"]
    conn = sqlite3.connect(ro_uri(db), uri=True)
    conn.execute("SELECT count(*) FROM projects").fetchone()
    conn.close()
    assert sorted(os.listdir(tmp_path)) == ["archon.db", "archon.db-shm", "archon.db-wal"]


def test_snapshot_sees_uncheckpointed_wal_and_touches_nothing(tmp_path):
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    out = tmp_path.parent / f"{tmp_path.name}-out"
    with Holder(db, "hold", rows=40):
        before = fingerprint_dir(tmp_path)
        assert before["archon.db-wal"][0] > 0  # the commits are only in the -wal
        snap = snapshot_copy(db, out)
        assert fingerprint_dir(tmp_path) == before
    assert count(snap) == 40
    conn = sqlite3.connect(snap)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # a single self-contained file
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert sorted(os.listdir(out)) == [snap.name]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def test_snapshot_never_overwrites(tmp_path):
    db = damage.healthy(tmp_path / "archon.db")
    out = tmp_path / "out"
    snapshot_copy(db, out, name="s.sqlite")
    with pytest.raises(Exception, match="already exists"):
        snapshot_copy(db, out, name="s.sqlite")


@pytest.mark.parametrize("wal", [False, True], ids=["rollback", "wal-clean"])
def test_open_read_only_in_place_creates_nothing(tmp_path, wal):
    db = damage.healthy(tmp_path / "archon.db", wal=wal)
    before = fingerprint_dir(tmp_path)
    conn, cleanup, how = open_read_only(db)
    assert conn.execute("SELECT count(*) FROM approval_requests").fetchone()[0] == 3
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM execution_environments")
    conn.close()
    cleanup()
    assert how.startswith("in place")
    assert fingerprint_dir(tmp_path) == before


def test_open_read_only_reads_a_live_wal_in_place(tmp_path, monkeypatch):
    """Issue 11 item 1: a live WAL database is read where it is, not copied: the main file and -wal
    keep every byte and mtime, nothing is created beside it or in the temp directory."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # resolved TMPDIR (resolving it writes a probe file)
    with Holder(db, "hold", rows=25):
        before = without_shm(fingerprint_dir(db.parent))
        tmp_mtime = tmp.stat().st_mtime_ns
        handle = open_database(db, read_only=True)
        assert handle.conn.execute("SELECT count(*) FROM support_probe").fetchone()[0] == 25
        assert Path(handle.conn.execute("PRAGMA database_list").fetchone()[2]) == db.resolve()
        assert handle.opened == "in place (WAL, mode=ro)"
        with pytest.raises(sqlite3.OperationalError):
            handle.conn.execute("DELETE FROM support_probe")
        assert list(tmp.iterdir()) == []
        handle.close()
        assert without_shm(fingerprint_dir(db.parent)) == before
    assert list(tmp.iterdir()) == [] and tmp.stat().st_mtime_ns == tmp_mtime  # not even created and removed


def test_open_read_only_copies_only_the_wal_sqlite_cannot_read_in_place(tmp_path):
    """A -wal without its -shm: `mode=ro` would create the -shm, so the -wal alone is copied (the
    main file is read where it is: console/db/private_wal.py), and every byte next to the original
    stays as it was (issue 23 item 1; tests/adversarial/test_incomplete_sidecars.py counts the bytes)."""
    (tmp_path / "live").mkdir()
    db = damage.healthy(tmp_path / "live" / "archon.db", wal=True)
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    with Holder(db, "hold", rows=25):
        for suffix in ("", "-wal"):  # the holder is idle: a byte copy of both is a commit point
            shutil.copyfile(f"{db}{suffix}", orphan / f"archon.db{suffix}")
    before = fingerprint_dir(orphan)
    conn, cleanup, how = open_read_only(orphan / "archon.db")
    try:
        assert how.startswith("private copy of the -wal, the main file read in place (no -shm")
        assert conn.execute("SELECT count(*) FROM support_probe").fetchone()[0] == 25
        copy_dir = Path(conn.execute("PRAGMA database_list").fetchone()[2]).parent
        # Already gone while the connection reads it: SQLite holds the unlinked copy open, so no
        # signal can leave it behind (tests/adversarial/test_hostile_sidecars.py).
        assert copy_dir != orphan and not copy_dir.exists()
    finally:
        conn.close()
        cleanup()
    assert fingerprint_dir(orphan) == before


def test_private_copy_refuses_what_is_not_sqlite(tmp_path):
    bad = damage.not_sqlite(tmp_path / "notes.db")
    with pytest.raises(DatabaseUnusable, match="not a SQLite database"):
        private_copy(bad, tmp_path / "copy")
    with pytest.raises(DatabaseUnusable, match="No database"):
        open_read_only(tmp_path / "missing.db")


@pytest.mark.slow
@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_consistent_snapshots_while_another_process_writes(tmp_path, journal):
    """Each snapshot is a commit point: both tables always have the same rows, integrity is ok.

    Without the read locks this fails within a few snapshots ("database disk image is malformed").
    """
    db = tmp_path / "live.db"
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.close()
    out = tmp_path.parent / f"{tmp_path.name}-snaps"
    with Holder(db, "write", rows=5):
        for i in range(12):
            snap = snapshot_copy(db, out, name=f"s{i}.sqlite")
            check = sqlite3.connect(snap)
            assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            probe, twin = check.execute(
                "SELECT (SELECT max(n) FROM support_probe_twin), (SELECT count(*) FROM support_probe_twin)"
            ).fetchone()
            assert twin == probe + 1  # a whole number of transactions
            check.close()
            snap.unlink()
            with open_database(db, read_only=True, require_archon=False) as handle:
                handle.conn.execute("SELECT count(*) FROM support_probe").fetchone()
        names = set(os.listdir(tmp_path))
    assert names <= {"live.db", "live.db-wal", "live.db-shm", "live.db-journal"}


def _ro_bind_mount(directory: Path) -> bool:
    """Make `directory` read-only even for root (a read-only bind mount); False when not allowed."""
    import subprocess

    ok = subprocess.run(["mount", "--bind", str(directory), str(directory)], capture_output=True).returncode == 0
    if not ok:
        return False
    if subprocess.run(["mount", "-o", "remount,ro,bind", str(directory)], capture_output=True).returncode != 0:
        subprocess.run(["umount", str(directory)], capture_output=True)
        return False
    return True


def test_read_only_directory_and_0444_file(tmp_path):
    """Root ignores permission bits, so the directory is made read-only by a read-only bind mount."""
    import subprocess

    box = tmp_path / "box"
    box.mkdir()
    db = damage.healthy(box / "archon.db", wal=True)
    os.chmod(db, 0o444)
    os.chmod(box, 0o555)
    if os.geteuid() == 0 and not _ro_bind_mount(box):
        pytest.skip("running as root without permission to make a read-only bind mount")
    try:
        before = fingerprint_dir(box)
        snap = snapshot_copy(db, tmp_path / "out")
        with open_database(db, read_only=True) as handle:
            assert handle.conn.execute("SELECT count(*) FROM projects").fetchone()[0] == 2
        assert sqlite3.connect(snap).execute("SELECT count(*) FROM projects").fetchone()[0] == 2
        assert fingerprint_dir(box) == before
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(box)], capture_output=True)
        os.chmod(box, 0o755)


NOBODY_SCRIPT = """
import os, sys, sqlite3, shutil, tempfile, threading, json, zipfile
# Import everything first: the interpreter's own files may not be readable by nobody.
from console.db.connect import open_database
from console.db.readonly import snapshot_copy
from console.db import ledger, detect
from console.db.migrations import registry, runner
from console.services.doctor import run_doctor
from console.services.doctor.checks_schema import reference_objects
from tests.damage import NOW
import sqlite_utils  # doctor reads the schema with it (console/db/introspect.py), importing it lazily
reference_objects("1.10.0")
os.setgid(65534); os.setuid(65534)
db, out = sys.argv[1], sys.argv[2]
with open_database(db, read_only=True) as handle:
    n = handle.conn.execute("SELECT count(*) FROM projects").fetchone()[0]
snap = snapshot_copy(db, out)
report = run_doctor(db, now=NOW)
print(n, report.exit_code(), snap.exists())
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to nobody")
def test_as_a_user_without_write_permission(tmp_path_factory):
    """The non-root case: a 0444 file in a 0555 directory, read by `nobody`."""
    import subprocess
    import sys
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="archon-ro-"))  # under /tmp, reachable by nobody
    try:
        os.chmod(base, 0o755)
        box = base / "box"
        box.mkdir()
        db = damage.healthy(box / "archon.db", wal=True)
        os.chmod(db, 0o444)
        os.chmod(box, 0o555)
        out = base / "out"
        out.mkdir()
        os.chown(out, 65534, 65534)
        before = fingerprint_dir(box)
        env = {**os.environ, "TMPDIR": str(out), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        result = subprocess.run([sys.executable, "-c", NOBODY_SCRIPT, str(db), str(out / "snaps")],
                                capture_output=True, text=True, env=env, cwd=str(out))
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["2", "0", "True"]
        assert fingerprint_dir(box) == before
    finally:
        import shutil

        os.chmod(base / "box", 0o755) if (base / "box").exists() else None
        shutil.rmtree(base, ignore_errors=True)


def test_a_journal_that_vanishes_while_we_look_is_no_journal(tmp_path, monkeypatch):
    """A writer deletes its -journal at commit: seen by exists(), gone by stat() (a CI failure).
    Simulated by an exists() that still says yes once the file is gone."""
    from pathlib import Path as _Path

    from console.db.readonly import open_read_only

    db = tmp_path / "live.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    real_exists = _Path.exists
    monkeypatch.setattr(_Path, "exists", lambda self, *a, **k: self.name.endswith("-journal") or real_exists(self, *a, **k))
    ro, cleanup, _how = open_read_only(db)
    try:
        assert ro.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    finally:
        ro.close()
        cleanup()
