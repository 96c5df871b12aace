"""`archon-console serve --stdio`: the host side of fleet mode.

A fleet client runs this command on each host through its own `ssh` and speaks newline-delimited
JSON-RPC with it (console/fleet/protocol.py); the loop is console/cli/server.py. Only argparse is
imported here (and the policy's default path): every other command's start-up stays as it was
(tests/test_cli_startup.py).
"""

from __future__ import annotations

import argparse

from console.cli.options import user_path
from console.services.host_identity import DEFAULT_POLICY

HELP = "serve fleet clients over stdin/stdout (JSON-RPC; run by ssh)"


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve", parents=parents, help=HELP,
        description="Answer a fleet console over this process's stdin and stdout: one JSON-RPC 2.0 message "
        "per line, nothing else on stdout, logs on stderr. Every method runs the same command and code path "
        "as the CLI on this host's database. Who acts is decided here, never by the client: --actor from a "
        "forced command, else the Key ID of the SSH certificate the session logged in with (sshd "
        "ExposeAuthInfo yes), else the login, which is read-only when the policy lists it as shared.",
    )
    p.add_argument("--stdio", action="store_true", required=True,
                   help="speak JSON-RPC on stdin and stdout (the only transport)")
    p.add_argument("--actor", dest="serve_actor", metavar="NAME",
                   help="who acts in every session of this command: for the admin's forced command "
                   "(restrict,command=\"archon-console serve --stdio --actor=NAME\" in authorized_keys), or a "
                   "local start outside SSH; refused under SSH without a forced command")
    p.add_argument("--policy", metavar="PATH", type=user_path("--policy"), default=None,
                   help=f"the host's rules (default {DEFAULT_POLICY}, absent there: none; a PATH given must exist): shared_accounts = "
                   "[logins that name nobody in particular; read-only], read_only = true|false. A file that "
                   "cannot be used refuses the session")
    p.set_defaults(handler=run_serve)


def run_serve(ctx) -> int:
    from console.cli.server import serve

    return serve(ctx)
