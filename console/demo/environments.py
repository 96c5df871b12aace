"""Execution environments in every lifecycle state, with the timeline that led there.

Order matters because of archon's triggers: environments are inserted unclaimed, then leases
(the admission trigger refuses a claimed or retiring environment), then the operation claims
are set by UPDATE (where the claim trigger checks them), as archon's runtime would.
"""

from __future__ import annotations

import json

from console.demo import data
from console.demo.context import DAY, HOUR, MINUTE, DemoContext, stamp

STATES = ("queued", "preparing", "ready", "running", "stopped", "retiring", "cleanup_pending",
          "retired", "failed", "unavailable")
_EXTRA_STATES = ("ready", "running", "stopped", "retired", "running", "cleanup_pending", "ready",
                 "failed", "stopped", "retired")

PATHS = {
    "queued": ("queued",),
    "preparing": ("queued", "preparing"),
    "ready": ("queued", "preparing", "ready"),
    "running": ("queued", "preparing", "ready", "running"),
    "stopped": ("queued", "preparing", "ready", "running", "stopped"),
    "retiring": ("queued", "preparing", "ready", "running", "stopped", "retiring"),
    "cleanup_pending": ("queued", "preparing", "ready", "running", "stopped", "retiring",
                        "cleanup_pending"),
    "retired": ("queued", "preparing", "ready", "running", "stopped", "retiring",
                "cleanup_pending", "retired"),
    "failed": ("queued", "preparing", "failed"),
    "unavailable": ("queued", "preparing", "ready", "unavailable"),
}
EVENT_TYPES = {
    "queued": "created", "preparing": "preparation_started", "ready": "ready",
    "running": "started", "stopped": "stopped", "retiring": "retirement_started",
    "cleanup_pending": "cleanup_pending", "retired": "retired", "failed": "failed",
    "unavailable": "unavailable",
}
STATE_COLUMNS = {
    "preparing": "preparation_started_at", "ready": "ready_at", "running": "last_used_at",
    "stopped": "stopped_at", "retiring": "retirement_started_at",
    "cleanup_pending": "cleanup_pending_at", "retired": "retired_at", "failed": "failed_at",
}
# How long ago an environment entered its current state (minutes).
AGE_MINUTES = {
    "queued": 3, "preparing": 6, "ready": 40, "running": 25, "stopped": 300, "retiring": 12,
    "cleanup_pending": 120, "retired": 3 * 24 * 60, "failed": 24 * 60, "unavailable": 360,
}
# (state, operation kind, claimed minutes ago, holder): fresh and stale (> 15 min) claims.
CLAIM_PLAN = (
    ("running", "stop", 2, data.WORKERS[0]),
    ("ready", "retire", 47, data.WORKERS[1]),
    ("stopped", "reset", 180, data.WORKERS[2]),
    ("cleanup_pending", "cleanup_retry", 1, data.WORKERS[0]),
    ("running", "stop", 22, data.WORKERS[3]),
)


class _Env:
    def __init__(self, index, project, state):
        self.index = index
        self.id = f"env-{index + 1:04d}"
        self.project = project
        self.state = state
        self.revision = 1 + index % 3
        self.validation = data.sha256_hex(f"{self.id}:validation:{self.revision}")
        self.profile_fingerprint = None
        self.events = 0
        self.last_at = 0


def write_environments(ctx: DemoContext, count: int) -> list[_Env]:
    live = [p for p in ctx.projects if not p.deleting] or ctx.projects
    envs = []
    for index in range(count):
        state = STATES[index] if index < len(STATES) else _EXTRA_STATES[index % len(_EXTRA_STATES)]
        env = _Env(index, live[index % len(live)], state)
        _insert_environment(ctx, env)
        envs.append(env)
    _leases(ctx, envs)
    if ctx.has_claims:
        _claims(ctx, envs)
    return envs


def _insert_environment(ctx: DemoContext, env: _Env) -> None:
    rng = ctx.rng
    project = env.project
    now = ctx.now_epoch
    path = PATHS[env.state]
    times = [now - int(AGE_MINUTES[env.state] * MINUTE * (0.6 + 0.8 * rng.random()))]
    for _ in path[:-1]:
        times.insert(0, times[0] - rng.randint(2 * MINUTE, 3 * HOUR))
    docker = project.provider == "docker_sandbox"
    bundle = env.index % 4 == 3
    row = {
        "id": env.id,
        "project_id": project.id,
        "provider_kind": project.provider,
        "provider_version": "docker-27.3.1" if docker else "host-1",
        "target_kind": "worktree_bundle" if bundle else "repo_root",
        "target_key": f"bnd-{project.index}-1" if bundle else "repo_root",
        "target_workspace_path": project.repo_path + ("/.worktrees/release-train" if bundle else ""),
        "environment_revision": env.revision,
        "workspace_mode": "direct",
        "environment_validation_fingerprint": env.validation,
        "template_identity": "archon/sandbox-node:20" if env.index % 2 == 0 else None,
        "template_digest": None if env.index % 2 == 0 else "sha256:" + data.sha256_hex(env.id)[:32],
        "agent_identity": data.AGENTS[env.index % 2],
        "compatible_agents_json": '["opencode","claude-code"]',
        "external_id": f"ctr-{data.sha256_hex(env.id + 'ctr')[:12]}" if docker else None,
        "lifecycle_state": env.state,
        "created_at": stamp(times[0]),
        "updated_at": stamp(times[-1]),
        "cleanup_attempts": 0,
    }
    for state, at in zip(path, times):
        column = STATE_COLUMNS.get(state)
        if column:
            row[column] = stamp(at)
    if env.state == "failed":
        row["failure_message"] = data.FAILURE_MESSAGES[env.index % len(data.FAILURE_MESSAGES)]
        row["failure_details_json"] = json.dumps({"exit_code": 125, "provider": project.provider})
    if ctx.has_profiles:
        # Older environments were built from the revision that was active before the last change.
        revision = project.active_revision
        if env.state in ("retired", "retiring") and len(project.revisions) > 1:
            revision = project.revisions[0]
        env.profile_fingerprint = revision[2]
        row["execution_profile_revision_id"] = revision[0]
        row["execution_profile_fingerprint"] = revision[2]
        row["credential_requirements_fingerprint"] = data.sha256_hex(project.id + ":credentials")
        if env.state == "retiring":
            row["retirement_requested_at"] = stamp(times[-1] - 5 * MINUTE)
    cleanup_rank = sum(1 for e in range(env.index) if _state_of(e) == "cleanup_pending")
    attempts = 0
    if env.state == "cleanup_pending":
        attempts = 3 if cleanup_rank == 0 else cleanup_rank % 2
        row["cleanup_attempts"] = attempts
        if ctx.has_claims:
            row["cleanup_retry_at"] = stamp(now + 30 * MINUTE if cleanup_rank == 0 else now - 10 * MINUTE)
        if cleanup_rank == 2:  # a cleanup worker holds this one right now
            row["cleanup_claim_id"] = "archon-cleanup:" + data.WORKERS[1]
            row["cleanup_claimed_at"] = stamp(now - 4 * MINUTE)
    if ctx.has_claims and env.state in ("running", "ready"):
        running_rank = sum(1 for e in range(env.index) if _state_of(e) == env.state)
        if env.state == "running":
            row["idle_stop_at"] = stamp(now - 7 * MINUTE if running_rank == 0 else now + 25 * MINUTE)
        elif running_rank % 2 == 1:
            row["idle_stop_at"] = stamp(now + 50 * MINUTE)
    ctx.insert("execution_environments", row)
    previous = None
    for state, at in zip(path, times):
        actor_class, actor = "system", data.SYSTEM_ACTOR
        reason = None
        if state == "retiring":
            actor_class, actor, reason = "human", "alice", "template outdated"
        elif state == "stopped":
            reason = "idle for 30 minutes"
        elif state == "failed":
            reason = row["failure_message"]
        elif state == "unavailable":
            reason = "provider lost the container"
        _event(ctx, env, EVENT_TYPES[state], previous, state, actor_class, actor, reason, None, at)
        previous = state
    for attempt in range(attempts):
        at = times[-1] + (attempt + 1) * 10 * MINUTE
        _event(ctx, env, "cleanup_failed", "cleanup_pending", "cleanup_pending", "system",
               data.SYSTEM_ACTOR, "docker rm timed out", json.dumps({"attempt": attempt + 1}),
               min(at, now - MINUTE))


def _state_of(index: int) -> str:
    return STATES[index] if index < len(STATES) else _EXTRA_STATES[index % len(_EXTRA_STATES)]


def _event(ctx, env, event_type, old, new, actor_class, actor, reason, metadata, at) -> None:
    env.events += 1
    env.last_at = max(env.last_at, at)
    ctx.insert("execution_environment_events", {
        "id": f"{env.id}:{env.events}",
        "project_id": env.project.id,
        "environment_id": env.id,
        "sequence": env.events,
        "event_type": event_type,
        "from_state": old,
        "to_state": new,
        "actor_classification": actor_class,
        "actor_reference": actor,
        "reason": reason,
        "metadata_json": metadata,
        "created_at": stamp(at),
    })


def _binding(ctx, env, run_id, relationship, bound, released, number) -> None:
    execution = relationship == "execution"
    ctx.insert("execution_environment_run_bindings", {
        "id": f"bind-{number:05d}",
        "environment_id": env.id,
        "execution_run_id": run_id,
        "project_id": env.project.id,
        "relationship": relationship,
        "environment_revision": env.revision,
        "environment_validation_fingerprint": env.validation,
        "execution_profile_fingerprint": env.profile_fingerprint,
        "authority_json": json.dumps({"run_id": run_id, "granted_by": "archon",
                                      "workloads": ["build"]}) if execution else None,
        "placement_json": json.dumps({"workspace": "/workspace", "user": "agent"}) if execution else None,
        "bound_at": stamp(bound),
        "released_at": stamp(released) if released is not None else None,
    })


def _leases(ctx: DemoContext, envs: list[_Env]) -> None:
    """Validation bindings on every prepared environment; live leases on running ones and on
    every other ready one; a released lease in the history of stopped ones."""
    now = ctx.now_epoch
    number = 0
    ready_seen = 0
    for env in envs:
        if env.state in ("queued", "preparing"):
            continue
        created = now - 3 * DAY
        run_id = ctx.run(env.project.id, "environment_validation", "completed", created,
                         created + 3 * MINUTE)
        number += 1
        _binding(ctx, env, run_id, "validation", created, created + 3 * MINUTE, number)
        if env.state == "stopped":
            began = now - 8 * HOUR
            run_id = ctx.run(env.project.id, "build", "completed", began, began + HOUR)
            number += 1
            _binding(ctx, env, run_id, "execution", began, began + HOUR, number)
        lease = env.state == "running" or (env.state == "ready" and ready_seen % 2 == 0)
        if env.state == "ready":
            ready_seen += 1
        if lease:
            began = now - 20 * MINUTE - env.index * MINUTE
            run_id = ctx.run(env.project.id, "build", "running", began, None)
            number += 1
            _binding(ctx, env, run_id, "execution", began, None, number)


def _claims(ctx: DemoContext, envs: list[_Env]) -> None:
    now = ctx.now_epoch
    taken: set[str] = set()
    for state, kind, minutes, holder in CLAIM_PLAN:
        env = next((e for e in envs if e.state == state and e.id not in taken), None)
        if env is None:
            continue
        taken.add(env.id)
        at = max(now - minutes * MINUTE, env.last_at + MINUTE)
        ctx.conn.execute(
            "UPDATE execution_environments SET operation_claim_id = ?, operation_kind = ?,"
            " operation_claimed_at = ? WHERE id = ? AND operation_claim_id IS NULL",
            (holder, kind, stamp(at), env.id),
        )
        _event(ctx, env, "operation_claimed", env.state, env.state, "system", holder, None,
               json.dumps({"operation_kind": kind, "claim_id": holder}), at)
