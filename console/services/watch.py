"""The approval queue's changes as they happen: what `approvals watch` streams.

Why events and not request rows: archon appends one `approval_request_events` row for every change
(requested, approved, denied, expired, consumed, invalidated, cancelled) and its triggers forbid
updating them, so "every event after the last one delivered" is exactly the set of changes not yet
shown. The keyset is the table's rowid (insertion order, a seek on the primary key); the position a
`--cursor` file keeps is the last delivered event's *id* as well, because after a `restore` the same
rowid can name a different event.

Reminders (`--expiring-within`) are not events: they are read from the pending requests through
`idx_approval_requests_project_status_expiry`, one seek per project, and remembered by request id
so each request is reminded once.

Nothing here writes the database.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from console.db.sql import stored_columns
from console.clock import db_time, parse_time
from console.services.identity import account_of

_AT = ("CASE WHEN typeof({c}) IN ('integer', 'real') "
       "THEN strftime('%Y-%m-%dT%H:%M:%SZ', {c} / 1000.0, 'unixepoch') "
       "ELSE coalesce(strftime('%Y-%m-%dT%H:%M:%SZ', {c}), {c}) END")
BATCH = 1000
# Text bounds are compared first (index order), then the exact time: see approval_queue's slack.
_TEXT_SLACK = timedelta(days=1)

# What an event's move means to an approver; `revoked` is a human withdrawing an approval.
_CHANGE = {"pending": "new", "approved": "approved", "denied": "denied", "expired": "expired",
           "consumed": "consumed", "cancelled": "cancelled", "invalidated": "invalidated"}


@dataclass(frozen=True)
class QueueChange:
    """One change of one request, or a reminder (`change == "expiring"`, `event_id is None`)."""

    change: str
    request_id: str
    project_id: str
    project_name: str | None
    kind: str | None
    from_status: str | None
    to_status: str | None
    actor: str | None
    actor_class: str | None
    reason: str | None
    at: str | None
    expires_at: str | None
    event_id: str | None = None
    rowid: int | None = field(default=None, compare=False)
    os_account: str | None = None  # the OS account the console recorded (docs/decisions.md, D21)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("rowid")
        return data


@dataclass(frozen=True)
class WatchFilter:
    project_id: str | None = None
    kind: str | None = None
    statuses: frozenset[str] | None = None  # to_status of the change; None: every change


@dataclass
class Position:
    """Where delivery stands: the last delivered event (rowid and id) and the reminded requests."""

    rowid: int = 0
    event_id: str | None = None
    reminded: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"rowid": self.rowid, "event_id": self.event_id, "reminded": sorted(self.reminded)}

    @classmethod
    def from_json(cls, data: Any) -> "Position":
        if not isinstance(data, dict) or not isinstance(data.get("rowid"), int) or data["rowid"] < 0:
            raise ValueError("not a cursor")
        event_id = data.get("event_id")
        reminded = data.get("reminded", [])
        if event_id is not None and not isinstance(event_id, str):
            raise ValueError("not a cursor")
        if not isinstance(reminded, list) or not all(isinstance(r, str) for r in reminded):
            raise ValueError("not a cursor")
        return cls(data["rowid"], event_id, set(reminded))


def has_approvals(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'approval_request_events'").fetchone() is not None


def newest(conn: sqlite3.Connection) -> Position:
    """The position "now": after the newest event, so only later changes are shown."""
    row = conn.execute("SELECT rowid, id FROM approval_request_events "
                       "WHERE rowid = (SELECT max(rowid) FROM approval_request_events)").fetchone()
    return Position(row[0], row[1]) if row else Position()


def resume(conn: sqlite3.Connection, saved: Position) -> tuple[Position, str | None]:
    """Where to continue from a saved position in the file at hand, and a note when it moved.

    The saved event is looked up by id: if it is there, delivery continues right after it (whatever
    its rowid is now). If it is not (the file was restored from an older snapshot, or replaced), the
    events after it cannot be told apart from ones already delivered: delivery continues from the
    newest event, and the note says so.
    """
    if saved.event_id is None:
        if saved.rowid == 0:
            return saved, None
        return newest(conn), "the cursor names no event; continuing from the newest one"
    row = conn.execute("SELECT rowid FROM approval_request_events WHERE id = ?", (saved.event_id,)).fetchone()
    if row is not None:
        return Position(row[0], saved.event_id, saved.reminded), None
    now = newest(conn)
    now.reminded = saved.reminded
    return now, (f"the last delivered event ({saved.event_id}) is not in this database (restored from an "
                 "older copy, or a different file?); continuing from its newest event")


_EVENTS = f"""
    SELECT e.rowid, e.id, e.approval_request_id, e.project_id, p.name, r.action_kind, e.from_status,
           e.to_status, e.actor_reference, e.actor_classification, e.reason,
           {_AT.format(c='e.created_at')}, {_AT.format(c='r.expires_at')}, e.metadata_json
    FROM approval_request_events AS e
    LEFT JOIN approval_requests AS r ON r.id = e.approval_request_id AND r.project_id = e.project_id
    LEFT JOIN projects AS p ON p.id = e.project_id
    WHERE e.rowid > ?"""


def changes_after(conn: sqlite3.Connection, position: Position, flt: WatchFilter,
                  limit: int = BATCH) -> tuple[list[QueueChange], Position, bool]:
    """Events after `position` that pass the filter, the position after the last one examined
    (filtered-out events move it too, so they are not read again), and whether more may follow."""
    rows = conn.execute(_EVENTS + " ORDER BY e.rowid LIMIT ?", (position.rowid, limit)).fetchall()
    out = []
    for row in rows:
        (rowid, event_id, request_id, project_id, project_name, kind, from_status, to_status, actor,
         actor_class, reason, at, expires, metadata_json) = tuple(row)
        if flt.project_id is not None and project_id != flt.project_id:
            continue
        if flt.kind is not None and kind != flt.kind:
            continue
        if flt.statuses is not None and to_status not in flt.statuses:
            continue
        change = _CHANGE.get(to_status, to_status or "?")
        if to_status == "pending" and from_status is not None:
            change = "pending"
        if to_status == "invalidated" and actor_class == "human":
            change = "revoked"
        out.append(QueueChange(change, request_id, project_id, project_name, kind, from_status, to_status,
                               actor, actor_class, reason, at, expires, event_id, rowid,
                               account_of(metadata_json)))
    if not rows:
        return out, position, False
    return out, Position(rows[-1][0], rows[-1][1], position.reminded), len(rows) == limit


def expiring(conn: sqlite3.Connection, now: datetime, within: timedelta, flt: WatchFilter,
             reminded: set[str]) -> list[QueueChange]:
    """Pending requests whose expiry is at most `within` away (overdue ones too), not yet reminded."""
    horizon = now + within
    sql = f"""
        SELECT r.id, r.project_id, p.name, r.action_kind, {_AT.format(c='r.expires_at')}
        FROM projects AS p
        JOIN approval_requests AS r ON r.project_id = p.id AND r.status = 'pending' AND r.expires_at <= ?
        WHERE julianday(r.expires_at) <= julianday(?)"""
    params: list[Any] = [db_time(horizon + _TEXT_SLACK), db_time(horizon)]
    if flt.project_id is not None:
        sql += " AND p.id = ?"
        params.append(flt.project_id)
    if flt.kind is not None:
        sql += " AND r.action_kind = ?"
        params.append(flt.kind)
    out = []
    for request_id, project_id, name, kind, expires in conn.execute(sql, params):
        if request_id in reminded:
            continue
        if flt.statuses is not None and "pending" not in flt.statuses:
            continue
        out.append(QueueChange("expiring", request_id, project_id, name, kind, "pending", "pending", None, None,
                               None, None, expires))
    return out


def still_pending(conn: sqlite3.Connection, ids: set[str]) -> set[str]:
    """The reminded ids that are still pending: the rest are forgotten (the set stays small)."""
    kept = set()
    for request_id in ids:
        row = conn.execute("SELECT status FROM approval_requests WHERE id = ?", (request_id,)).fetchone()
        if row is not None and row[0] == "pending":
            kept.add(request_id)
    return kept


def request_json(conn: sqlite3.Connection, request_id: str) -> dict[str, Any] | None:
    """What a hook gets on stdin: the request row as `approvals show --json` names its columns."""
    cursor = conn.execute(f"SELECT {stored_columns(conn, 'approval_requests')} FROM approval_requests WHERE id = ?",
                          (request_id,))
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], tuple(row)))


def seconds_until(value: str | None, now: datetime) -> float | None:
    at = parse_time(value)
    return None if at is None else (at - now).total_seconds()


__all__ = ["Position", "QueueChange", "WatchFilter", "changes_after", "expiring", "has_approvals", "newest",
           "request_json", "resume", "still_pending"]


# ---------------------------------------------------------------- the TUI's "new request" signal
def start_position(handle) -> Position:
    """Where the TUI starts noticing arrivals: after the newest event (None-safe before 1.8.22)."""
    if not has_approvals(handle.conn):
        return Position()
    return newest(handle.conn)


def arrivals(handle, position: Position) -> tuple[list[QueueChange], Position]:
    """New pending requests since `position`, and the position after them."""
    if not has_approvals(handle.conn):
        return [], position
    found: list[QueueChange] = []
    more = True
    while more:
        changes, position, more = changes_after(handle.conn, position, WatchFilter(statuses=frozenset({"pending"})))
        found += [c for c in changes if c.change == "new"]
    return found, position


def pending_count(handle) -> int | None:
    """How many requests wait for a decision: one index seek per project (None before 1.8.22)."""
    if not has_approvals(handle.conn):
        return None
    return handle.conn.execute(
        "SELECT count(*) FROM projects AS p CROSS JOIN approval_requests AS r "
        "ON r.project_id = p.id AND r.status = 'pending'").fetchone()[0]


def own_changes(handle) -> int:
    """Rows this connection changed since it opened: the console's own writes move the count too."""
    return handle.conn.total_changes
