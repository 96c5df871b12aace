"""1.10.0 `backfillExecutionProfilesToCurrentSchema`: active v1/v2 profiles move to a v3 revision."""

from console.db.migrations.backfills import active_rows_sql, backfill_to_schema
from console.db.migrations.base import count, table_exists

ID = "021-profile-backfill-current-schema"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Active schema-1/2 profiles: new v3 revision (or reuse by fingerprint), audited pointer move"


def up(conn):
    backfill_to_schema(conn, from_versions=(1, 2), to_version=3, event_suffix="schema-backfill")


def estimate(conn):
    """Before the profile tables exist, every live project will get a v2 revision 1 (step 005)
    and then move to v3 here."""
    if not table_exists(conn, "execution_profile_revisions"):
        return count(conn, "SELECT count(*) FROM projects WHERE deletion_started_at IS NULL")
    return count(conn, f"SELECT count(*) FROM ({active_rows_sql((1, 2))})")
