"""Who acts in an `archon-console serve` session: resolved on the host, never asserted by the client.

A fleet client reaches the host through its own `ssh`; whatever it sends could name anyone, so the
name every write records is decided here, from what the host controls, in this order:

1. `--actor NAME` from the host's admin: believed when `$SSH_ORIGINAL_COMMAND` is set (sshd sets it
   only when a forced command ran instead of the client's, e.g. `restrict,command="archon-console
   serve --stdio --actor=alice"` in authorized_keys) or when the process is not under SSH at all
   (no `$SSH_CONNECTION`: a local admin started it). Under SSH without a forced command the client
   chose the command line, so `--actor` is refused (`ServeRefused`, exit 2), and so is a `--policy`
   other than the default (it would say which accounts are shared).
2. The Key ID of the SSH user certificate the session logged in with (`$SSH_USER_AUTH`, sshd's
   `ExposeAuthInfo yes`; console/services/ssh_certificate.py).
3. The login of the account the server runs as, unless the host's policy lists it in
   `shared_accounts`: then nobody in particular is acting, the session is read-only and a write is
   answered `identity_ambiguous`.

The limit, stated in SECURITY.md: the environment (`$SSH_ORIGINAL_COMMAND`, `$SSH_USER_AUTH`) is the
account's own, so a user who has a shell on the account can set it; the account is the boundary, and
every event also records the OS login (console/services/identity.py). Sources 1 and 2 name a person
behind a shared account only where that account's keys are `restrict`ed to a forced command.

Every name must also pass the console's own actor rules (console/services/base.py
`validate_actor`): a certificate or login name that fails them leaves the session read-only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

from console.errors import EXIT_UNUSABLE, ConsoleError, UsageError

DEFAULT_POLICY = "/etc/archon-console/serve.toml"  # `serve --policy`'s default: the host admin's file
POLICY_KEYS = {"shared_accounts": "a list of login names", "read_only": "true or false"}
_SSH_CONNECTION = re.compile(r"[0-9A-Fa-f.:%a-z]{1,64} [0-9]{1,5} [0-9A-Fa-f.:%a-z]{1,64} [0-9]{1,5}")


class ServeRefused(UsageError):
    """The server cannot start this session (exit 2): one sentence on stderr, nothing on stdout."""


class PolicyUnusable(ConsoleError):
    """The host's policy file exists but cannot be used: the whole session is refused (exit 3), since
    serving without the admin's rules could open writes to a shared account."""

    exit_code = EXIT_UNUSABLE


@dataclass(frozen=True)
class Policy:
    shared_accounts: frozenset[str] = frozenset()
    read_only: bool = False
    path: str | None = None  # None: no policy file


@dataclass(frozen=True)
class HostIdentity:
    """`actor` is None when nobody can be named (then `ambiguous` says why and the session is read-only)."""

    actor: str | None
    source: str  # command_line, forced_command, certificate, login, shared_account
    ambiguous: str | None = None
    ssh_connection: str | None = None
    note: str | None = None  # a source that was present but unusable (logged, not fatal)


def load_policy(path: str | os.PathLike[str], *, named: bool = False) -> Policy:
    """The policy at `path`; an empty Policy when there is no file at the default place; PolicyUnusable
    otherwise. A policy the admin `named` (--policy) that is not there is refused too: a typo in the
    forced command's path would otherwise serve without its rules (read_only, shared accounts)."""
    from console.small_files import SettingsUnusable, read_toml

    try:
        data = read_toml(path, "the serve policy")
    except SettingsUnusable as exc:
        raise PolicyUnusable(f"{exc} The session was refused (the policy must be usable).") from None
    if data is None:
        if named:
            raise PolicyUnusable(f"The serve policy {path} named by --policy does not exist; the session was "
                                 "refused (without it the host's rules would not apply).",
                                 "Fix the path in the forced command, or leave --policy out for the default "
                                 f"{DEFAULT_POLICY}.")
        return Policy()

    def bad(why: str) -> PolicyUnusable:
        return PolicyUnusable(f"The serve policy {path} cannot be used: {why}; the session was refused.",
                              "Fix the file (keys: " + ", ".join(f"{k} = {v}" for k, v in POLICY_KEYS.items()) + ").")

    unknown = sorted(set(data) - set(POLICY_KEYS))
    if unknown:
        raise bad(f"unknown key {unknown[0][:80]!r}")
    shared = data.get("shared_accounts", [])
    if not isinstance(shared, list) or not all(isinstance(name, str) and name for name in shared):
        raise bad("shared_accounts must be a list of login names")
    read_only = data.get("read_only", False)
    if not isinstance(read_only, bool):
        raise bad("read_only must be true or false")
    return Policy(frozenset(shared), read_only, os.fspath(path))


def ssh_connection(env: Mapping[str, str]) -> str | None:
    """`$SSH_CONNECTION` ("client port server port") when it has that shape, for event metadata."""
    value = env.get("SSH_CONNECTION")
    if value is None:
        return None
    return value if _SSH_CONNECTION.fullmatch(value) else "unrecognised"


def _problem(name: str) -> str | None:
    from console.services.base import validate_actor

    try:
        validate_actor(name)
    except ConsoleError as exc:
        return exc.reason
    return None


def require_host_chosen(option: str, env: Mapping[str, str]) -> None:
    """Refuse `option` when the client chose the command line: under SSH without a forced command.
    `--actor` names who acts and `--policy` says which accounts are shared, so both are the host
    admin's (a forced command's) or a local admin's, never the client's."""
    if "SSH_CONNECTION" in env and "SSH_ORIGINAL_COMMAND" not in env:
        raise ServeRefused(f"{option} is believed only from a forced command (restrict,command=... in "
                           "authorized_keys), and this SSH session has none; the session was refused.")


def resolve(actor_option: str | None, policy: Policy, env: Mapping[str, str], login: str | None) -> HostIdentity:
    """Who acts, from the admin's `--actor`, the environment sshd made and the login (see the module
    docstring for the order). ServeRefused for an `--actor` the host cannot believe or accept."""
    connection = ssh_connection(env)
    under_ssh = "SSH_CONNECTION" in env
    if actor_option is not None:
        require_host_chosen("--actor", env)
        problem = _problem(actor_option)
        if problem:
            raise ServeRefused(f"--actor: {problem}")
        source = "forced_command" if under_ssh else "command_line"
        return HostIdentity(actor_option, source, ssh_connection=connection)
    note = None
    auth_file = env.get("SSH_USER_AUTH")
    if auth_file:
        from console.services.ssh_certificate import CertificateUnusable, auth_file_key_ids

        try:
            ids = auth_file_key_ids(auth_file)
        except CertificateUnusable as exc:
            ids, note = [], f"the SSH certificate was not used: {exc}"
        if len(ids) > 1:
            return HostIdentity(None, "certificate", "the session logged in with certificates of several Key IDs",
                                connection, note)
        if ids:
            problem = _problem(ids[0])
            if problem:
                return HostIdentity(None, "certificate", f"the certificate's Key ID cannot name who acts: {problem}",
                                    connection, note)
            return HostIdentity(ids[0], "certificate", ssh_connection=connection, note=note)
    if login is None:
        return HostIdentity(None, "login", "this account has no login name", connection, note)
    if login in policy.shared_accounts:
        return HostIdentity(None, "shared_account",
                            f"the login {login!r} is a shared account in the host's policy {policy.path}; "
                            "log in with a certificate or a forced-command key to act under your own name",
                            connection, note)
    problem = _problem(login)
    if problem:
        return HostIdentity(None, "login", f"the login cannot name who acts: {problem}", connection, note)
    return HostIdentity(login, "login", ssh_connection=connection, note=note)


__all__ = ["DEFAULT_POLICY", "HostIdentity", "POLICY_KEYS", "Policy", "PolicyUnusable", "ServeRefused", "load_policy",
           "require_host_chosen", "resolve", "ssh_connection"]
