"""Reading a database that another process keeps changing, for as long as the reader runs.

`approvals watch` and `audit --follow` sit on archon's file for hours. Three things happen to the file
in that time, and each needs its own way of noticing:

- archon commits: `PRAGMA data_version` moves (free to ask when nothing changed);
- nobody had the file open when we opened it, so it was opened `immutable=1` (readonly.py: a plain
  read-only open would create a -wal and -shm beside it) and SQLite will never report a change: the
  file's size, mtime and inode (and its -wal's) are watched instead, and it is opened afresh when
  they move;
- `restore` or an operator replaces the file, or it disappears for a while: the path's inode differs
  from the one our connection holds (which still reads the old, unlinked file), or the path is gone.
  The reader closes its connection, says so, and opens the new file when there is one.

Only `stat()` touches the path between opens: opening or closing another descriptor on the file in
this process would drop the POSIX locks our own connection holds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from console.errors import ConsoleError, Refusal

UNCHANGED, CHANGED, REOPENED, GONE = "unchanged", "changed", "reopened", "gone"


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _mark(path: Path) -> tuple:
    marks = []
    for suffix in ("", "-wal"):
        try:
            st = os.stat(f"{path}{suffix}")
            marks.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            marks.append(None)
    return tuple(marks)


class LiveReader:
    """A read-only handle that follows the file at `path` through commits, restarts and replacement.

    `poll()` answers what happened since the last call: UNCHANGED, CHANGED (same file, new commits),
    REOPENED (a different file is at the path now, or it came back), or GONE (no usable file right
    now; `problem` says why). `handle` is None while GONE.
    """

    def __init__(self, path: Path, opener: Callable[[], object]):
        self.path = Path(path)
        self._opener = opener
        self.handle = None
        self.problem: str | None = None
        self._identity: tuple[int, int] | None = None
        self._version: object = None

    # ------------------------------------------------------------------ opening
    def open(self) -> None:
        """The first open: failures propagate (a bad path is the user's error, said at once)."""
        self._open()

    def _open(self) -> None:
        self.handle = self._opener()
        self._identity = _identity(self.path)
        self._version = self._current_version()

    def require_in_place(self, what: str) -> None:
        """Following a private copy would show nothing new, ever: say so instead."""
        if self.handle.opened.startswith("private copy"):
            raise Refusal(f"{what} needs to read the file itself, and this one can only be read through a "
                          f"{self.handle.opened}.", "Run it as a user who can read the database's -shm.")

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    @property
    def follows_commits(self) -> bool:
        """False where SQLite cannot report commits (immutable=1): the file's mark is used."""
        return self.handle is not None and not self.handle.opened.startswith("in place (immutable")

    def _current_version(self) -> object:
        if self.follows_commits:
            return self.handle.conn.execute("PRAGMA data_version").fetchone()[0]
        return _mark(self.path)

    # ------------------------------------------------------------------ polling
    def poll(self) -> str:
        identity = _identity(self.path)
        if identity is None:
            self.close()
            self.problem = f"{self.path} is not there"
            return GONE
        if self.handle is None or identity != self._identity:
            self.close()
            try:
                self._open()
            except ConsoleError as exc:  # half-written, not a database yet, unreadable: try again later
                self.close()
                self.problem = exc.reason
                return GONE
            self.problem = None
            return REOPENED
        version = self._current_version()
        if version == self._version:
            return UNCHANGED
        if self.follows_commits:
            self._version = version
            return CHANGED
        self.close()  # immutable=1 keeps showing the file as it was: open it afresh
        try:
            self._open()
        except ConsoleError as exc:
            self.close()
            self.problem = exc.reason
            return GONE
        return CHANGED


__all__ = ["CHANGED", "GONE", "LiveReader", "REOPENED", "UNCHANGED"]
