"""Profile backfills shared by the 1.8.22 and 1.10.0 steps (archon's own routines, re-implemented).

The initial backfill gives revision 1 to projects without one; the others move a project's active
pointer with compare-and-set and record the move. Nothing is ever deleted or edited. A profile
that cannot be normalised stops the step, and so the upgrade, with archon's own message.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from console.db import execution_profiles as profiles

PROJECT_POLICY_COLUMNS = (
    "required_check_definition_ids",
    "pre_review_check_definition_ids",
    "post_build_check_definition_ids",
    "auto_fix_check_definition_ids",
)


class BackfillError(Exception):
    pass


def active_rows_sql(versions: tuple[int, ...], extra_columns: tuple[str, ...] = ()) -> str:
    """Projects not being deleted whose active revision has one of `versions`."""
    placeholders = ", ".join(str(int(v)) for v in versions)
    extra = "".join(f",\n      projects.{column}" for column in extra_columns)
    return f"""
    SELECT projects.id AS project_id,
      revisions.id AS revision_id,
      revisions.profile_json{extra}
    FROM projects
    INNER JOIN execution_profile_revisions revisions
      ON revisions.id = projects.active_execution_profile_revision_id
      AND revisions.project_id = projects.id
    WHERE revisions.schema_version IN ({placeholders}) AND projects.deletion_started_at IS NULL
    """


def _normalized(profile_json: str, revision_id: str, schema_version: int) -> dict[str, Any]:
    try:
        normalized = profiles.normalize(profiles.parse(profile_json), schema_version)
    except ValueError:
        normalized = profiles.Normalized(False)
    if not normalized.ok:
        raise BackfillError(f"Stored execution profile revision {revision_id} is invalid")
    return normalized.profile


def _find_by_fingerprint(conn, project_id: str, fp: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM execution_profile_revisions WHERE project_id = ? AND fingerprint = ?",
        (project_id, fp),
    ).fetchone()
    return row[0] if row else None


def _reuse_or_insert(conn, project_id: str, profile: dict, *, revision_id: str, schema_version: int,
                     source_revision: str) -> tuple[str, bool]:
    """The project's revision with this profile's fingerprint, inserted when missing.

    Looked up again by fingerprint after the insert (DOMAIN.md §3.6 note): an id collision with
    other content must not be activated.
    """
    fp = profiles.fingerprint(profile)
    existing = _find_by_fingerprint(conn, project_id, fp)
    if existing is not None:
        return existing, False
    inserted = conn.execute(
        "INSERT OR IGNORE INTO execution_profile_revisions "
        "(id, project_id, revision, schema_version, fingerprint, profile_json) VALUES (?, ?, "
        "(SELECT COALESCE(MAX(revision), 0) + 1 FROM execution_profile_revisions WHERE project_id = ?), ?, ?, ?)",
        (revision_id, project_id, project_id, schema_version, fp, profiles.serialize(profile)),
    ).rowcount
    target = _find_by_fingerprint(conn, project_id, fp)
    if target is None:
        raise BackfillError(f"Failed to migrate stored execution profile revision {source_revision}")
    return target, bool(inserted)


def _audit(conn, event_id: str, project_id: str, event_type: str, revision: str, previous: str | None) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO execution_profile_audit_events "
        "(id, project_id, event_type, profile_revision_id, previous_profile_revision_id) VALUES (?, ?, ?, ?, ?)",
        (event_id, project_id, event_type, revision, previous),
    )


def _activate(conn, project_id: str, target: str, previous: str) -> bool:
    """Compare-and-set of the active pointer; True when this call moved it."""
    return bool(
        conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ? "
            "WHERE id = ? AND active_execution_profile_revision_id = ?",
            (target, project_id, previous),
        ).rowcount
    )


UNKNOWN_PROVIDERS_TO_HOST = (
    "UPDATE projects SET build_execution_provider = 'host' "
    "WHERE build_execution_provider IS NULL OR build_execution_provider NOT IN ('host', 'docker_sandbox')"
)


def reset_unknown_providers(conn: sqlite3.Connection) -> None:
    """Archon's start-up statement (db.js since 1.8.20, before the profile tables and their
    rebuild): a project whose provider is not one archon knows (a column `ensureColumn` added
    without the CHECK lets one in) runs on the host. Every start runs it, so the steps standing for
    1.8.22's and 1.10.0's starts (004 and 020, the first of each release that rebuilds the profile
    table, as archon does right after this statement) run it before their rebuild, with the triggers
    as they stand then."""
    if "build_execution_provider" in {r[1] for r in conn.execute("PRAGMA table_info(projects)")}:
        conn.execute(UNKNOWN_PROVIDERS_TO_HOST)


INITIAL_ROWS_SQL = """
    SELECT id, build_execution_provider, active_execution_profile_revision_id
    FROM projects
    WHERE active_execution_profile_revision_id = ''
       OR NOT EXISTS (
         SELECT 1 FROM execution_profile_revisions r
         WHERE r.project_id = projects.id AND r.id = projects.active_execution_profile_revision_id
       )
"""


def backfill_initial(conn: sqlite3.Connection, schema_version: int) -> int:
    """`backfillExecutionProfiles`: every project (being deleted or not) without an owned active
    revision gets revision 1, the release's default profile for its provider, and a `:created`
    event. Returns the projects given one."""
    rows = conn.execute(INITIAL_ROWS_SQL).fetchall()
    for project_id, provider, _active in rows:
        profile = profiles.create(provider, schema_version)
        revision_id = f"{project_id}:execution-profile:1"
        conn.execute(
            "INSERT OR IGNORE INTO execution_profile_revisions "
            "(id, project_id, revision, schema_version, fingerprint, profile_json) VALUES (?, ?, 1, ?, ?, ?)",
            (revision_id, project_id, schema_version, profiles.fingerprint(profile), profiles.serialize(profile)),
        )
        conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ? WHERE id = ?",
            (revision_id, project_id),
        )
        _audit(conn, f"{revision_id}:created", project_id, "revision_created", revision_id, None)
    return len(rows)


def backfill_to_schema(
    conn: sqlite3.Connection, *, from_versions: tuple[int, ...], to_version: int, event_suffix: str
) -> int:
    """`backfillExecutionProfilesToSchemaV2` / `...ToCurrentSchema`. Returns projects moved."""
    moved = 0
    for project_id, revision_id, profile_json in conn.execute(active_rows_sql(from_versions)).fetchall():
        profile = _normalized(profile_json, revision_id, to_version)
        target, _ = _reuse_or_insert(
            conn, project_id, profile, revision_id=f"{project_id}:execution-profile:v{to_version}",
            schema_version=to_version, source_revision=revision_id,
        )
        if _activate(conn, project_id, target, revision_id):
            moved += 1
            _audit(conn, f"{target}:{event_suffix}", project_id, "revision_activated", target, revision_id)
    return moved


def workload_repairs(conn: sqlite3.Connection, schema_version: int) -> list[dict]:
    """What `backfillExecutionProfileWorkloadEligibility` would change, project by project."""
    names = ("project_id", "revision_id", "profile_json") + PROJECT_POLICY_COLUMNS
    rows = conn.execute(active_rows_sql((schema_version,), PROJECT_POLICY_COLUMNS)).fetchall()
    repairs = []
    for raw in rows:
        row = dict(zip(names, tuple(raw)))
        profile = _normalized(row["profile_json"], row["revision_id"], schema_version)
        workloads = profile["eligible_workloads"]
        build = "build" in workloads
        needs_chat = build and "chat_build" not in workloads
        needs_check = (
            build
            and profiles.has_configured_check_policy(row)
            and profile["check_template_policy"]["mode"] != "agent_template"
        )
        if not needs_chat and not needs_check:
            continue
        repaired = profiles.normalize(
            {
                **profile,
                "eligible_workloads": workloads
                + (["chat_build"] if needs_chat else [])
                + (["check"] if needs_check else []),
                "check_template_policy": {"mode": "agent_template", "agent": "opencode"}
                if needs_check
                else profile["check_template_policy"],
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
        project_id, old, key = repair["project_id"], repair["revision_id"], repair["repair_key"]
        target, inserted = _reuse_or_insert(
            conn, project_id, repair["profile"],
            revision_id=f"{project_id}:execution-profile:{key}-v{schema_version}",
            schema_version=schema_version, source_revision=old,
        )
        if inserted:
            _audit(conn, f"{target}:{key}-backfill-created", project_id, "revision_created", target, old)
        if _activate(conn, project_id, target, old):
            moved += 1
            _audit(conn, f"{target}:{key}-backfill-activated", project_id, "revision_activated", target, old)
    return moved
