"""OpenSSH itself, as the fleet client meets it (issue 20, item 8): real sshd on loopback
(tests/fleet/sshd.py), the system `ssh` with the lab's ssh_config.

These pin what the client's classifier (console/fleet/transport.py `classify`) reads: ssh's exit status and its exact stderr for a refused
port, a listener that never speaks, a host that stops answering mid-session, a changed and an unknown
host key, a key the host does not accept. And they pin the host-side mechanisms identity rests on: a
forced command wins over the command asked for, a certificate's Key ID reaches the session through
ExposeAuthInfo. Compared line by line (a CR, which ssh writes when stderr is a terminal, stripped).
"""

from __future__ import annotations

import re
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from console.fleet.transport import classify
from tests.fleet.sshd import USER, alive, leftovers, until

pytestmark = pytest.mark.slow  # each test starts sshd and runs ssh several times (0.3 s to 3 s)


def lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.splitlines() if line.strip()]


def test_ssh_reaches_every_host_with_the_pinned_key(sshd_lab):
    hosts = sshd_lab.add_hosts(3)
    for host in hosts:
        result = sshd_lab.ssh(host.name, "echo", "$SSH_CONNECTION")
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[2] == host.address and result.stdout.split()[3] == str(host.port)
        assert result.stderr == ""
    assert len({h.port for h in hosts}) == 3 and [h.address for h in hosts] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    # Every sshd listens on its loopback address only.
    for host in hosts:
        assert f"Server listening on {host.address} port {host.port}." in host.log
        assert "0.0.0.0" not in host.log and "::" not in host.log


def test_the_remote_path_runs_this_checkouts_console(sshd_lab):
    host = sshd_lab.add_host()
    result = sshd_lab.ssh(host.name, "command -v archon-console; archon-console --version; id -un")
    assert result.returncode == 0, result.stderr
    where, version, user = lines(result.stdout)
    assert Path(where).parent == Path(sys.executable).parent
    assert version.startswith("archon-console ") and user == USER


def test_a_refused_port(sshd_lab):
    alias = sshd_lab.refused()
    address, port = sshd_lab.endpoints[alias]
    result = sshd_lab.ssh(alias, "true")
    assert result.returncode == 255
    assert lines(result.stderr) == [f"ssh: connect to host {address} port {port}: Connection refused"]
    assert classify(result.returncode, result.stderr, alias=alias)[0] == "unreachable"


def test_a_listener_that_never_speaks_ends_at_connect_timeout(sshd_lab):
    alias = sshd_lab.black_hole()
    start = time.monotonic()
    result = sshd_lab.ssh(alias, "true", options=("-o", "ConnectTimeout=1"), timeout=30)
    elapsed = time.monotonic() - start
    assert result.returncode == 255
    address, port = sshd_lab.endpoints[alias]
    # ConnectTimeout covers the banner exchange too, not only the TCP connect.
    assert lines(result.stderr) == ["Connection timed out during banner exchange",
                                    f"Connection to {address} port {port} timed out"], result.stderr
    assert classify(result.returncode, result.stderr, alias=alias)[0] == "timeout"
    assert 0.9 < elapsed < 20, elapsed


def test_a_host_stopped_mid_session_ends_the_client_by_server_alive(sshd_lab):
    host = sshd_lab.add_host()
    client = subprocess.Popen(
        sshd_lab.ssh_command(host.name, "echo ready; cat", options=("-o", "ServerAliveInterval=1",
                                                                    "-o", "ServerAliveCountMax=2")),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline() == "ready\n"
        stopped = host.pause()
        assert len(stopped) >= 3  # the listener, the connection's sshd, the remote shell (and cat)
        start = time.monotonic()
        _, err = client.communicate(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        client.kill()
        client.wait()
    assert client.returncode == 255
    assert lines(err) == [f"Timeout, server {host.address} not responding."], err
    assert classify(client.returncode, err, alias=host.name)[0] == "timeout"
    assert 1.5 < elapsed < 15, elapsed  # Interval x (CountMax + 1), give or take a tick
    host.resume()
    assert sshd_lab.ssh(host.name, "true").returncode == 0


def test_a_changed_host_key_is_refused_naming_the_new_fingerprint(sshd_lab):
    host = sshd_lab.add_host()
    old = host.fingerprint
    pinned = sshd_lab.known_hosts.read_text()
    host.replace_host_key()
    new = host.fingerprint
    assert new != old and new.startswith("SHA256:")
    result = sshd_lab.ssh(host.name, "touch ran")
    assert result.returncode == 255
    assert not (host.home / "ran").exists()
    assert sshd_lab.known_hosts.read_text() == pinned
    kh = sshd_lab.known_hosts
    assert lines(result.stderr) == [
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@",
        "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!",
        "Someone could be eavesdropping on you right now (man-in-the-middle attack)!",
        "It is also possible that a host key has just been changed.",
        "The fingerprint for the ED25519 key sent by the remote host is",
        f"{new}.",
        "Please contact your system administrator.",
        f"Add correct host key in {kh} to get rid of this message.",
        f"Offending ED25519 key in {kh}:1",
        "  remove with:",
        f'  ssh-keygen -f "{kh}" -R "[{host.address}]:{host.port}"',
        f"Host key for [{host.address}]:{host.port} has changed and you have requested strict checking.",
        "Host key verification failed.",
    ], result.stderr
    state, sentence = classify(result.returncode, result.stderr, alias=host.name)
    assert state == "host_key" and new in sentence and f"-R '[{host.address}]:{host.port}'" in sentence


def test_an_unknown_host_is_refused_and_never_added(sshd_lab):
    sshd_lab.add_host()
    stranger = sshd_lab.add_host(pin=False)
    pinned = sshd_lab.known_hosts.read_text()
    result = sshd_lab.ssh(stranger.name, "touch ran")
    assert result.returncode == 255
    assert lines(result.stderr) == [
        f"No ED25519 host key is known for [{stranger.address}]:{stranger.port} and you have requested strict checking.",
        "Host key verification failed."]
    assert classify(result.returncode, result.stderr, alias=stranger.name)[0] == "host_key"
    assert sshd_lab.known_hosts.read_text() == pinned and not (stranger.home / "ran").exists()


def test_a_key_the_host_does_not_know_is_refused(sshd_lab):
    host = sshd_lab.add_host()
    alias = sshd_lab.alias("stranger-key", host.address, host.port, identity=sshd_lab.client_key("nobody"))
    result = sshd_lab.ssh(alias, "true")
    assert result.returncode == 255
    assert lines(result.stderr) == [f"{USER}@{host.address}: Permission denied (publickey)."]
    assert classify(result.returncode, result.stderr, alias=alias)[0] == "auth_failed"


def test_a_forced_command_runs_whatever_the_client_asks(sshd_lab):
    host = sshd_lab.add_host()
    alice = sshd_lab.client_key("alice")
    host.authorize(alice.with_suffix(".pub"),
                   'restrict,command="echo forced; printenv SSH_ORIGINAL_COMMAND; test -n \\"$SSH_USER_AUTH\\""')
    alias = sshd_lab.alias(f"{host.name}-alice", host.address, host.port, identity=alice)
    result = sshd_lab.ssh(alias, "archon-console serve --stdio --actor=mallory; touch ran")
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout) == ["forced", "archon-console serve --stdio --actor=mallory; touch ran"]
    assert not (host.home / "ran").exists()
    # Without a command the forced one runs too, with no SSH_ORIGINAL_COMMAND.
    result = sshd_lab.ssh(alias)
    assert lines(result.stdout) == ["forced"] and result.returncode == 0
    # `restrict` turns off forwarding: a port forward is refused by the host.
    result = sshd_lab.ssh(alias, "true", options=("-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:0:127.0.0.1:9"))
    assert result.returncode == 255


def test_a_certificate_login_names_its_key_id_in_ssh_user_auth(sshd_lab):
    host = sshd_lab.add_host()
    key = sshd_lab.client_key("carol")  # not in authorized_keys: only the certificate can log in
    plain = sshd_lab.alias("carol-plain", host.address, host.port, identity=key)
    assert sshd_lab.ssh(plain, "true").returncode == 255  # before the -cert.pub exists (ssh loads it beside the key)
    cert = sshd_lab.certificate(key, "carol@example.org")
    alias = sshd_lab.alias("carol-cert", host.address, host.port, identity=key, certificate=cert)
    result = sshd_lab.ssh(alias, 'cat "$SSH_USER_AUTH"')
    assert result.returncode == 0, result.stderr
    method, kind, blob = lines(result.stdout)[0].split()
    assert (method, kind) == ("publickey", "ssh-ed25519-cert-v01@openssh.com")
    assert blob == cert.read_text().split()[1]
    exposed = key.parent / "exposed-cert.pub"
    exposed.write_text(f"{kind} {blob}\n")
    described = subprocess.run(["ssh-keygen", "-L", "-f", str(exposed)], capture_output=True, text=True, check=True).stdout
    assert 'Key ID: "carol@example.org"' in described
    assert f"Accepted publickey for {USER}" in host.log and 'ID carol@example.org' in host.log


def test_a_control_master_in_a_private_directory_and_its_exit(sshd_lab):
    host = sshd_lab.add_host()
    control = Path(tempfile.mkdtemp(prefix="cm-", dir=sshd_lab.base))
    assert stat.S_IMODE(control.stat().st_mode) == 0o700
    options = ("-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%C", "-o", "ControlPersist=60")
    # The backgrounded master keeps the stderr it was given: a file, so nothing waits on a pipe.
    with open(control.parent / "master.err", "w") as err:
        first = subprocess.run(sshd_lab.ssh_command(host.name, "true", options=options), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=err, timeout=60)
    assert first.returncode == 0
    sockets = list(control.iterdir())
    assert len(sockets) == 1 and re.fullmatch(r"[0-9a-f]{40}", sockets[0].name) and stat.S_ISSOCK(sockets[0].stat().st_mode)
    check = sshd_lab.ssh(host.name, options=("-O", "check", *options))
    master = int(re.fullmatch(r"Master running \(pid=(\d+)\)", lines(check.stderr)[0]).group(1))
    again = sshd_lab.ssh(host.name, "echo", "$SSH_CONNECTION", options=options)
    assert again.returncode == 0
    assert host.log.count("Accepted publickey") == 1  # the second command rode the master
    done = sshd_lab.ssh(host.name, options=("-O", "exit", *options))
    assert done.returncode == 0 and lines(done.stderr) == ["Exit request sent."]
    until(lambda: not alive(master), 30, "the master gone after -O exit")
    assert list(control.iterdir()) == []


def test_teardown_leaves_no_process_behind(sshd_lab):
    hosts = sshd_lab.add_hosts(2)
    session = subprocess.Popen(sshd_lab.ssh_command(hosts[0].name, "echo ready; cat"), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert session.stdout.readline() == "ready\n"
    hosts[1].pause()
    seen = set().union(*(h.tree() for h in hosts))
    commands = {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] for pid in seen}
    assert b"cat" in commands and len(seen) >= 4  # both listeners, the session's sshd and the remote cat
    assert leftovers(sshd_lab.marker, sshd_lab.base)
    sshd_lab.close()
    session.wait(timeout=30)
    session.stdout.close()
    session.stdin.close()
    assert [pid for pid in seen if alive(pid)] == []
    assert leftovers(sshd_lab.marker, sshd_lab.base) == []
    assert not sshd_lab.base.exists()


def test_a_control_path_of_percent_c_is_shared_by_every_identity_for_one_account(sshd_lab):
    """%C hashes the local host, HostName, Port and User only: an alias with another key for the same
    account rides the first alias's master and acts with its identity. A client that gives aliases
    different identities must tell their control paths apart itself."""
    host = sshd_lab.add_host()
    alice = sshd_lab.client_key("alice")
    host.authorize(alice.with_suffix(".pub"), 'restrict,command="echo forced-alice"')
    sshd_lab.alias("as-alice", host.address, host.port, identity=alice)
    control = Path(tempfile.mkdtemp(prefix="cm-", dir=sshd_lab.base))
    options = ("-o", "ControlMaster=auto", "-o", f"ControlPath={control}/%C", "-o", "ControlPersist=60")
    with open(control.parent / "master.err", "w") as err:
        first = subprocess.run(sshd_lab.ssh_command("as-alice", "echo asked", options=options), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=err, text=True, timeout=60)
    assert first.stdout == "forced-alice\n"
    plain = sshd_lab.ssh(host.name, "echo asked", options=options)
    assert plain.stdout == "forced-alice\n"  # the lab's own key would have run `echo asked`
    assert sshd_lab.ssh(host.name, "echo asked").stdout == "asked\n"  # without the master it does
    sshd_lab.ssh(host.name, options=("-O", "exit", *options))
