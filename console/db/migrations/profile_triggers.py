"""The projects/profile guard triggers of 1.8.22, with the release's default profiles baked in.

Archon bakes the default profiles' JSON and fingerprints into `create_project_execution_profile`
when it creates the trigger, so the text depends on the release's profile schema version.
"""

from console.db import execution_profiles as profiles


def create_project_profile_trigger(schema_version: int, *, if_not_exists: bool = True) -> str:
    host = profiles.create("host", schema_version)
    docker = profiles.create("docker_sandbox", schema_version)
    host_json = profiles.serialize(host).replace("'", "''")
    docker_json = profiles.serialize(docker).replace("'", "''")
    guard = "IF NOT EXISTS " if if_not_exists else ""
    return f"""CREATE TRIGGER {guard}create_project_execution_profile
  AFTER INSERT ON projects
  WHEN NEW.active_execution_profile_revision_id = ''
  BEGIN
    INSERT INTO execution_profile_revisions (
      id, project_id, revision, schema_version, fingerprint, profile_json
    ) VALUES (
      NEW.id || ':execution-profile:1', NEW.id, 1, {schema_version},
      CASE WHEN NEW.build_execution_provider = 'docker_sandbox'
        THEN '{profiles.fingerprint(docker)}' ELSE '{profiles.fingerprint(host)}' END,
      CASE WHEN NEW.build_execution_provider = 'docker_sandbox'
        THEN '{docker_json}' ELSE '{host_json}' END
    );
    UPDATE projects
    SET active_execution_profile_revision_id = NEW.id || ':execution-profile:1'
    WHERE id = NEW.id;
    INSERT INTO execution_profile_audit_events (
      id, project_id, event_type, profile_revision_id, previous_profile_revision_id
    ) VALUES (
      NEW.id || ':execution-profile:1:created', NEW.id, 'revision_created',
      NEW.id || ':execution-profile:1', NULL
    );
  END;"""


GUARDS = """
  CREATE TRIGGER IF NOT EXISTS validate_project_execution_profile_owner_insert
  BEFORE INSERT ON projects
  WHEN NEW.active_execution_profile_revision_id <> '' AND NOT EXISTS (
    SELECT 1 FROM execution_profile_revisions
    WHERE project_id = NEW.id AND id = NEW.active_execution_profile_revision_id
  )
  BEGIN
    SELECT RAISE(ABORT, 'Active execution profile revision is not owned by project');
  END;

  CREATE TRIGGER IF NOT EXISTS validate_project_execution_profile_owner_update
  BEFORE UPDATE OF active_execution_profile_revision_id ON projects
  WHEN NEW.active_execution_profile_revision_id = '' OR NOT EXISTS (
    SELECT 1 FROM execution_profile_revisions
    WHERE project_id = NEW.id AND id = NEW.active_execution_profile_revision_id
  )
  BEGIN
    SELECT RAISE(ABORT, 'Active execution profile revision is not owned by project');
  END;

  CREATE TRIGGER IF NOT EXISTS validate_project_execution_profile_projection_insert
  BEFORE INSERT ON projects
  WHEN NEW.active_execution_profile_revision_id <> '' AND NOT EXISTS (
    SELECT 1 FROM execution_profile_revisions
    WHERE project_id = NEW.id
      AND id = NEW.active_execution_profile_revision_id
      AND json_extract(profile_json, '$.provider_preference') = NEW.build_execution_provider
  )
  BEGIN
    SELECT RAISE(ABORT, 'Build execution provider must project the active execution profile');
  END;

  CREATE TRIGGER IF NOT EXISTS validate_project_execution_profile_projection_update
  BEFORE UPDATE OF active_execution_profile_revision_id, build_execution_provider ON projects
  WHEN NOT EXISTS (
    SELECT 1 FROM execution_profile_revisions
    WHERE project_id = NEW.id
      AND id = NEW.active_execution_profile_revision_id
      AND json_extract(profile_json, '$.provider_preference') = NEW.build_execution_provider
  )
  BEGIN
    SELECT RAISE(ABORT, 'Build execution provider must project the active execution profile');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_execution_profile_revision
  BEFORE UPDATE ON execution_profile_revisions
  BEGIN
    SELECT RAISE(ABORT, 'Execution profile revisions are immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_execution_profile_audit_event
  BEFORE UPDATE ON execution_profile_audit_events
  BEGIN
    SELECT RAISE(ABORT, 'Execution profile audit events are immutable');
  END;
"""


def release_revision_triggers(schema_version: int) -> dict[str, str]:
    """The triggers mentioning execution_profile_revisions that archon creates at every start, by
    name, in the release's text (`schema_version` picks the defaults baked into
    create_project_execution_profile).

    Archon's revisions rebuild drops every trigger whose text names the table, and its start-up
    code then re-creates these (IF NOT EXISTS, after the drop, so always): a rebuild step puts
    them back in this text, not in whatever older text the database held.
    """
    from console.db.migrations.base import statements_by_name
    from console.db.migrations.steps import s010_build_sequence_profile_triggers as build_sequence

    found = statements_by_name(
        create_project_profile_trigger(schema_version) + "\n" + GUARDS + build_sequence.DDL
    )
    return {name: sql for name, sql in found.items() if "execution_profile_revisions" in sql}


def create_missing_revision_triggers(conn, schema_version: int) -> list[str]:
    """Archon's `CREATE TRIGGER IF NOT EXISTS` of the triggers naming execution_profile_revisions,
    which its start runs after its profile backfills; returns the names it created.

    1.10.0's rebuild (step 020) commits without them, as archon's rebuild does, and the step that
    ends the release's backfills (022) calls this: so between the two the file is what an archon
    stopped after its rebuild leaves (the triggers' absence is that state; a resumed run, like
    archon's next start, runs the backfills without them), and a file that kept them (one archon
    1.10.0 made, adopted) keeps them, in whatever text it has, while the backfills run.
    """
    created = []
    for name, sql in release_revision_triggers(schema_version).items():
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (name,)
        ).fetchone()
        if exists is None:
            conn.execute(sql)
            created.append(name)
    return created
