"""Approval requests with their runs and event histories, from twenty to millions of them.

The newest requests are a hand-written "featured" set, so every status, the expiring-soon band,
a four-eyes request and the untrusted payload exist at any size; before them comes a recent
window (mostly pending, expiring hours ahead), and before that months of settled history. Rows
are built as tuples in chunks and written with `executemany`: ids grow with time, so every
B-tree append is at the right edge.
"""

from __future__ import annotations

import hashlib
from bisect import bisect
from itertools import accumulate
from typing import Iterator

from console.demo import data
from console.demo.background import in_background
from console.demo.context import DAY, HOUR, MINUTE, DemoContext, stamp

CHUNK = 20_000

RUN_SQL = (
    "INSERT INTO execution_runs (id, project_id, kind, status, created_at, finished_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
REQUEST_SQL = (
    "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind,"
    " action_schema_version, action_json, action_fingerprint, authority_schema_version,"
    " authority_json, status, expires_at, decision_at, consumed_at, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, 1, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)"
)
EVENT_SQL = (
    "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence,"
    " event_type, from_status, to_status, actor_classification, actor_reference, reason,"
    " metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# Outcome kinds: a status, or a status reached after an approval ("+a").
_OLD_OUTCOMES = ("consumed", "expired", "denied", "cancelled", "invalidated", "expired+a",
                 "invalidated+a")
_OLD_WEIGHTS = (52, 15, 12, 6, 7, 5, 3)
_RECENT_OUTCOMES = ("pending", "approved", "consumed", "denied", "cancelled", "invalidated")
_RECENT_WEIGHTS = (55, 12, 15, 10, 4, 4)
SMALL_ORDER = ("consumed", "denied", "cancelled", "expired", "invalidated", "approved", "pending")
_TTLS = (HOUR, 2 * HOUR, 4 * HOUR, 12 * HOUR)

# Featured requests, oldest first; minutes relative to now:
# (outcome, kind, created, decided, ended, expires, requester, decider, project slot, special)
# requester None = an agent; project slot 0 = the busiest project, 1 = the markup-named one.
FEATURED = (
    ("expired+a", "git_push", -700, -690, -459, -460, None, "bob", 0, None),
    ("invalidated+a", "git_push", -520, -515, -470, -100, None, "alice", 2, None),
    ("expired", "custom_check", -600, None, -359, -360, None, None, 0, None),
    ("invalidated", "git_push", -400, None, -380, -160, None, None, 3, None),
    ("cancelled", "git_push", -300, None, -290, -60, None, None, 2, None),
    ("consumed", "git_push", -200, -190, -188, 40, None, "bob", 0, None),
    ("consumed", "custom_check", -180, -170, -165, 60, "dave", "alice", 3, None),
    ("pending", "git_push", -150, None, None, -30, None, None, 0, None),
    ("denied", "git_push", -120, -100, None, 120, None, "carol", 0, None),
    ("approved", "git_push", -90, -80, None, 150, None, "alice", 2, None),
    ("pending", "custom_check", -62, None, None, -2, None, None, 3, None),
    ("pending", "git_push", -55, None, None, 5, None, None, 0, None),
    ("approved", "custom_check", -45, -30, None, 75, "erin", "carol", 0, None),
    ("pending", "git_push", -40, None, None, 12, "alice", None, 0, None),
    ("pending", "custom_check", -30, None, None, 25, None, None, 2, None),
    ("pending", "git_push", -20, None, None, 40, None, None, 1, "markup"),
    ("pending", "git_push", -10, None, None, 55, None, None, 0, "untrusted"),
    ("pending", "git_push", -5, None, None, 180, None, None, 3, None),
    ("pending", "custom_check", -3, None, None, 480, "bob", None, 0, None),
    ("pending", "git_push", -1, None, None, 720, None, None, 2, None),
)


def write_approvals(ctx: DemoContext, total: int) -> int:
    """Write `total` requests; returns how many were written.

    A producer thread builds the next chunk of rows while this thread inserts the previous one
    (console/demo/background.py).
    """
    if total <= 0 or not ctx.has_profiles:
        return 0
    conn = ctx.conn
    for runs, requests, events, done in in_background(_chunks(ctx, total)):
        conn.executemany(RUN_SQL, runs)
        conn.executemany(REQUEST_SQL, requests)
        conn.executemany(EVENT_SQL, events)
        ctx.report("approval requests", done, total)
    return total


def _chunks(ctx: DemoContext, total: int) -> Iterator[tuple[list, list, list, int]]:
    live = [p for p in ctx.projects if not p.deleting] or ctx.projects
    builder = _Builder(ctx, live)
    runs: list[tuple] = []
    requests: list[tuple] = []
    events: list[tuple] = []
    if total < len(FEATURED):
        # Too few for the featured set: settled statuses first (two days ago), then the open ones.
        for index in range(total):
            outcome = SMALL_ORDER[index] if index < len(SMALL_ORDER) else "pending"
            open_ = outcome in ("pending", "approved")
            created = ctx.now_epoch - (20 * (total - index) * MINUTE if open_ else 2 * DAY - index * HOUR)
            builder.random_row(index, outcome, created, runs, requests, events, recent=open_)
        yield runs, requests, events, total
        return

    generated = total - len(FEATURED)
    recent = min(generated, max(generated // 10, 40))
    old = generated - recent
    windows = (
        (old, ctx.now_epoch - 45 * DAY, ctx.now_epoch - 20 * HOUR, False),
        (recent, ctx.now_epoch - 11 * HOUR, ctx.now_epoch - 15 * MINUTE, True),
    )
    index = 0
    for count, start, end, is_recent in windows:
        span = end - start
        random_row = builder.random_row
        for k in range(count):
            random_row(index, None, start + (span * k) // count, runs, requests, events,
                       recent=is_recent)
            index += 1
            if len(requests) >= CHUNK:
                yield runs, requests, events, index
                runs, requests, events = [], [], []
    for spec in FEATURED:
        builder.featured_row(index, spec, runs, requests, events)
        index += 1
    yield runs, requests, events, index


class _Builder:
    """Turns (index, outcome, times) into a run row, a request row and its events."""

    def __init__(self, ctx: DemoContext, projects):
        self.ctx = ctx
        self.rng = ctx.rng
        self.now = ctx.now_epoch
        self.projects = projects
        self.all_projects = ctx.projects
        # The first project is the busiest; a deleting project only has history.
        weights = [6 if p.index == 0 else 2 for p in ctx.projects]
        for position, project in enumerate(ctx.projects):
            if project.deleting:
                weights[position] = 1
        self.old_cum = list(accumulate(weights))
        live_weights = [6 if p.index == 0 else 2 for p in projects]
        self.live_cum = list(accumulate(live_weights))
        self.old_cum_outcomes = list(accumulate(_OLD_WEIGHTS))
        self.recent_cum_outcomes = list(accumulate(_RECENT_WEIGHTS))
        self.revision_number = {p.id: (p.active_revision[1] if p.active_revision else 1)
                                for p in ctx.projects}

    # --- generated rows ------------------------------------------------------------------------

    def random_row(self, index, outcome, created, runs, requests, events, *, recent) -> None:
        rng = self.rng
        random = rng.random
        if recent:
            project = self.projects[bisect(self.live_cum, random() * self.live_cum[-1])]
            if outcome is None:
                outcome = _RECENT_OUTCOMES[
                    bisect(self.recent_cum_outcomes, random() * self.recent_cum_outcomes[-1])]
        else:
            project = self.all_projects[bisect(self.old_cum, random() * self.old_cum[-1])]
            if outcome is None:
                outcome = _OLD_OUTCOMES[
                    bisect(self.old_cum_outcomes, random() * self.old_cum_outcomes[-1])]
        created += int(random() * 600)
        kind = "git_push" if random() < 0.75 else "custom_check"
        requester = None if random() < 0.88 else data.HUMANS[int(random() * 5)]
        decider = data.HUMANS[int(random() * 5)]
        if decider == requester:
            decider = data.HUMANS[(data.HUMANS.index(decider) + 1) % 5]
        now = self.now
        status = outcome.split("+")[0]
        approved_first = outcome.endswith("+a") or status in ("approved", "consumed")
        if recent and status in ("pending", "approved"):
            expires = now + 10 * MINUTE + int(random() * 10 * HOUR)
        else:
            expires = created + _TTLS[int(random() * 4)]
        room = max(min(expires, now) - created, 120)
        decided = created + 30 + int(random() * room * 0.6) if approved_first or status == "denied" else None
        ended = None
        if status == "consumed":
            ended = min(decided + 5 + int(random() * 300), now)
        elif status == "expired":
            ended = expires + int(random() * 120)
            if ended > now:
                ended = now
        elif status in ("cancelled", "invalidated"):
            base = decided if decided else created
            ended = base + 30 + int(random() * max(min(expires, now) - base - 30, 60) * 0.8)
        self._emit(index, project, kind, status, approved_first, created, decided, ended, expires,
                   requester, decider, None, runs, requests, events)

    def featured_row(self, index, spec, runs, requests, events) -> None:
        outcome, kind, c, d, e, x, requester, decider, slot, special = spec
        project = self.all_projects[slot] if slot < len(self.all_projects) else self.projects[0]
        if project.deleting:
            project = self.projects[0]
        m = MINUTE
        now = self.now
        status = outcome.split("+")[0]
        approved_first = outcome.endswith("+a") or status in ("approved", "consumed")
        self._emit(index, project, kind, status, approved_first, now + c * m,
                   now + d * m if d is not None else None, now + e * m if e is not None else None,
                   now + x * m, requester, decider or "alice", special, runs, requests, events)

    # --- rows ----------------------------------------------------------------------------------

    def _emit(self, index, project, kind, status, approved_first, created, decided, ended,
              expires, requester, decider, special, runs, requests, events) -> None:
        rng = self.rng
        request_id = f"apr-{index + 1:08d}"
        run_id = f"run-apr-{index + 1:08d}"
        pid = project.id
        created_s = stamp(created)
        if kind == "git_push":
            topic = data.BRANCH_TOPICS[index % len(data.BRANCH_TOPICS)]
            branch = data.BRANCH_PREFIXES[index % 4] + topic
            commit = "%040x" % rng.getrandbits(160)
            base = "%040x" % rng.getrandbits(160)
            if special == "untrusted":
                action = data.untrusted_push_action(commit, base, project.repo_path)
            else:
                action = data.git_push_action(branch, commit, base, _json_safe(project.repo_path),
                                              1 + index % 5)
            grant = "git_push:origin/" + branch
            run_kind = "build"
        else:
            check = index % len(data.CHECKS)
            action = data.custom_check_action(check, _json_safe(project.repo_path))
            grant = "custom_check:" + data.CHECKS[check][0]
            run_kind = "check"
        who = requester or "agent:" + data.AGENTS[index % len(data.AGENTS)]
        if special == "markup":
            who = "agent:[bold]opencode[/bold]"
        authority = data.authority(who, run_id, grant, self.revision_number[pid])
        fingerprint = hashlib.sha256(action.encode()).hexdigest()

        history = [("requested", None, "pending", "system", data.SYSTEM_ACTOR, None, created)]
        if approved_first:
            history.append(("approved", "pending", "approved", "human", decider,
                            data.APPROVE_REASONS[index % len(data.APPROVE_REASONS)], decided))
        previous = "approved" if approved_first else "pending"
        if status == "denied":
            reason = data.DENY_REASONS[index % len(data.DENY_REASONS)]
            history.append(("denied", "pending", "denied", "human", decider, reason, decided))
        elif status == "consumed":
            history.append(("consumed", "approved", "consumed", "action_executor",
                            data.EXECUTOR_ACTOR, None, ended))
        elif status == "expired":
            history.append(("expired", previous, "expired", "system", data.SYSTEM_ACTOR,
                            data.EXPIRE_REASON, ended))
        elif status == "invalidated":
            history.append(("invalidated", previous, "invalidated", "system", data.SYSTEM_ACTOR,
                            data.INVALIDATE_REASONS[index % 3], ended))
        elif status == "cancelled":
            history.append(("cancelled", "pending", "cancelled", "system", data.SYSTEM_ACTOR,
                            data.CANCEL_REASONS[index % 3], ended))
        last = history[-1][6]
        last_s = stamp(last)
        run_status = {"pending": "running", "approved": "running", "consumed": "completed",
                      "cancelled": "cancelled"}.get(status, "failed")
        finished = None if run_status == "running" else last_s
        runs.append((run_id, pid, run_kind, run_status, created_s, finished))
        requests.append((
            request_id, pid, run_id, kind, action, fingerprint, authority, status, stamp(expires),
            stamp(decided) if decided is not None else None,
            stamp(ended) if status == "consumed" else None, created_s, last_s,
        ))
        for sequence, (etype, old, new, klass, actor, reason, at) in enumerate(history, start=1):
            events.append((f"{request_id}:{sequence}", pid, request_id, sequence, etype, old, new,
                           klass, actor, reason, None, created_s if sequence == 1 else stamp(at)))


def _json_safe(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
