"""Random claim / takeover / release / complete sequences by three actors, checked against a model.

Archon acts too: it admits and ends leases (through its own admission trigger) and moves
lifecycle states behind the console's back. After every step the database's claim triple,
lifecycle state (which only archon moves: a completion hands off, it never transitions),
retirement request, hand-off columns and event sequences must match the model.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from console.clock import db_time
from console.errors import Refusal
from console.services import environment_claims
from console.services.environment_rules import (ADMITTING_STATES, ALLOWED_STATES, OPERATIONS, STATES,
                                                claim_holder)
from tests.conftest import make_schema
from tests.environments_support import T0, add_env, add_lease, add_project, handle, raw, release_lease

pytestmark = pytest.mark.slow

ACTORS = ("alice", "bob", "carol")
ENVS = {"e1": "ready", "e2": "cleanup_pending"}
STALE = timedelta(minutes=15)


@dataclass
class Claim:
    holder: str
    op: str
    at: object


@dataclass
class EnvModel:
    state: str
    claim: Claim | None = None
    retire_requested: bool = False
    lease: str | None = None
    idle_stop_at: object = None  # what completing a stop hands to archon
    cleanup_retry_at: object = None
    events: int = 0
    last: tuple[str, str] | None = None


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("claims") / "template.db"
    make_schema(path, "1.10.0")
    conn = raw(path)
    add_project(conn)
    for env_id, state in ENVS.items():
        add_env(conn, env_id, state)
    conn.close()
    return path


class ClaimMachine(RuleBasedStateMachine):
    template = None  # set by the test
    workdir = None

    @initialize()
    def setup(self):
        type(self).counter = getattr(type(self), "counter", 0) + 1
        self.path = self.workdir / f"run-{self.counter}.db"
        shutil.copy(self.template, self.path)
        self.h = handle(self.path)
        self.archon = raw(self.path)
        for conn in (self.h.conn, self.archon):  # no fsync per commit: this tests logic, not durability
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("PRAGMA journal_mode = MEMORY")
        self.now = T0
        self.model = {env_id: EnvModel(state) for env_id, state in ENVS.items()}
        self.runs = 0

    def teardown(self):
        if hasattr(self, "h"):
            self.h.close()
            self.archon.close()
            self.path.unlink(missing_ok=True)

    # --- helpers ---------------------------------------------------------------------------
    def _stale(self, claim: Claim) -> bool:
        return (self.now - claim.at).total_seconds() > STALE.total_seconds()

    def _expect(self, outcome, fn):
        try:
            result = fn()
        except Refusal:
            assert outcome == "refuse", f"expected {outcome}, got a refusal"
            return None
        assert outcome != "refuse", f"expected a refusal, got {result.message}"
        assert result.noop == (outcome == "noop"), result.message
        return result

    def _log(self, m: EnvModel, kind: str, actor: str) -> None:
        m.events += 1
        m.last = (kind, actor)

    # --- console actions -------------------------------------------------------------------
    @rule(env_id=st.sampled_from(sorted(ENVS)), actor=st.sampled_from(ACTORS),
          op=st.sampled_from(OPERATIONS), takeover=st.booleans())
    def claim(self, env_id, actor, op, takeover):
        m = self.model[env_id]
        c = m.claim
        if c and c.holder == actor:
            outcome = "noop" if c.op == op else "refuse"
        elif c and (not takeover or c.op != op or not self._stale(c)):
            outcome = "refuse"  # a takeover keeps the operation it takes over
        elif m.state not in ALLOWED_STATES[op]:
            outcome = "refuse"
        else:
            outcome = "ok"
        self._expect(outcome, lambda: environment_claims.claim(self.h, env_id, op, actor, now=self.now, takeover=takeover,
                                                 reason="r" if takeover else None, stale_after=STALE))
        if outcome == "ok":
            self._log(m, "operation_taken_over" if c else "operation_claimed", actor)
            m.claim = Claim(actor, op, self.now)
            m.retire_requested = m.retire_requested or op == "retire"

    def _who(self, m: EnvModel, actor: str) -> str:
        """'holder' picks whoever holds the claim, so completions are not left to luck."""
        if actor == "holder":
            return m.claim.holder if m.claim else ACTORS[0]
        return actor

    @rule(env_id=st.sampled_from(sorted(ENVS)), actor=st.sampled_from(ACTORS + ("holder",)), takeover=st.booleans())
    def release(self, env_id, actor, takeover):
        m = self.model[env_id]
        actor = self._who(m, actor)
        c = m.claim
        if c is None:
            outcome = "noop" if m.last == ("operation_released", actor) else "refuse"
        elif c.holder != actor and (not takeover or not self._stale(c)):
            outcome = "refuse"
        else:
            outcome = "ok"
        self._expect(outcome, lambda: environment_claims.release(self.h, env_id, actor, now=self.now, takeover=takeover,
                                                   reason="r" if takeover else None, stale_after=STALE))
        if outcome == "ok":
            m.claim = None
            self._log(m, "operation_released", actor)

    @rule(env_id=st.sampled_from(sorted(ENVS)), actor=st.sampled_from(ACTORS + ("holder", "holder")))
    def complete(self, env_id, actor):
        m = self.model[env_id]
        actor = self._who(m, actor)
        c = m.claim
        if c is None:
            outcome = "noop" if m.last == ("operation_completed", actor) else "refuse"
        elif c.holder != actor or c.op == "reset" or m.state not in ALLOWED_STATES[c.op]:
            outcome = "refuse"  # a reset claim is only ever released
        elif c.op == "stop" and m.lease:
            outcome = "refuse"  # no stop is handed to archon while a run holds the environment
        else:
            outcome = "ok"  # a lease does not stop the other hand-offs: nothing is stopped or retired here
        result = self._expect(outcome, lambda: environment_claims.complete(self.h, env_id, actor, now=self.now))
        if outcome == "ok":
            if c.op == "stop":
                m.idle_stop_at = self.now
            elif c.op == "cleanup_retry":
                m.cleanup_retry_at = self.now
            m.claim = None  # the state is archon's: it does not change
            self._log(m, "operation_completed", actor)
            assert result.state == m.state

    # --- the world moving on ---------------------------------------------------------------
    @rule(minutes=st.integers(min_value=1, max_value=20))
    def advance(self, minutes):
        self.now += timedelta(minutes=minutes)

    @rule(env_id=st.sampled_from(sorted(ENVS)))
    def archon_admits_a_lease(self, env_id):
        m = self.model[env_id]
        admits = m.state in ADMITTING_STATES and not m.retire_requested and m.claim is None and not m.lease
        self.runs += 1
        run_id = f"run-{self.runs}"
        try:
            add_lease(self.archon, env_id, run_id)
        except sqlite3.IntegrityError:
            assert not admits, "archon refused a lease the model admits"
            return
        assert admits, "archon admitted a lease the model refuses"
        m.lease = run_id

    @rule(env_id=st.sampled_from(sorted(ENVS)))
    def archon_ends_the_lease(self, env_id):
        m = self.model[env_id]
        if m.lease:
            release_lease(self.archon, m.lease)
            m.lease = None

    @rule(env_id=st.sampled_from(sorted(ENVS)), state=st.sampled_from(STATES))
    def archon_moves_the_state(self, env_id, state):
        self.archon.execute("UPDATE execution_environments SET lifecycle_state = ? WHERE id = ?", (state, env_id))
        self.model[env_id].state = state

    # --- the database agrees ---------------------------------------------------------------
    @invariant()
    def database_matches_model(self):
        if not hasattr(self, "h"):
            return
        for env_id, m in self.model.items():
            row = self.archon.execute("SELECT * FROM execution_environments WHERE id = ?", (env_id,)).fetchone()
            triple = (row["operation_claim_id"], row["operation_kind"], row["operation_claimed_at"])
            if m.claim is None:
                assert triple == (None, None, None)
            else:
                assert claim_holder(triple[0]) == m.claim.holder
                assert triple[1:] == (m.claim.op, db_time(m.claim.at))
            assert row["lifecycle_state"] == m.state  # only archon_moves_the_state changes it
            assert row["idle_stop_at"] == (db_time(m.idle_stop_at) if m.idle_stop_at else None)
            assert row["cleanup_retry_at"] == (db_time(m.cleanup_retry_at) if m.cleanup_retry_at else None)
            assert (row["retirement_requested_at"] is not None) == m.retire_requested
            sequences = [r[0] for r in self.archon.execute(
                "SELECT sequence FROM execution_environment_events WHERE environment_id = ? ORDER BY sequence",
                (env_id,))]
            assert sequences == list(range(1, m.events + 1))


# About 15 s of CPU (300 runs of up to 50 steps: some 15,000 service calls through the metered
# cursor, plus hypothesis's own drawing; copying the template per run is about a tenth of it and
# nothing is fsynced): what it takes to reach rare interleavings. The module is `slow`.
def test_claims_state_machine(template, tmp_path):
    ClaimMachine.template = template
    ClaimMachine.workdir = tmp_path
    run_state_machine_as_test(ClaimMachine, settings=settings(
        max_examples=300, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]))
