"""Execution environments: browsing, and exclusive operation claims (stop, retire, reset, cleanup_retry).

A claim is the triple (`operation_claim_id`, `operation_kind`, `operation_claimed_at`). Archon's
trigger only checks that the triple is all-or-nothing; it lets one claim overwrite another
(docs/archon-schema.md, operation claims), so exclusivity lives here: every write is a compare-and-set that must change
exactly one row, inside one `BEGIN IMMEDIATE` transaction that re-reads every precondition.

A claim is an administrative hold (docs/decisions.md, Q6): it stops new leases at once (lease admission
refuses claimed environments). The console cannot stop or delete a container, so it never writes
`lifecycle_state` (that would claim a provider-side effect nobody performed). Completing a claim
*hands the operation off* to archon's own scheduling column and clears the claim, in one UPDATE:

- stop: `idle_stop_at = now`; archon's idle-stop sweep (the one `idx_execution_environments_idle_stop`
  serves) stops the environment.
- retire: the claim already set `retirement_requested_at`, which archon's reuse index and lease
  admission honour; completing only clears the claim, and archon's retirement path
  (retiring -> cleanup_pending -> retired) does the rest. The request is never cleared (Q7).
- cleanup_retry: `cleanup_retry_at = now`; archon's cleanup worker retries.
- reset: no completion. Marking a failed environment `ready` would let lease admission place runs
  on a workspace nobody rebuilt; a reset claim is a hold that its holder releases.

`updated_at` is never touched (it orders archon's cleanup index, Q8; no state changes here).
A handed-off request stays visible (`pending_handoffs`) until archon acts on it.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import humanize

from console.clock import db_time, parse_time, seconds_between
from console.db.connect import ArchonDatabase
from console.db.queries import Cursor, KeysetQuery, fetch_page
from console.db.tx import write_transaction
from console.errors import Refusal, UsageError
from console.services.base import (
    ActionResult,
    claim_id_for,
    new_event_id,
    require_feature,
    validate_actor,
    validate_reason,
)

STATES = (
    "queued", "preparing", "ready", "running", "stopped",
    "retiring", "cleanup_pending", "retired", "failed", "unavailable",
)
OPERATIONS = ("stop", "retire", "reset", "cleanup_retry")

# Which lifecycle states each operation may be claimed (and completed) in, and why.
ALLOWED_STATES: dict[str, tuple[str, ...]] = {
    "stop": ("ready", "running"),
    "retire": tuple(s for s in STATES if s not in ("retired", "retiring", "cleanup_pending")),
    "reset": ("ready", "stopped", "failed", "unavailable"),
    "cleanup_retry": ("cleanup_pending",),
}
WHY_ALLOWED: dict[str, str] = {
    "stop": "only something running or ready can be stopped",
    "retire": "an environment already retiring, waiting for cleanup or retired is on its way out",
    "reset": "a reset rebuilds the workspace, which must not happen while it runs or is being retired",
    "cleanup_retry": "only an environment waiting for cleanup can have its cleanup retried",
}
# What completing an operation hands to archon: (the column that carries the request, who in
# archon performs it). reset has no completion: see the module docstring.
HANDOFF: dict[str, tuple[str, str] | None] = {
    "stop": ("idle_stop_at", "archon's idle-stop sweep"),
    "retire": ("retirement_requested_at", "archon's retirement path"),
    "reset": None,
    "cleanup_retry": ("cleanup_retry_at", "archon's cleanup worker"),
}
HANDOFF_LABEL = {"stop": "stop", "retire": "retirement", "cleanup_retry": "cleanup retry"}
RESET_NOT_COMPLETABLE = (
    "a reset claim cannot be completed: the console cannot rebuild a workspace, and marking the "
    "environment ready would let archon place runs on it. Release the claim ({release}); "
    "archon resets environments itself"
)
ADMITTING_STATES = ("ready", "running", "stopped")
DEFAULT_STALE_AFTER = timedelta(minutes=15)
STALE_ENV = "ARCHON_CONSOLE_STALE_MINUTES"
CLAIM_PREFIX = "console:"
# Events the console writes; anything else in the table is archon's.
EVENT_TYPES = ("operation_claimed", "operation_taken_over", "operation_released", "operation_completed")
_EVENT_COLUMNS = (
    "id", "project_id", "environment_id", "sequence", "event_type", "from_state", "to_state",
    "actor_classification", "actor_reference", "reason", "metadata_json", "created_at",
)


def completion_effect(op: str) -> str:
    """What completing `op` writes and who acts on it (shared by CLI help, results and the TUI)."""
    handoff = HANDOFF.get(op)
    if handoff is None:
        return "none: a reset claim is a hold that its holder releases; archon resets environments itself"
    column, performer = handoff
    if op == "retire":
        return f"keeps {column} and clears the claim; {performer} (retiring -> cleanup_pending -> retired) performs it"
    return f"sets {column} = now and clears the claim; {performer} performs it"


def operations_help() -> str:
    """One line per operation: the states it needs and why (shared by CLI help and the TUI)."""
    lines = []
    for op in OPERATIONS:
        lines.append(f"{op}: claimable in {', '.join(ALLOWED_STATES[op])} ({WHY_ALLOWED[op]}); "
                     f"complete: {completion_effect(op)}")
    return "\n".join(lines)


def default_stale_after() -> timedelta:
    """`$ARCHON_CONSOLE_STALE_MINUTES`, else 15 minutes."""
    raw = os.environ.get(STALE_ENV)
    if not raw:
        return DEFAULT_STALE_AFTER
    try:
        minutes = float(raw)
    except ValueError:
        raise UsageError(f"{STALE_ENV} must be a number of minutes, not {raw!r}.") from None
    if not math.isfinite(minutes) or not 0 <= minutes <= 10 * 366 * 24 * 60:
        raise UsageError(f"{STALE_ENV} must be a number of minutes between 0 and ten years, not {raw!r}.")
    return timedelta(minutes=minutes)


# --- claim ids ----------------------------------------------------------------------------

def claim_holder(claim_id: str | None) -> str | None:
    """Who a claim id names: the actor of a console claim, the raw id of anyone else's."""
    if not claim_id:
        return None
    if claim_id.startswith(CLAIM_PREFIX) and "@" in claim_id:
        return claim_id[len(CLAIM_PREFIX):].rsplit("@", 1)[0] or claim_id
    return claim_id


def held_by(claim_id: str | None, actor: str) -> bool:
    """True when a console claim id names `actor`.

    `claim_id_for` cuts `console:<actor>@<host>` to fit 128 characters; for such a cut id (exactly
    128 long) the surviving head must be a prefix of what this actor's id would be on this host.
    """
    if not claim_id or not claim_id.startswith(CLAIM_PREFIX):
        return False
    if claim_holder(claim_id) == actor:
        return True
    if len(claim_id) < 128:
        return False
    head = claim_id.rsplit(":", 1)[0]
    return f"{CLAIM_PREFIX}{actor}@{socket.gethostname() or 'host'}".startswith(head)


# --- reading ------------------------------------------------------------------------------

def _columns(conn: sqlite3.Connection, table: str) -> list[sqlite3.Row]:
    return conn.execute(f'PRAGMA table_info("{table}")').fetchall()


_LEASES = (
    "(SELECT count(*) FROM execution_environment_run_bindings b WHERE b.environment_id = e.id "
    "AND b.relationship = 'execution' AND b.released_at IS NULL)"
)


def _derive(row: dict[str, Any], now: datetime, stale_after: timedelta) -> dict[str, Any]:
    """Add claim age, staleness and lease admission (docs/archon-schema.md) to a row."""
    claimed_at = parse_time(row.get("operation_claimed_at"))
    age = seconds_between(now, claimed_at) if claimed_at and row.get("operation_claim_id") else None
    row["claim_holder"] = claim_holder(row.get("operation_claim_id"))
    row["claim_age_seconds"] = age
    held = bool(row.get("operation_claim_id"))
    row["stale"] = held and (age is None or age > stale_after.total_seconds())
    reasons = []
    state = row.get("lifecycle_state")
    if state not in ADMITTING_STATES:
        reasons.append(f"it is {state}")
    if row.get("retirement_requested_at"):
        reasons.append("retirement was requested")
    if row.get("operation_claim_id"):
        reasons.append(f"it is claimed for {row.get('operation_kind')}")
    if row.get("active_lease_count"):
        reasons.append("an execution lease is active (one at a time)")
    row["admits_leases"] = not reasons
    row["admission_reason"] = "; ".join(reasons) if reasons else "admits a new execution lease"
    row["pending_handoffs"] = pending_handoffs(row, now, stale_after)
    return row


def pending_handoffs(row: dict[str, Any], now: datetime, wait_after: timedelta) -> list[dict[str, Any]]:
    """The requests archon has been handed and has not performed yet, as archon's columns show them.

    A stop is due when `idle_stop_at` has passed while the environment is still ready or running
    (whether the console or archon's own idle schedule set it); a retirement is pending while
    `retirement_requested_at` is set and the environment is not retired; a cleanup retry is due
    when `cleanup_retry_at` has passed while it is still cleanup_pending. `overdue` means archon
    should have acted by now (waited longer than `wait_after`, the stale threshold): archon is
    probably not running. Retirement that archon has started (retiring, cleanup_pending), is held
    by a claim or waits for a run to end is never overdue.
    """
    state = row.get("lifecycle_state")
    found: list[dict[str, Any]] = []

    def add(op: str, since_text: Any, note: str = "", *, can_be_overdue: bool = True) -> None:
        since = parse_time(since_text)
        age = seconds_between(now, since) if since else None
        column, performer = HANDOFF[op]  # type: ignore[misc]
        when = f"{_ago(age)} ago" if age is not None else f"at an unreadable time ({since_text})"
        text = f"{HANDOFF_LABEL[op]} requested {when}; {performer} performs it" + note
        overdue = can_be_overdue and (age is None or age > wait_after.total_seconds())
        found.append({"kind": op, "column": column, "since": since_text, "age_seconds": age,
                      "performed_by": performer, "overdue": overdue, "text": text})

    def due(column: str) -> bool:
        at = parse_time(row.get(column))
        return bool(row.get(column)) and (at is None or at <= now)

    if state in ("ready", "running") and due("idle_stop_at"):
        add("stop", row.get("idle_stop_at"))
    if row.get("retirement_requested_at") and state != "retired":
        note, waiting = "", True
        if state in ("retiring", "cleanup_pending"):
            note, waiting = f" (under way: {state})", False
        elif row.get("operation_claim_id"):
            note, waiting = f" once the {row.get('operation_kind')} claim is completed or released", False
        elif row.get("active_lease_count"):
            note, waiting = " once the run holding its execution lease ends", False
        add("retire", row.get("retirement_requested_at"), note, can_be_overdue=waiting)
    if state == "cleanup_pending" and due("cleanup_retry_at"):
        add("cleanup_retry", row.get("cleanup_retry_at"))
    return found


@dataclass
class EnvironmentPage:
    rows: list[dict[str, Any]]
    next_after: str | None  # pass as `after` for the next page; None on the last page


def environment_query(
    handle: ArchonDatabase,
    *,
    now: datetime,
    state: str | None = None,
    project: str | None = None,
    claimed: bool = False,
    stale: bool = False,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> KeysetQuery:
    """The environments matching the filters, ordered by id (ids only; callers widen `columns`).

    The one definition of the filters: the list, its counts and the TUI's jumps all page it.
    """
    if state is not None and state not in STATES:
        raise UsageError(f"Unknown state {state!r}; one of: {', '.join(STATES)}.")
    if (claimed or stale) and not handle.shape.supports("claims"):
        require_feature(handle, "claims", what="Filtering by operation claims")
    where: list[str] = []
    params: list[Any] = []
    if state:
        where.append("e.lifecycle_state = ?")
        params.append(state)
    if project:
        where.append("e.project_id = ?")
        params.append(project)
    if claimed or stale:
        where.append("e.operation_claim_id IS NOT NULL")
    if stale:  # an unreadable claim time counts as stale, as it does for a takeover
        where.append("(julianday(e.operation_claimed_at) IS NULL OR julianday(e.operation_claimed_at) < julianday(?))")
        params.append(db_time(now - stale_after))
    return KeysetQuery("execution_environments e", keys=("e.id",), key_names=("id",), columns="e.id",
                       where=tuple(where), params=tuple(params))


def list_environments(
    handle: ArchonDatabase,
    *,
    now: datetime,
    state: str | None = None,
    project: str | None = None,
    claimed: bool = False,
    stale: bool = False,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    after: str | None = None,
    limit: int = 100,
) -> EnvironmentPage:
    """One keyset page ordered by id; `after` is the last id of the previous page."""
    query = replace(
        environment_query(handle, now=now, state=state, project=project, claimed=claimed, stale=stale,
                          stale_after=stale_after),
        columns=f"e.*, {_LEASES} AS active_lease_count",
    )
    if limit and limit > 0:
        page = fetch_page(handle.conn, query, cursor=Cursor((after,)) if after is not None else None, limit=limit)
        rows, next_after = page.rows, (page.last_key[0] if page.has_next else None)
    else:  # everything after `after`, for counts and exports
        if after is not None:
            query = query.filtered("e.id > ?", after)
        sql = f"SELECT {query.columns} FROM {query.source}"
        if query.where:
            sql += " WHERE " + " AND ".join(f"({w})" for w in query.where)
        rows = [dict(r) for r in handle.conn.execute(sql + " ORDER BY e.id", query.params)]
        next_after = None
    return EnvironmentPage([_derive(r, now, stale_after) for r in rows], next_after)


def _events(conn: sqlite3.Connection, env_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    names = {c["name"] for c in _columns(conn, "execution_environment_events")}
    if "environment_id" not in names:
        return []
    order = "sequence" if "sequence" in names else "rowid"
    sql = f"SELECT * FROM execution_environment_events WHERE environment_id = ? ORDER BY {order} DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return [dict(r) for r in conn.execute(sql, (env_id,))][::-1]


def show_environment(
    handle: ArchonDatabase,
    env_id: str,
    *,
    now: datetime,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    event_limit: int | None = 200,
) -> dict[str, Any]:
    """The row with derived fields, its active leases, and its event timeline (oldest first)."""
    row = handle.conn.execute(
        f"SELECT e.*, {_LEASES} AS active_lease_count FROM execution_environments e WHERE e.id = ?",
        (env_id,),
    ).fetchone()
    if row is None:
        raise Refusal(f"There is no environment {env_id}.", "List them with `envs list`.")
    env = _derive(dict(row), now, stale_after)
    env["active_leases"] = [
        dict(r)
        for r in handle.conn.execute(
            "SELECT * FROM execution_environment_run_bindings WHERE environment_id = ? "
            "AND relationship = 'execution' AND released_at IS NULL ORDER BY bound_at",
            (env_id,),
        )
    ]
    env["events"] = _events(handle.conn, env_id, event_limit)
    return env


# --- writing ------------------------------------------------------------------------------

def _event_columns(conn: sqlite3.Connection) -> set[str] | None:
    """The event columns we can fill, or None when a required column's meaning is unknown.

    Archon's DDL for this table is unseen (docs/decisions.md, Q3): if a real database demands a column we
    do not know, we skip the event rather than invent a value.
    """
    info = _columns(conn, "execution_environment_events")
    if not info:
        return None
    names = {c["name"] for c in info}
    if not {"environment_id", "sequence", "event_type"} <= names:
        return None
    writable = set()
    for column in info:
        name = column["name"]
        rowid_alias = column["pk"] and (column["type"] or "").upper() == "INTEGER"
        required = column["notnull"] and column["dflt_value"] is None and not rowid_alias
        if name in _EVENT_COLUMNS and not rowid_alias:
            writable.add(name)
        elif required:
            return None
    return writable


def _append_event(
    conn: sqlite3.Connection,
    env: sqlite3.Row,
    *,
    event_type: str,
    from_state: str | None,
    to_state: str | None,
    actor: str,
    reason: str | None,
    metadata: dict[str, Any],
    now: datetime,
) -> bool:
    columns = _event_columns(conn)
    if columns is None:
        return False
    sequence = conn.execute(
        "SELECT COALESCE(MAX(sequence), 0) + 1 FROM execution_environment_events WHERE environment_id = ?",
        (env["id"],),
    ).fetchone()[0]
    values = {
        "id": new_event_id(),
        "project_id": env["project_id"],
        "environment_id": env["id"],
        "sequence": sequence,
        "event_type": event_type,
        "from_state": from_state,
        "to_state": to_state,
        "actor_classification": "human",
        "actor_reference": actor,
        "reason": reason,
        "metadata_json": json.dumps({**metadata, "source": "archon-console"}, sort_keys=True),
        "created_at": db_time(now),
    }
    names = [n for n in _EVENT_COLUMNS if n in columns]
    conn.execute(
        f"INSERT INTO execution_environment_events ({', '.join(names)}) "
        f"VALUES ({', '.join('?' for _ in names)})",
        [values[n] for n in names],
    )
    return True


def _last_operation_event(conn: sqlite3.Connection, env_id: str) -> dict[str, Any] | None:
    names = {c["name"] for c in _columns(conn, "execution_environment_events")}
    if not {"environment_id", "sequence", "event_type", "actor_reference"} <= names:
        return None
    row = conn.execute(
        "SELECT * FROM execution_environment_events WHERE environment_id = ? AND event_type IN "
        f"({', '.join('?' for _ in EVENT_TYPES)}) ORDER BY sequence DESC LIMIT 1",
        (env_id, *EVENT_TYPES),
    ).fetchone()
    return dict(row) if row else None


def _load(conn: sqlite3.Connection, env_id: str) -> sqlite3.Row:
    env = conn.execute(
        "SELECT e.*, p.deletion_started_at AS project_deletion_started_at "
        "FROM execution_environments e LEFT JOIN projects p ON p.id = e.project_id WHERE e.id = ?",
        (env_id,),
    ).fetchone()
    if env is None:
        raise Refusal(f"There is no environment {env_id}.", "List them with `envs list`.")
    if env["project_deletion_started_at"]:
        raise Refusal(
            f"{env_id} belongs to project {env['project_id']}, which is being deleted "
            f"(since {_when(env['project_deletion_started_at'])}); nothing was written.",
            "Projects being deleted are read-only in the console.",
        )
    return env


def _active_leases(conn: sqlite3.Connection, env_id: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM execution_environment_run_bindings WHERE environment_id = ? "
        "AND relationship = 'execution' AND released_at IS NULL",
        (env_id,),
    ).fetchone()[0]


def _when(value: Any) -> str:
    at = parse_time(value)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else str(value)


def _ago(seconds: float | None) -> str:
    if seconds is None or seconds == float("inf"):
        return "an unknown time"
    return humanize.naturaldelta(timedelta(seconds=max(0, seconds)))


def _claim_age(env: sqlite3.Row, now: datetime) -> float:
    at = parse_time(env["operation_claimed_at"])
    return (now - at).total_seconds() if at else float("inf")


def _describe_claim(env: sqlite3.Row, now: datetime) -> str:
    age = _claim_age(env, now)
    age_text = f"{_ago(age)} ago" if age != float("inf") else "an unreadable time"
    return (
        f"{env['id']} is claimed for {env['operation_kind']} by {claim_holder(env['operation_claim_id'])} "
        f"since {_when(env['operation_claimed_at'])} ({age_text})"
    )


def _stale_hint(env: sqlite3.Row, now: datetime, stale_after: timedelta, verb: str) -> str:
    age = _claim_age(env, now)
    threshold = _ago(stale_after.total_seconds())
    if age > stale_after.total_seconds():
        return f"it is stale (older than {threshold}); use --takeover with a reason to {verb}"
    wait = _ago(stale_after.total_seconds() - age)
    return f"use --takeover with a reason once it is stale (older than {threshold}, in {wait})"


def _require_allowed(env: sqlite3.Row, op: str, doing: str, hint: str | None = None) -> None:
    state = env["lifecycle_state"]
    if state not in ALLOWED_STATES[op]:
        raise Refusal(
            f"{env['id']} is {state}; {doing} needs {' or '.join(ALLOWED_STATES[op])} "
            f"({WHY_ALLOWED[op]}). Nothing was written.",
            hint,
        )


def _result(ok: bool, env_id: str, state: str | None, message: str, *, noop=False, **extra) -> ActionResult:
    return ActionResult(ok=ok, id=env_id, state=state, message=message, noop=noop, extra=extra)


def _checks(handle: ArchonDatabase, actor: str) -> str:
    require_feature(handle, "claims", what="An operation claim")
    return validate_actor(actor)


def claim(
    handle: ArchonDatabase,
    env_id: str,
    op: str,
    actor: str,
    *,
    now: datetime,
    takeover: bool = False,
    reason: str | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> ActionResult:
    """Claim `op` on an environment for `actor`; with `takeover`, replace a stale claim.

    The UPDATE is conditional on the claim seen (NULL, or the stale one being taken over) and on
    the lifecycle state; exactly one row must change. A retire claim also records the durable
    retirement request. Repeating a claim you already hold is a no-op.
    """
    if op not in OPERATIONS:
        raise UsageError(f"Unknown operation {op!r}; one of: {', '.join(OPERATIONS)}.")
    actor = _checks(handle, actor)
    reason = validate_reason(reason, required=takeover, what="taking over a claim")
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        env = _load(conn, env_id)
        held = env["operation_claim_id"]
        state = env["lifecycle_state"]
        if held and held_by(held, actor):
            if env["operation_kind"] == op:
                return _result(True, env_id, state, f"{env_id} is already claimed for {op} by you; nothing changed.",
                               noop=True, operation_kind=op, claim_id=held)
            raise Refusal(
                f"You already hold a {env['operation_kind']} claim on {env_id}; "
                f"complete or release it before claiming {op}. Nothing was written."
            )
        if held and not takeover:
            raise Refusal(_describe_claim(env, now) + "; " + _stale_hint(env, now, stale_after, "take it over") + ".")
        if held and _claim_age(env, now) <= stale_after.total_seconds():
            raise Refusal(
                _describe_claim(env, now) + "; a fresh claim cannot be taken over: "
                + _stale_hint(env, now, stale_after, "take it over") + "."
            )
        _require_allowed(env, op, f"a {op} claim")
        new_id = claim_id_for(actor)
        sets = "operation_claim_id = ?, operation_kind = ?, operation_claimed_at = ?"
        params: list[Any] = [new_id, op, db_time(now)]
        if op == "retire":
            sets += ", retirement_requested_at = COALESCE(retirement_requested_at, ?)"
            params.append(db_time(now))
        guard = "operation_claim_id = ?" if held else "operation_claim_id IS NULL"
        params += [env_id, *([held] if held else []), *ALLOWED_STATES[op]]
        changed = conn.execute(
            f"UPDATE execution_environments SET {sets} WHERE id = ? AND {guard} "
            f"AND lifecycle_state IN ({', '.join('?' for _ in ALLOWED_STATES[op])})",
            params,
        ).rowcount
        if changed != 1:  # impossible under BEGIN IMMEDIATE; kept as the last line of defence
            raise Refusal(f"{env_id} changed while it was being claimed; nothing was written. Try again.")
        event_type = "operation_taken_over" if held else "operation_claimed"
        metadata = {"operation_kind": op, "claim_id": new_id, "previous_claim_id": held}
        if held:
            metadata["previous_operation_kind"] = env["operation_kind"]
        logged = _append_event(conn, env, event_type=event_type, from_state=state, to_state=state,
                               actor=actor, reason=reason, metadata=metadata, now=now)
    if held:
        message = (f"{env_id} taken over for {op} from {claim_holder(held)} "
                   f"(their {env['operation_kind']} claim was {_ago(_claim_age(env, now))} old).")
    else:
        message = f"{env_id} claimed for {op}; no new runs can be placed on it until the claim is completed or released."
    if op == "retire" and not env["retirement_requested_at"]:
        message += " Retirement is now requested (this stays even if the claim is released)."
    return _finish(_result(True, env_id, state, message, operation_kind=op, claim_id=new_id), logged)


def _finish(result: ActionResult, logged: bool) -> ActionResult:
    result.extra["event_written"] = logged
    if not logged:
        result.message += (" No environment event was written: this database's execution_environment_events "
                           "table has columns the console does not know.")
    return result


def release(
    handle: ArchonDatabase,
    env_id: str,
    actor: str,
    *,
    now: datetime,
    takeover: bool = False,
    reason: str | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> ActionResult:
    """Drop a claim without a lifecycle change: your own, or a stale one with `takeover`."""
    actor = _checks(handle, actor)
    reason = validate_reason(reason, required=takeover, what="releasing someone else's claim")
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        env = _load(conn, env_id)
        held = env["operation_claim_id"]
        state = env["lifecycle_state"]
        if not held:
            last = _last_operation_event(conn, env_id)
            if last and last["event_type"] == "operation_released" and last["actor_reference"] == actor:
                return _result(True, env_id, state, f"{env_id} was already released by you; nothing changed.", noop=True)
            raise Refusal(f"{env_id} holds no operation claim; there is nothing to release.")
        mine = held_by(held, actor)
        if not mine:
            if not takeover:
                raise Refusal(_describe_claim(env, now) + "; only its holder can release it, or "
                              + _stale_hint(env, now, stale_after, "release it") + ".")
            if _claim_age(env, now) <= stale_after.total_seconds():
                raise Refusal(_describe_claim(env, now) + "; a fresh claim cannot be released by someone else: "
                              + _stale_hint(env, now, stale_after, "release it") + ".")
        changed = conn.execute(
            "UPDATE execution_environments SET operation_claim_id = NULL, operation_kind = NULL, "
            "operation_claimed_at = NULL WHERE id = ? AND operation_claim_id = ?",
            (env_id, held),
        ).rowcount
        if changed != 1:
            raise Refusal(f"{env_id} changed while it was being released; nothing was written. Try again.")
        metadata = {"operation_kind": env["operation_kind"], "claim_id": None, "previous_claim_id": held,
                    "takeover": not mine}
        logged = _append_event(conn, env, event_type="operation_released", from_state=state, to_state=state,
                               actor=actor, reason=reason, metadata=metadata, now=now)
    whose = "your" if mine else f"{claim_holder(held)}'s stale"
    message = f"Released {whose} {env['operation_kind']} claim on {env_id}; its state stays {state}."
    if env["operation_kind"] == "retire":
        message += " The retirement request stays in place."
    return _finish(_result(True, env_id, state, message, operation_kind=env["operation_kind"]), logged)


def complete(handle: ArchonDatabase, env_id: str, actor: str, *, now: datetime) -> ActionResult:
    """Hand the claimed operation off to archon's scheduling column and clear the claim; holder only.

    One UPDATE, conditional on the claim and the state seen; `lifecycle_state` is never written.
    """
    actor = _checks(handle, actor)
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        env = _load(conn, env_id)
        held = env["operation_claim_id"]
        state = env["lifecycle_state"]
        if not held:
            last = _last_operation_event(conn, env_id)
            if last and last["event_type"] == "operation_completed" and last["actor_reference"] == actor:
                return _result(True, env_id, state, f"{env_id} was already completed by you; nothing changed.", noop=True)
            raise Refusal(f"{env_id} holds no operation claim; claim an operation before completing it.")
        if not held_by(held, actor):
            raise Refusal(_describe_claim(env, now) + "; only its holder can complete it.")
        op = env["operation_kind"]
        handoff = HANDOFF.get(op)
        if handoff is None:
            raise Refusal(
                f"{env_id}: {RESET_NOT_COMPLETABLE.format(release=f'archon-console envs release {env_id}')}. Nothing was written; your claim stays.",
                f"archon-console envs release {env_id}",
            )
        _require_allowed(env, op, f"completing {op}", hint=f"Release the claim instead: archon-console envs release {env_id}")
        column, performer = handoff
        stamp = db_time(now)
        sets, params = ("", []) if op == "retire" else (f"{column} = ?, ", [stamp])
        changed = conn.execute(
            f"UPDATE execution_environments SET {sets}operation_claim_id = NULL, operation_kind = NULL, "
            "operation_claimed_at = NULL WHERE id = ? AND operation_claim_id = ? AND lifecycle_state = ?",
            (*params, env_id, held, state),
        ).rowcount
        if changed != 1:
            raise Refusal(f"{env_id} changed while it was being completed; nothing was written. Try again.")
        leases = _active_leases(conn, env_id)
        since = stamp if op != "retire" else env["retirement_requested_at"]
        logged = _append_event(conn, env, event_type="operation_completed", from_state=state, to_state=state,
                               actor=actor, reason=None,
                               metadata={"operation_kind": op, "claim_id": None, "previous_claim_id": held,
                                         "handoff": column},
                               now=now)
    if op == "cleanup_retry":
        message = f"{env_id}: cleanup retry requested now; archon's cleanup worker performs it. The claim is cleared."
    elif op == "stop":
        message = (f"{env_id}: stop handed off to archon (idle_stop_at = now); archon's idle-stop sweep stops it. "
                   f"The claim is cleared; the state stays {state} until archon has stopped it.")
        if leases:
            message += " An execution lease is still active: the console does not interrupt its run."
    else:
        message = (f"{env_id}: retirement handed off to archon (requested since {_when(since)}); archon's retirement "
                   f"path (retiring -> cleanup_pending -> retired) performs it. The claim is cleared; the state "
                   f"stays {state} until archon moves it.")
        if leases:
            message += " An execution lease is still active: archon retires it after that run."
    return _finish(_result(True, env_id, state, message, operation_kind=op,
                           handoff={"kind": op, "column": column, "since": since, "performed_by": performer}),
                   logged)


def unavailable_actions(env: dict[str, Any], actor: str) -> dict[str, str]:
    """Why each action would be refused on `env` (a row from `show_environment`) for `actor`.

    Keys: an operation name (claiming it), "complete", "release", "takeover". The same rules as
    the writes above, read from a possibly stale row: the write still re-checks everything.
    """
    state = env.get("lifecycle_state")
    held = env.get("operation_claim_id")
    mine = bool(held) and held_by(held, actor)
    reasons: dict[str, str] = {}
    for op in OPERATIONS:
        if held:
            reasons[op] = f"already claimed for {env.get('operation_kind')} by {env.get('claim_holder')}"
        elif not held and state not in ALLOWED_STATES[op]:
            reasons[op] = f"it is {state}: {WHY_ALLOWED[op]}"
    if not held:
        reasons["complete"] = reasons["release"] = "no claim is held"
        reasons["takeover"] = "no claim to take over"
        return reasons
    op = env.get("operation_kind")
    if not mine:
        reasons["complete"] = f"the claim is {env.get('claim_holder')}'s, not yours"
        if not env.get("stale"):
            reasons["release"] = "only its holder can release a fresh claim"
            reasons["takeover"] = "the claim is not stale yet"
    else:
        reasons["takeover"] = "you hold this claim"
        if HANDOFF.get(op) is None:
            reasons["complete"] = RESET_NOT_COMPLETABLE.format(release="key l")
        elif state not in ALLOWED_STATES.get(op, ()):
            reasons["complete"] = f"it is {state}: {WHY_ALLOWED[op]}; release the claim instead"
    return reasons


__all__ = [
    "ALLOWED_STATES",
    "DEFAULT_STALE_AFTER",
    "EnvironmentPage",
    "OPERATIONS",
    "HANDOFF",
    "STATES",
    "WHY_ALLOWED",
    "claim",
    "claim_holder",
    "complete",
    "completion_effect",
    "default_stale_after",
    "held_by",
    "list_environments",
    "operations_help",
    "pending_handoffs",
    "release",
    "show_environment",
    "unavailable_actions",
]
