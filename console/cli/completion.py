"""Shell completion for bash and zsh, walking the argparse definitions (console/cli/reference.py).

The shell scripts `archon-console completion bash|zsh` prints are a few lines each: on TAB they
run `archon-console __complete SHELL WORDS...`, and this module answers one candidate per line.
Commands, actions, options and option choices come from the parser; project ids and names,
request, environment and revision ids from the database (read-only, at most `LIMIT` each, through
an index), when the database opens at once; approve and deny complete only pending requests, revoke
only approved ones. Nothing here is imported on any other
path (console/cli/cli.py imports it only for `__complete`), so start-up stays as fast as it was.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from console.text import clean, is_shell_word

LIMIT = 200
# Which database values an argument takes, by (command family, dest) or (command family, action, dest)
# where the action narrows it; `None` family: any command. A decision completes only the requests
# it can act on (console/services/resolve.py `completion_candidates`).
_DYNAMIC = {
    ("approvals", "approve", "ids"): "pending approval", ("approvals", "deny", "ids"): "pending approval",
    ("approvals", "revoke", "ids"): "approved approval",
    ("approvals", "id"): "approval", ("approvals", "ids"): "approval",
    ("envs", "id"): "environment", ("envs", "after"): "environment",
    ("profiles", "revision"): "revision", ("profiles", "rev_a"): "revision", ("profiles", "rev_b"): "revision",
    (None, "project"): "project",
}

BASH = r'''# archon-console completion for bash: eval "$(archon-console completion bash)"
_archon_console_complete() {
    local IFS=$'\n'
    COMPREPLY=($(archon-console __complete bash "${COMP_LINE:0:COMP_POINT}" "$COMP_WORDBREAKS" 2>/dev/null))
}
complete -o default -F _archon_console_complete archon-console
'''

ZSH = r'''# archon-console completion for zsh: eval "$(archon-console completion zsh)"
(( $+functions[compdef] )) || { autoload -Uz compinit && compinit; }
_archon_console_complete() {
    local -a candidates
    candidates=("${(@f)$(archon-console __complete zsh "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    candidates=(${candidates:#})
    if (( ${#candidates} )); then
        compadd -- "${candidates[@]}"
    else
        _files
    fi
}
compdef _archon_console_complete archon-console
'''

SCRIPTS = {"bash": BASH, "zsh": ZSH}


def _option_action(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    return parser._option_string_actions.get(word.split("=", 1)[0])


def _state(words: list[str]):
    """Walk the finished words: the innermost parser, the command path, the option awaiting a value
    (or None), how many positionals were given, and the global options seen (`--db`)."""
    from console.cli.parser import build_parser
    from console.cli.reference import subcommands

    parser = build_parser(words)  # imports only the family `words` name, as a real run would
    path: list[str] = []
    pending: argparse.Action | None = None
    positionals = 0
    seen: dict[str, str] = {}
    for word in words:
        if pending is not None:
            seen[pending.dest] = word
            pending = None
            continue
        if word.startswith("-") and word != "-":
            action = _option_action(parser, word)
            if action is not None and action.nargs != 0:
                if "=" in word:
                    seen[action.dest] = word.split("=", 1)[1]
                else:
                    pending = action
            continue
        sub = subcommands(parser)
        if sub is not None and word in sub.choices:
            parser = sub.choices[word]
            path.append(word)
            positionals = 0
        else:
            positionals += 1
    return parser, path, pending, positionals, seen


def _positional(parser: argparse.ArgumentParser, index: int) -> argparse.Action | None:
    """The positional argument the `index`-th bare word fills (a `+`/`*` one takes the rest)."""
    actions = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    for action in actions:
        if action.nargs in ("+", "*", argparse.REMAINDER):
            return action
        if index == 0:
            return action
        index -= 1
    return None


def _from_database(kind: str, prefix: str, seen: dict[str, str]) -> list[str]:
    from console.db.connect import open_database
    from console.db.paths import resolve_db_path
    from console.services.resolve import completion_candidates

    try:
        with open_database(resolve_db_path(seen.get("db")), read_only=True, busy_timeout_ms=200) as handle:
            found = completion_candidates(handle, kind, prefix, limit=LIMIT)
    except Exception:  # noqa: BLE001 - completion never complains; no candidates instead
        return []
    # A value that starts with `-` would be taken as an option by the command it completes (an id
    # `--db=/tmp/x` or `-rf` from the database); the person types such an id after `--` themselves.
    return [value for value in found if not value.startswith("-")]


def _from_hosts_file(dest: str) -> list[str]:
    """`--host` and `--group` values: the names in hosts.toml (console/fleet/hosts.py)."""
    from console.fleet.hosts import load_fleet

    try:
        fleet = load_fleet()
    except Exception:  # noqa: BLE001 - completion never complains; no candidates instead
        return []
    if dest == "fleet_hosts":
        return sorted(fleet.hosts)
    return sorted({group for host in fleet.hosts.values() for group in host.groups})


def _values(action: argparse.Action, path: list[str], prefix: str, seen: dict[str, str]) -> list[str]:
    if action.choices:
        return [str(c) for c in action.choices]
    if action.dest in ("fleet_hosts", "fleet_groups"):
        return _from_hosts_file(action.dest)
    family = path[0] if path else None
    command = path[1] if len(path) > 1 else None
    kind = (_DYNAMIC.get((family, command, action.dest)) or _DYNAMIC.get((family, action.dest))
            or _DYNAMIC.get((None, action.dest)))
    if kind is None:
        return []  # a path, a time, free text: the shell's own (file) completion
    return _from_database(kind, prefix, seen)


def candidates(words: list[str]) -> list[str]:
    """What may come next: `words` are the words after the program name, the last one unfinished."""
    from console.cli.reference import subcommands

    from console.cli.parser import COMMAND_OWNERS, OPTIONS_WITH_VALUE, named_command

    done, prefix = words[:-1], (words[-1] if words else "")
    if named_command(done) is None and not prefix.startswith("-") and not (done and done[-1] in OPTIONS_WITH_VALUE):
        return [c for c in COMMAND_OWNERS if c.startswith(prefix)]  # the command itself: no family imported
    parser, path, pending, positionals, seen = _state(done)
    if pending is not None:
        found = _values(pending, path, prefix, seen)
    elif prefix.startswith("-"):
        found = sorted(o for o, a in parser._option_string_actions.items() if a.help != argparse.SUPPRESS)
    else:
        sub = subcommands(parser)
        if sub is not None:
            found = list(sub.choices)
        else:
            action = _positional(parser, positionals)
            found = _values(action, path, prefix, seen) if action is not None else []
            following = _positional(parser, positionals + 1)
            if action is not None and action.nargs == "?" and following is not None:
                found += _values(following, path, prefix, seen)  # `profiles show [PROJECT] REVISION`
    # Only candidates a shell takes as one word, unquoted, the test `y` copies by (a hostile project
    # name such as `[@click=app.quit]x[/]`, an id ending in a newline or holding an invisible filler
    # is left out; options start with `-` and are the parser's own).
    return [c for c in dict.fromkeys(found)
            if c.startswith(prefix) and (is_shell_word(c) or (c.startswith("-") and is_shell_word("a" + c)))]


def complete_main(argv: list[str]) -> int:
    """`archon-console __complete bash LINE WORDBREAKS` or `__complete zsh WORD...`."""
    if not argv or argv[0] not in SCRIPTS:
        return 2
    if argv[0] == "bash":
        line = argv[1] if len(argv) > 1 else ""
        breaks = argv[2] if len(argv) > 2 else "=:"
        try:
            words = shlex.split(line)
        except ValueError:  # an open quote: complete the unquoted remainder
            words = shlex.split(line + '"') if line.count('"') % 2 else line.split()
        if not line or line[-1].isspace():
            words.append("")
        words = words[1:]  # the program name
        prefix = words[-1] if words else ""
        # bash replaces only the part of the word after its last word-break character (`:` in ids).
        cut = max((prefix.rfind(c) for c in ":=" if c in breaks), default=-1) + 1
        out = [c[cut:] for c in candidates(words)]
    else:
        out = candidates(argv[1:] or [""])
    sys.stdout.write(clean("".join(f"{c}\n" for c in out)))
    return 0


__all__ = ["SCRIPTS", "candidates", "complete_main"]
