"""What a restore would lose: everything written to the database since its snapshot was taken.

A restore puts back the snapshot's bytes; every decision, consumption, claim, lifecycle change,
profile activation and event written since is gone, and an approval archon's executor already
consumed becomes `approved` (executable) again. So before anything is replaced both files are read
(read-only SQLite connections, console/db/connect.py `untouched_read_uri`; never their files
directly) and compared row by row, by primary key and the columns that carry each kind of change.

Memory stays bounded whatever the tables hold: each side is one ordered cursor, merged as it is read
(`_merge`); only counts and the first `FIRST` ids of each kind are kept. Keys are compared by the
hex of their bytes, the order SQLite's `ORDER BY` gives them and Python's, for text and numbers alike.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from console.db.connect import sqlite_connection, untouched_read_uri
from console.db.sql import quote_identifier
from console.errors import DatabaseUnusable

FIRST = 5  # ids shown per kind of loss
FIRST_REARMED = 20  # request ids named in the refusal

_Predicate = Callable[[tuple, "tuple | None"], bool]


def _written(current: tuple, before: tuple | None) -> bool:
    """The row is new since the snapshot, or these columns changed."""
    return before is None or current != before


def _any_set_and_written(current: tuple, before: tuple | None) -> bool:
    """A claim taken, changed or released since: new rows count only when they hold one."""
    if before is None:
        return any(value is not None for value in current)
    return current != before


def _decided(current: tuple, before: tuple | None) -> bool:
    """A request decided (approved, denied, cancelled, expired, invalidated) since; its consumption
    is its own kind, so `consumed` counts here as the approval it was."""
    def decision(row: tuple) -> tuple:
        return ("approved" if row[0] == "consumed" else row[0], *row[1:])
    return before is None or decision(current) != decision(before)


def _new(current: tuple, before: tuple | None) -> bool:
    return before is None  # events are append-only: a new id is a new event


@dataclass(frozen=True)
class _Kind:
    name: str
    label: str  # "N <label>"
    table: str
    columns: tuple[str, ...]  # compared; those the table lacks are left out
    where: tuple[tuple[str, str], ...] = ()  # (column, condition): the current rows that can carry it
    lost: _Predicate = _written

    def condition(self, present: list[str]) -> str | None:
        """The WHERE clause over the columns the current file has; None: no row can carry it."""
        if not self.where:
            return "1"
        usable = [sql for column, sql in self.where if column in present]
        return " OR ".join(usable) if usable else None


KINDS = (
    _Kind("decisions", "approval decisions", "approval_requests", ("status", "decision_at"),
          (("status", "status <> 'pending'"),), lost=_decided),
    _Kind("consumed_approvals", "consumed approvals", "approval_requests", ("status", "consumed_at"),
          (("consumed_at", "consumed_at IS NOT NULL"), ("status", "status = 'consumed'"))),
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


@dataclass
class Lost:
    name: str
    label: str
    count: int = 0
    first: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.first}


@dataclass
class LossReport:
    """What restoring the snapshot would undo; `unreadable` says why it could not be told."""

    kinds: list[Lost] = field(default_factory=list)
    rearmed: list[str] = field(default_factory=list)  # consumed here, approved or pending in the snapshot
    rearmed_count: int = 0
    unreadable: str | None = None

    @property
    def nothing_lost(self) -> bool:
        return self.unreadable is None and not any(kind.count for kind in self.kinds)

    @property
    def consumed(self) -> Lost | None:
        return next((kind for kind in self.kinds if kind.name == "consumed_approvals"), None)

    def lines(self, *, done: bool = False) -> list[str]:
        """The report in words; `done`: said after the restore, in the past tense."""
        if self.unreadable is not None:
            return [f"What {'was' if done else 'would be'} lost cannot be told: {self.unreadable}."]
        if self.nothing_lost:
            return [f"Nothing written since the snapshot {'was' if done else 'is'} lost."]
        head = "The restore discarded" if done else "Restoring loses"
        lines = [f"{head} what was written since the snapshot (an upgrade's own writes included):"]
        for kind in self.kinds:
            if kind.count:
                more = f", and {kind.count - len(kind.first)} more" if kind.count > len(kind.first) else ""
                lines.append(f"  {kind.count} {kind.label}: {', '.join(kind.first)}{more}")
        if self.rearmed_count:
            lines.append(f"  {self.rearmed_count} request(s) archon already consumed "
                         f"{'are' if done else 'become'} executable again: "
                         + rearmed_text(self))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "nothing_lost": self.nothing_lost,
            "unreadable": self.unreadable,
            "lost": {kind.name: kind.to_json() for kind in self.kinds},
            "rearmed": {"count": self.rearmed_count, "first": self.rearmed},
        }


def rearmed_text(report: LossReport) -> str:
    more = report.rearmed_count - len(report.rearmed)
    return ", ".join(report.rearmed) + (f" and {more} more" if more > 0 else "")


def _columns(conn: sqlite3.Connection, table: str) -> list[str] | None:
    """The table's columns, or None when it has none (absent)."""
    names = [str(row[1]) for row in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")]
    return names or None


def _key(conn: sqlite3.Connection, table: str) -> str:
    """The single-column primary key, else the rowid (archon's event tables may have no declared key)."""
    keys = [row for row in conn.execute(f"PRAGMA table_info({quote_identifier(table)})") if row[5]]
    return quote_identifier(str(keys[0][1])) if len(keys) == 1 else "rowid"


def _rows(conn: sqlite3.Connection, kind: _Kind, columns: tuple[str, ...], present: list[str] | None,
          where: str) -> Iterator[tuple[str, Any, tuple]]:
    """(hex of the key's bytes, key, compared columns) of the table's rows, in key order."""
    if present is None:
        return iter(())
    key = _key(conn, kind.table)
    picked = ", ".join(quote_identifier(c) if c in present else "NULL" for c in columns) or "NULL"
    return (
        (row[0], row[1], tuple(row[2:]) if columns else ())
        for row in conn.execute(
            f"SELECT hex(CAST({key} AS BLOB)) AS k, {key}, {picked} FROM {quote_identifier(kind.table)} "
            f"WHERE {where} ORDER BY k"
        )
    )


def _merge(current: Iterator, before: Iterator) -> Iterator[tuple[Any, tuple, tuple | None]]:
    """Each current row with the snapshot's row of the same key (None when it has none)."""
    other = next(before, None)
    for hexkey, key, values in current:
        while other is not None and other[0] < hexkey:
            other = next(before, None)
        yield key, values, (other[2] if other is not None and other[0] == hexkey else None)


def _compare(now: sqlite3.Connection, then: sqlite3.Connection, report: LossReport) -> None:
    for kind in KINDS:
        present_now = _columns(now, kind.table)
        lost = Lost(kind.name, kind.label)
        report.kinds.append(lost)
        where = None if present_now is None else kind.condition(present_now)
        if present_now is None or where is None:
            continue
        present_then = _columns(then, kind.table)
        columns = tuple(c for c in kind.columns if c in present_now)
        # the rearm check needs the snapshot's status beside the compared columns
        wanted = columns + (("status",) if kind.name == "consumed_approvals" else ())
        current = _rows(now, kind, columns, present_now, where)
        before = _rows(then, kind, wanted, present_then, "1")
        for key, values, old in _merge(current, before):
            compared = None if old is None else old[: len(columns)]
            if not kind.lost(values, compared):
                continue
            lost.count += 1
            if len(lost.first) < FIRST:
                lost.first.append(str(key))
            if kind.name == "consumed_approvals" and old is not None and old[-1] in ("approved", "pending"):
                report.rearmed_count += 1
                if len(report.rearmed) < FIRST_REARMED:
                    report.rearmed.append(str(key))


def loss_since(db_path: Path, snapshot: Path) -> LossReport:
    """Compare the database with the snapshot; never raises for an unreadable current file (a restore
    is how a broken database is mended), it says so instead."""
    report = LossReport()
    if not db_path.exists():
        return report
    try:
        now = sqlite_connection(untouched_read_uri(db_path), uri=True)
    except (sqlite3.Error, OSError) as exc:
        return LossReport(unreadable=f"{db_path} cannot be read ({exc})")
    try:
        then = sqlite_connection(untouched_read_uri(snapshot), uri=True)
        try:
            now.execute("BEGIN")  # one consistent view of each file
            then.execute("BEGIN")
            _compare(now, then, report)
        finally:
            then.close()
    except sqlite3.Error as exc:
        return LossReport(unreadable=f"{db_path} or the snapshot cannot be read ({exc})")
    except DatabaseUnusable as exc:  # a value or statement over the limits (console/db/limits.py)
        return LossReport(unreadable=exc.reason.rstrip("."))
    finally:
        now.close()
    return report


__all__ = ["FIRST", "KINDS", "LossReport", "Lost", "loss_since", "rearmed_text"]
