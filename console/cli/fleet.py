"""A command over several hosts (`--host NAME`, `--group G`, `--fleet`): the command line is parsed
and checked here, by the same parser as local mode, then each host runs it through
`archon-console serve --stdio` (console/cli/server.py) over the user's own ssh
(console/fleet/client.py), and the answers are merged (console/cli/fleet_views.py).

What may be sent is the method table of console/fleet/protocol.py (`METHODS`): a command has a fleet
form when `FORMS` names its method, and every option the user gave must be one of that method's
params. Anything else is refused here, before any host is contacted, with why: `--db` and `--as`
because the host decides its database and who is acting (identity is never asserted by the client),
`doctor PATH` and `--bundle` because they name files on this machine, an upgrade because it is a
per-host, explicitly confirmed action. Exit codes: 0, 1, 2, 3 as in local mode, and 4 when some
host did not answer (console/cli/fleet_views.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from console.errors import Refusal, UsageError

# The command (its words) -> the method that runs it on a host.
FORMS: dict[tuple[str, ...], str] = {
    ("approvals", "list"): "approvals.list", ("approvals", "show"): "approvals.show",
    ("approvals", "approve"): "approvals.approve", ("approvals", "deny"): "approvals.deny",
    ("approvals", "revoke"): "approvals.revoke", ("approvals", "expire"): "approvals.expire",
    ("envs", "list"): "envs.list", ("envs", "show"): "envs.show", ("envs", "claim"): "envs.claim",
    ("envs", "release"): "envs.release", ("envs", "complete"): "envs.complete",
    ("projects", "list"): "projects.list",
    ("profiles", "list"): "profiles.list", ("profiles", "show"): "profiles.show",
    ("profiles", "activate"): "profiles.activate",
    ("doctor",): "doctor", ("audit",): "audit", ("upgrade",): "upgrade.plan",
}
WATCH = ("approvals", "watch")
LISTS = ("approvals.list", "envs.list", "projects.list", "profiles.list", "audit")
# Options every command has, decided here rather than sent (console/cli/parser.py `global_options`).
_GLOBAL_DESTS = {"db", "actor", "read_only", "json", "busy_timeout", "fleet_hosts", "fleet_groups", "fleet_all",
                 "parallel", "help", "version", "quiet"}
_WHY_NOT_SENT = {
    "path": "it names a file on this machine; each host checks its own database",
    "bundle": "a support bundle is written where the database is: run `doctor --bundle` on the host",
    "redact": "it only applies to --bundle",
    "view": "saved views live in this machine's console; give the filters as options",
    "snapshot_dir": "it names a directory on this machine",
    "format": "fleet output is the merged table, or JSON with --json",
    "follow": "follow one host's trail on that host (`audit --follow`)",
}


def command_path(args: argparse.Namespace) -> tuple[str, ...]:
    command = getattr(args, "command", None)
    if command is None:
        return ()
    action = getattr(args, f"{command}_command", None)
    return (command, action) if action else (command,)


def leaf_parser(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for word in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _spelling(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else str(action.metavar or action.dest).upper()


def method_for(args: argparse.Namespace) -> str:
    """The method that runs this command on a host, or a usage error saying why it cannot."""
    path = command_path(args)
    words = " ".join(path)
    if path == ("upgrade",) and not getattr(args, "plan", False):
        raise UsageError("an upgrade is not run over several hosts: it is a per-host, explicitly confirmed "
                         "action; see what each host needs with `upgrade --plan --fleet`, then upgrade on the "
                         "host itself.")
    if path not in FORMS and path != WATCH:
        raise UsageError(f"`{words}` has no fleet form (--host, --group, --fleet); run it on the host itself.")
    refuse_local_options(args)
    return "approvals.watch" if path == WATCH else FORMS[path]


def refuse_local_options(args: argparse.Namespace) -> None:
    """The global options that act on this machine only are refused over hosts, with why: for a
    command and for the fleet console (`archon-console --fleet` with no command) alike."""
    if args.db is not None:
        raise UsageError("--db names a file on this machine and is not sent to hosts; each host uses the db "
                         "of its hosts.toml entry, else its own default.")
    if args.actor is not None:
        raise UsageError("--as is not sent to hosts: each host resolves who is acting itself (forced command, "
                         "certificate or login); leave --as out.")
    if float(args.busy_timeout) != 5.0:
        raise UsageError("--busy-timeout is not sent to hosts; each host waits its own default.")


def params_for(args: argparse.Namespace, parser: argparse.ArgumentParser, method: str) -> dict[str, Any]:
    """The params of `method` from what the user gave: an option given that the method does not
    take is refused here, with why, before any host is contacted."""
    from console.fleet import protocol

    if method == "approvals.watch":  # the host's filters, and what this machine keeps (cursor file, hook)
        from console.cli.fleet_watch import LOCAL_OPTIONS

        allowed = protocol.WATCH.params | LOCAL_OPTIONS
    else:
        allowed = protocol.METHODS[method].params
    leaf = leaf_parser(parser, command_path(args))
    params: dict[str, Any] = {}
    for action in leaf._actions:
        if action.dest in _GLOBAL_DESTS or isinstance(action, argparse._SubParsersAction):
            continue
        if action.dest == "plan" and method == "upgrade.plan":
            continue  # `upgrade --plan` is the method itself (its `fixed` argv)
        value = getattr(args, action.dest, action.default)
        given = value != action.default or (not action.option_strings and value is not None)
        if not given:
            continue
        if action.dest not in allowed:
            why = _WHY_NOT_SENT.get(action.dest, "the hosts' console does not take it over the wire")
            raise UsageError(f"{_spelling(action)} is not sent to hosts: {why}.")
        params[action.dest] = value
    return params


def _fleet_and_hosts(args):
    from console.fleet.hosts import load_fleet, select

    fleet = load_fleet()
    hosts = select(fleet, list(dict.fromkeys(args.fleet_hosts or ())), list(dict.fromkeys(args.fleet_groups or ())),
                   bool(args.fleet_all))
    if not hosts:
        raise UsageError("no hosts selected: the group names none, or hosts.toml lists none.")
    return fleet, hosts


class Runner:
    """One fleet command: the hosts, the options, and how to ask them."""

    def __init__(self, args: argparse.Namespace, fleet, hosts):
        from console.clock import system_clock

        self.args, self.fleet, self.hosts = args, fleet, hosts
        self.names = [h.name for h in hosts]
        self.json = bool(args.json)
        self.now = system_clock()
        self._noted: set[str] = set()

    def call(self, method: str, params: dict[str, Any], hosts=None, *, cache: bool = True) -> list:
        from console.fleet.client import call_hosts

        outcomes = call_hosts(self.fleet, self.hosts if hosts is None else hosts, method, params,
                              parallel=int(self.args.parallel), cache=cache)
        self._note_policy(outcomes)
        return outcomes

    def _note_policy(self, outcomes) -> None:
        """Once per host: hosts.toml says read-only, its server says otherwise (console/fleet/local_policy.py)."""
        from console.cli.output import say
        from console.fleet.local_policy import read_only_mismatch

        for outcome in outcomes:
            note = read_only_mismatch(self.fleet.hosts[outcome.host], outcome.hello) \
                if outcome.host in self.fleet.hosts else None
            if note and outcome.host not in self._noted:
                self._noted.add(outcome.host)
                say(note, err=True)

    def host(self, name: str):
        return next(h for h in self.hosts if h.name == name)

    def emit(self, value: Any) -> None:
        from console.cli.output import emit_json

        emit_json(value)

    def say_hosts(self, outcomes, verdicts: dict[int, str] | None = None) -> None:
        from console.cli.fleet_views import host_line
        from console.cli.output import say

        for outcome in outcomes:
            text = host_line(outcome, verdicts)
            if text:
                say(text, err=True)


def run_fleet(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    method = method_for(args)
    params = params_for(args, parser, method)
    from console.fleet.protocol import METHODS

    if args.read_only and method in METHODS and METHODS[method].writes:
        raise Refusal("--read-only: nothing that writes is sent to the hosts; nothing was written.")
    fleet, hosts = _fleet_and_hosts(args)
    runner = Runner(args, fleet, hosts)
    if method == "approvals.watch":
        from console.cli.fleet_watch import run_fleet_watch

        return run_fleet_watch(runner, params)
    if method in LISTS:
        return _run_list(runner, method, params)
    if method in ("doctor", "upgrade.plan"):
        return _run_report(runner, method, params)
    from console.cli.fleet_writes import run_by_id

    return run_by_id(runner, method, params)


def _run_list(runner: Runner, method: str, params: dict[str, Any]) -> int:
    from console.cli import fleet_views as views
    from console.cli.output import say

    outcomes = runner.call(method, params)
    limit = params.get("limit", 50) if method == "approvals.list" else None
    rows, cut = views.merge(method, outcomes, limit=limit)
    code = views.fleet_exit(views.host_exit(o) for o in outcomes)
    if runner.json:
        runner.emit(views.fleet_json(rows, outcomes, **({"more": True} if cut else {})))
        return code
    say(views.list_text(method, rows, runner.now))
    if cut:
        say(f"(first {len(rows)} across the hosts; more match, raise --limit or narrow the filters)")
    runner.say_hosts(outcomes)
    return code


def _run_report(runner: Runner, method: str, params: dict[str, Any]) -> int:
    from console.cli import fleet_views as views
    from console.cli.output import say

    outcomes = runner.call(method, params, cache=False)
    rows = views.doctor_rows(outcomes, strict=bool(params.get("strict"))) if method == "doctor" else views.upgrade_rows(outcomes)
    found = [r.get("exit", 0) for r in rows] if method == "doctor" else []  # an unreadable report counts 4
    code = views.fleet_exit([*(views.host_exit(o) for o in outcomes), *found])
    if runner.json:
        runner.emit({**views.fleet_json(rows, outcomes), "ok": code == 0, "exit": code})
        return code
    say(views.doctor_text(rows) if method == "doctor" else views.upgrade_text(rows))
    if method == "upgrade.plan":
        needing = [r["host"] for r in rows if r["needs_upgrade"]]
        say(f"{len(needing)} host(s) need an upgrade: {', '.join(needing)}; upgrade each on the host itself."
            if needing else "No host that answered needs an upgrade.")
    runner.say_hosts(outcomes, views.VERDICTS[method])
    return code


__all__ = ["FORMS", "command_path", "method_for", "params_for", "refuse_local_options", "run_fleet"]
