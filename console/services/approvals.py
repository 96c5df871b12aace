"""Deciding approval requests: approve, deny, revoke, one request or several.

Every decision is one `BEGIN IMMEDIATE` transaction that re-reads the request, checks every rule
itself (archon's triggers are the last line of defence), then moves `status` along the graph of
`validate_approval_request_status_transition` and appends exactly one `approval_request_events`
row with the next sequence. Only `status`, `updated_at` and (once, when it is NULL) `decision_at`
are named in the UPDATE, because archon's `BEFORE UPDATE OF` triggers fire on any named column.

Two outcomes are deliberately not plain success or plain refusal:
- repeating a decision that the same person already made is a no-op (exit 0, no second event);
- a decision on a request past its `expires_at` commits the expiry (actor `system`) and then
  refuses: the database must not keep an overdue request open, but the person must hear no.

The reading side (list, show, options) lives in `approval_queue.py`, the shared moves (the locked
read, the UPDATE with its event, the busy retry) in `approval_transitions.py`, and the expiry sweep
in `approval_expiry.py`; callers import from them directly (together the three and this module are
over the 500-line limit, so they stay apart).
"""

from __future__ import annotations

from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Sequence

from console.clock import ago, write_clock
from console.db.connect import ArchonDatabase
from console.db.tx import write_transaction
from console.errors import Refusal, Remedy, Said
from console.models.approvals import DecisionBatch
from console.services import four_eyes
from console.services.approval_transitions import (
    SYSTEM_ACTOR,
    DecisionRefused,
    who,
    event_into,
    load_for_decision,
    overdue,
    transition,
    unreadable_expiry,
    unreadable_expiry_sentence,
    with_busy_retry,
)
from console.services.base import require_feature, validate_actor, validate_reason
from console.models.results import ActionResult
from console.text import one_line

# What each human decision moves, from which status.
DECISIONS = {
    "approve": ("pending", "approved"),
    "deny": ("pending", "denied"),
    "revoke": ("approved", "invalidated"),
}
PAST_TENSE = {"approve": "approved", "deny": "denied", "revoke": "revoked"}


# --- decisions ---------------------------------------------------------------------------------

def _already(request: dict[str, Any], decided: dict[str, Any] | None, now: datetime) -> str:
    status = request["status"]
    when = decided.get("created_at") if decided else None
    if status in ("approved", "denied") and request.get("decision_at"):
        when = request["decision_at"]
    rid = one_line(request["id"])
    if status == "expired":
        return f"{rid} already expired {ago(when or request.get('expires_at'), now)} (recorded by {who(decided)})."
    return f"{rid} was already {status} by {who(decided)} {ago(when or request.get('updated_at'), now)}."


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
            locked = load_for_decision(conn, request_id)
            request = locked.row
            rid = one_line(request["id"])
            status = request["status"]
            if status == to_status:
                decided = event_into(conn, request["project_id"], request["id"], status)
                if decided and decided["actor_classification"] == "human" and decided["actor_reference"] == actor:
                    when = request.get("decision_at") if decision != "revoke" else decided.get("created_at")
                    return ActionResult(
                        True, request["id"], status,
                        f"{rid} was already {PAST_TENSE[decision]} by you {ago(when or decided.get('created_at'), now)}; nothing changed.",
                        noop=True,
                    ), None
                raise DecisionRefused(request["id"], status, _already(request, decided, now))
            deleting = locked.project_deleting
            if deleting is not None:
                raise DecisionRefused(
                    request["id"], status,
                    f"{rid} belongs to project {one_line(request['project_id'])}, which is being deleted "
                    f"(since {ago(deleting, now)}); its requests can no longer be decided.",
                )
            if status != from_status:
                decided = event_into(conn, request["project_id"], request["id"], status)
                message = _already(request, decided, now) if status != "pending" else (
                    f"{rid} is still pending, so there is no approval to revoke."
                )
                hint: Said | None = None
                if decision == "deny" and status == "approved":
                    hint = ["To withdraw the approval: ",
                            Remedy(f"archon-console approvals revoke {rid} --reason TEXT", "revoke")]
                elif decision == "revoke" and status == "pending":
                    hint = ["To refuse it: ", Remedy(f"archon-console approvals deny {rid} --reason TEXT", "deny")]
                else:
                    article = "an" if from_status[0] in "aeiou" else "a"
                    message = message.rstrip(".") + f"; only {article} {from_status} request can be {PAST_TENSE[decision]}."
                raise DecisionRefused(request["id"], status, message, hint)
            unknown_requester: str | None = None
            if decision in ("approve", "deny"):  # one comparison for both (four_eyes.py; D1)
                verdict = four_eyes.check_approver(request.get("authority_json"), actor)
                verb = "approve" if decision == "approve" else "decide"
                if verdict.self_approval:
                    login = four_eyes.approver_names(actor)[-1]
                    said = (f"was requested by {one_line(verdict.requester)}; the requester may not {verb} it "
                            + (f"(four-eyes rule, which compares your OS login {one_line(login)!r} too, whatever "
                               "name you act as)" if verdict.by_login else "(four-eyes rule)")
                            if verdict.requester is not None
                            else f"cannot be {PAST_TENSE[decision]} by you: {verdict.self_approval}")
                    raise DecisionRefused(
                        request["id"], status, f"{rid} {said}. Nothing was written.", "Ask another approver.",
                    )
                if decision == "approve" and verdict.unverified:
                    raise DecisionRefused(
                        request["id"], status, f"{rid} cannot be approved here: {verdict.unverified}. Nothing was "
                        "written.", "Approve it from your own login outside any user namespace, or ask another approver.",
                    )
                if decision == "approve":
                    unknown_requester = verdict.unknown
            if decision == "approve" and unreadable_expiry(request):
                raise DecisionRefused(
                    request["id"], status,
                    f"{rid} is not approved: {unreadable_expiry_sentence(request)}, so nobody can tell whether "
                    "it is still valid. Nothing was written.",
                    "Deny it, or have archon's operator correct its expires_at.",
                )
            if overdue(request, now):
                transition(
                    conn, db_key, locked, "expired",
                    actor_classification="system", actor_reference=SYSTEM_ACTOR, reason=None, now=now,
                    declared_as=actor, metadata={"noticed_by": actor, "during": decision},
                )
                return None, DecisionRefused(
                    request["id"], "expired",
                    f"{rid} expired {ago(request.get('expires_at'), now)} and can no longer be "
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
            transition(
                conn, db_key, locked, to_status,
                actor_classification="human", actor_reference=actor, reason=reason, now=now,
                declared_as=actor,
                metadata={"requester_unknown_confirmed": unknown_requester} if unknown_requester else None,
            )
            done = {
                "approve": f"{rid} approved." + (
                    f" Its requester could not be determined ({unknown_requester}); you confirmed you are "
                    "not the requester, and that is recorded with the decision." if unknown_requester else ""),
                "deny": f"{rid} denied.",
                "revoke": f"{rid}'s approval was revoked (now invalidated).",
            }[decision]
            return ActionResult(True, request["id"], to_status, done), None

    result, refusal = with_busy_retry(handle, attempt)
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
    return ActionResult(False, request_id, state, message, wrote=getattr(exc, "wrote", ()), refusal=exc)


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

__all__ = [
    "DECISIONS",
    "approve",
    "decide",
    "decide_batch",
    "decide_many",
    "deny",
    "refusal_result",
    "revoke",
]
