"""An operator's own SQL (`archon-console query`, the TUI's `:sql` and `:tables`) cannot write, in any
disguise, on a live WAL file another process holds open with uncheckpointed commits, and every
refusal is one sentence with exit 2 (or 3 for the deadline and the value limit): the attacker's view
of console/db/adhoc.py and console/services/query.py, at the service and at the CLI.

"Unchanged" is the directory's every entry, bytes and mtime (tests/untouched.py), the -shm only by
its presence (every reader, archon's own, writes its read mark there): no -wal growth, no new file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.db.adhoc import MAX_STATEMENT_BYTES
from console.errors import ConsoleError, DatabaseUnusable, UsageError
from console.services.query import open_queries
from tests.untouched import Holder, fingerprint_dir, without_shm

ATTACHED = "attached-new.db"
VACUUMED = "vacuumed-copy.db"

# Every way we know to write, change a setting, reach outside, or run a second statement.
DISGUISES = [
    "INSERT INTO projects (id, name) VALUES ('x', 'x')",
    "insert or replace into projects (id, name) values ('p1', 'x')",
    "REPLACE INTO projects (id, name) VALUES ('x', 'x')",
    "UPDATE projects SET name = 'x'",
    "DELETE FROM projects",
    "WITH r(a) AS (SELECT 1) INSERT INTO projects (id, name) SELECT 'x', 'y' FROM r",
    "WITH r AS (SELECT 1) DELETE FROM projects",
    "with r as (select 1) update projects set name = 'x'",
    "EXPLAIN DELETE FROM projects",
    "EXPLAIN QUERY PLAN UPDATE projects SET name = 'x'",
    f"EXPLAIN VACUUM INTO '{{dir}}/{VACUUMED}'",
    f"explain query plan attach '{{dir}}/{ATTACHED}' as x",
    "EXPLAIN BEGIN",
    "PRAGMA query_only = 0",
    "PRAGMA query_only=OFF",
    "pragma main.query_only = false",
    "PRAGMA writable_schema = 1",
    "PRAGMA writable_schema = ON",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA journal_mode",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "PRAGMA wal_checkpoint",
    "PRAGMA user_version = 7",
    "PRAGMA main.application_id = 7",
    "PRAGMA foreign_keys = OFF",
    "PRAGMA recursive_triggers = ON",
    "PRAGMA optimize",
    "PRAGMA incremental_vacuum",
    "PRAGMA shrink_memory",
    "SELECT * FROM pragma_table_info('projects')",
    "SELECT * FROM pragma_journal_mode",
    f"ATTACH DATABASE '{{dir}}/{ATTACHED}' AS x",
    f"/* just a comment */ ATTACH '{{dir}}/{ATTACHED}' AS x",
    f"-- a comment\nattach '{{dir}}/{ATTACHED}' as x",
    "DETACH x",
    f"VACUUM INTO '{{dir}}/{VACUUMED}'",
    f"  vacuum main into '{{dir}}/{VACUUMED}'",
    "VACUUM",
    "SELECT load_extension('{dir}/evil')",
    "select load_extension('libc.so.6', 'system')",
    "SELECT fts3_tokenizer('simple')",
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('{dir}/w', 'x')",
    "SELECT 1; SELECT 2",
    "SELECT 1; DELETE FROM projects",
    "SELECT 1;DELETE FROM projects;",
    "SELECT 1; /* then */ DROP TABLE projects",
    "BEGIN",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "SAVEPOINT s",
    "RELEASE s",
    "ROLLBACK",
    "ANALYZE",
    "REINDEX",
    "CREATE TABLE z (a)",
    "CREATE TEMP TABLE z (a)",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE INDEX i ON projects (name)",
    "CREATE TRIGGER t AFTER INSERT ON projects BEGIN SELECT 1; END",
    "CREATE VIRTUAL TABLE v USING fts5(a)",
    "DROP TABLE projects",
    "ALTER TABLE projects ADD COLUMN z",
    "ALTER TABLE projects RENAME TO p",
    "",
    "   ",
    "-- only a comment",
    "/* only a comment */",
    "SELECT '" + "x" * (MAX_STATEMENT_BYTES + 1) + "'",
]


def _label(sql: str) -> str:
    return sql[:50] if len(sql) < 200 else f"{len(sql)} bytes"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A WAL archon database that another process holds open with 50 commits still in its -wal."""
    from tests.conftest import make_schema

    directory = tmp_path_factory.mktemp("live-sql")
    path = make_schema(directory / "archon.db", wal=True)
    with Holder(path, "hold", 50):
        yield path


def _expect_refusal(exc: BaseException, sql: str) -> None:
    assert isinstance(exc, UsageError), f"{sql!r}: {exc!r}"
    assert exc.exit_code == 2
    sentence = exc.reason
    assert sentence and "\n" not in sentence and len(sentence) < 400, sentence
    assert sentence.startswith(("Refused", "The statement is", "There is no statement")), sentence


@pytest.mark.parametrize("template", DISGUISES, ids=_label)
def test_the_service_refuses_every_disguise_and_leaves_the_live_file(live, template):
    sql = template.replace("{dir}", str(live.parent))
    before = without_shm(fingerprint_dir(live.parent))
    with open_queries(live, busy_timeout_ms=2000) as queries:
        with pytest.raises(ConsoleError) as caught:
            queries.run(sql)
        _expect_refusal(caught.value, sql)
        assert queries.run("SELECT count(*) FROM projects").rows  # the handle still reads afterwards
    assert without_shm(fingerprint_dir(live.parent)) == before
    assert not (live.parent / ATTACHED).exists() and not (live.parent / VACUUMED).exists()


@pytest.mark.parametrize("template", DISGUISES, ids=_label)
def test_the_cli_refuses_every_disguise_in_one_sentence(live, template, capsys):
    sql = template.replace("{dir}", str(live.parent))
    before = without_shm(fingerprint_dir(live.parent))
    code = main(["--db", str(live), "query", sql])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archon-console: "), err
    assert lines[0][len("archon-console: "):].startswith(("Refused", "The statement is", "There is no statement"))
    code = main(["--db", str(live), "--json", "query", sql])
    reply = json.loads(capsys.readouterr().out)
    assert code == 2 and reply["ok"] is False and reply["exit"] == 2 and "\n" not in reply["error"]
    assert without_shm(fingerprint_dir(live.parent)) == before
    assert not (live.parent / ATTACHED).exists() and not (live.parent / VACUUMED).exists()


_WRITES = [d for d in DISGUISES if d.strip() and len(d) < 1000 and "{dir}" not in d]
_PREFIXES = ["", "  ", "\n", "/* x */ ", "-- x\n", "WITH a AS (SELECT 1) ", "EXPLAIN ", "SELECT 1; ",
             "VALUES (1); ", "select 1 ;\n"]


@pytest.mark.slow  # a hypothesis run
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(_PREFIXES), write=st.sampled_from(_WRITES), upper=st.booleans(),
       tail=st.sampled_from(["", ";", "; ", " -- tail", ";\n;"]))
def test_generated_disguises_never_write(live, prefix, write, upper, tail):
    """A write behind a comment, a CTE, EXPLAIN or a first statement, in any case, with any tail:
    refused or harmless (a bare SELECT before `;` plus a trailing comment may run), never a write."""
    sql = prefix + (write.upper() if upper else write.lower()) + tail
    before = without_shm(fingerprint_dir(live.parent))
    with open_queries(live, busy_timeout_ms=2000) as queries:
        try:
            queries.run(sql)
        except ConsoleError as exc:
            assert exc.exit_code in (2, 3) and "\n" not in exc.reason
    assert without_shm(fingerprint_dir(live.parent)) == before


@pytest.mark.slow  # a hypothesis run
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(blacklist_categories=()), max_size=120))  # lone surrogates too
def test_any_text_is_a_result_or_one_sentence(live, text):
    """Whatever is typed at the prompt: rows, or a refusal in one sentence; never a traceback."""
    before = without_shm(fingerprint_dir(live.parent))
    with open_queries(live, busy_timeout_ms=2000) as queries:
        try:
            queries.run(text, limit=5)
        except ConsoleError as exc:
            assert exc.exit_code in (2, 3) and exc.reason and "\n" not in exc.reason
    assert without_shm(fingerprint_dir(live.parent)) == before


@pytest.mark.slow  # waits for the deadline, twice
def test_a_runaway_statement_ends_at_the_deadline(live, monkeypatch, capsys):
    monkeypatch.setenv("ARCHON_CONSOLE_STATEMENT_SECONDS", "0.5")
    sql = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    with open_queries(live, busy_timeout_ms=2000) as queries:
        with pytest.raises(DatabaseUnusable, match="ran longer than 0.5 seconds"):
            queries.run(sql)
        assert queries.run("SELECT 1").rows == [(1,)]  # the next statement runs
    assert main(["--db", str(live), "query", sql]) == 3
    err = capsys.readouterr().err
    assert "ran longer than 0.5 seconds" in err and "Traceback" not in err


def test_a_huge_value_is_refused_and_a_huge_result_is_cut(live, capsys):
    with open_queries(live, busy_timeout_ms=2000) as queries:
        with pytest.raises(DatabaseUnusable, match="larger than 4,194,304 bytes"):
            queries.run("SELECT hex(zeroblob(5000000))")  # a 10 MB string
        page = queries.run("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 40) "
                           "SELECT hex(zeroblob(1500000)) FROM r", limit=40)  # 40 values of 3 MB
        assert page.more and page.cut_by_size and 1 <= len(page.rows) <= 6
    assert main(["--db", str(live), "query", "SELECT hex(zeroblob(5000000))"]) == 3
    assert "larger than" in capsys.readouterr().err


HOSTILE = "char(27) || '[2J' || char(27) || ']0;pwned' || char(7) || char(8238) || 'evil' || char(155) || 'x'"


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--csv"]], ids=["text", "json", "csv"])
def test_terminal_escapes_and_bidi_in_values_never_reach_the_terminal(live, fmt, capsys):
    code = main(["--db", str(live), "query", f"SELECT {HOSTILE} AS v, x'1b5b324a' AS b", *fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert raw not in out and raw not in err
    assert "<blob 4 bytes>" in out


def test_a_real_process_refuses_and_leaves_the_file(live):
    """The installed entry point, in its own process, beside the holder."""
    import subprocess
    import sys

    before = without_shm(fingerprint_dir(live.parent))
    done = subprocess.run([sys.executable, "-m", "console", "--db", str(live), "query",
                           f"ATTACH '{live.parent}/{ATTACHED}' AS x"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("archon-console: Refused") and len(done.stderr.strip().splitlines()) == 1
    done = subprocess.run([sys.executable, "-m", "console", "--db", str(live), "query",
                           "SELECT count(*) FROM support_probe"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "50" in done.stdout  # the holder's commits, still in its -wal, are read
    assert without_shm(fingerprint_dir(live.parent)) == before


# Every statement shape that makes SQLite spill to temporary files (a sort, a UNION's or DISTINCT's
# set, a GROUP BY, a recursive CTE's ordered queue): finite, about 30 MB of rows, over the budget.
SPILLS = [
    "SELECT x, b FROM rows ORDER BY random()",
    "SELECT x, b FROM rows UNION SELECT x + 1, b FROM rows",
    "SELECT count(DISTINCT b) FROM rows",
    "SELECT b, count(*) FROM rows GROUP BY b",
    "SELECT x, b FROM rows ORDER BY b",
]


@pytest.mark.parametrize("body", SPILLS, ids=lambda s: s[:40])
def test_temporary_files_are_bounded_like_time(live, monkeypatch, body):
    """`mode=ro`, `query_only` and the authorizer never see SQLite's temporary files: a sort too big
    for memory wrote gigabytes to /var/tmp within the deadline (the disk archon writes to, often).
    The budget (console/db/adhoc.py `MAX_TEMP_BYTES`) ends the statement in one sentence."""
    from console.db import adhoc

    monkeypatch.setattr(adhoc, "MAX_TEMP_BYTES", 4 * 1024 * 1024, raising=False)
    sql = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000), "
           f"rows(x, b) AS (SELECT i, hex(randomblob(48)) FROM n) {body}")
    with open_queries(live, busy_timeout_ms=2000) as queries:
        with pytest.raises(UsageError, match="more than 4 MB of temporary disk space") as caught:
            queries.run(sql, limit=1)
        assert caught.value.exit_code == 2 and "\n" not in caught.value.reason
        assert queries.run("SELECT 1").rows == [(1,)]  # the next statement runs
    from console.db.limits import temp_bytes

    assert temp_bytes() == 0  # SQLite dropped them with the statement


@pytest.mark.parametrize("sql", ["SELECT * FROM json_each('[1,2]')", "SELECT key FROM json_tree('{\"a\": 1}')",
                                 "SELECT * FROM pragma_table_info('projects')", "SELECT name FROM pragma_index_list('x')"])
def test_a_table_valued_function_is_refused_by_name_with_the_way_round(live, sql):
    """json_each() was refused as "writing the schema ... for a table-valued PRAGMA": a reader of JSON
    was told about PRAGMAs. The sentence names the kind of thing refused and what to use instead."""
    with open_queries(live, busy_timeout_ms=2000) as queries:
        with pytest.raises(UsageError) as caught:
            queries.run(sql)
    _expect_refusal(caught.value, sql)
    assert "table-valued function" in caught.value.reason and "json_extract()" in caught.value.reason
