"""SIGTERM, SIGHUP and every other signal that would end the process (`HANDLED`) end a command the
way Ctrl-C does, so its cleanup runs.

By default either signal kills the process on the spot: a read-only command on a WAL database
then leaves its private copy of the user's data in the temp directory, and an upgrade its partial
snapshot. Raised as `Stopped` (a KeyboardInterrupt), they unwind through the same `finally`
blocks as Ctrl-C. A signal the parent set to be ignored (`nohup`) stays ignored; a second signal
while the first one's cleanup runs is ignored so the cleanup can finish.

An exception raised at an arbitrary point inside Textual's event loop skips the app's own shutdown
(its input and writer threads then keep the process alive, and `on_unmount` never closes the
session). So while the TUI runs it registers `graceful`: the first signal asks the app to exit
instead, and only a second one raises.

A signal cannot reach Python while SQLite runs one long statement: so the handler (SIGINT too)
first interrupts every live connection (console/db/limits.py `interrupt_all`). When the handler
itself ran inside SQLite's progress callback, SQLite swallows what it raised and the statement
fails with "interrupted" instead; `as_stop` turns that error back into the stop it stands for.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Callable, Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; exit status 128 + the signal's number, as the shell reports it."""

    def __init__(self, signum: int):
        try:
            name = signal.Signals(signum).name
        except ValueError:  # a real-time signal has no name of its own
            name = f"signal {signum}"
        super().__init__(name)
        self.signum = signum
        self.name = name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


# Callbacks that end the running program cleanly on their own (the TUI's app.exit); the newest wins.
_graceful: list[Callable[[int], bool]] = []


# Beyond SIGTERM and SIGHUP: every other signal whose default action ends the process and that a
# user or a program can send (not the ones a fault raises: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT).
# Any of them would otherwise kill the process with its private copies and partial files in place.
# SIGPIPE and SIGXFSZ stay ignored where Python ignores them (ignored signals are left alone below).
_TERMINATING = ("SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGXFSZ",
                "SIGPIPE", "SIGIO", "SIGPWR", "SIGSTKFLT")
HANDLED = HANDLED + tuple(getattr(signal, name) for name in _TERMINATING if hasattr(signal, name)) + tuple(
    range(signal.SIGRTMIN, signal.SIGRTMAX + 1) if hasattr(signal, "SIGRTMIN") else ())


@contextmanager
def graceful(stop: Callable[[int], bool]) -> Iterator[None]:
    """While the block runs, a first SIGTERM/SIGHUP calls `stop(signum)` instead of raising,
    unless it returns False (it could not ask)."""
    _graceful.append(stop)
    try:
        yield
    finally:
        _graceful.remove(stop)


@contextmanager
def stop_signals_unwind() -> Iterator[None]:
    """Within the block, SIGTERM/SIGHUP raise `Stopped` in the main thread; restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (tests call main() in others)
        return
    stopping = {"raised": False, "asked": False}
    _received.clear()
    _resume_statements()

    def handler(signum, _frame) -> None:
        if signum == signal.SIGINT:  # as Python's own handler does, every time
            _received.append(signum)
            _interrupt_statements()
            raise KeyboardInterrupt
        if stopping["raised"]:
            return
        _received.append(signum)
        _interrupt_statements()
        if not stopping["asked"] and _graceful and _graceful[-1](signum):
            stopping["asked"] = True
            return
        stopping["raised"] = True
        raise Stopped(signum)

    previous = {}
    for signum in (*HANDLED, signal.SIGINT):
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN:
            continue
        previous[signum] = current
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, current in previous.items():
            signal.signal(signum, current)
        _resume_statements()


def _limits():
    """console/db/limits.py when it is loaded (no connection exists before), without importing it."""
    return sys.modules.get("console.db.limits")


def _interrupt_statements() -> None:
    limits = _limits()
    if limits is not None:
        limits.interrupt_all()


def _resume_statements() -> None:
    limits = _limits()
    if limits is not None:
        limits.resume()


# How a statement fails when the signal's handler ran inside it: SQLite's progress callback or
# `sqlite3_interrupt` ("interrupted"), or one of the console's own SQL functions, whose exception
# Python's sqlite3 reports as this sentence.
_STOP_MESSAGES = ("interrupt", "user-defined function raised exception")


def as_stop(exc: BaseException) -> KeyboardInterrupt | None:
    """The stop that `exc` stands for: a statement that failed after a signal because its handler
    ran inside it. Only in the main thread: a worker's statement fails as itself while the program
    stops. Every cursor of the console's connections applies it (console/db/limits.py `_inside`),
    so code that catches KeyboardInterrupt never sees the stop as a database error."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if not _received or not isinstance(exc, sqlite3.OperationalError):
        return None
    if not any(message in str(exc) for message in _STOP_MESSAGES):
        return None
    signum = _received[0]
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def run_until_stopped(coro):
    """`asyncio.run(coro)`, where the operator's stop (Ctrl-C, SIGTERM, SIGHUP) cancels `coro`
    instead of raising inside whichever task happens to run, then raises as the stop.

    Raised at an arbitrary point of the event loop, a KeyboardInterrupt ends one task (its exception
    never retrieved), skips the `finally` blocks that close the other tasks' transports, and
    asyncio says so on stderr. A cancellation unwinds every `finally` of `coro` in order. A second
    signal while that cleanup runs is ignored, as `stop_signals_unwind` ignores it: every close
    there is bounded (console/fleet/session.py `GRACE`). Outside the main thread signals are not
    ours to handle, and a signal the parent set to be ignored stays ignored.
    """
    import asyncio

    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)
    received: list[int] = []

    async def main():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def stop(signum: int) -> None:
            if not received:
                received.append(signum)
                _received.append(signum)
                task.cancel()

        saved = {}
        for signum in (signal.SIGINT, *HANDLED):
            current = signal.getsignal(signum)
            if current is signal.SIG_IGN or current is None:
                continue
            try:
                loop.add_signal_handler(signum, stop, signum)
            except (ValueError, RuntimeError, OSError):  # one asyncio may not watch: left as it was
                continue
            saved[signum] = current
        try:
            return await coro
        finally:
            for signum, current in saved.items():
                loop.remove_signal_handler(signum)
                signal.signal(signum, current)

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        if not received:
            raise
        result = None
    if received:
        raise KeyboardInterrupt() if received[0] == signal.SIGINT else Stopped(received[0])
    return result


__all__ = ["Stopped", "as_stop", "graceful", "run_until_stopped", "stop_signals_unwind"]
