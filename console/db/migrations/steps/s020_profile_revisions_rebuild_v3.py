"""1.10.0: widen execution_profile_revisions to schema versions (1, 2, 3).

Archon's rebuild drops every trigger that mentions the table and commits without them; its start
re-creates its own (`create_project_execution_profile` with the 1.10.0 schema-3 defaults, the
owner/projection guards, the build-sequence ones: `profile_triggers.release_revision_triggers`)
only after its three profile backfills. This step commits without those too and step 022 creates
them (IF NOT EXISTS), so a run stopped in between leaves what an archon stopped after its rebuild
leaves, and the next run finishes as archon's next start would. Any other trigger naming the
table comes back from its stored text. The table text is archon's: 1.8.22's in full (its diff
shows it) with the one line 1.10.0's diff changes.
"""

from console.db.migrations.backfills import reset_unknown_providers
from console.db.migrations.base import count, rebuild_table, table_sql
from console.db.migrations.profile_triggers import release_revision_triggers

ID = "020-profile-revisions-rebuild-v3"
RELEASE = "1.10.0"
SAFETY = "data-preserving-rebuild"
DESCRIPTION = "Rebuild execution_profile_revisions with CHECK schema_version IN (1, 2, 3)"
REBUILD = True

COLUMNS = ["id", "project_id", "revision", "schema_version", "fingerprint", "profile_json", "created_at"]

REPLACEMENT = """
      CREATE TABLE execution_profile_revisions_v2 (
        id             TEXT PRIMARY KEY,
        project_id     TEXT NOT NULL,
        revision       INTEGER NOT NULL CHECK (revision > 0),
        schema_version INTEGER NOT NULL CHECK (schema_version IN (1, 2, 3)),
        fingerprint    TEXT NOT NULL CHECK (length(fingerprint) = 64),
        profile_json   TEXT NOT NULL CHECK (
          json_valid(profile_json)
          AND json_type(profile_json) = 'object'
          AND length(CAST(profile_json AS BLOB)) BETWEEN 2 AND 16384
        ),
        created_at     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
        UNIQUE (project_id, revision),
        UNIQUE (project_id, fingerprint),
        UNIQUE (project_id, id),
        FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
      );
"""


def needed(conn):
    sql = table_sql(conn, "execution_profile_revisions")
    return bool(sql) and "schema_version IN (1, 2, 3)" not in sql


def up(conn):
    reset_unknown_providers(conn)  # archon's start runs it first, whether or not it rebuilds
    if not needed(conn):
        return
    rebuild_table(
        conn,
        table="execution_profile_revisions",
        replacement="execution_profile_revisions_v2",
        create_replacement_sql=REPLACEMENT,
        copy_columns=COLUMNS,
        trigger_like="execution_profile_revisions",
        left_out=set(release_revision_triggers(3)),  # step 022 creates them, after the backfills
    )


def estimate(conn):
    return count(conn, "SELECT count(*) FROM execution_profile_revisions") if needed(conn) else 0
