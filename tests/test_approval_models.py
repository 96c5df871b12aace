"""The approval read models keep every stored column, whichever release wrote it, and `to_json()`
prints them first, then what the console derived: the JSON of `approvals list/show` and what the
screens read come from the same object."""

from __future__ import annotations

from console.db.connect import open_database
from console.models.approvals import ApprovalDetail, ApprovalRequest
from console.services import approval_queue as queue
from tests.approvals_helpers import NOW, connect

LISTED = ["expires_in_seconds", "overdue", "project_name"]
SHOWN = LISTED + ["action", "authority", "requester", "requester_problem", "action_summary", "project_deleting",
                  "events", "options", "confirm"]


def _with_a_later_column(path) -> tuple[str, list[str]]:
    conn = connect(path)
    conn.execute("ALTER TABLE approval_requests ADD COLUMN later_release_note TEXT")
    conn.execute("UPDATE approval_requests SET later_release_note = 'kept' WHERE id = 'apr-3'")
    conn.commit()
    stored = [row[1] for row in conn.execute("PRAGMA table_info(approval_requests)")]
    conn.close()
    return path, stored


def test_listed_and_shown_requests_keep_every_stored_column_in_table_order(db):
    path, stored = _with_a_later_column(db)
    with open_database(path, read_only=True) as h:
        listed = next(r for r in queue.list_requests(h, queue.Filters(statuses=None), now=NOW).rows if r.id == "apr-3")
        shown = queue.show_request(h, "apr-3", actor="dave", now=NOW)
        unread = queue.show_request(h, "apr-3", now=NOW)
    assert type(listed) is ApprovalRequest and isinstance(shown, ApprovalDetail)
    assert list(listed.to_json()) == stored + LISTED and listed.to_json()["later_release_note"] == "kept"
    assert list(shown.to_json()) == stored + SHOWN and shown.columns == listed.columns
    assert list(unread.to_json()) == stored + SHOWN[:-2]  # read for no actor: no options to print
    assert [e.to_json() for e in shown.events] == [dict(e.columns) for e in shown.events]
    assert shown.unavailable() == {a: why for a, why in shown.options.items() if why}
