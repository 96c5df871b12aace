"""The fleet options of the command line (console/cli/parser.py, console/cli/fleet.py): gathered
wherever they are written, and every command or option that cannot run over hosts refused with one
sentence and exit 2 before any host is contacted (no hosts file is even read: none exists here)."""

from __future__ import annotations

import json

import pytest

from console.cli.cli import main
from console.cli.fleet import FORMS, method_for, params_for
from console.cli.parser import build_parser


@pytest.fixture(autouse=True)
def _no_hosts_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "absent-hosts.toml"))


def _args(argv):
    parser = build_parser(argv)
    return parser, parser.parse_args(argv)


@pytest.mark.parametrize("argv", [
    ["--host", "a", "approvals", "--host", "b", "list", "--host", "c"],
    ["approvals", "list", "--host", "a", "--host", "b", "--host", "c"],
    ["--host=a", "--host", "b", "approvals", "list", "--host=c"],
])
def test_host_and_group_gather_before_and_after_the_subcommand(argv):
    _, args = _args(argv)
    assert args.fleet_hosts == ["a", "b", "c"]


def test_no_fleet_option_is_local_mode():
    _, args = _args(["approvals", "list"])
    assert args.fleet_hosts is None and args.fleet_groups is None and args.fleet_all is False and args.parallel == 8


def test_params_are_the_options_given_under_their_destinations():
    parser, args = _args(["--fleet", "approvals", "list", "--status", "all", "--limit", "5", "--kind", "git_push"])
    assert method_for(args) == "approvals.list"
    assert params_for(args, parser, "approvals.list") == {"status": "all", "limit": 5, "kind": "git_push"}
    parser, args = _args(["--fleet", "approvals", "approve", "eu1:a", "b", "--requester-unknown-ok"])
    assert params_for(args, parser, "approvals.approve") == {"ids": ["eu1:a", "b"], "requester_unknown_ok": True}
    parser, args = _args(["--fleet", "upgrade", "--plan"])
    assert method_for(args) == "upgrade.plan" and params_for(args, parser, "upgrade.plan") == {}


@pytest.mark.parametrize("argv, says", [
    (["--fleet", "upgrade"], "an upgrade is not run over several hosts"),
    (["--host", "eu1", "upgrade", "--to", "1.10.0"], "per-host, explicitly confirmed"),
    (["--fleet", "inspect", "x.db"], "`inspect` has no fleet form"),
    (["--fleet", "profiles", "diff", "p", "1", "2"], "`profiles diff` has no fleet form"),
    (["--fleet", "--db", "x.db", "approvals", "list"], "--db names a file on this machine"),
    (["--fleet", "approvals", "list", "--as", "mallory"], "each host resolves who is acting itself"),
    (["--fleet", "doctor", "/tmp/x.db"], "PATH is not sent to hosts: it names a file on this machine"),
    (["--fleet", "doctor", "--bundle", "out.zip"], "--bundle is not sent to hosts"),
    (["--fleet", "approvals", "list", "--view", "mine"], "--view is not sent to hosts"),
    (["--fleet", "audit", "--follow"], "--follow is not sent to hosts"),
    (["--fleet", "--busy-timeout", "9", "envs", "list"], "--busy-timeout is not sent"),
    (["--fleet", "--parallel", "0", "approvals", "list"], "hosts must be between 1 and 64"),
    (["--fleet", "--parallel", "65", "approvals", "list"], "hosts must be between 1 and 64"),
])
def test_what_cannot_run_over_hosts_is_one_sentence_and_exit_2(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert main([*argv, "--json"]) == 2
    value = json.loads(capsys.readouterr().out)
    assert value["ok"] is False and value["exit"] == 2


def test_parallel_without_hosts_is_a_usage_error_not_ignored(capsys):
    assert main(["--parallel", "3", "approvals", "list"]) == 2
    assert "--parallel only applies with --host, --group or --fleet" in capsys.readouterr().err


def test_read_only_refuses_a_fleet_write_before_any_host(capsys):
    assert main(["--fleet", "--read-only", "approvals", "approve", "a"]) == 1
    assert "nothing that writes is sent" in capsys.readouterr().err


def test_every_fleet_form_is_a_method_of_the_wire():
    from console.fleet.protocol import METHODS

    assert set(FORMS.values()) <= set(METHODS)
    for path, method in FORMS.items():  # and every param of the method is an option of the command
        parser = build_parser(list(path))
        from console.cli.fleet import leaf_parser

        dests = {a.dest for a in leaf_parser(parser, path)._actions}
        assert METHODS[method].params <= dests, (path, METHODS[method].params - dests)


def test_host_and_group_values_complete_from_the_hosts_file(tmp_path, monkeypatch):
    from console.cli.completion import candidates

    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.eu1]\nssh = "a"\ngroups = ["prod", "eu"]\n[hosts.us1]\nssh = "b"\ngroups = ["prod"]\n')
    monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(hosts))
    assert candidates(["--host", ""]) == ["eu1", "us1"]
    assert candidates(["approvals", "list", "--group", "p"]) == ["prod"]
    assert candidates(["--host", "eu1", "appr"]) == ["approvals"]
    assert candidates(["--parallel", ""]) == []  # a number: nothing to offer, not the command names
    hosts.write_text("[hosts.\n")  # a broken file completes nothing and says nothing
    assert candidates(["--host", ""]) == []
