"""Support bundles: a zip a user can send, with the doctor report and what explains it.

Members: README.txt (says plainly whether the bundle is redacted), MANIFEST.json, report.txt,
report.json, schema.sql, row_counts.json, ledger.json and evidence.json (the rows the findings
point at, with the events of those requests and environments).

A redacted bundle (`redact=True`) is built from a redacted copy of the database (see
`console/services/redaction.py` for the rules, console/services/redacted_copy.py for the copy): doctor runs again on that copy, so report.txt and report.json are
the console's own sentences around redacted values, and ids, evidence and ledger agree with each
other because they all come from the same copy. A finding the copy cannot reproduce exactly (same
id, severity and count) keeps its title, why and what-to-do, and says its details are withheld.
The file and integrity findings come from the original run: they hold sizes, page numbers and
SQLite's own words about schema objects, no row values (integrity's are withheld when any object's
definition is not archon's, since SQLite would quote its names). schema.sql shows a definition only
when it is archon's DDL for that object at some release (`redaction.known_definition`: by what the SQL
says, never by the object's name); any other definition is withheld and a name that is not archon's
replaced, and the copy doctor re-runs on holds no other text either
(console/services/redaction_schema.py). SQLite's messages (row_counts.json's "unreadable: ...") keep
only their category: the rest quotes the database.

The file is written under a random name made with `mkstemp` in the target directory (O_EXCL: a
planted symlink or a leftover is never followed or reused), then linked to the requested name,
which fails rather than replace anything there. Any failure removes that file and says so in one
sentence (exit 3); nothing is left to block the next attempt.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import tempfile
import zipfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import console
from console.clock import db_time
from console.db.limits import LONG_STATEMENT_SECONDS, statement_budget
from console.db.readonly import open_read_only
from console.db.files import require_output_dir
from console.db.sql import quote_identifier, stored_columns
from console.errors import EXIT_UNUSABLE, ConsoleError, UsageError
from console.services.doctor import run_doctor
from console.services.doctor.context import DEFAULT_STALE_AFTER
from console.services.doctor.report import Finding, Report
from console.services.redacted_copy import redacted_copy
from console.services.redaction import Redactor, known_definition
from console.text import json_text, strip_control

EVIDENCE_PER_FINDING = 20
EVENTS_PER_ROW = 50
# Checks whose findings come from the original run in a redacted bundle (they describe the file).
FILE_CHECKS = ("file", "integrity")


class BundleNotWritten(ConsoleError):
    """The bundle file could not be written (full disk, unwritable directory): exit 3."""

    exit_code = EXIT_UNUSABLE


@dataclass
class BundleResult:
    path: Path
    redacted: bool
    members: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


def check_output(out: str | os.PathLike[str], source: str | os.PathLike[str]) -> Path:
    """Refuse an unusable output path before doctor runs (so a refusal never follows a whole report)."""
    if not str(out):
        raise UsageError("--bundle needs a file name (OUT.zip).")
    path = Path(os.path.abspath(Path(out).expanduser()))
    if os.path.lexists(path):
        raise UsageError(f"{path} already exists; a bundle never overwrites a file, so choose a new name.")
    try:
        beside = path.parent.resolve() == Path(source).expanduser().resolve().parent
    except (OSError, RuntimeError):
        beside = False
    if beside:
        raise UsageError("Write the bundle outside the database's directory (nothing is written beside it).")
    existing = path.parent
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise BundleNotWritten(f"Cannot write the bundle: {existing} is not a directory.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BundleNotWritten(f"Cannot write the bundle into {existing} (not writable); choose a directory you can "
                               "write to.")
    require_output_dir(existing, "--bundle")  # nobody else can swap or read what is written there
    return path


def _tables(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _schema_sql(conn, redactor: Redactor) -> str:
    parts = []
    for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'trigger' THEN 2 ELSE 3 END, name"
    ):
        known = known_definition(name, sql) if redactor.enabled else sql
        if known is None:
            parts.append(f"-- {kind} {redactor.name(name, kind)}: not archon's definition of this object; "
                         "its definition is withheld in a redacted bundle\n")
        else:
            parts.append(f"-- {kind} {name}\n{known};\n")
    return "\n".join(parts)


def _row_counts(conn, redactor: Redactor) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for table in _tables(conn):
        try:
            count: Any = conn.execute(f"SELECT count(*) FROM {quote_identifier(table)}").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            count = f"unreadable: {redactor.error(exc)}"
        counts[redactor.name(table, "table")] = count
    return counts


def _dump(conn, table: str, where: str, params, limit: int) -> list[dict[str, Any]]:
    try:
        columns = stored_columns(conn, table)
        cur = conn.execute(f"SELECT {columns} FROM {quote_identifier(table)} WHERE {where} LIMIT {int(limit)}", params)
    except sqlite3.DatabaseError:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _ledger(conn) -> dict[str, Any]:
    tables = set(_tables(conn))
    return {table: _dump(conn, table, "1", (), 10_000) if table in tables else None
            for table in ("_sqlite_migrations", "_archon_console_ledger")}


def _evidence(conn, report: Report) -> list[dict[str, Any]]:
    tables = set(_tables(conn))
    evidence = []
    for finding in report.findings:
        rows = []
        for ref in finding.rows[:EVIDENCE_PER_FINDING]:
            table, key = ref["table"], ref["id"]
            if table not in tables:
                continue
            item: dict[str, Any] = {"table": table, "id": key,
                                    "row": (_dump(conn, table, "id = ?", (key,), 1) or [None])[0]}
            if table == "approval_requests" and "approval_request_events" in tables:
                item["events"] = _dump(conn, "approval_request_events", "approval_request_id = ? ORDER BY sequence",
                                       (key,), EVENTS_PER_ROW)
            if table == "execution_environments" and "execution_environment_events" in tables:
                item["events"] = _dump(conn, "execution_environment_events", "environment_id = ? ORDER BY sequence",
                                       (key,), EVENTS_PER_ROW)
            rows.append(item)
        if rows:
            evidence.append({"finding": finding.id, "rows": rows})
    return evidence


def redacted_report(report: Report, copy: sqlite3.Connection, redactor: Redactor, *, now: datetime,
                    stale_after: timedelta = DEFAULT_STALE_AFTER, foreign_objects: bool = False) -> Report:
    """The report doctor gives on the redacted copy, finding for finding the original's.

    `foreign_objects`: the schema has definitions that are not archon's DDL, whose names and text
    SQLite's integrity messages could quote; those messages are then withheld too."""
    from console.db.connect import ArchonDatabase

    names = [c for c in report.checks_run if c not in FILE_CHECKS]
    again: dict[str, Finding] = {}
    if names:
        target = ArchonDatabase(path=Path("database"), conn=copy, read_only=True)
        rerun = run_doctor(target, checks=names, full=report.mode == "full", now=now, stale_after=stale_after)
        again = {f.id: f for f in rerun.findings}
    findings = []
    for finding in report.findings:
        match = again.get(finding.id)
        if finding.check == "file" or (finding.check in FILE_CHECKS and not foreign_objects):
            findings.append(finding)
        elif match and (match.severity, match.count, len(match.rows)) == (
                finding.severity, finding.count, len(finding.rows)):
            findings.append(replace(match, check=finding.check))
        else:
            findings.append(replace(
                finding,
                found=f"{finding.count} item(s); the details are withheld in this redacted bundle "
                "(they could not be rebuilt from the redacted data).",
                rows=[{"table": redactor.name(r["table"], "table"),
                       "id": redactor.column(r["table"], "id", r["id"])} for r in finding.rows],
            ))
    return replace(report, path=redactor.placeholder(str(report.path), "path"), findings=findings)


README_REDACTED = """archon-console support bundle (REDACTED)

Every value and every JSON key taken from the database has been replaced by a placeholder such as
actor-1, path-2, id-3, key-4, value-5, unless it is one of archon's own words (statuses, lifecycle
states, operation and action kinds, event types, safety classes, migration names), a number, a
version, a timestamp, or a generated id or hash (apr-00000042, env-0001, a hex digest). Ids that
embed a name are replaced part by part, the same way everywhere in this bundle (prj-x:execution-
profile:2 becomes id-1:execution-profile:2 wherever it appears). The same original always has the
same placeholder within this bundle; the mapping is not in it. report.txt and report.json are the
doctor report produced on the redacted data, so their wording is the console's own. schema.sql
shows a definition only where it is archon's own DDL; any other definition is withheld, and names
that are not archon's (tables, columns, indexes, triggers) are placeholders (table-1, column-2)
everywhere in this bundle. SQLite's error messages keep only their kind (no such module, ...).
MANIFEST.json lists which fields were replaced and how often; it never contains the originals.
"""

README_PLAIN = """archon-console support bundle -- NOT REDACTED

This bundle is NOT redacted. evidence.json and ledger.json contain actor names, repository paths,
reasons and request payloads exactly as they are stored in the database, and report.txt names the
database's path. Share it only with people allowed to see that data, or make a new one with
`archon-console doctor --bundle OUT.zip --redact`.
"""


def bundle_members(report: Report, source: str | Path, redactor: Redactor, *, now: datetime,
                   stale_after: timedelta = DEFAULT_STALE_AFTER) -> dict[str, str]:
    """Every member's text (MANIFEST.json last); all text passes through the one sanitiser."""
    conn, cleanup, _how = open_read_only(Path(source))
    copy = None
    try:
        schema = _schema_sql(conn, redactor)
        counts = _row_counts(conn, redactor)
        if redactor.enabled:
            copy = redacted_copy(conn, redactor)
            foreign = any(known_definition(name, sql) is None for name, sql in conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"))
            shown = redacted_report(report, copy, redactor, now=now, stale_after=stale_after,
                                    foreign_objects=foreign)
        else:
            shown = report
        data = copy if copy is not None else conn
        ledger = _ledger(data)
        evidence = _evidence(data, shown)
    finally:
        if copy is not None:
            copy.close()
        conn.close()
        cleanup()
    members: dict[str, str] = {
        "README.txt": README_REDACTED if redactor.enabled else README_PLAIN,
        "report.txt": strip_control(shown.to_text()) + "\n",
        "report.json": json_text(shown.to_json()),
        "schema.sql": strip_control(schema),
        "row_counts.json": json_text(counts),
        "ledger.json": json_text(ledger),
        "evidence.json": json_text(evidence),
    }
    manifest = {
        "tool": "archon-console",
        "version": getattr(console, "__version__", "?"),
        "generated_at": db_time(now),
        "redaction": redactor.manifest(),
        "members": sorted([*members, "MANIFEST.json"]),
        "report_counts": report.counts(),
    }
    members["MANIFEST.json"] = json_text(manifest)
    return members


def write_bundle(
    report: Report,
    out: str | Path,
    *,
    source: str | Path | None = None,
    redact: bool = False,
    now: datetime,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> BundleResult:
    """Write the zip at `out` (never overwrites). `source` defaults to the report's database."""
    source = Path(source or report.path)
    out = check_output(out, source)
    redactor = Redactor(redact)
    with statement_budget(LONG_STATEMENT_SECONDS):  # the redacted copy reads every row of every table
        members = bundle_members(report, source, redactor, now=now, stale_after=stale_after)
    order = ["README.txt", "MANIFEST.json", *[m for m in members if m not in ("README.txt", "MANIFEST.json")]]
    _write_zip(out, [(name, members[name]) for name in order])
    return BundleResult(out, redact, list(members), json.loads(members["MANIFEST.json"]))


def _write_zip(out: Path, members: list[tuple[str, str]]) -> None:
    """Exclusively create a private file beside `out`, fill it, then link it to `out` (no clobber)."""
    temp: str | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
        with os.fdopen(fd, "wb") as handle:
            with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                for name, text in members:
                    archive.writestr(name, text)
            handle.flush()
            os.fsync(handle.fileno())
        _publish(temp, out)
        temp = None
    except FileExistsError:
        raise UsageError(f"{out} already exists; a bundle never overwrites a file, so choose a new name.") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            reason = "the disk is full"
        raise BundleNotWritten(f"The bundle could not be written to {out} ({reason}); nothing was left behind, "
                               "so free some space or choose another directory and run the command again.") from None
    finally:
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass


def _publish(temp: str, out: Path) -> None:
    """A hard link fails if anything (a file, a symlink) has appeared at `out`; rename would replace it."""
    try:
        os.link(temp, out, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(out):  # a file system without hard links: check, then rename
            raise FileExistsError(errno.EEXIST, "exists", str(out)) from None
        os.rename(temp, out)
        return
    os.unlink(temp)


__all__ = ["BundleNotWritten", "BundleResult", "bundle_members", "check_output", "redacted_report",
           "write_bundle"]
