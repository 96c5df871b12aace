"""Archon 1.8.20 as the baseline: every table, index and trigger the 1.8.20 `db.js` left.

Every object is classified by whether archon's own text shows its body in full (SHOWN) or the
console reconstructed it (RECONSTRUCTED: all 1.8.20 tables and triggers, whose diffs show only
fragments, and one index shown truncated). Adopting an existing database creates only the shown
ones that are missing (IF NOT EXISTS): a reconstructed trigger would put the console's own rule
beside archon's, perhaps under another name (archon's rule for binding evidence is not called
`preserve_execution_environment_binding_evidence`). The reconstruction is created only when the
console builds a 1.8.20 database from nothing (demo, tests, doctor's reference); on an adopted
database a missing reconstructed object is a doctor finding. Every later step creates only objects
whose text archon's diffs show (create_project_execution_profile's baked-in defaults aside, which
the profile evidence gate verifies).

A ledger from archon-console 0.1.0 records that this step ran in its old form, which created the
reconstruction with IF NOT EXISTS on adoption too: such objects may be present; they are not
removed (the step is not re-run), and doctor names them as the console's reconstruction.
"""

from console.db.migrations.base import execute_script, object_exists, statements_by_name, table_exists

ID = "001-archon-1.8.20-baseline"
RELEASE = "1.8.20"
SAFETY = "additive"
DESCRIPTION = "Archon 1.8.20 tables, indexes and triggers (no-op where they exist)"

ENVIRONMENT_STATES = "'queued', 'preparing', 'ready', 'running', 'stopped', 'retiring', 'cleanup_pending', 'retired', 'failed', 'unavailable'"

# Tables and triggers whose body archon's diffs never show in full (and one index shown only
# truncated): the console's reconstruction. Created only when the console builds a 1.8.20
# database from nothing (demo, tests, doctor's reference), never on a database it adopts.
RECONSTRUCTED = f"""
  CREATE TABLE IF NOT EXISTS projects (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    repo_path    TEXT NOT NULL,
    build_execution_provider TEXT NOT NULL DEFAULT 'host' CHECK (build_execution_provider IN ('host', 'docker_sandbox')),
    active_target_kind TEXT NOT NULL DEFAULT 'repo_root',
    active_target_bundle_id TEXT,
    worktree_cmd TEXT,
    worktree_sync TEXT,
    check_definitions TEXT,
    test_commands TEXT,
    required_check_definition_ids TEXT,
    pre_review_check_definition_ids TEXT,
    post_build_check_definition_ids TEXT,
    auto_fix_check_definition_ids TEXT,
    spec_aware_code_review_enabled INTEGER NOT NULL DEFAULT 0,
    deletion_started_at DATETIME,
    deletion_claim_id TEXT,
    deletion_cleanup_started_at DATETIME,
    created_at   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
  );

  CREATE TABLE IF NOT EXISTS worktree_bundles (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL,
    name        TEXT NOT NULL,
    required_check_policy_override TEXT,
    created_at  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS tickets (
    id                TEXT PRIMARY KEY,
    project_id        TEXT NOT NULL,
    title             TEXT NOT NULL,
    external_provider TEXT,
    external_key      TEXT,
    created_at        DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS ticket_dependencies (
    blocker_ticket_id   TEXT NOT NULL,
    blocked_ticket_id   TEXT NOT NULL,
    PRIMARY KEY (blocker_ticket_id, blocked_ticket_id),
    FOREIGN KEY (blocker_ticket_id) REFERENCES tickets(id) ON DELETE CASCADE,
    FOREIGN KEY (blocked_ticket_id) REFERENCES tickets(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS build_sequences (
    id                 TEXT PRIMARY KEY,
    project_id         TEXT NOT NULL,
    worktree_bundle_id TEXT,
    status             TEXT NOT NULL DEFAULT 'active',
    created_at         DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at         DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS build_sequence_tickets (
    build_sequence_id TEXT NOT NULL,
    ticket_id         TEXT NOT NULL,
    position          INTEGER NOT NULL,
    status            TEXT NOT NULL DEFAULT 'queued',
    entered_queue_at  DATETIME DEFAULT CURRENT_TIMESTAMP,
    started_at        DATETIME,
    finished_at       DATETIME,
    PRIMARY KEY (build_sequence_id, ticket_id),
    FOREIGN KEY (build_sequence_id) REFERENCES build_sequences(id) ON DELETE CASCADE,
    FOREIGN KEY (ticket_id) REFERENCES tickets(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS execution_runs (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'build',
    status      TEXT NOT NULL DEFAULT 'queued',
    created_at  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    finished_at DATETIME,
    UNIQUE (id, project_id),
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS execution_environments (
    id                                  TEXT PRIMARY KEY,
    project_id                          TEXT NOT NULL,
    provider_kind                       TEXT NOT NULL,
    provider_version                    TEXT NOT NULL,
    target_kind                         TEXT NOT NULL,
    target_key                          TEXT NOT NULL,
    target_workspace_path               TEXT NOT NULL,
    environment_revision                INTEGER NOT NULL,
    workspace_mode                      TEXT NOT NULL,
    environment_validation_fingerprint  TEXT NOT NULL,
    template_identity                   TEXT,
    template_digest                     TEXT,
    agent_identity                      TEXT,
    compatible_agents_json              TEXT NOT NULL DEFAULT '[]',
    external_id                         TEXT,
    lifecycle_state                     TEXT NOT NULL DEFAULT 'queued',
    last_used_at                        DATETIME,
    stopped_at                          DATETIME,
    retirement_started_at               DATETIME,
    cleanup_pending_at                  DATETIME,
    retired_at                          DATETIME,
    failed_at                           DATETIME,
    failure_message                     TEXT,
    failure_details_json                TEXT,
    cleanup_claim_id                    TEXT,
    cleanup_claimed_at                  DATETIME,
    cleanup_attempts                    INTEGER NOT NULL DEFAULT 0,
    created_at                          DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    preparation_started_at              DATETIME,
    ready_at                            DATETIME,
    updated_at                          DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE,
    CHECK (lifecycle_state IN ({ENVIRONMENT_STATES})),
    CHECK (environment_revision >= 1),
    CHECK (workspace_mode = 'direct'),
    CHECK (length(environment_validation_fingerprint) = 64 AND environment_validation_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK ((template_identity IS NULL) <> (template_digest IS NULL)),
    CHECK (template_identity IS NULL OR length(CAST(template_identity AS BLOB)) BETWEEN 1 AND 500),
    CHECK (template_digest IS NULL OR length(CAST(template_digest AS BLOB)) BETWEEN 1 AND 500),
    CHECK (failure_message IS NULL OR length(failure_message) <= 4000),
    CHECK (failure_details_json IS NULL OR length(CAST(failure_details_json AS BLOB)) <= 16384),
    CHECK ((cleanup_claim_id IS NULL) = (cleanup_claimed_at IS NULL)),
    CHECK (cleanup_attempts >= 0)
  );

  CREATE TABLE IF NOT EXISTS execution_environment_events (
    id                   TEXT PRIMARY KEY,
    project_id           TEXT NOT NULL,
    environment_id       TEXT NOT NULL,
    sequence             INTEGER NOT NULL,
    event_type           TEXT NOT NULL,
    from_state           TEXT,
    to_state             TEXT,
    actor_classification TEXT NOT NULL DEFAULT 'system',
    actor_reference      TEXT,
    reason               TEXT,
    metadata_json        TEXT,
    created_at           DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    UNIQUE (environment_id, sequence),
    FOREIGN KEY (environment_id) REFERENCES execution_environments(id) ON DELETE CASCADE,
    CHECK (sequence >= 1),
    CHECK (length(event_type) BETWEEN 1 AND 100),
    CHECK (actor_reference IS NULL OR length(CAST(actor_reference AS BLOB)) BETWEEN 1 AND 200),
    CHECK (reason IS NULL OR length(CAST(reason AS BLOB)) <= 2000)
  );

  CREATE TABLE IF NOT EXISTS execution_environment_run_bindings (
    id                                  TEXT PRIMARY KEY,
    environment_id                      TEXT NOT NULL,
    execution_run_id                    TEXT NOT NULL,
    project_id                          TEXT NOT NULL,
    relationship                        TEXT NOT NULL,
    environment_revision                INTEGER NOT NULL,
    environment_validation_fingerprint  TEXT NOT NULL,
    authority_json                      TEXT,
    placement_json                      TEXT,
    bound_at                            DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    released_at                         DATETIME,
    FOREIGN KEY (environment_id) REFERENCES execution_environments(id) ON DELETE CASCADE,
    FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id) ON DELETE CASCADE,
    CHECK (relationship IN ('validation', 'execution')),
    CHECK (environment_revision >= 1),
    CHECK (length(environment_validation_fingerprint) = 64 AND environment_validation_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (relationship <> 'execution' OR length(CAST(authority_json AS BLOB)) BETWEEN 2 AND 16384),
    CHECK (placement_json IS NULL OR (relationship = 'execution' AND length(CAST(placement_json AS BLOB)) BETWEEN 2 AND 16384))
  );

  CREATE TABLE IF NOT EXISTS repository_graph_scans (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL,
    execution_run_id TEXT,
    created_at       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS check_batch_details (
    execution_run_id                   TEXT PRIMARY KEY,
    target_kind                        TEXT NOT NULL DEFAULT 'repo_root',
    target_bundle_id                   TEXT,
    target_label                       TEXT,
    rerun_of_batch_run_id              TEXT,
    automation_boundary_purpose        TEXT,
    purpose                            TEXT NOT NULL DEFAULT 'manual',
    causal_source_run_id               TEXT,
    completed_at                       DATETIME,
    FOREIGN KEY (execution_run_id) REFERENCES execution_runs(id) ON DELETE CASCADE,
    FOREIGN KEY (rerun_of_batch_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT,
    FOREIGN KEY (causal_source_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT
  );

  CREATE TABLE IF NOT EXISTS check_attempt_details (
    execution_run_id                TEXT PRIMARY KEY,
    batch_run_id                    TEXT NOT NULL,
    definition_id                  TEXT NOT NULL,
    command_snapshot_json          TEXT NOT NULL,
    definition_fingerprint         TEXT NOT NULL,
    initial_workspace_identity_json TEXT,
    final_workspace_identity_json  TEXT,
    outcome                        TEXT,
    rerun_of_attempt_run_id        TEXT,
    exit_code                      INTEGER,
    exit_signal                    TEXT,
    exit_error                     TEXT,
    output_revision                 INTEGER NOT NULL DEFAULT 0,
    retained_start_offset           INTEGER NOT NULL DEFAULT 0,
    retained_end_offset             INTEGER NOT NULL DEFAULT 0,
    total_persisted_bytes           INTEGER NOT NULL DEFAULT 0,
    retained_output                 TEXT NOT NULL DEFAULT '',
    output_retention_state          TEXT NOT NULL DEFAULT 'retained',
    FOREIGN KEY (execution_run_id) REFERENCES execution_runs(id) ON DELETE CASCADE,
    FOREIGN KEY (batch_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT,
    FOREIGN KEY (rerun_of_attempt_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT,
    CHECK (length(definition_fingerprint) = 64 AND definition_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (outcome IS NULL OR outcome IN ('passed', 'command_failure', 'spawn_failure',
      'infrastructure_failure', 'evidence_persistence_failure', 'timeout',
      'workspace_changed_before_start', 'user_stop', 'restart_loss', 'shutdown_loss')),
    CHECK (output_revision >= 0 AND retained_start_offset >= 0 AND retained_end_offset >= retained_start_offset
      AND total_persisted_bytes >= retained_end_offset),
    CHECK (output_retention_state IN ('retained', 'expired'))
  );

  CREATE TABLE IF NOT EXISTS check_attempt_diagnostic_parsers (
    attempt_run_id   TEXT PRIMARY KEY,
    parser_id        TEXT NOT NULL,
    created_at       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (attempt_run_id) REFERENCES check_attempt_details(execution_run_id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS project_links (
    project_id        TEXT NOT NULL,
    linked_project_id TEXT NOT NULL,
    PRIMARY KEY (project_id, linked_project_id),
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE,
    FOREIGN KEY (linked_project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS integration_connections (
    id         TEXT PRIMARY KEY,
    provider   TEXT NOT NULL,
    project_id TEXT NOT NULL,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS bundle_automation_state (
    project_id         TEXT NOT NULL,
    worktree_bundle_id TEXT NOT NULL,
    state_json         TEXT,
    PRIMARY KEY (project_id, worktree_bundle_id),
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TRIGGER IF NOT EXISTS validate_project_build_execution_provider_insert
  BEFORE INSERT ON projects
  WHEN NEW.build_execution_provider NOT IN ('host', 'docker_sandbox')
  BEGIN
    SELECT RAISE(ABORT, 'Invalid build execution provider');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_execution_environment_identity
  BEFORE UPDATE OF id, project_id, provider_kind, provider_version, target_kind, target_key,
    target_workspace_path, environment_revision, workspace_mode,
    environment_validation_fingerprint, template_identity, template_digest,
    agent_identity, compatible_agents_json, created_at ON execution_environments
  WHEN NEW.id <> OLD.id OR NEW.project_id <> OLD.project_id OR NEW.provider_kind <> OLD.provider_kind
    OR NEW.provider_version <> OLD.provider_version OR NEW.target_kind <> OLD.target_kind
    OR NEW.target_key <> OLD.target_key OR NEW.target_workspace_path <> OLD.target_workspace_path
    OR NEW.environment_revision <> OLD.environment_revision OR NEW.workspace_mode <> OLD.workspace_mode
    OR NEW.environment_validation_fingerprint <> OLD.environment_validation_fingerprint
    OR NEW.template_identity IS NOT OLD.template_identity OR NEW.template_digest IS NOT OLD.template_digest
    OR NEW.agent_identity IS NOT OLD.agent_identity OR NEW.compatible_agents_json <> OLD.compatible_agents_json
    OR NEW.created_at <> OLD.created_at
  BEGIN SELECT RAISE(ABORT, 'Execution environment identity is immutable'); END;

  CREATE TRIGGER IF NOT EXISTS validate_execution_environment_binding_identity
  BEFORE INSERT ON execution_environment_run_bindings
  WHEN NOT EXISTS (
    SELECT 1 FROM execution_environments WHERE id = NEW.environment_id AND project_id = NEW.project_id
      AND environment_revision = NEW.environment_revision
      AND environment_validation_fingerprint = NEW.environment_validation_fingerprint
  )
  BEGIN SELECT RAISE(ABORT, 'Execution environment binding identity does not match'); END;

  CREATE TRIGGER IF NOT EXISTS preserve_execution_environment_binding_identity
  BEFORE UPDATE OF environment_id, execution_run_id, project_id, relationship,
    environment_revision, environment_validation_fingerprint, bound_at
    ON execution_environment_run_bindings
  WHEN NEW.environment_id <> OLD.environment_id OR NEW.execution_run_id <> OLD.execution_run_id
    OR NEW.project_id <> OLD.project_id OR NEW.relationship <> OLD.relationship
    OR NEW.environment_revision <> OLD.environment_revision
    OR NEW.environment_validation_fingerprint <> OLD.environment_validation_fingerprint
    OR NEW.bound_at <> OLD.bound_at
  BEGIN SELECT RAISE(ABORT, 'Execution environment run binding identity is immutable'); END;

  CREATE TRIGGER IF NOT EXISTS preserve_execution_environment_binding_evidence
  BEFORE UPDATE OF authority_json, placement_json ON execution_environment_run_bindings
  WHEN NEW.authority_json IS NOT OLD.authority_json
    OR (OLD.placement_json IS NOT NULL AND NEW.placement_json IS NOT OLD.placement_json)
  BEGIN
    SELECT RAISE(ABORT, 'Execution environment binding evidence is immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_check_batch_snapshots
  BEFORE UPDATE OF execution_run_id, target_kind, target_bundle_id, target_label,
    rerun_of_batch_run_id, purpose ON check_batch_details
  WHEN NEW.execution_run_id IS NOT OLD.execution_run_id OR NEW.target_kind IS NOT OLD.target_kind
    OR NEW.target_bundle_id IS NOT OLD.target_bundle_id OR NEW.target_label IS NOT OLD.target_label
    OR NEW.rerun_of_batch_run_id IS NOT OLD.rerun_of_batch_run_id OR NEW.purpose IS NOT OLD.purpose
  BEGIN
    SELECT RAISE(ABORT, 'Check batch snapshots are immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_completed_check_batch_details
  BEFORE UPDATE ON check_batch_details
  WHEN OLD.completed_at IS NOT NULL
  BEGIN
    SELECT RAISE(ABORT, 'Completed check batch details are immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_check_attempt_snapshots
  BEFORE UPDATE OF execution_run_id, batch_run_id, definition_id, command_snapshot_json,
    definition_fingerprint, initial_workspace_identity_json, rerun_of_attempt_run_id
    ON check_attempt_details
  WHEN NEW.execution_run_id IS NOT OLD.execution_run_id OR NEW.batch_run_id IS NOT OLD.batch_run_id
    OR NEW.definition_id IS NOT OLD.definition_id OR NEW.command_snapshot_json IS NOT OLD.command_snapshot_json
    OR NEW.definition_fingerprint IS NOT OLD.definition_fingerprint
    OR NEW.initial_workspace_identity_json IS NOT OLD.initial_workspace_identity_json
    OR NEW.rerun_of_attempt_run_id IS NOT OLD.rerun_of_attempt_run_id
  BEGIN
    SELECT RAISE(ABORT, 'Check attempt snapshots are immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_completed_check_attempt_details
  BEFORE UPDATE ON check_attempt_details
  WHEN OLD.outcome IS NOT NULL AND (NEW.outcome IS NOT OLD.outcome OR NEW.exit_code IS NOT OLD.exit_code)
  BEGIN
    SELECT RAISE(ABORT, 'Completed check attempt details are immutable');
  END;

  CREATE INDEX IF NOT EXISTS idx_project_links_linked_project_id ON project_links(linked_project_id);
"""

# Indexes whose full text archon's diffs show (1.8.20 context lines, or 1.8.23 ones for the two
# binding indexes): created IF NOT EXISTS on any database, when their table is there.
SHOWN = """
  CREATE INDEX IF NOT EXISTS idx_execution_environments_reuse ON execution_environments(project_id, provider_kind, target_key, target_workspace_path, environment_revision, workspace_mode, environment_validation_fingerprint, lifecycle_state);
  CREATE UNIQUE INDEX IF NOT EXISTS idx_execution_environments_external_id ON execution_environments(provider_kind, external_id) WHERE external_id IS NOT NULL;
  CREATE INDEX IF NOT EXISTS idx_execution_environments_cleanup ON execution_environments(lifecycle_state, cleanup_claim_id, updated_at, cleanup_attempts);
  CREATE INDEX IF NOT EXISTS idx_execution_environment_events_sequence ON execution_environment_events(project_id, environment_id, sequence);
  CREATE INDEX IF NOT EXISTS idx_execution_environment_bindings_run ON execution_environment_run_bindings(project_id, execution_run_id, bound_at);
  CREATE UNIQUE INDEX IF NOT EXISTS idx_execution_environment_active_execution_lease ON execution_environment_run_bindings(environment_id) WHERE relationship = 'execution' AND released_at IS NULL;
  CREATE INDEX IF NOT EXISTS idx_build_sequences_project_status ON build_sequences(project_id, status);
  CREATE INDEX IF NOT EXISTS idx_build_sequences_bundle_status ON build_sequences(worktree_bundle_id, status);
  CREATE INDEX IF NOT EXISTS idx_build_sequence_tickets_sequence_position ON build_sequence_tickets(build_sequence_id, position);
  CREATE UNIQUE INDEX IF NOT EXISTS idx_integration_connections_provider_project ON integration_connections(provider, project_id);
  CREATE INDEX IF NOT EXISTS idx_tickets_external_key ON tickets(external_provider, external_key);
  CREATE INDEX IF NOT EXISTS idx_bundle_automation_state_project_bundle ON bundle_automation_state(project_id, worktree_bundle_id);
"""


def building_from_nothing(conn) -> bool:
    """No archon table yet: the console itself is creating the database (demo, tests, reference)."""
    return not table_exists(conn, "projects")


def up(conn):
    if building_from_nothing(conn):
        execute_script(conn, RECONSTRUCTED)
    for name, sql in statements_by_name(SHOWN).items():
        table = sql.split(" ON ", 1)[1].split("(", 1)[0].strip()
        if table_exists(conn, table) and not object_exists(conn, "index", name):
            conn.execute(sql)


def reconstructed_objects() -> frozenset[tuple[str, str]]:
    """(type, name) of every object only the console's reconstruction holds (doctor reports them
    missing as what they are, not as something an upgrade would create)."""
    return frozenset(
        (sql.replace("CREATE UNIQUE ", "CREATE ", 1).split()[1].lower(), name)
        for name, sql in statements_by_name(RECONSTRUCTED).items()
    )


def estimate(conn):
    return 0
