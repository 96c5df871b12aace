"""The TUI's one handle on the database, shared by every thread worker.

Display workers and writes run in threads; SQLite connections are safe to share only one call at
a time, so every use goes through `Session.run`, which holds a lock for the call. Services get
the same `ArchonDatabase` the CLI would open (read-only when `--read-only`), so the TUI and the CLI
write through the same functions. `data_version` changes when *another* connection commits; the
app polls it to refresh what is on screen.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from console.clock import ScreenClock
from console.db.connect import ArchonDatabase
from console.errors import Refusal
from console.isolation import call_isolated

T = TypeVar("T")

UPGRADE_REASON = "an upgrade is running: wait for it to finish"


class Session:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.lock = threading.RLock()
        self.handle: ArchonDatabase = ctx.open()
        self.upgrading = False  # set by `hold_writes`: see there
        self._schema_version = self._read_schema_version()
        self.clock = ScreenClock(ctx.clock)  # every screen's "now": see `now`

    @property
    def actor(self) -> str:
        return self.ctx.actor

    @property
    def read_only(self) -> bool:
        return bool(self.ctx.read_only)

    @property
    def db_path(self) -> Path:
        return Path(self.ctx.db_path)

    @property
    def release(self) -> str | None:
        """The archon release the database's shape matches (None when unknown)."""
        return self.handle.shape.release

    def now(self) -> datetime:
        """For reading and rendering, on every screen: the one clock (console/clock.py `ScreenClock`),
        live or standing at a support snapshot's time."""
        return self.clock()

    def write_now(self) -> datetime:
        """For a write: the real clock (console/clock.py `write_clock`)."""
        return self.ctx.write_now()

    def write_note(self) -> str | None:
        """Set after a write while `$ARCHON_CONSOLE_NOW` is set: the real clock was used."""
        return getattr(self.ctx, "write_note", None)

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(handle, *args, **kwargs)` with the connection to itself. A value or a statement over
        the limits (console/db/limits.py) becomes its one sentence, as in the CLI."""
        with self.lock:
            try:
                return fn(self.handle, *args, **kwargs)
            except sqlite3.Error as exc:
                from console.db.limits import explain

                over = explain(exc, self.handle.conn)
                if over is not None:
                    raise over from None
                raise

    def _read_schema_version(self) -> int:
        with self.lock:
            return int(self.handle.conn.execute("PRAGMA schema_version").fetchone()[0])

    def reread_shape(self) -> bool:
        """After another commit (the app's poll): whether the schema changed since the shape was
        detected (an upgrade, here or by another process). Then the shape is detected again, and
        everything derived from the release must be re-read (`ArchonConsole.ReleaseChanged`).
        One integer read when nothing changed."""
        with self.lock:
            version = self._read_schema_version()
            if version == self._schema_version:
                return False
            self._schema_version = version
            self.handle.forget_shape()
            return True

    def data_version(self) -> int:
        with self.lock:
            return int(self.handle.conn.execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def hold_writes(self) -> Iterator[None]:
        """While an upgrade runs in its child process, nothing this console does may write to the
        file: the upgrade's per-step holder check ignores this process (its own connection is not
        "another user"), so a write from here would land unseen on a schema between two steps.
        Every screen's write actions read `upgrading` (console/tui/screens/base.py greys them and
        refuses them); the connection itself is `query_only` for the run, so a write that got past
        the screens would still be refused by SQLite. Taken under the lock: a write already running
        finishes first. Cleared however the run ends, and the detected shape forgotten (steps may
        have committed even when the run failed)."""
        with self.lock:
            self.upgrading = True
            if not self.read_only:
                self.handle.conn.execute("PRAGMA query_only = ON")
        try:
            yield
        finally:
            with self.lock:
                self.handle.forget_shape()
                try:
                    if not self.read_only:
                        self.handle.conn.execute("PRAGMA query_only = OFF")
                except sqlite3.ProgrammingError:  # the app exited during the run: the handle is closed
                    pass
                self.upgrading = False

    def isolated(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """`call_isolated` for a screen: a child process opens the database's files, so while this
        console's own upgrade runs it would be another holder, and the upgrade's per-step check would
        stop the run part-way (`hold_writes`). Refused then, for every child but the run itself."""
        if self.upgrading:
            raise Refusal(f"Not started: {UPGRADE_REASON}.")
        return call_isolated(function, *args, **kwargs)

    def close(self) -> None:
        with self.lock:
            self.handle.close()


__all__ = ["Session"]
