"""Client and server agree on every command line (issue 20, findings F11, F12, F13).

For every method of console/fleet/protocol.py `METHODS`, generated local command lines of its
command are parsed by the CLI's parser; the params the fleet CLI builds from them
(console/cli/fleet.py `params_for`) go through the server's own `argv_for`
(console/cli/server_methods.py) and the parser again, and must give the same namespace for every
param. Before the fix `approvals revoke ID` (nargs=1, F11) and `profiles show|activate REV` (an
absent optional positional before the required one, F12) never made it; and `audit --actor` shared
the dest of the global `--as` (F13), so no fleet audit could filter by actor.
"""

from __future__ import annotations

import argparse

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from console.cli.fleet import params_for
from console.cli.parser import UsageProblem, build_parser, global_options
from console.cli.server_methods import argv_for, command_actions
from console.fleet.protocol import METHODS

WORDS = st.sampled_from(["p1", "apr-1", "env-7", "p1:3", "r2", "3", "eu1:apr-1", "30m", "2026-01-01", "a b",
                         "-dash", "x=y", "pending", "all", "approval", "stop", "0", "50", "1.5"])


def _parse(argv: list[str]) -> argparse.Namespace | None:
    try:
        return build_parser(argv).parse_args(argv)
    except (UsageProblem, SystemExit):
        return None


@st.composite
def command_lines(draw, name: str):
    """A command line of `name`'s command: each param of the method given or not, options as
    `--opt=VALUE` (a value may start with '-'), positionals after `--`."""
    method = METHODS[name]
    options: list[str] = []
    positionals: list[str] = []
    for action in command_actions(method):
        if not draw(st.booleans()):
            if action.option_strings or action.nargs in ("?", "*"):
                continue
        values = st.sampled_from(list(action.choices)) if action.choices else WORDS
        if not action.option_strings:
            count = action.nargs if isinstance(action.nargs, int) else \
                draw(st.integers(1, 3)) if action.nargs in ("+", "*") else 1
            positionals += [draw(values) for _ in range(count)]
            continue
        flag = next(o for o in action.option_strings if o.startswith("--"))
        if action.nargs == 0:
            options.append(flag)
        else:
            repeat = draw(st.integers(1, 2)) if isinstance(action, argparse._AppendAction) else 1
            options += [f"{flag}={draw(values)}" for _ in range(repeat)]
    return [*method.argv, *options, *method.fixed, *(["--", *positionals] if positionals else [])]


@pytest.mark.parametrize("name", sorted(METHODS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_the_params_the_cli_sends_are_the_same_command_line_on_the_host(name, data):
    argv = data.draw(command_lines(name))
    local = _parse(argv)
    assume(local is not None)  # a command line the local parser refuses is refused before any host too
    params = params_for(local, build_parser(argv), name)
    server_argv = argv_for(METHODS[name], params)
    remote = _parse(server_argv)
    assert remote is not None, (argv, params, server_argv)
    for dest in METHODS[name].params:
        assert getattr(remote, dest, None) == getattr(local, dest, None), (dest, argv, server_argv)


@pytest.mark.parametrize("argv", [
    ["approvals", "revoke", "--reason=r", "--", "apr-5"],  # F11: nargs=1
    ["profiles", "activate", "--reason=r", "--", "p1:3"],  # F12: one positional, the revision
    ["profiles", "show", "--", "p1"],
    ["audit", "--actor=dave"],  # F13
])
def test_the_forms_the_attack_found_broken(argv):
    name = next(n for n, m in METHODS.items() if list(m.argv) == argv[:len(m.argv)] and not m.fixed)
    local = _parse(argv)
    params = params_for(local, build_parser(argv), name)
    remote = _parse(argv_for(METHODS[name], params))
    assert {d: getattr(remote, d, None) for d in METHODS[name].params} == \
        {d: getattr(local, d, None) for d in METHODS[name].params}


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for word, child in sub.choices.items():
            yield from _leaves(child, (*path, word))


def test_no_subcommand_option_shares_a_dest_with_a_global_option():
    """Issue 21 item 3: one dest, one meaning. A subcommand option whose dest is a global option's
    (`audit --actor` was the global `--as`'s `actor`) makes the one overwrite the other."""
    global_actions = global_options(suppress=True)._actions
    global_dests = {a.dest: set(a.option_strings) for a in global_actions}
    clashes = []
    leaves = 0
    for path, leaf in _leaves(build_parser()):  # every command family registered
        leaves += 1
        for action in leaf._actions:
            if action.dest in global_dests and set(action.option_strings) != global_dests[action.dest]:
                clashes.append((" ".join(path), action.option_strings, action.dest))
    assert leaves > 20 and clashes == []


def test_audit_actor_is_a_filter_locally_and_never_the_acting_identity():
    args = _parse(["audit", "--actor", "dave"])
    assert args.audit_actor == "dave" and args.actor is None
