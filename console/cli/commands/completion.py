"""`archon-console completion bash|zsh`: the shell script that completes archon-console.

Install for the current shell with `eval "$(archon-console completion bash)"` (or `zsh`), or put
that line in ~/.bashrc / ~/.zshrc. The script asks `archon-console __complete` on each TAB
(console/cli/completion.py); nothing of it is imported when archon-console runs any other command.
"""

from __future__ import annotations

import argparse


def cmd_completion(ctx) -> int:
    from console.cli.completion import SCRIPTS

    if ctx.json:
        from console.cli.output import emit_json

        emit_json({"shell": ctx.args.shell, "script": SCRIPTS[ctx.args.shell]})
        return 0
    print(SCRIPTS[ctx.args.shell], end="")
    return 0


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "completion", parents=parents, help="print the shell completion script (bash or zsh)",
        description='Prints a script that completes commands, options, and project, request, environment '
        'and revision ids from the database. Install: eval "$(archon-console completion bash)" '
        '(or zsh), in ~/.bashrc or ~/.zshrc to keep it.',
    )
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete for")
    p.set_defaults(handler=cmd_completion)


__all__ = ["register"]
