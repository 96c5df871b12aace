"""The claim rules and their words: which operation may be claimed in which lifecycle state, what
completing it hands to archon, whose claim an id names, when a claim is stale, and, for one
environment and one actor, which claim actions the writes would carry out (`claim_options`).

The writes in `environment_claims` enforce these rules inside their transaction; `claim_options`
answers the same questions in advance from a row already read, so a screen greys a key exactly
when the write would refuse it (tests/test_environment_claim_options.py holds the two together).
"""

from __future__ import annotations

import math
import os
from datetime import timedelta

from console.clock import duration, parse_time
from console.errors import Refusal, Remedy, UsageError
from console.models.environments import ClaimOptions, EnvironmentView
from console.services.base import (CLAIM_HEAD_CUT, CLAIM_RANDOM_LENGTH, CONSOLE_CLAIM_ID, claim_id_stem,
                                   validate_actor)
from console.text import clean

STATES = (
    "queued", "preparing", "ready", "running", "stopped",
    "retiring", "cleanup_pending", "retired", "failed", "unavailable",
)
OPERATIONS = ("stop", "retire", "reset", "cleanup_retry")
# Every action `claim_options` answers for: claiming an operation, then what a claim allows.
CLAIM_ACTIONS = (*OPERATIONS, "complete", "release", "takeover")

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
# archon performs it). reset has no completion: see console/services/environment_claims.py.
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
PROJECT_DELETING = "its project is being deleted"
CONFIRM_HOLDER_OPTION = "--confirm-holder"


def foreign_claim_assumption(stale_after: timedelta, *, brief: bool = False) -> str:
    """The console's assumption about a claim it did not create, in the words every refusal, the
    help and the TUI use (docs/decisions.md, "Archon behaviour the environment claims assume");
    `brief` for a dialog that must fit 80x24."""
    threshold = duration(stale_after.total_seconds())
    if brief:
        return f"the console only assumes archon has abandoned it (older than {threshold})"
    return (f"the console assumes a claim it did not create is abandoned once it is older than "
            f"{threshold} (its stale threshold; how long archon keeps its own claims is not known), "
            f"and archon may still be working on it")


def kind_kept(env_id: str, held_kind: object, op: str) -> list[str | Remedy]:
    """Why a takeover cannot change the operation it takes over (docs/decisions.md, the same section);
    the release it needs first is a `Remedy` (console/errors.py): the option, or the screen's key."""
    return [f"The claim on {env_id} is a {held_kind}, and a takeover keeps the operation it takes over, so it "
            f"cannot become a {op}: to change the kind, release it first with ",
            Remedy("--takeover --reason TEXT", "release"), f" (the reason is recorded), then claim {op}"]


# Work that holds an environment against a stop hand-off (`environment_queries.holding_work`, the
# one query the write, `show_environment` and so `claim_options` use): a binding not released,
# whatever its relationship (archon's admission and its unique index count only `execution` leases,
# but a `validation` binding is a run bound to the environment too), a service run placed in it and
# not completed, and an unfinished check batch or attempt whose placement names it. What archon's
# idle-stop sweep does to any of them is not known (docs/decisions.md, "Archon behaviour the
# environment claims assume").
HOLDING_BINDING = "released_at IS NULL"
BINDING_WORDS = {
    "execution": "an execution lease",
    "validation": "a validation binding",
    "service_run": "a service run",
    "check_batch": "a check batch",
    "check_attempt": "a check attempt",
}
# What the TUI's cursor path leaves to the write (it must stay an index seek, tests/tui/test_query_plans.py).
HOLDING_NOT_CHECKED = ("bindings and service runs recorded under another project, and check runs, are only "
                       "checked when completing (`envs show` lists them all)")


def bound_runs_words(bindings: tuple[tuple[object, object], ...], *, still: bool = False) -> str:
    """`(kind, run)` pairs of the work holding an environment (`environment_queries.holding_work`), in
    words: "an execution lease is active (run r1) and a service run not completed is active (run r2)"."""
    grouped: dict[str, list[str]] = {}
    for relationship, run in bindings:
        words = BINDING_WORDS.get(relationship) if isinstance(relationship, str) else None
        grouped.setdefault(words or f"a binding of relationship {clean(str(relationship), one_line=True)!r}",
                           []).append(clean(str(run), one_line=True))
    active = "still active" if still else "active"
    return " and ".join(f"{words} is {active} (run {', '.join(runs)})" for words, runs in grouped.items())


def lease_blocks_stop(bindings: tuple[tuple[object, object], ...]) -> str:
    """Why a stop cannot be completed while a run holds the environment (docs/decisions.md, the same
    section): what archon's idle-stop sweep does to a run bound to it is not known."""
    return (f"{bound_runs_words(bindings) or 'a run is bound to it'}, and the console does not hand a stop to "
            f"archon's idle-stop sweep while a run holds the environment: wait for the run to end, or "
            f"release the claim")


def cleanup_claim_blocks(claim_id: object, claimed_at: object) -> str:
    """Why no cleanup retry is claimed or completed while archon's cleanup worker holds its cleanup
    claim (docs/decisions.md, the same section): it is cleaning the environment up right now."""
    return (f"archon's cleanup worker holds a cleanup claim on it ({clean(str(claim_id), one_line=True)}, "
            f"since {exact_time(claimed_at)}), so it is cleaning up now; the console never requests a cleanup "
            f"retry over a cleanup claim, whatever its age (how long archon keeps one is not known, and the "
            f"console never clears it): wait until archon releases it")


def completion_effect(op: str) -> str:
    """What completing `op` writes and who acts on it (shared by CLI help, results and the TUI)."""
    handoff = HANDOFF.get(op)
    if handoff is None:
        return "none: a reset claim is a hold that its holder releases; archon resets environments itself"
    column, performer = handoff
    if op == "retire":
        return f"keeps {column} and clears the claim; {performer} (retiring -> cleanup_pending -> retired) performs it"
    if op == "stop":  # docs/decisions.md, "Archon behaviour the environment claims assume"
        return (f"sets {column} = now and clears the claim, only while no work is placed in it (no binding "
                f"not released, no service run not completed, no unfinished check batch or attempt naming it); "
                f"{performer} performs it")
    if op == "cleanup_retry":
        return (f"sets {column} = now and clears the claim, only while archon holds no cleanup claim on it; "
                f"{performer} performs it")
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


def exact_time(value: object) -> str:
    at = parse_time(value)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else str(value)


# --- claim ids ----------------------------------------------------------------------------

def _console_head(claim_id: object) -> str | None:
    """The readable head `<actor>@<host>` of a claim id the console could have written, or None.

    The shape (`CONSOLE_CLAIM_ID`, next to `claim_id_for`; D14) is not enough: anyone can write
    `console:archon-worker@7:<16 hex>-<12 hex>`. The console writes only actors `validate_actor`
    accepts, so the actor in the head must be one: no control, bidi or invisible character, no edge
    whitespace (of a head cut to fit, only the characters are judged), and none of archon's own
    names."""
    from console.services.four_eyes import declared_name_problem, reserved_name

    match = CONSOLE_CLAIM_ID.fullmatch(claim_id) if isinstance(claim_id, str) else None
    if match is None:
        return None
    head = match["head"]
    actor = head.rsplit("@", 1)[0] if "@" in head else head
    cut = len(head) == CLAIM_HEAD_CUT
    if declared_name_problem(actor.rstrip(" ") if cut else actor) or reserved_name(actor):
        return None
    return head


def console_made(claim_id: object) -> bool:
    """Whether a claim id is one the console writes: its shape and an actor the console accepts
    (`_console_head`). Every other claim, `console:archon-worker@7` included, is archon's or some
    other writer's, and taking it over needs the holder named."""
    return _console_head(claim_id) is not None


def claim_holder(claim_id: str | None) -> str | None:
    """Who a claim id names: the actor in a console claim's readable head, the raw id of anyone
    else's (never a name parsed out of an id the console did not write)."""
    if not claim_id:
        return None
    head = _console_head(claim_id)
    if head is None:
        return claim_id
    return head.rsplit("@", 1)[0] or claim_id


def holder_to_confirm(claim_id: object) -> str | None:
    """What an operator types to confirm taking over a claim the console did not create: the claim
    id as every output shows it (pictured controls, one line); None for a console claim."""
    if not claim_id or console_made(claim_id):
        return None
    return clean(claim_id, one_line=True)


def holder_confirmed(claim_id: object, given: str | None) -> bool:
    """`given` names this claim's holder: the id as stored or as shown, or a console claim's actor."""
    if not given or not claim_id:
        return False
    return given in (claim_id, clean(claim_id, one_line=True), claim_holder(claim_id))


def held_by(claim_id: str | None, actor: str) -> bool:
    """True when `claim_id` is one this account created as `actor` on this host: exactly
    `claim_id_stem(actor)` followed by its random part (docs/decisions.md, D21). The name inside an
    id is for reading; a declared name alone, or an id that a stem merely starts like, owns nothing.
    Nothing is held by an account the kernel does not vouch for (identity.py, `unverified`): a
    user namespace could report any uid, so such a console needs --takeover for every claim.
    """
    from console.services import identity

    if not claim_id or not identity.current().verified:
        return False
    stem = claim_id_stem(actor)
    rest = claim_id[len(stem):]
    return (claim_id.startswith(stem) and len(rest) == CLAIM_RANDOM_LENGTH
            and all(ch in "0123456789abcdef" for ch in rest))


# --- what the writes would do -------------------------------------------------------------

def claim_options(env: EnvironmentView, actor: str, *, stale_after: timedelta = DEFAULT_STALE_AFTER) -> ClaimOptions:
    """For every action in `CLAIM_ACTIONS`: None when the write would carry it out on `env` (as
    `show_environment` read it) for `actor`, else why it would refuse, in plain words.

    An action that would only repeat what already took effect (claiming what you hold, releasing
    what you released) is not offered either. "takeover" means taking over the held claim for its
    own operation (`claim(..., takeover=True)`); "release" means releasing it, with a takeover
    when the claim is someone else's stale one. For a claim the console did not create, both need
    the holder named (`confirm_holder`, which the screen asks the operator to type); `stale_after`
    is the threshold `env` was read with, stated in the reasons as the console's assumption. The
    writes re-check all of this in their transaction; this answer may be stale by the time a key
    is pressed.
    """
    reasons: dict[str, str | None] = dict.fromkeys(CLAIM_ACTIONS)
    try:
        validate_actor(actor)
    except (Refusal, UsageError) as exc:
        return ClaimOptions({action: exc.reason for action in CLAIM_ACTIONS})
    if env.project_deleting:
        return ClaimOptions({action: PROJECT_DELETING for action in CLAIM_ACTIONS})
    state = env.lifecycle_state
    held = env.operation_claim_id
    for op in OPERATIONS:
        if held:
            reasons[op] = f"already claimed for {env.operation_kind} by {env.claimed_by}"
        elif state not in ALLOWED_STATES[op]:
            reasons[op] = f"it is {state}: {WHY_ALLOWED[op]}"
        elif op == "cleanup_retry" and env.columns.get("cleanup_claim_id") is not None:
            reasons[op] = cleanup_claim_blocks(env.columns["cleanup_claim_id"], env.columns.get("cleanup_claimed_at"))
    if not held:
        reasons["complete"] = reasons["release"] = "no claim is held"
        reasons["takeover"] = "no claim to take over"
        return ClaimOptions(reasons)
    op = env.operation_kind
    if not held_by(held, actor):
        reasons["complete"] = f"the claim is {env.claimed_by}'s, not yours"
        if not env.stale:
            reasons["release"] = "only its holder can release a fresh claim"
            reasons["takeover"] = "the claim is not stale yet"
            if not console_made(held):
                reasons["release"] = reasons["takeover"] = (
                    f"the claim is not stale yet: {foreign_claim_assumption(stale_after)}")
        elif op not in OPERATIONS:
            reasons["takeover"] = f"the claim is for {op}, an operation the console does not know"
        elif state not in ALLOWED_STATES[op]:
            reasons["takeover"] = f"it is {state}: {WHY_ALLOWED[op]}; release the stale claim instead"
    else:
        reasons["takeover"] = "you hold this claim"
        if HANDOFF.get(op) is None:
            reasons["complete"] = RESET_NOT_COMPLETABLE.format(release="key l")
        elif state not in ALLOWED_STATES.get(op, ()):
            reasons["complete"] = f"it is {state}: {WHY_ALLOWED[op]}; release the claim instead"
        elif op == "stop" and (env.holding_work or env.active_lease_count):
            reasons["complete"] = lease_blocks_stop(env.holding_work or ())
        elif op == "cleanup_retry" and env.columns.get("cleanup_claim_id") is not None:
            reasons["complete"] = cleanup_claim_blocks(env.columns["cleanup_claim_id"],
                                                       env.columns.get("cleanup_claimed_at"))
    return ClaimOptions(reasons, confirm_holder=None if held_by(held, actor) else holder_to_confirm(held))


__all__ = [
    "ADMITTING_STATES",
    "ALLOWED_STATES",
    "CLAIM_ACTIONS",
    "DEFAULT_STALE_AFTER",
    "HANDOFF",
    "HANDOFF_LABEL",
    "HOLDING_BINDING",
    "HOLDING_NOT_CHECKED",
    "OPERATIONS",
    "RESET_NOT_COMPLETABLE",
    "STATES",
    "WHY_ALLOWED",
    "bound_runs_words",
    "claim_holder",
    "claim_options",
    "cleanup_claim_blocks",
    "completion_effect",
    "console_made",
    "default_stale_after",
    "exact_time",
    "held_by",
    "operations_help",
]
