"""Verified snapshots: the one thing that can undo a historical-destructive step.

A snapshot is read from a *second* connection (backing up from the connection that holds
`BEGIN IMMEDIATE` hangs, and `VACUUM INTO` cannot run inside a transaction). While the upgrader
holds the writer lock and has written nothing, that connection sees exactly the state the first
migration starts from; it keeps one read transaction open from the copy to the last check.

The copy is written to a temporary name in the destination directory as a single self-contained
file in journal mode DELETE, fsynced, read back and proven to hold what was written, hashed, and only
then given its final name — by a hard link, which fails instead of overwriting, so an existing
snapshot is never replaced — with its SHA-256 in a manifest beside it (console/db/snapshot_manifest.py),
which a move keeps. Any failure removes the temporary file: there is never a partial snapshot under a
snapshot's name. A process killed mid-copy cannot remove it; its temporary file carries the process
id, and the next snapshot into that directory removes it once that process is gone.

Who reads the source's files
----------------------------
This process holds connections to the source (the upgrade's writer, the snapshot's reader), so it
never opens the source's main file or `-wal` itself: closing that descriptor would drop every POSIX
lock the process holds on the file, SQLite's included, and another client closing meanwhile would
believe it was the last one, checkpoint and delete the `-wal` under the upgrade's transaction
(console/db/file_guard.py states the rule; the test suite enforces it). The copy is made by a child
process that holds no connection (console/isolation.py), while this process holds the read
transaction that keeps the image still. The copy itself is opened here once, before the first
connection to it, and closed after its last.

One pass over the source
------------------------
The child reads each page of the source's image once (the main file, and for a WAL database the
`-wal`'s frames of the read snapshot laid over it), hashes it with SHA-256, takes a CRC-32 of each
chunk and writes it (console/db/snapshot_pages.py says how the frames of the read snapshot are
found and proven). Here the copy is then read back, chunk by chunk, against those CRC-32s while the
fsync runs (`verify_written`): the copy holds what was written, and the SHA-256 of what was written
is the snapshot's. For a WAL database the `-shm` header the child went by is the read transaction's
because `PRAGMA data_version` did not change from the start of the read transaction to after the
copy (any commit by another connection changes it). When the `-shm` does not vouch for the frames,
SQLite's backup API makes the copy and a child compares it with the source page by page, as before.

Why the copy is not integrity-checked by default
------------------------------------------------
A snapshot's job is to be an exact, restorable copy; proving the source sound is doctor's job. The
full `integrity_check` cost six times the copy on a 1.7 GB file, `quick_check` alone more than the
copy. `take_snapshot(quick_check=True)` adds the copy's `quick_check`; `full_check=True` the full
check (console/db/snapshot_check.py), split over connections; the upgrade asks for the full one with
`--full-check`. A restore runs `integrity_check` on the snapshot before it puts it back.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from console.db import ledger
from console.db.connection import sqlite_connection
from console.db.detect import read_ledger
from console.db.file_guard import open_foreign
from console.db.files import create_exclusive, remove_stale
from console.db.snapshot_manifest import write_manifest
from console.db.snapshot_pages import Copied, CopyDiffers, Differs, can_block_copy, held_files
from console.db.snapshot_check import (
    SnapshotFailed,
    SnapshotWriteFailed,
    open_ro,
    quick_check_copy,
    table_counts,
    verify_copy,
)
from console.errors import DatabaseUnusable
from console.isolation import IsolatedError, call_isolated

# Pages per backup step: large enough that stepping costs nothing measurable, small enough
# that a progress bar moves on a 1 GB file.
BACKUP_STEP_PAGES = 32768
# Head-room beyond the database's size: the journal of the rename and the file system's slack.
SPACE_MARGIN_BYTES = 16 * 1024 * 1024
# Read the source through mmap: fewer system calls per page copied.
MMAP_BYTES = 1 << 31

# Temporary copies are named for the process writing them, so a later run can tell the leftover
# of a killed one (its process is gone) from a copy being written right now.
TMP_PREFIX = ".archon-console-snapshot"

Progress = Callable[[int, int], None]  # (pages copied, pages total)


@dataclass(frozen=True)
class Snapshot:
    path: Path
    sha256: str
    size: int
    tables: int
    rows: int | None  # None: not counted (the pages were compared instead; counted with full_check)


def snapshot_name(db_path: Path, at: datetime) -> str:
    return f"{db_path.name}.pre-upgrade-{at.strftime('%Y%m%dT%H%M%SZ')}.sqlite3"


def snapshot_target(db_path: Path, at: datetime, snapshot_dir: Path | None = None) -> Path:
    """Always absolute (symbolic links kept as given): the ledger records this path, and a relative
    one would name another file from any other working directory."""
    directory = Path(snapshot_dir).expanduser() if snapshot_dir else db_path.parent
    return (directory / snapshot_name(db_path, at)).absolute()


def needed_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the snapshot: every page the source holds (the WAL's included)."""
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(page_count) * int(page_size)


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def sha256_file(path: Path) -> str:
    """The file's SHA-256; an OSError when it is a file of a database this process is connected to
    (a ledger or a planted hard link may name the database itself as its snapshot): reading it here
    would drop the connection's locks (console/db/file_guard.py)."""
    fd = open_foreign(path)  # refused, and never closed, when it is one (console/db/file_guard.py)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def sha256_fd(fd: int) -> str:
    """The SHA-256 of an open file's whole content, read by offset (the descriptor's own is kept)."""
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, 4 * 1024 * 1024, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def compare_with_source(pages: SourcePages, tmp: Path, *, wal: bool, exact: bool) -> str:
    """The copy's SHA-256 once a child process proved it page for page equal to the source's image."""
    digest, differs = _raw_reader("compare_with_source", str(pages.path), str(tmp), pages.page_size,
                                  pages.page_count, wal=wal, exact=exact)
    _raise_differs(differs)
    return digest


def fsync_dir(directory: Path) -> None:
    try:
        fsync_path(directory)
    except OSError:  # some file systems cannot fsync a directory; the rename is still atomic
        pass


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete the temporary copies that killed snapshot runs left in `directory`.

    The copy is written without a journal, and only a finished, verified one is ever renamed,
    so a kill -9 or a power cut mid-copy leaves nothing but such a file; it holds no state
    anyone needs. Files of processes still running are left alone (console/db/files.py).
    """
    return remove_stale(directory)


def _publish(tmp: Path, target: Path, sha256: str, source: Path, identity: tuple[str | None, int]) -> Path:
    """Give `tmp` a final name next to `target`, with its manifest, without ever overwriting a file.

    The manifest (console/db/snapshot_manifest.py) is created first, exclusively: a snapshot never
    has a name without its manifest beside it, and a name whose manifest is taken is skipped.
    """
    candidate, n = target, 1

    def next_name() -> Path:
        nonlocal n
        n += 1
        return target.with_name(f"{target.stem}-{n}{target.suffix}")

    while True:
        try:
            instance, steps = identity  # a database never upgraded is named by this snapshot
            manifest = write_manifest(candidate, sha256, source, instance=instance or sha256, ledger_steps=steps)
        except FileExistsError:
            candidate = next_name()
            continue
        try:
            os.link(tmp, candidate)
        except FileExistsError:
            manifest.unlink()
            candidate = next_name()
            continue
        except OSError:  # no hard links here: check-then-rename
            if candidate.exists():
                manifest.unlink()
                candidate = next_name()
                continue
            os.rename(tmp, candidate)
            return candidate
        os.unlink(tmp)
        return candidate


def _timed(started: float, fn, *args):
    """Run fn, returning (its result, seconds from `started` until it finished)."""
    result = fn(*args)
    return result, time.perf_counter() - started


@dataclass(frozen=True)
class SourcePages:
    """What the child process needs to read the source's image (console/db/snapshot_pages.py)."""

    path: Path
    page_size: int
    page_count: int


def _raw_reader(function: str, *args, progress: Progress | None = None, **kwargs):
    """console/db/snapshot_pages.py `function` in a child process, which holds no connection.

    This process holds connections to the source (the upgrade's writer, the snapshot's reader):
    opening and closing a descriptor of its main file or `-wal` here would drop their POSIX locks
    (console/db/file_guard.py), so the reads that bypass SQLite happen in a process of their own.
    """
    forward = (lambda event: progress(*event)) if progress is not None else None
    return call_isolated(f"console.db.snapshot_pages:{function}", *args, progress=forward, **kwargs)


def _raise_differs(differs: Differs | None) -> None:
    if differs is not None:
        raise CopyDiffers(*differs)


def _backup_copy(source: sqlite3.Connection, tmp: Path, progress: Progress | None, step_pages: int) -> None:
    """SQLite's backup API writes the source's image into `tmp`, then switches it to DELETE."""
    dest = sqlite_connection(str(tmp))
    try:
        dest.execute("PRAGMA synchronous = OFF")
        dest.execute("PRAGMA journal_mode = OFF")
        source.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")

        def on_step(status: int, remaining: int, total: int) -> None:
            if progress is not None:
                progress(total - remaining, total)

        source.backup(dest, pages=step_pages, progress=on_step)
        dest.execute("PRAGMA journal_mode = DELETE")
    finally:
        dest.close()
    for leftover in (Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        if leftover.exists():
            leftover.unlink()


def copy_pages(
    source: sqlite3.Connection, pages: SourcePages, tmp: Path, wal: bool, progress: Progress | None, step_pages: int
) -> Copied | None:
    """Write the source's image into `tmp` as a single file in journal mode DELETE.

    A child process reads every page once, hashes it and writes it (console/db/snapshot_pages.py
    `copy_from_source`; with `wal`, the `-wal`'s frames of the read snapshot laid over the main
    file); it answers what `verify_written` checks the copy against. None: the `-shm` did not vouch
    for the `-wal`'s frames, so SQLite's backup API made the copy, to be compared with the source
    (`compare_with_source`). The temporary file is deleted on any failure, so it needs no journal
    and no syncs of its own: one fsync of the finished file is the durability point.
    """
    # The files the child may read: those this process's connections hold open, under the name
    # SQLite opened them by (a name swapped since leads elsewhere; snapshot_pages.py `open_held`).
    held = held_files(source.execute("PRAGMA database_list").fetchone()[2])
    copied: Copied = _raw_reader("copy_from_source", str(pages.path), str(tmp), pages.page_size,
                                 pages.page_count, step_pages, wal=wal, held=held, progress=progress)
    _raise_differs(copied.differs)
    if copied.fallback is None:
        return copied
    _backup_copy(source, tmp, progress, step_pages)
    return None


def verify_written(fd: int, copied: Copied, pages: SourcePages) -> str:
    """The copy's SHA-256, once the copy, read back through `fd`, holds what was written: its size,
    and the CRC-32 of every chunk. The SHA-256 is of the bytes the writer read from the source and
    wrote, so a copy whose every chunk reads back as written has that SHA-256; a restore recomputes
    it from the file before relying on it (console/services/upgrade/restore_records.py).
    """
    size = pages.page_size * pages.page_count
    actual = os.fstat(fd).st_size
    if actual != size:
        raise CopyDiffers(min(actual, size) // pages.page_size + 1, f"the copy has {actual:,} bytes, the source {size:,}")
    view = memoryview(bytearray(copied.chunk))
    offset = 0
    for crc in copied.crcs:
        want = min(copied.chunk, size - offset)
        got = 0
        while got < want:
            n = os.preadv(fd, [view[got:want]], offset + got)
            if n == 0:
                raise CopyDiffers((offset + got) // pages.page_size + 1, "the copy ended early")
            got += n
        if zlib.crc32(view[:want]) != crc:
            first, last = offset // pages.page_size + 1, (offset + want) // pages.page_size
            raise CopyDiffers(first, f"pages {first}-{last} do not read back as they were written")
        offset += want
    if offset != size:
        raise CopyDiffers(offset // pages.page_size + 1, "the writer did not account for every page")
    return copied.sha256


def _differs(tmp: Path, exc: CopyDiffers) -> SnapshotFailed:
    return SnapshotFailed(
        f"The snapshot's copy differs from the database ({exc}); it was removed and nothing was migrated.",
        "Run the upgrade again with archon stopped; if this repeats, check the disk under "
        f"{tmp.parent} (pass --snapshot-dir DIR to use another).",
    )


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _count_tables(conn: sqlite3.Connection) -> int:
    return int(conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchone()[0])


def take_snapshot(
    db_path: Path,
    target: Path,
    *,
    progress: Progress | None = None,
    step_pages: int = BACKUP_STEP_PAGES,
    timings: dict[str, float] | None = None,
    check_workers: int | None = None,
    full_check: bool = False,
    quick_check: bool = False,
) -> Snapshot:
    """Copy `db_path` to `target` (or `target-2`... if taken) and verify it.

    The caller holds the writer lock on another connection; this opens its own read-only one and
    keeps one read transaction on it from the copy to the last check. The copy is the source's
    image, each page read once (module docstring). `quick_check` adds SQLite's `quick_check` of the
    copy; `full_check` the full `integrity_check` instead, over `check_workers` connections, row
    counts compared too. Neither runs unless asked: they judge the source, which is doctor's job.
    `timings`, if given, receives the wall time of each phase and the bytes the copier read from the
    source's files ("source bytes read"; for bench/bench_snapshot.py and the tests).
    """
    clock = time.perf_counter
    phase = {"at": clock()}

    def lap(name: str) -> None:
        if timings is not None:
            now = clock()
            timings[name] = timings.get(name, 0.0) + now - phase["at"]
            phase["at"] = now

    db_path = Path(db_path)
    directory = target.parent
    if not directory.is_dir():
        raise SnapshotFailed(f"The snapshot directory {directory} does not exist.")
    source = open_ro(db_path, any_thread=True)
    tmp: Path | None = None
    tmp_fd: int | None = None
    background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="snapshot")
    try:
        remove_stale_temporaries(directory)  # before the space check: they take space too
        # One read transaction from here to the last check: the image cannot change underneath.
        source.execute("BEGIN")
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a deferred BEGIN reads from here
        needed = needed_bytes(source)
        free = free_bytes(directory)
        if free < needed + SPACE_MARGIN_BYTES:
            raise SnapshotFailed(
                f"Not enough free space for the snapshot in {directory}: it needs about "
                f"{needed + SPACE_MARGIN_BYTES:,} bytes, {free:,} are free. Nothing was migrated.",
                "Free some space or pass --snapshot-dir DIR on a larger disk.",
            )
        page_size = source.execute("PRAGMA page_size").fetchone()[0]
        mode = source.execute("PRAGMA journal_mode").fetchone()[0]
        wal = not can_block_copy(db_path, mode)
        # The WAL-index header the copier goes by is this transaction's only if no other connection
        # commits between here and the end of the copy; PRAGMA data_version changes if one does.
        version = _data_version(source) if wal else None
        pages = SourcePages(db_path, page_size, needed // page_size)
        counts = table_counts(source) if full_check else None
        lap("read the source's page map" + (" and row counts" if full_check else ""))
        tmp = create_exclusive(directory, f"{TMP_PREFIX}.{os.getpid()}.{target.name}.", ".tmp")
        # Opened before the first connection to the copy and closed after its last, for the fsync.
        tmp_fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        started = clock()
        copied = copy_pages(source, pages, tmp, wal, progress, step_pages)
        lap("copy (backup API)" if copied is None else
            "copy (one pass, -wal frames applied)" if wal else "copy (one pass)")
        if timings is not None and copied is not None:
            timings["source bytes read"] = float(copied.source_bytes_read)
        # fsync, the read-back and the check asked for at once: the fsync waits on the disk, the rest
        # on the CPUs (hashlib, zlib and sqlite3 let go of the GIL). All read the copy's bytes from
        # the kernel's page cache whether or not they have reached the disk yet; nothing gets the
        # snapshot's name before all of them have succeeded.
        syncing = background.submit(_timed, started, os.fsync, tmp_fd)
        if copied is not None:
            comparing = background.submit(_timed, started, verify_written, tmp_fd, copied, pages)
        else:
            comparing = background.submit(
                _timed, started, lambda: compare_with_source(pages, tmp, wal=True, exact=False))
        if full_check:
            workers = {} if check_workers is None else {"workers": check_workers}
            tables, rows = verify_copy(tmp, counts, **workers)
        elif quick_check:
            tables, rows = quick_check_copy(tmp), None
        else:
            tables, rows = _count_tables(source), None
        checked = clock() - started
        _, synced = syncing.result()
        try:
            digest, compared = comparing.result()
        except CopyDiffers as exc:
            raise _differs(tmp, exc) from None
        lap("verify (fsync, read-back" + (", check" if full_check or quick_check else "") + " at once)")
        if timings is not None:
            check_name = "integrity check + counts" if full_check else "quick_check" if quick_check else "table count"
            timings[f"  of which: {check_name} done at (from the copy's start)"] = checked
            timings["  of which: fsync done at (from the copy's start)"] = synced
            timings["  of which: read-back done at (from the copy's start)"] = compared
        identity = (ledger.instance_id(source), len(read_ledger(source)))  # the copied image's
        source.execute("COMMIT")
        if copied is not None and version is not None and _data_version(source) != version:
            raise _differs(tmp, CopyDiffers(1, "another connection committed while it was copied"))
        size = tmp.stat().st_size
        final = _publish(tmp, target, digest, db_path.resolve(), identity)
        tmp = None
        fsync_dir(directory)
        lap("publish")
        return Snapshot(path=final, sha256=digest, size=size, tables=tables, rows=rows)
    except (SnapshotFailed, DatabaseUnusable):
        raise
    except CopyDiffers as exc:  # the source ends before its page count while copying
        raise _differs(tmp or directory / target.name, exc) from None
    except (OSError, sqlite3.Error, IsolatedError) as exc:
        raise SnapshotWriteFailed(
            f"The snapshot could not be written to {directory}: {getattr(exc, 'strerror', None) or exc}; "
            "its partial file was removed and nothing was migrated.",
            "Free some space or pass --snapshot-dir DIR on a larger disk, then run the upgrade again.",
        ) from None
    finally:
        background.shutdown(wait=True)
        source.close()
        if tmp_fd is not None:
            os.close(tmp_fd)
        if tmp is not None:
            for path in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass


__all__ = [
    "Snapshot",
    "compare_with_source",
    "copy_pages",
    "free_bytes",
    "needed_bytes",
    "remove_stale_temporaries",
    "sha256_file",
    "snapshot_name",
    "snapshot_target",
    "take_snapshot",
    "verify_written",
]
