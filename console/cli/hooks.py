"""Running an operator's command once per new pending request (`approvals watch --exec CMD`).

The hook is the operator's own shell command (a Slack webhook, a pager): it gets the request as JSON
on stdin and its id in `$ARCHON_REQUEST_ID`. What the console guarantees around it:

- a job can never kill a worker: whatever one run raises is that job's failure, reported in one
  sentence, and the worker takes the next job (a NUL in an id once made `Popen` raise `ValueError`,
  the worker died and later hooks never ran while the stream went on);
- the environment carries only values an environment can hold: an id that is not plain printable
  text (NUL, control or invisible characters, undecodable bytes, over `ENV_ID_MAX` characters) is
  not put in `$ARCHON_REQUEST_ID` (which is then unset); that hook finds the id only on stdin;
- it never blocks the stream: hooks run on worker threads, at most `jobs` at a time, and a backlog
  beyond `backlog` is reported and dropped rather than held without bound;
- a hook that exceeds `timeout` is killed with its whole process group;
- a failing hook (non-zero exit, timeout, cannot start) is reported on stderr with the end of what it
  printed there, and retried with exponential back-off up to `retries` times;
- it never writes the database: it is given data, not a connection.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

TAIL_BYTES = 300
ENV_ID_MAX = 256


@dataclass(frozen=True)
class HookPolicy:
    command: str
    timeout: float = 30.0
    jobs: int = 4
    retries: int = 3
    backoff: float = 2.0
    backlog: int = 1000


@dataclass
class _Job:
    request_id: str
    payload: bytes
    attempt: int = 1
    not_before: float = 0.0


class HookRunner:
    """A bounded pool of hook runs; `report(text)` is called (from any thread) for every failure."""

    def __init__(self, policy: HookPolicy, report: Callable[[str], None]):
        self.policy = policy
        self._report_to = report
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._running: set[subprocess.Popen] = set()
        self._stopping = False
        self.started = self.succeeded = self.gave_up = self.dropped = 0
        self._threads = [threading.Thread(target=self._work, name=f"hook-{n}", daemon=True)
                         for n in range(max(1, policy.jobs))]
        for thread in self._threads:
            thread.start()

    def _report(self, text: str) -> None:
        try:
            self._report_to(text)
        except Exception:  # noqa: BLE001 - an unwritable stderr must not end a worker either
            pass

    def submit(self, request_id: str, request: dict) -> None:
        """Queue one hook run for `request` (its stdin: `hook_input`)."""
        payload = hook_input(request)
        with self._cond:
            if len(self._queue) >= self.policy.backlog:
                self.dropped += 1
                self._report(f"hook backlog is full ({self.policy.backlog} waiting); not running it for "
                             f"{request_id}")
                return
            self._queue.append(_Job(request_id, payload))
            self._cond.notify()

    def _next(self) -> _Job | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                now = time.monotonic()
                ready = next((j for j in self._queue if j.not_before <= now), None)
                if ready is not None:
                    self._queue.remove(ready)
                    return ready
                wait = min((j.not_before for j in self._queue), default=now + 3600) - now
                self._cond.wait(timeout=max(0.01, wait))

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                failure = self._run(job)
            except Exception as exc:  # noqa: BLE001 - one job's failure, never the worker's end
                failure = f"could not run it: {type(exc).__name__}"
            if failure is None:
                self.succeeded += 1
                continue
            if job.attempt > self.policy.retries:
                self.gave_up += 1
                self._report(f"hook for {job.request_id} failed ({failure}); gave up after {job.attempt} attempts")
                continue
            delay = self.policy.backoff * 2 ** (job.attempt - 1)
            self._report(f"hook for {job.request_id} failed ({failure}); retry {job.attempt} of "
                         f"{self.policy.retries} in {delay:g} s")
            with self._cond:
                job.attempt += 1
                job.not_before = time.monotonic() + delay
                self._queue.append(job)
                self._cond.notify()

    def _run(self, job: _Job) -> str | None:
        """None on success, else what went wrong in a few words."""
        env = hook_environment(job.request_id)
        self.started += 1
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", self.policy.command], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                    start_new_session=True)
        except OSError as exc:
            return f"cannot start: {exc.strerror or exc}"
        with self._cond:
            if self._stopping:
                _kill(proc)
                return "stopped"
            self._running.add(proc)
        try:
            _, err = proc.communicate(job.payload, timeout=self.policy.timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            return f"timed out after {self.policy.timeout:g} s"
        finally:
            with self._cond:
                self._running.discard(proc)
        if proc.returncode == 0:
            return None
        tail = err[-TAIL_BYTES:].decode("utf-8", "replace").strip() if err else ""
        return f"exit {proc.returncode}" + (f": {tail}" if tail else "")

    def stop(self, grace: float = 2.0) -> int:
        """Stop taking work; give running hooks `grace` seconds, then kill them. Returns how many
        requests were left without a successful hook (queued or killed)."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._cond:
                if not self._running and not any(j.not_before <= time.monotonic() for j in self._queue):
                    break
            time.sleep(0.05)
        with self._cond:
            self._stopping = True
            left = len(self._queue) + len(self._running)
            for proc in list(self._running):
                _kill(proc)
            self._cond.notify_all()
        return left


def env_safe(value: str) -> bool:
    """Whether `value` can go into a child's environment as the text it is: printable (no NUL,
    control, invisible or surrogate-escaped characters) and short."""
    return 0 < len(value) <= ENV_ID_MAX and value.isprintable()


def hook_environment(request_id: str) -> dict[str, str]:
    """The watch's own environment, and `$ARCHON_REQUEST_ID` only when the id is safe there."""
    env = dict(os.environ)
    env.pop("ARCHON_REQUEST_ID", None)  # never an inherited value standing in for this request's
    if env_safe(request_id):
        env["ARCHON_REQUEST_ID"] = request_id
    return env


def hook_input(request: dict) -> bytes:
    """What a hook reads on stdin: the request as one line of strict JSON (a stored 9e999 becomes the
    string "Infinity", never a bare token a strict parser such as JSON.parse refuses)."""
    from console.cli.output import json_document

    return (json_document(request, indent=None) + "\n").encode("utf-8", "replace")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["ENV_ID_MAX", "HookPolicy", "HookRunner", "env_safe", "hook_environment"]
