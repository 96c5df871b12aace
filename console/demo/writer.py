"""`generate`: a whole demo database, written to a temporary name and renamed into place.

The schema comes from the migration registry (the same code `upgrade` runs) without our ledger,
as archon itself would have left the file. Data is bulk-loaded in one transaction with the
journal off (a failed run deletes the temporary file, so there is nothing to roll back to), with
foreign keys and every archon trigger active, and the finished file is switched to WAL like a
live archon database.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from random import Random

from console.db.sql import quote_identifier
from console.clock import parse_time, system_clock
from console.db.migrations.registry import CURRENT_RELEASE, migrations_through
from console.db.migrations.runner import MigrationFailed, apply_all
from console.demo.approvals import write_approvals
from console.demo.context import DemoContext, Progress
from console.demo.environments import write_environments
from console.demo.history import meaning, write_history
from console.demo.projects import write_projects
from console.demo.work import write_work
from console.db.files import create_exclusive, publish, remove_stale, temp_prefix
from console.db.connection import sqlite_connection
from console.errors import DatabaseUnusable, Refusal, UsageError

RELEASE_ALIASES = {"current": CURRENT_RELEASE, "1.8.20": "1.8.20", "1.8.22": "1.8.22",
                   "1.10.0": "1.10.0"}


@dataclass(frozen=True)
class DemoSummary:
    path: Path
    release: str
    seed: int
    now: datetime
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    requests: int = 0  # the N asked for; what it stands for depends on the release:
    requests_meaning: str = ""  # console.demo.history.meaning(release)

    def as_dict(self) -> dict:
        return {
            "path": str(self.path),
            "release": self.release,
            "seed": self.seed,
            "now": self.now.isoformat(),
            "seconds": round(self.seconds, 2),
            "requests": self.requests,
            "requests_meaning": self.requests_meaning,
            "counts": dict(self.counts),
        }


def generate(
    path: str | os.PathLike[str],
    *,
    release: str = "current",
    requests: int = 200,
    projects: int = 6,
    environments: int = 24,
    seed: int = 7,
    now: datetime | str | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
    wal: bool = True,
) -> DemoSummary:
    """Write a demo archon database of `release` shape at `path` and say what it holds.

    `requests` is N approval requests from 1.8.22 on; at 1.8.20, which has no approval tables,
    it sizes the run history instead (about N execution runs; console/demo/history.py).
    """
    started = time.perf_counter()
    target = Path(path)
    resolved = RELEASE_ALIASES.get(release)
    if resolved is None:
        raise UsageError(
            f"Unknown release {release!r}; choose one of 1.8.20, 1.8.22 or current ({CURRENT_RELEASE})."
        )
    if requests < 0 or projects < 1 or environments < 0:
        raise UsageError("Counts must be positive (at least one project).")
    moment = _resolve_now(now)
    if os.path.lexists(target) and not overwrite:
        raise Refusal(f"{target} already exists; nothing was written.",
                      "Pass --overwrite to replace it.")
    if not target.parent.is_dir():
        raise Refusal(f"The directory {target.parent} does not exist.")
    remove_stale(target.parent)  # what a killed run left: it takes space
    temporary: Path | None = None
    try:
        # Created exclusively under a random name: never a file someone planted (console/db/files.py).
        temporary = create_exclusive(target.parent, temp_prefix("demo") + target.name + ".", ".tmp")
        conn = sqlite_connection(temporary)
        try:
            _build(conn, resolved, requests, projects, environments, seed, moment, progress)
            conn.execute(f"PRAGMA journal_mode = {'WAL' if wal else 'DELETE'}")
            counts = _counts(conn)
        finally:
            conn.close()
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp made it 0600; a demo file is made as any other
        if overwrite:
            for suffix in ("-wal", "-shm", "-journal"):
                _remove(Path(str(target) + suffix))
        publish(temporary, target, no_clobber=not overwrite)  # os.replace never writes through a link
        temporary = None
    except FileExistsError:
        raise Refusal(f"{target} appeared while the demo was being written; it was left alone.",
                      "Pass --overwrite to replace it.") from None
    except (OSError, sqlite3.OperationalError, MigrationFailed) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "message", None) or str(exc)
        raise DatabaseUnusable(
            f"The demo database could not be written in {target.parent} ({reason}); "
            "the partial file was removed and nothing else changed.",
            "Free some space there (or choose another path) and run it again.",
        ) from None
    finally:
        if temporary is not None:
            for leftover in (temporary, Path(f"{temporary}-journal"), Path(f"{temporary}-wal"),
                             Path(f"{temporary}-shm")):
                _remove(leftover)
    return DemoSummary(target, resolved, seed, moment, time.perf_counter() - started, counts,
                       requests=requests, requests_meaning=meaning(resolved))


def _build(conn, release, requests, projects, environments, seed, moment, progress) -> None:
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, migrations_through(release))  # no `record`: no ledger, as archon leaves it
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB: the bulk indexes stay in memory
    conn.execute("PRAGMA temp_store = MEMORY")
    ctx = DemoContext(conn=conn, rng=Random(seed), now=moment, release=release, progress=progress)
    conn.execute("BEGIN")
    write_projects(ctx, projects)
    ctx.report("projects", projects, projects)
    write_work(ctx)
    write_environments(ctx, environments)
    ctx.report("environments", environments, environments)
    write_approvals(ctx, requests)  # 1.8.22 and later
    write_history(ctx, requests)  # 1.8.20 only, after everything else: the small data stays as it was
    conn.execute("COMMIT")
    conn.execute("PRAGMA synchronous = FULL")


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    tables = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " ORDER BY name")]
    return {t: conn.execute(f"SELECT count(*) FROM {quote_identifier(t)}").fetchone()[0] for t in tables}


def _resolve_now(now: datetime | str | None) -> datetime:
    if now is None:
        return system_clock()
    parsed = parse_time(now)
    if parsed is None:
        raise UsageError(f"Cannot read {now!r} as a time (use ISO 8601, e.g. 2026-05-01T12:00:00Z).")
    return parsed.replace(microsecond=0)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
