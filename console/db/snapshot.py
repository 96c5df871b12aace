"""Verified snapshots: the one thing that can undo a historical-destructive step.

A snapshot is written through SQLite's online-backup API from a *second* connection (backing up
from the connection that holds `BEGIN IMMEDIATE` hangs, and `VACUUM INTO` cannot run inside a
transaction; DOMAIN.md §4.8). While the upgrader holds the writer lock and has written nothing,
that second connection sees exactly the state the first migration starts from.

It is written to a temporary name in the destination directory, switched to journal mode DELETE
(a single self-contained file), fsynced, reopened and checked (`integrity_check` is `ok`, every
table has the source's row count), hashed, and only then given its final name — by a hard link,
which fails instead of overwriting, so an existing snapshot is never replaced. Any failure removes
the temporary file: there is never a partial snapshot under a snapshot's name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from console.errors import DatabaseUnusable, Refusal

# Pages per backup step: large enough that stepping costs nothing measurable, small enough
# that a progress bar moves on a 1 GB file.
BACKUP_STEP_PAGES = 16384
# Head-room beyond the database's size: the journal of the rename and the file system's slack.
SPACE_MARGIN_BYTES = 16 * 1024 * 1024
# Read the source through mmap: fewer system calls per page copied.
MMAP_BYTES = 1 << 31

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


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {
        name: conn.execute(f'SELECT count(*) FROM "{name.replace(chr(34), chr(34) * 2)}"').fetchone()[0]
        for name in names
    }


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


def _publish(tmp: Path, target: Path) -> Path:
    """Give `tmp` a final name next to `target` without ever overwriting a file."""
    candidate, n = target, 1
    while True:
        try:
            os.link(tmp, candidate)
        except FileExistsError:
            n += 1
            candidate = target.with_name(f"{target.stem}-{n}{target.suffix}")
            continue
        except OSError:  # no hard links here: check-then-rename
            if candidate.exists():
                n += 1
                candidate = target.with_name(f"{target.stem}-{n}{target.suffix}")
                continue
            os.rename(tmp, candidate)
            return candidate
        os.unlink(tmp)
        return candidate


def verify_copy(path: Path, expected_counts: dict[str, int] | None = None) -> tuple[int, int]:
    """Reopen a copy read-only and check it; returns (tables, rows). Raises on any difference."""
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, isolation_level=None)
    try:
        result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            raise DatabaseUnusable(
                f"The copy at {path} failed SQLite's integrity check ({'; '.join(result[:3])}).",
                "The source database itself is probably damaged; nothing was migrated.",
            )
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode.lower() != "delete":
            raise SnapshotFailed(f"The copy at {path} is in journal mode {mode}, not DELETE.")
        counts = table_counts(conn)
    finally:
        conn.close()
    if expected_counts is not None and counts != expected_counts:
        differing = sorted(
            name for name in set(counts) | set(expected_counts) if counts.get(name) != expected_counts.get(name)
        )
        raise SnapshotFailed(
            f"The copy's row counts differ from the database's ({', '.join(differing[:5])}).",
        )
    return len(counts), sum(counts.values())


def take_snapshot(
    db_path: Path,
    target: Path,
    *,
    progress: Progress | None = None,
    step_pages: int = BACKUP_STEP_PAGES,
    timings: dict[str, float] | None = None,
) -> Snapshot:
    """Copy `db_path` to `target` (or `target-2`... if taken) and verify it.

    The caller holds the writer lock on another connection; this opens its own read-only one.
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
    source = sqlite3.connect(
        f"file:{quote(str(Path(db_path).resolve()))}?mode=ro", uri=True, isolation_level=None
    )
    tmp: Path | None = None
    try:
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
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        tmp = Path(name)
        dest = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            # The temporary file is deleted on any failure, so it needs no journal and no syncs
            # of its own: one fsync of the finished file below is the durability point.
            dest.execute("PRAGMA journal_mode = OFF")
            dest.execute("PRAGMA synchronous = OFF")
            source.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            total_holder = [0]

            def on_step(status: int, remaining: int, total: int) -> None:
                total_holder[0] = total
                if progress is not None:
                    progress(total - remaining, total)

            source.backup(dest, pages=step_pages, progress=on_step)
            dest.execute("PRAGMA journal_mode = DELETE")
        finally:
            dest.close()
        for leftover in (Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            if leftover.exists():
                leftover.unlink()
        lap("backup")
        fsync_path(tmp)
        lap("fsync")
        # Hashing reads the file while SQLite checks it: both release the GIL, so on two cores
        # the hash costs no extra wall time.
        with ThreadPoolExecutor(max_workers=1) as pool:
            hashing = pool.submit(sha256_file, tmp)
            tables, rows = verify_copy(tmp, counts)
            lap("verify (integrity_check, counts)")
            digest = hashing.result()
        lap("sha256 (beyond the verification)")
        size = tmp.stat().st_size
        final = _publish(tmp, target)
        tmp = None
        fsync_dir(directory)
        lap("publish")
        return Snapshot(path=final, sha256=digest, size=size, tables=tables, rows=rows)
    except (SnapshotFailed, DatabaseUnusable):
        raise
    except (OSError, sqlite3.Error) as exc:
        raise SnapshotFailed(
            f"The snapshot could not be written to {directory}: {exc}. Nothing was migrated.",
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
    "free_bytes",
    "needed_bytes",
    "sha256_file",
    "snapshot_name",
    "snapshot_target",
    "table_counts",
    "take_snapshot",
    "verify_copy",
]
