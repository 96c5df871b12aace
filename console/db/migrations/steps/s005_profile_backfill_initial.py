"""1.8.22 `backfillExecutionProfiles`: give every project without an owned active revision revision 1.

Only when 1.8.22 is a stop of the upgrade (console/db/migrations/stops.py): on a file archon 1.8.22
never starts, 1.10.0's start gives the revisions, in its own schema (step 021).
"""

from console.db.migrations.backfills import INITIAL_ROWS_SQL, backfill_initial
from console.db.migrations.base import columns, count, table_exists
from console.db.migrations.stops import is_stop

ID = "005-profile-backfill-initial"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Revision 1 (default profile for the provider) for projects with no owned active revision"

SCHEMA_VERSION = 2


def up(conn):
    if is_stop(RELEASE):
        backfill_initial(conn, SCHEMA_VERSION)


def estimate(conn):
    """Before steps 002/003 run, every project will need its revision 1."""
    if not is_stop(RELEASE):
        return 0
    if "active_execution_profile_revision_id" not in columns(conn, "projects") or not table_exists(
        conn, "execution_profile_revisions"
    ):
        return count(conn, "SELECT count(*) FROM projects")
    return count(conn, f"SELECT count(*) FROM ({INITIAL_ROWS_SQL})")
