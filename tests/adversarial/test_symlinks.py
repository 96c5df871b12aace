"""Planted symlinks are never followed: every file the console creates is created exclusively
(issue 9, finding 4; console/db/files.py). Bundles have their own test module.

Each test works in a shared, sticky (1777) directory where another user could have planted a
symlink at every name the command can predict, each pointing at a victim file outside, and
asserts the victim is unchanged (or, for a dangling link, never created) while the command
either succeeds under another name or refuses in one sentence.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

import console.tui.tui
from console.cli.cli import main
from console.db import files
from console.db.snapshot import snapshot_name
from console.demo.writer import generate
from console.errors import ConsoleError
from console.services.upgrade.restore import restore_snapshot
from console.services.upgrade.run import run_upgrade
from console.services.upgrade.restore import aside_name as _aside_name
from tests import damage
from tests.upgrade_helpers import db_1820

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
LATER = datetime(2026, 5, 1, 13, 0, 0, tzinfo=timezone.utc)
SIDE = ("", "-journal", "-wal", "-shm", ".partial", ".partial-journal", ".tmp", ".tmp-journal")


@pytest.fixture
def shared(tmp_path) -> Path:
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o1777)
    return directory


@pytest.fixture
def victim(tmp_path):
    """A SQLite file the attacker wants overwritten (SQLite would happily back up into it), and how
    to tell it was not."""
    path = tmp_path / "victim.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE precious(x)")
    conn.execute("INSERT INTO precious VALUES ('the operator''s own data')")
    conn.commit()
    conn.close()
    state = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)

    def unchanged() -> bool:
        return (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == state

    unchanged.path = path
    return unchanged


def plant(directory: Path, names, target: Path) -> list[Path]:
    planted = []
    for name in names:
        for suffix in SIDE:
            link = directory / f"{name}{suffix}"
            if not os.path.lexists(link):
                link.symlink_to(target)
                planted.append(link)
    return planted


def _no_tui(monkeypatch):
    monkeypatch.setattr(console.tui.tui, "run_tui", lambda ctx, support=None, **_: 0)
    monkeypatch.setattr(console.tui.tui, "require_terminal", lambda **_: None)  # no terminal here


def test_inspect_keep_snapshot_does_not_write_through_a_planted_partial(tmp_path, shared, victim, monkeypatch, capsys):
    """The reported attack: links at the kept snapshot's predictable partial names."""
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2026-05-01T12:00:00Z")
    _no_tui(monkeypatch)
    final = "archon.support-20260501T120000Z.sqlite"
    for suffix in SIDE[1:]:
        (shared / f"{final}{suffix}").symlink_to(victim.path)
    assert main(["inspect", str(db), "--keep-snapshot", str(shared)]) == 0, capsys.readouterr().err
    assert victim()
    kept = shared / final
    assert kept.is_file() and not kept.is_symlink()
    assert kept.read_bytes()[:16] == b"SQLite format 3\x00"
    assert all((shared / f"{final}{s}").is_symlink() for s in SIDE[1:])  # left alone, not removed
    assert not [p for p in shared.iterdir() if p.name.startswith(".archon-console-")]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-victim", "dangling"])
def test_inspect_keep_snapshot_refuses_a_planted_final_name(tmp_path, shared, victim, monkeypatch, capsys, dangling):
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2026-05-01T12:00:00Z")
    _no_tui(monkeypatch)
    target = tmp_path / "not-yet.db" if dangling else victim.path
    plant(shared, ["archon.support-20260501T120000Z.sqlite"], target)
    code = main(["inspect", str(db), "--keep-snapshot", str(shared)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "already exists" in err and "Traceback" not in err
    assert victim()
    assert not (tmp_path / "not-yet.db").exists()


@pytest.mark.slow
def test_upgrade_snapshot_takes_another_name_beside_planted_links(shared, victim):
    db = db_1820(shared / "archon.db")
    taken = snapshot_name(db, NOW)
    base = Path(taken)
    plant(shared, [taken, f"{base.stem}-2{base.suffix}"], victim.path)
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir=shared)
    assert Path(result.snapshot_path).name == f"{base.stem}-3{base.suffix}"
    assert not Path(result.snapshot_path).is_symlink()
    assert victim()


@pytest.mark.slow
def test_restore_keeps_the_replaced_file_under_another_name(shared, victim):
    db = db_1820(shared / "archon.db")
    result = run_upgrade(db, force=True, now=NOW)
    planted = plant(shared, [_aside_name(db, LATER).name], victim.path)
    restored = restore_snapshot(db, result.snapshot_path, yes=True, now=LATER)
    assert restored.replaced_path and Path(restored.replaced_path) not in planted
    assert not Path(restored.replaced_path).is_symlink()
    assert victim()


def test_restore_aside_without_hard_links_does_not_follow_a_dangling_link(shared, tmp_path, monkeypatch):
    """On a file system without hard links the replaced file is copied: exclusively, not through a link."""
    db = db_1820(shared / "archon.db")
    result = run_upgrade(db, force=True, now=NOW)
    elsewhere = tmp_path / "attacker-reads-this.db"
    (shared / _aside_name(db, LATER).name).symlink_to(elsewhere)

    def no_links(*_a, **_k):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    restored = restore_snapshot(db, result.snapshot_path, yes=True, now=LATER)
    assert not elsewhere.exists()
    assert restored.replaced_path == f"{shared / _aside_name(db, LATER).name}-2"
    assert not Path(restored.replaced_path).is_symlink()


def test_demo_refuses_a_planted_target_and_ignores_planted_temporaries(shared, victim, tmp_path):
    dangling = tmp_path / "never-created.db"
    (shared / "demo.db").symlink_to(dangling)
    with pytest.raises(ConsoleError, match="already exists"):
        generate(shared / "demo.db", requests=5, environments=2, projects=1, now=NOW)
    assert not dangling.exists()
    # Every temporary name the old writer used, for this very process.
    plant(shared, [f".other.db.demo-{os.getpid()}.tmp"], victim.path)
    summary = generate(shared / "other.db", requests=5, environments=2, projects=1, now=NOW)
    assert summary.path.is_file() and not summary.path.is_symlink()
    assert victim()


def test_demo_overwrite_replaces_a_link_never_its_target(shared, victim):
    (shared / "demo.db").symlink_to(victim.path)
    generate(shared / "demo.db", requests=5, environments=2, projects=1, now=NOW, overwrite=True)
    assert victim()
    assert not (shared / "demo.db").is_symlink()


def test_publish_never_replaces_what_is_there(tmp_path, victim):
    tmp = files.create_exclusive(tmp_path, "x.", ".tmp")
    (tmp_path / "final").symlink_to(victim.path)
    with pytest.raises(FileExistsError):
        files.publish(tmp, tmp_path / "final")
    assert tmp.exists() and victim()
    assert files.publish_unique(tmp, tmp_path / "final").name == "final-2"
