"""The CLI's contract (issue 10, items 12-15): --version, names where ids work, one exit-code rule,
and --json on every path, errors included."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock
from tests.approvals_helpers import status_of

DEMO_NOW = "2026-11-01 09:30:00"


@pytest.fixture(scope="module")
def demo_master(tmp_path_factory):
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    generate(path, requests=40, environments=8, now=DEMO_NOW)
    return path


@pytest.fixture
def demo(demo_master, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", DEMO_NOW)
    path = tmp_path / "demo.db"
    shutil.copyfile(demo_master, path)
    return path


@pytest.fixture
def db(db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01 09:30:00")
    return db


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def active_revision(path, project="prj-atlas-api"):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT active_execution_profile_revision_id FROM projects WHERE id = ?",
                            (project,)).fetchone()[0]
    finally:
        conn.close()


# --- 12: --version ------------------------------------------------------------------------------

def test_version_prints_the_package_version(capsys):
    from console import __version__

    code, out, err = run(capsys, "--version")
    assert code == 0 and out.strip() == f"archon-console {__version__}" and err == ""


def test_version_json_names_the_releases_and_the_ledger_format(capsys):
    from console.db.migrations.registry import MIGRATIONS, RELEASES

    code, out, _ = run(capsys, "--version", "--json")
    data = json.loads(out)
    assert code == 0 and data["releases"] == list(RELEASES) and data["current_release"] == RELEASES[-1]
    assert data["ledger"]["tables"] == ["_sqlite_migrations", "_archon_console_ledger"]
    assert data["ledger"]["migration_set"] == "archon-console"
    assert data["ledger"]["steps"] == len(MIGRATIONS)


def test_version_without_json_does_not_import_the_registry():
    import subprocess
    import sys

    probe = ("import sys; from console.cli.cli import main; main(['--version']); "
             "print('console.db.migrations.registry' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "False"


# --- 13: names work where ids do ------------------------------------------------------------------

@pytest.mark.slow
def test_profiles_list_takes_a_project_name(demo, capsys):
    code, out, _ = run(capsys, "--db", demo, "--json", "profiles", "list", "atlas-api")
    assert code == 0 and {r["project_id"] for r in json.loads(out)} == {"prj-atlas-api"}


@pytest.mark.parametrize("argv", [
    ["atlas-api", "r3"], ["atlas-api", "3"], ["atlas-api:3"], ["atlas-api:r3"], ["prj-atlas-api:3"],
    ["prj-atlas-api:execution-profile:3"], ["prj-atlas-api", "prj-atlas-api:execution-profile:3"],
])
def test_profiles_show_takes_a_revision_by_id_or_within_a_project(demo, capsys, argv):
    code, out, _ = run(capsys, "--db", demo, "--json", "profiles", "show", *argv)
    assert code == 0 and json.loads(out)["id"] == "prj-atlas-api:execution-profile:3"


def test_profiles_activate_and_diff_take_short_revisions(demo, capsys):
    code, out, _ = run(capsys, "--db", demo, "--json", "profiles", "diff", "atlas-api", "r1", "r2")
    assert code == 0 and json.loads(out)["a"] == "prj-atlas-api:execution-profile:1"
    code, out, err = run(capsys, "--db", demo, "--as", "ops", "profiles", "activate", "atlas-api", "r1",
                         "--reason", "roll back")
    assert code == 0, err
    assert active_revision(demo) == "prj-atlas-api:execution-profile:1"


def test_a_short_revision_without_a_project_is_a_usage_error(demo, capsys):
    code, out, _ = run(capsys, "--db", demo, "--json", "profiles", "show", "r3")
    answer = json.loads(out)
    assert code == 2 and answer["exit"] == 2 and "PROJECT:3" in answer["hint"]


def test_a_revision_of_another_project_is_refused(demo, capsys):
    code, _, err = run(capsys, "--db", demo, "profiles", "show", "atlas-api", "billing-worker:2")
    assert code == 1 and "not prj-atlas-api" in err


def test_project_names_work_in_approvals_and_envs_lists(demo, capsys):
    code, out, _ = run(capsys, "--db", demo, "--json", "envs", "list", "--project", "atlas-api")
    rows = json.loads(out)
    assert code == 0 and rows and {r["project_id"] for r in rows} == {"prj-atlas-api"}
    code, out, _ = run(capsys, "--db", demo, "--json", "approvals", "list", "--project", "atlas-api")
    rows = json.loads(out)
    assert code == 0 and rows and {r["project_id"] for r in rows} == {"prj-atlas-api"}


def test_an_ambiguous_name_is_refused_with_the_candidates(demo, capsys):
    conn = sqlite3.connect(demo)
    conn.execute("UPDATE projects SET name = 'twin' WHERE id IN ('prj-atlas-api', 'prj-ml-pipeline')")
    conn.commit()
    conn.close()
    for argv in (["profiles", "list", "twin"], ["envs", "list", "--project", "twin"],
                 ["approvals", "list", "--project", "twin"], ["profiles", "show", "twin:1"]):
        code, out, _ = run(capsys, "--db", demo, "--json", *argv)
        answer = json.loads(out)
        assert code == 1 and "prj-atlas-api" in answer["error"] and "prj-ml-pipeline" in answer["error"], argv


def test_the_console_resolves_project_names_with_the_same_resolver(demo):
    from console.db.connect import open_database
    from console.services.navigation import project_with_audit

    with open_database(demo, read_only=True) as handle:
        project, _ = project_with_audit(handle, "atlas-api")
    assert project.id == "prj-atlas-api"


# --- 14: exit codes ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_overdue_approval_exits_1_and_says_what_it_wrote(db, capsys):
    code, out, _ = run(capsys, "--db", db, "--json", "--as", "dave", "approvals", "approve", "apr-7", "apr-6")
    results = {r["id"]: r for r in json.loads(out)}
    assert code == 1 and status_of(db, "apr-7") == "expired"
    assert results["apr-7"]["wrote"] == ["expired"]
    assert results["apr-6"]["wrote"] == []


@pytest.mark.parametrize("argv", [
    ["approvals", "deny", "apr-1", "--reason", "  "],
    ["approvals", "revoke", "apr-5", "--reason", ""],
    ["envs", "claim", "env-0001", "--op", "retire", "--takeover"],
    ["envs", "release", "env-0001", "--takeover"],
    ["profiles", "activate", "atlas-api", "r1", "--reason", " "],
])
def test_a_missing_reason_is_a_usage_error_everywhere(db, demo, capsys, argv):
    target = demo if argv[0] != "approvals" else db
    code, out, _ = run(capsys, "--db", target, "--as", "ops", "--json", *argv)
    assert code == 2 and json.loads(out)["exit"] == 2
    code, _, err = run(capsys, "--db", target, "--as", "ops", *argv)
    assert code == 2 and "reason is required" in err


# --- 15: --json on every path ---------------------------------------------------------------------

ERROR_PATHS = [
    (["approvals", "show", "nope"], 1),
    (["approvals", "list", "--kind", "weird"], 2),
    (["approvals", "list", "--limit", "0"], 2),
    (["approvals", "frobnicate"], 2),
    (["envs", "show", "nope"], 1),
    (["envs", "claim", "nope", "--op", "stop"], 1),
    (["envs", "list", "--state", "melted"], 2),
    (["projects", "list", "--bogus"], 2),
    (["profiles", "list", "nosuch"], 1),
    (["profiles", "show", "nosuch:1"], 1),
    (["profiles", "activate", "atlas-api", "r1"], 2),
    (["doctor", "--check", "nosuch"], 2),
    (["doctor", "{missing}"], 3),
    (["upgrade", "--to", "9.9"], 2),
    (["restore", "{missing}", "--yes"], 2),
    (["demo", "{db}"], 1),
    (["help", "nosuch"], 2),
    (["completion", "fish"], 2),
    (["inspect", "{missing}", "--keep-snapshot", "{missing}", "--no-tui"], 3),
    (["inspect", "{db}"], 2),  # --json with the console (issue 21 item 4)
    (["upgrade", "--db", "{missing}"], 3),
    (["--read-only", "envs", "claim", "env-0001", "--op", "stop"], 1),
    (["--no-such-option"], 2),
    (["nosuchcommand"], 2),
]


@pytest.mark.parametrize("argv,expected", ERROR_PATHS, ids=[" ".join(a) for a, _ in ERROR_PATHS])
def test_every_error_is_one_json_object_on_stdout(demo, tmp_path, capsys, argv, expected):
    argv = [a.format(missing=tmp_path / "missing.sqlite3", db=demo) for a in argv]
    code, out, _ = run(capsys, "--db", demo, "--as", "ops", "--json", *argv)
    answer = json.loads(out)  # nothing but the one object
    assert isinstance(answer, dict) and answer["ok"] is False
    assert code == expected == answer["exit"]
    assert isinstance(answer["error"], str) and answer["error"]
    assert "hint" in answer


def test_json_after_the_command_also_turns_usage_errors_into_json(demo, capsys):
    code, out, err = run(capsys, "approvals", "list", "--limit", "zero", "--json")
    assert code == 2 and json.loads(out)["exit"] == 2 and "usage" in json.loads(out)
    assert err == ""


def test_an_unusable_database_is_json_with_json(tmp_path, capsys):
    path = tmp_path / "broken.db"
    path.write_bytes(b"not sqlite at all" * 40)
    code, out, _ = run(capsys, "--db", path, "--json", "approvals", "list")
    assert code == 3 and json.loads(out) == {**json.loads(out), "ok": False, "exit": 3}


def test_without_json_errors_stay_on_stderr(demo, capsys):
    code, out, err = run(capsys, "--db", demo, "approvals", "list", "--limit", "0")
    assert code == 2 and out == "" and "usage:" in err and "error:" in err


# --- 11 (one item): a missing snapshot is named as the snapshot ---------------------------------------

def test_restore_of_a_missing_snapshot_blames_the_snapshot_not_db(demo, tmp_path, capsys):
    before = demo.read_bytes()
    code, out, err = run(capsys, "--db", demo, "restore", tmp_path / "missing.sqlite3", "--yes")
    assert code == 2 and out == ""
    assert "no snapshot file at" in err and "missing.sqlite3" in err
    assert "Pass --db" not in err and "ARCHON_DB_PATH" not in err
    assert demo.read_bytes() == before


@pytest.mark.parametrize("argv", [["doctor", "--list-checks"], ["completion", "bash"], ["help", "envs", "claim"],
                                  ["--version"], ["envs", "claim", "--help"], ["-h"]])
def test_informational_commands_answer_json_too(demo, capsys, argv):
    code, out, _ = run(capsys, "--db", demo, "--json", *argv)
    assert code == 0 and json.loads(out)
