"""The console's own read-safety limits never stop an upgrade part-way or refuse a file archon starts on
(issue 18, second attack round on the upgrade, findings 1, 2, 8 and 9).

Every connection of the read-only commands caps a value at 4 MB and a statement at its budget
(console/db/limits.py; tests/adversarial/test_statement_limits.py and test_hostile_files.py keep
that). An upgrade's connections (its plan, preflight, rehearsal, steps and snapshot checks) are opened
under `limits.for_upgrade`: SQLite's own value limit and no statement budget, so a 5 MB value archon
stored is carried byte for byte and `ARCHON_CONSOLE_STATEMENT_SECONDS` cannot interrupt a step. The
evidence gate reads profile rows one way on every path, so plan, doctor and run agree on a BLOB.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import pytest

from console.cli.cli import main
from console.db import limits
from console.db.connection import scratch_connection
from console.errors import EXIT_OK, EXIT_UNUSABLE
from console.services.doctor import run_doctor
from tests.adversarial.bounded import add_endless_triggers, cpu_seconds, popen
from tests.reference import profiles, scenarios

BIG = 5_000_000


def _cli(db: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--db", str(db), *args])
    return code, out.getvalue(), err.getvalue()


def _ledger_rows(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM _archon_console_ledger").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def _big_retained_output(tmp_path: Path) -> tuple[Path, bytes]:
    db = scenarios.ref_1820(tmp_path / "archon.db")
    value = "o" * (BIG - 7) + "é\u2603end"  # not only ASCII: carried as the same UTF-8 bytes
    conn = sqlite3.connect(db)
    conn.execute("UPDATE check_attempt_details SET retained_output = ?, retained_end_offset = 0, "
                 "total_persisted_bytes = ? WHERE rowid = (SELECT min(rowid) FROM check_attempt_details)",
                 (value, BIG))
    conn.commit()
    conn.close()
    return db, value.encode()


def _stored(db: Path, sql: str):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_value_over_the_read_limit_is_upgraded_byte_for_byte(tmp_path):
    """Finding 1: 5 MB of retained_output (archon's table bounds it nowhere) stopped the upgrade at
    018's rebuild after 17 committed steps ("string or blob too big")."""
    db, value = _big_retained_output(tmp_path)
    oracle = scenarios.archon_upgrade(db, tmp_path / "oracle.db", "1.8.20", "1.10.0", chain=False)
    code, out, err = _cli(db, "upgrade", "--plan", "--to", "1.10.0")
    assert code == EXIT_OK, err
    code, out, err = _cli(db, "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    assert code == EXIT_OK, err
    sql = ("SELECT CAST(retained_output AS BLOB) FROM check_attempt_details "
           "WHERE length(retained_output) > 1000000")
    assert _stored(db, sql) == value
    assert _stored(oracle, sql) == value  # archon's own start keeps it the same way
    code, _, err = _cli(db, "upgrade", "--plan")
    assert code == EXIT_OK and "up to date" in _cli(db, "upgrade", "--plan")[1].lower(), err


COUNTING = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
            "SELECT count(*) FROM c")  # well over 0.05 s of SQLite's own work


@pytest.mark.slow
def test_the_statement_budget_variable_does_not_apply_to_an_upgrade_step(monkeypatch):
    """Finding 2: ARCHON_CONSOLE_STATEMENT_SECONDS overrode the upgrade's budget and interrupted 018
    after 17 committed steps. A step's statement (an upgrade connection outside its checks) runs to
    its end; the read-only checks before the first write keep the budget, and say so when it
    expires; every other connection keeps it too."""
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "0.05")
    with limits.for_upgrade():
        step = scratch_connection()
    try:
        assert step.execute(COUNTING).fetchone()[0] == 2_000_000
        with limits.upgrade_checks() as budget:
            with pytest.raises(sqlite3.OperationalError, match="interrupted"):
                step.execute(COUNTING).fetchone()
        assert budget.expired
        assert step.execute(COUNTING).fetchone()[0] == 2_000_000  # the step after the checks: no budget
    finally:
        step.close()
    refusal = budget.refusal()
    assert "did not finish" in refusal.reason and "0.05 seconds" in refusal.reason
    assert "corrupt" not in refusal.reason + refusal.hint and "ARCHON_CONSOLE_STATEMENT_SECONDS" in refusal.hint
    assert not limits.upgrading()
    reader = scratch_connection()
    try:
        assert reader.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limits.MAX_VALUE_BYTES
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            reader.execute(COUNTING).fetchone()
    finally:
        reader.close()


@pytest.mark.slow
@pytest.mark.parametrize("seconds", ["0.000001", "0.2", "900"])
def test_a_statement_budget_never_stops_an_upgrade_part_way(tmp_path, monkeypatch, seconds):
    """Whatever the variable says, the upgrade completes, or is refused before its first write with a
    sentence that names the budget (never "may be corrupt", never "fails on this database's schema")."""
    db = scenarios.ref_1820(tmp_path / "archon.db")
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", seconds)
    code, _, err = _cli(db, "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    if code == EXIT_OK:
        assert _ledger_rows(db) == 29, err
    else:
        assert code == EXIT_UNUSABLE and _ledger_rows(db) == 0, err
        assert f"one ran longer than {float(seconds):g} seconds" in err and "Nothing was written" in err, err
        assert "corrupt" not in err and "fails on this database" not in err, err
    if seconds == "0.000001":
        assert code == EXIT_UNUSABLE  # the checks' budget still holds


def test_an_upgrade_connection_keeps_sqlites_own_limits():
    """The one mechanism: a connection opened under `for_upgrade` has SQLite's value limit and no
    budget; one opened after it has the console's again."""
    with limits.for_upgrade():
        conn = scratch_connection()
    try:
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) > limits.MAX_VALUE_BYTES
        assert len(conn.execute("SELECT zeroblob(?)", (limits.MAX_VALUE_BYTES + 1,)).fetchone()[0]) \
            == limits.MAX_VALUE_BYTES + 1
    finally:
        conn.close()
    after = scratch_connection()
    try:
        assert after.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limits.MAX_VALUE_BYTES
    finally:
        after.close()


@pytest.mark.slow
def test_a_large_check_definitions_plans_and_upgrades(tmp_path):
    """Finding 8: a 5 MB projects.check_definitions (no CHECK bounds it) made --plan and --force say the
    file "cannot be read as a SQLite database ... may be corrupt"; archon starts on it."""
    db = scenarios.ref_1820(tmp_path / "archon.db")
    definitions = "[" + ",".join('{"id":"x%d","command":"%s"}' % (i, "y" * 200) for i in range(24_000)) + "]"
    assert len(definitions) > BIG
    conn = sqlite3.connect(db)
    conn.execute("UPDATE projects SET check_definitions = ? WHERE id = 'proj-1'", (definitions,))
    conn.commit()
    conn.close()
    code, _, err = _cli(db, "upgrade", "--plan", "--to", "1.10.0")
    assert code == EXIT_OK, err
    assert "corrupt" not in err
    code, _, err = _cli(db, "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    assert code == EXIT_OK, err
    assert _stored(db, "SELECT check_definitions FROM projects WHERE id = 'proj-1'") == definitions


def _blob_profile(tmp_path: Path) -> Path:
    db = scenarios.ref_1821_shape(tmp_path / "archon.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    text = profiles.serialize({"provider_preference": "docker_sandbox"})
    conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                 "profile_json) VALUES ('proj-1:old', 'proj-1', 5, 1, ?, CAST(? AS BLOB))",
                 (profiles.fingerprint(json.loads(text)), text))
    conn.close()
    return db


def test_a_blob_profile_is_the_same_contradiction_on_every_path(tmp_path):
    """Finding 9: --plan and doctor read a BLOB profile_json as text ("verified"), the run as bytes
    ("contradicted"). Archon stores text; a BLOB proves nothing, and every path says so."""
    db = _blob_profile(tmp_path)
    code, out, err = _cli(db, "upgrade", "--plan", "--to", "1.10.0", "--json")
    assert code == EXIT_UNUSABLE, err
    gate = json.loads(out)["profile_evidence"]
    assert gate["status"] == "contradicted", gate
    assert "proj-1:old" in json.dumps(gate) and "stored as blob" in json.dumps(gate)
    report = run_doctor(db, now=datetime.fromisoformat("2026-03-01T12:00:00+00:00"))
    finding = next(f for f in report.findings if f.id == "profiles.algorithm_evidence")
    assert finding.severity == "warning" and {"table": "execution_profile_revisions", "id": "proj-1:old"} in finding.rows
    code, _, err = _cli(db, "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    assert code == EXIT_UNUSABLE, err
    assert "contradict" in err
    assert _ledger_rows(db) == 0  # refused before anything was written


@pytest.mark.slow
def test_a_signal_still_stops_an_upgrade_without_a_budget(tmp_path):
    """With no budget left to end a statement, the operator's SIGTERM must: here during the
    rehearsal of the profile backfill (an endless trigger on projects), where the interrupt also
    rolled back the rehearsal's savepoint and the stop used to end as "no such savepoint" (exit 3)."""
    db = scenarios.ref_1820(tmp_path / "archon.db")
    add_endless_triggers(db, ("projects",))
    proc = popen("--db", str(db), "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    try:
        deadline = time.monotonic() + 60
        while cpu_seconds(proc.pid) < 2.0:  # far more work than the whole plan of this file needs
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the upgrade never got busy"
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - sent < 15  # promptly, not after the endless statement: generous under load
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err, err
    assert _ledger_rows(db) == 0
