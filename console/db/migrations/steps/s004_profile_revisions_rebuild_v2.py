"""1.8.22: widen execution_profile_revisions to schema versions (1, 2) when an older shape exists.

Archon tests for the marker `schema_version IN (1, 2)`; a 1.10.0 table carries
`schema_version IN (1, 2, 3)`, which is already wider, so it is left alone here. The table text is archon's in full (its diffs show it).
Triggers naming the table that archon re-creates at start come back in 1.8.22's text
(`profile_triggers.release_revision_triggers`), others from their stored text.
"""

from console.db.migrations.backfills import reset_unknown_providers
from console.db.migrations.base import count, rebuild_table, table_sql
from console.db.migrations.profile_triggers import release_revision_triggers

ID = "004-profile-revisions-rebuild-v2"
RELEASE = "1.8.22"
SAFETY = "data-preserving-rebuild"
DESCRIPTION = "Rebuild execution_profile_revisions with CHECK schema_version IN (1, 2) if older"
REBUILD = True

COLUMNS = ["id", "project_id", "revision", "schema_version", "fingerprint", "profile_json", "created_at"]

REPLACEMENT = """
      CREATE TABLE execution_profile_revisions_v2 (
        id             TEXT PRIMARY KEY,
        project_id     TEXT NOT NULL,
        revision       INTEGER NOT NULL CHECK (revision > 0),
        schema_version INTEGER NOT NULL CHECK (schema_version IN (1, 2)),
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
    return bool(sql) and "schema_version IN (1, 2)" not in sql and "schema_version IN (1, 2, 3)" not in sql


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
        release_triggers=release_revision_triggers(2),
    )


def estimate(conn):
    return count(conn, "SELECT count(*) FROM execution_profile_revisions") if needed(conn) else 0
