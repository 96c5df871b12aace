"""Who could have placed a snapshot decides whether its manifest counts (issue 17, finding 6).

Main trusted a snapshot's `.sha256` before the ledger: whoever swapped the snapshot rewrote the
manifest too, and the restore said "verified", although the ledger inside the database being
replaced recorded another SHA-256 for that very path. Now the ledger outranks every manifest, and a
manifest counts only when nobody but the operator (or root) could have placed it and the snapshot
(console/db/file_trust.py, `untrusted_because`). Every case below restored as verified on main.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from tests.adversarial.snapshot_helpers import _restore, _tamper_one_byte, _upgraded
from tests.upgrade_helpers import dump, fingerprint_dir, sha256

pytestmark = pytest.mark.slow

OTHER_UID = 54321  # no account; what matters is that it is neither the operator nor root
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root (os.chown)")


def _rewrite_manifest(snapshot: Path) -> None:
    manifest = Path(f"{snapshot}.sha256")
    manifest.unlink()
    manifest.write_text(f"{sha256(snapshot)}  {snapshot.name}\n")


@pytest.mark.parametrize("unverified", [False, True])
def test_a_swapped_snapshot_with_a_rewritten_manifest_is_refused(tmp_path, unverified):
    """The ledger remembers another SHA-256 for this path: refused whatever the manifest (or --unverified) says."""
    path, _, snapshot = _upgraded(tmp_path)
    _tamper_one_byte(snapshot)  # still a sound archon database, no longer the one taken
    _rewrite_manifest(snapshot)
    state = fingerprint_dir(tmp_path)
    proc = _restore(path, snapshot, *(["--unverified"] if unverified else []))
    assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
    assert "upgrade ledger" in proc.stderr and "Nothing was restored" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == state


def test_a_snapshot_replaced_by_another_file_under_its_name_is_refused(tmp_path):
    """Not edited in place but renamed over (a new inode): the ledger row names the path, so it still counts."""
    path, _, snapshot = _upgraded(tmp_path)
    planted = tmp_path / "planted.sqlite3"
    shutil.copyfile(snapshot, planted)
    _tamper_one_byte(planted)
    os.replace(planted, snapshot)
    _rewrite_manifest(snapshot)
    proc = _restore(path, snapshot)
    assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
    assert "upgrade ledger" in proc.stderr


def test_the_ledger_still_verifies_its_own_snapshot(tmp_path):
    path, before, snapshot = _upgraded(tmp_path)
    proc = _restore(path, snapshot)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "upgrade ledger" in proc.stdout
    assert dump(path) == before


def _unrecorded(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A database with no ledger (one restore done) and its snapshot, which only a manifest can vouch for."""
    tmp_path.mkdir()
    path, before, snapshot = _upgraded(tmp_path)
    assert _restore(path, snapshot).returncode == EXIT_OK
    return path, snapshot, before


def _into(snapshot: Path, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    moved = directory / snapshot.name
    shutil.move(snapshot, moved)
    shutil.move(f"{snapshot}.sha256", f"{moved}.sha256")
    return moved


def _world_writable_dir(tmp, snapshot):
    moved = _into(snapshot, tmp / "shared")
    os.chmod(moved.parent, 0o777)
    return moved


def _group_writable_dir(tmp, snapshot):
    moved = _into(snapshot, tmp / "team")
    os.chmod(moved.parent, 0o770)
    return moved


def _world_writable_ancestor(tmp, snapshot):
    moved = _into(snapshot, tmp / "shared" / "mine")
    os.chmod(tmp / "shared", 0o777)  # anyone can rename "mine" away and put their own in its place
    os.chmod(moved.parent, 0o700)
    return moved


def _group_writable_manifest(tmp, snapshot):
    moved = _into(snapshot, tmp / "elsewhere")
    os.chmod(f"{moved}.sha256", 0o664)
    return moved


def _other_users_manifest(tmp, snapshot):
    moved = _into(snapshot, tmp / "elsewhere")
    os.chown(f"{moved}.sha256", OTHER_UID, OTHER_UID)
    return moved


def _other_users_snapshot(tmp, snapshot):
    moved = _into(snapshot, tmp / "elsewhere")
    os.chown(moved, OTHER_UID, OTHER_UID)
    return moved


def _other_users_directory(tmp, snapshot):
    moved = _into(snapshot, tmp / "theirs")
    os.chown(moved.parent, OTHER_UID, OTHER_UID)  # mode 0755: only they can write it, and they can
    return moved


def _renamed_beside_a_world_writable_database(tmp, snapshot):
    """Renamed in place; its manifest, under the old name, is found by hash in a directory anyone can write."""
    renamed = snapshot.with_name("keep-me.sqlite3")
    snapshot.rename(renamed)
    os.chmod(tmp, 0o777)
    return renamed


UNTRUSTED = {
    "world-writable directory": _world_writable_dir,
    "group-writable directory": _group_writable_dir,
    "world-writable ancestor": _world_writable_ancestor,
    "group-writable manifest": _group_writable_manifest,
    "manifest of another uid": pytest.param(_other_users_manifest, marks=needs_root),
    "snapshot of another uid": pytest.param(_other_users_snapshot, marks=needs_root),
    "directory of another uid": pytest.param(_other_users_directory, marks=needs_root),
    "found by hash in a world-writable directory": _renamed_beside_a_world_writable_database,
}


@pytest.mark.parametrize("place", list(UNTRUSTED.values()), ids=list(UNTRUSTED))
def test_a_manifest_another_user_could_have_placed_does_not_count(tmp_path, place):
    path, snapshot, before = _unrecorded(tmp_path / "db")
    moved = place(tmp_path / "db", snapshot)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "matches no record" in proc.stderr and "does not count" in proc.stderr
    assert "--unverified" in proc.stderr and "Traceback" not in proc.stderr
    forced = _restore(path, moved, "--unverified")
    assert forced.returncode == EXIT_OK, forced.stderr
    assert "UNVERIFIED" in forced.stdout
    assert dump(path) == before


def _private_dir(tmp, snapshot):
    moved = _into(snapshot, tmp / "mine")
    os.chmod(moved.parent, 0o700)
    return moved


def _sticky_dir(tmp, snapshot):
    """Like /tmp: others can add files but not rename or remove the operator's (documented decision)."""
    moved = _into(snapshot, tmp / "sticky")
    os.chmod(moved.parent, 0o1777)
    return moved


@pytest.mark.parametrize("place", [_private_dir, _sticky_dir], ids=["private directory", "sticky directory"])
def test_a_manifest_only_the_operator_could_have_placed_counts(tmp_path, place):
    path, snapshot, before = _unrecorded(tmp_path / "db")
    moved = place(tmp_path / "db", snapshot)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "matches its manifest" in proc.stdout
    assert dump(path) == before


def test_a_swap_in_a_shared_directory_needs_unverified_and_says_so(tmp_path):
    """No ledger to catch it: the swapped snapshot and rewritten manifest in a shared directory are unverified."""
    path, snapshot, _ = _unrecorded(tmp_path / "db")
    moved = _world_writable_dir(tmp_path / "db", snapshot)
    _tamper_one_byte(moved)
    _rewrite_manifest(moved)
    proc = _restore(path, moved)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "other users can write the directory" in proc.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=st.integers(0o700, 0o7777))
def test_directory_modes(tmp_path, mode):
    """Every directory mode: counted exactly when no one else can write it, or it is sticky."""
    from console.db.file_trust import untrusted_because

    directory = tmp_path / f"d{mode:o}"
    directory.mkdir(exist_ok=True)
    snapshot, manifest = directory / "s.sqlite3", directory / "s.sqlite3.sha256"
    for f in (snapshot, manifest):
        f.touch(mode=0o600)
    try:
        os.chmod(directory, mode)
        why = untrusted_because(manifest, snapshot)
    finally:
        os.chmod(directory, 0o700)
    shared = bool(mode & (stat.S_IWGRP | stat.S_IWOTH)) and not mode & stat.S_ISVTX
    assert (why is not None) == shared, (oct(mode), why)
