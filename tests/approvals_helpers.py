"""Rows for approval tests, written the way archon writes them (no tests in this module).

Requests are inserted as `pending` with a creation event (sequence 1, from NULL to pending), and
moved on by archon-style UPDATEs plus events, so every database obeys archon's triggers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import sqlite3
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

NOW = datetime(2026, 11, 1, 9, 30, tzinfo=timezone.utc)


def ts(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def add_project(conn: sqlite3.Connection, project_id: str, name: str | None = None, *, deleting: str | None = None) -> None:
    conn.execute(
        "INSERT INTO projects (id, name, repo_path) VALUES (?, ?, ?)",
        (project_id, name or project_id, f"/srv/{project_id}"),
    )
    if deleting:
        conn.execute("UPDATE projects SET deletion_started_at = ? WHERE id = ?", (deleting, project_id))


def add_request(
    conn: sqlite3.Connection,
    request_id: str,
    project_id: str = "p1",
    *,
    expires_at: datetime | str | None = None,
    kind: str = "git_push",
    action: dict | None = None,
    authority: dict | str | None = None,
    created_at: datetime | None = None,
    event_type: str = "requested",
) -> None:
    run_id = f"run-{request_id}"
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project_id))
    action = action if action is not None else {"remote": "origin", "branch": "main", "commit": "abc123"}
    authority = authority if authority is not None else {"requested_by": "alice"}
    action_text = json.dumps(action)
    expires = expires_at if expires_at is not None else NOW + timedelta(hours=2)
    created = ts(created_at or NOW - timedelta(minutes=30))
    conn.execute(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, 1, ?, ?, 1, ?, ?, ?, ?)",
        (
            request_id, project_id, run_id, kind, action_text,
            hashlib.sha256(action_text.encode()).hexdigest(),
            authority if isinstance(authority, str) else json.dumps(authority),
            ts(expires) if isinstance(expires, datetime) else expires, created, created,
        ),
    )
    add_event(conn, request_id, project_id, None, "pending", event_type=event_type, actor="archon", kind="system", at=created)


def add_event(conn, request_id, project_id, from_status, to_status, *, event_type, actor, kind="human", reason=None, at=None):
    seq = conn.execute(
        "SELECT COALESCE(MAX(sequence), 0) + 1 FROM approval_request_events WHERE approval_request_id = ?",
        (request_id,),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
        "from_status, to_status, actor_classification, actor_reference, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (str(uuid.uuid4()), project_id, request_id, seq, event_type, from_status, to_status, kind, actor, reason,
         at or ts(NOW)),
    )


def archon_move(conn, request_id, to_status, *, actor="bob", kind="human", at: datetime | None = None, event_type=None, reason=None):
    """Move a request as archon (or another approver) would: UPDATE + event in one transaction."""
    at_text = ts(at or NOW - timedelta(minutes=4))
    row = conn.execute("SELECT project_id, status, decision_at FROM approval_requests WHERE id = ?", (request_id,)).fetchone()
    conn.execute("BEGIN IMMEDIATE")
    sets = "status = ?, updated_at = ?"
    values = [to_status, at_text]
    if to_status in ("approved", "denied") and row["decision_at"] is None:
        sets += ", decision_at = ?"
        values.append(at_text)
    if to_status == "consumed":
        sets += ", consumed_at = ?"
        values.append(at_text)
    conn.execute(f"UPDATE approval_requests SET {sets} WHERE id = ?", (*values, request_id))
    add_event(conn, request_id, row["project_id"], row["status"], to_status,
              event_type=event_type or f"request_{to_status}", actor=actor, kind=kind, reason=reason, at=at_text)
    conn.execute("COMMIT")


def dump(path: Path) -> list[str]:
    """Everything in the database as SQL text: equal dumps mean nothing was written."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def status_of(path: Path, request_id: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT status FROM approval_requests WHERE id = ?", (request_id,)).fetchone()[0]
    finally:
        conn.close()


def events(path: Path, request_id: str) -> list[sqlite3.Row]:
    conn = connect(path)
    try:
        return conn.execute(
            "SELECT * FROM approval_request_events WHERE approval_request_id = ? ORDER BY sequence", (request_id,)
        ).fetchall()
    finally:
        conn.close()


_SEEDED: dict[tuple[str, bool], Path] = {}


def seeded(make, release: str = "1.10.0", *, wal: bool = False, name: str = "archon.db", tmp_path: Path | None = None) -> Path:
    """A database with projects p1 ('Payments') and p2 ('Web'), and requests:
    apr-1..apr-3 pending in p1 (apr-3 requested by carol), apr-4 pending in p2, apr-5 approved by
    bob, apr-6 denied by carol, apr-7 pending but overdue.

    Built once per test process with `make` (conftest's `schema_db`, archon's exact triggers);
    later calls that pass `tmp_path` get a byte copy of it, which is much faster than replaying
    the schema history for every test.
    """
    cached = _SEEDED.get((release, wal))
    if cached is not None and tmp_path is not None:
        target = Path(tmp_path) / name
        shutil.copyfile(cached, target)
        return target
    path = _seed(make(release, name=name, wal=wal))
    cache = Path(tempfile.mkdtemp(prefix="seeded-approvals-")) / f"{release}-{int(wal)}.db"
    shutil.copyfile(path, cache)
    _SEEDED[(release, wal)] = cache
    return path


def _seed(path: Path) -> Path:
    conn = connect(path)
    add_project(conn, "p1", "Payments")
    add_project(conn, "p2", "Web")
    add_request(conn, "apr-1", "p1", expires_at=NOW + timedelta(minutes=12))
    add_request(conn, "apr-2", "p1", expires_at=NOW + timedelta(hours=3), kind="custom_check",
                action={"command": ["make", "lint"]})
    add_request(conn, "apr-3", "p1", expires_at=NOW + timedelta(hours=1, minutes=30), authority={"requester": "carol"})
    add_request(conn, "apr-4", "p2", expires_at=NOW + timedelta(minutes=40))
    add_request(conn, "apr-5", "p1", expires_at=NOW + timedelta(hours=5))
    archon_move(conn, "apr-5", "approved", actor="bob")
    add_request(conn, "apr-6", "p2", expires_at=NOW + timedelta(hours=5))
    archon_move(conn, "apr-6", "denied", actor="carol", reason="not now")
    add_request(conn, "apr-7", "p1", expires_at=NOW - timedelta(minutes=3))
    conn.close()
    return path
