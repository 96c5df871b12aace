"""Fixtures of the fleet tests: `serve --stdio` processes, killed after each test."""

from __future__ import annotations

import pytest


@pytest.fixture
def servers(tmp_path):
    """start(*args, db=None, env=None, policy=None) -> tests/fleet/serve_helpers.py `Server`."""
    from tests.fleet.serve_helpers import Server

    started: list = []

    def start(*args, **kwargs):
        kwargs.setdefault("tmp", tmp_path)
        server = Server(*args, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
