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
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from console.cli import main
from console.db import limits
from console.db.connect import scratch_connection
from console.errors import EXIT_OK, EXIT_UNUSABLE
from console.services.doctor import run_doctor
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


def test_the_statement_budget_variable_does_not_apply_to_an_upgrade(tmp_path, monkeypatch):
    """Finding 2: ARCHON_CONSOLE_STATEMENT_SECONDS overrode the upgrade's own budget and interrupted
    018 after 17 committed steps. It still bounds the read-only commands' statements."""
    db = scenarios.ref_1820(tmp_path / "archon.db")
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "0.000001")
    code, _, err = _cli(db, "upgrade", "--plan", "--to", "1.10.0")
    assert code == EXIT_OK, err
    code, _, err = _cli(db, "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    assert code == EXIT_OK, err
    assert "interrupted" not in err and "ran longer" not in err
    # Outside an upgrade the variable and the 4 MB limit still hold, for every new connection.
    assert not limits.upgrading()
    conn = scratch_connection()
    try:
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limits.MAX_VALUE_BYTES
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                         "SELECT count(*) FROM c").fetchone()
    finally:
        conn.close()


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
