"""The source's pages as SQLite reads them: the snapshot's copy, made and hashed in one pass.

A snapshot must be an exact, restorable copy of the state the upgrade starts from; proving the
source sound is doctor's job. The copy is made here in one pass over the source's image: each chunk
of pages is read once, hashed (SHA-256, the snapshot's record) and checksummed (CRC-32, kept per
chunk), and written; console/db/snapshot.py then reads the written copy back and proves every
chunk holds what was written (`verify_written`), without reading the source a second time.

The source's image is read here without SQLite, and so never in a process that holds a
connection to the source (closing a descriptor of the file would drop that process's locks, SQLite's
included: console/db/file_guard.py). `copy_from_source` and `compare_with_source` are what
console/db/snapshot.py runs in a child process (console/isolation.py), while it holds the read
transaction that keeps the image still. The image is read from the file format (SQLite's "Database
File Format" document, sections 1.3 and 4, and the WAL-index header of its `-shm`, wal.c): the main
file's first `page_count` pages, overlaid for a WAL database by the newest copy of each page among
the frames of the read snapshot.

Which frames are the read snapshot's
------------------------------------
A reader sees the `-wal`'s frames up to `mxFrame` of the WAL-index header (the `-shm`), not every
frame that looks committed: a writer killed between writing its commit frame and publishing it in
the `-shm` leaves a commit nobody reads until the index is rebuilt. So the frames are taken up to
the header's `mxFrame` and only when the header vouches for them (`read_snapshot_frames`): its two
copies agree and its checksum holds, the `-wal`'s salts are the header's, every frame up to
`mxFrame` carries them and its cumulative checksum holds, frame `mxFrame` is a commit whose
checksum and page count are the header's. The header is read again after the copy and must be
unchanged (a checkpoint that restarts the `-wal` changes its salts). That the header is the one of
the caller's read transaction is proven by the caller (`PRAGMA data_version`, console/db/snapshot.py).
When the header does not vouch, SQLite's backup API makes the copy instead and `compare_with_source`
proves it equal to the image parsed here (the two readers are independent on purpose: a mistake here
makes a sound copy look different, it cannot make a wrong copy look right).

Which files are read
--------------------
SQLite reads the files its connections opened, not whatever their names lead to now: another user
may rename a forged main file or `-wal` (its checksums are not cryptographic: a forgery can keep them
all) over the database's after the read transaction began. So every file read here is opened by
`open_held`: it must be the file the caller's process holds open under that name (`held_files`,
asked in the read transaction), else SQLite's backup API copies and the comparison refuses.

A copy made here equals the image in every byte but the two journal-mode bytes, which say DELETE
(`exact`). A backup-API copy may also differ in the header fields SQLite rewrites on the copy's own
commits (`HEADER_SKIP`): the journal-mode bytes, the change counter, the schema cookie (the backup API
sets the copy's to one more than its own, so that connections to the copy reload the schema), the
version-valid-for number and the SQLite version that wrote the file last; and in the pending-byte
page, which SQLite never writes. Everything else of page 1 (page count, user_version,
application_id, the schema's B-tree) must match.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24
PENDING_BYTE = 0x40000000  # SQLite's lock byte: the page holding it is never used
HEADER_SKIP = ((18, 20), (24, 28), (40, 44), (92, 100))
# Read, hash, checksum and write a chunk while it is in the CPU's cache: on bench/bench_snapshot.py's
# file 8 MiB chunks cost up to three times the CPU of 256 KiB ones.
CHUNK_BYTES = 256 * 1024
# The WAL-index header (wal.c `WalIndexHdr`), twice at the start of the -shm, in native byte order:
# version, unused, change counter, isInit, big-endian checksums, page size, mxFrame, pages, the
# last frame's checksum, the -wal's salts (as the -wal stores them), the header's own checksum.
SHM_HEADER = struct.Struct("=3IBBHII2I8s2I")
SHM_VERSION = 3007000


class CopyDiffers(Exception):
    """The copy is not the source's image: `page` (1-based) is the first page that differs."""

    def __init__(self, page: int, why: str = "its bytes differ"):
        super().__init__(f"page {page}: {why}")
        self.page, self.why = page, why


class NotHeld(Exception):
    """A file named as the database's is not one the caller's connections have open."""


Held = dict[str, frozenset[tuple[int, int]]]  # "", "-wal", "-shm" -> (device, inode) of the files open so


def held_files(sqlite_name: str) -> Held | None:
    """For the main file SQLite opened as `sqlite_name` (`PRAGMA database_list`), its `-wal` and
    `-shm`: (device, inode) of the files this process has open under those names (the kernel's name
    of a descriptor, " (deleted)" once renamed over), by `fstat`: nothing is opened or closed. None
    where the system does not list them (Linux's /proc does)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    held: dict[str, set[tuple[int, int]]] = {suffix: set() for suffix in ("", "-wal", "-shm")}
    for fd in fds:
        try:
            name = os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
            suffix = name[len(sqlite_name):] if name.startswith(sqlite_name) else None
            if suffix in held:
                st = os.fstat(int(fd))
                held[suffix].add((st.st_dev, st.st_ino))
        except (OSError, ValueError):
            continue
    return {suffix: frozenset(inodes) for suffix, inodes in held.items()}


def open_held(path: str | Path, suffix: str, held: Held | None) -> int:
    """A read-only descriptor of `path`, the database's main file (`suffix` "") or a sidecar, once it
    is proven the file the caller holds open under that name (when `held` is given): a name swapped
    since the caller's connections opened it (renamed over, linked, a symbolic link) leads elsewhere."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if held is not None and (st.st_dev, st.st_ino) not in held.get(suffix, ()):
        os.close(fd)
        raise NotHeld(f"{Path(path).name} is not the file the database's connections have open")
    return fd


def _checksum(data: bytes, s0: int, s1: int, order: str) -> tuple[int, int]:
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


@dataclass(frozen=True)
class WalLog:
    """What a `-wal` holds up to its last commit read: page -> offset of its newest copy, and the
    commit frame's number, cumulative checksum and database size in pages."""

    frames: dict[int, int]
    commit: int
    checksum: tuple[int, int]
    salts: bytes
    pages: int


def read_wal(wal: Path, page_size: int, last_frame: int | None = None, held: Held | None = None) -> WalLog | None:
    """The committed frames of `wal` (those up to `last_frame` only, when given; `held`: `open_held`'s);
    None when it has no valid header. Frames count while their salts are the header's and their
    cumulative checksums hold, as SQLite's own recovery counts them."""
    try:
        handle = open(open_held(wal, "-wal", held), "rb")
    except FileNotFoundError:
        return None
    with handle:
        header = handle.read(WAL_HEADER)
        if len(header) < WAL_HEADER:
            return None
        magic, _version, size, _seq, salt1, salt2, c1, c2 = struct.unpack(">8I", header)
        if magic not in WAL_MAGIC or size != page_size:
            return None
        order = ">" if magic & 1 else "<"
        s0, s1 = _checksum(header[:24], 0, 0, order)
        if (s0, s1) != (c1, c2):
            return None
        log = WalLog({}, 0, (s0, s1), header[16:24], 0)
        pending: dict[int, int] = {}
        offset, number = WAL_HEADER, 0
        while last_frame is None or number < last_frame:
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
            number += 1
            pending[page] = offset + FRAME_HEADER
            if commit:
                log.frames.update(pending)
                pending.clear()
                log = WalLog(log.frames, number, (s0, s1), log.salts, commit)
            offset += FRAME_HEADER + page_size
        return log


def wal_frames(wal: Path, page_size: int) -> dict[int, int]:
    """Page number -> offset of its newest committed copy in `wal`; {} when it holds none."""
    log = read_wal(wal, page_size)
    return log.frames if log is not None else {}


def wal_index_header(db_path: Path, held: Held | None = None) -> bytes | None:
    """The `-shm`'s WAL-index header when its two copies agree and its checksum holds, else None.
    `held`: `open_held`'s (its `NotHeld` is raised)."""
    try:
        with open(open_held(f"{db_path}-shm", "-shm", held), "rb") as handle:
            data = handle.read(2 * SHM_HEADER.size)
    except OSError:
        return None
    first, second = data[: SHM_HEADER.size], data[SHM_HEADER.size :]
    if len(second) != SHM_HEADER.size or first != second:
        return None
    fields = SHM_HEADER.unpack(first)
    if fields[0] != SHM_VERSION or fields[3] != 1 or _checksum(first[:40], 0, 0, "=") != fields[-2:]:
        return None
    return first


def read_snapshot_frames(db_path: Path, page_size: int, page_count: int,
                         held: Held | None = None) -> tuple[dict[int, int], bytes, int] | str:
    """(page -> offset of its newest copy among the frames readers see, the WAL-index header that
    says so, the bytes of the `-wal` read to find them), or why the `-shm` does not vouch for them
    (the module docstring lists what must hold). `held`: `open_held`'s."""
    header = wal_index_header(db_path, held)
    if header is None:
        return "the -shm holds no valid WAL-index header"
    _v, _u, _change, _init, _big, size, last, pages, k1, k2, salts, _c1, _c2 = SHM_HEADER.unpack(header)
    if (size if size != 1 else 65536) != page_size:
        return "the WAL-index header's page size is not the read transaction's"
    if last == 0:
        return {}, header, 0  # readers see the main file only (whatever the header's page count)
    if pages != page_count:
        return "the WAL-index header's page count is not the read transaction's"
    log = read_wal(Path(f"{db_path}-wal"), page_size, last, held)
    if log is None or log.commit != last or log.checksum != (k1, k2) or log.salts != salts or log.pages != pages:
        return "the -wal's frames are not the ones its WAL-index header names"
    return log.frames, header, WAL_HEADER + last * (FRAME_HEADER + page_size)


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
    held: Held | None = None  # `open_held`'s

    def __post_init__(self) -> None:
        self.bytes_read = 0  # from the main file and the -wal, by `read`
        self._overlaid = sorted(self.frames)
        self._main = open_held(self.path, "", self.held)
        try:
            self._wal = open_held(f"{self.path}-wal", "-wal", self.held) if self.frames else None
        except BaseException:
            os.close(self._main)
            raise

    @property
    def size(self) -> int:
        return self.page_size * self.page_count

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes of the image from `offset` (whole pages), the WAL's frames laid over."""
        buffer = bytearray(min(length, self.size - offset))
        return bytes(buffer[: self.read_into(memoryview(buffer), offset)])

    def _pread_into(self, fd: int, view: memoryview, offset: int) -> int:
        got = 0
        while got < len(view):
            n = os.preadv(fd, [view[got:]], offset + got)
            if n == 0:
                break
            got += n
        self.bytes_read += got
        return got

    def read_into(self, view: memoryview, offset: int) -> int:
        """Fill `view` (whole pages) with the image from `offset`, the WAL's frames laid over; returns
        how many bytes that is (fewer at the image's end). Raises `CopyDiffers` for a page neither
        file holds: a page of zeros is never invented."""
        length = min(len(view), self.size - offset)
        view = view[:length]
        got = self._pread_into(self._main, view, offset)
        first, last = offset // self.page_size + 1, (offset + length - 1) // self.page_size + 1
        covered = set()
        for page in self._overlaid[bisect_left(self._overlaid, first):]:
            if page > last:
                break
            at = (page - 1) * self.page_size - offset
            assert self._wal is not None
            if self._pread_into(self._wal, view[at : at + self.page_size], self.frames[page]) != self.page_size:
                raise CopyDiffers(page, "the -wal ends before its frame")
            covered.add(page)
        for page in range((offset + got) // self.page_size + 1, last + 1):
            if page not in covered:
                raise CopyDiffers(page, "the source file ends before its page count")
        return length

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

    `exact`: only the journal-mode bytes may differ, and they must say DELETE (a copy written byte for
    byte, which nothing rewrote afterwards); else the `HEADER_SKIP` fields the backup API rewrites.
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


Differs = tuple[int, str]  # (page, why) of a CopyDiffers, as it crosses from the child process


@dataclass(frozen=True)
class Copied:
    """What `copy_from_source` reports: the SHA-256 of what it wrote, the CRC-32 of each `chunk`
    bytes of it, the bytes it read from the source's files; or why it wrote nothing (`fallback`:
    the `-shm` does not vouch for the `-wal`'s frames) or what differs (`differs`)."""

    sha256: str = ""
    crcs: tuple[int, ...] = ()
    chunk: int = 0
    source_bytes_read: int = 0
    fallback: str | None = None
    differs: Differs | None = None


def _write_all(fd: int, view: memoryview, offset: int) -> None:
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def copy_hashed(
    image: SourceImage, out_fd: int, progress: Callable[[int, int], None] | None, step_pages: int
) -> tuple[str, tuple[int, ...], int]:
    """Write the image to `out_fd` as a journal-mode DELETE file, reading each page once: (the
    SHA-256 of what was written, the CRC-32 of each chunk, the chunk's size in bytes).

    Setting the two journal-mode bytes is all `PRAGMA journal_mode = DELETE` changes in a file whose
    WAL holds nothing; the image overlaid with the read snapshot's frames is such a file. One thread,
    one buffer: each chunk is read, hashed, checksummed and written while it is in the CPU's cache.
    (A second thread hashing the previous chunk saved no time on a loaded machine and cost up to
    three times the CPU; bench/bench_snapshot.py's file, 179 MB.)
    """
    step = max(1, step_pages) * image.page_size
    chunk = max(1, min(step, CHUNK_BYTES) // image.page_size) * image.page_size
    hasher = hashlib.sha256()
    crcs: list[int] = []
    buffer = memoryview(bytearray(min(chunk, image.size)))
    offset = 0
    while offset < image.size:
        view = buffer[: image.read_into(buffer, offset)]
        if offset == 0:
            view[JOURNAL_VERSION[0] : JOURNAL_VERSION[1]] = DELETE_MODE
        hasher.update(view)
        crcs.append(zlib.crc32(view))
        _write_all(out_fd, view, offset)
        offset += len(view)
        if progress is not None and (offset % step < len(view) or offset == image.size):
            progress(offset // image.page_size, image.page_count)  # once a step, as the backup API
    return hasher.hexdigest(), tuple(crcs), chunk


def copy_from_source(
    db_path: str, copy: str, page_size: int, page_count: int, step_pages: int, *, wal: bool,
    held: Held | None, progress: Callable[[tuple[int, int]], None] | None = None,
) -> Copied:
    """In a process with no connection to `db_path`: write its image into the existing `copy` in one
    pass (`copy_hashed`); with `wal`, the frames of the read snapshot laid over its main file, when
    the `-shm` vouches for them (`read_snapshot_frames`) before the copy and unchanged after it;
    only `held` files (`open_held`; else, or None: `fallback`, SQLite's backup API copies)."""
    frames: dict[int, int] = {}
    header, parsed = None, 0
    try:
        if held is None:
            raise NotHeld("this system does not list the files the database's connections hold")
        if wal:
            found = read_snapshot_frames(Path(db_path), page_size, page_count, held)
            if isinstance(found, str):
                return Copied(fallback=found)
            frames, header, parsed = found
        image = SourceImage(Path(db_path), page_size, page_count, frames, held)
    except NotHeld as exc:
        return Copied(fallback=str(exc))
    try:
        fd = os.open(copy, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # the file create_exclusive made
        try:
            tick = (lambda done, total: progress((done, total))) if progress else None
            digest, crcs, chunk = copy_hashed(image, fd, tick, step_pages)
        finally:
            os.close(fd)
        if wal and wal_index_header(Path(db_path), held) != header:
            raise CopyDiffers(1, "the database's -wal changed while it was copied")
    except NotHeld as exc:
        return Copied(differs=(1, str(exc)), source_bytes_read=parsed + image.bytes_read)
    except CopyDiffers as exc:
        return Copied(differs=(exc.page, exc.why), source_bytes_read=parsed + image.bytes_read)
    finally:
        image.close()
    return Copied(digest, crcs, chunk, parsed + image.bytes_read)


def compare_with_source(
    db_path: str, copy: str, page_size: int, page_count: int, *, wal: bool, exact: bool
) -> tuple[str | None, Differs | None]:
    """In a process with no connection to `db_path`: (the copy's SHA-256, None) once it proved equal
    to the source's image (its `-wal`'s committed frames laid over when `wal`), else (None, differs).
    What checks a copy SQLite's backup API made (`Copied.fallback`)."""
    frames = wal_frames(Path(f"{db_path}-wal"), page_size) if wal else {}
    image = SourceImage(Path(db_path), page_size, page_count, frames)
    try:
        return compare_and_hash(Path(copy), image, exact=exact), None
    except CopyDiffers as exc:
        return None, (exc.page, exc.why)
    finally:
        image.close()


__all__ = [
    "Copied",
    "CopyDiffers",
    "NotHeld",
    "SourceImage",
    "WalLog",
    "can_block_copy",
    "compare_and_hash",
    "compare_with_source",
    "copy_from_source",
    "copy_hashed",
    "held_files",
    "open_held",
    "read_snapshot_frames",
    "read_wal",
    "wal_frames",
    "wal_index_header",
]
