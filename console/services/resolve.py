"""Names work where ids do: the one place that turns what a person typed into a project or a
profile revision id, for the CLI and the console alike.

A project is its id, else its unique name. A revision is its full id
(`prj-atlas-api:execution-profile:3`), else `PROJECT:N` or `PROJECT:rN` (PROJECT an id or a
unique name), else `N` or `rN` when the project is given separately. The full id is tried first,
so an id that happens to look like `PROJECT:N` still means itself. Unknown and ambiguous names
are refusals (exit 1), the ambiguous ones with their candidates listed; `rN` without a project is
a usage error (exit 2).

Kept light (sqlite3 and the error classes only): `approvals list --project` imports it.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from console.errors import MissingArgument, Refusal
from console.text import one_line

CANDIDATES_SHOWN = 10
_REVISION_NUMBER = re.compile(r"^[rR]?([0-9]{1,9})$")


def resolve_project(conn: sqlite3.Connection, project: str) -> sqlite3.Row:
    """The project row (id, name, deletion_started_at) by id, else by unique name."""
    row = conn.execute(
        "SELECT id, name, deletion_started_at FROM projects WHERE id = ?", (project,)
    ).fetchone()
    if row is not None:
        return row
    rows = conn.execute(
        "SELECT id, name, deletion_started_at FROM projects WHERE name = ? ORDER BY id LIMIT ?",
        (project, CANDIDATES_SHOWN + 1),
    ).fetchall()
    if len(rows) == 1:
        return rows[0]
    if len(rows) > 1:
        shown = ", ".join(one_line(r["id"]) for r in rows[:CANDIDATES_SHOWN])
        more = " and more" if len(rows) > CANDIDATES_SHOWN else ""
        raise Refusal(
            f"More than one project is named {one_line(project)!r}: {shown}{more}.",
            "Pass one of these ids instead.",
        )
    raise Refusal(f"No project {one_line(project)!r} in this database (neither an id nor a name).",
                  "See `archon-console projects list`.")


def project_id_of(handle, text: str) -> str:
    """The id of the project `text` names (id or unique name), or a `Refusal` saying why not: what a
    screen asks before it filters by a typed project."""
    return resolve_project(handle.conn, text)["id"]


def project_known(handle, text: str) -> bool:
    """Whether `text` names a project (id or unique name): a saved view may outlive its project."""
    try:
        return _find_project(handle.conn, text) is not None
    except Refusal:  # several projects carry that name: it names something
        return True


def _find_project(conn: sqlite3.Connection, text: str) -> sqlite3.Row | None:
    """Like `resolve_project`, but None when nothing is called `text` (ambiguity still refuses)."""
    try:
        return resolve_project(conn, text)
    except Refusal as exc:
        if exc.reason.startswith("More than one"):
            raise
        return None


def project_id(conn: sqlite3.Connection, project: str | None) -> str | None:
    """The id of `project` (id or unique name); None stays None (no filter)."""
    return None if project is None else resolve_project(conn, project)["id"]


def _revision_number(conn: sqlite3.Connection, project_row: Any, number: int, typed: str) -> str:
    row = conn.execute(
        "SELECT id FROM execution_profile_revisions WHERE project_id = ? AND revision = ?",
        (project_row["id"], number),
    ).fetchone()
    if row is None:
        raise Refusal(
            f"Project {one_line(project_row['id'])} has no execution profile revision {number} "
            f"(asked for {one_line(typed)!r}).",
            f"List them with `archon-console profiles list {one_line(project_row['id'])}`.",
        )
    return row["id"]


def resolve_revision(handle, revision: str, *, project: str | None = None) -> str:
    """The id of the execution profile revision `revision` names (see the module docstring)."""
    from console.services.profiles import require_profiles  # profiles only when asked for

    require_profiles(handle)
    conn = handle.conn
    project_row = resolve_project(conn, project) if project is not None else None
    row = conn.execute(
        "SELECT id, project_id FROM execution_profile_revisions WHERE id = ?", (revision,)
    ).fetchone()
    if row is not None:
        if project_row is not None and row["project_id"] != project_row["id"]:
            raise Refusal(
                f"Revision {one_line(revision)} belongs to project {one_line(row['project_id'])}, "
                f"not {one_line(project_row['id'])}.",
                "Leave out the project, or name a revision of that project (rN).",
            )
        return row["id"]
    number = _REVISION_NUMBER.match(revision)
    if number is not None:
        if project_row is None:
            raise MissingArgument(
                f"{one_line(revision)!r} names a revision within a project, and no project was given.",
                f"Write PROJECT:{number.group(1)} or put the project first (`PROJECT {one_line(revision)}`).",
            )
        return _revision_number(conn, project_row, int(number.group(1)), revision)
    head, colon, tail = revision.rpartition(":")
    number = _REVISION_NUMBER.match(tail) if colon else None
    within = _find_project(conn, head) if number is not None and head else None
    if within is not None:
        if project_row is not None and within["id"] != project_row["id"]:
            raise Refusal(f"{one_line(revision)!r} names project {one_line(within['id'])}, "
                          f"not {one_line(project_row['id'])}.")
        return _revision_number(conn, within, int(number.group(1)), revision)
    raise Refusal(
        f"There is no execution profile revision {one_line(revision)}.",
        "Name it by id, PROJECT:N or PROJECT rN; list them with `profiles list PROJECT`.",
    )


# Shell completion's queries: each walks a primary key (or the unique name index) from `prefix`,
# so a million requests cost what two hundred do.
_COMPLETION_QUERIES = {
    "project": ("SELECT id FROM projects WHERE id >= ? ORDER BY id LIMIT ?",
                "SELECT name FROM projects WHERE name >= ? ORDER BY name LIMIT ?"),
    "approval": ("SELECT id FROM approval_requests WHERE id >= ? ORDER BY id LIMIT ?",),
    "environment": ("SELECT id FROM execution_environments WHERE id >= ? ORDER BY id LIMIT ?",),
    "revision": ("SELECT id FROM execution_profile_revisions WHERE id >= ? ORDER BY id LIMIT ?",),
}


def completion_candidates(handle, kind: str, prefix: str, *, limit: int = 200) -> list[str]:
    """Up to `limit` values of `kind` starting with `prefix`, for the shell's TAB; [] when the
    database's release has no such table."""
    found: list[str] = []
    for sql in _COMPLETION_QUERIES[kind]:
        try:
            rows = handle.conn.execute(sql, (prefix, limit)).fetchall()
        except sqlite3.OperationalError:  # an older release without this table
            continue
        found += [r[0] for r in rows if isinstance(r[0], str) and r[0].startswith(prefix)]
    return found


__all__ = ["completion_candidates", "project_id", "resolve_project", "resolve_revision"]
