"""Doctor on databases archon itself made or upgraded (the reference): no false alarms."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from console.services.doctor import run_doctor
from tests.reference import builder



BINDING = "preserve_execution_environment_binding_evidence"
INDEX = "idx_execution_profile_revisions_project"


def errors(path) -> list[str]:
    report = run_doctor(path, now=datetime.now(timezone.utc))
    return [f"{f.id}: {f.found}" for f in report.findings if f.severity == "error"]


def test_archon_upgraded_1_10_0_missing_revisions_index_is_not_an_error(tmp_path):
    path = builder.upgraded(tmp_path / "archon.db", "1.10.0")
    found = [e for e in errors(path) if INDEX in e]
    assert not found, found


@pytest.mark.parametrize("release", builder.RELEASES)
@pytest.mark.parametrize("kind", ["fresh", "upgraded"])
def test_no_invented_trigger_expected_on_archons_own_database(tmp_path, release, kind):
    path = builder.variant(tmp_path / "archon.db", release, kind)
    found = [e for e in errors(path) if BINDING in e]
    assert not found, found


@pytest.mark.parametrize("release", builder.RELEASES)
def test_no_other_error_on_archons_own_database(tmp_path, release):
    """Apart from the rule 6 and rule 9 objects above, doctor finds nothing wrong on archon's databases."""
    for kind in ("fresh", "upgraded"):
        path = builder.variant(tmp_path / f"{kind}.db", release, kind)
        found = [e for e in errors(path) if BINDING not in e and INDEX not in e]
        assert not found, (kind, found)
