"""What a write returns for each id it was asked about, for the services, the commands and the
screens alike (and the models that carry several: console/models/approvals.py `DecisionBatch`)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from console.errors import Refusal
from console.records import dataclass, field
from console.models.values import Stored


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
    extra: dict[str, Stored] = field(default_factory=dict)
    wrote: tuple[str, ...] = ()
    # the refusal behind a refused result (console/errors.py), so a screen can say its way out in
    # its own words (a key where the command line has an option); never part of the JSON
    refusal: Refusal | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "id": self.id, "state": self.state, "message": self.message,
                                "noop": self.noop, **self.extra}
        if not self.ok:
            data["wrote"] = list(self.wrote)
        return data
