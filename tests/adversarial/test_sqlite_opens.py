"""Names that lead back to a connected database's files never cost the console its locks (issue 17,
finding 1, second attack round).

A descriptor closed drops every POSIX lock its process holds on that file, and a name does not say
which file it leads to: a manifest beside a snapshot candidate can be a hard link to the live
database's `-shm` (no symbolic link to refuse), a candidate can be swapped for a symbolic link to it
between its checks and SQLite's open, and SQLite closes what it was handed when that connection
closes. The upgrade's writer then holds no `-shm` lock (WAL write lock, reader marks) inside its
`BEGIN IMMEDIATE`, and another client commits beside it.

The mechanism (console/db/file_guard.py): every file that is not the console's own is opened by
`open_foreign` (refused before the open when the name leads to a connected file, judged by `fstat`
after it, and never closed when it is one), and `sqlite_connection` refuses a target that leads to a
connected database's sidecar or to its main file under another name. The audit hook reports a
`sqlite3.connect` to such a target too. Checked here through a real `upgrade --force` (the seam
that plays the attacker is wrapped as tests/upgrade_helpers.py `run_cli_crashing_at` does: no
timing), with /proc/locks as the witness.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console.db import file_guard
from console.db.connection import sqlite_connection
from console.db.snapshot import sha256_file
from console.errors import DatabaseUnusable
from tests.adversarial import proc_locks
from tests.upgrade_helpers import REPO, db_1820

CANDIDATE = "archon.db.pre-upgrade-20991231T235959Z.sqlite3"  # newest by name and by mtime

# The upgrade in a real process. Around the reuse scan (inside the first step's BEGIN IMMEDIATE) it
# counts its own -shm locks and lets a second writer try to commit; "symlink" swaps the candidate
# for a symbolic link to -shm at the last moment before SQLite opens it (the race, made certain).
_WATCHED_UPGRADE = textwrap.dedent("""
    import os, sqlite3, subprocess, sys
    from console.db import snapshot_reuse
    from console.services.upgrade import run as upgrade_run

    db, mode, candidate = sys.argv[1], sys.argv[2], sys.argv[3]
    INTRUDER = (
        "import sqlite3, sys\\n"
        "c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\\n"
        "try:\\n"
        "    c.execute('BEGIN IMMEDIATE'); c.execute('CREATE TABLE intruder(x)'); c.execute('COMMIT')\\n"
        "    print('committed')\\n"
        "except sqlite3.Error as exc:\\n"
        "    print('refused', exc)\\n")

    def shm_locks():
        from tests.adversarial import proc_locks  # this runs in the upgrade's own process

        return proc_locks.count(db + "-shm")

    if mode == "symlink":
        open_ro = snapshot_reuse.open_ro
        def swapped_then_open(path, **k):
            os.unlink(candidate)
            os.symlink(db + "-shm", candidate)
            return open_ro(path, **k)
        snapshot_reuse.open_ro = swapped_then_open

    scan = upgrade_run.reusable_snapshot
    def watched(conn, *a, **k):
        if mode == "hardlink":  # planted while the upgrade runs (it refuses to start beside a holder)
            os.link(db + "-shm", candidate + ".sha256")
        before = shm_locks()
        kept = scan(conn, *a, **k)
        after = shm_locks()
        other = subprocess.run([sys.executable, "-c", INTRUDER, db], capture_output=True, text=True, timeout=60)
        print(f"LOCKS {before} {after}", file=sys.stderr)
        print(f"INTRUDER {other.stdout.strip()}", file=sys.stderr)
        return kept
    upgrade_run.reusable_snapshot = watched

    from console.cli.cli import main
    sys.exit(main(["--db", db, "upgrade", "--force"]))
""")


def _write_manifest(candidate: Path, sha256: str) -> None:
    candidate.with_name(candidate.name + ".sha256").write_text(f"{sha256}  {candidate.name}\n")


@pytest.mark.slow
@pytest.mark.parametrize("planted", ["a manifest hard-linked to -shm", "a candidate swapped for a symlink to -shm"])
def test_a_planted_name_for_the_shm_never_drops_the_upgrades_locks(tmp_path, planted):
    path = db_1820(tmp_path / "archon.db", wal=True)
    candidate = tmp_path / CANDIDATE
    if planted.startswith("a manifest"):  # hard-linked to the upgrade's -shm once it exists
        candidate.write_bytes(b"x")
        mode = "hardlink"
    else:  # a good-looking candidate: same size as the database, a matching manifest
        source, copy = sqlite3.connect(path), sqlite3.connect(candidate)
        source.backup(copy)
        copy.close()
        source.close()
        _write_manifest(candidate, sha256_file(candidate))
        mode = "symlink"
    env = {k: v for k, v in os.environ.items() if k != "ARCHON_DB_PATH"}
    proc = subprocess.run([sys.executable, "-c", _WATCHED_UPGRADE, str(path), mode, str(candidate)],
                          cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.splitlines()
    locks = [line.split()[1:] for line in lines if line.startswith("LOCKS ")]
    intruder = [line for line in lines if line.startswith("INTRUDER ")]
    assert locks and intruder, proc.stderr
    before, after = locks[0]
    assert int(before) > 0 and after == before, proc.stderr  # every -shm lock survived the scan
    assert intruder[0].startswith("INTRUDER refused"), proc.stderr  # nobody committed beside the upgrade
    assert proc.returncode == 0, proc.stderr
    check = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert check.execute("SELECT count(*) FROM sqlite_master WHERE name = 'intruder'").fetchone()[0] == 0
    finally:
        check.close()


def _shm_locks(path: Path) -> int:
    return proc_locks.count(f"{path}-shm")


@pytest.fixture
def writing(tmp_path):
    """A console writer inside BEGIN IMMEDIATE on a WAL database: it holds -shm locks."""
    path = db_1820(tmp_path / "archon.db", wal=True)
    conn = sqlite_connection(str(path))
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE mine(x)")
    try:
        yield path, conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


@pytest.mark.parametrize("how", ["-shm", "-wal", "symlink to -shm", "hard link to -shm", "hard link to the db",
                                 "immutable -shm", "sidecar name linked to -shm"])
def test_sqlite_connection_refuses_a_connected_databases_other_files(writing, tmp_path, how):
    path, _ = writing
    before = _shm_locks(path)
    assert before > 0
    target = {"-shm": f"{path}-shm", "-wal": f"{path}-wal"}.get(how, str(tmp_path / "planted.sqlite3"))
    uri = False
    if how == "symlink to -shm":
        os.symlink(f"{path}-shm", target)
    elif how == "hard link to -shm":
        os.link(f"{path}-shm", target)
    elif how == "hard link to the db":
        os.link(path, target)
    elif how == "immutable -shm":
        target, uri = f"file:{path}-shm?mode=ro&immutable=1", True
    elif how == "sidecar name linked to -shm":  # SQLite would open it as the planted file's -shm
        sqlite3.connect(target).close()
        os.symlink(f"{path}-shm", f"{target}-shm")
    with pytest.raises(DatabaseUnusable, match="this process has open"):
        sqlite_connection(target, uri=uri)
    assert _shm_locks(path) == before
    second = sqlite_connection(str(path))  # a second connection to the same file is fine
    second.execute("SELECT count(*) FROM projects").fetchone()
    second.close()
    assert _shm_locks(path) == before


@pytest.mark.parametrize("how", ["hard link", "name"])
def test_open_foreign_refuses_and_keeps_what_leads_to_a_connected_file(writing, tmp_path, how):
    path, _ = writing
    before = _shm_locks(path)
    target = Path(f"{path}-shm")
    if how == "hard link":
        target = tmp_path / "x.sha256"
        os.link(f"{path}-shm", target)
    with pytest.raises(OSError, match="this process has open"):
        file_guard.open_foreign(target)
    with pytest.raises(OSError, match="this process has open"):
        sha256_file(target)
    assert _shm_locks(path) == before


def test_open_foreign_judges_what_it_opened_not_the_name(writing, tmp_path, monkeypatch):
    """The name checked is not the file opened (a rename between the two): the descriptor is judged by
    `fstat`, kept open for the process's life, and the open refused."""
    path, _ = writing
    before = _shm_locks(path)
    innocent = tmp_path / "innocent.sha256"
    innocent.write_text("x")
    real_stat = os.stat
    monkeypatch.setattr(file_guard.os, "stat", lambda p, *a, **k: real_stat(
        innocent if os.fspath(p) == str(tmp_path / "swapped.sha256") else p, *a, **k))
    os.link(f"{path}-shm", tmp_path / "swapped.sha256")
    with pytest.raises(OSError, match="this process has open"):
        file_guard.open_foreign(tmp_path / "swapped.sha256")
    monkeypatch.undo()
    assert _shm_locks(path) == before


AUDITED = textwrap.dedent("""
    import os, sqlite3, sys
    import console  # installs the hook: ARCHON_CONSOLE_AUDIT_FILES names the log
    from console.db.connection import sqlite_connection

    db = sys.argv[1]
    writer = sqlite_connection(db)
    writer.execute("BEGIN IMMEDIATE")
    os.symlink(db + "-shm", db + ".planted")
    sqlite3.connect(db + ".planted").close()   # breach: SQLite handed a name for the -shm
    sqlite3.connect(db).close()                # a second connection to the same file: fine
    writer.execute("ROLLBACK")
    writer.close()
""")


def test_the_audit_hook_reports_sqlite_handed_a_connected_sidecar(tmp_path):
    path = db_1820(tmp_path / "archon.db", wal=True)
    log = tmp_path / "breaches.log"
    log.touch()
    env = {**os.environ, "ARCHON_CONSOLE_AUDIT_FILES": str(log)}
    proc = subprocess.run([sys.executable, "-c", AUDITED, str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    reports = [line for line in log.read_text().splitlines() if " outside SQLite " in line]
    assert len(reports) == 1 and f"opened {path}.planted " in reports[0], log.read_text()


def test_the_quiet_wal_lock_descriptor_counts_as_a_connection(tmp_path):
    """console/db/readonly.py holds a SHARED lock through its own descriptor beside an `immutable=1`
    connection: a read of that file meanwhile must not open (and close) another descriptor of it."""
    from console.db import readonly

    path = db_1820(tmp_path / "archon.db", wal=True)
    conn, cleanup, how = readonly.open_read_only(path)  # no -wal, no -shm: console/db/private_wal.py open_quiet_wal
    assert how.startswith("in place (immutable")
    try:
        assert file_guard.connected_file(path) == str(path.resolve())
        with pytest.raises(OSError, match="this process has open"):
            sha256_file(path)
    finally:
        conn.close()
        cleanup()
    assert file_guard.connected_file(path) is None


def _all_locks(path: Path) -> list[int]:
    """This process's lock count on the database's main file, -wal and -shm."""
    return [_locks_on(Path(f"{path}{suffix}")) for suffix in ("", "-wal", "-shm")]


def _locks_on(file: Path) -> int:
    return proc_locks.count(file)


def _readers(directory: Path, conn):
    from console.db import snapshot_manifest, snapshot_reuse
    from console.db.file_trust import open_judged

    def beside(name: str):
        with open_judged(directory / name.removesuffix(".sha256")) as held:
            return snapshot_manifest.manifest_beside(held)

    return {
        "read_manifest": lambda name: snapshot_manifest.read_manifest(directory / name),
        "manifest_beside": beside,
        "manifests_with_hash": lambda name: snapshot_manifest.manifests_with_hash([directory], "0" * 64),
        "sha256_file": lambda name: sha256_file(directory / name),
        "open_judged": lambda name: open_judged(directory / name).close(),
        "reusable_snapshot": lambda name: snapshot_reuse.reusable_snapshot(conn, "9.9.9", directory, "archon.db"),
    }


@pytest.mark.parametrize("reader", ["read_manifest", "manifest_beside", "manifests_with_hash", "sha256_file",
                                    "open_judged", "reusable_snapshot"])
@pytest.mark.parametrize("leads_to", ["", "-wal", "-shm"])
@pytest.mark.parametrize("by", ["hard link", "symbolic link"])
def test_no_reader_of_foreign_files_drops_a_lock(writing, reader, leads_to, by):
    """Every reader of files another user may have placed, handed a name that leads to one of the
    writer's files: it refuses or finds nothing, and the writer keeps every lock it holds."""
    path, conn = writing
    directory = path.parent
    candidate = directory / CANDIDATE
    candidate.write_bytes(b"x")
    name = candidate.name + ".sha256" if reader not in ("sha256_file", "open_judged") else "planted.sqlite3"
    if reader == "reusable_snapshot" and leads_to:
        candidate.unlink()
        name = candidate.name
    if by == "hard link":
        os.link(f"{path}{leads_to}", directory / name)
    else:
        os.symlink(f"{path}{leads_to}", directory / name)
    before = _all_locks(path)
    assert before[2] > 0
    try:
        _readers(directory, conn)[reader](name)
    except OSError:
        pass  # refused: a file of a database this process has open, or a symbolic link
    assert _all_locks(path) == before
