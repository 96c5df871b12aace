"""console/fleet/hosts.py: the hosts file is checked once, every problem is one sentence (exit 2),
and nothing it accepts can reach ssh as an option."""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.errors import UsageError
from console.fleet.hosts import ALIAS, NAME, Fleet, hosts_path, load_fleet, parse_fleet, select
from console.text import is_clean

GOOD = """
[ssh]
command = ["ssh", "-F", "/etc/archon/ssh_config"]

[hosts.eu1]
ssh = "archon-eu1"
db = "/srv/archon/archon.db"
remote = "/opt/archon console/bin/archon-console"
groups = ["prod", "eu"]

[hosts.us1]
ssh = "ops@us1.example"
read_only = true
groups = ["prod"]

[hosts.lab]
ssh = "lab"
"""


def _fleet(tmp_path, text=GOOD) -> Fleet:
    path = tmp_path / "hosts.toml"
    path.write_text(text, encoding="utf-8")
    return load_fleet(path)


def test_a_good_file_loads_in_order_with_defaults(tmp_path):
    fleet = _fleet(tmp_path)
    assert list(fleet.hosts) == ["eu1", "us1", "lab"]
    assert fleet.ssh_command == ("ssh", "-F", "/etc/archon/ssh_config")
    eu1, us1, lab = fleet.hosts.values()
    assert eu1.db == "/srv/archon/archon.db" and eu1.groups == ("prod", "eu") and not eu1.read_only
    assert eu1.remote_words == ("/opt/archon", "console/bin/archon-console")
    assert us1.read_only and us1.db is None
    assert lab.remote == "archon-console" and lab.groups == ()
    assert _fleet(tmp_path, '[hosts.a]\nssh = "a"\n').ssh_command == ("ssh",)


def test_the_path_is_the_variable_else_the_config_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "mine.toml"))
    assert hosts_path() == tmp_path / "mine.toml"
    monkeypatch.delenv("ARCHON_CONSOLE_HOSTS")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert hosts_path() == tmp_path / "cfg" / "archon-console" / "hosts.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hosts_path() == tmp_path / "home" / ".config" / "archon-console" / "hosts.toml"


def _refused(tmp_path, text: str) -> str:
    with pytest.raises(UsageError) as caught:
        _fleet(tmp_path, text)
    message = str(caught.value)
    assert caught.value.exit_code == 2
    assert is_clean(message, allow_newlines=False), message
    return message


BAD = {
    "empty alias": ('[hosts.a]\nssh = ""\n', "is empty"),
    "an option": ('[hosts.a]\nssh = "-oProxyCommand=touch /tmp/x"\n', "option"),
    "a space": ('[hosts.a]\nssh = "a b"\n', "space"),
    "a tab": ('[hosts.a]\nssh = "a\\tb"\n', "control"),
    "a newline": ('[hosts.a]\nssh = "a\\nb"\n', "control"),
    "an escape": ('[hosts.a]\nssh = "a\\u001b[2J"\n', "control"),
    "a bidi override": ('[hosts.a]\nssh = "a\\u202eb"\n', "invisible"),
    "shell syntax": ('[hosts.a]\nssh = "a;touch${IFS}x"\n', "shell syntax"),
    "a subshell": ('[hosts.a]\nssh = "$(id)"\n', "shell syntax"),
    "a backquote": ('[hosts.a]\nssh = "h`id`"\n', "shell syntax"),
    "no alias": ('[hosts.a]\ndb = "/x.db"\n', "no ssh"),
    "not a string": ("[hosts.a]\nssh = 3\n", "must be a string"),
    "relative db": ('[hosts.a]\nssh = "a"\ndb = "archon.db"\n', "absolute"),
    "empty remote": ('[hosts.a]\nssh = "a"\nremote = " "\n', "empty"),
    "unbalanced remote": ('[hosts.a]\nssh = "a"\nremote = "archon \'console"\n', "cannot be split"),
    "remote option": ('[hosts.a]\nssh = "a"\nremote = "-oX"\n', "option"),
    "read_only word": ('[hosts.a]\nssh = "a"\nread_only = "yes"\n', "true or false"),
    "read_only number": ('[hosts.a]\nssh = "a"\nread_only = 1\n', "true or false"),
    "groups string": ('[hosts.a]\nssh = "a"\ngroups = "prod"\n', "list"),
    "bad group": ('[hosts.a]\nssh = "a"\ngroups = ["-prod"]\n', "not a name"),
    "bad host name": ('[hosts."-a"]\nssh = "a"\n', "not a name"),
    "long host name": (f'[hosts.{"a" * 65}]\nssh = "a"\n', "not a name"),
    "host not a table": ('[hosts]\na = "x"\n', "must be a table"),
    "unknown host key": ('[hosts.a]\nssh = "a"\nport = 22\n', "unknown key"),
    "unknown table": ('[host.a]\nssh = "a"\n', "unknown table"),
    "empty command": ("[ssh]\ncommand = []\n", "list of words"),
    "command option": ('[ssh]\ncommand = ["-F", "x"]\n', "program"),
    "command not words": ("[ssh]\ncommand = [1]\n", "string"),
    "unknown ssh key": ('[ssh]\noptions = ["-v"]\n', "unknown key"),
    "not TOML": ("[hosts.a\n", "not valid TOML"),
}


@pytest.mark.parametrize("text, words", BAD.values(), ids=BAD.keys())
def test_every_bad_value_is_one_sentence(tmp_path, text, words):
    message = _refused(tmp_path, text)
    assert words in message and "hosts.toml" in message


def test_an_absent_file_is_one_sentence(tmp_path):
    with pytest.raises(UsageError, match="no hosts file") as caught:
        load_fleet(tmp_path / "none.toml")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("spoil", ["file", "directory"])
def test_a_hosts_file_others_can_change_is_refused(tmp_path, spoil):
    """It names the program the console runs: whoever can change it runs code as the operator."""
    directory = tmp_path / "cfg"
    directory.mkdir()
    path = directory / "hosts.toml"
    path.write_text(GOOD)
    (path if spoil == "file" else directory).chmod(0o777 if spoil == "directory" else 0o666)
    with pytest.raises(UsageError, match="can be changed by other users") as caught:
        load_fleet(path)
    assert caught.value.exit_code == 2 and "chmod go-w" in str(caught.value)
    (directory.chmod(0o1777) if spoil == "directory" else path.chmod(0o644))  # sticky, or fixed: usable
    assert list(load_fleet(path).hosts) == ["eu1", "us1", "lab"]


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_hosts_file_of_another_user_is_refused(tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text(GOOD)
    os.chown(path, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to another user"):
        load_fleet(path)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another group needs root")
def test_group_writable_is_refused_unless_the_group_is_the_owners_alone(tmp_path):
    """Debian's umask 002 leaves files group-writable by the user's private group: accepted, as ssh
    does; a group others are in is refused."""
    path = tmp_path / "hosts.toml"
    path.write_text(GOOD)
    path.chmod(0o664)
    os.chown(path, 0, 0)  # root's private group
    assert list(load_fleet(path).hosts) == ["eu1", "us1", "lab"]
    os.chown(path, 0, 65534)  # nogroup: not root's alone
    with pytest.raises(UsageError, match="can be changed by other users"):
        load_fleet(path)


def test_a_fifo_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "hosts.toml")
    with pytest.raises(UsageError, match="FIFO"):
        load_fleet(tmp_path / "hosts.toml")


# Values TOML can hold, for any key of a host table.
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                      max_leaves=6).filter(lambda v: v is not None)
TEXTS = st.text(max_size=40) | st.sampled_from(["-x", "a b", "a\n", "\x1b[2J", "\u202e", "", " ", "ok", "-", "a'b",
                                                 "op@eu1.example", "fe80::1%eth0", "ssh://op@h:2222", "a;b", "$(id)"])


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(name=TEXTS, table=st.fixed_dictionaries({}, optional={
    "ssh": TEXTS | VALUES, "db": TEXTS | VALUES, "remote": TEXTS | VALUES, "read_only": VALUES,
    "groups": st.lists(TEXTS, max_size=3) | VALUES, "extra": VALUES}), command=st.none() | st.lists(TEXTS, max_size=3))
def test_any_hosts_file_loads_safely_or_is_one_sentence(name, table, command):
    data = {"hosts": {name: table}}
    if command is not None:
        data["ssh"] = {"command": command}
    try:
        fleet = parse_fleet(data, "/home/op/.config/archon-console/hosts.toml")
    except UsageError as exc:
        assert exc.exit_code == 2 and is_clean(str(exc), allow_newlines=False)
        assert str(exc).startswith("Cannot use the hosts file")
        return
    host = fleet.hosts[name]
    assert NAME.fullmatch(host.name) and all(NAME.fullmatch(g) for g in host.groups)
    assert host.ssh and not host.ssh.startswith("-") and ALIAS.fullmatch(host.ssh)
    assert is_clean(host.ssh, allow_newlines=False) and is_clean(host.remote, allow_newlines=False)
    assert host.remote_words and not host.remote_words[0].startswith("-")
    assert host.db is None or host.db.startswith("/")
    assert isinstance(host.read_only, bool) and fleet.ssh_command and not fleet.ssh_command[0].startswith("-")


@given(st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=70))
def test_a_name_is_a_name_or_refused(name):
    try:
        fleet = parse_fleet({"hosts": {name: {"ssh": "a"}}}, "hosts.toml")
    except UsageError:
        assert not (name[0].isalnum() and len(name) <= 64)
        return
    assert list(fleet.hosts) == [name]


# ------------------------------------------------------------------ select
def test_select_by_name_group_and_all_in_file_order(tmp_path):
    fleet = _fleet(tmp_path)
    names = lambda hosts: [h.name for h in hosts]  # noqa: E731
    assert names(select(fleet, ["lab", "eu1"], [], False)) == ["eu1", "lab"]
    assert names(select(fleet, [], ["prod"], False)) == ["eu1", "us1"]
    assert names(select(fleet, ["eu1"], ["eu"], False)) == ["eu1"]
    assert names(select(fleet, [], [], True)) == ["eu1", "us1", "lab"]


def test_an_unknown_name_names_the_candidates(tmp_path):
    fleet = _fleet(tmp_path)
    with pytest.raises(UsageError) as caught:
        select(fleet, ["eu2"], [], False)
    assert "eu2" in str(caught.value) and "Did you mean eu1" in str(caught.value) and caught.value.exit_code == 2
    with pytest.raises(UsageError, match="Did you mean prod"):
        select(fleet, [], ["prd"], False)
    with pytest.raises(UsageError, match="The hosts are: eu1, us1, lab"):
        select(fleet, ["zzzzzz"], [], False)
    with pytest.raises(UsageError, match="No host is selected"):
        select(fleet, [], [], False)
    with pytest.raises(UsageError, match="names none"):
        select(_fleet(tmp_path, "[hosts]\n"), [], [], True)


@given(st.text(max_size=80))
def test_select_refuses_any_unknown_name_in_one_sentence(name):
    fleet = parse_fleet({"hosts": {"eu1": {"ssh": "a"}}}, "hosts.toml")
    if name == "eu1":
        return
    with pytest.raises(UsageError) as caught:
        select(fleet, [name], [], False)
    assert is_clean(str(caught.value), allow_newlines=False)
