"""Issue 8, rule 3: `profiles activate` refuses a revision archon's next start would silently replace,
and names the revision archon would pick. Checked against the console's re-implementation of
archon's start-up backfills (console/db/migrations/backfills.py), run on the database afterwards."""

from __future__ import annotations

import json
from functools import partial

import pytest

from console.cli.cli import main
from console.db.migrations import backfills
from console.errors import Refusal
from console.services import profiles
from tests.environments_support import T0, add_project, dump, handle, raw
from tests.profiles_support import DOCKER_REPAIRED, DOCKER_V2, FULL, NO_CHAT, POLICY_CMDS
from tests.profiles_support import add_revision as add_dated_revision

add_revision = partial(add_dated_revision, dated=False)  # created_at from the database, as archon leaves it


def archon_start(path, release="1.10.0"):
    """Archon's start-up profile backfills, as the upgrade re-implements them."""
    conn = raw(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        if release == "1.10.0":
            backfills.backfill_to_schema(conn, from_versions=(1, 2), to_version=3, event_suffix="schema-backfill")
            backfills.backfill_workload_eligibility(conn, 3)
        else:
            backfills.backfill_to_schema(conn, from_versions=(1,), to_version=2, event_suffix="v2-backfill")
        conn.execute("COMMIT")
        return conn.execute("SELECT active_execution_profile_revision_id FROM projects WHERE id = 'p1'").fetchone()[0]
    finally:
        conn.close()


def force_active(path, revision_id, provider):
    conn = raw(path)
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = ?, build_execution_provider = ? "
                 "WHERE id = 'p1'", (revision_id, provider))
    conn.close()


@pytest.fixture
def db(make_db):
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_revision(conn, "p1", 2, DOCKER_V2, schema_version=2)
    add_revision(conn, "p1", 3, NO_CHAT)
    add_revision(conn, "p1", 4, FULL)
    conn.close()
    return path


def refusal(path, revision_id):
    before = dump(path)
    with handle(path) as h:
        with pytest.raises(Refusal) as info:
            profiles.activate(h, revision_id, "alice", reason="rollback", now=T0)
    assert dump(path) == before
    return info.value


def test_lower_schema_revision_is_refused_and_archon_would_indeed_create_a_new_one(db):
    exc = refusal(db, "p1:execution-profile:r2")
    assert ("archon 1.10.0 would replace it at its next start with a new revision it would create "
            "(p1:execution-profile:chat-build-v3)") in exc.reason
    assert "schema_version 2 is below archon 1.10.0's 3" in exc.reason and "Nothing was written." in exc.reason
    # What the refusal prevents: forced active, archon's start moves away from it to that very id.
    force_active(db, "p1:execution-profile:r2", "docker_sandbox")
    assert archon_start(db) == "p1:execution-profile:chat-build-v3"


def test_lower_schema_revision_names_the_existing_replacement(db):
    conn = raw(db)
    target = add_revision(conn, "p1", 5, DOCKER_REPAIRED)
    conn.close()
    exc = refusal(db, "p1:execution-profile:r2")
    assert f"archon 1.10.0 would replace it at its next start with {target}; activate that one instead" in exc.reason
    with handle(db) as h:
        rows = {r.id: r for r in profiles.list_revisions(h, "p1")}
        assert rows["p1:execution-profile:r2"].archon_replaces_with == target
        assert rows[target].activation_refused is None
        assert profiles.activate(h, target, "alice", reason="the repaired one", now=T0).ok
    assert archon_start(db) == target  # archon leaves the console's choice alone
    force_active(db, "p1:execution-profile:r2", "docker_sandbox")
    assert archon_start(db) == target


def test_build_eligible_revision_lacking_chat_build_is_refused(db):
    exc = refusal(db, "p1:execution-profile:r3")
    assert "would replace it at its next start with a new revision it would create" in exc.reason
    assert "lacks chat_build eligibility" in exc.reason
    conn = raw(db)
    target = add_revision(conn, "p1", 5, {**NO_CHAT, "eligible_workloads": ["build", "check", "chat_build"]})
    conn.close()
    exc = refusal(db, "p1:execution-profile:r3")
    assert f"with {target}; activate that one instead" in exc.reason
    force_active(db, "p1:execution-profile:r3", "docker_sandbox")
    assert archon_start(db) == target


def test_configured_check_policy_needs_the_agent_template(db):
    conn = raw(db)
    conn.execute("UPDATE projects SET required_check_definition_ids = '[\"lint\"]' WHERE id = 'p1'")
    rev = add_revision(conn, "p1", 5, {**FULL, "check_template_policy": POLICY_CMDS})
    conn.close()
    exc = refusal(db, rev)
    assert "agent_template check policy" in exc.reason
    assert "with p1:execution-profile:r4; activate that one instead" in exc.reason  # FULL is the repair
    force_active(db, rev, "docker_sandbox")
    assert archon_start(db) == "p1:execution-profile:r4"


def test_an_allowed_rollback_survives_archons_start(db):
    with handle(db) as h:
        result = profiles.activate(h, "p1:execution-profile:r4", "alice", reason="docker again", now=T0)
    assert result.ok
    assert archon_start(db) == "p1:execution-profile:r4"


def test_1_8_22_refuses_schema_1_and_names_the_v2_revision(schema_db):
    path = schema_db("1.8.22")
    conn = raw(path)
    add_project(conn, "p1")
    old = add_revision(conn, "p1", 2, {"provider_preference": "docker_sandbox"}, schema_version=1)
    target = add_revision(conn, "p1", 3, DOCKER_V2, schema_version=2)
    no_chat = add_revision(conn, "p1", 4, {**DOCKER_V2, "eligible_workloads": ["build"]}, schema_version=2)
    conn.close()
    exc = refusal(path, old)
    assert f"archon 1.8.22 would replace it at its next start with {target}; activate that one instead" in exc.reason
    with handle(path) as h:  # 1.8.22 has no workload repair
        assert profiles.activate(h, no_chat, "alice", reason="r", now=T0).ok
    force_active(path, old, "docker_sandbox")
    assert archon_start(path, "1.8.22") == target


def test_cli_refusal_exits_1_with_the_sentence(db, capsys):
    code = main(["profiles", "activate", "p1:execution-profile:r3", "--reason", "r", "--db", str(db)])
    _, err = capsys.readouterr()
    assert code == 1 and "archon 1.10.0 would replace it at its next start" in err
    code = main(["--json", "profiles", "list", "p1", "--db", str(db)])
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 0 and rows["p1:execution-profile:r2"]["activation_refused"].startswith("archon 1.10.0 would")
