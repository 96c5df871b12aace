"""Approval requests against their event log: expiry, sequences, last event, decisions.

The costly part on a large database is relating each request to its events. Three scans, each
chosen from EXPLAIN QUERY PLAN, none sorting the 2.5-million-row events table:
- sequences: GROUP BY over the covering index (project_id, approval_request_id, sequence);
- last events: per request one descending seek in that index and one row read (to_status);
- decisions: a set difference (EXCEPT) of decided requests minus decision events.
The same scans prove, by counting, that no event lacks its request (see `_summarize`), which
spares `foreign_key_check` the events table.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from console.services.doctor.context import Ctx, ids_text, rows_of
from console.services.doctor.report import Finding

EVENTS_TABLE = "approval_request_events"

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


def approval_events(ctx: "Ctx") -> _EventsSummary:
    if ctx.stable:
        return _summarize(ctx.wait("approval_groups"), ctx.wait("approval_last"))
    return ctx.wait("approval_events")


def _decisions(conn: sqlite3.Connection) -> list:
    return sorted((r[0] for r in conn.execute(_DECISIONS_SQL)), key=_sql_order)


def prefetch_approvals(ctx: Ctx) -> None:
    if ctx.has("approval_requests", EVENTS_TABLE):
        if ctx.stable:  # nobody writes this file: the two scans may run on two connections
            ctx.start("approval_groups", _event_groups)
            ctx.start("approval_last", _last_events)
        else:
            ctx.start("approval_events", _events_summary)
        ctx.start("approval_decisions", _decisions)


def check_approvals(ctx: Ctx) -> list[Finding]:
    if not ctx.has("approval_requests", EVENTS_TABLE):
        return []
    prefetch_approvals(ctx)
    overdue = ctx.conn.execute(_OVERDUE_SQL, {"now": ctx.now_text}).fetchall()
    summary = approval_events(ctx)
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
                                    rows=rows_of(t, ids), count=len(items)))

    add("pending_overdue", "approvals.pending_past_expiry", "warning", "Pending requests past their expiry",
        lambda items, ids: f"{len(items)} request(s) still pending after expires_at (at {ctx.now_text} UTC): "
        f"{ids_text(ids, len(ids))}.",
        "Nothing in the database expires a request; archon's sweep has not run (is archon running?). They "
        "can no longer be approved.",
        "Start archon, or run the console's expiry sweep (`approvals expire`).")
    add("approved_overdue", "approvals.approved_past_expiry", "warning",
        "Approved requests past expiry, never consumed",
        lambda items, ids: f"{len(items)} request(s) approved but not consumed before expires_at: "
        f"{ids_text(ids, len(ids))}.",
        "The approved action was never carried out; the approval is stale and should not be used any more.",
        "Run the expiry sweep, or revoke them (`approvals revoke`) with a reason.")
    add("bad_sequence", "approvals.event_sequence", "error", "Approval event sequences with gaps",
        lambda items, ids: f"{len(items)} request(s) whose events are not numbered 1..n: "
        + ids_text([f"{r[0]} ({r[1]} events, highest {r[2]})" for r in items], len(items)) + ".",
        "Events were deleted, or written outside a transaction; the history is incomplete.",
        "Compare with a backup; the console never edits history.")
    add("status_mismatch", "approvals.status_mismatch", "error", "Request status differs from its last event",
        lambda items, ids: f"{len(items)} request(s): "
        + ids_text([f"{r[0]} (status {r[1]}, last event {r[2] if r[3] else 'none'})" for r in items],
                    len(items)) + ".",
        "A status change was written without its event (or the event without the change): the audit trail "
        "does not explain the current state.",
        "Find the writer that skipped the event; the console always writes both in one transaction.")
    add("undocumented", "approvals.decision_without_event", "error", "Decisions without a decision event",
        lambda items, ids: f"{len(items)} request(s) have decision_at set but no approved/denied event: "
        f"{ids_text(ids, len(ids))}.",
        "Nobody can tell who decided or why.",
        "Treat these decisions as unaudited; ask who wrote them.")
    return findings


