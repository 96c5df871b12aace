"""Issue 23 item 4: `audit --format jsonl` sorts keys, not documents, so its sorter does not spill.

No index holds the trail's order (the time is normalised in SQL), so each kind's rows are sorted.
The sorter used to carry every row's json_object text and wrote it to temporary files once past its
memory (843 MB at 1M requests, more than twice the sqlite3 shell's UNION); it now carries the sort
keys and the rowid, and the JSON is read by rowid after the sort. The output must not change: it is
compared with the old single-query form on the same database, byte for byte.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest

from console.db.connect import open_database
from console.demo.writer import generate
from console.services import audit
from console.services.audit import AuditFilter, open_stream

NOW = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("audit-spill") / "archon.db"
    generate(path, requests=2500, seed=7, now=NOW, wal=False)
    return path


def _old_json_lines(conn, flt: AuditFilter) -> list[str]:
    """The export as it was before issue 23: one query per kind sorting whole json_object rows."""
    streams = []
    for kind in flt.kinds:
        table, select = audit._SOURCES[kind]
        sql, params = audit._query(kind, flt, upto_rowid=1 << 62)
        inner = sql.rsplit(" ORDER BY ", 1)[0]
        text = audit._TEXTUAL
        pairs = ", ".join(f"'{name}', {text.format(c=f'c{i}')}" for i, name in enumerate(audit.COLUMNS))
        names = ", ".join(f"c{i}" for i in range(len(audit._NAMES)))
        streams.append(conn.execute(
            f"WITH e({names}) AS ({inner}) SELECT coalesce({text.format(c='c0')}, ''), c1, "
            f"coalesce({text.format(c='c10')}, ''), json_object({pairs}) FROM e ORDER BY 1, 2, 3",
            params).fetchall())
    return [row[3] for row in heapq.merge(*[[tuple(r) for r in s] for s in streams])]


def _written() -> int:
    """Bytes this process has passed to write calls (SQLite's temporary files are written here)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


@pytest.mark.parametrize("flt", [AuditFilter(), AuditFilter(project_id="prj-atlas-api"),
                                 AuditFilter(kinds=("approval",), actor="alice")])
def test_jsonl_export_is_unchanged(demo, flt):
    with open_database(demo, read_only=True) as handle:
        handle.conn.execute("BEGIN")
        new = list(open_stream(handle.conn, flt).json_lines())
        old = _old_json_lines(handle.conn, flt)
        handle.conn.execute("COMMIT")
    assert new == old and new


def test_the_jsonl_sort_writes_no_temporary_file(demo):
    """2500 requests give about 6000 approval events: sorting their JSON (about 3 MB) outgrows the
    sorter's memory (250 pages at the smallest cache) and spills; their keys (about 0.4 MB) do not."""
    with open_database(demo, read_only=True) as handle:
        conn = handle.conn
        conn.execute("PRAGMA cache_size = 10")
        conn.execute("BEGIN")
        before = _written()
        lines = sum(1 for _ in open_stream(conn, AuditFilter()).json_lines())
        spilled = _written() - before
        old_before = _written()
        _old_json_lines(conn, AuditFilter())
        old_spilled = _written() - old_before
        conn.execute("COMMIT")
    assert lines > 5000
    assert old_spilled > 1_000_000  # the measure sees a spill when there is one
    assert spilled == 0
