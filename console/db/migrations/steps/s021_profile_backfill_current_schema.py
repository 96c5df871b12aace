"""1.10.0's profile backfills before the workload repair: `backfillExecutionProfiles` (revision 1,
schema 3, for every project without an owned active revision: all of them on a file 1.8.22 never
started) and `backfillExecutionProfilesToCurrentSchema` (active v1/v2 profiles move to a v3 revision).

They run with the triggers as the file has them: without the guards after step 020's rebuild (in
this run or an interrupted earlier one), with them on a file archon 1.10.0 left (step 020 says why).
"""

from console.db.migrations.backfills import INITIAL_ROWS_SQL, active_rows_sql, backfill_initial, backfill_to_schema
from console.db.migrations.base import count, table_exists

ID = "021-profile-backfill-current-schema"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Revision 1 (v3) where missing; active schema-1/2 profiles: v3 revision, audited move"

SCHEMA_VERSION = 3


def up(conn):
    backfill_initial(conn, SCHEMA_VERSION)
    backfill_to_schema(conn, from_versions=(1, 2), to_version=SCHEMA_VERSION, event_suffix="schema-backfill")


def estimate(conn):
    """Before the profile tables exist, every project (being deleted or not) gets its revision 1 here."""
    if not table_exists(conn, "execution_profile_revisions"):
        return count(conn, "SELECT count(*) FROM projects")
    return count(conn, f"SELECT count(*) FROM ({INITIAL_ROWS_SQL})") + count(
        conn, f"SELECT count(*) FROM ({active_rows_sql((1, 2))})"
    )
