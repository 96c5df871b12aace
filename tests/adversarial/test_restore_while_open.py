"""`restore` refuses while anyone uses the database, whoever and however they are (issue 9, finding 3).

Main compared `/proc/*/fd` link targets with the database's path: archon running as another user
(whose /proc entries a non-root console cannot read), or reaching the file through a bind mount or a
container's path, was invisible, the file was swapped under it and its later commits were lost. The
console now asks the locks (console/db/exclusive_lock.py). It also keeps the replaced file's owner,
group and mode: a root restore of another user's 0600 file left root:root, which archon cannot open.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.errors import EXIT_REFUSED
from console.services.upgrade.run import run_upgrade
from tests.adversarial.holder import Holder, _python_for
from tests.upgrade_helpers import db_1820, dump, fingerprint_dir, run_cli

pytestmark = pytest.mark.slow

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
OTHER_USER = "archon-adv"


def _upgraded(directory: Path, *, wal: bool) -> tuple[Path, str]:
    path = db_1820(directory / "archon.db", wal=wal)
    return path, run_upgrade(path, force=True, now=NOW).snapshot_path


def _restore(path: Path, snapshot: str, *extra: str):
    return run_cli("--db", str(path), "--busy-timeout", "0.2", "restore", snapshot, "--yes", *extra)


# A directory given to another user: its database's ledger and the snapshot beside it no longer vouch
# (tests/adversarial/test_trust_walk.py), so a root restore from there is an --unverified one.
UNVERIFIED = "--unverified"


def _assert_refused_and_untouched(path: Path, proc, before, before_dump) -> None:
    assert proc.returncode == EXIT_REFUSED, proc.stderr
    assert "in use" in proc.stderr and "Nothing was restored" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert fingerprint_dir(path.parent) == before
    assert dump(path) == before_dump


@pytest.mark.parametrize(
    "wal, how",
    [(False, "read-transaction"), (True, "idle"), (True, "read-transaction")],
    ids=["rollback-journal-reader", "wal-idle", "wal-reader"],
)
def test_refused_while_another_process_holds_the_file(tmp_path, wal, how):
    path, snapshot = _upgraded(tmp_path, wal=wal)
    holder = Holder(path, how)
    try:
        before, before_dump = fingerprint_dir(tmp_path), dump(path)
        _assert_refused_and_untouched(path, _restore(path, snapshot), before, before_dump)
    finally:
        holder.stop()


def test_refused_when_the_holder_reaches_the_file_through_a_bind_mount(tmp_path_factory):
    """As archon in a container sees it: the same directory under another path."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to bind-mount a directory")
    data, mounted = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("container")
    path, snapshot = _upgraded(data, wal=True)
    bound = subprocess.run(["mount", "--bind", str(data), str(mounted)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"bind mounts are not allowed here: {bound.stderr.strip()}")
    try:
        holder = Holder(mounted / "archon.db", "idle")
        try:
            before, before_dump = fingerprint_dir(data), dump(path)
            _assert_refused_and_untouched(path, _restore(path, snapshot), before, before_dump)
        finally:
            holder.stop()
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


def _other_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a second user to run the other process")
    try:
        return pwd.getpwnam(OTHER_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        pytest.skip("needs useradd to create a second user")
    subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                   check=True, capture_output=True)
    return pwd.getpwnam(OTHER_USER)


@pytest.fixture
def shared_dir():
    """A directory the other user can reach (pytest's own tmp_path is root's, mode 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="archon-restore-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _give_to(user: pwd.struct_passwd, directory: Path, mode: int) -> None:
    os.chown(directory, user.pw_uid, user.pw_gid)
    for entry in directory.iterdir():
        os.chown(entry, user.pw_uid, user.pw_gid)
    os.chmod(directory / "archon.db", mode)


def test_refused_while_another_user_has_the_database_open(shared_dir):
    user = _other_user()
    path, snapshot = _upgraded(shared_dir, wal=True)
    _give_to(user, shared_dir, 0o600)
    holder = Holder(path, "idle", user=OTHER_USER)
    try:
        before, before_dump = fingerprint_dir(shared_dir), dump(path)
        _assert_refused_and_untouched(path, _restore(path, snapshot, UNVERIFIED), before, before_dump)
    finally:
        holder.stop()


def test_root_restore_keeps_the_owner_group_and_mode(shared_dir):
    user = _other_user()
    path, snapshot = _upgraded(shared_dir, wal=False)
    _give_to(user, shared_dir, 0o600)
    proc = _restore(path, snapshot, UNVERIFIED)
    assert proc.returncode == 0, proc.stderr
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, user.pw_gid, 0o600)
    # and the other user can open it, as archon would
    check = subprocess.run(
        [_python_for(OTHER_USER), "-I", "-c",
         "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM projects').fetchone()[0])",
         str(path)],
        user=OTHER_USER, capture_output=True, text=True, cwd="/",
    )
    assert check.returncode == 0 and check.stdout.strip() == "2", check.stderr


def test_restore_keeps_the_mode(tmp_path):
    path, snapshot = _upgraded(tmp_path, wal=False)
    os.chmod(path, 0o640)
    proc = _restore(path, snapshot)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
