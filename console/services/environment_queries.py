"""Reading execution environments: the list's filters, keyset pages, one environment with its
leases and timeline, and what the console derives from a row (claim age, staleness, lease
admission as docs/archon-schema.md describes it, and the requests handed to archon not performed yet).

Nothing here writes; `environment_claims` holds the writes, `environment_rules` the rules both use.
"""

from __future__ import annotations

import sqlite3
from console.records import replace
from datetime import datetime, timedelta

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Mapping

from console.db.sql import quote_identifier, sqlite_lower, stored_columns
from console.clock import db_time, duration, parse_time, seconds_between
from console.db.connect import ArchonDatabase
from console.db.queries import Cursor, KeysetQuery, fetch_page
from console.errors import Refusal, UsageError
from console.models.environments import (
    ARCHON_FIELDS,
    EnvironmentEvent,
    EnvironmentLease,
    EnvironmentPage,
    EnvironmentView,
    PendingHandoff,
)
from console.services.base import require_feature
from console.services.identity import account_of
from console.services.resolve import find_project, project_names
from console.services.environment_rules import (
    ADMITTING_STATES,
    DEFAULT_STALE_AFTER,
    HANDOFF,
    HANDOFF_LABEL,
    HOLDING_BINDING,
    HOLDING_NOT_CHECKED,
    STATES,
    claim_holder,
)

# What `/` finds an environment by (`environment_query`'s `search`): its id, its project's id and
# name, its state and provider, and on releases with claims the claim's kind and holder.
SEARCHED = ("e.id", "e.project_id", "(SELECT p.name FROM projects p WHERE p.id = e.project_id)", "e.lifecycle_state",
            "e.provider_kind")
CLAIM_SEARCHED = ("e.operation_kind", "e.operation_claim_id")

# Execution leases only, as archon's admission and its unique index count them; what holds an
# environment against a stop hand-off is wider (environment_rules.HOLDING_BINDING).
ACTIVE_LEASES = (
    "(SELECT count(*) FROM execution_environment_run_bindings b WHERE b.environment_id = e.id "
    "AND b.relationship = 'execution' AND b.released_at IS NULL)"
)


def claims_supported(handle: ArchonDatabase) -> bool:
    """Whether this database's release has operation claims (archon 1.10.0)."""
    return handle.shape.supports("claims")


def table_columns(conn: sqlite3.Connection, table: str) -> list[sqlite3.Row]:
    return conn.execute(f"PRAGMA table_info({quote_identifier(table)})").fetchall()


def claim_age(claimed_at: Any, now: datetime) -> float:
    """Seconds since a claim was taken; infinite when its time cannot be read (then it is stale)."""
    at = parse_time(claimed_at)
    return (now - at).total_seconds() if at else float("inf")


def environment_view(row: Mapping[str, Any], now: datetime, stale_after: timedelta, **more: Any) -> EnvironmentView:
    """A row of `execution_environments` (with `active_lease_count`) and what the console derives from it."""
    columns = {name: value for name, value in row.items() if name != "active_lease_count"}
    held = row.get("operation_claim_id")
    claimed_at = parse_time(row.get("operation_claimed_at"))
    age = seconds_between(now, claimed_at) if claimed_at and held else None
    reasons = []
    state = row.get("lifecycle_state")
    if state not in ADMITTING_STATES:
        reasons.append(f"it is {state}")
    if row.get("retirement_requested_at"):
        reasons.append("retirement was requested")
    if held:
        reasons.append(f"it is claimed for {row.get('operation_kind')}")
    if row.get("active_lease_count"):
        reasons.append("an execution lease is active (one at a time)")
    return EnvironmentView(
        **{name: row.get(name) for name in ARCHON_FIELDS},
        active_lease_count=row.get("active_lease_count") or 0,
        claim_holder=claim_holder(held),
        claim_age_seconds=age,
        # the same comparison as a takeover's and as `--stale` (not the whole seconds shown)
        stale=bool(held) and claim_age(row.get("operation_claimed_at"), now) > stale_after.total_seconds(),
        admits_leases=not reasons,
        admission_reason="; ".join(reasons) if reasons else "admits a new execution lease",
        pending_handoffs=tuple(pending_handoffs(row, now, stale_after)),
        columns=columns,
        **more,
    )


def pending_handoffs(row: Mapping[str, Any], now: datetime, wait_after: timedelta) -> list[PendingHandoff]:
    """The requests archon has been handed and has not performed yet, as archon's columns show them.

    A stop is due when `idle_stop_at` has passed while the environment is still ready or running
    (whether the console or archon's own idle schedule set it); a retirement is pending while
    `retirement_requested_at` is set and the environment is not retired; a cleanup retry is due
    when `cleanup_retry_at` has passed while it is still cleanup_pending. `overdue` means archon
    should have acted by now (waited longer than `wait_after`, the stale threshold): archon is
    probably not running. Retirement that archon has started (retiring, cleanup_pending), is held
    by a claim or waits for a run to end is never overdue.
    """
    state = row.get("lifecycle_state")
    found: list[PendingHandoff] = []

    def add(op: str, since_text: Any, note: str = "", *, can_be_overdue: bool = True) -> None:
        since = parse_time(since_text)
        age = seconds_between(now, since) if since else None
        column, performer = HANDOFF[op]  # type: ignore[misc]
        when = f"{duration(age)} ago" if age is not None else f"at an unreadable time ({since_text})"
        text = f"{HANDOFF_LABEL[op]} requested {when}; {performer} performs it" + note
        overdue = can_be_overdue and (age is None or age > wait_after.total_seconds())
        found.append(PendingHandoff(kind=op, column=column, since=since_text, age_seconds=age,
                                    performed_by=performer, overdue=overdue, text=text))

    def due(column: str) -> bool:
        at = parse_time(row.get(column))
        return bool(row.get(column)) and (at is None or at <= now)

    if state in ("ready", "running") and due("idle_stop_at"):
        add("stop", row.get("idle_stop_at"))
    if row.get("retirement_requested_at") and state != "retired":
        note, waiting = "", True
        if state in ("retiring", "cleanup_pending"):
            note, waiting = f" (under way: {state})", False
        elif row.get("operation_claim_id"):
            note, waiting = f" once the {row.get('operation_kind')} claim is completed or released", False
        elif row.get("active_lease_count"):
            note, waiting = " once the run holding its execution lease ends", False
        add("retire", row.get("retirement_requested_at"), note, can_be_overdue=waiting)
    if state == "cleanup_pending" and due("cleanup_retry_at"):
        add("cleanup_retry", row.get("cleanup_retry_at"))
    return found


def environment_query(
    handle: ArchonDatabase,
    *,
    now: datetime,
    state: str | None = None,
    project: str | None = None,
    claimed: bool = False,
    stale: bool = False,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    search: str | None = None,
) -> KeysetQuery:
    """The environments matching the filters, ordered by id (ids only; callers widen `columns`).

    The one definition of the filters: the list, its counts and the TUI's jumps all page it.
    `project` is an id or a unique name (console/services/resolve.py); `search` is text found,
    case-folded, in the id, the project's id or name, the state, the provider or the claim: a
    predicate of the query, so a search reads pages by id like every other filter.
    """
    if state is not None and state not in STATES:
        raise UsageError(f"Unknown state {state!r}; one of: {', '.join(STATES)}.")
    if (claimed or stale) and not handle.shape.supports("claims"):
        require_feature(handle, "claims", what="Filtering by operation claims")
    where: list[str] = []
    params: list[Any] = []
    if state:
        where.append("e.lifecycle_state = ?")
        params.append(state)
    if project:
        found = find_project(handle.conn, project)  # else no project has that id: nothing matches
        where.append("e.project_id = ?")
        params.append(found["id"] if found is not None else project)
    needle = sqlite_lower((search or "").strip())
    if needle:
        searched = [*SEARCHED, *(CLAIM_SEARCHED if handle.shape.supports("claims") else ())]
        text = " || ' ' || ".join(f"coalesce({column}, '')" for column in searched)
        where.append(f"instr(lower({text}), ?) > 0")
        params.append(needle)
    if claimed or stale:
        where.append("e.operation_claim_id IS NOT NULL")
    if stale:  # an unreadable claim time counts as stale, as it does for a takeover
        where.append("(julianday(e.operation_claimed_at) IS NULL OR julianday(e.operation_claimed_at) < julianday(?))")
        params.append(db_time(now - stale_after))
    return KeysetQuery("execution_environments e", keys=("e.id",), key_names=("id",), columns="e.id",
                       where=tuple(where), params=tuple(params))


def list_environments(
    handle: ArchonDatabase,
    *,
    now: datetime,
    state: str | None = None,
    project: str | None = None,
    claimed: bool = False,
    stale: bool = False,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    search: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> EnvironmentPage:
    """One keyset page ordered by id; `after` is the last id of the previous page."""
    query = replace(
        environment_query(handle, now=now, state=state, project=project, claimed=claimed, stale=stale,
                          stale_after=stale_after, search=search),
        columns=f"{stored_columns(handle.conn, 'execution_environments', 'e')}, {ACTIVE_LEASES} AS active_lease_count",
    )
    if limit and limit > 0:
        page = fetch_page(handle.conn, query, cursor=Cursor((after,)) if after is not None else None, limit=limit)
        rows, next_after = page.rows, (page.last_key[0] if page.has_next else None)
    else:  # everything after `after`, for counts and exports
        if after is not None:
            query = query.filtered("e.id > ?", after)
        sql = f"SELECT {query.columns} FROM {query.source}"
        if query.where:
            sql += " WHERE " + " AND ".join(f"({w})" for w in query.where)
        rows = [dict(r) for r in handle.conn.execute(sql + " ORDER BY e.id", query.params)]
        next_after = None
    names = project_names(handle.conn, [r.get("project_id") for r in rows])
    return EnvironmentPage([environment_view(r, now, stale_after, claim_account=claim_account(
        handle.conn, r.get("id"), r.get("operation_claim_id")), project_name=names.get(r.get("project_id")))
        for r in rows], next_after)


def holding_work(conn: sqlite3.Connection, env_id: str, project_id: Any = None) -> tuple[tuple[str, str], ...]:
    """(kind, run) of every record that places active work in the environment, the one query behind
    the stop hand-off's refusal, `show_environment` and `claim_options` (docs/decisions.md, "Archon
    behaviour the environment claims assume"): a binding not released (kind = its relationship), a
    service run with this `environment_id` not completed, and (only with `project_id` None: they
    have no index to seek) a check batch not completed or a check attempt without an outcome whose
    placement JSON holds this id as a string anywhere. The seeds do not show those JSON documents'
    keys, so any quoted occurrence counts (the safe side). With `project_id`, bindings and service
    runs are read by that project only, each an index seek.
    """
    found: list[tuple[str, str]] = []
    by_project = project_id is not None
    scope = "project_id = ? AND environment_id = ?" if by_project else "environment_id = ?"
    params = (project_id, env_id) if by_project else (env_id,)
    found += [(str(r[0]), str(r[1])) for r in conn.execute(
        "SELECT relationship, execution_run_id FROM execution_environment_run_bindings "
        f"WHERE {scope} AND {HOLDING_BINDING} ORDER BY bound_at", params)]
    columns = {name: {c["name"] for c in table_columns(conn, name)}
               for name in ("service_run_details", "check_batch_details", "check_attempt_details")}
    if {"environment_id", "completed_at", "project_id"} <= columns["service_run_details"]:
        found += [("service_run", str(r[0])) for r in conn.execute(
            f"SELECT execution_run_id FROM service_run_details WHERE {scope} AND completed_at IS NULL "
            "ORDER BY execution_run_id", params)]
    if by_project:
        return tuple(found)
    for table, kind, placed, active in (
            ("check_batch_details", "check_batch", "batch_environment_json", "completed_at IS NULL"),
            ("check_attempt_details", "check_attempt", "placement_json", "outcome IS NULL")):
        if {placed, active.split()[0], "execution_run_id"} <= columns[table]:
            found += [(kind, str(r[0])) for r in conn.execute(
                f"SELECT execution_run_id FROM {table} WHERE {active} AND {placed} IS NOT NULL "
                f"AND instr(CAST({placed} AS TEXT), json_quote(?)) > 0 ORDER BY execution_run_id", (env_id,))]
    return tuple(found)


def claim_account(conn: sqlite3.Connection, env_id: Any, claim_id: Any) -> str | None:
    """The OS account that took claim `claim_id`: what the newest event recording that id says
    (identity.py, `account_of`; docs/decisions.md, D21), or None (archon's claims, older consoles')."""
    if not claim_id or not isinstance(env_id, str):
        return None
    names = {c["name"] for c in table_columns(conn, "execution_environment_events")}
    if not {"environment_id", "metadata_json"} <= names:
        return None
    order = "sequence" if "sequence" in names else "rowid"
    row = conn.execute(
        "SELECT metadata_json FROM execution_environment_events WHERE environment_id = ? AND CASE WHEN "
        f"json_valid(metadata_json) THEN json_extract(metadata_json, '$.claim_id') END = ? ORDER BY {order} DESC "
        "LIMIT 1", (env_id, claim_id)).fetchone()
    return account_of(row[0]) if row else None


def _events(conn: sqlite3.Connection, env_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    names = {c["name"] for c in table_columns(conn, "execution_environment_events")}
    if "environment_id" not in names:
        return []
    order = "sequence" if "sequence" in names else "rowid"
    sql = (f"SELECT {stored_columns(conn, 'execution_environment_events')} FROM execution_environment_events "
           f"WHERE environment_id = ? ORDER BY {order} DESC")
    if limit:
        sql += f" LIMIT {int(limit)}"
    return [dict(r) for r in conn.execute(sql, (env_id,))][::-1]


def show_environment(
    handle: ArchonDatabase,
    env_id: str,
    *,
    now: datetime,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    event_limit: int | None = 200,
    everywhere: bool = True,
) -> EnvironmentView:
    """The row with derived fields, its active leases, every other binding not released and all work
    holding it (`holding_work`), and its event timeline (oldest first). `everywhere=False` is the
    TUI's cursor path, which must stay a seek: it reads only what its project's indexes reach."""
    row = handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'execution_environments', 'e')}, {ACTIVE_LEASES} AS active_lease_count "
        "FROM execution_environments e WHERE e.id = ?",
        (env_id,),
    ).fetchone()
    if row is None:
        from console.services.resolve import near_ids
        from console.text import one_line

        near = near_ids(handle.conn, "environment", env_id)
        raise Refusal(f"There is no environment {one_line(env_id, 80)}.", (f"{near} " if near else "") + "List them with `envs list`.")
    project = handle.conn.execute(
        "SELECT name, deletion_started_at FROM projects WHERE id = ?", (row["project_id"],)
    ).fetchone()
    # The cursor path (`everywhere=False`) reads by the project first: archon has no index on a
    # binding's environment, and this is a seek of idx_execution_environment_bindings_run. Rows
    # archon wrote before 1.8.22's identity trigger may carry another project: `everywhere` (the CLI,
    # and the write's own re-check) reads by environment alone.
    scope, params = ("environment_id = ?", (env_id,)) if everywhere else (
        "project_id = ? AND environment_id = ?", (row["project_id"], env_id))
    bound = tuple(EnvironmentLease.from_row(dict(r)) for r in handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'execution_environment_run_bindings')} "
        f"FROM execution_environment_run_bindings WHERE {scope} AND {HOLDING_BINDING} ORDER BY bound_at",
        params,
    ))
    return environment_view(
        dict(row), now, stale_after,
        active_leases=tuple(lease for lease in bound if lease.relationship == "execution"),
        bound_runs=bound,
        holding_work=holding_work(handle.conn, env_id, None if everywhere else row["project_id"]),
        holding_not_checked=None if everywhere else HOLDING_NOT_CHECKED,
        events=tuple(EnvironmentEvent.from_row(e) for e in _events(handle.conn, env_id, event_limit)),
        project_deleting=bool(project and project["deletion_started_at"]),
        project_name=project["name"] if project is not None else None,
        claim_account=claim_account(handle.conn, env_id, dict(row).get("operation_claim_id")),
    )


__all__ = [
    "claim_account",
    "claim_age",
    "claims_supported",
    "environment_query",
    "environment_view",
    "holding_work",
    "list_environments",
    "pending_handoffs",
    "show_environment",
    "table_columns",
]
