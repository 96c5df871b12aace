"""What the approval services return: a decision on several requests at once."""

from __future__ import annotations

from dataclasses import dataclass

from console.services.base import ActionResult


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
