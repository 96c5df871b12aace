"""1.8.22 `backfillExecutionProfilesToSchemaV2`: active schema-1 profiles move to a v2 revision.

Only when 1.8.22 is a stop of the upgrade (console/db/migrations/stops.py): otherwise 1.10.0's
start moves them straight to schema 3 (step 021).
"""

from console.db.migrations.backfills import active_rows_sql, backfill_to_schema
from console.db.migrations.base import count, table_exists
from console.db.migrations.stops import is_stop

ID = "006-profile-backfill-schema-v2"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Active schema-1 profiles: new v2 revision (or reuse by fingerprint), audited pointer move"


def up(conn):
    if is_stop(RELEASE):
        backfill_to_schema(conn, from_versions=(1,), to_version=2, event_suffix="v2-backfill")


def estimate(conn):
    if not is_stop(RELEASE) or not table_exists(conn, "execution_profile_revisions"):
        return 0
    return count(conn, f"SELECT count(*) FROM ({active_rows_sql((1,))})")
