"""A snapshot is verified by its content wherever it is moved (issue 9, finding 5).

Main compared the snapshot's SHA-256 only with a ledger row recording that exact path: a moved
snapshot, or any snapshot once a restore had removed the ledger, was restored unchecked. Now each
snapshot has a manifest beside it (console/db/snapshot_manifest.py), and `restore` looks the hash up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from console.services.upgrade.run import run_upgrade
from tests.adversarial.snapshot_helpers import NOW, _move, _restore, _tamper_one_byte, _upgraded
from tests.upgrade_helpers import db_1820, dump, fingerprint_dir, sha256

pytestmark = pytest.mark.slow


def test_the_manifest_is_written_beside_the_snapshot(tmp_path):
    path, _, snapshot = _upgraded(tmp_path)
    text = Path(f"{snapshot}.sha256").read_text()
    # `sha256sum -c` format, and the database it was taken from on comment lines it skips: its path,
    # its identity (never upgraded: this snapshot's own SHA-256) and its ledger's length then
    digest = sha256(snapshot)
    assert text == (f'{digest}  {snapshot.name}\n# source-database: "{path.resolve()}"\n'
                    f'# source-instance: "{digest}"\n# source-ledger: 0\n')
    if shutil.which("sha256sum"):
        check = subprocess.run(["sha256sum", "-c", "--strict", f"{snapshot.name}.sha256"], cwd=snapshot.parent)
        assert check.returncode == 0


def test_a_moved_snapshot_is_verified_by_its_manifest(tmp_path):
    path, before, snapshot = _upgraded(tmp_path)
    moved = _move(snapshot, tmp_path / "elsewhere", manifest=True)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "matches its manifest" in proc.stdout
    assert dump(path) == before


def test_a_tampered_moved_snapshot_is_refused(tmp_path):
    path, _, snapshot = _upgraded(tmp_path)
    moved = _move(snapshot, tmp_path / "elsewhere", manifest=True)
    _tamper_one_byte(moved)
    state = fingerprint_dir(tmp_path)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_UNUSABLE, proc.stderr
    assert "does not match the SHA-256 recorded in its manifest" in proc.stderr
    assert "Nothing was restored" in proc.stderr and "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == state


def test_a_snapshot_moved_without_its_manifest_is_found_in_the_ledger(tmp_path):
    path, before, snapshot = _upgraded(tmp_path)
    moved = _move(snapshot, tmp_path / "elsewhere", manifest=False)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "upgrade ledger" in proc.stdout
    assert dump(path) == before


def test_without_any_record_the_restore_needs_unverified(tmp_path):
    """After one restore the database has no ledger; a snapshot moved away from its manifest then
    matches no record. Main restored it unchecked, tampered or not."""
    path, before, snapshot = _upgraded(tmp_path)
    first = _restore(path, snapshot)
    assert first.returncode == EXIT_OK, first.stderr
    moved = _move(snapshot, tmp_path / "elsewhere", manifest=False)
    _tamper_one_byte(moved)
    state = fingerprint_dir(tmp_path)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_REFUSED, proc.stderr
    assert "matches no record" in proc.stderr and "--unverified" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == state
    forced = _restore(path, moved, "--unverified")
    assert forced.returncode == EXIT_OK, forced.stderr
    assert "UNVERIFIED" in forced.stdout


def test_a_manifest_found_by_hash_in_the_snapshots_directory(tmp_path):
    """Renamed in place, its manifest still under the old name: found by the hash it records."""
    path, before, snapshot = _upgraded(tmp_path)
    assert _restore(path, snapshot).returncode == EXIT_OK  # the ledger is gone now
    renamed = snapshot.with_name("keep-me.sqlite3")
    snapshot.rename(renamed)
    proc = _restore(path, renamed)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert f"{snapshot.name}.sha256" in proc.stdout


def test_a_symlinked_manifest_is_not_a_record(tmp_path):
    path, _, snapshot = _upgraded(tmp_path)
    assert _restore(path, snapshot).returncode == EXIT_OK  # the ledger is gone now
    moved = _move(snapshot, tmp_path / "elsewhere", manifest=False)
    real = tmp_path / "planted.txt"
    real.write_text(f"{sha256(moved)}  {moved.name}\n")
    os.symlink(real, f"{moved}.sha256")
    os.unlink(f"{snapshot}.sha256")  # no manifest of this hash beside the database either
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_REFUSED, proc.stderr
    assert "matches no record" in proc.stderr


def test_a_planted_manifest_name_is_skipped_not_followed(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = tmp_path / "archon.db.pre-upgrade-20260501T120000Z.sqlite3.sha256"
    os.symlink(victim, planted)
    result = run_upgrade(path, force=True, now=NOW)
    assert result.snapshot_path.endswith("-2.sqlite3")
    assert victim.read_text() == "precious\n" and planted.is_symlink()
    assert Path(f"{result.snapshot_path}.sha256").read_text().startswith(result.snapshot_sha256)
