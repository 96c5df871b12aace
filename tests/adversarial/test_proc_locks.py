"""/proc/locks tears: both of its readers, the console's `holders` and the tests' lock counts, read it
so that another process changing its locks meanwhile cannot move the answer.

The kernel hands /proc/locks out one page (4 KB) per read(2), each read resuming at a row number. When
any process on the machine takes or lets go of a lock between two pages, a row is shown twice or
skipped. In the tests that was a lock count that moved by one, either way, for no reason of the code
under test (tests/adversarial/test_sqlite_opens.py failed one run in two on a busy machine, a
different parameter each time, with the same lock listed twice); in the console it is a holder
missed: console/db/exclusive_lock.py `holders` said nobody else had the database open while archon
did, and the upgrade or restore went ahead beside it.
"""

from __future__ import annotations

import fcntl
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console.db import exclusive_lock
from tests.adversarial import proc_locks
from tests.adversarial.holder import Holder

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")

# Another process that keeps taking and letting go of locks on files of its own, and keeps /proc/locks
# longer than a page: the busy machine, made certain.
_CHURN = textwrap.dedent("""
    import fcntl, os, sys
    fds = [os.open(os.path.join(sys.argv[1], f"churn{i}"), os.O_RDWR | os.O_CREAT) for i in range(100)]
    for fd in fds[::2]:
        fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0)
    print("ready", flush=True)
    while True:
        for fd in fds[1::2]:
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0)
        for fd in fds[1::2]:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
""")


@pytest.fixture
def churning(tmp_path):
    churn = tmp_path / "churn"
    churn.mkdir()
    proc = subprocess.Popen([sys.executable, "-I", "-c", _CHURN, str(churn)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_lock_count_does_not_move_while_other_processes_lock(tmp_path, churning):
    """Sixty locks of this process on one file (non-adjacent bytes: one row each), counted while
    another process locks and unlocks: every count is sixty. Read from /proc/locks, about one count
    in thirty was off by one."""
    fd = os.open(tmp_path / "mine", os.O_RDWR | os.O_CREAT)
    try:
        for i in range(60):
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, 2 * i)
        counts = [proc_locks.count(tmp_path / "mine") for _ in range(400)]
    finally:
        os.close(fd)
    assert set(counts) == {60}, sorted(set(counts))


def test_holders_finds_a_holder_a_torn_read_skipped(make_db, monkeypatch):
    """The kernel's tear, replayed: the first read of /proc/locks lacks the holder's row (a row
    before it went away between two pages), the next ones are whole. The holder is still named."""
    path = make_db(projects=("p1",))
    holder = Holder(path, "read-transaction")  # rollback journal, in a read transaction: one lock row
    try:
        with open("/proc/locks") as table:
            whole = table.read()
        mine = f" {holder.proc.pid} "
        assert any(mine in row for row in whole.splitlines())
        torn = "".join(row for row in whole.splitlines(keepends=True) if mine not in row)
        reads = iter([torn])

        def proc_open(name, *args, **kwargs):
            if os.fspath(name) == "/proc/locks":
                return io.StringIO(next(reads, whole))
            return open(name, *args, **kwargs)

        monkeypatch.setattr(exclusive_lock, "open", proc_open, raising=False)  # the module's own `open`
        found = exclusive_lock.holders(path)
        monkeypatch.undo()
        assert [h.pid for h in found] == [holder.proc.pid]
    finally:
        holder.stop()
