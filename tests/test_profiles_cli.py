"""`archon-console profiles ...` end to end."""

from __future__ import annotations

import json

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock
from tests.environments_support import dump, raw
from tests.profiles_support import DOCKER, add_revision


@pytest.fixture
def db(make_db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01T09:30:00Z")
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_revision(conn, "p1", 2, DOCKER)
    conn.close()
    return path


@pytest.fixture
def broken_db(db):
    """With a revision whose fingerprint does not recompute (and control characters in its text)."""
    conn = raw(db)
    add_revision(conn, "p1", 3, {"provider_preference": "host", "x": "\x1b[31m[red]"}, fingerprint="0" * 64)
    conn.close()
    return db


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_and_text(broken_db, capsys):
    db = broken_db
    code, out, _ = cli(capsys, "profiles", "list", "p1", "--db", db, "--json")
    rows = json.loads(out)
    assert code == 0 and [r["revision"] for r in rows] == [3, 2, 1]
    assert rows[2]["active"] is True and rows[0]["fingerprint_matches"] is False
    code, out, _ = cli(capsys, "--db", db, "profiles", "list", "p1")
    assert code == 0 and "MISMATCH" in out and out.splitlines()[0].split()[:3] == ["ACTIVE", "REV", "ID"]
    assert cli(capsys, "profiles", "list", "nope", "--db", db)[0] == 1


def test_show_text_marks_mismatch_and_strips_controls(broken_db, capsys):
    db = broken_db
    code, out, _ = cli(capsys, "profiles", "show", "p1:execution-profile:r3", "--db", db)
    assert code == 0 and "fingerprint MISMATCH: stored " + "0" * 64 in out
    assert "\x1b" not in out and '"x": "\\u001b[31m[red]"' in out
    code, out, _ = cli(capsys, "profiles", "show", "p1:execution-profile:r2", "--db", db, "--json")
    data = json.loads(out)
    assert data["fingerprint_matches"] is True and data["profile"]["provider_preference"] == "docker_sandbox"


def test_diff(db, capsys):
    code, out, _ = cli(capsys, "profiles", "diff", "p1:execution-profile:1", "p1:execution-profile:r2", "--db", db)
    assert code == 0 and out.startswith("--- p1:execution-profile:1") and '+  "provider_preference": "docker_sandbox"' in out
    code, out, _ = cli(capsys, "profiles", "diff", "p1:execution-profile:r2", "p1:execution-profile:r2", "--db", db)
    assert "same profile" in out


def test_activate_then_repeat_then_refusals(db, capsys):
    code, out, _ = cli(capsys, "profiles", "activate", "p1:execution-profile:r2", "--reason", "rollback",
                       "--as", "alice", "--db", db, "--json")
    result = json.loads(out)
    assert code == 0 and result["ok"] and result["previous_revision_id"] == "p1:execution-profile:1"
    assert result["build_execution_provider"] == "docker_sandbox"
    before = dump(db)
    code, out, _ = cli(capsys, "profiles", "activate", "p1:execution-profile:r2", "--reason", "rollback",
                       "--as", "alice", "--db", db)
    assert code == 0 and "already the active profile" in out
    assert dump(db) == before
    assert cli(capsys, "profiles", "activate", "p1:execution-profile:1", "--db", db)[0] == 2  # --reason missing
    code, _, err = cli(capsys, "--read-only", "profiles", "activate", "p1:execution-profile:1", "--reason", "r",
                       "--db", db)
    assert code == 1 and "read-only" in err
    assert dump(db) == before


def test_old_shape_is_upgrade_required(schema_db, capsys):
    path = schema_db("1.8.20", name="old.db")
    code, _, err = cli(capsys, "profiles", "list", "p1", "--db", path)
    assert code == 1 and "upgrade required" in err
