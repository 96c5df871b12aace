"""Opening refuses what is not an archon database: exit 3, one sentence, the file untouched.

Each case is checked through `open_database` and through the CLI (`upgrade --plan`, the command
that reads before anything else), with the directory's files hashed before and after: no byte,
mtime or new file (`-wal`, `-shm`, `-journal`) may appear.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from console.cli.cli import main
from console.db.connect import open_database
from console.errors import EXIT_UNUSABLE, DatabaseUnusable
from tests.upgrade_helpers import db_1820, fingerprint_dir


def _zero_byte(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _not_sqlite(path: Path) -> Path:
    path.write_text("id,name\n1,not a database\n" * 50)
    return path


def _garbled_schema(path: Path) -> Path:
    """A real archon file whose schema page (page 1, after the header) is overwritten."""
    db_1820(path)
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    data[100:page_size] = bytes([0xA5]) * (page_size - 100)
    path.write_bytes(bytes(data))
    return path


def _truncated(path: Path) -> Path:
    db_1820(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def _plain_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('hello')")
    conn.commit()
    conn.close()
    return path


def _plain_sqlite_wal(path: Path) -> Path:
    """Not archon, in WAL mode: a careless read-only open would leave -wal and -shm behind."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()
    return path


CASES = {
    "zero-byte": (_zero_byte, "empty"),
    "not-sqlite": (_not_sqlite, "not a SQLite database"),
    "garbled-schema-page": (_garbled_schema, "cannot be read"),
    "truncated": (_truncated, "truncated"),
    "sqlite-not-archon": (_plain_sqlite, "not an archon one"),
    "sqlite-not-archon-wal": (_plain_sqlite_wal, "not an archon one"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_open_database_refuses_and_leaves_the_file_alone(tmp_path, case):
    build, words = CASES[case]
    path = build(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    with pytest.raises(DatabaseUnusable) as caught:
        open_database(path)
    assert words in caught.value.reason
    assert caught.value.exit_code == EXIT_UNUSABLE
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", [["upgrade", "--plan"], ["upgrade", "--force"]])
def test_cli_refuses_with_exit_3_and_one_sentence(tmp_path, capsys, case, command):
    build, words = CASES[case]
    path = build(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), *command]) == EXIT_UNUSABLE
    err = capsys.readouterr().err
    first = err.strip().splitlines()[0]
    assert first.startswith("archon-console: ") and words in first
    assert fingerprint_dir(tmp_path) == before


def test_missing_file_is_refused_and_never_created(tmp_path, capsys):
    path = tmp_path / "nowhere" / "archon.db"
    with pytest.raises(DatabaseUnusable, match="No database at"):
        open_database(path)
    assert main(["--db", str(path), "upgrade", "--plan"]) == EXIT_UNUSABLE
    assert main(["--db", str(tmp_path / "archon.db"), "upgrade", "--force"]) == EXIT_UNUSABLE
    assert "No database at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(DatabaseUnusable, match="directory"):
        open_database(tmp_path)


def test_an_archon_database_opens(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    with open_database(path, read_only=True) as handle:
        assert handle.shape.release == "1.8.20"


@pytest.mark.parametrize("side", ["-journal", "-wal"])
def test_a_file_short_beside_a_side_file_is_left_to_sqlite(tmp_path, side):
    """A rollback-journal commit writes page 1 (the new page count) before the pages that extend the
    file, with its `-journal` present until the commit is whole: read without a lock, a live file
    looks short for a moment (a run of test_readonly.py's live-writer snapshots was refused
    "truncated" so). A `-journal` or `-wal` may hold what the main file lacks; SQLite decides."""
    from datetime import datetime, timezone

    from console.db.connect import check_size
    from console.services.doctor import run_doctor

    def doctor(path: Path) -> set[str]:
        return {f.id for f in run_doctor(path, now=datetime(2026, 5, 1, tzinfo=timezone.utc)).findings}

    path = _truncated(tmp_path / "archon.db")
    Path(f"{path}{side}").write_bytes(b"")
    check_size(path)  # no refusal
    assert "file.truncated" not in doctor(path)
    Path(f"{path}{side}").unlink()
    with pytest.raises(DatabaseUnusable, match="truncated"):
        check_size(path)
    assert "file.truncated" in doctor(path)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_file_another_process_holds_locked_is_busy_not_damaged(tmp_path, capsys, read_only):
    """A rollback-journal file with another process holding EXCLUSIVE (archon mid-write before its
    first page, a VACUUM): "database is locked" is a `DatabaseError` too, and the first read called
    it corrupt (exit 3, "run doctor"), which sends an operator to restore a snapshot over a healthy
    file. It is busy: exit 1, try again."""
    import subprocess
    import sys

    path = db_1820(tmp_path / "archon.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        argv = ["--db", str(path), "--busy-timeout", "0.2", *(["--read-only"] if read_only else []), "projects", "list"]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "is busy" in err and "corrupt" not in err
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.mark.slow  # doctor waits out its own busy timeout
def test_doctor_calls_a_lock_it_could_not_take_busy_not_damage(tmp_path):
    """quick_check on its own connection met another process's EXCLUSIVE lock and doctor said
    "PRAGMA quick_check reports damage ... restore the latest good snapshot": advice that loses a
    healthy file's newer rows. It is a check that could not run."""
    import subprocess
    import sys
    from datetime import datetime, timezone

    from console.services.doctor import run_doctor

    path = db_1820(tmp_path / "archon.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        report = run_doctor(path, now=datetime(2026, 5, 1, tzinfo=timezone.utc))
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    ids = {f.id for f in report.findings}
    assert "database.busy" in ids
    assert not ids & {"integrity.failed", "database.unreadable", "foreign_keys.unchecked"}
