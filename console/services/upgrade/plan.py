"""`plan_upgrade`: what `upgrade` would do, read without writing or creating any file.

It reads through a connection that cannot write and creates no file beside the database: in place
whenever SQLite can read it so (a rollback-journal file with no journal beside it, a WAL file with
its `-wal` and `-shm`, or one nobody has open), else through a private copy
(`console.db.readonly.open_read_only`; a `mode=ro` reader would create a missing `-wal`/`-shm`).
The run (console/services/upgrade/run.py) re-makes every decision of the plan under archon's
writer lock before it acts, so what was planned and what happens cannot drift.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Callable

from console.clock import system_clock
from console.db import snapshot as snapshots
from console.db.files import require_output_dir
from console.db.migrations.stops import upgrading_to
from console.db.connect import (DEFAULT_BUSY_TIMEOUT_MS, check_file, check_size, connect_raw, is_wal_file,
                                untouched_read_uri)
from console.db.connection import sqlite_connection
from console.db.limits import explain, for_upgrade, stopping, upgrade_checks
from console.errors import DatabaseUnusable, Refusal
from console.services.upgrade.decide import decide, estimate, others_using, policy_changes, preflight, resolve_target
from console.services.upgrade.model import PendingStep, UpgradePlan

def _read_only_connection(path: Path, *, allow_recovery: bool) -> sqlite3.Connection:
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not allow_recovery and is_wal_file(path) and wal.exists() and not shm.exists():
        raise Refusal(
            f"{path} has a -wal file without its -shm index (archon stopped uncleanly); reading it "
            "would create the index, so the read-only plan stops here. Nothing was written.",
            "Start and stop archon once, or run `archon-console upgrade` (it recovers under the lock).",
        )
    return sqlite_connection(untouched_read_uri(path), uri=True,
                             setup=(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}", "PRAGMA query_only = ON"))


class _HotJournal(Exception):
    """A rollback journal left by an interrupted writer: reading needs a rollback (a write)."""


def _hot_journal(path: Path, exc: sqlite3.Error) -> bool:
    return "readonly" in str(exc) and Path(f"{path}-journal").exists()


def _roll_back_hot_journal(path: Path) -> None:
    """What any read-write SQLite open does first: roll the interrupted transaction back."""
    conn = connect_raw(path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()


def plan_upgrade(
    path: str | os.PathLike[str],
    target: str = "current",
    *,
    snapshot_dir: str | os.PathLike[str] | None = None,
    now: datetime | None = None,
    others_ignored: tuple[int, ...] = (),
    _allow_recovery: bool = False,
) -> UpgradePlan:
    """What `upgrade` would do. Reads only; creates and changes no file (see module docstring).

    A database whose last writer was killed mid-transaction (a hot `-journal`) cannot be read in
    place without rolling that transaction back, which is a write: the plan reads a private copy
    (rolled back there); the upgrade itself (`_allow_recovery`) lets SQLite roll the original back
    first, as archon's next start would.

    The plan works while archon has the file open, and lists who holds it (`in_use_by`: the run
    would be refused); `others_ignored` are pids that are this console (the TUI that started it).

    Read with an upgrade's connections (console/db/limits.py `for_upgrade`): the plan sees every
    value the run will carry, so a value the run can move is never refused as unreadable here.
    """
    with for_upgrade():
        return _plan_upgrade(Path(path).expanduser(), target, snapshot_dir, now, others_ignored, _allow_recovery)


def _plan_upgrade(path: Path, target: str, snapshot_dir, now, others_ignored: tuple[int, ...],
                  _allow_recovery: bool) -> UpgradePlan:
    target = resolve_target(target)
    check_file(path)
    check_size(path)
    try:
        plan = _plan(path, target, snapshot_dir, now, _allow_recovery)
    except _HotJournal:
        if not _allow_recovery:
            raise Refusal(
                f"{path} has an unfinished transaction from an interrupted writer (a hot -journal); "
                "reading it needs a rollback, so the read-only plan stops here. Nothing was written.",
                "Run `archon-console upgrade` (it lets SQLite roll it back first) or start archon once.",
            ) from None
        try:
            _roll_back_hot_journal(path)
        except sqlite3.Error as exc:
            raise DatabaseUnusable(
                f"{path} could not be recovered from an interrupted transaction ({exc})."
            ) from None
        plan = _plan(path, target, snapshot_dir, now, _allow_recovery)
    if not plan.up_to_date:
        plan.in_use_by = others_using(path, others_ignored)  # its own connection is closed by now
    return plan


def _pending_checks(conn: sqlite3.Connection, decision):
    """What only pending steps need: the preflight with its rehearsal on the schema replayed in
    memory (console/db/migrations/preflight.py), each step's row estimate, the policy changes and
    the profile evidence gate. With nothing pending none of it runs or is imported: the fail-closed
    checks of `decide` (archon's tables, the ledger against the registry and the schema, newer
    shapes) have already read all an up-to-date plan needs."""
    from console.services import profile_gate

    preflight(conn, decision.pending)
    steps = [
        PendingStep(m.id, m.release, m.safety, m.description, m.rebuild, estimate(conn, m))
        for m in decision.pending
    ]
    return steps, policy_changes(conn, decision.pending), profile_gate.check(conn, decision.pending)


def _plan(path: Path, target: str, snapshot_dir, now, allow_recovery: bool) -> UpgradePlan:
    at = now or system_clock()
    if snapshot_dir is not None and Path(snapshot_dir).expanduser().is_dir():
        # A directory another user can write lets them swap the snapshot (console/db/files.py);
        # one that does not exist is refused by the run itself.
        require_output_dir(snapshot_dir, "--snapshot-dir")
    cleanup: Callable[[], None] = lambda: None
    try:
        if allow_recovery:  # the upgrade itself: it is about to write anyway
            conn = _read_only_connection(path, allow_recovery=True)
        else:
            # `--plan`: read in place only where that creates nothing and writes neither the
            # main file nor the -wal, else through a private copy (console/db/readonly.py).
            from console.db.readonly import open_read_only

            conn, cleanup, _how = open_read_only(path)
    except sqlite3.Error as exc:
        raise DatabaseUnusable(f"Cannot open {path}: {exc}.") from None
    budget = None
    try:
        with upgrading_to(target), upgrade_checks() as budget:  # estimates depend on the stops (stops.py)
            decision = decide(conn, path, target)
            steps, policy, gate = _pending_checks(conn, decision) if decision.pending else ([], [], None)
        needed = snapshots.needed_bytes(conn)
    except sqlite3.DatabaseError as exc:
        if _hot_journal(path, exc):
            raise _HotJournal() from None
        if stopping():
            raise  # the operator's stop, reported as one (console/signals.py `as_stop`)
        if budget is not None and budget.expired:
            raise budget.refusal() from None  # a check's budget is not a sign of corruption
        better = explain(exc, conn)  # nor is a limit
        if better is not None:
            raise better from None
        raise DatabaseUnusable(
            f"{path} cannot be read as a SQLite database ({exc}). Nothing was changed.",
            "It may be corrupt; restore it from a snapshot or a backup.",
        ) from None
    finally:
        conn.close()
        cleanup()
    target_path = snapshots.snapshot_target(path, at, Path(snapshot_dir) if snapshot_dir else None)
    try:
        free = snapshots.free_bytes(target_path.parent)
    except OSError:
        free = 0
    return UpgradePlan(
        path=str(path),
        target=target,
        detected_release=decision.shape.release,
        shape_reason=decision.shape.reason,
        ledger_state="versioned" if decision.applied else "unversioned-adoption",
        applied=list(decision.applied),
        pending=steps,
        snapshot_path=str(target_path),
        snapshot_bytes=needed,
        free_bytes=free,
        force_required=bool(decision.force_reasons) or bool(gate and gate.force_reason),
        force_reasons=list(decision.force_reasons) + ([gate.force_reason] if gate and gate.force_reason else []),
        policy_changes=policy,
        profile_evidence=gate,
    )



__all__ = ["plan_upgrade"]
