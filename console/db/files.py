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

Exclusive names are not enough in a directory another user owns, or can write without the sticky
bit: that user may rename or delete our entries, swap a subdirectory we work in for their own
(they then read what we copy there, and what we publish is their file). `require_output_dir` is
the one check every option naming an output directory or file passes (`--keep-snapshot`,
`--snapshot-dir`, `--bundle`, `--cursor`, the views file): the directory and every directory above
it must be owned by us or root and not writable by others unless sticky, and the named directory
must not be a symlink. Scratch work happens only in `private_dir` in the temp directory.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from pathlib import Path

from console.db.file_trust import directory_why

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


def replace_small_file(path: str | os.PathLike[str], text: str, kind: str) -> Path:
    """Write `text` as the whole new content of the console's own small file `path` (saved views, a
    watch cursor): a temporary file created exclusively beside it, written and synced, then renamed
    over it, so a reader sees the old file or the new one, never a half; removed if anything fails."""
    path = Path(path)
    tmp = create_exclusive(path.parent, temp_prefix(kind))
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return publish(tmp, path, no_clobber=False)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_output_dir(directory: Path, option: str) -> int:
    """A descriptor on the directory `require_output_dir` accepted, checked again through the
    descriptor: whatever happens to the name afterwards, files are made in this very directory."""
    from console.errors import UsageError

    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    why = directory_why(os.fstat(fd), str(directory))
    if why is not None:
        os.close(fd)
        raise UsageError(f"{option} {directory}: {why}, and could then swap what is written there.")
    return fd


def create_exclusive_at(dir_fd: int, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new 0600 file under a random name in the directory `dir_fd` holds: (write descriptor, name)."""
    for _ in range(100):
        name = f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(name, flags, 0o600, dir_fd=dir_fd), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", prefix)


def publish_at(dir_fd: int, tmp: str, final: str) -> None:
    """`publish` within the directory `dir_fd` holds: never onto, nor through, an existing name."""
    if not stat.S_ISREG(os.stat(tmp, dir_fd=dir_fd, follow_symlinks=False).st_mode):
        raise FileExistsError(errno.EEXIST, "the temporary file was replaced by something else", tmp)
    try:
        os.link(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        try:
            os.stat(final, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), final) from None
    os.unlink(tmp, dir_fd=dir_fd)


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


def require_output_dir(directory: str | os.PathLike[str], option: str, *, create: bool = False) -> Path:
    """`directory`, made 0700 when missing and `create`, once it is safe to write in: a directory
    (not a symlink to one), and it and every directory above it owned by us or root and not
    writable by other users unless sticky (/tmp is fine). Else `UsageError` (exit 2) in one sentence.

    Another user who can rename entries here swaps what we work in or publish (module docstring).
    """
    from console.errors import UsageError

    path = Path(os.path.abspath(Path(directory).expanduser()))
    if create and not os.path.lexists(path):
        try:
            path.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UsageError(f"{option} {path}: cannot create it ({exc.strerror or exc}).") from None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: the directory does not exist.") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}.") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{option} {path} is a symbolic link; name the directory itself.")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{option} {path} exists and is not a directory.")
    real = Path(os.path.realpath(path))
    for where in (real, *real.parents):
        why = directory_why(os.stat(where), str(where))
        if why is not None:
            raise UsageError(
                f"{option} {path}: {why}, and could then swap what is written there.",
                "Choose a directory only you (or root) can write to, or a sticky one like /tmp.")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"Cannot write in {path}: permission denied.", "Choose a directory you can write to.")
    return path


def reached(step: str) -> None:
    """A test hook at the steps where files of ours exist (tests/adversarial/test_scratch_swap.py,
    test_hostile_sidecars.py): tests replace it in-process; a child process whose environment has
    ARCHON_CONSOLE_TEST_PAUSE="STEP:FILE" creates FILE at STEP and then waits for a signal."""
    wanted = os.environ.get("ARCHON_CONSOLE_TEST_PAUSE")
    if not wanted or wanted.partition(":")[0] != step:
        return
    import signal

    fd = os.open(wanted.partition(":")[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    while True:
        signal.pause()


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
    "create_exclusive_at",
    "open_output_dir",
    "publish_at",
    "keep_aside",
    "leftovers_possible",
    "numbered",
    "private_dir",
    "publish",
    "replace_small_file",
    "publish_unique",
    "reached",
    "remove_stale",
    "require_output_dir",
    "temp_prefix",
]
