"""Fixtures of the fleet tests: real OpenSSH servers on loopback (tests/fleet/sshd.py)."""

from __future__ import annotations

import pytest

from tests.fleet.sshd import SshdLab, Unavailable, find_sshd


@pytest.fixture(scope="session")
def sshd_binary():
    """The provisioned sshd (tests/fleet/provision_sshd.sh), or a skip that says why there is none."""
    try:
        return find_sshd()
    except Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture
def sshd_lab(sshd_binary):
    """An `SshdLab`: `add_host()`/`add_hosts(n)` start real sshd instances; all of them, and every
    process under them, are killed when the test ends, passed or failed."""
    lab = SshdLab(sshd_binary)
    try:
        yield lab
    finally:
        lab.close()
