"""Issue 23 item 3: the redacted bundle streams its copy (flat memory) and says exactly what it said.

The copy used to be built in memory, one `Redactor.column` call and one INSERT per cell and row:
peak memory grew with the database (1.56 GB at 1M requests). It is now written in chunks to
SQLite's private temporary file, with `Redactor.cell` skipping the cells whose answer is already
known. The reference below is the old row-by-row copy, kept verbatim: on the same databases the
two must give the same copy, the same placeholders and the same bundle, member for member.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from console.db.readonly import open_read_only
from console.db.sql import quote_identifier, stored_columns
from console.services import redacted_copy as streamed
from console.services import redaction
from console.services.bundle import bundle_members
from console.services.doctor import run_doctor
from console.services.redaction import Redactor
from tests import damage
from tests.adversarial.schema_secrets import plant_schema_secrets
from tests.tui.conftest import NOW


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW.isoformat())


def row_by_row(conn, copy, table, redactor) -> None:
    """The copy as it was made before issue 23: every row read, redacted and inserted on its own."""
    name, stored = quote_identifier(table), stored_columns(conn, table)
    try:
        cur = conn.execute(f"SELECT rowid AS {quote_identifier(streamed.ROWID)}, {stored} FROM {name}")
    except sqlite3.OperationalError:
        cur = conn.execute(f"SELECT {stored} FROM {name}")
    columns = [d[0] for d in cur.description]
    targets = ", ".join("rowid" if c == streamed.ROWID else quote_identifier(c) for c in columns)
    insert = f'INSERT INTO {name} ({targets}) VALUES ({", ".join("?" * len(columns))})'
    for row in cur:
        copy.execute(insert, [v if c == streamed.ROWID else redactor.column(table, c, v) for c, v in zip(columns, row)])


def _contents(copy) -> dict:
    tables = [r[0] for r in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    out = {"schema": copy.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()}
    for table in tables:
        try:
            rows = copy.execute(f"SELECT rowid, * FROM {quote_identifier(table)} ORDER BY rowid").fetchall()
        except sqlite3.OperationalError:  # WITHOUT ROWID
            rows = copy.execute(f"SELECT * FROM {quote_identifier(table)} ORDER BY 1").fetchall()
        out[table] = [tuple(r) for r in rows]
    return out


def _build(source: Path, monkeypatch, *, old: bool):
    """The redacted copy's rows, the redactor's mapping and manifest, and every bundle member."""
    with monkeypatch.context() as patch:
        if old:
            patch.setattr(streamed, "_copy_rows", row_by_row)
        conn, cleanup, _how = open_read_only(source)
        try:
            redactor = Redactor(True)
            copy = streamed.redacted_copy(conn, redactor)
            try:
                contents = _contents(copy)
            finally:
                copy.close()
        finally:
            conn.close()
            cleanup()
        state = (contents, redactor.mapping(), redactor.manifest())
        report = run_doctor(source, now=NOW)
        members = bundle_members(report, source, Redactor(True), now=NOW)
    return state, members


def _edge_values(db: Path) -> None:
    """Cells the shortcuts must get right: the same number as INTEGER, REAL and TEXT, text with a NUL
    after a kept shape, blobs, ids whose parts are kept or not, a long text repeated, JSON repeated."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("CREATE TABLE zz_edges (id, note TEXT, n, created_at TEXT)")
    long = "secret-" + "x" * 200
    document = json.dumps({"branch": "zelda-feature", "run_id": "run-build-00001", "env": {"K": "v"}})
    values = [1, 1.0, "1", 2.5, "2.5", "2026-11-01 12:00:00", "2026-11-01 12:00:00\x00zelda", b"\x00zelda",
              "apr-00000001", "apr-00000001:1", "apr-00000001:zelda", ":apr-00000001:", "zelda:1", long, document,
              "", "pending", "Pending", "{not json", "[1, 2]"]
    rows = [(values[i % len(values)], values[(i * 7) % len(values)], values[(i * 3) % len(values)],
             values[(i * 5) % len(values)]) for i in range(3 * len(values))]
    conn.executemany("INSERT INTO zz_edges VALUES (?, ?, ?, ?)", rows)
    for table, column in (("approval_requests", "action_json"), ("approval_request_events", "actor_reference"),
                          ("approval_request_events", "id"), ("approval_requests", "created_at")):
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                                    (table,)).fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute(f'UPDATE OR IGNORE "{table}" SET "{column}" = CASE rowid % 4 WHEN 0 THEN ? WHEN 1 THEN ? '
                     f'WHEN 2 THEN ? ELSE "{column}" END', (document, values[6], values[9]))
    conn.close()


def _damaged_midway(db: Path) -> None:
    """A table SQLite stops reading part-way (a leaf page overwritten after more than a chunk of rows),
    and one whose later rows break a NOT NULL the copy's table keeps (the insert fails there)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE zz_big (n INT, body TEXT)")
    conn.executemany("INSERT INTO zz_big VALUES (?, ?)", [(i, f"secret body {i % 37} " + "y" * 150)
                                                          for i in range(1, 1501)])
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = "
                                "'approval_request_events'").fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')
    # A NOT NULL column holding NULL, as a damaged file can: the schema loosened, the rows written,
    # archon's text put back (each on a fresh connection, which reads the schema again).
    strict, loose = "event_type            TEXT NOT NULL", "event_type            TEXT"
    for before, after, update in ((strict, loose, True), (loose, strict, False)):
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE name = 'approval_request_events'",
                     (before, after))
        conn.close()
        conn = sqlite3.connect(db, isolation_level=None)
        if update:
            conn.execute("UPDATE approval_request_events SET event_type = NULL WHERE rowid % 50 = 30")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    leaves = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'zz_big' AND pagetype = 'leaf' "
                                         "ORDER BY pageno")]
    conn.close()
    with open(db, "r+b") as handle:
        handle.seek((leaves[len(leaves) * 2 // 3] - 1) * page_size)
        handle.write(b"\x0d\x00\x00\xff\xff\xff\xff" + b"\xa5" * 200)


def _source(which: str, tmp_path: Path, demo_copy) -> Path:
    if which == "secrets":
        (tmp_path / "db").mkdir()
        return damage.with_secrets(tmp_path / "db" / "secrets.db")
    demo = demo_copy(name=f"{which}.db")
    if which == "demo":
        plant_schema_secrets(demo)
        _edge_values(demo)
    else:
        _damaged_midway(demo)
    return demo


@pytest.mark.slow
@pytest.mark.parametrize("which, memo", [("secrets", None), ("demo", None), ("demo", 2), ("broken", None)])
def test_streamed_copy_and_bundle_equal_the_row_by_row_ones(tmp_path, demo_copy, monkeypatch, which, memo):
    """Golden comparison, old code against new on the same file: the whole copy (every row of every
    table), the placeholder mapping, the manifest's counts and every member of the bundle. `memo=2`
    empties the memo all the time (its bound must not change an answer)."""
    if memo is not None:
        monkeypatch.setattr(redaction, "MEMO_ENTRIES", memo)
    source = _source(which, tmp_path, demo_copy)
    old_state, old_members = _build(source, monkeypatch, old=True)
    new_state, new_members = _build(source, monkeypatch, old=False)
    assert new_state[1] == old_state[1]  # the same placeholder for the same original
    assert new_state[2] == old_state[2]
    assert new_state[0] == old_state[0]
    assert new_members == old_members
    if which == "broken":  # both paths that end a table early ran
        sizes = sorted(len(rows) for rows in new_state[0].values())
        assert any(512 < n < 1500 for n in sizes)  # read part-way, past the first chunk
        with sqlite3.connect(source) as conn:
            events = conn.execute("SELECT count(*) FROM approval_request_events").fetchone()[0]
        assert len(new_state[0]["approval_request_events"]) < events  # the insert that failed


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (pytest) across exec.
CHILD = """
import sys
from console.cli.cli import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
sys.exit(0 if code in (0, 1) else code)
"""


def _peak_kib(db: Path, out: Path, *extra: str) -> int:
    env = {**os.environ, "ARCHON_CONSOLE_NOW": NOW.isoformat()}
    done = subprocess.run([sys.executable, "-c", CHILD, "doctor", str(db), "--bundle", str(out), *extra],
                          capture_output=True, text=True, env=env, check=True)
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_redacted_bundle_memory_does_not_grow_with_the_rows(tmp_path):
    """Peak RSS (kB) of a child writing the bundle of a 2k and a 20k-request database: the redacted bundle
    grows no more than the plain one does (doctor's own share) plus a few MB; the in-memory copy grew
    by the whole database (about 45 MB here)."""
    from console.demo.writer import generate

    (tmp_path / "db").mkdir()
    (tmp_path / "out").mkdir(mode=0o700)
    peaks = {}
    for requests in (2000, 20000):
        db = tmp_path / "db" / f"archon-{requests}.db"
        generate(db, requests=requests, seed=7, now=NOW.isoformat(), wal=False)
        peaks[requests] = (_peak_kib(db, tmp_path / "out" / f"plain-{requests}.zip"),
                           _peak_kib(db, tmp_path / "out" / f"redacted-{requests}.zip", "--redact"))
    plain_growth = peaks[20000][0] - peaks[2000][0]
    redacted_growth = peaks[20000][1] - peaks[2000][1]
    assert redacted_growth <= max(plain_growth, 0) + 8 * 1024, peaks


@pytest.mark.slow
def test_a_copy_that_runs_out_of_space_writes_no_bundle(tmp_path, monkeypatch, capsys):
    """The copy is now a file in the temporary directory: a full disk there (SQLITE_FULL, here made by
    a page limit) ends the command in one sentence, exit 3, with no bundle, rather than a bundle made
    from a copy that silently lacks the rows that did not fit."""
    from console.cli.cli import main

    def small(**options):
        conn = scratch(**options)
        conn.execute("PRAGMA max_page_count = 30")
        return conn

    scratch = streamed.scratch_connection
    monkeypatch.setattr(streamed, "scratch_connection", small)
    (tmp_path / "db").mkdir()
    db = damage.with_secrets(tmp_path / "db" / "archon.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE zz_fill (body TEXT)")
    conn.executemany("INSERT INTO zz_fill VALUES (?)", [(f"row {i} " + "z" * 400,) for i in range(2000)])
    conn.close()
    out = tmp_path / "out" / "bundle.zip"
    assert main(["doctor", str(db), "--bundle", str(out), "--redact"]) == 3
    err = capsys.readouterr().err
    assert "SQLITE_TMPDIR" in err and "Traceback" not in err
    assert not out.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # no partial file either
