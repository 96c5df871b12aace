"""What every part of the demo writer shares: the connection, the seeded randomness, the frozen
clock, and an insert helper that fits a row to the release's columns.

One `random.Random(seed)` drives everything, consumed in a fixed order, and every timestamp is
derived from `now`; nothing reads the wall clock, so the same seed and clock give the same file.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

from console.db.sql import quote_identifier
from datetime import datetime
from random import Random
from typing import Any, Callable

Progress = Callable[[str, int, int], None]

MINUTE = 60
HOUR = 3600
DAY = 86400


@dataclass
class ProjectInfo:
    """What later sections need to know about a project written earlier."""

    index: int
    id: str
    name: str
    repo_path: str
    provider: str
    created: int  # epoch seconds
    deleting: bool
    configured_checks: bool = False  # archon's hasConfiguredCheckPolicy for the project row
    revisions: list[tuple[str, int, str]] = field(default_factory=list)  # (id, revision, fingerprint)
    active_revision: tuple[str, int, str] | None = None


@dataclass
class DemoContext:
    conn: sqlite3.Connection
    rng: Random
    now: datetime
    release: str
    progress: Progress | None = None
    projects: list[ProjectInfo] = field(default_factory=list)
    _columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _run_counter: int = 0

    @property
    def now_epoch(self) -> int:
        return int(self.now.timestamp())

    @property
    def has_profiles(self) -> bool:
        return self.release != "1.8.20"

    @property
    def has_claims(self) -> bool:
        return self.release == "1.10.0"

    def columns(self, table: str) -> tuple[str, ...]:
        if table not in self._columns:
            self._columns[table] = tuple(
                row[1] for row in self.conn.execute(f"PRAGMA table_info({quote_identifier(table)})")
            )
        return self._columns[table]

    def insert(self, table: str, row: dict[str, Any]) -> None:
        """Insert the keys the table has at this release; the others belong to later releases."""
        present = self.columns(table)
        keys = [k for k in row if k in present]
        if len(keys) != len(row) and self.release == "1.10.0":  # the newest shape has them all
            raise KeyError(f"{table} has no column(s) {sorted(set(row) - set(present))}")
        placeholders = ", ".join("?" for _ in keys)
        self.conn.execute(
            f'INSERT INTO {quote_identifier(table)} ({", ".join(keys)}) VALUES ({placeholders})',
            [row[k] for k in keys],
        )

    def next_run_id(self, kind: str) -> str:
        self._run_counter += 1
        return f"run-{kind}-{self._run_counter:05d}"

    def run(self, project_id: str, kind: str, status: str, created: int, finished: int | None) -> str:
        run_id = self.next_run_id(kind)
        self.insert(
            "execution_runs",
            {
                "id": run_id,
                "project_id": project_id,
                "kind": kind,
                "status": status,
                "created_at": stamp(created),
                "finished_at": stamp(finished) if finished is not None else None,
            },
        )
        return run_id

    def report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)


_DAYS: dict[int, str] = {}
_CLOCK = tuple(f" {h:02d}:{m:02d}:{s:02d}" for h in range(24) for m in range(60) for s in range(60))


def stamp(epoch: int) -> str:
    """Epoch seconds as `YYYY-MM-DD HH:MM:SS` UTC.

    Millions of rows carry three or four timestamps each; a cached date plus a precomputed
    time of day is several times faster than `strftime` per value.
    """
    day, second = divmod(int(epoch), 86400)
    text = _DAYS.get(day)
    if text is None:
        text = _DAYS[day] = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
    return text + _CLOCK[second]


__all__ = ["DAY", "HOUR", "MINUTE", "DemoContext", "ProjectInfo", "Progress", "stamp"]
