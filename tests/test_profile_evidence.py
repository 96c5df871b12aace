"""Rule 1: profile writes are gated on the database's own evidence; rule 9: doctor after archon's upgrade.

Three kinds of database: one whose revisions and trigger agree with the console's profile
algorithms (the demo), one that contradicts them (a fingerprint that does not recompute, a
profile_json in another key order whose fingerprint still matches, a trigger with other embedded
defaults), and one with no evidence at all (1.8.20). A contradiction refuses the upgrade with exit 3
before anything is written, --force or not; no evidence is a risk --force accepts.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from console.cli.cli import main
from console.db import profile_evidence
from console.db.migrations.profile_triggers import create_project_profile_trigger
from console.demo.writer import generate
from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from console.services.profile_gate import ProfileEvidenceContradicted, UNVERIFIED_LINE
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from console.services.upgrade import run as upgrade_run
from console.services.doctor import run_doctor
from tests.untouched import fingerprint_dir
from tests.upgrade_helpers import db_1820

NOW = "2026-03-01T12:00:00+00:00"
UNVERIFIED = UNVERIFIED_LINE + "."


def said_whole(sentence: str, out: str) -> bool:
    """The sentence starts a line and is all there, wrapped at the terminal's width or not (the plan
    wraps what `--force` accepts rather than cut it: console/cli/output.py `wrapped`)."""
    lines = out.splitlines()
    return any(" ".join(sentence.split()) == " ".join(" ".join(lines[i:j]).split())
               for i in range(len(lines)) for j in range(i + 1, min(len(lines), i + 8) + 1))


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("demos")
    out = {}
    for release in ("1.8.20", "1.8.22", "current"):
        path = base / f"{release}.db"
        generate(path, release=release, requests=10, projects=3, environments=3, wal=False, now=NOW)
        out[release] = path
    return out


def _copy(demos, release: str, tmp_path: Path) -> Path:
    directory = tmp_path / "db"
    directory.mkdir(parents=True)
    path = directory / "archon.db"
    shutil.copyfile(demos[release], path)
    return path


def _edit(path: Path, *statements: tuple[str, tuple], revisions: bool = True) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    if revisions:  # revisions are immutable to UPDATE; lift that for the edit, then put it back
        conn.execute("DROP TRIGGER preserve_execution_profile_revision")
    for sql, params in statements:
        conn.execute(sql, params)
    if revisions:
        conn.execute("CREATE TRIGGER preserve_execution_profile_revision BEFORE UPDATE ON execution_profile_revisions "
                     "BEGIN SELECT RAISE(ABORT, 'Execution profile revisions are immutable'); END")
    conn.close()


def _revisions(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, profile_json FROM execution_profile_revisions ORDER BY id").fetchall()
    finally:
        conn.close()


def contradicting(demos, tmp_path: Path) -> tuple[Path, list[str]]:
    """The 1.8.22 demo with one fingerprint that does not recompute and one profile_json in another
    key order (its fingerprint, over the parsed profile, still matches)."""
    path = _copy(demos, "1.8.22", tmp_path)
    (first, _), (second, second_json) = _revisions(path)[:2]
    reordered = json.dumps(dict(reversed(list(json.loads(second_json).items()))), separators=(",", ":"))
    assert reordered != second_json and json.loads(reordered) == json.loads(second_json)
    _edit(path,
          ("UPDATE execution_profile_revisions SET fingerprint = ? WHERE id = ?", ("0" * 64, first)),
          ("UPDATE execution_profile_revisions SET profile_json = ? WHERE id = ?", (reordered, second)))
    return path, [first, second]


# --- the evidence itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["1.8.22", "current"])
def test_demo_evidence_verifies(demos, release):
    conn = sqlite3.connect(demos[release])
    evidence = profile_evidence.verify(conn)
    conn.close()
    assert evidence.status == profile_evidence.VERIFIED and evidence.revisions > 3
    assert evidence.trigger_schema_version == (2 if release == "1.8.22" else 3)
    assert evidence.summary().startswith(f"verified on {evidence.revisions} revision(s)")


def test_no_evidence_on_1820(demos):
    conn = sqlite3.connect(demos["1.8.20"])
    evidence = profile_evidence.verify(conn)
    conn.close()
    assert evidence.status == profile_evidence.NONE and evidence.summary().startswith("no evidence")


def test_each_kind_of_contradiction_is_named(demos, tmp_path):
    path, (first, second) = contradicting(demos, tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER create_project_execution_profile")
    conn.execute(create_project_profile_trigger(2).replace('"check"', '"review"'))
    evidence = profile_evidence.verify(conn)
    conn.close()
    assert evidence.status == profile_evidence.CONTRADICTED
    by_row = {c.row_id: c.what for c in evidence.contradictions}
    assert "does not recompute" in by_row[first]
    assert "does not round-trip byte for byte" in by_row[second] and "does not recompute" not in by_row[second]
    assert "embedded" in by_row["create_project_execution_profile"]
    assert evidence.contradicted_rows == [first, second, "create_project_execution_profile"]


@pytest.mark.slow
def test_console_upgraded_demo_keeps_only_archons_evidence(demos, tmp_path):
    """Issue 18, finding 5: after the console's own upgrade, its backfilled revisions, events and the
    trigger it rebuilt are not evidence; archon's own schema-2 revisions still are, for schema 2 only."""
    path = _copy(demos, "1.8.22", tmp_path)
    run_upgrade(path, force=True)
    conn = sqlite3.connect(path)
    evidence = profile_evidence.verify(conn)
    backfills = conn.execute("SELECT count(*) FROM execution_profile_audit_events "
                             "WHERE id LIKE '%:schema-backfill'").fetchone()[0]
    conn.close()
    assert backfills > 0
    assert evidence.status == profile_evidence.VERIFIED and evidence.schema_versions == [2]
    assert evidence.trigger_schema_version is None and evidence.console_rows >= 3 + backfills + 1
    assert evidence.proves(2) and not evidence.proves(3)
    assert "are not evidence" in evidence.summary()


# --- the upgrade gate ------------------------------------------------------------------------------


@pytest.mark.slow
def test_schema_2_evidence_does_not_prove_the_schema_3_steps(demos, tmp_path, capsys):
    """Issue 18, finding 5: archon's 1.8.22 rows (schema 2, and its schema-2 trigger) agree with the
    console, but steps 020/021 write schema 3, which nothing archon wrote here shows."""
    path = _copy(demos, "1.8.22", tmp_path)
    plan = plan_upgrade(path)
    gate = plan.profile_evidence
    assert gate.evidence["status"] == "verified" and gate.evidence["trigger_schema_version"] == 2
    assert gate.status == "no-evidence" and gate.refusal is None
    assert gate.steps == ["020-profile-revisions-rebuild-v3", "021-profile-backfill-current-schema"]
    assert "unverified at schema 3" in gate.force_reason and gate.force_reason in plan.force_reasons
    assert main(["--db", str(path), "upgrade", "--plan"]) == EXIT_OK
    out = capsys.readouterr().out
    assert said_whole(gate.unverified + ".", out) and "--force is required" in out
    assert "Profile evidence: verified" not in out
    before = fingerprint_dir(path.parent)
    assert main(["--db", str(path), "upgrade"]) == EXIT_REFUSED
    assert "unverified at schema 3" in capsys.readouterr().err
    assert fingerprint_dir(path.parent) == before
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_OK
    assert "Applied 29 step(s)" in capsys.readouterr().out


@pytest.mark.parametrize("force", [False, True])
def test_contradiction_refuses_before_anything_is_written(demos, tmp_path, capsys, force):
    path, rows = contradicting(demos, tmp_path)
    before = fingerprint_dir(path.parent)
    code = main(["--db", str(path), "upgrade"] + (["--force"] if force else []))
    captured = capsys.readouterr()
    assert code == EXIT_UNUSABLE == 3
    assert fingerprint_dir(path.parent) == before  # same bytes and mtimes, and no snapshot beside it
    assert not list(path.parent.glob("*.pre-upgrade-*"))
    assert "Start archon 1.10.0 once to let it upgrade this database itself." in captured.err
    assert "--force does not override this" in captured.err
    for row in rows:
        assert row in captured.err and row in captured.out  # the refusal and the plan name the rows


def test_plan_shows_the_contradiction_as_the_refusal(demos, tmp_path, capsys):
    path, rows = contradicting(demos, tmp_path)
    before = fingerprint_dir(path.parent)
    assert main(["--db", str(path), "upgrade", "--plan"]) == EXIT_UNUSABLE
    out = capsys.readouterr().out
    assert "REFUSED: The database contradicts the console's execution-profile algorithms" in out
    assert "Start archon 1.10.0 once to let it upgrade this database itself." in out
    assert "--force is required" not in out
    assert main(["--db", str(path), "--json", "upgrade", "--plan"]) == EXIT_UNUSABLE
    data = json.loads(capsys.readouterr().out)
    gate = data["profile_evidence"]
    assert gate["status"] == "contradicted" and gate["release"] == "1.10.0" and "Nothing was written" in gate["refusal"]
    assert [c["row_id"] for c in gate["evidence"]["contradictions"]] == rows
    assert fingerprint_dir(path.parent) == before


def test_a_trigger_with_other_defaults_refuses(demos, tmp_path, capsys):
    path = _copy(demos, "1.8.22", tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER create_project_execution_profile")
    conn.execute(create_project_profile_trigger(2).replace('\'{"eligible_workloads":["build","check"]',
                                                           '\'{"eligible_workloads":["build"]'))
    conn.close()
    before = fingerprint_dir(path.parent)
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_UNUSABLE
    err = capsys.readouterr().err
    assert "create_project_execution_profile" in err and "Start archon 1.10.0 once" in err
    assert fingerprint_dir(path.parent) == before


def test_contradiction_appearing_after_the_plan_is_caught_under_the_lock(demos, tmp_path, monkeypatch):
    path = _copy(demos, "1.8.22", tmp_path)
    plan = plan_upgrade(path, _allow_recovery=True)
    assert plan.profile_evidence.evidence["status"] == "verified" and not plan.profile_evidence.contradicted
    tampered, _rows = contradicting(demos, tmp_path / "t")
    shutil.copyfile(tampered, path)
    monkeypatch.setattr(upgrade_run, "plan_upgrade", lambda *a, **k: plan)  # the plan made before the change
    before = fingerprint_dir(path.parent)
    with pytest.raises(ProfileEvidenceContradicted) as refused:
        run_upgrade(path, force=True)
    assert refused.value.exit_code == 3 and "1.10.0" in refused.value.hint
    assert fingerprint_dir(path.parent) == before


@pytest.mark.slow
def test_no_evidence_is_a_plan_line_and_a_risk_force_accepts(demos, tmp_path, capsys):
    path = _copy(demos, "1.8.20", tmp_path)
    plan = plan_upgrade(path)
    assert plan.profile_evidence.status == "no-evidence"
    assert plan.profile_evidence.force_reason in plan.force_reasons
    assert main(["--db", str(path), "upgrade", "--plan"]) == EXIT_OK
    assert said_whole(UNVERIFIED, capsys.readouterr().out)
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_OK


def test_no_evidence_without_force_is_refused_naming_it(demos, tmp_path, capsys):
    path = _copy(demos, "1.8.20", tmp_path)
    before = fingerprint_dir(path.parent)
    assert main(["--db", str(path), "upgrade"]) == EXIT_REFUSED
    out, err = capsys.readouterr()
    assert said_whole(UNVERIFIED, out)
    assert "needs --force" in err and "the console's reconstruction and unverified" in err
    assert fingerprint_dir(path.parent) == before


def test_steps_that_write_no_profile_data_are_not_gated(demos, tmp_path):
    path = _copy(demos, "current", tmp_path)  # adoption replays every step; none has profile rows to write
    _edit(path, ("UPDATE execution_profile_revisions SET fingerprint = ? WHERE rowid = 1", ("0" * 64,)))
    plan = plan_upgrade(path)
    assert plan.profile_evidence is None


# --- doctor ----------------------------------------------------------------------------------------


def _evidence_finding(path: Path):
    from datetime import datetime

    report = run_doctor(path, now=datetime.fromisoformat(NOW))
    return report, report.finding("profiles.algorithm_evidence")


def test_doctor_reports_the_same_verification(demos, tmp_path, capsys):
    report, finding = _evidence_finding(demos["current"])
    assert finding.severity == "info" and finding.found.startswith("verified on ")
    _report, finding = _evidence_finding(demos["1.8.20"])
    assert finding.severity == "info" and finding.found.startswith("no evidence")
    path, rows = contradicting(demos, tmp_path)
    report, finding = _evidence_finding(path)
    assert finding.severity == "warning" and finding.found.startswith("contradicted by 2 row(s)")
    assert [r["id"] for r in finding.rows] == rows and finding.count == 2
    assert main(["--db", str(path), "--json", "doctor", "--check", "profiles"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    [item] = [f for f in data["findings"] if f["id"] == "profiles.algorithm_evidence"]
    assert item["severity"] == "warning" and item["count"] == 2


# --- rule 9 ----------------------------------------------------------------------------------------

INDEX = "idx_execution_profile_revisions_project"


def test_index_archon_drops_in_its_own_rebuild_is_info_not_error(demos, tmp_path):
    """Archon creates the index before it rebuilds execution_profile_revisions, so a database archon
    upgraded lacks it until archon's next start (no console ledger: archon did the upgrade)."""
    path = _copy(demos, "current", tmp_path)
    _edit(path, (f"DROP INDEX {INDEX}", ()), revisions=False)
    report, _ = _evidence_finding(path)
    assert report.finding("schema.missing_objects") is None
    finding = report.finding("schema.profile_index_after_archon_upgrade")
    assert finding.severity == "info" and INDEX in finding.found and "next start" in finding.why
    assert report.exit_code() == 0


@pytest.mark.slow
def test_the_same_index_missing_after_the_consoles_upgrade_is_an_error(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, force=True)
    _edit(path, (f"DROP INDEX {INDEX}", ()), revisions=False)
    report, _ = _evidence_finding(path)
    finding = report.finding("schema.missing_objects")
    assert finding.severity == "error" and INDEX in finding.found
    assert report.finding("schema.profile_index_after_archon_upgrade") is None
