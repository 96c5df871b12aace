"""Doctor recognises a rule of the console's 1.8.20 reconstruction that archon holds under its own
name (issue 18, finding 9).

Archon's text never shows the names of some rules the console reconstructs (archon's trigger raising
'Execution environment binding evidence is immutable' is not called
`preserve_execution_environment_binding_evidence`), so `schema.reconstructed_missing` fired on every
genuine archon database. For every reconstructed trigger and index: the same rule under any other
name is no finding; the same name's rule with another message, table, event, key or WHERE is.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
import sqlite3
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.db.migrations.steps import s001_baseline_1_8_20 as baseline
from console.db.sql import quote_identifier
from console.services.doctor import run_doctor
from tests.upgrade_helpers import make_schema

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
RULES = sorted((t, n) for t, n in baseline.reconstructed_objects() if t in ("trigger", "index"))
HEAD = re.compile(r"^(CREATE\s+(?:UNIQUE\s+)?(?:TRIGGER|INDEX)\s+)(\S+)", re.I)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A 1.10.0 database the console built from nothing: it holds the whole reconstruction."""
    return make_schema(tmp_path_factory.mktemp("renamed") / "console.db", "1.10.0")


def _stored(path, kind, name) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()[0]
    finally:
        conn.close()


def _replace(path, kind, name, sql) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"DROP {kind.upper()} {quote_identifier(name)}")
        conn.execute(sql)
    finally:
        conn.close()


def _findings(path) -> dict[str, str]:
    report = run_doctor(path, checks=["schema"], now=NOW)
    return {f.id: f.found for f in report.findings}


def _renamed(sql: str, new_name: str) -> str:
    return HEAD.sub(lambda m: m.group(1) + quote_identifier(new_name), sql, count=1)


NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                max_size=24).filter(lambda n: not n.lower().startswith("sqlite_"))


def test_every_reconstructed_rule_has_an_identity_beyond_its_name(built):
    """A trigger that raises no message (or an index SQLite cannot describe) could only be
    recognised by its name."""
    from console.db.rules import rule_of

    assert ("trigger", "preserve_execution_environment_binding_evidence") in RULES
    conn = sqlite3.connect(built)
    try:
        assert [(k, n) for k, n in RULES if rule_of(conn, k, n) is None] == []
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), RULES, ids=[n for _t, n in RULES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(new_name=NAMES)
def test_a_reconstructed_rule_under_another_name_is_no_finding(built, tmp_path_factory, kind, name, new_name):
    path = tmp_path_factory.mktemp("case") / "db.sqlite"
    shutil.copyfile(built, path)
    conn = sqlite3.connect(path)
    taken = {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    if new_name.lower() in taken:
        return
    _replace(path, kind, name, _renamed(_stored(path, kind, name), new_name))
    found = _findings(path)
    assert "schema.reconstructed_missing" not in found, found["schema.reconstructed_missing"]
    assert name in found["schema.reconstructed_renamed"]


def _changes(kind: str, name: str, sql: str) -> list[tuple[str, str]]:
    """(what, changed text) pairs of the rule under another name: each must be a finding."""
    out = []
    if kind == "trigger":
        out.append(("message", re.sub(r"RAISE\(ABORT, '", "RAISE(ABORT, 'Changed: ", sql)))
        table = re.search(r"\sON\s+(\w+)", sql).group(1)
        other = "execution_runs" if table != "execution_runs" else "projects"
        out.append(("table", re.sub(rf"\sON\s+{table}\b", f" ON {other}", sql, count=1)))
        event = re.search(r"\b(BEFORE|AFTER)\s+(INSERT|UPDATE|DELETE)\b", sql)
        swapped = "DELETE" if event.group(2) != "DELETE" else "UPDATE"
        out.append(("event", sql[:event.start(2)] + swapped + re.sub(
            r"^\s+OF\s+[\w\s,]+?(?=\s+ON\s)", "", sql[event.end(2):], count=1)))
    else:
        out.append(("where", sql + " WHERE linked_project_id IS NOT NULL" if " WHERE " not in sql
                    else sql.split(" WHERE ")[0]))
        out.append(("unique", sql.replace("CREATE INDEX", "CREATE UNIQUE INDEX", 1)))
        out.append(("key", re.sub(r"\(([^)]*)\)", r"(\1 DESC)", sql, count=1)))
    return [(what, _renamed(text, "archon_own_name")) for what, text in out]


@pytest.mark.parametrize(("kind", "name"), RULES, ids=[n for _t, n in RULES])
def test_another_rule_under_another_name_is_still_a_finding(built, tmp_path, kind, name):
    sql = _stored(built, kind, name)
    for what, changed in _changes(kind, name, sql):
        path = tmp_path / f"{what}.db"
        shutil.copyfile(built, path)
        _replace(path, kind, name, changed)
        found = _findings(path)
        assert name in found.get("schema.reconstructed_missing", ""), (what, changed, found)


TRIGGERS = [(t, n) for t, n in RULES if t == "trigger"]
RAISE = re.compile(r"SELECT\s+(RAISE\(ABORT, '(?:[^']|'')*'\))\s*;")
CONDITIONS = st.one_of(st.integers(-5, 5).map(str), st.integers(0, 9).map(lambda n: f"{n} > 0"),
                       st.sampled_from(["0", "NULL", "(SELECT 0)", "'' = 'x'", "1 = 2",
                                        "(SELECT count(*) FROM sqlite_master) < 0"]))


def _weakened(sql: str, how: str, condition: str) -> str:
    """The console's text with its RAISE under a condition of the trigger's own (or without its WHEN):
    the same claim (table, event, message), not the same rule."""
    when = re.search(r"\sWHEN\s", sql)
    begin = re.search(r"\sBEGIN\s", sql)
    if how == "when":  # WHEN <cond> [AND (the console's WHEN)]
        if when:
            return sql[:when.end()] + f"({condition}) AND (" + sql[when.end():begin.start()] + ")" + sql[begin.start():]
        return sql[:begin.start()] + f" WHEN {condition}" + sql[begin.start():]
    if how == "no-when":
        return sql[:when.start()] + sql[begin.start():] if when else sql + " "
    if how == "case":
        return RAISE.sub(lambda m: f"SELECT CASE WHEN {condition} THEN {m.group(1)} END;", sql)
    if how == "where":
        return RAISE.sub(lambda m: f"SELECT {m.group(1)} WHERE {condition};", sql)
    assert how == "from-where"
    return RAISE.sub(lambda m: f"SELECT {m.group(1)} FROM (SELECT 1 AS one) WHERE {condition};", sql)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), TRIGGERS, ids=[n for _t, n in TRIGGERS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["when", "no-when", "case", "where", "from-where"]), condition=CONDITIONS,
       new_name=NAMES)
def test_the_same_message_under_a_condition_of_its_own_is_never_the_rule(built, tmp_path_factory, kind, name,
                                                                         how, condition, new_name):
    """atk18 upgrade finding 3: `WHEN 0` (or any WHEN, CASE WHEN or WHERE of the trigger's own around
    its RAISE) raises the console's message less often or never; doctor said "the database enforces
    the same rule". Such a trigger is now a warning to check it, never the info."""
    path = tmp_path_factory.mktemp("weak") / "db.sqlite"
    shutil.copyfile(built, path)
    conn = sqlite3.connect(path)
    taken = {r[0].lower() for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    if new_name.lower() in taken:
        return
    sql = _stored(path, kind, name)
    weak = _weakened(sql, how, condition)
    assert weak != sql
    _replace(path, kind, name, _renamed(weak, new_name))
    found = _findings(path)
    assert name not in found.get("schema.reconstructed_renamed", ""), (how, weak)
    held = found["schema.reconstructed_renamed_unproven"]
    assert name in held, (how, weak, found)


def _rewritten(sql: str, random) -> str:
    """The same trigger written differently: whitespace and comments, keyword case, FOR EACH ROW."""
    if random.random() < 0.5:
        sql = re.sub(r"\s(WHEN|BEGIN)\s", lambda m: f" FOR EACH ROW {m.group(1)} ", sql, count=1)
    parts = re.split(r"('(?:[^']|'')*')", sql)
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a string literal: exactly as it is
            out.append(part)
            continue
        part = "".join(c.swapcase() if random.random() < 0.5 else c for c in part)
        out.append(re.sub(r"\s+", lambda m: random.choice([" ", "\n\t", "  /* note */ ", " -- x\n"]), part))
    return "".join(out)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), TRIGGERS, ids=[n for _t, n in TRIGGERS])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
def test_the_same_rule_written_differently_is_still_recognised(built, tmp_path_factory, kind, name, seed):
    """What may differ without changing what is enforced (console/db/rules.py `same_strength`)."""
    import random as randomness

    random = randomness.Random(seed)  # one draw per character: a seed keeps hypothesis's input small
    path = tmp_path_factory.mktemp("same") / "db.sqlite"
    shutil.copyfile(built, path)
    _replace(path, kind, name, _rewritten(_renamed(_stored(path, kind, name), "archon_own_name"), random))
    found = _findings(path)
    assert "schema.reconstructed_renamed_unproven" not in found, found
    assert name in found["schema.reconstructed_renamed"]


@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "1.10.0"])
def test_doctor_warns_nothing_on_archons_own_databases(tmp_path, release):
    """A genuine archon database, created by `release` or upgraded to it by archon: no warning (and
    no error) at all; before, schema.reconstructed_missing fired on every one of them."""
    from tests.reference import builder

    for kind in ("fresh", "upgraded"):
        path = builder.variant(tmp_path / f"{kind}.db", release, kind)
        report = run_doctor(path, now=NOW)
        loud = [f"{f.id}: {f.found}" for f in report.findings if f.severity in ("warning", "error")]
        assert not loud, (kind, loud)


PATHOLOGICAL = ("RAISE(ABORT, 'x " * 100_000, "'" * 300_001, '"' * 300_001 + "'", "/*" * 200_000,
                "RAISE(ABORT, " + "''" * 200_000, "[" * 300_000, "`" * 300_001, "x'" * 200_000, ") " * 300_000)


@pytest.mark.slow
def test_a_hostile_trigger_text_is_read_in_linear_time(tmp_path):
    """Trigger text is the database's, hence hostile: doctor now reads every trigger's text to find
    what it RAISEs. 100,000 unclosed `RAISE(ABORT, 'x` in a comment (where SQLite keeps them) and
    texts made of one opening character repeated (300,000 `[` took 42 s before every literal, name
    and comment was allowed to run to the end) must each be read in one pass. The work runs in a
    child process with a timeout, so a pattern that backtracks fails the test instead of hanging it."""
    import subprocess
    import sys

    path = make_schema(tmp_path / "hostile.db", "1.10.0")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER preserve_execution_environment_binding_evidence")
    noise = "RAISE(ABORT, 'x " * 100_000
    conn.execute(f"CREATE TRIGGER hostile BEFORE DELETE ON execution_environment_run_bindings "
                 f"BEGIN /* {noise} */ SELECT 1; END")
    conn.close()
    code = ("import sys; from datetime import datetime, timezone; from console.services.doctor import run_doctor\n"
            "from console.db.rules import trigger_rule\n"
            "from tests.test_doctor_renamed_rules import PATHOLOGICAL\n"
            "for text in PATHOLOGICAL: trigger_rule('t', 'CREATE TRIGGER ' + text); trigger_rule('t', text)\n"
            "r = run_doctor(sys.argv[1], checks=['schema'], now=datetime.now(timezone.utc))\n"
            "print(sorted(f.id for f in r.findings))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "schema.reconstructed_missing" in done.stdout


def test_a_redacted_bundle_keeps_the_finding_and_not_the_name(built, tmp_path):
    """The redacted copy doctor re-runs on holds the console's text of the rule under a placeholder
    name, so the finding is not withheld, and neither the database's name nor its text is shown."""
    from console.services.bundle import bundle_members
    from console.services.redaction import Redactor

    path = tmp_path / "db.sqlite"
    shutil.copyfile(built, path)
    name = "preserve_execution_environment_binding_evidence"
    secret = "zsecretrulenameq"
    _replace(path, "trigger", name, _renamed(_stored(path, "trigger", name), secret).replace(
        "BEGIN", "BEGIN SELECT 'zsecretbodyq';", 1))
    report = run_doctor(path, now=NOW)
    files = bundle_members(report, path, Redactor(True), now=NOW)
    text = "\n".join(v if isinstance(v, str) else v.decode("utf-8", "replace") for v in files.values())
    assert "zsecret" not in text.lower()
    finding = [line for line in files["report.txt"].splitlines() if line.startswith("  found: 1 held: trigger")]
    assert finding and name in finding[0], files["report.txt"]


def test_a_redacted_bundle_does_not_make_a_weak_trigger_the_rule(built, tmp_path):
    """atk18 upgrade finding 3: the redacted copy doctor re-runs on put the console's full-strength
    text in place of a renamed trigger that raises the same message under `WHEN 0`, so the bundle's
    report vouched for a rule the database does not enforce. It keeps the warning instead, and the
    copy holds no trigger as strong as the console's for it (nor the original's text)."""
    from console.db.connect import connect_raw
    from console.db.rules import same_strength
    from console.services.bundle import bundle_members
    from console.services.redacted_copy import redacted_copy
    from console.services.redaction import Redactor

    path = tmp_path / "db.sqlite"
    shutil.copyfile(built, path)
    name = "preserve_execution_environment_binding_evidence"
    console_text = _stored(path, "trigger", name)
    _replace(path, "trigger", name, _renamed(_weakened(console_text, "when", "0 /* zsecretbodyq */"),
                                             "zsecretrulenameq"))
    report = run_doctor(path, now=NOW)
    assert report.finding("schema.reconstructed_renamed_unproven") is not None
    files = bundle_members(report, path, Redactor(True), now=NOW)
    text = "\n".join(v if isinstance(v, str) else v.decode("utf-8", "replace") for v in files.values())
    assert "zsecret" not in text.lower()
    shown = files["report.txt"]
    assert "held under another name, but with a condition" in shown and name in shown, shown
    assert "Rules of the console's 1.8.20 reconstruction are held under archon's own names" not in shown
    conn = connect_raw(path)
    try:
        copy = redacted_copy(conn, Redactor(True))
        texts = [r[0] for r in copy.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' "
                                            "AND sql LIKE '%binding evidence is immutable%'")]
        copy.close()
    finally:
        conn.close()
    assert len(texts) == 1 and not same_strength("trigger", texts[0], console_text), texts
