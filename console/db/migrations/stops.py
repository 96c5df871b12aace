"""Which archon starts an upgrade stands for: the release it stops at, not every release in between.

Archon has no ledger: each release's start runs its own backfills on the file as it finds it. A user
who skips 1.8.22 starts 1.10.0 on a 1.8.20 file, so 1.8.22's profile backfills never run there and
1.10.0's start gives every project revision 1 in its own schema (steps 005 and 006 stand for
1.8.22's backfills, step 021 for 1.10.0's). The console's upgrade names the release archon starts
next (`upgrade --to`); a release is a stop of the run only when it is that target. Everything
else of an intermediate release (tables, columns, rebuilds, triggers) is also done by the target's
start, so only the backfills ask. docs/decisions.md ("Direct and chained upgrade paths") says what
this assumes.

Steps applied without a target (a database modelled release by release, as the demo and the
tests build one) stand for every release in turn: each is a stop.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_TARGET: ContextVar[str | None] = ContextVar("archon_console_upgrade_target", default=None)


@contextmanager
def upgrading_to(target: str | None) -> Iterator[None]:
    """Plan or run the steps of an upgrade whose target is `target` (a release name)."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def is_stop(release: str) -> bool:
    """Whether archon `release` starts on the file in the upgrade being planned or run."""
    target = _TARGET.get()
    return target is None or target == release
