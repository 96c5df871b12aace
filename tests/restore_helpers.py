"""An upgraded archon file with approval requests, and archon's own writes after the snapshot: what the
restore tests (tests/test_restore_loss.py and the test_restore_* modules beside it) start from."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import FP, T0, connect, db_1822, run_cli

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
LATER = "2026-05-01 12:30:00"
REQUESTS = [f"apr-{i}" for i in range(6)]  # pending when the snapshot is taken, but apr-0: approved
ENVS = ["proj-1-env", "proj-2-env"]


def _armed(directory: Path) -> tuple[Path, Path]:
    """An archon 1.8.22 file with approval requests (apr-0 approved, the rest pending), upgraded
    by the console: the database and the snapshot the upgrade took."""
    path = db_1822(directory / "archon.db", legacy_profile=False)
    conn = connect(path)
    conn.execute("BEGIN")
    for i, request in enumerate(REQUESTS):
        run = f"proj-1-apr-run-{i}"
        conn.execute("INSERT INTO execution_runs (id, project_id, kind, status, created_at) "
                     "VALUES (?, 'proj-1', 'build', 'running', ?)", (run, T0))
        approved = i == 0
        conn.execute(
            "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
            "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at, "
            "decision_at, created_at, updated_at) VALUES (?, 'proj-1', ?, 'git_push', 1, ?, ?, 1, '{}', ?, "
            "'2099-01-01 00:00:00', ?, ?, ?)",
            (request, run, '{"ref":"refs/heads/main"}', FP, "approved" if approved else "pending",
             T0 if approved else None, T0, T0),
        )
        conn.execute(
            "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
            "from_status, to_status, actor_classification, created_at) VALUES (?, 'proj-1', ?, 1, 'created', NULL, "
            "'pending', 'system', ?)", (f"{request}-ev1", request, T0),
        )
    conn.execute("COMMIT")
    conn.close()
    snapshot = Path(run_upgrade(path, force=True, now=NOW).snapshot_path)
    return path, snapshot


def _event(conn: sqlite3.Connection, request: str, old: str, new: str, actor: str) -> None:
    sequence = conn.execute("SELECT coalesce(max(sequence), 0) + 1 FROM approval_request_events "
                            "WHERE approval_request_id = ?", (request,)).fetchone()[0]
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
        "from_status, to_status, actor_classification, created_at) VALUES (?, 'proj-1', ?, ?, ?, ?, ?, ?, ?)",
        (f"{request}-ev{sequence}", request, sequence, f"{old}->{new}", old, new, actor, LATER),
    )


def _decide(conn: sqlite3.Connection, request: str, status: str) -> None:
    conn.execute("UPDATE approval_requests SET status = ?, decision_at = ?, updated_at = ? WHERE id = ?",
                 (status, LATER, LATER, request))
    _event(conn, request, "pending", status, "human")


def _consume(conn: sqlite3.Connection, request: str) -> None:
    """What archon's executor writes once it ran the approved action (the schema's only path to it)."""
    conn.execute("UPDATE approval_requests SET status = 'consumed', consumed_at = ?, updated_at = ? WHERE id = ?",
                 (LATER, LATER, request))
    _event(conn, request, "approved", "consumed", "action_executor")


def _as_archon(path: Path, write) -> None:
    conn = connect(path)
    conn.execute("BEGIN IMMEDIATE")
    write(conn)
    conn.execute("COMMIT")
    conn.close()


def _restore(path: Path, snapshot: Path, *extra: str):
    return run_cli("--db", str(path), "restore", str(snapshot), *extra)
