"""What a restore would lose: everything written to the database since its snapshot was taken.

A restore puts back the snapshot's bytes; every decision, consumption, claim, lifecycle change,
profile activation and event written since is gone, whatever table holds it, and an approval archon
has since consumed, invalidated, let expire or deleted becomes `approved` (executable) again. So
before anything is replaced both files are read (read-only SQLite connections,
console/db/connect.py `untouched_read_uri`; never their files directly) and every table compared row
by row (console/services/upgrade/restore_diff.py: streamed, bounded memory). The kinds archon's
operators think in (decisions, consumed approvals, claims, ...) are a summary read from the same
rows; the per-table counts under it are the whole answer.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from console.db.connect import untouched_read_uri
from console.db.connection import sqlite_connection
from console.db.limits import explain
from console.db.paths import nonempty_file
from console.errors import DatabaseUnusable
from console.services.upgrade.restore_diff import FIRST, TableDiff, diff_table, table_names
from console.signals import as_stop
from console.text import one_line

FIRST_REARMED = 20  # request ids named in the refusal

_Predicate = Callable[[tuple | None, tuple | None], bool]


def _written(current: tuple | None, before: tuple | None) -> bool:
    """The row is new since the snapshot, or these columns changed."""
    return current is not None and (before is None or current != before)


def _any_set_and_written(current: tuple | None, before: tuple | None) -> bool:
    """A claim taken, changed or released since: new rows count only when they hold one."""
    if current is None:
        return False
    if before is None:
        return any(value is not None for value in current)
    return current != before


def _decided(current: tuple | None, before: tuple | None) -> bool:
    """A request decided (approved, denied, cancelled, expired, invalidated) since; its consumption
    is its own kind, so `consumed` counts here as the approval it was."""
    if current is None or current[0] == "pending":
        return False

    def decision(row: tuple) -> tuple:
        return ("approved" if row[0] == "consumed" else row[0], *row[1:])
    return before is None or decision(current) != decision(before)


def _consumed(current: tuple | None, before: tuple | None) -> bool:
    """Consumed now (status or `consumed_at`), and not so in the snapshot."""
    if current is None or (current[0] != "consumed" and current[1] is None):
        return False
    return before is None or current != before


def _new(current: tuple | None, before: tuple | None) -> bool:
    return current is not None and before is None  # events are append-only: a new id is a new event


@dataclass(frozen=True)
class _Kind:
    name: str
    label: str  # "N <label>"
    table: str
    columns: tuple[str, ...]  # compared; a column one side lacks compares as NULL
    lost: _Predicate = _written


KINDS = (
    _Kind("decisions", "approval decisions", "approval_requests", ("status", "decision_at"), lost=_decided),
    _Kind("consumed_approvals", "consumed approvals", "approval_requests", ("status", "consumed_at"),
          lost=_consumed),
    _Kind("claims", "environment claims", "execution_environments",
          ("operation_claim_id", "operation_kind", "operation_claimed_at", "cleanup_claim_id",
           "cleanup_claimed_at"), lost=_any_set_and_written),
    _Kind("lifecycle", "environment lifecycle changes", "execution_environments",
          ("lifecycle_state", "retirement_requested_at", "retirement_started_at", "cleanup_pending_at", "retired_at",
           "stopped_at", "failed_at", "idle_stop_at")),
    _Kind("profile_activations", "profile activations", "projects", ("active_execution_profile_revision_id",)),
    _Kind("approval_events", "approval events", "approval_request_events", (), lost=_new),
    _Kind("environment_events", "environment events", "execution_environment_events", (), lost=_new),
    _Kind("profile_events", "profile audit events", "execution_profile_audit_events", (), lost=_new),
)

REARM_WORDS = "consumed, invalidated, expired or deleted"
# How far along its end an environment is; one archon moved further since comes back in an earlier state
_ENDING = {"stopped": 1, "retiring": 2, "cleanup_pending": 3, "retired": 4}
REVIVED_WORDS = "stopped, retired or cleaned up"


@dataclass
class Lost:
    name: str
    label: str
    count: int = 0
    first: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.first}


def ids_text(ids: list[str], count: int) -> str:
    """Ids on one line each way they are shown: a newline in an id would forge a line of the report."""
    more = count - len(ids)
    return ", ".join(one_line(i) for i in ids) + (f", and {more} more" if more > 0 else "")


@dataclass
class LossReport:
    """What restoring the snapshot would undo; `unreadable` says why it could not be told."""

    kinds: list[Lost] = field(default_factory=list)
    tables: list[TableDiff] = field(default_factory=list)  # only the tables that differ
    rearmed: list[str] = field(default_factory=list)  # approved (or pending) in the snapshot, not now
    rearmed_count: int = 0
    rearm_unknown: str | None = None  # approval_requests could not be compared: why
    revived: list[str] = field(default_factory=list)  # environments archon ended further since
    revived_count: int = 0
    unreadable: str | None = None

    @property
    def nothing_lost(self) -> bool:
        return (self.unreadable is None and not any(kind.count for kind in self.kinds)
                and not self.tables and not self.rearmed_count)

    @property
    def consumed(self) -> Lost | None:
        return next((kind for kind in self.kinds if kind.name == "consumed_approvals"), None)

    @property
    def refuses(self) -> bool:
        """Restoring would undo a consumption or re-arm a request: refused without --rearm-consumed."""
        consumed = self.consumed
        return bool(self.rearmed_count or self.rearm_unknown or (consumed is not None and consumed.count))

    @property
    def unfinished(self) -> str | None:
        """Why the report is not the whole answer (the file, or a table, could not be compared): a
        restore that cannot tell what it loses is refused without --loss-unknown, whatever the reason."""
        if self.unreadable is not None:
            return self.unreadable
        tables = [table.table for table in self.tables if table.unreadable]
        if tables:
            return "the rows of " + ", ".join(one_line(t, 80) for t in tables[:FIRST]) + " cannot be compared"
        return None

    def lines(self, *, done: bool = False) -> list[str]:
        """The report in words; `done`: said after the restore, in the past tense."""
        if self.unreadable is not None:
            return [f"What {'was' if done else 'would be'} lost cannot be told: {one_line(self.unreadable)}."]
        if self.nothing_lost:
            return [f"Nothing written since the snapshot {'was' if done else 'is'} lost."]
        head = "The restore discarded" if done else "Restoring loses"
        lines = [f"{head} what was written since the snapshot (an upgrade's own writes included):"]
        for kind in self.kinds:
            if kind.count:
                lines.append(f"  {kind.count} {kind.label}: {ids_text(kind.first, kind.count)}")
        if self.rearmed_count:
            lines.append(f"  {self.rearmed_count} request(s) approved (or pending) in the snapshot that archon "
                         f"{REARM_WORDS} since {'are' if done else 'become'} executable again: "
                         + rearmed_text(self))
        if self.revived_count:
            lines.append(f"  {self.revived_count} environment(s) {revived_text(self)}")
        if self.tables:
            lines.append("  Every table that differs (added and changed rows are lost, deleted ones come back):")
            lines.extend(f"    {table.line()}" for table in self.tables)
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "nothing_lost": self.nothing_lost,
            "unreadable": self.unreadable,
            "lost": {kind.name: kind.to_json() for kind in self.kinds},
            "tables": {table.table: table.to_json() for table in self.tables},
            "rearmed": {"count": self.rearmed_count, "first": self.rearmed},
            "rearm_unknown": self.rearm_unknown,
            "revived": {"count": self.revived_count, "first": self.revived},
        }


def rearmed_text(report: LossReport) -> str:
    return ids_text(report.rearmed, report.rearmed_count)


def revived_text(report: LossReport) -> str:
    return (f"archon {REVIVED_WORDS} since the snapshot come back in an earlier lifecycle state (archon may "
            f"lease or clean up again what is gone): {ids_text(report.revived, report.revived_count)}")


def _revives(current: dict[str, Any] | None, before: dict[str, Any] | None) -> bool:
    """Archon moved the environment further toward its end since (stopped, retiring, cleaned up,
    retired): the restore brings it back in the earlier state."""
    if current is None or before is None:
        return False
    return _ENDING.get(current.get("lifecycle_state"), 0) > _ENDING.get(before.get("lifecycle_state"), 0)


def _armed(row: dict[str, Any] | None) -> bool:
    """Executable by archon: approved and not consumed."""
    return row is not None and row.get("status") == "approved" and row.get("consumed_at") is None


def _rearms(current: dict[str, Any] | None, before: dict[str, Any] | None) -> bool:
    """The restore makes the request executable (or, pending, decidable) again though archon has
    since consumed, invalidated, let expire or deleted it."""
    if before is None:
        return False
    if _armed(before):
        return not _armed(current)
    # pending comes back decidable (approvable, then executable) though archon withdrew or ran it
    return before.get("status") == "pending" and (current is None or current.get("consumed_at") is not None
                                                  or current.get("status") in ("consumed", "invalidated", "expired"))


def _summarise(report: LossReport, table: str) -> Callable[[str, dict | None, dict | None], None] | None:
    """The callback that reads the named kinds (and re-armed requests) off the table's differing rows."""
    kinds = [(kind, lost) for kind, lost in zip(KINDS, report.kinds) if kind.table == table]
    if not kinds:
        return None

    def pick(row: dict | None, columns: tuple[str, ...]) -> tuple | None:
        return None if row is None else tuple(row.get(c) for c in columns)

    def on_row(key: str, current: dict | None, before: dict | None) -> None:
        for kind, lost in kinds:
            if kind.lost(pick(current, kind.columns), pick(before, kind.columns)):
                lost.count += 1
                if len(lost.first) < FIRST:
                    lost.first.append(key)
        if table == "approval_requests" and _rearms(current, before):
            report.rearmed_count += 1
            if len(report.rearmed) < FIRST_REARMED:
                report.rearmed.append(key)
        if table == "execution_environments" and _revives(current, before):
            report.revived_count += 1
            if len(report.revived) < FIRST_REARMED:
                report.revived.append(key)

    return on_row


def _compare(now: sqlite3.Connection, then: sqlite3.Connection, report: LossReport) -> None:
    report.kinds = [Lost(kind.name, kind.label) for kind in KINDS]
    tables_now, tables_then = table_names(now), table_names(then)
    for table in sorted(tables_now | tables_then):
        try:
            diff = diff_table(now, then, table, table in tables_now, table in tables_then,
                              _summarise(report, table))
        except sqlite3.DatabaseError as exc:  # said, table by table: the other tables are still compared
            if isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
                raise
            diff = TableDiff(table, unreadable=str(exc))
            if table == "approval_requests":
                report.rearm_unknown = str(exc)
        if diff.differs:
            report.tables.append(diff)


def loss_since(db_path: Path, snapshot: Path) -> LossReport:
    """Compare the database with the snapshot. A file or statement that fails is said in the report
    (`unreadable`, which the restore refuses without --loss-unknown: a restore is how a broken
    database is mended, but never blindly); an operator's stop (Ctrl-C, SIGTERM: console/signals.py)
    is raised as that stop, never taken for an unreadable file."""
    report = LossReport()
    if not db_path.exists():
        return report
    connections: list[sqlite3.Connection] = []
    try:
        connections.append(sqlite_connection(untouched_read_uri(db_path), uri=True))
        connections.append(sqlite_connection(untouched_read_uri(snapshot), uri=True))
        now, then = connections
        now.execute("BEGIN")  # one consistent view of each file
        then.execute("BEGIN")
        _compare(now, then, report)
    except sqlite3.Error as exc:
        stop = as_stop(exc)
        if stop is not None:
            raise stop from None
        over = next((why for why in (explain(exc, conn) for conn in connections) if why is not None), None)
        return _unfinished(over.reason.rstrip(".") + " (" + over.hint[:1].lower() + over.hint[1:].rstrip(".") + ")" if over and over.hint
                           else f"{db_path} or the snapshot cannot be read ({exc}){_hot(db_path)}")
    except OSError as exc:
        return _unfinished(f"{db_path} cannot be read ({exc})")
    except DatabaseUnusable as exc:  # a value or statement over the limits (console/db/limits.py)
        return _unfinished(exc.reason.rstrip("."))
    finally:
        for conn in connections:
            conn.close()
    return report


def _unfinished(why: str) -> LossReport:
    """A report that could not be finished: neither what is lost nor whether a request is re-armed is known."""
    return LossReport(unreadable=why, rearm_unknown=why)


def _hot(db_path: Path) -> str:
    """A crash mid-transaction left a rollback journal only a writer can play back: --plan writes
    nothing; the restore itself rolls it back (under its lock check) before it compares."""
    if nonempty_file(Path(f"{db_path}-journal")):
        return (": a transaction left unfinished by a crash (its -journal) must be rolled back first, which "
                "`restore --plan` does not do (it writes nothing); `restore` without --plan does it")
    return ""


__all__ = ["KINDS", "LossReport", "Lost", "REARM_WORDS", "REVIVED_WORDS", "ids_text", "loss_since", "rearmed_text", "revived_text"]
