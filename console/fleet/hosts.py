"""The hosts file: which archon hosts the console reaches, and how (README "Fleet").

`$ARCHON_CONSOLE_HOSTS`, else `hosts.toml` in the console's configuration directory. It is the
operator's own file, but what it holds ends up on an ssh command line, so every value is checked
here, once, before anything runs: an alias can never be read by ssh as an option (it is refused
when it starts with `-`, and it is always passed after `--` by console/fleet/transport.py), and
the remote command is split into words here so the transport can quote each one. Every problem is
one sentence and exit 2 (`UsageError`), never a traceback.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from console.errors import UsageError
from console.db.paths import expand_home
from console.small_files import SettingsUnusable, read_toml
from console.text import is_clean

HOSTS_ENV = "ARCHON_CONSOLE_HOSTS"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# What an alias may hold: host names, user@host, IPv6 (with a %zone), ssh:// URIs. ssh expands the
# destination into `ProxyCommand ... %h`, which a shell runs, and only newer OpenSSH releases refuse
# shell metacharacters there; a hosts file shared by a team is not trusted to be free of them.
ALIAS = re.compile(r"[A-Za-z0-9_.@:%+/\[\]-]+")
DEFAULT_REMOTE = "archon-console"
MAX_ALIAS = 255  # ssh's own limit on a host name (NI_MAXHOST is larger; no real alias comes near)
HOST_KEYS = {"ssh", "db", "remote", "read_only", "groups"}


@dataclass(frozen=True)
class Host:
    """One `[hosts.NAME]` table. `remote` is the command as written; `remote_words` the words the
    transport quotes one by one on the remote command line."""

    name: str
    ssh: str
    db: str | None = None
    remote: str = DEFAULT_REMOTE
    read_only: bool = False
    groups: tuple[str, ...] = ()

    @property
    def remote_words(self) -> tuple[str, ...]:
        return tuple(shlex.split(self.remote))


@dataclass(frozen=True)
class Fleet:
    """Every host of the file, in the file's order; `ssh_command` is how ssh is run."""

    hosts: dict[str, Host]
    ssh_command: tuple[str, ...]
    path: Path


def hosts_path() -> Path:
    explicit = os.environ.get(HOSTS_ENV)
    if explicit:
        return expand_home(explicit, HOSTS_ENV)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "archon-console" / "hosts.toml"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Bad(Exception):
    """One problem with the file, as the middle of the sentence `load_fleet` makes."""


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{where} must be a string")
    if "\x00" in value or not is_clean(value, allow_newlines=False):
        raise _Bad(f"{where} holds a control or invisible character")
    return value


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise _Bad(f"{where} {_show(value)} is not a name (a letter or digit, then letters, digits, '_', '.' or '-', "
                   "at most 64)")
    return value


def _alias(value: object, where: str) -> str:
    alias = _text(value, where)
    if not alias:
        raise _Bad(f"{where} is empty")
    if alias.startswith("-"):
        raise _Bad(f"{where} {_show(alias)} starts with '-', which ssh would read as an option")
    if any(ch.isspace() for ch in alias):
        raise _Bad(f"{where} {_show(alias)} holds a space")
    if not ALIAS.fullmatch(alias):
        raise _Bad(f"{where} {_show(alias)} holds a character a proxy command could read as shell syntax (an alias "
                   "is letters, digits and . _ - @ : % + / [ ])")
    if len(alias) > MAX_ALIAS:
        raise _Bad(f"{where} is longer than {MAX_ALIAS} characters")
    return alias


def _remote(value: object, where: str) -> str:
    remote = _text(value, where)
    try:
        words = shlex.split(remote)
    except ValueError as exc:
        raise _Bad(f"{where} {_show(remote)} cannot be split into words ({exc})") from None
    if not words:
        raise _Bad(f"{where} is empty")
    if words[0].startswith("-"):
        raise _Bad(f"{where} {_show(remote)} starts with an option, not a command")
    return remote


def _host(name: str, table: object) -> Host:
    where = f"[hosts.{name}]"
    if not isinstance(table, dict):
        raise _Bad(f"hosts.{name} must be a table")
    unknown = sorted(set(table) - HOST_KEYS)
    if unknown:
        raise _Bad(f"{where} has an unknown key {_show(unknown[0])} (use {', '.join(sorted(HOST_KEYS))})")
    if "ssh" not in table:
        raise _Bad(f"{where} has no ssh = \"ALIAS\" (an alias or user@host that ssh understands)")
    ssh = _alias(table["ssh"], f"{where} ssh")
    db = table.get("db")
    if db is not None:
        db = _text(db, f"{where} db")
        if not db.startswith("/"):
            raise _Bad(f"{where} db {_show(db)} is not an absolute path")
    remote = _remote(table.get("remote", DEFAULT_REMOTE), f"{where} remote")
    read_only = table.get("read_only", False)
    if not isinstance(read_only, bool):
        raise _Bad(f"{where} read_only must be true or false")
    groups = table.get("groups", [])
    if not isinstance(groups, list):
        raise _Bad(f"{where} groups must be a list of names")
    groups = tuple(dict.fromkeys(_name(g, f"{where} group") for g in groups))
    return Host(name, ssh, db, remote, read_only, groups)


def _ssh_command(table: object) -> tuple[str, ...]:
    if not isinstance(table, dict):
        raise _Bad("ssh must be a table")
    unknown = sorted(set(table) - {"command"})
    if unknown:
        raise _Bad(f"[ssh] has an unknown key {_show(unknown[0])} (use command)")
    command = table.get("command", ["ssh"])
    if not isinstance(command, list) or not command:
        raise _Bad("[ssh] command must be a list of words, the program first")
    words = tuple(_text(word, "[ssh] command") for word in command)
    if not words[0] or words[0].startswith("-"):
        raise _Bad("[ssh] command must start with the program to run")
    return words


def parse_fleet(data: dict[str, Any], path: Path) -> Fleet:
    """The fleet a parsed hosts file describes; `UsageError` naming the first problem."""
    try:
        unknown = sorted(set(data) - {"ssh", "hosts"})
        if unknown:
            raise _Bad(f"it has an unknown table or key {_show(unknown[0])} (use [ssh] and [hosts.NAME])")
        command = _ssh_command(data.get("ssh", {}))
        tables = data.get("hosts", {})
        if not isinstance(tables, dict):
            raise _Bad("hosts must be tables, one [hosts.NAME] for each host")
        hosts = {_name(name, "the host name"): _host(name, table) for name, table in tables.items()}
    except _Bad as exc:
        raise UsageError(f"Cannot use the hosts file {path}: {exc}.", "Fix it and try again.") from None
    return Fleet(hosts, command, path)


def _private_group(info: os.stat_result) -> bool:
    """A group only the owner is in (a user private group, as Debian's umask 002 leaves files):
    group-writable is then the owner's alone. The rule ssh applies to its own config."""
    import grp
    import pwd

    try:
        group, owner = grp.getgrgid(info.st_gid), pwd.getpwuid(info.st_uid)
    except KeyError:
        return False
    return group.gr_name == owner.pw_name and set(group.gr_mem) <= {owner.pw_name}


def _check_owner(path: Path) -> None:
    """The file names the program the console runs (`[ssh] command`) and where: like ssh with its
    own config, the console refuses a hosts file, or a directory holding it, that another user
    could change (owned by someone else, or writable by others; a sticky directory such as /tmp
    keeps others from replacing a file they do not own)."""
    uid = os.getuid()
    for what, target in (("the hosts file", path), ("the directory of the hosts file", path.parent)):
        try:
            info = os.stat(target)
        except OSError:
            return  # an absent file is said by the read; an unreadable one too
        sticky = target != path and info.st_mode & stat.S_ISVTX
        if info.st_uid not in (uid, 0):
            raise UsageError(f"Cannot use {path}: {what} belongs to another user (uid {info.st_uid}), who could "
                             "change the command the console runs.", "Use a hosts file of your own.")
        if (info.st_mode & 0o002 or info.st_mode & 0o020 and not _private_group(info)) and not sticky:
            raise UsageError(f"Cannot use {path}: {what} can be changed by other users, who could change the "
                             "command the console runs.", f"Run chmod go-w {target}.")


def load_fleet(path: str | os.PathLike[str] | None = None) -> Fleet:
    """The hosts file at `path` (else `hosts_path()`); `UsageError` when it is absent or unusable."""
    path = Path(path) if path is not None else hosts_path()
    _check_owner(Path(os.path.abspath(path)))
    try:
        data = read_toml(path, "the fleet's hosts")
    except SettingsUnusable as exc:
        raise UsageError(str(exc)) from None
    if data is None:
        raise UsageError(f"There is no hosts file at {path}.",
                         'Create it with a [hosts.NAME] table for each host (ssh = "ALIAS"), or set '
                         f"{HOSTS_ENV}.")
    return parse_fleet(data, path)


def _unknown(kind: str, wanted: str, known: Iterable[str], path: Path) -> UsageError:
    from console.suggest import did_you_mean  # the one rule for "did you mean"

    known = list(known)
    near = did_you_mean(wanted, known)
    if near:
        hint = near
    elif known:
        hint = f"The {kind}s are: {', '.join(known[:20])}{', ...' if len(known) > 20 else ''}."
    else:
        hint = f"{path} names no {kind}s."
    return UsageError(f"No {kind} named {_show(wanted)} in {path}.", hint)


def select(fleet: Fleet, names: Iterable[str] = (), groups: Iterable[str] = (), everything: bool = False) -> list[Host]:
    """The hosts named, the members of the groups named, or all with `everything`, each once and in
    the file's order. An unknown name or group is a `UsageError` with the closest candidates."""
    chosen: set[str] = set()
    if everything:
        chosen.update(fleet.hosts)
    for name in names:
        if name not in fleet.hosts:
            raise _unknown("host", name, fleet.hosts, fleet.path)
        chosen.add(name)
    all_groups = list(dict.fromkeys(g for host in fleet.hosts.values() for g in host.groups))
    for group in groups:
        if group not in all_groups:
            raise _unknown("group", group, all_groups, fleet.path)
        chosen.update(host.name for host in fleet.hosts.values() if group in host.groups)
    if not chosen:
        raise UsageError(f"No host is selected: {fleet.path} names none." if everything or not fleet.hosts
                         else "No host is selected.", "Name one with --host NAME, --group G or --fleet.")
    return [host for name, host in fleet.hosts.items() if name in chosen]


__all__ = ["ALIAS", "DEFAULT_REMOTE", "Fleet", "HOSTS_ENV", "Host", "NAME", "hosts_path", "load_fleet", "parse_fleet", "select"]
