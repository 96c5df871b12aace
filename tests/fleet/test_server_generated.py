"""Generated requests over every method the server knows, with generated params and raw bytes: every
line on stdout is one JSON-RPC response or notification, each request gets exactly one answer, and
the server never dies (issue 20: the class "anything but JSON-RPC on the channel")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.fleet import protocol as wire

METHOD_NAMES = sorted(wire.METHODS) + [m for m in wire.SESSION_METHODS if m != "shutdown"] + ["nope", ""]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10 ** 20, max_value=10 ** 20),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
                    st.sampled_from(["apr-1", "apr-3", "apr-live", "p1", "Payments", "all", "pending", "-h", "--help",
                                     "--db=/etc/passwd", "1", "10m", "2026-11-01 09:00", "git_push", "\u202e"]))
VALUES = st.one_of(SCALARS, SCALARS, SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.text(max_size=5), SCALARS, max_size=2))
FOREIGN = ["db", "path", "bundle", "as", "json", "read_only", "busy_timeout", "view", "x"]


@st.composite
def requests(draw):
    method = draw(st.sampled_from(METHOD_NAMES))
    known = sorted(wire.METHODS[method].params) if method in wire.METHODS else \
        sorted(wire.SESSION_PARAMS.get(method, ()))
    params = draw(st.dictionaries(st.sampled_from(known), VALUES, max_size=3)) if known else {}
    if draw(st.integers(0, 4)) == 0:  # now and then a param no method takes (the host's options among them)
        params[draw(st.sampled_from(FOREIGN))] = draw(VALUES)
    message = {"jsonrpc": "2.0", "id": draw(st.integers(min_value=1, max_value=10 ** 6)), "method": method,
               "params": params}
    return message


def _check_finished(server) -> None:
    """End of input ends the session with exit 0; every line it wrote was one JSON-RPC message."""
    assert server.close() == 0, "".join(server.errors)
    for line in server.raw:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0" and ({"result", "error", "method"} & set(message)), message
    assert "Traceback" not in "".join(server.errors)


@pytest.mark.slow
def test_generated_requests_get_one_json_rpc_answer_each(servers, make_db):
    from tests.approvals_helpers import seed

    db = make_db(fill=seed, cached=True)

    def fresh():
        server = servers("--actor", "dave", db=db)
        server.hello()
        return server

    current = [fresh()]
    outcomes: list = []

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def one_request(data):
        server = current[0]
        message = data.draw(requests())
        if data.draw(st.integers(0, 4)):
            raw = json.dumps(message).encode()
        else:
            raw = data.draw(st.binary(max_size=200)).replace(b"\n", b" ")
        server.send_raw(raw + b"\n")
        answer = server.read()
        while "id" not in answer:  # a change the generated approvals.watch streams
            assert answer["method"] == wire.WATCH_NOTIFICATION and {"change", "cursor"} <= set(answer["params"])
            answer = server.read()
        assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer), answer
        if "error" in answer:
            assert answer["error"]["data"]["kind"] in wire.ERROR_KINDS.values()
            outcomes.append(answer["error"]["code"])
        elif message["method"] == "hello":
            assert answer["result"]["protocol"] == wire.PROTOCOL_VERSION
        else:
            assert answer["id"] == message["id"]
            assert set(answer["result"]) == {"exit", "output"} and answer["result"]["exit"] in (0, 1, 2, 3)
            outcomes.append(answer["result"]["exit"])
        assert server.proc.poll() is None, "".join(server.errors)
        if "result" in answer and isinstance(answer["result"]["output"], dict) \
                and answer["result"]["output"].get("watching"):
            _check_finished(server)  # a watching session streams only: go on with a new one
            current[0] = fresh()

    one_request()
    assert {0, 2, wire.INVALID_PARAMS} <= set(outcomes), outcomes  # commands ran, and were refused
    _check_finished(current[0])
