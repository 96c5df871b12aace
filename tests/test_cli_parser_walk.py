"""The parser walked whole (issue 21, item 3): `audit --actor` shared the dest of the global `--as`,
so `audit --as dana` filtered the trail silently, and the command reference left `--actor` out
(console/cli/reference.py judged an option global by its dest).

Every option of every command is in the reference, in its command's block; no option of any
command shares a dest with a global one; and a command line that names one action builds that
action (console/cli/parser.py `build_parser`, a family's `ACTIONS`) with exactly the options the
full parser has, so the lazy parse is covered by everything proved on the full one.
"""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from console.cli import reference
from console.cli.parser import COMMAND_OWNERS, build_parser, global_options

COMMANDS = list(reference.walk(reference.full_parser()))


def _blocks(markdown: str) -> dict[str, str]:
    """The reference's text per command, keyed by its words (`approvals list`); "" holds the globals."""
    parts = re.split(r"^#### `archon-console ([^`]*)`$", markdown, flags=re.M)
    return {"": parts[0], **{parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}}


def test_every_option_of_every_command_is_in_its_block_of_the_reference():
    blocks = _blocks(reference.markdown())
    inherited = reference.global_flags()
    missing = []
    for command in COMMANDS:
        block = blocks[command.name]
        for action in command.parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            for option in action.option_strings:
                where = blocks[""] if option in inherited else block
                if option not in ("-h", "--help") and f"`{option}`" not in where:
                    missing.append((command.name, option))
    assert len(COMMANDS) > 20 and missing == []


def test_an_option_with_a_global_dest_would_still_be_in_the_reference():
    """The class: the reference decides by spelling; a dest shared with a global cannot hide one."""
    parser = argparse.ArgumentParser(add_help=False, parents=[global_options(suppress=True)])
    parser.add_argument("--actor", dest="actor")
    assert [a.option_strings for a in reference.own_actions(parser)] == [["--actor"]]


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    sub = reference.subcommands(parser)
    if sub is None:
        yield path, parser
        return
    for word, child in sub.choices.items():
        yield from _leaves(child, (*path, word))


def _lazy_parses() -> list[tuple[str, ...]]:
    """Every command line that builds less than the whole parser: one family, and one action of it."""
    lines = [(family,) for family in COMMAND_OWNERS]
    for family, module in COMMAND_OWNERS.items():
        lines += [(family, action) for action in getattr(importlib.import_module(module), "ACTIONS", ())]
    return lines


def _options(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {o: a.dest for a in parser._actions for o in a.option_strings}


@pytest.mark.parametrize("words", _lazy_parses(), ids=" ".join)
def test_a_lazy_parse_builds_the_same_commands_as_the_full_one(words):
    full = dict(_leaves(reference.full_parser()))
    lazy = dict(_leaves(build_parser(list(words))))
    named = {path: leaf for path, leaf in lazy.items() if path[:len(words)] == words[:len(path)]}
    assert named, words
    for path, leaf in named.items():
        assert _options(leaf) == _options(full[path]), path


@pytest.mark.parametrize("words", [(), *_lazy_parses()], ids=lambda w: " ".join(w) or "full")
def test_no_option_of_any_command_shares_a_dest_with_a_global_one(words):
    global_dests = {a.dest: set(a.option_strings) for a in global_options(suppress=True)._actions}
    parser = build_parser(list(words)) if words else reference.full_parser()
    clashes = [(path, a.option_strings, a.dest) for path, leaf in _leaves(parser) for a in leaf._actions
               if a.dest in global_dests and set(a.option_strings) != global_dests[a.dest]]
    assert clashes == []
