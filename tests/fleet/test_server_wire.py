"""The wire of `archon-console serve --stdio` under hostile input: every line the server writes is a
JSON-RPC message, whatever it is sent, and it keeps serving (issue 20)."""

from __future__ import annotations

import json
import signal

import pytest

from console.fleet import protocol as wire
from tests.fleet.serve_helpers import WAIT


@pytest.fixture
def server(servers, db):
    server = servers("--actor", "dave", db=db)
    server.hello()
    return server


def test_a_line_over_the_cap_is_too_large_and_the_next_request_answers(server):
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"approvals.list","params":{"search":"' + b"x" * (1024 * 1024 + 7)
                    + b'"}}\n')
    answer = server.read()
    assert answer["error"]["code"] == wire.TOO_LARGE and answer["id"] is None
    assert server.call("approvals.list", limit=1)["exit"] == 0


def test_an_over_cap_line_without_newline_at_the_end_is_too_large(servers, db):
    server = servers("--actor", "dave", db=db)
    server.send_raw(b"y" * (wire.MAX_REQUEST_BYTES + 1))
    server.proc.stdin.close()
    assert server.read()["error"]["code"] == wire.TOO_LARGE
    assert server.proc.wait(timeout=WAIT) == 0


@pytest.mark.parametrize("line, code", [
    (b"garbage", wire.PARSE_ERROR),
    (b"\xff\xfe{}", wire.PARSE_ERROR),
    (b'{"jsonrpc":"2.0","id":1,"method":"approvals.list","params":{"limit":NaN}}', wire.PARSE_ERROR),
    (b"[" * 100000, wire.PARSE_ERROR),
    (b'[{"jsonrpc":"2.0","id":1,"method":"approvals.list"}]', wire.INVALID_REQUEST),
    (b"[]", wire.INVALID_REQUEST),
    (b'"a string"', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"1.0","id":1,"method":"approvals.list"}', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"approvals.list"}', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":true,"method":"approvals.list"}', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"approvals.list","result":1}', wire.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"rm -rf"}', wire.METHOD_NOT_FOUND),
    (b'{"jsonrpc":"2.0","id":1,"method":"approvals.list","params":[1]}', wire.INVALID_PARAMS),
])
def test_malformed_input_is_answered_and_the_server_goes_on(server, line, code):
    server.send_raw(line + b"\n")
    answer = server.read()
    assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, answer
    assert answer["error"]["data"]["kind"] == wire.ERROR_KINDS[code]
    assert server.call("approvals.list", limit=1)["exit"] == 0


@pytest.mark.parametrize("method, params", [
    ("approvals.list", {"db": "/etc/passwd"}),
    ("doctor", {"path": "/etc/passwd"}),
    ("doctor", {"bundle": "/tmp/x.zip"}),
    ("approvals.approve", {"ids": ["apr-1"], "actor": "mallory"}),
    ("approvals.list", {"read_only": False}),
    ("approvals.list", {"busy_timeout": 1}),
    ("upgrade.plan", {"snapshot_dir": "/tmp"}),
    ("approvals.list", {"view": "mine"}),
])
def test_a_param_that_is_not_the_methods_is_refused_with_the_allowed_ones(server, db, method, params):
    answer = server.request(method, params)
    assert answer["error"]["code"] == wire.INVALID_PARAMS, answer
    allowed = sorted(wire.METHODS[method].params)
    assert all(name in answer["error"]["message"] for name in allowed)


@pytest.mark.parametrize("params", [
    {"status": {"a": 1}}, {"limit": True}, {"search": "a\u0000b"}, {"search": "\ud800"}, {"limit": [1, 2]},
])
def test_a_value_no_command_line_can_hold_is_invalid_params(server, params):
    line = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "approvals.list", "params": params})
    server.send_raw(line.encode() + b"\n")
    answer = server.read()
    assert answer["id"] == 9 and answer["error"]["code"] == wire.INVALID_PARAMS, answer


def test_a_value_that_looks_like_an_option_stays_a_value(server, db):
    """`ids: ["--db=/elsewhere"]` is an id after `--`, never an option; `search: "--db"` is a value."""
    result = server.call("approvals.approve", ids=["--db=/nonexistent.db"])
    assert result["exit"] == 1 and "--db=/nonexistent.db" in result["output"][0]["message"]
    assert server.call("approvals.list", search="--db=/nonexistent.db")["output"] == []


def test_a_notification_is_never_answered_and_shutdown_ends_the_session(servers, db):
    server = servers("--actor", "dave", db=db)
    server.send({"jsonrpc": "2.0", "method": "hello", "params": {"protocol": 1}})
    server.send({"jsonrpc": "2.0", "method": "shutdown"})
    assert server.proc.wait(timeout=WAIT) == 0
    assert server.raw == []


def test_shutdown_answers_then_ends(server):
    assert server.request("shutdown")["result"] == {"ok": True}
    assert server.proc.wait(timeout=WAIT) == 0


def test_end_of_input_ends_the_session_with_exit_0(server):
    assert server.close() == 0
    assert "Traceback" not in "".join(server.errors)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_the_session_cleanly(server, sig):
    server.proc.send_signal(sig)
    assert server.proc.wait(timeout=WAIT) == 0
    assert "Traceback" not in "".join(server.errors)
    for line in server.raw:
        json.loads(line)


def test_nothing_a_command_prints_elsewhere_reaches_the_channel(server, db):
    """A --help text, a saved-view note, stderr: never on stdout; every stdout line is one message."""
    server.call("approvals.list", status="all", limit=500)
    server.call("doctor")
    server.call("upgrade.plan")
    server.call("audit", since="30d")
    server.close()
    for line in server.raw:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0" and ("result" in message or "error" in message)
