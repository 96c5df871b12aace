"""The upgrade's decision, made twice: read-only for the plan, then under the writer lock before each step.

Every fail-closed check (not archon, newer than this console, a ledger past the target or
contradicting the schema, a shape matching no release) and the preflight of the pending steps are
here, so the plan and the run cannot decide differently.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from console.db import exclusive_lock, ledger
from console.db.connect import ARCHON_CORE_TABLES
from console.db.detect import Shape, detect_shape, table_names
from console.db.limits import stopping, upgrade_checks
from console.db.migrations.base import Migration
from console.db.migrations.registry import CURRENT_RELEASE, RELEASES, migrations_through
from console.errors import DatabaseUnusable, UsageError
from console.services.upgrade.model import TARGETS

@dataclass(frozen=True)
class Decision:
    shape: Shape
    applied: tuple[str, ...]
    target: str
    pending: tuple[Migration, ...]
    force_reasons: tuple[str, ...]


def resolve_target(target: str) -> str:
    if target == "current":
        return CURRENT_RELEASE
    if target not in RELEASES:
        raise UsageError(f"Unknown release {target!r}; choose one of {', '.join(TARGETS)}.")
    return target


def require_archon(conn: sqlite3.Connection, path: Path) -> None:
    names = table_names(conn)
    missing = [t for t in ARCHON_CORE_TABLES if t not in names]
    if missing:
        raise DatabaseUnusable(
            f"{path} is a SQLite database but not an archon one (no {', '.join(missing)} table)."
        )


def complete_release(applied: tuple[str, ...]) -> str | None:
    done = set(applied)
    complete = None
    for release in RELEASES:
        if all(m.id in done for m in migrations_through(release)):
            complete = release
    return complete


def decide(conn: sqlite3.Connection, path: Path, target: str) -> Decision:
    """Every fail-closed check, in order (the module docstring lists them); raises `DatabaseUnusable`."""
    require_archon(conn, path)
    entries = ledger.read_entries(conn)
    applied = ledger.verify(entries)
    shape = detect_shape(conn)
    if shape.newer:
        raise DatabaseUnusable(
            f"{path} is newer than this console ({shape.reason}). Nothing was changed.",
            "Use a newer archon-console.",
        )
    wanted = migrations_through(target)
    rank = RELEASES.index
    if len(applied) > len(wanted):
        raise DatabaseUnusable(
            f"The database's ledger already goes past {target} (step {applied[len(wanted)]}); "
            "the console never downgrades. Nothing was changed.",
            "An archon older than the schema cannot start on it; restore a snapshot instead.",
        )
    started_for = _unfinished_target(entries, target)
    if started_for is not None:
        raise DatabaseUnusable(
            f"An upgrade to {started_for} was started on this database and did not finish: its steps were "
            f"written for archon {started_for}'s start (the backfills of the releases in between were left "
            f"to it; docs/decisions.md, D22), so the file cannot be finished as {target}. Nothing was changed.",
            f"Continue it with `archon-console upgrade --to {started_for}`, or restore the snapshot it took.",
        )
    if not applied:
        if shape.release is None:
            raise DatabaseUnusable(
                f"{path} matches no known archon release ({shape.reason}); it is not upgraded. Nothing was changed.",
                "Run `archon-console doctor` to see which markers are missing.",
            )
    else:
        complete = complete_release(applied)
        if complete is not None:
            missing = [k for k, v in shape.markers.get(complete, {}).items() if not v]
            if missing:
                raise DatabaseUnusable(
                    f"The ledger says {complete} was applied but the schema lacks {', '.join(missing)}: "
                    "ledger and schema contradict each other. Nothing was changed.",
                )
    if shape.release is not None and rank(shape.release) > rank(target):
        raise DatabaseUnusable(
            f"The database already has the {shape.release} shape, newer than the requested {target}; "
            "the console never downgrades. Nothing was changed.",
        )
    pending = wanted[len(applied):]
    reasons: list[str] = []
    if pending and not applied:
        reasons.append(
            f"the database has no upgrade ledger yet (as archon leaves it); adopting it replays all "
            f"{len(pending)} steps from {pending[0].id} and records them"
        )
    for migration in pending:
        if migration.safety == "historical-destructive":
            reasons.append(f"step {migration.id} is historical-destructive ({migration.description})")
    return Decision(shape, applied, target, pending, tuple(reasons))


def _unfinished_target(entries, target: str) -> str | None:
    """The release an applied step was recorded for, when it is later than `target`: that run chose
    which releases are stops (console/db/migrations/stops.py), and a shorter one cannot undo it."""
    aimed = [e.target_release for e in entries if e.target_release in RELEASES]
    later = [r for r in aimed if RELEASES.index(r) > RELEASES.index(target)]
    return max(later, key=RELEASES.index) if later else None


def preflight(conn: sqlite3.Connection, pending: tuple[Migration, ...]) -> None:
    """Refuse (exit 3, nothing written) when a pending step would fail part-way (preflight.py).

    Nothing pending: nothing to rehearse, and the preflight's modules (its schema replay, the
    rehearsal) are not even imported, so a plan of an up-to-date file reads only its schema and ledger."""
    if not pending:
        return
    from console.db.migrations.preflight import find_blockers, refusal_text

    with upgrade_checks() as budget:  # read-only, before any write: a budget refuses, never stops part-way
        try:
            blockers = find_blockers(conn, pending)
        except sqlite3.Error:
            if budget.expired and not stopping():
                raise budget.refusal() from None
            raise
    if blockers and stopping():
        # The operator's stop ended a rehearsal statement: that is no finding about the file.
        from console.signals import as_stop

        raise as_stop(sqlite3.OperationalError("interrupted")) or KeyboardInterrupt()
    if budget.expired:  # with blockers or without: a check that did not finish proved nothing
        raise budget.refusal()  # "fails on this database's schema (interrupted)" would blame the file
    if blockers:
        raise DatabaseUnusable(*refusal_text(blockers))


def in_use_refusal(path: Path, holders: list[str], *, waited: float | None = None,
                   applied: tuple[str, ...] | list[str] = (), undo: str | None = None) -> DatabaseUnusable:
    """The one sentence for a file other processes hold (console/db/exclusive_lock.py `holders`).

    `applied`: the steps this run already committed before the holder appeared (the run re-checks
    under every step's lock, console/services/upgrade/run.py); they stay, and the sentence says so,
    with `undo` (how to put this run's snapshot back) for an operator who would rather go back.
    """
    who = "; ".join(holders)
    after = f" after waiting {waited:g} s" if waited is not None else ""
    reason = (f"{path} is in use by another process{after} ({who}): stop archon first, a running archon keeps "
              "executing its own release's code against the changed schema.")
    if not applied:
        return DatabaseUnusable(
            f"{reason} Nothing was written.",
            "Stop archon and everything else that uses the file, then run the upgrade again, or pass --wait "
            "to wait up to --busy-timeout for them to stop.",
        )
    steps = applied[0] if len(applied) == 1 else f"{applied[0]} to {applied[-1]}"
    return DatabaseUnusable(
        f"{reason} The upgrade stopped before its next step; nothing of that step was written. "
        f"Earlier steps stay applied ({len(applied)} in this run: {steps}), recorded in the upgrade ledger.",
        "Stop archon and everything else that uses the file; run the upgrade again once archon is stopped "
        "(it continues from its ledger)." + (f" {undo}" if undo else ""),
    )


def others_using(path: Path, ignore: tuple[int, ...] = ()) -> list[str]:
    """Who else holds a SQLite lock on the file, described for the operator; `ignore`: the TUI's pid."""
    return [h.describe() for h in exclusive_lock.holders(path, ignore=ignore)]


def estimate(conn: sqlite3.Connection, migration: Migration) -> int | None:
    try:
        return int(migration.estimate(conn))
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "no such" in str(exc):
            return None
        raise
    except Exception:
        return None


def policy_changes(conn: sqlite3.Connection, pending: tuple[Migration, ...]) -> list[str]:
    """Projects whose effective policy step 022 changes (its workload repairs), if it can tell now."""
    if not any(m.id.startswith("022-") for m in pending):
        return []
    from console.db.migrations.backfills import workload_repairs

    try:
        return [
            f"{r['project_id']}: {r['repair_key']}" for r in workload_repairs(conn, 3)
        ]
    except Exception:
        return []



__all__ = ["Decision", "decide", "estimate", "in_use_refusal", "others_using", "policy_changes", "preflight",
           "require_archon", "resolve_target"]
