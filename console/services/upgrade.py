"""The guarded schema upgrade and its undo: plan, snapshot, migrate, restore (docs/decisions.md, D8-D12).

`plan_upgrade` only reads, through a connection that cannot write and creates no file beside the
database: in place whenever SQLite can read it so (a rollback-journal file with no journal beside it, a
WAL file with its `-wal` and `-shm`, or one nobody has open), else through a private copy
(`console.db.readonly.open_read_only`; a `mode=ro` reader would create a missing `-wal`/`-shm`). `run_upgrade` re-makes every decision of the plan
under archon's writer lock before it acts, so what was planned and what happens cannot drift.

Why the lock is held the way it is
----------------------------------
akm holds one writer lock across "decide, snapshot, first migration" (docs/decisions.md, D8). Two SQLite facts
shape how the console does the same:

* a table rebuild needs `PRAGMA foreign_keys = OFF`, which is a no-op inside a transaction, so it
  must be set *before* `BEGIN IMMEDIATE`;
* each migration commits with its ledger rows in its own transaction (akm's rule), and a COMMIT
  releases the lock.

So every step runs as: set `foreign_keys` for this step (OFF for a rebuild), `BEGIN IMMEDIATE`,
re-read and re-verify the ledger *under the lock*, then the step, `foreign_key_check`, its ledger
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
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sqlite3
import stat
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from console.clock import system_clock
from console.db import exclusive_lock, ledger, snapshot as snapshots
from console.db.connect import (
    ARCHON_CORE_TABLES,
    DEFAULT_BUSY_TIMEOUT_MS,
    check_file,
    check_size,
    connect_raw,
    is_wal_file,
    untouched_read_uri,
)
from console.db.detect import Shape, detect_shape
from console.db.files import create_exclusive, temp_prefix
from console.db.paths import nonempty_file
from console.db.snapshot_manifest import manifest_path, manifests_with_hash, read_manifest
from console.db.snapshot_reuse import reusable_snapshot
from console.db.migrations.base import Migration
from console.db.migrations.preflight import find_blockers, refusal_text
from console.db.migrations.registry import CURRENT_RELEASE, MIGRATIONS, RELEASES, migrations_through
from console.db.migrations.runner import MigrationFailed, apply_migration
from console.errors import DatabaseUnusable, Refusal, UsageError
from console.services import profile_gate
from console.services.profile_gate import UNVERIFIED_LINE, ProfileEvidenceContradicted, ProfileGate

CRASH_ENV = "ARCHON_CONSOLE_TEST_CRASH_AT"
TARGETS = RELEASES + ("current",)


# --- values --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpgradeProgress:
    """One tick for a progress bar: `kind` is "snapshot" (pages), "migration" (steps) or "done"."""

    kind: str
    done: int
    total: int
    message: str = ""


ProgressCallback = Callable[[UpgradeProgress], None]


@dataclass(frozen=True)
class PendingStep:
    id: str
    release: str
    safety: str
    description: str
    rebuild: bool
    rows: int | None  # rows it will touch, as the database is now (None: cannot tell)


@dataclass
class UpgradePlan:
    path: str
    target: str
    detected_release: str | None
    shape_reason: str
    ledger_state: str  # "versioned" or "unversioned-adoption"
    applied: list[str]
    pending: list[PendingStep]
    snapshot_path: str
    snapshot_bytes: int
    free_bytes: int
    force_required: bool
    force_reasons: list[str] = field(default_factory=list)
    policy_changes: list[str] = field(default_factory=list)
    profile_evidence: ProfileGate | None = None  # rule 1's gate, when a pending step writes profiles

    @property
    def up_to_date(self) -> bool:
        return not self.pending

    @property
    def enough_space(self) -> bool:
        return self.free_bytes >= self.snapshot_bytes + snapshots.SPACE_MARGIN_BYTES

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["up_to_date"] = self.up_to_date
        data["enough_space"] = self.enough_space
        data["registry_size"] = len(MIGRATIONS)
        return data


@dataclass
class UpgradeResult:
    status: str  # "up-to-date" or "upgraded"
    plan: UpgradePlan
    applied: list[str]
    skipped: list[str]  # applied meanwhile by another upgrader
    snapshot_path: str | None = None
    snapshot_sha256: str | None = None
    release_after: str | None = None
    snapshot_reused: bool = False  # the interrupted run's snapshot was kept (console/db/snapshot_reuse.py)

    @property
    def message(self) -> str:
        if self.status == "up-to-date":
            return f"Up to date: the database is at {self.plan.target} and its ledger is complete; nothing was written."
        text = f"Applied {len(self.applied)} step(s); the database now has the {self.release_after or 'unknown'} shape."
        if self.skipped:
            text += f" {len(self.skipped)} step(s) were applied meanwhile by another upgrader."
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "applied": self.applied,
            "skipped": self.skipped,
            "snapshot_path": self.snapshot_path,
            "snapshot_sha256": self.snapshot_sha256,
            "snapshot_reused": self.snapshot_reused,
            "release_after": self.release_after,
            "plan": self.plan.to_json(),
        }


class ForceRequired(Refusal):
    """The plan needs `--force`; nothing was written. Carries the plan so it can be shown."""

    def __init__(self, plan: UpgradePlan):
        super().__init__(
            "This upgrade needs --force: " + "; ".join(plan.force_reasons) + ". Nothing was written.",
            "Read the plan above, then run `archon-console upgrade --force` (a verified snapshot is taken first).",
        )
        self.plan = plan


# --- the decision (made twice: read-only for the plan, under the lock before each step) -----


@dataclass(frozen=True)
class _Decision:
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


def _require_archon(conn: sqlite3.Connection, path: Path) -> None:
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t for t in ARCHON_CORE_TABLES if t not in names]
    if missing:
        raise DatabaseUnusable(
            f"{path} is a SQLite database but not an archon one (no {', '.join(missing)} table)."
        )


def _complete_release(applied: tuple[str, ...]) -> str | None:
    done = set(applied)
    complete = None
    for release in RELEASES:
        if all(m.id in done for m in migrations_through(release)):
            complete = release
    return complete


def _decide(conn: sqlite3.Connection, path: Path, target: str) -> _Decision:
    """Every fail-closed check (docs/decisions.md, D10), in order; raises `DatabaseUnusable`."""
    _require_archon(conn, path)
    applied = ledger.read_verified(conn)
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
    if not applied:
        if shape.release is None:
            raise DatabaseUnusable(
                f"{path} matches no known archon release ({shape.reason}); it is not upgraded. Nothing was changed.",
                "Run `archon-console doctor` to see which markers are missing.",
            )
    else:
        complete = _complete_release(applied)
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
    return _Decision(shape, applied, target, pending, tuple(reasons))


def _preflight(conn: sqlite3.Connection, pending: tuple[Migration, ...]) -> None:
    """Refuse (exit 3, nothing written) when a pending step would fail part-way (preflight.py)."""
    blockers = find_blockers(conn, pending)
    if blockers:
        raise DatabaseUnusable(*refusal_text(blockers))


def _estimate(conn: sqlite3.Connection, migration: Migration) -> int | None:
    try:
        return int(migration.estimate(conn))
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "no such" in str(exc):
            return None
        raise
    except Exception:
        return None


def _policy_changes(conn: sqlite3.Connection, pending: tuple[Migration, ...]) -> list[str]:
    """Projects whose effective policy step 022 changes (docs/archon-schema.md, execution profile activation), if it can tell now."""
    if not any(m.id.startswith("022-") for m in pending):
        return []
    from console.db.migrations.backfills import workload_repairs

    try:
        return [
            f"{r['project_id']}: {r['repair_key']}" for r in workload_repairs(conn, 3)
        ]
    except Exception:
        return []


def _read_only_connection(path: Path, *, allow_recovery: bool) -> sqlite3.Connection:
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not allow_recovery and is_wal_file(path) and wal.exists() and not shm.exists():
        raise Refusal(
            f"{path} has a -wal file without its -shm index (archon stopped uncleanly); reading it "
            "would create the index, so the read-only plan stops here. Nothing was written.",
            "Start and stop archon once, or run `archon-console upgrade` (it recovers under the lock).",
        )
    conn = sqlite3.connect(untouched_read_uri(path), uri=True, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA query_only = ON")
    return conn


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
    _allow_recovery: bool = False,
) -> UpgradePlan:
    """What `upgrade` would do. Reads only; creates and changes no file (see module docstring).

    A database whose last writer was killed mid-transaction (a hot `-journal`) cannot be read in
    place without rolling that transaction back, which is a write: the plan reads a private copy
    (rolled back there); the upgrade itself (`_allow_recovery`) lets SQLite roll the original back
    first, as archon's next start would.
    """
    path = Path(path).expanduser()
    target = resolve_target(target)
    check_file(path)
    check_size(path)
    try:
        return _plan(path, target, snapshot_dir, now, _allow_recovery)
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
        raise DatabaseUnusable(f"{path} could not be recovered from an interrupted transaction ({exc}).") from None
    return _plan(path, target, snapshot_dir, now, _allow_recovery)


def _plan(path: Path, target: str, snapshot_dir, now, allow_recovery: bool) -> UpgradePlan:
    at = now or system_clock()
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
    try:
        decision = _decide(conn, path, target)
        _preflight(conn, decision.pending)
        steps = [
            PendingStep(m.id, m.release, m.safety, m.description, m.rebuild, _estimate(conn, m))
            for m in decision.pending
        ]
        policy = _policy_changes(conn, decision.pending)
        gate = profile_gate.check(conn, decision.pending)
        needed = snapshots.needed_bytes(conn)
    except sqlite3.DatabaseError as exc:
        if _hot_journal(path, exc):
            raise _HotJournal() from None
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


# --- running it ----------------------------------------------------------------------------


def _crash_point(name: str) -> None:
    """Test hook: die like `kill -9` at a named boundary (ARCHON_CONSOLE_TEST_CRASH_AT)."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def run_upgrade(
    path: str | os.PathLike[str],
    *,
    target: str = "current",
    force: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    now: datetime | None = None,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
) -> UpgradeResult:
    """Plan, then (if allowed) snapshot and apply each pending step in its own locked transaction."""
    path = Path(path).expanduser()
    at = now or system_clock()
    snap_dir = Path(snapshot_dir).expanduser() if snapshot_dir else None
    if snap_dir is not None and not snap_dir.is_dir():
        raise Refusal(f"The snapshot directory {snap_dir} does not exist. Nothing was written.")
    plan = plan_upgrade(path, target, snapshot_dir=snap_dir, now=at, _allow_recovery=True)
    if plan.up_to_date:
        return UpgradeResult("up-to-date", plan, [], [])
    if plan.profile_evidence is not None and plan.profile_evidence.contradicted:
        raise ProfileEvidenceContradicted(plan.profile_evidence, plan)  # before --force is weighed
    if plan.force_required and not force:
        raise ForceRequired(plan)
    if not plan.enough_space:
        raise snapshots.SnapshotFailed(
            f"Not enough free space for the snapshot: it needs about "
            f"{plan.snapshot_bytes + snapshots.SPACE_MARGIN_BYTES:,} bytes, {plan.free_bytes:,} are free "
            f"in {Path(plan.snapshot_path).parent}. Nothing was written.",
            "Free some space or pass --snapshot-dir DIR on a larger disk.",
        )
    emit = progress or (lambda event: None)
    target_release = plan.target
    conn = connect_raw(path, busy_timeout_ms=busy_timeout_ms)
    state: dict[str, Any] = {"snapshot": None, "reused": False}
    applied_now: list[str] = []
    skipped: list[str] = []
    total = len(plan.pending)
    try:
        while True:
            try:
                # One read transaction: the ledger's two tables are read by separate statements, and
                # another upgrader may commit a step between them.
                conn.execute("BEGIN")
                try:
                    decision = _decide(conn, path, target_release)
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            except sqlite3.DatabaseError as exc:
                raise DatabaseUnusable(f"{path} cannot be read ({exc}). Nothing further was changed.") from None
            if len(decision.applied) < len(plan.applied):
                raise DatabaseUnusable(
                    "The upgrade ledger got shorter after the plan was made (was a snapshot restored?). "
                    "Nothing further was changed."
                )
            if not decision.pending:
                break
            step = decision.pending[0]
            expected = decision.applied

            def locked(lconn: sqlite3.Connection, migration: Migration) -> bool:
                under = _decide(lconn, path, target_release)
                if under.applied != expected:
                    if len(under.applied) < len(expected):
                        raise DatabaseUnusable(
                            "The upgrade ledger changed under the writer lock (it lost steps); "
                            "nothing further was changed."
                        )
                    return False  # another upgrader moved on: re-plan
                if state["snapshot"] is None:
                    _preflight(lconn, under.pending)  # again under the lock, before the snapshot
                    gate = profile_gate.check(lconn, under.pending)  # the evidence, again under the lock
                    if gate is not None and gate.contradicted:
                        raise ProfileEvidenceContradicted(gate, plan)
                    if (under.force_reasons or (gate is not None and gate.force_reason)) and not force:
                        raise ForceRequired(plan)
                    target_path = snapshots.snapshot_target(path.resolve(), at, snap_dir)
                    reused = reusable_snapshot(lconn, target_release, target_path.parent, path.resolve().name)
                    if reused is not None:  # an interrupted run's snapshot, still intact and current
                        state["snapshot"], state["reused"] = reused, True
                    else:
                        state["snapshot"] = snapshots.take_snapshot(
                            path.resolve(),
                            target_path,
                            progress=lambda done, pages: emit(
                                UpgradeProgress("snapshot", done, pages, "copying pages to the snapshot")
                            ),
                        )
                    _crash_point("after-snapshot")
                return True

            def record(rconn: sqlite3.Connection, migration: Migration) -> None:
                snap = state["snapshot"]
                ledger.record(
                    rconn,
                    migration,
                    position=len(expected) + 1,
                    target_release=target_release,
                    now=at,
                    snapshot_path=str(snap.path) if snap else None,
                    snapshot_sha256=snap.sha256 if snap else None,
                )
                _crash_point(f"mid:{migration.id}")

            try:
                ran = apply_migration(conn, step, record=record, locked=locked)
            except MigrationFailed as exc:
                cause = exc.__cause__
                if isinstance(cause, sqlite3.Error) and _busy(cause):
                    raise _busy_refusal() from None
                raise Refusal(
                    f"{exc}. Earlier steps stay applied and recorded.",
                    _restore_hint(state),
                ) from None
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    raise _busy_refusal() from None
                raise Refusal(f"The upgrade stopped: {exc}.", _restore_hint(state)) from None
            if ran:
                applied_now.append(step.id)
                emit(UpgradeProgress("migration", len(applied_now), total, f"{step.id}: {step.description}"))
                _crash_point(f"after:{step.id}")
            else:
                skipped.append(step.id)
        release_after = detect_shape(conn).release
    finally:
        conn.close()
    snap = state["snapshot"]
    emit(UpgradeProgress("done", len(applied_now), total, "upgrade finished"))
    return UpgradeResult(
        status="upgraded" if applied_now else "up-to-date",
        plan=plan,
        applied=applied_now,
        skipped=[s for s in skipped if s not in applied_now],
        snapshot_path=str(snap.path) if snap else None,
        snapshot_sha256=snap.sha256 if snap else None,
        release_after=release_after,
        snapshot_reused=state["reused"],
    )


def _busy_refusal() -> Refusal:
    return Refusal(
        "The database is busy: another process holds archon's write lock. Nothing further was written.",
        "Stop archon before upgrading, then run the upgrade again (it continues from its ledger).",
    )


def _restore_hint(state: dict[str, Any]) -> str | None:
    snap = state.get("snapshot")
    if snap is None:
        return None
    return f"The snapshot taken before this run is {snap.path}; `archon-console restore` puts it back."


# --- restore -------------------------------------------------------------------------------


@dataclass
class RestoreResult:
    path: str
    snapshot: str
    sha256: str
    replaced_path: str | None
    removed: list[str]
    verified_by: str | None = None  # the record the SHA-256 matched; None: restored --unverified

    @property
    def message(self) -> str:
        aside = f" The replaced file was kept as {self.replaced_path}." if self.replaced_path else ""
        if self.verified_by is None:
            how = " UNVERIFIED: its SHA-256 matches no record (--unverified)."
        else:
            how = f" Its SHA-256 matches {self.verified_by}."
        return f"Restored {self.path} from {self.snapshot}.{how}{aside}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verified": self.verified_by is not None, "message": self.message}


def _verify_snapshot(snapshot: Path) -> str:
    """The snapshot's SHA-256, once it proved to be a whole, self-contained archon database."""
    try:
        check_file(snapshot)
        check_size(snapshot)
        if is_wal_file(snapshot):
            raise DatabaseUnusable(
                f"{snapshot} is in WAL mode; the console's snapshots are single files in DELETE mode. "
                "Nothing was restored.",
            )
        snapshots.verify_copy(snapshot)
        conn = sqlite3.connect(untouched_read_uri(snapshot), uri=True, isolation_level=None)
        try:
            _require_archon(conn, snapshot)
        finally:
            conn.close()
    except (snapshots.SnapshotFailed, DatabaseUnusable) as exc:
        # verify_copy speaks of an upgrade's copy ("nothing was migrated"); here nothing was restored
        reason = exc.reason.replace(f"The copy at {snapshot} ", f"{snapshot} ")
        if "Nothing was restored" not in reason:
            reason += " It is not a usable snapshot; nothing was restored."
        raise DatabaseUnusable(reason, "Use another snapshot.") from None
    except sqlite3.DatabaseError as exc:
        raise DatabaseUnusable(
            f"{snapshot} cannot be read as a SQLite database ({exc}). Nothing was restored."
        ) from None
    return snapshots.sha256_file(snapshot)


def _ledger_records(db_path: Path) -> dict[str, str]:
    """Snapshot path -> SHA-256 for every snapshot the database's ledger remembers (none if unreadable)."""
    if not db_path.exists():
        return {}
    try:
        conn = sqlite3.connect(untouched_read_uri(db_path), uri=True, isolation_level=None)
    except (sqlite3.Error, OSError):
        return {}
    try:
        return ledger.recorded_snapshots(conn)
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def _identify(db_path: Path, snapshot: Path, digest: str, unverified: bool) -> str | None:
    """Which record vouches for the snapshot's content (console/db/snapshot_manifest.py), by hash.

    Its own manifest decides when there is one; else the ledger (any row with this hash, wherever
    the snapshot was then), else any manifest of this hash beside it or beside the database. None
    (no record) is accepted only with `unverified`.
    """
    own = manifest_path(snapshot)
    recorded = read_manifest(own)
    if recorded is not None:
        if recorded != digest:
            raise DatabaseUnusable(
                f"{snapshot} does not match the SHA-256 recorded in its manifest {own} when it was taken; "
                "the snapshot (or the manifest) was changed. Nothing was restored.",
                "Use another snapshot.",
            )
        return f"its manifest {own}"
    records = _ledger_records(db_path)
    for stored, sha in records.items():
        if sha != digest and _same_file(stored, snapshot):
            raise DatabaseUnusable(
                f"{snapshot} does not match the SHA-256 recorded when it was taken; it was changed. "
                "Nothing was restored.",
                "Use another snapshot.",
            )
    if digest in records.values():
        return f"the record in {db_path.name}'s upgrade ledger"
    others = manifests_with_hash([snapshot.parent, db_path.parent], digest)
    if others:
        return f"the manifest {others[0]}"
    if unverified:
        return None
    raise Refusal(
        f"The SHA-256 of {snapshot} ({digest}) matches no record: no manifest beside it "
        f"({own.name}), none in its directory or the database's, and no row of the database's "
        "upgrade ledger. It cannot be verified as a snapshot the console took. Nothing was restored.",
        "If you know where this file comes from, run the restore again with --unverified.",
    )


def _aside_name(db_path: Path, at: datetime) -> Path:
    return db_path.with_name(f"{db_path.name}.replaced-{at.strftime('%Y%m%dT%H%M%SZ')}")


def _in_use(db_path: Path) -> Refusal:
    return Refusal(
        f"{db_path} is in use: another process holds a SQLite lock on it (archon, another console, or "
        "any program, run by any user, through any path to the file). Nothing was restored.",
        "Stop archon and everything else that uses the file, then run the restore again.",
    )


def _cannot_check(db_path: Path, why: object) -> Refusal:
    return Refusal(
        f"Cannot take the lock that proves nobody else uses {db_path} ({why}); nothing was restored.",
        "Run the restore as the database's owner (or root), with archon stopped.",
    )


def _keep_aside(db_path: Path, at: datetime, locked_fd: int, status: os.stat_result) -> Path:
    """Keep the file about to be replaced under a new name: a hard link, or else a copy."""
    base = _aside_name(db_path, at)
    aside, n = base, 1
    while True:
        try:
            os.link(db_path, aside, follow_symlinks=False)
            return aside
        except FileExistsError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
                raise
            if not os.path.lexists(aside):
                _copy_exclusive(locked_fd, aside, status)
                return aside
        n += 1
        aside = base.with_name(f"{base.name}-{n}")


def _copy_exclusive(locked_fd: int, target: Path, status: os.stat_result) -> None:
    """Copy through the locked descriptor: opening and closing another one would drop its locks."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        offset = 0
        while chunk := os.pread(locked_fd, 4 * 1024 * 1024, offset):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
            offset += len(chunk)
        os.fchmod(out, stat.S_IMODE(status.st_mode))
        try:
            os.fchown(out, status.st_uid, status.st_gid)
        except PermissionError:
            pass  # a copy the operator owns; the original's owner is kept on the restored file
        os.fsync(out)
    except BaseException:
        os.close(out)
        target.unlink()
        raise
    os.close(out)


def _write_restored_copy(snapshot: Path, directory: Path, db_name: str, digest: str) -> Path:
    # The shared exclusive-create (console/db/files.py): its name carries our pid, so a copy a killed
    # restore left behind is recognised as ours by `remove_stale`.
    tmp = create_exclusive(directory, temp_prefix("restore") + db_name + ".", ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # never through a swapped-in link
        with open(snapshot, "rb") as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 4 * 1024 * 1024)
            dst.flush()
            os.fsync(dst.fileno())
        if snapshots.sha256_file(tmp) != digest:
            raise Refusal("The copy of the snapshot did not match it; nothing was restored.")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _take_owner_and_mode(tmp: Path, db_path: Path, status: os.stat_result) -> None:
    """The restored file gets the replaced file's owner, group and mode, or the restore stops.

    A root restore would otherwise leave a root-owned file that archon, running as its own user,
    cannot open.
    """
    mine = os.stat(tmp, follow_symlinks=False)
    if (mine.st_uid, mine.st_gid) != (status.st_uid, status.st_gid):
        try:
            os.chown(tmp, status.st_uid, status.st_gid, follow_symlinks=False)
        except PermissionError:
            raise Refusal(
                f"The restored file cannot be given the owner and group of {db_path} "
                f"(uid {status.st_uid}, gid {status.st_gid}); only they or root can. Nothing was restored.",
                "Run the restore as the database's owner or as root.",
            ) from None
    os.chmod(tmp, stat.S_IMODE(status.st_mode), follow_symlinks=False)  # after chown, which clears set-id bits


def restore_snapshot(
    db_path: str | os.PathLike[str],
    snapshot: str | os.PathLike[str],
    *,
    yes: bool = False,
    unverified: bool = False,
    confirm: Callable[[str], bool] | None = None,
    now: datetime | None = None,
    busy_timeout_ms: int = 2000,
) -> RestoreResult:
    """Put a verified snapshot back in place of `db_path`, keeping the replaced file aside.

    `confirm(name)` must return True (the CLI asks the operator to type the file's name) unless
    `yes` is set. Nobody else may hold a lock on the database (console/db/exclusive_lock.py): it is
    checked through SQLite first (which also folds a WAL into the file), then held with raw locks
    across the swap, so no connection can start a transaction on the old file meanwhile. Stale
    `-wal`/`-shm`/`-journal` files are removed before the atomic rename, never after: a leftover
    WAL would otherwise be replayed into the restored file. Must not run in a process that holds a
    connection to `db_path` (the TUI runs it through console/isolation.py).
    """
    db_path = Path(db_path).expanduser()
    snapshot = Path(snapshot).expanduser()
    at = now or system_clock()
    if db_path.is_symlink():
        raise Refusal(
            f"{db_path} is a symbolic link; a restore would replace the link, not the database. "
            "Nothing was restored.",
            "Pass the database file's own path with --db.",
        )
    if os.path.lexists(db_path) and snapshot.resolve() == db_path.resolve():
        raise UsageError("The snapshot and the database are the same file.")
    digest = _verify_snapshot(snapshot)
    verified_by = _identify(db_path, snapshot, digest, unverified)
    if not yes:
        if confirm is None:
            raise Refusal(
                "Restoring replaces the database; confirmation is needed and there is no terminal to ask. "
                "Nothing was restored.",
                "Pass --yes to confirm.",
            )
        if not confirm(db_path.name):
            raise Refusal("Not confirmed; nothing was restored.")
    exists = os.path.lexists(db_path)
    if exists:
        try:
            exclusive_lock.settle(db_path, busy_timeout_ms)
        except exclusive_lock.InUse:
            raise _in_use(db_path) from None
        except exclusive_lock.CannotCheck as exc:
            raise _cannot_check(db_path, exc) from None
    directory = db_path.parent
    try:
        tmp: Path | None = _write_restored_copy(snapshot, directory, db_path.name, digest)
    except OSError as exc:
        raise Refusal(f"The restore failed: {exc}. The database was not replaced.") from None
    removed: list[str] = []
    aside: Path | None = None
    try:
        if not exists:
            os.link(tmp, db_path)  # fails rather than replace a file that appeared meanwhile
            os.unlink(tmp)
            tmp = None
        else:
            with exclusive_lock.held_exclusively(db_path) as (locked_fd, status):
                _take_owner_and_mode(tmp, db_path, status)
                wal = Path(f"{db_path}-wal")
                if nonempty_file(wal):
                    raise _in_use(db_path)  # written since it was folded in
                for suffix in ("-wal", "-shm", "-journal"):
                    stale = Path(f"{db_path}{suffix}")
                    if os.path.lexists(stale):
                        stale.unlink()
                        removed.append(str(stale))
                aside = _keep_aside(db_path, at, locked_fd, status)
                os.replace(tmp, db_path)
                tmp = None
        snapshots.fsync_dir(directory)
    except exclusive_lock.InUse:
        raise _in_use(db_path) from None
    except exclusive_lock.CannotCheck as exc:
        raise _cannot_check(db_path, exc) from None
    except OSError as exc:
        raise Refusal(f"The restore failed: {exc}. The database was not replaced.") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return RestoreResult(
        path=str(db_path),
        snapshot=str(snapshot),
        sha256=digest,
        replaced_path=str(aside) if aside else None,
        removed=removed,
        verified_by=verified_by,
    )


__all__ = [
    "ForceRequired",
    "ProfileEvidenceContradicted",
    "PendingStep",
    "RestoreResult",
    "TARGETS",
    "UNVERIFIED_LINE",
    "UpgradePlan",
    "UpgradeProgress",
    "UpgradeResult",
    "plan_upgrade",
    "restore_snapshot",
    "resolve_target",
    "run_upgrade",
]
