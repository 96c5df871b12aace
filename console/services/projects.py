"""The project overview: one row per project with what needs attention, on every release shape.

What a release lacks is reported as None rather than refused: a 1.8.20 database has no profile
revisions or approvals, a 1.8.22 one no operation claims. Counts go through archon's own indexes
(per project, so a million approval requests cost a few index range counts, not a table scan).
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from console.db.sql import quote_identifier, stored_columns
from console.clock import TEXT_SLACK, db_time, parse_time, system_clock
from console.db.connect import ArchonDatabase
from console.models.projects import ProjectSummary

DEFAULT_STALE_AFTER = timedelta(minutes=15)
EXPIRING_SOON = timedelta(hours=1)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}


def _pending_counts(conn: sqlite3.Connection, project_id: str, now: datetime) -> dict[str, int]:
    total = conn.execute(
        "SELECT count(*) FROM approval_requests WHERE project_id = ? AND status = 'pending'", (project_id,)
    ).fetchone()[0]
    soon_text = db_time(now + EXPIRING_SOON)
    overdue, soon = conn.execute(
        "SELECT coalesce(sum(julianday(expires_at) <= julianday(?)), 0), "
        "       coalesce(sum(julianday(expires_at) <= julianday(?)), 0) "
        "FROM approval_requests WHERE project_id = ? AND status = 'pending' AND expires_at <= ?",
        (db_time(now), soon_text, project_id, db_time(now + EXPIRING_SOON + TEXT_SLACK)),
    ).fetchone()
    return {"pending": total, "overdue": int(overdue), "expiring_soon": int(soon) - int(overdue)}


def list_projects(
    handle: ArchonDatabase,
    *,
    now: datetime | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> list[ProjectSummary]:
    """Every project with its active profile revision, approvals waiting, environments by state
    and operation claims held (and how many of those are older than `stale_after`). A feature the
    database's release lacks gives None.
    """
    now = now or system_clock()
    conn = handle.conn
    shape = handle.shape
    project_columns = _columns(conn, "projects")
    cur = conn.execute(f"SELECT {stored_columns(conn, 'projects')} FROM projects ORDER BY name, id")
    names = [d[0] for d in cur.description]
    projects = [dict(zip(names, row)) for row in cur.fetchall()]

    revisions: dict[str, sqlite3.Row] = {}
    if shape.has_profiles and "active_execution_profile_revision_id" in project_columns:
        # CROSS JOIN keeps projects outside: the planner would otherwise walk every revision
        # ever made (a table that only grows) to find each project's active one by seek.
        for row in conn.execute(
            "SELECT p.id AS project_id, r.revision, r.schema_version FROM projects AS p "
            "CROSS JOIN execution_profile_revisions AS r "
            "  ON r.project_id = p.id AND r.id = p.active_execution_profile_revision_id"
        ):
            revisions[row["project_id"]] = row

    environments: dict[str, dict[str, int]] = {}
    for row in conn.execute(
        "SELECT project_id, lifecycle_state, count(*) AS n FROM execution_environments "
        "GROUP BY project_id, lifecycle_state ORDER BY project_id, lifecycle_state"
    ):
        environments.setdefault(row["project_id"], {})[row["lifecycle_state"]] = row["n"]

    claims: dict[str, list[Any]] = {}
    if shape.has_claims:
        for row in conn.execute(
            "SELECT project_id, operation_claimed_at FROM execution_environments "
            "WHERE operation_claim_id IS NOT NULL"
        ):
            claims.setdefault(row["project_id"], []).append(row["operation_claimed_at"])

    result = []
    for project in projects:
        pid = project["id"]
        revision = revisions.get(pid)
        counts = _pending_counts(conn, pid, now) if shape.has_approvals else None
        states = environments.get(pid, {})
        held = claims.get(pid, []) if shape.has_claims else None
        result.append(ProjectSummary(
            columns=project,
            active_revision=revision["revision"] if revision else None,
            active_schema_version=revision["schema_version"] if revision else None,
            pending_approvals=counts["pending"] if counts else None,
            pending_expiring_within_hour=counts["expiring_soon"] if counts else None,
            pending_overdue=counts["overdue"] if counts else None,
            environments=states,
            environments_total=sum(states.values()),
            claims_held=None if held is None else len(held),
            claims_stale=None if held is None else sum(
                1 for at in held if (parsed := parse_time(at)) is None or now - parsed >= stale_after),
            deleting=bool(project.get("deletion_started_at")),
        ))
    return result


__all__ = ["DEFAULT_STALE_AFTER", "EXPIRING_SOON", "list_projects"]
