"""What every service shares: the actor, feature checks, and the shape of an action's result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from console.db.connect import ArchonDatabase
from console.errors import MissingArgument, Refusal

ACTOR_MAX_BYTES = 200
REASON_MAX_BYTES = 2000

# The first archon release whose schema has each feature.
FEATURE_RELEASE = {"profiles": "1.8.22", "approvals": "1.8.22", "claims": "1.10.0"}


@dataclass
class ActionResult:
    """One id's outcome. `noop` marks a repeat of something that already took effect.

    `wrote` names what a refused action wrote all the same (approving an overdue request marks it
    expired): the one exception to "exit 1: nothing was written", stated in every refused result.
    """

    ok: bool
    id: str
    state: str | None
    message: str
    noop: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    wrote: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        wrote = data.pop("wrote")
        data.update(extra)
        if not self.ok:
            data["wrote"] = list(wrote)
        return data


def validate_actor(actor: str) -> str:
    size = len(actor.encode("utf-8"))
    if not 1 <= size <= ACTOR_MAX_BYTES:
        raise Refusal(
            f"The actor name must be 1 to {ACTOR_MAX_BYTES} bytes (it is {size}).",
            "Pass a shorter --as NAME.",
        )
    return actor


def validate_reason(reason: str | None, *, required: bool, what: str = "this action") -> str | None:
    if reason is not None:
        reason = reason.strip()
    if required and not reason:
        raise MissingArgument(f"A reason is required for {what}; nothing was written.", "Pass --reason TEXT.")
    if reason:
        size = len(reason.encode("utf-8"))
        if size > REASON_MAX_BYTES:
            raise Refusal(
                f"The reason is {size} bytes; at most {REASON_MAX_BYTES} are allowed. Nothing was written.",
                "Shorten it; it is never cut silently.",
            )
    return reason or None


def require_feature(handle: ArchonDatabase, feature: str, *, what: str) -> None:
    """Refuse features the database's release lacks, instead of failing on a missing column."""
    if not handle.shape.supports(feature):
        release = handle.shape.release or "unknown"
        needed = FEATURE_RELEASE.get(feature, "1.10.0")
        raise Refusal(
            f"{what} needs archon {needed} or later; this database has the {release} shape (upgrade required).",
            "Run `archon-console upgrade --plan` to see what an upgrade would do.",
        )


def claim_id_for(actor: str) -> str:
    """`console:<actor>@<host>:<random>`, cut to archon's 128-character limit."""
    import socket  # socket and uuid are imported by the writes that need them, not at every start
    import uuid

    host = socket.gethostname() or "host"
    suffix = uuid.uuid4().hex[:12]
    head = f"console:{actor}@{host}"
    return f"{head[: 128 - len(suffix) - 1]}:{suffix}"


def new_event_id() -> str:
    import uuid

    return str(uuid.uuid4())
