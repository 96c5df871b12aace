"""The fleet client's private directories: ssh's control sockets and the cache of hosts' reads.

A control socket is a logged-in session to a host: whoever can connect to it runs commands there
as the operator. A cache file is what the console shows when a host is down. So both live in a
directory only the operator can use, and that is checked, not assumed: the directory is created
0700, and before every use `lstat` must show a directory (not a symlink) owned by this user with
no permission for anyone else, on a path nobody else can rename it out of: every directory and
link from `/` down is judged by the project's one trust walk (console/db/file_trust.py: owned by
this user or root, and not writable by others unless sticky, as /tmp is), not only the nearest
parent, which the console itself may have created inside a directory others can write. Anything
else is refused with one sentence; the console never chmods or deletes what it did not create. A
relative `$XDG_CACHE_HOME` is ignored, as the XDG spec says (it would name a tree under whatever
directory the console was started in).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from console.db.file_trust import directory_placed_by_others
from console.errors import EXIT_UNUSABLE, ConsoleError


class PrivateDirUnusable(ConsoleError):
    """A directory the fleet client will not use (exit 3): someone else could read or replace
    what is in it."""

    exit_code = EXIT_UNUSABLE


def cache_home() -> Path:
    value = os.environ.get("XDG_CACHE_HOME")
    return Path(value) if value and os.path.isabs(value) else Path.home() / ".cache"


def _check(path: Path, info: os.stat_result, *, parent: bool) -> None:
    uid = os.getuid()
    if stat.S_ISLNK(info.st_mode):
        raise PrivateDirUnusable(f"{path} is a symbolic link, not a directory of this user's.",
                                 "Remove it; the console creates the directory itself.")
    if not stat.S_ISDIR(info.st_mode):
        raise PrivateDirUnusable(f"{path} is not a directory.", "Remove it; the console creates the directory itself.")
    if parent:
        if info.st_uid not in (uid, 0):
            raise PrivateDirUnusable(f"{path} belongs to another user (uid {info.st_uid}).",
                                     "Point XDG_RUNTIME_DIR or XDG_CACHE_HOME at a directory of your own.")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise PrivateDirUnusable(f"{path} can be written by other users, who could replace what is in it.",
                                     f"Run chmod go-w {path}, or point XDG_RUNTIME_DIR or XDG_CACHE_HOME elsewhere.")
        return
    if info.st_uid != uid:
        raise PrivateDirUnusable(f"{path} belongs to another user (uid {info.st_uid}).",
                                 "Remove it (it is not the console's) or point XDG_RUNTIME_DIR or XDG_CACHE_HOME "
                                 "elsewhere.")
    if info.st_mode & 0o077:
        raise PrivateDirUnusable(f"{path} can be used by other users (mode {stat.S_IMODE(info.st_mode):o}).",
                                 f"Run chmod 700 {path}.")


def private_dir(path: Path) -> Path:
    """`path`, created 0700 when absent (its missing parents too), after the checks above."""
    path = Path(os.path.abspath(path))
    try:
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        _check(path.parent, os.stat(path.parent), parent=True)
        _check(path, os.lstat(path), parent=False)
        why = directory_placed_by_others(path)
        if why is not None:
            raise PrivateDirUnusable(f"{path} is not private: {why}.",
                                     "Point XDG_RUNTIME_DIR or XDG_CACHE_HOME at a directory only you can change.")
    except OSError as exc:
        raise PrivateDirUnusable(f"{path} cannot be used: {exc.strerror or exc}.",
                                 "Check the directory's permissions.") from None
    return path


__all__ = ["PrivateDirUnusable", "cache_home", "private_dir"]
