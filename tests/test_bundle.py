"""Support bundles: what is inside, and that --redact leaves no original name, path or payload."""

from __future__ import annotations

import json
import zipfile

import pytest

from console.cli.cli import main
from console.services.bundle import write_bundle
from console.services.redaction import Redactor
from console.services.doctor import run_doctor
from tests import damage

SECRETS = [damage.SECRET_ACTOR, "Zelda", "Quasimodo", "zelda", damage.SECRET_PATH, damage.SECRET_PAYLOAD,
           "hidden-branch", "zelda-feature", damage.SECRET_REASON, "laptop"]


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", damage.NOW.isoformat())


def members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_plain_bundle_contents_and_warning(tmp_path, capsys):
    (tmp_path / "db").mkdir()
    db = damage.with_secrets(tmp_path / "db" / "archon.db")
    out = tmp_path / "out" / "bundle.zip"
    code = main(["doctor", str(db), "--bundle", str(out)])
    assert code == 0  # warnings only
    files = members(out)
    assert sorted(files) == ["MANIFEST.json", "README.txt", "evidence.json", "ledger.json", "report.json",
                             "report.txt", "row_counts.json", "schema.sql"]
    assert b"NOT REDACTED" in files["README.txt"]
    assert "NOT redacted" in capsys.readouterr().out
    assert json.loads(files["row_counts.json"])["approval_requests"] == 4
    assert b"CREATE TABLE approval_requests" in files["schema.sql"]
    assert json.loads(files["MANIFEST.json"])["redaction"]["redacted"] is False
    evidence = json.loads(files["evidence.json"])
    found = {e["finding"] for e in evidence}
    assert {"approvals.approved_past_expiry", "environments.stale_claims"} <= found
    assert damage.SECRET_ACTOR.encode() in files["evidence.json"]  # plain means plain
    with pytest.raises(Exception, match="already exists"):
        write_bundle(run_doctor(db, now=damage.NOW), out, now=damage.NOW)


@pytest.mark.parametrize("redact", [False, True])
def test_doctor_json_names_the_bundle_it_wrote(tmp_path, capsys, redact):
    """Issue 21 item 9: a script reading `doctor --json --bundle` gets the bundle's path from the one
    JSON document on stdout (not only from a note on stderr)."""
    (tmp_path / "db").mkdir()
    db = damage.with_secrets(tmp_path / "db" / "archon.db")
    out = tmp_path / "out" / "bundle.zip"
    assert main(["--json", "doctor", str(db), "--bundle", str(out), *(["--redact"] if redact else [])]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # exactly one document
    assert report["bundle"] == {"path": str(out), "redacted": redact}
    assert out.is_file() and report["findings"]
    assert str(out) in captured.err  # the note stays on stderr


def test_redacted_bundle_has_no_originals_and_stable_placeholders(tmp_path):
    (tmp_path / "db").mkdir()
    db = damage.with_secrets(tmp_path / "db" / "archon.db")
    out = tmp_path / "out" / "bundle.zip"
    assert main(["doctor", str(db), "--bundle", str(out), "--redact"]) == 0
    files = members(out)
    raw = out.read_bytes()
    for name, content in files.items():
        for secret in SECRETS + [str(db)]:
            assert secret.encode() not in content, (secret, name)
            assert secret.lower().encode() not in content.lower(), (secret, name)
        assert "zelda" not in name.lower()
    assert b"zelda" not in raw.lower()  # names, comments and headers of the zip itself
    evidence = json.loads(files["evidence.json"])
    request = next(r for e in evidence for r in e["rows"]
                   if r["table"] == "approval_requests" and len(r.get("events") or []) == 3)
    actors = [e["actor_reference"] for e in request["events"] if e["actor_reference"]]
    assert len(actors) == 2 and actors[0] == actors[1] and actors[0].startswith("actor-")  # stable
    assert request["row"]["status"] == "approved"  # structure kept
    assert request["id"] == request["row"]["id"] and request["id"].startswith("id-")  # `req-secret` names
    assert [e["id"] for e in request["events"]] == [f"{request['id']}:{n}" for n in (1, 2, 3)]  # same pseudonym
    report = json.loads(files["report.json"])
    assert {"table": "approval_requests", "id": request["id"]} in [
        row for f in report["findings"] for row in f["rows"]]  # the report names the same row
    assert json.loads(request["row"]["action_json"])["branch"].startswith("value-")  # archon's keys kept, values not
    manifest = json.loads(files["MANIFEST.json"])["redaction"]
    assert manifest["redacted"] is True
    assert manifest["fields"]["approval_request_events.actor_reference"] >= 2  # counted over the whole copy
    assert manifest["fields"]["approval_requests.action_json"] >= 1
    assert b"REDACTED" in files["README.txt"] and b"NOT REDACTED" not in files["README.txt"]


def test_redactor_maps_each_value_once():
    r = Redactor(True)
    a = r.column("approval_request_events", "actor_reference", "alice")
    assert r.column("execution_environment_events", "actor_reference", "alice") == a
    assert r.column("approval_request_events", "actor_reference", "bob") != a
    assert r.column("approval_requests", "status", "pending") == "pending"
    claim = r.column("execution_environments", "operation_claim_id", "console:alice@h:1")
    assert claim.startswith("console:claim-") and claim.endswith(":1") and "alice" not in claim
    assert r.column("projects", "id", "prj-atlas-api") == r.column("x", "project_id", "prj-atlas-api")
    assert Redactor(False).column("projects", "repo_path", "/x") == "/x"


def test_bundle_is_never_written_beside_the_database(tmp_path, capsys):
    db = damage.healthy(tmp_path / "archon.db")
    assert main(["doctor", str(db), "--bundle", str(tmp_path / "b.zip")]) == 2
    out, err = capsys.readouterr()
    assert "outside the database's directory" in err and out == ""  # refused before the report
    assert main(["doctor", str(db), "--redact"]) == 2
