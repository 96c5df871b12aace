"""A real process on a pseudo-terminal, read as a terminal would receive it.

`Terminal(argv, cols, rows)` forks the command onto a new pty of that size (TERM=xterm-256color)
and collects everything it writes. The benchmarks detect "a frame showing rows" in that byte
stream by the row ids it contains: Textual writes each line's cells as text between escape
sequences, so a row id (`apr-` and eight digits, in the console and in bench/minimal_app.py alike)
appears verbatim once the frame that shows its row has been written to the terminal.

Textual asks the terminal whether it supports synchronized output (DECRQM 2026); we answer yes,
as current terminals do, and Textual then wraps every frame in begin/end markers. Row ids count
only once the frame holding them is complete (its end marker has arrived): a frame split across
several writes is never taken for shown before its last byte.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time

ROW_ID = re.compile(rb"apr-\d{8}")
PAGE_DOWN = b"\x1b[6~"
SYNC_QUERY = b"\x1b[?2026$p"  # DECRQM: does the terminal support synchronized output?
SYNC_REPLY = b"\x1b[?2026;2$y"  # yes (currently off), as kitty, WezTerm, foot or iTerm2 answer
FRAME_END = b"\x1b[?2026l"  # end of a synchronized update: the frame is complete


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str], cols: int = 100, rows: int = 30, cwd: str | None = None):
        self.started = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:  # the child: size the terminal before the program asks for it
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, dict(env, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows)))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.buffer = bytearray()
        self.seen: set[bytes] = set()
        self.synchronized = False

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            raise RuntimeError(f"the program on the terminal ended: {bytes(self.buffer[-600:])!r}")
        if not self.synchronized and SYNC_QUERY in self.buffer[-16:] + chunk:
            os.write(self.fd, SYNC_REPLY)
            self.synchronized = True
        self.buffer += chunk
        return True

    def _complete(self) -> int:
        """Where the output of complete frames ends (all of it, if frames are not delimited)."""
        if not self.synchronized:
            return len(self.buffer)
        end = self.buffer.rfind(FRAME_END)
        return 0 if end < 0 else end + len(FRAME_END)

    def wait_new_ids(self, since: int, wanted: int, timeout: float = 60.0) -> tuple[float, set[bytes]]:
        """Read until at least `wanted` row ids never seen before appear after offset `since`;
        returns (the moment the chunk completing them arrived, those ids)."""
        deadline = time.perf_counter() + timeout
        while True:
            new = {m.group() for m in ROW_ID.finditer(self.buffer, max(0, since - 12), self._complete())} - self.seen
            if len(new) >= wanted:
                self.seen |= new
                return time.perf_counter(), new
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no {wanted} new row ids within {timeout} s")
            self._read(left)

    def wait_for(self, marker: bytes, timeout: float = 60.0) -> float:
        """Read until a complete frame holds `marker`; returns the moment it arrived."""
        deadline = time.perf_counter() + timeout
        while marker not in self.buffer[:self._complete()]:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} on the terminal within {timeout} s")
            self._read(left)
        return time.perf_counter()

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)

    def settle(self, quiet: float = 0.03, limit: float = 2.0) -> None:
        """Read until the program has written nothing for `quiet` seconds: the frame is complete."""
        deadline = time.perf_counter() + limit
        while time.perf_counter() < deadline and self._read(quiet):
            pass
        self.seen |= {m.group() for m in ROW_ID.finditer(self.buffer)}

    def press(self, key: bytes) -> tuple[float, int]:
        at = len(self.buffer)
        started = time.perf_counter()
        os.write(self.fd, key)
        return started, at

    def vm_hwm_kb(self) -> int:
        with open(f"/proc/{self.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            try:
                self._read(0.05)
            except RuntimeError:
                pass
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)
