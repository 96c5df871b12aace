"""The expiry sweep archon runs: every pending or approved request past its `expires_at` becomes
expired, recorded as actor `system` / archon-console."""

from __future__ import annotations

from datetime import datetime

from console.clock import db_time, write_clock
from console.db.connect import ArchonDatabase
from console.db.tx import write_transaction
from console.errors import Refusal
from console.models.approvals import OPEN_STATUSES
from console.services.approval_transitions import (
    SYSTEM_ACTOR,
    load_for_decision,
    overdue,
    transition,
    unreadable_expiry,
    unreadable_expiry_sentence,
    with_busy_retry,
)
from console.services.base import require_feature, validate_actor
from console.models.results import ActionResult
from console.text import one_line

SWEEP_BATCH = 200


def overdue_ids(handle: ArchonDatabase, now: datetime, *, project: str | None = None,
                unreadable: list[tuple[str, object]] | None = None) -> list[str]:
    """Ids of pending/approved requests whose `expires_at` has passed, through the expiry index.
    `unreadable` (when given) collects (id, expires_at) of open requests whose expiry is not a time:
    they are not expired (nothing says they are past), only reported."""
    conn = handle.conn
    if project is not None:
        projects = [project]
    else:
        projects = [r[0] for r in conn.execute("SELECT id FROM projects ORDER BY id")]
    from console.clock import TEXT_SLACK

    coarse = db_time(now + TEXT_SLACK)
    found: list[str] = []
    for project_id in projects:
        for status in OPEN_STATUSES:
            for request_id, expires_at in conn.execute(
                "SELECT id, expires_at FROM approval_requests "
                "WHERE project_id = ? AND status = ? AND expires_at <= ? ORDER BY expires_at, id",
                (project_id, status, coarse),
            ):
                if overdue({"expires_at": expires_at}, now):
                    found.append(request_id)
    if unreadable is not None:
        # What SQLite cannot date, or is not text, or is past year 9998 (an offset can push it out of
        # the calendar); `parse_time` then decides. Only open requests: a handful of rows.
        marks = ", ".join("?" for _ in OPEN_STATUSES)
        scope = "" if project is None else " AND project_id = ?"
        for request_id, expires_at in conn.execute(
            f"SELECT id, expires_at FROM approval_requests WHERE status IN ({marks}){scope} AND "
            "(julianday(expires_at) IS NULL OR typeof(expires_at) <> 'text' OR expires_at >= '9998') "
            "ORDER BY id",
            (*OPEN_STATUSES, *(() if project is None else (project,))),
        ):
            if unreadable_expiry({"expires_at": expires_at}):
                unreadable.append((request_id, expires_at))
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
    metadata = {"initiated_by": actor} if actor else None
    skipped: list[tuple[str, object]] = []
    candidates = overdue_ids(handle, now, unreadable=skipped)
    results: list[ActionResult] = [
        ActionResult(False, request_id, None,
                     f"{one_line(request_id)} was not expired: "
                     f"{unreadable_expiry_sentence({'expires_at': expires_at})}.")
        for request_id, expires_at in skipped
    ]
    for start in range(0, len(candidates), batch_size):
        chunk = candidates[start : start + batch_size]

        def attempt(chunk: list[str] = chunk) -> list[ActionResult]:
            done = []
            with write_transaction(handle.conn, read_only=handle.read_only) as conn:
                for request_id in chunk:
                    try:
                        locked = load_for_decision(conn, request_id)
                    except Refusal:
                        continue
                    request = locked.row
                    if request["status"] not in OPEN_STATUSES or not overdue(request, now):
                        continue  # someone decided it meanwhile
                    if locked.project_deleting is not None:
                        continue
                    old = request["status"]
                    transition(
                        conn, db_key, locked, "expired",
                        actor_classification="system", actor_reference=SYSTEM_ACTOR, reason=None,
                        now=now, declared_as=actor, metadata=metadata,
                    )
                    done.append(ActionResult(
                        True, request_id, "expired",
                        f"{one_line(request_id)} expired ({old}, past {one_line(request.get('expires_at'))}).",
                        extra={"from_status": old},
                    ))
            return done

        results.extend(with_busy_retry(handle, attempt))
    return results


__all__ = ["SWEEP_BATCH", "expire_overdue", "overdue_ids"]
