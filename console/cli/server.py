"""`archon-console serve --stdio`: the loop that answers a fleet client on this host.

The wire is console/fleet/protocol.py (newline-delimited JSON-RPC 2.0, caps, codes, `METHODS`).
Why the loop looks the way it does:

- stdout is the channel, so nothing else may ever reach it: the real stdout descriptor is duplicated
  for the channel alone, descriptor 1 is pointed at stderr (a child process, a C library or a stray
  `print` lands in the log) and `sys.stdout` is a capture while a command runs and stderr otherwise.
  stdin is likewise kept private and descriptor 0 is /dev/null, so no command can read the channel.
- Input is read with `select` and a deadline, framed by `protocol.Framer`: a line over the cap is
  dropped as it arrives and answered `too_large`, and the loop can poll an `approvals.watch` while
  it waits. A watching session is dedicated to its stream (only `shutdown` is answered beside it),
  so the server never holds two connections to the file at once (console/db/file_guard.py).
- A method is the CLI command it names, run through the CLI's parser and handler on this host
  (console/cli/server_methods.py); JSON-RPC errors are only for what is not a command's answer: a
  malformed message, an unknown method or param, and a write refused because the session is
  read-only or nobody in particular is acting (console/services/host_identity.py).
- A message is written in chunks that fit, each with the stop signals held, and the wait for room
  between chunks lets them in: SIGTERM and SIGHUP end the session cleanly (exit 0), as end of input
  and `shutdown` do, even while a client that stopped reading leaves a line half written.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from console.fleet import protocol as wire
from console.fleet.protocol import METHODS, SESSION_METHODS, SESSION_PARAMS

_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})
_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_CHUNK = select.PIPE_BUF  # a pipe (or socket) select calls writable takes this much without blocking


class Channel:
    """The private stdout: lines written in chunks that never block with the stop signals held."""

    def __init__(self, fd: int):
        self.fd = fd
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        try:
            data = wire.encode(message, cap=wire.MAX_RESPONSE_BYTES)
        except wire.MessageTooLarge as exc:
            data = _cut(message, exc)
        except ValueError as exc:  # a value JSON cannot carry
            data = wire.encode(wire.error(message.get("id"), wire.INTERNAL_ERROR,
                                          f"The answer could not be encoded ({exc})."), cap=wire.MAX_RESPONSE_BYTES)
        view = memoryview(data)
        try:
            while view:
                # Wait for room with the signals deliverable: a client that stops reading (and does not
                # close) must not make the server deaf to SIGTERM. A stop here ends the session with the
                # line cut, which no longer matters; each chunk that fits is written with them held.
                select.select([], [self.fd], [])
                old = signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
                try:
                    written = os.write(self.fd, view[:_CHUNK])
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old)
                view = view[written:]
        except OSError:  # the client is gone (EPIPE): nothing can be answered any more
            self.closed = True


def _cut(message: dict[str, Any], exc: wire.MessageTooLarge) -> bytes:
    """An over-cap message, as what can be sent: a command's result keeps its exit code with the
    marker that its output was cut (the command ran: a write that committed still says so); anything
    else becomes a `too_large` error."""
    result = message.get("result")
    if isinstance(result, dict) and type(result.get("exit")) is int and "id" in message:
        size = wire.cut_size(result) or exc.size or 0
        return wire.encode(wire.result(message["id"], wire.cut_result(result["exit"], size)),
                           cap=wire.MAX_RESPONSE_BYTES)
    return wire.encode(wire.error(message.get("id"), wire.TOO_LARGE,
                                  f"The answer was not sent: {exc}; ask for fewer rows (limit) or narrow the filters."),
                       cap=wire.MAX_RESPONSE_BYTES)


def log(text: str) -> None:
    from console.text import one_line

    sys.stderr.write(f"archon-console serve: {one_line(text, 400)}\n")
    sys.stderr.flush()


class Session:
    """One client's session: the identity and policy the host resolved, then what `hello` fixed."""

    def __init__(self, ctx, identity, policy, channel: Channel):
        from console.services.identity import current

        self.ctx, self.identity, self.policy, self.channel = ctx, identity, policy, channel
        from console.db.paths import expand_home

        self.fixed_db: Path | None = expand_home(ctx.args.db, "--db") if ctx.args.db is not None else None
        self.db_path: Path | None = None
        reasons = []
        if ctx.args.read_only:
            reasons.append("started with --read-only")
        if policy.read_only:
            reasons.append(f"the host's policy {policy.path} sets read_only")
        if identity.ambiguous:
            reasons.append(identity.ambiguous)
        self.read_only_reason = "; ".join(reasons) or None
        self.actor_for_reads = identity.actor or current().login or "unknown"
        self.watch = None
        self.stop = False

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    def context(self, args):
        from console.cli.cli import Context
        from console.clock import system_clock

        return Context(db_path=self.db_path, actor=self.identity.actor or self.actor_for_reads,
                       read_only=self.read_only, json=True, busy_timeout_ms=self.ctx.busy_timeout_ms,
                       clock=system_clock, args=args)

    # ------------------------------------------------------------------ methods
    def hello(self, id_: Any, params: dict[str, Any]) -> dict[str, Any]:
        protocol = params.get("protocol")
        if isinstance(protocol, bool) or not isinstance(protocol, int):
            return wire.error(id_, wire.INVALID_PARAMS, f"hello needs protocol: {wire.PROTOCOL_VERSION} (an integer).")
        if protocol != wire.PROTOCOL_VERSION:
            return wire.error(id_, wire.VERSION_SKEW,
                              f"version skew: the client speaks protocol {protocol}, this host's console "
                              f"speaks {wire.PROTOCOL_VERSION}; install the same console release on both.",
                              {"server_protocol": wire.PROTOCOL_VERSION})
        db = params.get("db")
        if db is not None and not _usable_path(db):
            return wire.error(id_, wire.INVALID_PARAMS, "hello's db must be a path: a non-empty UTF-8 string "
                              "without NUL, at most 4096 characters.")
        from console.db.paths import expand_home
        from console.errors import UsageError

        try:
            asked = expand_home(db, "hello's db") if db is not None else None
        except UsageError as exc:
            return wire.error(id_, wire.INVALID_PARAMS, exc.reason)
        wanted = self.fixed_db or self.db_path
        if asked is not None and wanted is not None and not _same_path(asked, wanted):
            why = "was started with --db" if self.fixed_db else "already serves"
            return wire.error(id_, wire.WRONG_DATABASE,
                              f"This server {why} {wanted}; it does not serve {db!r} in this session.",
                              {"db": str(wanted)})
        if wanted is None:
            from console.db.paths import resolve_db_path

            try:
                wanted = resolve_db_path(db)
            except Exception as exc:  # noqa: BLE001 - an unusable path is the client's to fix
                return wire.error(id_, wire.INVALID_PARAMS, f"hello's db cannot be used: {exc}")
        self.db_path = wanted
        client = params.get("client")
        log(f"hello from client {client if isinstance(client, str) else 'unnamed'!s:.80} on {wanted}")
        return wire.result(id_, self._hello_result())

    def _hello_result(self) -> dict[str, Any]:
        from console import __version__
        from console.cli.server_methods import failure

        database: dict[str, Any] = {"archon_release": None, "shape": None, "instance_id": None,
                                    "instance_source": None}
        state: Any = {"ok": True}
        try:
            from console.db.connect import open_database
            from console.services.instance import describe

            with open_database(self.db_path, read_only=True, busy_timeout_ms=self.ctx.busy_timeout_ms) as handle:
                database = describe(handle)
        except Exception as exc:  # noqa: BLE001 - the database's state is part of the answer
            state = failure(exc).output
        ident = self.identity
        return {
            "protocol": wire.PROTOCOL_VERSION,
            "console_version": __version__,
            "server": "installed",
            "db": str(self.db_path),
            "database": state,
            **database,
            "actor": ident.actor,
            "actor_source": ident.source,
            "identity_ambiguous": ident.ambiguous,
            "ssh_connection": ident.ssh_connection,
            "read_only": self.read_only,
            "read_only_reason": self.read_only_reason,
            "capabilities": capabilities(),
            "limits": {"max_request_bytes": wire.MAX_REQUEST_BYTES, "max_response_bytes": wire.MAX_RESPONSE_BYTES},
        }

    def refuse_write(self, id_: Any, method: str) -> dict[str, Any] | None:
        if self.identity.ambiguous:
            return wire.error(id_, wire.IDENTITY_AMBIGUOUS,
                              f"{method} was refused: the host cannot tell who is acting ({self.identity.ambiguous}).",
                              {"actor_source": self.identity.source})
        if self.read_only:
            return wire.error(id_, wire.READ_ONLY, f"{method} was refused: this session is read-only "
                              f"({self.read_only_reason}).")
        return None

    def command(self, id_: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from console.cli.server_methods import BadParams, argv_for, run

        spec = METHODS[method]
        if spec.writes:
            refused = self.refuse_write(id_, method)
            if refused is not None:
                return refused
        try:
            argv = argv_for(spec, params)
        except BadParams as exc:
            return wire.error(id_, wire.INVALID_PARAMS, f"{method}: {exc}.")
        outcome = run(argv, self.context)
        if outcome.stopped is not None:
            self.stop = True
        return wire.result(id_, outcome.to_json())

    def dispatch(self, id_: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.watch is not None and method != "shutdown":
            # A watch holds its connection for the whole session; a method beside it would open the same
            # file again in this process, and closing that would drop the watch's locks
            # (console/db/file_guard.py). So a watching session is dedicated to its stream.
            return wire.error(id_, wire.STREAM_BUSY, "This session is watching; it only streams changes now. "
                              "Open another connection for other methods, or send shutdown.")
        if method == "hello":
            unknown = sorted(set(params) - SESSION_PARAMS["hello"])
            if unknown:
                return wire.error(id_, wire.INVALID_PARAMS, f"unknown parameter {unknown[0][:80]!r}; hello accepts: "
                                  + ", ".join(sorted(SESSION_PARAMS["hello"])))
            return self.hello(id_, params)
        if method == "shutdown":
            self.stop = True
            return wire.result(id_, {"ok": True})
        if method not in METHODS and method not in SESSION_METHODS:
            return wire.error(id_, wire.METHOD_NOT_FOUND, f"There is no method {method[:80]!r}.",
                              {"methods": capabilities()})
        if self.db_path is None:
            return wire.error(id_, wire.NOT_READY, "Send hello first: it fixes the protocol and the database.")
        if method == "approvals.watch":
            from console.cli.server_watch import start_watch

            return start_watch(self, id_, params)
        return self.command(id_, method, params)

    # ------------------------------------------------------------------ messages
    def handle(self, item: bytes | wire.MessageTooLarge) -> None:
        if isinstance(item, wire.MessageTooLarge):
            self.channel.send(wire.error(None, wire.TOO_LARGE, f"{item}; the line was discarded."))
            return
        try:
            message = wire.decode(item)
        except (ValueError, RecursionError) as exc:
            self.channel.send(wire.error(None, wire.PARSE_ERROR, f"The line is not UTF-8 JSON ({_why(exc)})."))
            return
        answer = self.answer(message)
        if answer is not None:
            self.channel.send(answer)

    def answer(self, message: Any) -> dict[str, Any] | None:
        if isinstance(message, list):
            return wire.error(None, wire.INVALID_REQUEST, "Batches are not accepted; send one request per line.")
        if not isinstance(message, dict):
            return wire.error(None, wire.INVALID_REQUEST, "A request is a JSON object.")
        id_ = message.get("id")
        if not (id_ is None or isinstance(id_, str) and len(id_) <= 200
                or isinstance(id_, int) and not isinstance(id_, bool) and abs(id_) <= 2 ** 53):
            return wire.error(None, wire.INVALID_REQUEST, "A request's id is a string (at most 200 characters), "
                              "an integer or null.")
        if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            return wire.error(id_, wire.INVALID_REQUEST, 'A request has "jsonrpc": "2.0" and a method name.')
        extra = sorted(set(message) - _MEMBERS)
        if extra:
            return wire.error(id_, wire.INVALID_REQUEST, f"A request has no member {extra[0][:80]!r}.")
        method, params = message["method"], message.get("params", {})
        if params is None:
            params = {}
        if "id" not in message:  # a notification: never answered (JSON-RPC 2.0); only `shutdown` acts
            if method == "shutdown":
                self.stop = True
            else:
                log(f"a notification of {method[:80]!r} was ignored: methods are answered only to requests with an id")
            return None
        if not isinstance(params, dict):
            return wire.error(id_, wire.INVALID_PARAMS, "params are an object of named parameters.")
        try:
            return self.dispatch(id_, method, params)
        except Exception as exc:  # noqa: BLE001 - the server answers and goes on
            log(f"{method[:80]} failed: {type(exc).__name__}: {exc}")
            return wire.error(id_, wire.INTERNAL_ERROR, f"{method[:80]} failed unexpectedly ({type(exc).__name__}); "
                              "the host's log (stderr) says more.")


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    from console.text import one_line

    return one_line(exc, 120)


def _usable_path(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip() or "\0" in value or len(value) > 4096:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        return False
    return True


def _same_path(a: Path, b: Path) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def capabilities() -> list[str]:
    return [*sorted(METHODS), *SESSION_METHODS]


def _private_streams() -> tuple[int, int]:
    """(input fd, output fd): the channel's own descriptors; 0 becomes /dev/null and 1 stderr."""
    channel_in, channel_out = os.dup(0), os.dup(1)
    for fd in (channel_in, channel_out):
        os.set_inheritable(fd, False)
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return channel_in, channel_out


def serve(ctx) -> int:
    from console.errors import ConsoleError, UsageError
    from console.services import host_identity
    from console.services.identity import current, set_session

    args = ctx.args
    try:
        if args.actor is not None:
            raise UsageError("serve does not take --as: who acts is decided on the host (--actor from a forced "
                             "command, the SSH certificate, or the login).")
        if args.policy is not None:
            host_identity.require_host_chosen("--policy", os.environ)
        policy = host_identity.load_policy(args.policy or host_identity.DEFAULT_POLICY, named=args.policy is not None)
        identity = host_identity.resolve(args.serve_actor, policy, os.environ, current().login)
    except ConsoleError as exc:  # the session is refused before the channel exists: stdout stays empty
        log(exc.reason + (f" {exc.hint}" if exc.hint else ""))
        return exc.exit_code
    set_session(actor_source=identity.source, ssh_connection=identity.ssh_connection)
    channel_in, channel_out = _private_streams()
    saved = sys.stdout
    sys.stdout = sys.stderr  # between commands, anything printed is a log line
    session = Session(ctx, identity, policy, Channel(channel_out))
    if identity.note:
        log(identity.note)
    log(f"session as {identity.actor or 'nobody in particular'} ({identity.source})"
        + (f", read-only: {session.read_only_reason}" if session.read_only else ""))
    try:
        return _loop(session, channel_in)
    finally:
        if session.watch is not None:
            session.watch.close()
        sys.stdout = saved
        os.close(channel_in)
        os.close(channel_out)


def _loop(session: Session, channel_in: int) -> int:
    from console.signals import Stopped

    framer = wire.Framer(wire.MAX_REQUEST_BYTES)
    try:
        while not session.stop and not session.channel.closed:
            timeout = None
            if session.watch is not None:
                timeout = max(0.0, session.watch.due - time.monotonic())
            ready, _, _ = select.select([channel_in], [], [], timeout)
            ended = False
            if ready:
                data = os.read(channel_in, 64 * 1024)
                if data:
                    framer.feed(data)
                else:
                    framer.end()
                    ended = True
                for item in framer.lines():
                    session.handle(item)
                    if session.stop or session.channel.closed:
                        break
            if ended:
                break
            if session.watch is not None and not session.stop and time.monotonic() >= session.watch.due:
                session.watch.tick()
    except (KeyboardInterrupt, Stopped) as exc:
        log(f"stopped by {getattr(exc, 'name', 'an interrupt')}")
        return 0
    log("session ended")
    return 0


__all__ = ["Channel", "Session", "capabilities", "log", "serve"]
