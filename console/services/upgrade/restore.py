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
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from console.clock import system_clock
from console.db import exclusive_lock, ledger, snapshot as snapshots
from console.db.connect import check_file, check_size, is_wal_file, sqlite_connection, untouched_read_uri
from console.db.files import create_exclusive, temp_prefix
from console.db.file_trust import Judged, open_judged, untrusted_because
from console.db.paths import nonempty_file
from console.db.snapshot_manifest import Manifest, manifest_beside, manifest_path, manifests_with_hash
from console.errors import DatabaseUnusable, Refusal, UsageError
from console.services.upgrade.decide import require_archon

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
        snapshots.verify_copy(snapshot)
        conn = sqlite_connection(untouched_read_uri(snapshot), uri=True)
        try:
            require_archon(conn, snapshot)
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


@dataclass(frozen=True)
class _Ledger:
    records: list[tuple[str, str]]  # (path, SHA-256) of every snapshot it remembers
    untrusted: str | None  # why it cannot vouch for anything; None: it counts


def _ledger(db_path: Path) -> _Ledger:
    """The snapshots the database's upgrade ledger remembers, and whether it may vouch for them.

    The ledger is a table in the database: whoever can write the database (or replace it, through
    its directory) can write any row. So it counts only when the database passes the same rule as
    a manifest (console/db/file_trust.py), and only when it is the exact history this console
    writes (`ledger.read_verified`). Judged without opening the file outside SQLite."""
    if not os.path.lexists(db_path):
        return _Ledger([], None)
    try:
        conn = sqlite_connection(untouched_read_uri(db_path), uri=True)
    except (sqlite3.Error, OSError):
        return _Ledger([], None)
    try:
        records = ledger.recorded_snapshots(conn)
        if not records:
            return _Ledger([], None)
        ledger.read_verified(conn)
    except DatabaseUnusable as exc:
        first = exc.reason.split(". ")[0]
        return _Ledger(records, f"it is not the history this console writes ({first})")
    except sqlite3.Error:
        return _Ledger([], None)
    finally:
        conn.close()
    return _Ledger(records, untrusted_because(db_path))


def _same_file(stored: str, snapshot: Path, db_path: Path) -> bool:
    """The ledger's path names `snapshot`. Rows of older consoles may hold a path relative to the
    working directory of the upgrade, unknown now: tried from here and from the database's directory."""
    try:
        mine = snapshot.resolve()
        stored_path = Path(stored)
        if stored_path.is_absolute():
            return stored_path.resolve() == mine
        return mine in {stored_path.resolve(), (db_path.parent / stored_path).resolve()}
    except OSError:
        return False


def _changed(snapshot: Path, record: str, aside: str = "") -> DatabaseUnusable:
    return DatabaseUnusable(
        f"{snapshot} does not match the SHA-256 recorded in {record} when it was taken{aside}; "
        "the snapshot (or the record) was changed. Nothing was restored.",
        "Use another snapshot.",
    )


def _manifest_why(manifest: Manifest, db_path: Path, known: _Ledger, digest: str) -> str | None:
    """Why a manifest of the right hash still cannot vouch for restoring onto `db_path`, or None.

    It must be one only the operator or root could have placed (with the snapshot); it speaks only
    for the database it names (an older manifest names none); and a database whose ledger records
    snapshots is answered by its ledger alone, so a manifest for one it does not record does not
    count (docs/decisions.md, "A manifest names its database")."""
    if manifest.untrusted is not None:
        return manifest.untrusted
    target = str(db_path.resolve())
    if manifest.source is not None and manifest.source != target:
        return f"the snapshot was taken from {manifest.source}, not from {target}"
    if known.records and digest not in {sha for _stored, sha in known.records}:
        return f"{db_path.name}'s upgrade ledger records its own snapshots and this one is not among them"
    return None


def _identify(db_path: Path, held: Judged, digest: str, unverified: bool) -> str | None:
    """Which record vouches for the snapshot's content (console/db/snapshot_manifest.py), by hash.

    The ledger inside the database being replaced outranks every manifest: a manifest is a file
    beside the snapshot, and whoever could swap the snapshot could rewrite it too. So a ledger row
    for this path with another SHA-256 refuses the restore whatever any manifest says, and a row
    with this SHA-256 vouches for it, as long as the ledger itself counts (`_ledger`). In order: the
    ledger's rows for this path; the snapshot's own manifest; any ledger row with this hash (the
    snapshot was moved); a manifest of this hash beside it or beside the database (it was renamed);
    each manifest counting only under `_manifest_why`.
    None (no record) is accepted only with `unverified`; a record that disagrees is never overridden.
    """
    snapshot = Path(held.path)
    known = _ledger(db_path)
    ledger_record = f"{db_path.name}'s upgrade ledger"
    not_counted: list[str] = []
    if known.untrusted is None:
        here = {sha for stored, sha in known.records if _same_file(stored, snapshot, db_path)}
        if here and digest not in here:
            raise _changed(snapshot, ledger_record, ", whatever a manifest beside it says")
        if here:
            return f"the record in {ledger_record}"
    own = manifest_path(snapshot)
    mine = manifest_beside(held)
    if mine is not None and mine.sha256 == digest:
        why = _manifest_why(mine, db_path, known, digest)
        if why is None:
            return f"its manifest {own}"
        not_counted.append(f"its manifest {own.name} does not count because {why}")
    if digest in {sha for _stored, sha in known.records}:
        if known.untrusted is None:
            return f"the record in {ledger_record}"
        not_counted.append(f"{ledger_record} does not count because {known.untrusted}")
    if mine is not None and mine.sha256 != digest:
        raise _changed(snapshot, f"its manifest {own}")
    own_real = own.parent.resolve() / own.name
    for other, manifest in manifests_with_hash([snapshot.parent, db_path.parent], digest):
        if other == own_real:
            continue
        why = held.untrusted or _manifest_why(manifest, db_path, known, digest)
        if why is None:
            return f"the manifest {other}"
        not_counted.append(f"the manifest {other} does not count because {why}")
    if unverified:
        return None
    aside = "".join(f" {why[0].upper()}{why[1:]}." for why in not_counted)
    raise Refusal(
        f"The SHA-256 of {snapshot} ({digest}) matches no record: no manifest that counts beside it "
        f"({own.name}) or in its directory or the database's, and no row of the database's "
        f"upgrade ledger that counts.{aside} It cannot be verified as a snapshot the console took. "
        "Nothing was restored.",
        "If you know where this file comes from, run the restore again with --unverified.",
    )


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
    held = _open_snapshot(snapshot)
    try:
        return _restore_held(db_path, held, yes, unverified, confirm, at, busy_timeout_ms)
    finally:
        held.close()


def _restore_held(
    db_path: Path,
    held: Judged,
    yes: bool,
    unverified: bool,
    confirm: Callable[[str], bool] | None,
    at: datetime,
    busy_timeout_ms: int,
) -> RestoreResult:
    snapshot = Path(held.path)
    digest = snapshots.sha256_fd(held.fd)
    verified_by = _identify(db_path, held, digest, unverified)
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


__all__ = ["RestoreResult", "restore_snapshot"]
