"""What a host's answer to a write proves, for the CLI (console/cli/fleet_writes.py) and the TUI
(console/tui/fleet_monitor.py) alike: one rule each, so the two front ends never disagree.

- Which item answers an id: exactly one item naming it. None, or two (a host that says "done"
  and "refused" for one id), is no answer: the outcome is unknown and the id is read back.
- Whether a write reached the host: a state in `NOT_SENT` means nothing can have been written;
  any other failure after the request may have gone out is outcome unknown, never "failed".
- What a read-back proves: a decision whose answer was lost counts as done only when the request
  now has the status the decision asked for AND the last event into that status is a person's,
  by the actor this session's host resolved (its hello). Denied, expired, or approved by someone
  else meanwhile is not ours.
"""

from __future__ import annotations

from typing import Any

from console.fleet.answers import DECIDED

# Host states in which the request never reached the host's console: nothing can have been written.
NOT_SENT = frozenset({"unreachable", "auth_failed", "host_key", "no_server", "version_skew", "wrong_instance",
                      "stale", "read_only"})


def items_by_id(items: Any) -> dict[str, list[dict[str, Any]]]:
    """A write's result items grouped by the id they name; what names no id answers for none."""
    answers: dict[str, list[dict[str, Any]]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            answers.setdefault(item["id"], []).append(item)
    return answers


def actor_of(hello: Any) -> str | None:
    """The actor a host resolved for this session (its hello), if it named one."""
    actor = hello.get("actor") if isinstance(hello, dict) else None
    return actor if isinstance(actor, str) and actor else None


def decided_by(data: Any, status: str) -> str | None:
    """Who made the last transition into `status` (its event in the read-back's history), if a person."""
    events = data.get("events") if isinstance(data, dict) else None
    for event in reversed(events if isinstance(events, list) else []):
        if isinstance(event, dict) and event.get("to_status") == status:
            who = event.get("actor_reference")
            return who if event.get("actor_classification") == "human" and isinstance(who, str) else None
    return None


def read_back_done(method: str, data: Any, actor: str | None) -> bool:
    """Whether a read-back (`approvals show --json`) proves that `method`, sent by `actor`, took effect."""
    expected = DECIDED.get(method)
    if expected is None or actor is None or not isinstance(data, dict):
        return False
    return data.get("status") == expected and decided_by(data, expected) == actor


__all__ = ["NOT_SENT", "actor_of", "decided_by", "items_by_id", "read_back_done"]
