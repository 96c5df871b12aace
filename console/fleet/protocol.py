"""The wire between the fleet client and `archon-console serve --stdio` on a host.

Newline-delimited JSON-RPC 2.0 (the MCP stdio framing): one JSON object per line on stdin and
stdout, nothing else on stdout, logs on stderr. Both ends import this module, so the framing, the
size caps, the error codes and the method table are one thing.

A method is a console command run on the host through the same parser and handler as the CLI
(`METHODS` maps it to its argv words), so every read and write there is the local code path, with
the host's own database, identity and read-only policy. Parameters are the command's option
destinations (`{"status": "pending", "limit": 50}`); only those listed in `METHODS` are accepted,
so a client cannot reach an option that touches the host's files (`doctor PATH`, `--bundle`,
`--snapshot-dir`) or a global option the host decides (`--db`, `--as`, `--read-only`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import IO, Any

from console.text import read_json

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 256 * 1024  # a request is a method and a few options
# A page of requests, an audit page, a doctor report. Parsing a line is CPU the client pays for each
# host: 16 MiB of nested arrays cost seconds and a gigabyte; 4 MiB is ample for a page (a larger
# answer is cut by the server and said: "ask for fewer rows").
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
OFF_LOOP_BYTES = 256 * 1024  # a line larger than this is parsed off the event loop (console/fleet/session.py)
# What the server keeps of a command's output while it runs (UTF-8 bytes): the capture stops
# accumulating past it, so an answer's memory is bounded before the work, not refused after it. The
# rest of the cap is room for the envelope and for JSON's escapes.
MAX_OUTPUT_BYTES = MAX_RESPONSE_BYTES - 64 * 1024

# JSON-RPC 2.0's own codes, then the server's (-32000 to -32099 are for the implementation).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TOO_LARGE = -32001
IDENTITY_AMBIGUOUS = -32002
READ_ONLY = -32003
NOT_READY = -32004  # a method before `hello`
VERSION_SKEW = -32005  # `hello` asked for another major protocol version
WRONG_DATABASE = -32006  # `hello` named another database than the one the host fixed with `--db`
STREAM_BUSY = -32007  # a method other than `shutdown` on a session that watches (a watch is dedicated)

# Errors the server answers before a command runs: nothing happened on the host. Any other error to a
# write (too_large, internal_error, a code this end does not know) may follow work that committed, so
# the client treats that write's outcome as unknown, never as refused.
BEFORE_RUNNING = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, IDENTITY_AMBIGUOUS,
                            READ_ONLY, NOT_READY, VERSION_SKEW, WRONG_DATABASE, STREAM_BUSY})

ERROR_KINDS = {
    PARSE_ERROR: "parse_error", INVALID_REQUEST: "invalid_request", METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params", INTERNAL_ERROR: "internal_error", TOO_LARGE: "too_large",
    IDENTITY_AMBIGUOUS: "identity_ambiguous", READ_ONLY: "read_only", NOT_READY: "not_ready",
    VERSION_SKEW: "version_skew", WRONG_DATABASE: "wrong_database", STREAM_BUSY: "stream_busy",
}


@dataclass(frozen=True)
class Method:
    """`argv`: the command words; `params`: option destinations a client may set; `fixed`: argv
    the server always adds (`upgrade.plan` is `upgrade --plan`); `writes`: refused in a read-only
    session, and answered `identity_ambiguous` when the host could not resolve who is acting."""

    argv: tuple[str, ...]
    params: frozenset[str]
    writes: bool = False
    fixed: tuple[str, ...] = ()


def _m(argv: str, params: str = "", *, writes: bool = False, fixed: str = "") -> Method:
    return Method(tuple(argv.split()), frozenset(params.split()), writes, tuple(fixed.split()))


METHODS: dict[str, Method] = {
    "approvals.list": _m("approvals list", "status project kind expiring_within search limit"),
    "approvals.show": _m("approvals show", "id as_of"),
    "approvals.approve": _m("approvals approve", "ids reason requester_unknown_ok", writes=True),
    "approvals.deny": _m("approvals deny", "ids reason", writes=True),
    "approvals.revoke": _m("approvals revoke", "ids reason", writes=True),
    "approvals.expire": _m("approvals expire", writes=True),
    "envs.list": _m("envs list", "state project claimed stale limit after stale_after"),
    "envs.show": _m("envs show", "id as_of stale_after"),
    "envs.claim": _m("envs claim", "id op takeover reason confirm_holder stale_after", writes=True),
    "envs.release": _m("envs release", "id takeover reason confirm_holder stale_after", writes=True),
    "envs.complete": _m("envs complete", "id", writes=True),
    "projects.list": _m("projects list"),
    "profiles.list": _m("profiles list", "project"),
    "profiles.show": _m("profiles show", "project revision"),
    "profiles.activate": _m("profiles activate", "project revision reason", writes=True),
    "doctor": _m("doctor", "check full strict"),
    "audit": _m("audit", "since until project audit_actor kind"),  # no --limit: narrow with since/until
    "upgrade.plan": _m("upgrade", "to", fixed="--plan"),
}
# `hello` and `approvals.watch` (a stream of notifications) are the server's own, not commands. A
# session that watches answers only `shutdown` from then on: a client opens another connection for
# its other methods.
SESSION_METHODS = ("hello", "approvals.watch", "shutdown")
# What each of them accepts. `approvals.watch` takes the filters of `approvals watch` (through its
# parser, like a method of `METHODS`: `WATCH`) and `cursor`: the `cursor` value of the last
# `approvals.changed` notification the client handled (opaque; absent: from now on).
SESSION_PARAMS: dict[str, frozenset[str]] = {
    "hello": frozenset({"protocol", "db", "client"}),
    "approvals.watch": frozenset({"project", "kind", "status", "expiring_within", "poll", "cursor"}),
    "shutdown": frozenset(),
}
WATCH = _m("approvals watch", "project kind status expiring_within poll")
WATCH_NOTIFICATION = "approvals.changed"  # params: {"change": <one `approvals watch --json` line>, "cursor": ...}


def cut_result(exit_code: int, size: int) -> dict[str, Any]:
    """A method's result whose output was over the cap: the command ran and ended with `exit_code`;
    its output (`size` bytes) is not sent. An answer is never dropped for its size: a write that
    committed still says so."""
    return {"exit": exit_code, "output": None, "truncated": {"bytes": size, "cap": MAX_OUTPUT_BYTES}}


def cut_size(result: Any) -> int | None:
    """The size of the output a result says was cut (`cut_result`), else None."""
    marker = result.get("truncated") if isinstance(result, dict) else None
    size = marker.get("bytes") if isinstance(marker, dict) else None
    return size if type(size) is int and size >= 0 else (0 if marker is not None else None)


class MessageTooLarge(ValueError):
    """A line over the cap: the peer is refused, the rest of the line is discarded unread. `size`:
    the message's length in bytes, when it is known."""

    def __init__(self, text: str, size: int | None = None):
        super().__init__(text)
        self.size = size


def encode(message: dict[str, Any], *, cap: int) -> bytes:
    """One line: ASCII-only JSON (no raw newline or control byte can end or split it)."""
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"
    if len(data) > cap:
        raise MessageTooLarge(f"a message of {len(data)} bytes is over the {cap}-byte cap", len(data))
    return data


def read_line(stream: IO[bytes], *, cap: int) -> bytes | None:
    """The next line without its newline; None at end of input. Over `cap`, the rest of the line
    is read and dropped in bounded chunks before `MessageTooLarge` is raised, so the next message
    starts clean and memory stays bounded."""
    data = stream.readline(cap + 1)
    if not data:
        return None
    if data.endswith(b"\n"):
        return data[:-1]
    if len(data) <= cap:  # the last line, without a newline
        return data
    while True:
        rest = stream.readline(64 * 1024)
        if not rest or rest.endswith(b"\n"):
            break
    raise MessageTooLarge(f"a message over the {cap}-byte cap was refused")


class Framer:
    """`read_line`'s framing for a reader that cannot block (the server waits on its input with a
    deadline, to poll a watch in between): bytes go in with `feed`, whole lines come out of
    `lines`, each a `bytes` line or a `MessageTooLarge` for a line over `cap` (its bytes are dropped
    as they arrive, so memory stays under `cap` whatever the peer sends)."""

    def __init__(self, cap: int):
        self.cap = cap
        self._buffer = bytearray()
        self._dropping = False
        self._ready: list[bytes | MessageTooLarge] = []

    def feed(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if not self._dropping:
                self._buffer += piece
                if len(self._buffer) > self.cap:
                    self._buffer.clear()
                    self._dropping = True
            if end < 0:
                return
            if self._dropping:
                self._ready.append(MessageTooLarge(f"a message over the {self.cap}-byte cap was refused"))
            else:
                self._ready.append(bytes(self._buffer))
            self._buffer.clear()
            self._dropping = False
            start = end + 1

    def end(self) -> None:
        """End of input: a last line without its newline still counts."""
        if self._dropping:
            self._ready.append(MessageTooLarge(f"a message over the {self.cap}-byte cap was refused"))
        elif self._buffer:
            self._ready.append(bytes(self._buffer))
        self._buffer.clear()
        self._dropping = False

    def lines(self) -> list[bytes | MessageTooLarge]:
        ready, self._ready = self._ready, []
        return ready


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """`1e999` is no token `parse_constant` sees, but it parses to inf: refused like Infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


_WIRE_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)


def read_wire_json(text: str | bytes) -> Any:
    """A JSON value a peer sent (a line, a command's output, a cached answer): the one sanitiser of
    untrusted JSON (console/text.py `read_json`: depth scanned before parsing, never RecursionError)
    with the wire's size cap, NaN and Infinity refused. ValueError for anything else."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")  # strict: a peer's bytes that are not UTF-8 are refused
    return read_json(text, decoder=_WIRE_DECODER, max_chars=MAX_RESPONSE_BYTES)


def decode(line: bytes) -> Any:
    """The JSON value of one line; ValueError for bytes that are not UTF-8 JSON (NaN refused)."""
    return read_wire_json(line)


def request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


def result(id_: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def error(id_: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    body["data"] = {"kind": ERROR_KINDS.get(code, "remote_error"), **(data or {})}
    return {"jsonrpc": "2.0", "id": id_, "error": body}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


__all__ = [
    "BEFORE_RUNNING", "ERROR_KINDS", "Framer", "IDENTITY_AMBIGUOUS", "INTERNAL_ERROR", "INVALID_PARAMS",
    "INVALID_REQUEST", "MAX_OUTPUT_BYTES", "MAX_REQUEST_BYTES", "MAX_RESPONSE_BYTES", "METHODS", "OFF_LOOP_BYTES",
    "METHOD_NOT_FOUND", "MessageTooLarge", "Method", "NOT_READY", "PARSE_ERROR", "PROTOCOL_VERSION",
    "READ_ONLY", "SESSION_METHODS", "SESSION_PARAMS", "STREAM_BUSY", "TOO_LARGE", "VERSION_SKEW", "WATCH",
    "WATCH_NOTIFICATION", "WRONG_DATABASE", "cut_result", "cut_size", "decode", "encode", "error",
    "notification", "read_line", "request", "result",
]
