"""What the console needs to find its way before any list is open: where to start, and the
project names the command palette offers (`:project NAME`)."""

from __future__ import annotations

from console.db.connect import ArchonDatabase
from console.services.approval_queue import any_pending

PALETTE_PROJECTS = 200


def start_screen(handle: ArchonDatabase) -> str:
    """The approval queue when anything is pending, else the overview of projects."""
    return "approvals" if any_pending(handle) else "projects"


def project_names(handle: ArchonDatabase, limit: int = PALETTE_PROJECTS) -> list[tuple[str, str]]:
    """(id, name) of the first projects by name: the palette's `:project` suggestions."""
    rows = handle.conn.execute("SELECT id, name FROM projects ORDER BY name LIMIT ?", (limit,)).fetchall()
    return [(r[0], r[1]) for r in rows]


__all__ = ["project_names", "start_screen"]
