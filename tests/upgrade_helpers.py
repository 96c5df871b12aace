"""Small, hand-written archon databases for the upgrade tests, and ways to compare them.

The databases are made by the console's own schema steps (`make_schema`) and filled with the rows
of tests/reference/rows.py, the oracle's starting rows (plain SQL through archon's own triggers;
they live there because the oracle may import nothing that imports `console`). Timestamps are
fixed in 2024, so anything an upgrade writes with CURRENT_TIMESTAMP can be told apart and masked.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
from functools import partial
from pathlib import Path

from console.db.migrations.steps import approval_ddl
from tests.conftest import connect as shared_connect
from tests.conftest import make_schema
from tests.reference import compare
from tests.reference.rows import FP, T0, populate_1820_rows

REPO = Path(__file__).resolve().parents[1]
FP2 = "b" * 64

connect = partial(shared_connect, rows=False)  # rows as tuples: the upgrade tests compare them with literals


def db_1820(path: Path, *, wal: bool = False, projects: int = 2) -> Path:
    """A populated archon 1.8.20 database without our ledger."""
    make_schema(path, "1.8.20", wal=wal)
    conn = connect(path)
    populate_1820_rows(conn, projects)
    conn.close()
    return path


# Archon stores a revision's fingerprint as SHA-256 of its serialised profile (what the upgrade's
# evidence gate checks, console/db/profile_evidence.py), so the fixture's legacy revision does too.
LEGACY_PROFILE = '{"provider_preference":"docker_sandbox"}'
LEGACY_FP = hashlib.sha256(LEGACY_PROFILE.encode()).hexdigest()


def db_1822(path: Path, *, wal: bool = False, legacy_profile: bool = True) -> Path:
    """A populated 1.8.22 database; proj-1 runs on a schema-1 profile (so 006 writes `:v2`)."""
    make_schema(path, "1.8.22", wal=wal)
    conn = connect(path)
    populate_1820_rows(conn)
    if legacy_profile:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
            "profile_json, created_at) VALUES ('proj-1:legacy', 'proj-1', 2, 1, ?, ?, ?)",
            (LEGACY_FP, LEGACY_PROFILE, T0),
        )
        conn.execute(
            "INSERT INTO execution_profile_audit_events (id, project_id, event_type, profile_revision_id, "
            "previous_profile_revision_id, created_at) VALUES ('proj-1:legacy:created', 'proj-1', "
            "'revision_created', 'proj-1:legacy', 'proj-1:execution-profile:1', ?)",
            (T0,),
        )
        conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = 'proj-1:legacy', "
            "build_execution_provider = 'docker_sandbox' WHERE id = 'proj-1'"
        )
        conn.execute("COMMIT")
    conn.close()
    return path


def add_old_approval_tables(conn: sqlite3.Connection, *, requests: int = 20, events_each: int = 3) -> None:
    """Approval tables as a pre-1.8.22 archon left them (action_json limit 16384), with history."""
    conn.execute("BEGIN")
    for statement in (
        approval_ddl.requests_table(action_limit=16384),
        approval_ddl.EVENTS_TABLE,
    ):
        conn.execute(statement)
    from console.db.migrations.base import execute_script

    execute_script(conn, approval_ddl.REQUEST_TRIGGERS + approval_ddl.EVENT_TRIGGERS)
    execute_script(conn, approval_ddl.REQUEST_INDEXES + approval_ddl.EVENT_INDEXES)
    for i in range(requests):
        pid = "proj-1" if i % 2 else "proj-2"
        run = f"{pid}-apr-run-{i}"
        conn.execute(
            "INSERT INTO execution_runs (id, project_id, kind, status, created_at) VALUES (?, ?, 'build', 'running', ?)",
            (run, pid, T0),
        )
        conn.execute(
            "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
            "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at, "
            "created_at, updated_at) VALUES (?, ?, ?, 'git_push', 1, ?, ?, 1, '{}', 'pending', ?, ?, ?)",
            (f"apr-{i}", pid, run, '{"ref":"refs/heads/main","commit":"%040d"}' % i, FP, "2024-03-02 10:00:00", T0, T0),
        )
        for seq in range(1, events_each + 1):
            conn.execute(
                "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
                "from_status, to_status, actor_classification, created_at) VALUES (?, ?, ?, ?, 'note', NULL, 'pending', "
                "'system', ?)",
                (f"apr-{i}-ev{seq}", pid, f"apr-{i}", seq, T0),
            )
    conn.execute("COMMIT")


# --- observing files -----------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fingerprint_dir(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file in the directory with its hash and mtime (ns): the 'nothing changed' witness."""
    return {
        p.name: (sha256(p), p.stat().st_mtime_ns)
        for p in sorted(Path(directory).iterdir())
        if p.is_file()
    }


def file_state(path: Path) -> tuple[str, int, int]:
    st = Path(path).stat()
    return sha256(path), st.st_mtime_ns, st.st_size


_NOW_STAMP = re.compile(r"'(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})'")
LEDGER_TABLES = ("_sqlite_migrations", "_archon_console_ledger")


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def normalized_dump(path: Path, *, written_after: str = "2025-01-01 00:00:00") -> list[str]:
    """The dump with what legitimately differs between two runs masked.

    Timestamps later than the fixtures' (written by CURRENT_TIMESTAMP during the upgrade) become
    <now>; ledger rows keep only their step name, position, class, checksum and target.
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        lines = []
        for line in conn.iterdump():
            if any(line.startswith(f'INSERT INTO "{t}"') for t in LEDGER_TABLES):
                continue
            lines.append(
                _NOW_STAMP.sub(lambda m: "'<now>'" if m.group(1) >= written_after else m.group(0), line)
            )
        for row in conn.execute(
            "SELECT name, position, safety, checksum, target_release, tool_version FROM _archon_console_ledger "
            "ORDER BY position"
        ) if _has_table(conn, "_archon_console_ledger") else []:
            lines.append(f"LEDGER {tuple(row)!r}")
        if _has_table(conn, "_sqlite_migrations"):
            lines.extend(
                f"SQLITE-UTILS {tuple(row)!r}"
                for row in conn.execute("SELECT id, migration_set, name FROM _sqlite_migrations ORDER BY id")
            )
        return lines
    finally:
        conn.close()


def _has_table(conn, name) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def ledger_names(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not _has_table(conn, "_sqlite_migrations"):
            return []
        return [r[0] for r in conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = 'archon-console' ORDER BY id")]
    finally:
        conn.close()


# Kills the upgrade like `kill -9` at a named boundary, by wrapping the seam the run calls there
# (console/services/upgrade/run.py says which); production code carries no crash hook.
_CRASHING_CLI = """
import os, signal, sys
kind, _, step = sys.argv[1].partition(":")
from console.db import ledger, snapshot
from console.services.upgrade import run as upgrade_run

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if kind == "after-snapshot":  # inside the first step's transaction, the snapshot published
    take = snapshot.take_snapshot
    def take_then_die(*a, **k):
        take(*a, **k)
        die()
    snapshot.take_snapshot = take_then_die
elif kind == "mid":  # the step's SQL and its ledger rows written, not committed
    record = ledger.record
    def record_then_die(conn, migration, **k):
        record(conn, migration, **k)
        if migration.id == step:
            die()
    ledger.record = record_then_die
elif kind == "after":  # the step committed, before the next one
    apply = upgrade_run.apply_migration
    def apply_then_die(conn, migration, **k):
        ran = apply(conn, migration, **k)
        if ran and migration.id == step:
            die()
        return ran
    upgrade_run.apply_migration = apply_then_die
else:
    raise SystemExit(f"unknown crash boundary {sys.argv[1]!r}")
from console.cli.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_cli_crashing_at(boundary: str, *args: str, timeout: float = 60):
    """`python -m console ARGS`, killed with SIGKILL at `boundary` ("after-snapshot", "mid:<step id>",
    "after:<step id>") of the upgrade."""
    env = {**os.environ}
    env.pop("ARCHON_DB_PATH", None)
    return subprocess.run(
        [sys.executable, "-c", _CRASHING_CLI, boundary, *args],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


def run_cli(*args: str, env: dict | None = None, stdin=subprocess.DEVNULL, timeout: float = 60):
    """`python -m console ARGS` in a real process."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("ARCHON_DB_PATH", None)
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        cwd=REPO,
        env=full_env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def differences(console_db, archon_db) -> list[str]:
    """Every difference, except the reference's stand-in name for archon's binding-evidence trigger
    when the start already has the console's (a console-made start): archon would add its own there."""
    found = (compare.schema_differences(compare.schema_of(console_db), compare.schema_of(archon_db))
             + compare.row_differences(console_db, archon_db))
    console_made = "trigger preserve_execution_environment_binding_evidence" in compare.schema_of(archon_db)
    return [d for d in found if not (console_made and "archon_binding_evidence_name_unseen" in d)]


def assert_same(console_db, archon_db, title: str) -> None:
    found = differences(console_db, archon_db)
    assert not found, compare.report(title, found)
