"""The POSIX locks a process holds on one file, read from /proc/PID/fdinfo.

A lock is named there as in /proc/locks: `N: POSIX ADVISORY READ PID MAJOR:MINOR:INODE START END`
(major and minor in hex). Matching on the inode alone counted another file system's file of the same
inode number, so a file is matched by device and inode.

Not /proc/locks: the kernel hands that table out one page (4 KB) per read, each read resuming at a
row number, so while any other process on the machine takes or drops a lock between two reads, a row
is shown twice or skipped (a lock count that moved by one, in either direction, for no reason of the
code under test: tests/adversarial/test_proc_locks.py shows it). The locks of one open file, in its
fdinfo, come back in one read; a process holds its POSIX locks through descriptors it still has
open (closing one drops them all), so every lock it holds on the file is listed under one of them.
"""

from __future__ import annotations

import os
from pathlib import Path


def file_key(path: str | os.PathLike[str]) -> str:
    """The `MAJOR:MINOR:INODE` a lock row names `path`'s file by."""
    st = os.stat(path)
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def held(pid: int, path: str | os.PathLike[str]) -> list[list[str]]:
    """The lock rows (split, without the waiter marker) of the locks `pid` holds on `path`."""
    key = file_key(path)
    st = os.stat(path)
    rows: dict[tuple[str, ...], list[str]] = {}
    fds = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fds):
        try:
            opened = os.stat(fds / fd)  # the file the descriptor leads to: a stat, never an open of it
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                text = info.read()
        except OSError:
            continue  # closed meanwhile (or a descriptor stat cannot follow)
        for line in text.splitlines():
            if not line.startswith("lock:"):
                continue
            fields = line.split()[1:]
            if "->" in fields:  # a waiter, not a holder
                continue
            if len(fields) >= 8 and int(fields[4]) == pid and fields[5].lower() == key:
                rows[tuple(fields[1:])] = fields  # one lock, listed under every descriptor of its file
    return list(rows.values())


def count(path: str | os.PathLike[str] | Path, pid: int | None = None) -> int:
    return len(held(os.getpid() if pid is None else pid, path))
