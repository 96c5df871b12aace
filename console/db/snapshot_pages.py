"""The source's pages as SQLite reads them, to copy a snapshot fast and to prove the copy exact.

A snapshot must be an exact, restorable copy; proving the source sound is doctor's job. So the copy
is compared with its source page by page, inside one read transaction on the source (the caller
holds it, so the source cannot change underneath), instead of re-deriving every index entry with
`integrity_check` (six times the cost of the copy on a 1.7 GB file).

The source's image is read here without SQLite, and so never in a process that holds a
connection to the source (closing a descriptor of the file would drop that process's locks, SQLite's
included: console/db/file_guard.py). `copy_from_source` and `compare_with_source` are what
console/db/snapshot.py runs in a child process (console/isolation.py), while it holds the read
transaction that keeps the image still; everything else here serves them. The image is read from
the file format (SQLite's "Database File
Format" document, sections 1.3 and 4): the main file, overlaid for a WAL database by the newest
frame of each page up to the last valid commit in the `-wal` (frames whose salts match the WAL
header and whose cumulative checksums hold). The SQLite backup API, the other reader, makes the copy
whenever the `-wal` holds frames; the two readers are independent on purpose: a mistake here makes
a sound copy look different (the snapshot is refused, nothing migrated), it cannot make a wrong copy
look right. When there is nothing in a `-wal`, the image *is* the main file's first `page_count`
pages, and the copy is a block copy of them (`can_block_copy`, `block_copy`): the pager's one
system call per page made the backup API alone slower than `cp`.

A block copy must equal the image in every byte but the two journal-mode bytes, which must say
DELETE (`exact`). A backup-API copy may also differ in the header fields SQLite rewrites on the
copy's own commits (`HEADER_SKIP`): the journal-mode bytes, the change counter, the schema cookie
(the backup API sets the copy's to one more than its own, so that connections to the copy reload the
schema), the version-valid-for number and the SQLite version that wrote the file last; and in the
pending-byte page, which SQLite never writes. Everything else of page 1 (page count, user_version,
application_id, the schema's B-tree) must match.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24
PENDING_BYTE = 0x40000000  # SQLite's lock byte: the page holding it is never used
HEADER_SKIP = ((18, 20), (24, 28), (40, 44), (92, 100))
CHUNK_BYTES = 8 * 1024 * 1024


class CopyDiffers(Exception):
    """The copy is not the source's image: `page` (1-based) is the first page that differs."""

    def __init__(self, page: int, why: str = "its bytes differ"):
        super().__init__(f"page {page}: {why}")
        self.page, self.why = page, why


def _checksum(data: bytes, s0: int, s1: int, order: str) -> tuple[int, int]:
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def wal_frames(wal: Path, page_size: int) -> dict[int, int]:
    """Page number -> offset of its newest committed copy in `wal`; {} when it holds none."""
    try:
        handle = open(wal, "rb")
    except FileNotFoundError:
        return {}
    with handle:
        header = handle.read(WAL_HEADER)
        if len(header) < WAL_HEADER:
            return {}
        magic, _version, size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", header)
        if magic not in WAL_MAGIC or size != page_size:
            return {}
        order = ">" if magic & 1 else "<"
        s0, s1 = _checksum(header[:24], 0, 0, order)
        if (s0, s1) != (c1, c2):
            return {}
        committed: dict[int, int] = {}
        pending: dict[int, int] = {}
        offset = WAL_HEADER
        while True:
            frame = handle.read(FRAME_HEADER + page_size)
            if len(frame) < FRAME_HEADER + page_size:
                break
            page, commit, f1, f2, k1, k2 = struct.unpack(">6I", frame[:FRAME_HEADER])
            if (f1, f2) != (salt1, salt2):
                break
            s0, s1 = _checksum(frame[:8], s0, s1, order)
            s0, s1 = _checksum(frame[FRAME_HEADER:], s0, s1, order)
            if (s0, s1) != (k1, k2):
                break
            pending[page] = offset + FRAME_HEADER
            if commit:
                committed.update(pending)
                pending.clear()
            offset += FRAME_HEADER + page_size
        return committed


def can_block_copy(db_path: Path, journal_mode: str) -> bool:
    """True when the main file alone holds the image: no `-wal`, or one with nothing in it.

    Asked inside the read transaction: a WAL reader that found the log empty reads the main file
    only, and no checkpoint may then write the main file until that transaction ends.
    """
    if journal_mode.lower() != "wal":
        return True  # a rollback-journal file under a read lock is its own image
    try:
        return os.stat(f"{db_path}-wal").st_size == 0
    except FileNotFoundError:
        return True


@dataclass
class SourceImage:
    """The logical bytes of a database: its main file, overlaid by its WAL's committed frames."""

    path: Path
    page_size: int
    page_count: int
    frames: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._overlaid = sorted(self.frames)
        self._main = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        self._wal = os.open(f"{self.path}-wal", os.O_RDONLY | os.O_CLOEXEC) if self.frames else None

    @property
    def main_fd(self) -> int:
        return self._main

    @property
    def size(self) -> int:
        return self.page_size * self.page_count

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes of the image from `offset` (whole pages), the WAL's frames laid over."""
        length = min(length, self.size - offset)
        data = os.pread(self._main, length, offset)
        first, last = offset // self.page_size + 1, (offset + length - 1) // self.page_size + 1
        start = bisect_left(self._overlaid, first)
        if len(data) == length and (start == len(self._overlaid) or self._overlaid[start] > last):
            return data
        buffer = bytearray(data.ljust(length, b"\0"))
        covered = set()
        for page in self._overlaid[start:]:
            if page > last:
                break
            at = (page - 1) * self.page_size - offset
            buffer[at : at + self.page_size] = os.pread(self._wal, self.page_size, self.frames[page])
            covered.add(page)
        for page in range((offset + len(data)) // self.page_size + 1, last + 1):
            if page not in covered:  # neither file holds it: never invent a page of zeros
                raise CopyDiffers(page, "the source file ends before its page count")
        return bytes(buffer)

    def close(self) -> None:
        os.close(self._main)
        if self._wal is not None:
            os.close(self._wal)


JOURNAL_VERSION = (18, 20)  # the file format's write/read versions: 1 1 is journal mode DELETE
DELETE_MODE = b"\x01\x01"


def _skipped(offset: int, length: int, page_size: int, exact: bool) -> list[tuple[int, int]]:
    """Byte ranges of this chunk that are not compared: page 1's rewritten header fields and, for a
    backup-API copy, the pending-byte page, which SQLite never writes (the backup leaves a hole)."""
    header = (JOURNAL_VERSION,) if exact else HEADER_SKIP
    ranges = [(a, b) for a, b in header if offset == 0]
    pending_start = (PENDING_BYTE // page_size) * page_size
    if not exact and offset <= pending_start < offset + length:
        ranges.append((pending_start - offset, pending_start - offset + page_size))
    return sorted(ranges)


def _first_difference(mine: bytes, theirs: bytes, offset: int, page_size: int, exact: bool) -> int | None:
    if mine == theirs:
        return None
    at = 0
    for a, b in _skipped(offset, len(mine), page_size, exact) + [(len(mine), len(mine))]:
        if mine[at:a] != theirs[at:a]:
            where = next(i for i in range(at, a) if mine[i] != theirs[i])
            return (offset + where) // page_size + 1
        at = b
    return None


def compare_and_hash(
    copy: Path, image: SourceImage, *, exact: bool = False, digest: bool = True, chunk_bytes: int = CHUNK_BYTES
) -> str | None:
    """The copy's SHA-256 (None unless `digest`), once every page of it proved equal to the
    source's; else `CopyDiffers`. The hash is of the bytes read back from the copy, the ones compared.

    `exact`: only the journal-mode bytes may differ, and they must say DELETE (a block copy, which
    nothing rewrote afterwards); else the `HEADER_SKIP` fields the backup API and SQLite rewrite.
    """
    hasher = hashlib.sha256() if digest else None
    size = os.stat(copy).st_size
    if size != image.size:
        pages = min(size, image.size) // image.page_size + 1
        raise CopyDiffers(pages, f"the copy has {size:,} bytes, the source {image.size:,}")
    chunk_bytes -= chunk_bytes % image.page_size
    with open(copy, "rb", buffering=0) as handle:
        offset = 0
        while offset < size:
            mine = handle.read(chunk_bytes)
            if not mine:
                raise CopyDiffers(offset // image.page_size + 1, "the copy ended early")
            if offset == 0 and exact and mine[JOURNAL_VERSION[0] : JOURNAL_VERSION[1]] != DELETE_MODE:
                raise CopyDiffers(1, "its header does not say journal mode DELETE")
            theirs = image.read(offset, len(mine))
            page = _first_difference(mine, theirs, offset, image.page_size, exact)
            if page is not None:
                raise CopyDiffers(page)
            if hasher is not None:
                hasher.update(mine)
            offset += len(mine)
    return hasher.hexdigest() if hasher is not None else None


# copy_file_range failing with these means "not between these files", not a failed write.
_NO_KERNEL_COPY = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)
BLOCK_BYTES = 64 * 1024 * 1024


def block_copy(
    image: SourceImage, out_fd: int, progress: Callable[[int, int], None] | None, step_pages: int
) -> None:
    """Write the image to `out_fd` as a journal-mode DELETE file, in large blocks (what `cp` does:
    `copy_file_range`, the kernel copying page cache to page cache, else read and write).

    Setting the two journal-mode bytes is all `PRAGMA journal_mode = DELETE` changes in a file whose
    WAL is empty; `compare_and_hash(exact=True)` then checks them with every other byte.
    """
    step = min(max(1, step_pages) * image.page_size, BLOCK_BYTES)
    kernel = not image.frames and hasattr(os, "copy_file_range")
    offset = 0
    while offset < image.size:
        want = min(step, image.size - offset)
        done = 0
        if kernel:
            try:
                done = os.copy_file_range(image.main_fd, out_fd, want, offset, offset)
            except OSError as exc:
                if exc.errno not in _NO_KERNEL_COPY:
                    raise
                kernel = False
            else:
                if done == 0:
                    raise CopyDiffers(offset // image.page_size + 1, "the source file ends before its page count")
        if not kernel:
            data = memoryview(image.read(offset, want))
            done = len(data)
            at = offset
            while data:
                written = os.pwrite(out_fd, data, at)
                data, at = data[written:], at + written
        offset += done
        if progress is not None:
            progress(offset // image.page_size, image.page_count)
    os.pwrite(out_fd, DELETE_MODE, JOURNAL_VERSION[0])


Differs = tuple[int, str]  # (page, why) of a CopyDiffers, as it crosses from the child process


def copy_from_source(
    db_path: str, copy: str, page_size: int, page_count: int, step_pages: int,
    progress: Callable[[tuple[int, int]], None] | None = None,
) -> Differs | None:
    """In a process with no connection to `db_path`: block-copy its main file into the existing `copy`."""
    image = SourceImage(Path(db_path), page_size, page_count)
    try:
        fd = os.open(copy, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # the file create_exclusive made
        try:
            block_copy(image, fd, (lambda done, total: progress((done, total))) if progress else None, step_pages)
        finally:
            os.close(fd)
    except CopyDiffers as exc:
        return exc.page, exc.why
    finally:
        image.close()
    return None


def compare_with_source(
    db_path: str, copy: str, page_size: int, page_count: int, *, wal: bool, exact: bool
) -> tuple[str | None, Differs | None]:
    """In a process with no connection to `db_path`: (the copy's SHA-256, None) once it proved equal
    to the source's image (its `-wal`'s committed frames laid over when `wal`), else (None, differs).

    Started while the copy is still being written, it first waits for the caller's `flock` on the
    copy to be let go (flock, not SQLite's fcntl locks, which it leaves alone)."""
    with open(copy, "rb") as waiting:
        fcntl.flock(waiting.fileno(), fcntl.LOCK_SH)
    frames = wal_frames(Path(f"{db_path}-wal"), page_size) if wal else {}
    image = SourceImage(Path(db_path), page_size, page_count, frames)
    try:
        return compare_and_hash(Path(copy), image, exact=exact), None
    except CopyDiffers as exc:
        return None, (exc.page, exc.why)
    finally:
        image.close()


__all__ = [
    "CopyDiffers",
    "SourceImage",
    "block_copy",
    "can_block_copy",
    "compare_and_hash",
    "compare_with_source",
    "copy_from_source",
    "wal_frames",
]
