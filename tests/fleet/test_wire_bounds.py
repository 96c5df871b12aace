"""Every bound of the wire holds before the work, not after: the server keeps at most
console/fleet/protocol.py `MAX_OUTPUT_BYTES` of a command's output while it runs, and an answer over
the cap still says that the command ran and how it ended, so a write that committed is never
reported as refused or as not sent (console/cli/server_methods.py `BoundedCapture`,
console/cli/server.py `Channel`, console/fleet/client.py `answer_outcome`)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from console.cli import server_methods
from console.cli.server import Channel
from console.fleet import protocol as wire
from console.fleet.client import call_hosts

from .conftest import peer


def test_the_capture_stops_accumulating_past_the_cap():
    capture = server_methods.BoundedCapture(cap=10_000)
    for _ in range(2_000):
        capture.write("x" * 1_000)
    assert capture.overflowed and capture.size == 2_000_000
    assert len(capture.getvalue()) <= 10_000


def _context(db):
    from console.cli.cli import Context
    from console.clock import system_clock

    return lambda args: Context(db_path=db, actor="dave", read_only=False, json=True, busy_timeout_ms=2000,
                                clock=system_clock, args=args)


def test_a_write_whose_output_is_over_the_cap_still_answers_its_exit(db, monkeypatch):
    """`approvals expire` commits, then prints more than the cap: the result is its exit code and
    the marker that the output was cut, never an answer that says nothing ran."""
    monkeypatch.setattr(server_methods, "MAX_OUTPUT_BYTES", 40)
    outcome = server_methods.run(["approvals", "expire", "--json"], _context(db))
    answer = outcome.to_json()
    assert answer["exit"] == 0 and answer["output"] is None, answer
    assert wire.cut_size(answer) > 40
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM approval_requests WHERE id = 'apr-7'").fetchone()[0] == "expired"


def test_an_over_cap_result_is_sent_as_its_exit_with_the_cut_marker():
    """Whatever the capture let through, a result the wire cannot carry keeps its exit code."""
    read, write = os.pipe()
    try:
        Channel(write).send(wire.result(7, {"exit": 0, "output": ["x" * (wire.MAX_RESPONSE_BYTES // 4)] * 5}))
        Channel(write).send(wire.notification("approvals.changed", {"change": "x" * wire.MAX_RESPONSE_BYTES}))
        os.close(write)
        write = -1
        chunks = []
        while chunk := os.read(read, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    first, second = (json.loads(line) for line in b"".join(chunks).splitlines())
    assert first["id"] == 7 and first["result"]["exit"] == 0 and first["result"]["output"] is None
    assert wire.cut_size(first["result"]) > wire.MAX_RESPONSE_BYTES
    assert second["error"]["code"] == wire.TOO_LARGE  # not a command's result: nothing ran


@pytest.mark.parametrize("reply, state", [
    ({"result": wire.cut_result(0, 30_000_000)}, "outcome_unknown"),
    ({"error": {"code": wire.TOO_LARGE, "message": "The answer was not sent"}}, "outcome_unknown"),
    ({"error": {"code": wire.INTERNAL_ERROR, "message": "failed unexpectedly"}}, "outcome_unknown"),
    ({"error": {"code": wire.READ_ONLY, "message": "read-only"}}, "remote_error"),
])
def test_a_write_answered_over_the_cap_is_never_refused(write_hosts, tmp_path, reply, state):
    script = tmp_path / "script.json"
    hello = {"jsonrpc": "2.0", "id": "{id}", "result": {"protocol": 1, "instance_id": "i-1"}}
    method = {"jsonrpc": "2.0", "id": "{id}", **reply}
    script.write_text(json.dumps({"hello": [json.dumps(hello).replace('"{id}"', "{id}")],
                                  "method": [json.dumps(method).replace('"{id}"', "{id}")]}))
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--replay", str(script))}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.expire", {}, deadline=10, cache=False)
    assert outcome.state == state, outcome
    if reply.get("result"):
        assert "done on eu1 (exit 0)" in outcome.sentence and "too large" in outcome.sentence
    [read] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=10, cache=False)
    assert read.state == "remote_error", read  # a read's answer is only ever not shown
