"""1.8.22: environment and binding identity guards now cover the profile and credential columns.

Archon drops and re-creates these three triggers at every start; so does this step.
"""

from console.db.migrations.base import execute_script

ID = "016-environment-identity-triggers"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Re-create environment identity, binding identity and binding immutability triggers"

DDL = """
DROP TRIGGER IF EXISTS preserve_execution_environment_identity;
DROP TRIGGER IF EXISTS validate_execution_environment_binding_identity;
DROP TRIGGER IF EXISTS preserve_execution_environment_binding_identity;

  CREATE TRIGGER preserve_execution_environment_identity
  BEFORE UPDATE OF id, project_id, provider_kind, provider_version, target_kind, target_key,
    target_workspace_path, environment_revision, workspace_mode,
    environment_validation_fingerprint, execution_profile_revision_id, execution_profile_fingerprint,
    credential_requirements_fingerprint, template_identity, template_digest,
    agent_identity, compatible_agents_json, created_at ON execution_environments
  WHEN NEW.id <> OLD.id OR NEW.project_id <> OLD.project_id OR NEW.provider_kind <> OLD.provider_kind
    OR NEW.provider_version <> OLD.provider_version OR NEW.target_kind <> OLD.target_kind
    OR NEW.target_key <> OLD.target_key OR NEW.target_workspace_path <> OLD.target_workspace_path
    OR NEW.environment_revision <> OLD.environment_revision OR NEW.workspace_mode <> OLD.workspace_mode
    OR NEW.environment_validation_fingerprint <> OLD.environment_validation_fingerprint
    OR NEW.execution_profile_revision_id IS NOT OLD.execution_profile_revision_id
    OR NEW.execution_profile_fingerprint IS NOT OLD.execution_profile_fingerprint
    OR NEW.credential_requirements_fingerprint IS NOT OLD.credential_requirements_fingerprint
    OR NEW.template_identity IS NOT OLD.template_identity OR NEW.template_digest IS NOT OLD.template_digest
    OR NEW.agent_identity IS NOT OLD.agent_identity OR NEW.compatible_agents_json <> OLD.compatible_agents_json
    OR NEW.created_at <> OLD.created_at
  BEGIN SELECT RAISE(ABORT, 'Execution environment identity is immutable'); END;

  CREATE TRIGGER validate_execution_environment_binding_identity
  BEFORE INSERT ON execution_environment_run_bindings
  WHEN NOT EXISTS (
    SELECT 1 FROM execution_environments WHERE id = NEW.environment_id AND project_id = NEW.project_id
      AND environment_revision = NEW.environment_revision
      AND environment_validation_fingerprint = NEW.environment_validation_fingerprint
      AND execution_profile_fingerprint IS NEW.execution_profile_fingerprint
  )
  BEGIN SELECT RAISE(ABORT, 'Execution environment binding identity does not match'); END;

  CREATE TRIGGER preserve_execution_environment_binding_identity
  BEFORE UPDATE OF environment_id, execution_run_id, project_id, relationship,
    environment_revision, environment_validation_fingerprint, execution_profile_fingerprint, bound_at
    ON execution_environment_run_bindings
  WHEN NEW.environment_id <> OLD.environment_id OR NEW.execution_run_id <> OLD.execution_run_id
    OR NEW.project_id <> OLD.project_id OR NEW.relationship <> OLD.relationship
    OR NEW.environment_revision <> OLD.environment_revision
    OR NEW.environment_validation_fingerprint <> OLD.environment_validation_fingerprint
    OR NEW.execution_profile_fingerprint IS NOT OLD.execution_profile_fingerprint
    OR NEW.bound_at <> OLD.bound_at
  BEGIN SELECT RAISE(ABORT, 'Execution environment run binding identity is immutable'); END;

DROP TRIGGER IF EXISTS validate_execution_environment_binding_authority;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
