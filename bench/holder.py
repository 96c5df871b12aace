"""A stand-in for a running archon: holds a database open with a hot -wal until stdin closes.

`python -m bench.holder PATH WRITES NOW`: WAL mode, `wal_autocheckpoint = 0` (archon checkpoints
on its own schedule, so between its checkpoints the -wal holds committed pages readers must look
through), WRITES decisions committed one transaction each as archon commits them, then prints
`ready <wal bytes>` and keeps the connection open, idle, until its stdin reaches end of file.
The requests it decides are the highest pending ids, so the benchmarks (lowest first) never
compete with it for the same rows.
"""

from __future__ import annotations

import os
import sqlite3
import sys

from bench.harness import pending_ids, raw_decide


def main(path: str, writes: int, now: str) -> None:
    ids = pending_ids(path, writes, now, newest_first=True) if writes else []
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA foreign_keys = ON")
    raw_decide(conn, ids, now, actor="archon-holder")
    wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
    print("ready", wal, flush=True)
    sys.stdin.read()
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
