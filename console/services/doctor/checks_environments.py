"""Execution environments: stale or dead operation claims, leases, stuck cleanup, idle stops."""

from __future__ import annotations

from console.clock import db_time
from console.services.doctor.context import Ctx, columns, ids_text, rows_of
from console.services.doctor.report import Finding

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
                f"{len(items)} environment(s): " + ids_text([describe(r) for r in items], len(items)) + ".",
                why, todo, rows=rows_of(t, [r["id"] for r in items]), count=len(items)))

    add("stale_claim", "environments.stale_claims", "warning",
        f"Operation claims older than {minutes} minutes",
        lambda r: f"{r['id']} ({r['operation_kind']} since {r['operation_claimed_at']})",
        "A claim blocks new runs on the environment; an old one usually means its holder died.",
        "`envs release ID --takeover --reason TEXT` (or `envs claim ID --op KIND --takeover --reason TEXT`), then complete it.")
    add("dead_claim", "environments.claims_on_dead", "warning", "Claims on retired or failed environments",
        lambda r: f"{r['id']} ({r['lifecycle_state']}, {r['operation_kind']})",
        "The operation can no longer do anything; the claim is debris.",
        "`envs release ID --takeover --reason TEXT`.")
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
    add("cleanup_overdue", "environments.cleanup_retry_overdue", "warning", "Cleanup retry time in the past",
        lambda r: f"{r['id']}",
        "The retry is due but has not happened: the cleanup worker is not running.",
        "Check that archon is running.")
    add("idle_overdue", "environments.idle_stop_overdue", "warning", "Running environments past their idle-stop time",
        lambda r: f"{r['id']}",
        "They should have been stopped; they keep consuming resources.",
        "Check archon's idle sweep, or `envs claim ID --op stop` then `envs complete ID`.")
    return findings


