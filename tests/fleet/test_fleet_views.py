"""The merged views of a command over several hosts, from outcomes built by hand
(console/cli/fleet_views.py): host first, order across hosts, hosts that did not answer said once
each, and one exit code (4: some host is not in the answer)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from console.cli import fleet_views as views
from tests.fleet.cli_outcomes import Outcome, down, ok, stale

NOW = datetime(2025, 4, 18, 12, 0, tzinfo=timezone.utc)


def _apr(id_, expires, **more):
    return {"id": id_, "project_id": "prj-a", "project_name": "atlas", "action_kind": "git_push",
            "status": "pending", "expires_at": expires, "authority_json": '{"requested_by":"dave"}',
            "action_json": '{"remote":"origin","branch":"b","commit":"abc"}', "overdue": False, **more}


def test_approvals_merge_by_expiry_across_hosts_then_host_then_id():
    outcomes = [ok("us1", [_apr("apr-2", "2025-04-18 13:00:00"), _apr("apr-9", "2025-04-18 15:00:00")]),
                ok("eu1", [_apr("apr-1", "2025-04-18 14:00:00"), _apr("apr-2", "2025-04-18 13:00:00")])]
    rows, cut = views.merge("approvals.list", outcomes)
    assert [(r["host"], r["id"]) for r in rows] == [("eu1", "apr-2"), ("us1", "apr-2"), ("eu1", "apr-1"),
                                                    ("us1", "apr-9")]
    assert list(rows[0])[0] == "host" and not cut
    assert views.fleet_exit(views.host_exit(o) for o in outcomes) == 0


def test_a_limit_keeps_the_fleets_first_rows_and_says_more_match():
    outcomes = [ok("a", [_apr("1", "2025-04-18 13:00:00"), _apr("2", "2025-04-18 16:00:00")]),
                ok("b", [_apr("3", "2025-04-18 14:00:00"), _apr("4", "2025-04-18 15:00:00")])]
    rows, cut = views.merge("approvals.list", outcomes, limit=2)
    assert [r["id"] for r in rows] == ["1", "3"] and cut


def test_a_row_cannot_forge_its_host_and_a_cached_answer_is_marked():
    outcomes = [ok("eu1", [_apr("x", "2025-04-18 13:00:00", host="us1")]),
                stale("eu2", [{"id": "env-1", "stale": False}])]
    rows, _ = views.merge("approvals.list", outcomes[:1])
    assert rows[0]["host"] == "eu1"
    envs, _ = views.merge("envs.list", outcomes[1:])
    # an environment's own `stale` (its claim) is kept; the cache marks the host
    assert envs == [{"host": "eu2", "id": "env-1", "stale": False, "host_stale": True}]
    assert views.fleet_exit(views.host_exit(o) for o in outcomes) == 4


def test_envs_by_host_and_id_audit_by_time_jsonl_too():
    envs, _ = views.merge("envs.list", [ok("b", [{"id": "e1"}]), ok("a", [{"id": "e2"}, {"id": "e1"}])])
    assert [(r["host"], r["id"]) for r in envs] == [("a", "e1"), ("a", "e2"), ("b", "e1")]
    lines = '{"at": "2025-04-18 10:00:00", "kind": "approval"}\n{"at": "2025-04-18 12:00:00", "kind": "profile"}\n'
    audit, _ = views.merge("audit", [ok("b", lines), ok("a", [{"at": "2025-04-18 11:00:00", "kind": "environment"}])])
    assert [(r["host"], r["at"][11:13]) for r in audit] == [("b", "10"), ("a", "11"), ("b", "12")]


def test_exit_code_is_the_worst_hosts_and_a_silent_host_is_worse_than_any_answer():
    assert views.fleet_exit([0, 0]) == 0
    assert views.fleet_exit([0, 1]) == 1
    assert views.fleet_exit([1, 3, 0]) == 3
    assert views.fleet_exit([3, 4, 1]) == 4
    assert views.host_exit(down("x")) == 4
    assert views.host_exit(Outcome("x", "remote_error", "identity_ambiguous", None)) == 4
    assert views.host_exit(ok("x", {"ok": False, "error": "cannot be read"}, exit=3)) == 3


def test_fleet_json_lists_every_host_with_its_state_sentence_and_age():
    outcomes = [ok("eu1", [_apr("a", "2025-04-18 13:00:00")]), down("eu2"), stale("eu3", [], age=240)]
    rows, _ = views.merge("approvals.list", outcomes)
    value = views.fleet_json(rows, outcomes)
    assert value["ok"] is False and value["exit"] == 4 and len(value["rows"]) == 1
    assert [(h["host"], h["state"]) for h in value["hosts"]] == [("eu1", "ok"), ("eu2", "unreachable"),
                                                                 ("eu3", "stale")]
    assert value["hosts"][1]["sentence"].endswith("Connection refused")
    assert value["hosts"][2]["age_seconds"] == 240


def test_text_has_host_first_and_one_line_per_host_not_in_the_answer():
    outcomes = [ok("eu1", [_apr("apr-1", "2025-04-18 13:00:00")]), down("eu2"), stale("eu3", [], age=240),
                ok("eu4", {"ok": False, "error": "the database cannot be read"}, exit=3)]
    rows, _ = views.merge("approvals.list", outcomes)
    text = views.list_text("approvals.list", rows, NOW)
    assert text.splitlines()[0].split()[:2] == ["HOST", "ID"] and "eu1" in text.splitlines()[2]
    lines = [views.host_line(o) for o in outcomes]
    assert lines[0] is None
    assert lines[1] == "eu2: unreachable: ssh: connect to host 127.0.0.9 port 22: Connection refused"
    assert lines[2].startswith("eu3: STALE (4 minutes old)")
    assert lines[3] == "eu4: exit 3: the database cannot be read"


def test_hostile_remote_text_stays_one_line_per_row_and_never_steers_the_terminal():
    evil = "x\n\x1b[2Jeu9  apr-FORGED\r\x9b31m[bold]"
    outcomes = [ok("eu1", [_apr(evil, "2025-04-18 13:00:00", project_name=evil, status=evil)]),
                Outcome("eu2", "unreachable", evil, None, None)]
    rows, _ = views.merge("approvals.list", outcomes)
    text = views.list_text("approvals.list", rows, NOW) + "\n" + views.host_line(outcomes[1])
    assert len(text.splitlines()) == 4
    assert not any(c in text for c in "\x1b\r\x9b")
    for method, (headers, _) in views.COLUMNS.items():  # every view survives any row shape
        assert views.list_text(method, [{"host": "h", "id": evil, "environments": evil, "activated_at": evil}], NOW)


def test_doctor_is_host_by_finding_and_a_silent_host_is_never_clean():
    report = {"usable": True, "exit_code": 1, "findings": [
        {"id": "approvals.overdue", "severity": "error", "title": "overdue", "found": "2 requests"}]}
    outcomes = [ok("eu1", report, exit=1), ok("eu2", {"usable": True, "findings": []}), down("eu3")]
    rows = views.doctor_rows(outcomes)
    assert [(r["host"], r["severity"], r["id"]) for r in rows] == [
        ("eu1", "error", "approvals.overdue"), ("eu2", "none", "-"), ("eu3", "unknown", "host.unreachable")]
    assert views.fleet_exit(views.host_exit(o) for o in outcomes) == 4
    assert views.fleet_exit(views.host_exit(o) for o in outcomes[:2]) == 1
    assert "eu3" in views.doctor_text(rows)
    # a host whose doctor found errors says so, not "the command failed"
    assert views.host_line(outcomes[0], views.VERDICTS["doctor"]) == "eu1: exit 1: errors found (with --strict, warnings too)"


def test_upgrade_plan_one_row_per_host_flags_those_needing_one():
    plan = {"detected_release": "1.8.22", "target": "1.10.0", "force_required": False,
            "pending": [{"id": "s1", "safety": "additive"}, {"id": "s2", "safety": "rebuild"}]}
    current = {"detected_release": "1.10.0", "target": "1.10.0", "pending": []}
    rows = views.upgrade_rows([ok("eu1", plan), ok("eu2", current), down("eu3")])
    assert [(r["host"], r["pending"], r["needs_upgrade"]) for r in rows] == [
        ("eu1", 2, True), ("eu2", 0, False), ("eu3", None, None)]
    assert rows[0]["safety"] == ["additive", "rebuild"]
    text = views.upgrade_text(rows)
    assert text.splitlines()[2].startswith("* eu1") and "1.8.22" in text


_FIELDS = ["id", "host", "project_id", "project_name", "action_kind", "status", "expires_at", "authority_json",
           "action_json", "overdue", "operation_claim_id", "operation_kind", "claim_holder", "stale",
           "claim_age_seconds", "lifecycle_state", "active_lease_count", "admits_leases", "idle_stop_at", "name",
           "active_revision", "environments", "pending_approvals", "claims_held", "active", "revision",
           "activated_at", "fingerprint_short", "fingerprint_matches", "created_at", "at", "kind", "from", "to",
           "actor", "reason", "findings", "usable", "pending", "detected_release", "target", "ledger_state"]


def test_every_view_survives_any_json_a_host_sends():
    """Generated: whatever JSON a host answers (any types in any field, any nesting), every merged
    view, doctor and upgrade table and host line renders one line per row, with no control
    character, and the exit code stays one of 0-4."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                          max_leaves=8)
    rows = st.lists(st.dictionaries(st.sampled_from(_FIELDS), values, max_size=12), max_size=4)
    answers = st.one_of(rows, values, st.dictionaries(st.sampled_from(_FIELDS), values, max_size=8))
    outcome = st.builds(Outcome, host=st.sampled_from(["eu1", "us1", "x\x1b[2J"]),
                        state=st.sampled_from(["ok", "stale", "unreachable", "remote_error", "outcome_unknown"]),
                        sentence=st.one_of(st.none(), st.text(max_size=40)), exit=st.sampled_from([0, 1, 3, None]),
                        data=answers, age_seconds=st.one_of(st.none(), st.floats(0, 1e6)))

    @settings(max_examples=150, deadline=None)
    @given(st.lists(outcome, min_size=1, max_size=3))
    def check(outcomes):
        texts = []
        for method in views.COLUMNS:
            merged, _ = views.merge(method, outcomes, limit=3)
            text = views.list_text(method, merged, NOW)
            assert len(text.splitlines()) in (1, len(merged) + 2)
            texts.append(text)
        doctor = views.doctor_rows(outcomes)
        upgrade = views.upgrade_rows(outcomes)
        texts += [views.doctor_text(doctor), views.upgrade_text(upgrade)]
        assert len(texts[-2].splitlines()) == len(doctor) + 2 and len(texts[-1].splitlines()) == len(upgrade) + 2
        said = [line for line in map(views.host_line, outcomes) if line]
        assert all("\n" not in line for line in said)
        texts += said
        for text in texts:
            assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text)
        assert views.fleet_exit(views.host_exit(o) for o in outcomes) in (0, 1, 3, 4)
        json.dumps(views.fleet_json(merged, outcomes))

    check()
