"""1.10.0 `backfillExecutionProfileWorkloadEligibility`: build-eligible profiles gain chat_build,
and with a configured check policy also `check` with the opencode agent template.

Nothing is discarded, but a project's effective policy changes: the plan lists the projects.
It is the last of 1.10.0's backfills, so it then creates the triggers naming
execution_profile_revisions that step 020's rebuild committed without (IF NOT EXISTS, archon's text),
as archon's start does after the same backfills.
"""

from console.db.migrations.backfills import backfill_workload_eligibility, workload_repairs
from console.db.migrations.base import table_exists
from console.db.migrations.profile_triggers import create_missing_revision_triggers

ID = "022-profile-workload-eligibility"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Policy change: add chat_build / check eligibility to active v3 profiles (audited)"


def up(conn):
    backfill_workload_eligibility(conn, 3)
    create_missing_revision_triggers(conn, 3)


def estimate(conn):
    """Projects whose active profile will be repaired. Before the profile tables exist, every
    project gets 1.10.0's default at step 021 (1.8.22 never starts on such a file), which already
    has chat_build and the agent template: nothing to repair."""
    if not table_exists(conn, "execution_profile_revisions"):
        return 0
    try:
        return len(workload_repairs(conn, 3))
    except Exception:
        return 0
