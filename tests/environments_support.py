"""Rows for environment tests, inserted the way archon would (CHECKs and triggers respected).

No tests here; the environment test modules import these helpers.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from console.clock import db_time
from console.db.connect import open_database
from tests.conftest import add_project  # noqa: F401 (the environment tests' projects: tests/conftest.py)
from tests.conftest import connect as raw

FP = "a" * 64
T0 = datetime(2026, 11, 1, 9, 30, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[1]


def add_env(conn, env_id: str, state: str = "ready", project_id: str = "p1", **columns) -> None:
    values = {
        "id": env_id,
        "project_id": project_id,
        "provider_kind": "host",
        "provider_version": "1",
        "target_kind": "repo_root",
        "target_key": env_id,
        "target_workspace_path": f"/ws/{env_id}",
        "environment_revision": 1,
        "workspace_mode": "direct",
        "environment_validation_fingerprint": FP,
        "template_identity": "tpl",
        "lifecycle_state": state,
        "created_at": "2026-10-01 00:00:00",
        "updated_at": "2026-10-01 00:00:00",
        **columns,
    }
    conn.execute(
        f"INSERT INTO execution_environments ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
        list(values.values()),
    )


def add_lease(conn, env_id: str, run_id: str, project_id: str = "p1", *, released: bool = False) -> None:
    """An execution lease; goes through archon's admission trigger, so add it before any claim."""
    conn.execute("INSERT OR IGNORE INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project_id))
    conn.execute(
        "INSERT INTO execution_environment_run_bindings (id, environment_id, execution_run_id, project_id, "
        "relationship, environment_revision, environment_validation_fingerprint, authority_json) "
        "VALUES (?, ?, ?, ?, 'execution', 1, ?, '{\"by\":\"test\"}')",
        (f"b-{run_id}", env_id, run_id, project_id, FP),
    )
    if released:
        release_lease(conn, run_id)


def add_validation(conn, env_id: str, run_id: str, project_id: str = "p1") -> None:
    """A validation binding not released (archon's admission does not look at these, so it may go in
    while a claim is held)."""
    conn.execute("INSERT OR IGNORE INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project_id))
    conn.execute(
        "INSERT INTO execution_environment_run_bindings (id, environment_id, execution_run_id, project_id, "
        "relationship, environment_revision, environment_validation_fingerprint) "
        "VALUES (?, ?, ?, ?, 'validation', 1, ?)",
        (f"b-{run_id}", env_id, run_id, project_id, FP),
    )


def add_service_run(conn, env_id: str | None, run_id: str, project_id: str = "p1", *, completed: bool = False) -> None:
    """A 1.10.0 service run placed in `env_id` (no binding), completed or not."""
    conn.execute("INSERT OR IGNORE INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project_id))
    rev, fingerprint = conn.execute("SELECT id, fingerprint FROM execution_profile_revisions WHERE project_id = ? "
                                    "LIMIT 1", (project_id,)).fetchone()
    conn.execute(
        "INSERT INTO service_run_details (execution_run_id, project_id, context_key, target_kind, target_key, "
        "target_workspace_path, execution_profile_revision_id, execution_profile_fingerprint, provider_kind, "
        "environment_id, environment_revision, service_snapshot_json, interruption_scope, started_at, completed_at) "
        "VALUES (?, ?, ?, 'service', 'svc', '/w', ?, ?, 'docker_sandbox', ?, ?, '{}', 'whole_environment', "
        "'2026-11-01 08:00:00', ?)",
        (run_id, project_id, f"ctx-{run_id}", rev, fingerprint, env_id, 1 if env_id else None,
         "2026-11-01 09:00:00" if completed else None))


def set_cleanup_claim(conn, env_id: str, claim_id: str, at: str) -> None:
    """Archon's cleanup worker holding its cleanup claim."""
    conn.execute("UPDATE execution_environments SET cleanup_claim_id = ?, cleanup_claimed_at = ?, "
                 "cleanup_attempts = cleanup_attempts + 1 WHERE id = ?", (claim_id, at, env_id))


def release_lease(conn, run_id: str) -> None:
    conn.execute(
        "UPDATE execution_environment_run_bindings SET released_at = '2026-11-01 09:00:00' WHERE id = ?",
        (f"b-{run_id}",),
    )


def set_claim(conn, env_id: str, claim_id: str, kind: str, at: str) -> None:
    conn.execute(
        "UPDATE execution_environments SET operation_claim_id = ?, operation_kind = ?, operation_claimed_at = ? "
        "WHERE id = ?",
        (claim_id, kind, at, env_id),
    )


def dump(path: Path) -> list:
    """Every row of every table, for 'nothing was written' checks."""
    conn = sqlite3.connect(path)
    try:
        out = []
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            out.append((name, sorted(map(tuple, conn.execute(f'SELECT * FROM "{name}"')), key=repr)))
        return out
    finally:
        conn.close()


def env_row(path: Path, env_id: str) -> dict:
    conn = raw(path)
    try:
        return dict(conn.execute("SELECT * FROM execution_environments WHERE id = ?", (env_id,)).fetchone())
    finally:
        conn.close()


def events(path: Path, env_id: str) -> list[dict]:
    conn = raw(path)
    try:
        return [dict(r) for r in conn.execute(
            "SELECT * FROM execution_environment_events WHERE environment_id = ? ORDER BY sequence", (env_id,))]
    finally:
        conn.close()


def handle(path: Path, *, read_only: bool = False):
    return open_database(path, read_only=read_only)


def console(db: Path, *argv: str) -> subprocess.CompletedProcess:
    """`archon-console ARGV --db DB` in its own process (writes use the real clock)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ARCHON_CONSOLE_STALE_MINUTES", "ARCHON_CONSOLE_NOW", "ARCHON_DB_PATH", "ARCHON_CONSOLE_ACTOR")}
    return subprocess.run([sys.executable, "-m", "console", *argv, "--db", str(db), "--as", "alice"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def ago(minutes: float) -> str:
    return db_time(datetime.now(timezone.utc) - timedelta(minutes=minutes))
