"""Host outcomes built by hand, for the fleet views and id rules of the command line
(console/cli/fleet_views.py, fleet_ids.py, fleet_writes.py) without any host or ssh.

`Outcome` has exactly the fields of console/fleet/client.py `HostOutcome`; `FakeRunner` answers
`call` from a table the test writes, and records what was sent where."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Outcome:
    host: str
    state: str = "ok"
    sentence: str | None = None
    exit: int | None = 0
    data: Any = None
    hello: dict | None = None
    age_seconds: float | None = None


def ok(host: str, data: Any, exit: int = 0) -> Outcome:
    return Outcome(host, "ok", None, exit, data)


def down(host: str, state: str = "unreachable", sentence: str = "ssh: connect to host 127.0.0.9 port 22: "
         "Connection refused") -> Outcome:
    return Outcome(host, state, sentence, None, None)


def stale(host: str, data: Any, age: float = 240.0) -> Outcome:
    return Outcome(host, "stale", "timeout: no answer within 30 s", 0, data, age_seconds=age)


@dataclass
class _Host:
    name: str


@dataclass
class _Fleet:
    hosts: dict


@dataclass
class FakeRunner:
    """What console/cli/fleet_writes.py asks of console/cli/fleet.py `Runner`; `answer(method,
    params, host)` gives each host's outcome."""

    names: list[str]
    answer: Callable[[str, dict, str], Outcome]
    json: bool = True
    sent: list = field(default_factory=list)
    emitted: list = field(default_factory=list)
    hellos: list = field(default_factory=list)

    def __post_init__(self):
        self.hosts = [_Host(n) for n in self.names]
        self.fleet = _Fleet({n: _Host(n) for n in self.names})
        self.args = argparse.Namespace(parallel=4)

    def call(self, method, params, hosts=None, *, cache=True):
        chosen = self.hosts if hosts is None else hosts
        if method == "hello":  # a write run's instance check (fleet_writes `_shared`): each host its own
            self.hellos.append([host.name for host in chosen])
            return [Outcome(host.name, "ok", None, 0, {"instance_id": host.name}, {"instance_id": host.name})
                    for host in chosen]
        out = []
        for host in chosen:
            self.sent.append((method, dict(params), host.name, cache))
            out.append(self.answer(method, params, host.name))
        return out

    def host(self, name):
        return next(h for h in self.hosts if h.name == name)

    def emit(self, value):
        self.emitted.append(value)

    def say_hosts(self, outcomes):
        pass
