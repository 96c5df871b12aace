"""Profile backfills shared by the 1.8.22 and 1.10.0 steps (archon's own routines, re-implemented).

Each moves a project's active pointer with compare-and-set and records the move; nothing is ever
deleted or edited. A profile that cannot be normalised stops the step, and so the upgrade,
with archon's own message.
"""

from __future__ import annotations

import json
import sqlite3

from console.db import execution_profiles as profiles


class BackfillError(Exception):
    pass


def _next_revision(conn: sqlite3.Connection, project_id: str) -> int:
    return conn.execute(
        "SELECT COALESCE(MAX(revision), 0) + 1 FROM execution_profile_revisions WHERE project_id = ?",
        (project_id,),
    ).fetchone()[0]


def _find_by_fingerprint(conn, project_id, fp):
    row = conn.execute(
        "SELECT id FROM execution_profile_revisions WHERE project_id = ? AND fingerprint = ?",
        (project_id, fp),
    ).fetchone()
    return row[0] if row else None


def active_rows_sql(versions: tuple[int, ...]) -> str:
    placeholders = ", ".join(str(v) for v in versions)
    return f"""
    SELECT projects.id AS project_id,
      revisions.id AS revision_id,
      revisions.profile_json
    FROM projects
    INNER JOIN execution_profile_revisions revisions
      ON revisions.id = projects.active_execution_profile_revision_id
      AND revisions.project_id = projects.id
    WHERE revisions.schema_version IN ({placeholders}) AND projects.deletion_started_at IS NULL
    """


def backfill_to_schema(
    conn: sqlite3.Connection, *, from_versions: tuple[int, ...], to_version: int, event_suffix: str
) -> int:
    """`backfillExecutionProfilesToSchemaV2` / `...ToCurrentSchema`. Returns projects moved."""
    moved = 0
    for project_id, revision_id, profile_json in conn.execute(active_rows_sql(from_versions)).fetchall():
        try:
            normalized = profiles.normalize(json.loads(profile_json), to_version)
        except ValueError:
            normalized = profiles.Normalized(False)
        if not normalized.ok:
            raise BackfillError(f"Stored execution profile revision {revision_id} is invalid")
        fp = profiles.fingerprint(normalized.profile)
        target = _find_by_fingerprint(conn, project_id, fp)
        if target is None:
            target = f"{project_id}:execution-profile:v{to_version}"
            conn.execute(
                "INSERT OR IGNORE INTO execution_profile_revisions "
                "(id, project_id, revision, schema_version, fingerprint, profile_json) VALUES (?, ?, ?, ?, ?, ?)",
                (target, project_id, _next_revision(conn, project_id), to_version, fp,
                 profiles.serialize(normalized.profile)),
            )
            # Look the revision up again by fingerprint (DOMAIN.md §3.6 note): an id collision
            # must not activate a row with other content.
            target = _find_by_fingerprint(conn, project_id, fp)
            if target is None:
                raise BackfillError(f"Failed to migrate stored execution profile revision {revision_id}")
        changed = conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ? "
            "WHERE id = ? AND active_execution_profile_revision_id = ?",
            (target, project_id, revision_id),
        ).rowcount
        if changed:
            moved += 1
            conn.execute(
                "INSERT OR IGNORE INTO execution_profile_audit_events "
                "(id, project_id, event_type, profile_revision_id, previous_profile_revision_id) "
                "VALUES (?, ?, 'revision_activated', ?, ?)",
                (f"{target}:{event_suffix}", project_id, target, revision_id),
            )
    return moved


def workload_repairs(conn: sqlite3.Connection, schema_version: int) -> list[dict]:
    """What `backfillExecutionProfileWorkloadEligibility` would change, project by project."""
    conn.row_factory = conn.row_factory
    rows = conn.execute(
        f"""
        SELECT projects.id AS project_id, revisions.id AS revision_id, revisions.profile_json,
          projects.required_check_definition_ids, projects.pre_review_check_definition_ids,
          projects.post_build_check_definition_ids, projects.auto_fix_check_definition_ids
        FROM projects
        INNER JOIN execution_profile_revisions revisions
          ON revisions.id = projects.active_execution_profile_revision_id
          AND revisions.project_id = projects.id
        WHERE revisions.schema_version = {int(schema_version)}
          AND projects.deletion_started_at IS NULL
        """
    ).fetchall()
    names = ["project_id", "revision_id", "profile_json", "required_check_definition_ids",
             "pre_review_check_definition_ids", "post_build_check_definition_ids",
             "auto_fix_check_definition_ids"]
    repairs = []
    for raw in rows:
        row = dict(zip(names, tuple(raw)))
        try:
            normalized = profiles.normalize(json.loads(row["profile_json"]), schema_version)
        except ValueError:
            normalized = profiles.Normalized(False)
        if not normalized.ok:
            raise BackfillError(f"Stored execution profile revision {row['revision_id']} is invalid")
        workloads = normalized.profile["eligible_workloads"]
        build = "build" in workloads
        needs_chat = build and "chat_build" not in workloads
        needs_check = (
            build
            and profiles.has_configured_check_policy(row)
            and normalized.profile["check_template_policy"]["mode"] != "agent_template"
        )
        if not needs_chat and not needs_check:
            continue
        repaired = profiles.normalize(
            {
                **normalized.profile,
                "eligible_workloads": workloads + (["chat_build"] if needs_chat else []) + (["check"] if needs_check else []),
                "check_template_policy": {"mode": "agent_template", "agent": "opencode"}
                if needs_check else normalized.profile["check_template_policy"],
            },
            schema_version,
        )
        if not repaired.ok:
            raise BackfillError(f"Stored execution profile revision {row['revision_id']} is invalid")
        key = "chat-build-check" if needs_chat and needs_check else "chat-build" if needs_chat else "configured-check"
        repairs.append({**row, "repair_key": key, "profile": repaired.profile})
    return repairs


def backfill_workload_eligibility(conn: sqlite3.Connection, schema_version: int) -> int:
    moved = 0
    for repair in workload_repairs(conn, schema_version):
        project_id, old = repair["project_id"], repair["revision_id"]
        fp = profiles.fingerprint(repair["profile"])
        key = repair["repair_key"]
        target = _find_by_fingerprint(conn, project_id, fp)
        if target is None:
            inserted = conn.execute(
                "INSERT OR IGNORE INTO execution_profile_revisions "
                "(id, project_id, revision, schema_version, fingerprint, profile_json) VALUES (?, ?, ?, ?, ?, ?)",
                (f"{project_id}:execution-profile:{key}-v{schema_version}", project_id,
                 _next_revision(conn, project_id), schema_version, fp, profiles.serialize(repair["profile"])),
            ).rowcount
            target = _find_by_fingerprint(conn, project_id, fp)
            if target is None:
                raise BackfillError(f"Failed to migrate stored execution profile revision {old}")
            if inserted:
                conn.execute(
                    "INSERT OR IGNORE INTO execution_profile_audit_events "
                    "(id, project_id, event_type, profile_revision_id, previous_profile_revision_id) "
                    "VALUES (?, ?, 'revision_created', ?, ?)",
                    (f"{target}:{key}-backfill-created", project_id, target, old),
                )
        changed = conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ? "
            "WHERE id = ? AND active_execution_profile_revision_id = ?",
            (target, project_id, old),
        ).rowcount
        if changed:
            moved += 1
            conn.execute(
                "INSERT OR IGNORE INTO execution_profile_audit_events "
                "(id, project_id, event_type, profile_revision_id, previous_profile_revision_id) "
                "VALUES (?, ?, 'revision_activated', ?, ?)",
                (f"{target}:{key}-backfill-activated", project_id, target, old),
            )
    return moved
