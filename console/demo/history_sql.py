"""The INSERT statements of the 1.8.20 run history (console/demo/history.py), one per table.

The history writer hands rows to these in `TABLES` order, parents before children, so every
foreign key is satisfied as the rows go in.
"""

from __future__ import annotations

SQL = {
    "execution_runs": "INSERT INTO execution_runs (id, project_id, kind, status, created_at,"
    " finished_at) VALUES (?, ?, ?, ?, ?, ?)",
    "execution_environments": "INSERT INTO execution_environments (id, project_id, provider_kind,"
    " provider_version, target_kind, target_key, target_workspace_path, environment_revision,"
    " workspace_mode, environment_validation_fingerprint, template_identity, template_digest,"
    " agent_identity, compatible_agents_json, external_id, lifecycle_state, last_used_at,"
    " stopped_at, retirement_started_at, cleanup_pending_at, retired_at, created_at,"
    " preparation_started_at, ready_at, updated_at)"
    " VALUES (?, ?, ?, ?, 'repo_root', 'repo_root', ?, ?, 'direct', ?, ?, ?, ?,"
    " '[\"opencode\",\"claude-code\"]', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "execution_environment_events": "INSERT INTO execution_environment_events (id, project_id,"
    " environment_id, sequence, event_type, from_state, to_state, actor_classification,"
    " actor_reference, reason, metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "execution_environment_run_bindings": "INSERT INTO execution_environment_run_bindings (id,"
    " environment_id, execution_run_id, project_id, relationship, environment_revision,"
    " environment_validation_fingerprint, authority_json, placement_json, bound_at, released_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "tickets": "INSERT INTO tickets (id, project_id, title, external_provider, external_key,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?)",
    "ticket_dependencies": "INSERT INTO ticket_dependencies (blocker_ticket_id, blocked_ticket_id)"
    " VALUES (?, ?)",
    "build_sequences": "INSERT INTO build_sequences (id, project_id, worktree_bundle_id, status,"
    " created_at, updated_at) VALUES (?, ?, NULL, ?, ?, ?)",
    "build_sequence_tickets": "INSERT INTO build_sequence_tickets (build_sequence_id, ticket_id,"
    " position, status, entered_queue_at, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "check_batch_details": "INSERT INTO check_batch_details (execution_run_id, target_kind,"
    " target_label, purpose, completed_at) VALUES (?, 'repo_root', ?, ?, ?)",
    "check_attempt_details": "INSERT INTO check_attempt_details (execution_run_id, batch_run_id,"
    " definition_id, command_snapshot_json, definition_fingerprint,"
    " initial_workspace_identity_json, final_workspace_identity_json, outcome,"
    " rerun_of_attempt_run_id, exit_code, exit_signal, exit_error, output_revision,"
    " retained_start_offset, retained_end_offset, total_persisted_bytes, retained_output,"
    " output_retention_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "check_attempt_diagnostic_parsers": "INSERT INTO check_attempt_diagnostic_parsers"
    " (attempt_run_id, parser_id, created_at) VALUES (?, ?, ?)",
}
TABLES = tuple(SQL)  # the insert order: parents before children
