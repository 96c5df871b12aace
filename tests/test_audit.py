"""`archon-console audit`: one time-ordered stream over the three event tables, on real files."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.cli.cli import main
from console.demo.writer import generate
from widgets.safe_text import is_clean

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "archon.db"
    generate(path, requests=300, seed=7, now=NOW)
    return path


@pytest.fixture
def db(demo, make_db) -> Path:
    """A private copy a test may add events to."""
    return make_db(template=demo)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(capsys, db, *extra):
    code, out, err = run(capsys, "audit", "--db", db, "--format", "jsonl", *extra)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {kind: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for kind, table in (
            ("approval", "approval_request_events"), ("environment", "execution_environment_events"),
            ("profile", "execution_profile_audit_events"))}
    finally:
        conn.close()


def test_every_event_once_in_time_order(demo, capsys):
    events = jsonl(capsys, demo)
    expected = counts(demo)
    assert len(events) == sum(expected.values())
    assert {k: sum(e["kind"] == k for e in events) for k in expected} == expected
    keys = [(e["at"], e["kind"], e["event_id"]) for e in events]
    assert keys == sorted(keys)
    assert len({(e["kind"], e["event_id"]) for e in events}) == len(events)
    assert all(e["at"].endswith("Z") and "T" in e["at"] for e in events)


def test_jsonl_fast_path_equals_the_event_model(demo, capsys):
    """jsonl is encoded by SQLite's json_object; --redact goes through AuditEvent.to_json. Same data."""
    from console.db.connect import open_database
    from console.services.audit import AuditFilter, open_stream

    fast = jsonl(capsys, demo)
    with open_database(demo, read_only=True) as handle:
        stream = open_stream(handle.conn, AuditFilter())
        slow = [e.to_json() for e in stream.events()]
    assert fast == slow


def test_mixed_timestamp_forms_are_ordered_as_times(db, capsys):
    conn = sqlite3.connect(db)
    row = conn.execute("SELECT project_id, environment_id, max(sequence) FROM execution_environment_events "
                       "GROUP BY environment_id LIMIT 1").fetchone()
    project, env, seq = row
    # Three forms archon writes: CURRENT_TIMESTAMP text, ISO 8601 with Z, epoch milliseconds.
    for offset, created in enumerate(("2030-01-01T00:00:02.500Z", 1893456001000, "2030-01-01 00:00:03")):
        conn.execute("INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, "
                     "event_type, created_at) VALUES (?, ?, ?, ?, 'probe', ?)",
                     (f"probe-{offset}", project, env, seq + 1 + offset, created))
    conn.commit()
    conn.close()
    tail = jsonl(capsys, db)[-3:]
    assert [e["event_id"] for e in tail] == ["probe-1", "probe-0", "probe-2"]
    assert [e["at"] for e in tail] == ["2030-01-01T00:00:01.000Z", "2030-01-01T00:00:02.500Z",
                                       "2030-01-01T00:00:03.000Z"]


def test_filters(demo, capsys):
    every = jsonl(capsys, demo)
    project = every[len(every) // 2]["project_id"]
    assert {e["project_id"] for e in jsonl(capsys, demo, "--project", project)} == {project}
    assert len(jsonl(capsys, demo, "--project", project)) == sum(e["project_id"] == project for e in every)
    assert {e["kind"] for e in jsonl(capsys, demo, "--kind", "profile")} == {"profile"}
    two = jsonl(capsys, demo, "--kind", "profile", "--kind", "approval")
    assert {e["kind"] for e in two} == {"profile", "approval"}
    actor = next(e["actor"] for e in every if e["kind"] == "approval" and e["actor_class"] == "human")
    by_actor = jsonl(capsys, demo, "--actor", actor)
    assert by_actor and all(e["actor"] == actor for e in by_actor)
    assert len(by_actor) == sum(e["actor"] == actor for e in every)
    middle = every[len(every) // 2]["at"]
    since = jsonl(capsys, demo, "--since", middle)
    until = jsonl(capsys, demo, "--until", middle)
    assert since and until and len(since) + len(until) == len(every)
    assert all(e["at"] >= middle for e in since) and all(e["at"] < middle for e in until)


def test_relative_since_and_bad_times(demo, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2026-11-30 12:00:00")
    events = jsonl(capsys, demo, "--since", "7d")
    assert events and all(e["at"] >= "2026-11-23T12:00:00" for e in events)
    code, out, err = run(capsys, "audit", "--db", demo, "--since", "yesterday-ish")
    assert code == 2 and out == "" and "is not a time" in err and "Traceback" not in err
    code, _, err = run(capsys, "audit", "--db", demo, "--since", "2026-11-02", "--until", "2026-11-01")
    assert code == 2 and "later than --since" in err
    code, _, err = run(capsys, "audit", "--db", demo, "--follow", "--until", "1d")
    assert code == 2 and "--follow" in err
    code, _, err = run(capsys, "audit", "--db", demo, "--project", "no-such-project")
    assert code == 1 and "No project" in err


def test_csv_has_a_header_exact_utc_and_defuses_formulas(db, capsys):
    conn = sqlite3.connect(db)
    project, request, seq = conn.execute(
        "SELECT project_id, approval_request_id, max(sequence) FROM approval_request_events "
        "GROUP BY approval_request_id LIMIT 1").fetchone()
    conn.execute("INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
                 "from_status, to_status, actor_classification, actor_reference, reason, created_at) "
                 "VALUES ('evil', ?, ?, ?, 'note', 'pending', 'pending', 'human', '=HYPERLINK(\"x\")', "
                 "'+1 line one\nline two', '2031-01-01 00:00:00')", (project, request, seq + 1))
    conn.commit()
    conn.close()
    code, out, _ = run(capsys, "audit", "--db", db, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["at", "kind", "project_id", "subject_id", "event_type", "from", "to", "actor",
                             "actor_class", "reason", "event_id", "sequence", "os_account"]
    evil = rows[-1]
    assert evil["event_id"] == "evil" and evil["at"] == "2031-01-01T00:00:00.000Z"
    assert evil["actor"] == "'=HYPERLINK(\"x\")" and evil["reason"] == "'+1 line one\nline two"
    assert len(rows) == sum(counts(db).values())


def test_hostile_text_never_reaches_the_terminal(db, capsys):
    conn = sqlite3.connect(db)
    env, project, seq = conn.execute("SELECT environment_id, project_id, max(sequence) "
                                     "FROM execution_environment_events GROUP BY environment_id LIMIT 1").fetchone()
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e\u0085[bold]x[/]"
    conn.execute("INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, "
                 "actor_reference, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 ("h" + hostile, project, env, seq + 1, "e" + hostile, "a" + hostile, "r" + hostile))
    conn.commit()
    conn.close()
    for fmt in ("text", "jsonl", "csv"):
        code, out, err = run(capsys, "audit", "--db", db, "--format", fmt)
        assert code == 0 and is_clean(out) and is_clean(err), fmt
    last = jsonl(capsys, db)[-1]
    assert last["reason"] == "r" + hostile  # exact: escaped on the terminal, restored by a JSON reader


def test_redact_replaces_people_and_text_with_stable_placeholders(demo, capsys):
    plain = jsonl(capsys, demo)
    redacted = jsonl(capsys, demo, "--redact")
    assert len(redacted) == len(plain)
    assert [(e["at"], e["kind"], e["event_type"]) for e in redacted] == \
           [(e["at"], e["kind"], e["event_type"]) for e in plain]
    people = {e["actor"] for e in plain if e["actor_class"] == "human"}
    assert people
    text = json.dumps(redacted)
    assert not any(f'"{p}"' in text for p in people)
    reasons = {e["reason"] for e in plain if e["reason"]}
    assert reasons and not any(r in text for r in reasons)
    # stable: the same person is the same placeholder on every line
    mapping = {}
    for a, b in zip(plain, redacted):
        if a["actor"] in people:
            assert mapping.setdefault(a["actor"], b["actor"]) == b["actor"]
    assert len(set(mapping.values())) == len(mapping)


def test_text_is_humanised_and_read_only_leaves_every_byte(demo, capsys):
    before = hashlib.sha256(demo.read_bytes()).hexdigest()
    listing = sorted(os.listdir(demo.parent))
    code, out, err = run(capsys, "--read-only", "audit", "--db", demo)
    assert code == 0 and err == ""
    first = out.splitlines()[0]
    assert " ago " in first and first[:4].isdigit()
    assert hashlib.sha256(demo.read_bytes()).hexdigest() == before
    assert sorted(os.listdir(demo.parent)) == listing


def test_a_database_without_approvals_says_why(schema_db, capsys):
    path = schema_db("1.8.20")
    code, out, err = run(capsys, "audit", "--db", path, "--format", "jsonl")
    assert code == 0 and out == ""
    assert "approval events: none here" in err and "1.8.22" in err


def test_follow_streams_events_another_process_commits(db):
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "audit", "--db", str(db), "--format", "jsonl", "--follow",
         "--poll", "0.1", "--kind", "environment"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        before = counts(db)["environment"]
        lines = [proc.stdout.readline() for _ in range(before)]
        assert all(lines)
        writer = sqlite3.connect(db, isolation_level=None)
        env, project, seq = writer.execute(
            "SELECT environment_id, project_id, max(sequence) FROM execution_environment_events "
            "GROUP BY environment_id LIMIT 1").fetchone()
        for n in (1, 2):
            writer.execute("INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, "
                           "event_type) VALUES (?, ?, ?, ?, 'followed')", (f"new-{n}", project, env, seq + n))
            # approval events are filtered out: they must not show up
        writer.close()
        got = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [e["event_id"] for e in got] == ["new-1", "new-2"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_json_flag_means_jsonl(demo, capsys):
    code, out, _ = run(capsys, "--json", "audit", "--db", demo, "--kind", "profile")
    assert code == 0 and all(json.loads(line)["kind"] == "profile" for line in out.splitlines())
