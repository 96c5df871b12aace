"""A signal always ends the server promptly: SIGTERM and SIGHUP end `serve --stdio` even while it
writes an answer to a client that stopped reading (console/cli/server.py `Channel.send` waits for
room with the signals deliverable, and holds them only over a chunk that fits)."""

from __future__ import annotations

import fcntl
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.approvals_helpers import add_request, seed

from .serve_helpers import server_env


def _queued(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _fill(conn):
    seed(conn)
    for i in range(300):  # an answer of about 300 KB: more than a pipe holds
        add_request(conn, f"big-{i}", "p1", action={"b": "x" * 500})


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_ends_the_server_while_a_client_does_not_read(make_db, tmp_path, signum):
    db = make_db(fill=_fill, cached=True, name="big.db")
    (tmp_path / "none.toml").write_text("")  # no rules (a named policy must exist)
    proc = subprocess.Popen([sys.executable, "-m", "console", "serve", "--stdio", "--actor", "dave", "--db", str(db),
                             "--policy", str(tmp_path / "none.toml")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=server_env())
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":1}}\n'
                         b'{"jsonrpc":"2.0","id":2,"method":"approvals.list","params":{"limit":100000}}\n')
        proc.stdin.flush()
        end = time.monotonic() + 60
        full = fcntl.fcntl(proc.stdout.fileno(), 1032) - 4096  # F_GETPIPE_SZ, less the page a write may leave
        while _queued(proc.stdout.fileno()) < full and proc.poll() is None:  # the pipe is full: it waits
            assert time.monotonic() < end, "the server never filled the pipe"
            time.sleep(0.05)
        proc.send_signal(signum)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
