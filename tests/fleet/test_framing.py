"""console/fleet/protocol.py `Framer`: the server's framing, however the bytes arrive, and the cap on
what a reply may be (console/cli/server.py `Channel`)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.fleet import protocol as wire

CAP = 32


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.binary(max_size=50).map(lambda b: b.replace(b"\n", b"")), max_size=8),
       cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=10), last_newline=st.booleans())
def test_lines_come_out_whole_however_the_bytes_are_cut(lines, cuts, last_newline):
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    framer = wire.Framer(CAP)
    out: list = []
    at = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        framer.feed(data[at:max(at, cut)])
        at = max(at, cut)
        out += framer.lines()
    framer.end()
    out += framer.lines()
    expected = lines if (last_newline or not lines or lines[-1]) else lines[:-1]
    assert len(out) == len(expected)
    for got, line in zip(out, expected):
        if len(line) > CAP:
            assert isinstance(got, wire.MessageTooLarge)
        else:
            assert got == line


def test_an_over_cap_line_is_never_held_in_memory():
    framer = wire.Framer(CAP)
    for _ in range(1000):
        framer.feed(b"x" * 1000)
    assert len(framer._buffer) == 0  # noqa: SLF001 - the bound is the point of the test
    framer.feed(b"\nok\n")
    first, second = framer.lines()
    assert isinstance(first, wire.MessageTooLarge) and second == b"ok"


def test_a_reply_over_the_cap_is_sent_as_too_large():
    from console.cli.server import Channel

    read_end, write_end = os.pipe()
    try:
        channel = Channel(write_end)
        channel.send(wire.result(7, {"rows": "x" * (wire.MAX_RESPONSE_BYTES + 1)}))
        line = os.read(read_end, 65536)
    finally:
        os.close(read_end)
        os.close(write_end)
    answer = json.loads(line)
    assert answer["id"] == 7 and answer["error"]["code"] == wire.TOO_LARGE
