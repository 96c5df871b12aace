"""The claim writes: claim (and take over), release, complete.

A claim is the triple (`operation_claim_id`, `operation_kind`, `operation_claimed_at`). Archon's
trigger only checks that the triple is all-or-nothing; it lets one claim overwrite another
(docs/archon-schema.md, operation claims), so exclusivity lives here: every write is a compare-and-set that must change
exactly one row, inside one `BEGIN IMMEDIATE` transaction that re-reads every precondition. The
rules themselves are in `environment_rules`, whose `claim_options` answers in advance what these
functions decide here.

A takeover (of a stale claim, with a reason) keeps the operation it takes over; a claim the console
did not create also needs its holder named, since its staleness is only the console's assumption.

A claim is an administrative hold (docs/decisions.md, Q6): it stops new leases at once (lease admission
refuses claimed environments). The console cannot stop or delete a container, so it never writes
`lifecycle_state` (that would claim a provider-side effect nobody performed). Completing a claim
*hands the operation off* to archon's own scheduling column and clears the claim, in one UPDATE:

- stop: `idle_stop_at = now`; archon's idle-stop sweep (the one `idx_execution_environments_idle_stop`
  serves) stops the environment. Refused while a run is bound to it (an execution lease or a
  validation binding not released): what the sweep does to a running run is not known (docs/decisions.md, "Archon behaviour the environment claims assume").
- retire: the claim already set `retirement_requested_at`, which archon's reuse index and lease
  admission honour; completing only clears the claim, and archon's retirement path
  (retiring -> cleanup_pending -> retired) does the rest. The request is never cleared (Q7).
- cleanup_retry: `cleanup_retry_at = now`; archon's cleanup worker retries.
- reset: no completion. Marking a failed environment `ready` would let lease admission place runs
  on a workspace nobody rebuilt; a reset claim is a hold that its holder releases.

`updated_at` is never touched (it orders archon's cleanup index, Q8; no state changes here).
A handed-off request stays visible (`environment_queries.pending_handoffs`) until archon acts on it.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from console.db.sql import stored_columns
from console.clock import db_time, duration
from console.db.connect import ArchonDatabase
from console.db.tx import write_transaction
from console.errors import Refusal, Remedy, Said, UsageError
from console.models.environments import ClaimResult, Handoff, claimed_by
from console.services import identity
from console.text import one_line, shell_quote
from console.services.base import (
    claim_id_for,
    new_event_id,
    require_feature,
    validate_actor,
    validate_reason,
)
from console.services.environment_queries import claim_account, claim_age, holding_work, table_columns
from console.services.environment_rules import (
    ALLOWED_STATES,
    CONFIRM_HOLDER_OPTION,
    DEFAULT_STALE_AFTER,
    HANDOFF,
    OPERATIONS,
    RESET_NOT_COMPLETABLE,
    WHY_ALLOWED,
    bound_runs_words,
    claim_holder,
    cleanup_claim_blocks,
    console_made,
    exact_time,
    foreign_claim_assumption,
    held_by,
    holder_confirmed,
    holder_to_confirm,
    kind_kept,
    lease_blocks_stop,
)

# Events the console writes; anything else in the table is archon's.
EVENT_TYPES = ("operation_claimed", "operation_taken_over", "operation_released", "operation_completed")
_EVENT_COLUMNS = (
    "id", "project_id", "environment_id", "sequence", "event_type", "from_state", "to_state",
    "actor_classification", "actor_reference", "reason", "metadata_json", "created_at",
)


def _event_columns(conn: sqlite3.Connection) -> set[str] | None:
    """The event columns we can fill, or None when a required column's meaning is unknown.

    Archon's DDL for this table is unseen (docs/decisions.md, Q3): if a real database demands a column we
    do not know, we skip the event rather than invent a value.
    """
    info = table_columns(conn, "execution_environment_events")
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
        "metadata_json": json.dumps({**metadata, **identity.event_metadata(actor), "source": "archon-console"},
                                    sort_keys=True),
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
    names = {c["name"] for c in table_columns(conn, "execution_environment_events")}
    if not {"environment_id", "sequence", "event_type", "actor_reference"} <= names:
        return None
    row = conn.execute(
        f"SELECT {stored_columns(conn, 'execution_environment_events')} FROM execution_environment_events "
        "WHERE environment_id = ? AND event_type IN "
        f"({', '.join('?' for _ in EVENT_TYPES)}) ORDER BY sequence DESC LIMIT 1",
        (env_id, *EVENT_TYPES),
    ).fetchone()
    return dict(row) if row else None


def _load(conn: sqlite3.Connection, env_id: str) -> sqlite3.Row:
    env = conn.execute(
        f"SELECT {stored_columns(conn, 'execution_environments', 'e')}, "
        "p.deletion_started_at AS project_deletion_started_at "
        "FROM execution_environments e LEFT JOIN projects p ON p.id = e.project_id WHERE e.id = ?",
        (env_id,),
    ).fetchone()
    if env is None:
        from console.services.resolve import near_ids

        near = near_ids(conn, "environment", env_id)
        raise Refusal(f"There is no environment {one_line(env_id, 80)}.", (f"{near} " if near else "") + "List them with `envs list`.")
    if env["project_deletion_started_at"]:
        raise Refusal(
            f"{env_id} belongs to project {env['project_id']}, which is being deleted "
            f"(since {exact_time(env['project_deletion_started_at'])}); nothing was written.",
            "Projects being deleted are read-only in the console.",
        )
    return env


def _claim_age(env: sqlite3.Row, now: datetime) -> float:
    return claim_age(env["operation_claimed_at"], now)


def _holder(conn: sqlite3.Connection, env: sqlite3.Row, claim_id: Any) -> str:
    """The claim's declared holder and the OS account that took it (docs/decisions.md, D21)."""
    return claimed_by(claim_holder(claim_id), claim_account(conn, env["id"], claim_id)) or "-"


def _describe_claim(conn: sqlite3.Connection, env: sqlite3.Row, now: datetime) -> str:
    age = _claim_age(env, now)
    age_text = f"{duration(age)} ago" if age != float("inf") else "an unreadable time"
    return (
        f"{env['id']} is claimed for {env['operation_kind']} by {_holder(conn, env, env['operation_claim_id'])} "
        f"since {exact_time(env['operation_claimed_at'])} ({age_text})"
    )


def _stale_hint(env: sqlite3.Row, now: datetime, stale_after: timedelta, verb: str, action: str) -> list[str | Remedy]:
    """How to take over or release someone else's claim (`action`: the screen's `takeover` or
    `release`, whose dialog asks for the reason and the holder), and when; for a claim the console
    did not create, with the holder to name and the console's assumption about its lifetime."""
    age = _claim_age(env, now)
    threshold = duration(stale_after.total_seconds())
    held = env["operation_claim_id"]
    how, note = "--takeover with a reason", ""
    if not console_made(held):
        how += f" and {CONFIRM_HOLDER_OPTION} {shell_quote(holder_to_confirm(held) or '')}"
        note = f" ({foreign_claim_assumption(stale_after)})"
    if age > stale_after.total_seconds():
        return [f"it is stale (older than {threshold}){note}; use ", Remedy(how, action), f" to {verb}"]
    wait = duration(stale_after.total_seconds() - age)
    return ["use ", Remedy(how, action), f" once it is stale (older than {threshold}, in {wait}){note}"]


def _release_remedy(env_id: str) -> Remedy:  # the command, or the screen's release key
    return Remedy(f"archon-console envs release {env_id}", "release")


def _require_no_cleanup_claim(env: sqlite3.Row, op: str) -> None:
    """A cleanup retry is neither claimed nor handed off while archon's cleanup worker holds its claim."""
    if op == "cleanup_retry" and env["cleanup_claim_id"] is not None:
        raise Refusal(f"{env['id']}: {cleanup_claim_blocks(env['cleanup_claim_id'], env['cleanup_claimed_at'])}. "
                      "Nothing was written.", f"`archon-console envs show {env['id']}` shows the cleanup claim.")


def _require_allowed(env: sqlite3.Row, op: str, doing: str, hint: Said | None = None) -> None:
    state = env["lifecycle_state"]
    if state not in ALLOWED_STATES[op]:
        raise Refusal(
            f"{env['id']} is {state}; {doing} needs {' or '.join(ALLOWED_STATES[op])} "
            f"({WHY_ALLOWED[op]}). Nothing was written.",
            hint,
        )


def _result(env_id: str, state: str | None, message: str, **fields: Any) -> ClaimResult:
    return ClaimResult(ok=True, id=env_id, state=state, message=message, **fields)


def _checks(handle: ArchonDatabase, actor: str) -> str:
    require_feature(handle, "claims", what="An operation claim")
    return validate_actor(actor)


def _foreign_confirmation(conn: sqlite3.Connection, env: sqlite3.Row, now: datetime, stale_after: timedelta,
                          confirm_holder: str | None, doing: str) -> str | None:
    """Refuse `doing` (a takeover or a release) of a claim the console did not create unless the
    operator named its holder (docs/decisions.md, "Archon behaviour the environment claims assume");
    returns the holder confirmed, None for a console claim. A name given that is not the holder's
    refuses for every claim: the operator meant someone else."""
    held = env["operation_claim_id"]
    if confirm_holder is not None and not holder_confirmed(held, confirm_holder):
        raise Refusal(f"{_describe_claim(conn, env, now)}, not {confirm_holder!r}: the holder named with "
                      f"{CONFIRM_HOLDER_OPTION} must be the claim's. Nothing was written.")
    if console_made(held):
        return None
    if confirm_holder is None:
        named = holder_to_confirm(held) or ""
        raise Refusal(
            f"{_describe_claim(conn, env, now)}; {foreign_claim_assumption(stale_after)}, so {doing} needs "
            "its holder named. Nothing was written.",
            f"Confirm with {CONFIRM_HOLDER_OPTION} {shell_quote(named)} (in the console: type the holder).",
        )
    return held


def claim(
    handle: ArchonDatabase,
    env_id: str,
    op: str | None,
    actor: str,
    *,
    now: datetime,
    takeover: bool = False,
    reason: str | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    confirm_holder: str | None = None,
) -> ClaimResult:
    """Claim `op` on an environment for `actor`; with `takeover`, replace a stale claim.

    A takeover keeps the operation it takes over (`op` None means that one; another kind is
    refused: release first, with the reason recorded), and taking over a claim the console did not
    create needs its holder named (`confirm_holder`). The UPDATE is conditional on the claim seen
    (NULL, or the stale one being taken over) and on the lifecycle state; exactly one row must
    change. A retire claim also records the durable retirement request. Repeating a claim you
    already hold is a no-op.
    """
    if op is None and not takeover:
        raise UsageError("Name the operation to claim with --op (only a takeover may leave it out: it keeps "
                         "the operation it takes over).")
    if op is not None and op not in OPERATIONS:
        raise UsageError(f"Unknown operation {op!r}; one of: {', '.join(OPERATIONS)}.")
    actor = _checks(handle, actor)
    reason = validate_reason(reason, required=takeover, what="taking over a claim")
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        env = _load(conn, env_id)
        held = env["operation_claim_id"]
        state = env["lifecycle_state"]
        held_kind = env["operation_kind"]
        if held and held_by(held, actor):
            if op is None or held_kind == op:
                return _result(env_id, state, f"{env_id} is already claimed for {held_kind} by you; nothing changed.",
                               noop=True, operation_kind=held_kind, claim_id=held)
            raise Refusal(
                f"You already hold a {held_kind} claim on {env_id}; "
                f"complete or release it before claiming {op}. Nothing was written."
            )
        if held and not takeover:
            raise Refusal([_describe_claim(conn, env, now) + "; ",
                           *_stale_hint(env, now, stale_after, "take it over", "takeover"), "."])
        confirmed = None
        if held:
            if held_kind not in OPERATIONS:
                raise Refusal([f"{_describe_claim(conn, env, now)}; the console does not know that operation, so it "
                               "cannot take the claim over: release it first with ",
                               Remedy("--takeover --reason TEXT", "release"), "."])
            op = held_kind if op is None else op
            if held_kind != op:
                raise Refusal([*kind_kept(env_id, held_kind, op), ". Nothing was written."])
            if _claim_age(env, now) <= stale_after.total_seconds():
                raise Refusal([_describe_claim(conn, env, now) + "; a fresh claim cannot be taken over: ",
                               *_stale_hint(env, now, stale_after, "take it over", "takeover"), "."])
            confirmed = _foreign_confirmation(conn, env, now, stale_after, confirm_holder, "taking it over")
        if op is None:
            raise Refusal(f"{env_id} holds no operation claim to take over; name the operation to claim with --op.")
        _require_allowed(env, op, f"a {op} claim")
        if not held:  # a takeover keeps a claim already there; completing it is checked again
            _require_no_cleanup_claim(env, op)
        new_id = claim_id_for(actor)
        sets = "operation_claim_id = ?, operation_kind = ?, operation_claimed_at = ?"
        params: list[Any] = [new_id, op, db_time(now)]
        if op == "retire":
            sets += ", retirement_requested_at = COALESCE(retirement_requested_at, ?)"
            params.append(db_time(now))
        guard = "operation_claim_id = ? AND operation_kind = ?" if held else "operation_claim_id IS NULL"
        params += [env_id, *([held, held_kind] if held else []), *ALLOWED_STATES[op]]
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
            metadata["previous_operation_kind"] = held_kind
            metadata["console_claim"] = confirmed is None
            if confirmed is not None:
                metadata["confirmed_holder"] = confirmed
        logged = _append_event(conn, env, event_type=event_type, from_state=state, to_state=state,
                               actor=actor, reason=reason, metadata=metadata, now=now)
    if held:
        message = (f"{env_id} taken over for {op} from {_holder(conn, env, held)} "
                   f"(their {held_kind} claim was {duration(_claim_age(env, now))} old).")
        if confirmed is not None:
            message += f" You confirmed the holder {holder_to_confirm(held)}, a claim the console did not create."
    else:
        message = f"{env_id} claimed for {op}; no new runs can be placed on it until the claim is completed or released."
    if op == "retire" and not env["retirement_requested_at"]:
        message += " Retirement is now requested (this stays even if the claim is released)."
    return _finish(_result(env_id, state, message, operation_kind=op, claim_id=new_id), logged)


def _finish(result: ClaimResult, logged: bool) -> ClaimResult:
    result.event_written = logged
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
    confirm_holder: str | None = None,
) -> ClaimResult:
    """Drop a claim without a lifecycle change: your own, or a stale one with `takeover` (and, for a
    claim the console did not create, its holder named in `confirm_holder`: archon may still be
    working on it, and releasing it reopens lease admission)."""
    actor = _checks(handle, actor)
    reason = validate_reason(reason, required=takeover, what="releasing someone else's claim")
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        env = _load(conn, env_id)
        held = env["operation_claim_id"]
        state = env["lifecycle_state"]
        if not held:
            last = _last_operation_event(conn, env_id)
            if last and last["event_type"] == "operation_released" and last["actor_reference"] == actor:
                return _result(env_id, state, f"{env_id} was already released by you; nothing changed.", noop=True)
            raise Refusal(f"{env_id} holds no operation claim; there is nothing to release.")
        mine = held_by(held, actor)
        confirmed = None
        if not mine:
            if not takeover:
                raise Refusal([_describe_claim(conn, env, now) + "; only its holder can release it, or ",
                               *_stale_hint(env, now, stale_after, "release it", "release"), "."])
            if _claim_age(env, now) <= stale_after.total_seconds():
                raise Refusal([_describe_claim(conn, env, now) + "; a fresh claim cannot be released by someone else: ",
                               *_stale_hint(env, now, stale_after, "release it", "release"), "."])
            confirmed = _foreign_confirmation(conn, env, now, stale_after, confirm_holder, "releasing it")
        changed = conn.execute(
            "UPDATE execution_environments SET operation_claim_id = NULL, operation_kind = NULL, "
            "operation_claimed_at = NULL WHERE id = ? AND operation_claim_id = ?",
            (env_id, held),
        ).rowcount
        if changed != 1:
            raise Refusal(f"{env_id} changed while it was being released; nothing was written. Try again.")
        metadata = {"operation_kind": env["operation_kind"], "claim_id": None, "previous_claim_id": held,
                    "takeover": not mine}
        if not mine:
            metadata["console_claim"] = confirmed is None
            if confirmed is not None:
                metadata["confirmed_holder"] = confirmed
        logged = _append_event(conn, env, event_type="operation_released", from_state=state, to_state=state,
                               actor=actor, reason=reason, metadata=metadata, now=now)
    whose = "your" if mine else f"{_holder(conn, env, held)}'s stale"
    message = f"Released {whose} {env['operation_kind']} claim on {env_id}; its state stays {state}."
    if env["operation_kind"] == "retire":
        message += " The retirement request stays in place."
    if confirmed is not None:
        message += (f" You confirmed the holder {holder_to_confirm(held)}, a claim the console did not create; "
                    "if archon is still working on it, nothing tells it the claim is gone.")
    return _finish(_result(env_id, state, message, operation_kind=env["operation_kind"]), logged)


def complete(handle: ArchonDatabase, env_id: str, actor: str, *, now: datetime) -> ClaimResult:
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
                return _result(env_id, state, f"{env_id} was already completed by you; nothing changed.", noop=True)
            raise Refusal(f"{env_id} holds no operation claim; claim an operation before completing it.")
        if not held_by(held, actor):
            raise Refusal(_describe_claim(conn, env, now) + "; only its holder can complete it.")
        op = env["operation_kind"]
        handoff = HANDOFF.get(op)
        if handoff is None:
            before, after = RESET_NOT_COMPLETABLE.split("{release}")
            raise Refusal([f"{env_id}: {before}", _release_remedy(env_id),
                           f"{after}. Nothing was written; your claim stays."], [_release_remedy(env_id)])
        _require_allowed(env, op, f"completing {op}", hint=["Release the claim instead: ", _release_remedy(env_id)])
        _require_no_cleanup_claim(env, op)
        bindings = holding_work(conn, env_id)
        if op == "stop" and bindings:
            raise Refusal(f"{env_id}: {lease_blocks_stop(bindings)}. Nothing was written; your claim stays.",
                          f"`archon-console envs show {env_id}` lists the work placed in it; then "
                          f"`envs complete {env_id}` once they have ended, or `envs release {env_id}`.")
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
        since = stamp if op != "retire" else env["retirement_requested_at"]
        logged = _append_event(conn, env, event_type="operation_completed", from_state=state, to_state=state,
                               actor=actor, reason=None,
                               metadata={"operation_kind": op, "claim_id": None, "previous_claim_id": held,
                                         "handoff": column},
                               now=now)
    if op == "cleanup_retry":
        message = f"{env_id}: cleanup retry requested now; archon's cleanup worker performs it. The claim is cleared."
    elif op == "stop":
        message = (f"{env_id}: stop handed off to archon (idle_stop_at = now, with no work placed in it); archon's "
                   f"idle-stop sweep stops it. The claim is cleared; the state stays {state} until archon has stopped it.")
    else:
        message = (f"{env_id}: retirement handed off to archon (requested since {exact_time(since)}); archon's retirement "
                   f"path (retiring -> cleanup_pending -> retired) performs it. The claim is cleared; the state "
                   f"stays {state} until archon moves it.")
        if bindings:
            words = bound_runs_words(bindings, still=True)
            message += (f" {words[0].upper()}{words[1:]}; the retirement request keeps new runs off, and the "
                        "console assumes archon retires it after that run.")
    return _finish(_result(env_id, state, message, operation_kind=op,
                           handoff=Handoff(kind=op, column=column, since=since, performed_by=performer)),
                   logged)


__all__ = ["EVENT_TYPES", "claim", "complete", "release"]
