"""Who is acting: the operating-system account the console runs as, beside the name it was given.

`--as NAME` (or `$ARCHON_CONSOLE_ACTOR`) is a declaration anyone can make, so it cannot carry
four-eyes or claim ownership on its own (docs/decisions.md, D21). The account the process runs as
(its effective uid, that uid's login, and the host) is what the kernel vouches for: every event the
console writes records it beside the declared name (`event_metadata`), four-eyes compares the login
as well as the declared name (four_eyes.py), and a claim id carries a tag only this account, host
and declared name produce (`claim_owner_tag`).

Tests may replace `current` (monkeypatch) to act as another account; nothing else can.
"""

from __future__ import annotations

import os
from console.records import dataclass
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

CLAIM_TAG_LENGTH = 16  # hex digits of the owner tag at the end of a console claim id


@dataclass(frozen=True)
class OsIdentity:
    """`login` is None when the uid has no passwd entry (some containers). `unverified` says why the
    kernel does not vouch for this account (a user namespace maps any uid an unprivileged user
    asks for; a uid without a passwd entry names nobody): then four-eyes refuses to approve and
    no claim counts as this account's (four_eyes.py, environment_rules.py; docs/decisions.md, D21)."""

    login: str | None
    uid: int
    host: str
    unverified: str | None = None

    @property
    def verified(self) -> bool:
        return self.unverified is None


IDENTITY_MAP = ["0", "0", "4294967295"]  # /proc/self/uid_map of the initial user namespace


def namespace_problem() -> str | None:
    """Why the uid this process reports is not the kernel's own account, or None. An unprivileged
    `unshare --user --map-user=N` makes `geteuid()` return N; only the initial user namespace maps
    uids one to one. Unreadable files (no /proc) say nothing either way."""
    try:
        with open("/proc/self/uid_map", encoding="ascii", errors="replace") as f:
            uid_map = f.read(4096)
    except OSError:
        uid_map = None
    if uid_map is not None and uid_map.split() != IDENTITY_MAP:
        return "the console runs in a user namespace, where any user can choose the uid it reports"
    try:
        if os.readlink("/proc/self/ns/user") != os.readlink("/proc/1/ns/user"):
            return "the console runs in another user namespace than the system's"
    except OSError:
        pass
    return None


@lru_cache(maxsize=1)
def _probe() -> OsIdentity:
    import pwd

    uid = os.geteuid()
    try:
        login: str | None = pwd.getpwuid(uid).pw_name or None
    except KeyError:
        login = None
    problem = namespace_problem()
    if problem is None and login is None:
        problem = f"uid {uid} has no passwd entry, so no login names who acts"
    # uname's nodename is what socket.gethostname() returns, without importing socket at start.
    return OsIdentity(login, uid, os.uname().nodename or "host", problem)


def current() -> OsIdentity:
    """The account this process acts as (read once; a process cannot change it under the console)."""
    return _probe()


_SESSION: dict[str, str | None] = {}


def set_session(*, actor_source: str, ssh_connection: str | None) -> None:
    """How `archon-console serve` resolved who acts (console/services/host_identity.py), recorded
    in every event this process writes from now on; set once per server process, before any write."""
    _SESSION.clear()
    _SESSION.update(actor_source=actor_source, ssh_connection=ssh_connection)


def event_metadata(declared: str | None) -> dict[str, Any]:
    """The keys every event the console writes adds to its `metadata_json`: the OS account, the
    name given with `--as` as `declared_as` (omitted for events nobody declared a name for), and
    under `archon-console serve` how the host resolved that name (`actor_source`) and the SSH
    connection it came over (`ssh_connection`, `$SSH_CONNECTION`; None when not over SSH)."""
    me = current()
    keys: dict[str, Any] = {"os_login": me.login, "os_uid": me.uid, "os_host": me.host}
    if me.unverified:
        keys["os_identity"] = "unverified"
        keys["os_identity_problem"] = me.unverified
    if declared is not None:
        keys["declared_as"] = declared
    keys.update(_SESSION)
    return keys


def account_of(metadata_json: Any) -> str | None:
    """`login@host` (`uid N@host` without a login) as `event_metadata` recorded it, to show beside
    an event's declared actor; None for events without it (archon's own, older consoles', or
    unreadable metadata, which is database text: bounded and never trusted to parse)."""
    from console.text import json_or_none

    meta = json_or_none(metadata_json) if isinstance(metadata_json, str) else None
    if not isinstance(meta, dict) or "os_uid" not in meta:
        return None
    login, host = meta.get("os_login"), meta.get("os_host")
    who = login if isinstance(login, str) and login else f"uid {meta.get('os_uid')}"
    who = f"{who}@{host}" if isinstance(host, str) and host else who
    return f"{who} (unverified)" if meta.get("os_identity") == "unverified" else who


def claim_owner_tag(declared: str) -> str:
    """What ends every claim id this account creates as `declared` on this host. Ownership is this
    exact value at the exact end of the id, never a prefix or a name parsed from the id."""
    import hashlib  # only claims need it

    me = current()
    seed = f"archon-console claim\0{me.uid}\0{me.host}\0{declared}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(seed).hexdigest()[:CLAIM_TAG_LENGTH]


__all__ = ["CLAIM_TAG_LENGTH", "IDENTITY_MAP", "OsIdentity", "account_of", "claim_owner_tag", "current", "event_metadata",
           "namespace_problem", "set_session"]
