"""`archon-console help [TOPIC...]`: a command's help, from the same parser that reads it.

`help --markdown` prints the whole reference the README carries (console/cli/reference.py).
"""

from __future__ import annotations

import argparse


def cmd_help(ctx) -> int:
    from console.cli import reference
    from console.cli.output import emit_json

    topic = list(ctx.args.topic or [])
    if ctx.args.markdown:
        text = reference.markdown()
    else:
        text = reference.help_text(topic)
    if ctx.json:
        emit_json({"topic": topic, "text": text})
    else:
        print(text.rstrip("\n"))
    return 0


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "help", parents=parents, help="help on a command (`help approvals list`), generated from the parser",
        description="Prints the help of COMMAND [ACTION], or the list of commands. --markdown prints the "
        "whole command reference, as the README carries it.",
    )
    p.add_argument("topic", nargs="*", metavar="TOPIC", help="a command and action, e.g. `envs claim`")
    p.add_argument("--markdown", action="store_true", help="the whole command reference as Markdown")
    p.set_defaults(handler=cmd_help)


__all__ = ["register"]
