"""An upgraded 1.8.20 file and its snapshot, moved, tampered with and restored: the pieces the snapshot
identity and trust tests share (tests/adversarial/test_snapshot_identity.py, test_snapshot_trust.py,
test_trust_walk.py)."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import db_1820, dump, run_cli

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def _upgraded(tmp_path: Path):
    path = db_1820(tmp_path / "archon.db")
    before = dump(path)
    result = run_upgrade(path, force=True, now=NOW)
    return path, before, Path(result.snapshot_path)


def _move(snapshot: Path, directory: Path, *, manifest: bool) -> Path:
    directory.mkdir(exist_ok=True)
    moved = directory / f"renamed-{snapshot.name}"
    shutil.move(snapshot, moved)
    if manifest:
        shutil.move(f"{snapshot}.sha256", f"{moved}.sha256")
    return moved


def _tamper_one_byte(snapshot: Path) -> None:
    """Change one letter of a row's text: still a sound SQLite file, no longer the one taken."""
    data = bytearray(snapshot.read_bytes())
    at = data.index(b"/srv/repo1")  # a project's repo_path (tests/reference/rows.py), not indexed
    data[at + 1] = ord("S")
    snapshot.write_bytes(bytes(data))


def _restore(path: Path, snapshot: Path, *extra: str):
    return run_cli("--db", str(path), "restore", str(snapshot), "--yes", *extra)
