"""Fleet fixtures: `serve --stdio` processes killed after each test; private directories short
enough for ssh's control sockets; hosts files whose hosts are scripted peers (tests/fleet/peer.py)
behind the fake ssh (tests/fleet/fake_ssh.py); real sshd on loopback (tests/fleet/sshd.py)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from console.fleet.hosts import Fleet, load_fleet
from tests.fleet.sshd import SshdLab, Unavailable, find_sshd

HERE = Path(__file__).resolve().parent
PEER = HERE / "peer.py"
FAKE_SSH = HERE / "fake_ssh.py"
FAKE_COMMAND = [sys.executable, str(FAKE_SSH)]


def peer(*args: str) -> str:
    """The `remote` of a host that is tests/fleet/peer.py with `args`."""
    return " ".join(shlex.quote(word) for word in (sys.executable, str(PEER), *args))


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)  # a JSON string or list of strings is a TOML one


@pytest.fixture
def private_env(monkeypatch):
    """XDG_RUNTIME_DIR and XDG_CACHE_HOME in a fresh short directory under /tmp (a socket path
    must fit in 108 bytes, and pytest's tmp_path can be longer)."""
    base = Path(tempfile.mkdtemp(prefix="acf-", dir="/tmp"))
    (base / "run").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "run"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "cache"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def write_hosts(tmp_path, private_env):
    """write_hosts({"eu1": {"ssh": "a", "remote": peer()}}, command=[...]) -> the loaded Fleet."""
    def write(hosts: dict[str, dict], command: list[str] | None = None, name: str = "hosts.toml") -> Fleet:
        lines = [f"[ssh]\ncommand = {toml_value(command or FAKE_COMMAND)}\n"]
        for host, table in hosts.items():
            lines.append(f"[hosts.{host}]")
            lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
            lines.append("")
        path = tmp_path / name
        path.write_text("\n".join(lines), encoding="utf-8")
        return load_fleet(path)

    return write


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


@pytest.fixture
def fleet_lab(sshd_lab, monkeypatch):
    """`sshd_lab` with the client's private directories (XDG_RUNTIME_DIR, XDG_CACHE_HOME) inside the
    lab, so its ControlPersist masters are the lab's to kill (`SshdLab.close` finds them by the lab's
    path on their command line); no ARCHON_CONSOLE_HOSTS of the user's."""
    run = sshd_lab.base / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sshd_lab.base / "cache"))
    monkeypatch.delenv("ARCHON_CONSOLE_HOSTS", raising=False)
    return sshd_lab


@pytest.fixture
def hosts(write_hosts, tmp_path, monkeypatch):
    """hosts({...}): write_hosts, and $ARCHON_CONSOLE_HOSTS naming the file, for the CLI's main()."""
    def write(table):
        fleet = write_hosts(table)
        monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "hosts.toml"))
        return fleet
    return write
