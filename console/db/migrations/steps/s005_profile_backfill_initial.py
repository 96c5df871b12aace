"""1.8.22 `backfillExecutionProfiles`: give every project without an owned active revision revision 1."""

from console.db import execution_profiles as profiles
from console.db.migrations.base import columns, count, table_exists

ID = "005-profile-backfill-initial"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Revision 1 (default profile for the provider) for projects with no owned active revision"

SCHEMA_VERSION = 2

SELECT = """
    SELECT id, build_execution_provider, active_execution_profile_revision_id
    FROM projects
    WHERE active_execution_profile_revision_id = ''
       OR NOT EXISTS (
         SELECT 1 FROM execution_profile_revisions r
         WHERE r.project_id = projects.id AND r.id = projects.active_execution_profile_revision_id
       )
"""


def up(conn):
    for project_id, provider, _active in conn.execute(SELECT).fetchall():
        profile = profiles.create(provider, SCHEMA_VERSION)
        revision_id = f"{project_id}:execution-profile:1"
        conn.execute(
            "INSERT OR IGNORE INTO execution_profile_revisions "
            "(id, project_id, revision, schema_version, fingerprint, profile_json) VALUES (?, ?, 1, ?, ?, ?)",
            (revision_id, project_id, SCHEMA_VERSION, profiles.fingerprint(profile), profiles.serialize(profile)),
        )
        conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ? WHERE id = ?",
            (revision_id, project_id),
        )
        conn.execute(
            "INSERT OR IGNORE INTO execution_profile_audit_events "
            "(id, project_id, event_type, profile_revision_id, previous_profile_revision_id) "
            "VALUES (?, ?, 'revision_created', ?, NULL)",
            (f"{revision_id}:created", project_id, revision_id),
        )


def estimate(conn):
    """Before steps 002/003 run, every project will need its revision 1."""
    if "active_execution_profile_revision_id" not in columns(conn, "projects") or not table_exists(
        conn, "execution_profile_revisions"
    ):
        return count(conn, "SELECT count(*) FROM projects")
    return count(conn, f"SELECT count(*) FROM ({SELECT})")
