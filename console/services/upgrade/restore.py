"""`restore_snapshot`: put a verified snapshot back in place of the database, the upgrade's undo.

Who else uses the file is decided by its locks (console/db/exclusive_lock.py), never by /proc
paths: a path comparison misses archon running as another user or reaching the file through a bind
mount or a hard link.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from console.clock import system_clock
from console.db import exclusive_lock, snapshot as snapshots
from console.db.snapshot_check import SnapshotFailed, verify_copy
from console.db.connect import check_file, check_size, is_wal_file, untouched_read_uri
from console.db.connection import sqlite_connection
from console.db.files import create_exclusive, temp_prefix
from console.db.file_trust import Judged, open_judged
from console.db.paths import nonempty_file
from console.db.tx import lock_budget
from console.errors import ConsoleError, DatabaseUnusable, Refusal, UsageError
from console.services.upgrade.decide import require_archon
from console.services.upgrade.restore_loss import (
    REARM_WORDS, LossReport, ids_text, loss_since, rearmed_text, revived_text,
)
from console.services.upgrade.restore_origin import OtherDatabase, check_origin
from console.services.upgrade.restore_records import identify
from console.text import one_line

@dataclass
class RestoreResult:
    path: str
    snapshot: str
    sha256: str
    replaced_path: str | None
    removed: list[str]
    verified_by: str | None = None  # the record the SHA-256 matched; None: restored --unverified
    origin: str = ""  # how the snapshot is known to be this database's (restore_origin.py)
    loss: LossReport = field(default_factory=LossReport)  # what was written since the snapshot
    planned: bool = False  # --plan: nothing was replaced
    refusal: ConsoleError | None = None  # --plan: why the restore itself would be refused

    @property
    def message(self) -> str:
        aside = f" The replaced file was kept as {self.replaced_path}." if self.replaced_path else ""
        if self.verified_by is None:
            how = " UNVERIFIED: its SHA-256 matches no record (--unverified)."
        else:
            how = f" Its SHA-256 matches {self.verified_by}."
        whose = f" Taken from this database: {self.origin}." if self.origin else ""
        head = "Would restore" if self.planned else "Restored"
        lines = [f"{head} {self.path} from {self.snapshot}.{how}{whose}{aside}", *self.loss.lines(done=not self.planned)]
        if self.refusal is not None:
            lines.append(f"REFUSED: {self.refusal.reason}" + (f" {self.refusal.hint}" if self.refusal.hint else ""))
        return "\n".join(lines)

    @property
    def exit_code(self) -> int:
        return self.refusal.exit_code if self.refusal is not None else 0

    def to_json(self) -> dict[str, Any]:
        # not `asdict`: it would deep-copy the refusal, an exception
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("loss", "refusal")}
        return {**data, "verified": self.verified_by is not None, "loss": self.loss.to_json(),
                "refused": None if self.refusal is None else self.refusal.reason, "message": self.message}


class RearmRefused(DatabaseUnusable):
    """Restoring would make executable again a request archon has since consumed, invalidated, let
    expire or deleted, or undo a consumption its executor recorded, or what it loses could not be
    told at all (exit 3); carries the loss. Each risk is overridden only by the flag that names it."""

    def __init__(self, snapshot: Path, loss: LossReport, *, rearm_consumed: bool = False,
                 loss_unknown: bool = False):
        consumed = loss.consumed
        count = consumed.count if consumed is not None else 0
        flags: list[str] = []
        whats: list[str] = []
        if loss.unfinished is not None and not loss_unknown:
            whats.append(f"what it would lose cannot be told ({one_line(loss.unfinished)}), so neither can "
                         "whether it makes executable again an action archon already ran")
            flags.append("--loss-unknown")
        if loss.refuses and not rearm_consumed:
            if loss.rearmed_count:
                whats.append(f"{loss.rearmed_count} approval request(s) that archon {REARM_WORDS} since the "
                             f"snapshot become approved (or pending) again, so archon may run an action a second "
                             f"time or one that was withdrawn: {rearmed_text(loss)}")
            elif loss.rearm_unknown is not None and loss.unreadable is None:
                whats.append(f"whether approval requests archon consumed, invalidated or withdrew since become "
                             f"executable again cannot be told (approval_requests cannot be compared: "
                             f"{one_line(loss.rearm_unknown)})")
            elif count:
                whats.append(f"the record of {count} consumption(s) archon's executor made since is lost: "
                             f"{ids_text(consumed.first, count) if consumed else ''}")
            flags.append("--rearm-consumed")
        if loss.revived_count:  # not refused on its own (docs/decisions.md D8a); named where a refusal is
            whats.append(f"also, {loss.revived_count} environment(s) that {revived_text(loss)}")
        super().__init__(
            f"Restoring {snapshot} is refused: {'; and '.join(whats)}. Nothing was restored.",
            "Run `restore --plan` to see everything it would lose; if restoring anyway is intended (making "
            "those requests executable again, or mending a database whose loss cannot be read), run the "
            f"restore again with {' and '.join(flags)}.",
        )
        self.loss = loss

    @staticmethod
    def needed(loss: LossReport, rearm_consumed: bool, loss_unknown: bool) -> bool:
        return (loss.unfinished is not None and not loss_unknown) or (loss.refuses and not rearm_consumed)


def _verify_snapshot(snapshot: Path) -> None:
    """Refuse unless the snapshot is a whole, self-contained archon database."""
    try:
        check_file(snapshot)
        check_size(snapshot)
        if is_wal_file(snapshot):
            raise DatabaseUnusable(
                f"{snapshot} is in WAL mode; the console's snapshots are single files in DELETE mode. "
                "Nothing was restored.",
            )
        verify_copy(snapshot)
        conn = sqlite_connection(untouched_read_uri(snapshot), uri=True)
        try:
            require_archon(conn, snapshot)
        finally:
            conn.close()
    except (SnapshotFailed, DatabaseUnusable) as exc:
        # verify_copy speaks of an upgrade's copy ("nothing was migrated"); here nothing was restored
        reason = exc.reason.replace(f"The copy at {snapshot} ", f"{snapshot} ")
        if "Nothing was restored" not in reason:
            reason += " It is not a usable snapshot; nothing was restored."
        raise DatabaseUnusable(reason, "Use another snapshot.") from None
    except sqlite3.DatabaseError as exc:
        raise DatabaseUnusable(
            f"{snapshot} cannot be read as a SQLite database ({exc}). Nothing was restored."
        ) from None


def _open_snapshot(snapshot: Path) -> Judged:
    """The snapshot, held open through the trust walk (console/db/file_trust.py), once it proved sound.

    Every later read (the hash, its manifest, the copy) goes through this descriptor and the
    directory held with it. SQLite's soundness checks need a path; the path must still name the
    held file after them (a link flipped and flipped back in between is the one case left: the
    restored bytes are still the hashed ones, and only a record or `--unverified` accepts those)."""
    try:
        held = open_judged(snapshot)
    except OSError as exc:
        _verify_snapshot(snapshot)  # the plain-words refusal for a missing or unusable file
        raise DatabaseUnusable(
            f"{snapshot} cannot be opened ({exc.strerror or exc}). Nothing was restored.",
            "Use another snapshot.",
        ) from None
    def names_held() -> bool:
        try:
            now = os.stat(snapshot)
        except OSError:
            return False
        return held.still_named() and (now.st_dev, now.st_ino) == (held.status.st_dev, held.status.st_ino)

    try:
        _verify_snapshot(snapshot)
        if not names_held():
            raise DatabaseUnusable(
                f"{snapshot} was replaced while it was being checked. Nothing was restored.",
                "Make sure nobody else can write where the snapshot is, then run the restore again.",
            )
    except BaseException:
        held.close()
        raise
    return held


def aside_name(db_path: Path, at: datetime) -> Path:
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


def _linked_elsewhere(db_path: Path, status: os.stat_result) -> DatabaseUnusable | None:
    """The database has other hard links: the restore replaces this name only, and whoever opens
    another one (archon, through its own path) keeps the old file, and writes to it."""
    if status.st_nlink <= 1:
        return None
    return DatabaseUnusable(
        f"{db_path} has {status.st_nlink - 1} other hard link(s): another path names the same file (perhaps the "
        "one archon opens), and a restore replaces only this name, so that path would keep the old database. "
        "Nothing was restored.",
        "Find the other names (`find / -xdev -samefile DATABASE`), remove them or pass the one archon opens as "
        "--db; to replace this name only, run the restore again with --other-links.",
    )


def _settle(db_path: Path, busy_timeout_ms: int) -> None:
    try:
        with lock_budget(busy_timeout_ms / 1000) as budget, budget.waiting():  # the command's, if armed
            exclusive_lock.settle(db_path, budget.remaining_ms)
    except exclusive_lock.InUse:
        raise _in_use(db_path) from None
    except exclusive_lock.CannotCheck as exc:
        raise _cannot_check(db_path, exc) from None


def _keep_aside(db_path: Path, at: datetime, locked_fd: int, status: os.stat_result) -> Path:
    """Keep the file about to be replaced under a new name: a hard link, or else a copy."""
    base = aside_name(db_path, at)
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


def _write_restored_copy(held: Judged, directory: Path, db_name: str, digest: str) -> Path:
    """Copy the held snapshot (the very file that was hashed), then hash what was written."""
    # The shared exclusive-create (console/db/files.py): its name carries our pid, so a copy a killed
    # restore left behind is recognised as ours by `remove_stale`.
    tmp = create_exclusive(directory, temp_prefix("restore") + db_name + ".", ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # never through a swapped-in link
        with os.fdopen(fd, "wb") as dst:
            offset = 0
            while chunk := os.pread(held.fd, 4 * 1024 * 1024, offset):
                dst.write(chunk)
                offset += len(chunk)
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
    rearm_consumed: bool = False,
    loss_unknown: bool = False,
    other_links: bool = False,
    other_database: bool = False,
    plan: bool = False,
    confirm: Callable[[str, LossReport], bool] | None = None,
    now: datetime | None = None,
    busy_timeout_ms: int = 2000,
) -> RestoreResult:
    """Put a verified snapshot back in place of `db_path`, keeping the replaced file aside.

    Before anything is replaced: the snapshot must come from this database (restore_origin.py;
    `other_database` overrides), and what it would lose is read from both files (restore_loss.py);
    re-arming a request archon consumed, invalidated, let expire or deleted since is refused
    unless `rearm_consumed`. `plan`: stop there,
    with the refusal (if any) inside the result. `confirm(name, loss)` must return True (the CLI
    shows the loss and asks the operator to type the file's name) unless `yes` is set. Nobody else may hold a lock on the database (console/db/exclusive_lock.py): it is
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
    if os.path.lexists(db_path) and os.path.realpath(snapshot) == os.path.realpath(db_path):  # (never raises on a loop)
        raise UsageError("The snapshot and the database are the same file.")
    held = _open_snapshot(snapshot)
    try:
        checked = _check_held(db_path, held, unverified, (rearm_consumed, loss_unknown), other_database, plan,
                              busy_timeout_ms)
        if plan:
            if checked.refusal is None and not other_links:
                checked.refusal = _linked_elsewhere(db_path, os.stat(db_path)) if os.path.lexists(db_path) else None
            return checked
        return _restore_held(db_path, held, checked, yes, confirm, at, busy_timeout_ms, other_links)
    finally:
        held.close()


def _check_held(db_path: Path, held: Judged, unverified: bool, overrides: tuple[bool, bool],
                other_database: bool, plan: bool, busy_timeout_ms: int) -> RestoreResult:
    """Everything decided before a restore replaces anything: the record that vouches for the content,
    the database it was taken from, and what it would lose. `plan`: refusals go into the result."""
    snapshot = Path(held.path)
    digest = snapshots.sha256_fd(held.fd)
    # Whose snapshot it is is asked before whether a record vouches for it: a snapshot of another
    # database is refused as that (exit 3) even where its record does not count here.
    found = identify(db_path, held, digest, True, other_database)
    result = RestoreResult(path=str(db_path), snapshot=str(snapshot), sha256=digest, replaced_path=None,
                           removed=[], verified_by=found.verified_by, planned=plan)
    try:
        result.origin = check_origin(
            db_path, snapshot, digest, manifest=found.manifest, in_ledger=found.in_ledger,
            this_instance=found.known.instance, unverified=unverified, other_database=other_database,
        ).how
    except OtherDatabase as exc:
        if exc.unknown and found.verified_by is None and not unverified:
            identify(db_path, held, digest, False, other_database)  # no record at all: that is the refusal
        if not plan:
            raise
        result.refusal = exc
    if found.verified_by is None and not unverified:
        identify(db_path, held, digest, False, other_database)  # raises the "matches no record" refusal
    if not plan and os.path.lexists(db_path):
        # Compared as archon's next start would see it: a crash's hot journal rolled back, a WAL folded
        # in (SQLite's own recovery, under the lock check; --plan writes nothing and says it cannot tell).
        _settle(db_path, busy_timeout_ms)
    result.loss = loss_since(db_path, snapshot)
    rearm_consumed, loss_unknown = overrides
    if RearmRefused.needed(result.loss, rearm_consumed, loss_unknown):
        refused = RearmRefused(snapshot, result.loss, rearm_consumed=rearm_consumed, loss_unknown=loss_unknown)
        if not plan:
            raise refused
        result.refusal = result.refusal or refused
    return result


def _restore_held(
    db_path: Path,
    held: Judged,
    checked: RestoreResult,
    yes: bool,
    confirm: Callable[[str, LossReport], bool] | None,
    at: datetime,
    busy_timeout_ms: int,
    other_links: bool,
) -> RestoreResult:
    snapshot = Path(held.path)
    digest = checked.sha256
    if os.path.lexists(db_path) and not other_links and (early := _linked_elsewhere(db_path, os.stat(db_path))):
        raise early  # before the operator is asked to type the name (attack round 3, finding 7)
    if not yes:
        if confirm is None:
            raise Refusal(
                "Restoring replaces the database; confirmation is needed and there is no terminal to ask. "
                "Nothing was restored.",
                "Pass --yes to confirm (`restore --plan` shows what it would lose).",
            )
        if not confirm(db_path.name, checked.loss):
            raise Refusal(
                "Not confirmed; nothing was restored. The database's content is as it was; to compare it, "
                "SQLite's own recovery ran first (a WAL folded into the file, a crashed transaction's "
                "journal rolled back), as archon's next start would.")
    exists = os.path.lexists(db_path)
    if exists:
        if not other_links and (linked := _linked_elsewhere(db_path, os.stat(db_path))) is not None:
            raise linked  # before the confirmation and the copy: said as early as it is known
        _settle(db_path, busy_timeout_ms)
    directory = db_path.parent
    try:
        tmp: Path | None = _write_restored_copy(held, directory, db_path.name, digest)
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
                if not other_links and (linked := _linked_elsewhere(db_path, status)) is not None:
                    raise linked  # a link made since; counted before the restore's own aside link
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
    checked.replaced_path = str(aside) if aside else None
    checked.removed = removed
    return checked


__all__ = ["RearmRefused", "RestoreResult", "restore_snapshot"]
