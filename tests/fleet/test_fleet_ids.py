"""Ids over several hosts (console/cli/fleet_ids.py): `HOST:ID`, and a bare id accepted only where
exactly one host has it."""

from __future__ import annotations

import pytest

from console.cli.fleet_ids import Target, by_host, check_selected, choose_host, split_target
from console.errors import Refusal, UsageError

HOSTS = ("eu1", "us1")


def test_a_prefix_is_a_host_only_when_it_names_one():
    assert split_target("eu1:apr-1", HOSTS) == Target("eu1", "apr-1", "eu1:apr-1")
    assert split_target("apr-1", HOSTS) == Target(None, "apr-1", "apr-1")
    # a revision id keeps its colons; with a host in front, only the host is taken off
    assert split_target("prj-atlas:execution-profile:3", HOSTS).host is None
    assert split_target("eu1:prj-atlas:execution-profile:3", HOSTS) == Target(
        "eu1", "prj-atlas:execution-profile:3", "eu1:prj-atlas:execution-profile:3")
    assert split_target("eu1:", HOSTS).host is None  # nothing after the host is not an id on it


def test_host_id_must_name_a_selected_host():
    check_selected(Target("eu1", "a", "eu1:a"), ["eu1"])
    with pytest.raises(UsageError, match="us1, which is not among the hosts selected"):
        check_selected(Target("us1", "a", "us1:a"), ["eu1"])


def test_bare_id_on_one_host_is_accepted():
    assert choose_host(Target(None, "apr-1", "apr-1"), {"eu1": False, "us1": True}) == "us1"


def test_bare_id_on_several_hosts_is_refused_listing_the_candidates():
    with pytest.raises(UsageError) as caught:
        choose_host(Target(None, "apr-1", "apr-1"), {"eu1": True, "us1": True, "ap1": False})
    assert caught.value.exit_code == 2
    assert "eu1:apr-1, us1:apr-1" in caught.value.reason


def test_bare_id_nowhere_is_not_found_and_a_silent_host_is_never_assumed_empty():
    with pytest.raises(Refusal) as caught:
        choose_host(Target(None, "apr-1", "apr-1"), {"eu1": False, "us1": False})
    assert caught.value.exit_code == 1 and "not found" in caught.value.reason
    with pytest.raises(UsageError, match="us1 did not answer"):
        choose_host(Target(None, "apr-1", "apr-1"), {"eu1": True, "us1": None})
    with pytest.raises(UsageError, match="us1 did not answer"):
        choose_host(Target(None, "apr-1", "apr-1"), {"eu1": False, "us1": None})


def test_ids_grouped_per_host_in_order_once_each():
    pairs = [("eu1", Target(None, "a", "a")), ("us1", Target("us1", "b", "us1:b")), ("eu1", Target("eu1", "c", "eu1:c")),
             ("eu1", Target("eu1", "a", "eu1:a"))]
    assert by_host(pairs) == {"eu1": ["a", "c"], "us1": ["b"]}
