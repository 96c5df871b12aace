"""Delivering a watch's changes: the line of a change, the `--cursor` file, and the signals held
between the two. `approvals watch` (console/cli/commands/watch.py) and `approvals watch --fleet`
(console/cli/fleet_watch.py) both deliver through these, so a change reads the same and its cursor
is kept the same way whichever watch delivered it.
"""

from __future__ import annotations


class Cursor:
    """The `--cursor` file: read at start, replaced atomically after every delivery.

`decode` turns the file's JSON into a position (ValueError: not a cursor of this command) and
`encode` a position into JSON: one host's `Position` here; a JSON object host -> the host's cursor
for `approvals watch --fleet` (console/cli/fleet_watch.py), through this same file mechanism.

    A save that fails (the directory gone or full, a read-only remount) never stops the stream:
    what the watch is for is the lines, and the cursor only saves repeats after a restart. The
    first failure is said once; the newest position is retried after every change and every poll,
    and the watch says when the cursor is saved again.
    """

    def __init__(self, path: str | None, warn, *, decode=None, encode=None):
        from console.db.paths import expand_home

        self.path = expand_home(path, "--cursor") if path else None
        self._warn = warn
        self._decode = decode
        self._encode = encode or (lambda position: position.to_json())
        self._unsaved = None  # the newest position a failed save left behind

    def load(self):
        from console.errors import UsageError
        from console.services.watch import Position
        from console.text import read_json
        from console.small_files import read_small_text

        if self.path is None:
            return None
        if not self.path.parent.is_dir():
            raise UsageError(f"--cursor {self.path}: its directory does not exist.")
        from console.db.files import require_output_dir

        require_output_dir(self.path.parent, "--cursor")  # another user there could swap the cursor
        try:
            text = read_small_text(self.path)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--cursor {self.path} cannot be read ({getattr(exc, 'strerror', None) or exc}).")
        try:
            return (self._decode or Position.from_json)(read_json(text))
        except ValueError:
            raise UsageError(f"--cursor {self.path} is not a cursor this command wrote; "
                             "move it away to start from now.") from None

    def save(self, position) -> None:
        if self.path is None:
            return
        try:
            self._write(position)
        except OSError as exc:
            if self._unsaved is None:
                self._warn(f"cannot save the cursor {self.path} ({exc.strerror or exc}); still watching, "
                           "and retrying after every change (a restart now may repeat lines)")
            self._unsaved = position
            return
        if self._unsaved is not None:
            self._unsaved = None
            self._warn(f"the cursor {self.path} is saved again")

    def retry(self) -> None:
        """Save the position a failed save left behind, if any."""
        if self._unsaved is not None:
            self.save(self._unsaved)

    def _write(self, position) -> None:
        import json

        from console.db.files import replace_small_file

        replace_small_file(self.path, json.dumps(self._encode(position)) + "\n", "cursor")


class OutputGone(Exception):
    """Whoever read the watch's lines is gone (`approvals watch | head -1` after its line): the
    watch ends, as `approvals list | head -1` does, instead of writing into a closed pipe for ever.
    The change it could not deliver is not saved in the cursor, so the next start delivers it."""


def deliver(write) -> None:
    """Call `write` (print and flush one change); a closed pipe becomes `OutputGone`, never a change
    "skipped" (which would move the cursor past a line nobody read)."""
    import errno

    try:
        write()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.EBADF):
            raise OutputGone() from None
        raise


def output_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more (poll says POLLERR on its write end), asked
    between changes like `tail -f` does: a watch with nothing to say would otherwise never notice
    that its reader left. One poll(2) with no wait; a file or a terminal never reports it."""
    import select
    import sys

    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        poller = select.poll()
        poller.register(fd, 0)  # no events asked: only POLLERR, POLLHUP and POLLNVAL come back
        return any(mask & (select.POLLERR | select.POLLNVAL) for _, mask in poller.poll(0))
    except (OSError, ValueError):
        return False


def quiet_stdout() -> None:
    """After `OutputGone`: point descriptor 1 at /dev/null, so the interpreter's last flush at exit
    does not say "Exception ignored ... BrokenPipeError" on stderr."""
    import os
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
        os.close(null)
    except (OSError, ValueError):
        pass


class held_signals:
    """Ctrl-C, SIGTERM and SIGHUP wait (blocked, not lost) while a change is printed and its cursor
    saved: they arrive right after, so a stop never repeats or skips a change."""

    def __enter__(self):
        import signal

        self._signal = signal
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})

    def __exit__(self, *exc):
        self._signal.pthread_sigmask(self._signal.SIG_SETMASK, self._old)


def say(text: str) -> None:
    """A watch's note (a hook that failed, a cursor not saved, the file gone and back): always one line
    on stderr, with or without `--json`, so stdout carries only changes and `jq .request_id` over it
    never meets a note."""
    import sys

    sys.stderr.write(f"archon-console: {text}\n")
    sys.stderr.flush()


def change_line(change, now) -> str:
    """One line per change; every field passes `line`'s `one_line` (a stored actor class or kind with
    a line break would otherwise print a second, forged change)."""
    from console.clock import relative
    from console.text import line

    when = line(change.at or now.strftime("%Y-%m-%dT%H:%M:%SZ"))[:19].replace("T", " ")  # as the README shows it
    fields = [when, f"{line(change.change):<10}", (change.request_id, 60),
              (change.project_name or change.project_id, 40), change.kind or "-"]
    if change.change in ("new", "expiring", "pending"):
        when_expires = relative(change.expires_at, now)
        fields.append(f"expired {when_expires} (overdue)" if when_expires.endswith(" ago")
                      else f"expires {when_expires}")
    else:
        who = line((change.actor.strip() or repr(change.actor), 40)) if change.actor else "-"
        said = [line((change.actor_class, 40))] if change.actor_class else []
        if change.os_account:  # who acted by the OS account, beside the declared name (D21)
            said.append("OS " + line((change.os_account, 80)))
        fields.append(f"by {who}" + (f" ({', '.join(said)})" if said else ""))
        if change.reason:
            fields.append("reason: " + line((change.reason, 120)))
    return line(*fields)


__all__ = ["Cursor", "OutputGone", "change_line", "deliver", "held_signals", "output_gone", "quiet_stdout", "say"]
