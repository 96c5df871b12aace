"""Tickets, build sequences and check runs: the work that approvals and environments serve.

At 1.8.20 active sequences carry queued tickets without a profile selection, so the 1.8.22
sweep has something to fail or cancel; from 1.8.22 on every ticket carries a valid selection
(the insert trigger refuses anything else for active or queued tickets).
"""

from __future__ import annotations

import json

from console.demo import data
from console.demo.context import DAY, HOUR, MINUTE, DemoContext, ProjectInfo, stamp

TICKET_TITLES = (
    "Login times out behind the corporate proxy", "Add rate limiting to the public API",
    "Refactor the connection pool", "Bump dependencies for the quarterly audit",
    "Retry failed webhooks with backoff", "Invalidate the cache on schema change",
    "Quarantine the flaky export test", "Paginate the v2 list endpoints",
    "Dark mode for the settings page", "Exporter runs out of memory on large tenants",
)


def write_work(ctx: DemoContext) -> None:
    for info in ctx.projects:
        bundles = _bundles(ctx, info)
        tickets = _tickets(ctx, info)
        _sequences(ctx, info, bundles, tickets)
        _checks(ctx, info)


def _bundles(ctx: DemoContext, info: ProjectInfo) -> list[str]:
    ids = []
    for k in range(2 if info.index % 2 == 0 else 1):
        bundle_id = f"bnd-{info.index}-{k + 1}"
        ctx.insert(
            "worktree_bundles",
            {
                "id": bundle_id,
                "project_id": info.id,
                "name": ("release-train", "experiments")[k],
                "created_at": stamp(info.created + (k + 1) * DAY),
            },
        )
        ids.append(bundle_id)
    return ids


def _tickets(ctx: DemoContext, info: ProjectInfo) -> list[str]:
    ids = []
    prefix = info.id.removeprefix("prj-")[:3].upper()
    for k in range(8):
        ticket_id = f"tkt-{info.index}-{k + 1:03d}"
        external = k % 3 != 2
        ctx.insert(
            "tickets",
            {
                "id": ticket_id,
                "project_id": info.id,
                "title": TICKET_TITLES[(info.index + k) % len(TICKET_TITLES)],
                "external_provider": "linear" if external else None,
                "external_key": f"{prefix}-{100 + k * 7 + info.index}" if external else None,
                "created_at": stamp(info.created + (k + 2) * DAY + ctx.rng.randint(0, DAY)),
            },
        )
        ids.append(ticket_id)
    ctx.insert("ticket_dependencies", {"blocker_ticket_id": ids[0], "blocked_ticket_id": ids[1]})
    return ids


def _selection(ctx: DemoContext, info: ProjectInfo, historical: bool) -> dict:
    if not ctx.has_profiles:
        return {}
    revision = info.revisions[0] if historical else info.active_revision
    return {
        "execution_profile_revision_id": revision[0],
        "execution_profile_fingerprint": revision[2],
        "execution_profile_selection_reason": (
            "historical_lineage" if historical else "project_active_at_acceptance"
        ),
    }


def _sequences(ctx: DemoContext, info: ProjectInfo, bundles: list[str], tickets: list[str]) -> None:
    now = ctx.now_epoch
    # A finished sequence: every ticket completed long ago.
    done_id = f"seq-{info.index}-1"
    done_at = now - 20 * DAY
    ctx.insert("build_sequences", {
        "id": done_id, "project_id": info.id, "worktree_bundle_id": None, "status": "completed",
        "created_at": stamp(done_at - 2 * DAY), "updated_at": stamp(done_at),
    })
    for position, ticket_id in enumerate(tickets[:3], start=1):
        run_id = ctx.run(info.id, "build", "completed", done_at - 2 * DAY + position * HOUR,
                         done_at - 2 * DAY + position * HOUR + 40 * MINUTE)
        ctx.insert("build_sequence_tickets", {
            "build_sequence_id": done_id, "ticket_id": ticket_id, "position": position,
            "status": "completed", "entered_queue_at": stamp(done_at - 2 * DAY),
            "started_at": stamp(done_at - 2 * DAY + position * HOUR),
            "finished_at": stamp(done_at - 2 * DAY + position * HOUR + 40 * MINUTE),
            "activation_execution_run_id": run_id if ctx.has_profiles else None,
            **_selection(ctx, info, historical=True),
        })
        if ctx.has_profiles:
            _setup_evidence(ctx, info, run_id, position, done_at - 2 * DAY + position * HOUR)
    if info.deleting:
        return
    # An active sequence: one ticket building, two queued, one already done.
    active_id = f"seq-{info.index}-2"
    started = now - 3 * HOUR - ctx.rng.randint(0, 2 * HOUR)
    ctx.insert("build_sequences", {
        "id": active_id, "project_id": info.id,
        "worktree_bundle_id": bundles[0] if bundles else None, "status": "active",
        "created_at": stamp(started), "updated_at": stamp(now - 20 * MINUTE),
    })
    plan = (("completed", tickets[3]), ("active", tickets[4]), ("queued", tickets[5]),
            ("queued", tickets[6]))
    for position, (status, ticket_id) in enumerate(plan, start=1):
        run_id = None
        begun = finished = None
        if status == "completed":
            begun, finished = started + 5 * MINUTE, started + 50 * MINUTE
            run_id = ctx.run(info.id, "build", "completed", begun, finished)
        elif status == "active":
            begun = started + 55 * MINUTE
            run_id = ctx.run(info.id, "build", "running", begun, None)
            if ctx.has_profiles:
                _authority(ctx, info, run_id, begun)
        ctx.insert("build_sequence_tickets", {
            "build_sequence_id": active_id, "ticket_id": ticket_id, "position": position,
            "status": status, "entered_queue_at": stamp(started),
            "started_at": stamp(begun) if begun else None,
            "finished_at": stamp(finished) if finished else None,
            "activation_execution_run_id": run_id if ctx.has_profiles else None,
            **_selection(ctx, info, historical=False),
        })


def _setup_evidence(ctx: DemoContext, info: ProjectInfo, run_id: str, position: int, began: int) -> None:
    """Build setup evidence (1.8.22): a full setup, then a reuse of it, then a no-op."""
    outcome = ("completed", "reused", "noop")[(position - 1) % 3]
    first = f"bse-{info.index}-1"
    revision = info.revisions[0]
    ctx.insert("build_setup_evidence", {
        "id": f"bse-{info.index}-{position}",
        "project_id": info.id,
        "execution_run_id": run_id,
        "target_kind": "repo_root",
        "target_key": "repo_root",
        "target_workspace_path": info.repo_path,
        "workspace_evidence_state": "available",
        "workspace_evidence_fingerprint": data.sha256_hex(f"{info.id}:lockfile"),
        "setup_configuration_fingerprint": data.sha256_hex(f"{info.id}:setup"),
        "execution_profile_fingerprint": revision[2],
        "provider": info.provider,
        "environment_revision": None if info.provider == "host" else 1,
        "command_count": 0 if outcome == "noop" else 3,
        "outcome": outcome,
        "reused_from_evidence_id": first if outcome == "reused" else None,
        "started_at": stamp(began),
        "completed_at": stamp(began + (4 * MINUTE if outcome == "completed" else 20)),
    })


def _authority(ctx: DemoContext, info: ProjectInfo, run_id: str, began: int) -> None:
    """The run's frozen authority (1.8.22): the profile it was accepted under."""
    revision = info.active_revision
    ctx.insert("execution_run_authorities", {
        "execution_run_id": run_id,
        "project_id": info.id,
        "execution_profile_revision_id": revision[0],
        "execution_profile_fingerprint": revision[2],
        "authority_json": json.dumps({"grants": ["git_push:origin", "custom_check:*"],
                                      "requested_by": "agent:" + data.AGENTS[info.index % 4]},
                                     separators=(",", ":")),
        "created_at": stamp(began),
    })
    if ctx.has_claims and info.index % 2 == 0:  # a long-running dev server beside the build
        service_run = ctx.run(info.id, "service", "running", began, None)
        ctx.insert("service_run_details", {
            "execution_run_id": service_run,
            "project_id": info.id,
            "context_key": "dev-server",
            "target_kind": "repo_root",
            "target_key": "repo_root",
            "target_workspace_path": info.repo_path,
            "execution_profile_revision_id": revision[0],
            "execution_profile_fingerprint": revision[2],
            "provider_kind": info.provider,
            "service_snapshot_json": '{"command":["npm","run","dev"],"port":3000}',
            "interruption_scope": "local_processes",
            "created_at": stamp(began),
            "started_at": stamp(began + MINUTE),
            "updated_at": stamp(began + MINUTE),
        })


def _checks(ctx: DemoContext, info: ProjectInfo) -> None:
    """A completed batch with a few attempts (one failing, one rerun), and one still running."""
    if info.index > 3:
        return
    now = ctx.now_epoch
    for batch_no, (age, complete) in enumerate(((2 * DAY, True), (25 * MINUTE, False))):
        began = now - age
        batch_run = ctx.run(info.id, "check_batch", "completed" if complete else "running",
                            began, began + 15 * MINUTE if complete else None)
        ctx.insert("check_batch_details", {
            "execution_run_id": batch_run, "target_kind": "repo_root",
            "target_label": "main", "purpose": "post_build" if batch_no == 0 else "manual",
            "completed_at": stamp(began + 15 * MINUTE) if complete else None,
        })
        previous = None
        for k, (definition_index, outcome) in enumerate(
            ((0, "passed"), (1, "command_failure"), (1, "passed"), (2, None))
        ):
            if not complete and k > 1:
                break
            if not complete:
                outcome = None if k == 1 else "passed"
            definition_id, command, _timeout = data.CHECKS[definition_index]
            status = {"passed": "completed", None: "running"}.get(outcome, "failed")
            attempt_run = ctx.run(info.id, "check", status, began + k * MINUTE,
                                  None if outcome is None else began + (k + 4) * MINUTE)
            rerun_of = previous if (k == 2 and complete) else None
            output = "ok\n" if outcome == "passed" else ("FAILED tests/unit/test_pool.py::test_reuse\n"
                                                          if outcome else "")
            ctx.insert("check_attempt_details", {
                "execution_run_id": attempt_run, "batch_run_id": batch_run,
                "definition_id": definition_id, "command_snapshot_json": command,
                "definition_fingerprint": data.sha256_hex(definition_id + command),
                "outcome": outcome,
                "rerun_of_attempt_run_id": rerun_of,
                "exit_code": None if outcome is None else (0 if outcome == "passed" else 1),
                "output_revision": 1 if outcome else 0,
                "retained_end_offset": len(output), "total_persisted_bytes": len(output),
                "retained_output": output,
            })
            if k == 1:
                previous = attempt_run
