"""Long-lived sessions for the TUI and `approvals watch`: one session per host, connected all at
once, reconnected in the background with bounded back-off, closed with `ssh -O exit`; every call
ends in one of console/fleet/client.py's outcomes, built by the same functions as the CLI's."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from console.fleet import cache as fleet_cache
from console.fleet.client import (MAX_BACKOFF, STALE_FROM, HostOutcome, answer_outcome, cacheable, check_hello,
                                  flag_shared_instances, hello_params, is_write, lost_outcome, remote_outcome,
                                  stale_outcome)
from console.fleet.hosts import Fleet, Host
from console.fleet.local_policy import refused_locally
from console.fleet.session import NotSent, Notify, RemoteError, Session, SessionLost
from console.fleet.transport import close_masters, control_dir
from console.text import one_line


class FleetSessions:
    """A session per host for the TUI and `approvals watch`: connected all at once, kept open,
    reconnected in the background with back-off (1 s doubling to `MAX_BACKOFF`, jittered) while
    the host is down, and closed with `ssh -O exit`. `states` holds each host's last connection
    outcome (`ok` with its hello, or why not); `on_state(outcome)` is told of every change and
    `on_notification(host, method, params)` of every notification (e.g. `approvals.watch`); both
    run on the event loop and must not block."""

    def __init__(self, fleet: Fleet, hosts: Sequence[Host], *, parallel: int = 8, deadline: float = 30.0,
                 cache: bool = True, on_notification: Notify | None = None,
                 on_state: Callable[[HostOutcome], None] | None = None):
        self.fleet, self.deadline, self.cache = fleet, deadline, cache
        self.hosts = {host.name: host for host in hosts}
        self.states: dict[str, HostOutcome] = {}
        self.on_notification, self.on_state = on_notification, on_state
        self._parallel = max(1, int(parallel))
        self._gate: asyncio.Semaphore | None = None
        self._sockets: Path | None = None
        self._sessions: dict[str, Session] = {}
        self._locks = {name: asyncio.Lock() for name in self.hosts}
        self._down = {name: asyncio.Event() for name in self.hosts}
        self._keepers: list[asyncio.Task[None]] = []
        self._noting: set[asyncio.Task[None]] = set()
        self._closing = asyncio.Event()

    def _note(self, outcome: HostOutcome) -> HostOutcome:
        self.states[outcome.host] = outcome
        (self._down[outcome.host].clear if outcome.state == "ok" else self._down[outcome.host].set)()
        if self.on_state is not None:
            try:
                self.on_state(outcome)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the fleet
                pass
        return outcome

    def _session_ended(self, name: str, session: Session) -> None:
        if self._sessions.get(name) is session and not self._closing.is_set():
            task = asyncio.ensure_future(self._note_lost(name, session))
            self._noting.add(task)  # held: the loop keeps only a weak reference to a task
            task.add_done_callback(self._noted)

    def _noted(self, task: asyncio.Task[None]) -> None:
        """A finished note leaves the set with its exception retrieved: nothing awaits it once it
        is gone, and asyncio would print "Task exception was never retrieved" on the CLI's stderr."""
        self._noting.discard(task)
        if not task.cancelled():
            task.exception()

    def _note_down(self, outcome: HostOutcome) -> None:
        """Why a host's session ended, unless another session of it was made meanwhile (a state
        noted after an `await` must not overwrite a newer one)."""
        if outcome.host not in self._sessions:
            self._note(outcome)

    async def _note_lost(self, name: str, session: Session) -> None:
        returncode, stderr = await session.finish()
        if self._sessions.get(name) is session:
            del self._sessions[name]
            self._note_down(lost_outcome(self.hosts[name], SessionLost(False, session.violation), returncode, stderr, False,
                                  session.spoke))
            await session.close(kill=True)

    async def _open(self, host: Host) -> HostOutcome:
        """Connect `host` unless it is connected (one attempt at a time per host)."""
        if self._gate is None:
            self._gate = asyncio.Semaphore(self._parallel)
            self._sockets = await asyncio.to_thread(control_dir)
        async with self._locks[host.name]:
            current = self._sessions.get(host.name)
            if current is not None and current.alive:
                return self.states[host.name]
            async with self._gate:
                session = Session(self.fleet, host, sockets=self._sockets, on_notification=self.on_notification,
                                  on_lost=lambda: self._session_ended(host.name, session))
                outcome = await self._hello(host, session)
            if outcome.state == "ok":
                duplicate = next((o.host for o in self.states.values() if o.state in ("ok", "wrong_instance")
                                  and o.host != host.name
                                  and o.hello and o.hello.get("instance_id") == outcome.hello.get("instance_id")), None)
                if duplicate is not None:  # both are flagged: the earlier one's session ends too
                    # (a host already flagged stays so: a reconnection must not take turns being the one shown)
                    other, outcome = flag_shared_instances([replace(self.states[duplicate], state="ok"), outcome])
                    ended = self._sessions.pop(duplicate, None)
                    self._note(other)
                    if ended is not None:
                        await ended.close(kill=True)
            if outcome.state == "ok":
                self._sessions[host.name] = session
            else:
                await session.close(kill=True)
            return self._note(outcome)

    async def _hello(self, host: Host, session: Session) -> HostOutcome:
        try:
            async with asyncio.timeout(self.deadline):
                try:
                    await session.start()
                except OSError as exc:
                    return HostOutcome(host.name, "unreachable", one_line(
                        f"ssh could not be started for {host.name} ({exc.strerror or exc}): install OpenSSH's client "
                        f"or set [ssh] command in {self.fleet.path}."))
                hello = await session.request("hello", hello_params(host))
                return check_hello(host, hello) or HostOutcome(host.name, "ok", hello=hello,
                                                                                   data=hello, exit=0)
        except TimeoutError:
            return HostOutcome(host.name, "timeout", one_line(f"{host.name} did not answer within {self.deadline:g} s "
                                                              "(the console's deadline); its ssh was stopped."))
        except RemoteError as exc:
            return remote_outcome(host, exc, True)
        except SessionLost as exc:
            returncode, stderr = await session.finish() if not exc.violation else (None, "")
            return lost_outcome(host, exc, returncode, stderr, False, session.spoke)
        except asyncio.CancelledError:  # closed while connecting (the TUI quit): its ssh is ended, not left running
            await asyncio.shield(session.close(kill=True))
            raise

    async def connect(self) -> list[HostOutcome]:
        """Connect every host at once (at most `parallel` at a time); each host's outcome, in order.
        Hosts that are down keep being retried in the background until `close`."""
        if self._gate is None:
            self._gate = asyncio.Semaphore(self._parallel)
            self._sockets = await asyncio.to_thread(control_dir)
        outcomes = await asyncio.gather(*(self._open(host) for host in self.hosts.values()))
        if not self._keepers:
            self._keepers = [asyncio.ensure_future(self._keep(host)) for host in self.hosts.values()]
        return list(outcomes)

    async def _keep(self, host: Host) -> None:
        backoff = 1.0
        while not self._closing.is_set():
            await self._down[host.name].wait()
            try:
                await asyncio.wait_for(self._closing.wait(), backoff * random.uniform(0.8, 1.2))
                return
            except asyncio.TimeoutError:
                pass
            try:
                outcome = await self._open(host)
            except Exception:  # noqa: BLE001 - a keeper that died would leave the host down for good
                outcome = None
            backoff = 1.0 if outcome is not None and outcome.state == "ok" else min(backoff * 2, MAX_BACKOFF)

    async def call(self, name: str, method: str, params: dict[str, Any] | None = None, *,
                   deadline: float | None = None) -> HostOutcome:
        """`method` on host `name`, connecting it first when it is down; a read that cannot be
        made answers from the cache as `stale`, a write never does."""
        host, params = self.hosts[name], dict(params or {})
        refused = refused_locally(host, is_write(method))
        if refused is not None:
            return HostOutcome(host.name, "read_only", refused)
        write = is_write(method)
        for _ in range(2):  # a session that ends between connecting and asking is connected once more
            outcome = await self._open(host)
            session = self._sessions.get(name)
            if outcome.state != "ok":
                break
            if session is not None and session.alive:
                outcome = await self._request(host, session, method, params, deadline or self.deadline, write)
                break
        else:
            outcome = HostOutcome(name, "unreachable", one_line(f"The session with {name} ended as it was made."))
        if outcome.state == "ok" and self.cache and cacheable(method) and outcome.exit == 0:
            await asyncio.to_thread(fleet_cache.store, host, method, params, outcome.data, outcome.hello, outcome.exit)
        elif outcome.state in STALE_FROM and self.cache and cacheable(method):
            outcome = await stale_outcome(host, method, params, outcome)
        return outcome

    async def _request(self, host: Host, session: Session, method: str, params: dict[str, Any], deadline: float,
                       write: bool) -> HostOutcome:
        hello = self.states[host.name].hello or {}
        try:
            return answer_outcome(host, method, await asyncio.wait_for(session.request(method, params), deadline), hello)
        except asyncio.TimeoutError:
            if self._sessions.get(host.name) is session:
                del self._sessions[host.name]
            timeout = HostOutcome(host.name, "timeout", one_line(
                f"{host.name} did not answer within {deadline:g} s (the console's deadline); its ssh was stopped."))
            self._note_down(timeout)
            await session.close(kill=True)
            if not write:
                return timeout
            return HostOutcome(host.name, "outcome_unknown", one_line(
                f"{host.name} did not answer the write within {deadline:g} s: whether it took effect is unknown; "
                "read it again before repeating it."))
        except RemoteError as exc:
            return remote_outcome(host, exc, False, write)
        except NotSent as exc:
            return HostOutcome(host.name, "remote_error", one_line(f"Nothing was sent to {host.name}: {exc}."))
        except SessionLost as exc:
            if self._sessions.get(host.name) is session:
                del self._sessions[host.name]
            returncode, stderr = await session.finish() if not exc.violation else (None, "")
            await session.close(kill=True)
            self._note_down(lost_outcome(host, exc, returncode, stderr, False, session.spoke))  # why the host is down now
            return lost_outcome(host, exc, returncode, stderr, write and exc.sent, session.spoke)

    def _abandon(self) -> None:
        """Without a loop nothing can be awaited (an `await` would print "Exception ignored" on the CLI's
        stderr): the sessions' ssh processes are killed at once, and nothing else is attempted."""
        for session in self._sessions.values():
            process = session.process
            if process is not None and process.returncode is None:
                try:
                    os.kill(process.pid, signal.SIGKILL)
                except OSError:
                    pass
        self._sessions = {}

    async def close(self) -> None:
        """End every session and the keepers, then `ssh -O exit` the shared connections."""
        self._closing.set()
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # closed by the garbage collector after its loop ended (an interrupted asyncio.run)
            self._abandon()
            return
        for task in self._keepers:
            task.cancel()
        await asyncio.gather(*self._keepers, *self._noting, return_exceptions=True)
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(session.close() for session in sessions), return_exceptions=True)
        await asyncio.to_thread(close_masters, self.fleet, list(self.hosts.values()))



__all__ = ["FleetSessions"]
