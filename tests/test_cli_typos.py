"""Every typo on the command line gets "did you mean" (issue 21, item 7): `aprovals`, `envs clam` and
`approvals list --staus` each said only "invalid choice" or "unrecognized arguments", and `--staus`
printed the top level's usage instead of `approvals list`'s.

The test walks the whole parser (console/cli/reference.py `walk`: every command, every action, every
option of every command, every global option) and mangles each word as fingers do (a letter dropped,
two neighbours swapped): exit 2, the word meant among the suggestions, and the usage line of the
parser the word belongs to. The mechanism is console/cli/parser.py `ConsoleArgumentParser`.
"""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import reference
from console.cli.cli import main
from console.cli.parser import build_parser, global_options

pytestmark = pytest.mark.slow

FULL = reference.full_parser()
COMMANDS = list(reference.walk(FULL))


def _choices(parser: argparse.ArgumentParser) -> list[str]:
    sub = reference.subcommands(parser)
    return list(sub.choices) if sub is not None else []


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings]


def _value(action: argparse.Action) -> str:
    if action.choices:
        return str(list(action.choices)[0])
    return "1" if action.type is not None else "x"


def _filler(parser: argparse.ArgumentParser) -> list[str]:
    """What a leaf needs to parse at all: its positionals and required options."""
    words: list[str] = []
    for action in parser._actions:
        if action.option_strings:
            if action.required:
                words += [action.option_strings[0]] + ([] if action.nargs == 0 else [_value(action)])
        elif action.nargs not in ("?", "*", argparse.REMAINDER) and not isinstance(action, argparse._SubParsersAction):
            words.append(_value(action))
    for group in parser._mutually_exclusive_groups:
        if group.required:
            first = group._group_actions[0]
            words += [first.option_strings[0]] + ([] if first.nargs == 0 else [_value(first)])
    return words


def _mutants(word: str, data) -> str:
    """A letter dropped or two neighbours swapped, at a drawn place."""
    if data.draw(st.booleans(), label="drop") or len(set(word)) < 2:
        at = data.draw(st.integers(0, len(word) - 1), label="at")
        return word[:at] + word[at + 1:]
    at = data.draw(st.integers(0, len(word) - 2), label="at")
    return word[:at] + word[at + 1] + word[at] + word[at + 2:]


def _usage_problem(capsys, argv: list[str]) -> tuple[str, str]:
    """Run the CLI; the usage line (first line) and the sentence of a usage error, exit 2 asserted."""
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    assert captured.out == "", argv
    assert "Traceback" not in captured.err
    return captured.err, captured.err.strip().splitlines()[-1]


def _usage_prefix(path: tuple[str, ...]) -> str:
    return f"usage: archon-console {' '.join(path)} [-h]" if path else "usage: archon-console [-h]"


def _accepted(typed: str, known: list[str], *, prefixes: bool) -> bool:
    """A mangled word that is still a word argparse takes (itself, or an abbreviation of an option)."""
    return typed in known or (prefixes and any(word.startswith(typed) for word in known))


def _check(capsys, argv: list[str], typed: str, meant: str, path: tuple[str, ...]) -> None:
    err, last = _usage_problem(capsys, argv)
    assert err.startswith(_usage_prefix(path)), (argv, err)
    assert "Did you mean" in last and meant in last.split("Did you mean", 1)[1], (argv, last)
    assert repr(typed) in last or typed in last


SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

WORDS = [((), name) for name in _choices(FULL)] + [
    (command.path, name) for command in COMMANDS for name in _choices(command.parser)]


@pytest.mark.parametrize("path,word", WORDS, ids=[" ".join((*p, w)) for p, w in WORDS])
@SETTINGS
@given(data=st.data())
def test_a_mangled_command_or_action_names_the_one_meant(capsys, path, word, data):
    parent = FULL if not path else next(c.parser for c in COMMANDS if c.path == path)
    typed = _mutants(word, data)
    if _accepted(typed, _choices(parent), prefixes=False) or len(word) < 3:
        return
    _check(capsys, [*path, typed], typed, word, path)
    assert main(["help", *path, typed]) == 2  # `help TOPIC` answers the same
    hint = capsys.readouterr().err.strip().splitlines()[-1]
    assert hint.startswith("Did you mean") and word in hint.split("?")[0], hint


LEAVES = [c for c in COMMANDS if reference.subcommands(c.parser) is None]
OPTIONS = [(c.path, option) for c in LEAVES for a in reference.own_actions(c.parser)
           for option in a.option_strings if option.startswith("--")]


@pytest.mark.parametrize("path,option", OPTIONS, ids=[" ".join((*p, o)) for p, o in OPTIONS])
@SETTINGS
@given(data=st.data())
def test_a_mangled_option_names_the_one_meant_with_its_commands_usage(capsys, path, option, data):
    argv = [*path, *_filler(_leaf(path))]
    build_parser(argv).parse_args(argv)  # the leaf's own words parse: only the typo is wrong
    typed = "--" + _mutants(option[2:], data)
    if _accepted(typed, _options(_leaf(path)), prefixes=True) or len(typed) < 4:  # one letter names nothing
        return
    _check(capsys, [*argv, typed], typed, option, path)


GLOBAL_OPTIONS = [o for a in global_options(suppress=False)._actions for o in a.option_strings
                  if o.startswith("--")] + ["--version", "--quiet"]


@pytest.mark.parametrize("option", GLOBAL_OPTIONS)
@SETTINGS
@given(data=st.data())
def test_a_mangled_global_option_names_the_one_meant(capsys, option, data):
    typed = "--" + _mutants(option[2:], data)
    if _accepted(typed, _options(FULL), prefixes=True) or len(typed) < 4:
        return
    _check(capsys, [typed], typed, option, ())


def _leaf(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser(list(path))
    for word in path:
        parser = reference.subcommands(parser).choices[word]
    return parser


def test_the_issues_three_typos(capsys):
    err, last = _usage_problem(capsys, ["aprovals"])
    assert last.endswith("Did you mean approvals or profiles?")
    err, last = _usage_problem(capsys, ["envs", "clam"])
    assert err.startswith("usage: archon-console envs [-h]") and last.endswith("Did you mean claim?")
    err, last = _usage_problem(capsys, ["approvals", "list", "--staus", "pending"])
    assert err.startswith("usage: archon-console approvals list [-h]")
    assert last == "archon-console: error: unrecognized arguments: --staus pending. Did you mean --status?"


def test_with_json_the_usage_is_the_subcommands_too(capsys):
    assert main(["approvals", "list", "--json", "--staus", "pending"]) == 2
    answer = json.loads(capsys.readouterr().out)
    assert answer["exit"] == 2 and answer["error"].endswith("Did you mean --status?")
    assert answer["usage"].startswith("usage: archon-console approvals list [-h]")


# Values the parser cannot know (they are checked where every front end checks them): the same rule.
VALUES = [
    (["doctor", "--check", "integrty"], "integrity"),
    (["approvals", "list", "--status", "pendng"], "pending"),
    (["approvals", "list", "--status", "approved,dneied"], "denied"),
    (["approvals", "list", "--kind", "git_psuh"], "git_push"),
    (["approvals", "watch", "--kind", "custom_chekc"], "custom_check"),
]


@pytest.mark.parametrize("argv,meant", VALUES, ids=[" ".join(a) for a, _ in VALUES])
def test_a_mangled_value_names_the_one_meant(capsys, tmp_path, argv, meant):
    from console.demo.writer import generate

    db = tmp_path / "archon.db"
    generate(db, requests=5, environments=1, projects=1)
    assert main(["--db", str(db), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "Did you mean" in err and meant in err.rsplit("Did you mean", 1)[1], err
