"""1.8.22 `backfillExecutionProfilesToSchemaV2`: active schema-1 profiles move to a v2 revision."""

from console.db.migrations.backfills import active_rows_sql, backfill_to_schema
from console.db.migrations.base import count, table_exists

ID = "006-profile-backfill-schema-v2"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Active schema-1 profiles: new v2 revision (or reuse by fingerprint), audited pointer move"


def up(conn):
    backfill_to_schema(conn, from_versions=(1,), to_version=2, event_suffix="v2-backfill")


def estimate(conn):
    if not table_exists(conn, "execution_profile_revisions"):
        return 0
    return count(conn, f"SELECT count(*) FROM ({active_rows_sql((1,))})")
