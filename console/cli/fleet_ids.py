"""Ids over several hosts: `HOST:ID` names a row on one host; a bare id is looked up on the hosts
selected and accepted only where exactly one host has it.

A prefix is a host only when it is a host name of hosts.toml, so ids that hold a colon themselves
(a profile revision `prj-atlas-api:execution-profile:3`, `PROJECT:N`) stay whole unless their first
part names a host; `eu1:prj-atlas-api:3` is revision `prj-atlas-api:3` on eu1. The decisions here
are functions of what the hosts said (`found`), so they are tested without any host
(tests/fleet/test_fleet_ids.py); console/cli/fleet.py asks the hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from console.errors import UsageError
from console.text import one_line


@dataclass(frozen=True)
class Target:
    """One id as given: `host` when it was written `HOST:ID`, else None until resolved."""

    host: str | None
    id: str
    given: str

    def named(self, host: str | None = None) -> str:
        return f"{host or self.host}:{self.id}"


def split_target(text: str, host_names: Iterable[str]) -> Target:
    head, colon, rest = text.partition(":")
    if colon and rest and head in set(host_names):
        return Target(head, rest, text)
    return Target(None, text, text)


def check_selected(target: Target, selected: list[str]) -> None:
    """`HOST:ID` must name one of the hosts this command runs on (`--host`, `--group`, `--fleet`)."""
    if target.host is not None and target.host not in selected:
        raise UsageError(f"{one_line(target.given, 120)} names host {target.host}, which is not among the hosts "
                         f"selected ({', '.join(selected)}); add --host {target.host}.")


def choose_qualified(target: Target, selected: list[str], found_whole: Mapping[str, bool | None]
                     ) -> tuple[str, Target, str | None]:
    """Where `HOST:ID` goes, from each selected host's answer for the WHOLE text as an id (database
    text is hostile: a row of eu1 may have the id `us1:apr-1`, and what the operator copied from
    eu1's row must not decide us1's apr-1). (host, the target as sent there, a note to say or None).
    The whole text being an id on a selected host: refused as ambiguous when HOST is selected too,
    else taken as that id there (and said). HOST routes the id only when HOST is in the selection."""
    having = [host for host, has in found_whole.items() if has]
    whole = Target(None, target.given, target.given)
    shown = one_line(target.given, 120)
    if target.host in selected:
        if having:
            raise UsageError(
                f"{shown} is ambiguous: it names {one_line(target.id, 120)} on {target.host}, and it is also an id "
                f"on {', '.join(having)} ({', '.join(f'{h}:{shown}' for h in having)}); write the one you mean "
                f"as HOST:ID, or give the id bare with --host {target.host} alone.")
        return target.host, target, None
    if len(having) == 1 and not any(has is None for has in found_whole.values()):
        return having[0], whole, (f"{shown}: {target.host} is not among the hosts selected, so this is taken as the "
                                  f"id {shown} on {having[0]}.")
    check_selected(target, selected)
    raise AssertionError("unreachable")  # check_selected refuses a host outside the selection


def choose_host(target: Target, found: Mapping[str, bool | None]) -> str:
    """The one host that has `target.id`, from each selected host's answer: True (it has it), False
    (it does not), None (it did not answer). Several hosts, none, or one with others silent (the id
    may be on those too): refused with what to write instead."""
    having = [host for host, has in found.items() if has]
    silent = [host for host, has in found.items() if has is None]
    shown = one_line(target.id, 120)
    if len(having) > 1:
        raise UsageError(f"{shown} is on several hosts: {', '.join(f'{h}:{shown}' for h in having)}; "
                         "name the one you mean as HOST:ID.")
    if len(having) == 1 and not silent:
        return having[0]
    if having:
        raise UsageError(f"{shown} is on {having[0]}, and {', '.join(silent)} did not answer (it may be there too); "
                         f"name it as {having[0]}:{shown} to go ahead.")
    if silent:
        raise UsageError(f"{shown} is on none of the hosts that answered, and {', '.join(silent)} did not answer; "
                         "name it as HOST:ID, or try again when they answer.")
    from console.errors import Refusal

    raise Refusal(f"{shown} was not found on any of the hosts selected ({', '.join(found)}).",
                  "`approvals list --fleet` or `envs list --fleet` shows the ids with their hosts.")


def by_host(targets: Iterable[tuple[str, Target]]) -> dict[str, list[str]]:
    """Resolved (host, target) pairs grouped per host, each host's ids in the order given, once each."""
    grouped: dict[str, list[str]] = {}
    for host, target in targets:
        ids = grouped.setdefault(host, [])
        if target.id not in ids:
            ids.append(target.id)
    return grouped


__all__ = ["Target", "by_host", "check_selected", "choose_host", "choose_qualified", "split_target"]
