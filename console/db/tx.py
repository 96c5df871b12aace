"""The one way to write: a `BEGIN IMMEDIATE` transaction, and plain words for every refusal.

Archon's triggers are the last line of defence; services pre-check every rule inside the
transaction. When a trigger, CHECK or lock still says no, `translate` turns it into a `Refusal`
that names the reason in operator's words and keeps the raw message as a hint.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from contextvars import ContextVar

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Iterator

from console.errors import Refusal

# Exact RAISE(ABORT, ...) messages from the seeds -> what they mean for an operator.
TRIGGER_MESSAGES: dict[str, str] = {
    "Invalid approval request status transition": (
        "This request is no longer in a state that allows that decision. Nothing was changed; refresh the queue."
    ),
    "Approval request decision evidence is immutable": (
        "A decision has already been recorded for this request and cannot be changed."
    ),
    "Approval request identity and evidence are immutable": (
        "The requested action and its authority are fixed once requested; they cannot be edited."
    ),
    "Approval request events are append-only": (
        "The approval history is permanent and cannot be edited or removed."
    ),
    "Invalid execution environment operation claim": (
        "That claim is malformed (id 1-128 characters, kind stop/retire/reset/cleanup_retry, time required; "
        "a release clears all three)."
    ),
    "Execution environment identity is immutable": (
        "An environment's identity is fixed; create a new environment instead."
    ),
    "Execution environment is not admitting leases": (
        "No new runs can be placed on this environment: it is not ready, running or stopped, "
        "has a retirement request, or is claimed for an operation."
    ),
    "Execution environment binding identity does not match": (
        "The run's binding does not match this environment's revision, validation fingerprint or profile."
    ),
    "Execution environment run binding identity is immutable": "A run binding's identity is fixed.",
    "Execution environment binding evidence is immutable": (
        "The authority and placement evidence recorded for a run binding is fixed."
    ),
    "Active execution profile revision is not owned by project": (
        "A project can only use an execution profile revision that belongs to it."
    ),
    "Build execution provider must project the active execution profile": (
        "The project's build provider must match the provider preference of its active execution profile; "
        "change both together by activating a matching revision."
    ),
    "Execution profile revisions are immutable": (
        "Profile revisions are permanent; a change is a new revision."
    ),
    "Execution profile audit events are immutable": "The profile audit trail is permanent.",
    "Invalid Build sequence execution profile selection": (
        "A queued or active ticket must name a profile revision of its project, with matching fingerprint "
        "and an accepted reason."
    ),
    "Build sequence execution profile selection is immutable": (
        "The profile chosen for a ticket is fixed when it joins the sequence."
    ),
    "Execution run authority is immutable": "The authority recorded for a run is fixed.",
    "Build setup evidence identity is immutable": (
        "Setup evidence is fixed; only its outcome and completion time may be recorded."
    ),
    "Completed check batch details are immutable": "Results of a finished check are permanent.",
    "Completed check attempt details are immutable": "Results of a finished check are permanent.",
    "Check batch environment binding is immutable": (
        "The environment a check batch ran against is recorded once, both fields together."
    ),
    "Check attempt placement is immutable": "Where a check attempt ran is recorded once.",
}

BUSY_HINT = (
    "Another process (usually archon) held the write lock longer than the busy timeout; "
    "nothing was written. Try again in a moment, or raise --busy-timeout."
)


def translate(exc: BaseException) -> BaseException:
    """Map a sqlite3 error to a plain-words refusal; unknown errors keep their text. A statement
    that a signal interrupted is that signal's stop, and one over the limits says which
    (console/db/limits.py)."""
    from console.db.limits import explain
    from console.signals import as_stop

    over = as_stop(exc) or explain(exc)
    if over is not None:
        return over
    message = str(exc)
    if message in TRIGGER_MESSAGES:
        return Refusal(TRIGGER_MESSAGES[message], f"(archon's rule: {message})")
    if isinstance(exc, sqlite3.OperationalError) and (
        "database is locked" in message or "database is busy" in message
    ):
        return Refusal("The database is busy.", BUSY_HINT)
    if message.startswith("CHECK constraint failed"):
        return Refusal(
            "The database refused a value that breaks one of its rules; nothing was written.",
            f"({message})",
        )
    if message.startswith("UNIQUE constraint failed"):
        return Refusal(
            "Another writer recorded the same thing at the same moment; nothing was written. Try again.",
            f"({message})",
        )
    if message.startswith("FOREIGN KEY constraint failed"):
        return Refusal("A reference to a missing row was refused; nothing was written.", f"({message})")
    if "attempt to write a readonly database" in message:
        return Refusal(
            "The database file is read-only for this user; nothing was written.",
            "Run without --read-only on a writable copy, or fix the file's permissions.",
        )
    return Refusal(f"The database refused the change: {message}.")


class LockBudget:
    """How long one command may still wait for the write lock, in all: `--busy-timeout`.

    SQLite's busy_timeout bounds one statement's wait, so a command that begins several transactions,
    retries one, or waits for other processes first would wait that long each time (1 s asked, 4.2 s
    waited). The command arms one budget (`lock_budget`); every wait for the lock is bounded by what
    is left of it and draws it down (`waiting`, `execute_waiting`)."""

    def __init__(self, seconds: float) -> None:
        self.left = max(0.0, float(seconds))
        self._pragmas: dict[int, tuple[sqlite3.Connection, int]] = {}

    @property
    def remaining_ms(self) -> int:
        return max(0, int(self.left * 1000))

    @contextmanager
    def waiting(self, conn: sqlite3.Connection | None = None) -> Iterator["LockBudget"]:
        """A wait for the lock: `conn`'s busy_timeout is what is left; the time it took is spent."""
        if conn is not None:
            if id(conn) not in self._pragmas:
                self._pragmas[id(conn)] = (conn, conn.execute("PRAGMA busy_timeout").fetchone()[0])
            conn.execute(f"PRAGMA busy_timeout = {self.remaining_ms}")
        started = time.monotonic()
        try:
            yield self
        finally:
            self.left = max(0.0, self.left - (time.monotonic() - started))

    def restore(self) -> None:
        """Give each connection it waited on its own busy_timeout back (one that outlives the command)."""
        for conn, ms in self._pragmas.values():
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(ms)}")
            except sqlite3.Error:  # closed meanwhile
                pass
        self._pragmas.clear()


_BUDGET: ContextVar[LockBudget | None] = ContextVar("lock_budget", default=None)


@contextmanager
def lock_budget(seconds: float, *, fresh: bool = False) -> Iterator[LockBudget]:
    """Arm one command's budget of `seconds` for what runs inside, in this thread. Already armed,
    the command's budget stays (a service called by a command shares it) unless `fresh`: a server's
    request is a command of its own."""
    current = _BUDGET.get()
    if current is not None and not fresh:
        yield current
        return
    budget = LockBudget(seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)
        budget.restore()


def execute_waiting(conn: sqlite3.Connection, sql: str) -> None:
    """A statement that may wait for the lock (`BEGIN IMMEDIATE`, `COMMIT`), within the armed budget."""
    budget = _BUDGET.get()
    if budget is None:
        conn.execute(sql)
        return
    with budget.waiting(conn):
        conn.execute(sql)


class write_transaction:  # noqa: N801 - used as `with write_transaction(conn) as conn:`
    """`BEGIN IMMEDIATE` ... `COMMIT`; any error rolls back and becomes a `Refusal`.

    `Refusal`s raised by the body pass through unchanged (after the rollback). A class rather than
    a generator context manager: it runs once per decision, and decisions are measured against
    the bare SQL loop (README, performance).
    """

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection, *, read_only: bool = False) -> None:
        if read_only:
            raise Refusal(
                "The console is in read-only mode; nothing was written.",
                "Run without --read-only to make changes.",
            )
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        try:
            execute_waiting(self.conn, "BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise translate(exc) from None
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if kind is None:
            try:
                execute_waiting(self.conn, "COMMIT")
                return False
            except sqlite3.Error as error:
                rollback(self.conn)
                raise translate(error) from None
            except BaseException:
                rollback(self.conn)
                raise
        rollback(self.conn)
        if isinstance(exc, sqlite3.Error):
            raise translate(exc) from None
        return False  # a Refusal or anything else propagates unchanged


def rollback(conn: sqlite3.Connection) -> None:
    """End an open transaction, if any, keeping the error that caused it (a failed ROLLBACK after
    a full disk or a lost lock adds nothing the caller can act on)."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
