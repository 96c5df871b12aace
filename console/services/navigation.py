"""What the console needs to find its way: where to start, the project names the command palette
offers (`:project NAME`), and the project a `:project NAME` screen opens on."""

from __future__ import annotations

from console.db.sql import stored_columns
from console.db.connect import ArchonDatabase
from console.models.projects import ProfileAuditEvent, Project
from console.services.approval_queue import any_pending
from console.services.resolve import resolve_project

PALETTE_PROJECTS = 200


def start_screen(handle: ArchonDatabase) -> str:
    """The approval queue when anything is pending, else the overview of projects."""
    return "approvals" if any_pending(handle) else "projects"


def project_names(handle: ArchonDatabase, limit: int = PALETTE_PROJECTS) -> list[tuple[str, str]]:
    """(id, name) of the first projects by name: the palette's `:project` suggestions."""
    rows = handle.conn.execute("SELECT id, name FROM projects ORDER BY name LIMIT ?", (limit,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def project_with_audit(handle: ArchonDatabase, project: str) -> tuple[Project, list[ProfileAuditEvent]]:
    """The project (by id, else unique name) and its profile audit events, oldest first."""
    from console.services.profiles import require_profiles  # not needed to start the console

    require_profiles(handle)
    row = resolve_project(handle.conn, project)
    found = Project(dict(handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'projects')} FROM projects WHERE id = ?", (row["id"],)).fetchone()))
    audit = [ProfileAuditEvent(dict(r)) for r in handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'execution_profile_audit_events')} FROM execution_profile_audit_events "
        "WHERE project_id = ? ORDER BY created_at, id", (row["id"],))]
    return found, audit


__all__ = ["project_names", "project_with_audit", "start_screen"]
