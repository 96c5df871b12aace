"""`run_upgrade`: snapshot, then each pending step in its own locked transaction.

Why the lock is held the way it is
----------------------------------
akm holds one writer lock across "decide, snapshot, first migration". Two SQLite facts shape how
the console does the same:

* a table rebuild needs `PRAGMA foreign_keys = OFF`, which is a no-op inside a transaction, so it
  must be set *before* `BEGIN IMMEDIATE`;
* each migration commits with its ledger rows in its own transaction (akm's rule), and a COMMIT
  releases the lock.

So every step runs as: set `foreign_keys` for this step (OFF for a rebuild), `BEGIN IMMEDIATE`,
re-read and re-verify the ledger *under the lock*, ask the kernel again whether another process
holds the file (archon may have started since the last step: the run stops, exit 3, and the
steps it committed stay applied), then the step, `foreign_key_check`, its ledger
rows, COMMIT. The snapshot is taken inside the *first* step's transaction, after the decision was
re-made under the lock and before the step's first write; the second connection that copies the
file therefore sees exactly the state the first step starts from, and nobody can write between
the decision, the copy and the first change. Between later steps the lock is released for a
moment; that is safe because each step re-verifies, under its own lock, that the ledger is still
the exact prefix it expects: if another upgrader applied the step meanwhile, the ledger is longer
and this process re-plans instead of applying it twice (the unique index on
`(migration_set, name)` is the backstop); if the ledger got shorter or diverged, it stops (exit 3).
Steps are idempotent against every archon shape, so a write by archon in such a gap is handled
like any database archon already moved forward. A crash at any point leaves either a committed
step with its ledger rows or nothing of it; a rerun continues from the ledger.

The crash boundaries tests kill the process at (tests/upgrade_helpers.py `run_cli_crashing_at`)
are seams of this module, not hooks in it: the snapshot (`snapshots.take_snapshot` returning), a
step's ledger rows written (`ledger.record` returning) and a step committed (`apply_migration`
returning).
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path

from console.clock import system_clock
from console.db import ledger, snapshot as snapshots
from console.db.snapshot_check import SnapshotFailed
from console.db.connect import DEFAULT_BUSY_TIMEOUT_MS, connect_raw
from console.db.limits import for_upgrade, stopping, upgrade_checks
from console.db.detect import detect_shape
from console.db.migrations.base import Migration
from console.db.migrations.runner import MigrationFailed, apply_migration
from console.db.migrations.stops import upgrading_to
from console.db.tx import lock_budget
from console.db.snapshot import Snapshot
from console.db.snapshot_reuse import reusable_snapshot
from console.errors import DatabaseUnusable, Refusal
from console.services import profile_gate
from console.services.profile_gate import ProfileEvidenceContradicted
from console.db import exclusive_lock
from console.services.upgrade.decide import Decision, decide, in_use_refusal, others_using, preflight
from console.services.upgrade.model import (
    ForceRequired,
    ProgressCallback,
    UpgradePlan,
    UpgradeProgress,
    UpgradeResult,
    undo_command,
)
from console.services.upgrade.plan import plan_upgrade


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _busy_refusal() -> Refusal:
    return Refusal(
        "The database is busy: another process holds archon's write lock. Nothing further was written.",
        "Stop archon before upgrading, then run the upgrade again (it continues from its ledger).",
    )


class UpgradeRun:
    """One run's state across its steps: the snapshot (taken or kept) and what was applied.

    `locked` and `record` are the callbacks `apply_migration` calls inside each step's transaction
    (console/db/migrations/runner.py); `expected` is the ledger prefix the current step must find.
    """

    def __init__(self, path: Path, plan: UpgradePlan, *, force: bool, at: datetime,
                 snapshot_dir: Path | None, emit: ProgressCallback, full_check: bool = False,
                 others_ignored: tuple[int, ...] = ()) -> None:
        self.path, self.plan, self.force, self.at = path, plan, force, at
        self.others_ignored = others_ignored
        self.full_check = full_check
        self.snapshot_dir, self.emit = snapshot_dir, emit
        self.target = plan.target
        self.snapshot: Snapshot | None = None
        self.reused = False
        self.applied: list[str] = []
        self.skipped: list[str] = []
        self.expected: tuple[str, ...] = ()
        self.warnings: list[str] = []

    # --- inside a step's transaction, under the writer lock ---------------------------------

    def locked(self, conn: sqlite3.Connection, migration: Migration) -> bool:
        """Re-decide under the lock; before the first write, take (or keep) the snapshot.

        False: another upgrader moved the ledger on, so this step is re-planned, not applied.
        """
        under = decide(conn, self.path, self.target)
        if under.applied != self.expected:
            if len(under.applied) < len(self.expected):
                raise DatabaseUnusable(
                    "The upgrade ledger changed under the writer lock (it lost steps); "
                    "nothing further was changed."
                )
            return False
        # Archon may have started since the last step: under every step's lock, before its first
        # write (one read of /proc/locks; this process and `others_ignored` never count).
        holders = others_using(self.path, self.others_ignored)
        if holders:
            raise in_use_refusal(self.path, holders, applied=self.applied, undo=self._restore_hint())
        if self.snapshot is None:
            self._guard_and_snapshot(conn, under)
        return True

    def _guard_and_snapshot(self, conn: sqlite3.Connection, under: Decision) -> None:
        preflight(conn, under.pending)  # again under the lock, before the snapshot
        with upgrade_checks() as budget:  # read-only, before the first write (console/db/limits.py)
            try:
                gate = profile_gate.check(conn, under.pending)  # the evidence, again under the lock
            except sqlite3.Error:
                if budget.expired and not stopping():
                    raise budget.refusal() from None
                raise
        if gate is not None and gate.contradicted:
            raise ProfileEvidenceContradicted(gate, self.plan)
        if (under.force_reasons or (gate is not None and gate.force_reason)) and not self.force:
            raise ForceRequired(self.plan)
        target_path = snapshots.snapshot_target(self.path.resolve(), self.at, self.snapshot_dir)
        kept = reusable_snapshot(conn, self.target, target_path.parent, self.path.resolve().name)
        if kept is not None:  # an interrupted run's snapshot, still intact and current
            self.snapshot, self.reused = kept, True
            return
        self.snapshot = snapshots.take_snapshot(
            self.path.resolve(),
            target_path,
            progress=lambda done, pages: self.emit(
                UpgradeProgress("snapshot", done, pages, "copying pages to the snapshot")
            ),
            full_check=self.full_check,
        )

    def record(self, conn: sqlite3.Connection, migration: Migration) -> None:
        snap = self.snapshot
        ledger.record(
            conn,
            migration,
            position=len(self.expected) + 1,
            target_release=self.target,
            now=self.at,
            snapshot_path=str(snap.path) if snap else None,
            snapshot_sha256=snap.sha256 if snap else None,
        )

    # --- between steps ----------------------------------------------------------------------

    def _decide_now(self, conn: sqlite3.Connection) -> Decision:
        try:
            # One read transaction: the ledger's two tables are read by separate statements, and
            # another upgrader may commit a step between them.
            conn.execute("BEGIN")
            try:
                decision = decide(conn, self.path, self.target)
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as exc:
            raise DatabaseUnusable(f"{self.path} cannot be read ({exc}). Nothing further was changed.") from None
        if len(decision.applied) < len(self.plan.applied):
            raise DatabaseUnusable(
                "The upgrade ledger got shorter after the plan was made (was a snapshot restored?). "
                "Nothing further was changed."
            )
        return decision

    def _restore_hint(self) -> str | None:
        if self.snapshot is None:
            return None
        return (f"The snapshot taken before this run is {self.snapshot.path}; "
                f"`{undo_command(self.path, self.snapshot.path)}` puts it back.")

    def _apply(self, conn: sqlite3.Connection, step: Migration) -> bool:
        try:
            return apply_migration(conn, step, record=self.record, locked=self.locked)
        except MigrationFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, sqlite3.Error) and _busy(cause):
                raise _busy_refusal() from None
            raise Refusal(f"{exc}. Earlier steps stay applied and recorded.", self._restore_hint()) from None
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise _busy_refusal() from None
            raise Refusal(f"The upgrade stopped: {exc}.", self._restore_hint()) from None

    def run(self, conn: sqlite3.Connection) -> str | None:
        """Apply every pending step; returns the release the database has afterwards."""
        total = len(self.plan.pending)
        while True:
            decision = self._decide_now(conn)
            if not decision.pending:
                break
            step = decision.pending[0]
            self.expected = decision.applied
            if self._apply(conn, step):
                self.applied.append(step.id)
                self.emit(UpgradeProgress("migration", len(self.applied), total, f"{step.id}: {step.description}"))
            else:
                self.skipped.append(step.id)
        self._holders_after_the_last_step()
        return detect_shape(conn).release

    def _holders_after_the_last_step(self) -> None:
        """Each step asks for other holders under its lock before its first write, so a holder that
        appears while the last step runs is found by no step. Asked once more after it committed:
        nothing is left to stop (every step is applied and recorded), so it is a warning in the
        result, not a refusal; the operator learns that something had the file open while its
        schema changed (docs/decisions.md D23)."""
        if not self.applied:
            return
        holders = others_using(self.path, self.others_ignored)
        if holders:
            self.warnings.append(
                f"another process opened the file during the upgrade: {'; '.join(holders)}. If it is archon, "
                "restart it: a running archon keeps executing its own release's code against the changed schema."
            )

    def result(self, release_after: str | None) -> UpgradeResult:
        snap = self.snapshot
        return UpgradeResult(
            status="upgraded" if self.applied else "up-to-date",
            plan=self.plan,
            applied=self.applied,
            skipped=[s for s in self.skipped if s not in self.applied],
            snapshot_path=str(snap.path) if snap else None,
            snapshot_sha256=snap.sha256 if snap else None,
            release_after=release_after,
            snapshot_reused=self.reused,
            warnings=list(self.warnings),
        )


def run_upgrade(
    path: str | os.PathLike[str],
    *,
    target: str = "current",
    force: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    now: datetime | None = None,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    full_check: bool = False,
    wait: bool = False,
    others_ignored: tuple[int, ...] = (),
) -> UpgradeResult:
    """Plan, then (if allowed) snapshot and apply each pending step in its own locked transaction.

    Refused (exit 3, nothing written) while another process holds a SQLite lock on the file:
    archon keeps running its own release's code against the changed schema. Asked of the locks
    (console/db/exclusive_lock.py `holders`) before the first connection and again under the writer
    lock of every step, before its first write (a holder that appears mid-run stops the run there,
    exit 3; the steps already committed stay applied and recorded); with `wait`, the first check asks again until they are gone or
    `busy_timeout_ms` has passed. `others_ignored`: pids that are this console (the TUI that started
    this run in a child process holds its own connection).

    The snapshot is proven to be the database's image, read once; `full_check` adds
    `integrity_check` (console/db/snapshot.py says why no check of SQLite's is the default).

    Every connection of the run is an upgrade's (console/db/limits.py `for_upgrade`): no console
    limit on value size or statement time can stop a step part-way; the operator's stop still can.
    """
    path = Path(path).expanduser()
    at = now or system_clock()
    snap_dir = Path(snapshot_dir).expanduser() if snapshot_dir else None
    if snap_dir is not None and not snap_dir.is_dir():
        raise Refusal(f"The snapshot directory {snap_dir} does not exist. Nothing was written.")
    # One budget for every wait of the run (for the holders to go, each step's lock): the command's.
    with for_upgrade(), lock_budget(max(busy_timeout_ms, 0) / 1000) as budget:
        return _run_upgrade(path, at, target=target, force=force, snap_dir=snap_dir, progress=progress,
                            busy_timeout_ms=budget.remaining_ms, full_check=full_check, wait=wait,
                            others_ignored=tuple(others_ignored))


def _run_upgrade(path: Path, at: datetime, *, target: str, force: bool, snap_dir: Path | None,
                 progress: ProgressCallback | None, busy_timeout_ms: int, full_check: bool, wait: bool,
                 others_ignored: tuple[int, ...]) -> UpgradeResult:
    plan = plan_upgrade(path, target, snapshot_dir=snap_dir, now=at, others_ignored=others_ignored,
                        _allow_recovery=True)
    if plan.up_to_date:
        return UpgradeResult("up-to-date", plan, [], [])
    if plan.in_use_by:
        if not wait:
            raise in_use_refusal(path, plan.in_use_by)
        seconds = max(busy_timeout_ms, 0) / 1000
        (progress or (lambda event: None))(UpgradeProgress(
            "wait", 0, 1, f"waiting up to {seconds:g} s for {'; '.join(plan.in_use_by)} to let go of the file"))
        with lock_budget(seconds) as budget, budget.waiting():
            still = exclusive_lock.wait_until_free(path, seconds, ignore=others_ignored)
        if still:
            raise in_use_refusal(path, [h.describe() for h in still], waited=seconds)
        plan = plan_upgrade(path, target, snapshot_dir=snap_dir, now=at, others_ignored=others_ignored,
                            _allow_recovery=True)  # what the holder left is what the run starts from
        if plan.up_to_date:
            return UpgradeResult("up-to-date", plan, [], [])
        if plan.in_use_by:
            raise in_use_refusal(path, plan.in_use_by)
    if plan.profile_evidence is not None and plan.profile_evidence.contradicted:
        raise ProfileEvidenceContradicted(plan.profile_evidence, plan)  # before --force is weighed
    if plan.force_required and not force:
        raise ForceRequired(plan)
    if not plan.enough_space:
        raise SnapshotFailed(
            f"Not enough free space for the snapshot: it needs about "
            f"{plan.snapshot_bytes + snapshots.SPACE_MARGIN_BYTES:,} bytes, {plan.free_bytes:,} are free "
            f"in {Path(plan.snapshot_path).parent}. Nothing was written.",
            "Free some space or pass --snapshot-dir DIR on a larger disk.",
        )
    emit = progress or (lambda event: None)
    upgrade = UpgradeRun(path, plan, force=force, at=at, snapshot_dir=snap_dir, emit=emit, full_check=full_check,
                         others_ignored=others_ignored)
    with lock_budget(busy_timeout_ms / 1000) as budget:  # what the wait for the holders left
        conn = connect_raw(path, busy_timeout_ms=budget.remaining_ms)  # a busy step stops the run: one wait
    try:
        with upgrading_to(upgrade.target):  # which releases' backfills run (stops.py)
            release_after = upgrade.run(conn)
    finally:
        conn.close()
    emit(UpgradeProgress("done", len(upgrade.applied), len(plan.pending), "upgrade finished"))
    return upgrade.result(release_after)


__all__ = ["UpgradeRun", "run_upgrade"]
