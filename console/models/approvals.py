"""What the approval services return: requests as the queue lists them, one request with its
history and what the actor can do, and a decision on several requests at once.

Archon's `approval_requests` and `approval_request_events` gain columns from release to release,
and `approvals list --json` / `approvals show --json` print every column as stored. So each model
keeps the row it was read from (`columns`, in table order) next to the typed fields the screens and
commands read, and `to_json()` is the one place the JSON shape is defined: archon's columns first,
then what the console derived, in the order the CLI has always printed them.
"""

from __future__ import annotations

from console.records import dataclass, field
from collections.abc import Mapping  # (get_type_hints resolves the fields' annotations)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from console.errors import UsageError
from console.models.results import ActionResult
from console.models.values import Json, Stored

# Every status archon's `approval_requests.status` CHECK allows, in the order a request meets them.
STATUSES = ("pending", "approved", "denied", "cancelled", "expired", "invalidated", "consumed")
# The ones a request can still leave by a decision, a revoke or the expiry sweep.
OPEN_STATUSES = ("pending", "approved")
# Every action kind archon's `approval_requests.action_kind` CHECK allows.
KINDS = ("git_push", "custom_check")


def check_kind(text: str) -> str:
    """A kind filter as typed, refused in one sentence unless it is one of `KINDS`: the one check
    behind `approvals list --kind`, `approvals watch --kind` and a saved view's `kind=`."""
    if text not in KINDS:
        from console.suggest import did_you_mean
        from console.text import one_line

        near = did_you_mean(text, KINDS)
        raise UsageError(f"Unknown kind {one_line(text)!r}; use {' or '.join(KINDS)}.{' ' + near if near else ''}")
    return text


def parse_status_filter(text: str) -> tuple[str, ...] | None:
    """A status filter as typed (`pending`, `pending,approved`, `all`) -> the statuses in the order
    given, or None for every status (`all`, or an empty list). Case and spaces do not matter.

    The one parser of a status filter: `approvals list --status`, `approvals watch --status`, a
    saved view's `status=` and the TUI's `:approvals status=...` all come here, so they accept the
    same words and refuse with the same sentence."""
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in STATUSES and p != "all"]
    if unknown:
        from console.suggest import did_you_mean

        near = did_you_mean(unknown[0], (*STATUSES, "all"))
        raise UsageError(f"Unknown status {', '.join(unknown)}: use {', '.join(STATUSES)}, a comma list of them, "
                         f"or all.{' ' + near if near else ''}")
    if not parts or "all" in parts:
        return None
    return tuple(dict.fromkeys(parts))


def _value(row: Mapping[str, Stored], name: str) -> Stored:
    return row[name] if name in row else None


_REQUEST_FIELDS = ("id", "project_id", "execution_run_id", "action_kind", "action_json", "action_fingerprint",
                   "authority_json", "status", "expires_at", "decision_at", "consumed_at", "created_at",
                   "updated_at")


@dataclass(frozen=True)
class ApprovalRequest:
    """A request as the queue lists it: archon's columns the console reads (None where this
    release has no such column), the row as stored, and the time-derived fields."""

    id: Stored
    project_id: Stored
    execution_run_id: Stored
    action_kind: Stored
    action_json: Stored
    action_fingerprint: Stored
    authority_json: Stored
    status: Stored
    expires_at: Stored
    decision_at: Stored
    consumed_at: Stored
    created_at: Stored
    updated_at: Stored
    # derived
    expires_in_seconds: int | None  # negative once past; None when `expires_at` is unreadable
    overdue: bool  # open (pending or approved) and past its expiry: it can only expire
    project_name: Stored  # the project's `name` as stored; None when the project is gone
    # who asked, as `authority_json` names it (services/approval_queue.py `requester_of`); None: it does not
    requester: Stored
    # every column of the row as stored, in table order (the JSON's first keys)
    columns: Mapping[str, Stored] = field(repr=False)

    @staticmethod
    def archon_fields(row: Mapping[str, Stored]) -> dict[str, Stored]:
        return {name: _value(row, name) for name in _REQUEST_FIELDS}

    def to_json(self) -> dict[str, Any]:
        return {**self.columns, "expires_in_seconds": self.expires_in_seconds, "overdue": self.overdue,
                "project_name": self.project_name}


@dataclass(frozen=True)
class ApprovalEvent:
    """One row of a request's history."""

    sequence: Stored
    event_type: Stored
    from_status: Stored
    to_status: Stored
    actor_classification: Stored
    actor_reference: Stored
    reason: Stored
    created_at: Stored
    columns: Mapping[str, Stored] = field(repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Stored]) -> "ApprovalEvent":
        return cls(**{name: _value(row, name) for name in _EVENT_FIELDS}, columns=dict(row))

    def to_json(self) -> dict[str, Any]:
        return dict(self.columns)


_EVENT_FIELDS = ("sequence", "event_type", "from_status", "to_status", "actor_classification", "actor_reference",
                 "reason", "created_at")


@dataclass(frozen=True)
class ApprovalDetail(ApprovalRequest):
    """One request as `approvals show` and the detail pane read it: the listed fields, its parsed
    action and authority, who asked for it, its history, and (when read for an actor) what that
    actor can do: `options` maps approve/deny/revoke to None (can proceed) or why not; `confirm`
    maps an action that needs a typed confirmation to the problem it must name."""

    action: Json  # parsed `action_json` (None when it is not JSON)
    authority: Json  # parsed `authority_json`
    requester_problem: str | None
    action_summary: str
    project_deleting: bool  # the project's deletion has started: its requests are read-only here
    events: tuple[ApprovalEvent, ...]  # the newest EVENT_PAGE (services/approval_queue.py), oldest first
    options: Mapping[str, str | None] | None = None  # None: read for no actor
    confirm: Mapping[str, str] | None = None
    events_total: int | None = None  # how many the request has (None: all of them are in `events`)

    @property
    def events_hidden(self) -> int:
        """How many older events `events` leaves out."""
        return max(0, (self.events_total or 0) - len(self.events))

    def to_json(self) -> dict[str, Any]:
        data = {
            **super().to_json(),
            "action": self.action,
            "authority": self.authority,
            "requester": self.requester,
            "requester_problem": self.requester_problem,
            "action_summary": self.action_summary,
            "project_deleting": self.project_deleting,
            "events": [event.to_json() for event in self.events],
        }
        if self.events_hidden:  # only then, so the shape of every ordinary request stays as it was
            data["events_total"] = self.events_total
            data["events_truncated"] = True
        if self.options is not None:
            data["options"] = dict(self.options)
            data["confirm"] = dict(self.confirm or {})
        return data

    def unavailable(self) -> dict[str, str]:
        """Only the decisions that would be refused, with why."""
        return {action: why for action, why in (self.options or {}).items() if why}


@dataclass(frozen=True)
class DecisionOptions:
    """For approve/deny/revoke: None when the service would carry the decision out for this actor
    on the request as read, else the plain-words reason it would refuse; `confirm` maps a decision
    that can proceed only after an explicit second confirmation to the problem that confirmation
    must name. The write re-checks everything in its transaction."""

    reasons: Mapping[str, str | None]
    confirm: Mapping[str, str]

    def why(self, action: str) -> str | None:
        return self.reasons[action]

    def enabled(self, action: str) -> bool:
        return self.reasons[action] is None


@dataclass(frozen=True)
class DecisionBatch:
    """One decision (`verb`) applied to requests one by one, each in its own transaction; one
    result per request in the order given. `bulk` says the person marked the requests (a result
    dialog follows) rather than deciding the highlighted one."""

    verb: str
    results: tuple[ActionResult, ...]
    bulk: bool = False

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def message(self) -> str:
        if len(self.results) == 1:
            return self.results[0].message
        done = sum(1 for r in self.results if r.ok)
        return f"{self.verb}: {done} of {len(self.results)} done."


__all__ = ["ApprovalDetail", "ApprovalEvent", "ApprovalRequest", "DecisionBatch", "DecisionOptions"]
