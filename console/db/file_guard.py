"""The check that no process opens a database's files outside SQLite while it holds a connection.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's own
included; a descriptor opened now is closed later, so the rule is about opening: while
console/db/connect.py `connected_files()` names a database, this process opens neither it nor its
`-wal`, `-shm` or `-journal` by any means but SQLite. Whatever must read those files raw (a
snapshot's page comparison, a lock probe, a private copy) runs where no connection is open: before
the first or after the last, or in a child process (console/db/snapshot_reader.py).

The test suite proves the rule holds everywhere: tests/conftest.py creates a log file, names it in
`ARCHON_CONSOLE_AUDIT_FILES` and installs this audit hook (`open` events cover `open()`, `io.open`
and `os.open`); every console process the tests start installs it too (console/__init__.py), the
TUI's isolated children and the CLI in a subprocess included. A breach appends one report to the
log, and the test during which it happened fails. Outside the tests the variable is unset and
nothing is installed; when it is set, the log must already exist as a regular file (it is never
created, followed through a link or truncated here).
"""

from __future__ import annotations

import os
import stat
import sys
import threading

ENV = "ARCHON_CONSOLE_AUDIT_FILES"
_installed: list[int] = []  # the log's descriptor, once installed


def breach(opened: object, flags: object = None) -> str | None:
    """The database whose file `opened` is (console/db/connect.py `connected_file`), when this
    process holds a connection to it; else None. An `O_PATH` descriptor holds no lock to drop."""
    connect = sys.modules.get("console.db.connect")
    if connect is None or isinstance(opened, int):  # no connection yet; open(fd) wraps an open descriptor
        return None
    if isinstance(flags, int) and flags & getattr(os, "O_PATH", 0):
        return None
    try:
        name = os.fsdecode(os.fspath(opened))
    except TypeError:
        return None
    return connect.connected_file(name)


def _report(path: str, opened: object) -> str:
    import traceback

    stack = "".join(traceback.format_stack(limit=14)[:-2])
    return (f"pid {os.getpid()} opened {os.fsdecode(os.fspath(opened))} outside SQLite while it holds a "
            f"connection to {path}:\n{stack}\n")


def install(log: str) -> bool:
    """Install the audit hook once for this process, reporting to the existing regular file `log`."""
    if _installed:
        return True
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return False
    _installed.append(fd)
    busy = threading.local()

    def hook(event: str, args: tuple) -> None:
        if event != "open" or getattr(busy, "on", False):
            return
        busy.on = True  # the check itself stats and formats: never re-enter
        try:
            path = breach(args[0], args[2] if len(args) > 2 else None)
            if path is not None:
                os.write(fd, _report(path, args[0]).encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a check that fails must not change what the code does
            pass
        finally:
            busy.on = False

    sys.addaudithook(hook)
    return True


def install_from_environment() -> None:
    log = os.environ.get(ENV)
    if log:
        install(log)


__all__ = ["ENV", "breach", "install", "install_from_environment"]
