"""What the fleet console knows of each host, kept current off the UI thread.

The fleet client (console/fleet/client.py `FleetSessions`) is asyncio; the monitor runs it on its
own event loop in its own thread, so nothing it does (a black-holed host, a slow `ssh -O exit`, a
large JSON answer) can hold the UI's loop. One task per host connects, reads the host's pending
requests every few seconds, and reconnects with back-off after a failure; every change is handed
to `report` (from the monitor's thread: the app posts it to itself as a message, and only the UI
thread touches widgets). Hosts are independent: one host's answer never waits for another's.

Nothing here imports Textual: the app (console/tui/fleet_app.py) and the tests drive it the same
way. The link to the hosts is anything with the three coroutines of `HostLink`; the console uses
console/tui/fleet_link.py `ClientLink` over the client's `FleetSessions`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Protocol

from console.clock import parse_time
from console.fleet.answers import DECIDED
from console.fleet.decisions import NOT_SENT, actor_of, decided_by, items_by_id, read_back_done
from console.text import one_line

POLL_SECONDS = 3.0  # how often each host's queue is read again
CALL_DEADLINE = 30.0  # the console's own bound on one host operation (ConnectTimeout is not one)
# A write is bounded by the client itself (connecting, then the request, then stopping ssh): the
# monitor's bound on it comes after all three, so the client's own verdict (`outcome_unknown`) is
# the one heard, and the monitor's, if it ever fires, is the same verdict.
WRITE_BOUND_FACTOR = 2
BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)  # seconds before reconnecting, by failed attempt
PENDING_LIMIT = 200  # rows read from each host; the merged queue shows at most this many per host
QUEUE_PARAMS = {"status": "pending", "limit": PENDING_LIMIT}
CLOSE_SECONDS = 10.0  # quitting waits this long, at most, for the sessions to close
STALE_REASON = "stale data: reconnecting"
SAID_WIDTH = 400  # a host's sentence is cut here (a toast, a table cell): the host decides its length


class HostLink(Protocol):
    """How the monitor reaches hosts; each coroutine returns an answer shaped like the client's
    `HostOutcome` (state, sentence, exit, data, hello, age_seconds)."""

    async def connect(self, host: str) -> Any: ...

    async def call(self, host: str, method: str, params: dict[str, Any]) -> Any: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Answer:
    """An answer the monitor made itself (a deadline it enforced, an exception it caught)."""

    host: str
    state: str
    sentence: str | None = None
    exit: int | None = None
    data: Any = None
    hello: dict | None = None
    age_seconds: float | None = None


@dataclass(frozen=True)
class HostStatus:
    """One host as the console last heard from it. `phase`: connecting, ok, stale (rows from an
    earlier read or the client's cache, `age_seconds` old when reported), down (no rows at all)."""

    name: str
    phase: str = "connecting"
    sentence: str | None = None
    release: str | None = None
    actor: str | None = None
    actor_source: str | None = None
    read_only_reason: str | None = None
    rows: tuple[dict, ...] = ()
    doctor: str | None = None
    age_seconds: float | None = None
    reported_at: float = field(default_factory=time.monotonic)

    @property
    def pending(self) -> int | None:
        return None if self.phase in ("connecting", "down") else len(self.rows)

    @property
    def oldest_expiry(self) -> str | None:
        times = [r.get("expires_at") for r in self.rows if isinstance(r.get("expires_at"), str)]
        return min(times, key=lambda t: parse_time(t) or t) if times else None

    def age_now(self) -> float | None:
        if self.age_seconds is None:
            return None
        return self.age_seconds + max(0.0, time.monotonic() - self.reported_at)

    def write_block(self) -> str | None:
        """Why a decision cannot be sent to this host now (None: it can)."""
        if self.read_only_reason:
            return self.read_only_reason
        if self.phase != "ok":
            return STALE_REASON if self.phase == "stale" else f"{self.name} is not connected"
        return None


@dataclass(frozen=True)
class Arrival:
    """Requests that appeared on `host` since its previous read."""

    host: str
    rows: tuple[dict, ...]


@dataclass(frozen=True)
class Decided:
    """A decision's outcome: `ok` None when it is unknown (the connection dropped before the answer)."""

    host: str
    request_id: str
    verb: str
    ok: bool | None
    sentence: str


@dataclass(frozen=True)
class Shown:
    """One request as its host read it for the actor it resolved (`approvals show --json`): its
    `options` (why a decision would be refused) and `confirm` (what needs a typed confirmation)."""

    host: str
    request_id: str
    data: dict


def read_only_reason(config_read_only: bool, hello: dict | None, *, console_read_only: bool = False) -> str | None:
    """Read-only by this console's `--read-only`, by the hosts file, or by the host (a shared
    account, `--read-only` there)."""
    if console_read_only:
        return "read-only mode (--read-only): nothing is sent to any host"
    if config_read_only:
        return "read-only host (read_only = true in the hosts file)"
    if not hello:
        return None
    why = _host_reason(hello)
    return None if why is None else one_line(why, SAID_WIDTH)


def _host_reason(hello: dict) -> str | None:
    if hello.get("identity_ambiguous"):
        why = _text(hello.get("identity_ambiguous"))
        return f"the host cannot tell who is acting ({why}): it refuses writes" if why else \
            "the host cannot tell who is acting: it refuses writes"
    if hello.get("read_only"):
        if hello.get("actor_source") == "shared_account":
            return f"read-only: {_text(hello.get('actor')) or 'this login'} is a shared account on the host"
        why = _text(hello.get("read_only_reason"))
        return f"read-only on the host ({why})" if why else "read-only: the host serves this session read-only"
    return None


def doctor_summary(report: Any) -> str:
    """`3 error, 1 warning` from a doctor report's counts; `no findings` when there are none."""
    counts = report.get("counts") if isinstance(report, dict) else None
    if not isinstance(counts, dict):
        return "no report"
    parts = [f"{n} {name}" for name, n in counts.items() if isinstance(n, int) and n]
    return ", ".join(parts) if parts else "no findings"


def result_sentence(answer: Any, request_id: str) -> tuple[bool | None, str]:
    """(ok, sentence) for a decision's answer. The answer is data, never the verdict: a failure
    before the request reached the host is a refusal; any other failure, an id answered for none
    or several times, or a success under a failing exit code is `outcome unknown` (None), read
    back by console/fleet/decisions.py's rule when the host answers again."""
    host, state = answer.host, answer.state
    if state != "ok":
        if state in NOT_SENT or state == "remote_error":  # nothing ran, or the host refused it
            return False, one_line(answer.sentence or f"{host} did not answer ({state})", SAID_WIDTH)
        why = f" ({answer.sentence})" if isinstance(answer.sentence, str) and answer.sentence else ""
        return None, one_line(f"outcome unknown: {host} did not answer the decision{why}; "
                              f"{request_id} is read again when the host answers", SAID_WIDTH)
    output = answer.data
    got = items_by_id(output).get(request_id, [])
    if len(got) == 1:
        item, said = got[0], one_line(got[0].get("message") or "", SAID_WIDTH)
        if item.get("ok") is not True:
            return False, said or f"{host} refused {request_id}"
        if answer.exit == 0:
            return True, said
        return None, one_line(f"outcome unknown: {host} answered exit {answer.exit!r} with a success for "
                              f"{request_id}; it is read again", SAID_WIDTH)
    if not got and isinstance(output, dict) and output.get("error"):
        return False, one_line(output["error"], SAID_WIDTH)
    said = "without a result" if not got else f"{len(got)} times"
    return None, one_line(f"outcome unknown: {host} answered {said} for {request_id}; it is read again", SAID_WIDTH)


class FleetMonitor:
    """Runs `link` on a private event loop thread; `report` receives `HostStatus`, `Arrival` and
    `Decided` values from that thread."""

    def __init__(self, link: HostLink, hosts: Iterable[Any], report: Callable[[Any], None], *,
                 poll_seconds: float = POLL_SECONDS, deadline: float = CALL_DEADLINE,
                 read_only: bool = False) -> None:
        self.link = link
        self.read_only = read_only  # `--read-only`: no host is written, whatever it allows
        self.hosts = {h.name: h for h in hosts}
        self.report = report
        self.poll_seconds = poll_seconds
        self.deadline = deadline
        self.status = {name: HostStatus(name, read_only_reason=read_only_reason(
            bool(getattr(h, "read_only", False)), None, console_read_only=read_only)) for name, h in self.hosts.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pokes: dict[str, asyncio.Event] = {}
        # per host: request id -> (the decision's method, the actor it was sent as), read back on reconnect
        self._unknown: dict[str, dict[str, tuple[str, str | None]]] = {name: {} for name in self.hosts}
        self._seen: dict[str, set[str] | None] = {name: None for name in self.hosts}
        self._tasks: list[asyncio.Task] = []
        self._closing = False
        self._sent: set[Future] = set()  # decisions handed to the loop (`writes_in_flight`); UI thread only
        if hasattr(link, "on_change"):  # a host the link saw come back is read at once, not after its back-off
            link.on_change = self.refresh

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            for name in self.hosts:
                self._pokes[name] = asyncio.Event()
                self._tasks.append(loop.create_task(self._host_loop(name)))
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="fleet-monitor", daemon=True)
        self._thread.start()
        ready.wait(CLOSE_SECONDS)

    def close(self) -> None:
        """Stop every host's task, close the sessions (the client's `ssh -O exit`), stop the loop;
        bounded by `CLOSE_SECONDS` whatever the hosts do."""
        loop, self._closing = self._loop, True
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            try:
                await asyncio.wait_for(self.link.close(), CLOSE_SECONDS)
            except Exception:  # noqa: BLE001 - quitting goes on whatever a host did
                pass

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(CLOSE_SECONDS + 1)
        except Exception:  # noqa: BLE001 - a close that did not finish in time is abandoned
            pass
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(CLOSE_SECONDS)

    def _submit(self, coro: Any) -> Future:
        if self._loop is None or self._closing:
            coro.close()
            future: Future = Future()
            future.set_exception(RuntimeError("the fleet monitor is not running"))
            return future
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    # ------------------------------------------------------------ requests from the UI
    def decide(self, host: str, verb: str, request_id: str, reason: str | None, *,
               requester_unknown_ok: bool = False) -> Future:
        """Send one decision to `host`; the outcome is reported as `Decided` (and returned)."""
        future = self._submit(self._decide(host, verb, request_id, reason, requester_unknown_ok))
        self._sent.add(future)
        return future

    @property
    def writes_in_flight(self) -> int:
        """Decisions sent and not yet answered: the fleet console's Ctrl-C asks before quitting then."""
        self._sent = {f for f in self._sent if not f.done()}
        return len(self._sent)

    def show(self, host: str, request_id: str) -> Future:
        """Read one request on `host` as the host sees it for its actor; reported as `Shown`."""
        return self._submit(self._show(host, request_id))

    def doctor(self, host: str) -> Future:
        """Run doctor on `host`; its summary is reported in the host's status."""
        return self._submit(self._doctor(host))

    def refresh(self, host: str | None = None) -> None:
        """Read `host` (every host when None) again now instead of at its next tick."""
        if self._loop is None:
            return
        for name in [host] if host else list(self._pokes):
            if name in self._pokes:
                self._loop.call_soon_threadsafe(self._pokes[name].set)

    # ------------------------------------------------------------ on the monitor's loop
    async def _guarded(self, host: str, coro: Any, *, write: bool = False) -> Any:
        """`coro` within the monitor's bound; a write that outlives it (or whose client failed)
        may have been sent: its outcome is unknown, never "failed"."""
        bound = self.deadline * WRITE_BOUND_FACTOR + CLOSE_SECONDS if write else self.deadline
        try:
            return await asyncio.wait_for(coro, bound)
        except asyncio.TimeoutError:
            if write:
                return Answer(host, "outcome_unknown", f"no answer within {bound:g} seconds")
            return Answer(host, "timeout", f"{host} did not answer within {bound:g} seconds")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one host's failure is that host's state, not a crash
            if write:
                return Answer(host, "outcome_unknown", f"the client failed ({type(exc).__name__})")
            return Answer(host, "remote_error", f"{host}: the client failed ({type(exc).__name__})")

    def _set(self, name: str, **changes: Any) -> None:
        old = self.status[name]
        status = replace(old, reported_at=time.monotonic(), **changes)
        if replace(status, reported_at=old.reported_at) == old:
            return  # nothing the screens show changed: no report, no table rebuilt
        self.status[name] = status
        self.report(status)

    async def _pause(self, name: str, seconds: float) -> None:
        poke = self._pokes[name]
        try:
            await asyncio.wait_for(poke.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        poke.clear()

    async def _host_loop(self, name: str) -> None:
        attempt = 0
        while not self._closing:
            answer = await self._guarded(name, self.link.connect(name))
            if answer.state == "ok":
                attempt = 0
                self._hello(name, answer.hello)
                while not self._closing:
                    answer = await self._read_queue(name)
                    if answer.state != "ok":
                        break
                    await self._reread_unknown(name)  # the host answers again: what became of lost answers
                    await self._pause(name, self.poll_seconds)
            await self._failed(name, answer)
            await self._pause(name, BACKOFF[min(attempt, len(BACKOFF) - 1)])
            attempt += 1

    def _hello(self, name: str, hello: dict | None) -> None:
        hello = hello if isinstance(hello, dict) else {}
        self._set(name, release=_text(hello.get("archon_release") or hello.get("release")),
                  actor=_text(hello.get("actor")), actor_source=_text(hello.get("actor_source")),
                  read_only_reason=read_only_reason(bool(getattr(self.hosts[name], "read_only", False)), hello,
                                                    console_read_only=self.read_only))

    async def _read_queue(self, name: str) -> Any:
        answer = await self._guarded(name, self.link.call(name, "approvals.list", QUEUE_PARAMS))
        if answer.state == "stale" and isinstance(answer.data, list):  # the client's cache
            self._set(name, phase="stale", sentence=one_line(answer.sentence or "", SAID_WIDTH) or None,
                      rows=pending_rows(answer.data), age_seconds=answer.age_seconds or 0.0)
            return answer
        if answer.state != "ok":
            return answer
        if answer.exit not in (0, None) or not isinstance(answer.data, list):
            error = answer.data.get("error") if isinstance(answer.data, dict) else None
            return Answer(name, "remote_error", _text(error) or f"{name} could not list its requests")
        rows = pending_rows(answer.data)
        seen = self._seen[name]
        ids = {r["id"] for r in rows}
        if seen is not None:
            new = tuple(r for r in rows if r["id"] not in seen)
            if new:
                self.report(Arrival(name, new))
        self._seen[name] = ids if seen is None else seen | ids
        self._set(name, phase="ok", sentence=None, rows=rows, age_seconds=None)
        return answer

    async def _failed(self, name: str, answer: Any) -> None:
        if answer.hello and self.status[name].release is None:  # the hello the client cached
            self._hello(name, answer.hello)
        status = self.status[name]
        sentence = one_line(answer.sentence or f"{name}: {answer.state}", SAID_WIDTH)
        cached = getattr(self.link, "cached", None)
        if not status.rows and status.phase != "stale" and cached is not None:
            found = await self._guarded(name, cached(name, "approvals.list", QUEUE_PARAMS))
            if found is not None and found.state == "stale" and isinstance(found.data, list):
                self._set(name, phase="stale", sentence=sentence, rows=pending_rows(found.data),
                          age_seconds=found.age_seconds or 0.0)
                return
        if status.rows or status.phase == "stale":
            age = status.age_now() if status.phase == "stale" else 0.0
            self._set(name, phase="stale", sentence=sentence, age_seconds=age or 0.0)
        else:
            self._set(name, phase="down", sentence=sentence)

    async def _show(self, host: str, request_id: str) -> None:
        if host not in self.status or self.status[host].phase != "ok":
            return
        answer = await self._guarded(host, self.link.call(host, "approvals.show", {"id": request_id}))
        if answer.state == "ok" and answer.exit == 0 and isinstance(answer.data, dict):
            self.report(Shown(host, request_id, answer.data))

    async def _decide(self, host: str, verb: str, request_id: str, reason: str | None,
                      requester_unknown_ok: bool = False) -> Decided:
        block = self.status[host].write_block() if host in self.status else f"no host called {host}"
        if block:
            outcome = Decided(host, request_id, verb, False, f"Nothing was sent to {host}: {block}.")
        else:
            params: dict[str, Any] = {"ids": [request_id]}
            if reason:
                params["reason"] = reason
            if requester_unknown_ok and verb == "approve":  # typed by the approver (four-eyes cannot be checked)
                params["requester_unknown_ok"] = True
            method = f"approvals.{verb}"
            answer = await self._guarded(host, self.link.call(host, method, params), write=True)
            ok, sentence = result_sentence(answer, request_id)
            if ok is None:  # read back by the actor this session decided as (its host's hello)
                self._unknown[host][request_id] = (method, actor_of(answer.hello) or self.status[host].actor)
            outcome = Decided(host, request_id, verb, ok, sentence)
        self.report(outcome)
        self.refresh(host)
        return outcome

    async def _reread_unknown(self, name: str) -> None:
        """After a reconnect: what became of each decision whose answer was lost. Done only by
        console/fleet/decisions.py's rule (the status asked for, reached by this session's actor);
        anything else is said as what it is, not as this console's success."""
        for request_id, (method, actor) in sorted(self._unknown[name].items()):
            answer = await self._guarded(name, self.link.call(name, "approvals.show", {"id": request_id}))
            if answer.state != "ok" or not isinstance(answer.data, dict):
                continue
            del self._unknown[name][request_id]
            status = _text(answer.data.get("status")) if answer.exit == 0 else None
            if status is None:  # refused (the request is gone): the host's own words
                said = one_line(answer.data.get("error") or "it could not be read", SAID_WIDTH)
                self.report(Decided(name, request_id, "reread", False, f"{request_id} on {name}: {said}"))
                continue
            actor = actor or actor_of(answer.hello) or self.status[name].actor
            expected = DECIDED.get(method)
            done = read_back_done(method, answer.data, actor)
            who = ""
            if status == expected and not done:
                who = f", decided by {decided_by(answer.data, expected) or 'someone unknown'}, not by you"
            verdict = "" if done else f"; your {method.split('.')[-1]} did not take effect"
            self.report(Decided(name, request_id, "reread", done, one_line(
                f"{request_id} on {name} is {status}{who} (read again after the connection dropped){verdict}",
                SAID_WIDTH)))

    async def _doctor(self, host: str) -> str:
        self._set(host, doctor="running…")
        answer = await self._guarded(host, self.link.call(host, "doctor", {}))
        summary = doctor_summary(answer.data) if answer.state == "ok" else (answer.sentence or answer.state)
        self._set(host, doctor=summary)
        return summary


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def pending_rows(data: list) -> tuple[dict, ...]:
    """The rows a host sent that have an id, bounded; the rest is the host's data, shown as is."""
    return tuple(r for r in data[:PENDING_LIMIT] if isinstance(r, dict) and isinstance(r.get("id"), str))


__all__ = ["Answer", "Arrival", "Decided", "FleetMonitor", "HostLink", "HostStatus", "STALE_REASON", "Shown",
           "doctor_summary", "pending_rows", "read_only_reason", "result_sentence"]
