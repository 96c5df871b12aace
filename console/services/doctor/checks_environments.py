"""Execution environments: stale or dead operation claims, leases, stuck cleanup, and the requests
handed to archon (stops, retirements, cleanup retries) that it has not performed yet.

A hand-off waiting longer than the stale threshold (`--stale-minutes`) is a warning: archon's
sweeps act within minutes when archon runs. The wording of each request comes from
`console.services.environment_queries.pending_handoffs`, so doctor, `envs show` and the TUI agree.
"""

from __future__ import annotations

from console.clock import db_time
from console.services.doctor.context import Ctx, columns, rows_of
from console.services.doctor.report import SHOWN_IDS, Finding
from console.text import one_line
from console.models.environments import PendingHandoff
from console.services.environment_queries import pending_handoffs

ADMITTING_STATES = ("ready", "running", "stopped")

# --- environments ----------------------------------------------------------------------------


def check_environments(ctx: Ctx) -> list[Finding]:
    if not ctx.has("execution_environments"):
        return []
    cols = columns(ctx.conn, "execution_environments")
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
    # Requests handed to archon (sorted into waiting / overdue below, with the service's wording).
    handoff_columns = [c for c in ("idle_stop_at", "retirement_requested_at", "cleanup_retry_at") if c in cols]
    if retry:
        conds["handoff_cleanup"] = (
            "lifecycle_state = 'cleanup_pending' AND cleanup_retry_at IS NOT NULL "
            "AND (julianday(cleanup_retry_at) IS NULL OR julianday(cleanup_retry_at) <= julianday(:now))"
        )
    if "idle_stop_at" in cols:
        conds["handoff_stop"] = (
            "lifecycle_state IN ('ready', 'running') AND idle_stop_at IS NOT NULL "
            "AND (julianday(idle_stop_at) IS NULL OR julianday(idle_stop_at) <= julianday(:now))"
        )
    if "retirement_requested_at" in cols:
        conds["handoff_retire"] = (
            "retirement_requested_at IS NOT NULL AND lifecycle_state NOT IN ('retiring', 'cleanup_pending', 'retired')"
        )
    leases = ctx.has("execution_environment_run_bindings")
    lease_sql = (
        "EXISTS (SELECT 1 FROM execution_environment_run_bindings b "
        "WHERE b.environment_id = e.id AND b.relationship = 'execution' AND b.released_at IS NULL)"
    )
    if leases:
        conds["closed_lease"] = f"lifecycle_state NOT IN {ADMITTING_STATES!r} AND {lease_sql}"
    select = ", ".join(f"({sql}) AS flag_{key}" for key, sql in conds.items())
    where = " OR ".join(f"({sql})" for sql in conds.values())
    extra = ", operation_claim_id, operation_kind, operation_claimed_at" if claims else ""
    extra += "".join(f", {c}" for c in handoff_columns)
    extra += f", {lease_sql} AS active_lease_count" if leases else ""
    rows = ctx.conn.execute(
        f"SELECT id, lifecycle_state, cleanup_attempts{extra}, {select} FROM execution_environments e "
        f"WHERE {where} ORDER BY id",
        {"now": ctx.now_text, "stale": stale_before},
    ).fetchall()
    buckets = {k: [r for r in rows if r[f"flag_{k}"]] for k in conds}
    waiting: list[tuple[str, PendingHandoff]] = []
    for row in rows:
        if not any(row[f"flag_{k}"] for k in ("handoff_stop", "handoff_retire", "handoff_cleanup") if k in conds):
            continue
        for handoff in pending_handoffs(dict(row), ctx.now, ctx.stale_after):
            if handoff.overdue:
                buckets.setdefault(f"overdue_{handoff.kind}", []).append({**dict(row), "handoff": handoff})
            else:
                waiting.append((row["id"], handoff))
    findings: list[Finding] = []
    t = "execution_environments"
    minutes = int(ctx.stale_after.total_seconds() // 60)

    def add(key, fid, severity, title, describe, why, todo):
        items = buckets.get(key) or []
        if items:
            findings.append(Finding(
                fid, severity, title,
                f"{len(items)} environment(s): " + _listed([describe(r) for r in items]) + ".",
                why, todo, rows=rows_of(t, [r["id"] for r in items]), count=len(items)))

    add("stale_claim", "environments.stale_claims", "warning",
        f"Operation claims older than {minutes} minutes",
        lambda r: f"{r['id']} ({r['operation_kind']} since {r['operation_claimed_at']})",
        "A claim blocks new runs on the environment; an old one usually means its holder died.",
        "`envs release ID --takeover --reason TEXT`, or `envs claim ID --takeover --reason TEXT` (it keeps the claim's "
        "operation) and complete it; a claim the console did not create also needs `--confirm-holder HOLDER`, "
        "since the console only assumes it is abandoned.")
    add("dead_claim", "environments.claims_on_dead", "warning", "Claims on retired or failed environments",
        lambda r: f"{r['id']} ({r['lifecycle_state']}, {r['operation_kind']})",
        "The operation can no longer do anything; the claim is debris.",
        "`envs release ID --takeover --reason TEXT` (with `--confirm-holder HOLDER` for a claim the console did "
        "not create).")
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
        "Restart archon's cleanup worker, or `envs claim ID --op cleanup_retry` then `envs complete ID`.")
    add("cleanup_attempts", "environments.cleanup_attempts", "warning", "Cleanup failed 3 or more times",
        lambda r: f"{r['id']} ({r['cleanup_attempts']} attempts)",
        "Repeated cleanup failures usually need a human (a locked volume, a missing provider).",
        "Read the environment's events and failure message; fix the provider-side problem.")
    handed = lambda r: f"{r['id']} ({r['handoff'].text})"  # noqa: E731
    add("overdue_stop", "environments.idle_stop_overdue", "warning",
        f"Stops due more than {minutes} minutes ago and not performed",
        handed,
        "idle_stop_at has passed while the environment is still ready or running (a stop handed off by "
        "`envs complete`, or archon's own idle schedule): archon's idle-stop sweep has not acted. "
        "Archon not running? The environment keeps its resources.",
        "Check that archon is running: its idle-stop sweep performs the stop. The console cannot stop a "
        "container; claiming stop again only moves idle_stop_at.")
    add("overdue_retire", "environments.retirement_overdue", "warning",
        f"Retirements requested more than {minutes} minutes ago and not started",
        handed,
        "retirement_requested_at is set, no claim or run holds the environment, and archon's retirement path "
        "(retiring -> cleanup_pending -> retired) has not begun. Archon not running?",
        "Check that archon is running; it performs the retirement. The request stays until then (the console "
        "never clears it, and new runs are already refused).")
    add("overdue_cleanup_retry", "environments.cleanup_retry_overdue", "warning",
        f"Cleanup retries due more than {minutes} minutes ago and not performed",
        handed,
        "cleanup_retry_at has passed and the environment is still cleanup_pending: archon's cleanup worker "
        "has not retried. Archon not running?",
        "Check that archon and its cleanup worker are running.")
    if waiting:
        findings.append(Finding(
            "environments.handoffs_pending", "info", "Requests handed to archon, not performed yet",
            f"{len(waiting)} request(s): " + _listed([f"{i} ({h.text})" for i, h in waiting]) + ".",
            "The console never changes an environment's lifecycle state; it hands stops, retirements and "
            "cleanup retries to archon's own scheduling columns, and archon performs them.",
            f"Nothing yet: doctor warns when one waits longer than {minutes} minutes (--stale-minutes).",
            rows=rows_of(t, [i for i, _ in waiting]), count=len(waiting)))
    findings += _console_state_changes(ctx)
    return findings


def _listed(items: list[str]) -> str:
    """Like `ids_text`, with room for a hand-off sentence after each id (cut at 200, not 80)."""
    shown = ", ".join(one_line(i, 200) for i in items[:SHOWN_IDS])
    more = len(items) - SHOWN_IDS
    return shown + (f" and {more} more" if more > 0 else "")


# What to check for each state an older console's `envs complete` wrote (before the hand-off model,
# completing stop, retire and reset set the lifecycle state itself, with no provider action behind it).
_OLD_WRITES = {
    "stopped": "the provider may still run the container while archon believes it stopped",
    "retired": "the container and workspace may still exist while archon believes them retired (it will not clean "
               "them up)",
    "ready": "a reset marked it ready without rebuilding anything; if it was failed or unavailable, archon now "
             "places runs on it",
}


def _console_state_changes(ctx: Ctx) -> list[Finding]:
    """Environments whose lifecycle state an earlier console completion wrote (its own events say so)."""
    if not ctx.has("execution_environment_events", "execution_environments"):
        return []
    if not {"environment_id", "event_type", "from_state", "to_state", "metadata_json"} <= columns(
            ctx.conn, "execution_environment_events"):
        return []
    order = "ev.sequence" if "sequence" in columns(ctx.conn, "execution_environment_events") else "ev.rowid"
    when = "ev.created_at" if "created_at" in columns(ctx.conn, "execution_environment_events") else "NULL"
    rows = ctx.conn.execute(
        f"SELECT ev.environment_id AS id, ev.from_state, ev.to_state, {when} AS at, e.lifecycle_state "
        "FROM execution_environment_events ev JOIN execution_environments e ON e.id = ev.environment_id "
        "WHERE ev.event_type = 'operation_completed' AND ev.to_state IN ('stopped', 'retired', 'ready') "
        "AND ev.from_state IS NOT ev.to_state AND json_valid(ev.metadata_json) "
        "AND json_extract(ev.metadata_json, '$.source') = 'archon-console' "
        f"ORDER BY ev.environment_id, {order}"
    ).fetchall()
    if not rows:
        return []
    ids = list(dict.fromkeys(r["id"] for r in rows))
    kinds = sorted({r["to_state"] for r in rows})
    return [Finding(
        "environments.console_state_changes", "warning",
        "Lifecycle states written by an older console (no provider action behind them)",
        f"{len(ids)} environment(s): " + _listed(
            [f"{r['id']} ({r['from_state']} -> {r['to_state']} at {r['at']}, now {r['lifecycle_state']})" for r in rows])
        + ".",
        "Before the hand-off model, `envs complete` wrote the lifecycle state itself: "
        + "; ".join(f"{k}: {_OLD_WRITES[k]}" for k in kinds) + ".",
        "For each environment, check the provider (is its container still there or running?) and compare with "
        "archon's view; retire what should not accept runs (`envs claim ID --op retire`, then `envs complete ID`). "
        "The events stay, so this finding does too: it is the record of what to check.",
        rows=rows_of("execution_environments", ids), count=len(ids))]


