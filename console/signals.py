"""SIGTERM and SIGHUP end a command the way Ctrl-C does, so its cleanup runs.

By default either signal kills the process on the spot: a read-only command on a WAL database
then leaves its private copy of the user's data in the temp directory, and an upgrade its partial
snapshot. Raised as `Stopped` (a KeyboardInterrupt), they unwind through the same `finally`
blocks as Ctrl-C. A signal the parent set to be ignored (`nohup`) stays ignored; a second signal
while the first one's cleanup runs is ignored so the cleanup can finish.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; exit status 128 + the signal's number, as the shell reports it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextmanager
def stop_signals_unwind() -> Iterator[None]:
    """Within the block, SIGTERM/SIGHUP raise `Stopped` in the main thread; restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread (tests call main() in others)
        return
    stopping = {"seen": False}

    def handler(signum, _frame) -> None:
        if stopping["seen"]:
            return
        stopping["seen"] = True
        raise Stopped(signum)

    previous = {}
    for signum in HANDLED:
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


__all__ = ["Stopped", "stop_signals_unwind"]
