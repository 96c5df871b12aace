"""Names work where ids do: the one place that turns what a person typed into a project id, for the
CLI and the console alike (a profile revision's name, `PROJECT:N`, is resolved with it by
console/services/profiles.py `resolve_revision`).

A project is its id, else its unique name. Unknown and ambiguous names are refusals (exit 1), the
ambiguous ones with their candidates listed.

Kept light (sqlite3 and the error classes only): `approvals list --project` imports it.
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from console.errors import Refusal
from console.text import one_line

CANDIDATES_SHOWN = 10


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
        return find_project(handle.conn, text) is not None
    except Refusal:  # several projects carry that name: it names something
        return True


def find_project(conn: sqlite3.Connection, text: str) -> sqlite3.Row | None:
    """Like `resolve_project`, but None when nothing is called `text` (ambiguity still refuses)."""
    try:
        return resolve_project(conn, text)
    except Refusal as exc:
        if exc.reason.startswith("More than one"):
            raise
        return None


def project_names(conn: sqlite3.Connection, ids: Iterable[object]) -> dict[object, str]:
    """id -> name of the projects `ids` name (a page's worth), one primary-key seek each: what a
    list shows in its project column, as the approval queue shows it."""
    wanted = sorted({i for i in ids if isinstance(i, str)})
    names: dict[object, str] = {}
    for start in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
        chunk = wanted[start:start + 500]
        names.update((row[0], row[1]) for row in conn.execute(
            f"SELECT id, name FROM projects WHERE id IN ({', '.join('?' for _ in chunk)})", chunk))
    return names


def project_id(conn: sqlite3.Connection, project: str | None) -> str | None:
    """The id of `project` (id or unique name); None stays None (no filter)."""
    return None if project is None else resolve_project(conn, project)["id"]


# Shell completion's queries: each walks a primary key (or the unique name index) from `prefix`,
# so a million requests cost what two hundred do.
_COMPLETION_QUERIES = {
    "project": ("SELECT id FROM projects WHERE id >= ? ORDER BY id LIMIT ?",
                "SELECT name FROM projects WHERE name >= ? ORDER BY name LIMIT ?"),
    "approval": ("SELECT id FROM approval_requests WHERE id >= ? ORDER BY id LIMIT ?",),
    "environment": ("SELECT id FROM execution_environments WHERE id >= ? ORDER BY id LIMIT ?",),
    "revision": ("SELECT id FROM execution_profile_revisions WHERE id >= ? ORDER BY id LIMIT ?",),
}

# The requests a decision can act on: approve and deny take pending ones, revoke approved ones.
# Walking the primary key from `prefix` and filtering by status read every decided request sorted
# before the first pending one (100,000 rows, 130 ms, and with a LIMIT none offered at all). This
# walks archon's idx_approval_requests_project_status_expiry instead: each stored project_id by a
# seek (as `approval_queue.ANY_PENDING_SQL` does), then that project's (project_id, status) range,
# so the cost is the projects plus the requests in that status (2 ms for 5,000 pending of 100,000).
# The few rows found are sorted by id for the shell.
APPROVALS_IN_STATUS_SQL = """
WITH RECURSIVE walk(project_id) AS (
  SELECT (SELECT a.project_id FROM approval_requests AS a WHERE a.project_id >= ''
           ORDER BY a.project_id, a.status LIMIT 1)
  UNION ALL
  SELECT (SELECT a.project_id FROM approval_requests AS a WHERE a.project_id > walk.project_id
           ORDER BY a.project_id, a.status LIMIT 1)
    FROM walk
   WHERE walk.project_id IS NOT NULL
)
SELECT r.id FROM walk JOIN approval_requests AS r ON r.project_id = walk.project_id AND r.status = ?
 WHERE r.id >= ? AND substr(r.id, 1, length(?)) = ?
 ORDER BY r.id LIMIT ?
"""
APPROVAL_STATUS_KINDS = {"pending approval": "pending", "approved approval": "approved"}


def completion_candidates(handle, kind: str, prefix: str, *, limit: int = 200) -> list[str]:
    """Up to `limit` values of `kind` starting with `prefix`, for the shell's TAB; [] when the
    database's release has no such table. `pending approval` / `approved approval`: the ids of
    requests in that status only (what approve and deny, or revoke, can act on)."""
    if kind in APPROVAL_STATUS_KINDS:
        queries = [(APPROVALS_IN_STATUS_SQL, (APPROVAL_STATUS_KINDS[kind], prefix, prefix, prefix, limit))]
    else:
        queries = [(sql, (prefix, limit)) for sql in _COMPLETION_QUERIES[kind]]
    found: list[str] = []
    for sql, params in queries:
        try:
            rows = handle.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # an older release without this table
            continue
        found += [r[0] for r in rows if isinstance(r[0], str) and r[0].startswith(prefix)]
    return found


__all__ = ["completion_candidates", "find_project", "project_id", "project_names", "resolve_project"]
