"""Redacted bundles: no original value leaks in any spelling, and the console's own words are untouched.

The originals are read straight from the database (every text cell, every JSON key and string, every
part of an id), and everything the allow-list does not keep is searched for in every member, as
it is, lower-cased, URL-encoded, base64, hex and JSON-escaped.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import zipfile
from datetime import timedelta
from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings, strategies as st

from console.cli.cli import main
from console.services.bundle import bundle_members
from console.services.doctor import run_doctor
from console.services.redaction import ID, JSON_KEYS, Redactor, Shape, kept
from tests import damage
from tests.adversarial.schema_secrets import plant_schema_secrets
from tests.tui.conftest import NOW

PLACEHOLDER = re.compile(r"\b(?:actor|claim|path|text|name|value|id|key|blob|table|column|index|trigger|view)-\d+\b")


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW.isoformat())


def originals(db) -> set[str]:
    """Every string in the database the allow-list does not keep (whole values, id parts, JSON keys)."""
    found: set[str] = set()

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key not in JSON_KEYS:
                    found.add(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            text(value)

    def text(value: str):
        if kept(value, ID | Shape.TIME):  # lenient: what no column would replace
            return
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            walk(parsed)
            return
        if ":" in value and " " not in value:  # an id or a reference: judged part by part
            found.update(part for part in value.split(":") if not kept(part, ID | Shape.TIME))
        else:
            found.add(value)

    conn = sqlite3.connect(db)
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                if isinstance(value, str):
                    text(value)
    conn.close()
    return found


def spellings(value: str) -> set[bytes]:
    raw = value.encode()
    return {raw, value.lower().encode(), quote(value, safe="").encode(), base64.b64encode(raw),
            raw.hex().encode(), raw.hex().upper().encode(), json.dumps(value)[1:-1].encode()}


def assert_absent(files: dict[str, bytes], secrets: set[str]) -> None:
    """No secret in any spelling, as a whole token, in any member."""
    forms = {form.lower(): secret for secret in secrets for form in spellings(secret)}
    # Whole tokens: the remote "origin" may not appear, the word "originals" may.
    anywhere = re.compile(rb"(?<![a-z0-9_])(?:" + b"|".join(
        re.escape(f) for f in sorted(forms, key=len, reverse=True)) + rb")(?![a-z0-9_])")
    for name, content in files.items():
        hit = anywhere.search(content.lower())
        assert hit is None, (name, hit.group(0), forms[hit.group(0)])


def members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.slow
def test_no_original_value_key_or_id_part_in_any_spelling(tmp_path, demo_copy):
    db = demo_copy()
    (tmp_path / "secrets").mkdir()
    damage_db = damage.with_secrets(tmp_path / "secrets" / "archon.db")
    for source in (db, damage_db):
        out = tmp_path / "out" / f"{source.parent.name}.zip"
        assert main(["doctor", str(source), "--bundle", str(out), "--redact"]) in (0, 1)
        files = members(out)
        secrets = {v for v in originals(source) if len(v) >= 4} | {str(source)}
        assert "prj-atlas-api" in secrets or source is damage_db  # the example is judged
        # schema.sql is archon's DDL (SQL keywords and archon's names): equal to the plain bundle's here.
        plain = tmp_path / "out" / f"{source.parent.name}-plain.zip"
        main(["doctor", str(source), "--bundle", str(plain)])
        assert files.pop("schema.sql") == members(plain)["schema.sql"]
        assert_absent(files, secrets)
        with zipfile.ZipFile(out) as archive:
            assert all(info.comment == b"" for info in archive.infolist())


@pytest.mark.slow
def test_demo_project_ids_and_claims_are_gone(tmp_path, demo_copy):
    db = demo_copy()
    out = tmp_path / "out" / "b.zip"
    main(["doctor", str(db), "--bundle", str(out), "--redact"])
    blob = b"".join(members(out).values())
    assert blob.count(b"prj-atlas-api") == 0 and b"atlas" not in blob and b"alice" not in blob
    assert not kept("prj-atlas-api", ID) and kept("apr-00000001", ID) and kept("pending")
    assert not kept("alice-2") and not kept("10.0.0.12") and not kept("4915112345678") and kept("1.10.0")
    assert Redactor(True).column("approval_request_events", "actor_reference", "alice-2").startswith("actor-")


@pytest.mark.parametrize("which", ["demo", "secrets"])
def test_report_prose_is_the_same_apart_from_placeholders(tmp_path, demo_copy, which):
    """Render the report with and without redaction: put every original back and they are equal."""
    if which == "demo":  # a day later, so overdue hand-offs ("Check that archon is running") show too
        db, now = demo_copy(), NOW + timedelta(days=1)
    else:  # ids that name things (`req-secret`, `env-secret`) in the findings' own sentences
        (tmp_path / "db").mkdir()
        db, now = damage.with_secrets(tmp_path / "db" / "archon.db"), damage.NOW
    report = run_doctor(db, now=now)
    plain = bundle_members(report, db, Redactor(False), now=now)
    redactor = Redactor(True)
    redacted = bundle_members(report, db, redactor, now=now)
    back = {placeholder: original for original, placeholder in redactor.mapping().items()}
    for member in ("report.txt", "report.json"):
        restored = PLACEHOLDER.sub(lambda m: json.dumps(back[m.group(0)])[1:-1] if member.endswith(".json")
                                   else back[m.group(0)], redacted[member])
        assert restored == plain[member], member
    text = redacted["report.txt"]
    assert "withheld" not in text  # every finding was rebuilt from the redacted data
    assert text.startswith("archon-console doctor: path-")
    if which == "demo":
        assert "Check that archon is running" in text and "`envs claim ID --takeover --reason TEXT`" in text
    else:
        assert "req-secret" not in text and "env-secret" not in text
        assert len(set(PLACEHOLDER.findall(text))) >= 3  # the path and the two ids


def test_other_objects_and_keys_are_replaced_and_archons_kept(tmp_path):
    (tmp_path / "db").mkdir()
    db = damage.with_secrets(tmp_path / "db" / "archon.db")
    conn = damage.connect(db)
    conn.execute("CREATE TABLE zelda_notes (note TEXT CHECK (note <> 'Quasimodo-literal'))")
    conn.execute("INSERT INTO zelda_notes VALUES ('hello Zelda')")
    damage.add_request(conn, "req-keys", project="p-secret", action='{"Zelda-key": {"QUASI_TOKEN": "s3cr3t-val"}}')
    conn.close()
    out = tmp_path / "out" / "b.zip"
    main(["doctor", str(db), "--bundle", str(out), "--redact"])
    files = members(out)
    blob = b"".join(files.values()).lower()
    for secret in (b"zelda", b"quasi", b"s3cr3t"):
        assert secret not in blob, [(n, c[max(0, c.lower().find(secret) - 80):c.lower().find(secret) + 40])
                                    for n, c in files.items() if secret in c.lower()]
    assert b"CREATE TABLE approval_requests" in files["schema.sql"]  # archon's DDL, CHECK lists and all
    assert b"'pending'" in files["schema.sql"]
    counts = json.loads(files["row_counts.json"])
    assert counts["approval_requests"] >= 2 and any(k.startswith("table-") and v == 1 for k, v in counts.items())


@pytest.mark.slow
@pytest.mark.parametrize("finding_id", sorted(damage.ANOMALIES))
def test_every_kind_of_damage_is_reported_alike_when_redacted(tmp_path, finding_id):
    """Each anomaly doctor knows gives the same finding on the redacted copy, with the same words."""
    db = damage.damaged(tmp_path / "archon.db", finding_id)
    report = run_doctor(db, now=damage.NOW)
    plain = bundle_members(report, db, Redactor(False), now=damage.NOW)
    redactor = Redactor(True)
    redacted = bundle_members(report, db, redactor, now=damage.NOW)
    back = {placeholder: original for original, placeholder in redactor.mapping().items()}
    restored = PLACEHOLDER.sub(lambda m: back[m.group(0)], redacted["report.txt"])
    assert restored == plain["report.txt"]
    assert finding_id in redacted["report.txt"] and "withheld" not in redacted["report.txt"]


# --- A value's shape proves nothing outside the places archon keeps such values (issue 17, finding 8) ---
# Main kept hex, UUIDs, short numbers and dates anywhere: a 32-hex DD_API_KEY, a UUID HEROKU_API_KEY,
# a 40-hex token, `123456789` and `1984-07-12` under `action_json.env` reached evidence.json verbatim.

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6ZWxkYSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWc"
ID_SHAPED = {
    "DD_API_KEY": "0f3a9c2b7d1e4f5a6b8c9d0e1f2a3b4c",  # 32 hex
    "HEROKU_API_KEY": "5b1c2d3e-4f5a-4b7c-8d9e-0f1a2b3c4d5e",  # a UUID
    "GITHUB_TOKEN": "9e107d9d372bb6826bd81d3542a419d6ab0c1f2e",  # 40 hex
    "SIGNING_KEY": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # 64 hex
    "PIN": "123456789",
    "BIRTHDAY": "1984-07-12",
    "SESSION": JWT,
    "TICKET": "tok-7f3a9c2b",  # a generated id's shape
    "SEED": "sha256:4d5e6f708192a3b4c5d6",
}
NUMBER_SECRET = 987654321


def _documents(value) -> list:
    """The value under every kind of key that is not on the allow-list of key paths."""
    return [
        {"env": {"DD_API_KEY": value}},
        {"command": ["curl", "-H", value]},
        {"zz_unknown": value},
        {"nested": {"run_id": value, "commit": value, "created_at": value, "timeout_seconds": value}},
        {"message": value, "reason": value, "remote": value, "user": value, "cwd": value},
        [value],
        [{"env": [value]}],
    ]


def _free_places() -> list[tuple[str, str]]:
    """Every column of archon's that keeps no shape, and columns of a table that is not archon's."""
    from console.services.redaction import shaped_columns

    return sorted(k for k, v in shaped_columns().items() if not v) + [("zz_notes", "id"), ("zz_notes", "note")]


def _hex(n):
    return st.text("0123456789abcdef", min_size=n, max_size=n)


_B64URL = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=8, max_size=40)
ID_SHAPES = st.one_of(
    _hex(32), _hex(40), _hex(64), st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()),
    st.integers(10_000, 10**12).map(str), st.dates().map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat()), st.datetimes().map(lambda d: d.isoformat(" ") + "Z"),
    st.tuples(_B64URL, _B64URL, _B64URL).map(".".join),
    st.from_regex(r"[a-z]{2,5}-[0-9a-f]{6,12}", fullmatch=True),
    st.from_regex(r"sha(1|256):[0-9a-f]{8,64}", fullmatch=True),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(value=ID_SHAPES)
def test_id_shaped_values_are_replaced_in_every_free_column_and_json_key(value):
    from console.services.redaction import kept

    assume(not kept(value))  # archon's own word (never, for these shapes; stated, not assumed away)
    redactor = Redactor(True)
    escaped = json.dumps(value)[1:-1]
    for table, column in _free_places():
        out = redactor.column(table, column, value)
        assert value not in str(out), (table, column, out)
        for document in _documents(value):
            out = redactor.column(table, column, json.dumps(document))
            assert value not in out and escaped not in out, (table, column, document, out)
        if value.isdigit():
            number = int(value)
            assert str(number) not in str(redactor.column(table, column, number)), (table, column)
            out = redactor.column(table, column, json.dumps({"env": {"PIN": number}, "zz": [number]}))
            assert str(number) not in out, (table, column, out)


def test_generated_ids_times_and_digests_are_kept_where_archon_keeps_them():
    """The report stays useful: the same shapes under their known columns and key paths are kept."""
    sha = ID_SHAPED["SIGNING_KEY"]
    r = Redactor(True)
    assert r.column("approval_requests", "id", "apr-00000042") == "apr-00000042"
    assert r.column("approval_requests", "created_at", "2026-05-01T12:00:00.000Z") == "2026-05-01T12:00:00.000Z"
    assert r.column("approval_requests", "action_fingerprint", sha) == sha
    assert r.column("execution_environments", "external_id", ID_SHAPED["HEROKU_API_KEY"]) == ID_SHAPED["HEROKU_API_KEY"]
    assert r.column("approval_request_events", "sequence", 3) == 3
    assert r.column("approval_request_events", "id", "apr-00000042:3") == "apr-00000042:3"
    assert r.column("approval_requests", "status", "pending") == "pending"
    commit, base = ID_SHAPED["GITHUB_TOKEN"], "1" * 39 + "a"
    action = {"remote": "origin", "commit": commit, "base_commit": base, "commit_count": 3, "force": False,
              "timeout_seconds": 900, "run_id": "run-build-00001", "env": {"DD_API_KEY": ID_SHAPED["DD_API_KEY"]}}
    out = json.loads(r.column("approval_requests", "action_json", json.dumps(action)))
    assert (out["commit"], out["base_commit"], out["commit_count"], out["timeout_seconds"]) == (commit, base, 3, 900)
    assert (out["run_id"], out["force"]) == ("run-build-00001", False)
    assert ID_SHAPED["DD_API_KEY"] not in json.dumps(out["env"])
    claim = r.column("execution_environments", "operation_claim_id", "console:alice@h:0123456789ab")
    assert claim.startswith("console:claim-") and claim.endswith(":0123456789ab")
    # the same values anywhere else are replaced
    assert r.column("approval_request_events", "reason", "apr-00000042").startswith("text-")
    assert r.column("zz_notes", "created_at", "2026-05-01T12:00:00.000Z").startswith("value-")
    assert r.column("zz_notes", "n", 3) != 3


def _plant(db) -> None:
    """Every free column of every table gets the id-shaped secrets: bare in some rows, inside a JSON
    document in others (triggers dropped and CHECKs off, so every column takes them)."""
    values = list(ID_SHAPED.values())
    document = json.dumps({"env": {**ID_SHAPED, "PIN_N": NUMBER_SECRET}, "command": ["curl", "-H", *values],
                           "zz_unknown": values, "nested": {"run_id": values[0], "commit": values[2]},
                           "message": values[5]})
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    conn.execute("CREATE TABLE zz_notes (id, note TEXT, n)")
    conn.executemany("INSERT INTO zz_notes VALUES (?, ?, ?)", [(v, v, NUMBER_SECRET) for v in values])
    present = {(t, c) for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
               for (c,) in conn.execute("SELECT name FROM pragma_table_info(?)", (t,)).fetchall()}
    choices = [document, *values]
    case = " ".join(f"WHEN {i} THEN ?" for i in range(len(choices)))
    for table, column in _free_places():
        if (table, column) in present and table != "zz_notes":
            conn.execute(f'UPDATE OR IGNORE "{table}" SET "{column}" = CASE rowid % {len(choices)} {case} END',
                         choices)
    conn.close()


@pytest.mark.slow
def test_id_shaped_secrets_in_every_column_leave_no_trace_in_any_member(tmp_path, demo_copy):
    (tmp_path / "secrets").mkdir()
    for source in (demo_copy(), damage.with_secrets(tmp_path / "secrets" / "archon.db")):
        _plant(source)
        out = tmp_path / "out" / f"{source.parent.name}.zip"
        assert main(["doctor", str(source), "--bundle", str(out), "--redact"]) in (0, 1)
        files = members(out)
        assert b'"row"' in files["evidence.json"]  # planted rows are quoted as evidence
        assert_absent(files, set(ID_SHAPED.values()) | {str(NUMBER_SECRET)})


def test_the_places_that_keep_shapes_are_archons_id_time_digest_and_number_columns():
    from console.services.redaction import archon_object, shaped_columns

    places = shaped_columns()
    assert places and all(archon_object(table) for table, _ in places)
    free = {column for (_, column), shape in places.items() if not shape}
    assert {"reason", "failure_message", "retained_output", "name", "title", "repo_path", "worktree_cmd",
            "snapshot_path", "actor_reference", "test_commands", "check_definitions", "exit_error"} <= free
    assert all(not shape for (_, column), shape in places.items() if column.endswith("_json"))
    assert places[("approval_requests", "expires_at")] == Shape.TIME | Shape.NUMBER
    assert places[("approval_requests", "id")] == ID
    assert places[("execution_environments", "template_digest")] == Shape.DIGEST


# --- Schema positions: a definition is archon's by what it says, never by its name (issue 17, R1) ---
# Main trusted any object named like archon's and never redacted column names or SQLite's messages:
# a DEFAULT, a CHECK, an added column's name, a foreign table and its parent in a foreign-key
# violation, a virtual table's module, a trigger body and an index WHERE under archon's names, and a
# foreign table's columns all reached schema.sql, report.txt/json, evidence.json, MANIFEST.json or
# row_counts.json verbatim.


def _redacted_bundle(tmp_path, source) -> dict[str, bytes]:
    out = tmp_path / "out" / f"{source.stem}-{len(list(tmp_path.glob('out/*')))}.zip"
    assert main(["doctor", str(source), "--bundle", str(out), "--redact"]) in (0, 1)
    return members(out)


def test_secrets_in_schema_positions_leave_no_trace_in_any_member(tmp_path, demo_copy):
    db = demo_copy()
    secrets = plant_schema_secrets(db, " a'b-")  # '"' in names: the hypothesis test below
    files = _redacted_bundle(tmp_path, db)
    assert_absent(files, set(secrets.values()))
    report = files["report.txt"].decode()
    # doctor still finds the violation, between placeholders, and the rest of the schema is archon's
    assert re.search(r"foreign_keys\.violations.*\n  found: 1 row\(s\): table-\d+ -> table-\d+", report)
    assert "archon 1.10.0 shape" in report
    assert json.loads(files["row_counts.json"])["projects"] == 6
    assert "unreadable: no such module" in json.loads(files["row_counts.json"]).values()
    schema = files["schema.sql"].decode()
    assert "CREATE TABLE approval_requests" in schema and "-- table projects: not archon's definition" in schema
    fields = json.loads(files["MANIFEST.json"])["redaction"]["fields"]
    assert any(re.fullmatch(r"projects\.column-\d+", f) for f in fields)


@pytest.mark.slow
@settings(max_examples=4, deadline=None)
@given(tag=st.text(alphabet="abcXYZ019 \"'-_]`;\n", min_size=3, max_size=8))
def test_schema_secrets_with_hostile_characters_are_replaced(tmp_path_factory, tag):
    from tests.tui.conftest import demo_file

    tmp = tmp_path_factory.mktemp("schema")
    db = tmp / "archon.db"
    db.write_bytes(demo_file(tmp_path_factory, "current", 200).read_bytes())
    secrets = plant_schema_secrets(db, tag)
    assert_absent(_redacted_bundle(tmp, db), set(secrets.values()))


def test_sqlite_messages_become_categories_and_schema_text_is_archons_by_content():
    from console.services.redaction import known_definition

    r = Redactor(True)
    assert r.error(sqlite3.OperationalError("no such module: S5MODULESECRET")) == "no such module"
    assert r.error(sqlite3.DatabaseError("malformed database schema (x) - S6")) == "malformed database schema"
    assert r.error(sqlite3.OperationalError("S7 near S7: syntax error")) == "SQLite error"
    assert Redactor(False).error(sqlite3.OperationalError("no such module: m")) == "no such module: m"
    trigger = "validate_project_build_execution_provider_insert"
    assert known_definition(trigger, "CREATE TRIGGER x BEGIN SELECT 1; END") is None
    conn = sqlite3.connect(":memory:")
    from console.db.migrations.registry import migrations_through
    from console.db.migrations.runner import apply_all

    apply_all(conn, migrations_through("1.10.0"))
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchone()
    assert known_definition(trigger, sql) == sql and known_definition(trigger, "  " + sql.replace(" ", "\n  ")) == sql
    assert known_definition(trigger, sql.replace("'host'", "'host2'")) is None
    assert r.column_name("projects", "repo_path") == "repo_path" and r.column_name("zz", "id") == "id"
    assert r.column_name("projects", "S2COLNAMESECRET").startswith("column-")


# --- audit --redact: every field of every record passes the redactor (issue 17, R2) ---
# Main sent only the fields listed in `audit._ORIGIN` to the redactor: event_type, from/to state,
# actor_classification and a created_at that is not a time were exported verbatim.

AUDITED = ("approval_request_events", "execution_environment_events", "execution_profile_audit_events")


def _plant_audit_secrets(db) -> set[str]:
    """One row per audited table with a unique secret in every column (metadata_json holds the
    profile events' actor and reason, and every event's OS account); triggers dropped and CHECKs off so every column takes it."""
    secrets: set[str] = set()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("PRAGMA foreign_keys = OFF")
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    for t, table in enumerate(AUDITED):
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        values = []
        for c, column in enumerate(columns):
            secret = f"Zq{t}{c:02d}x"
            secrets.add(secret)
            if column == "metadata_json":
                values.append(json.dumps({"actor": secret + "a", "reason": secret + "r", "zz": secret,
                                          "os_login": secret + "o", "os_uid": 4242}))
                secrets |= {secret + "a", secret + "r", secret + "o"}
            else:
                values.append(secret)
        conn.execute(f'INSERT INTO "{table}" ({", ".join(columns)}) VALUES ({", ".join("?" * len(columns))})',
                     values)
    conn.close()
    return secrets


def _audit(capsys, db, *extra) -> bytes:
    code = main(["audit", "--db", str(db), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.encode()


@pytest.mark.slow
def test_every_field_of_every_audit_format_passes_the_redactor(capsys, demo_copy):
    db = demo_copy()
    secrets = _plant_audit_secrets(db)
    shown: set[str] = set()
    for fmt in ("text", "jsonl", "csv"):
        plain = _audit(capsys, db, "--format", fmt)
        shown |= {s for s in secrets if s.encode() in plain}
        assert_absent({fmt: _audit(capsys, db, "--format", fmt, "--redact")}, secrets)
    # the plain export shows a planted secret in every field read from the database
    from console.services.audit import COLUMNS, FIELDS

    plain = [json.loads(line) for line in _audit(capsys, db, "--format", "jsonl").splitlines()]
    planted = [e for e in plain if str(e["event_id"]).startswith("Zq")]
    assert len(planted) == len(AUDITED)
    for event in planted:  # every field read from the database carries its planted secret
        fields = FIELDS[event["kind"]][1]
        for field, (_expression, origin) in zip(COLUMNS, fields):
            assert (origin is None) != str(event[field]).startswith("Zq"), (event["kind"], field)
    assert len(shown) >= 3 * len(planted)


def test_audit_fields_come_from_a_column_unless_they_are_the_consoles_constants():
    from console.services.audit import COLUMNS, FIELDS

    for kind, (_table, fields) in FIELDS.items():
        assert len(fields) == len(COLUMNS) + 1  # every field of the record, and the rowid
        for expression, origin in fields:
            assert origin is not None or expression in ("NULL", "rowid", f"'{kind}'"), (kind, expression)


@pytest.mark.slow
@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "current"])
def test_a_column_added_to_every_archon_table_keeps_the_report_but_not_its_name(tmp_path, demo_copy, release):
    """Each archon table rebuilt from the DDL it extends: the same release is detected and every
    finding is rebuilt (none withheld), while the added columns' names and DEFAULTs are gone."""
    db = demo_copy(release)
    conn = sqlite3.connect(db, isolation_level=None)
    tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                         "AND name NOT LIKE 'sqlite%'").fetchall()]
    for i, table in enumerate(tables):
        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "Zcol{i}q" TEXT DEFAULT \'Zdef{i}q\'')
    conn.close()
    report = run_doctor(db, now=NOW)
    plain = bundle_members(report, db, Redactor(False), now=NOW)
    redacted = bundle_members(report, db, Redactor(True), now=NOW)
    assert "withheld" not in redacted["report.txt"]
    release_line = [line for line in plain["report.txt"].splitlines() if "shape;" in line]
    assert release_line and release_line[0] in redacted["report.txt"]
    assert_absent({k: v.encode() for k, v in redacted.items()},
                  {f"Zcol{i}q" for i in range(len(tables))} | {f"Zdef{i}q" for i in range(len(tables))})


@pytest.mark.parametrize("kind", ["fresh", "upgraded"])
def test_archons_own_databases_keep_every_finding_when_redacted(tmp_path, kind):
    """A database archon itself made (its text differs from the console's steps in places: columns
    inline instead of added): definitions not byte-equal are withheld, but the copy is rebuilt from
    the nearest archon text, so the same release is detected and no finding is withheld."""
    from tests.reference import builder

    for release in builder.RELEASES:
        db = builder.variant(tmp_path / f"{release}-{kind}.db", release, kind)
        report = run_doctor(db, now=NOW)
        plain = bundle_members(report, db, Redactor(False), now=NOW)
        redacted = bundle_members(report, db, Redactor(True), now=NOW)
        assert "withheld" not in redacted["report.txt"], (release, redacted["report.txt"])
        shape = [line for line in plain["report.txt"].splitlines() if "shape" in line]
        assert shape and all(line in redacted["report.txt"] for line in shape), release
