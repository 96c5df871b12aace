"""`upgrade --plan` reads only: no file, `-wal`, `-shm` or ledger is created or changed."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.cli.cli import main
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import db_1820, db_1822, fingerprint_dir, ledger_names


def test_plan_of_an_unversioned_1820_database(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    plan = plan_upgrade(path)
    assert fingerprint_dir(tmp_path) == before
    assert plan.detected_release == "1.8.20"
    assert plan.ledger_state == "unversioned-adoption"
    assert plan.target == "1.10.0"
    assert [s.id[:3] for s in plan.pending] == [f"{n:03d}" for n in range(1, 30)]
    by_id = {s.id[:3]: s for s in plan.pending}
    assert by_id["009"].safety == "historical-destructive"
    # 2 projects x (active + queued ticket + active sequence) would be swept.
    assert by_id["009"].rows == 6
    assert by_id["018"].rows == 4 and by_id["018"].rebuild
    assert plan.force_required
    assert any("no upgrade ledger" in r for r in plan.force_reasons)
    assert any("009-build-sequence-incomplete-sweep" in r for r in plan.force_reasons)
    assert plan.snapshot_bytes == path.stat().st_size
    assert plan.free_bytes > 0 and plan.enough_space
    assert plan.snapshot_path.startswith(str(path)) and ".pre-upgrade-" in plan.snapshot_path
    data = json.loads(json.dumps(plan.to_json()))
    assert data["force_required"] is True and len(data["pending"]) == 29


def test_plan_to_an_older_target_and_of_a_versioned_database(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    plan = plan_upgrade(path, "1.8.20")
    assert [s.id for s in plan.pending] == ["001-archon-1.8.20-baseline"]
    assert plan.force_required  # adoption
    run_upgrade(path, target="1.8.20", force=True)
    before = fingerprint_dir(tmp_path)
    plan = plan_upgrade(path, "1.8.22")
    assert fingerprint_dir(tmp_path) == before
    assert plan.ledger_state == "versioned" and plan.applied == ["001-archon-1.8.20-baseline"]
    assert plan.pending[0].id.startswith("002") and plan.pending[-1].id.startswith("019")
    assert plan.force_reasons == [
        "step 009-build-sequence-incomplete-sweep is historical-destructive "
        "(Fail active / cancel queued tickets of build sequences without a profile selection)",
        # A 1.8.20 database holds no profile evidence: the defaults 005/007 write are unverified.
        "profile defaults, serialisation and fingerprints are the console's reconstruction and unverified: "
        "the database holds no profile revision or profile trigger archon wrote to check them against "
        "(steps 005-profile-backfill-initial, 007-profile-guard-triggers)",
    ]


@pytest.mark.parametrize("wal", [False, True])
def test_plan_writes_nothing_through_the_cli(tmp_path, capsys, wal):
    path = db_1822(tmp_path / "archon.db", wal=wal)
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade", "--plan"]) == 0
    assert main(["--db", str(path), "--json", "upgrade", "--plan", "--to", "1.10.0"]) == 0
    assert fingerprint_dir(tmp_path) == before  # same names (no -wal/-shm), bytes and mtimes
    out = capsys.readouterr().out
    assert "Detected shape:  1.8.22" in out and "--force is required" in out
    data = json.loads(out[out.index("{"):])
    assert data["detected_release"] == "1.8.22" and data["ledger_state"] == "unversioned-adoption"
    assert ledger_names(path) == []


def test_plan_beside_a_live_wal_writer_changes_neither_the_file_nor_its_wal(tmp_path):
    """archon running: a -wal and -shm exist. The plan must not touch the database or the WAL
    (SQLite's -shm index is shared memory that every reader updates; it is not data)."""
    path = db_1822(tmp_path / "archon.db", wal=True)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO archon_misc_log (note) VALUES ('live')")
    try:
        wal = tmp_path / "archon.db-wal"
        assert wal.exists()
        before = fingerprint_dir(tmp_path)
        plan = plan_upgrade(path)
        after = fingerprint_dir(tmp_path)
        assert set(after) == set(before)
        for name in ("archon.db", "archon.db-wal"):
            assert after[name] == before[name]
        assert plan.detected_release == "1.8.22"
    finally:
        writer.close()


def test_plan_of_a_wal_without_its_index_reads_a_private_copy(tmp_path):
    """A -wal without -shm (archon killed): reading in place would create the index, so the plan
    reads a private copy and nothing beside the database changes."""
    path = db_1820(tmp_path / "archon.db", wal=True)
    (tmp_path / "archon.db-wal").write_bytes(b"")
    before = fingerprint_dir(tmp_path)
    plan = plan_upgrade(path)
    assert plan.detected_release == "1.8.20" and len(plan.pending) == 29
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.slow
def test_up_to_date_plan(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, force=True)
    before = fingerprint_dir(tmp_path)
    plan = plan_upgrade(path)
    assert plan.up_to_date and not plan.force_required and len(plan.applied) == 29
    assert main(["--db", str(path), "upgrade", "--plan"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.parametrize("columns", ["250", "80", "40"])
def test_the_text_plan_never_cuts_a_risk_force_accepts(tmp_path, capsys, monkeypatch, columns):
    """Issue 21 item 9: the risk list ended "(steps 005-profile-ba…" even at 250 columns. Each risk
    is wrapped at the terminal's width, never cut, and no step id is split across lines."""
    monkeypatch.setenv("COLUMNS", columns)
    path = db_1820(tmp_path / "archon.db")
    plan = plan_upgrade(path)
    assert main(["--db", str(path), "upgrade", "--plan"]) == 0
    out = capsys.readouterr().out
    risks = out[out.index("--force is required:"):]
    assert "…" not in risks
    for line in risks.splitlines():
        assert len(line) <= max(40, int(columns)) or " " not in line.strip()
    words = " ".join(risks.split())
    for reason in plan.force_reasons:
        assert " ".join(reason.split()) in words
    listed = [r for r in plan.force_reasons if "(steps " in r]
    assert listed and all(step.id in risks for step in plan.pending if step.id in listed[0])  # ids whole


# Run in a fresh interpreter: which modules a plan loads, and how many in-memory scratch databases
# (the preflight's schema replay, the rehearsal) it opens, counted at console/db/connection.py.
_WATCHED_PLAN = """
import json, sys
import console.db.connection as connection
opened = []
real = connection.scratch_connection
def counted(*args, **kwargs):
    opened.append(1)
    return real(*args, **kwargs)
connection.scratch_connection = counted
from console.cli.cli import main
code = main(["--db", sys.argv[1], "upgrade", "--plan", "--json"])
watched = ("sqlite_utils", "console.db.migrations.preflight", "console.db.migrations.fixed_ids",
           "console.db.migrations.replay")
with open(sys.argv[2], "w") as out:
    json.dump({"code": code, "scratch": len(opened), "loaded": [m for m in watched if m in sys.modules]}, out)
"""


def _watched_plan(path, tmp_path) -> tuple[dict, dict]:
    import subprocess
    import sys

    from tests.upgrade_helpers import REPO

    report = tmp_path / f"{path.stem}.json"  # beside the database's directory, not in it
    done = subprocess.run([sys.executable, "-c", _WATCHED_PLAN, str(path), str(report)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(report.read_text()), json.loads(done.stdout)


def test_an_up_to_date_plan_reads_only_the_schema_and_the_ledger(tmp_path):
    """Issue 22 item 4: with nothing pending, `upgrade --plan` answers from the schema and the ledger
    (decide's fail-closed checks) alone: no preflight, no rehearsal, no schema replayed into a
    scratch database, and none of their modules (nor sqlite-utils) loaded. With steps pending the
    same probe sees the rehearsal, so it can see what it looks for."""
    (tmp_path / "db").mkdir()
    pending = db_1820(tmp_path / "db" / "pending.db")
    seen, plan = _watched_plan(pending, tmp_path)
    assert seen["code"] == 0 and len(plan["pending"]) == 29
    assert seen["scratch"] >= 2 and "console.db.migrations.fixed_ids" in seen["loaded"]

    current = db_1820(tmp_path / "db" / "current.db")
    run_upgrade(current, force=True, snapshot_dir=tmp_path)
    before = fingerprint_dir(tmp_path / "db")
    seen, plan = _watched_plan(current, tmp_path)
    assert fingerprint_dir(tmp_path / "db") == before
    assert seen == {"code": 0, "scratch": 0, "loaded": []}
    assert plan["up_to_date"] and plan["pending"] == [] and len(plan["applied"]) == 29
    assert plan["profile_evidence"] is None and plan["policy_changes"] == [] and not plan["force_required"]
