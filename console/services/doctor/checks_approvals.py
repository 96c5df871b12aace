"""Approval requests against their event log: expiry, sequences, last event, decisions.

The costly part on a large database is relating each request to its events. One pass does it
(`_REQUEST_PASS_SQL`), chosen from EXPLAIN QUERY PLAN and measured against the alternatives (an
`EXCEPT` for the decisions, a `GROUP BY` over the events index, id ranges on parallel connections):
the requests table is read once in rowid order, and per request its events are found by a seek
of idx_approval_request_events_sequence (project_id, approval_request_id, sequence). The group
gives count, highest and first sequence, the last event's to_status (SQLite's bare column beside
a single max()) and whether any event records the decision: sequences, last event and decisions in
one read of each table, no sort and no temporary b-tree. Counting the events matched against all
events (`_PassResult.orphan_events`) says whether any event lacks its request, which spares
`foreign_key_check` the events table. Only anomalous requests reach Python (`doctor_keep`, called
by CASE for those alone); the pass runs on a worker connection of its own, on the snapshot every
other check reads (context.py). When the constraints check runs too, the pass evaluates its terms
on every request and every event it reads (checks_constraints.py `row_probe`), so that check need
not read the two largest tables again.
"""

from __future__ import annotations

import bisect
import sqlite3
from console.records import dataclass, field
from typing import Any

from console.db.sql import quote_identifier
from console.services.doctor.checks_constraints import KEPT_PER_CONSTRAINT, TablePlan, foldable, key_text, row_probe
from console.services.doctor.context import Ctx, ids_text, rows_of
from console.services.doctor.report import Finding

EVENTS_TABLE = "approval_request_events"
PASS_KEY = "approval_pass"
# Rowid ranges of the request pass: the worker connections take them as they come free (the
# integrity scan keeps one busy for about as long as the whole pass), so the two cores finish together.
PARTS = 6

# --- approvals -------------------------------------------------------------------------------

# {fk}: 1 or 2 for a request whose foreign keys find no parent ({fk_joins}, `COUNTED_FKS`), else 0.
# Every comparison is BINARY on TEXT columns: what foreign_key_check compares when `fk_countable`
# holds. Each parent is a seek on its unique index, one row at most (SQLite reads no second match).
# {request_probe}, {event_probe}: the constraints check's terms on this request and on each of its
# events (checks_constraints.py `row_probe`), or 0; summed so that SQLite computes them.
_REQUEST_PASS_SQL = """
SELECT coalesce(sum(n), 0), coalesce(sum(CASE WHEN gaps OR differs OR undocumented
         THEN doctor_keep(id, status, n, hi, last_to, gaps, differs, undocumented) ELSE 0 END), 0),
       coalesce(sum(fk_missing), 0), coalesce(sum(broken), 0)
FROM (SELECT id, status, n, hi, last_to, n > 0 AND coalesce(hi <> n OR ones <> 1, 0) AS gaps,
             coalesce(last_to = status, 0) = 0 AS differs, decided AND coalesce(decisions, 0) = 0 AS undocumented,
             fk_missing, coalesce(request_broken, 0) + coalesce(events_broken, 0) AS broken
      FROM (SELECT r.id AS id, r.status AS status, r.decision_at IS NOT NULL AS decided, {fk} AS fk_missing,
                   count(e.rowid) AS n, max(e.sequence) AS hi, sum(e.sequence = 1) AS ones,
                   e.to_status AS last_to, sum(e.to_status IN ('approved', 'denied')) AS decisions,
                   {request_probe} AS request_broken, sum({event_probe}) AS events_broken
            FROM approval_requests r {fk_joins} LEFT JOIN approval_request_events e
              ON e.project_id = r.project_id COLLATE BINARY AND e.approval_request_id = r.id COLLATE BINARY
            WHERE r.rowid BETWEEN :low AND :high
            GROUP BY r.rowid))
"""
_REQUEST_FKS = ("(r.project_id IS NOT NULL AND p.id IS NULL) + (r.execution_run_id IS NOT NULL "
                "AND r.project_id IS NOT NULL AND x.id IS NULL)")
_REQUEST_FK_JOINS = (
    "LEFT JOIN projects p ON p.id = r.project_id COLLATE BINARY "
    "LEFT JOIN execution_runs x ON x.id = r.execution_run_id COLLATE BINARY AND x.project_id = r.project_id COLLATE BINARY"
)
# Foreign keys the pass vouches for by counting, child -> {parent: [(child column, parent column)]}:
# the events' (each event matched to its request is counted once, `_PassResult.orphan_events`) and
# the requests' own (`_PassResult.requests_without_parent`). A nonzero count, or `doctor --full`,
# means foreign_key_check reads that table after all (checks_integrity.py). Counting events takes
# the requests' unique (id, project_id) index at its word; `quick_check` does not read index
# contents against the table, `integrity_check` does, and `--full` counts nothing.
COUNTED_FKS = {
    EVENTS_TABLE: {"approval_requests": [("approval_request_id", "id"), ("project_id", "project_id")]},
    "approval_requests": {"execution_runs": [("execution_run_id", "id"), ("project_id", "project_id")],
                          "projects": [("project_id", "id")]},
}
_EVENTS_SQL = "SELECT count(*) FROM approval_request_events"
# Candidates from the covering status/expiry index; consumed_at is read for expired approvals only.
_OVERDUE_SQL = """
SELECT id, status FROM approval_requests
WHERE rowid IN (SELECT rowid FROM approval_requests
                WHERE status IN ('pending', 'approved') AND julianday(expires_at) < julianday(:now))
  AND (status = 'pending' OR consumed_at IS NULL)
"""


@dataclass
class Tally:
    """A constraint's broken rows as the approvals pass meets them (in parts, each in its own
    order): the count, and the `KEPT_PER_CONSTRAINT` smallest (rowid, key), which are the rows `scan`,
    reading the table in rowid order, keeps."""
    count: int = 0
    kept: list[tuple[int, str]] = field(default_factory=list)

    def add(self, rowid: int, key: str) -> None:
        self.count += 1
        if len(self.kept) < KEPT_PER_CONSTRAINT or rowid < self.kept[-1][0]:
            bisect.insort(self.kept, (rowid, key))
            del self.kept[KEPT_PER_CONSTRAINT:]

    def merge(self, other: Tally) -> None:
        self.count += other.count
        self.kept = sorted(self.kept + other.kept)[:KEPT_PER_CONSTRAINT]


@dataclass
class _PassResult:
    bad_sequences: list = field(default_factory=list)  # (request id, events, highest sequence), by id
    mismatches: list = field(default_factory=list)  # (id, status, last to_status, has events), by id
    undocumented: list = field(default_factory=list)  # request ids, decided without a decision event
    orphan_events: int = 0  # events with no request: foreign_key_check's events rows (as a count)
    requests_without_parent: int = 0  # the same for the requests' foreign keys, when counted
    tallies: dict[str, list[Tally]] = field(default_factory=dict)  # folded table -> per constraint


def _sql_order(value: Any) -> tuple:
    """SQLite's ORDER BY for mixed types: NULL, numbers, text, blobs."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, value) if isinstance(value, str) else (3, bytes(value))


def fk_countable(conn: sqlite3.Connection, child: str) -> bool:
    """Whether `child`'s foreign keys are exactly `COUNTED_FKS[child]`, on TEXT columns, each parent
    key under a unique BINARY index: then a BINARY comparison finds a parent exactly when
    foreign_key_check does (no affinity applies, no other collation), so counting is as exact."""
    expected = COUNTED_FKS[child]
    keys: dict[int, list] = {}
    for row in conn.execute(f"PRAGMA foreign_key_list({child})"):
        keys.setdefault(row[0], []).append((row[2], row[3], row[4]))
    found = {pairs[0][0]: [(frm, to) for _p, frm, to in pairs] for pairs in keys.values()}
    if len(found) != len(keys) or found != expected:
        return False

    def text_columns(table: str, names) -> bool:
        types = {r[1]: str(r[2]).upper() for r in conn.execute(f"PRAGMA table_info({table})")}
        return all(types.get(name) == "TEXT" for name in names)

    for parent, pairs in expected.items():
        if not text_columns(child, [f for f, _t in pairs]) or not text_columns(parent, [t for _f, t in pairs]):
            return False
        unique = False
        for index in conn.execute(f"PRAGMA index_list({parent})").fetchall():
            info = [r for r in conn.execute(f"PRAGMA index_xinfo({quote_identifier(index[1])})") if r[5]]
            if index[2] and {r[2] for r in info} == {t for _f, t in pairs} and len(info) == len(pairs) \
                    and all(str(r[4]).upper() == "BINARY" for r in info):
                unique = True
        if not unique:
            return False
    return True


def _request_pass(conn: sqlite3.Connection, low: int, high: int, *, count_events: bool,
                  request_fks: bool, folded: dict[str, TablePlan]) -> _PassResult:
    """The pass over the requests with rowids low..high (and, with `count_events`, the count of all
    events), in one read transaction: the snapshot every check shares, or its own. `folded`: the
    constraints check's plans of the requests and events tables, evaluated on the rows read."""
    kept: list[tuple] = []
    plans = [folded.get("approval_requests"), folded.get(EVENTS_TABLE)]
    tallies = [[Tally() for _c in plan.constraints] if plan else [] for plan in plans]

    def keep(*row: Any) -> int:
        kept.append(row)
        return 1

    def broken(tag: int, rowid: int, *values: Any) -> int:
        width = len(plans[tag].keys)
        key = key_text(plans[tag], values[:width])
        for tally, flag in zip(tallies[tag], values[width:]):
            if flag:
                tally.add(rowid, key)
        return 1

    conn.create_function("doctor_keep", 8, keep)
    conn.create_function("doctor_broken", -1, broken)
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        sql = _REQUEST_PASS_SQL.format(
            fk=_REQUEST_FKS if request_fks else "0", fk_joins=_REQUEST_FK_JOINS if request_fks else "",
            request_probe=row_probe(plans[0], 0, "r.rowid") if plans[0] else "0",
            event_probe=row_probe(plans[1], 1, "e.rowid") if plans[1] else "0")
        matched, _kept, without_parent, _broken = conn.execute(sql, {"low": low, "high": high}).fetchone()
        events = conn.execute(_EVENTS_SQL).fetchone()[0] if count_events else 0
    finally:
        if own:
            conn.execute("COMMIT")
        conn.create_function("doctor_keep", 8, None)
        conn.create_function("doctor_broken", -1, None)
    result = _PassResult(orphan_events=events - matched, requests_without_parent=without_parent,
                         tallies={plan.table: t for plan, t in zip(plans, tallies) if plan})
    for rid, status, n, hi, last_to, gaps, differs, undocumented in kept:
        if gaps:
            result.bad_sequences.append((rid, n, hi))
        if differs and not n:
            result.mismatches.append((rid, status, None, False))
        elif differs and last_to != status:
            result.mismatches.append((rid, status, last_to, True))
        if undocumented:
            result.undocumented.append(rid)
    return result


def approval_events(ctx: "Ctx") -> _PassResult:
    """The parts of the request pass, merged: every list in id order, the orphans summed, the
    constraint tallies added up."""
    prefetch_approvals(ctx)
    merged = _PassResult()
    for key in ctx.started_with(PASS_KEY):
        part = ctx.wait(key)
        merged.bad_sequences += part.bad_sequences
        merged.mismatches += part.mismatches
        merged.undocumented += part.undocumented
        merged.orphan_events += part.orphan_events
        merged.requests_without_parent += part.requests_without_parent
        for name, tallies in part.tallies.items():
            into = merged.tallies.setdefault(name, [Tally() for _t in tallies])
            for total, tally in zip(into, tallies):
                total.merge(tally)
    merged.bad_sequences.sort(key=lambda m: _sql_order(m[0]))
    merged.mismatches.sort(key=lambda m: _sql_order(m[0]))
    merged.undocumented.sort(key=_sql_order)
    return merged


def _parts(conn: sqlite3.Connection, parts: int) -> list[tuple[int, int]]:
    """`parts` rowid ranges covering every request (two seeks: min and max rowid)."""
    low = conn.execute("SELECT min(rowid) FROM approval_requests").fetchone()[0]
    high = conn.execute("SELECT max(rowid) FROM approval_requests").fetchone()[0]
    if low is None:
        return [(0, -1)]
    step = max(1, -(-(high - low + 1) // parts))
    return [(at, min(at + step - 1, high)) for at in range(low, high + 1, step)]


def prefetch_approvals(ctx: Ctx) -> None:
    if ctx.has("approval_requests", EVENTS_TABLE) and not ctx.started_with(PASS_KEY):
        parts = _parts(ctx.conn, PARTS if ctx.parallel else 1)
        ctx.counted_fks = {child for child in COUNTED_FKS if not ctx.full and "foreign_keys" in ctx.names
                           and ctx.has(child, *COUNTED_FKS[child]) and fk_countable(ctx.conn, child)}
        request_fks = "approval_requests" in ctx.counted_fks
        folded = _folded(ctx)
        ctx.folded, ctx.fold_tallies = folded, lambda: _fold_tallies(ctx)
        for i, (low, high) in enumerate(parts):
            ctx.start(f"{PASS_KEY}{i}", lambda conn, low=low, high=high, first=(i == 0):
                      _request_pass(conn, low, high, count_events=first, request_fks=request_fks, folded=folded))


def _folded(ctx: Ctx) -> dict[str, TablePlan]:
    """The constraints check's plans the pass evaluates: the requests' (it reads each request once),
    and the events' when each event can match one request only (the requests' (id, project_id)
    is unique, `fk_countable`); whether every event was matched is known after the pass."""
    folded = {}
    try:
        for name in ("approval_requests", EVENTS_TABLE):
            plan = foldable(ctx, name)
            if plan is not None and (name != EVENTS_TABLE or fk_countable(ctx.conn, EVENTS_TABLE)):
                folded[name] = plan
    except sqlite3.DatabaseError:
        return {}  # the constraints check plans again, and reports what fails
    return folded


def _fold_tallies(ctx: Ctx) -> dict[str, list[Tally]]:
    """The tallies of the tables the pass read whole: the events' only if every event was matched
    to a request (an orphan event was never read, and the constraints check scans the table)."""
    merged = approval_events(ctx)
    if merged.orphan_events != 0:
        merged.tallies.pop(EVENTS_TABLE, None)
    return merged.tallies


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
        "undocumented": summary.undocumented,
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


