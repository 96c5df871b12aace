"""`approvals watch --fleet [--exec CMD] [--cursor FILE]`: every host's queue changes as one stream,
each line (or JSON object) with its host.

Each host runs `approvals watch` itself (the server's `approvals.watch`, notifications
`approvals.changed` with the change and the host's opaque `cursor`). The `--cursor` file is the one
of `approvals watch` (console/cli/watch_delivery.py `Cursor`: created exclusively, replaced
atomically), holding `{"fleet": {HOST: CURSOR}}`; it is saved after every delivered line, so a
restart resumes each host after its last delivered change and `--exec` runs once per new request
across restarts (its stdin is the change as JSON with its `host`, `$ARCHON_REQUEST_ID` is HOST:ID;
`approvals show HOST:ID --host HOST --json` reads the whole request). A host whose session ends is
reconnected with back-off (console/fleet/sessions.py `FleetSessions`) and resumes from its cursor; the
others keep streaming meanwhile.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from console.services.watch import QueueChange

_CHANGE_FIELDS = tuple(f.name for f in fields(QueueChange) if f.name != "rowid")
MAX_HOST_CURSOR = 64 * 1024  # characters of one host's cursor as JSON (it is the host's, not ours)


def decode_cursors(data: Any) -> dict[str, Any]:
    """The fleet cursor file's JSON -> host -> cursor; ValueError for anything else (a one-host
    watch's cursor included: it names no host, so it cannot say where each host stands). A host's
    entry that is over the cap is left out (that host starts from now); the others keep their place."""

    if not isinstance(data, dict) or set(data) != {"fleet"} or not isinstance(data["fleet"], dict):
        raise ValueError("not a fleet cursor")
    return {host: cursor for host, cursor in data["fleet"].items()
            if isinstance(host, str) and cursor_size(cursor) <= MAX_HOST_CURSOR}  # one bad entry costs only its host


def cursor_size(cursor: Any) -> int:
    """The characters `cursor` takes in the file; over any cap for what is not JSON or is nested
    deeper than the file's reader takes (console/text.py `read_json`, inside two levels)."""
    import json

    from console.text import MAX_DEPTH, limit_problem

    try:
        text = json.dumps(cursor, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return MAX_HOST_CURSOR + 1
    if limit_problem(text, max_depth=MAX_DEPTH - 2, max_chars=MAX_HOST_CURSOR) is not None:
        return MAX_HOST_CURSOR + 1
    return len(text)


def cursor_cap(hosts: int) -> int:
    """One host's share of the cursor file: every host's cursor at its cap still loads (the file is
    read through console/text.py `read_json`, `MAX_CHARS`), so no host's cursor can cost the
    others their place."""
    from console.text import MAX_CHARS

    return min(MAX_HOST_CURSOR, (MAX_CHARS // 2) // max(1, hosts))


def others_within_share(cursors: dict[str, Any], hosts: list[str]) -> dict[str, Any]:
    """`cursors` with the entries of hosts not in this run (`hosts`) kept only within the other half
    of the file: this run's hosts fill at most half (`cursor_cap`), so the file as written always
    loads, however many runs over other hosts wrote to it before (each keeps its place while it fits)."""
    import json

    from console.text import MAX_CHARS

    budget = MAX_CHARS // 2 - 1024  # the braces, separators and this run's keys
    kept: dict[str, Any] = {}
    for host in sorted(cursors):
        if host in hosts:
            kept[host] = cursors[host]
            continue
        cost = len(json.dumps(host, ensure_ascii=True)) + cursor_size(cursors[host]) + 4
        if cost <= budget:
            kept[host], budget = cursors[host], budget - cost
    return kept


def encode_cursors(cursors: dict[str, Any]) -> dict[str, Any]:
    return {"fleet": dict(sorted(cursors.items()))}


def change_from_json(data: Any) -> QueueChange:
    """A change as the host's `approvals watch --json` printed it; ValueError for another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("change"), str) or not isinstance(
            data.get("request_id"), str):
        raise ValueError("not a change")
    values = {name: data.get(name) for name in _CHANGE_FIELDS}
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            values[name] = str(value)
    values["project_id"] = values["project_id"] or ""
    return QueueChange(**values)


def change_text(host: str, change: QueueChange, now) -> str:
    from console.cli.watch_delivery import change_line
    from console.text import line

    return line((host, 30), change_line(change, now))


def change_json(host: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"host": host, **{k: v for k, v in data.items() if k != "host"}}


__all__ = ["change_from_json", "change_json", "change_text", "decode_cursors", "encode_cursors"]


LOCAL_OPTIONS = frozenset({"cursor", "exec_command", "exec_timeout", "exec_jobs", "exec_retries"})


def run_fleet_watch(runner, params: dict[str, Any]) -> int:
    """The stream until Ctrl-C (or SIGTERM/SIGHUP); every delivered change is in the cursor first."""
    import sys
    import threading

    from console.cli.watch_delivery import Cursor
    from console.signals import Stopped, run_until_stopped

    args = runner.args
    sent = {k: v for k, v in params.items() if k not in LOCAL_OPTIONS}
    lock = threading.Lock()  # hooks report from their own threads

    def report(text: str) -> None:
        from console.cli.watch_delivery import say

        with lock:
            say(text)

    cursor = Cursor(args.cursor, report, decode=decode_cursors, encode=encode_cursors)
    cursors: dict[str, Any] = cursor.load() or {}
    hooks = None
    if args.exec_command:
        from console.cli.hooks import HookPolicy, HookRunner

        hooks = HookRunner(HookPolicy(args.exec_command, timeout=args.exec_timeout, jobs=args.exec_jobs,
                                      retries=args.exec_retries), report)
    stream = _Stream(runner, sent, cursors, cursor, hooks, report)
    sys.stderr.write(f"archon-console: watching approval requests on {', '.join(runner.names)} (Ctrl-C to stop)\n")
    sys.stderr.flush()
    try:
        run_until_stopped(stream.run())
        from console.cli.watch_delivery import quiet_stdout

        quiet_stdout()  # it returns only when the reader left
    except (KeyboardInterrupt, Stopped):
        return 0
    finally:
        if hooks is not None:
            left = hooks.stop()
            if left:
                report(f"stopped with {left} hook run(s) unfinished")
    return 0


class _Stream:
    """One `FleetSessions`; on each host's (re)connection its watch is started from its cursor."""

    def __init__(self, runner, params, cursors, cursor, hooks, report):
        self.runner, self.params, self.cursors = runner, params, cursors
        self.cursor, self.hooks, self.report = cursor, hooks, report
        self.said: dict[str, str] = {}
        self.oversized: set[str] = set()  # hosts whose too-large cursor was said
        # One watch per session. `FleetSessions.call` reconnects a session that dropped after its
        # `ok` and announces a second `ok` for the session it then watches on; a second start there
        # would be refused by the host (a watching session is dedicated) and say the watch failed.
        self.watched: dict[str, Any] = {}  # host -> the `ok` outcome of the session its watch runs on
        self.locks: dict[str, Any] = {}
        self.starting: set = set()  # held: the event loop keeps only a weak reference to a task
        self.gone = False  # the reader of stdout left (console/cli/watch_delivery.py OutputGone)

    async def run(self) -> None:
        import asyncio

        from console.fleet.sessions import FleetSessions

        self.sessions = FleetSessions(self.runner.fleet, self.runner.hosts, parallel=int(self.runner.args.parallel),
                                      cache=False, on_notification=self.notified, on_state=self.state)
        try:
            from console.cli.watch_delivery import output_gone

            await self.sessions.connect()
            while not self.gone and not output_gone():  # until Ctrl-C cancels this task, or the reader leaves
                await asyncio.sleep(float(self.runner.args.poll))
        finally:
            # The watch starts still under way end with the stream (else asyncio.run destroys them
            # pending, and says so on stderr), then the sessions close.
            for task in list(self.starting):
                task.cancel()
            await asyncio.gather(*self.starting, return_exceptions=True)
            await self.sessions.close()

    def state(self, outcome) -> None:
        import asyncio

        from console.text import one_line

        if outcome.state == "ok":
            task = asyncio.ensure_future(self.start(outcome.host))
            self.starting.add(task)
            task.add_done_callback(self.starting.discard)
            return
        text = f"{one_line(outcome.host, 30)}: {outcome.state}: {one_line(outcome.sentence or '', 300).rstrip('.')}"
        if self.said.get(outcome.host) != text:  # once per change of state, not once per retry
            self.said[outcome.host] = text
            self.report(text + "; reconnecting with back-off, then resuming from its cursor")

    async def start(self, host: str) -> None:
        import asyncio

        async with self.locks.setdefault(host, asyncio.Lock()):
            if self.watched.get(host) is not None and self.watched[host] is self.sessions.states.get(host):
                return  # this session streams the host's changes already
            await self._start(host)

    async def _start(self, host: str) -> None:
        from console.text import one_line

        params = dict(self.params)
        if host in self.cursors:
            params["cursor"] = self.cursors[host]
        outcome = await self.sessions.call(host, "approvals.watch", params)
        output = outcome.data if isinstance(outcome.data, dict) else {}
        if outcome.state != "ok" or outcome.exit != 0 or not output.get("watching"):
            why = output.get("error") or outcome.sentence or outcome.state
            self.report(f"{one_line(host, 30)}: the watch did not start: {one_line(why, 300)}")
            return
        self.watched[host] = self.sessions.states.get(host)
        if self.said.pop(host, None) is not None:
            self.report(f"{one_line(host, 30)}: back; resuming from its cursor")
        for note in output.get("notes") or ():
            self.report(f"{one_line(host, 30)}: {one_line(note, 300)}")
        if "cursor" in output and host not in self.cursors:  # where this host's stream starts
            self.keep(host, output["cursor"])

    def keep(self, host: str, cursor: Any) -> None:
        """Save `host`'s cursor, unless it is over its share of the file (`cursor_cap`): then its
        change was delivered, its place is not kept (said once), and the file stays loadable."""
        from console.text import one_line

        if cursor_size(cursor) > cursor_cap(len(self.runner.names)):
            if host not in self.oversized:
                self.oversized.add(host)
                self.report(f"{one_line(host, 30)} sent a cursor over {cursor_cap(len(self.runner.names))} "
                            "characters; it is not kept (a restart resumes this host from its last usable one)")
            return
        self.cursors[host] = cursor
        self.cursors = others_within_share(self.cursors, list(self.runner.names))
        self.cursor.save(self.cursors)

    def notified(self, host: str, method: str, params: Any) -> None:
        import sys

        from console.cli.watch_delivery import OutputGone, deliver, held_signals
        from console.clock import system_clock
        from console.cli.output import json_document
        from console.text import one_line

        if method != "approvals.changed" or not isinstance(params, dict):
            return
        data = params.get("change")
        if isinstance(data, dict) and data.get("change") == "note":
            self.report(f"{one_line(host, 30)}: {one_line(data.get('note'), 300)}")
            return
        try:
            change = change_from_json(data)
        except ValueError:
            self.report(f"{one_line(host, 30)} sent a change of a form this console does not know; skipped it")
            return
        if self.gone:
            return

        def write() -> None:
            if self.runner.json:
                sys.stdout.write(json_document(change_json(host, data), indent=None) + "\n")
            else:
                sys.stdout.write(change_text(host, change, system_clock()) + "\n")
            sys.stdout.flush()

        with held_signals():  # a clean stop never falls between the line and its cursor
            try:
                deliver(write)
            except OutputGone:  # nobody reads: the stream ends, the cursor stays at the last line read
                self.gone = True
                return
            if "cursor" in params:
                self.keep(host, params["cursor"])
        if self.hooks is not None and change.change == "new":
            self.hooks.submit(f"{host}:{change.request_id}", change_json(host, data))
