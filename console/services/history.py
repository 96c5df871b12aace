""""As of": what a request or an environment looked like at a past moment, from its event log.

Support asks "what did the approver see at 14:02?". The answer is the request's fixed fields
(action, expiry, creation), the `to_status` of its last event created at or before that moment,
how long it had left before expiry then, and the events so far. Times are compared as instants
(archon writes more than one timestamp format), in Python, over one request's few events.

Environments work the same way from `execution_environment_events` (`to_state`, and the claim
recorded in the console's event metadata); when a database has no state columns on its events,
the state is rebuilt from the environment's own state timestamps (`ready_at`, `stopped_at`, ...).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from console.db.sql import quote_identifier, stored_columns
from console.clock import db_time, parse_time
from console.errors import Refusal, UsageError
from console.models.values import Json, Stored
from console.text import one_line, read_json

REQUEST_FIELDS = ("id", "project_id", "execution_run_id", "action_kind", "expires_at", "created_at")
# Lifecycle timestamp -> the state it starts, for databases whose events carry no state.
STATE_TIMESTAMPS = (
    ("created_at", "queued"), ("preparation_started_at", "preparing"), ("ready_at", "ready"),
    ("last_used_at", "running"), ("stopped_at", "stopped"), ("retirement_started_at", "retiring"),
    ("cleanup_pending_at", "cleanup_pending"), ("retired_at", "retired"), ("failed_at", "failed"),
)


@dataclass
class AsOf:
    """The reconstructed view; `exists` is False when `at` is before the row was created."""

    kind: str  # "approval" or "environment"
    id: str
    at: datetime
    exists: bool
    state: str | None
    fields: dict[str, Stored] = field(default_factory=dict)
    events: list[dict[str, Stored]] = field(default_factory=list)
    later_events: int = 0
    earlier_events: int = 0  # left out of `events`: only the newest EVENT_PAGE are kept
    current_state: str | None = None
    seconds_to_expiry: int | None = None
    claim: dict[str, Json | Stored] | None = None  # from the claim event's metadata_json
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "id": self.id, "at": db_time(self.at), "exists": self.exists,
            "state": self.state, "current_state": self.current_state, "fields": self.fields,
            "seconds_to_expiry": self.seconds_to_expiry, "claim": self.claim,
            "events": self.events, "later_events": self.later_events, "notes": self.notes,
        } | ({"earlier_events": self.earlier_events} if self.earlier_events else {})

    def paged(self) -> "AsOf":
        """Only the newest EVENT_PAGE events of `events` (the state is computed before paging)."""
        from console.services.approval_queue import EVENT_PAGE

        if len(self.events) > EVENT_PAGE:
            self.earlier_events = len(self.events) - EVENT_PAGE
            self.events = self.events[-EVENT_PAGE:]
        return self


def parse_as_of(text: str, now: datetime) -> datetime:
    """`--as-of` values: any timestamp archon writes ("2026-11-01 14:02", ISO 8601 with an offset,
    epoch milliseconds), or a bare time of day "14:02[:SS]" (UTC) meaning its latest occurrence at or
    before `now` -- support is usually asked about today."""
    raw = (text or "").strip()
    parts = raw.split(":")
    if 2 <= len(parts) <= 3 and all(p.isdigit() and len(p) <= 2 for p in parts):
        hour, minute, second = (int(p) for p in (parts + ["0"])[:3])
        if hour > 23 or minute > 59 or second > 59:
            raise UsageError(f"--as-of {raw!r} is not a time of day.")
        at = now.astimezone(timezone.utc).replace(
            hour=hour, minute=minute, second=second, microsecond=0)
        return at - timedelta(days=1) if at > now else at
    at = parse_time(raw)
    if at is None or raw.replace(".", "", 1).isdigit() and len(raw) < 9:
        raise UsageError(
            f"--as-of {raw!r} is not a time; use 'YYYY-MM-DD HH:MM[:SS]' (UTC), ISO 8601, or HH:MM for today.")
    return at


def _table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}


def _dicts(cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _split(events: list[dict[str, Any]], at: datetime) -> tuple[list[dict[str, Any]], int, list[str]]:
    notes: list[str] = []
    before, later = [], 0
    for event in events:
        when = parse_time(event.get("created_at"))
        if when is None:
            notes.append(f"event {event.get('sequence')} has an unreadable time {event.get('created_at')!r}; ignored")
            continue
        if when <= at:
            before.append(event)
        else:
            later += 1
    return before, later, notes


def approval_as_of(conn: sqlite3.Connection, request_id: str, at: datetime) -> AsOf:
    """The request as an approver would have seen it at `at`."""
    cur = conn.execute(f"SELECT {stored_columns(conn, 'approval_requests')} FROM approval_requests WHERE id = ?",
                       (request_id,))
    rows = _dicts(cur)
    if not rows:
        from console.services.resolve import near_ids

        raise Refusal(f"No approval request {one_line(request_id, 80)!r}.", near_ids(conn, "approval", request_id))
    request = rows[0]
    events = _dicts(conn.execute(
        "SELECT sequence, event_type, from_status, to_status, actor_classification, actor_reference, reason, "
        "created_at FROM approval_request_events WHERE project_id = ? AND approval_request_id = ? ORDER BY sequence",
        (request["project_id"], request_id),
    ))
    before, later, notes = _split(events, at)
    created = parse_time(request.get("created_at"))
    exists = created is None or created <= at
    if created is None:
        notes.append("the request's created_at is unreadable; assumed to exist")
    state = before[-1]["to_status"] if before else ("pending" if exists else None)
    if exists and not before:
        notes.append("no event at or before that time; 'pending' is assumed from creation")
    expires = parse_time(request.get("expires_at"))
    seconds = int((expires - at).total_seconds()) if expires is not None and exists else None
    return AsOf(
        kind="approval", id=request_id, at=at, exists=exists, state=state if exists else None,
        fields={k: request.get(k) for k in REQUEST_FIELDS},
        events=before, later_events=later, current_state=request.get("status"),
        seconds_to_expiry=seconds, notes=notes,
    ).paged()


def environment_as_of(conn: sqlite3.Connection, env_id: str, at: datetime) -> AsOf:
    """The environment's lifecycle state (and console claim) at `at`."""
    rows = _dicts(conn.execute(
        f"SELECT {stored_columns(conn, 'execution_environments')} FROM execution_environments WHERE id = ?", (env_id,)))
    if not rows:
        raise Refusal(f"No execution environment {env_id!r}.")
    env = rows[0]
    cols = _table_columns(conn, "execution_environment_events")
    wanted = [c for c in ("sequence", "event_type", "from_state", "to_state", "actor_classification",
                          "actor_reference", "reason", "metadata_json", "created_at") if c in cols]
    events: list[dict[str, Any]] = []
    if {"environment_id", "created_at"} <= cols and wanted:
        order = "sequence" if "sequence" in cols else "created_at"
        events = _dicts(conn.execute(
            f"SELECT {', '.join(wanted)} FROM execution_environment_events WHERE environment_id = ? ORDER BY {order}",
            (env_id,),
        ))
    before, later, notes = _split(events, at)
    created = parse_time(env.get("created_at"))
    exists = created is None or created <= at
    state = None
    if "to_state" in cols:
        with_state = [e for e in before if e.get("to_state")]
        if with_state:
            state = with_state[-1]["to_state"]
    if state is None and exists:
        state = _state_from_timestamps(env, at)
        notes.append("no state-changing event at or before that time; state inferred from the environment's timestamps")
    claim = None
    for event in before:
        meta = _meta(event.get("metadata_json"))
        if "claim_id" in meta or "operation_kind" in meta:
            kind = meta.get("operation_kind")
            claim = {"kind": kind, "claim_id": meta.get("claim_id"), "since": event.get("created_at")} \
                if meta.get("claim_id") else None
    fields = {k: env.get(k) for k in ("id", "project_id", "provider_kind", "target_key", "created_at") if k in env}
    return AsOf(
        kind="environment", id=env_id, at=at, exists=exists, state=state if exists else None,
        fields=fields, events=before, later_events=later, current_state=env.get("lifecycle_state"),
        claim=claim, notes=notes,
    ).paged()


def _meta(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = read_json(text)
    except ValueError:  # UnreadableJson
        return {}
    return value if isinstance(value, dict) else {}


def _state_from_timestamps(env: dict[str, Any], at: datetime) -> str | None:
    best: tuple[datetime, str] | None = None
    for column, state in STATE_TIMESTAMPS:
        when = parse_time(env.get(column))
        if when is not None and when <= at and (best is None or when >= best[0]):
            best = (when, state)
    return best[1] if best else None


def _duration(seconds: int) -> str:
    sign = "" if seconds >= 0 else "-"
    seconds = abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes:02d}m"
    return f"{sign}{minutes}m{secs:02d}s"


def format_as_of(view: AsOf) -> str:
    """Plain text for the CLI (`show ID --as-of TIME`); database strings are stripped of controls."""
    what = "approval request" if view.kind == "approval" else "environment"
    lines = [f"{what} {one_line(view.id)} as of {db_time(view.at)} UTC"]
    if not view.exists:
        lines.append(f"  did not exist yet (created {one_line(view.fields.get('created_at'))})")
        return "\n".join(lines)
    lines.append(f"  state then: {one_line(view.state)}   (now: {one_line(view.current_state)})")
    if view.kind == "approval":
        lines.append(f"  action: {one_line(view.fields.get('action_kind'))}   project: {one_line(view.fields.get('project_id'))}")
        if view.seconds_to_expiry is not None:
            if view.seconds_to_expiry >= 0:
                lines.append(f"  expiry then: in {_duration(view.seconds_to_expiry)} (expires_at {one_line(view.fields.get('expires_at'))})")
            else:
                lines.append(f"  expiry then: OVERDUE by {_duration(-view.seconds_to_expiry)} (expires_at {one_line(view.fields.get('expires_at'))})")
    elif view.claim:
        lines.append(f"  claim then: {one_line(view.claim.get('kind'))} by {one_line(view.claim.get('claim_id'))} since {one_line(view.claim.get('since'))}")
    lines.append(f"  events so far ({len(view.events) + view.earlier_events}):")
    if view.earlier_events:
        lines.append(f"    …and {view.earlier_events:,} earlier events (only the newest {len(view.events)} are shown)")
    for event in view.events:
        frm = event.get("from_status", event.get("from_state"))
        to = event.get("to_status", event.get("to_state"))
        who = event.get("actor_reference") or event.get("actor_classification") or ""
        reason = f" - {one_line(event.get('reason'), 60)}" if event.get("reason") else ""
        lines.append(
            f"    #{event.get('sequence')} {one_line(event.get('created_at'))} {one_line(event.get('event_type'))}: "
            f"{one_line(frm or '-')} -> {one_line(to or '-')} by {one_line(who)}{reason}"
        )
    if view.later_events:
        lines.append(f"  ({view.later_events} later event(s) not shown: they happened after that time)")
    for note in view.notes:
        lines.append(f"  note: {one_line(note)}")
    return "\n".join(lines)


__all__ = ["AsOf", "approval_as_of", "environment_as_of", "format_as_of", "parse_as_of"]
