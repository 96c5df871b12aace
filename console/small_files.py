"""The one way the console reads its own small files: saved views, keymap, settings, watch cursor.

Their paths come from the environment and from directories other people may share, so the file
there can be anything: a FIFO blocks `open()` and `read()` for ever, `/dev/zero` (or a symlink to
it) never ends, a 10 GB file fills memory. A file is read only when `lstat` shows a regular file
(not a symlink, FIFO or device), it is opened `O_NONBLOCK | O_NOFOLLOW` (a file swapped in between
cannot block or redirect the open), `fstat` on the open descriptor confirms the same regular file
under `MAX_BYTES`, and at most `MAX_BYTES + 1` bytes are read whatever it claims.

The TOML settings files (saved views, notification settings, keymap) are all read by `read_toml`:
the reading, the size cap, the decoding and the sentence about a file that cannot be used are one
mechanism; each caller checks only its own keys and types, and says what is wrong with
`SettingsUnusable`, in the same words.
"""

from __future__ import annotations

import errno
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

MAX_BYTES = 1024 * 1024  # a views file of a thousand views is ~100 KB


class NotASmallFile(OSError):
    """The path holds something other than a regular file under `MAX_BYTES`; `strerror` says what."""

    def __init__(self, path: Path, why: str):
        super().__init__(errno.EINVAL, why, str(path))

    def __str__(self) -> str:
        return str(self.strerror)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def read_small_text(path: str | os.PathLike[str], *, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of `path`. FileNotFoundError when absent; `NotASmallFile` (an OSError) when
    it is not a regular file or is larger than `limit`; UnicodeDecodeError when not UTF-8."""
    path = Path(path)
    before = os.lstat(path)
    if not stat.S_ISREG(before.st_mode):
        raise NotASmallFile(path, f"{path} is {_kind(before.st_mode)}, not a regular file; it was not read")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a symlink after the lstat
            raise NotASmallFile(path, f"{path} is a symbolic link, not a regular file; it was not read") from None
        raise
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise NotASmallFile(path, f"{path} was replaced while it was opened; it was not read")
        if now.st_size > limit:
            raise NotASmallFile(path, f"{path} is {now.st_size:,} bytes, more than the {limit:,} a settings file "
                                      "may have; it was not read")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NotASmallFile(path, f"{path} grew past {limit:,} bytes while it was read; it was not read")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


class SettingsUnusable(ValueError):
    """A settings file the console ignores; `str()` is the one sentence about it:
    `Ignored WHAT in FILE: why; what to do.` (the defaults apply meanwhile, so it is never fatal)."""

    def __init__(self, what: str, path: str | os.PathLike[str], why: str, todo: str = "fix or remove the file"):
        super().__init__(f"Ignored {what} in {path}: {why}; {todo}.")


def read_toml(path: str | os.PathLike[str], what: str) -> dict[str, Any] | None:
    """The TOML document in `path` (`what` names it in a refusal: "the keymap"); None when there is
    no file. `SettingsUnusable` when it cannot be read, is not a small regular file, is not UTF-8 or
    is not TOML."""
    try:
        text = read_small_text(path)
    except FileNotFoundError:
        return None
    except NotASmallFile as exc:
        raise SettingsUnusable(what, path, str(exc), "put a regular file there or remove it") from None
    except OSError as exc:
        raise SettingsUnusable(what, path, exc.strerror or str(exc), "check that the file can be read") from None
    except UnicodeDecodeError as exc:
        raise SettingsUnusable(what, path, f"it is not UTF-8 text ({exc.reason} at byte {exc.start})",
                               "save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsUnusable(what, path, f"it is not valid TOML ({exc})") from None
    except RecursionError:  # arrays or inline tables nested deeper than the parser's stack
        raise SettingsUnusable(what, path, "it is nested too deeply to be read") from None


__all__ = ["MAX_BYTES", "NotASmallFile", "SettingsUnusable", "read_small_text", "read_toml"]
