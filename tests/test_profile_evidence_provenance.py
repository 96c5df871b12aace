"""Issue 18, finding 5: the evidence gate never vouches for the console's own rows, and evidence
proves only the schema version it is at.

The console's profile steps write archon's fixed revision ids and install
`create_project_execution_profile` with the console's defaults (which archon keeps: CREATE TRIGGER
IF NOT EXISTS). Once the upgrade ledger records such a step, those rows and the trigger are set
aside (console/db/profile_evidence.py), so a file that had no evidence before the console wrote to it
still has none after.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.db import profile_evidence
from console.db.migrations.profile_triggers import create_project_profile_trigger
from console.demo.writer import generate
from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.untouched import fingerprint_dir
from tests.upgrade_helpers import db_1820, db_1822, run_cli

NOW = "2026-03-01T12:00:00+00:00"


def _evidence(path) -> profile_evidence.ProfileEvidence:
    conn = sqlite3.connect(path)
    try:
        return profile_evidence.verify(conn)
    finally:
        conn.close()


@pytest.mark.slow
def test_a_forced_upgrade_does_not_make_its_own_evidence(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db", projects=3)
    assert plan_upgrade(path, target="1.8.22").profile_evidence.status == "no-evidence"
    run_upgrade(path, target="1.8.22", force=True)

    evidence = _evidence(path)
    assert evidence.status == profile_evidence.NONE and evidence.revisions == 0
    assert evidence.trigger_schema_version is None  # the console created it: not archon's defaults
    assert evidence.console_rows >= 3 + 1 and "007-profile-guard-triggers" in evidence.console_steps

    plan = plan_upgrade(path)
    gate = plan.profile_evidence
    assert gate.status == "no-evidence" and gate.force_reason in plan.force_reasons and plan.force_required
    assert main(["--db", str(path), "upgrade", "--plan"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "verified on" not in out and "--force is not required" not in out
    assert "--force is required" in out and "archon wrote" in out and "are not evidence" in out
    assert main(["--db", str(path), "--json", "upgrade", "--plan"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)["profile_evidence"]
    assert data["status"] == "no-evidence" and data["evidence"]["console_rows"] == evidence.console_rows
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade"]) == EXIT_REFUSED
    assert "needs --force" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.slow
def test_a_console_created_trigger_is_set_aside_whatever_it_embeds(tmp_path):
    """The ledger names step 007; the trigger then proves nothing and contradicts nothing."""
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER create_project_execution_profile")
    conn.execute(create_project_profile_trigger(2).replace('"check"', '"review"'))
    conn.close()
    evidence = _evidence(path)
    assert evidence.status == profile_evidence.NONE and not evidence.proves(2)


@pytest.mark.slow
def test_archons_own_revisions_beside_the_consoles_still_count(tmp_path):
    """A revision archon wrote under an id the console never writes (`...:2`) stays evidence, for its
    schema version only."""
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    conn = sqlite3.connect(path, isolation_level=None)
    project, provider = conn.execute("SELECT id, build_execution_provider FROM projects ORDER BY id").fetchone()
    from console.db import execution_profiles as profiles

    profile = {"eligible_workloads": ["build"], "provider_preference": provider}
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES (?, ?, 7, 2, ?, ?)",
                 (f"{project}:execution-profile:7", project, profiles.fingerprint(profile), profiles.serialize(profile)))
    conn.close()
    evidence = _evidence(path)
    assert evidence.status == profile_evidence.VERIFIED and evidence.revisions == 1
    assert evidence.proves(2) and not evidence.proves(3)
    gate = plan_upgrade(path).profile_evidence
    assert gate.status == "no-evidence" and "unverified at schema 3" in gate.force_reason


def test_schema_3_evidence_archon_wrote_unlocks_the_schema_3_steps(tmp_path):
    """The other side: archon 1.10.0's own rows prove what steps 021/022 write at schema 3."""
    path = tmp_path / "archon.db"
    generate(path, release="current", requests=5, projects=3, environments=2, wal=False, now=NOW)
    conn = sqlite3.connect(path, isolation_level=None)
    project, provider = conn.execute("SELECT id, build_execution_provider FROM projects ORDER BY id").fetchone()
    from console.db import execution_profiles as profiles

    profile = profiles.create(provider, 2)  # archon 1.8.22's default, left active by a rollback
    rev = f"{project}:execution-profile:9"
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES (?, ?, 9, 2, ?, ?)",
                 (rev, project, profiles.fingerprint(profile), profiles.serialize(profile)))
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = ? WHERE id = ?", (rev, project))
    conn.close()
    gate = plan_upgrade(path).profile_evidence
    assert "021-profile-backfill-current-schema" in gate.steps
    assert gate.status == "verified" and gate.force_reason is None and gate.refusal is None


def test_the_consoles_profile_steps_are_found_by_their_imports():
    assert profile_evidence.CONSOLE_PROFILE_STEPS == {
        "004-profile-revisions-rebuild-v2", "005-profile-backfill-initial", "006-profile-backfill-schema-v2",
        "007-profile-guard-triggers", "020-profile-revisions-rebuild-v3", "021-profile-backfill-current-schema",
        "022-profile-workload-eligibility",
    }


# --- attack round on issue 18, finding 9: set aside as proof, never as a contradiction ------------
# On main every revision under a fixed-id shape was skipped on a console-upgraded file, its
# contradictions too: a row whose fingerprint does not recompute was ignored as
# `proj-1:execution-profile:v2` (evidence "verified", activation allowed, exit 0) but refused the
# activation as `...:settings-9` (exit 3). The console writes every row as `serialize(p)` beside
# `fingerprint(p)`, so such a row cannot be the console's: it counts as a contradiction whatever its id.
BAD_JSON = '{"eligible_workloads":["build","check"],"provider_preference":"host","retry":1}'


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory) -> Path:
    """An archon 1.8.22 file the console upgraded to 1.10.0 (its ledger names the profile steps)."""
    path = db_1822(tmp_path_factory.mktemp("provenance") / "archon.db", legacy_profile=False)
    run_upgrade(path, force=True)
    return path


def _settings_revision(conn) -> str:
    """A valid schema-3 revision archon made in its settings (a free id, consistent with the console)."""
    from console.db import execution_profiles as profiles

    profile = profiles.normalize({"check_template_policy": {"agent": None, "mode": "project_commands"},
                                  "eligible_workloads": ["build", "check", "chat_build"],
                                  "provider_preference": "docker_sandbox"}, 3).profile
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, profile_json, "
                 "fingerprint, created_at) VALUES ('proj-2:execution-profile:settings-7', 'proj-2', 40, 3, ?, ?, "
                 "'2026-05-01 12:40:00')", (profiles.serialize(profile), profiles.fingerprint(profile)))
    return "proj-2:execution-profile:settings-7"


@pytest.mark.slow
@pytest.mark.parametrize("bad_id", ["proj-1:execution-profile:v2", "proj-1:execution-profile:settings-9"])
def test_a_row_the_console_cannot_have_written_contradicts_whatever_its_id(upgraded, tmp_path, bad_id):
    path = tmp_path / "archon.db"
    shutil.copyfile(upgraded, path)
    conn = sqlite3.connect(path, isolation_level=None)
    target = _settings_revision(conn)
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, profile_json, "
                 "fingerprint, created_at) VALUES (?, 'proj-1', 41, 2, ?, ?, '2026-05-01 12:40:00')",
                 (bad_id, BAD_JSON, "0" * 64))
    conn.close()
    evidence = _evidence(path)
    assert evidence.console_steps and evidence.status == profile_evidence.CONTRADICTED
    assert evidence.contradicted_rows == [bad_id]
    before = fingerprint_dir(tmp_path)
    done = run_cli("--db", str(path), "profiles", "activate", target, "--reason", "rollback", "--as", "alice")
    assert done.returncode == EXIT_UNUSABLE, done.stderr
    assert "so the console cannot promise what that start does with it" in done.stderr and bad_id in done.stderr
    assert fingerprint_dir(tmp_path) == before


SUFFIXES = st.one_of(st.just("1"), st.integers(0, 99).map(lambda n: f"v{n}"),
                     st.tuples(st.sampled_from(["chat-build", "chat-build-check", "configured-check", "x"]),
                               st.integers(0, 9)).map(lambda t: f"{t[0]}-v{t[1]}"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(suffix=SUFFIXES, damage=st.sampled_from(["fingerprint", "spacing", "key order", "trailing space"]),
       project=st.sampled_from(["proj-1", "proj-2"]))
def test_set_aside_rows_still_contradict_when_the_console_cannot_have_written_them(upgraded, suffix, damage,
                                                                                   project):
    from console.db import execution_profiles as profiles

    profile = profiles.create("host", 3)
    text, fp = profiles.serialize(profile), profiles.fingerprint(profile)
    if damage == "fingerprint":
        fp = ("1" if fp[0] != "1" else "2") + fp[1:]
    elif damage == "spacing":
        text = json.dumps(json.loads(text), indent=1)
    elif damage == "key order":
        text = json.dumps(dict(reversed(list(json.loads(text).items()))), separators=(",", ":"))
    else:
        text = text + " "
    conn = sqlite3.connect(upgraded, isolation_level=None)
    try:
        conn.execute("BEGIN")
        rev_id = f"{project}:execution-profile:{suffix}"
        exists = conn.execute("SELECT 1 FROM execution_profile_revisions WHERE id = ?", (rev_id,)).fetchone()
        if not exists:
            conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, "
                         "profile_json, fingerprint) VALUES (?, ?, 90, 3, ?, ?)", (rev_id, project, text, fp))
        evidence = profile_evidence.verify(conn)
        if not exists:
            assert rev_id in evidence.contradicted_rows, (rev_id, damage)
        else:  # the console's own row under that id: never a contradiction
            assert rev_id not in evidence.contradicted_rows
    finally:
        conn.execute("ROLLBACK")
        conn.close()
