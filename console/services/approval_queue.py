"""Reading the approval queue: pages of requests, one request with its history, what can be done.

Requests are read models (`console/models/approvals.py`): archon's columns as stored plus derived
fields (`expires_in_seconds`, `overdue`, `project_name`, `requester`), so the CLI's JSON and the TUI's
table read the same objects. The default order is `(expires_at, id)` within each (project, status)
partition, read through archon's `idx_approval_requests_project_status_expiry` and merged (see
`console/db/queries.py`); the other orders (`SORTS`) are keysets of their own, each ending in `id`.
Timestamps are compared as instants (`julianday` / `parse_time`), never as raw text, because
archon may write `expires_at` in ISO 8601 as well as in `CURRENT_TIMESTAMP` form.
"""

from __future__ import annotations

import json
import sqlite3
from console.records import dataclass
from datetime import datetime, timedelta

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Mapping

from console.db.sql import sqlite_lower, stored_columns
from console.clock import TEXT_SLACK, db_time, parse_time, system_clock
from console.db.connect import ArchonDatabase
from console.db.queries import (
    CappedCount,
    Cursor,
    KeysetQuery,
    advance,
    count_queries_capped,
    fetch_merged_page,
    position_of,
    retreat,
)
from console.errors import Refusal, UsageError
from console.models.approvals import (OPEN_STATUSES, STATUSES, ApprovalDetail, ApprovalEvent, ApprovalRequest,
                                      DecisionOptions, check_kind)
from console.services import four_eyes
from console.services.base import require_feature, validate_actor
from console.services.resolve import PROJECT_WALK, near_ids, resolve_project  # noqa: F401 - also re-exported
from console.text import json_or_none, one_line, unparseable_note

REQUESTER_KEYS = ("requested_by", "requester")


def _text_member(key: str) -> str:
    """SQL for `authority_json`'s `key` when it is a string with something besides whitespace
    (Python's `str.strip` whitespace, so it agrees with `requester_of`), else NULL."""
    spaces = ", ".join(str(ord(c)) for c in WHITESPACE)
    value = f"json_extract(authority_json, '$.{key}')"
    return (f"CASE WHEN json_type(authority_json, '$.{key}') = 'text' AND trim({value}, char({spaces})) <> '' "
            f"THEN {value} END")


# Every character Python's `str.strip()` removes (`str.isspace`), written out: finding them among the
# first 12,289 code points at import cost every approvals command a twentieth of its start (issue 22).
# tests/test_cli_imports.py checks the list against the running Python's `isspace`.
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
              "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# `requester_of` in SQL, for sorting: '' when there is none (a row value with a NULL compares as NULL,
# and such a row would drop out of a keyset page). Nested CASEs: json_type() on text that is not JSON
# raises. It agrees with `requester_of` but for a name with an escaped NUL, which SQLite cuts there
# (such a row sorts by the part before it; the list shows `requester_of`'s name, pictured).
REQUESTER_SQL = (
    "CASE WHEN typeof(authority_json) = 'text' THEN CASE WHEN json_valid(authority_json) THEN "
    "CASE WHEN json_type(authority_json) = 'object' THEN coalesce("
    + ", ".join(_text_member(k) for k in REQUESTER_KEYS) + ", '') ELSE '' END ELSE '' END ELSE '' END"
)
# The requester sort's key: REQUESTER_SQL's bytes. json_extract turns an escaped lone surrogate
# ("\\ud800", which JSON.stringify writes for one) into bytes that are not UTF-8; read back as text
# they decode with U+FFFD (console/db/connection.py), so the next page's cursor would not be the key
# SQLite compares, and paging skipped rows. A BLOB reads back byte for byte, and BLOBs order by
# memcmp, as SQLite's BINARY collation orders text.
REQUESTER_KEY = f"CAST({REQUESTER_SQL} AS BLOB)"
# The project as the lists show it: its name, else (the project is gone) its id.
PROJECT_SQL = ("coalesce((SELECT p.name FROM projects AS p WHERE p.id = approval_requests.project_id), "
               "approval_requests.project_id)")


@dataclass(frozen=True)
class Sort:
    """One order of the queue: the keyset `keys` (SQL, each order ending in the primary key so the
    order is total and paging never skips or repeats a row) and the names they are read under."""

    label: str
    keys: tuple[str, ...]
    names: tuple[str, ...]
    # The keys within one (project, status) partition when they differ (see `age`).
    status_keys: tuple[str, ...] | None = None


# `expiry` reads idx_approval_requests_project_status_expiry in order, and `age` over every status
# idx_approval_requests_project_created (one partition per project). The others, and `age` within
# chosen statuses, find their (project, status) rows through the status index and sort them (SQLite's
# temporary B-tree): archon has no index for them, and the console adds none to archon's file. So a
# page costs the rows the filter selects; on 100,000 requests (6 projects, 5,500 pending) a page of
# pending requests takes 4-70 ms in every order, a page of all statuses 15-30 ms by expiry or age,
# about 0.4 s by project and 1.1 s by requester (its JSON is read for every row).
# `+created_at` within a status: without the `+` SQLite walks the created index through every status
# of the project to find the pending rows in order (280 ms against 10 ms).
SORTS = {
    "expiry": Sort("expiry", ("expires_at", "id"), ("expires_at", "id")),
    "age": Sort("age, oldest first", ("created_at", "id"), ("created_at", "id"), ("+created_at", "id")),
    "requester": Sort("requester", (REQUESTER_KEY, "expires_at", "id"), ("console_requester", "expires_at", "id")),
    "project": Sort("project", (PROJECT_SQL, "expires_at", "id"), ("console_project", "expires_at", "id")),
}
COMPUTED_KEYS = ("console_requester", "console_project")

# Beyond this many (project, status) partitions one sorted scan is cheaper than many seeks.
MAX_PARTITIONS = 400


@dataclass
class RequestPage:
    """A page of request rows in display order, and where the next/previous page starts."""

    rows: list[ApprovalRequest]
    next_cursor: Cursor | None
    previous_cursor: Cursor | None
    last_cursor: Cursor | None = None  # just after the last row, next page or not (a live list reads on)


@dataclass(frozen=True)
class Filters:
    """What `list_requests` and `count_requests` select. `statuses=None` means every status."""

    statuses: tuple[str, ...] | None = ("pending",)
    project: str | None = None
    kind: str | None = None
    expiring_within_minutes: float | None = None
    search: str | None = None
    sort: str = "expiry"  # a key of SORTS

    @property
    def order(self) -> Sort:
        try:
            return SORTS[self.sort]
        except KeyError:
            raise UsageError(f"Unknown sort {one_line(self.sort)!r}; use {', '.join(SORTS)}.") from None


def _projects(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    return conn.execute("SELECT id, name, deletion_started_at FROM projects ORDER BY id").fetchall()


def _partitions(handle: ArchonDatabase, filters: Filters, now: datetime) -> tuple[list[KeysetQuery], dict[str, str]]:
    conn = handle.conn
    if filters.kind is not None:
        check_kind(filters.kind)
    if filters.project is not None:
        projects = [resolve_project(conn, filters.project)]
    else:
        projects = _projects(conn)
    names = {row["id"]: row["name"] for row in projects}
    statuses = filters.statuses or STATUSES

    common: list[str] = []
    params: list[Any] = []
    if filters.kind is not None:
        common.append("action_kind = ?")
        params.append(filters.kind)
    if filters.expiring_within_minutes is not None:
        bound = now + timedelta(minutes=float(filters.expiring_within_minutes))
        common.append("expires_at <= ?")
        params.append(db_time(bound + TEXT_SLACK))
        common.append("julianday(expires_at) <= julianday(?)")
        params.append(db_time(bound))
    needle = sqlite_lower((filters.search or "").strip()) or None
    text_clause = "instr(lower(id || ' ' || project_id || ' ' || action_kind || ' ' || action_json), ?) > 0"
    order = filters.order
    # never a generated column (console/db/sql.py), and the sort's computed keys
    computed = {n: k for k, n in zip(order.keys, order.names) if k != n}
    columns = stored_columns(conn, "approval_requests") + "".join(f", {k} AS {n}" for n, k in computed.items())

    def query(where: list[str], where_params: list[Any], project_name: str | None,
              keys: tuple[str, ...] = order.keys) -> KeysetQuery:
        clauses, values = list(where) + common, list(where_params) + params
        if needle and not (project_name and needle in sqlite_lower(project_name)):
            clauses.append(text_clause)
            values.append(needle)
        return KeysetQuery("approval_requests", keys, where=tuple(clauses), params=tuple(values),
                           columns=columns, key_names=order.names)

    if filters.statuses is None and filters.sort != "expiry" and len(projects) <= MAX_PARTITIONS:
        # every status: one partition per project (for `age`, archon's created index in order)
        every = f"status IN ({', '.join('?' for _ in STATUSES)})"
        queries = [query(["project_id = ?", every], [p["id"], *STATUSES], p["name"]) for p in projects]
    elif len(projects) * len(statuses) <= MAX_PARTITIONS:
        queries = [
            query(["project_id = ?", "status = ?"], [p["id"], s], p["name"], order.status_keys or order.keys)
            for p in projects
            for s in statuses
        ]
    else:  # very many projects: one scan, sorted by SQLite
        where, values = [], []
        if filters.project is not None:
            where.append("project_id = ?")
            values.append(projects[0]["id"])
        if filters.statuses is not None:
            where.append(f"status IN ({', '.join('?' for _ in statuses)})")
            values.extend(statuses)
        queries = [query(where, values, None)]
    return queries, names


def partition_queries(handle: ArchonDatabase, filters: Filters, now: datetime) -> list[KeysetQuery]:
    """The keyset queries (one per project and status) whose merge is the filtered queue; for
    callers that page or count with `console.db.queries` themselves (the TUI's jump-to-row)."""
    return _partitions(handle, filters, now)[0]


def _derived(row: Mapping[str, Any], now: datetime, project_names: Mapping[str, str]) -> dict[str, Any]:
    """`expires_in_seconds` (negative once past), `overdue` and `project_name` of a stored request row."""
    expires = parse_time(row.get("expires_at"))
    return {
        "expires_in_seconds": None if expires is None else int((expires - now).total_seconds()),
        "overdue": bool(expires is not None and row.get("status") in OPEN_STATUSES and expires <= now),
        "project_name": project_names.get(row.get("project_id")),
    }


def request_of(row: Mapping[str, Any], now: datetime, project_names: Mapping[str, str]) -> ApprovalRequest:
    """The listed request read from a stored `approval_requests` row (less the sort's computed keys).
    Its requester is `requester_of`'s, as `show_request` reads it, not REQUESTER_SQL's: SQLite's
    json_extract ends a string at an escaped NUL, so `"dave\\u0000x"` would be listed as `dave`."""
    stored = {k: v for k, v in row.items() if k not in COMPUTED_KEYS}
    return ApprovalRequest(**ApprovalRequest.archon_fields(stored), **_derived(stored, now, project_names),
                           requester=requester_of(parse_json_field(row.get("authority_json"))), columns=stored)


def list_requests(
    handle: ArchonDatabase,
    filters: Filters = Filters(),
    *,
    limit: int = 50,
    cursor: Cursor | None = None,
    now: datetime | None = None,
) -> RequestPage:
    """One page of approval requests by expiry (soonest first), continuing from `cursor`."""
    require_feature(handle, "approvals", what="The approval queue")
    now = now or system_clock()
    queries, names = _partitions(handle, filters, now)
    page = fetch_merged_page(handle.conn, queries, cursor=cursor, limit=limit)
    rows = [request_of(row, now, names) for row in page.rows]
    last = Cursor(page.last_key) if page.last_key is not None else None
    return RequestPage(rows, page.next_cursor, page.previous_cursor, last)


def count_requests(
    handle: ArchonDatabase, filters: Filters = Filters(), *, cap: int = 500, now: datetime | None = None
) -> CappedCount:
    """How many requests match, up to `cap` ("500 of >500")."""
    require_feature(handle, "approvals", what="The approval queue")
    queries, _ = _partitions(handle, filters, now or system_clock())
    return count_queries_capped(handle.conn, queries, cap=cap)


def any_pending(handle: ArchonDatabase) -> bool:
    """Whether anything waits for a decision (the console then opens on the queue)."""
    if not handle.shape.has_approvals:
        return False
    return handle.conn.execute(ANY_PENDING_SQL).fetchone()[0] == 1


# `status = 'pending' LIMIT 1` alone walks idx_approval_requests_project_status_expiry from its
# first entry through every older status of the first project ('pending' sorts after most), which
# is the whole history of a busy project. Here each step is a seek: the next project_id present in
# that index (`min(project_id) WHERE project_id > ?`), then a probe of its (project_id, 'pending')
# range; the walk (console/services/resolve.py `PROJECT_WALK`) stops at the first project with a
# pending request. Every request lies under a value the walk visits, so the answer is the plain
# query's, and a cold start reads one index's pages.
ANY_PENDING_SQL = PROJECT_WALK.format(stop="""
     AND NOT EXISTS (SELECT 1 FROM approval_requests AS r
                      WHERE r.project_id = walk.project_id AND r.status = 'pending')""") + """
SELECT EXISTS (SELECT 1 FROM walk
                WHERE EXISTS (SELECT 1 FROM approval_requests AS r
                               WHERE r.project_id = walk.project_id AND r.status = 'pending'))
"""


def cursor_of(handle: ArchonDatabase, request_id: str, filters: Filters = Filters()) -> Cursor | None:
    """The cursor just after request `request_id` in the filters' order (None when it is gone)."""
    read = handle.conn.cursor()
    read.row_factory = None  # the keys as stored: a BLOB key read as text would not be the key (queries.py `KeyedRow`)
    row = read.execute(f"SELECT {', '.join(filters.order.keys)} FROM approval_requests WHERE id = ?",
                       (request_id,)).fetchone()
    return None if row is None else Cursor(tuple(row))


def request_position(handle: ArchonDatabase, filters: Filters, request_id: str, *, now: datetime | None = None) -> int | None:
    """How many filtered requests sort before request `request_id` (None when it is gone): where a
    list shows it, or where it was once it left the filter. One counting seek per partition."""
    require_feature(handle, "approvals", what="The approval queue")
    cursor = cursor_of(handle, request_id, filters)
    if cursor is None:
        return None
    return position_of(handle.conn, partition_queries(handle, filters, now or system_clock()), cursor.key)


def advance_cursor(handle: ArchonDatabase, filters: Filters, cursor: Cursor | None, count: int, *,
                   now: datetime | None = None) -> Cursor | None:
    """The cursor `count` requests after `cursor` (None = the start): a jump, read in large steps."""
    require_feature(handle, "approvals", what="The approval queue")
    return advance(handle.conn, partition_queries(handle, filters, now or system_clock()), cursor, count)


def retreat_cursor(handle: ArchonDatabase, filters: Filters, cursor: Cursor | None, count: int, *,
                   now: datetime | None = None) -> Cursor | None:
    """The cursor `count` requests before `cursor`, where None is the *end* of the queue: the last
    page of a million requests is read backwards from the end, not walked to."""
    require_feature(handle, "approvals", what="The approval queue")
    return retreat(handle.conn, partition_queries(handle, filters, now or system_clock()), cursor, count)


def parse_json_field(text: Any) -> Any:
    """Parsed JSON, or None when the stored text is not JSON (it is then shown raw) or is over the
    reader's limits (then `action_summary` and the views show why instead)."""
    return json_or_none(text)


def requester_of(authority: Any) -> str | None:
    """The requester named by `authority_json` (a string under `requested_by` or `requester`)."""
    if isinstance(authority, dict):
        for key in REQUESTER_KEYS:
            value = authority.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def action_summary(kind: Any, action: Any, raw: Any = None) -> str:
    """One line naming what would run: remote/branch/commit for a push, the command for a check."""
    if isinstance(action, dict):
        if kind == "git_push":
            parts = [action.get(k) for k in ("remote", "branch", "ref", "commit", "sha")]
            text = " ".join(str(p) for p in parts if p not in (None, ""))
            if text:
                return one_line(text)
        if kind == "custom_check":
            for key in ("command", "check", "definition_id", "name"):
                value = action.get(key)
                if value not in (None, ""):
                    return one_line(" ".join(map(str, value)) if isinstance(value, list) else value)
        return one_line(json.dumps(action, ensure_ascii=False, sort_keys=True))
    if raw is None:
        return ""
    return unparseable_note(raw) or one_line(raw)


# How many of a request's events `approvals show` and the detail pane read: archon writes a handful
# per request, and a file with 300,000 on one request took 20 s, 634 MB and 29 MB of output to show.
EVENT_PAGE = 200


def events_of(conn: sqlite3.Connection, project_id: str, request_id: str,
              limit: int | None = EVENT_PAGE) -> tuple[list[ApprovalEvent], int]:
    """The request's newest `limit` events (all with None), oldest first, and how many it has."""
    where = "WHERE project_id = ? AND approval_request_id = ?"
    total = conn.execute(f"SELECT count(*) FROM approval_request_events {where}",
                         (project_id, request_id)).fetchone()[0]
    cur = conn.execute(
        f"SELECT {stored_columns(conn, 'approval_request_events')} FROM approval_request_events "
        f"{where} ORDER BY sequence DESC" + (f" LIMIT {int(limit)}" if limit is not None else ""),
        (project_id, request_id),
    )
    names = [d[0] for d in cur.description]
    return [ApprovalEvent.from_row(dict(zip(names, row))) for row in cur.fetchall()][::-1], total


def load_request(conn: sqlite3.Connection, request_id: str) -> dict[str, Any]:
    cur = conn.execute(f"SELECT {stored_columns(conn, 'approval_requests')} FROM approval_requests WHERE id = ?",
                       (request_id,))
    row = cur.fetchone()
    if row is None:
        near = near_ids(conn, "approval", request_id)
        raise Refusal(
            f"No approval request {one_line(request_id, 80)!r} in this database.",
            (f"{near} " if near else "") + "See `archon-console approvals list --status all`.",
        )
    return dict(zip([d[0] for d in cur.description], row))


def decision_options(request: Mapping[str, Any], actor: str, now: datetime, *, project_deleting: bool = False) -> DecisionOptions:
    """For approve/deny/revoke: None when the action can proceed, else the reason it cannot.

    The services re-check all of this inside their transaction; this is for offering actions
    (the TUI's `check_action`) and explaining in advance. Approving when the requester cannot be
    determined with certainty is possible only with a confirmation (`options.confirm["approve"]`);
    deny makes the same comparison as approve (four_eyes.check_approver; docs/decisions.md, D1).
    """
    try:
        validate_actor(actor)  # archon's own names, an oversized name: no decision at all
    except (Refusal, UsageError) as exc:
        return DecisionOptions(dict.fromkeys(("approve", "deny", "revoke"), exc.reason), {})
    status = request.get("status")
    expires = parse_time(request.get("expires_at"))
    overdue = expires is not None and expires <= now
    verdict = four_eyes.check_approver(request.get("authority_json"), actor)
    reasons: dict[str, str | None] = {}
    for action, needs in (("approve", "pending"), ("deny", "pending"), ("revoke", "approved")):
        why: str | None = None
        if project_deleting:
            why = "its project is being deleted"
        elif status != needs:
            why = f"it is {status}, not {needs}"
        elif overdue:
            why = "overdue (past its expiry); it can only expire"
        elif action == "approve" and expires is None:
            why = "its expiry cannot be read as a time"
        elif action in ("approve", "deny") and verdict.self_approval:
            why = verdict.self_approval
        elif action == "approve" and verdict.unverified:
            why = verdict.unverified
        reasons[action] = why
    confirm: dict[str, str] = {}
    if reasons["approve"] is None and verdict.unknown:
        confirm["approve"] = f"its requester cannot be determined with certainty: {verdict.unknown}"
    return DecisionOptions(reasons, confirm)


def show_request(handle: ArchonDatabase, request_id: str, *, actor: str | None = None,
                 now: datetime | None = None) -> ApprovalDetail:
    """The request's columns and derived fields, its parsed action and authority, and its events;
    with `actor`, what that actor can do with it."""
    require_feature(handle, "approvals", what="The approval queue")
    now = now or system_clock()
    conn = handle.conn
    row = load_request(conn, request_id)
    project = conn.execute(
        "SELECT name, deletion_started_at FROM projects WHERE id = ?", (row["project_id"],)
    ).fetchone()
    project_deleting = bool(project and project["deletion_started_at"])
    action = parse_json_field(row.get("action_json"))
    authority = parse_json_field(row.get("authority_json"))
    options = confirm = None
    events, events_total = events_of(conn, row["project_id"], row["id"])
    events = tuple(events)
    if actor is not None:
        decided = decision_options(row, actor, now, project_deleting=project_deleting)
        options, confirm = dict(decided.reasons), dict(decided.confirm)
    return ApprovalDetail(
        **ApprovalRequest.archon_fields(row),
        **_derived(row, now, {row["project_id"]: project["name"]} if project else {}),
        columns=dict(row),
        action=action,
        authority=authority,
        requester=requester_of(authority),
        requester_problem=four_eyes.identify(row.get("authority_json")).problem,
        action_summary=action_summary(row.get("action_kind"), action, row.get("action_json")),
        project_deleting=project_deleting,
        events=events,
        events_total=events_total,
        options=options,
        confirm=confirm,
    )


__all__ = [
    "Filters",
    "RequestPage",
    "SORTS",
    "action_summary",
    "advance_cursor",
    "any_pending",
    "count_requests",
    "cursor_of",
    "decision_options",
    "events_of",
    "list_requests",
    "load_request",
    "partition_queries",
    "request_of",
    "request_position",
    "requester_of",
    "retreat_cursor",
    "show_request",
]
