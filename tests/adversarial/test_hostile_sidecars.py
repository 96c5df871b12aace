"""Hostile database files end every read-only command in one sentence, quickly, in bounded memory,
and leave nothing in the temp directory (issue 17, findings 9(d), 9(e) and 11).

The sweep: the main file and each of its side files (`-wal`, `-shm`, `-journal`) in turn is a
symlink to /dev/zero, a FIFO, a directory, a socket or a sparse file larger than the free space;
every read-only command runs on it in a real process under `ulimit -v` (RLIMIT_AS), with the
subprocess timeout as the failure condition. Side files are `lstat`ed before any connection
(console/db/paths.py `require_regular_sidecars`), opened `O_NOFOLLOW|O_NONBLOCK`, and every copy is
bounded by a size checked against the free space first (console/db/locked_copy.py).

The signals: a private copy exists from the moment it is complete until SQLite has opened it, then
it is unlinked (console/db/readonly.py `_unlink_open_copy`). A command paused at each of those two
points (the test hook `console/db/files.py` `reached`) receives every signal whose default action
ends the process: nothing is left in TMPDIR, SIGKILL included once the copy is open.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.signals import HANDLED
from tests import damage

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 2 << 30  # address space: far above a command's needs, far below a file read whole
TIMEOUT_S = 60  # every command of a case together; a hang fails the test, never waits it out

COMMANDS = (
    ["approvals", "list"], ["approvals", "show", "req-open"], ["envs", "list"], ["projects", "list"],
    ["profiles", "list", "p1"], ["audit"], ["doctor"], ["upgrade", "--plan"], ["inspect"],
    ["--read-only", "approvals", "list"],
)

# Runs every command in one process (imports once), each through the CLI's `main`; prints results.
DRIVER = r"""
import io, json, sys, contextlib
import console.tui.tui
console.tui.tui.run_tui = lambda ctx, support=None, **_: 0
console.tui.tui.require_terminal = lambda **_: None
from console.cli.cli import main
db, commands = sys.argv[1], json.loads(sys.argv[2])
results = []
for argv in commands:
    argv = [*argv[:-1], argv[-1], db] if argv[0] in ("inspect", "doctor") else ["--db", db, *argv]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    results.append({"argv": argv, "code": code, "err": err.getvalue()})
print(json.dumps(results))
"""

KINDS = ("symlink to /dev/zero", "fifo", "directory", "socket", "sparse, larger than the free space")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _huge(where: Path) -> int:
    return max(2 * shutil.disk_usage(where).free, 1 << 34)


def _make(kind: str, path: Path, keep: list) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        keep.append(sock)
    else:
        with open(path, "ab") as handle:
            handle.truncate(_huge(path.parent))


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("target", ["", "-wal", "-shm", "-journal"], ids=["main", "wal", "shm", "journal"])
def test_every_read_only_command_on_a_hostile_file(tmp_path, target, kind):
    (tmp_path / "db").mkdir()
    db = damage.healthy(tmp_path / "db" / "archon.db", wal=True)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    sockets: list = []
    if target == "" and kind.startswith("sparse"):
        with open(db, "ab") as handle:  # a real database made huge: the apparent size counts
            handle.truncate(_huge(db.parent))
    else:
        _make(kind, Path(f"{db}{target}"), sockets)
    try:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, str(db), json.dumps(COMMANDS)],
            capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S, preexec_fn=_limit_memory,
            env={**os.environ, "TMPDIR": str(tmpdir)},
        )
    finally:
        for sock in sockets:
            sock.close()
    assert done.returncode == 0, done.stderr[-2000:]
    for result in json.loads(done.stdout):
        err = result["err"]
        assert "Traceback" not in err and "unexpected" not in err, result
        if not kind.startswith("sparse"):
            # Not a database, or a side file SQLite never makes: one sentence (and a hint), exit 3.
            assert result["code"] == 3, result
            assert 1 <= err.count("\n") <= 2, result
        else:
            # A sparse file is a regular file: read in place, or refused for want of room (the
            # apparent size counts); never copied whole.
            assert result["code"] in (0, 3), result
            if result["code"] == 3:
                assert "free; nothing was copied" in err, result
    assert list(tmpdir.iterdir()) == []


def _wal_without_shm(db: Path) -> Path:
    """A WAL database with commits in its -wal and no -shm: read through a private copy."""
    source = damage.healthy(db.parent / "source.db", wal=True)
    live = sqlite3.connect(source)
    live.execute("CREATE TABLE wal_probe(x)")
    live.commit()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{source}{suffix}", f"{db}{suffix}")
    live.close()
    return db


def _paused(tmp_path: Path, step: str) -> tuple[subprocess.Popen, Path]:
    db = _wal_without_shm(tmp_path / "archon.db")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    marker = tmp_path / "paused"
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "--db", str(db), "approvals", "list"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir), "ARCHON_CONSOLE_TEST_PAUSE": f"{step}:{marker}"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None and not marker.exists():
        time.sleep(0.02)  # waits for the marker (a condition), bounded by the deadline
    if not marker.exists():
        proc.kill()
        pytest.fail(f"the command never reached {step}: {proc.communicate()[1]!r}")
    return proc, tmpdir


TERMINATING = [s for s in HANDLED if s not in (signal.SIGPIPE, signal.SIGXFSZ)]  # Python ignores those two


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGVTALRM,
                                    signal.SIGPROF, signal.SIGXCPU, signal.SIGQUIT, signal.SIGIO,
                                    signal.SIGPWR, signal.SIGRTMIN], ids=_name)
def test_a_terminating_signal_while_the_private_copy_exists_leaves_nothing(tmp_path, signum):
    proc, tmpdir = _paused(tmp_path, "private-copy")
    assert any(tmpdir.iterdir())  # the complete copy, not yet opened
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err.decode()
    assert proc.returncode == 128 + signum, err
    assert list(tmpdir.iterdir()) == []


def test_every_terminating_signal_is_handled():
    """The list the test above samples from: every signal that ends a process by default and that
    another process can send, except SIGPIPE and SIGXFSZ, which Python ignores."""
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
                 "SIGXCPU", "SIGIO", "SIGPWR"):
        assert getattr(signal, name) in TERMINATING, name
    assert set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1)) <= set(TERMINATING)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGUSR1], ids=_name)
def test_once_sqlite_has_the_copy_open_not_even_sigkill_leaves_it(tmp_path, signum):
    proc, tmpdir = _paused(tmp_path, "private-copy-open")
    assert list(tmpdir.iterdir()) == []  # unlinked: it lives only through SQLite's descriptor
    proc.send_signal(signum)
    proc.communicate(timeout=30)
    assert list(tmpdir.iterdir()) == []
