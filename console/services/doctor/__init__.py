"""`doctor`: named checks over an archon database, each finding with ids, counts, why and what to do.

Doctor never writes. Given a path it opens the file through `readonly.open_read_only` (in place
wherever SQLite can read it without creating anything, a live WAL file included; through a private
copy otherwise), so the main file and -wal never change and nothing is created beside them.

Every check is set-based SQL that returns only anomalous rows; the only Python loop runs over
profile revisions, whose fingerprints need SHA-256 (there are few). Every check reads one snapshot:
the main connection and the worker connections begin their read transactions on the same commit
(`context.pin_snapshot`), a live WAL file included, so a commit landing meanwhile is in no finding
and no finding compares rows read at two commits. The long scans -- the integrity scan
(`quick_check`, or `integrity_check` with `full`), the approvals pass in rowid parts
(`checks_approvals`, which also counts the foreign keys foreign_key_check would otherwise read the
two largest tables for, and evaluates the constraints check's terms on their rows), the constraint
scan of the other tables and foreign_key_check -- run on the worker connections, each taken by the
first one free, while the short checks run on the main connection: the file is read about once for
the integrity scan and once for everything else. No connection maps the file (mmap): six mappings
of a large file showed as gigabytes of resident memory, for a gain of about a tenth of the CPU time.

Exit codes (`DoctorReport.exit_code`): 3 when the console cannot use the database at all -- the same
conditions under which every other command refuses to open it: not a SQLite file, a truncated file,
an unreadable schema, not an archon database, or an upgrade ledger this console cannot vouch for
(written by a newer console, edited, or with changed checksums). Doctor still prints every finding
it could gather in those cases; only a file that is not SQLite at all gets one sentence. Otherwise 1
when there is an error (or, with `strict`, a warning), else 0.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Sequence

from console.clock import db_time
from console.db.connect import ARCHON_CORE_TABLES, ArchonDatabase, is_busy
from console.db.limits import LONG_STATEMENT_SECONDS, statement_budget
from console.db.readonly import open_read_only, stat_token
from console.db.paths import require_database_file
from console.text import json_text
from console.services.doctor.checks_approvals import check_approvals, prefetch_approvals
from console.services.doctor.checks_constraints import check_constraints, prefetch_constraints
from console.services.doctor.checks_environments import check_environments
from console.services.doctor.checks_integrity import (
    check_file,
    check_foreign_keys,
    integrity_finding,
    integrity_messages,
    prefetch_foreign_keys,
    read_header,
)
from console.services.doctor.checks_profiles import check_profiles
from console.services.doctor.checks_schema import check_ledger, check_schema
from console.services.doctor.context import DEFAULT_STALE_AFTER, Ctx
from console.services.doctor.report import DoctorReport, Finding, busy_finding

# --- the runner ------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[Ctx], list[Finding]]] = {
    "file": check_file,
    "integrity": lambda ctx: [],  # a scan on a worker connection, see _run
    "foreign_keys": check_foreign_keys,
    "schema": check_schema,
    "ledger": check_ledger,
    "approvals": check_approvals,
    "environments": check_environments,
    "profiles": check_profiles,
    "constraints": check_constraints,
}
PREFETCH: dict[str, Callable[[Ctx], None]] = {
    "foreign_keys": prefetch_foreign_keys,
    "approvals": prefetch_approvals,
    "constraints": prefetch_constraints,
}
WAITS_FOR_SCANS = ("approvals", "constraints", "foreign_keys")  # in this order: approvals' own query runs before it waits
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
            from console.suggest import did_you_mean

            near = did_you_mean(head, [*CHECKS, *PREFIX_TO_CHECK])
            raise ValueError(
                f"Unknown check {item!r}; known: {', '.join(CHECKS)} "
                f"(or a finding id such as approvals.event_sequence).{' ' + near if near else ''}"
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
) -> DoctorReport:
    """Run the named checks (all by default) and return the findings; never writes.

    Raises `DatabaseUnusable` only when the file is not SQLite at all (missing, empty, bad header).
    """
    names, whole, single = _select(checks)
    with statement_budget(LONG_STATEMENT_SECONDS):  # a full integrity scan of a large file
        if isinstance(target, ArchonDatabase):
            path, opened = Path(target.path), "caller's connection"
            findings = _run(target.conn, path, names, full=full, now=now, stale_after=stale_after)
        else:
            path = Path(target).expanduser()
            require_database_file(path)
            findings, opened = _run_on_path(path, names, full=full, now=now, stale_after=stale_after)
    findings = [f for f in findings if f.check in whole or f.id in single or f.unusable]
    return DoctorReport(
        path=str(path), mode="full" if full else "quick", generated_at=db_time(now),
        checks_run=names, findings=findings, opened=opened,
    )


def _run_on_path(path: Path, names, *, full, now, stale_after) -> tuple[list[Finding], str]:
    """Read in place when that is safe; if the file changed meanwhile (an immutable read of a WAL
    file, or a main file read beside a private copy of its -wal, that a starting archon checkpointed
    into), read again from a private copy."""
    for force_copy in (False, True):
        before = stat_token(path)
        header = read_header(path)  # before the connection: never open the file while one is open
        conn, cleanup, opened = open_read_only(path, force_copy=force_copy)
        try:
            findings = _run(conn, path, names, full=full, now=now, stale_after=stale_after, header=header)
        finally:
            conn.close()
            cleanup()
        in_place = "immutable" in opened or opened.startswith("private copy of the -wal")  # no lock archon sees
        if force_copy or not in_place or stat_token(path) == before:
            return findings, opened
    raise AssertionError("unreachable")


def _run(conn, path: Path, names: list[str], *, full: bool, now: datetime, stale_after: timedelta,
         header: bytes | None = None) -> list[Finding]:
    # Worker connections only when a second connection can be opened on the same file without
    # side effects; all of them, and this one, read one snapshot (context.py `pin_snapshot`).
    ctx = Ctx(conn, path=path, now=now, stale_after=stale_after, full=full, names=names,
              parallel=bool(getattr(conn, "source_uri", None)))
    ctx.header = header
    findings: list[Finding] = []
    messages: list[str] = []
    try:
        if "integrity" in names:  # the longest scan starts first
            ctx.start("integrity", lambda side: integrity_messages(side, full))
        if "file" in names:
            findings.extend(_guarded("file", ctx))
        readable = True
        try:
            ctx.tables  # noqa: B018 - reads sqlite_master
        except sqlite3.DatabaseError as exc:
            readable = False
            findings.append(busy_finding("Reading the schema", exc) if is_busy(exc) else Finding(
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
                # The long scans start first, on the worker connections, and overlap with the rest.
                for name in names:
                    if name in PREFETCH:
                        try:
                            PREFETCH[name](ctx)
                        except sqlite3.DatabaseError:
                            pass  # the check itself runs the failing query again and reports it
                # Checks that wait for the background scans go last, so that the quick ones run
                # meanwhile; the findings keep the order of CHECKS.
                found: dict[str, list[Finding]] = {}
                rest = [n for n in names if n not in ("file", "integrity")]
                for name in sorted(rest, key=lambda n: WAITS_FOR_SCANS.index(n) + 1 if n in WAITS_FOR_SCANS else 0):
                    found[name] = _guarded(name, ctx)
                for name in rest:
                    findings.extend(found[name])
        if "integrity" in names:
            messages = ctx.wait("integrity")
    finally:
        ctx.close()
    if "integrity" in names:
        findings.extend(_tag("integrity", integrity_finding(messages, full)))
    return findings


def _guarded(name: str, ctx: Ctx) -> list[Finding]:
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


def project_to_open(handle: ArchonDatabase, table: str, key: str) -> str | None:
    """The project a finding's row opens in the TUI (the project itself, or a profile revision's),
    or None when that project no longer exists: an orphan revision is just what doctor reports, and
    a project screen opened on a missing project would stay empty behind its refusal."""
    if table == "execution_profile_revisions":
        row = handle.conn.execute(
            "SELECT project_id FROM execution_profile_revisions WHERE id = ?", (key,)).fetchone()
        if row is None:
            return None
        key = row[0]
    elif table != "projects":
        return None
    found = handle.conn.execute("SELECT id FROM projects WHERE id = ?", (key,)).fetchone()
    return None if found is None else found[0]


def report_json_text(report: DoctorReport, *, strict: bool = False) -> str:
    return json_text(report.to_json(strict=strict))


__all__ = [
    "CHECKS",
    "project_to_open",
    "report_json_text",
    "run_doctor",
]
