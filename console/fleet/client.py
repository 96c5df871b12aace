"""Calling hosts: one outcome per host, whatever happened there, never a traceback.

`call_hosts` is the CLI's: one connection per host (`hello`, then the method), at most `parallel`
at once, each host within a console-side `deadline` (ssh's ConnectTimeout bounds only the
connection; a host that accepts and never speaks, or stops mid-answer, is bounded here: the ssh
process is killed). The TUI's and watch's long-lived sessions (console/fleet/sessions.py
`FleetSessions`) end in the same outcomes, built here.

Each host ends in one state of console/fleet/transport.py `STATES` with one sentence. A read that
fails for a reason of the connection falls back on the host's last successful read
(console/fleet/cache.py), as `stale` with its age; a write never does. A write whose request was
sent and whose answer never came is `outcome_unknown`: it may have landed, so it is never retried
blindly (a repeated decision is answered "already ... by you" by the host).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from console import __version__
from console.fleet import answers
from console.fleet import cache as fleet_cache
from console.fleet.hosts import Fleet, Host
from console.fleet.local_policy import refused_locally
from console.fleet.protocol import BEFORE_RUNNING, METHOD_NOT_FOUND, METHODS, PROTOCOL_VERSION, cut_size
from console.fleet.session import NotSent, RemoteError, Session, SessionLost
from console.fleet.transport import UPGRADE_COMMAND, classify, control_dir
from console.text import is_clean, one_line

STALE_FROM = ("unreachable", "timeout", "auth_failed", "host_key", "no_server", "version_skew")
MAX_BACKOFF = 60.0


@dataclass
class HostOutcome:
    """What one host answered. `state` is one of console/fleet/transport.py `STATES`, or
    `read_only` (a write refused here, never sent: `refused_locally`). `data` is the command's JSON
    output (`exit` its exit code) for `ok`, the cached one for `stale` (`age_seconds` old, `cause` the state of the live attempt);
    `hello` is the host's hello. Everything in `data` and `hello` came from the host: data."""

    host: str
    state: str
    sentence: str | None = None
    exit: int | None = None
    data: Any = None
    hello: dict[str, Any] | None = None
    age_seconds: float | None = None
    cause: str | None = None


def is_write(method: str) -> bool:
    """Writes are never cached, never answered from the cache, and unknown when a connection drops
    under them. A method the table does not know counts as a write: nothing is assumed safe."""
    spec = METHODS.get(method)
    return method not in ("hello", "approvals.watch") and (spec is None or spec.writes)


def cacheable(method: str) -> bool:
    """Only a command's read is kept (and shown stale): not hello, not a watch's stream, never a write."""
    spec = METHODS.get(method)
    return spec is not None and not spec.writes


def hello_params(host: Host) -> dict[str, Any]:
    params: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "client": __version__}
    if host.db is not None:
        params["db"] = host.db
    return params


def check_hello(host: Host, hello: Any) -> HostOutcome | None:
    """The outcome that ends the call at `hello` (version skew, another database), else None. The
    remembered instance is checked on EVERY call, whether or not its answer may come from the read
    cache: a write (never cached) to an alias that now reaches another database is the worst case."""
    name = host.name
    if not isinstance(hello, dict):
        return HostOutcome(name, "remote_error", one_line(f"{name} answered hello with something other than an object."))
    protocol = hello.get("protocol")
    if type(protocol) is not int or protocol != PROTOCOL_VERSION:
        return HostOutcome(name, "version_skew", one_line(
            f"{name} speaks fleet protocol {one_line(protocol, 20)}, this console {PROTOCOL_VERSION}: upgrade the "
            f"older of the two ({UPGRADE_COMMAND})."), hello=hello)
    instance = hello.get("instance_id")
    if instance is None and (said := failure_sentence(hello.get("database"))):
        return HostOutcome(name, "remote_error", one_line(f"{name} cannot use its database: {said}"), hello=hello)
    if not isinstance(instance, str) or not 0 < len(instance) <= 128 or not is_clean(instance, allow_newlines=False):
        return HostOutcome(name, "remote_error", one_line(f"{name} answered hello without a usable instance id."),
                           hello=hello)
    known = fleet_cache.known_instance(host)
    if known is not None and known != instance:
        return HostOutcome(name, "wrong_instance", one_line(
            f"{name} now answers for database {instance}, not {known} as before: check that {host.ssh} still "
            f"reaches the right host and file; if the database was replaced on purpose, delete "
            f"{fleet_cache.instance_file(host)}."), hello=hello)
    if known is None:
        fleet_cache.remember_instance(host, instance)
    return None


def remote_outcome(host: Host, error: RemoteError, at_hello: bool, write: bool = False) -> HostOutcome:
    if at_hello and (error.code == METHOD_NOT_FOUND or error.kind in ("version_skew", "protocol")):
        return HostOutcome(host.name, "version_skew", one_line(
            f"{host.name} does not speak this console's fleet protocol ({error.message}): upgrade the older of the "
            f"two ({UPGRADE_COMMAND})."))
    if write and not at_hello and error.code not in BEFORE_RUNNING:  # it may have run and committed
        return HostOutcome(host.name, "outcome_unknown", one_line(
            f"{host.name} answered the write with an error that may follow its work ({error.message}): whether it "
            "took effect is unknown; read it again before repeating it."))
    return HostOutcome(host.name, "remote_error", one_line(f"{host.name} refused: {error.message} ({error.kind})."))


def answer_outcome(host: Host, method: str, value: Any, hello: dict[str, Any]) -> HostOutcome:
    """A method's result, `{"exit": CODE, "output": JSON}` (and the refusal's words, when any),
    checked against what `method` answers (console/fleet/answers.py): an answer that is not one is
    never a result; for a write, which was sent, its outcome is unknown. A result whose output was
    cut for its size (console/fleet/protocol.py `cut_result`) ran on the host: a write's outcome is
    then to be read back, never taken as refused or as not sent."""
    cut = cut_size(value) if isinstance(value, dict) and type(value.get("exit")) is int else None
    if cut is not None and is_write(method):
        return HostOutcome(host.name, "outcome_unknown", one_line(
            f"The write was done on {host.name} (exit {value['exit']}), but its answer ({cut} bytes) was too large "
            f"to show: check each id with approvals show {host.name}:ID (or the matching show) before repeating "
            "it."), hello=hello)
    if cut is not None:
        return HostOutcome(host.name, "remote_error", one_line(
            f"{host.name}'s answer ({cut} bytes) was too large to send: ask for fewer rows (limit) or narrow the "
            "filters."), hello=hello)
    why = answers.problem(method, value)
    if why is not None:
        said = f"{host.name} sent an answer the console does not understand: {why}"
        if is_write(method):
            return HostOutcome(host.name, "outcome_unknown", one_line(
                f"{said}; the write was sent, so whether it took effect is unknown: read it again before "
                "repeating it."), hello=hello)
        return HostOutcome(host.name, "remote_error", one_line(said + "."), hello=hello)
    return HostOutcome(host.name, "ok", failure_sentence(value.get("output")) if value["exit"] else None,
                       value["exit"], value.get("output"), hello)


def failure_sentence(output: Any) -> str | None:
    """The sentence of a command that failed on the host: its `--json` error object's `error` and
    `hint` (console/cli/output.py `error_json`), cleaned onto one line."""
    if not isinstance(output, dict) or not isinstance(output.get("error"), str):
        return None
    hint = output.get("hint")
    return one_line(output["error"] + (f" {hint}" if isinstance(hint, str) and hint else ""), 400)


def lost_outcome(host: Host, lost: SessionLost, returncode: int | None, stderr: str,
          write_sent: bool, spoke: bool) -> HostOutcome:
    if write_sent:
        return HostOutcome(host.name, "outcome_unknown", one_line(
            f"The connection to {host.name} ended after the write was sent and before its answer: whether it took "
            "effect is unknown; read it again before repeating it."))
    if lost.violation:
        return HostOutcome(host.name, "remote_error", one_line(f"{host.name} {lost.violation}; the session was ended."))
    state, sentence = classify(returncode, stderr, alias=host.ssh, name=host.name, remote=host.remote, spoke=spoke)
    return HostOutcome(host.name, state, sentence)


class _Progress:
    """How far one attempt got, readable after the deadline cancelled it."""

    def __init__(self) -> None:
        self.write_sent = False
        self.session: Session | None = None


async def _attempt(fleet: Fleet, host: Host, method: str, params: dict[str, Any], sockets: Path | None,
                   progress: _Progress, use_cache: bool) -> HostOutcome:
    session = progress.session = Session(fleet, host, sockets=sockets)
    at_hello = True
    try:
        await session.start()
    except OSError as exc:
        return HostOutcome(host.name, "unreachable", one_line(
            f"ssh could not be started for {host.name} ({exc.strerror or exc}): install OpenSSH's client or set "
            f"[ssh] command in {fleet.path}."))
    try:
        hello = await session.request("hello", hello_params(host))
        ended = check_hello(host, hello)
        if ended is not None or method == "hello":
            return ended or HostOutcome(host.name, "ok", data=hello, hello=hello, exit=0)
        at_hello = False
        progress.write_sent = is_write(method)
        return answer_outcome(host, method, await session.request(method, params), hello)
    except RemoteError as exc:
        return remote_outcome(host, exc, at_hello, is_write(method))
    except SessionLost as exc:
        # after a violation nothing more is read: the caller kills the process
        returncode, stderr = await session.finish() if not exc.violation else (None, "")
        return lost_outcome(host, exc, returncode, stderr, progress.write_sent and exc.sent, session.spoke)
    except NotSent as exc:
        progress.write_sent = False
        return HostOutcome(host.name, "remote_error", one_line(f"Nothing was sent to {host.name}: {exc}."))


async def stale_outcome(host: Host, method: str, params: dict[str, Any], outcome: HostOutcome) -> HostOutcome:
    found = await asyncio.to_thread(fleet_cache.lookup, host, method, params)
    if found is None:
        return outcome
    data, hello, exit_code, age = found
    return HostOutcome(host.name, "stale", outcome.sentence, exit_code, data, hello, age, outcome.state)


async def call_one(fleet: Fleet, host: Host, method: str, params: dict[str, Any], *, deadline: float,
                   use_cache: bool, sockets: Path | None) -> HostOutcome:
    """One host's outcome within `deadline` seconds (the ssh process killed when it runs out)."""
    refused = refused_locally(host, is_write(method))
    if refused is not None:
        return HostOutcome(host.name, "read_only", refused)
    progress = _Progress()
    answered = False
    try:
        outcome = await asyncio.wait_for(_attempt(fleet, host, method, params, sockets, progress, use_cache),
                                         deadline)
        answered = True
    except asyncio.TimeoutError:
        if progress.write_sent:
            outcome = HostOutcome(host.name, "outcome_unknown", one_line(
                f"{host.name} did not answer the write within {deadline:g} s: whether it took effect is unknown; "
                "read it again before repeating it."))
        else:
            stderr = progress.session.stderr if progress.session else ""
            spoke = progress.session is not None and progress.session.spoke
            state, sentence = (classify(None, stderr, alias=host.ssh, name=host.name, spoke=spoke) if stderr.strip()
                               else ("", ""))
            if state not in ("host_key", "auth_failed", "unreachable"):
                state, sentence = "timeout", one_line(f"{host.name} did not answer within {deadline:g} s "
                                                      "(the console's deadline); its ssh was stopped.")
            outcome = HostOutcome(host.name, state, sentence)
    finally:
        # Outside the deadline: an answer that came in time stays the answer while the server exits
        # (within GRACE). Past the deadline, or cancelled, the process is killed at once.
        if progress.session is not None:
            await progress.session.close(kill=not answered or progress.session.violation is not None)
    if outcome.state == "ok" and use_cache and cacheable(method) and outcome.exit == 0:
        await asyncio.to_thread(fleet_cache.store, host, method, params, outcome.data, outcome.hello, outcome.exit)
    elif outcome.state in STALE_FROM and use_cache and cacheable(method):
        outcome = await stale_outcome(host, method, params, outcome)
    return outcome


def flag_shared_instances(outcomes: Sequence[HostOutcome]) -> list[HostOutcome]:
    """Two hosts answering for one database would show its rows twice and take one decision twice;
    and an instance id is in every hello, so any former client can claim another host's. Which of
    them is the real one cannot be told from here (order in hosts.toml says nothing): EVERY host
    sharing an instance id is `wrong_instance`, none of their rows shown. (A host whose id changed
    from the one remembered for it is already `wrong_instance` by `check_hello`, so it does not
    hide the honest one.)"""
    sharing: dict[str, list[str]] = {}
    for outcome in outcomes:
        instance = _instance(outcome)
        if instance is not None:
            sharing.setdefault(instance, []).append(outcome.host)
    flagged = []
    for outcome in outcomes:
        instance = _instance(outcome)
        if instance is not None and len(sharing[instance]) > 1:
            outcome = replace(outcome, state="wrong_instance", data=None, exit=None, sentence=one_line(
                f"{outcome.host} answers for the same database (instance {instance}) as "
                f"{', '.join(h for h in sharing[instance] if h != outcome.host)}: either two entries of hosts.toml "
                "reach one database or one of them claims another's; none of their answers is used until you "
                "have checked each host's database on the host itself."))
        flagged.append(outcome)
    return flagged


def _instance(outcome: HostOutcome) -> str | None:
    instance = outcome.hello.get("instance_id") if outcome.state == "ok" and outcome.hello else None
    return instance if isinstance(instance, str) else None


async def fan_out(fleet: Fleet, hosts: Sequence[Host], method: str, params: dict[str, Any] | None = None, *,
                  parallel: int = 8, deadline: float = 30.0, cache: bool = True) -> list[HostOutcome]:
    """`call_hosts` for a caller already inside an event loop."""
    sockets = await asyncio.to_thread(control_dir)
    gate = asyncio.Semaphore(max(1, int(parallel)))
    params = dict(params or {})

    async def one(host: Host) -> HostOutcome:
        async with gate:
            return await call_one(fleet, host, method, params, deadline=deadline, use_cache=cache, sockets=sockets)

    return flag_shared_instances(await asyncio.gather(*(one(host) for host in hosts)))


def call_hosts(fleet: Fleet, hosts: Sequence[Host], method: str, params: dict[str, Any] | None = None, *,
               parallel: int = 8, deadline: float = 30.0, cache: bool = True) -> list[HostOutcome]:
    """Each host's outcome of `method`, in the order of `hosts`: `hello`, then the method, on one
    connection per host. `console.fleet.private.PrivateDirUnusable` when ssh's control directory
    is not private."""
    from console.signals import run_until_stopped

    return run_until_stopped(fan_out(fleet, hosts, method, params, parallel=parallel, deadline=deadline, cache=cache))


__all__ = ["HostOutcome", "MAX_BACKOFF", "STALE_FROM", "answer_outcome", "cacheable", "call_hosts", "call_one",
           "check_hello", "failure_sentence", "fan_out", "flag_shared_instances", "hello_params", "is_write",
           "lost_outcome", "remote_outcome", "stale_outcome"]
