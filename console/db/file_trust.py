"""Whether another local user could have placed a file, judged on the very file that is then read.

A file's content proves nothing about who wrote it. The console trusts an existing file (a
snapshot's manifest, a snapshot it may reuse, the database whose upgrade ledger vouches for a
snapshot) only when nobody but the operator or root could have put it where it is. The rule, in one
place, applied to every name looked up on the way from `/` to the file (each directory, each
symbolic link followed, the file itself):

* the entry is owned by the operator's effective uid or by root;
* the directory holding it is owned by the operator or root and is not group- or world-writable,
  unless it has the sticky bit (a 1777 `/tmp`: there only an entry's owner, the directory's owner
  and root can rename or remove it, and the entry is the operator's or root's by the first rule);
* the file is a regular file that is neither group- nor world-writable.

The walk holds a descriptor on each directory and looks the next name up relative to it
(`dir_fd`, `O_NOFOLLOW`); symbolic links are read and followed by the walk itself, each judged like
any other entry. So what is judged is what is opened: `open_judged` hands back a descriptor on the
file the rule was applied to, and the caller hashes and copies through it (a path looked up again
could name another file by then), and opens files beside it through the held directory
(`Judged.sibling`). Files created by the console (snapshots, manifests, bundles) are made elsewhere,
exclusively; this module never creates anything.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from console.records import dataclass
from pathlib import Path

from console.db.file_guard import connected_file, open_foreign

_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # as the kernel's own limit for one lookup (ELOOP)


def _trusted_uids() -> set[int]:
    return {os.geteuid(), 0}


def _owner_why(status: os.stat_result, shown: str) -> str | None:
    if status.st_uid not in _trusted_uids():
        return f"{shown} is owned by uid {status.st_uid}, not by you or root"
    return None


def directory_why(status: os.stat_result, shown: str) -> str | None:
    """Why entries of this directory could have been replaced by another user, or None: the one rule
    for trusting what is in a directory and for choosing where to write (console/db/files.py)."""
    if status.st_uid not in _trusted_uids():
        return f"the directory {shown} is owned by uid {status.st_uid}, not by you or root"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not status.st_mode & stat.S_ISVTX:
        return f"other users can write the directory {shown}, so they could have replaced what is in it"
    return None


def _file_why(status: os.stat_result, shown: str) -> str | None:
    if not stat.S_ISREG(status.st_mode):
        return f"{shown} is not a regular file"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{shown} can be written by other users"
    return _owner_why(status, shown)


def _join(parts: list[str]) -> str:
    return "/" + "/".join(parts)


@dataclass
class Judged:
    """A file opened through a judged walk, with the descriptor of the directory that holds it.

    `untrusted` says why another user could have placed it (None: only the operator or root could);
    `dir_untrusted` the same for the directories and links on the way, without the file itself.
    """

    path: str
    fd: int
    dir_fd: int
    name: str
    status: os.stat_result
    untrusted: str | None
    dir_untrusted: str | None

    def sibling(self, name: str) -> "Judged":
        """Open `name` in the same held directory, judged by the same rule (`OSError` if absent)."""
        shown = str(Path(self.path).with_name(name))
        why = self.dir_untrusted or _entry_why(self.dir_fd, name, shown)
        fd = open_foreign(name, dir_fd=self.dir_fd)  # a hard link to a connected -shm is refused and kept
        try:
            status = os.fstat(fd)
            why = why or _file_why(status, shown)
            return Judged(shown, fd, os.dup(self.dir_fd), name, status, why, self.dir_untrusted)
        except BaseException:
            os.close(fd)
            raise

    def still_named(self) -> bool:
        """The held directory's entry still names the held file (nothing renamed over it)."""
        try:
            now = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (self.status.st_dev, self.status.st_ino)

    def close(self) -> None:
        for fd in (self.fd, self.dir_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "Judged":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _entry_why(dir_fd: int, name: str, shown: str) -> str | None:
    """The rule for one name in a held directory: the directory's, then the entry's owner."""
    directory = os.fstat(dir_fd)
    why = directory_why(directory, str(Path(shown).parent))
    if why:
        return why
    return _owner_why(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), shown)


def _walk(path: str | os.PathLike[str]) -> tuple[int, str, list[str], str | None]:
    """Hold the directory that contains `path`'s last name: (its fd, the name, shown parts, why).

    Follows symbolic links itself, judging each; `OSError` when a name is missing or the links loop.
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise FileNotFoundError(errno.ENOENT, "empty path", text)
    if not text.startswith("/"):
        text = os.path.join(os.getcwd(), text)
    parts = deque(p for p in text.split("/") if p not in ("", "."))
    shown: list[str] = []
    current = os.open("/", _DIR_FLAGS)
    why: str | None = None
    links = 0
    try:
        while True:
            if not parts:  # the path names a directory (or "/"): no file to judge
                raise IsADirectoryError(errno.EISDIR, "is a directory", text)
            name = parts.popleft()
            if name == "..":
                parent = os.open("..", _DIR_FLAGS, dir_fd=current)
                os.close(current)
                current = parent
                if shown:
                    shown.pop()
                why = why or directory_why(os.fstat(current), _join(shown))
                continue
            here = _join([*shown, name])
            status = os.stat(name, dir_fd=current, follow_symlinks=False)
            why = why or _entry_why(current, name, here)
            if stat.S_ISLNK(status.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, "too many levels of symbolic links", text)
                target = os.readlink(name, dir_fd=current)
                parts.extendleft(reversed([p for p in target.split("/") if p not in ("", ".")]))
                if target.startswith("/"):
                    os.close(current)
                    current = os.open("/", _DIR_FLAGS)
                    shown = []
                continue
            if not parts:
                return current, name, shown, why
            following = os.open(name, _DIR_FLAGS, dir_fd=current)
            opened = os.fstat(following)
            os.close(current)
            current = following
            if (opened.st_dev, opened.st_ino) != (status.st_dev, status.st_ino):
                why = why or f"{here} was replaced while it was examined"
            shown.append(name)
            why = why or directory_why(opened, here)
    except BaseException:
        os.close(current)
        raise


def open_judged(path: str | os.PathLike[str]) -> Judged:
    """Open `path` for reading through a judged walk (`OSError` if it cannot be opened).

    Opens whatever the walk reaches: a caller that needs trust checks `untrusted`; a caller that
    does not (a restore the operator accepted `--unverified`) still reads one file through one fd.
    A file of a database this process holds a connection to is refused (`EBUSY`), whatever named it
    (a ledger, a planted hard link): its descriptor's close would drop the connection's locks
    (console/db/file_guard.py).
    """
    if connected_file(path) is not None:
        raise OSError(errno.EBUSY, "a file of a database this process has open", os.fspath(path))
    dir_fd, name, shown, dir_why = _walk(path)
    try:
        here = _join([*shown, name])
        fd = open_foreign(name, dir_fd=dir_fd)  # judged again by what it opened (file_guard.py)
    except BaseException:
        os.close(dir_fd)
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        why = dir_why or _file_why(status, here)
    except BaseException:
        os.close(fd)
        os.close(dir_fd)
        raise
    return Judged(os.fspath(path), fd, dir_fd, name, status, why, dir_why)


def directory_placed_by_others(path: str | os.PathLike[str]) -> str | None:
    """Why another user could rename, replace or redirect the directory `path` (any directory or
    link on the way from `/`, or the directory's own owner), or None; the caller checks the
    directory's own mode. For directories the console keeps private (console/fleet/private.py)."""
    try:
        dir_fd, _name, _shown, why = _walk(path)
    except OSError as exc:
        return f"{path} cannot be examined ({exc.strerror or exc})"
    os.close(dir_fd)
    return why


def untrusted_because(*paths: str | os.PathLike[str]) -> str | None:
    """Why another user could have placed one of `paths` (the first reason found), or None.

    Judges without opening the files: for a file another component opens itself (the database,
    which only SQLite opens, console/db/connect.py).
    """
    for path in paths:
        try:
            dir_fd, name, shown, why = _walk(path)
        except OSError as exc:
            return f"{path} cannot be examined ({exc.strerror or exc})"
        try:
            why = why or _file_why(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), _join([*shown, name]))
        except OSError as exc:
            why = f"{path} cannot be examined ({exc.strerror or exc})"
        finally:
            os.close(dir_fd)
        if why:
            return why
    return None


__all__ = ["Judged", "MAX_LINKS", "directory_placed_by_others", "open_judged", "untrusted_because"]
