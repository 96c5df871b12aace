"""What the environments service returns: an environment as the console shows it, its leases, its
events, the requests handed to archon, which claim actions it offers, and a claim write's outcome.

Archon's tables gain columns from release to release, and `envs list --json` / `envs show --json`
print every column as stored, whichever release wrote them. So each
model keeps the row it was read from (`columns`, in table order) next to the typed fields the
screens and commands read, and `to_json()` is the one place the JSON shape is defined: archon's
columns first, then what the console derived, in the order the CLI has always printed them.
"""

from __future__ import annotations

from console.records import dataclass, field
from collections.abc import Mapping  # (get_type_hints resolves the fields' annotations)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from console.models.values import Stored


def _value(row: Mapping[str, Stored], name: str) -> Stored:
    return row[name] if name in row else None


@dataclass(frozen=True)
class PendingHandoff:
    """A request archon has been handed (through one of its scheduling columns) and not performed yet."""

    kind: str  # the operation: stop, retire or cleanup_retry
    column: str  # archon's column that carries the request
    since: Stored  # that column's value, as stored
    age_seconds: float | None  # None when `since` is unreadable
    performed_by: str  # who in archon acts on it
    overdue: bool  # waited longer than the stale threshold: archon is probably not running
    text: str  # the sentence doctor, `envs show` and the TUI print

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "column": self.column, "since": self.since, "age_seconds": self.age_seconds,
                "performed_by": self.performed_by, "overdue": self.overdue, "text": self.text}


@dataclass(frozen=True)
class Handoff:
    """What completing a claim handed to archon."""

    kind: str
    column: str
    since: Stored
    performed_by: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "column": self.column, "since": self.since, "performed_by": self.performed_by}


@dataclass(frozen=True)
class EnvironmentLease:
    """A run bound to the environment, not released: an active execution lease, or a validation binding."""

    execution_run_id: Stored
    bound_at: Stored
    columns: Mapping[str, Stored] = field(repr=False)
    relationship: Stored = "execution"

    @classmethod
    def from_row(cls, row: Mapping[str, Stored]) -> "EnvironmentLease":
        return cls(execution_run_id=_value(row, "execution_run_id"), bound_at=_value(row, "bound_at"),
                   columns=dict(row), relationship=_value(row, "relationship"))

    def to_json(self) -> dict[str, Any]:
        return dict(self.columns)


@dataclass(frozen=True)
class EnvironmentEvent:
    """One row of the environment's timeline (archon's events and the console's claim events)."""

    sequence: Stored
    event_type: Stored
    from_state: Stored
    to_state: Stored
    actor_classification: Stored
    actor_reference: Stored
    reason: Stored
    created_at: Stored
    columns: Mapping[str, Stored] = field(repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Stored]) -> "EnvironmentEvent":
        return cls(**{name: _value(row, name) for name in _EVENT_FIELDS}, columns=dict(row))

    def to_json(self) -> dict[str, Any]:
        return dict(self.columns)


_EVENT_FIELDS = ("sequence", "event_type", "from_state", "to_state", "actor_classification", "actor_reference",
                 "reason", "created_at")


HOLDER_WIDTH = 24  # characters of a declared holder shown beside the OS account


def claimed_by(holder: str | None, account: str | None) -> str | None:
    """`bob (OS erin@host)`: the declared holder, whitespace collapsed and cut to `HOLDER_WIDTH`
    characters so padding cannot push the account out of a cell, and the OS account that took the
    claim (docs/decisions.md, D21)."""
    if holder is None:
        return None
    who = " ".join(holder.split()) or repr(holder)
    who = who if len(who) <= HOLDER_WIDTH else who[: HOLDER_WIDTH - 1] + "\u2026"
    return f"{who} (OS {account})" if account else who


@dataclass(frozen=True)
class EnvironmentView:
    """An execution environment with what the console derives from it.

    A list row carries no `active_leases`, `bound_runs` or `events` (None); `show_environment` fills them,
    and `project_deleting`, which the claim rules need (a project being deleted is read-only in
    the console) and which is not printed: it is the project's column, not the environment's
    (as is `project_name`, which both fill).
    """

    # archon's columns the console reads (None where this release has no such column)
    id: Stored
    project_id: Stored
    lifecycle_state: Stored
    provider_kind: Stored
    provider_version: Stored
    operation_claim_id: Stored
    operation_kind: Stored
    operation_claimed_at: Stored
    retirement_requested_at: Stored
    idle_stop_at: Stored
    cleanup_retry_at: Stored
    cleanup_attempts: Stored
    failure_message: Stored
    last_used_at: Stored
    created_at: Stored
    # derived
    active_lease_count: int
    claim_holder: str | None  # who the claim id names
    claim_age_seconds: float | None
    stale: bool  # a claim older than the stale threshold (or with an unreadable time)
    admits_leases: bool  # whether archon's lease admission would place a new run on it
    admission_reason: str
    pending_handoffs: tuple[PendingHandoff, ...]
    # every column of the row as stored, in table order (the JSON's first keys)
    columns: Mapping[str, Stored] = field(repr=False)
    active_leases: tuple[EnvironmentLease, ...] | None = None
    # every binding not released, of either relationship: what holds it against a stop hand-off
    bound_runs: tuple[EnvironmentLease, ...] | None = None
    # (kind, run) of all work placed in it (environment_queries.holding_work): what holds it against a
    # stop hand-off; `holding_not_checked` says what a read that had to stay a seek left to the write
    holding_work: tuple[tuple[str, str], ...] | None = None
    holding_not_checked: str | None = None
    events: tuple[EnvironmentEvent, ...] | None = None
    project_deleting: bool = False
    claim_account: str | None = None  # the OS account that took the claim, as its event recorded (D21)
    project_name: Stored = None  # what the screens show for the project; not printed (the project's column)

    @property
    def claimed_by(self) -> str | None:
        """Who holds the claim as every output shows it: the declared name (at most 40 characters,
        so padding cannot push the account out of sight) and the OS account that took it."""
        return claimed_by(self.claim_holder, self.claim_account)

    def to_json(self) -> dict[str, Any]:
        data = {
            **self.columns,
            "active_lease_count": self.active_lease_count,
            "claim_holder": self.claim_holder,
            "claim_account": self.claim_account,
            "claim_age_seconds": self.claim_age_seconds,
            "stale": self.stale,
            "admits_leases": self.admits_leases,
            "admission_reason": self.admission_reason,
            "pending_handoffs": [h.to_json() for h in self.pending_handoffs],
        }
        if self.active_leases is not None:
            data["active_leases"] = [lease.to_json() for lease in self.active_leases]
        if self.bound_runs is not None:
            data["bound_runs"] = [lease.to_json() for lease in self.bound_runs]
        if self.holding_work is not None:
            data["holding_work"] = [{"kind": kind, "run": run} for kind, run in self.holding_work]
            data["holding_not_checked"] = self.holding_not_checked
        if self.events is not None:
            data["events"] = [event.to_json() for event in self.events]
        return data


ARCHON_FIELDS = ("id", "project_id", "lifecycle_state", "provider_kind", "provider_version", "operation_claim_id",
                 "operation_kind", "operation_claimed_at", "retirement_requested_at", "idle_stop_at",
                 "cleanup_retry_at", "cleanup_attempts", "failure_message", "last_used_at", "created_at")


@dataclass(frozen=True)
class EnvironmentPage:
    rows: list[EnvironmentView]
    next_after: str | None  # pass as `after` for the next page; None on the last page


@dataclass(frozen=True)
class ClaimOptions:
    """For each claim action (an operation name to claim it, "complete", "release", "takeover"):
    None when the service would carry it out for this actor on the environment as read, else the
    plain-words reason it would refuse. The write re-checks everything in its transaction.
    `confirm_holder`: what the operator must type to take over or release the held claim, when the
    console did not create it (the write refuses without it); None otherwise."""

    reasons: Mapping[str, str | None]
    confirm_holder: str | None = None

    def why(self, action: str) -> str | None:
        return self.reasons[action]

    def enabled(self, action: str) -> bool:
        return self.reasons[action] is None

    def unavailable(self) -> dict[str, str]:
        """Only the actions that would be refused, with why."""
        return {action: why for action, why in self.reasons.items() if why is not None}


@dataclass
class ClaimResult:
    """What a claim, release or complete did: the outcome every write reports (`ok`, `id`, `state`,
    `message`, `noop`, as `console.models.results.ActionResult`) and what the claim write changed.

    `to_json()` prints the claim fields only when set, as the CLI has always printed them.
    """

    ok: bool
    id: str
    state: str | None
    message: str
    noop: bool = False
    operation_kind: str | None = None
    claim_id: str | None = None
    handoff: Handoff | None = None
    event_written: bool | None = None  # False: this database's event table has columns we do not know

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "id": self.id, "state": self.state, "message": self.message,
                                "noop": self.noop}
        if not self.ok:
            data["wrote"] = []
        for name in ("operation_kind", "claim_id", "handoff", "event_written"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value.to_json() if isinstance(value, Handoff) else value
        return data


__all__ = [
    "ARCHON_FIELDS",
    "ClaimOptions",
    "ClaimResult",
    "EnvironmentEvent",
    "EnvironmentLease",
    "EnvironmentPage",
    "EnvironmentView",
    "Handoff",
    "PendingHandoff",
    "claimed_by",
]
