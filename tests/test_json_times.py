"""Every `--json` output prints an instant in one form (issue 21 item 9): ISO 8601 UTC with
milliseconds and `Z` (`2026-12-02T03:31:09.000Z`), whatever form archon stored it in (its
`CURRENT_TIMESTAMP` text, ISO 8601 with an offset, epoch milliseconds). The one place is
console/clock.py `json_times`, reached through console/cli/output.py `json_document`.

The walk runs every command of the parser that prints JSON on a demo database whose time columns
hold each stored form, and checks every field: an instant-named one (`at`, `..._at`, `since`, ...)
and any value at all that looks like a time. A command the parser gains is refused here until it is
walked or listed in `NO_JSON_TIMES` with its reason.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.cli.cli import main
from console.clock import db_time, json_time, parse_time

ONE_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
# A value that reads as a time in any of the forms archon writes, or as the console's text form.
TIME_LIKE = re.compile(r"\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?")
TIME_KEY = re.compile(r"(?:at|since|until|now|\w+_at)")
DOCUMENTS = {"action", "authority"}  # parsed copies of archon's own JSON: printed as archon wrote them
HOSTILE = "not a time \x1b[31m"

# Commands whose output is not a `--json` document of this console, each with why.
NO_JSON_TIMES = {
    "inspect": "opens the terminal console on a snapshot; `inspect --keep-snapshot DIR` then any command with --db",
    "query": "a SQL prompt answers with the values as the database holds them (rows are lists, no named time fields)",
    "serve": "the fleet's wire protocol (tests/fleet); the fleet client prints hosts' answers through emit_json",
}


def _stored_forms(db: Path) -> dict[str, object]:
    """Put every stored form archon writes into time columns the walk reads."""
    conn = sqlite3.connect(db)
    try:
        # archon's triggers keep these columns immutable: set aside while the forms are written
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN "
                                "('approval_requests', 'approval_request_events', 'projects')").fetchall()
        for name, _sql in triggers:
            conn.execute(f'DROP TRIGGER "{name}"')
        ids = [r[0] for r in conn.execute("SELECT id FROM approval_requests ORDER BY id LIMIT 4")]
        forms = {ids[0]: "2026-11-30T14:02:11.250+02:00", ids[1]: 1796047331123, ids[2]: "2026-11-30T12:02:11Z",
                 ids[3]: HOSTILE}
        for rid, value in forms.items():
            conn.execute("UPDATE approval_requests SET created_at = ? WHERE id = ?", (value, rid))
        conn.execute("UPDATE approval_request_events SET created_at = ? WHERE approval_request_id = ?",
                     (1796047331123, ids[1]))
        conn.execute("UPDATE projects SET created_at = ? WHERE rowid = (SELECT min(rowid) FROM projects)",
                     ("2026-08-24T10:25:30.5Z",))
        for _name, sql in triggers:
            conn.execute(sql)
        conn.commit()
        return forms
    finally:
        conn.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict[str, object]]:
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("times") / "demo.db"
    generate(path, requests=200, seed=7, overwrite=True, wal=False)
    return path, _stored_forms(path)


def _ids(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "pending": one("SELECT id FROM approval_requests WHERE status = 'pending' AND expires_at > "
                           "strftime('%Y-%m-%d %H:%M:%S', 'now', '+10 minutes') ORDER BY expires_at DESC LIMIT 1"),
            "approved": one("SELECT id FROM approval_requests WHERE status = 'approved' ORDER BY id DESC LIMIT 1"),
            "request": one("SELECT id FROM approval_requests ORDER BY rowid LIMIT 1 OFFSET 1"),
            "env": one("SELECT id FROM execution_environments WHERE lifecycle_state IN ('ready', 'running') "
                       "AND operation_claim_id IS NULL ORDER BY id LIMIT 1"),
            "project": one("SELECT id FROM projects ORDER BY rowid LIMIT 1"),
        }
    finally:
        conn.close()


def _walk(value, path="", inside_document=False):
    """Every (path, key, value) leaf of a JSON document, and whether it is inside archon's own JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}", inside_document or key in DOCUMENTS)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, f"{path}[]", inside_document)
    else:
        yield path, value, inside_document


def _offenders(documents) -> list[str]:
    bad = []
    for document in documents:
        for path, value, inside in _walk(document):
            if inside:
                continue
            key = re.sub(r"\[\]$", "", path).rsplit(".", 1)[-1]
            named = bool(TIME_KEY.fullmatch(key))
            if named and value not in (None, HOSTILE) and not (isinstance(value, str) and ONE_FORM.fullmatch(value)):
                bad.append(f"{path} = {value!r}")
            elif isinstance(value, str) and TIME_LIKE.fullmatch(value) and not ONE_FORM.fullmatch(value):
                bad.append(f"{path} = {value!r}")
    return bad


def _run(capsys, db: Path, *argv: str) -> tuple[int, list]:
    code = main(["--json", "--db", str(db), *argv])
    out = capsys.readouterr().out
    if out.lstrip().startswith("{") or out.lstrip().startswith("["):
        try:
            return code, [json.loads(out)]
        except json.JSONDecodeError:
            pass
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]  # JSON Lines


def test_the_one_form_of_each_stored_form():
    assert json_time("2026-12-02 03:31:09") == "2026-12-02T03:31:09.000Z"  # CURRENT_TIMESTAMP
    assert json_time("2026-12-02T05:31:09.5+02:00") == "2026-12-02T03:31:09.500Z"  # ISO with an offset
    assert json_time(1796182269123) == "2026-12-02T03:31:09.123Z"  # epoch milliseconds
    assert json_time("1796182269123") == "2026-12-02T03:31:09.123Z"  # ... stored as text
    # digits that also read as an ISO basic date (1712-03-04) are still epoch milliseconds
    assert json_time(1712030400000) == "2024-04-02T04:00:00.000Z"
    assert json_time("2026-12-02T03:31:09.123Z") == "2026-12-02T03:31:09.123Z"  # already the form
    for not_a_time in (HOSTILE, "", "nan", float("nan"), float("inf"), None, True, [1], "9" * 40):
        assert json_time(not_a_time) is not_a_time or json_time(not_a_time) == not_a_time


@pytest.mark.slow
@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                               timezone(timedelta(hours=-8))])),
       st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(timezone.utc)))
def test_every_form_of_an_instant_prints_one_text_that_sorts_as_time(a, b):
    a = a.replace(microsecond=a.microsecond // 1000 * 1000)
    forms = {json_time(a.isoformat()), json_time(db_time(a) + f".{a.microsecond // 1000:03d}")}
    millis = round(a.timestamp() * 1000)
    if 1e11 < millis < 1e13:  # epoch milliseconds: 12-13 digits from 1973 to 2286 (fewer read as seconds)
        forms.add(json_time(millis))
    assert len(forms) == 1
    text = forms.pop()
    assert ONE_FORM.fullmatch(text) and parse_time(text) == a.astimezone(timezone.utc)
    assert json_time(text) == text
    other = json_time(db_time(b))
    assert (text < other) == (a < b.replace(microsecond=0)) or a == b.replace(microsecond=0) or text == other


def _read_commands(ids: dict[str, str], tmp: Path) -> dict[str, list[tuple[str, ...]]]:
    return {
        "projects": [("projects", "list")],
        "profiles": [("profiles", "list", ids["project"]), ("profiles", "show", ids["project"], "r1"),
                     ("profiles", "diff", ids["project"], "r1", "r1")],
        "approvals": [("approvals", "list", "--status", "all", "--limit", "500"),
                      ("approvals", "show", ids["request"]),
                      ("approvals", "show", ids["request"], "--as-of", "2030-01-01 00:00:00")],
        "envs": [("envs", "list"), ("envs", "show", ids["env"]),
                 ("envs", "show", ids["env"], "--as-of", "2030-01-01 00:00:00")],
        "doctor": [("doctor",), ("doctor", "--list-checks"), ("doctor", "--bundle", str(tmp / "out" / "b.zip"))],
        "upgrade": [("upgrade", "--plan")],
        "audit": [("audit", "--format", "jsonl"), ("audit", "--format", "jsonl", "--redact")],
        "help": [("help", "approvals", "list")],
        "completion": [("completion", "bash")],
        "version": [("--version",)],
    }


@pytest.mark.slow
def test_every_read_command_prints_one_time_form(demo, capsys, tmp_path):
    db, _forms = demo
    documents, bad = [], []
    for family, commands in _read_commands(_ids(db), tmp_path).items():
        for argv in commands:
            code, docs = _run(capsys, db, *argv)
            assert code in (0, 1), (argv, docs)
            documents += docs
            bad += [f"{' '.join(argv)}: {b}" for b in _offenders(docs)]
    assert bad == []
    shown = json.dumps(documents)
    assert "2026-11-30T12:02:11.250Z" in shown and "2026-11-30T14:02:11.123Z" in shown  # offset and epoch ms
    assert json.dumps(HOSTILE)[1:-1] in shown  # not a time: printed as stored


@pytest.mark.slow
def test_every_write_and_the_demo_print_one_time_form(demo, capsys, tmp_path):
    import shutil

    db = tmp_path / "copy.db"
    shutil.copyfile(demo[0], db)
    ids = _ids(db)
    writes = [
        ("approvals", "approve", ids["pending"], "--as", "zed", "--reason", "ok", "--requester-unknown-ok"),
        ("approvals", "deny", ids["pending"], "--as", "zed", "--reason", "again"),
        ("approvals", "revoke", ids["approved"], "--as", "zed", "--reason", "withdrawn"),
        ("approvals", "expire"),
        ("envs", "claim", ids["env"], "--op", "stop", "--as", "zed"),
        ("envs", "release", ids["env"], "--as", "zed"),
        ("envs", "complete", ids["env"], "--as", "zed"),
        ("profiles", "activate", ids["project"], "r1", "--reason", "rollback", "--as", "zed"),
        ("demo", str(tmp_path / "fresh.db"), "--requests", "20"),
    ]
    bad = []
    for argv in writes:
        code, docs = _run(capsys, db, *argv)
        assert code in (0, 1, 3), (argv, docs)
        bad += [f"{' '.join(argv)}: {b}" for b in _offenders(docs)]
    assert bad == []


@pytest.mark.slow
def test_approvals_watch_prints_one_time_form(demo, tmp_path):
    import shutil

    from tests.watch_helpers import Watch

    db = tmp_path / "watched.db"
    shutil.copyfile(demo[0], db)
    watch = Watch(db)
    try:
        watch.ready()
        assert main(["--db", str(db), "approvals", "expire"]) in (0, 1)
        changes = watch.changes(1)
    finally:
        watch.stop()
    assert _offenders(changes) == []
    assert ONE_FORM.fullmatch(changes[0]["at"])


def test_every_command_is_walked_or_says_why_not(tmp_path):
    """The walk above names each command family of the parser; a new one must join it."""
    from console.cli import parser as cli

    walked = set(_read_commands(dict.fromkeys(("project", "request", "env"), "x"), tmp_path))
    walked |= {"approvals", "envs", "profiles", "demo", "restore"}  # the writes, and the upgrade test
    commands = next(a for a in cli.build_parser()._actions if a.dest == "command").choices
    assert sorted(set(commands) - walked - set(NO_JSON_TIMES)) == []


@pytest.mark.slow
def test_upgrade_and_restore_print_one_time_form(capsys, tmp_path):
    from tests.upgrade_helpers import db_1820

    db = db_1820(tmp_path / "archon.db")
    code, docs = _run(capsys, db, "upgrade", "--force")
    assert code == 0, docs
    snapshot = docs[0]["snapshot_path"]
    code, more = _run(capsys, db, "restore", snapshot, "--plan")
    assert code in (0, 1), more
    assert _offenders(docs + more) == []


def test_every_json_writer_of_the_command_line_goes_through_the_one_place():
    """console/cli/output.py `json_document` is the only JSON writer of the command line; the two
    other `json_text` calls print JSON inside a line of text (a table cell, a note), not a document."""
    root = Path(__file__).resolve().parents[1] / "console" / "cli"
    calls = {p.relative_to(root).as_posix(): len(re.findall(r"\bjson_text\(", p.read_text(encoding="utf-8")))
             for p in root.rglob("*.py")}
    assert {name: n for name, n in calls.items() if n} == {
        "output.py": 1, "fleet_writes.py": 1, "commands/approvals.py": 1}


@pytest.mark.parametrize("year", [1973, 2026, 2100, 2243, 2286])
def test_epoch_milliseconds_are_counted_exactly(year):
    """Divided as a float, epoch milliseconds of 2243 read back a microsecond short and printed one
    millisecond early (the hypothesis test above found 2243-…); every millisecond of a second here."""
    for ms in range(1000):
        at = datetime(year, 5, 6, 7, 8, 9, ms * 1000, tzinfo=timezone.utc)
        millis = (at - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)
        assert json_time(millis) == json_time(str(millis)) == json_time(at.isoformat()), (year, ms)
