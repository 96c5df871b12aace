"""1.8.22: the projection and immutability triggers, and revision 1 for new projects (v2 defaults)."""

from console.db.migrations.base import execute_script
from console.db.migrations.profile_triggers import GUARDS, create_project_profile_trigger

ID = "007-profile-guard-triggers"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Triggers: create_project_execution_profile, owner/projection guards, immutability"


def up(conn):
    execute_script(conn, create_project_profile_trigger(2) + "\n" + GUARDS)


def estimate(conn):
    return 0
