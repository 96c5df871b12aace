"""Verified snapshots: the one thing that can undo a historical-destructive step.

A snapshot is written through SQLite's online-backup API from a *second* connection (backing up
from the connection that holds `BEGIN IMMEDIATE` hangs, and `VACUUM INTO` cannot run inside a
transaction; docs/decisions.md, D8). While the upgrader holds the writer lock and has written nothing,
that second connection sees exactly the state the first migration starts from.

It is written to a temporary name in the destination directory, switched to journal mode DELETE
(a single self-contained file), fsynced, reopened and checked (`integrity_check` is `ok`, every
table has the source's row count), hashed, and only then given its final name — by a hard link,
which fails instead of overwriting, so an existing snapshot is never replaced — with its SHA-256 in
a manifest beside it (console/db/snapshot_manifest.py), which a move keeps. Any failure removes the
temporary file: there is never a partial snapshot under a snapshot's name. A process killed
mid-copy cannot remove it; its temporary file carries the process id, and the next snapshot into
that directory removes it once that process is gone.

Where the time goes, and why it is spent in parallel (bench/bench_upgrade.py has the numbers)
------------------------------------------------------------------------------------------------
* The copy writes the temporary file with no journal and no syncs: nothing can be lost that
  matters, since a failure deletes the file and the one fsync below is the durability point.
* `integrity_check` is most of the cost: for every row of every table it looks the row up in each
  of the table's indexes. It is CPU-bound (a bigger page cache or mmap do not help), so it is
  split over connections on their own threads (sqlite3 releases the GIL while a statement runs).
  The pieces are `PRAGMA integrity_check(T)` for every table T, sqlite_schema included, plus one
  `PRAGMA quick_check` of the whole file. Together they check exactly what `integrity_check`
  does: a per-table check is "partial" and skips the whole-file page accounting (freelist, pages
  never used, a page claimed by two trees), which is precisely the B-tree pass that the
  whole-file quick_check runs; the per-row checks (NOT NULL, CHECK, every index entry against its
  row, UNIQUE, index entry counts) never span two tables. The price is that B-tree pass twice
  (about a quarter more CPU in all), so the split pays only when a second CPU is free; with one
  CPU the plain whole-file `integrity_check` runs instead. The largest table's own check bounds
  the phase however many CPUs there are.
* The copy itself is bounded by the pager writing one page per system call (a 4 KiB database
  makes ~435,000 of them for 1.8 GB), where `cp` copies in large blocks.
* The fsync and the SHA-256 run while the copy is checked. The check reads the bytes from the
  kernel's page cache whether or not they have reached the disk yet, so the order changes nothing
  that is verified; what matters is that nothing gets the snapshot's name before the fsync, the
  check, the counts and the hash have all succeeded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from console.db.files import create_exclusive, remove_stale
from console.db.snapshot_manifest import write_manifest
from console.errors import EXIT_UNUSABLE, DatabaseUnusable, Refusal

# Pages per backup step: large enough that stepping costs nothing measurable, small enough
# that a progress bar moves on a 1 GB file.
BACKUP_STEP_PAGES = 32768
# Head-room beyond the database's size: the journal of the rename and the file system's slack.
SPACE_MARGIN_BYTES = 16 * 1024 * 1024
# Read the source through mmap: fewer system calls per page copied.
MMAP_BYTES = 1 << 31
# More checking connections than this gain nothing: the largest table's check bounds the time.
MAX_CHECK_WORKERS = 4

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
    rows: int


class SnapshotFailed(Refusal):
    """The snapshot could not be made; no migration ran and no partial file is left."""


class SnapshotWriteFailed(SnapshotFailed):
    """Writing the snapshot failed (a full disk, an I/O error): the target cannot be used (exit 3)."""

    exit_code = EXIT_UNUSABLE


def snapshot_name(db_path: Path, at: datetime) -> str:
    return f"{db_path.name}.pre-upgrade-{at.strftime('%Y%m%dT%H%M%SZ')}.sqlite3"


def snapshot_target(db_path: Path, at: datetime, snapshot_dir: Path | None = None) -> Path:
    directory = Path(snapshot_dir).expanduser() if snapshot_dir else db_path.parent
    return directory / snapshot_name(db_path, at)


def needed_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the snapshot: every page the source holds (the WAL's included)."""
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(page_count) * int(page_size)


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {name: conn.execute(f"SELECT count(*) FROM {_quoted(name)}").fetchone()[0] for name in names}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(4 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    try:
        fsync_path(directory)
    except OSError:  # some file systems cannot fsync a directory; the rename is still atomic
        pass


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete the temporary copies that killed snapshot runs left in `directory`.

    The copy is written without a journal, and only a finished, verified one is ever renamed,
    so a kill -9 or a power cut mid-copy leaves nothing but such a file; it holds no state
    anyone needs. Files of processes still running are left alone (console/db/files.py).
    """
    return remove_stale(directory)


def _publish(tmp: Path, target: Path, sha256: str) -> Path:
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
            manifest = write_manifest(candidate, sha256)
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


def _open_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True, isolation_level=None)


def check_pieces(conn: sqlite3.Connection, counts: dict[str, int]) -> list[str]:
    """Statements whose findings, together, are exactly those of `PRAGMA integrity_check`.

    Ordered biggest expected work first, so that connections pulling from the list finish at
    about the same time (longest-processing-time-first). A table's check looks each row up in
    every index of the table: rows x (1 + indexes). The whole-file quick_check passes over every
    row once: the sum of the rows.
    """
    tables = conn.execute(
        "SELECT t.name, (SELECT count(*) FROM sqlite_master i WHERE i.type = 'index' AND i.tbl_name = t.name) "
        "FROM sqlite_master t WHERE t.type = 'table'"
    ).fetchall()
    weighted = [
        (counts.get(name, 0) * (1 + indexes), f"PRAGMA integrity_check({_quoted(name)})")
        for name, indexes in tables
    ]
    weighted.append((sum(counts.values()), "PRAGMA quick_check"))
    weighted.sort(key=lambda item: -item[0])  # stable: equal weights keep schema order
    return [sql for _, sql in weighted] + ["PRAGMA integrity_check(sqlite_master)"]


def integrity_messages(path: Path, pieces: list[str], workers: int) -> list[str]:
    """Run the check statements over `workers` connections; returns the problems found (none: [])."""
    pending = list(reversed(pieces))
    lock = threading.Lock()
    stop = threading.Event()
    live: list[sqlite3.Connection] = []
    found: list[str] = []

    def work() -> None:
        conn = _open_ro(path)
        with lock:
            live.append(conn)
        try:
            while not stop.is_set():
                with lock:
                    if not pending:
                        return
                    sql = pending.pop()
                try:
                    rows = [str(row[0]) for row in conn.execute(sql)]
                except sqlite3.DatabaseError as exc:
                    if stop.is_set():  # interrupted because another piece failed
                        return
                    rows = [f"{sql} could not finish: {exc}"]  # damage bad enough to stop the check
                if rows != ["ok"]:
                    with lock:
                        found.extend(rows)
                    halt(conn)
        except BaseException:
            halt(conn)
            raise
        finally:
            with lock:
                live.remove(conn)
            conn.close()

    def halt(me: sqlite3.Connection | None) -> None:
        """One failure decides the verdict: stop the others instead of letting them finish."""
        stop.set()
        with lock:
            for other in live:
                if other is not me:
                    other.interrupt()

    if workers <= 1:
        work()
        return found
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="integrity-check") as pool:
        futures = [pool.submit(work) for _ in range(workers)]
        try:
            errors = [f.exception() for f in futures]
        except BaseException:  # Ctrl-C: do not sit out the remaining pieces
            halt(None)
            raise
    if found:
        return found
    for error in errors:
        if error is not None:
            raise error
    return found


def verify_copy(
    path: Path, expected_counts: dict[str, int] | None = None, *, workers: int | None = None
) -> tuple[int, int]:
    """Reopen a copy read-only and check it; returns (tables, rows). Raises on any difference.

    `workers` connections share the integrity check (default: one per CPU, at most four; with
    one, it is the plain whole-file `PRAGMA integrity_check`).
    """
    path = Path(path)
    workers = min(MAX_CHECK_WORKERS, usable_cpus()) if workers is None else max(1, workers)
    conn = _open_ro(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        try:
            counts = table_counts(conn)
        except sqlite3.DatabaseError:
            counts = None  # a damaged table; the check below names the damage
        if counts is None or workers == 1:
            pieces = ["PRAGMA integrity_check"]
        else:
            pieces = check_pieces(conn, counts)
    finally:
        conn.close()
    result = integrity_messages(path, pieces, workers if len(pieces) > 1 else 1)
    if result or counts is None:
        shown = "; ".join(result[:3]) if result else "its tables cannot be counted"
        raise DatabaseUnusable(
            f"The copy at {path} failed SQLite's integrity check ({shown}).",
            "The source database itself is probably damaged; nothing was migrated.",
        )
    if mode.lower() != "delete":
        raise SnapshotFailed(f"The copy at {path} is in journal mode {mode}, not DELETE.")
    if expected_counts is not None and counts != expected_counts:
        differing = sorted(
            name for name in set(counts) | set(expected_counts) if counts.get(name) != expected_counts.get(name)
        )
        raise SnapshotFailed(
            f"The copy's row counts differ from the database's ({', '.join(differing[:5])}).",
        )
    return len(counts), sum(counts.values())


def _timed(started: float, fn, *args):
    """Run fn, returning (its result, seconds from `started` until it finished)."""
    result = fn(*args)
    return result, time.perf_counter() - started


def take_snapshot(
    db_path: Path,
    target: Path,
    *,
    progress: Progress | None = None,
    step_pages: int = BACKUP_STEP_PAGES,
    timings: dict[str, float] | None = None,
    check_workers: int | None = None,
) -> Snapshot:
    """Copy `db_path` to `target` (or `target-2`... if taken) and verify it.

    The caller holds the writer lock on another connection; this opens its own read-only one.
    `timings`, if given, receives the wall time of each phase (for bench/bench_upgrade.py).
    """
    clock = time.perf_counter
    phase = {"at": clock()}

    def lap(name: str) -> None:
        if timings is not None:
            now = clock()
            timings[name] = timings.get(name, 0.0) + now - phase["at"]
            phase["at"] = now

    directory = target.parent
    if not directory.is_dir():
        raise SnapshotFailed(f"The snapshot directory {directory} does not exist.")
    source = _open_ro(Path(db_path))
    tmp: Path | None = None
    try:
        remove_stale_temporaries(directory)  # before the space check: they take space too
        needed = needed_bytes(source)
        free = free_bytes(directory)
        if free < needed + SPACE_MARGIN_BYTES:
            raise SnapshotFailed(
                f"Not enough free space for the snapshot in {directory}: it needs about "
                f"{needed + SPACE_MARGIN_BYTES:,} bytes, {free:,} are free. Nothing was migrated.",
                "Free some space or pass --snapshot-dir DIR on a larger disk.",
            )
        counts = table_counts(source)
        lap("count source rows")
        tmp = create_exclusive(directory, f"{TMP_PREFIX}.{os.getpid()}.{target.name}.", ".tmp")
        dest = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            # The temporary file is deleted on any failure, so it needs no journal and no syncs
            # of its own: one fsync of the finished file below is the durability point.
            dest.execute("PRAGMA journal_mode = OFF")
            dest.execute("PRAGMA synchronous = OFF")
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
        lap("copy (backup API)")
        # fsync, hash and check at once: the fsync waits on the disk, the hash and the check
        # pieces on the CPUs (hashlib and sqlite3 both release the GIL).
        started = clock()
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="snapshot") as pool:
            syncing = pool.submit(_timed, started, fsync_path, tmp)
            hashing = pool.submit(_timed, started, sha256_file, tmp)
            if check_workers is None:
                tables, rows = verify_copy(tmp, counts)
            else:
                tables, rows = verify_copy(tmp, counts, workers=check_workers)
            checked = clock() - started
            _, synced = syncing.result()
            digest, hashed = hashing.result()
        lap("verify (fsync, check, counts, hash at once)")
        if timings is not None:
            timings["  of which: integrity check + counts done at"] = checked
            timings["  of which: fsync done at"] = synced
            timings["  of which: sha256 done at"] = hashed
        size = tmp.stat().st_size
        final = _publish(tmp, target, digest)
        tmp = None
        fsync_dir(directory)
        lap("publish")
        return Snapshot(path=final, sha256=digest, size=size, tables=tables, rows=rows)
    except (SnapshotFailed, DatabaseUnusable):
        raise
    except (OSError, sqlite3.Error) as exc:
        raise SnapshotWriteFailed(
            f"The snapshot could not be written to {directory}: {getattr(exc, 'strerror', None) or exc}; "
            "its partial file was removed and nothing was migrated.",
            "Free some space or pass --snapshot-dir DIR on a larger disk, then run the upgrade again.",
        ) from None
    finally:
        source.close()
        if tmp is not None:
            for path in (tmp, Path(f"{tmp}-journal")):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass


__all__ = [
    "Snapshot",
    "SnapshotFailed",
    "SnapshotWriteFailed",
    "check_pieces",
    "free_bytes",
    "integrity_messages",
    "needed_bytes",
    "remove_stale_temporaries",
    "sha256_file",
    "snapshot_name",
    "snapshot_target",
    "table_counts",
    "take_snapshot",
    "usable_cpus",
    "verify_copy",
]
