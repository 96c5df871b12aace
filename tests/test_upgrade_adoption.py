"""Adoption never installs invented objects (issue 8, rule 6).

Step 001 holds the console's reconstruction of archon 1.8.20 (tables and triggers whose body
archon's diffs never show in full). It builds them only when the console creates a database from
nothing; on a database it adopts, a missing reconstructed object stays missing and doctor reports
it, while a missing object whose text archon's diffs do show is created.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest

from console.db.migrations.steps import s001_baseline_1_8_20 as baseline
from console.services.doctor import run_doctor
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import connect, db_1820

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
INVENTED = "preserve_execution_environment_binding_evidence"


def _names(path, kind):
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))}
    finally:
        conn.close()


def test_the_baseline_classifies_every_object():
    reconstructed = baseline.reconstructed_objects()
    assert ("trigger", INVENTED) in reconstructed
    assert ("table", "projects") in reconstructed
    assert ("index", "idx_project_links_linked_project_id") in reconstructed  # shown only truncated
    assert not any(n == "idx_tickets_external_key" for _t, n in reconstructed)


def test_building_from_nothing_creates_the_reconstruction(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    assert INVENTED in _names(path, "trigger")


@pytest.mark.slow
def test_adoption_leaves_a_reconstructed_trigger_absent_and_doctor_reports_it(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    conn = connect(path)
    conn.execute(f"DROP TRIGGER {INVENTED}")  # archon's own rule has another name
    conn.execute("DROP INDEX idx_tickets_external_key")  # archon's text for this one is known
    conn.close()

    result = run_upgrade(path, force=True, now=NOW)

    assert result.release_after == "1.10.0"
    assert INVENTED not in _names(path, "trigger")
    assert "idx_tickets_external_key" in _names(path, "index")
    report = run_doctor(path, now=NOW)
    finding = report.finding("schema.reconstructed_missing")
    assert finding is not None and finding.severity == "warning"
    assert INVENTED in finding.found and "never creates them" in finding.why
    missing = report.finding("schema.missing_objects")
    assert missing is None or INVENTED not in missing.found
