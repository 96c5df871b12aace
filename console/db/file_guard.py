"""No process opens a database's files outside SQLite while it holds a connection to them.

POSIX record locks belong to a process and a file: closing *any* descriptor of the database, its
`-wal`, `-shm` or `-journal` drops every lock the process holds on it, SQLite's own included. Another
client that closes then believes it is the last connection, checkpoints and deletes the `-wal` under
a live transaction. A descriptor opened now is closed later, so the rule is about opening: while
`connected_file` names a database, this process opens none of its files by any means but SQLite.
What must read them raw (a snapshot's block copy and page comparison, a lock probe, a private copy)
runs where no connection is open: before the first or after the last, or in a child process
(console/isolation.py; console/db/snapshot.py says how the snapshot does it).

Two halves live here:

* the registry: every connection the console opens is a `Connection` (console/db/connection.py
  `sqlite_connection` registers it), known while open, by its main file's real path and inode (a
  hard link is the same file); `connected_file(path)` answers, with `stat` only, whether `path` is
  one of those files or their sidecars. A raw descriptor through which the console holds a lock
  (console/db/readonly.py) is registered beside them (`hold_descriptor`);
* the openings of files that are not the console's own (manifests, snapshot candidates, a path a
  ledger names: anything another user or the database's content can name): `open_foreign` refuses
  a name that leads to a connected file (a hard link to `-shm` is no symbolic link), and judges the
  descriptor it opened by `fstat`, keeping it for the process's life when a swapped name led there
  after all. SQLite is such an opener too: `sqlite_target_refused` is asked by
  console/db/connection.py `sqlite_connection` before and after it hands SQLite a name;
* the check: an audit hook on `open` events (`open()`, `io.open`, `os.open`, hence `Path.read_bytes`,
  `shutil.copy`...) and `sqlite3.connect` events that reports every breach. tests/conftest.py creates a log file, names it in
  `ARCHON_CONSOLE_AUDIT_FILES` and installs the hook for the whole session; every console process the
  tests start installs it too (console/__init__.py): the CLI in a subprocess, the TUI's isolated
  children, the snapshot's reader. A breach appends one report to the log, and the test during which
  it happened fails. Outside the tests the variable is unset and nothing is installed; when it is
  set, the log must already exist as a regular file (it is never created, followed or truncated).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import sys
import threading
import weakref
from pathlib import Path
from urllib.parse import parse_qs, unquote

from console.db.limits import MeteredConnection

ENV = "ARCHON_CONSOLE_AUDIT_FILES"
SIDECARS = ("", "-wal", "-shm", "-journal")


class Connection(MeteredConnection):
    """A connection of the console's, registered while open (`connected_file`); its statements'
    time is measured (console/db/limits.py `MeteredConnection`)."""

    locked_file: str | None = None  # the main file's real path; None: no file, or no locks (immutable)
    locked_inode: tuple[int, int] | None = None  # and its (device, inode)

    def close(self) -> None:
        super().close()  # raises (wrong thread) while still open: then it stays registered
        _LIVE.discard(self)


_LIVE: "weakref.WeakSet[Connection]" = weakref.WeakSet()  # a collected connection is closed too


def _locked_file(target: str | Path, uri: bool) -> str | None:
    """The file a connection to `target` takes locks on, or None (in memory, or `immutable=1`)."""
    text = os.fspath(target)
    if uri and text.startswith("file:"):
        name, _, query = text[5:].partition("?")
        params = parse_qs(query)
        if params.get("immutable") == ["1"] or params.get("mode") == ["memory"]:
            return None
        text = unquote(name)
    if text in ("", ":memory:"):
        return None
    return os.path.realpath(text)


def register(conn: sqlite3.Connection, target: str | Path, uri: bool) -> sqlite3.Connection:
    """Remember `conn` (a `Connection` to `target`) until it is closed; returns it."""
    locked = _locked_file(target, uri)
    if locked is not None and isinstance(conn, Connection):
        conn.locked_file = locked
        try:
            st = os.stat(locked)
            conn.locked_inode = (st.st_dev, st.st_ino)
        except OSError:
            pass
        _LIVE.add(conn)
    return conn


_RAW: dict[int, str] = {}  # a descriptor the console holds a lock through (readonly.py) -> real path


def hold_descriptor(fd: int, path: str | os.PathLike[str]) -> None:
    """Count the raw descriptor `fd`, through which this process holds a lock on the database at
    `path` (console/db/readonly.py `_open_quiet_wal`), as a connection: its files are then not
    opened by anything else here until `release_descriptor`."""
    _RAW[fd] = os.path.realpath(path)


def release_descriptor(fd: int) -> None:
    _RAW.pop(fd, None)


def _live_mains() -> list[tuple[str, tuple[int, int] | None]]:
    """(real path, inode) of every database file this process holds locks on."""
    found = [(conn.locked_file, conn.locked_inode) for conn in list(_LIVE) if conn.locked_file]
    for fd, path in list(_RAW.items()):
        try:
            st = os.fstat(fd)
            found.append((path, (st.st_dev, st.st_ino)))
        except OSError:
            found.append((path, None))
    return found


def _live_files() -> dict[tuple[int, int], tuple[str, str]]:
    """(device, inode) of every connected main file and every sidecar that exists now -> (the
    database's main file, the suffix: "" for the main file, "-wal", "-shm", "-journal")."""
    files: dict[tuple[int, int], tuple[str, str]] = {}
    for main, inode in _live_mains():
        if inode is not None:
            files[inode] = (main, "")
        for suffix in SIDECARS[1:]:
            try:
                side = os.stat(main + suffix)
            except OSError:
                continue
            files[(side.st_dev, side.st_ino)] = (main, suffix)
    return files


def connected_files() -> set[str]:
    """Real paths of the database files this process holds an open, locking connection to."""
    return {conn.locked_file for conn in list(_LIVE) if conn.locked_file}


def connected_file(path: str | os.PathLike[str]) -> str | None:
    """The database this process holds a connection to whose main file, `-wal`, `-shm` or
    `-journal` `path` is (by name, or by inode: a hard link is the same file); else None.
    Only `stat`s: asking must not open anything."""
    live = _live_mains()
    if not live:
        return None
    real = os.path.realpath(path)
    for main, _ in live:
        if any(real == main + suffix for suffix in SIDECARS):
            return main
    try:
        st = os.stat(real)
    except OSError:
        return None
    found = _live_files().get((st.st_dev, st.st_ino))
    return None if found is None else found[0]


# --- reading a header without dropping a lock ------------------------------------------------------

_HELD: dict[tuple[int, int], int] = {}  # (device, inode) -> a descriptor kept until the process exits
_held_lock = threading.Lock()
_holding = threading.local()  # set while `read_head` opens a descriptor it will never close


def read_head(path: str | os.PathLike[str], size: int) -> bytes:
    """The first `size` bytes of a database file, read so that this process's locks on it survive.

    The header checks run on every open, and the TUI (or a test, or the restore code) may open a
    file it already holds a connection to. Opening is harmless; closing is what drops the locks. So
    while a connection to the file is open the bytes come through a descriptor this process keeps
    until it exits (one per file), and otherwise through one opened and closed here."""
    if connected_file(path) is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    with _held_lock:
        fd = _HELD.get(key)
        if fd is None:
            _holding.on = True
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            finally:
                _holding.on = False
            _HELD[key] = fd  # never closed: see above
    return os.pread(fd, size, 0)


_KEPT: list[int] = []  # descriptors opened on a connected file by way of a foreign name: never closed


_KEPT_CONNECTIONS: list[sqlite3.Connection] = []  # the same, for SQLite's own descriptors


def _keep(fd: int) -> None:
    with _held_lock:
        _KEPT.append(fd)


def keep_connection(conn: sqlite3.Connection) -> None:
    """Never close `conn`: its target turned out, once open, to be a connected file (swapped in
    between the check and the open); closing it would drop that connection's locks."""
    with _held_lock:
        _KEPT_CONNECTIONS.append(conn)


def open_foreign(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, dir_fd: int | None = None) -> int:
    """Open a file that is not the console's own (a manifest, a snapshot candidate, a path a ledger
    names, anything in a shared directory): the one way to, while any connection is open.

    Such a name may lead to a connected database's main file or sidecar: a hard link to `-shm` is no
    symbolic link, and a name can be swapped between any check and the open. So the name is refused
    before opening when it already leads there (by name or by inode), and the descriptor is judged
    after opening by what it is (`fstat`): when it turns out to be a connected file, it is kept open
    for the process's life, since closing it would drop the connection's locks, and the open is
    refused (`EBUSY`). Never follows a final symbolic link; never blocks on a FIFO."""
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    busy = OSError(errno.EBUSY, "a file of a database this process has open", os.fspath(path))
    if _LIVE or _RAW:
        try:
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if (st is not None and (st.st_dev, st.st_ino) in _live_files()) or (
                dir_fd is None and connected_file(path) is not None):
            raise busy
    _holding.on = True  # the descriptor is judged below, and kept if it must be
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    finally:
        _holding.on = False
    if _LIVE or _RAW:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) in _live_files():
            _keep(fd)
            raise busy
    return fd


def sqlite_target_refused(target: str | os.PathLike[str], uri: bool) -> str | None:
    """Why SQLite must not be handed `target` while this process holds its connections, or None.

    SQLite opens (and, on close, closes) the file it is given and the sidecars named after it. A
    second connection to a connected main file by its own name is harmless: SQLite shares one
    descriptor and one set of locks per inode. Anything else that reaches a connected file is not:
    a connected database's `-wal`, `-shm` or `-journal` given as the database (closing it drops the
    locks on it), its main file under another name (SQLite would pair it with other sidecars), or a
    name whose own sidecars are links to connected files."""
    if not (_LIVE or _RAW):
        return None
    text = os.fsdecode(os.fspath(target))
    if text.startswith("file:"):  # as a URI, also when not flagged one: the audit hook cannot tell
        name, _, query = text[5:].partition("?")
        if parse_qs(query).get("mode") == ["memory"]:
            return None
        text = unquote(name)
    if text in ("", ":memory:"):
        return None
    files = _live_files()
    real = os.path.realpath(text)
    try:
        st = os.stat(real)
        if files.get((st.st_dev, st.st_ino)) == (real, ""):
            return None  # a second connection to a connected main file, by its own name: same sidecars
    except OSError:
        pass
    for suffix in SIDECARS:
        try:
            st = os.stat(real + suffix)
        except OSError:
            continue
        found = files.get((st.st_dev, st.st_ino))
        if found is None:
            continue
        main, kind = found
        return (f"{text}{suffix} is {'the database' if not kind else 'the ' + kind + ' file of'} {main}, "
                f"which this process has open")
    return None


# --- the check, for the test suite ----------------------------------------------------------------

_log: dict[str, int] = {}  # "fd": the log's descriptor, once installed


def breach(opened: object, flags: object = None) -> str | None:
    """The connected database whose file `opened` is, else None. A descriptor passed to `open()` is
    already open, and an `O_PATH` one holds no lock to drop."""
    if isinstance(opened, int) or (isinstance(flags, int) and flags & getattr(os, "O_PATH", 0)):
        return None
    try:
        name = os.fsdecode(os.fspath(opened))
    except TypeError:
        return None
    return connected_file(name)


def _report(path: str, opened: object) -> str:
    import traceback

    stack = "".join(traceback.format_stack(limit=14)[:-2])
    return (f"pid {os.getpid()} opened {os.fsdecode(os.fspath(opened))} outside SQLite while it holds a "
            f"connection to {path}:\n{stack}\n")


def install(log: str) -> bool:
    """Install the audit hook (once for this process: it cannot be removed), reporting to the
    existing regular file `log`; called again, it reports to the new log (a pytest-xdist worker
    inherits its controller's variable before its own tests/conftest.py names its own log)."""
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return False
    installed = "fd" in _log
    _log["fd"] = fd
    if installed:
        return True
    busy = threading.local()

    def hook(event: str, args: tuple) -> None:
        if event not in ("open", "sqlite3.connect") or not (_LIVE or _RAW):
            return
        if getattr(busy, "on", False) or getattr(_holding, "on", False):
            return
        busy.on = True  # the check itself stats and formats: never re-enter
        try:
            if event == "sqlite3.connect":
                why = sqlite_target_refused(args[0], False)
                if why is not None:
                    os.write(_log["fd"], _report(why, args[0]).encode("utf-8", "replace"))
                return
            path = breach(args[0], args[2] if len(args) > 2 else None)
            if path is not None:
                os.write(_log["fd"], _report(path, args[0]).encode("utf-8", "replace"))
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


__all__ = [
    "ENV",
    "Connection",
    "breach",
    "connected_file",
    "connected_files",
    "hold_descriptor",
    "install",
    "install_from_environment",
    "keep_connection",
    "open_foreign",
    "read_head",
    "register",
    "release_descriptor",
    "sqlite_target_refused",
]
