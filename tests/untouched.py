"""Proof that something left a database alone: its directory listing, and every file's bytes and mtime.

Also a helper process that holds a WAL database open with uncheckpointed commits (or keeps writing
to it), because POSIX locks are per process: the writer must not live in the test's own process.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def fingerprint_dir(directory: Path) -> dict[str, tuple[int, int, str]]:
    """name -> (size, mtime_ns, sha256) for every entry of `directory`."""
    out = {}
    for name in sorted(os.listdir(directory)):
        p = directory / name
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[name] = (st.st_size, st.st_mtime_ns, digest)
    return out


def without_shm(fingerprint: dict[str, tuple[int, int, str]]) -> dict[str, tuple[int, int, str]]:
    """A fingerprint where the -shm counts only by its presence: reading a live WAL database in
    place writes the reader's mark into it, as every SQLite reader (archon's own) does."""
    return {name: ("present" if name.endswith("-shm") else value) for name, value in fingerprint.items()}


HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    path, mode, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE IF NOT EXISTS support_probe (n INTEGER, pad BLOB)")
    conn.execute("CREATE TABLE IF NOT EXISTS support_probe_twin (n INTEGER)")
    for i in range(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO support_probe VALUES (?, randomblob(200))", (i,))
        conn.execute("INSERT INTO support_probe_twin VALUES (?)", (i,))
        conn.execute("COMMIT")
    print("ready", flush=True)
    if mode == "hold":
        sys.stdin.readline()
    else:  # keep writing, checkpointing now and then, until told to stop
        conn.execute("PRAGMA wal_autocheckpoint = 20")
        import select
        i = rows
        while not select.select([sys.stdin], [], [], 0)[0]:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO support_probe VALUES (?, randomblob(3000))", (i,))
            conn.execute("INSERT INTO support_probe_twin VALUES (?)", (i,))
            conn.execute("COMMIT")
            time.sleep(0.001)  # a real writer pauses between transactions; a tight loop starves readers
            i += 1
            if i % 40 == 0:
                conn.execute("DELETE FROM support_probe WHERE n % 3 = 0 AND pad IS NOT NULL")
    conn.close()
    """
)


class Holder:
    """`with Holder(path, "hold", 50):` a process with 50 uncheckpointed commits in the -wal;
    mode "write" keeps committing (and checkpointing) until the block ends."""

    def __init__(self, path: Path, mode: str = "hold", rows: int = 50):
        self.args = [sys.executable, "-c", HOLDER, str(path), mode, str(rows)]

    def __enter__(self) -> "Holder":
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", line
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)
