"""`doctor`: named checks over an archon database, each finding with ids, counts, why and what to do.

Doctor never writes. Given a path it opens the file through `readonly.open_read_only` (in place for
a rollback-journal file, through a private copy for WAL), so nothing beside the original changes.

Every check is set-based SQL (one scan, GROUP BY, NOT EXISTS) that returns only anomalous rows; the
only Python loop runs over profile revisions, whose fingerprints need SHA-256 (there are few). The
integrity scan (`quick_check`, or `integrity_check` with `full`) runs on its own connection in a
thread while the other checks run, so on two cores doctor takes about as long as the bare scan.

Exit codes (`Report.exit_code`): 3 when the console cannot use the database at all -- the same
conditions under which every other command refuses to open it: not a SQLite file, a truncated file,
an unreadable schema, not an archon database, or an upgrade ledger this console cannot vouch for
(written by a newer console, edited, or with changed checksums). Doctor still prints every finding
it could gather in those cases; only a file that is not SQLite at all gets one sentence. Otherwise 1
when there is an error (or, with `strict`, a warning), else 0.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from console.clock import db_time, parse_time
from console.db.connect import ARCHON_CORE_TABLES, ArchonDatabase
from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE, detect_shape
from console.db.execution_profiles import fingerprint_json
from console.db.readonly import is_wal_header, open_read_only, reconnect, stat_token
from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from console.text import one_line

SEVERITIES = ("error", "warning", "info")
ROW_LIMIT = 100  # rows kept per finding for "jump to row"; counts are always exact
SHOWN_IDS = 10  # ids spelled out in `found`
DEFAULT_STALE_AFTER = timedelta(minutes=15)
ADMITTING_STATES = ("ready", "running", "stopped")


@dataclass
class Finding:
    id: str
    severity: str
    title: str
    found: str
    why: str
    what_to_do: str
    rows: list[dict[str, str]] = field(default_factory=list)
    count: int = 0
    unusable: bool = False
    check: str = ""  # the named check that produced it (set by the runner)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    path: str
    mode: str
    generated_at: str
    checks_run: list[str]
    findings: list[Finding]
    opened: str = ""

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    @property
    def usable(self) -> bool:
        return not any(f.unusable for f in self.findings)

    def exit_code(self, *, strict: bool = False) -> int:
        if not self.usable:
            return EXIT_UNUSABLE
        counts = self.counts()
        if counts["error"] or (strict and counts["warning"]):
            return EXIT_REFUSED
        return EXIT_OK

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def to_json(self, *, strict: bool = False) -> dict[str, Any]:
        return {
            "path": self.path,
            "mode": self.mode,
            "generated_at": self.generated_at,
            "opened": self.opened,
            "usable": self.usable,
            "exit_code": self.exit_code(strict=strict),
            "counts": self.counts(),
            "checks_run": list(self.checks_run),
            "findings": [f.to_json() for f in self.findings],
        }

    def to_text(self, *, strict: bool = False) -> str:
        lines = [
            f"archon-console doctor: {one_line(self.path)}",
            f"mode {self.mode}, at {self.generated_at} UTC, checks: {', '.join(self.checks_run)}",
            "",
        ]
        order = {s: i for i, s in enumerate(SEVERITIES)}
        for f in sorted(self.findings, key=lambda f: order[f.severity]):
            lines.append(f"[{f.severity.upper()}] {f.id}: {one_line(f.title)}")
            lines.append(f"  found: {one_line(f.found)}")
            if f.why:
                lines.append(f"  why: {one_line(f.why)}")
            if f.what_to_do:
                lines.append(f"  what to do: {one_line(f.what_to_do)}")
            lines.append("")
        c = self.counts()
        verdict = {0: "no errors", 1: "errors found", 3: "the console cannot use this database"}[
            self.exit_code(strict=strict)
        ]
        lines.append(f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info: {verdict}.")
        return "\n".join(lines)


# --- helpers ---------------------------------------------------------------------------------


def _ids_text(ids: Sequence[str], total: int) -> str:
    shown = ", ".join(one_line(i, 80) for i in ids[:SHOWN_IDS])
    more = total - min(len(ids), SHOWN_IDS)
    return shown + (f" and {more} more" if more > 0 else "")


def _rows(table: str, ids: Iterable[Any]) -> list[dict[str, str]]:
    return [{"table": table, "id": str(i)} for i in list(ids)[:ROW_LIMIT]]


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


class _Ctx:
    """What every check gets: the connection, the clock, options, cached facts, and the results of
    the scans started in the background (`start`/`wait`) so that they overlap with the rest."""

    def __init__(self, conn, *, path: Path, now: datetime, stale_after: timedelta, full: bool,
                 names: Sequence[str] = (), pool: ThreadPoolExecutor | None = None):
        self.conn = conn
        self.path = path
        self.now = now
        self.now_text = db_time(now)
        self.stale_after = stale_after
        self.full = full
        self.names = tuple(names)
        self.pool = pool
        self._tables: set[str] | None = None
        self._shape = None
        self._tasks: dict[str, Future] = {}
        self.fk_events_by_count = False
        self.mmap_size = 0  # memory-mapped reads for the worker connections, when the file cannot shrink
        self.stable = False  # a private copy or an immutable open: no writer can change what we read

    @property
    def tables(self) -> set[str]:
        if self._tables is None:
            self._tables = _tables(self.conn)
        return self._tables

    @property
    def shape(self):
        if self._shape is None:
            self._shape = detect_shape(self.conn)
        return self._shape

    def has(self, *tables: str) -> bool:
        return all(t in self.tables for t in tables)

    def start(self, key: str, scan: Callable[[sqlite3.Connection], Any]) -> None:
        """Run `scan` on a connection of its own in a worker thread (sqlite3 releases the GIL while
        SQLite works, so scans overlap on separate cores). Without a pool (a caller's read-write
        handle cannot be duplicated safely) it runs later, on the main connection, in `wait`."""
        if key in self._tasks:
            return
        future: Future = Future()
        self._tasks[key] = future
        side = reconnect(self.conn) if self.pool is not None else None
        if side is not None and self.mmap_size:
            side.execute(f"PRAGMA mmap_size = {int(self.mmap_size)}")
        if side is None:
            future.scan = scan  # type: ignore[attr-defined]
            return

        def work() -> Any:
            try:
                return scan(side)
            finally:
                side.close()

        inner = self.pool.submit(work)
        inner.add_done_callback(lambda f: _copy_future(f, future))

    def wait(self, key: str) -> Any:
        future = self._tasks[key]
        scan = getattr(future, "scan", None)
        if scan is not None and not future.done():
            try:
                future.set_result(scan(self.conn))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter below
                future.set_exception(exc)
        return future.result()

    def started(self, key: str) -> bool:
        return key in self._tasks


def _copy_future(source: Future, target: Future) -> None:
    exc = source.exception()
    if exc is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


# --- file and integrity ----------------------------------------------------------------------


def _header_facts(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        header = handle.read(100)
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    return {
        "size": path.stat().st_size,
        "page_size": page_size,
        "header_pages": int.from_bytes(header[28:32], "big"),
        "pages_valid": header[24:28] == header[92:96],
        "wal": is_wal_header(header),
        "freelist": int.from_bytes(header[36:40], "big"),
        "encoding": {1: "UTF-8", 2: "UTF-16le", 3: "UTF-16be"}.get(int.from_bytes(header[56:60], "big"), "?"),
        "user_version": int.from_bytes(header[60:64], "big"),
        "application_id": int.from_bytes(header[68:72], "big"),
        "sqlite_version": _version(int.from_bytes(header[96:100], "big")),
    }


def _version(number: int) -> str:
    return f"{number // 1000000}.{number // 1000 % 1000}.{number % 1000}" if number else "?"


def check_file(ctx: _Ctx) -> list[Finding]:
    facts = _header_facts(ctx.path)
    side = {s: Path(f"{ctx.path}{s}") for s in ("-wal", "-shm", "-journal")}
    present = {s: p.stat().st_size for s, p in side.items() if p.exists()}
    try:
        pages = ctx.conn.execute("PRAGMA page_count").fetchone()[0]
        free = ctx.conn.execute("PRAGMA freelist_count").fetchone()[0]
    except sqlite3.DatabaseError:  # a damaged file: fall back on what the header says
        pages, free = facts["header_pages"], facts["freelist"]
    parts = [
        f"{facts['size']:,} bytes",
        f"{pages:,} pages of {facts['page_size']} bytes",
        f"{free:,} free pages ({(100.0 * free / pages) if pages else 0:.1f}%)",
        f"journal mode {'wal' if facts['wal'] else 'rollback'} (file header)",
        f"encoding {facts['encoding']}",
        f"last written by SQLite {facts['sqlite_version']}",
        f"user_version {facts['user_version']}",
    ]
    for suffix, size in present.items():
        parts.append(f"{suffix} present ({size:,} bytes)")
    findings = [
        Finding(
            "database.info", "info", "Database file",
            "; ".join(parts) + ".",
            "The basic facts a support engineer asks first.",
            "" if "-shm" not in present else
            "A -shm file means a process has (or had, before a crash) the database open.",
        )
    ]
    expected = facts["header_pages"] * facts["page_size"]
    if facts["header_pages"] and facts["pages_valid"] and "-wal" not in present and facts["size"] < expected:
        findings.append(Finding(
            "file.truncated", "error", "The file is shorter than its header says",
            f"The header promises {facts['header_pages']:,} pages of {facts['page_size']} bytes "
            f"({expected:,} bytes); the file has {facts['size']:,} bytes "
            f"({expected - facts['size']:,} missing).",
            "The end of the database is gone (an interrupted copy or a full disk); rows stored there are lost "
            "and reading them fails.",
            "Get the complete file again (or restore a snapshot or backup); do not let archon write to this one.",
            count=1, unusable=True,
        ))
    elif facts["size"] % facts["page_size"]:
        findings.append(Finding(
            "file.partial_page", "warning", "The file size is not a whole number of pages",
            f"{facts['size']:,} bytes is not a multiple of the page size {facts['page_size']}.",
            "A copy was probably cut off mid-page.",
            "Get the complete file again.",
            count=1,
        ))
    if pages and free / pages > 0.25 and pages > 1000:
        findings.append(Finding(
            "database.freelist", "info", "A quarter or more of the file is free pages",
            f"{free:,} of {pages:,} pages are free.",
            "Space freed by deletions is kept in the file.",
            "Nothing is wrong; archon (not the console) may VACUUM it while stopped.",
        ))
    return findings


def _integrity_messages(conn: sqlite3.Connection, full: bool) -> list[str]:
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = conn.execute(f"PRAGMA {pragma}(1000)").fetchall()
    except sqlite3.DatabaseError as exc:
        return [f"{pragma} could not finish: {exc}"]
    messages = [str(r[0]) for r in rows]
    return [] if messages == ["ok"] else messages


def _integrity_finding(messages: list[str], full: bool) -> list[Finding]:
    pragma = "integrity_check" if full else "quick_check"
    if not messages:
        return []
    shown = " | ".join(one_line(m, 200) for m in messages[:10])
    more = len(messages) - min(len(messages), 10)
    return [Finding(
        "integrity.failed", "error", f"PRAGMA {pragma} reports damage",
        f"{len(messages)} problem(s){' (first 1000 only)' if len(messages) >= 1000 else ''}: {shown}"
        + (f" and {more} more" if more > 0 else ""),
        "Pages of the file are damaged: some rows cannot be read, and a write may spread the damage.",
        "Stop archon, keep this file as evidence, and restore the latest good snapshot or backup; "
        "`doctor --full` runs the slower integrity_check for the complete list.",
        count=len(messages),
    )]


EVENTS_TABLE = "approval_request_events"
_EVENTS_FK = [("approval_requests", "approval_request_id", "id"), ("approval_requests", "project_id", "project_id")]


def _events_fk_is_standard(conn: sqlite3.Connection) -> bool:
    """Whether approval_request_events has exactly archon's one foreign key (request id, project id),
    the one the approvals scan can vouch for by counting."""
    rows = conn.execute(f"PRAGMA foreign_key_list({EVENTS_TABLE})").fetchall()
    return len({r[0] for r in rows}) == 1 and sorted((r[2], r[3], r[4]) for r in rows) == _EVENTS_FK


def _fk_rows(conn: sqlite3.Connection, tables: Sequence[str]) -> list[tuple]:
    rows: list[tuple] = []
    for table in tables:
        quoted = table.replace('"', '""')
        rows.extend(tuple(r) for r in conn.execute(f'PRAGMA foreign_key_check("{quoted}")'))
    return rows


def prefetch_foreign_keys(ctx: _Ctx) -> None:
    """Start `foreign_key_check` table by table. When the approvals check runs too, its scan of the
    events proves (by counting, see `_events_summary`) that no event lacks its request, so the
    2.5-million-row events table is only checked here when that count says otherwise."""
    tables = [r[0] for r in ctx.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    ctx.fk_events_by_count = (
        "approvals" in ctx.names and ctx.has("approval_requests", EVENTS_TABLE) and _events_fk_is_standard(ctx.conn)
    )
    if ctx.fk_events_by_count:
        tables = [t for t in tables if t != EVENTS_TABLE]
    ctx.start("foreign_keys", lambda conn: _fk_rows(conn, tables))


def check_foreign_keys(ctx: _Ctx) -> list[Finding]:
    if not ctx.started("foreign_keys"):
        prefetch_foreign_keys(ctx)
    try:
        rows = list(ctx.wait("foreign_keys"))
        if ctx.fk_events_by_count:
            try:
                orphans = _approval_events(ctx).orphan_groups
            except sqlite3.DatabaseError:
                orphans = None
            if orphans != 0:  # some event group has no request (or the count failed): the exact rows
                rows.extend(_fk_rows(ctx.conn, [EVENTS_TABLE]))
    except sqlite3.DatabaseError as exc:
        return [Finding(
            "foreign_keys.unchecked", "error", "foreign_key_check could not run",
            f"PRAGMA foreign_key_check failed: {exc}.",
            "Usually a damaged page; see integrity.failed.", "Restore a good copy.",
            count=1,
        )]
    if not rows:
        return []
    groups: dict[tuple[str, str], list[int]] = {}
    for table, rowid, parent, _fkid in rows:
        groups.setdefault((table, parent), []).append(rowid)
    parts = [f"{table} -> {parent}: {len(ids)} row(s)" for (table, parent), ids in groups.items()]
    found_rows: list[dict[str, str]] = []
    for (table, _parent), rowids in groups.items():
        ids = _ids_for_rowids(ctx.conn, table, rowids[:ROW_LIMIT])
        found_rows.extend(_rows(table, ids))
    return [Finding(
        "foreign_keys.violations", "error", "Rows point at parents that do not exist",
        f"{len(rows)} row(s): " + "; ".join(parts) + ". Rows: "
        + _ids_text([r["id"] for r in found_rows], len(rows)) + ".",
        "A write was made with foreign keys off (or rows were deleted by hand); cascades and joins "
        "now skip these rows.",
        "Find out which tool wrote them; restore a snapshot, or ask archon's maintainers before deleting.",
        rows=found_rows[:ROW_LIMIT], count=len(rows),
    )]


def _ids_for_rowids(conn, table: str, rowids: list[int]) -> list[str]:
    cols = _columns(conn, table)
    key = "id" if "id" in cols else ("execution_run_id" if "execution_run_id" in cols else None)
    if key is None:
        return [str(r) for r in rowids]
    marks = ",".join("?" for _ in rowids)
    try:
        found = dict(conn.execute(f'SELECT rowid, "{key}" FROM "{table}" WHERE rowid IN ({marks})', rowids))
    except sqlite3.DatabaseError:
        return [str(r) for r in rowids]
    return [str(found.get(r, r)) for r in rowids]


# --- schema and ledger -----------------------------------------------------------------------


@lru_cache(maxsize=4)
def reference_objects(release: str) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index and trigger a database of `release` should have."""
    from console.db.migrations.registry import migrations_through
    from console.db.migrations.runner import apply_all

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        apply_all(conn, migrations_through(release))
        return frozenset(
            (r[0], r[1])
            for r in conn.execute(
                "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') "
                "AND name NOT LIKE 'sqlite_%'"
            )
        )
    finally:
        conn.close()


def check_schema(ctx: _Ctx) -> list[Finding]:
    shape = ctx.shape
    findings: list[Finding] = []
    if shape.newer:
        findings.append(Finding(
            "schema.newer", "error", "The schema is newer than this console knows",
            f"{shape.reason}.",
            "A newer archon changed the schema; this console's checks and writes may not fit it.",
            "Use a console release that knows the newer archon release.",
            count=1,
        ))
        return findings
    if shape.release is None:
        findings.append(Finding(
            "schema.unknown_shape", "error", "The schema matches no known archon release",
            f"{shape.reason}.",
            "The markers of one release are only partly there: an interrupted upgrade, a hand edit, or an "
            "archon release this console does not know.",
            "Compare `schema.sql` of a support bundle with the release the user runs; do not upgrade until "
            "it is understood.",
            count=1,
        ))
        return findings
    findings.append(Finding(
        "schema.release", "info", "Detected archon release",
        f"archon {shape.release} shape ({shape.reason}); {len(shape.tables)} tables.",
        "Checks, features and upgrades depend on the release the schema shows.", "",
    ))
    present = {
        (r[0], r[1])
        for r in ctx.conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')"
        )
    }
    missing = sorted(reference_objects(shape.release) - present)
    if missing:
        kinds = {k: [n for t, n in missing if t == k] for k in ("table", "index", "trigger")}
        text = "; ".join(f"{len(v)} {k}(s): {', '.join(v)}" for k, v in kinds.items() if v)
        findings.append(Finding(
            "schema.missing_objects", "error", f"Objects archon {shape.release} should have are missing",
            f"{len(missing)} missing: {text}.",
            "Missing triggers stop guarding their rules (immutability, transitions); missing indexes make "
            "archon slow or let duplicates in.",
            "Let archon start once (it re-creates most of them), or run `archon-console upgrade`, which "
            "re-applies the release's steps.",
            rows=[{"table": "sqlite_master", "id": n} for _t, n in missing][:ROW_LIMIT],
            count=len(missing),
        ))
    return findings


def check_ledger(ctx: _Ctx) -> list[Finding]:
    from console.db.migrations.registry import CURRENT_RELEASE, MIGRATIONS, RELEASES

    findings: list[Finding] = []
    try:
        from console.db.ledger import read_entries

        entries = read_entries(ctx.conn)
    except Exception as exc:  # read defensively: the ledger module or table may be odd
        return [Finding(
            "ledger.unreadable", "error", "The upgrade ledger cannot be read",
            f"Reading {LEDGER_TABLE}/{LEDGER_META_TABLE} failed: {exc}.",
            "The console cannot tell which steps it applied.",
            "Inspect the two tables in a support bundle.",
            count=1, unusable=True,
        )]
    known = {m.id: m for m in MIGRATIONS}
    names = [e.name for e in entries]
    if not entries:
        findings.append(Finding(
            "ledger.state", "info", "Upgrade ledger",
            "No ledger: the console has never upgraded this database (archon itself keeps none).",
            "An unversioned database is adopted by the first `upgrade --force`, after a safety copy.", "",
        ))
    else:
        last = entries[-1]
        findings.append(Finding(
            "ledger.state", "info", "Upgrade ledger",
            f"{len(entries)} step(s) recorded, last {last.name} at {last.applied_at or '?'}"
            f" (target {last.target_release or '?'}).",
            "The ledger is the console's record of the steps it applied.", "",
        ))
    unknown = [n for n in names if n not in known]
    if unknown:
        findings.append(Finding(
            "ledger.unknown_steps", "error", "The ledger names steps this console does not know",
            f"{len(unknown)} unknown step(s): {_ids_text(unknown, len(unknown))}.",
            "A newer archon-console upgraded this database; this one cannot vouch for its schema and refuses "
            "to write to it.",
            "Use the archon-console release that upgraded it, or a newer one.",
            rows=_rows(LEDGER_TABLE, unknown), count=len(unknown), unusable=True,
        ))
        return findings
    expected = [m.id for m in MIGRATIONS[: len(names)]]
    if names != expected:
        position = next(i for i, (a, b) in enumerate(zip(names, expected)) if a != b)
        findings.append(Finding(
            "ledger.divergent", "error", "The ledger is not the exact ordered history of the registry",
            f"At position {position + 1} the ledger has {names[position]}, the registry {expected[position]}.",
            "Steps were skipped, reordered or recorded by another tool; upgrades fail closed.",
            "Restore a snapshot, or inspect the ledger tables by hand.",
            rows=_rows(LEDGER_TABLE, [names[position]]), count=1, unusable=True,
        ))
        return findings
    incomplete = [e.name for e in entries if not e.has_meta or e.applied_at is None]
    if incomplete:
        findings.append(Finding(
            "ledger.incomplete", "error", "Ledger rows lack their side-table rows",
            f"{len(incomplete)} step(s): {_ids_text(incomplete, len(incomplete))}.",
            "One of the two ledger tables was edited by hand or by another tool.",
            "Restore a snapshot, or inspect the ledger tables by hand.",
            rows=_rows(LEDGER_META_TABLE, incomplete), count=len(incomplete), unusable=True,
        ))
    changed = [e.name for e in entries if e.has_meta and e.checksum is not None and e.checksum != known[e.name].checksum]
    if changed:
        findings.append(Finding(
            "ledger.checksum_mismatch", "error", "Steps were applied with a different body",
            f"{len(changed)} step(s) whose recorded checksum differs from this console's: "
            f"{_ids_text(changed, len(changed))}.",
            "A released step was edited after it ran here; this console cannot vouch for what it did.",
            "Use the console release that applied it.",
            rows=_rows(LEDGER_META_TABLE, changed), count=len(changed), unusable=True,
        ))
    # Pending steps: by ledger when versioned, by detected release otherwise.
    if entries:
        pending = [m.id for m in MIGRATIONS[len(entries):]]
    elif ctx.shape.release in RELEASES:
        limit = RELEASES.index(ctx.shape.release)
        pending = [m.id for m in MIGRATIONS if RELEASES.index(m.release) > limit]
    else:
        pending = []
    if pending:
        findings.append(Finding(
            "migrations.pending", "info", f"Steps pending to reach archon {CURRENT_RELEASE}",
            f"{len(pending)} step(s): {pending[0]} ... {pending[-1]}.",
            "An older shape is fine while the user runs that archon release; an archon older than the "
            "schema cannot start on it.",
            "`archon-console upgrade --plan` shows what an upgrade would do.",
            count=len(pending),
        ))
    return findings


# --- approvals -------------------------------------------------------------------------------

# Per (project, request) group of events, in the order of idx_approval_request_events_sequence
# (project_id, approval_request_id, sequence): a covering index scan, no table reads, no sort.
_EVENT_GROUPS_SQL = """
SELECT count(*) AS groups, coalesce(sum(CASE WHEN hi <> n OR ones <> 1 THEN 1 ELSE 0 END), 0) AS bad
FROM (SELECT count(*) AS n, max(sequence) AS hi, sum(sequence = 1) AS ones
      FROM approval_request_events GROUP BY project_id, approval_request_id)
"""
_BAD_SEQUENCES_SQL = """
SELECT r.id, g.n, g.hi
FROM (SELECT project_id AS pid, approval_request_id AS rid, count(*) AS n, max(sequence) AS hi,
             sum(sequence = 1) AS ones
      FROM approval_request_events GROUP BY project_id, approval_request_id
      HAVING hi <> n OR ones <> 1) g
JOIN approval_requests r ON r.project_id = g.pid AND r.id = g.rid
ORDER BY r.id
"""
# Each request (covering scan of idx_approval_requests_project_status_expiry) against the to_status
# of its last event: one descending index seek and one row read per request. Only requests whose
# status differs, or that have no event, come back; `has_events` is computed for those alone.
_LAST_EVENT_SQL = """
SELECT id, status, last_to,
       CASE WHEN last_to IS NULL THEN EXISTS (
         SELECT 1 FROM approval_request_events e WHERE e.project_id = q.project_id AND e.approval_request_id = q.id)
       END AS has_events
FROM (SELECT r.id, r.project_id, r.status,
             (SELECT e.to_status FROM approval_request_events e
              WHERE e.project_id = r.project_id AND e.approval_request_id = r.id
              ORDER BY e.sequence DESC LIMIT 1) AS last_to
      FROM approval_requests r) q
WHERE coalesce(last_to = status, 0) = 0  -- one evaluation of last_to per request (an OR would make two)
"""
# A set difference: SQLite builds one temporary b-tree of the decided requests and deletes from it
# while scanning the events table once -- no per-row index seeks.
_DECISIONS_SQL = """
SELECT id, project_id FROM approval_requests WHERE decision_at IS NOT NULL
EXCEPT
SELECT approval_request_id, project_id FROM approval_request_events
WHERE to_status IN ('approved', 'denied') AND approval_request_id IS NOT NULL AND project_id IS NOT NULL
"""
# Candidates from the covering status/expiry index; consumed_at is read for expired approvals only.
_OVERDUE_SQL = """
SELECT id, status FROM approval_requests
WHERE rowid IN (SELECT rowid FROM approval_requests
                WHERE status IN ('pending', 'approved') AND julianday(expires_at) < julianday(:now))
  AND (status = 'pending' OR consumed_at IS NULL)
"""


@dataclass
class _EventsSummary:
    groups: int  # (project, request) groups of events
    bad_sequences: list  # (request id, events, highest sequence), by id
    mismatches: list  # (request id, status, last event's to_status or None when it has none), by id
    orphan_groups: int  # event groups with no request: foreign_key_check's events rows, by count


def _sql_order(value: Any) -> tuple:
    """SQLite's ORDER BY for mixed types: NULL, numbers, text, blobs."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, value) if isinstance(value, str) else (3, bytes(value))


def _event_groups(conn: sqlite3.Connection) -> tuple[int, list]:
    groups, bad = conn.execute(_EVENT_GROUPS_SQL).fetchone()
    return groups, ([tuple(r) for r in conn.execute(_BAD_SEQUENCES_SQL)] if bad else [])


def _last_events(conn: sqlite3.Connection) -> tuple[int, list]:
    requests = conn.execute("SELECT count(*) FROM approval_requests").fetchone()[0]
    return requests, conn.execute(_LAST_EVENT_SQL).fetchall()


def _events_summary(conn: sqlite3.Connection) -> _EventsSummary:
    """Both scans in one read transaction, for a file that may change meanwhile."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        return _summarize(_event_groups(conn), _last_events(conn))
    finally:
        if own:
            conn.execute("COMMIT")


def _summarize(grouped: tuple[int, list], last: tuple[int, list]) -> _EventsSummary:
    """`orphan_groups` = event groups - requests that have events: every request matches at most
    one (project, request) group, so the difference is exactly the number of groups without a
    request -- which is why both numbers must come from the same state of the file."""
    groups, bad_rows = grouped
    requests, candidates = last
    without = 0
    mismatches = []
    for rid, status, last_to, has_events in candidates:
        if has_events == 0:
            without += 1
            mismatches.append((rid, status, None, False))
        elif last_to != status:
            mismatches.append((rid, status, last_to, True))
    mismatches.sort(key=lambda m: _sql_order(m[0]))
    return _EventsSummary(groups, bad_rows, mismatches, groups - (requests - without))


def _approval_events(ctx: "_Ctx") -> _EventsSummary:
    if ctx.stable:
        return _summarize(ctx.wait("approval_groups"), ctx.wait("approval_last"))
    return ctx.wait("approval_events")


def _decisions(conn: sqlite3.Connection) -> list:
    return sorted((r[0] for r in conn.execute(_DECISIONS_SQL)), key=_sql_order)


def prefetch_approvals(ctx: _Ctx) -> None:
    if ctx.has("approval_requests", EVENTS_TABLE):
        if ctx.stable:  # nobody writes this file: the two scans may run on two connections
            ctx.start("approval_groups", _event_groups)
            ctx.start("approval_last", _last_events)
        else:
            ctx.start("approval_events", _events_summary)
        ctx.start("approval_decisions", _decisions)


def check_approvals(ctx: _Ctx) -> list[Finding]:
    if not ctx.has("approval_requests", EVENTS_TABLE):
        return []
    prefetch_approvals(ctx)
    overdue = ctx.conn.execute(_OVERDUE_SQL, {"now": ctx.now_text}).fetchall()
    summary = _approval_events(ctx)
    buckets: dict[str, list] = {
        "pending_overdue": sorted((r[0] for r in overdue if r[1] == "pending"), key=_sql_order),
        "approved_overdue": sorted((r[0] for r in overdue if r[1] == "approved"), key=_sql_order),
        "bad_sequence": summary.bad_sequences,
        "status_mismatch": summary.mismatches,
        "undocumented": ctx.wait("approval_decisions"),
    }
    findings: list[Finding] = []
    t = "approval_requests"

    def add(key, fid, severity, title, found, why, todo):
        items = buckets[key]
        if items:
            ids = [r if key in ("pending_overdue", "approved_overdue", "undocumented") else r[0] for r in items]
            findings.append(Finding(fid, severity, title, found(items, ids), why, todo,
                                    rows=_rows(t, ids), count=len(items)))

    add("pending_overdue", "approvals.pending_past_expiry", "warning", "Pending requests past their expiry",
        lambda items, ids: f"{len(items)} request(s) still pending after expires_at (at {ctx.now_text} UTC): "
        f"{_ids_text(ids, len(ids))}.",
        "Nothing in the database expires a request; archon's sweep has not run (is archon running?). They "
        "can no longer be approved.",
        "Start archon, or run the console's expiry sweep (`approvals expire`).")
    add("approved_overdue", "approvals.approved_past_expiry", "warning",
        "Approved requests past expiry, never consumed",
        lambda items, ids: f"{len(items)} request(s) approved but not consumed before expires_at: "
        f"{_ids_text(ids, len(ids))}.",
        "The approved action was never carried out; the approval is stale and should not be used any more.",
        "Run the expiry sweep, or revoke them (`approvals revoke`) with a reason.")
    add("bad_sequence", "approvals.event_sequence", "error", "Approval event sequences with gaps",
        lambda items, ids: f"{len(items)} request(s) whose events are not numbered 1..n: "
        + _ids_text([f"{r[0]} ({r[1]} events, highest {r[2]})" for r in items], len(items)) + ".",
        "Events were deleted, or written outside a transaction; the history is incomplete.",
        "Compare with a backup; the console never edits history.")
    add("status_mismatch", "approvals.status_mismatch", "error", "Request status differs from its last event",
        lambda items, ids: f"{len(items)} request(s): "
        + _ids_text([f"{r[0]} (status {r[1]}, last event {r[2] if r[3] else 'none'})" for r in items],
                    len(items)) + ".",
        "A status change was written without its event (or the event without the change): the audit trail "
        "does not explain the current state.",
        "Find the writer that skipped the event; the console always writes both in one transaction.")
    add("undocumented", "approvals.decision_without_event", "error", "Decisions without a decision event",
        lambda items, ids: f"{len(items)} request(s) have decision_at set but no approved/denied event: "
        f"{_ids_text(ids, len(ids))}.",
        "Nobody can tell who decided or why.",
        "Treat these decisions as unaudited; ask who wrote them.")
    return findings


# --- environments ----------------------------------------------------------------------------


def check_environments(ctx: _Ctx) -> list[Finding]:
    if not ctx.has("execution_environments"):
        return []
    cols = _columns(ctx.conn, "execution_environments")
    conds: dict[str, str] = {}
    claims = {"operation_claim_id", "operation_kind", "operation_claimed_at"} <= cols
    stale_before = db_time(ctx.now - ctx.stale_after)
    if claims:
        conds["stale_claim"] = "operation_claim_id IS NOT NULL AND julianday(operation_claimed_at) < julianday(:stale)"
        conds["dead_claim"] = "operation_claim_id IS NOT NULL AND lifecycle_state IN ('retired', 'failed')"
        conds["bad_claim"] = (
            "NOT ((operation_claim_id IS NULL AND operation_kind IS NULL AND operation_claimed_at IS NULL) OR "
            "(length(operation_claim_id) BETWEEN 1 AND 128 AND operation_kind IN ('stop', 'retire', 'reset', "
            "'cleanup_retry') AND operation_claimed_at IS NOT NULL))"
        )
    retry = "cleanup_retry_at" in cols
    conds["cleanup_stuck"] = (
        "lifecycle_state = 'cleanup_pending' AND cleanup_claim_id IS NULL"
        + (" AND cleanup_retry_at IS NULL" if retry else "")
    )
    conds["cleanup_attempts"] = "lifecycle_state = 'cleanup_pending' AND cleanup_attempts >= 3"
    if retry:
        conds["cleanup_overdue"] = (
            "lifecycle_state = 'cleanup_pending' AND cleanup_retry_at IS NOT NULL "
            "AND julianday(cleanup_retry_at) < julianday(:now)"
        )
    if "idle_stop_at" in cols:
        conds["idle_overdue"] = (
            "lifecycle_state = 'running' AND idle_stop_at IS NOT NULL AND julianday(idle_stop_at) < julianday(:now)"
        )
    if ctx.has("execution_environment_run_bindings"):
        conds["closed_lease"] = (
            f"lifecycle_state NOT IN {ADMITTING_STATES!r} AND EXISTS (SELECT 1 FROM execution_environment_run_bindings b "
            "WHERE b.environment_id = e.id AND b.relationship = 'execution' AND b.released_at IS NULL)"
        )
    select = ", ".join(f"({sql}) AS flag_{key}" for key, sql in conds.items())
    where = " OR ".join(f"({sql})" for sql in conds.values())
    extra = ", operation_kind, operation_claimed_at" if claims else ""
    rows = ctx.conn.execute(
        f"SELECT id, lifecycle_state, cleanup_attempts{extra}, {select} FROM execution_environments e "
        f"WHERE {where} ORDER BY id",
        {"now": ctx.now_text, "stale": stale_before},
    ).fetchall()
    buckets = {k: [r for r in rows if r[f"flag_{k}"]] for k in conds}
    findings: list[Finding] = []
    t = "execution_environments"
    minutes = int(ctx.stale_after.total_seconds() // 60)

    def add(key, fid, severity, title, describe, why, todo):
        items = buckets.get(key) or []
        if items:
            findings.append(Finding(
                fid, severity, title,
                f"{len(items)} environment(s): " + _ids_text([describe(r) for r in items], len(items)) + ".",
                why, todo, rows=_rows(t, [r["id"] for r in items]), count=len(items)))

    add("stale_claim", "environments.stale_claims", "warning",
        f"Operation claims older than {minutes} minutes",
        lambda r: f"{r['id']} ({r['operation_kind']} since {r['operation_claimed_at']})",
        "A claim blocks new runs on the environment; an old one usually means its holder died.",
        "`envs takeover ID --reason ...` then complete or release it.")
    add("dead_claim", "environments.claims_on_dead", "warning", "Claims on retired or failed environments",
        lambda r: f"{r['id']} ({r['lifecycle_state']}, {r['operation_kind']})",
        "The operation can no longer do anything; the claim is debris.",
        "Take it over and release it.")
    add("bad_claim", "environments.malformed_claims", "error", "Partial or malformed operation claims",
        lambda r: f"{r['id']}",
        "On upgraded databases nothing guards INSERTs; a partial claim confuses every writer.",
        "Find the writer; archon's trigger refuses such UPDATEs.")
    add("closed_lease", "environments.lease_on_closed", "warning",
        "Active execution leases on environments that no longer admit leases",
        lambda r: f"{r['id']} ({r['lifecycle_state']})",
        "A run still holds an environment that is retiring, cleaned up, retired or failed.",
        "Check whether the run is still alive in archon; its lease is released when it ends.")
    add("cleanup_stuck", "environments.cleanup_stuck", "warning",
        "cleanup_pending with no cleanup claim and no retry scheduled",
        lambda r: f"{r['id']} ({r['cleanup_attempts']} attempts)",
        "Nothing will pick these up; their resources stay allocated.",
        "Restart archon's cleanup worker, or `envs retry-cleanup ID`.")
    add("cleanup_attempts", "environments.cleanup_attempts", "warning", "Cleanup failed 3 or more times",
        lambda r: f"{r['id']} ({r['cleanup_attempts']} attempts)",
        "Repeated cleanup failures usually need a human (a locked volume, a missing provider).",
        "Read the environment's events and failure message; fix the provider-side problem.")
    add("cleanup_overdue", "environments.cleanup_retry_overdue", "warning", "Cleanup retry time in the past",
        lambda r: f"{r['id']}",
        "The retry is due but has not happened: the cleanup worker is not running.",
        "Check that archon is running.")
    add("idle_overdue", "environments.idle_stop_overdue", "warning", "Running environments past their idle-stop time",
        lambda r: f"{r['id']}",
        "They should have been stopped; they keep consuming resources.",
        "Check archon's idle sweep, or `envs stop ID`.")
    return findings


# --- projects and profiles -------------------------------------------------------------------


def check_profiles(ctx: _Ctx) -> list[Finding]:
    if not ctx.has("projects", "execution_profile_revisions"):
        return []
    if "active_execution_profile_revision_id" not in _columns(ctx.conn, "projects"):
        return []
    findings: list[Finding] = []
    rows = ctx.conn.execute(
        """
        SELECT p.id, p.active_execution_profile_revision_id AS rev, p.build_execution_provider AS provider,
               r.id IS NULL AS missing, r.project_id AS owner,
               CASE WHEN json_valid(r.profile_json) THEN json_extract(r.profile_json, '$.provider_preference') END AS pref
        FROM projects p LEFT JOIN execution_profile_revisions r ON r.id = p.active_execution_profile_revision_id
        WHERE r.id IS NULL OR r.project_id IS NOT p.id
           OR p.build_execution_provider IS NOT
              (CASE WHEN json_valid(r.profile_json) THEN json_extract(r.profile_json, '$.provider_preference') END)
        ORDER BY p.id
        """
    ).fetchall()
    t = "projects"
    missing = [r for r in rows if r["missing"]]
    foreign = [r for r in rows if not r["missing"] and r["owner"] != r["id"]]
    projection = [r for r in rows if not r["missing"] and r["owner"] == r["id"] and r["provider"] != r["pref"]]
    if missing:
        findings.append(Finding(
            "projects.active_revision_missing", "error", "Projects whose active profile revision does not exist",
            f"{len(missing)} project(s): "
            + _ids_text([f"{r['id']} (points at {r['rev']!r})" for r in missing], len(missing)) + ".",
            "Archon cannot resolve how to run builds for these projects.",
            "Roll back to an existing revision (`profiles rollback`); find out who deleted the revision.",
            rows=_rows(t, [r["id"] for r in missing]), count=len(missing)))
    if foreign:
        findings.append(Finding(
            "projects.active_revision_foreign", "error", "Projects whose active revision belongs to another project",
            f"{len(foreign)} project(s): "
            + _ids_text([f"{r['id']} (uses {r['rev']} of {r['owner']})" for r in foreign], len(foreign)) + ".",
            "Archon's owner trigger forbids this; it was written with triggers missing.",
            "Roll back to one of the project's own revisions.",
            rows=_rows(t, [r["id"] for r in foreign]), count=len(foreign)))
    if projection:
        findings.append(Finding(
            "projects.provider_projection", "error",
            "build_execution_provider does not project the active profile",
            f"{len(projection)} project(s): "
            + _ids_text([f"{r['id']} (column {r['provider']!r}, profile {r['pref']!r})" for r in projection],
                        len(projection)) + ".",
            "Builds run on a provider the active profile does not ask for.",
            "Activate a revision whose provider_preference matches (both change in one update).",
            rows=_rows(t, [r["id"] for r in projection]), count=len(projection)))
    bad: list[str] = []
    for rev_id, fp, profile_json in ctx.conn.execute(
        "SELECT id, fingerprint, profile_json FROM execution_profile_revisions ORDER BY id"
    ):
        expected = fingerprint_json(profile_json)
        if expected is None or fp != expected:
            bad.append(rev_id)
    if bad:
        findings.append(Finding(
            "profiles.fingerprint_mismatch", "error", "Revisions whose fingerprint does not match their JSON",
            f"{len(bad)} revision(s): {_ids_text(bad, len(bad))}.",
            "Environments and runs are matched by fingerprint; a wrong one breaks reuse and audit.",
            "Revisions are immutable: report it; do not edit the row.",
            rows=_rows("execution_profile_revisions", bad), count=len(bad)))
    return findings


# --- the runner ------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[_Ctx], list[Finding]]] = {
    "file": check_file,
    "integrity": lambda ctx: [],  # run in its own thread, see run_doctor
    "foreign_keys": check_foreign_keys,
    "schema": check_schema,
    "ledger": check_ledger,
    "approvals": check_approvals,
    "environments": check_environments,
    "profiles": check_profiles,
}
PREFETCH: dict[str, Callable[[_Ctx], None]] = {
    "foreign_keys": prefetch_foreign_keys,
    "approvals": prefetch_approvals,
}
ARCHON_CHECKS = ("schema", "ledger", "approvals", "environments", "profiles")


PREFIX_TO_CHECK = {"database": "file", "migrations": "ledger", "projects": "profiles", "envs": "environments"}


def _select(checks: Sequence[str] | None) -> tuple[list[str], set[str], set[str]]:
    """(checks to run, checks whose findings are all kept, single finding ids kept)."""
    if not checks:
        return list(CHECKS), set(CHECKS), set()
    names: list[str] = []
    whole: set[str] = set()
    single: set[str] = set()
    for item in checks:
        head = item.split(".", 1)[0]
        group = PREFIX_TO_CHECK.get(head, head)
        if group not in CHECKS:
            raise ValueError(
                f"Unknown check {item!r}; known: {', '.join(CHECKS)} "
                "(or a finding id such as approvals.event_sequence)."
            )
        if group not in names:
            names.append(group)
        if "." in item:
            single.add(item)
        else:
            whole.add(group)
    return [n for n in CHECKS if n in names], whole, single


def run_doctor(
    target: ArchonDatabase | str | os.PathLike[str],
    *,
    checks: Sequence[str] | None = None,
    full: bool = False,
    now: datetime,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> Report:
    """Run the named checks (all by default) and return the findings; never writes.

    Raises `DatabaseUnusable` only when the file is not SQLite at all (missing, empty, bad header).
    """
    names, whole, single = _select(checks)
    if isinstance(target, ArchonDatabase):
        path, opened = Path(target.path), "caller's connection"
        findings = _run(target.conn, path, names, full=full, now=now, stale_after=stale_after)
    else:
        path = Path(target).expanduser()
        findings, opened = _run_on_path(path, names, full=full, now=now, stale_after=stale_after)
    findings = [f for f in findings if f.check in whole or f.id in single or f.unusable]
    return Report(
        path=str(path), mode="full" if full else "quick", generated_at=db_time(now),
        checks_run=names, findings=findings, opened=opened,
    )


def _run_on_path(path: Path, names, *, full, now, stale_after) -> tuple[list[Finding], str]:
    """Read in place when that is safe; if the file changed meanwhile (an immutable read of a WAL
    file that a starting archon checkpointed into), read again from a private copy."""
    for force_copy in (False, True):
        before = stat_token(path)
        conn, cleanup, opened = open_read_only(path, force_copy=force_copy)
        try:
            # Worker threads seeking in the same file through read() contend in the kernel; mapped
            # pages do not. Only where nobody can truncate the file under the mapping (SIGBUS): our
            # private copy, or an immutable open of a file no connection has open.
            mapped = path.stat().st_size if ("immutable" in opened or opened == "private copy") else 0
            findings = _run(conn, path, names, full=full, now=now, stale_after=stale_after, mmap_size=mapped)
        finally:
            conn.close()
            cleanup()
        if force_copy or "immutable" not in opened or stat_token(path) == before:
            return findings, opened
    raise AssertionError("unreachable")


def _run(conn, path: Path, names: list[str], *, full: bool, now: datetime, stale_after: timedelta,
         mmap_size: int = 0) -> list[Finding]:
    # Workers only when a second connection can be opened on the same file without side effects.
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="doctor") if getattr(
        conn, "source_uri", None) else None
    ctx = _Ctx(conn, path=path, now=now, stale_after=stale_after, full=full, names=names, pool=pool)
    ctx.mmap_size = mmap_size
    ctx.stable = bool(mmap_size)
    findings: list[Finding] = []
    integrity: dict[str, list[str]] = {}
    thread = None
    if "integrity" in names:
        side = reconnect(conn)
        if side is not None:
            if mmap_size:
                side.execute(f"PRAGMA mmap_size = {int(mmap_size)}")

            def scan() -> None:
                try:
                    integrity["messages"] = _integrity_messages(side, full)
                finally:
                    side.close()

            thread = threading.Thread(target=scan, name="doctor-integrity", daemon=True)
            thread.start()
        else:  # a caller's read-write handle: stay on its connection
            integrity["messages"] = _integrity_messages(conn, full)
    try:
        if "file" in names:
            findings.extend(_guarded("file", ctx))
        readable = True
        try:
            ctx.tables  # noqa: B018 - reads sqlite_master
        except sqlite3.DatabaseError as exc:
            readable = False
            findings.append(Finding(
                "database.unreadable", "error", "SQLite cannot read the schema",
                f"Reading sqlite_master failed: {exc}.",
                "The first pages of the file are damaged or it is encrypted; nothing in it can be used.",
                "Get an intact copy, or restore a snapshot or backup.",
                count=1, unusable=True,
            ))
        if readable:
            missing = [t for t in ARCHON_CORE_TABLES if t not in ctx.tables]
            if missing:
                findings.append(Finding(
                    "database.not_archon", "error", "This is not an archon database",
                    f"A SQLite database with {len(ctx.tables)} table(s), but no {', '.join(missing)} table.",
                    "The console only understands archon's schema.",
                    "Check the path: archon keeps its database at ~/.archon/archon.db unless configured otherwise.",
                    count=1, unusable=True,
                ))
            else:
                # The long scans start first, each on its own connection, and overlap with the rest.
                for name in names:
                    if name in PREFETCH:
                        try:
                            PREFETCH[name](ctx)
                        except sqlite3.DatabaseError:
                            pass  # the check itself runs the failing query again and reports it
                for name in names:
                    if name in ("file", "integrity"):
                        continue
                    findings.extend(_guarded(name, ctx))
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        if thread is not None:
            thread.join()
    if "integrity" in names:
        findings.extend(_tag("integrity", _integrity_finding(integrity.get("messages", []), full)))
    return findings


def _guarded(name: str, ctx: _Ctx) -> list[Finding]:
    """Run one check; a damaged page becomes a finding instead of a traceback."""
    try:
        return _tag(name, CHECKS[name](ctx))
    except sqlite3.DatabaseError as exc:
        return [Finding(
            f"{name}.failed", "error", f"The {name} check could not finish",
            f"SQLite said: {exc}.",
            "Usually damaged pages (see integrity.failed).",
            "Restore a good copy; run `doctor --full` for the complete damage list.",
            count=1, check=name,
        )]


def _tag(check: str, findings: list[Finding]) -> list[Finding]:
    for finding in findings:
        finding.check = check
    return findings


def report_json_text(report: Report, *, strict: bool = False) -> str:
    return json.dumps(report.to_json(strict=strict), indent=2, ensure_ascii=False, default=str)


__all__ = [
    "CHECKS",
    "DEFAULT_STALE_AFTER",
    "Finding",
    "Report",
    "reference_objects",
    "report_json_text",
    "run_doctor",
]
