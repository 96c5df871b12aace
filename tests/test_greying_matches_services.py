"""A screen offers a write key exactly when the service would carry the write out.

For every approval request and every execution profile revision of the demo database, and every
write key of the approvals and profiles screens, the key's state (the screens' own greying
functions, fed the rows the screens read) is compared with what the service does when the write
is actually run on a copy: enabled <=> no Refusal and something changed (a repeat that changes
nothing is a no-op, which the screens do not offer either).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.db.connect import open_database
from console.errors import Refusal
from console.tui.screens.approvals import decision_greying
from console.tui.screens.profiles import activation_greying
from console.services import approval_queue, approvals, navigation, profiles

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
ACTOR = "alice"  # the TUI tests' operator; some demo requests are hers (four-eyes)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("greying") / "demo.db"
    generate(path, requests=200, seed=7, now="2025-06-01 12:00:00", overwrite=True, wal=False)
    return path


def _copy(demo: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / f"{name}.db"
    shutil.copyfile(demo, target)
    return target


def _accepted(write) -> bool:
    try:
        result = write()
    except Refusal:
        return False
    return result.ok and not result.noop


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["approve", "deny", "revoke"])
def test_decision_keys_are_enabled_exactly_when_the_decision_is_accepted(demo, tmp_path, verb):
    # Deciding one request leaves every other request's answer as it was: one copy per key suffices.
    with open_database(_copy(demo, tmp_path, verb), busy_timeout_ms=2000) as handle:
        ids = [row.id for row in approval_queue.list_requests(
            handle, approval_queue.Filters(statuses=None), limit=10_000, now=NOW).rows]
        assert len(ids) == 200
        disagreements, offered = [], 0
        for request_id in ids:
            detail = approval_queue.show_request(handle, request_id, actor=ACTOR, now=NOW)
            enabled = verb not in decision_greying(detail)
            offered += enabled
            # The screen asks for the typed confirmation first when the service says it is needed.
            confirmed = bool(detail.confirm.get(verb))
            accepted = _accepted(lambda: approvals.decide(
                handle, request_id, verb, actor=ACTOR, reason="checked", now=NOW,
                requester_unknown_ok=confirmed))
            if enabled != accepted:
                disagreements.append((request_id, detail.status, decision_greying(detail).get(verb)))
    assert disagreements == []
    assert 0 < offered < len(ids)  # the demo exercises both sides of every key


def test_activate_key_is_enabled_exactly_when_activation_is_accepted(demo, tmp_path):
    with open_database(demo, read_only=True, busy_timeout_ms=2000) as handle:
        project_ids = [r[0] for r in handle.conn.execute("SELECT id FROM projects ORDER BY id")]
        rows = []
        for project_id in project_ids:
            project, _ = navigation.project_with_audit(handle, project_id)
            rows += [(project, row) for row in profiles.list_revisions(handle, project_id)]
    assert rows
    disagreements, offered = [], 0
    for index, (project, row) in enumerate(rows):
        enabled = "activate" not in activation_greying(row, project)
        offered += enabled
        # Activating changes what every other revision of the project may do: a copy per revision.
        with open_database(_copy(demo, tmp_path, f"rev{index}"), busy_timeout_ms=2000) as handle:
            accepted = _accepted(lambda: profiles.activate(handle, row.id, ACTOR, reason="checked", now=NOW))
        if enabled != accepted:
            disagreements.append((row.id, activation_greying(row, project).get("activate")))
    assert disagreements == []
    assert 0 < offered < len(rows)

