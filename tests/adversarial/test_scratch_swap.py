"""Output directories another user could write are refused, and nothing the console writes can be
swapped under it (issue 17, finding 7; console/db/files.py `require_output_dir`).

The reported attack: `--keep-snapshot DIR` in a directory another user owns; the console worked by
path in a `scratch` subdirectory there, so that user swapped it mid-copy, read the operator's
-wal/-shm and had their own main file published as the support snapshot. Now every option naming an
output directory or file refuses a directory (or a directory above it) that another user owns or can
write without the sticky bit, and a symlink as the directory itself; scratch work happens in a
private 0700 directory in the temp directory, and the snapshot is written through a descriptor held
on the directory that was checked. The ownership tests need root (to hand a directory to uid 65534).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import console.tui.tui
from console.cli.cli import main
from console.db import readonly
from console.errors import UsageError
from tests import damage

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another uid needs root")


def _hostile_dirs(tmp_path: Path) -> dict[str, Path]:
    """Directories another user could swap things in, by each way that can happen."""
    made = {}
    owned = tmp_path / "owned-by-nobody"
    owned.mkdir(mode=0o755)
    os.chown(owned, NOBODY, NOBODY)
    made["owned by another user"] = owned
    world = tmp_path / "world-writable"
    world.mkdir()
    world.chmod(0o777)
    made["world-writable, not sticky"] = world
    group = tmp_path / "group-writable"
    group.mkdir()
    group.chmod(0o770)
    made["group-writable, not sticky"] = group
    parent = tmp_path / "open-parent"
    parent.mkdir()
    parent.chmod(0o777)
    (parent / "mine").mkdir(mode=0o700)
    made["under a world-writable parent"] = parent / "mine"
    good = tmp_path / "good"
    good.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(good)
    made["a symlink to a good directory"] = tmp_path / "link"
    return made


def _commands(db: Path, where: Path) -> dict[str, list[str]]:
    return {
        "inspect --keep-snapshot": ["inspect", str(db), "--keep-snapshot", str(where), "--no-tui"],
        "upgrade --snapshot-dir": ["--db", str(db), "upgrade", "--force", "--snapshot-dir", str(where)],
        "upgrade --plan --snapshot-dir": ["--db", str(db), "upgrade", "--plan", "--snapshot-dir", str(where)],
        "doctor --bundle": ["doctor", str(db), "--bundle", str(where / "out.zip")],
        "approvals watch --cursor": ["--db", str(db), "approvals", "watch", "--cursor", str(where / "cursor")],
    }


@pytest.mark.slow
@root_only
@pytest.mark.parametrize("command", list(_commands(Path("x"), Path("y"))))
def test_every_output_option_refuses_a_directory_others_can_write(tmp_path, command):
    """Real processes (`approvals watch` would otherwise stream for ever): the timeout fails the test."""
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    for why, where in _hostile_dirs(tmp_path).items():
        before = sorted(os.listdir(where))
        argv = _commands(db, where)[command]
        try:
            done = subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True,
                                  cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command} into a directory {why} was not refused: it ran on")
        err = done.stderr
        assert done.returncode == 2, (why, err)
        assert "Traceback" not in err and err.count("\n") <= 2, (why, err)
        assert sorted(os.listdir(where)) == before, why  # nothing written, not even a scratch file


@pytest.mark.parametrize("mode", [0o700, 0o1777])
def test_own_and_sticky_directories_are_accepted(tmp_path, monkeypatch, capsys, mode):
    monkeypatch.setattr(console.tui.tui, "run_tui", lambda ctx, support=None, **_: 0)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    keep = tmp_path / "keep"
    keep.mkdir()
    keep.chmod(mode)
    assert main(["inspect", str(db), "--keep-snapshot", str(keep)]) == 0, capsys.readouterr().err
    (kept,) = keep.iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


STEPS = ("scratch", "copied", "backed-up", "partial")


@root_only
@pytest.mark.parametrize("step", STEPS)
def test_swapping_the_directory_at_any_step_publishes_nothing_there(tmp_path, monkeypatch, step):
    """At each step the kept directory is renamed away and another user's directory, holding their
    planted main file and -wal, put in its place. The snapshot still lands in the directory that was
    checked, holds the operator's data, and the replacement receives nothing; the scratch work is
    never in either directory."""
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    keep = tmp_path / "keep"
    keep.mkdir(mode=0o700)
    moved = tmp_path / "keep.moved"
    seen: list[str] = []

    def swap(reached: str) -> None:
        seen.append(reached)
        scratch_dirs = [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("archon-console-scratch.*")]
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in scratch_dirs)
        if reached != step:
            return
        keep.rename(moved)
        keep.mkdir(mode=0o755)
        planted = damage.not_sqlite(keep / "planted.sqlite")
        os.chown(keep, NOBODY, NOBODY)
        os.chown(planted, NOBODY, NOBODY)

    monkeypatch.setattr(readonly, "reached", swap)
    final = readonly.snapshot_copy(db, keep, name="support.sqlite", option="--keep-snapshot")
    assert step in seen
    assert sorted(p.name for p in keep.iterdir()) == ["planted.sqlite"]  # the replacement got nothing
    published = moved / "support.sqlite"
    assert final.name == published.name and published.exists()
    assert sorted(p.name for p in moved.iterdir()) == ["support.sqlite"]  # no scratch, no partial
    assert stat.S_IMODE(published.stat().st_mode) == 0o600
    conn = sqlite3.connect(f"file:{published}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM projects").fetchone()[0] == 2  # the operator's data
    finally:
        conn.close()


@root_only
def test_a_replacement_owned_by_another_user_before_the_directory_is_opened_is_refused(tmp_path, monkeypatch):
    """Between the check by name and the open, the directory is replaced by another user's: the
    check through the held descriptor refuses it."""
    from console.db import files

    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    keep = tmp_path / "keep"
    keep.mkdir(mode=0o700)
    checked = files.require_output_dir

    def check_then_swap(directory, option, **kw):
        result = checked(directory, option, **kw)
        keep.rename(tmp_path / "keep.moved")
        keep.mkdir(mode=0o755)
        os.chown(keep, NOBODY, NOBODY)
        return result

    monkeypatch.setattr(readonly, "require_output_dir", check_then_swap)
    with pytest.raises(UsageError, match="owned by uid"):
        readonly.snapshot_copy(db, keep, name="support.sqlite", option="--keep-snapshot")
    assert list(keep.iterdir()) == []
