"""Full garbage collections while the operator is idle, not while they scroll.

Rendering a Textual screen allocates many small tracked objects (segments, strips), and Textual's
and Rich's caches keep ~100,000 of them alive. CPython then runs a full (generation 2) collection
every few dozen frames, and each one walks every live object: measured at 20-40 ms, it was the
whole tail of the page-down latency (p99 138 ms over 1,000 pages; 52 ms without it). Young
garbage is still collected as usual; only the full collection waits until no key has been
pressed for `idle_seconds`. Objects alive when the console mounts (modules, classes, styles) are
frozen out of collections altogether (`gc.freeze`), so the idle collections are short too.
"""

from __future__ import annotations

import gc
import time
from typing import Callable

NO_AUTOMATIC_FULL_COLLECTION = 10**9


class IdleCollector:
    def __init__(self, idle_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.last_input = clock()
        self._saved: tuple[int, int, int] | None = None

    @property
    def started(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        """Freeze what is alive now and take full collections off the automatic schedule. Cheap
        (no collection: freezing only moves lists), so it runs at mount; whatever garbage is alive
        at that moment stays frozen with the rest, a one-off of start-up leftovers."""
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gc.freeze()
        first, second, _ = self._saved
        gc.set_threshold(first, second, NO_AUTOMATIC_FULL_COLLECTION)

    def stop(self) -> None:
        """Back to CPython's own schedule (tests run many consoles in one process)."""
        if self._saved is None:
            return
        gc.set_threshold(*self._saved)
        gc.unfreeze()
        self._saved = None

    def note_input(self) -> None:
        self.last_input = self.clock()

    def tick(self) -> bool:
        """Collect fully if the operator is idle and younger collections have promoted anything
        since the last full one; returns whether it collected."""
        if self._saved is None or self.clock() - self.last_input < self.idle_seconds:
            return False
        if gc.get_count()[2] == 0:
            return False
        gc.collect()
        return True


__all__ = ["IdleCollector"]
