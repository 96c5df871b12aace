"""`approvals watch` as a real process, and archon-style commits to stream into it (tests/test_watch.py,
tests/adversarial/test_hook_ids.py)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

from tests.approvals_helpers import NOW, add_request, connect

FROZEN = "2026-11-01 09:30:00"
WAIT = 20.0  # generous: CI machines are slow; a passing run never waits this long


class Watch:
    """`approvals watch` in its own process; lines are read on a thread so a test can time out."""

    def __init__(self, db: Path, *extra: str, json_lines: bool = True, program: tuple[str, ...] | None = None,
                 cwd: Path | None = None, env: dict[str, str] | None = None):
        argv = [*(program or (sys.executable, "-m", "console")), "approvals", "watch", "--db", str(db),
                "--poll", "0.05", *extra]
        if json_lines:
            argv.append("--json")
        env = dict(env or os.environ, ARCHON_CONSOLE_NOW=FROZEN, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=cwd)
        self.lines: queue.Queue[str] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._collect, daemon=True).start()

    @staticmethod
    def _pump(stream, into):
        for line in stream:
            into.put(line)

    def _collect(self):
        for line in self.proc.stderr:
            self.errors.append(line)

    def next(self, timeout: float = WAIT) -> dict:
        line = self.lines.get(timeout=timeout)
        return json.loads(line)

    def changes(self, n: int) -> list[dict]:
        """The next `n` lines of stdout: changes only; a note there (README: notes go to stderr) fails."""
        out = [self.next() for _ in range(n)]
        assert [v for v in out if v.get("change") == "note"] == [], out
        return out

    def quiet(self, seconds: float = 0.5) -> list[str]:
        """Whatever arrives within `seconds` (the caller expects nothing)."""
        got = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                got.append(self.lines.get(timeout=0.05))
            except queue.Empty:
                pass
        return got

    def notes(self) -> list[str]:
        """Stderr so far (every note goes there, with or without `--json`)."""
        return self.errors

    def ready(self) -> None:
        """Wait until the watcher has taken its starting position (it says so on stderr)."""
        deadline = time.monotonic() + WAIT
        while not any("watching approval requests" in e for e in self.errors):
            assert time.monotonic() < deadline and self.proc.poll() is None, self.errors
            time.sleep(0.02)

    def stop(self, sig=signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def new_request(db: Path, request_id: str, project: str = "p1", **kwargs) -> None:
    conn = connect(db)
    conn.execute("BEGIN IMMEDIATE")
    add_request(conn, request_id, project, expires_at=NOW + timedelta(hours=2), created_at=NOW, **kwargs)
    conn.execute("COMMIT")
    conn.close()
