"""The command tree: which module registers each command family, the global options, and the
parser built from them.

Each command family lives in `console/cli/commands/<family>.py` with a `register(subparsers,
parents)` function; `build_parser` imports only the family argv names. The entry point
(console/cli/cli.py), shell completion (console/cli/completion.py) and the command reference
(console/cli/reference.py) all build this parser, so it sits below the three of them.
"""

from __future__ import annotations

import argparse
import importlib

from console.cli.options import OptionParser, finite_number, whole_number

COMMAND_MODULES = (
    "console.cli.commands.demo",
    "console.cli.commands.upgrade",
    "console.cli.commands.projects",
    "console.cli.commands.profiles",
    "console.cli.commands.approvals",
    "console.cli.commands.envs",
    "console.cli.commands.doctor",
    "console.cli.commands.inspect",
    "console.cli.commands.audit",
    "console.cli.commands.query",
    "console.cli.commands.reference",
    "console.cli.commands.completion",
    "console.cli.commands.serve",
)

# Which module registers each subcommand, so a command imports only its own family
# (start-up time is part of `approvals list` latency).
COMMAND_OWNERS = {
    "demo": "console.cli.commands.demo",
    "upgrade": "console.cli.commands.upgrade",
    "restore": "console.cli.commands.upgrade",
    "projects": "console.cli.commands.projects",
    "profiles": "console.cli.commands.profiles",
    "approvals": "console.cli.commands.approvals",
    "envs": "console.cli.commands.envs",
    "doctor": "console.cli.commands.doctor",
    "inspect": "console.cli.commands.inspect",
    "audit": "console.cli.commands.audit",
    "query": "console.cli.commands.query",
    "help": "console.cli.commands.reference",
    "completion": "console.cli.commands.completion",
    "serve": "console.cli.commands.serve",
}
OPTIONS_WITH_VALUE = {"--db", "--as", "--busy-timeout", "--host", "--group", "--parallel"}
FLEET_DESTS = ("fleet_hosts", "fleet_groups", "fleet_all")  # set: the command runs on hosts (console/cli/fleet.py)


def fleet_requested(args: argparse.Namespace) -> bool:
    """Whether a fleet option was given: then console/cli/fleet.py runs the command, on the hosts.
    `--parallel` alone selects no host: a usage error, not an option silently ignored."""
    requested = any(getattr(args, dest, None) for dest in FLEET_DESTS)
    if not requested and getattr(args, "parallel", 8) != 8:
        from console.errors import UsageError

        raise UsageError("--parallel only applies with --host, --group or --fleet (how many hosts are asked at once).")
    return requested


def _words(argv: list[str]) -> list[str]:
    """The bare words of argv up to a `--`, skipping the values of global options."""
    words: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token == "--":
            break
        elif token in OPTIONS_WITH_VALUE:
            skip = True
        elif not token.startswith("-"):
            words.append(token)
    return words


def named_command(argv: list[str]) -> str | None:
    """The subcommand in argv, skipping global option values; None for help or the TUI."""
    words = _words(argv)
    return words[0] if words and words[0] in COMMAND_OWNERS else None


def _named_action(argv: list[str]) -> str | None:
    """The word after the subcommand (`list` in `approvals list`), for families that build only
    the action named (a module with `ACTIONS`); None when there is none."""
    words = _words(argv)
    return words[1] if len(words) > 1 else None


def _opens_tui(argv: list[str]) -> bool:
    """No subcommand and no help asked for: argv only holds global options."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in OPTIONS_WITH_VALUE:
            skip = True
        elif token in ("-h", "--help") or not token.startswith("-"):
            return False
    return True


class _Gather(argparse.Action):
    """A repeatable option that may be given before and after the subcommand (`--host eu1 approvals
    list --host us1`): argparse parses each subcommand into a fresh namespace and copies it over the
    parent's, so a plain `append` would keep only the values after the last subcommand word. Every
    occurrence goes into one list shared by the whole parse (`seen`), and each namespace gets all of it."""

    def __init__(self, *args, seen: dict[str, list[str]], **kwargs):
        super().__init__(*args, **kwargs)
        self._seen = seen

    def __call__(self, parser, namespace, values, option_string=None):
        gathered = self._seen.setdefault(self.dest, [])
        gathered.append(values)
        setattr(namespace, self.dest, list(gathered))


def global_options(*, suppress: bool, seen: dict[str, list[str]] | None = None) -> argparse.ArgumentParser:
    """Global options; on subparsers their defaults are suppressed so a value given before the
    subcommand is not overwritten by the subparser's default. `seen` gathers the repeatable fleet
    options over the whole command line (`_Gather`); one dict per parse."""
    parent = ConsoleArgumentParser(add_help=False)
    default = (lambda value: argparse.SUPPRESS) if suppress else (lambda value: value)
    seen = {} if seen is None else seen
    parent.add_argument("--db", metavar="PATH", default=default(None),
                        help="archon database (default: $ARCHON_DB_PATH, else ~/.archon/archon.db)")
    parent.add_argument("--as", dest="actor", metavar="NAME", default=default(None),
                        help="who is acting (default: $ARCHON_CONSOLE_ACTOR, else the login name)")
    parent.add_argument("--read-only", action="store_true", default=default(False),
                        help="never write; refuse every change")
    parent.add_argument("--json", action="store_true", default=default(False),
                        help="machine-readable output")
    parent.add_argument("--busy-timeout", type=finite_number("seconds", maximum=3600), metavar="SECONDS", default=default(5.0),
                        help="how long a command waits for archon's write lock, in all (default 5)")
    parent.add_argument("--host", dest="fleet_hosts", action=_Gather, seen=seen, metavar="NAME", default=default(None),
                        help="run the command on this host over ssh (repeatable; hosts.toml: $ARCHON_CONSOLE_HOSTS, "
                        "else ~/.config/archon-console/hosts.toml)")
    parent.add_argument("--group", dest="fleet_groups", action=_Gather, seen=seen, metavar="G", default=default(None),
                        help="run the command on every host of this group of hosts.toml (repeatable)")
    parent.add_argument("--fleet", dest="fleet_all", action="store_true", default=default(False),
                        help="run the command on every host of hosts.toml")
    parent.add_argument("--parallel", type=whole_number("hosts", minimum=1, maximum=64), metavar="N",
                        default=default(8), help="with --host/--group/--fleet: hosts asked at once (default 8)")
    return parent


class UsageProblem(Exception):
    """argparse's complaint about the command line, raised instead of printed, so `--json` can
    answer it as JSON; `usage` is the usage line of the parser that complained."""

    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.message = message
        self.usage = usage


class ConsoleArgumentParser(OptionParser):
    """Every parser of the CLI (subparsers inherit the class): usage errors are raised, not printed,
    by the parser that met them, with its usage line; a word that is not one of the parser's own
    (a command, an action, an option, an option's choice) is answered with the near ones
    (console/suggest.py), the same rule the console's `:` commands use."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)  # add_subparsers, here and in every family

    def error(self, message: str):  # type: ignore[override]
        raise UsageProblem(message, self.format_usage())

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.unrecognized(extras)
        return parsed

    def unrecognized(self, extras: list[str]) -> None:
        """argparse's "unrecognized arguments", said by this parser, with the options it meant."""
        from console.suggest import near_matches

        message = f"unrecognized arguments: {' '.join(extras)}"
        typed = next((word.split("=", 1)[0] for word in extras if word.startswith("-") and word != "-"), None)
        if typed is not None:
            offered = {option.lstrip("-"): option for action in self._actions if action.help != argparse.SUPPRESS
                       for option in action.option_strings}
            found = [offered[name] for name in near_matches(typed.lstrip("-"), offered, limit=3)]
            if found:
                message += f". Did you mean {_either(found)}?"
        self.error(message)

    def _check_value(self, action, value):  # an unknown command word, action or choice
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            from console.suggest import near_matches

            found = near_matches(str(value), [str(choice) for choice in action.choices or ()], limit=3)
            if not found:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}. Did you mean {_either(found)}?") from None


def _either(words: list[str]) -> str:
    return " or ".join(words) if len(words) <= 2 else f"{', '.join(words[:-1])} or {words[-1]}"


class _Subcommands(argparse._SubParsersAction):
    """argparse hands what a subcommand's parser did not know up to the top parser, which then
    complained with the top level's usage (`approvals list --staus` showed `archon-console
    [-h] ...`). Here the subcommand's own parser says it: its usage, its options."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        extras = getattr(namespace, argparse._UNRECOGNIZED_ARGS_ATTR, None)
        child = self._name_parser_map.get(values[0])
        if extras and isinstance(child, ConsoleArgumentParser):
            child.unrecognized(list(extras))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    seen: dict[str, list[str]] = {}  # the fleet options of this parse (`_Gather`)
    parser = ConsoleArgumentParser(
        prog="archon-console",
        description="Administration console for archon's SQLite database. "
        "With no command, opens the terminal console.",
        parents=[global_options(suppress=False, seen=seen)],
    )
    parser.add_argument("--version", action="store_true",
                        help="print the console's version (with --json: also the archon releases and "
                        "the ledger format it knows) and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="the console itself: no toast, bell or desktop notification when a request "
                        "arrives (the window title still counts what is pending)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    parents = [global_options(suppress=True, seen=seen)]
    named = named_command(argv) if argv is not None else None
    if named:
        modules: tuple[str, ...] = (COMMAND_OWNERS[named],)
    elif argv is not None and _opens_tui(argv):
        modules = ()  # the console itself: no command family is needed to parse its options
    else:
        modules = COMMAND_MODULES
    for name in modules:  # a missing module is a broken installation: it raises, never skipped
        module = importlib.import_module(name)
        action = _named_action(argv) if named and argv is not None else None
        if action is not None and action in getattr(module, "ACTIONS", ()):
            module.register(subparsers, parents, action)
        else:
            module.register(subparsers, parents)
    return parser
