"""Approval requests against their event log: expiry, sequences, last event, decisions.

The costly part on a large database is relating each request to its events. Two scans, each
chosen from EXPLAIN QUERY PLAN, none sorting the 2.5-million-row events table:
- one pass over the requests (`_REQUEST_PASS_SQL`): per request, its events' entries in the covering
  index (project_id, approval_request_id, sequence) give count, highest and first sequence and the
  rowid of the last event, whose to_status is one row read. It answers sequences, last event and
  (by counting, see `_Part`) whether any event lacks its request, which spares
  `foreign_key_check` the events table. It is cut into id ranges run on parallel connections:
  each range is exact on its own, in one read transaction, so a live file is read in parallel too;
- decisions: a set difference (EXCEPT) of decided requests minus decision events.
"""

from __future__ import annotations

import sqlite3
from console.records import dataclass, field
from typing import Any

from console.services.doctor.context import Ctx, ids_text, rows_of
from console.services.doctor.report import Finding

EVENTS_TABLE = "approval_request_events"
PARTS = 3  # id ranges of the request pass (worker connections); more than the cores: the machine is shared

# --- approvals -------------------------------------------------------------------------------

# Per request (rows read in id order, so the event index is read nearly in order): its group of
# events by a covering seek of idx_approval_request_events_sequence; `lr` is the rowid of the
# event with the highest sequence (SQLite's bare column beside a single max()). Only anomalous
# requests are handed to Python (`doctor_keep`, called by CASE for those alone); the sums come back.
_REQUEST_PASS_SQL = """
SELECT coalesce(sum(n), 0), coalesce(sum(CASE WHEN gaps OR differs
         THEN doctor_keep(id, status, n, hi, last_to, gaps, differs) ELSE 0 END), 0)
FROM (SELECT id, status, n, hi, last_to, n > 0 AND coalesce(hi <> n OR ones <> 1, 0) AS gaps,
             coalesce(last_to = status, 0) = 0 AS differs
      FROM (SELECT id, status, n, hi, ones,
                   (SELECT x.to_status FROM approval_request_events x WHERE x.rowid = g.lr) AS last_to
            FROM (SELECT r.id AS id, r.status AS status, count(e.rowid) AS n, max(e.sequence) AS hi,
                         sum(e.sequence = 1) AS ones, e.rowid AS lr
                  FROM approval_requests r LEFT JOIN approval_request_events e
                    ON e.project_id = r.project_id AND e.approval_request_id = r.id
                  WHERE {requests}
                  GROUP BY r.id, r.rowid) g
            LIMIT -1))  -- not flattened: one to_status read per request, not one per use
"""
_EVENTS_IN_RANGE_SQL = "SELECT count(*) FROM approval_request_events WHERE {events}"
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
class _Part:
    """One id range of the request pass, read in one transaction: `events - matched` is the number
    of events in the range whose (project, request) has no request row -- events only match a
    request of the same range, so zero in every range means no event lacks its request."""

    events: int = 0  # events whose approval_request_id lies in the range
    matched: int = 0  # events counted per request (the sum over the range's requests)
    kept: list = field(default_factory=list)  # (id, status, n, hi, last to_status, gaps, differs)


@dataclass
class _EventsSummary:
    bad_sequences: list  # (request id, events, highest sequence), by id
    mismatches: list  # (request id, status, last event's to_status or None when it has none), by id
    orphan_events: int  # events with no request: foreign_key_check's events rows (as a count)


def _sql_order(value: Any) -> tuple:
    """SQLite's ORDER BY for mixed types: NULL, numbers, text, blobs."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, value) if isinstance(value, str) else (3, bytes(value))


def _ranges(conn: sqlite3.Connection, parts: int) -> list[tuple[str, str, tuple]]:
    """(condition on requests, condition on events, parameters) for `parts` id ranges that cover
    every request (a NULL id included) and every event that could match one."""
    # Bounds from ids sampled at evenly spaced rowids (a few seeks, not an OFFSET walk): ranges of
    # about equal size when ids and rowids grow together, still exact when they do not.
    # Two statements: min() and max() together would scan an index instead of two seeks.
    low = conn.execute("SELECT min(rowid) FROM approval_requests").fetchone()[0]
    high = conn.execute("SELECT max(rowid) FROM approval_requests").fetchone()[0]
    samples: list = []
    if parts > 1 and low is not None:
        step = max(1, (high - low) // (parts * 8))
        for at in range(low, high + 1, step):
            row = conn.execute("SELECT id FROM approval_requests WHERE rowid >= ? AND +id IS NOT NULL "
                               "ORDER BY rowid LIMIT 1", (at,)).fetchone()
            if row is not None:
                samples.append(row[0])
    samples.sort(key=_sql_order)
    bounds: list = []
    for i in range(1, parts):
        if samples:
            bound = samples[len(samples) * i // parts]
            if not bounds or _sql_order(bound) > _sql_order(bounds[-1]):
                bounds.append(bound)
    edges = [None, *bounds, None]
    ranges = []
    for low, high in zip(edges, edges[1:]):
        conds, params = [], []
        if low is not None:
            conds.append("{c} >= ?")
            params.append(low)
        if high is not None:
            conds.append("{c} < ?")
            params.append(high)
        cond = " AND ".join(conds) or "{c} IS NOT NULL"
        ranges.append((cond.format(c="r.id"), cond.format(c="approval_request_id"), tuple(params)))
    # A NULL id (a damaged row) matches no event; an index seek finds such rows.
    return [*ranges, ("r.id IS NULL", "0", ())]


def _request_pass(conn: sqlite3.Connection, requests: str, events: str, params: tuple) -> _Part:
    part = _Part()

    def keep(*row: Any) -> int:
        part.kept.append(row)
        return 1

    conn.create_function("doctor_keep", 7, keep)
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        part.matched = conn.execute(_REQUEST_PASS_SQL.format(requests=requests), params).fetchone()[0]
        part.events = conn.execute(_EVENTS_IN_RANGE_SQL.format(events=events), params).fetchone()[0]
    finally:
        if own:
            conn.execute("COMMIT")
        conn.create_function("doctor_keep", 7, None)
    return part


def _summarize(parts: list[_Part]) -> _EventsSummary:
    bad, mismatches = [], []
    for part in parts:
        for rid, status, n, hi, last_to, gaps, differs in part.kept:
            if gaps:
                bad.append((rid, n, hi))
            if not differs:
                continue
            if not n:
                mismatches.append((rid, status, None, False))
            elif last_to != status:
                mismatches.append((rid, status, last_to, True))
    bad.sort(key=lambda m: _sql_order(m[0]))
    mismatches.sort(key=lambda m: _sql_order(m[0]))
    return _EventsSummary(bad, mismatches, sum(p.events - p.matched for p in parts))


def approval_events(ctx: "Ctx") -> _EventsSummary:
    return _summarize([ctx.wait(key) for key in ctx.started_with("approval_part")])


def _decisions(conn: sqlite3.Connection) -> list:
    return sorted((r[0] for r in conn.execute(_DECISIONS_SQL)), key=_sql_order)


def prefetch_approvals(ctx: Ctx) -> None:
    if ctx.has("approval_requests", EVENTS_TABLE) and not ctx.started("approval_decisions"):
        ctx.start("approval_decisions", _decisions)  # the longest single scan goes first
        for i, (requests, events, params) in enumerate(_ranges(ctx.conn, PARTS if ctx.pool else 1)):
            ctx.start(f"approval_part{i}", lambda conn, r=requests, e=events, p=params: _request_pass(conn, r, e, p))


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


