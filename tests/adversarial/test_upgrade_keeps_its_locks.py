"""The upgrade keeps its own locks while another client comes and goes (issue 17, finding 1).

POSIX record locks belong to a process and a file: closing *any* descriptor of the database drops
every lock the process holds on it. The snapshot's page comparison used to open and close the main
file and the `-wal` in the upgrade's own process, while its writer connection was open; from then
on the upgrade held no lock at all. Another client (archon, a cron `sqlite3`, a second operator)
that closed meanwhile believed it was the last connection, checkpointed and deleted `-wal`/`-shm`
mid-transaction, and the upgraded database was "malformed" although the upgrade printed success.

Here a separate process opens, reads and closes the database at every boundary of a real upgrade
(after the snapshot, after each step's SQL and ledger rows, after each step's commit), injected by
wrapping the run's seams as tests/upgrade_helpers.py `run_cli_crashing_at` does: no timing. The
result must pass `integrity_check` and equal, row for row, the same upgrade run undisturbed. The
mechanism itself (no process opens a database's files outside SQLite while it holds a connection)
is checked for every test by the audit hook in tests/conftest.py (console/db/file_guard.py).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.upgrade_helpers import (
    REPO,
    add_old_approval_tables,
    connect,
    db_1820,
    ledger_names,
    normalized_dump,
    run_cli,
)

pytestmark = pytest.mark.slow

OTHER_CLIENT = textwrap.dedent("""
    import sqlite3, sys
    path, note = sys.argv[1], sys.argv[2]
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute("SELECT count(*) FROM projects").fetchone()
    if note:  # between steps archon writes, as it does while running
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO archon_misc_log (note) VALUES (?)", (note + "|" + "x" * 20000,))  # new pages
        conn.execute("COMMIT")
    conn.close()  # a last connection checkpoints and deletes -wal/-shm: it must never think it is last
""")

# The upgrade in a real process whose seams start OTHER_CLIENT once per boundary: it reads inside a
# step's transaction (the upgrade holds the write lock) and reads and writes between steps.
_VISITED_UPGRADE = textwrap.dedent("""
    import subprocess, sys
    from console.db import ledger, snapshot
    from console.services.upgrade import run as upgrade_run

    client, db = sys.argv[1], sys.argv[2]
    visits = []

    def visit(where, note=""):
        subprocess.run([sys.executable, "-c", client, db, note], check=True, timeout=60)
        visits.append(where)

    take = snapshot.take_snapshot
    def take_then_visit(*a, **k):
        snap = take(*a, **k)
        visit("after the snapshot")
        return snap
    snapshot.take_snapshot = take_then_visit

    record = ledger.record
    def record_then_visit(conn, migration, **k):
        record(conn, migration, **k)
        visit(f"inside {migration.id}")
    ledger.record = record_then_visit

    apply = upgrade_run.apply_migration
    def apply_then_visit(conn, migration, **k):
        ran = apply(conn, migration, **k)
        visit(f"after {migration.id}", f"visit after {migration.id}")
        return ran
    upgrade_run.apply_migration = apply_then_visit

    from console.cli.cli import main
    code = main(sys.argv[3:])
    print(f"VISITS {len(visits)}", file=sys.stderr)
    sys.exit(code)
""")

VISITED_TABLES = ("archon_misc_log", "sqlite_sequence")  # where the other client's rows go


def _rows(path: Path) -> list[str]:
    return [line for line in normalized_dump(path)
            if not any(line.startswith(f'INSERT INTO "{t}"') for t in VISITED_TABLES)]


def _visit_notes(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute(
            "SELECT substr(note, 1, instr(note, '|') - 1) FROM archon_misc_log WHERE note LIKE 'visit %' ORDER BY id")]
    finally:
        conn.close()


def _source(path: Path) -> Path:
    """A populated 1.8.20 WAL database with old-shape approvals (so the approval steps rebuild)."""
    db_1820(path, wal=True)
    conn = connect(path)
    add_old_approval_tables(conn, requests=12, events_each=3)
    conn.close()
    return path


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    path = _source(tmp_path_factory.mktemp("control") / "archon.db")
    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == 0, proc.stderr
    return _rows(path), ledger_names(path)


def _integrity(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    finally:
        conn.close()


def test_another_client_at_every_step_boundary_cannot_corrupt_the_upgrade(tmp_path, undisturbed):
    path = _source(tmp_path / "archon.db")
    env = {k: v for k, v in os.environ.items() if k != "ARCHON_DB_PATH"}
    proc = subprocess.run(
        [sys.executable, "-c", _VISITED_UPGRADE, OTHER_CLIENT, str(path), "--db", str(path), "upgrade", "--force"],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )
    rows, steps = undisturbed
    assert proc.returncode == 0, proc.stderr
    assert f"VISITS {1 + 2 * len(steps)}" in proc.stderr  # every boundary was visited
    assert _integrity(path) == ["ok"]
    assert ledger_names(path) == steps  # every step recorded
    assert _rows(path) == rows  # and every step's rows are there, as without the visits
    assert _visit_notes(path) == [f"visit after {step}" for step in steps]  # and every write of the other client


@pytest.mark.parametrize("named", ["the database itself", "a hard link to it", "its -wal"])
def test_a_ledger_naming_the_database_as_its_snapshot_is_never_read_under_the_writer_lock(tmp_path, named):
    """The rerun of an interrupted upgrade hashes the snapshot its ledger names before it reuses it;
    the ledger is database content, and a hard link needs no write access to the database. Hashing
    the database (or its -wal) in the upgrade's process would drop the writer's locks: it is not
    read (the audit hook fails this test if it is), a fresh snapshot is taken, nothing is damaged."""
    from console.db.detect import LEDGER_META_TABLE
    from console.services.upgrade.run import run_upgrade
    from tests.upgrade_helpers import run_cli_crashing_at

    path = _source(tmp_path / "archon.db")
    crashed = run_cli_crashing_at("after:002-project-active-profile-column", "--db", str(path), "upgrade", "--force")
    assert crashed.returncode != 0
    planted = {"the database itself": path, "a hard link to it": tmp_path / "evidence.sqlite3",
               "its -wal": Path(f"{path}-wal")}[named]
    if named == "a hard link to it":
        os.link(path, planted)
    conn = sqlite3.connect(path, isolation_level=None)
    sha = conn.execute(f'SELECT snapshot_sha256 FROM "{LEDGER_META_TABLE}" ORDER BY position DESC').fetchone()[0]
    conn.execute(f'UPDATE "{LEDGER_META_TABLE}" SET snapshot_path = ?', (str(planted),))
    conn.close()
    result = run_upgrade(path, force=True)
    assert result.status == "upgraded" and not result.snapshot_reused
    assert Path(result.snapshot_path) != planted and result.snapshot_sha256 != sha
    assert _integrity(path) == ["ok"]


GUARDED = textwrap.dedent("""
    import io, os, sys
    from pathlib import Path
    import console  # installs the hook: ARCHON_CONSOLE_AUDIT_FILES names the log
    from console.db.connect import connect_raw
    from console.db.connection import sqlite_connection

    db = Path(sys.argv[1])
    os.link(db, db.with_name("linked.db"))
    conn = connect_raw(db)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    open(db, "rb").close()                                       # breach 1: builtins.open
    os.close(os.open(f"{db}-wal", os.O_RDONLY | os.O_CREAT))     # breach 2: os.open, a sidecar
    io.open(f"{db}-shm", "rb").close()                           # breach 3: io.open
    db.with_name("linked.db").read_bytes()                       # breach 4: a hard link, Path.read_bytes
    os.close(os.open(db, os.O_PATH))                             # an O_PATH descriptor holds no lock
    open(db.with_name("other.txt"), "w").close()                 # another file
    conn.close()
    open(db, "rb").close()                                       # no connection any more
    frozen = sqlite_connection(f"file:{db}?mode=ro&immutable=1", uri=True)
    open(db, "rb").close()                                       # an immutable connection takes no locks
    frozen.close()
""")


def test_the_guard_sees_every_way_of_opening_a_database_file(tmp_path):
    """console/db/file_guard.py, as every console process of the suite runs it: each way of opening
    the database (or a sidecar, or a hard link to it) under a live connection is reported, and
    nothing else is."""
    path = _source(tmp_path / "archon.db")
    log = tmp_path / "breaches.log"
    log.touch()
    env = {**os.environ, "ARCHON_CONSOLE_AUDIT_FILES": str(log)}
    proc = subprocess.run([sys.executable, "-c", GUARDED, str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    reports = [line for line in log.read_text().splitlines() if " outside SQLite " in line]
    opened = [line.split(" opened ")[1].split(" outside")[0] for line in reports]
    assert opened == [str(path), f"{path}-wal", f"{path}-shm", str(tmp_path / "linked.db")]
