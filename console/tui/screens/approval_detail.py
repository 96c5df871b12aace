"""How the approval queue draws a request: its cells in the list, the detail pane, and the
sentences of the decision dialogs. Pure functions of a request row and the time, so the screen
(approvals.py) holds only behaviour."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from rich.text import Text

from console.clock import parse_time, relative
from console.models.approvals import OPEN_STATUSES, ApprovalDetail, ApprovalRequest
from console.services import approval_queue as queue
from console.services.identity import account_of
from console.services.projects import EXPIRING_SOON
from console.text import one_line
from widgets.humane import age, countdown, exact
from widgets.key_values import Entry
from widgets.safe_text import clean, safe_text
from widgets.timeline import TimelineEvent

VERB = {"approve": "Approve", "deny": "Deny", "revoke": "Revoke"}


@lru_cache(maxsize=4096)
def _action_line(kind: Any, action_json: Any) -> str:
    return queue.action_summary(kind, queue.parse_json_field(action_json), action_json)


def summary_cell(row: ApprovalRequest) -> Text:
    """The action in a few words, parsed once per action (rows are re-rendered every second)."""
    return safe_text(_action_line(row.action_kind, row.action_json), one_line=True)


SHORT_ID = 12


def short_id_cell(row: ApprovalRequest) -> Text:
    """The id first, where every width shows it: whole when it fits, else its distinguishing
    tail (`y` copies, and `/` finds, the whole id)."""
    ident = clean(row.id, one_line=True)
    return Text(ident if len(ident) <= SHORT_ID else "…" + ident[-(SHORT_ID - 1):], no_wrap=True, end="")


def expiry_cell(row: ApprovalRequest, now: datetime) -> Text:
    """The live countdown of an open request; `!` marks one expiring within the hour (in monochrome too)."""
    when = parse_time(row.expires_at)
    if row.status not in OPEN_STATUSES:
        return Text("—", style="dim")
    label = countdown(when, now)
    if label == "expired":
        return Text(label, style="bold red")
    if when is not None and when - now <= EXPIRING_SOON:
        return Text(f"! {label}", style="bold yellow")  # the row is yellow too
    return Text(label)


def row_class(row: ApprovalRequest, now: datetime) -> str | None:
    """Decided requests muted; open ones expiring within the hour yellow."""
    if row.status not in OPEN_STATUSES:
        return "muted"
    when = parse_time(row.expires_at)
    return "warning" if when is not None and when - now <= EXPIRING_SOON else None


def age_cell(row: ApprovalRequest, now: datetime) -> Text:
    """How long ago it was requested ("3m"); the queue's countdown tick ages it."""
    created = parse_time(row.created_at)
    return Text(age(None if created is None else (now - created).total_seconds()))


def detail_fields(r: ApprovalDetail, now: datetime) -> list[Entry]:
    """The pane's head at `now` (widgets/key_values.py draws it again at every tick, so the expiry
    counts down): the request's fields, then every action it cannot take now and why."""
    entries: list[Entry] = [safe_text(r.id, "bold", one_line=True)]
    rows = [
        ("status", r.status),
        ("project", f"{r.project_name or ''} ({r.project_id})"),
        ("kind", r.action_kind),
        ("action", r.action_summary),
        ("requester", r.requester or "unknown"),
        ("expires", f"{relative(r.expires_at, now, unknown='—', present='now')}  ({exact(parse_time(r.expires_at))})"),
        ("created", exact(parse_time(r.created_at))),
        ("decided", exact(parse_time(r.decision_at)) if r.decision_at else "—"),
        ("fingerprint", r.action_fingerprint),
        ("run", r.execution_run_id),
    ]
    entries += [(name, safe_text(value, one_line=True)) for name, value in rows]
    options = r.options or {}
    for action, why in options.items():
        if why:
            entries.append((action, safe_text(f"not possible: {why}", "yellow", one_line=True)))
    for action, problem in (r.confirm or {}).items():
        entries.append((action, safe_text(f"needs a typed confirmation: {problem}", "yellow", one_line=True)))
    return entries


def detail_events(r: ApprovalDetail) -> list[TimelineEvent]:
    events = [
        TimelineEvent(parse_time(e.created_at),
                      f"{e.event_type}: {e.from_status or '∅'} → {e.to_status}",
                      " · ".join(x for x in (f"by {one_line(e.actor_reference or e.actor_classification, 40)}",
                                             _account(e.columns.get("metadata_json")), e.reason or "") if x))
        for e in r.events
    ]
    if r.events_hidden:  # the service read the newest page only (services/approval_queue.py EVENT_PAGE)
        events.insert(0, TimelineEvent(None, f"…and {r.events_hidden:,} earlier events",
                                       "only the newest are read; `archon-console audit` lists them all"))
    return events


def _account(metadata_json) -> str:
    """The OS account the console recorded beside the declared actor (docs/decisions.md, D21)."""
    account = account_of(metadata_json)
    return f"OS {account}" if account else ""


def what_happens(verb: str, r: ApprovalDetail, now: datetime) -> Text:
    """What a decision on `r` will do, in the dialog that asks for it."""
    text = Text(end="")
    text.append(f"{VERB[verb]} ", style="bold")
    text.append_text(safe_text(r.action_summary or r.action_kind, one_line=True))
    text.append("\nrequest ", style="dim")
    text.append_text(safe_text(r.id, one_line=True))
    text.append("  project ", style="dim")
    text.append_text(safe_text(r.project_name or r.project_id, one_line=True))
    text.append("\nrequested by ", style="dim")
    text.append_text(safe_text(r.requester or "unknown", one_line=True))
    text.append(f", expires {relative(r.expires_at, now, unknown='—', present='now')}\n\n", style="dim")
    text.append({
        "approve": "The request becomes approved: archon's executor may carry out this action once, "
                   "before it expires.",
        "deny": "The request becomes denied: the action will not run. This is final.",
        "revoke": "The approval is withdrawn (the request becomes invalidated) so the action cannot run. "
                  "This is final.",
    }[verb])
    return text


def bulk_summary(verb: str, marked: list[ApprovalRequest]) -> Text:
    """The marked requests a bulk decision will try, each in its own transaction."""
    summary = Text(f"{VERB[verb]} {len(marked)} marked requests, each in its own transaction:\n", style="bold")
    for m in marked[:8]:
        summary.append("  • ")
        summary.append_text(safe_text(f"{m.id}  {m.project_name or ''}  {m.action_kind}", one_line=True))
        summary.append("\n")
    if len(marked) > 8:
        summary.append(f"  … and {len(marked) - 8} more\n", style="dim")
    summary.append("Requests that can no longer be decided are refused one by one and reported.", style="dim")
    return summary
