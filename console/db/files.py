"""Every file and directory the console creates, created so that nobody else's symlink is followed.

The console writes into directories other users can write to: /tmp, a `--keep-snapshot` or
`--snapshot-dir` directory, the database's own directory. A name anyone can predict there can be
taken first by a symlink to a file the operator can write, and a plain `open()` or
`sqlite3.connect()` on it writes through the link (SQLite resolves a symlinked database name and
opens its target). So nothing is ever created under a predictable name:

* `create_exclusive` makes a new empty file with `mkstemp` (`O_CREAT|O_EXCL`: it fails rather than
  follow anything already there) under a random name in the target directory; SQLite's backup API
  then writes into that exact, existing regular file;
* `publish` gives the finished file its final name with `link()`, which never follows or replaces
  whatever is at the destination (a symlink there counts as taken), then drops the temporary name;
* `private_dir` makes a 0700 directory (`mkdtemp`) whose name carries the process id, so that
  `remove_stale` can delete what a killed run (SIGKILL, power cut) left behind at the next start
  while leaving the files of runs still going alone.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from pathlib import Path

# `shutil` and `tempfile` are imported where they are used: every CLI start imports this module
# for `leftovers_possible`, and the two cost about as much as the rest of `approvals list`'s imports.

PREFIX = "archon-console-"
# Every temporary name we create is "archon-console-<kind>.<pid>." and a random part: directories
# `archon-console-ro.<pid>.XXXX` in $TMPDIR, hidden files `.archon-console-snapshot.<pid>.NAME.XXXX.tmp`
# beside their final name. Only these kinds are ever removed as leftovers, never a user's file.
KINDS = ("ro", "copy", "inspect", "scratch", "keep", "snapshot", "demo", "restore", "aside", "bundle", "cursor", "views")
_OURS = re.compile(rf"^\.?{re.escape(PREFIX)}({'|'.join(KINDS)})\.(\d+)\.")


# link() failing with these means "no hard links here", not "the name is taken".
_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


def create_exclusive(directory: str | os.PathLike[str], prefix: str, suffix: str = "") -> Path:
    """A new, empty 0600 regular file in `directory` under a name nobody could have planted."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    os.close(fd)
    return Path(name)


def temp_prefix(kind: str, hidden: bool = True) -> str:
    """The start of a temporary name: kind and process id, so `remove_stale` can tell whose it is."""
    assert kind in KINDS, kind
    return f"{'.' if hidden else ''}{PREFIX}{kind}.{os.getpid()}."


def _require_regular(tmp: Path) -> None:
    """What we publish must still be the regular file we created (not swapped for a link)."""
    if not stat.S_ISREG(os.lstat(tmp).st_mode):
        raise FileExistsError(errno.EEXIST, "the temporary file was replaced by something else", str(tmp))


def publish(tmp: str | os.PathLike[str], final: str | os.PathLike[str], *, no_clobber: bool = True) -> Path:
    """Rename `tmp` to `final`; with `no_clobber`, raise FileExistsError when anything (a dangling
    symlink included) is already there instead of replacing it.

    Without `no_clobber` it is `os.replace`, which replaces a symlink at `final`, never its target.
    """
    tmp, final = Path(tmp), Path(final)
    _require_regular(tmp)
    if not no_clobber:
        os.replace(tmp, final)
        return final
    try:
        os.link(tmp, final, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        # A file system without hard links: check, then rename (a race is possible only here).
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(final)) from None
        os.rename(tmp, final)
        return final
    os.unlink(tmp)
    return final


def numbered(target: Path, n: int) -> Path:
    """`target` for n == 1, else `stem-n.suffix` beside it."""
    return target if n == 1 else target.with_name(f"{target.stem}-{n}{target.suffix}")


def publish_unique(tmp: str | os.PathLike[str], target: str | os.PathLike[str], *, limit: int = 1000) -> Path:
    """`publish` under `target`, else `target-2`, `target-3`...: never onto an existing name."""
    target = Path(target)
    for n in range(1, limit + 1):
        try:
            return publish(tmp, numbered(target, n))
        except FileExistsError:
            if not os.path.lexists(tmp):
                raise
    raise FileExistsError(errno.EEXIST, f"{limit} names are taken", str(target))


def keep_aside(source: Path, target: Path, *, limit: int = 1000) -> Path:
    """Keep `source` under `target` (or `target-2`, `target-3`...) without copying when possible.

    A hard link never follows a symlink planted at the name; where links are impossible the bytes
    are copied into an exclusively created file that is then published the same way.
    """
    import shutil

    names = [target] + [target.with_name(f"{target.name}-{n}") for n in range(2, limit + 1)]
    for candidate in names:
        try:
            os.link(source, candidate)  # never follows or replaces what is at `candidate`
            return candidate
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            break
    tmp = create_exclusive(target.parent, temp_prefix("aside"), ".tmp")
    try:
        shutil.copyfile(source, tmp)
        shutil.copystat(source, tmp)
        for candidate in names:
            try:
                return publish(tmp, candidate)
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, f"{limit} names are taken", str(target))
    finally:
        tmp.unlink(missing_ok=True)


def private_dir(kind: str, parent: str | os.PathLike[str] | None = None) -> Path:
    """A new 0700 directory named for `kind` and this process (mkdtemp: never an existing one)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=temp_prefix(kind, hidden=parent is not None), dir=parent))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _temp_dir_guess() -> str | None:
    """The directory `tempfile.gettempdir()` resolves to, without its probe file: tempfile's
    candidates in its order ($TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp), the first that is a
    directory this user may write. None when none is (tempfile would then use the working directory)."""
    resolved = getattr(sys.modules.get("tempfile"), "tempdir", None)
    if resolved:  # tempfile already resolved it (or a test set it): that is the answer
        return resolved
    candidates = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for candidate in [*candidates, "/tmp", "/var/tmp", "/usr/tmp"]:
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


def leftovers_possible(directory: str | os.PathLike[str] | None = None) -> bool:
    """Whether `directory` (default: the temp directory) holds any name `temp_prefix` makes: one
    `scandir` with a prefix test and nothing imported, so every CLI start can afford it. True
    whenever it cannot tell, so `remove_stale` decides."""
    root = os.fspath(directory) if directory is not None else _temp_dir_guess()
    if root is None:
        return True
    ours = (PREFIX, "." + PREFIX)
    try:
        with os.scandir(root) as entries:
            return any(entry.name.startswith(ours) for entry in entries)
    except OSError:
        return True


def remove_stale(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove what killed console runs left in `directory` (default: the temp directory).

    Only entries named by `temp_prefix`, owned by us, not symlinks, whose process is gone. A copy
    that a run killed with SIGKILL could not remove holds user data: it must not outlive the run.
    """
    import shutil
    import tempfile

    root = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    me = os.getpid()
    for entry in entries:
        match = _OURS.match(entry.name)
        if match is None:
            continue
        pid = int(match.group(2))
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if pid == me or info.st_uid != os.geteuid() or _alive(pid):
            continue
        path = Path(entry.path)
        try:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)
            elif stat.S_ISREG(info.st_mode):
                path.unlink()
            else:
                continue
        except OSError:  # gone already, or not ours to remove: harmless either way
            continue
        removed.append(path)
    return removed


__all__ = [
    "create_exclusive",
    "keep_aside",
    "leftovers_possible",
    "numbered",
    "private_dir",
    "publish",
    "publish_unique",
    "remove_stale",
    "temp_prefix",
]
