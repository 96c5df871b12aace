"""Issue 18, finding 6: the rollback guard does not promise what archon's next start does when the
database contradicts the console's reconstruction of archon's profile algorithms.

Where the upgrade's evidence gate would refuse to write profile data (console/db/profile_evidence.py),
activating a revision archon's next start re-reads is refused with one sentence (exit 3), the same
sentence `profiles list` gives as the revision's `activation_refused` (what the TUI greys `A` with).
"""

from __future__ import annotations

import json
import sqlite3
from functools import partial

import pytest

from console.cli.cli import main
from console.db import profile_evidence
from console.db.migrations.profile_triggers import create_project_profile_trigger
from console.errors import EXIT_UNUSABLE, DatabaseUnusable
from console.services import profiles
from tests.conftest import pin_real_clock
from tests.environments_support import T0, add_project, dump, handle, raw
from tests.profiles_support import DOCKER_V2, FULL
from tests.profiles_support import add_revision as add_dated_revision

add_revision = partial(add_dated_revision, dated=False)  # created_at from the database, as archon leaves it

SENTENCE = "so the console cannot promise what that start does with it"


def carry_unknown_key(path):
    """Archon stored a check policy with a key the console's normaliser drops."""
    conn = raw(path)
    add_revision(conn, "p1", 5, {**FULL, "check_template_policy": {**FULL["check_template_policy"], "timeout": 5}})
    conn.close()


def other_trigger_default(path):
    """Archon's trigger embeds a schema-3 default that is not the console's."""
    conn = raw(path)
    conn.execute("DROP TRIGGER create_project_execution_profile")
    conn.execute(create_project_profile_trigger(3).replace('"agent":"opencode"', '"agent":"claude"'))
    conn.close()


@pytest.fixture
def db(make_db):
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_revision(conn, "p1", 4, FULL)  # the console predicts archon 1.10.0 keeps it
    conn.close()
    return path


def test_consistent_database_allows_the_rollback(db):
    with handle(db) as h:
        assert profiles.activate(h, "p1:execution-profile:r4", "alice", reason="r", now=T0).ok


@pytest.mark.parametrize("contradict", [carry_unknown_key, other_trigger_default])
def test_contradicted_database_refuses_with_the_sentence(db, contradict):
    contradict(db)
    with handle(db) as h:
        [row] = [r for r in profiles.list_revisions(h, "p1") if r.id == "p1:execution-profile:r4"]
    assert SENTENCE in row.activation_refused
    assert profiles.activation_problem(row, None) == row.activation_refused
    before = dump(db)
    with handle(db) as h, pytest.raises(DatabaseUnusable) as info:
        profiles.activate(h, "p1:execution-profile:r4", "alice", reason="r", now=T0)
    assert info.value.exit_code == EXIT_UNUSABLE == 3
    assert info.value.reason == f"p1:execution-profile:r4 cannot be activated: {row.activation_refused}. Nothing was written."
    assert dump(db) == before


def test_cli_exits_3_with_the_sentence_and_lists_it(db, capsys, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01T09:30:00Z")
    carry_unknown_key(db)
    before = dump(db)
    code = main(["--db", str(db), "profiles", "activate", "p1:execution-profile:r4", "--reason", "r", "--as", "alice"])
    err = capsys.readouterr().err
    assert code == 3 and SENTENCE in err and "p1:execution-profile:r5" in err
    assert dump(db) == before
    assert main(["--json", "profiles", "list", "p1", "--db", str(db)]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert SENTENCE in rows["p1:execution-profile:r4"]["activation_refused"]


def test_a_revision_archons_start_does_not_reread_stays_allowed(schema_db):
    """1.8.22 re-reads schema-1 revisions only; a schema-2 rollback is kept whatever the evidence says."""
    path = schema_db("1.8.22")
    conn = raw(path)
    add_project(conn, "p1")
    add_revision(conn, "p1", 2, DOCKER_V2, schema_version=2)
    add_revision(conn, "p1", 3, {**DOCKER_V2, "check_template_policy": {"mode": "agent_template"}}, schema_version=2)
    assert profile_evidence.verify(conn).status == profile_evidence.CONTRADICTED  # 2 drops that key
    conn.close()
    with handle(path) as h:
        rows = {r.id: r for r in profiles.list_revisions(h, "p1")}
        assert rows["p1:execution-profile:r2"].activation_refused is None
        assert profiles.activate(h, "p1:execution-profile:r2", "alice", reason="r", now=T0).ok
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT active_execution_profile_revision_id FROM projects").fetchone()[0] == \
        "p1:execution-profile:r2"
    conn.close()


# --- attack round on issue 18, finding 1: a database no release the console knows ----------------
# On main `replacement` and `unpredictable` returned None (allowed) when the file's release was
# unknown: after `DROP TABLE service_run_details` (partly 1.10.0), or on a file a newer archon left
# (profile schema 4 allowed), a schema-2 rollback went through although the console cannot say which
# start comes next or what it re-reads. Now every activation there is refused (exit 3) with the
# "cannot promise" sentence, which the listing (and so the TUI's `A`) carries too.
UNKNOWN = "so the console cannot promise what archon's next start does with it"


def partly_1_10_0(path):
    conn = raw(path)
    conn.execute("DROP TABLE service_run_details")
    conn.close()


def newer_archon(path):
    conn = raw(path)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = replace(sql, 'schema_version IN (1, 2, 3)', "
                 "'schema_version IN (1, 2, 3, 4)') WHERE name = 'execution_profile_revisions'")
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()


@pytest.mark.parametrize("unknown_shape", [partly_1_10_0, newer_archon])
@pytest.mark.parametrize("schema_version, profile", [(2, DOCKER_V2), (3, FULL)])
def test_no_activation_is_promised_on_a_release_the_console_does_not_know(schema_db, capsys, monkeypatch,
                                                                           unknown_shape, schema_version, profile):
    path = schema_db("1.10.0")
    conn = raw(path)
    add_project(conn, "p1")
    target = add_revision(conn, "p1", 4, profile, schema_version=schema_version)
    conn.close()
    unknown_shape(path)
    with handle(path) as h:
        assert h.shape.release is None
        [row] = [r for r in profiles.list_revisions(h, "p1") if r.id == target]
    assert UNKNOWN in row.activation_refused and profiles.activation_problem(row, None) == row.activation_refused
    before = dump(path)
    with handle(path) as h, pytest.raises(DatabaseUnusable) as info:
        profiles.activate(h, target, "alice", reason="r", now=T0)
    assert info.value.exit_code == 3
    assert info.value.reason == f"{target} cannot be activated: {row.activation_refused}. Nothing was written."
    pin_real_clock(monkeypatch, "2026-11-01T09:30:00Z")
    code = main(["--db", str(path), "profiles", "activate", target, "--reason", "r", "--as", "alice"])
    err = capsys.readouterr().err
    assert code == 3 and UNKNOWN in err and len(err.strip().splitlines()) <= 2
    assert dump(path) == before
