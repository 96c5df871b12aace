"""Where the database is: `--db`, else `$ARCHON_DB_PATH`, else archon's default; and whether that
path can be a database file at all, decided from `stat` alone.

The stat comes first because opening is not harmless: `open()` on a FIFO blocks until a writer
appears (the console hung forever), a device can be endless, and a symlink loop raises ELOOP
from deep inside a read. None of these is a database, and each deserves one sentence.

The same holds for SQLite's side files (`-wal`, `-shm`, `-journal`), which SQLite and the private
copy (console/db/locked_copy.py) open by name: a FIFO as `-shm` hung every read-only command, a
`-wal` linked to /dev/zero filled the temp directory. SQLite never makes them anything but regular
files, so anything else is refused before any connection is opened (`lstat` only: no descriptor is
opened, so no lock a connection of ours holds on the database can be dropped).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from console.errors import DatabaseUnusable, UsageError

DEFAULT_DB_PATH = Path("~/.archon/archon.db")



def expand_home(path: str | os.PathLike[str], what: str = "The path") -> Path:
    """`path` with `~` and `~user` expanded. A `~user` that names nobody here (or a home that cannot
    be found) is the user's to fix: a usage sentence, never Python's "Could not determine home
    directory" as an unexpected RuntimeError. Every path a user or a client gives goes through it."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
        raise UsageError(f"{what} {shown!r} starts with ~ but names no home directory on this machine.",
                         "Write the path out in full.") from None


def resolve_db_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit is not None:
        if not str(explicit).strip():
            # An empty --db (say, an unset shell variable) must not fall back to another database.
            raise UsageError("--db was given an empty path.", "Name the database file, or leave --db out.")
        return expand_home(explicit, "--db")
    env = os.environ.get("ARCHON_DB_PATH")
    if env:
        return expand_home(env, "ARCHON_DB_PATH")
    return expand_home(DEFAULT_DB_PATH, "The default database path")


def no_database(path: str | os.PathLike[str], what: str = "database") -> DatabaseUnusable:
    """Nothing at `path`: the refusal names the path and what is wrong with it (which directory is
    missing, or which directory lacks the file), and says how to name another only when the path
    was not named: `doctor bad/missing.db` was told "Pass --db PATH" although it had passed one.

    How the path was chosen is read from the path itself (it is `$ARCHON_DB_PATH`'s, or the default
    place), so every command, whether the path came from --db, the environment or its own PATH
    argument, gets the sentence that is true for it. `stat` only, like everything here."""
    path = Path(path)
    reason = f"No {what} at {path}: {_missing_part(path)}."
    if what != "database":
        return DatabaseUnusable(reason)
    hint = chosen_by(path) or "Check the path given."
    return DatabaseUnusable(reason, f"{hint} The console never creates a database.")


def chosen_by(path: str | os.PathLike[str]) -> str | None:
    """How to name another database when the user did not name this one in the command: the path is
    `$ARCHON_DB_PATH`'s or the default place. Every refusal of the database file itself (missing, a
    directory, empty, not SQLite...) adds it, so `ARCHON_DB_PATH=/tmp archon-console approvals list`
    says where "/tmp" came from; None when the path was typed (--db, PATH)."""
    env = os.environ.get("ARCHON_DB_PATH")
    if env and _same_place(Path(path), env):
        return "ARCHON_DB_PATH names it; point it at archon's database or pass --db PATH."
    if _same_place(Path(path), DEFAULT_DB_PATH):
        return "That is the default place; pass --db PATH or set ARCHON_DB_PATH."
    return None


def _same_place(path: Path, other: str | os.PathLike[str]) -> bool:
    try:
        return os.path.abspath(path) == os.path.abspath(Path(other).expanduser())
    except RuntimeError:  # a `~user` that names nobody
        return False


def _missing_part(path: Path) -> str:
    """What is wrong with a path that names nothing: the first directory on it that is missing or is
    not a directory, else the directory without the file."""
    for parent in reversed(path.parents[:-1] if not path.is_absolute() else path.parents):
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            return f"there is no directory {parent}"
        except OSError as exc:
            return f"{parent} cannot be read ({exc.strerror or exc})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{parent} is {'a file' if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)}, not a directory"
    where = "the working directory" if str(path.parent) == "." else path.parent
    return f"there is no file {path.name} in {where}"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def require_database_file(path: str | os.PathLike[str], *, what: str = "database") -> os.stat_result:
    """The file's stat when it can be an SQLite file; otherwise `DatabaseUnusable` (exit 3).

    Symlinks are followed (archon's own path may be one); a loop or a dangling link is refused.
    """
    path = Path(path)
    hint = chosen_by(path) if what == "database" else None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise DatabaseUnusable(f"{path} is a symbolic link to nothing; no {what} there.", hint) from None
        raise no_database(path, what) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DatabaseUnusable(f"{path} is a loop of symbolic links, not a {what} file.", hint) from None
        if exc.errno == errno.ENOTDIR:  # a file where the path needs a directory
            raise no_database(path, what) from None
        raise DatabaseUnusable(f"Cannot read {path}: {exc.strerror or exc}.", hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise DatabaseUnusable(f"{path} is {_kind(st.st_mode)}, not a {what} file.", hint)
    if what == "database":
        require_regular_sidecars(path)
    return st


SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")


def sidecars(path: str | os.PathLike[str]) -> dict[str, Path]:
    """The side files SQLite uses for `path`: named after it with every symbolic link resolved, as
    SQLite names them (a -wal beside a symlink is not the database's; the one beside its target is)."""
    real = os.path.realpath(path)
    return {suffix: Path(f"{real}{suffix}") for suffix in SIDECAR_SUFFIXES}


def require_regular_sidecars(path: str | os.PathLike[str]) -> None:
    """Each existing `-wal`, `-shm`, `-journal` beside `path` (and beside the file a symlinked `path`
    names, where SQLite looks) is a regular file, not a symlink; else `DatabaseUnusable` (exit 3).

    Runs before any connection to the database exists: `lstat` only (module docstring).
    """
    bases = {os.fspath(path), os.path.realpath(path)}
    for base in sorted(bases):
        for suffix in SIDECAR_SUFFIXES:
            side = f"{base}{suffix}"
            try:
                st = os.lstat(side)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise DatabaseUnusable(f"Cannot read {side}: {exc.strerror or exc}.") from None
            if stat.S_ISLNK(st.st_mode):
                raise DatabaseUnusable(f"{side} is a symbolic link; SQLite's {suffix} file must be a regular "
                                       "file, so the database is not read.")
            if not stat.S_ISREG(st.st_mode):
                raise DatabaseUnusable(f"{side} is {_kind(st.st_mode)}; SQLite's {suffix} file must be a "
                                       "regular file, so the database is not read.")


def nonempty_file(path: str | os.PathLike[str]) -> bool:
    """Whether a side file (`-journal`, `-wal`) exists with content, in one `stat`.

    `exists()` then `stat()` races the writer that deletes its journal at commit: the file can
    vanish between the two calls, which raised FileNotFoundError from a read-only open.
    """
    try:
        return os.stat(path).st_size > 0
    except FileNotFoundError:
        return False
