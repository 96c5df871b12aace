"""`approvals watch` whose reader leaves (`approvals watch | head -1`): the watch ends instead of
writing into a closed pipe for ever, and its cursor keeps the change nobody read (issue 21: a
console or a stream that runs for nobody). Real processes and a real pipe; every wait is bounded
and waits for a condition."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.approvals_helpers import seed
from tests.watch_helpers import FROZEN, WAIT, new_request


@pytest.fixture
def db(make_db):
    return make_db(fill=seed, wal=True, cached=True)


class PipedWatch:
    """`approvals watch --json` writing into a pipe this test holds the only read end of."""

    def __init__(self, db: Path, tmp_path: Path, *extra: str):
        self.read_end, write_end = os.pipe()
        self.err = tmp_path / f"watch-{time.monotonic_ns()}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "console", "approvals", "watch", "--db", str(db), "--poll", "0.05",
                 "--json", *extra],
                stdout=write_end, stderr=err, stdin=subprocess.DEVNULL,
                env=dict(os.environ, ARCHON_CONSOLE_NOW=FROZEN))
        os.close(write_end)
        self.pending = b""

    def ready(self) -> None:
        deadline = time.monotonic() + WAIT
        while "watching approval requests" not in self.err.read_text():
            assert time.monotonic() < deadline and self.proc.poll() is None, self.err.read_text()
            time.sleep(0.02)

    def line(self) -> dict:
        deadline = time.monotonic() + WAIT
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            assert left > 0, "no line from the watch"
            if select.select([self.read_end], [], [], left)[0]:
                self.pending += os.read(self.read_end, 65536)
        first, self.pending = self.pending.split(b"\n", 1)
        return json.loads(first)

    def reader_leaves(self) -> None:
        os.close(self.read_end)

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def test_a_watch_whose_reader_left_ends_even_when_nothing_changes(db, tmp_path):
    watch = PipedWatch(db, tmp_path)
    watch.ready()
    watch.reader_leaves()
    assert watch.wait() == 0  # on main: ran for ever (nothing to write, so nothing told it)
    said = watch.err.read_text()
    assert "BrokenPipe" not in said and "Exception ignored" not in said and "Traceback" not in said, said


def test_the_change_nobody_read_is_not_saved_in_the_cursor(db, tmp_path):
    cursor = tmp_path / "watch.cursor"
    first = PipedWatch(db, tmp_path, "--cursor", str(cursor))
    first.ready()
    new_request(db, "apr-read")
    assert first.line()["request_id"] == "apr-read"
    first.reader_leaves()
    new_request(db, "apr-unread")  # written (or not) into the closed pipe: never "skipped"
    assert first.wait() == 0
    assert "skipped" not in first.err.read_text()
    second = PipedWatch(db, tmp_path, "--cursor", str(cursor))
    second.ready()
    assert second.line()["request_id"] == "apr-unread"  # on main: lost (the cursor had moved past it)
    second.reader_leaves()
    assert second.wait() == 0


def test_audit_follow_whose_reader_left_ends_even_when_nothing_happens(db):
    """`audit --follow` is the other stream: the same rule (console/cli/watch_delivery.py output_gone)."""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "console", "audit", "--db", str(db), "--follow", "--poll", "0.05",
                             "--since", "2099-01-01"],  # nothing to print, now or later
                            stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(write_end)
    os.close(read_end)
    try:
        _, err = proc.communicate(timeout=WAIT)  # on main: never ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and b"Traceback" not in err and b"Exception ignored" not in err, err
