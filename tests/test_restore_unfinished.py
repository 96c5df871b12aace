"""A loss report that could not be finished never lets a restore through (issue 18, finding 1, second
attack round).

Main caught every SQLite error of the comparison as "the current file cannot be read", which did not
refuse: Ctrl-C or SIGTERM during the comparison (the signal interrupts the running statement,
console/signals.py), a statement over its budget (console/db/limits.py) or a hot rollback journal
left by archon's crash (a read-only connection cannot roll it back) all let `restore --yes` put the
snapshot back and re-arm an approval archon had consumed (exit 0). Now a stop is a stop (exit
130/143, nothing restored), an unfinished report refuses without --loss-unknown, and the restore
compares the file as SQLite recovers it (its hot journal rolled back under the lock check).
Real files, real CLI processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.errors import EXIT_OK, EXIT_UNUSABLE
from tests.restore_helpers import _armed, _as_archon, _consume, _restore
from tests.upgrade_helpers import REPO, connect, run_cli

pytestmark = pytest.mark.slow

BULK_ROWS = 1_200_000


def _status(path: Path) -> tuple:
    conn = connect(path)
    try:
        return conn.execute("SELECT status, consumed_at FROM approval_requests WHERE id = 'apr-0'").fetchone()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def bulky(tmp_path_factory) -> tuple[Path, Path]:
    """apr-0 consumed since the snapshot, and a large table archon wrote since whose key order is not
    SQLite's binary one: reading it in key order sorts the whole table inside one statement first."""
    directory = tmp_path_factory.mktemp("bulky")
    path, snapshot = _armed(directory)

    def write(conn):
        _consume(conn, "apr-0")
        conn.execute("CREATE TABLE zz_bulk (k TEXT PRIMARY KEY COLLATE NOCASE, v TEXT)")
        conn.executemany("INSERT INTO zz_bulk VALUES (?, ?)", ((f"k{i:08d}", "x" * 40) for i in range(BULK_ROWS)))

    _as_archon(path, write)
    return path, snapshot


def _copy(bulky: tuple[Path, Path], directory: Path) -> tuple[Path, Path]:
    path, snapshot = bulky
    for source in (path, snapshot, Path(f"{snapshot}.sha256")):
        if source.exists():
            shutil.copy2(source, directory / source.name)
    return directory / path.name, directory / snapshot.name


def _read_bytes(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return 0
    return int(text.split("rchar:")[1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/PID/io")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_during_the_comparison_is_a_stop(bulky, tmp_path, signum):
    """The signal is sent once the process has read far more than everything before the comparison
    reads (the Python start-up, the small snapshot): it is sorting the large table, inside SQLite."""
    path, snapshot = _copy(bulky, tmp_path)
    before = os.stat(path)
    env = {**os.environ}
    env.pop("ARCHON_DB_PATH", None)
    proc = subprocess.Popen([sys.executable, "-m", "console", "--db", str(path), "restore", str(snapshot), "--yes"],
                            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    threshold = 30 * 1024 * 1024  # the table is over 70 MB; the start-up reads about 3 MB
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and _read_bytes(proc.pid) < threshold:
        time.sleep(0.005)  # polls a condition (bytes read), bounded by the deadline
    assert proc.poll() is None, "the restore ended before the comparison was reached: " + proc.communicate()[1]
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum if signum != signal.SIGINT else proc.returncode == 130, out + err
    assert "nothing further was written" in err
    assert _status(path)[0] == "consumed"  # not re-armed: nothing was restored
    now = os.stat(path)
    assert (now.st_ino, now.st_nlink) == (before.st_ino, before.st_nlink)
    assert not [p for p in tmp_path.iterdir() if ".replaced-" in p.name or p.name.endswith(".tmp")]


def test_a_comparison_over_the_statement_budget_refuses(bulky, tmp_path):
    path, snapshot = _copy(bulky, tmp_path)
    env = {"ARCHON_CONSOLE_STATEMENT_SECONDS": "0.2"}
    for extra in (("--plan",), ("--yes",), ("--yes", "--rearm-consumed")):
        refused = run_cli("--db", str(path), "restore", str(snapshot), *extra, env=env)
        assert refused.returncode == EXIT_UNUSABLE, refused.stdout + refused.stderr
        said = " ".join((refused.stdout + refused.stderr).split())
        assert "cannot be told" in said and "--loss-unknown" in said and "ARCHON_CONSOLE_STATEMENT_SECONDS" in said
        assert _status(path)[0] == "consumed"
    done = run_cli("--db", str(path), "restore", str(snapshot), "--yes", "--loss-unknown", "--rearm-consumed", env=env)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert _status(path) == ("approved", None)  # the operator said so, twice


def _hot_journal(tmp_path: Path) -> tuple[Path, Path]:
    """apr-0 consumed (committed), then archon killed inside a later transaction: a hot -journal."""
    path, snapshot = _armed(tmp_path)
    _as_archon(path, lambda conn: _consume(conn, "apr-0"))
    child = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, time
c = sqlite3.connect({str(path)!r}, isolation_level=None)
c.execute('PRAGMA cache_size=1')
c.execute('BEGIN IMMEDIATE')
c.execute("UPDATE approval_request_events SET id = id WHERE 0")
c.execute("CREATE TABLE archon_scratch (x)")
c.executemany("INSERT INTO archon_scratch VALUES (?)", ((('y' * 500),) for _ in range(5000)))
print('mid', flush=True)
time.sleep(600)"""], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "mid"
    finally:
        child.kill()
        child.wait()
    assert os.path.getsize(f"{path}-journal") > 0
    return path, snapshot


def test_a_hot_journal_is_rolled_back_before_the_comparison(tmp_path):
    path, snapshot = _hot_journal(tmp_path)
    refused = _restore(path, snapshot, "--yes")
    assert refused.returncode == EXIT_UNUSABLE, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.split())
    assert "apr-0" in said and "--rearm-consumed" in said and "--loss-unknown" not in said
    assert _status(path)[0] == "consumed"  # the committed consumption, the crashed transaction rolled back


def test_plan_on_a_hot_journal_says_it_cannot_tell_and_refuses(tmp_path):
    path, snapshot = _hot_journal(tmp_path)
    planned = _restore(path, snapshot, "--plan")
    assert planned.returncode == EXIT_UNUSABLE, planned.stdout + planned.stderr
    said = " ".join(planned.stdout.split())
    assert "-journal" in said and "--loss-unknown" in said
    assert os.path.getsize(f"{path}-journal") > 0  # --plan wrote nothing
