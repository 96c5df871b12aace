"""A host's answer is data, never the verdict (issue 20, attack findings F1, F2, F8, F17): the
client checks every result against what its method prints (console/fleet/answers.py) and decides
the per-id outcomes and the exit code itself, from what it sent."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.fleet_views import doctor_rows, host_exit
from console.cli.fleet_writes import run_by_id
from console.errors import UsageError
from console.fleet import answers
from console.fleet.protocol import METHODS
from tests.fleet.cli_outcomes import FakeRunner, Outcome, ok

NOT_AN_EXIT = st.one_of(st.integers().filter(lambda n: n not in range(5)), st.booleans(), st.floats(allow_nan=False),
                        st.text(max_size=3), st.none())
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@settings(max_examples=300)
@given(method=st.sampled_from(sorted(METHODS)), code=NOT_AN_EXIT, output=JSON)
def test_an_exit_code_that_is_not_the_consoles_is_never_believed(method, code, output):
    """F1: exit 256 is status 0 for the process; only 0 to 4 is ever taken from a host."""
    assert answers.problem(method, {"exit": code, "output": output}) is not None
    assert host_exit(Outcome("h1", "ok", None, code, output)) == 4


@settings(max_examples=300)
@given(method=st.sampled_from(sorted(METHODS)), output=JSON)
def test_exit_0_is_believed_only_with_the_methods_own_shape(method, output):
    if answers.problem(method, {"exit": 0, "output": output}) is None:
        if method in answers.BATCH_WRITES:
            assert isinstance(output, list) and all(isinstance(i, dict) and type(i["ok"]) is bool for i in output)
        elif method == "doctor":
            assert isinstance(output, dict) and isinstance(output["findings"], list)
        elif method != "audit":
            assert isinstance(output, (dict, list))


def test_a_doctor_answer_that_is_not_a_report_is_never_clean():
    """F17: an answer without findings reads "could not be read" (exit 4), never "no findings"."""
    assert answers.problem("doctor", {"exit": 0, "output": {"method": "doctor", "x": 1}}) is not None
    (row,) = doctor_rows([Outcome("h1", "ok", None, 0, {"method": "doctor", "x": 1})])
    assert row["severity"] == "unknown" and row["exit"] == 4
    (clean,) = doctor_rows([Outcome("h1", "ok", None, 0, {"findings": [], "usable": True})])
    assert clean["title"] == "no findings" and clean["exit"] == 0


# ------------------------------------------------------------- a write's answer matched to its ids
SENT = ["apr-1", "apr-2"]
ITEM = st.builds(lambda i, good: {"ok": good, "id": i, "state": "x", "message": "m"},
                 st.sampled_from([*SENT, "apr-OTHER", "h1:apr-1"]), st.booleans())


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(ITEM, max_size=5), code=st.integers(0, 4))
def test_every_id_sent_gets_exactly_one_row_decided_from_what_was_sent(items, code):
    """F2: a host that answers for other ids, none, twice, or exit 1 with ok items never makes an id
    ok that it did not answer for once, and never a run better than its own exit code."""
    def answer(method, params, host):
        if method == "approvals.show":
            return Outcome(host, "unreachable", "down", None, None)  # the read-back finds nothing
        return ok(host, items, exit=code)

    runner = FakeRunner(["h1"], answer)
    run_code = run_by_id(runner, "approvals.approve", {"ids": [f"h1:{i}" for i in SENT], "reason": "x"})
    (value,) = runner.emitted
    rows = [r for r in value["rows"] if r["id"] in SENT]
    assert [r["id"] for r in rows] == SENT  # one row per id sent, in order
    for row in rows:
        mine = [i for i in items if i["id"] == row["id"]]
        if row["ok"]:
            assert len(mine) == 1 and mine[0]["ok"] is True
    if run_code == 0:
        assert code == 0 and all(r["ok"] for r in value["rows"])
        assert sorted(i["id"] for i in items) == SENT
    assert value["ok"] is (run_code == 0)


# ------------------------------------------------------------- HOST:ID when database text holds one
def _lists(holding):
    def answer(method, params, host):
        if method.endswith(".show"):
            return ok(host, {"id": params["id"], "status": "pending"}) if params["id"] in holding.get(host, ()) \
                else ok(host, {"ok": False, "error": "no such request"}, exit=1)
        return ok(host, [{"ok": True, "id": i, "state": "approved", "message": "done"} for i in params["ids"]])
    return answer


def test_an_id_of_one_host_that_names_another_is_refused_as_ambiguous():
    """F8: eu1 has a request whose id is `us1:apr-1`; us1 has apr-1. Nothing is written."""
    runner = FakeRunner(["eu1", "us1"], _lists({"eu1": {"us1:apr-1"}, "us1": {"apr-1"}}))
    with pytest.raises(UsageError, match="ambiguous.*eu1:us1:apr-1"):
        run_by_id(runner, "approvals.approve", {"ids": ["us1:apr-1"], "reason": "x"})
    assert not [m for m, *_ in runner.sent if m == "approvals.approve"]


def test_an_id_naming_a_host_outside_the_selection_is_the_id_on_the_selected_host(capsys):
    runner = FakeRunner(["eu1"], _lists({"eu1": {"us1:apr-1"}}))
    runner.fleet.hosts["us1"] = object()  # us1 is in hosts.toml, not selected
    assert run_by_id(runner, "approvals.approve", {"ids": ["us1:apr-1"], "reason": "x"}) == 0
    assert [(m, p["ids"], h) for m, p, h, _ in runner.sent if m == "approvals.approve"] == \
        [("approvals.approve", ["us1:apr-1"], "eu1")]
    assert "us1 is not among the hosts selected" in capsys.readouterr().err


def test_host_id_with_the_host_selected_and_no_such_whole_id_goes_to_that_host():
    runner = FakeRunner(["eu1", "us1"], _lists({"us1": {"apr-1"}}))
    assert run_by_id(runner, "approvals.approve", {"ids": ["us1:apr-1"], "reason": "x"}) == 0
    assert [(p["ids"], h) for m, p, h, _ in runner.sent if m == "approvals.approve"] == [(["apr-1"], "us1")]


def test_the_json_of_a_write_names_only_ids_sent():
    runner = FakeRunner(["h1"], lambda m, p, h: ok(h, [{"ok": True, "id": "apr-OTHER", "state": "approved",
                                                         "message": "x"}]) if m == "approvals.approve"
                        else Outcome(h, "unreachable", "down", None, None))
    assert run_by_id(runner, "approvals.approve", {"ids": ["h1:apr-1"], "reason": "x"}) == 4
    text = json.dumps(runner.emitted[0])
    assert '"ok": false' in text and runner.emitted[0]["rows"][0]["id"] == "apr-1"
