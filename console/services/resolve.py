"""Names work where ids do: the one place that turns what a person typed into a project id, for the
CLI and the console alike (a profile revision's name, `PROJECT:N`, is resolved with it by
console/services/profiles.py `resolve_revision`).

A project is its id, else its unique name. Unknown and ambiguous names are refusals (exit 1), the
ambiguous ones with their candidates listed.

Kept light (sqlite3 and the error classes only): `approvals list --project` imports it.
"""

from __future__ import annotations

import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
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
    near = near_projects(conn, project)
    raise Refusal(f"No project {one_line(project)!r} in this database (neither an id nor a name).",
                  (f"Did you mean {near}? " if near else "") + "See `archon-console projects list`.")


NEAR_SCANNED = 2000  # projects a typo is compared with beyond those starting with it


def near_projects(conn: sqlite3.Connection, typed: str) -> str | None:
    """The ids and names `typed` is near (console/suggest.py, the rule every typo gets), as one
    clause; None when none is. Those starting with `typed` come from an index range and the rest
    from the first `NEAR_SCANNED` by name, so a million projects cost what two thousand do."""
    from console.suggest import near_matches

    end = typed + "\U0010ffff"
    rows = conn.execute("SELECT id, name FROM projects WHERE id >= ? AND id < ? ORDER BY id LIMIT 10",
                        (typed, end)).fetchall()
    rows += conn.execute("SELECT id, name FROM projects WHERE name >= ? AND name < ? ORDER BY name LIMIT 10",
                         (typed, end)).fetchall()
    rows += conn.execute("SELECT id, name FROM projects ORDER BY name LIMIT ?", (NEAR_SCANNED,)).fetchall()
    labels: dict[str, str] = {}  # an id or a name -> the project it names (the first one)
    for row in rows:
        for value in (row[1], row[0]):
            if isinstance(value, str) and value.strip():
                labels.setdefault(value, row[0])
    shown: dict[str, str] = {}  # one suggestion per project: the label nearest to what was typed
    for label in near_matches(typed, labels, limit=len(labels)):
        shown.setdefault(labels[label], label)
        if len(shown) == 3:
            break
    found = [one_line(label, 60) for label in shown.values()]
    if not found:
        return None
    return " or ".join(found) if len(found) <= 2 else f"{', '.join(found[:-1])} or {found[-1]}"


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


_ID_TABLES = {"approval": "approval_requests", "environment": "execution_environments"}


def near_ids(conn: sqlite3.Connection, kind: str, typed: str) -> str | None:
    """"Did you mean ID?" for an approval or environment id that names nothing, or None.

    Ids are compared, by console/suggest.py's rule, with a few found through the primary key only
    (so a million rows cost what ten do): the ids either side of what was typed in sort order, and of
    what was typed with the ids' prefix put back (`00000188` for `apr-00000188`), and the id with
    that prefix and the typed digits padded to the ids' width (`apr-188`, `apr-0000018x8`)."""
    import re

    from console.suggest import near_matches

    table = _ID_TABLES[kind]
    probes = [typed]
    first = conn.execute(f"SELECT id FROM {table} ORDER BY id LIMIT 1").fetchone()
    shape = re.match(r"([A-Za-z]+[-_])(\d+)$", first[0]) if first and isinstance(first[0], str) else None
    if shape is not None:
        prefix, width = shape.group(1), len(shape.group(2))
        if not typed.startswith(prefix):
            probes.append(prefix + typed)
        digits = re.sub(r"\D", "", typed[len(prefix):] if typed.startswith(prefix) else typed)
        if digits:  # a stray letter among them, or zeros left out
            probes.append(prefix + digits.lstrip("0").zfill(width))
    found: list[str] = []
    for probe in probes:
        found += [r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE id >= ? ORDER BY id LIMIT 3", (probe,))]
        found += [r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE id < ? ORDER BY id DESC LIMIT 3",
                                             (probe,))]
    found = [f for f in found if isinstance(f, str)]
    exact = [probe for probe in probes[1:] if probe in found]  # the prefix put back, the digits padded
    near = [one_line(n, 60) for n in list(dict.fromkeys(exact + near_matches(typed, found, limit=3)))[:3]]
    if not near:
        return None
    return "Did you mean " + (" or ".join(near) if len(near) <= 2 else f"{', '.join(near[:-1])} or {near[-1]}") + "?"


# Shell completion's queries: each walks a primary key (or the unique name index) from `prefix`,
# so a million requests cost what two hundred do.
_COMPLETION_QUERIES = {
    "project": ("SELECT id FROM projects WHERE id >= ? ORDER BY id LIMIT ?",
                "SELECT name FROM projects WHERE name >= ? ORDER BY name LIMIT ?"),
    "approval": ("SELECT id FROM approval_requests WHERE id >= ? ORDER BY id LIMIT ?",),
    "environment": ("SELECT id FROM execution_environments WHERE id >= ? ORDER BY id LIMIT ?",),
    "revision": ("SELECT id FROM execution_profile_revisions WHERE id >= ? ORDER BY id LIMIT ?",),
}

# Every project_id stored in approval_requests, one seek each through archon's
# idx_approval_requests_project_status_expiry (a skip scan SQLite does not do by itself). project_id
# is NOT NULL with TEXT affinity (numbers are stored as text, blobs sort after text), so `>= ''`
# admits every stored value; ORDER BY (project_id, status) rather than min() keeps every step in
# that one index. `{stop}` ends the walk early (approval_queue.ANY_PENDING_SQL stops at the first
# project with a pending request).
PROJECT_WALK = """
WITH RECURSIVE walk(project_id) AS (
  SELECT (SELECT a.project_id FROM approval_requests AS a WHERE a.project_id >= ''
           ORDER BY a.project_id, a.status LIMIT 1)
  UNION ALL
  SELECT (SELECT a.project_id FROM approval_requests AS a WHERE a.project_id > walk.project_id
           ORDER BY a.project_id, a.status LIMIT 1)
    FROM walk
   WHERE walk.project_id IS NOT NULL{stop}
)"""

# The requests a decision can act on: approve and deny take pending ones, revoke approved ones.
# Walking the primary key from `prefix` and filtering by status read every decided request sorted
# before the first pending one (100,000 rows, 130 ms, and with a LIMIT none offered at all). This
# walks archon's idx_approval_requests_project_status_expiry instead: each stored project_id by a
# seek (as `approval_queue.ANY_PENDING_SQL` does), then that project's (project_id, status) range,
# so the cost is the projects plus the requests in that status (2 ms for 5,000 pending of 100,000).
# The few rows found are sorted by id for the shell.
APPROVALS_IN_STATUS_SQL = PROJECT_WALK.format(stop="") + """
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


__all__ = ["PROJECT_WALK", "completion_candidates", "find_project", "near_ids", "near_projects", "project_id", "project_names", "resolve_project"]
