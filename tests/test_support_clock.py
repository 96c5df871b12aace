"""The pieces under the support view (issue 21, items 10 and 12), over generated inputs:

- `fit` (widgets/fitted_line.py): a header line never wider than the terminal, the release never
  dropped, and parts given up least important first;
- `Hanging` (widgets/hanging.py): no screen line wider than the pane, no text lost, every
  continuation under its value column when that leaves a readable column;
- the snapshot's "as of" time (console/services/snapshot_time.py, console/models/support.py): the
  newest time the database records, never later than the snapshot, bounded work, hostile
  schemas and values passed over.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from console.clock import ScreenClock, fixed_clock
from console.models.support import SupportInfo
from widgets.fitted_line import SEPARATOR, Part, fit
from widgets.hanging import MIN_VALUE_WIDTH, Hanging

T0 = datetime(2026, 12, 1, 14, 3, tzinfo=timezone.utc)

words = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
                min_size=1, max_size=30)


# ---------------------------------------------------------------- fit
@st.composite
def header_parts(draw):
    count = draw(st.integers(1, 6))
    keep_at = draw(st.integers(0, count - 1))
    parts = []
    for i in range(count):
        forms = draw(st.lists(words, min_size=1, max_size=3))
        forms.sort(key=len, reverse=True)
        parts.append(Part(tuple(Text("ABCDEF"[i] + "|" + f) for f in forms), rank=0 if i == keep_at else draw(st.integers(1, 5)),
                          keep=i == keep_at))
    return parts


@settings(max_examples=300, deadline=None)
@given(header_parts(), st.integers(0, 140))
def test_a_fitted_line_keeps_the_release_and_drops_the_least_important_first(parts, width):
    line = fit(parts, width)
    assert line.cell_len <= width
    keep = next(p for p in parts if p.keep)
    if min(f.cell_len for f in keep.forms) <= width:
        assert any(f.plain in line.plain for f in keep.forms), (line.plain, keep)
    shown = [i for i, p in enumerate(parts) if any(f.plain in line.plain.split(SEPARATOR) for f in p.forms)]
    assert len(shown) == len(line.plain.split(SEPARATOR)) or "…" in line.plain or not line.plain
    if shown and "…" not in line.plain:
        worst_shown = max(parts[i].rank for i in shown)
        dropped = [p for i, p in enumerate(parts) if i not in shown]
        assert all(p.rank >= worst_shown for p in dropped), (line.plain, parts)
    everything = SEPARATOR.join(p.forms[0].plain for p in parts)
    if len(everything) <= width:
        assert line.plain == everything  # room enough: nothing is shortened


# ---------------------------------------------------------------- hanging
def squeeze(*texts: str) -> str:
    return "".join("".join(t.split()) for t in texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(" ", max_size=6), st.text(
    st.characters(min_codepoint=32, max_codepoint=0x30FF, blacklist_categories=("Cs", "Cc", "Zl", "Zp", "Mn", "Me")),
    max_size=30), st.text(
    st.characters(min_codepoint=32, max_codepoint=0x30FF, blacklist_categories=("Cs", "Cc", "Zl", "Zp", "Mn", "Me")),
    max_size=200)), min_size=1, max_size=5), st.integers(4, 130))
def test_a_hanging_line_wraps_under_its_value_and_loses_nothing(rows, width):
    lines = [(Text(indent + key + value), len(indent + key)) for indent, key, value in rows]
    console = Console(width=width, color_system=None)
    screen = ["".join(seg.text for seg in line) for line in console.render_lines(Hanging(lines), pad=False)]
    assert all(Text(s).cell_len <= width for s in screen)
    assert squeeze(*screen) == squeeze(*(t.plain for t, _ in lines))  # only spaces at a break may go
    at = 0
    for text, value_at in lines:
        first = screen[at]
        taken = 1
        while at + taken < len(screen) and squeeze(*screen[at:at + taken]) != squeeze(text.plain):
            taken += 1
        head = Text(text.plain[:value_at]).cell_len
        if taken > 1 and width - head >= MIN_VALUE_WIDTH:
            for continuation in screen[at + 1:at + taken]:
                assert continuation[:head].strip() == "", (first, continuation, head)
        at += taken


def test_a_json_line_keeps_its_key_beside_its_value():
    from widgets.json_view import json_renderable

    console = Console(width=40, color_system=None)
    value = '{"command": "' + " ".join(["--some-long-flag"] * 6) + '"}'
    shown = ["".join(seg.text for seg in line).rstrip() for line in console.render_lines(json_renderable(value), pad=False)]
    assert shown[1].startswith('  "command": "--some-long-flag')
    assert all(line.startswith(" " * 13 + "--some") for line in shown[2:-1]), shown


# ---------------------------------------------------------------- the snapshot's time
def _db(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def _newest(path: Path) -> datetime | None:
    from console.db.connect import open_database
    from console.services.snapshot_time import newest_write_time

    handle = open_database(path, read_only=True, require_archon=False)
    try:
        return newest_write_time(handle)
    finally:
        handle.close()


def test_the_newest_write_is_read_from_created_and_updated_columns_in_any_stored_form(tmp_path):
    path = _db(tmp_path / "a.db",
               "CREATE TABLE events (id INTEGER PRIMARY KEY, created_at TEXT)",
               "CREATE TABLE things (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, expires_at TEXT)",
               "INSERT INTO events (created_at) VALUES ('2026-12-01 13:00:00'), ('2026-12-01T13:30:00Z')",
               "INSERT INTO things VALUES ('a', '2026-11-01 00:00:00', '1764597780000', '2027-01-01 00:00:00')")
    # 1764597780000 ms is 2025-12-01 14:03 UTC: older; expires_at is a schedule, never a write time
    assert _newest(path) == datetime(2026, 12, 1, 13, 30, tzinfo=timezone.utc)


def test_hostile_schemas_and_values_are_passed_over(tmp_path):
    path = _db(tmp_path / "h.db",
               'CREATE TABLE "we""ird" (id INTEGER PRIMARY KEY, created_at TEXT)',
               """INSERT INTO "we""ird" (created_at) VALUES ('2026-12-01 10:00:00'), ('nan'), ('inf'), ('9999-99-99'),
                  (x'00ff'), (NULL), ('""" + "2026-12-31 00:00:00" * 50 + """')""",
               "CREATE TABLE nr (k TEXT PRIMARY KEY, created_at TEXT) WITHOUT ROWID",
               "INSERT INTO nr VALUES ('k', '2026-12-31 00:00:00')",
               # a generated column is the file author's expression: never computed by this read
               "CREATE TABLE g (id INTEGER PRIMARY KEY, x TEXT, created_at TEXT GENERATED ALWAYS AS "
               "(printf('%.*c', 300000000, 'x')) VIRTUAL)",
               "INSERT INTO g (x) VALUES ('a')")
    assert _newest(path) == datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


def test_only_the_newest_rows_of_a_table_are_read(tmp_path):
    from console.services.snapshot_time import TAIL_ROWS

    path = _db(tmp_path / "big.db", "CREATE TABLE e (id INTEGER PRIMARY KEY, created_at TEXT)",
               "INSERT INTO e (id, created_at) VALUES (1, '2030-01-01 00:00:00')",  # old row, odd clock
               f"WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < {TAIL_ROWS + 10}) "
               "INSERT INTO e (id, created_at) SELECT i, '2026-12-01 12:00:00' FROM n")
    assert _newest(path) == datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_the_as_of_time_prefers_the_database_and_is_never_after_the_snapshot():
    info = SupportInfo(Path("/x/archon.db"), Path("/tmp/s.sqlite"), taken_at=T0 + timedelta(days=1),
                       modified_at=T0 + timedelta(hours=20))
    assert info.as_of(T0) == (T0, "the newest time recorded in the database")  # not the copy's mtime
    assert info.as_of(T0 + timedelta(days=400))[0] == T0 + timedelta(days=1)  # a row from the future
    assert info.as_of(None)[0] == T0 + timedelta(hours=20)  # no time recorded: the file's mtime
    bare = SupportInfo(Path("/x/archon.db"), Path("/tmp/s.sqlite"), taken_at=T0)
    assert bare.as_of(None)[0] == T0


def test_the_screen_clock_stands_at_the_snapshot_until_toggled():
    clock = ScreenClock(fixed_clock(T0 + timedelta(days=1)))
    assert clock() == T0 + timedelta(days=1) and clock.label == "as of now" and not clock.toggle()
    clock.pin(T0, "the newest time recorded in the database")
    assert clock() == T0 and clock.label == "as of 2026-12-01 14:03Z"
    assert clock.toggle() and clock() == T0 + timedelta(days=1) and clock.label == "as of now"
    assert clock.toggle() and clock() == T0


def test_a_row_stamped_in_the_future_does_not_pin_the_view_to_the_snapshot(tmp_path):
    """One row from the future (a writer's clock ahead, a hostile file) is ignored, not clamped:
    clamped, it made the view stand at the snapshot's moment and every countdown expired again."""
    from console.db.connect import open_database
    from console.services.snapshot_time import newest_write_time

    taken = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)
    path = _db(tmp_path / "f.db",
               "CREATE TABLE events (id INTEGER PRIMARY KEY, created_at TEXT, updated_at)",
               "INSERT INTO events (created_at, updated_at) VALUES ('2026-12-01 13:00:00', 1764594000000), "
               "('2099-01-01T00:00:00Z', NULL), ('2026-12-02T08:59:59+23:00', 4102444800), "
               "('2026-12-01T14:00:00.250-01:00', '  1764597600  '), ('+2026-12-01', '1e999'), ('20261201', 'nan')")
    handle = open_database(path, read_only=True, require_archon=False)
    try:
        newest = newest_write_time(handle, not_after=taken)
    finally:
        handle.close()
    assert newest == datetime(2026, 12, 1, 15, 0, 0, 250000, tzinfo=timezone.utc)
    info = SupportInfo(Path("/x/archon.db"), Path("/tmp/s.sqlite"), taken_at=taken)
    assert info.as_of(newest) == (newest, "the newest time recorded in the database")



def test_a_file_of_many_tables_is_read_within_one_total_budget(tmp_path):
    """3000 tables of 1000 rows took 15 s before `inspect` painted (every value a Python datetime,
    `TAIL_ROWS` from every table); now at most `TOTAL_ROWS` rows over all tables are read, so with
    200 tables each gives its newest 500: a newer stamp 600 rows back in one of them is not read."""
    tables = 200
    conn = sqlite3.connect(tmp_path / "many.db")
    conn.execute("BEGIN")
    for i in range(tables):
        conn.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, created_at TEXT, updated_at TEXT)")
        conn.execute(f"INSERT INTO t{i} (created_at) VALUES ('2026-11-30T00:00:00Z')")
    conn.executemany("INSERT INTO t0 (created_at, updated_at) VALUES (?, ?)",
                     [("2026-11-29 00:00:00", "2026-12-01 00:00:00" if j == 400 else None) for j in range(1000)])
    conn.commit()
    conn.close()
    assert _newest(tmp_path / "many.db") == datetime(2026, 11, 30, tzinfo=timezone.utc)
    from console.services.snapshot_time import TAIL_ROWS, TOTAL_ROWS

    assert TOTAL_ROWS // tables == 500 < 600 < TAIL_ROWS
