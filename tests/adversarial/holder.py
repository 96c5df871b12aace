"""A second process that keeps the database open, as archon does: the stand-in the restore, upgrade and
upgrade-screen tests refuse in front of (tests/adversarial/test_restore_while_open.py,
test_upgrade_while_open.py, tests/tui/test_upgrade_in_use.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOLDER = textwrap.dedent("""
    import sqlite3, sys
    path, how = sys.argv[1], sys.argv[2]
    conn = sqlite3.connect(path, isolation_level=None)
    if how == "read-transaction":
        conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM projects").fetchone()  # idle afterwards unless in a transaction
    print("ready", flush=True)
    sys.stdin.read()
""")


def _python_for(user: str | None) -> str:
    """An interpreter `user` may run (the holder needs only the standard library)."""
    if user is None:
        return sys.executable
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(candidate):
            continue
        try:
            probe = subprocess.run([candidate, "-I", "-c", "import sqlite3"], user=user, cwd="/",
                                   capture_output=True, check=False)
        except OSError:  # not executable by that user
            continue
        if probe.returncode == 0:
            return candidate
    pytest.skip(f"no Python interpreter that user {user} may run")


class Holder:
    """A second process that keeps the database open, as archon does."""

    def __init__(self, path: Path, how: str, user: str | None = None):
        python = _python_for(user)
        self.proc = subprocess.Popen(
            [python, "-I", "-c", HOLDER, str(path), how],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            user=user, cwd="/",
        )
        line = self.proc.stdout.readline().strip()
        assert line == "ready", self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
