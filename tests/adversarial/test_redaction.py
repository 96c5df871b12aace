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

from console.cli import main
from console.services.bundle import bundle_members
from console.services.doctor import run_doctor
from console.services.redaction import JSON_KEYS, Redactor, kept
from tests import damage
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
        if kept(value, ids=True):  # lenient: what no column would replace
            return
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            walk(parsed)
            return
        if ":" in value and " " not in value:  # an id or a reference: judged part by part
            found.update(part for part in value.split(":") if not kept(part, ids=True))
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


def members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


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
        forms = {form.lower(): secret for secret in secrets for form in spellings(secret)}
        # Whole tokens: the remote "origin" may not appear, the word "originals" may.
        anywhere = re.compile(rb"(?<![a-z0-9_])(?:" + b"|".join(
            re.escape(f) for f in sorted(forms, key=len, reverse=True)) + rb")(?![a-z0-9_])")
        for name, content in files.items():
            hit = anywhere.search(content.lower())
            assert hit is None, (name, hit.group(0), forms[hit.group(0)])
        with zipfile.ZipFile(out) as archive:
            assert all(info.comment == b"" for info in archive.infolist())


def test_demo_project_ids_and_claims_are_gone(tmp_path, demo_copy):
    db = demo_copy()
    out = tmp_path / "out" / "b.zip"
    main(["doctor", str(db), "--bundle", str(out), "--redact"])
    blob = b"".join(members(out).values())
    assert blob.count(b"prj-atlas-api") == 0 and b"atlas" not in blob and b"alice" not in blob
    assert not kept("prj-atlas-api", ids=True) and kept("apr-00000001", ids=True) and kept("pending")
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
        assert "Check that archon is running" in text and "`envs claim ID --op KIND" in text
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
