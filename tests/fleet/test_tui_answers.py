"""A host's answer to a decision is data, never the verdict, in the fleet console too
(console/tui/fleet_monitor.py over console/fleet/decisions.py, the rule the CLI's
console/cli/fleet_writes.py uses): a decision not answered in time is outcome unknown and read
back; the read-back counts it done only when the status asked for was reached by this session's
actor; a duplicated item or a failing exit code is never a success."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.fleet.decisions import NOT_SENT
from console.tui.fleet_monitor import Answer, Decided, FleetMonitor, result_sentence
from tests.fleet.conftest import peer

HELLO = {"actor": "alice", "actor_source": "forced_command", "read_only": False}
HOST = [SimpleNamespace(name="h1", read_only=False)]


class ScriptedLink:
    """Connects at once; each call awaits `answer(method, params)` (a coroutine function)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict]] = []

    async def connect(self, host):
        return Answer(host, "ok", None, 0, None, HELLO)

    async def call(self, host, method, params):
        self.calls.append((method, params))
        return await self.answer(method, params)

    async def close(self):
        pass


def decide(link, *, deadline: float = 30.0, verb: str = "approve") -> tuple[Decided, FleetMonitor, list]:
    got: list = []
    monitor = FleetMonitor(link, HOST, got.append, deadline=deadline)

    async def go():
        monitor._hello("h1", HELLO)
        monitor._set("h1", phase="ok")
        return await monitor._decide("h1", verb, "apr-1", "r")

    return asyncio.run(go()), monitor, got


# ---------------------------------------------------------------- G3: no answer in time is unknown
def test_the_clients_late_verdict_is_heard_not_the_monitors_own_timeout():
    """The client answers `outcome_unknown` at its deadline, which is later than the monitor's
    read bound: the monitor must wait for it, not call the decision failed."""
    async def late(method, params):
        await asyncio.sleep(0.4)  # the stand-in host: past the monitor's 0.2 s read bound, within a write's
        return Answer("h1", "outcome_unknown", "h1 did not answer the write within 0.4 s")

    outcome, monitor, _ = decide(ScriptedLink(late), deadline=0.2)
    assert outcome.ok is None and "outcome unknown" in outcome.sentence
    assert "apr-1" in monitor._unknown["h1"]


@pytest.mark.parametrize("failure", [RuntimeError("boom"), ConnectionResetError()])
def test_a_client_that_fails_mid_write_leaves_the_outcome_unknown(failure):
    async def broken(method, params):
        raise failure

    outcome, monitor, _ = decide(ScriptedLink(broken))
    assert outcome.ok is None and monitor._unknown["h1"]["apr-1"] == ("approvals.approve", "alice")


@settings(max_examples=60, deadline=None)
@given(state=st.text(max_size=20) | st.sampled_from(["timeout", "outcome_unknown", "remote_error", "ok",
                                                     *sorted(NOT_SENT)]))
def test_only_a_state_before_sending_or_a_refusal_is_a_failure(state):
    ok, _ = result_sentence(Answer("h1", state, "words", None, None), "apr-1")
    if state in NOT_SENT or state == "remote_error":
        assert ok is False
    else:
        assert ok is None  # sent (or maybe sent), no result for the id: read back, never "failed"/"done"


@pytest.mark.slow
def test_a_host_that_never_answers_the_write_is_outcome_unknown_and_read_back(write_hosts):
    """The real client and a server that answers hello and then nothing (tests/fleet/peer.py hang)."""
    from console.tui.fleet_link import ClientLink

    fleet = write_hosts({"h1": {"ssh": "h1", "remote": peer("--mode", "hang")}})
    hosts = list(fleet.hosts.values())

    async def go():
        link = ClientLink(fleet, hosts, deadline=2.0)
        monitor = FleetMonitor(link, hosts, lambda _: None, deadline=2.0)
        try:
            monitor._set("h1", phase="ok")
            return await monitor._decide("h1", "approve", "apr-1", "r"), monitor
        finally:
            await link.close()

    outcome, monitor = asyncio.run(go())
    assert outcome.ok is None, outcome
    assert "apr-1" in monitor._unknown["h1"]


# ---------------------------------------------------------------- G4: the read-back's rule
def event(status: str, who: str, kind: str = "human") -> dict:
    return {"to_status": status, "actor_classification": kind, "actor_reference": who}


def reread(verb: str, shown: dict) -> Decided:
    async def lost_then_shown(method, params):
        if method == "approvals.show":
            return Answer("h1", "ok", None, 0, {"id": "apr-1", **shown}, HELLO)
        return Answer("h1", "outcome_unknown", "the connection ended")

    link = ScriptedLink(lost_then_shown)
    _, monitor, got = decide(link, verb=verb)
    asyncio.run(monitor._reread_unknown("h1"))
    reads = [d for d in got if isinstance(d, Decided) and d.verb == "reread"]
    assert len(reads) == 1 and not monitor._unknown["h1"]
    return reads[0]


@pytest.mark.parametrize("verb,shown", [
    ("approve", {"status": "denied", "events": [event("denied", "alice")]}),
    ("approve", {"status": "expired", "events": [event("expired", "archon", "system")]}),
    ("approve", {"status": "approved", "events": [event("approved", "mallory")]}),
    ("approve", {"status": "approved", "events": [event("approved", "alice", "agent")]}),
    ("approve", {"status": "approved"}),
    ("approve", {"status": "pending", "events": []}),
    ("deny", {"status": "approved", "events": [event("approved", "alice")]}),
    ("deny", {"status": "denied", "events": [event("denied", "alice"), event("pending", "bob"),
                                            event("denied", "bob")]}),
])
def test_a_lost_decision_read_back_is_done_only_when_this_actor_made_it(verb, shown):
    back = reread(verb, shown)
    assert back.ok is False, back
    if shown["status"] == {"approve": "approved", "deny": "denied"}[verb]:
        assert "not by you" in back.sentence


@pytest.mark.parametrize("verb,status", [("approve", "approved"), ("deny", "denied"), ("revoke", "invalidated")])
def test_a_lost_decision_this_actor_made_reads_back_as_done(verb, status):
    back = reread(verb, {"status": status, "events": [event(status, "alice")]})
    assert back.ok is True and f"apr-1 on h1 is {status} (read again" in back.sentence


# ---------------------------------------------------------------- G9: the items and the exit code
OK_ITEM = {"id": "apr-1", "ok": True, "state": "approved", "message": "approved"}
NO_ITEM = {"id": "apr-1", "ok": False, "state": None, "message": "refused"}


@pytest.mark.parametrize("items", [[OK_ITEM, NO_ITEM], [NO_ITEM, OK_ITEM], [OK_ITEM, OK_ITEM], [],
                                   [{**OK_ITEM, "id": "apr-2"}]])
def test_an_id_answered_twice_or_not_at_all_is_unknown(items):
    ok, said = result_sentence(Answer("h1", "ok", None, 0, items, HELLO), "apr-1")
    assert ok is None and "outcome unknown" in said


@given(code=st.sampled_from([1, 2, 3, 4]))
def test_a_success_under_a_failing_exit_is_not_done(code):
    ok, _ = result_sentence(Answer("h1", "ok", None, code, [OK_ITEM], HELLO), "apr-1")
    assert ok is not True


def test_one_item_under_exit_zero_is_the_hosts_answer():
    assert result_sentence(Answer("h1", "ok", None, 0, [OK_ITEM], HELLO), "apr-1") == (True, "approved")
    assert result_sentence(Answer("h1", "ok", None, 1, [NO_ITEM], HELLO), "apr-1") == (False, "refused")
