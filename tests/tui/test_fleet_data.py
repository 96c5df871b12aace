"""Whatever a host sends is data (console/tui/fleet_monitor.py, console/tui/screens/fleet_queue.py):
generated JSON for rows, hellos, decision results and doctor reports never raises, and every
string the screens show of it is one clean line (controls and invisible characters pictured,
markup never parsed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.tui.fleet_monitor import (Answer, HostStatus, doctor_summary, pending_rows, read_only_reason,
                                       result_sentence)
from console.tui.screens.fleet_hosts import identity, state_label
from console.tui.screens.fleet_queue import queue_row
from widgets.safe_text import clean, is_clean, safe_text

HOSTILE = st.sampled_from(["[@click=app.quit]", "\x1b[2J", "\u202e", "\u200b", "[/", "\x9b31m", "\n", "\udc80"])
TEXT = st.one_of(st.text(max_size=40), HOSTILE, st.lists(HOSTILE, max_size=4).map("".join))
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=12)
FIELDS = ("id", "project_id", "project_name", "action_kind", "action_json", "authority_json", "expires_at", "status")
pytestmark = pytest.mark.slow

ROW = st.fixed_dictionaries({}, optional={key: st.one_of(TEXT, JSON) for key in FIELDS})


def shown(value) -> bool:
    return is_clean(safe_text(value, one_line=True).plain, allow_newlines=False)


@settings(max_examples=300, deadline=None)
@given(data=st.lists(ROW | JSON, max_size=5))
def test_rows_from_a_host_become_clean_cells(data):
    for row in pending_rows(data):
        shown_row = queue_row("eu1", row, stale=False)
        for value in (shown_row.id, shown_row.project, shown_row.kind, shown_row.requester, shown_row.summary):
            assert isinstance(value, str) and shown(value)


@settings(max_examples=300, deadline=None)
@given(hello=JSON, output=JSON, state=st.sampled_from(["ok", "outcome_unknown", "remote_error", "stale"]),
       sentence=st.none() | TEXT)
def test_hellos_results_and_reports_become_clean_sentences(hello, output, state, sentence):
    why = read_only_reason(False, hello if isinstance(hello, dict) else None)
    assert why is None or is_clean(clean(why, one_line=True), allow_newlines=False)
    ok, said = result_sentence(Answer("eu1", state, sentence, 0, output), "apr-1")
    assert ok in (True, False, None) and isinstance(said, str) and shown(said)
    assert shown(doctor_summary(output))
    status = HostStatus("eu1", phase="down", sentence=said, actor=hello if isinstance(hello, str) else None)
    assert shown(state_label(status)) and shown(identity(status))
