"""Projects and their execution-profile history, written the way archon writes them.

From 1.8.22 on, inserting a project fires archon's `create_project_execution_profile` trigger,
which creates revision 1 and its `revision_created` event stamped with the wall clock. To keep
the file reproducible we read those two rows back, delete them and insert them again unchanged
except for `created_at` (revisions are immutable to UPDATE, not to DELETE). Later revisions go
through console/db/execution_profiles.py so their fingerprints are exactly what doctor expects;
activations move the pointer and `build_execution_provider` in one UPDATE, as the projection
triggers demand.
"""

from __future__ import annotations

import json

from console.db import execution_profiles as profiles
from console.demo import data
from console.demo.context import DAY, HOUR, DemoContext, ProjectInfo, stamp

# Candidate profiles per schema version, in the order revisions are added (deduplicated by
# fingerprint against what the project already has).
_V3_VARIANTS = (
    {"eligible_workloads": ["build", "chat_build", "check", "review"],
     "check_template_policy": {"mode": "agent_template", "agent": "opencode"}},
    {"eligible_workloads": ["build", "chat_build"],
     "check_template_policy": {"mode": "disabled", "agent": None}},
    {"eligible_workloads": ["build", "chat_build", "check"],
     "check_template_policy": {"mode": "project_commands", "agent": None}},
    {"eligible_workloads": ["build", "chat_build", "check", "service"],
     "check_template_policy": {"mode": "agent_template", "agent": "claude-code"}},
    {"eligible_workloads": ["build", "chat_build", "check", "review", "service"],
     "check_template_policy": {"mode": "agent_template", "agent": "opencode"}},
)
_V2_VARIANTS = (
    {"eligible_workloads": ["build", "check", "review"]},
    {"eligible_workloads": ["build"]},
    {"eligible_workloads": ["build", "chat_build", "check"]},
    {"eligible_workloads": ["build", "check", "service"]},
)

_CHECK_ID_LISTS = ('["lint","unit-tests"]', '["typecheck"]', "[]", None)


def write_projects(ctx: DemoContext, count: int) -> None:
    rng = ctx.rng
    for index in range(count):
        slug, name, repo = data.PROJECTS[index % len(data.PROJECTS)]
        if index >= len(data.PROJECTS):
            slug, name, repo = f"{slug}-{index}", f"{name}-{index}", f"{repo}-{index}"
        project_id = f"prj-{slug}"
        provider = "docker_sandbox" if rng.random() < 0.5 else "host"
        created = ctx.now_epoch - rng.randint(60, 120) * DAY + rng.randint(0, DAY)
        deleting = count >= 3 and index == count - 1
        info = ProjectInfo(index, project_id, name, repo, provider, created, deleting)
        row = {
            "id": project_id,
            "name": name,
            "repo_path": repo,
            "build_execution_provider": provider,
            "active_target_kind": "repo_root",
            "worktree_cmd": "git worktree add {path} {branch}" if index % 2 == 0 else None,
            "check_definitions": json.dumps(
                [{"id": c[0], "command": json.loads(c[1]), "timeout_seconds": c[2]}
                 for c in data.CHECKS[: 2 + index % 3]],
                separators=(",", ":"),
            ),
            "required_check_definition_ids": _CHECK_ID_LISTS[index % len(_CHECK_ID_LISTS)],
            "pre_review_check_definition_ids": None,
            "post_build_check_definition_ids": '["unit-tests"]' if index % 3 == 0 else None,
            "auto_fix_check_definition_ids": None,
            "spec_aware_code_review_enabled": index % 2,
            "deletion_started_at": stamp(ctx.now_epoch - 2 * HOUR) if deleting else None,
            "deletion_claim_id": "archon-worker:42:delete" if deleting else None,
            "created_at": stamp(created),
        }
        info.configured_checks = profiles.has_configured_check_policy(row)
        ctx.insert("projects", row)
        if ctx.has_profiles:
            _redate_first_revision(ctx, info)
            _add_revisions(ctx, info)
        ctx.projects.append(info)


def _redate_first_revision(ctx: DemoContext, info: ProjectInfo) -> None:
    conn = ctx.conn
    revision = conn.execute(
        "SELECT id, project_id, revision, schema_version, fingerprint, profile_json"
        " FROM execution_profile_revisions WHERE project_id = ? AND revision = 1",
        (info.id,),
    ).fetchone()
    event = conn.execute(
        "SELECT id, project_id, event_type, profile_revision_id, previous_profile_revision_id,"
        " metadata_json FROM execution_profile_audit_events WHERE profile_revision_id = ?",
        (revision[0],),
    ).fetchone()
    conn.execute("DELETE FROM execution_profile_revisions WHERE id = ?", (revision[0],))
    created = stamp(info.created)
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version,"
        " fingerprint, profile_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*revision, created),
    )
    if event is not None and conn.execute(
        "SELECT 1 FROM execution_profile_audit_events WHERE id = ?", (event[0],)
    ).fetchone() is None:
        conn.execute(
            "INSERT INTO execution_profile_audit_events (id, project_id, event_type,"
            " profile_revision_id, previous_profile_revision_id, metadata_json, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*event, created),
        )
    first = (revision[0], 1, revision[4])
    info.revisions.append(first)
    info.active_revision = first


def _add_revisions(ctx: DemoContext, info: ProjectInfo) -> None:
    """Several more revisions with created/activated events; project 0 is left on an older one."""
    rng = ctx.rng
    schema_version = profiles.SCHEMA_VERSION_BY_RELEASE[ctx.release]
    variants = _V3_VARIANTS if schema_version >= 3 else _V2_VARIANTS
    if schema_version >= 3 and info.configured_checks:
        # What archon's workload-eligibility repair would leave alone (it runs at every start).
        variants = tuple(v for v in variants if v["check_template_policy"]["mode"] == "agent_template"
                         and "check" in v["eligible_workloads"])
    seen = {fp for _id, _rev, fp in info.revisions}
    extra = 3 if info.index == 0 else rng.randint(1, 3)
    when = info.created + DAY
    offset = info.index  # different projects walk the variants from different places
    providers_by_id = {info.revisions[0][0]: info.provider}
    for step in range(extra):
        variant = variants[(offset + step) % len(variants)]
        provider = info.provider
        if step == 1 or (step == 0 and info.index % 3 == 2):  # some revisions switch provider
            provider = "host" if info.provider == "docker_sandbox" else "docker_sandbox"
        raw = {"provider_preference": provider, **variant}
        normalized = profiles.normalize(raw, schema_version)
        profile = normalized.profile
        fingerprint = profiles.fingerprint(profile)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        number = len(info.revisions) + 1
        revision_id = f"{info.id}:execution-profile:{number}"
        when += rng.randint(1, 9) * DAY + rng.randint(0, DAY)  # at most ~31 days after creation
        actor = rng.choice(data.HUMANS)
        ctx.insert(
            "execution_profile_revisions",
            {
                "id": revision_id,
                "project_id": info.id,
                "revision": number,
                "schema_version": schema_version,
                "fingerprint": fingerprint,
                "profile_json": profiles.serialize(profile),
                "created_at": stamp(when),
            },
        )
        ctx.insert(
            "execution_profile_audit_events",
            {
                "id": f"{revision_id}:created",
                "project_id": info.id,
                "event_type": "revision_created",
                "profile_revision_id": revision_id,
                "previous_profile_revision_id": info.active_revision[0],
                "metadata_json": json.dumps({"actor": actor, "source": "settings"}),
                "created_at": stamp(when),
            },
        )
        revision = (revision_id, number, fingerprint)
        info.revisions.append(revision)
        providers_by_id[revision_id] = provider
        _activate(ctx, info, revision, provider, when + rng.randint(60, 3 * HOUR), actor)
    if info.index == 0 and len(info.revisions) >= 3:
        # A rollback: the operator went back to revision 2 after trying the later ones.
        target = info.revisions[1]
        _activate(ctx, info, target, providers_by_id[target[0]], when + 2 * DAY, "carol",
                  reason="rollback: builds slower")


def _activate(ctx, info, revision, provider, when, actor, reason=None) -> None:
    previous = info.active_revision
    count = ctx.conn.execute(
        "SELECT count(*) FROM execution_profile_audit_events WHERE profile_revision_id = ?"
        " AND event_type = 'revision_activated'",
        (revision[0],),
    ).fetchone()[0]
    metadata = {"actor": actor}
    if reason:
        metadata["reason"] = reason
    ctx.conn.execute(
        "UPDATE projects SET active_execution_profile_revision_id = ?, build_execution_provider = ?"
        " WHERE id = ?",
        (revision[0], provider, info.id),
    )
    ctx.insert(
        "execution_profile_audit_events",
        {
            "id": f"{revision[0]}:activated:{count + 1}",
            "project_id": info.id,
            "event_type": "revision_activated",
            "profile_revision_id": revision[0],
            "previous_profile_revision_id": previous[0],
            "metadata_json": json.dumps(metadata),
            "created_at": stamp(when),
        },
    )
    info.active_revision = revision
    info.provider = provider
