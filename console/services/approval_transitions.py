"""The moves every approval write shares: read a request under the write lock, move its status
with exactly one event, and say who did it when, in words.

Only `status`, `updated_at` and (once, when it is NULL) `decision_at` are named in the UPDATE,
because archon's `BEFORE UPDATE OF` triggers fire on any named column. The event's `sequence` is
the request's last plus one, read in the same transaction.
"""

from __future__ import annotations

import sqlite3
import weakref
from console.records import dataclass
from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Callable, TypeVar

from console.db.sql import stored_columns
from console.clock import db_time, parse_time
from console.db.connect import ArchonDatabase
from console.db.tx import BUSY_HINT, lock_budget
from console.errors import Refusal, Said
from console.models.values import Stored
from console.services.approval_queue import load_request
from console.services import identity
from console.services.base import new_event_id
from console.text import one_line

SYSTEM_ACTOR = "archon-console"
BUSY_RETRIES = 3

if TYPE_CHECKING:
    T = TypeVar("T")


class DecisionRefused(Refusal):
    """A refusal about one request, carrying its status afterwards (for per-id results)."""

    def __init__(self, request_id: str, state: str | None, reason: Said, hint: Said | None = None,
                 *, wrote: tuple[str, ...] = ()):
        super().__init__(reason, hint)
        self.request_id = request_id
        self.state = state
        self.wrote = wrote  # what was committed before saying no (an overdue request's expiry)


def who(event: dict[str, Any] | None) -> str:
    if event is None:
        return "an unknown actor"
    ref = event.get("actor_reference")
    kind = event.get("actor_classification")
    if ref:
        return one_line(ref) if kind == "human" else f"{one_line(ref)} ({kind})"
    return {"system": "archon (system)", "action_executor": "the action executor"}.get(kind, "an unknown actor")


# The stored-column lists a decision names (console/db/sql.py `stored_columns`), per connection and
# schema version: a decision reads no schema (`PRAGMA table_xinfo`) after the first one on a
# connection, and its SQL text stays the same, so sqlite3's statement cache hands back the prepared
# statement. Any schema change (archon's ALTER or rebuild) bumps `schema_version`, which is read
# inside the decision's own transaction, under the write lock, so a list is never used past one.
_COLUMNS: weakref.WeakKeyDictionary[sqlite3.Connection, dict[tuple[str, str], tuple[int, str]]] = (
    weakref.WeakKeyDictionary())


def decision_columns(conn: sqlite3.Connection, table: str, prefix: str = "") -> str:
    """`stored_columns(conn, table, prefix)`, read once per connection and schema version."""
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    try:
        known = _COLUMNS.setdefault(conn, {})
    except TypeError:  # a connection that takes no weak reference (a bare sqlite3.Connection)
        return stored_columns(conn, table, prefix)
    found = known.get((table, prefix))
    if found is None or found[0] != version:
        found = known[(table, prefix)] = (version, stored_columns(conn, table, prefix))
    return found[1]


def event_into(conn: sqlite3.Connection, project_id: str, request_id: str, status: str) -> dict[str, Any] | None:
    """The most recent event that moved the request into `status` (who decided, and when)."""
    cur = conn.execute(
        f"SELECT {decision_columns(conn, 'approval_request_events')} FROM approval_request_events "
        "WHERE project_id = ? AND approval_request_id = ? AND to_status = ? ORDER BY sequence DESC LIMIT 1",
        (project_id, request_id, status),
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


_EVENT_TYPES: dict[tuple[str, str | None, str], str] = {}


def event_type_for(conn: sqlite3.Connection, db_key: str, from_status: str | None, to_status: str) -> str:
    """Archon's spelling of `event_type` for this transition if the database shows one, else the
    target status (docs/decisions.md, Q10). Looked up through indexes only, once per database and process."""
    cache_key = (db_key, from_status, to_status)
    if cache_key in _EVENT_TYPES:
        return _EVENT_TYPES[cache_key]
    found = None
    # Requests that went through this transition sit in its target status or one after it.
    later = {"approved": ("approved", "consumed", "expired", "invalidated")}.get(to_status, (to_status,))
    marks = ", ".join("?" for _ in later)
    for (project_id,) in conn.execute("SELECT id FROM projects ORDER BY id LIMIT 20").fetchall():
        row = conn.execute(
            f"""SELECT e.event_type FROM (
                    SELECT id FROM approval_requests WHERE project_id = ? AND status IN ({marks}) LIMIT 25
                ) AS r
                JOIN approval_request_events AS e
                  ON e.project_id = ? AND e.approval_request_id = r.id
                WHERE e.to_status = ? AND e.from_status IS ?
                LIMIT 1""",
            (project_id, *later, project_id, to_status, from_status),
        ).fetchone()
        if row is not None:
            found = row[0]
            break
    spelling = found if isinstance(found, str) and 1 <= len(found) <= 100 else to_status
    _EVENT_TYPES[cache_key] = spelling
    return spelling


def with_busy_retry(handle: ArchonDatabase, work: Callable[[], T]) -> T:
    """Run one transaction; when SQLite said busy before the command's lock budget was spent (a
    busy that skipped its busy handler), retry with what is left (the transaction did nothing). The
    budget is the command's (console/db/tx.py `lock_budget`), else this call's: never more waiting
    than --busy-timeout in all."""
    with lock_budget(handle.busy_timeout_ms / 1000) as budget:
        for attempt in range(BUSY_RETRIES + 1):
            try:
                return work()
            except Refusal as exc:
                if exc.hint != BUSY_HINT or attempt == BUSY_RETRIES or not budget.remaining_ms:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


def transition(
    conn: sqlite3.Connection,
    db_key: str,
    locked: LockedRequest,
    to_status: str,
    *,
    actor_classification: str,
    actor_reference: str,
    reason: str | None,
    now: datetime,
    declared_as: str | None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """The UPDATE and its event, inside the caller's transaction (which read `locked`).

    The event's `metadata_json` always records who acted (console/services/identity.py: the OS
    account, and `declared_as`, the name given with `--as`, for a person's action) beside the
    caller's own keys."""
    request = locked.row
    from_status = request["status"]
    last = locked.last_sequence
    if last is not None and (type(last) is not int or not 0 < last < 2**62):
        # archon's CHECK (sequence >= 1) lets a text, a BLOB or a huge number through; no event can
        # follow such a history without guessing its number, so refuse rather than crash or guess.
        raise DecisionRefused(
            request["id"], from_status,
            f"{one_line(request['id'])} cannot be {to_status}: its last event's sequence is not a whole number "
            f"({one_line(repr(last), 40)}), so the next event's number cannot be known. Nothing was written.",
            "Run archon-console doctor on this database; archon's own writes to this request stop there too.",
        )
    stamp = db_time(now)
    sets, values = ["status = ?", "updated_at = ?"], [to_status, stamp]
    if to_status in ("approved", "denied") and request.get("decision_at") is None:
        sets.append("decision_at = ?")  # write-once: only ever NULL -> value
        values.append(stamp)
    changed = conn.execute(
        f"UPDATE approval_requests SET {', '.join(sets)} WHERE id = ? AND status = ?",
        (*values, request["id"], from_status),
    ).rowcount
    if changed != 1:  # cannot happen under BEGIN IMMEDIATE; refuse rather than write a lone event
        raise DecisionRefused(
            request["id"], from_status, f"{one_line(request['id'])} changed while it was being decided; nothing was written."
        )
    sequence = (locked.last_sequence or 0) + 1  # read with the request, inside this same transaction
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
        "from_status, to_status, actor_classification, actor_reference, reason, metadata_schema_version, "
        "metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
        (
            new_event_id(),
            request["project_id"],
            request["id"],
            sequence,
            event_type_for(conn, db_key, from_status, to_status),
            from_status,
            to_status,
            actor_classification,
            actor_reference,
            reason,
            json_metadata(**{**(metadata or {}), **identity.event_metadata(declared_as)}),
            stamp,
        ),
    )
    request["status"] = to_status
    locked.last_sequence = sequence


def json_metadata(**values: Any) -> str:
    import json

    return json.dumps(values, ensure_ascii=False, sort_keys=True)


@dataclass
class LockedRequest:
    """A request read inside the deciding transaction, with what a decision needs beside its row:
    its project's deletion mark and the last event's sequence (read in the same statement)."""

    row: dict[str, Stored]
    project_deleting: Stored  # the project's deletion_started_at; None when it is not being deleted
    last_sequence: int | None  # None: no event yet


def load_for_decision(conn: sqlite3.Connection, request_id: str) -> LockedRequest:
    """The request, its project's deletion mark and its last sequence in one read (decisions are
    the hot path)."""
    cur = conn.execute(
        f"SELECT {decision_columns(conn, 'approval_requests', 'r')}, p.deletion_started_at AS project_deleting_, "
        "(SELECT MAX(e.sequence) FROM approval_request_events AS e "
        " WHERE e.project_id = r.project_id AND e.approval_request_id = r.id) AS last_sequence_ "
        "FROM approval_requests AS r "
        "LEFT JOIN projects AS p ON p.id = r.project_id WHERE r.id = ?",
        (request_id,),
    )
    row = cur.fetchone()
    if row is None:
        load_request(conn, request_id)  # raises the plain "no such request" refusal
    names = [d[0] for d in cur.description]
    # The two extra values are the last two columns: archon's columns keep their names untouched.
    *columns, deleting, last_sequence = row
    return LockedRequest(dict(zip(names[:-2], columns)), deleting, last_sequence)


def overdue(request: dict[str, Any], now: datetime) -> bool:
    """Past its expiry. An expiry that is not a time (`nan`, 9e999, a year past 9999, a BLOB) is not
    past: nothing says it is, so the sweep leaves the request alone and says so, and it is not
    approvable either (`unreadable_expiry`): the request fails closed without a guessed write."""
    expires = parse_time(request.get("expires_at"))
    return expires is not None and expires <= now


def unreadable_expiry(request: dict[str, Any]) -> bool:
    return parse_time(request.get("expires_at")) is None


def unreadable_expiry_sentence(request: dict[str, Any]) -> str:
    return f"its expiry ({one_line(request.get('expires_at'), 40)}) cannot be read as a time"
