"""`archon-console serve --stdio` as a real process driven through pipes (no tests in this module).

Every wait is bounded: lines are read on a thread into a queue and taken with a deadline, so a
server that hangs fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import stat
import queue
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from console.services.host_identity import DEFAULT_POLICY
from tests.approvals_helpers import add_project, add_request, ts

WAIT = 30.0  # generous for a loaded machine; a passing run never waits this long


def server_env(**overrides: str | None) -> dict[str, str]:
    """The environment of a local start (no SSH), with `overrides` set (None removes a variable)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SSH_CONNECTION", "SSH_ORIGINAL_COMMAND", "SSH_USER_AUTH", "ARCHON_CONSOLE_ACTOR",
                        "SSH_CLIENT", "SSH_TTY")}
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class Server:
    """One `serve --stdio` process; `call` sends a request and returns its response."""

    def __init__(self, *args: str, db: Path | None = None, env: dict[str, str] | None = None,
                 policy: Path | None = None, tmp: Path | None = None):
        argv = [sys.executable, "-m", "console", "serve", "--stdio"]
        if db is not None:
            argv += ["--db", str(db)]
        env = env or server_env()
        if policy is None and tmp is not None:
            if "SSH_CONNECTION" in env and "SSH_ORIGINAL_COMMAND" not in env:
                # the client's command line: only the default policy is believed, so it must be absent
                if os.path.exists(DEFAULT_POLICY):
                    pytest.skip(f"{DEFAULT_POLICY} exists on this machine and would apply")
            else:
                policy = tmp / "no-policy.toml"  # empty: the host's own /etc file never applies to a test
                if not policy.exists():  # (a named policy must exist: console/services/host_identity.py)
                    policy.write_text("")
        if policy is not None:
            argv += ["--policy", str(policy)]
        self.proc = subprocess.Popen([*argv, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.raw: list[bytes] = []
        self.errors: list[str] = []
        self.next_id = 0
        self.notes: list[dict[str, Any]] = []
        self.watch_notes: list[str] = []
        self._readers = [threading.Thread(target=self._pump, daemon=True),
                         threading.Thread(target=self._collect, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _collect(self) -> None:
        for line in self.proc.stderr:
            self.errors.append(line.decode("utf-8", "replace"))

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read(self, timeout: float = WAIT) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the server ended: {''.join(self.errors)}"
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The response to one request (notifications that arrive first are kept in `notes`)."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(self.next_id)

    def response(self, id_: Any) -> dict[str, Any]:
        while True:
            answer = self.read()
            if "id" in answer:
                assert answer["id"] == id_, answer
                return answer
            self.notes.append(answer)

    def notification(self, timeout: float = WAIT) -> dict[str, Any]:
        """The next notification's params (one that arrived during a request first)."""
        if self.notes:
            return self.notes.pop(0)["params"]
        message = self.read(timeout)
        assert "id" not in message and message["method"] == "approvals.changed", message
        return message["params"]

    def changes(self, n: int) -> list[dict[str, Any]]:
        """The next `n` changes (notes are kept in `watch_notes`)."""
        got: list[dict[str, Any]] = []
        while len(got) < n:
            params = self.notification()
            if params["change"]["change"] == "note":
                self.watch_notes.append(params["change"]["note"])
            else:
                got.append(params)
        return got

    def hello(self, **params: Any) -> dict[str, Any]:
        answer = self.request("hello", {"protocol": 1, **params})
        assert "result" in answer, answer
        return answer["result"]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A command method's result: {"exit": CODE, "output": JSON}."""
        answer = self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    def close(self, timeout: float = WAIT) -> int:
        """End of input; the exit status."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
            # The process has ended, but what it wrote last may still be in the readers' hands: on a
            # loaded machine `errors` and `raw` were read before the last line was appended.
            for reader in self._readers:
                reader.join(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)


# --- hosts of the fleet CLI tests: a database of its own, a server behind a forced command

def later(hours: float) -> str:
    return ts(datetime.now(timezone.utc) + timedelta(hours=hours))


def host_db(make_db, name: str, requests: dict[str, float]):
    """A host's own database: a project of its own (its instance id), requests expiring in hours."""
    project = f"p-{name}"

    def fill(conn):
        add_project(conn, project)
        for request_id, hours in requests.items():
            add_request(conn, request_id, project, expires_at=later(hours))

    return make_db(name=f"{name}.db", fill=fill)


def forced_server(tmp_path, actor: str, db) -> str:
    """A host whose key is a forced command (`command="archon-console serve --stdio --actor=..."`):
    whatever the client asks to run, the host runs its own server, with the actor it names."""
    script = tmp_path / f"forced-{actor}.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m console serve --stdio --actor={actor} --db {db}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)
