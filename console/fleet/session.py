"""One JSON-RPC session with one host's server, over one ssh process.

Everything the process sends is hostile and bounded: stdout is read a line at a time by a
StreamReader whose `limit` is the protocol's response cap (a longer line ends the session, it is
never buffered whole), each line must be one JSON object, and stderr is drained concurrently
(a full pipe would stall ssh) keeping only its last `STDERR_KEEP` bytes, for console/fleet/transport.py
`classify`. The session never waits on the process without a bound: closing it closes stdin (the
server's cue to exit), waits `GRACE` seconds, then kills the one process it started.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from pathlib import Path
from typing import Any, Callable

from console.fleet.hosts import Fleet, Host
from console.fleet.protocol import (ERROR_KINDS, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, OFF_LOOP_BYTES, decode, encode,
                                    request)
from console.fleet.transport import CONNECT_TIMEOUT, ssh_argv
from console.text import one_line

STDERR_KEEP = 8 * 1024
GRACE = 2.0  # seconds a server has to exit after its stdin closes

Notify = Callable[[str, str, Any], None]


class SessionLost(Exception):
    """The connection ended before the answer. `sent`: the request had been written (a write's
    outcome is then unknown); `violation`: what the peer sent that ended it, if that was it."""

    def __init__(self, sent: bool, violation: str | None = None):
        super().__init__(violation or "the connection ended")
        self.sent = sent
        self.violation = violation


class NotSent(ValueError):
    """A request that cannot go on the wire (over the request cap, or parameters that are not
    JSON): nothing was sent, so nothing happened on the host."""


class RemoteError(Exception):
    """A JSON-RPC error from the host: `kind` from console/fleet/protocol.py ERROR_KINDS (or the
    server's own `data.kind`), `message` cleaned onto one line."""

    def __init__(self, code: int, message: str, kind: str):
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind


def _remote_error(body: Any) -> RemoteError:
    if not isinstance(body, dict) or not isinstance(body.get("code"), int) or isinstance(body.get("code"), bool):
        return RemoteError(0, "an error the console does not understand", "remote_error")
    data = body.get("data")
    kind = data.get("kind") if isinstance(data, dict) and isinstance(data.get("kind"), str) else None
    kind = kind if kind and kind.replace("_", "").isalnum() and len(kind) <= 40 else None
    return RemoteError(body["code"], one_line(body.get("message", ""), 300),
                       kind or ERROR_KINDS.get(body["code"], "remote_error"))


class Session:
    def __init__(self, fleet: Fleet, host: Host, *, sockets: Path | None, on_notification: Notify | None = None,
                 on_lost: Callable[[], None] | None = None, connect_timeout: int = CONNECT_TIMEOUT):
        self.fleet, self.host = fleet, host
        self.argv = ssh_argv(fleet, host, connect_timeout=connect_timeout, sockets=sockets)
        self.on_notification, self.on_lost = on_notification, on_lost
        self.process: asyncio.subprocess.Process | None = None
        self.violation: str | None = None
        self.spoke = False  # a byte came on stdout: the remote command runs, so ssh had connected
        self._stderr = bytearray()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []
        self._transports: list[asyncio.BaseTransport] = []
        self._stdin: asyncio.StreamWriter | None = None
        self._stdout: asyncio.StreamReader | None = None
        self._errors: asyncio.StreamReader | None = None
        self._ended = asyncio.Event()

    @property
    def alive(self) -> bool:
        return self.process is not None and not self._ended.is_set()

    @property
    def stderr(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    async def start(self) -> None:
        """Start ssh (OSError when it cannot be run at all), on pipes the session owns.

        Not asyncio's PIPE: under ControlMaster the ssh started here is a mux client that hands its
        stdin, stdout and stderr to the master, which keeps them while its channel to the host lives
        (a frozen host: until ServerAlive gives up, most of a minute). Python 3.11's
        `Process.wait()` waits for its pipes to close too, so a killed client would hold the
        deadline hostage. With pipes of its own the session waits for the process alone and closes
        its ends itself."""
        loop = asyncio.get_running_loop()
        child_in, ours_in = os.pipe()
        ours_out, child_out = os.pipe()
        ours_err, child_err = os.pipe()
        try:
            self.process = await asyncio.create_subprocess_exec(*self.argv, stdin=child_in, stdout=child_out,
                                                                stderr=child_err)
        except BaseException:
            for fd in (ours_in, ours_out, ours_err):
                os.close(fd)
            raise
        finally:
            for fd in (child_in, child_out, child_err):
                os.close(fd)
        self._stdout = asyncio.StreamReader(limit=MAX_RESPONSE_BYTES)
        self._errors = asyncio.StreamReader()
        for fd, reader in ((ours_out, self._stdout), (ours_err, self._errors)):
            transport, _ = await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r),
                                                        os.fdopen(fd, "rb", 0))
            self._transports.append(transport)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(ours_in, "wb", 0))
        self._transports.append(transport)
        self._stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        self._tasks = [asyncio.ensure_future(self._drain_stderr()), asyncio.ensure_future(self._read())]

    async def _drain_stderr(self) -> None:
        assert self._errors is not None
        while chunk := await self._errors.read(4096):
            self._stderr += chunk
            if len(self._stderr) > STDERR_KEEP:
                del self._stderr[:-STDERR_KEEP]

    async def _read(self) -> None:
        assert self._stdout is not None
        cancelled = False
        try:
            while line := await self._stdout.readline():
                self.spoke = True
                try:
                    # a large line is parsed in a thread, so its size and depth scans never hold the loop;
                    # json's C parser still holds the GIL while it runs, which MAX_RESPONSE_BYTES bounds
                    message = decode(line) if len(line) <= OFF_LOOP_BYTES else await asyncio.to_thread(decode, line)
                except ValueError as exc:  # console/text.py UnreadableJson names the limit it hit
                    deep = "nested too deeply" in str(exc)
                    self.violation = "sent a message nested too deeply" if deep else "sent a line that is not JSON"
                    return
                if not isinstance(message, dict):
                    self.violation = "sent a message that is not a JSON object"
                    return
                self._dispatch(message)
        except (ValueError, asyncio.LimitOverrunError):
            self.violation = f"sent a message over the {MAX_RESPONSE_BYTES:,}-byte cap"
        except (OSError, EOFError):
            pass
        except asyncio.CancelledError:  # closed by its owner (or the loop ending): nobody is to be told
            cancelled = True
            raise
        finally:
            self._ended.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(SessionLost(True, self.violation))
            self._pending.clear()
            if self.on_lost is not None and not cancelled:
                self.on_lost()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message and ("result" in message or "error" in message):
            id_ = message["id"]
            if id_ is None and "error" in message:  # a request the server could not read: every one waiting
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(_remote_error(message["error"]))
                self._pending.clear()
                return
            future = self._pending.pop(id_, None) if type(id_) is int else None
            if future is None or future.done():
                return
            if "error" in message:
                future.set_exception(_remote_error(message["error"]))
            else:
                future.set_result(message["result"])
        elif isinstance(message.get("method"), str) and "id" not in message and self.on_notification is not None:
            try:
                self.on_notification(self.host.name, message["method"], message.get("params"))
            except Exception:  # noqa: BLE001 - a listener's bug must not end the host's session
                pass

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The result of one call; `RemoteError` for a JSON-RPC error, `SessionLost` when the
        connection ends first, `NotSent` for a request over the cap or not JSON (nothing is sent)."""
        if not self.alive:
            raise SessionLost(False, self.violation)
        assert self._stdin is not None
        id_ = next(self._ids)
        try:
            data = encode(request(id_, method, params), cap=MAX_REQUEST_BYTES)
        except (TypeError, ValueError) as exc:  # MessageTooLarge is a ValueError
            raise NotSent(str(exc)) from None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[id_] = future
        try:
            try:
                self._stdin.write(data)
                await self._stdin.drain()
            except (OSError, RuntimeError):  # the pipe closed under the write: some of it may have gone
                raise SessionLost(True, self.violation) from None
            return await future
        finally:
            # However the call ends (answered, lost, or cancelled by a deadline while its write waited
            # for a full pipe), its future leaves the table, and an exception the reader put there is
            # marked seen: else asyncio logs "Future exception was never retrieved" on the CLI's stderr.
            self._pending.pop(id_, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()

    async def finish(self, timeout: float = GRACE) -> tuple[int | None, str]:
        """ssh's exit status and stderr once it ends (None: it had not ended within `timeout`)."""
        assert self.process is not None
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
            await asyncio.wait_for(asyncio.shield(self._tasks[0]), timeout)
        except (asyncio.TimeoutError, OSError):
            pass
        return self.process.returncode, self.stderr

    async def close(self, *, kill: bool = False) -> None:
        """End the session: stdin closed and `GRACE` seconds to exit, or killed now with `kill`;
        then the session's ends of the pipes are closed, whoever else still holds theirs."""
        process = self.process
        if process is None:
            return
        try:
            if process.returncode is None and not kill:
                if self._stdin is not None and not self._stdin.is_closing():
                    self._stdin.close()
                try:
                    await asyncio.wait_for(process.wait(), GRACE)
                except asyncio.TimeoutError:
                    pass
            if process.returncode is None:
                # not `process.kill()`: Popen.send_signal polls first, and that waitpid would reap a
                # child that has just exited under asyncio's child watcher, which then logs "Unknown
                # child process pid N". The pid stays ours until the watcher reaps it, so the signal
                # reaches this child or its zombie, never another process.
                os.kill(process.pid, signal.SIGKILL)
            await process.wait()
        except ProcessLookupError:
            pass
        finally:
            for task in self._tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for transport in self._transports:
                transport.close()


__all__ = ["GRACE", "NotSent", "RemoteError", "STDERR_KEEP", "Session", "SessionLost"]
