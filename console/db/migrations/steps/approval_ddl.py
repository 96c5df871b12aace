"""Archon 1.8.22's approval DDL, verbatim from the seed, shared by steps 013 and 014."""

REQUEST_COLUMNS = """        id                        TEXT PRIMARY KEY,
        project_id                TEXT NOT NULL,
        execution_run_id          TEXT NOT NULL,
        action_kind               TEXT NOT NULL,
        action_schema_version     INTEGER NOT NULL,
        action_json               TEXT NOT NULL,
        action_fingerprint        TEXT NOT NULL,
        authority_schema_version  INTEGER NOT NULL,
        authority_json            TEXT NOT NULL,
        status                    TEXT NOT NULL DEFAULT 'pending',
        expires_at                DATETIME NOT NULL,
        decision_at               DATETIME,
        consumed_at               DATETIME,
        created_at                DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
        updated_at                DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
        UNIQUE (id, project_id),
        UNIQUE (execution_run_id),
        FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE,
        FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id) ON DELETE CASCADE,
        CHECK (length(id) BETWEEN 1 AND 128),
        CHECK (action_kind IN ('git_push', 'custom_check')),
        CHECK (action_schema_version = 1),
        CHECK (length(CAST(action_json AS BLOB)) BETWEEN 2 AND {action_limit}),
        CHECK (length(action_fingerprint) = 64 AND action_fingerprint NOT GLOB '*[^0-9a-f]*'),
        CHECK (authority_schema_version = 1),
        CHECK (length(CAST(authority_json AS BLOB)) BETWEEN 2 AND 16384),
        CHECK (status IN ('pending', 'approved', 'denied', 'cancelled', 'expired', 'invalidated', 'consumed')),
        CHECK (status NOT IN ('approved', 'denied', 'consumed') OR decision_at IS NOT NULL),
        CHECK (status <> 'pending' OR decision_at IS NULL),
        CHECK ((status = 'consumed') = (consumed_at IS NOT NULL))"""

REQUEST_COLUMN_NAMES = [
    "id", "project_id", "execution_run_id", "action_kind", "action_schema_version", "action_json",
    "action_fingerprint", "authority_schema_version", "authority_json", "status", "expires_at",
    "decision_at", "consumed_at", "created_at", "updated_at",
]


def requests_table(name: str = "approval_requests", *, action_limit: int = 65536, if_not_exists: bool = True) -> str:
    guard = "IF NOT EXISTS " if if_not_exists else ""
    return f"CREATE TABLE {guard}{name} (\n{REQUEST_COLUMNS.format(action_limit=action_limit)}\n      );"


EVENTS_TABLE = """
  CREATE TABLE IF NOT EXISTS approval_request_events (
    id                    TEXT PRIMARY KEY,
    project_id            TEXT NOT NULL,
    approval_request_id   TEXT NOT NULL,
    sequence              INTEGER NOT NULL,
    event_type            TEXT NOT NULL,
    from_status           TEXT,
    to_status             TEXT NOT NULL,
    actor_classification  TEXT NOT NULL,
    actor_reference       TEXT,
    reason                TEXT,
    metadata_schema_version INTEGER NOT NULL DEFAULT 1,
    metadata_json         TEXT,
    created_at            DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    UNIQUE (approval_request_id, sequence),
    FOREIGN KEY (approval_request_id, project_id) REFERENCES approval_requests(id, project_id) ON DELETE CASCADE,
    CHECK (sequence >= 1),
    CHECK (length(event_type) BETWEEN 1 AND 100),
    CHECK (from_status IS NULL OR from_status IN ('pending', 'approved', 'denied', 'cancelled', 'expired', 'invalidated', 'consumed')),
    CHECK (to_status IN ('pending', 'approved', 'denied', 'cancelled', 'expired', 'invalidated', 'consumed')),
    CHECK (actor_classification IN ('human', 'system', 'action_executor')),
    CHECK (actor_reference IS NULL OR length(CAST(actor_reference AS BLOB)) BETWEEN 1 AND 200),
    CHECK (reason IS NULL OR length(CAST(reason AS BLOB)) <= 2000),
    CHECK (metadata_schema_version = 1),
    CHECK (metadata_json IS NULL OR length(CAST(metadata_json AS BLOB)) <= 4096)
  );
"""

REQUEST_TRIGGERS = """
  CREATE TRIGGER IF NOT EXISTS preserve_approval_request_identity
  BEFORE UPDATE OF id, project_id, execution_run_id, action_kind, action_schema_version,
    action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at
    ON approval_requests
  BEGIN
    SELECT RAISE(ABORT, 'Approval request identity and evidence are immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_approval_request_decision_evidence
  BEFORE UPDATE OF decision_at, consumed_at ON approval_requests
  WHEN (OLD.decision_at IS NOT NULL AND NEW.decision_at IS NOT OLD.decision_at)
    OR (OLD.consumed_at IS NOT NULL AND NEW.consumed_at IS NOT OLD.consumed_at)
  BEGIN
    SELECT RAISE(ABORT, 'Approval request decision evidence is immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS validate_approval_request_status_transition
  BEFORE UPDATE OF status ON approval_requests
  WHEN NOT (
    (OLD.status = 'pending' AND NEW.status IN ('approved', 'denied', 'cancelled', 'expired', 'invalidated'))
    OR (OLD.status = 'approved' AND NEW.status IN ('consumed', 'expired', 'invalidated'))
  )
  BEGIN
    SELECT RAISE(ABORT, 'Invalid approval request status transition');
  END;
"""

EVENT_TRIGGERS = """
  CREATE TRIGGER IF NOT EXISTS preserve_approval_request_events
  BEFORE UPDATE ON approval_request_events
  BEGIN
    SELECT RAISE(ABORT, 'Approval request events are append-only');
  END;

  CREATE TRIGGER IF NOT EXISTS prevent_approval_request_event_deletion
  BEFORE DELETE ON approval_request_events
  WHEN EXISTS (
    SELECT 1 FROM projects
    WHERE id = OLD.project_id AND deletion_started_at IS NULL
  )
  BEGIN
    SELECT RAISE(ABORT, 'Approval request events are append-only');
  END;
"""

REQUEST_INDEXES = """
  CREATE INDEX IF NOT EXISTS idx_approval_requests_project_created
    ON approval_requests(project_id, created_at DESC, id DESC);
  CREATE INDEX IF NOT EXISTS idx_approval_requests_project_status_expiry
    ON approval_requests(project_id, status, expires_at, id);
  CREATE INDEX IF NOT EXISTS idx_approval_requests_action_kind
    ON approval_requests(project_id, action_kind, created_at DESC, id DESC);
"""

EVENT_INDEXES = """
  CREATE INDEX IF NOT EXISTS idx_approval_request_events_sequence
    ON approval_request_events(project_id, approval_request_id, sequence ASC);
"""


# What `migrateApprovalRequestActionLimit` runs right after its rebuild, verbatim (plain CREATE,
# its own indentation): archon installs these whatever the old table carried, so a database whose
# older text differed ends with this text.
REBUILD_TRIGGERS_AND_INDEXES = """
    CREATE TRIGGER preserve_approval_request_identity
    BEFORE UPDATE OF id, project_id, execution_run_id, action_kind, action_schema_version,
      action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at
      ON approval_requests
    BEGIN
      SELECT RAISE(ABORT, 'Approval request identity and evidence are immutable');
    END;

    CREATE TRIGGER preserve_approval_request_decision_evidence
    BEFORE UPDATE OF decision_at, consumed_at ON approval_requests
    WHEN (OLD.decision_at IS NOT NULL AND NEW.decision_at IS NOT OLD.decision_at)
      OR (OLD.consumed_at IS NOT NULL AND NEW.consumed_at IS NOT OLD.consumed_at)
    BEGIN
      SELECT RAISE(ABORT, 'Approval request decision evidence is immutable');
    END;

    CREATE TRIGGER validate_approval_request_status_transition
    BEFORE UPDATE OF status ON approval_requests
    WHEN NOT (
      (OLD.status = 'pending' AND NEW.status IN ('approved', 'denied', 'cancelled', 'expired', 'invalidated'))
      OR (OLD.status = 'approved' AND NEW.status IN ('consumed', 'expired', 'invalidated'))
    )
    BEGIN
      SELECT RAISE(ABORT, 'Invalid approval request status transition');
    END;

    CREATE INDEX idx_approval_requests_project_created
      ON approval_requests(project_id, created_at DESC, id DESC);
    CREATE INDEX idx_approval_requests_project_status_expiry
      ON approval_requests(project_id, status, expires_at, id);
    CREATE INDEX idx_approval_requests_action_kind
      ON approval_requests(project_id, action_kind, created_at DESC, id DESC);
"""
