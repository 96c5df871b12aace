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
import sqlite3

from console.cli import main
from console.db import profile_evidence
from console.db.migrations.profile_triggers import create_project_profile_trigger
from console.demo import generate
from console.errors import EXIT_OK, EXIT_REFUSED
from console.services import upgrade as service
from tests.untouched import fingerprint_dir
from tests.upgrade_helpers import db_1820

NOW = "2026-03-01T12:00:00+00:00"


def _evidence(path) -> profile_evidence.ProfileEvidence:
    conn = sqlite3.connect(path)
    try:
        return profile_evidence.verify(conn)
    finally:
        conn.close()


def test_a_forced_upgrade_does_not_make_its_own_evidence(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db", projects=3)
    assert service.plan_upgrade(path, target="1.8.22").profile_evidence.status == "no-evidence"
    service.run_upgrade(path, target="1.8.22", force=True)

    evidence = _evidence(path)
    assert evidence.status == profile_evidence.NONE and evidence.revisions == 0
    assert evidence.trigger_schema_version is None  # the console created it: not archon's defaults
    assert evidence.console_rows >= 3 + 1 and "007-profile-guard-triggers" in evidence.console_steps

    plan = service.plan_upgrade(path)
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


def test_a_console_created_trigger_is_set_aside_whatever_it_embeds(tmp_path):
    """The ledger names step 007; the trigger then proves nothing and contradicts nothing."""
    path = db_1820(tmp_path / "archon.db")
    service.run_upgrade(path, target="1.8.22", force=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER create_project_execution_profile")
    conn.execute(create_project_profile_trigger(2).replace('"check"', '"review"'))
    conn.close()
    evidence = _evidence(path)
    assert evidence.status == profile_evidence.NONE and not evidence.proves(2)


def test_archons_own_revisions_beside_the_consoles_still_count(tmp_path):
    """A revision archon wrote under an id the console never writes (`...:2`) stays evidence, for its
    schema version only."""
    path = db_1820(tmp_path / "archon.db")
    service.run_upgrade(path, target="1.8.22", force=True)
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
    gate = service.plan_upgrade(path).profile_evidence
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
    gate = service.plan_upgrade(path).profile_evidence
    assert "021-profile-backfill-current-schema" in gate.steps
    assert gate.status == "verified" and gate.force_reason is None and gate.refusal is None


def test_the_consoles_profile_steps_are_found_by_their_imports():
    assert profile_evidence.CONSOLE_PROFILE_STEPS == {
        "004-profile-revisions-rebuild-v2", "005-profile-backfill-initial", "006-profile-backfill-schema-v2",
        "007-profile-guard-triggers", "020-profile-revisions-rebuild-v3", "021-profile-backfill-current-schema",
        "022-profile-workload-eligibility",
    }
