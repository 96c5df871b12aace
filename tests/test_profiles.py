"""Profile revisions on a 1.10.0 database with archon's projection and immutability triggers."""

from __future__ import annotations

import json

import pytest

from console.db import execution_profiles as ep
from console.errors import DatabaseUnusable, Refusal, UsageError
from console.services import identity, profiles
from tests.environments_support import T0, add_project, dump, handle, raw
from tests.profiles_support import DOCKER, add_revision


@pytest.fixture
def db(make_db):
    """Revisions the console's profile algorithms reproduce (archon stores canonical JSON)."""
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_project(conn, "gone", deleting=True)
    add_revision(conn, "p1", 2, DOCKER)
    add_revision(conn, "gone", 2, DOCKER)
    conn.close()
    return path


def add_broken(path):
    """A fingerprint that does not recompute and a provider the console does not know: the database
    then contradicts the console's reconstruction (console/db/profile_evidence.py)."""
    conn = raw(path)
    add_revision(conn, "p1", 3, {**DOCKER, "provider_preference": "host", "note": "x"}, fingerprint="f" * 64)
    add_revision(conn, "p1", 4, {"provider_preference": "cloud"})
    conn.close()
    return path


@pytest.fixture
def broken_db(db):
    return add_broken(db)


def project(path, project_id="p1"):
    conn = raw(path)
    try:
        return dict(conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone())
    finally:
        conn.close()


def audit(path, project_id="p1"):
    conn = raw(path)
    try:
        return [dict(r) for r in conn.execute(
            "SELECT * FROM execution_profile_audit_events WHERE project_id = ? ORDER BY created_at, id", (project_id,))]
    finally:
        conn.close()


def refused(path, match, *args, **kwargs):
    before = dump(path)
    with handle(path, read_only=kwargs.pop("read_only", False)) as h:
        with pytest.raises(Refusal) as info:
            profiles.activate(h, *args, now=T0, **kwargs)
    assert dump(path) == before
    assert match in info.value.reason, info.value.reason


@pytest.mark.slow
def test_list_marks_active_and_checks_fingerprints(broken_db):
    with handle(broken_db) as h:
        rows = profiles.list_revisions(h, "p1")
    assert [r.revision for r in rows] == [4, 3, 2, 1]
    by_rev = {r.revision: r for r in rows}
    assert by_rev[1].active and not by_rev[2].active
    assert by_rev[1].fingerprint_matches and by_rev[2].fingerprint_matches
    assert not by_rev[3].fingerprint_matches and by_rev[3].fingerprint_well_formed
    assert by_rev[1].created_event_at is not None and by_rev[1].activated_at == []
    assert by_rev[2].fingerprint_short == by_rev[2].fingerprint[:12]


@pytest.mark.slow
def test_show_pretty_json_and_a_mismatch_is_shown_not_fixed(broken_db):
    before = dump(broken_db)
    with handle(broken_db) as h:
        row = profiles.show_revision(h, "p1:execution-profile:r3")
    assert dump(broken_db) == before
    assert row.fingerprint_matches is False and row.fingerprint == "f" * 64
    assert row.computed_fingerprint != row.fingerprint
    assert row.pretty_json.startswith("{\n  \"check_template_policy\"")
    assert row.project_name == "P1" and row.active is False


def test_diff_is_a_unified_diff_of_sorted_json(db):
    with handle(db) as h:
        d = profiles.diff_revisions(h, "p1:execution-profile:1", "p1:execution-profile:r2")
        same = profiles.diff_revisions(h, "p1:execution-profile:r2", "p1:execution-profile:r2")
    assert d.text.startswith("--- p1:execution-profile:1 (revision 1)\n+++ p1:execution-profile:r2 (revision 2)\n")
    assert '-  "provider_preference": "host"\n' in d.text
    assert '+  "provider_preference": "docker_sandbox"\n' in d.text
    assert same.same


def test_activate_rolls_back_with_projection_and_audit_event(db):
    with handle(db) as h:
        result = profiles.activate(h, "p1:execution-profile:r2", "alice", reason="back to docker", now=T0)
    assert result.ok and not result.noop
    row = project(db)
    assert row["active_execution_profile_revision_id"] == "p1:execution-profile:r2"
    assert row["build_execution_provider"] == "docker_sandbox"
    [event] = [e for e in audit(db) if e["event_type"] == "revision_activated"]
    assert event["id"].startswith("p1:execution-profile:r2:activated:")
    assert event["profile_revision_id"] == "p1:execution-profile:r2"
    assert event["previous_profile_revision_id"] == "p1:execution-profile:1"
    assert event["created_at"] == "2026-11-01 09:30:00"
    assert json.loads(event["metadata_json"]) == {"actor": "alice", "reason": "back to docker", "source": "archon-console",
                                                  **identity.event_metadata("alice")}  # who acted (issue 17)
    # and back again to revision 1
    with handle(db) as h:
        profiles.activate(h, "p1:execution-profile:1", "bob", reason="undo", now=T0)
    assert project(db)["build_execution_provider"] == "host"
    with handle(db) as h:
        rows = {r.revision: r for r in profiles.list_revisions(h, "p1")}
    assert rows[1].active and rows[2].activated_at == ["2026-11-01 09:30:00"]


def test_activating_the_active_revision_is_a_noop(db):
    before = dump(db)
    with handle(db) as h:
        result = profiles.activate(h, "p1:execution-profile:1", "alice", reason="again", now=T0)
    assert result.ok and result.noop and "already the active profile" in result.message
    assert dump(db) == before


@pytest.mark.slow
def test_mismatched_fingerprint_is_refused_where_archons_start_rereads_it(broken_db):
    """Issue 18, finding 6: on 1.10.0 archon's start re-reads every active revision with algorithms
    this database contradicts, so no promise about that start can be made."""
    before = dump(broken_db)
    with handle(broken_db) as h, pytest.raises(DatabaseUnusable) as info:
        profiles.activate(h, "p1:execution-profile:r3", "alice", reason="r", now=T0)
    assert info.value.exit_code == 3 and "cannot promise what that start does" in info.value.reason
    assert dump(broken_db) == before


def test_mismatched_fingerprint_activates_with_a_warning_where_archon_leaves_it(schema_db):
    """1.8.22's start re-reads schema-1 revisions only: a schema-2 one is kept whatever it holds."""
    path = schema_db("1.8.22")
    conn = raw(path)
    add_project(conn, "p1")
    profile = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build"]}
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES ('p1:execution-profile:r3', 'p1', 3, 2, ?, ?)", ("f" * 64, ep.serialize(profile)))
    conn.close()
    with handle(path) as h:
        result = profiles.activate(h, "p1:execution-profile:r3", "alice", reason="r", now=T0)
    assert "does not match" in result.message
    assert project(path)["build_execution_provider"] == "docker_sandbox"


def test_refusals_write_nothing(broken_db):
    db = broken_db
    refused(db, "reason is required", "p1:execution-profile:r2", "alice", reason=" ")
    refused(db, "no execution profile revision", "nope", "alice", reason="r")
    refused(db, "being deleted", "gone:execution-profile:r2", "alice", reason="r")
    refused(db, "provider_preference 'cloud'", "p1:execution-profile:r4", "alice", reason="r")
    refused(db, "read-only", "p1:execution-profile:r2", "alice", reason="r", read_only=True)
    before = dump(db)  # an empty actor is a usage error before anything is read (identity.py)
    with handle(db) as h, pytest.raises(UsageError, match="is empty"):
        profiles.activate(h, "p1:execution-profile:r2", "", now=T0, reason="r")
    assert dump(db) == before


def test_revisions_stay_immutable_in_the_database(db):
    conn = raw(db)
    with pytest.raises(Exception, match="immutable"):
        conn.execute("UPDATE execution_profile_revisions SET revision = 9 WHERE id = 'p1:execution-profile:r2'")
    conn.close()


def test_pre_1_8_22_shape_says_upgrade_required(schema_db):
    path = schema_db("1.8.20")
    with handle(path) as h:
        with pytest.raises(Refusal, match="upgrade required"):
            profiles.list_revisions(h, "p1")
        with pytest.raises(Refusal, match="1.8.22"):
            profiles.activate(h, "x", "alice", reason="r", now=T0)


def test_works_on_a_1_8_22_shape(schema_db):
    path = schema_db("1.8.22")
    conn = raw(path)
    add_project(conn, "p1")
    conn.close()
    with handle(path) as h:
        rows = profiles.list_revisions(h, "p1")
    assert rows[0].active and rows[0].schema_version == 2
