"""The POSIX locks a process holds on one file, read from /proc/locks.

A file is named there as `MAJOR:MINOR:INODE` (major and minor in hex). Matching on the inode alone
counted another file system's file of the same inode number, such as a lock the test process holds
elsewhere that a garbage-collected connection then drops mid-test: a lock count that moved for no
reason of the code under test.
"""

from __future__ import annotations

import os
from pathlib import Path


def file_key(path: str | os.PathLike[str]) -> str:
    """The `MAJOR:MINOR:INODE` /proc/locks names `path`'s file by."""
    st = os.stat(path)
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def held(pid: int, path: str | os.PathLike[str]) -> list[list[str]]:
    """The /proc/locks rows (split, without the waiter marker) of the locks `pid` holds on `path`."""
    key = file_key(path)
    rows = []
    with open("/proc/locks") as table:
        for line in table:
            fields = line.split()
            if "->" in fields:  # a waiter, not a holder
                continue
            if len(fields) >= 8 and int(fields[4]) == pid and fields[5].lower() == key:
                rows.append(fields)
    return rows


def count(path: str | os.PathLike[str] | Path, pid: int | None = None) -> int:
    return len(held(os.getpid() if pid is None else pid, path))
