"""Trusting an existing file: one rule, judged on the very file that is read (issue 17, finding 6, attacked as a class).

The first fix of finding 6 judged a manifest by separate path lookups and applied the rule to
restore alone. An attacker then got a file of theirs restored as "verified" five ways, each below
failing on that code: through upgrade's snapshot reuse (a planted candidate in a sticky directory,
and a swap between the compare and the hash), through a symbolic link in the snapshot's path
(checked by one lookup, read by others), with a trusted manifest taken from another database, with
a ledger read from a database another user can write, and through the relative paths older
consoles stored. Now one walk (console/db/file_trust.py) judges every name from `/` down and hands
over descriptors; restore, reuse and the ledger's database all go through it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.db import snapshot_reuse
from console.db.detect import LEDGER_META_TABLE
from console.db.file_trust import open_judged, untrusted_because
from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE, DatabaseUnusable, Refusal
from console.services.upgrade import restore as restore_module, restore_records
from console.services.upgrade.run import run_upgrade
from tests.adversarial.snapshot_helpers import NOW, _restore, _tamper_one_byte, _upgraded
from tests.upgrade_helpers import db_1820, dump, fingerprint_dir, sha256

pytestmark = pytest.mark.slow

OTHER_UID = 54321  # no account; what matters is that it is neither the operator nor root
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root (os.lchown)")


def _ledger_rows(path: Path) -> set[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return set(conn.execute(f'SELECT DISTINCT snapshot_path, snapshot_sha256 FROM "{LEDGER_META_TABLE}"'))
    finally:
        conn.close()


def _write_manifest(snapshot: Path, digest: str) -> Path:
    manifest = Path(f"{snapshot}.sha256")
    manifest.unlink(missing_ok=True)
    manifest.write_text(f"{digest}  {snapshot.name}\n")
    os.chmod(manifest, 0o644)
    return manifest


# --- T1: upgrade's snapshot reuse ---------------------------------------------------------------


def _candidate(db: Path, directory: Path) -> Path:
    """A snapshot-named file equal to the database now, with a manifest: what reuse looks for."""
    name = f"{db.name}.pre-upgrade-20991231T235959Z.sqlite3"
    target = directory / name
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = sqlite3.connect(target)
    src.backup(out)
    out.execute("PRAGMA journal_mode=DELETE")
    src.close()
    out.close()
    os.chmod(target, 0o600)
    _write_manifest(target, sha256(target))
    return target


def _evil_copy(candidate: Path) -> Path:
    evil = candidate.with_name(".evil")
    shutil.copyfile(candidate, evil)
    conn = sqlite3.connect(evil)
    conn.execute("UPDATE projects SET name = 'PWNED'")
    conn.commit()
    conn.close()
    assert evil.stat().st_size == candidate.stat().st_size
    return evil


def test_reuse_takes_the_operators_own_candidate(tmp_path):
    """The mechanism still works: a candidate only the operator could have placed is reused."""
    db = db_1820(tmp_path / "archon.db")
    snaps = tmp_path / "snaps"
    snaps.mkdir(mode=0o700)
    candidate = _candidate(db, snaps)
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir=snaps)
    assert result.snapshot_reused and result.snapshot_path == str(candidate)


@needs_root
def test_reuse_ignores_a_candidate_another_user_planted_in_a_sticky_directory(tmp_path):
    db = db_1820(tmp_path / "archon.db")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    planted = _candidate(db, shared)
    for f in (planted, Path(f"{planted}.sha256")):
        os.chown(f, OTHER_UID, OTHER_UID)
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir=shared)
    assert not result.snapshot_reused
    assert str(planted) not in {p for p, _ in _ledger_rows(db)}


@needs_root
def test_a_newer_planted_candidate_does_not_hide_the_operators_own(tmp_path):
    db = db_1820(tmp_path / "archon.db")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    own = _candidate(db, shared)
    planted = own.with_name(own.name.replace("20991231T235959Z", "20991231T235959Z-2"))
    shutil.copyfile(own, planted)
    _write_manifest(planted, sha256(planted))
    for f in (planted, Path(f"{planted}.sha256")):
        os.chown(f, OTHER_UID, OTHER_UID)
    future = own.stat().st_mtime + 3600
    os.utime(planted, (future, future))
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir=shared)
    assert result.snapshot_reused and result.snapshot_path == str(own)


def test_reuse_hashes_the_file_it_compared(tmp_path, monkeypatch):
    """Swapped between the content comparison and the hash: the held descriptor still reads the compared file."""
    db = db_1820(tmp_path / "archon.db")
    snaps = tmp_path / "snaps"
    snaps.mkdir(mode=0o700)
    candidate = _candidate(db, snaps)
    evil = _evil_copy(candidate)
    evil_digest = sha256(evil)
    _write_manifest(candidate, evil_digest)  # the manifest names the file that will be swapped in
    real = snapshot_reuse.same_content

    def compare_then_swap(live, copy):
        equal = real(live, copy)
        os.replace(evil, candidate)
        return equal

    monkeypatch.setattr(snapshot_reuse, "same_content", compare_then_swap)
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir=snaps)
    assert not result.snapshot_reused
    assert evil_digest not in {sha for _, sha in _ledger_rows(db)}


# --- T2: a symbolic link in the snapshot's path ------------------------------------------------


def _unrecorded(tmp_path: Path):
    """A database with no ledger (one restore done) and its snapshot: only a manifest can vouch."""
    path, before, snapshot = _upgraded(tmp_path)
    assert _restore(path, snapshot).returncode == EXIT_OK
    return path, snapshot, before


@needs_root
def test_a_snapshot_reached_through_another_users_link_needs_unverified(tmp_path):
    path, snapshot, before = _unrecorded(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / "snaps"
    link.symlink_to(snapshot.parent)
    os.lchown(link, OTHER_UID, OTHER_UID)  # they can point it anywhere at any moment
    proc = _restore(path, link / snapshot.name)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert f"uid {OTHER_UID}" in proc.stderr and "--unverified" in proc.stderr
    assert dump(path) == before


def test_a_link_in_a_directory_anyone_can_write_needs_unverified(tmp_path):
    path, snapshot, _ = _unrecorded(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # not sticky: anyone can replace the link
    (shared / "snaps").symlink_to(snapshot.parent)
    proc = _restore(path, shared / "snaps" / snapshot.name)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "other users can write the directory" in proc.stderr


FLIPS = {
    # the attacker's inotify script: evil while checked and hashed, good while judged, evil for the copy
    "as the attack did": {"_verify_snapshot": "evil", "untrusted_because": "good", "_write_restored_copy": "evil"},
    "only before the copy": {"_write_restored_copy": "evil"},
    "only before the trust is judged": {"untrusted_because": "evil", "identify": "evil"},
}


def _owner(name: str):
    """The module whose global `name` the restore calls (the records' checks live beside it)."""
    return restore_records if hasattr(restore_records, name) and name != "identify" else restore_module


@pytest.mark.parametrize("flips", list(FLIPS.values()), ids=list(FLIPS))
def test_check_hash_and_copy_read_one_file_whatever_the_path_names_meanwhile(tmp_path, monkeypatch, flips):
    """A link (here the operator's own, so only the read-once rule is tested) flipped between the
    steps of a restore: the restore reads one file through one descriptor, so whatever the link names
    meanwhile, it restores the file it judged and hashed, or refuses; never the other file."""
    path, snapshot, before = _unrecorded(tmp_path)
    good_dir = snapshot.parent
    evil_dir = tmp_path / "evil"
    evil_dir.mkdir(mode=0o700)
    evil = evil_dir / snapshot.name
    shutil.copyfile(snapshot, evil)
    _tamper_one_byte(evil)
    _write_manifest(evil, sha256(evil))
    link = tmp_path / "snaps"

    def point(target: Path) -> None:
        tmp = tmp_path / "snaps.next"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)

    point(good_dir)
    for name, where in flips.items():
        module = _owner(name)
        real = getattr(module, name)

        def wrapper(*args, _real=real, _target=evil_dir if where == "evil" else good_dir, **kwargs):
            point(_target)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)
    try:
        result = restore_module.restore_snapshot(path, link / snapshot.name, yes=True)
    except (DatabaseUnusable, Refusal) as exc:
        assert "nothing was restored" in exc.reason.lower(), exc.reason
    else:
        assert result.sha256 == sha256(snapshot), result.message
    assert dump(path) == before


# --- T3: a manifest speaks for the database it was taken from ------------------------------------


def _two_databases(tmp_path: Path):
    backups = tmp_path / "backups"
    backups.mkdir(mode=0o700)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = db_1820(tmp_path / "a" / "archon.db", projects=3)
    b = db_1820(tmp_path / "b" / "archon.db")
    before_b = dump(b)
    snap_b = Path(run_upgrade(b, force=True, now=NOW, snapshot_dir=backups).snapshot_path)
    snap_a = Path(run_upgrade(a, force=True, now=NOW, snapshot_dir=backups).snapshot_path)
    assert sha256(snap_a) != sha256(snap_b)
    return a, b, snap_a, snap_b, before_b


def test_another_databases_snapshot_is_refused_whatever_verifies_it(tmp_path):
    """Its manifest vouches for its content, not for putting it over another database: exit 3, and
    --unverified (which speaks of the content) does not override it; only --other-database does."""
    a, b, snap_a, _, _ = _two_databases(tmp_path)
    state = fingerprint_dir(tmp_path)
    for extra in ((), ("--unverified",)):
        proc = _restore(b, snap_a, *extra)
        assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
        assert "another database" in proc.stderr and "--other-database" in proc.stderr
        assert fingerprint_dir(tmp_path) == state
    forced = _restore(b, snap_a, "--other-database")
    assert forced.returncode == EXIT_OK, forced.stderr
    assert "--other-database" in forced.stdout


def test_the_databases_own_snapshot_still_restores_verified(tmp_path):
    _, b, _, snap_b, before_b = _two_databases(tmp_path)
    proc = _restore(b, snap_b)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert dump(b) == before_b
    # restored to its pre-upgrade state, b has no ledger: its snapshot's manifest names it, so it counts
    again = _restore(b, snap_b)
    assert again.returncode == EXIT_OK and "matches its manifest" in again.stdout, again.stderr


def _unbind(snapshot: Path) -> None:
    """The manifest an older console wrote: the hash line only."""
    _write_manifest(snapshot, sha256(snapshot))


def test_an_unbound_manifest_does_not_count_where_the_ledger_records_other_snapshots(tmp_path):
    _, b, snap_a, _, _ = _two_databases(tmp_path)
    _unbind(snap_a)
    proc = _restore(b, snap_a)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "records its own snapshots and this one is not among them" in proc.stderr


def test_an_unbound_manifest_still_verifies_but_its_origin_needs_the_override(tmp_path):
    """Old manifests stay readable: a database whose ledger records nothing has only them. They vouch
    for the content but name no database, so the restore says so and needs --other-database
    (docs/decisions.md, "A snapshot names its database")."""
    path, snapshot, before = _unrecorded(tmp_path)
    _unbind(snapshot)
    proc = _restore(path, snapshot)
    assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
    assert "does not say which database it was taken from" in proc.stderr
    proc = _restore(path, snapshot, "--other-database")
    assert proc.returncode == EXIT_OK and "matches its manifest" in proc.stdout, proc.stderr
    assert dump(path) == before


# --- T4: the ledger counts only from a database only the operator could have written -------------


def _swap_with_ledger_cell(path: Path, snapshot: Path) -> None:
    """The swap of the repro: a changed snapshot, its manifest gone, the ledger cell rewritten."""
    _tamper_one_byte(snapshot)
    Path(f"{snapshot}.sha256").unlink()
    conn = sqlite3.connect(path)
    conn.execute(f'UPDATE "{LEDGER_META_TABLE}" SET snapshot_sha256 = ?', (sha256(snapshot),))
    conn.commit()
    conn.close()


@needs_root
def test_the_ledger_of_a_database_another_user_can_write_does_not_vouch(tmp_path):
    home = tmp_path / "archon"
    home.mkdir()
    path, _, snapshot = _upgraded(home)
    os.chown(home, OTHER_UID, OTHER_UID)  # archon's service user owns its directory, as by default
    _swap_with_ledger_cell(path, snapshot)
    proc = _restore(path, snapshot)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "upgrade ledger does not count because" in proc.stderr and f"uid {OTHER_UID}" in proc.stderr
    forced = _restore(path, snapshot, "--unverified")
    assert forced.returncode == EXIT_OK and "UNVERIFIED" in forced.stdout


@needs_root
def test_snapshots_kept_in_the_operators_own_directory_still_verify(tmp_path):
    """The usual layout (archon's user owns the database's directory): the manifest of a snapshot
    root kept in its own directory counts for a snapshot the ledger lists (docs/decisions.md, D8)."""
    home = tmp_path / "archon"
    home.mkdir()
    mine = tmp_path / "backups"
    mine.mkdir(mode=0o700)
    path = db_1820(home / "archon.db")
    before = dump(path)
    snapshot = run_upgrade(path, force=True, now=NOW, snapshot_dir=mine).snapshot_path
    os.chown(home, OTHER_UID, OTHER_UID)
    os.chown(path, OTHER_UID, OTHER_UID)
    proc = _restore(path, Path(snapshot))
    assert proc.returncode == EXIT_OK and "matches its manifest" in proc.stdout, proc.stderr
    assert dump(path) == before


def test_a_ledger_that_is_not_the_consoles_history_does_not_vouch(tmp_path):
    path, _, snapshot = _upgraded(tmp_path)
    _swap_with_ledger_cell(path, snapshot)
    conn = sqlite3.connect(path)
    conn.execute(f'UPDATE "{LEDGER_META_TABLE}" SET checksum = \'edited\' WHERE position = 1')
    conn.commit()
    conn.close()
    proc = _restore(path, snapshot)
    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "not the history this console writes" in proc.stderr


# --- T5: the ledger stores absolute paths; older relative rows still match ----------------------


def test_a_relative_snapshot_dir_is_recorded_as_an_absolute_path(tmp_path, monkeypatch):
    db = db_1820(tmp_path / "archon.db")
    (tmp_path / "snaps").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run_upgrade(db, force=True, now=NOW, snapshot_dir="snaps")
    paths = {p for p, _ in _ledger_rows(db)}
    assert paths == {str(tmp_path / "snaps" / Path(result.snapshot_path).name)}
    assert Path(result.snapshot_path).is_absolute()


def test_an_older_relative_ledger_row_still_catches_a_swap(tmp_path):
    """Rows of older consoles are relative to the upgrade's working directory (the database's here):
    a swapped snapshot with a rewritten manifest is still refused from any other directory."""
    path, _, snapshot = _upgraded(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute(f'UPDATE "{LEDGER_META_TABLE}" SET snapshot_path = ?', (snapshot.name,))
    conn.commit()
    conn.close()
    _tamper_one_byte(snapshot)
    _write_manifest(snapshot, sha256(snapshot))
    proc = _restore(path, snapshot)  # run from the repository's directory, not the database's
    assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
    assert "upgrade ledger" in proc.stderr


# --- the rule, over generated paths --------------------------------------------------------------

MODES = [0o700, 0o755, 0o775, 0o777, 0o1777, 0o1770, 0o750]
component = st.tuples(st.sampled_from(["dir", "link"]), st.booleans(), st.sampled_from(MODES))


@needs_root
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=st.lists(component, min_size=1, max_size=4), file_mine=st.booleans(), file_mode=st.sampled_from([0o600, 0o644, 0o664, 0o666]))
def test_every_name_on_the_way_is_judged(tmp_path_factory, chain, file_mine, file_mode):
    """A chain of directories and links, each owned by the operator or another uid, each directory of
    any mode: trusted exactly when every name on the way is the operator's and lives in a directory
    no one else can replace it in, whatever the chain."""
    base = tmp_path_factory.mktemp("walk")
    os.chmod(base, 0o700)
    (base / "real").mkdir()
    current = base / "top"
    current.mkdir(mode=0o700)
    untrusted = False
    holder_mode = 0o700  # the mode of the directory holding the next name

    def shared(mode: int) -> bool:
        return bool(mode & 0o022) and not mode & stat.S_ISVTX

    def owner(mine: bool) -> tuple[int, int]:
        uid = os.geteuid() if mine else OTHER_UID
        return uid, uid

    for i, (kind, mine, mode) in enumerate(chain):
        untrusted = untrusted or shared(holder_mode) or not mine
        entry = current / f"c{i}"
        if kind == "dir":
            entry.mkdir()
            os.chown(entry, *owner(mine))
            os.chmod(entry, mode)
            current, holder_mode = entry, mode
        else:
            target = base / "real" / f"t{i}"
            target.mkdir(mode=0o700)
            entry.symlink_to(target)
            os.lchown(entry, *owner(mine))
            current, holder_mode = target, 0o700
    snapshot = current / "s.sqlite3"
    snapshot.write_bytes(b"x")
    os.chown(snapshot, *owner(file_mine))
    os.chmod(snapshot, file_mode)
    untrusted = untrusted or shared(holder_mode) or not file_mine or bool(file_mode & 0o022)
    expected = "untrusted" if untrusted else None
    # the path as given: through every link
    given_path = (base / "top").joinpath(*(f"c{i}" for i in range(len(chain))), "s.sqlite3")
    with open_judged(given_path) as held:
        assert os.pread(held.fd, 1, 0) == b"x"
        assert (held.untrusted is not None) == (expected is not None), (chain, held.untrusted)
    assert (untrusted_because(given_path) is not None) == (expected is not None)
