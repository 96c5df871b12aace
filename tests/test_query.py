"""`archon-console query` and the service under it and under `:tables`/`:sql` (console/services/query.py):
what a reader gets. The attacker's view is tests/adversarial/test_readonly_sql.py.

Tables are paged by key, never all rows: by rowid, by a free rowid alias when a column is called
`rowid`, by the primary key of a WITHOUT ROWID table; advance/retreat/index_of agree with a walk of the
pages. Row counts stop at a cap. The CLI prints at most --limit rows and says when it cut.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from console.cli.cli import main
from console.services.query import open_queries
from tests.untouched import fingerprint_dir


def _extra_tables(conn) -> None:
    """Beside archon's tables: a WITHOUT ROWID table with a two-column key, a table whose column is
    called rowid, a generated column, and a table name that needs quoting."""
    conn.execute("CREATE TABLE wr (a TEXT, b INTEGER, v, PRIMARY KEY (a, b)) WITHOUT ROWID")
    conn.executemany("INSERT INTO wr VALUES (?, ?, ?)", [(f"k{i % 7}", i, f"v{i}") for i in range(53)])
    conn.execute("CREATE TABLE shadow (rowid TEXT, v, g GENERATED ALWAYS AS (v || '!') VIRTUAL)")
    conn.executemany("INSERT INTO shadow (rowid, v) VALUES (?, ?)", [(f"r{i}", i) for i in range(31)])
    conn.execute('CREATE TABLE "odd ""name""; --" (x)')
    conn.executemany('INSERT INTO "odd ""name""; --" VALUES (?)', [(i,) for i in range(12)])


@pytest.fixture
def db(make_db):
    return make_db(projects=("p1", "p2", "p3"), fill=_extra_tables, cached=True)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _walk(queries, shape, size: int) -> list[tuple]:
    rows, after = [], None
    while True:
        page, after = queries.table_page(shape, after, size)
        if not page:
            return rows
        rows += page


@pytest.mark.parametrize("name,key", [("wr", ["a", "b"]), ("shadow", ["_rowid_"]), ('odd "name"; --', ["rowid"]),
                                      ("projects", ["rowid"])])
def test_every_table_pages_by_key_and_the_jumps_agree(db, name, key):
    with open_queries(db, busy_timeout_ms=2000) as queries:
        shape = queries.table_shape(name)
        assert shape.key == key
        assert "g" not in shape.columns  # a generated column is never computed for a page
        rows = _walk(queries, shape, 5)
        total = queries.table_count(shape)
        assert len(rows) == total and len({k for k, _ in rows}) == total
        keys = [k for k, _ in rows]
        assert keys == sorted(keys)
        for i in (0, 1, total // 2, total - 1):
            assert queries.index_of(shape, keys[i]) == i
            assert queries.advance(shape, None, i + 1) == keys[i]  # the cursor after row i
            assert queries.retreat(shape, None, total - i - 1) == keys[i]
            if i:
                assert queries.retreat(shape, keys[i], 1) == keys[i - 1]
        assert queries.retreat(shape, None, total) is None  # back to the start
        assert queries.advance(shape, None, total + 10) == keys[-1]


def test_tables_lists_every_table_with_capped_counts(db):
    with open_queries(db, busy_timeout_ms=2000) as queries:
        tables = {t.name: t for t in queries.tables(cap=40)}
    assert {"projects", "tickets", "execution_runs", "wr", "shadow", 'odd "name"; --'} <= set(tables)
    assert tables["wr"].rows_text == "≥ 40" and not tables["wr"].exact and tables["wr"].without_rowid
    assert tables["shadow"].rows_text == "31" and tables["shadow"].exact and not tables["shadow"].without_rowid
    assert tables["projects"].rows == 3


def test_an_unknown_table_is_one_sentence(db):
    from console.errors import UsageError

    with open_queries(db, busy_timeout_ms=2000) as queries:
        with pytest.raises(UsageError, match="There is no table called 'nope'"):
            queries.table_shape("nope")


def test_result_pages_skip_to_their_offset(db):
    with open_queries(db, busy_timeout_ms=2000) as queries:
        sql = "SELECT a, b FROM wr ORDER BY b"
        whole = queries.run(sql, limit=100).rows
        assert len(whole) == 53
        assert queries.run(sql, offset=50, limit=10).rows == whole[50:]
        page = queries.run(sql, offset=10, limit=5)
        assert page.rows == whole[10:15] and page.more
        assert queries.count(sql, cap=20) == (20, True) and queries.count(sql, cap=100) == (53, False)


def test_text_output_and_a_cut_said(db, capsys):
    code, out, err = run(capsys, "--db", db, "query", "SELECT id, name, NULL AS gone FROM projects ORDER BY id")
    assert code == 0
    assert out.splitlines()[0].split() == ["id", "name", "gone"] and "p1" in out and "NULL" in out
    assert err.strip() == "3 rows."
    code, out, err = run(capsys, "--db", db, "query", "SELECT b FROM wr ORDER BY b", "--limit", "10")
    assert code == 0 and len(out.splitlines()) == 12  # header, rule, 10 rows
    assert "Only the first 10 rows are shown; more were cut" in err


def test_json_and_csv(db, capsys):
    code, out, _ = run(capsys, "--db", db, "query", "SELECT b, x'00ff' AS blob, '=1+1' AS f FROM wr ORDER BY b",
                       "--limit", "2", "--json")
    reply = json.loads(out)
    assert code == 0 and reply["columns"] == ["b", "blob", "f"] and reply["row_count"] == 2 and reply["cut"] is True
    assert reply["rows"][0] == [0, "<blob 2 bytes>", "=1+1"] and "more were cut" in reply["note"]
    code, out, err = run(capsys, "--db", db, "query", "SELECT b, '=1+1' AS f, '@SUM(A1)' AS g FROM wr ORDER BY b",
                         "--csv", "--limit", "3")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["b", "f", "g"] and rows[1] == ["0", "'=1+1", "'@SUM(A1)"] and len(rows) == 4
    assert "more were cut" in err
    assert run(capsys, "--db", db, "query", "SELECT 1", "--csv", "--json")[0] == 2


def test_stdin_and_read_only_mode_and_no_trace(db, capsys, monkeypatch):
    before = fingerprint_dir(db.parent)
    class Stdin:
        buffer = io.BytesIO(b"SELECT count(*) AS n FROM projects")

    monkeypatch.setattr("sys.stdin", Stdin())
    code, out, _ = run(capsys, "--db", db, "--read-only", "query", "-")
    assert code == 0 and out.split()[-1] == "3"
    assert fingerprint_dir(db.parent) == before


def test_undecodable_statements_are_one_sentence(db, capsys, monkeypatch):
    from console.errors import UsageError

    class Stdin:
        buffer = io.BytesIO(b"SELECT '\xff'")

    monkeypatch.setattr("sys.stdin", Stdin())
    code, out, err = run(capsys, "--db", db, "query", "-")
    assert code == 2 and out == "" and err.strip() == (
        "archon-console: The statement on stdin is not valid UTF-8 text; nothing was run.")
    with open_queries(db, busy_timeout_ms=2000) as queries:
        with pytest.raises(UsageError, match="not valid UTF-8"):
            queries.run("SELECT '\udcff'")


def test_the_command_reference_lists_query(capsys):
    code, out, _ = run(capsys, "help")
    assert code == 0 and "query" in out


def test_query_has_no_fleet_form(capsys):
    """An operator's SQL runs on the host itself, never sent over the fleet protocol."""
    code, _, err = run(capsys, "--host", "eu1", "query", "SELECT 1")
    assert code == 2 and "`query` has no fleet form" in err
