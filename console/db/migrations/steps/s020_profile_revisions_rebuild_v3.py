"""1.10.0: widen execution_profile_revisions to schema versions (1, 2, 3).

Dropping the triggers that mention the table also drops `create_project_execution_profile`,
which comes back with the 1.10.0 (schema 3) default profiles baked in; the other triggers archon
re-creates at start come back in the release's text (`profile_triggers.release_revision_triggers`),
any remaining ones from their stored text. The table text is archon's: 1.8.22's in full (its diff
shows it) with the one line 1.10.0's diff changes.
"""

from console.db.migrations.backfills import note_revisions_rebuilt, reset_unknown_providers
from console.db.migrations.base import count, rebuild_table, table_sql
from console.db.migrations.profile_triggers import create_project_profile_trigger, release_revision_triggers

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
        trigger_overrides={
            "create_project_execution_profile": create_project_profile_trigger(3, if_not_exists=False)
        },
        release_triggers=release_revision_triggers(3),
    )
    note_revisions_rebuilt(conn)  # 021 and 022 run without the triggers only after this (backfills.py)


def estimate(conn):
    return count(conn, "SELECT count(*) FROM execution_profile_revisions") if needed(conn) else 0
