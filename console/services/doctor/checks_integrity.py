"""The file itself: header facts, `quick_check`/`integrity_check`, and `foreign_key_check`."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Sequence

from console.db.connect import is_busy
from console.db.file_guard import read_head
from console.db.sql import quote_identifier
from console.db.locked_copy import is_wal_header
from console.db.paths import sidecars
from console.services.doctor.checks_approvals import EVENTS_TABLE, approval_events, prefetch_approvals
from console.services.doctor.context import Ctx, columns, ids_text, rows_of
from console.services.doctor.report import ROW_LIMIT, Finding, busy_finding
from console.text import one_line

# --- file and integrity ----------------------------------------------------------------------


def read_header(path: Path) -> bytes | None:
    """The file's first 100 bytes, read *before* doctor connects; through `read_head` all the same,
    which keeps this process's locks whatever else holds a connection to the file
    (console/db/file_guard.py)."""
    try:
        return read_head(path, 100)
    except OSError:
        return None


def _pragma_facts(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """The header facts as SQLite reports them, for a caller's connection (no header was read)."""
    def pragma(name: str) -> Any:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]

    return {
        "size": path.stat().st_size if path.exists() else 0, "page_size": pragma("page_size"),
        "header_pages": pragma("page_count"), "pages_valid": False,
        "wal": str(pragma("journal_mode")).lower() == "wal", "freelist": pragma("freelist_count"),
        "encoding": pragma("encoding"), "user_version": pragma("user_version"),
        "application_id": pragma("application_id"), "sqlite_version": "?",
    }


def _header_facts(path: Path, header: bytes) -> dict[str, Any]:
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


def check_file(ctx: Ctx) -> list[Finding]:
    facts = _pragma_facts(ctx.conn, ctx.path) if ctx.header is None else _header_facts(ctx.path, ctx.header)
    side = sidecars(ctx.path)  # SQLite's: beside a symlink's target
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
    # A -wal or -journal beside the file may hold what the main file lacks (a commit in flight, or one
    # SQLite rolls back): the same rule as the refusal at open (console/db/connect.py `check_size`).
    if (facts["header_pages"] and facts["pages_valid"] and not {"-wal", "-journal"} & present.keys()
            and facts["size"] < expected):
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


BUSY = "busy: "  # an integrity message that is no message: the check could not take its lock


def integrity_messages(conn: sqlite3.Connection, full: bool) -> list[str]:
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = conn.execute(f"PRAGMA {pragma}(1000)").fetchall()
    except sqlite3.DatabaseError as exc:
        return [f"{BUSY}{exc}" if is_busy(exc) else f"{pragma} could not finish: {exc}"]
    messages = [str(r[0]) for r in rows]
    return [] if messages == ["ok"] else messages


def integrity_finding(messages: list[str], full: bool) -> list[Finding]:
    pragma = "integrity_check" if full else "quick_check"
    if not messages:
        return []
    if messages[0].startswith(BUSY):
        return [busy_finding(f"PRAGMA {pragma}", messages[0][len(BUSY):])]
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


def _fk_rows(conn: sqlite3.Connection, tables: Sequence[str]) -> list[tuple]:
    rows: list[tuple] = []
    for table in tables:
        rows.extend(tuple(r) for r in conn.execute(f"PRAGMA foreign_key_check({quote_identifier(table)})"))
    return rows


def prefetch_foreign_keys(ctx: Ctx) -> None:
    """Start `foreign_key_check` table by table, except the tables whose foreign keys the approvals
    pass vouches for by counting (checks_approvals.py `COUNTED_FKS`: the 2.5-million-row events
    table and the requests, read there anyway); those are only checked here when a count says
    some row lacks its parent. Quick mode only: `doctor --full` checks every table here."""
    ctx.tables_in_order = [r[0] for r in ctx.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    if "approvals" in ctx.names:
        try:
            prefetch_approvals(ctx)  # decides which foreign keys it counts
        except sqlite3.DatabaseError:
            ctx.counted_fks = set()  # the approvals check reports it; every table is checked here
    tables = [t for t in ctx.tables_in_order if t not in ctx.counted_fks]
    ctx.start("foreign_keys", lambda conn: _fk_rows(conn, tables))


def check_foreign_keys(ctx: Ctx) -> list[Finding]:
    if not ctx.started("foreign_keys"):
        prefetch_foreign_keys(ctx)
    try:
        rows = list(ctx.wait("foreign_keys"))
        if ctx.counted_fks:
            try:
                summary = approval_events(ctx)
                missing = {EVENTS_TABLE: summary.orphan_events, "approval_requests": summary.requests_without_parent}
            except sqlite3.DatabaseError:
                missing = {}
            # some row lacks its parent (or the count failed): the exact rows, in the file's table order
            again = [t for t in ctx.tables_in_order if t in ctx.counted_fks and missing.get(t, 1) != 0]
            if again:
                order = {t: i for i, t in enumerate(ctx.tables_in_order)}
                rows = sorted(rows + _fk_rows(ctx.conn, again), key=lambda r: order.get(r[0], len(order)))
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            return [busy_finding("PRAGMA foreign_key_check", exc)]
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
        found_rows.extend(rows_of(table, ids))
    return [Finding(
        "foreign_keys.violations", "error", "Rows point at parents that do not exist",
        f"{len(rows)} row(s): " + "; ".join(parts) + ". Rows: "
        + ids_text([r["id"] for r in found_rows], len(rows)) + ".",
        "A write was made with foreign keys off (or rows were deleted by hand); cascades and joins "
        "now skip these rows.",
        "Find out which tool wrote them; restore a snapshot, or ask archon's maintainers before deleting.",
        rows=found_rows[:ROW_LIMIT], count=len(rows),
    )]


def _ids_for_rowids(conn, table: str, rowids: list[int]) -> list[str]:
    cols = columns(conn, table)
    key = "id" if "id" in cols else ("execution_run_id" if "execution_run_id" in cols else None)
    if key is None:
        return [str(r) for r in rowids]
    marks = ",".join("?" for _ in rowids)
    try:
        found = dict(conn.execute(f"SELECT rowid, {quote_identifier(key)} FROM {quote_identifier(table)} WHERE rowid IN ({marks})", rowids))
    except sqlite3.DatabaseError:
        return [str(r) for r in rowids]
    return [str(found.get(r, r)) for r in rowids]


