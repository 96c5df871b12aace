"""Deciding approval requests: approve, deny, revoke, and the expiry sweep.

Every decision is one `BEGIN IMMEDIATE` transaction that re-reads the request, checks every rule
itself (archon's triggers are the last line of defence), then moves `status` along the graph of
`validate_approval_request_status_transition` and appends exactly one `approval_request_events`
row with the next sequence. Only `status`, `updated_at` and (once, when it is NULL) `decision_at`
are named in the UPDATE, because archon's `BEFORE UPDATE OF` triggers fire on any named column.

Two outcomes are deliberately not plain success or plain refusal:
- repeating a decision that the same person already made is a no-op (exit 0, no second event);
- a decision on a request past its `expires_at` commits the expiry (actor `system`) and then
  refuses: the database must not keep an overdue request open, but the person must hear no.

The reading side (list, show, options) lives in `approval_queue.py` and is re-exported here.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, Callable, Sequence, TypeVar

from console.clock import db_time, parse_time, write_clock
from console.db.connect import ArchonDatabase
from console.db.tx import BUSY_HINT, write_transaction
from console.errors import Refusal
from console.models.approvals import DecisionBatch
from console.services.approval_queue import (  # noqa: F401  (re-exported API)
    KINDS,
    OPEN_STATUSES,
    STATUSES,
    Filters,
    RequestPage,
    action_summary,
    count_requests,
    decision_options,
    derive,
    events_of,
    list_requests,
    load_request,
    parse_json_field,
    parse_statuses,
    requester_of,
    same_person,
    show_request,
)
from console.services import four_eyes
from console.services.base import (
    ActionResult,
    new_event_id,
    require_feature,
    validate_actor,
    validate_reason,
)
from console.text import one_line

SYSTEM_ACTOR = "archon-console"
# What each human decision moves, from which status.
DECISIONS = {
    "approve": ("pending", "approved"),
    "deny": ("pending", "denied"),
    "revoke": ("approved", "invalidated"),
}
PAST_TENSE = {"approve": "approved", "deny": "denied", "revoke": "revoked"}
BUSY_RETRIES = 3
SWEEP_BATCH = 200

T = TypeVar("T")


class DecisionRefused(Refusal):
    """A refusal about one request, carrying its status afterwards (for per-id results)."""

    def __init__(self, request_id: str, state: str | None, reason: str, hint: str | None = None,
                 *, wrote: tuple[str, ...] = ()):
        super().__init__(reason, hint)
        self.request_id = request_id
        self.state = state
        self.wrote = wrote  # what was committed before saying no (an overdue request's expiry)


# --- small helpers -----------------------------------------------------------------------------

def _ago(value: Any, now: datetime) -> str:
    """'4 minutes ago'; 'just now' for this second (or a clock slightly ahead of ours)."""
    from console.output import relative  # humanize only when a sentence needs it

    at = parse_time(value)
    if at is None:
        return "at an unknown time"
    if abs((now - at).total_seconds()) < 1 or (at > now and (at - now).total_seconds() < 60):
        return "just now"
    return relative(at, now)


def _who(event: dict[str, Any] | None) -> str:
    if event is None:
        return "an unknown actor"
    ref = event.get("actor_reference")
    kind = event.get("actor_classification")
    if ref:
        return one_line(ref) if kind == "human" else f"{one_line(ref)} ({kind})"
    return {"system": "archon (system)", "action_executor": "the action executor"}.get(kind, "an unknown actor")


def _last_event(conn: sqlite3.Connection, project_id: str, request_id: str) -> dict[str, Any] | None:
    cur = conn.execute(
        "SELECT * FROM approval_request_events WHERE project_id = ? AND approval_request_id = ? "
        "ORDER BY sequence DESC LIMIT 1",
        (project_id, request_id),
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def _event_into(conn: sqlite3.Connection, project_id: str, request_id: str, status: str) -> dict[str, Any] | None:
    """The most recent event that moved the request into `status` (who decided, and when)."""
    cur = conn.execute(
        "SELECT * FROM approval_request_events WHERE project_id = ? AND approval_request_id = ? "
        "AND to_status = ? ORDER BY sequence DESC LIMIT 1",
        (project_id, request_id, status),
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


_EVENT_TYPES: dict[tuple[str, str | None, str], str] = {}


def event_type_for(conn: sqlite3.Connection, db_key: str, from_status: str | None, to_status: str) -> str:
    """Archon's spelling of `event_type` for this transition if the database shows one, else the
    target status (DOMAIN.md Q10). Looked up through indexes only, once per database and process."""
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


def _with_busy_retry(handle: ArchonDatabase, work: Callable[[], T]) -> T:
    """Run one transaction; when the write lock stayed busy past busy_timeout, wait and retry
    (the transaction did nothing), so a raw lock error never reaches a person."""
    for attempt in range(BUSY_RETRIES + 1):
        try:
            return work()
        except Refusal as exc:
            if exc.hint != BUSY_HINT or attempt == BUSY_RETRIES:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _transition(
    conn: sqlite3.Connection,
    db_key: str,
    request: dict[str, Any],
    to_status: str,
    *,
    actor_classification: str,
    actor_reference: str,
    reason: str | None,
    now: datetime,
    metadata_json: str | None = None,
) -> None:
    """The UPDATE and its event, inside the caller's transaction."""
    from_status = request["status"]
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
    if "_last_sequence" in request:  # read with the request, inside this same transaction
        sequence = (request["_last_sequence"] or 0) + 1
    else:
        sequence = conn.execute(
            "SELECT COALESCE(MAX(sequence), 0) + 1 FROM approval_request_events "
            "WHERE project_id = ? AND approval_request_id = ?",
            (request["project_id"], request["id"]),
        ).fetchone()[0]
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
            metadata_json,
            stamp,
        ),
    )
    request["status"] = to_status
    if "_last_sequence" in request:
        request["_last_sequence"] = sequence


def _json_metadata(**values: Any) -> str:
    import json

    return json.dumps(values, ensure_ascii=False, sort_keys=True)


def _load_for_decision(conn: sqlite3.Connection, request_id: str) -> dict[str, Any]:
    """The request and its project's deletion mark, in one read (decisions are the hot path)."""
    cur = conn.execute(
        "SELECT r.*, p.deletion_started_at AS _project_deleting, "
        "(SELECT MAX(e.sequence) FROM approval_request_events AS e "
        " WHERE e.project_id = r.project_id AND e.approval_request_id = r.id) AS _last_sequence "
        "FROM approval_requests AS r "
        "LEFT JOIN projects AS p ON p.id = r.project_id WHERE r.id = ?",
        (request_id,),
    )
    row = cur.fetchone()
    if row is None:
        return load_request(conn, request_id)  # raises the plain "no such request" refusal
    return dict(zip([d[0] for d in cur.description], row))


def _project_deleting(conn: sqlite3.Connection, request: dict[str, Any]) -> Any:
    if "_project_deleting" in request:
        return request["_project_deleting"]
    row = conn.execute(
        "SELECT deletion_started_at FROM projects WHERE id = ?", (request["project_id"],)
    ).fetchone()
    return None if row is None else row["deletion_started_at"]


def _overdue(request: dict[str, Any], now: datetime) -> bool:
    expires = parse_time(request.get("expires_at"))
    # An unreadable expiry is treated as past: never approve what we cannot date.
    return expires is None or expires <= now


# --- decisions ---------------------------------------------------------------------------------

def _already(request: dict[str, Any], decided: dict[str, Any] | None, now: datetime) -> str:
    status = request["status"]
    when = decided.get("created_at") if decided else None
    if status in ("approved", "denied") and request.get("decision_at"):
        when = request["decision_at"]
    rid = one_line(request["id"])
    if status == "expired":
        return f"{rid} already expired {_ago(when or request.get('expires_at'), now)} (recorded by {_who(decided)})."
    return f"{rid} was already {status} by {_who(decided)} {_ago(when or request.get('updated_at'), now)}."


def decide(
    handle: ArchonDatabase,
    request_id: str,
    decision: str,
    *,
    actor: str,
    reason: str | None = None,
    now: datetime | None = None,
    requester_unknown_ok: bool = False,
) -> ActionResult:
    """Approve, deny or revoke one request in its own transaction.

    `requester_unknown_ok` is the approver's explicit confirmation that they are not the requester
    when `authority_json` does not say who that is with certainty (four_eyes.py); without it such
    an approval is refused.

    Returns an ActionResult (ok, or a no-op repeat); raises `DecisionRefused`/`Refusal` when a rule
    says no. After an expiry-at-decision the expiry is committed before the refusal is raised.
    """
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}")
    from_status, to_status = DECISIONS[decision]
    actor = validate_actor(actor)
    reason = validate_reason(
        reason, required=decision != "approve", what=f"{'revoking an approval' if decision == 'revoke' else 'a denial'}"
    )
    require_feature(handle, "approvals", what="Deciding approval requests")
    now = now or write_clock()
    db_key = str(handle.path)

    def attempt() -> tuple[ActionResult | None, DecisionRefused | None]:
        with write_transaction(handle.conn, read_only=handle.read_only) as conn:
            request = _load_for_decision(conn, request_id)
            rid = one_line(request["id"])
            status = request["status"]
            if status == to_status:
                decided = _event_into(conn, request["project_id"], request["id"], status)
                if decided and decided["actor_classification"] == "human" and decided["actor_reference"] == actor:
                    when = request.get("decision_at") if decision != "revoke" else decided.get("created_at")
                    return ActionResult(
                        True, request["id"], status,
                        f"{rid} was already {PAST_TENSE[decision]} by you {_ago(when or decided.get('created_at'), now)}; nothing changed.",
                        noop=True,
                    ), None
                raise DecisionRefused(request["id"], status, _already(request, decided, now))
            deleting = _project_deleting(conn, request)
            if deleting is not None:
                raise DecisionRefused(
                    request["id"], status,
                    f"{rid} belongs to project {one_line(request['project_id'])}, which is being deleted "
                    f"(since {_ago(deleting, now)}); its requests can no longer be decided.",
                )
            if status != from_status:
                decided = _event_into(conn, request["project_id"], request["id"], status)
                message = _already(request, decided, now) if status != "pending" else (
                    f"{rid} is still pending, so there is no approval to revoke."
                )
                hint = None
                if decision == "deny" and status == "approved":
                    hint = f"To withdraw the approval: archon-console approvals revoke {rid} --reason TEXT"
                elif decision == "revoke" and status == "pending":
                    hint = f"To refuse it: archon-console approvals deny {rid} --reason TEXT"
                else:
                    article = "an" if from_status[0] in "aeiou" else "a"
                    message = message.rstrip(".") + f"; only {article} {from_status} request can be {PAST_TENSE[decision]}."
                raise DecisionRefused(request["id"], status, message, hint)
            unknown_requester: str | None = None
            if decision == "approve":
                verdict = four_eyes.check_approver(request.get("authority_json"), actor)
                if verdict.self_approval:
                    said = (f"was requested by {one_line(verdict.requester)}; the requester may not approve it "
                            "(four-eyes rule)" if verdict.requester is not None
                            else f"cannot be approved by you: {verdict.self_approval}")
                    raise DecisionRefused(
                        request["id"], status, f"{rid} {said}. Nothing was written.", "Ask another approver.",
                    )
                unknown_requester = verdict.unknown
            elif decision == "deny":  # deny keeps the plain rule: an exactly named requester may not deny
                requester = requester_of(parse_json_field(request.get("authority_json")))
                if same_person(requester, actor):
                    raise DecisionRefused(
                        request["id"], status,
                        f"{rid} was requested by {one_line(requester)}; the requester may not decide it "
                        "(four-eyes rule). Nothing was written.",
                        "Ask another approver.",
                    )
            if _overdue(request, now):
                _transition(
                    conn, db_key, request, "expired",
                    actor_classification="system", actor_reference=SYSTEM_ACTOR, reason=None, now=now,
                    metadata_json=_json_metadata(noticed_by=actor, during=decision),
                )
                return None, DecisionRefused(
                    request["id"], "expired",
                    f"{rid} expired {_ago(request.get('expires_at'), now)} and can no longer be "
                    f"{PAST_TENSE[decision]}; it has now been marked expired.",
                    "A new request is needed if the action should still happen.",
                    wrote=("expired",),
                )
            if unknown_requester and not requester_unknown_ok:
                raise DecisionRefused(
                    request["id"], status,
                    f"{rid}'s requester cannot be determined with certainty ({unknown_requester}), so the "
                    "four-eyes rule cannot be checked. Nothing was written.",
                    "If you are sure you did not request it, confirm that explicitly: pass "
                    "--requester-unknown-ok (in the console, approve it on its own and type the confirmation).",
                )
            _transition(
                conn, db_key, request, to_status,
                actor_classification="human", actor_reference=actor, reason=reason, now=now,
                metadata_json=_json_metadata(requester_unknown_confirmed=unknown_requester)
                if unknown_requester else None,
            )
            done = {
                "approve": f"{rid} approved." + (
                    f" Its requester could not be determined ({unknown_requester}); you confirmed you are "
                    "not the requester, and that is recorded with the decision." if unknown_requester else ""),
                "deny": f"{rid} denied.",
                "revoke": f"{rid}'s approval was revoked (now invalidated).",
            }[decision]
            return ActionResult(True, request["id"], to_status, done), None

    result, refusal = _with_busy_retry(handle, attempt)
    if refusal is not None:  # the expiry is committed; now say no
        raise refusal
    assert result is not None
    return result


def approve(handle: ArchonDatabase, request_id: str, *, actor: str, reason: str | None = None,
            now: datetime | None = None, requester_unknown_ok: bool = False) -> ActionResult:
    return decide(handle, request_id, "approve", actor=actor, reason=reason, now=now,
                  requester_unknown_ok=requester_unknown_ok)


def deny(handle: ArchonDatabase, request_id: str, *, actor: str, reason: str | None, now: datetime | None = None) -> ActionResult:
    return decide(handle, request_id, "deny", actor=actor, reason=reason, now=now)


def revoke(handle: ArchonDatabase, request_id: str, *, actor: str, reason: str | None, now: datetime | None = None) -> ActionResult:
    return decide(handle, request_id, "revoke", actor=actor, reason=reason, now=now)


def refusal_result(request_id: str, exc: Refusal) -> ActionResult:
    state = exc.state if isinstance(exc, DecisionRefused) else None
    message = exc.reason if not exc.hint else f"{exc.reason} {exc.hint}"
    return ActionResult(False, request_id, state, message, wrote=getattr(exc, "wrote", ()))


def decide_many(
    handle: ArchonDatabase,
    request_ids: Sequence[str],
    decision: str,
    *,
    actor: str,
    reason: str | None = None,
    now: datetime | None = None,
    requester_unknown_ok: bool = False,
) -> list[ActionResult]:
    """Each id in its own transaction; one result per id, in the order given (repeats once).

    Problems with the command itself (actor, reason, read-only, release) are raised once,
    before any id is touched, since they would refuse every id alike.
    """
    validate_actor(actor)
    validate_reason(reason, required=decision != "approve")
    require_feature(handle, "approvals", what="Deciding approval requests")
    if handle.read_only:
        with write_transaction(handle.conn, read_only=True):
            pass  # raises the read-only refusal
    now = now or write_clock()
    results = []
    for request_id in dict.fromkeys(request_ids):
        try:
            results.append(decide(handle, request_id, decision, actor=actor, reason=reason, now=now,
                                  requester_unknown_ok=requester_unknown_ok))
        except Refusal as exc:
            results.append(refusal_result(request_id, exc))
    return results


def decide_batch(
    handle: ArchonDatabase,
    request_ids: Sequence[str],
    decision: str,
    *,
    actor: str,
    reason: str | None = None,
    now: datetime | None = None,
    requester_unknown_ok: bool = False,
    bulk: bool = False,
) -> DecisionBatch:
    """The console's decision: marked requests (`bulk`) through `decide_many`, or the one highlighted
    request through `decide`, its refusal turned into its result. Never confirmed in bulk: requests
    whose requester is uncertain are refused one by one there."""
    if bulk:
        results = decide_many(handle, request_ids, decision, actor=actor, reason=reason, now=now)
    else:
        try:
            results = [decide(handle, request_ids[0], decision, actor=actor, reason=reason, now=now,
                              requester_unknown_ok=requester_unknown_ok)]
        except Refusal as exc:
            results = [refusal_result(request_ids[0], exc)]
    return DecisionBatch(decision, tuple(results), bulk)


# --- expiry sweep -------------------------------------------------------------------------------

def overdue_ids(handle: ArchonDatabase, now: datetime, *, project: str | None = None) -> list[str]:
    """Ids of pending/approved requests whose `expires_at` has passed, through the expiry index."""
    conn = handle.conn
    if project is not None:
        projects = [project]
    else:
        projects = [r[0] for r in conn.execute("SELECT id FROM projects ORDER BY id")]
    from console.services.approval_queue import _TEXT_SLACK

    coarse = db_time(now + _TEXT_SLACK)
    found: list[str] = []
    for project_id in projects:
        for status in OPEN_STATUSES:
            for request_id, expires_at in conn.execute(
                "SELECT id, expires_at FROM approval_requests "
                "WHERE project_id = ? AND status = ? AND expires_at <= ? ORDER BY expires_at, id",
                (project_id, status, coarse),
            ):
                if _overdue({"expires_at": expires_at}, now):
                    found.append(request_id)
    return found


def expire_overdue(
    handle: ArchonDatabase,
    *,
    actor: str | None = None,
    now: datetime | None = None,
    batch_size: int = SWEEP_BATCH,
) -> list[ActionResult]:
    """The sweep archon would run: every pending or approved request past `expires_at` -> expired.

    Events carry actor `system`/`archon-console` (the person who ran it goes into metadata).
    Batches of `batch_size` requests per transaction keep archon's wait for the lock short;
    each row is re-read and re-checked inside its batch.
    """
    require_feature(handle, "approvals", what="The expiry sweep")
    if actor is not None:
        validate_actor(actor)
    if handle.read_only:
        with write_transaction(handle.conn, read_only=True):
            pass
    now = now or write_clock()
    db_key = str(handle.path)
    metadata = _json_metadata(initiated_by=actor) if actor else None
    candidates = overdue_ids(handle, now)
    results: list[ActionResult] = []
    for start in range(0, len(candidates), batch_size):
        chunk = candidates[start : start + batch_size]

        def attempt(chunk: list[str] = chunk) -> list[ActionResult]:
            done = []
            with write_transaction(handle.conn, read_only=handle.read_only) as conn:
                for request_id in chunk:
                    try:
                        request = load_request(conn, request_id)
                    except Refusal:
                        continue
                    if request["status"] not in OPEN_STATUSES or not _overdue(request, now):
                        continue  # someone decided it meanwhile
                    if _project_deleting(conn, request) is not None:
                        continue
                    old = request["status"]
                    _transition(
                        conn, db_key, request, "expired",
                        actor_classification="system", actor_reference=SYSTEM_ACTOR, reason=None,
                        now=now, metadata_json=metadata,
                    )
                    done.append(ActionResult(
                        True, request_id, "expired",
                        f"{one_line(request_id)} expired ({old}, past {one_line(request.get('expires_at'))}).",
                        extra={"from_status": old},
                    ))
            return done

        results.extend(_with_busy_retry(handle, attempt))
    return results


__all__ = [
    "DECISIONS",
    "DecisionRefused",
    "Filters",
    "SYSTEM_ACTOR",
    "approve",
    "count_requests",
    "decide",
    "decide_batch",
    "decide_many",
    "decision_options",
    "deny",
    "event_type_for",
    "expire_overdue",
    "list_requests",
    "overdue_ids",
    "parse_statuses",
    "refusal_result",
    "revoke",
    "show_request",
]
