"""Doctor verifies archon's CHECK and NOT NULL constraints itself (issue 23 item 2).

SQLite 3.40 skips CHECK constraints in a read-only quick_check, and doctor reads read-only: these
rows, written with the constraints bypassed, passed `doctor --full` with 0 errors. The oracle in the
generated tests is SQLite's own: a read-write `PRAGMA quick_check` on a copy of the file reports one
"CHECK constraint failed in T" per row and one "NULL value in T.C" per NULL.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.services.doctor import run_doctor
from tests import damage
from tests.approvals_helpers import add_request
from console.services.doctor.checks_constraints import ABSENT
from tests.conftest import add_project, connect, make_schema


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", damage.NOW.isoformat())


def table_sql(path: Path, table: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    finally:
        conn.close()


def set_table_sql(path: Path, table: str, sql: str) -> None:
    """Replace a table's CREATE TABLE text in place (writable_schema), as a crafted file would."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", (sql, table))
        conn.execute("PRAGMA writable_schema = OFF")
    finally:
        conn.close()


def write_bypassing(path: Path, tables: list[str], write) -> None:
    """Run `write(conn)` with the CHECK and NOT NULL constraints of `tables` out of the way (CHECKs
    ignored, NOT NULL removed from the text meanwhile), then put the schema back as it was."""
    originals = {t: table_sql(path, t) for t in tables}
    for table, sql in originals.items():
        set_table_sql(path, table, re.sub(r"(?<!IS )\bNOT NULL\b", "", sql))
    conn = connect(path)
    try:
        conn.execute("PRAGMA ignore_check_constraints = 1")
        write(conn)
    finally:
        conn.close()
    for table, sql in originals.items():
        set_table_sql(path, table, sql)


def sqlite_verdict(path: Path, tmp: Path) -> Counter:
    """SQLite's own verdict, from a read-write quick_check on a copy: Counter of its messages."""
    copy = tmp / "verdict-copy.db"
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    try:
        return Counter(r[0] for r in conn.execute("PRAGMA quick_check(100000)") if r[0] != "ok")
    finally:
        conn.close()
        copy.unlink()


def hostile(tmp_path: Path) -> Path:
    """An archon 1.10.0 database with a request of kind rm_rf, one with a malformed fingerprint and a
    project without a name."""
    path = make_schema(tmp_path / "archon.db")
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "apr-ok")
    conn.close()

    def write(conn):
        add_request(conn, "apr-rm", kind="rm_rf")
        conn.execute("INSERT INTO execution_runs (id, project_id) VALUES ('run-fp', 'p1')")
        conn.execute(
            "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
            "action_json, action_fingerprint, authority_schema_version, authority_json, expires_at) "
            "VALUES ('apr-fp', 'p1', 'run-fp', 'git_push', 1, '{}', 'NOT-A-SHA256', 1, '{}', '2026-11-01 14:00:00')")
        conn.execute("INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
                     "to_status, actor_classification, created_at) VALUES ('ev-fp', 'p1', 'apr-fp', 1, 'requested', "
                     "'pending', 'system', '2026-11-01 11:00:00')")
        conn.execute("INSERT INTO projects (id, name, repo_path) VALUES ('p-anon', NULL, '/repo/anon')")

    write_bypassing(path, ["projects"], write)
    return path


ACTION_KIND = "CHECK (action_kind IN ('git_push', 'custom_check'))"
FINGERPRINT = "CHECK (length(action_fingerprint) = 64 AND action_fingerprint NOT GLOB '*[^0-9a-f]*')"


def test_rows_breaking_constraints_are_named_with_table_row_and_constraint(tmp_path, capsys):
    path = hostile(tmp_path)
    assert sum(sqlite_verdict(path, tmp_path).values()) == 3  # SQLite agrees: three rows are bad
    code = main(["doctor", str(path), "--full", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["exit_code"] == 1
    found = {f["id"]: f for f in report["findings"]}
    checks = found["constraints.check_failed"]
    assert checks["severity"] == "error" and checks["count"] == 2
    assert {(r["table"], r["id"], r["constraint"]) for r in checks["rows"]} == {
        ("approval_requests", "apr-rm", ACTION_KIND), ("approval_requests", "apr-fp", FINGERPRINT)}
    assert "apr-rm" in checks["found"] and "action_kind IN" in checks["found"] and checks["why"] and checks["what_to_do"]
    nulls = found["constraints.not_null_failed"]
    assert nulls["rows"] == [{"table": "projects", "id": "p-anon", "constraint": "NOT NULL name"}]
    assert "constraints.unrecognised" not in found
    # the text report says the same; SQLite's read-only integrity_check sees the NULL, never the CHECKs
    assert main(["doctor", str(path), "--check", "constraints"]) == 1
    out = capsys.readouterr().out
    assert "constraints.check_failed" in out and "apr-rm" in out and "p-anon" in out and "NOT NULL name" in out
    assert found["integrity.failed"]["found"] == "1 problem(s): NULL value in projects.name"


@pytest.mark.slow
def test_a_clean_demo_database_verifies_every_constraint(tmp_path):
    from console.demo.writer import generate

    path = tmp_path / "demo.db"
    generate(path, requests=40, environments=8, now="2026-11-01 09:30:00")
    from console.services.doctor.checks_constraints import check_clauses, known_checks, make_plan

    report = run_doctor(path, checks=["constraints"], now=damage.NOW)
    assert report.ids() == [] and report.checks_run == ["constraints"] and report.exit_code() == 0
    conn = sqlite3.connect(path)
    try:
        plan = make_plan(conn)
        archon = [sql for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                  if name in known_checks()]
    finally:
        conn.close()
    assert plan.unrecognised == [] and plan.unchecked == []
    assert plan.checks == sum(len({c.key for c in check_clauses(sql)}) for sql in archon) >= 80


@pytest.mark.slow
@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "1.10.0"])
def test_every_release_s_constraints_are_known(tmp_path, release):
    from console.services.doctor.checks_constraints import make_plan

    path = make_schema(tmp_path / "archon.db", release)
    conn = sqlite3.connect(path)
    try:
        plan = make_plan(conn)
    finally:
        conn.close()
    assert plan.unrecognised == [] and plan.unchecked == [] and plan.checks >= 25
    assert not [c.label for t in plan.tables for c in t.constraints if ABSENT in c.label]


def test_clauses_are_read_with_sqlite_s_tokens():
    from console.services.doctor.checks_constraints import check_clauses

    sql = ("CREATE TABLE t (a TEXT CHECK (a <> ')') , \"check\" INT, [x(] INT, b TEXT -- CHECK (no)\n"
           ", CONSTRAINT \"named one\" CHECK ((b = 'it''s') OR /* ) */ b IS NULL), CHECK(a IN (x'0A', 1.5e3)))")
    clauses = check_clauses(sql)
    assert [c.text for c in clauses] == ["a <> ')'", "(b = 'it''s') OR /* ) */ b IS NULL", "a IN (x'0A', 1.5e3)"]
    assert [c.name for c in clauses] == [None, '"named one"', None]
    assert clauses[1].key == ("(", "b", "=", "'it''s'", ")", "or", "b", "is", "null")
    # whitespace, comments and the case of keywords do not matter; the case inside a literal does
    assert check_clauses("CHECK(B  =  'X')")[0].key == check_clauses("check (b /* */ = 'X')")[0].key
    assert check_clauses("CHECK(b = 'X')")[0].key != check_clauses("CHECK(b = 'x')")[0].key
    assert check_clauses("CHECK (a < > b)")[0].key != check_clauses("CHECK (a <> b)")[0].key
    assert check_clauses("CREATE TABLE t (a CHECK (a > (1)")[0].text == "a > (1)"  # unbalanced: to the end
    assert len(check_clauses("CHECK (" * 100_000)) == 1  # one pass: the first swallows the rest


# Each would break out of the expression, run something costly, or fail the scan, if doctor ran
# the file's text; doctor runs only the console's own text of a constraint it knows.
CRAFTED_CHECKS = [
    "CHECK (length(zeroblob(2000000000)) > 0)",  # string or blob too big, if evaluated
    "CHECK (abs(-9223372036854775807 - 1) > 0)",  # integer overflow, if evaluated
    "CHECK (id <> ')) OR 1 OR ((' /* ) OR (1 */)",  # parentheses in a literal and a comment
    "CHECK (lifecycle_state IN ('queued'))",  # another table's text: not this table's constraint
    "CONSTRAINT \"x\"\"; DROP TABLE projects; --\" CHECK (action_kind IN ('git_push', 'custom_check', 'rm_rf'))",
]


def test_crafted_check_text_is_never_run(tmp_path, capsys):
    path = hostile(tmp_path)
    conn = connect(path)
    conn.execute('ALTER TABLE approval_requests ADD COLUMN "z"" IS NULL OR 1 --" TEXT NOT NULL DEFAULT \'v\'')
    conn.close()
    sql = table_sql(path, "approval_requests")
    set_table_sql(path, "approval_requests", sql[:sql.rstrip().rindex(")")] + ",\n" + ",\n".join(CRAFTED_CHECKS) + ")")
    code = main(["doctor", str(path), "--check", "constraints", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    found = {f["id"]: f for f in report["findings"]}
    assert "constraints.unchecked" not in found and "constraints.failed" not in found  # nothing crafted ran
    unknown = found["constraints.unrecognised"]
    assert unknown["severity"] == "warning" and unknown["count"] == len(CRAFTED_CHECKS)
    assert [r["constraint"] for r in unknown["rows"]] == CRAFTED_CHECKS
    assert all(r["table"] == "approval_requests" for r in unknown["rows"])
    # archon's own constraints of the same table are still evaluated: the same two rows, no more
    assert {(r["id"], r["constraint"]) for r in found["constraints.check_failed"]["rows"]} == {
        ("apr-rm", ACTION_KIND), ("apr-fp", FINGERPRINT)}
    # the hostile column name is a quoted name, not SQL: its default holds, no row is flagged for it
    assert found["constraints.not_null_failed"]["rows"] == [
        {"table": "projects", "id": "p-anon", "constraint": "NOT NULL name"}]
    # (SQLite itself opens this schema only read-only: it drops CHECK constraints of a read-only
    # database unread, which is also why its read-only quick_check cannot see them)
    table = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert table.execute("SELECT count(*) FROM projects").fetchone()[0] == 2
    table.close()


def test_a_check_on_a_generated_column_is_not_evaluated(tmp_path, capsys):
    """A column of archon's name made GENERATED is computed from the file's expression at every read:
    archon's CHECK on it is named as not evaluated, and the expression never runs (it would fail the
    scan: string or blob too big)."""
    path = hostile(tmp_path)
    sql = table_sql(path, "approval_requests")
    crafted = sql.replace("authority_json            TEXT NOT NULL,",
                          "authority_json TEXT GENERATED ALWAYS AS (zeroblob(2000000000)) VIRTUAL,")
    assert crafted != sql
    set_table_sql(path, "approval_requests", crafted)
    assert main(["doctor", str(path), "--check", "constraints", "--json"]) == 1
    found = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "constraints.unchecked" not in found
    assert [r["constraint"] for r in found["constraints.unrecognised"]["rows"]] == [
        "CHECK (length(CAST(authority_json AS BLOB)) BETWEEN 2 AND 16384) (reads the generated column authority_json)",
        f"NOT NULL authority_json {ABSENT} (a generated column here)"]  # archon's, and not read either
    # the table's other constraints still ran (a virtual column shifts how the stored values read, so
    # which rows break them is the crafted file's business)
    assert found["constraints.check_failed"]["count"] > 0


@pytest.mark.slow
def test_a_redacted_bundle_withholds_the_file_s_constraint_text(tmp_path):
    """An unrecognised CHECK is the file's text (anybody's words): a redacted bundle names the finding
    and withholds the text and the row ids, as for any finding it cannot rebuild from its copy."""
    from console.services.bundle import bundle_members
    from console.services.redaction import Redactor

    path = hostile(tmp_path)
    secret = "CHECK (action_json <> 'sk_live_SECRET-TOKEN-42')"
    sql = table_sql(path, "approval_requests")
    set_table_sql(path, "approval_requests", sql[:sql.rstrip().rindex(")")] + ",\n" + secret + ")")
    report = run_doctor(path, now=damage.NOW)
    assert {"constraints.check_failed", "constraints.not_null_failed", "constraints.unrecognised"} <= set(report.ids())
    assert "SECRET-TOKEN" in report.finding("constraints.unrecognised").found
    members = bundle_members(report, path, Redactor(True), now=damage.NOW)
    text = "".join(v if isinstance(v, str) else v.decode("utf-8", "replace") for v in members.values())
    assert "SECRET-TOKEN" not in text and "apr-rm" not in text and "p-anon" not in text
    assert "constraints.unrecognised" in members["report.txt"] and "constraints.check_failed" in members["report.txt"]


# --- generated rows against SQLite's own verdict --------------------------------------------------

NOISE = st.one_of(
    st.none(), st.integers(-3, 70_000), st.text(max_size=6), st.binary(max_size=3),
    st.sampled_from(["git_push", "custom_check", "rm_rf", "pending", "approved", "consumed", "denied", "ready",
                     "retired", "direct", "queued", "{}", "[]", "0" * 64, "A" * 64, "2026-11-01 10:00:00", ""]),
    # affinity and collation tricks: text that reads as a number, a float equal to an integer, the
    # same letters in other case or with a trailing space, the same bytes as a blob
    st.sampled_from(["1", " 1", "1.0", 1.0, 0.5, "GIT_PUSH", "git_push ", "Pending", b"git_push", b"{}",
                     "a" * 63 + "\u00e9", "0" * 63 + "G", "{\"a\": 1}", "[1]", "null"]),
)


def _valid_request(i: int) -> dict:
    return {"id": f"apr-{i}", "project_id": "p1", "execution_run_id": f"run-{i}", "action_kind": "git_push",
            "action_schema_version": 1, "action_json": "{}", "action_fingerprint": hashlib.sha256(b"x").hexdigest(),
            "authority_schema_version": 1, "authority_json": "{}", "status": "pending",
            "expires_at": "2026-11-01 14:00:00", "decision_at": None, "consumed_at": None}


def _valid_environment(i: int) -> dict:
    return {"id": f"env-{i}", "project_id": "p1", "provider_kind": "docker", "provider_version": "1",
            "target_kind": "repo_root", "target_key": "k", "target_workspace_path": "/w", "environment_revision": 1,
            "workspace_mode": "direct", "environment_validation_fingerprint": "a" * 64, "template_identity": None,
            "template_digest": None, "lifecycle_state": "ready", "failure_message": None, "cleanup_claim_id": None,
            "cleanup_claimed_at": None, "cleanup_attempts": 0}


def _rows(valid):
    def row(i):
        base = valid(i)
        return st.fixed_dictionaries({k: (st.just(v) if k in ("id", "project_id", "execution_run_id")
                                          else st.one_of(st.just(v), NOISE)) for k, v in base.items()})
    return st.integers(1, 4).flatmap(lambda n: st.tuples(*[row(i) for i in range(n)]))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """archon's schema without its triggers (they would refuse some generated rows; constraints stay)."""
    path = make_schema(tmp_path_factory.mktemp("constraints") / "base.db")
    conn = connect(path)
    add_project(conn, "p1")
    for name, in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.close()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("table, valid", [("approval_requests", _valid_request),
                                          ("execution_environments", _valid_environment)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_rows_match_sqlite_s_own_verdict(base, tmp_path, table, valid, data):
    rows = data.draw(_rows(valid))
    path = tmp_path / "archon.db"
    shutil.copyfile(base, path)

    def write(conn):
        conn.execute("PRAGMA foreign_keys = OFF")
        for row in rows:
            if table == "approval_requests":
                conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, 'p1')", (row["execution_run_id"],))
            conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                         list(row.values()))

    write_bypassing(path, [table], write)
    verdict = sqlite_verdict(path, tmp_path)
    report = run_doctor(path, checks=["constraints"], now=damage.NOW)
    checks, nulls = report.finding("constraints.check_failed"), report.finding("constraints.not_null_failed")
    assert len({r["id"] for r in (checks.rows if checks else [])}) == verdict[f"CHECK constraint failed in {table}"]
    assert all(r["table"] == table for r in (checks.rows if checks else []))
    # NULLs as Python reads them back: SQLite 3.40's quick_check names NOT NULL columns of such a row
    # that hold values and misses some that hold NULL, so its NULL messages are no oracle
    conn = sqlite3.connect(path)
    try:
        declared = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[3]]
        expected = sorted((row[0], column) for row in conn.execute(f"SELECT id, {', '.join(declared)} FROM {table}")
                          for column, value in zip(declared, row[1:]) if value is None)
    finally:
        conn.close()
    assert sorted((r["id"], r["constraint"][len("NOT NULL "):]) for r in (nulls.rows if nulls else [])) == expected
    broken = bool(expected) or bool(verdict[f"CHECK constraint failed in {table}"])
    assert report.exit_code() == (1 if broken else 0)
    assert bool(report.ids()) == broken


@pytest.mark.slow
def test_archon_s_own_databases_have_no_unknown_constraint(tmp_path):
    """Every CHECK of a database archon created, upgraded or started directly at each release is one
    the console knows (the registry's steps, or ARCHON_CREATE_CHECKS for archon's fresh CREATE TABLE
    texts), and ARCHON_CREATE_CHECKS holds nothing else: each entry is in archon's text and not
    already the registry's."""
    from console.services.doctor.checks_constraints import ARCHON_CREATE_CHECKS, check_clauses, make_plan
    from tests.reference import builder

    seen: set[tuple[str, tuple[str, ...]]] = set()
    for release in builder.RELEASES:
        for kind in ("fresh", "upgraded", "direct"):
            path = builder.variant(tmp_path / f"{release}-{kind}.db", release, kind)
            conn = sqlite3.connect(path)
            try:
                plan = make_plan(conn)
                for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
                    seen |= {(name, c.key) for c in check_clauses(sql or "")}
            finally:
                conn.close()
            assert plan.unrecognised == [] and plan.unchecked == [], (release, kind)
            assert not [c.label for t in plan.tables for c in t.constraints if ABSENT in c.label], (release, kind)
    registry = make_schema(tmp_path / "registry.db")
    conn = sqlite3.connect(registry)
    try:
        ours = {(name, c.key) for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                for c in check_clauses(sql or "")}
    finally:
        conn.close()
    for table, texts in ARCHON_CREATE_CHECKS.items():
        for text in texts:
            key = (table, check_clauses(f"CHECK ({text})")[0].key)
            assert key in seen and key not in ours, key


# --- the two largest tables, checked inside the approvals pass ------------------------------------

def _valid_event(i: int) -> dict:
    return {"id": f"ev-{i}", "project_id": "p1", "approval_request_id": f"apr-{i}", "sequence": 1,
            "event_type": "requested", "from_status": None, "to_status": "pending", "actor_classification": "system",
            "actor_reference": None, "reason": None, "metadata_schema_version": 1, "metadata_json": None,
            "created_at": "2026-11-01 11:00:00"}


def _pairs():
    """A request and its event, both with noise in any column but their keys; the event's project
    may be another or NULL (an event the approvals pass never reads)."""
    def pair(i):
        request = {k: (st.just(v) if k in ("id", "project_id", "execution_run_id") else st.one_of(st.just(v), NOISE))
                   for k, v in _valid_request(i).items()}
        event = {k: (st.just(v) if k in ("id", "approval_request_id") else st.one_of(st.just(v), NOISE))
                 for k, v in _valid_event(i).items()}
        event["project_id"] = st.sampled_from(["p1", "p1", "p1", "p2", None])
        return st.tuples(st.fixed_dictionaries(request), st.fixed_dictionaries(event))
    return st.integers(1, 8).flatmap(lambda n: st.tuples(*[pair(i) for i in range(n)]))


def _write_pairs(path: Path, pairs) -> None:
    def write(conn):
        conn.execute("PRAGMA foreign_keys = OFF")
        for row in (r for pair in pairs for r in pair):
            table = "approval_requests" if "action_kind" in row else "approval_request_events"
            if table == "approval_requests":
                conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, 'p1')", (row["execution_run_id"],))
            conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                         list(row.values()))

    write_bypassing(path, ["approval_requests", "approval_request_events"], write)


def _folded_and_alone(path: Path, monkeypatch) -> tuple[list, list, list[str]]:
    """The constraints findings of a whole doctor run (the approvals pass evaluates the requests'
    and events' constraints) and of the constraints check alone (it scans every table), and the
    tables the whole run's constraints check scanned itself."""
    from console.services.doctor import checks_constraints

    scanned: list[str] = []
    real = checks_constraints.scan

    def scan(conn, plan):
        scanned.extend(t.table for t in plan.tables)
        return real(conn, plan)

    def shape(report):
        return [(f.id, f.count, f.found, f.rows) for f in report.findings if f.id.startswith("constraints.")]

    monkeypatch.setattr(checks_constraints, "scan", scan)
    folded = shape(run_doctor(path, now=damage.NOW))
    monkeypatch.setattr(checks_constraints, "scan", real)
    return folded, shape(run_doctor(path, checks=["constraints"], now=damage.NOW)), scanned


def _null_status():
    request, event = _valid_request(0), _valid_event(0)
    request["status"] = None  # SQLite's IN takes a NOT NULL column's NULL for a value outside the list
    return ((request, event),)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=_pairs())
@example(pairs=_null_status())
def test_the_approvals_pass_finds_what_the_scan_finds(base, tmp_path, monkeypatch, pairs):
    """Checked inside the approvals pass (issue 23 item 4: each table read once), the requests'
    and events' constraints give the findings the scan of each table gives: counts, rows, order."""
    path = tmp_path / "archon.db"
    shutil.copyfile(base, path)
    _write_pairs(path, pairs)
    folded, alone, scanned = _folded_and_alone(path, monkeypatch)
    assert folded == alone
    assert "approval_requests" not in scanned
    orphans = any(event["project_id"] != "p1" for _request, event in pairs)
    assert ("approval_request_events" in scanned) == orphans  # an event the pass never read: scanned


@pytest.mark.parametrize("orphan", [False, True], ids=["matched", "orphan"])
def test_many_broken_rows_across_the_pass_parts_are_kept_as_the_scan_keeps_them(base, tmp_path, monkeypatch, orphan):
    """More broken rows than a finding keeps, spread over every part of the pass (parallel parts on
    worker connections, and all on the caller's connection): the same rows, in the same order."""
    from console.db.connect import open_database

    path = tmp_path / "archon.db"
    shutil.copyfile(base, path)
    pairs = []
    for i in range(60):
        request, event = _valid_request(i), _valid_event(i)
        request["action_kind"] = "rm_rf" if i % 2 else request["action_kind"]
        request["expires_at"] = None if i % 3 == 0 else request["expires_at"]
        event["actor_classification"] = "robot" if i % 5 else event["actor_classification"]
        event["to_status"] = None if i % 7 == 0 else event["to_status"]
        event["project_id"] = None if orphan and i == 31 else "p1"
        pairs.append((request, event))
    _write_pairs(path, pairs)
    folded, alone, scanned = _folded_and_alone(path, monkeypatch)
    assert folded == alone and "approval_requests" not in scanned
    assert ("approval_request_events" in scanned) == orphan
    # a NULL to_status breaks its CHECK too: SQLite evaluates `IN` as if a NOT NULL column held no NULL
    assert dict((i, c) for i, c, _f, _r in folded) == {"constraints.check_failed": 30 + 9 + 48,
                                                        "constraints.not_null_failed": 20 + 9 + orphan}
    handle = open_database(path, read_only=True)
    try:  # no worker connections: the parts run one after the other on the caller's connection
        reports = [run_doctor(handle, now=damage.NOW), run_doctor(path, now=damage.NOW, full=True)]
    finally:
        handle.conn.close()
    for report in reports:
        assert [(f.id, f.count, f.found, f.rows) for f in report.findings if f.id.startswith("constraints.")] == alone


# --- archon's constraints the file does not hold ---------------------------------------------------

CASES = [  # (table, archon's text in the file, what the file holds instead, a write breaking archon's rule)
    ("approval_requests", "action_kind               TEXT NOT NULL,", "action_kind TEXT,",
     "UPDATE approval_requests SET action_kind = NULL"),
    ("approval_requests", "CHECK (action_kind IN ('git_push', 'custom_check')),", "",
     "UPDATE approval_requests SET action_kind = 'rm_rf'"),
    ("approval_requests", "CHECK (action_kind IN ('git_push', 'custom_check')),",
     "CHECK (action_kind COLLATE NOCASE IN ('git_push', 'custom_check')),",
     "UPDATE approval_requests SET action_kind = 'GIT_PUSH'"),
    ("approval_requests", "CHECK (action_kind IN ('git_push', 'custom_check')),",
     "CHECK (\"action_kind\" IN ('git_push', 'custom_check')),", "UPDATE approval_requests SET action_kind = 'rm_rf'"),
    ("approval_requests", "CHECK (status <> 'pending' OR decision_at IS NULL),",
     "CHECK ((status <> 'pending' OR decision_at) IS NULL),",
     "UPDATE approval_requests SET decision_at = '2026-11-01 10:00:00'"),
]
RENAMED = [case + (rename,) for case in CASES for rename in (str, str.upper, str.title)] + [
    ("projects", "name         TEXT NOT NULL,", "name TEXT,", "UPDATE projects SET name = NULL", str)]


@pytest.mark.parametrize("table, archon, instead, write, rename", RENAMED)
def test_a_constraint_the_file_lacks_or_a_table_name_s_case_hides_nothing(tmp_path, capsys, table, archon, instead,
                                                                           write, rename):
    """A row breaking one of archon's constraints is an error even when the file's table does not
    hold that constraint (dropped, or rewritten into a text doctor does not know, which stays
    unevaluated) and when the table's name is archon's in other case (SQLite's names are ASCII
    case-blind: archon reads APPROVAL_REQUESTS as approval_requests). Both passed with 0 errors."""
    path = make_schema(tmp_path / "archon.db")
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "apr-1")
    for name, in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.close()
    sql = table_sql(path, table)
    assert archon in sql
    set_table_sql(path, table, sql.replace(archon, instead))
    conn = connect(path)
    conn.execute("PRAGMA ignore_check_constraints = 1")
    conn.execute(write)
    conn.close()
    if rename(table) != table:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET name = ? WHERE name = ?", (rename(table), table))
        conn.execute("UPDATE sqlite_master SET tbl_name = ? WHERE tbl_name = ?", (rename(table), table))
        conn.execute("PRAGMA writable_schema = OFF")
        conn.close()
    code = main(["doctor", str(path), "--check", "constraints", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["exit_code"] == 1
    rows = [r for f in report["findings"] if f["id"] in ("constraints.check_failed", "constraints.not_null_failed")
            for r in f["rows"]]
    key = "apr-1" if table == "approval_requests" else "p1"
    assert rows and {(r["table"], r["id"]) for r in rows} == {(rename(table), key)}
    if instead:
        assert all(ABSENT in r["constraint"] for r in rows)


def test_a_value_that_makes_a_check_raise_is_a_broken_row_not_an_unchecked_table(tmp_path, capsys):
    """`json_valid(p) AND json_type(p) = 'object'` never raises in a CHECK (SQLite stops at the first
    false term) but raised "malformed JSON" when doctor selected it as a value (both sides computed):
    one row of text that is not JSON made the whole table unchecked, its other broken rows unnamed."""
    path = make_schema(tmp_path / "archon.db")
    conn = connect(path)
    add_project(conn, "p1")
    conn.close()

    def write(conn):
        for rid, revision, profile in (("rev-bad", 11, "not json"), ("rev-blob", 12, b"\x00"), ("rev-zero", 0, "{}")):
            conn.execute("INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
                         "profile_json) VALUES (?, 'p1', ?, 1, ?, ?)", (rid, revision, f"{revision:064d}", profile))

    write_bypassing(path, ["execution_profile_revisions"], write)
    assert sqlite_verdict(path, tmp_path)["CHECK constraint failed in execution_profile_revisions"] == 3
    assert main(["doctor", str(path), "--check", "constraints", "--json"]) == 1
    found = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "constraints.unchecked" not in found
    assert {(r["id"], r["constraint"].split()[1]) for r in found["constraints.check_failed"]["rows"]} == {
        ("rev-bad", "(json_valid(profile_json)"), ("rev-blob", "(json_valid(profile_json)"), ("rev-zero", "(revision")}


@pytest.mark.slow
@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "1.10.0"])
def test_every_archon_constraint_taken_out_of_the_file_is_still_evaluated(tmp_path, release):
    """Each CHECK of each archon table, rewritten into `CHECK (1)`, and all of a table's NOT NULLs
    removed: doctor plans archon's own text of each (labelled absent), so no rewrite of the file's
    schema can take one of archon's constraints out of the scan."""
    from console.services.doctor.checks_constraints import check_clauses, known_checks, make_plan

    path = make_schema(tmp_path / "archon.db", release)
    conn = sqlite3.connect(path)
    tables = [(n, s) for n, s in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
              if n in known_checks()]
    nulls = {n: [r[1] for r in conn.execute(f'PRAGMA table_info("{n}")') if r[3]] for n, _ in tables}
    conn.close()

    def planned(table: str, sql: str) -> set[str]:
        set_table_sql(path, table, sql)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            plan = make_plan(conn)
        finally:
            conn.close()
        assert plan.unchecked == []
        return {c.label for t in plan.tables if t.table == table for c in t.constraints}

    rewritten = 0
    for table, sql in tables:
        for clause in check_clauses(sql):
            if sql.count(clause.text) != 1:
                continue
            labels = planned(table, sql.replace(clause.text, "1"))
            assert f"CHECK ({' '.join(known_checks()[table][clause.key].split())}) {ABSENT}" in labels, (table, clause)
            rewritten += 1
        labels = planned(table, re.sub(r"(?<!IS )\bNOT NULL\b", "", sql))
        assert {f"NOT NULL {c} {ABSENT}" for c in nulls[table]} <= labels, table
        set_table_sql(path, table, sql)
    assert rewritten >= 25 and sum(map(len, nulls.values())) >= 50


def test_a_not_null_generated_column_is_named_not_read(tmp_path, capsys):
    """PRAGMA table_info leaves generated columns out: a NOT NULL one was neither evaluated nor named."""
    path = hostile(tmp_path)
    sql = table_sql(path, "approval_requests")
    set_table_sql(path, "approval_requests", sql.replace(
        "authority_json            TEXT NOT NULL,",
        "authority_json TEXT NOT NULL GENERATED ALWAYS AS (zeroblob(2000000000)) VIRTUAL,"))
    assert main(["doctor", str(path), "--check", "constraints", "--json"]) == 1
    found = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "constraints.unchecked" not in found
    assert "NOT NULL authority_json (a generated column here)" in [
        r["constraint"] for r in found["constraints.unrecognised"]["rows"]]


def test_a_view_in_place_of_an_archon_table_is_named(tmp_path, capsys):
    """Archon reads a view named approval_requests as its table; its rows break archon's CHECKs with
    nothing to hold them, and `doctor --check constraints` said 0 errors."""
    path = make_schema(tmp_path / "archon.db")
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "apr-1")
    conn.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE ar_data AS SELECT * FROM approval_requests")
    conn.execute("UPDATE ar_data SET action_kind = 'rm_rf'")
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("DELETE FROM sqlite_master WHERE tbl_name = 'approval_requests'")
    conn.execute("INSERT INTO sqlite_master VALUES ('view', 'approval_requests', 'approval_requests', 0, "
                 "'CREATE VIEW approval_requests AS SELECT * FROM ar_data')")
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()
    assert main(["doctor", str(path), "--check", "constraints", "--json"]) == 1
    found = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert found["constraints.unchecked"]["severity"] == "error"
    assert "approval_requests (a view where archon has a table" in found["constraints.unchecked"]["found"]
