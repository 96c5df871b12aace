"""A database named through a symbolic link is read with the side files SQLite uses: those beside
the link's target (SQLite names its -wal and -shm after the path with every link resolved).

The read-only readers looked beside the link instead (console/db/locked_copy.py `sidecars`): a
crashed archon's -wal beside the target was not seen (the main file was read `immutable=1`, its
commits silently missing), and a -wal planted beside the link was read as the database's.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.adversarial.test_incomplete_sidecars import COMMANDS, _crashed, _run, box  # noqa: F401 (fixture)
from tests.untouched import fingerprint_dir

ONLY = "req-only-in-the-wal"


def _linked(base: Path) -> tuple[Path, Path]:
    """A crashed archon's database (its commits partly in a -wal, no -shm) and a link to it elsewhere."""
    db = _crashed(base / "db", keep=("-wal",))
    links = base / "links"
    links.mkdir()
    os.chmod(links, 0o755)
    link = links / "archon.db"
    link.symlink_to(db)
    return db, link


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_wal_beside_the_links_target_is_read(box, command):
    base, tmpdir = box
    db, link = _linked(base)
    before, beside_link = fingerprint_dir(db.parent), sorted(os.listdir(link.parent))
    argv, only_in_the_wal = COMMANDS[command]
    result = _run(link, tmpdir, *argv)
    assert result["code"] in ((0, 1) if command == "doctor" else (0,)), result["err"]
    assert only_in_the_wal in result["out"], result["out"][-2000:]  # was: read immutable, commits missing
    assert fingerprint_dir(db.parent) == before
    assert sorted(os.listdir(link.parent)) == beside_link
    assert list(tmpdir.iterdir()) == []


def test_inspect_keeps_the_commits_of_the_targets_wal(box):
    base, tmpdir = box
    db, link = _linked(base)
    before = fingerprint_dir(db.parent)
    result = _run(link, tmpdir, "inspect", "{db}", "--keep-snapshot", "{out}", "--no-tui")
    assert result["code"] == 0, result["err"]
    conn = sqlite3.connect(f"file:{result['out'].strip()}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM approval_requests WHERE id = ?", (ONLY,)).fetchone() == (1,)
    finally:
        conn.close()
    assert fingerprint_dir(db.parent) == before
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("command", ["approvals list", "approvals show"])
def test_a_wal_planted_beside_the_link_is_not_the_databases(box, command):
    """The target has no -wal (SQLite reads its main file alone: no such request); a -wal that holds
    the request lies beside the link, where SQLite never looks."""
    base, tmpdir = box
    crashed = _crashed(base / "crashed", keep=("-wal",))
    target = base / "db"
    target.mkdir()
    shutil.copyfile(crashed, target / "archon.db")  # the commit point before the -wal's commits
    links = base / "links"
    links.mkdir()
    link = links / "archon.db"
    link.symlink_to(target / "archon.db")
    shutil.copyfile(f"{crashed}-wal", f"{link}-wal")
    truth = sqlite3.connect(f"file:{target / 'archon.db'}?immutable=1", uri=True)
    assert truth.execute("SELECT count(*) FROM approval_requests WHERE id = ?", (ONLY,)).fetchone() == (0,)
    truth.close()
    before, planted = fingerprint_dir(target), fingerprint_dir(links)
    result = _run(link, tmpdir, *COMMANDS[command][0])
    assert ONLY not in result["out"], result["out"]  # was: the planted -wal's commits shown as the database's
    assert fingerprint_dir(target) == before and fingerprint_dir(links) == planted
    assert list(tmpdir.iterdir()) == []
