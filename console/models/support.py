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
