"""This machine's policy for its hosts, enforced on this machine: what hosts.toml says a host may
be sent is decided here, before the host is contacted, never left to the host (console/fleet/client.py
asks `refused_locally` before every call)."""

from __future__ import annotations

from typing import Any

from console.fleet.hosts import Host
from console.text import one_line


def refused_locally(host: Host, write: bool) -> str | None:
    """hosts.toml's `read_only = true` is this machine's policy, enforced here: no write method is
    ever sent to such a host (its `--read-only` on the remote command line is not enough: a
    forced-command key or a `remote` wrapper drops it, an older server ignores it). State
    `read_only`: refused before the host was contacted, nothing sent. The sentence, or None."""
    if not (host.read_only and write):
        return None
    return one_line(f"{host.name} is read-only in hosts.toml; nothing was sent to it.")


def read_only_mismatch(host: Host, hello: Any) -> str | None:
    """The note for a host hosts.toml marks read-only whose server says it is not (no write is sent
    to it anyway, `refused_locally`; but its forced command or wrapper ignores `--read-only`)."""
    if host.read_only and isinstance(hello, dict) and hello.get("read_only") is not True:
        return one_line(f"{host.name} is read-only in hosts.toml, but its server does not run read-only (its "
                        "forced command or remote wrapper drops --read-only); no write is sent to it from here.")
    return None


__all__ = ["read_only_mismatch", "refused_locally"]
