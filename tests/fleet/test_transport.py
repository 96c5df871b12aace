"""console/fleet/transport.py and private.py: the ssh command line, the private control directory,
and what ssh's failures mean, with the real OpenSSH client against loopback where it needs no sshd."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import stat
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.fleet.client import call_hosts
from console.fleet.hosts import Fleet, Host, parse_fleet
from console.fleet.private import PrivateDirUnusable, private_dir
from console.fleet.transport import STATES, classify, close_masters, control_dir, entry_tag, exit_argv, ssh_argv
from console.text import is_clean

WEAKENING = ("StrictHostKeyChecking", "UserKnownHostsFile", "GlobalKnownHostsFile", "CheckHostIP",
             "VerifyHostKeyDNS", "UpdateHostKeys", "KnownHostsCommand", "HostKeyAlias", "NoHostAuthenticationForLocalhost")
FINGERPRINT = "SHA256:" + "A" * 22 + "b+/" + "9" * 18


def _fleet(**host) -> tuple[Fleet, Host]:
    fleet = parse_fleet({"ssh": {"command": ["ssh", "-F", "/etc/x"]}, "hosts": {"eu1": {"ssh": "eu1", **host}}},
                        "hosts.toml")
    return fleet, fleet.hosts["eu1"]


def _options(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")]


REMOTE = st.lists(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn")), min_size=1,
                          max_size=12), min_size=1, max_size=4).filter(
    lambda ws: not ws[0].startswith("-") and all(is_clean(w, allow_newlines=False) for w in ws))


@given(remote=REMOTE, alias=st.sampled_from(["eu1", "ops@eu1.example", "a--b", "fe80::1%eth0", "ssh://op@h:22"]),
       read_only=st.booleans())
def test_the_alias_follows_dashdash_and_every_remote_word_is_quoted(remote, alias, read_only):
    fleet, host = _fleet(ssh=alias, remote=shlex.join(remote), read_only=read_only, db="/srv/a b;c.db")
    argv = ssh_argv(fleet, host, sockets=None)
    cut = argv.index("--")
    assert argv[cut + 1] == alias and argv[:3] == ["ssh", "-F", "/etc/x"]
    # ssh joins the words with spaces for the remote shell, which must read back exactly these words
    expected = [*host.remote_words, "serve", "--stdio"] + (["--read-only"] if read_only else [])
    assert shlex.split(" ".join(argv[cut + 2:])) == expected
    assert not any("/srv/a b;c.db" in word for word in argv)  # the database travels in hello
    options = " ".join(_options(argv))
    assert "BatchMode=yes" in options and "-T" in _options(argv)
    assert not any(word in options for word in WEAKENING)


def test_the_options_bound_the_connection_and_share_it_under_the_private_directory(private_env):
    fleet, host = _fleet()
    sockets = control_dir()
    options = _options(ssh_argv(fleet, host, connect_timeout=7, sockets=sockets))
    for wanted in ("ConnectTimeout=7", "ServerAliveInterval=", "ServerAliveCountMax=", "ControlMaster=auto",
                   f"ControlPath={sockets}/{entry_tag(fleet, host)}-%C", "ControlPersist="):
        assert any(o.startswith(wanted) for o in options), wanted
    exit = exit_argv(fleet, host, sockets)
    assert exit[-3:] == ["exit", "--", "eu1"] and f"ControlPath={sockets}/{entry_tag(fleet, host)}-%C" in exit


def test_two_entries_for_one_account_never_share_a_connection(private_env):
    """ssh's %C is the same for two aliases of one user@host:port, whatever key each logs in with:
    the entry's own tag keeps their masters apart (so one never acts with the other's identity)."""
    fleet = parse_fleet({"hosts": {"as-alice": {"ssh": "alias-with-alices-key"}, "as-login": {"ssh": "h"},
                                   "again": {"ssh": "h"}}}, "hosts.toml")
    sockets = control_dir()
    paths = {name: [o for o in ssh_argv(fleet, host, sockets=sockets) if o.startswith("ControlPath=")][0]
             for name, host in fleet.hosts.items()}
    assert len(set(paths.values())) == 3
    other = parse_fleet({"ssh": {"command": ["ssh", "-F", "/other"]}, "hosts": {"again": {"ssh": "h"}}}, "hosts.toml")
    assert entry_tag(other, other.hosts["again"]) != entry_tag(fleet, fleet.hosts["again"])


@pytest.mark.parametrize("directory", ["/tmp/" + "x" * 80, "/tmp/a b", "/tmp/100%", None])
def test_no_sharing_where_the_directory_cannot_hold_a_socket(directory):
    from pathlib import Path

    fleet, host = _fleet()
    options = _options(ssh_argv(fleet, host, sockets=Path(directory) if directory else None))
    assert "ControlMaster=no" in options and "ControlPath=none" in options
    assert not any(o.startswith("ControlPersist") for o in options)


# ------------------------------------------------------------------ the private directory
def test_the_control_directory_is_created_private(private_env):
    path = control_dir()
    assert path.parent == private_env / "run"
    info = path.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()


def test_without_a_runtime_directory_it_is_under_the_cache(private_env, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert control_dir() == private_env / "cache" / "archon-console" / "ssh"


@pytest.mark.parametrize("spoil", ["mode", "symlink", "file", "parent"])
def test_a_directory_others_could_use_is_refused(private_env, spoil):
    target = private_env / "run" / "archon-console-ssh"
    if spoil == "mode":
        target.mkdir(mode=0o700)
        target.chmod(0o770)
    elif spoil == "symlink":
        (private_env / "theirs").mkdir(mode=0o700)
        target.symlink_to(private_env / "theirs")
    elif spoil == "file":
        target.write_text("")
    else:
        (private_env / "run").chmod(0o777)
    with pytest.raises(PrivateDirUnusable) as caught:
        control_dir()
    assert caught.value.exit_code == 3 and is_clean(str(caught.value), allow_newlines=False)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_of_another_user_is_refused(private_env):
    target = private_env / "run" / "archon-console-ssh"
    target.mkdir(mode=0o700)
    os.chown(target, 65534, 65534)
    with pytest.raises(PrivateDirUnusable, match="another user"):
        private_dir(target)


def test_call_hosts_refuses_a_control_directory_that_is_not_private(write_hosts, private_env):
    fleet = write_hosts({"eu1": {"ssh": "eu1"}})
    (private_env / "run" / "archon-console-ssh").mkdir(mode=0o755)
    (private_env / "run" / "archon-console-ssh").chmod(0o755)
    with pytest.raises(PrivateDirUnusable, match="chmod 700"):
        call_hosts(fleet, list(fleet.hosts.values()), "doctor", {})


def test_close_masters_is_bounded_and_quiet(write_hosts, private_env):
    fleet = write_hosts({"a": {"ssh": "a"}, "b": {"ssh": "b"}})
    (control_dir() / "stray").write_text("")  # something there, so the exits run (through the fake ssh)
    started = time.monotonic()
    close_masters(fleet, fleet.hosts.values(), timeout=10)
    assert time.monotonic() - started < 10 + 5


# ------------------------------------------------------------------ classify
STDERR = {
    "unreachable": ["ssh: connect to host 127.0.0.2 port 1: Connection refused\r\n",
                    "ssh: Could not resolve hostname nowhere: Name or service not known\n",
                    "ssh: connect to host 10.0.0.1 port 22: No route to host\n"],
    "timeout": ["ssh: connect to host 10.0.0.1 port 22: Connection timed out\n",
                "Connection timed out during banner exchange\nConnection to 127.0.0.3 port 2 timed out\n"],
    "auth_failed": ["op@eu1: Permission denied (publickey).\n"],
    "host_key": ["@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@\nThe fingerprint for the "
                 f"ED25519 key sent by the remote host is\n{FINGERPRINT}.\nHost key verification failed.\n",
                 "No ED25519 host key is known for [127.0.0.2]:2222 and you have requested strict checking.\n"
                 "Host key verification failed.\n"],
    "no_server": ["bash: line 1: archon-console: command not found\n"],
    "version_skew": ["usage: archon-console ...\narchon-console: error: argument command: invalid choice: 'serve' "
                     "(choose from 'approvals', 'envs')\n"],
}


@pytest.mark.parametrize("state, stderr", [(s, e) for s, errs in STDERR.items() for e in errs])
def test_each_failure_is_its_state(state, stderr):
    code = {"no_server": 127, "version_skew": 2}.get(state, 255)
    got, sentence = classify(code, stderr, alias="eu1.example", name="eu1")
    assert got == state and is_clean(sentence, allow_newlines=False) and "eu1" in sentence


def test_a_changed_host_key_names_the_fingerprint_and_the_remedy():
    _, sentence = classify(255, STDERR["host_key"][0], alias="archon-eu1", name="eu1")
    assert FINGERPRINT in sentence and "ssh-keygen -R archon-eu1" in sentence and "out of band" in sentence
    _, unknown = classify(255, STDERR["host_key"][1], alias="archon-eu1", name="eu1")
    assert "not known" in unknown and "out of band" in unknown


def test_a_changed_host_key_names_the_pinned_entry_ssh_named():
    """ssh pinned the key under [HostName]:Port in the file it names; `-R ALIAS` would remove nothing."""
    stderr = (STDERR["host_key"][0] + "Offending ED25519 key in /home/op/.ssh/known_hosts:3\n  remove with:\n"
              '  ssh-keygen -f "/home/op/.ssh/known_hosts" -R "[127.0.0.2]:2222"\n')
    _, sentence = classify(255, stderr, alias="archon-eu1", name="eu1")
    assert "ssh-keygen -f /home/op/.ssh/known_hosts -R '[127.0.0.2]:2222'" in sentence, sentence
    hostile = stderr.replace("/home/op/.ssh/known_hosts\"", "/x\u202e; rm -rf ~\"")
    _, sentence = classify(255, hostile, alias="archon-eu1", name="eu1")  # not clean: not quoted back
    assert is_clean(sentence, allow_newlines=False) and "ssh-keygen -R archon-eu1" in sentence
    shell = stderr.replace("/home/op/.ssh/known_hosts\"", "/x; rm -rf ~\"")
    _, sentence = classify(255, shell, alias="archon-eu1", name="eu1")  # one quoted word, never a command
    assert "ssh-keygen -f '/x; rm -rf ~' -R" in sentence


def test_exit_127_is_no_server_whatever_it_said():
    state, sentence = classify(127, "", alias="eu1", remote="/opt/ac/bin/archon-console")
    assert state == "no_server" and "pipx install . in a clone of archon-console" in sentence and "/opt/ac/bin" in sentence


@pytest.mark.parametrize("code, stderr, state", [
    (126, "bash: line 1: /opt/archon-console: Permission denied\n", "no_server"),
    (1, "op@eu1: Permission denied (publickey).\n", "remote_error"),
    (1, "ssh: connect to host 10.0.0.1 port 22: Connection refused\n", "remote_error"),
    (3, "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! SHA256:" + "A" * 43 + "\n", "remote_error"),
])
def test_the_remote_commands_words_never_decide_an_ssh_state(code, stderr, state):
    assert classify(code, stderr, alias="eu1")[0] == state


def test_a_server_that_cannot_find_its_database_is_not_a_missing_console():
    state, _ = classify(3, "archon-console: /srv/a.db: No such file or directory; it was not found\n", alias="eu1")
    assert state == "remote_error"


@settings(max_examples=200)
@given(code=st.none() | st.integers(-300, 300), stderr=st.text(max_size=300) | st.sampled_from(
    ["\x1b]52;c;ZXZpbA==\x07Permission denied\n\x1b[2J", "Connection refused\u202e\n" * 50, "\n\n\n"]))
def test_any_stderr_is_one_clean_sentence_in_a_known_state(code, stderr):
    state, sentence = classify(code, stderr, alias="eu1")
    assert state in STATES and is_clean(sentence, allow_newlines=False) and len(sentence) < 600


# ------------------------------------------------------------------ the real ssh, loopback only
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client on this machine")


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _real(write_hosts, address: str, port: int, *extra: str) -> Fleet:
    command = ["ssh", "-F", "/dev/null", "-p", str(port), *extra]
    return write_hosts({"lo": {"ssh": address}}, command=command)


@needs_ssh
@pytest.mark.slow
def test_real_ssh_to_a_port_nobody_listens_on_is_unreachable(write_hosts):
    fleet = _real(write_hosts, "127.0.0.2", _free_port("127.0.0.2"))
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, deadline=20, cache=False)
    assert outcome.state == "unreachable" and "Connection refused" in outcome.sentence, outcome


class BlackHole:
    """A listener on loopback that accepts and never speaks; `closed` is set when its peer hangs up."""

    def __init__(self, address: str):
        self.server = socket.create_server((address, 0))
        self.port = self.server.getsockname()[1]
        self.accepted = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.server.settimeout(60)
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        self.accepted.set()
        conn.settimeout(60)
        try:
            while conn.recv(4096):  # ssh's own banner, then nothing until it goes
                pass
        except OSError:
            pass
        self.closed.set()
        conn.close()

    def stop(self):
        self.server.close()


@needs_ssh
@pytest.mark.slow
def test_real_ssh_to_a_black_hole_times_out_in_the_banner_exchange(write_hosts):
    hole = BlackHole("127.0.0.3")
    try:
        fleet = _real(write_hosts, "127.0.0.3", hole.port, "-o", "ConnectTimeout=1")
        [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, deadline=30, cache=False)
        assert outcome.state == "timeout" and "banner" in outcome.sentence, outcome
    finally:
        hole.stop()


@needs_ssh
@pytest.mark.slow
def test_the_console_deadline_stops_real_ssh_at_a_black_hole(write_hosts):
    hole = BlackHole("127.0.0.4")
    try:
        fleet = _real(write_hosts, "127.0.0.4", hole.port)  # ConnectTimeout 10: the deadline comes first
        started = time.monotonic()
        [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, deadline=1.5, cache=False)
        assert outcome.state == "timeout" and "deadline" in outcome.sentence, outcome
        assert time.monotonic() - started < 1.5 + 8
        assert hole.accepted.is_set() and hole.closed.wait(30)  # the ssh was killed: its connection is gone
    finally:
        hole.stop()
