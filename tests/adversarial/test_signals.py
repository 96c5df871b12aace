"""SIGTERM and SIGHUP during a read-only command leave no copy of the user's data behind, and
the copy a SIGKILLed run could not remove is removed at the next start (issue 9, finding 9).

The command is a real process caught right after its private copy is complete, before SQLite opens
it: the test hook `console/db/files.py` `reached` pauses it there (ARCHON_CONSOLE_TEST_PAUSE) and
creates a marker file the test waits for. Once SQLite has opened the copy it is unlinked, so from
then on not even SIGKILL leaves it (tests/adversarial/test_hostile_sidecars.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import damage

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _wal_without_shm(db: Path) -> Path:
    """A WAL database with commits in its -wal and no -shm: read through a private copy."""
    import shutil
    import sqlite3

    source = damage.healthy(db.parent / "source.db", wal=True)
    live = sqlite3.connect(source)
    live.execute("CREATE TABLE wal_probe(x)")
    live.commit()
    for suffix in ("", "-wal"):  # the writer is idle: a byte copy of both is a commit point
        shutil.copyfile(f"{source}{suffix}", f"{db}{suffix}")
    live.close()
    return db


def _stuck_mid_copy(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    db = _wal_without_shm(tmp_path / "archon.db")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    marker = tmp_path / "paused"
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), "approvals", "list"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir), "ARCHON_CONSOLE_TEST_PAUSE": f"private-copy:{marker}"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None and not marker.exists():
        time.sleep(0.02)  # waits for the marker (a condition), bounded by the deadline
    if marker.exists():
        copies = [p for p in tmpdir.iterdir() if (p / "archon.db").exists()]
        assert len(copies) == 1
        return proc, tmpdir, copies[0]
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"the command never reached its private copy: {proc.returncode} {err!r}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopped_read_only_command_removes_its_private_copy(tmp_path, signum):
    proc, tmpdir, copy = _stuck_mid_copy(tmp_path)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=15)
    err = err.decode()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert f"stopped by {signal.Signals(signum).name}" in err
    assert list(tmpdir.iterdir()) == []
    assert copy.name.startswith(f"archon-console-ro.{proc.pid}.")  # named for its process


def test_the_copy_of_a_killed_run_is_removed_at_the_next_start(tmp_path):
    proc, tmpdir, copy = _stuck_mid_copy(tmp_path)
    proc.kill()  # SIGKILL: nothing can clean up
    proc.communicate(timeout=15)
    assert copy.exists()
    # A copy of a run still going is left alone, as is anything not named as ours.
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live_copy = tmpdir / f"archon-console-ro.{alive.pid}.abcdefgh"
        live_copy.mkdir()
        other = tmpdir / f"archon-console-notes.{proc.pid}.txt"  # a user's file, not one of ours
        other.write_text("x")
        precious = tmp_path / "precious"
        precious.mkdir()
        (precious / "data").write_text("keep me")
        planted = tmpdir / f"archon-console-ro.{proc.pid}.planted"  # a link named like a dead run's copy
        planted.symlink_to(precious)
        (tmp_path / "other").mkdir()
        healthy = damage.healthy(tmp_path / "other" / "archon.db")
        done = subprocess.run(
            [sys.executable, "-m", "console", "--db", str(healthy), "approvals", "list"],
            capture_output=True, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmpdir)}, timeout=30,
        )
        assert done.returncode == 0, done.stderr
        assert not copy.exists()
        assert live_copy.exists() and other.exists()
        assert planted.is_symlink() and (precious / "data").read_text() == "keep me"
    finally:
        alive.kill()
        alive.wait()


def test_the_console_closed_by_its_terminal_removes_its_private_copy(tmp_path):
    """The TUI in --read-only on a WAL database it reads through a private copy, its terminal hung
    up: SIGHUP, like Ctrl-C."""
    import select
    import sqlite3

    from console.demo.writer import generate

    import shutil

    source = tmp_path / "source.db"
    generate(source, requests=20, environments=2, projects=1)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    live = sqlite3.connect(source)  # archon running: -wal and -shm exist
    live.execute("SELECT count(*) FROM sqlite_master").fetchone()
    # A live database is read in place; a -wal without its -shm (a reader would create one) is
    # read through a private copy, which is what this test needs.
    db = tmp_path / "archon.db"
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{source}{suffix}", f"{db}{suffix}")
    primary, secondary = os.openpty()
    proc = None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", "--read-only", "--db", str(db)],
            stdin=secondary, stdout=secondary, stderr=secondary, cwd=ROOT, start_new_session=True,
            env={**os.environ, "TMPDIR": str(tmpdir), "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"},
        )
        os.close(secondary)
        seen = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and b"apr-" not in seen:
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    seen += os.read(primary, 65536)  # keep the terminal drained
                except OSError:
                    break
        assert b"apr-" in seen, "the console never drew its first screen"
        # Its private copy is already unlinked: SQLite holds it open (test_hostile_sidecars.py).
        assert list(tmpdir.iterdir()) == []
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    os.read(primary, 65536)
                except OSError:
                    pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail("the console did not stop on SIGHUP")
    finally:
        live.close()
        os.close(primary)
        if proc is not None and proc.poll() is None:  # a failed assertion must not leave the TUI running
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGHUP
    assert list(tmpdir.iterdir()) == []


def test_the_console_exits_when_its_terminal_goes_away(tmp_path):
    """An SSH session that drops closes the terminal itself: the kernel sends SIGHUP and every later
    write fails. The console must still exit (it used to outlive its terminal: the window title it
    restores at exit went into Textual's bounded writer queue, which nobody drained any more)."""
    import pty
    import select

    from console.demo.writer import generate

    db = tmp_path / "archon.db"
    generate(db, requests=20, environments=2, projects=1)
    pid, primary = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        os.environ.update(TERM="xterm-256color", ARCHON_CONSOLE_CONFIG="/nonexistent",
                          ARCHON_CONSOLE_KEYMAP="/nonexistent")
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "console", "--db", str(db)])
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b"apr-" not in seen:
            if select.select([primary], [], [], 0.1)[0]:
                seen += os.read(primary, 65536)
        assert b"apr-" in seen, "the console never drew its first screen"
        while time.monotonic() < deadline and b"\x1b]2;archon" not in seen:  # the first poll set the title
            if select.select([primary], [], [], 0.1)[0]:
                seen += os.read(primary, 65536)
        assert b"\x1b]2;archon" in seen, "the console never set the window title"
        os.close(primary)  # the terminal goes away
        primary = -1
        deadline = time.monotonic() + 15
        done = 0
        while time.monotonic() < deadline and not done:
            done, _ = os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        assert done, "the console outlived its terminal"
    finally:
        if primary >= 0:
            os.close(primary)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
