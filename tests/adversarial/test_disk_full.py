"""A full disk, a full TMPDIR or a read-only directory: one sentence, exit 2 or 3, no partial
file left behind, and the next attempt works once there is room (issue 9, findings 6 and 8).

A full disk is a small tmpfs (tests/adversarial/tmpfs.py); these tests skip, saying why, where
mounting one is impossible.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import console.tui.tui
from console.cli.cli import main
from console.db import snapshot as snapshots
from tests.adversarial.tmpfs import small_disk

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def disk(tmp_path):
    with small_disk(tmp_path / "small") as mounted:
        yield mounted


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_inspect_keep_snapshot_on_a_full_disk(demo_copy, disk, monkeypatch, capsys):
    db = demo_copy("current")  # ~900 KB: more than the disk holds
    monkeypatch.setattr(console.tui.tui, "run_tui", lambda ctx, support=None, **_: 0)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here
    code, err = run(capsys, "inspect", db, "--keep-snapshot", disk.path)
    assert disk.entries() == []  # no partial, no scratch copy: nothing blocks the next attempt
    assert code == 3, err
    assert "No space left on device" in err and "removed" in err
    disk.grow()
    code, err = run(capsys, "inspect", db, "--keep-snapshot", disk.path)
    assert code == 0, err
    assert len(disk.entries()) == 1 and disk.entries()[0].startswith("archon.support-")


@pytest.mark.slow
def test_upgrade_snapshot_on_a_full_disk(demo_copy, disk, monkeypatch, capsys):
    db = demo_copy("1.8.20")
    before = db.read_bytes()
    # The space check refuses before writing anything...
    code, err = run(capsys, "--db", db, "upgrade", "--force", "--snapshot-dir", disk.path)
    assert code == 1 and "Not enough free space" in err
    assert disk.entries() == [] and db.read_bytes() == before
    # ...and when the disk fills during the copy anyway (another writer took the space), the
    # write fails cleanly: exit 3, the temporary file removed, nothing migrated.
    monkeypatch.setattr(snapshots, "free_bytes", lambda directory: 1 << 40)
    code, err = run(capsys, "--db", db, "upgrade", "--force", "--snapshot-dir", disk.path)
    assert code == 3, err
    assert "could not be written" in err and "nothing was migrated" in err
    assert disk.entries() == [] and db.read_bytes() == before
    monkeypatch.undo()
    disk.grow()
    code, err = run(capsys, "--db", db, "upgrade", "--force", "--snapshot-dir", disk.path)
    assert code == 0, err
    assert [name for name in disk.entries() if ".pre-upgrade-" in name]


def test_demo_on_a_full_disk(disk, capsys):
    target = disk.path / "demo.db"
    code, err = run(capsys, "demo", target, "--requests", "300")
    assert code == 3, err
    assert "could not be written" in err and "removed" in err
    assert disk.entries() == []
    disk.grow()
    code, err = run(capsys, "demo", target, "--requests", "300")
    assert code == 0, err
    assert disk.entries() == ["demo.db"]


def test_a_read_only_command_with_a_full_tmpdir(tmp_path, demo_copy, disk):
    """A live WAL database is read in place: a full TMPDIR does not matter (issue 11 item 1). A WAL
    file SQLite cannot read in place (a -wal without its -shm) is read beside a private copy of its
    -wal in TMPDIR (issue 23 item 1); a full TMPDIR is then one sentence. An empty -wal needs none."""
    import shutil

    db = demo_copy("current")
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    env = {**os.environ, "TMPDIR": str(disk.path)}
    live = sqlite3.connect(db)  # archon running: the database is in WAL mode with a -wal beside it
    try:
        live.execute("PRAGMA journal_mode = WAL")
        live.execute("PRAGMA wal_autocheckpoint = 0")
        live.execute("CREATE TABLE wal_only (b BLOB)")  # commits that stay in the -wal: ~400 KB of it
        live.executemany("INSERT INTO wal_only VALUES (randomblob(4000))", [()] * 100)
        live.commit()
        assert Path(f"{db}-wal").exists()
        in_place = subprocess.run(
            [sys.executable, "-m", "console", "--db", str(db), "approvals", "list"],
            capture_output=True, text=True, cwd=ROOT, timeout=30, env=env,
        )
        for suffix in ("", "-wal"):
            shutil.copyfile(f"{db}{suffix}", orphan / f"archon.db{suffix}")
    finally:
        live.close()
    assert in_place.returncode == 0, in_place.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(orphan / "archon.db"), "approvals", "list"],
        capture_output=True, text=True, cwd=ROOT, timeout=30, env=env,
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    # Refused before a byte is copied: the copy's size is checked against the free space first.
    assert "free; nothing was copied" in proc.stderr and "TMPDIR" in proc.stderr
    assert disk.entries() == []
    assert sorted(os.listdir(orphan)) == ["archon.db", "archon.db-wal"]
    conn = sqlite3.connect(orphan / "archon.db")  # fold the -wal in (closing removes -wal and -shm)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    (orphan / "archon.db-wal").write_bytes(b"")  # an empty -wal, as a crash can leave it
    proc = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(orphan / "archon.db"), "approvals", "list"],
        capture_output=True, text=True, cwd=ROOT, timeout=30, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert disk.entries() == []


def test_writing_a_wal_database_in_a_read_only_directory(tmp_path, disk, capsys):
    """SQLite cannot create the -wal and -shm it needs: said before trying, not "unable to open
    database file" from the middle of a command. (A read-only mount stands in for a 0555 directory:
    root ignores permission bits, not a read-only file system.)"""
    db = disk.path / "archon.db"
    disk.grow("8m")
    assert main(["demo", str(db), "--requests", "20"]) == 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    pending = conn.execute("SELECT id FROM approval_requests WHERE status = 'pending' LIMIT 1").fetchone()[0]
    conn.close()
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)  # archon stopped cleanly
    capsys.readouterr()
    disk.read_only()
    code, err = run(capsys, "--db", db, "approvals", "approve", pending, "--requester-unknown-ok")
    assert code == 3, err
    assert "cannot be written" in err and "--read-only" in err
    code, err = run(capsys, "--db", db, "approvals", "list")
    assert code == 0, err


@pytest.mark.parametrize("case", ["a-file", "read-only-disk"])
def test_keep_snapshot_into_an_unusable_directory(tmp_path, demo_copy, disk, monkeypatch, capsys, case):
    db = demo_copy("current")
    monkeypatch.setattr(console.tui.tui, "run_tui", lambda ctx, support=None, **_: 0)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here
    if case == "a-file":
        target = tmp_path / "a-file"
        target.write_text("not a directory")
    else:
        target = disk.path
        disk.read_only()
    code, err = run(capsys, "inspect", db, "--keep-snapshot", target)
    assert code == 2, err
    assert err.count("\n") <= 2


def _as_unprivileged_user() -> list[str]:
    """A command prefix that runs this package's CLI as `nobody`, or skip saying why."""
    import shutil
    import site

    if os.geteuid() != 0:
        pytest.skip("running a command as another user needs root")
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("runuser is not installed")
    paths = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    for python in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        prefix = [runuser, "-u", "nobody", "--", "env", f"PYTHONPATH={paths}", python]
        probe = subprocess.run([*prefix, "-c", "import console.cli.cli"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return prefix
    pytest.skip("no Python interpreter that the user nobody can run imports this package")


@pytest.mark.slow
def test_writing_a_wal_database_in_a_0555_directory_as_its_owner():
    """The reported case: a non-root owner, a 0555 directory, no -wal/-shm (archon stopped)."""
    import shutil
    import tempfile

    prefix = _as_unprivileged_user()
    base = Path(tempfile.mkdtemp(prefix="readonly-dir-test-", dir="/tmp"))
    try:
        base.chmod(0o755)
        directory = base / "db"
        directory.mkdir()
        db = directory / "archon.db"
        assert main(["demo", str(db), "--requests", "20"]) == 0
        shutil.chown(directory, "nobody")
        shutil.chown(db, "nobody")
        directory.chmod(0o555)
        approve = subprocess.run(
            [*prefix, "-m", "console", "--db", str(db), "approvals", "approve", "apr-00000008",
             "--requester-unknown-ok"], capture_output=True, text=True, timeout=30, cwd="/",
        )
        assert approve.returncode == 3, approve.stderr
        assert "Traceback" not in approve.stderr and "cannot be written" in approve.stderr
        listed = subprocess.run([*prefix, "-m", "console", "--db", str(db), "approvals", "list"],
                                capture_output=True, text=True, timeout=30, cwd="/")
        assert listed.returncode == 0, listed.stderr
        assert sorted(os.listdir(directory)) == ["archon.db"]
    finally:
        if (base / "db").exists():
            (base / "db").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_inspect_with_a_full_tmpdir(demo_copy, disk, monkeypatch, capsys):
    """`inspect` without --keep-snapshot snapshots into a private directory in TMPDIR: straight from
    the file (issue 23 item 1), refused before a byte is written when it cannot fit."""
    import tempfile

    db = demo_copy("current")
    monkeypatch.setattr(tempfile, "tempdir", str(disk.path))
    monkeypatch.setattr(console.tui.tui, "run_tui", lambda ctx, support=None, **_: 0)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here
    code, err = run(capsys, "inspect", db)
    assert disk.entries() == []
    assert code == 3, err
    assert "No space left on device" in err and "removed" in err
    disk.grow()
    assert run(capsys, "inspect", db)[0] == 0
    assert disk.entries() == []  # removed on exit
