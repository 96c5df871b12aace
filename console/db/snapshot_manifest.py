"""A snapshot's SHA-256, kept where it survives a move: a manifest file beside the snapshot.

The ledger inside the database records each snapshot's path and SHA-256, but a path stops
matching once the snapshot is moved, and the ledger is gone from a database that was restored to
its pre-upgrade state. So every snapshot also gets `<snapshot>.sha256`, one line in `sha256sum`
format (`<hex>  <file name>`; `sha256sum -c` reads it), and `restore` looks a snapshot up by the
hash of its content: the manifest beside it, a manifest of the same hash in its directory or the
database's (a snapshot renamed without its manifest), or a ledger row.

A manifest is written exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`), never over an existing file or
through a symlink, and read without following one. Its text proves nothing about who wrote it: anyone
who can write the directory can put a snapshot of their choosing beside a manifest of their choosing.
So a manifest vouches for a snapshot only when nobody but the operator (or root) could have placed
either (`untrusted_because`): both are regular files owned by the operator's effective uid or by
root, neither is group- or world-writable, and every directory from theirs up to `/` is owned by the
operator or root and is not group- or world-writable unless it has the sticky bit (a 1777 `/tmp`:
there only a file's owner, the directory's owner and root can rename or remove a file). The ledger
inside the database outranks any manifest (console/services/upgrade/restore.py).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Iterable

SUFFIX = ".sha256"
MAX_BYTES = 4096  # a manifest is one line; anything bigger is not one of ours
MAX_SCANNED = 2000  # directory entries looked at when searching for a manifest by hash
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def manifest_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + SUFFIX)


def write_manifest(snapshot: Path, sha256: str) -> Path:
    """Create `<snapshot>.sha256`; `FileExistsError` if the name is taken (the caller picks another)."""
    target = manifest_path(snapshot)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, f"{sha256}  {snapshot.name}\n".encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        target.unlink()
        raise
    os.close(fd)
    return target


def read_manifest(path: Path) -> str | None:
    """The SHA-256 a manifest records, or None when the file is absent or not a manifest."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return None
    try:
        first = data.decode("ascii").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return None
    match = _LINE.match(first.strip())
    return match.group(1) if match else None


def untrusted_because(manifest: Path, snapshot: Path) -> str | None:
    """Why `manifest` cannot vouch for `snapshot` (another user could have placed one of them), or None.

    Judged on what the paths name now; the restore re-hashes its copy, so a swap after this check
    changes nothing that was restored."""
    trusted_uids = {os.geteuid(), 0}
    directories: list[Path] = []
    for what, path in (("its manifest", manifest), ("the snapshot", snapshot)):
        try:
            status = os.lstat(path)
            directory = path.parent.resolve(strict=True)
        except OSError as exc:
            return f"{what} {path} cannot be examined ({exc.strerror or exc})"
        if not stat.S_ISREG(status.st_mode):
            return f"{what} {path} is not a regular file"
        if status.st_uid not in trusted_uids:
            return f"{what} {path} is owned by uid {status.st_uid}, not by you or root"
        if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{what} {path} can be written by other users"
        directories.append(directory)
    seen: set[Path] = set()
    for directory in directories:
        for folder in (directory, *directory.parents):
            if folder in seen:
                break
            seen.add(folder)
            try:
                status = os.stat(folder)
            except OSError as exc:
                return f"the directory {folder} cannot be examined ({exc.strerror or exc})"
            if status.st_uid not in trusted_uids:
                return f"the directory {folder} is owned by uid {status.st_uid}, not by you or root"
            if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not status.st_mode & stat.S_ISVTX:
                return f"other users can write the directory {folder}, so they could have replaced what is in it"
    return None


def manifests_with_hash(directories: Iterable[Path], sha256: str) -> list[Path]:
    """Manifests in `directories` (not below them) that record `sha256`."""
    found: list[Path] = []
    seen: set[Path] = set()
    for directory in directories:
        try:
            directory = directory.resolve()
        except OSError:
            continue
        if directory in seen:
            continue
        seen.add(directory)
        try:
            with os.scandir(directory) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_SCANNED:
                        break
                    if entry.name.endswith(SUFFIX) and read_manifest(Path(entry.path)) == sha256:
                        found.append(Path(entry.path))
        except OSError:
            continue
    return found


__all__ = ["SUFFIX", "manifest_path", "manifests_with_hash", "read_manifest", "untrusted_because", "write_manifest"]
