"""What the TUI needs to know when it shows a support snapshot instead of a live database.

A model (no textual, no sqlite) so the TUI and the `inspect` command that starts it share one
class while neither front end imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class SupportInfo:
    """The SUPPORT badge: which file the snapshot came from, where it is, and when it was taken."""

    original: Path
    snapshot: Path
    taken_at: datetime
    modified_at: datetime | None = None  # the original's (or its -wal's) mtime when the snapshot was taken

    def as_of(self, newest_recorded: datetime | None) -> tuple[datetime, str]:
        """The instant the snapshot's screens stand at by default, and where it comes from in words.

        The newest time the database itself records (console/services/snapshot_time.py): archon's
        own stamps say when archon last wrote, whereas a copied file's mtime is the copy's. The
        file's mtime only when the database records no time at all, and the moment the snapshot was
        taken when neither is known. Never later than that moment: a row stamped in the future (a
        writer's clock ahead, or a hostile file) cannot move the clock past when the copy was made.
        """
        if newest_recorded is not None:
            if newest_recorded >= self.taken_at:
                return self.taken_at, "when the snapshot was taken (the database records times up to then)"
            return newest_recorded, "the newest time recorded in the database"
        if self.modified_at is not None and self.modified_at < self.taken_at:
            return self.modified_at, "when the file was last modified (the database records no time)"
        return self.taken_at, "when the snapshot was taken"

    # What the SUPPORT badge shows (console/tui/screens/base.py).
    @property
    def original_path(self) -> str:
        return str(self.original)

    @property
    def snapshot_time(self) -> str:
        return self.taken_at.strftime("%Y-%m-%d %H:%M:%S UTC")

    @property
    def badge(self) -> str:
        return f"SUPPORT {self.original} @ {self.taken_at.strftime('%Y-%m-%d %H:%M:%S')} UTC (snapshot, read-only)"
