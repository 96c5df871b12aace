"""Run a service function in a child process, for a process that holds a connection to the database.

POSIX record locks belong to a process and a file, not to a descriptor: closing *any* descriptor of
the database, its `-wal`, `-shm` or `-journal` drops every lock the process holds on that file,
including the ones SQLite's own connection relies on. Doctor, upgrade and restore open those files
directly (headers, lock probes, private copies, snapshots), so in the TUI, which keeps a connection
open for its whole life, they run here: in a fresh interpreter with no connection of its own to
lose. The child sends back pickled messages (progress ticks, then the result or the refusal); a
`ConsoleError` is re-raised in the caller with its sentence and hint, anything else as
`IsolatedError` with the child's one-line description.

The child is this package's own code, started with this interpreter, so unpickling its messages
trusts nothing more than the caller already does. That holds only if the child cannot import
anything else: a plain `python -c` puts the working directory first on `sys.path`, and a
`struct.py` or `console/__init__.py` next to the user's database would run as the operator. So the
child starts isolated (`-I`: no working directory, no `PYTHON*` variables, no user site) and is then
given the parent's own absolute `sys.path` plus the directory this package was loaded from, so it
imports exactly what the parent imports (editable or normal installation, `PYTHONPATH`, user site).
"""

from __future__ import annotations

import importlib
import os
import sys

from console.errors import ConsoleError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable

# Every CLI start asks `fixed_place` about `$PATH` (console/cli/cli.py), so pickle, struct and
# subprocess (about a quarter of a command's start-up) are imported only by the functions that
# start or serve a child.
_FRAME_SIZE = 8  # a big-endian unsigned 64-bit length before each pickled message


class IsolatedError(Exception):
    """The child failed with something other than a refusal."""


def _write(stream: BinaryIO, message: tuple) -> None:
    import pickle

    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(_FRAME_SIZE, "big") + data)
    stream.flush()


def _read(stream: BinaryIO) -> tuple | None:
    import pickle

    head = stream.read(_FRAME_SIZE)
    if len(head) < _FRAME_SIZE:
        return None
    return pickle.loads(stream.read(int.from_bytes(head, "big")))


_PER_PROCESS = ("/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr")


def fixed_place(entry: str) -> bool:
    """Whether a search-path entry (`sys.path`, `$PATH`) names one directory whoever reads it.

    A relative entry names the working directory; so does `/proc/self/cwd`, and anything under
    `/proc` (`/proc/<pid>/cwd`, `/proc/thread-self/...`) or `/dev/fd` (`/dev/stdin`...) names what
    the reading process has open or where it stands. Such entries are dropped (console/cli/cli.py
    does it for `$PATH`), whatever their spelling (`//proc`, `/x/../proc`) and through any symbolic
    link: links are followed one at a time here, since `realpath` would follow `/proc/self/cwd`
    itself to wherever the working directory is."""
    if not entry or not os.path.isabs(entry):
        return False
    resolved, pending, links = "/", [p for p in entry.split("/") if p not in ("", ".")], 0
    while pending:
        name = pending.pop(0)
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        following = os.path.join(resolved, name)
        if any(following == root or following.startswith(root + "/") for root in _PER_PROCESS):
            return False
        try:
            target = os.readlink(following)
        except OSError:  # not a link (or absent): a plain name
            resolved = following
            continue
        links += 1
        if links > 40:  # the kernel's own limit (ELOOP)
            return False
        if target.startswith("/"):
            resolved = "/"
        pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
    return True


def child_command() -> list[str]:
    """The argv of a child interpreter that cannot import from its working directory.

    Relative `sys.path` entries (`''` after `python -c`) are dropped: they name the working
    directory, wherever that is; so are `/proc/self/cwd` and the like (`fixed_place`). The directory holding the `console` package the parent runs comes
    first when it is not on that path already (the parent found it through `''`).
    """
    path = [entry for entry in sys.path if fixed_place(entry)]
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if home not in path:
        path.insert(0, home)
    code = f"import sys; sys.path[:] = {path!r}; from console.isolation import child_main; child_main()"
    return [sys.executable, "-I", "-c", code]


def call_isolated(
    function: str,
    /,
    *args: Any,
    progress: Callable[[Any], None] | None = None,
    progress_kwarg: str = "progress",
    **kwargs: Any,
) -> Any:
    """`module:function(*args, **kwargs)` in a child process; its result, or its refusal re-raised.

    With `progress`, the child passes a callback as `progress_kwarg` whose events reach `progress`
    here, in the calling thread, as they happen.
    """
    import subprocess

    child = subprocess.Popen(
        child_command(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        close_fds=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        _write(child.stdin, (function, args, kwargs, progress_kwarg if progress else None))
        child.stdin.close()
        while True:
            message = _read(child.stdout)
            if message is None:
                break
            kind = message[0]
            if kind == "progress" and progress is not None:
                progress(message[1])
            elif kind == "result":
                return message[1]
            elif kind == "refusal":
                _, module, name, state = message
                cls = getattr(importlib.import_module(module), name, ConsoleError)
                error = cls.__new__(cls)
                Exception.__init__(error, state.get("reason", ""))
                error.__dict__.update(state)  # reason, hint, and whatever the refusal carries (a plan)
                raise error
            elif kind == "error":
                raise IsolatedError(message[1])
        err = child.stderr.read().decode("utf-8", "replace").strip() if child.stderr else ""
        raise IsolatedError(f"the worker process ended without an answer ({err.splitlines()[-1] if err else 'no output'})")
    finally:
        for stream in (child.stdin, child.stdout, child.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def child_main() -> None:
    """The child's side: one request on stdin, framed messages on stdout."""
    import pickle

    from console.signals import stop_signals_unwind

    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a service prints may corrupt the frames
    request = _read(sys.stdin.buffer)
    if request is None:
        return
    target, args, kwargs, progress_kwarg = request
    module_name, _, function_name = target.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        if progress_kwarg:
            kwargs[progress_kwarg] = lambda event: _write(out, ("progress", event))
        with stop_signals_unwind():  # a hang-up reaches this child too: clean up like the parent
            result = function(*args, **kwargs)
    except ConsoleError as exc:
        try:
            state = dict(vars(exc))
            pickle.dumps(state)
        except Exception:  # noqa: BLE001 - keep the sentence even if an attachment cannot travel
            state = {"reason": exc.reason, "hint": exc.hint}
        _write(out, ("refusal", type(exc).__module__, type(exc).__qualname__, state))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
        _write(out, ("error", f"{type(exc).__name__}: {exc}"))
    else:
        _write(out, ("result", result))
