"""Random approve/deny/revoke/expire/clock sequences against a model of the approval rules.

After every step the database must agree with the model: each request's status, who moved it
there, an event history numbered 1..n without gaps whose from/to statuses chain, and
`decision_at` present exactly when a human decision was recorded.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from console.db.connect import open_database
from console.errors import Refusal
from console.services import approvals
from console.services.approval_expiry import expire_overdue
from console.services.approval_transitions import SYSTEM_ACTOR, DecisionRefused
from tests.conftest import make_schema
from tests.approvals_helpers import NOW, add_project, add_request, connect

pytestmark = pytest.mark.slow

ACTORS = ("alice", "bob", "carol")
REQUESTS = {  # id -> (minutes until expiry, requester)
    "r0": (10, "alice"),
    "r1": (30, "bob"),
    "r2": (60, "carol"),
    "r3": (5, None),
    "r4": (120, "alice"),
}
DECISIONS = approvals.DECISIONS

_TEMPLATE: Path | None = None


def template() -> Path:
    """One seeded database per test run; each machine works on a copy."""
    global _TEMPLATE
    if _TEMPLATE is None:
        path = Path(tempfile.mkdtemp(prefix="approvals-sm-")) / "template.db"
        make_schema(path, "1.10.0")
        conn = connect(path)
        add_project(conn, "p1")
        for rid, (minutes, requester) in REQUESTS.items():
            add_request(conn, rid, "p1", expires_at=NOW + timedelta(minutes=minutes),
                        authority={"requested_by": requester} if requester else {"scope": "push"})
        conn.close()
        _TEMPLATE = path
    return _TEMPLATE


class ApprovalMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="approvals-sm-run-"))
        self.path = self.dir / "archon.db"
        shutil.copy(template(), self.path)
        self.handle = open_database(self.path)
        self.handle.conn.execute("PRAGMA synchronous = OFF")  # speed only; durability is not under test
        self.now = NOW
        self.status = {rid: "pending" for rid in REQUESTS}
        self.by = {rid: ("system", "archon") for rid in REQUESTS}  # who moved it into its status
        self.events = {rid: 1 for rid in REQUESTS}
        self.decided = {rid: False for rid in REQUESTS}

    def teardown(self):
        self.handle.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def overdue(self, rid):
        return self.now >= NOW + timedelta(minutes=REQUESTS[rid][0])

    def expire_in_model(self, rid):
        self.status[rid] = "expired"
        self.by[rid] = ("system", SYSTEM_ACTOR)
        self.events[rid] += 1

    @rule(rid=st.sampled_from(sorted(REQUESTS)), actor=st.sampled_from(ACTORS),
          decision=st.sampled_from(sorted(DECISIONS)), confirm=st.booleans())
    def decide(self, rid, actor, decision, confirm):
        from_status, to_status = DECISIONS[decision]
        status = self.status[rid]
        try:
            result = approvals.decide(self.handle, rid, decision, actor=actor, reason="because", now=self.now,
                                      requester_unknown_ok=confirm)
        except DecisionRefused as exc:
            result, refused = None, exc
        else:
            refused = None

        if status == to_status and self.by[rid] == ("human", actor):
            assert result is not None and result.noop and result.state == status
        elif status != from_status:
            assert refused is not None and refused.state == status
        elif decision != "revoke" and REQUESTS[rid][1] == actor:
            assert refused is not None and "four-eyes" in refused.reason
        elif self.overdue(rid):
            assert refused is not None and refused.state == "expired"
            self.expire_in_model(rid)
        elif decision == "approve" and REQUESTS[rid][1] is None and not confirm:
            assert refused is not None and refused.state == status and "--requester-unknown-ok" in refused.hint
        else:
            assert result is not None and result.ok and not result.noop and result.state == to_status
            self.status[rid] = to_status
            self.by[rid] = ("human", actor)
            self.events[rid] += 1
            if to_status in ("approved", "denied"):
                self.decided[rid] = True

    @rule()
    def sweep(self):
        expected = sorted(r for r, s in self.status.items() if s in ("pending", "approved") and self.overdue(r))
        results = expire_overdue(self.handle, actor="ops", now=self.now)
        assert sorted(r.id for r in results) == expected
        for rid in expected:
            self.expire_in_model(rid)

    @rule(minutes=st.sampled_from([1, 5, 10, 25]))  # lands exactly on expiries often
    def advance_clock(self, minutes):
        self.now += timedelta(minutes=minutes)

    @rule(actor=st.sampled_from(ACTORS))
    def read_only_writes_nothing(self, actor):
        with open_database(self.path, read_only=True) as ro:
            try:
                approvals.approve(ro, "r0", actor=actor, now=self.now)
            except Refusal:
                pass
            else:  # pragma: no cover - would be a bug
                raise AssertionError("read-only approve succeeded")

    @invariant()
    def database_matches_model(self):
        conn = self.handle.conn
        rows = {r["id"]: r for r in conn.execute("SELECT id, status, decision_at FROM approval_requests")}
        for rid in REQUESTS:
            assert rows[rid]["status"] == self.status[rid], rid
            assert (rows[rid]["decision_at"] is not None) == self.decided[rid], rid
            evs = conn.execute(
                "SELECT sequence, from_status, to_status, actor_classification, actor_reference "
                "FROM approval_request_events WHERE approval_request_id = ? ORDER BY sequence", (rid,)
            ).fetchall()
            assert [e["sequence"] for e in evs] == list(range(1, self.events[rid] + 1)), rid
            assert evs[0]["from_status"] is None and evs[0]["to_status"] == "pending"
            for before, after in zip(evs, evs[1:]):
                assert after["from_status"] == before["to_status"]
            assert evs[-1]["to_status"] == self.status[rid]
            assert (evs[-1]["actor_classification"], evs[-1]["actor_reference"]) == self.by[rid]


ApprovalMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestApprovalMachine = ApprovalMachine.TestCase
