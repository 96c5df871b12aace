"""The fleet client as the monitor's link (console/tui/fleet_monitor.py `HostLink`).

`FleetSessions` (console/fleet/client.py) keeps one `serve` session per host over the host's
shared ssh connection, reconnects it in the background with back-off, answers a read of a host
that is down from its last good read (STALE), and never a write. This adapter gives the monitor
what it asks for one host at a time: `connect(host)` waits for that host's first connection
attempt only (the sessions connect every host at once; a black-holed host delays no other), and
afterwards returns the host's current state at once. Everything here runs on the monitor's loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable

from console.tui.fleet_monitor import CALL_DEADLINE, Answer


class ClientLink:
    def __init__(self, fleet: Any, hosts: Iterable[Any], *, parallel: int = 8, deadline: float = CALL_DEADLINE) -> None:
        self.fleet = fleet
        self.hosts = {h.name: h for h in hosts}
        self.parallel = max(1, int(parallel))
        self.deadline = deadline
        self.on_change: Callable[[str], None] | None = None  # the monitor reads a host again when it comes back
        self.sessions: Any = None
        self._first: dict[str, asyncio.Future] = {}
        self._connecting: asyncio.Future | None = None

    def _state(self, outcome: Any) -> None:
        """FleetSessions' `on_state`: a host connected, or went down, or came back."""
        first = self._first.get(outcome.host)
        if first is not None and not first.done():
            first.set_result(outcome)
        elif outcome.state == "ok" and self.on_change is not None:
            self.on_change(outcome.host)

    def _start(self) -> None:
        if self.sessions is not None:
            return
        from console.fleet.sessions import FleetSessions

        loop = asyncio.get_running_loop()
        self._first = {name: loop.create_future() for name in self.hosts}
        self.sessions = FleetSessions(self.fleet, list(self.hosts.values()), parallel=self.parallel,
                                      deadline=self.deadline, on_state=self._state)
        self._connecting = asyncio.ensure_future(self._connect_all())

    async def _connect_all(self) -> None:
        try:
            await self.sessions.connect()
        except Exception as exc:  # noqa: BLE001 - e.g. no private directory for ssh's sockets: every host says so
            sentence = str(exc) or type(exc).__name__
            for name, first in self._first.items():
                if not first.done():
                    first.set_result(Answer(name, "remote_error", sentence))

    async def connect(self, host: str) -> Any:
        self._start()
        first = self._first[host]
        if not first.done():
            return await asyncio.shield(first)
        state = self.sessions.states.get(host)
        return state if state is not None else first.result()

    async def call(self, host: str, method: str, params: dict[str, Any]) -> Any:
        self._start()
        if self._connecting is not None and not self._first[host].done():
            await asyncio.shield(self._first[host])
        return await self.sessions.call(host, method, dict(params))

    async def cached(self, host: str, method: str, params: dict[str, Any]) -> Any:
        """The last good read of `method` on `host` as a `stale` answer, or None."""
        from console.fleet import cache

        found = await asyncio.to_thread(cache.lookup, self.hosts[host], method, dict(params))
        if found is None:
            return None
        data, hello, exit_code, age = found
        return Answer(host, "stale", None, exit_code, data, hello, age)

    async def close(self) -> None:
        """End the sessions and the shared connections (`ssh -O exit`)."""
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self.sessions is not None:
            await self.sessions.close()


__all__ = ["ClientLink"]
