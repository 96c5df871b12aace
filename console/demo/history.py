"""Archon 1.8.20's own run history at scale: what `--requests N` means where there are no approvals.

1.8.20 has no approval tables, so there N sizes the history an upgrade from 1.8.20 has to carry
through instead, in proportion to what N requests are at 1.8.22 (about N execution runs):

- N/8 check batches of four attempts each: N/2 `check_attempt_details` rows, which the table
  rebuilds of steps 018 and 028 copy, about half of them with a `check_attempt_diagnostic_parsers`
  child (the CASCADE children a rebuild must not lose);
- N/16 settled build sequences of four tickets (N/4 tickets and about N/4 build runs);
- N/8 environment leases with a start and a stop event each, over about N/400 environments that
  live about a day each (validation binding, leases, most of them retired since);
- N/1000 more projects, none with a profile yet (step 005 backfills one each, 021 and 022 move it
  on), each with a build sequence in flight (a ticket building, two queued) for the sweep of
  step 009 to fail or cancel.

Written after everything else from the same seeded generator, so the hand-written 1.8.20 data
stays exactly what it was. Rows are built on a producer thread in chunks; run ids grow in the
order rows are written, so their B-tree inserts append at the right edge.
"""

from __future__ import annotations

import json
import math
from bisect import bisect
from dataclasses import dataclass
from itertools import accumulate
from typing import Iterator

from console.db import execution_profiles as profiles
from console.demo import data
from console.demo.background import in_background
from console.demo.context import DAY, HOUR, MINUTE, DemoContext, ProjectInfo, stamp
from console.demo.history_sql import SQL, TABLES
from console.demo.work import TICKET_TITLES

RELEASE = "1.8.20"
CHUNK_RUNS = 20_000
BLOCK = 16  # requests' worth of history per block: 2 check batches, 1 sequence, 2 leases
LEASES_PER_ENVIRONMENT = 50
CONCURRENT_ENVIRONMENTS = 40  # at most about this many history environments are alive at once
ENVIRONMENT_LIFE_DAYS = 3  # and none lives longer (then it is retired, unless it is recent)
PROJECTS_PER = 1000  # one more project per this many requests
HISTORY_DAYS = 45
OUTPUT_KEPT_DAYS = 30  # older attempts have had their retained output expired

_CHECK_IDS = tuple(c[0] for c in data.CHECKS)
_CHECK_FINGERPRINTS = tuple(data.sha256_hex(c[0] + c[1]) for c in data.CHECKS)
_FAILURES = (("command_failure", 70), ("timeout", 15), ("infrastructure_failure", 10),
             ("spawn_failure", 5))
_FAILURE_CUM = list(accumulate(w for _o, w in _FAILURES))
_LEASE_KINDS = ("build", "chat_build", "review", "build")
_REQUIRED_LISTS = ('["lint","unit-tests"]', '["typecheck"]', "[]", None)
_WORKSPACE = '{"head":"%s","dirty":false}'
_AUTHORITY = '{"run_id":"%s","granted_by":"archon","workloads":["%s"]}'
_PLACEMENT = '{"workspace":"/workspace","user":"agent"}'
_STARTED_METADATA = '{"execution_run_id":"%s"}'


@dataclass(frozen=True)
class HistoryPlan:
    """How much 1.8.20 history `requests` N stands for (all counts exact except runs)."""

    requests: int
    check_batches: int
    check_attempts: int
    settled_sequences: int
    leases: int
    environments: int
    projects: int

    @property
    def tickets(self) -> int:
        return 4 * (self.settled_sequences + self.projects)

    @property
    def items(self) -> int:
        return self.environments + self.settled_sequences + self.projects + self.check_batches


def plan(requests: int) -> HistoryPlan:
    blocks = max(requests, 0) // BLOCK
    leases = 2 * blocks
    return HistoryPlan(
        requests=requests,
        check_batches=2 * blocks,
        check_attempts=8 * blocks,
        settled_sequences=blocks,
        leases=leases,
        environments=math.ceil(leases / LEASES_PER_ENVIRONMENT),
        projects=max(requests, 0) // PROJECTS_PER,
    )


def meaning(release: str) -> str:
    """What `--requests N` writes at `release`, in one sentence for --help and the summary."""
    if release != RELEASE:
        return "N approval requests, each with its own execution run and 2-3 events."
    return ("Archon 1.8.20 has no approval tables, so N sizes its run history instead (about N "
            "execution runs): N/8 check batches with N/2 attempts (about half with a diagnostic "
            "parser), N/16 settled build sequences with N/4 tickets, N/8 environment leases with "
            "2 events each over N/400 environments, and N/1000 more projects without a profile, "
            "each with a build sequence in flight.")


def write_history(ctx: DemoContext, requests: int) -> HistoryPlan | None:
    """Write the scaled 1.8.20 history; nothing at any other release (their N is approvals)."""
    if ctx.release != RELEASE or requests <= 0:
        return None
    shape = plan(requests)
    if shape.items == 0:
        return shape
    extra = _extra_projects(ctx, shape.projects)
    live = [p for p in ctx.projects if not p.deleting] + extra
    writer = _History(ctx, live, extra, shape)
    conn = ctx.conn
    for tables, done in in_background(writer.chunks()):
        for table in TABLES:
            rows = tables.get(table)
            if rows:
                conn.executemany(SQL[table], rows)
        ctx.report("1.8.20 history", done, shape.items)
    return shape


def _extra_projects(ctx: DemoContext, count: int) -> list[ProjectInfo]:
    """Projects as 1.8.20 knew them: no profile pointer, check policies of every kind."""
    rng = ctx.rng
    now = ctx.now_epoch
    out = []
    for k in range(count):
        area = data.HISTORY_AREAS[k % len(data.HISTORY_AREAS)]
        part = data.HISTORY_PARTS[(k // len(data.HISTORY_AREAS)) % len(data.HISTORY_PARTS)]
        slug = f"{area}-{part}-{k + 1:04d}"
        provider = "docker_sandbox" if rng.random() < 0.5 else "host"
        created = now - rng.randint(50, 400) * DAY + rng.randint(0, DAY)
        checks = data.CHECKS[: _extra_check_count(k)]
        row = {
            "id": f"prj-{slug}",
            "name": slug,
            "repo_path": f"/srv/repos/{slug}",
            "build_execution_provider": provider,
            "active_target_kind": "repo_root",
            "worktree_cmd": None,
            "check_definitions": json.dumps(
                [{"id": c[0], "command": json.loads(c[1]), "timeout_seconds": c[2]} for c in checks],
                separators=(",", ":"),
            ),
            "required_check_definition_ids": _REQUIRED_LISTS[k % len(_REQUIRED_LISTS)],
            "post_build_check_definition_ids": '["unit-tests"]' if k % 5 == 0 else None,
            "spec_aware_code_review_enabled": k % 2,
            "created_at": stamp(created),
        }
        ctx.insert("projects", row)
        info = ProjectInfo(len(ctx.projects) + k, row["id"], slug, row["repo_path"], provider,
                           created, False, profiles.has_configured_check_policy(row))
        out.append(info)
    return out


def _extra_check_count(k: int) -> int:
    return 3 + k % 4


class _History:
    """The three streams (environments, build sequences, check batches), in that order."""

    def __init__(self, ctx: DemoContext, live: list[ProjectInfo], extra: list[ProjectInfo],
                 shape: HistoryPlan):
        self.ctx = ctx
        self.rng = ctx.rng
        self.now = ctx.now_epoch
        self.start = self.now - HISTORY_DAYS * DAY
        self.end = self.now - HOUR
        self.live = live
        self.extra = extra
        self.shape = shape
        extra_ids = {p.id for p in extra}
        weights = [1 if p.id in extra_ids else (6 if p.index == 0 else 3) for p in live]
        self.cum = list(accumulate(weights))
        # The project's own check definitions (console/demo/projects.py, _extra_projects).
        self.checks = {p.id: tuple(range(2 + p.index % 3)) for p in live if p.id not in extra_ids}
        self.checks.update({p.id: tuple(range(_extra_check_count(k))) for k, p in enumerate(extra)})
        self.runs = 0
        self.bindings = 0
        self.ticket_no = 0
        self.ticket_keys: dict[str, int] = {}
        self.tables: dict[str, list] = {t: [] for t in TABLES}
        self.done = 0

    def _project(self) -> ProjectInfo:
        return self.live[bisect(self.cum, self.rng.random() * self.cum[-1])]

    def _run(self, project_id: str, kind: str, status: str, created: int, finished: int | None) -> str:
        self.runs += 1
        run_id = f"run-h-{self.runs:08d}"
        self.tables["execution_runs"].append(
            (run_id, project_id, kind, status, stamp(created),
             stamp(finished) if finished is not None else None))
        return run_id

    def chunks(self) -> Iterator[tuple[dict[str, list], int]]:
        for step in (self._environments, self._sequences, self._batches):
            for _ in step():
                self.done += 1
                if len(self.tables["execution_runs"]) >= CHUNK_RUNS:
                    yield self._take()
        yield self._take()

    def _take(self) -> tuple[dict[str, list], int]:
        tables, self.tables = self.tables, {t: [] for t in TABLES}
        return tables, self.done

    # --- environments --------------------------------------------------------------------------

    def _environments(self) -> Iterator[None]:
        shape = self.shape
        count = shape.environments
        span = self.end - self.start
        life = min(span, ENVIRONMENT_LIFE_DAYS * DAY, span * CONCURRENT_ENVIRONMENTS // max(count, 1))
        for e in range(count):
            first = e * LEASES_PER_ENVIRONMENT
            leases = min(LEASES_PER_ENVIRONMENT, shape.leases - first)
            born = self.start + (span - life) * e // max(count - 1, 1)
            self._environment(e, born, life, leases)
            yield None

    def _environment(self, e: int, born: int, life: int, leases: int) -> None:
        rng = self.rng
        project = self._project()
        env_id = f"env-h-{e + 1:06d}"
        revision = 1 + e % 3
        validation = data.sha256_hex(f"{env_id}:validation:{revision}")
        events = self.tables["execution_environment_events"]
        bindings = self.tables["execution_environment_run_bindings"]
        pid = project.id
        sequence = 0

        def event(kind, old, new, at, reason=None, metadata=None, actor_class="system",
                  actor=data.SYSTEM_ACTOR):
            nonlocal sequence
            sequence += 1
            events.append((f"{env_id}:{sequence}", pid, env_id, sequence, kind, old, new,
                           actor_class, actor, reason, metadata, stamp(at)))

        preparing = born + rng.randint(30, 300)
        ready = preparing + rng.randint(60, 600)
        event("created", None, "queued", born)
        event("preparation_started", "queued", "preparing", preparing)
        validation_run = self._run(pid, "environment_validation", "completed", preparing, ready)
        self.bindings += 1
        bindings.append((f"bind-h-{self.bindings:07d}", env_id, validation_run, pid, "validation",
                         revision, validation, None, None, stamp(preparing), stamp(ready)))
        event("ready", "preparing", "ready", ready)
        state = "ready"
        first = ready + MINUTE
        slot = max((born + life - first) // max(leases, 1), 10)
        last_bound = stopped = None
        for j in range(leases):
            bound = first + j * slot + int(rng.random() * slot * 0.2)
            released = bound + max(1, int(slot * (0.3 + 0.3 * rng.random())))
            stop = released + int(slot * 0.2 * rng.random())
            kind = _LEASE_KINDS[j % len(_LEASE_KINDS)]
            run_id = self._run(pid, kind, "completed", bound, released)
            self.bindings += 1
            bindings.append((f"bind-h-{self.bindings:07d}", env_id, run_id, pid, "execution",
                             revision, validation, _AUTHORITY % (run_id, kind), _PLACEMENT,
                             stamp(bound), stamp(released)))
            event("started", state, "running", bound, metadata=_STARTED_METADATA % run_id)
            event("stopped", "running", "stopped", stop, reason="idle after the lease ended")
            state, last_bound, stopped = "stopped", bound, stop
        retiring = pending = retired = None
        last = stopped if stopped is not None else ready
        if last < self.now - DAY:
            retiring = last + rng.randint(HOUR, 6 * HOUR)
            pending = retiring + rng.randint(MINUTE, 5 * MINUTE)
            retired = pending + rng.randint(MINUTE, 10 * MINUTE)
            event("retirement_started", state, "retiring", retiring,
                  reason=data.RETIRE_REASONS[e % len(data.RETIRE_REASONS)])
            event("cleanup_pending", "retiring", "cleanup_pending", pending)
            event("retired", "cleanup_pending", "retired", retired)
            state, last = "retired", retired
        docker = project.provider == "docker_sandbox"
        self.tables["execution_environments"].append((
            env_id, pid, project.provider, "docker-27.3.1" if docker else "host-1",
            project.repo_path, revision, validation,
            "archon/sandbox-node:20" if e % 2 == 0 else None,
            None if e % 2 == 0 else "sha256:" + validation[:32],
            data.AGENTS[e % 2],
            f"ctr-h-{validation[32:44]}" if docker else None,
            state,
            stamp(last_bound) if last_bound is not None else None,
            stamp(stopped) if stopped is not None else None,
            stamp(retiring) if retiring is not None else None,
            stamp(pending) if pending is not None else None,
            stamp(retired) if retired is not None else None,
            stamp(born), stamp(preparing), stamp(ready), stamp(last),
        ))  # written before its events and bindings all the same: TABLES orders the inserts

    # --- build sequences -----------------------------------------------------------------------

    def _ticket(self, project: ProjectInfo, created: int) -> str:
        self.ticket_no += 1
        ticket_id = f"tkt-h-{self.ticket_no:07d}"
        number = self.ticket_keys.get(project.id, 100) + 1
        self.ticket_keys[project.id] = number
        external = self.ticket_no % 3 != 0
        self.tables["tickets"].append((
            ticket_id, project.id, TICKET_TITLES[self.ticket_no % len(TICKET_TITLES)],
            "linear" if external else None,
            f"{project.id.removeprefix('prj-')[:3].upper()}-{number}" if external else None,
            stamp(created),
        ))
        return ticket_id

    def _sequences(self) -> Iterator[None]:
        count = self.shape.settled_sequences
        span = self.end - self.start - 4 * HOUR
        for s in range(count):
            began = self.start + span * s // max(count, 1) + int(self.rng.random() * 600)
            self._settled_sequence(s, self._project(), began)
            yield None
        for k, project in enumerate(self.extra):
            began = self.now - 2 * HOUR - int(self.rng.random() * 3 * HOUR)
            self._active_sequence(count + k, project, began)
            yield None

    def _settled_sequence(self, s: int, project: ProjectInfo, began: int) -> None:
        rng = self.rng
        roll = rng.random()
        outcome = "completed" if roll < 0.82 else ("failed" if roll < 0.92 else "cancelled")
        stop_at = 5 if outcome == "completed" else 1 + int(rng.random() * 4)
        seq_id = f"seq-h-{s + 1:07d}"
        rows = self.tables["build_sequence_tickets"]
        tickets = [self._ticket(project, began - rng.randint(HOUR, 10 * DAY)) for _ in range(4)]
        if s % 4 == 0:
            self.tables["ticket_dependencies"].append((tickets[0], tickets[1]))
        queued = stamp(began)
        at = began
        for position, ticket_id in enumerate(tickets, start=1):
            if position < stop_at:
                started, finished = at + 5 * MINUTE, at + 5 * MINUTE + rng.randint(10, 60) * MINUTE
                self._run(project.id, "build", "completed", started, finished)
                rows.append((seq_id, ticket_id, position, "completed", queued, stamp(started),
                             stamp(finished)))
                at = finished
            elif position == stop_at:
                started, finished = at + 5 * MINUTE, at + 5 * MINUTE + rng.randint(5, 40) * MINUTE
                status = "failed" if outcome == "failed" else "cancelled"
                self._run(project.id, "build", status, started, finished)
                rows.append((seq_id, ticket_id, position, status, queued, stamp(started),
                             stamp(finished)))
                at = finished
            else:
                rows.append((seq_id, ticket_id, position, "cancelled", queued, None, stamp(at)))
        self.tables["build_sequences"].append((seq_id, project.id, outcome, queued, stamp(at)))

    def _active_sequence(self, s: int, project: ProjectInfo, began: int) -> None:
        """One ticket done, one building, two queued: what step 009 fails and cancels."""
        rng = self.rng
        seq_id = f"seq-h-{s + 1:07d}"
        rows = self.tables["build_sequence_tickets"]
        tickets = [self._ticket(project, began - rng.randint(HOUR, 5 * DAY)) for _ in range(4)]
        queued = stamp(began)
        done_at = began + rng.randint(20, 50) * MINUTE
        self._run(project.id, "build", "completed", began + 5 * MINUTE, done_at)
        rows.append((seq_id, tickets[0], 1, "completed", queued, stamp(began + 5 * MINUTE),
                     stamp(done_at)))
        building = done_at + 2 * MINUTE
        self._run(project.id, "build", "running", building, None)
        rows.append((seq_id, tickets[1], 2, "active", queued, stamp(building), None))
        rows.append((seq_id, tickets[2], 3, "queued", queued, None, None))
        rows.append((seq_id, tickets[3], 4, "queued", queued, None, None))
        self.tables["build_sequences"].append((seq_id, project.id, "active", queued,
                                               stamp(building)))

    # --- check batches -------------------------------------------------------------------------

    def _batches(self) -> Iterator[None]:
        count = self.shape.check_batches
        span = self.end - self.start - HOUR
        for b in range(count):
            began = self.start + span * b // max(count, 1) + int(self.rng.random() * 600)
            self._batch(b, self._project(), began)
            yield None

    def _batch(self, b: int, project: ProjectInfo, began: int) -> None:
        rng = self.rng
        random = rng.random
        defs = self.checks[project.id]
        rotate = b % len(defs)
        order = defs[rotate:] + defs[:rotate]
        head = "%040x" % rng.getrandbits(160)
        workspace = _WORKSPACE % head
        expired = began < self.now - OUTPUT_KEPT_DAYS * DAY
        # (definition index, rerun of attempt number or None, outcome)
        plan: list[tuple[int, int | None, str]] = []
        for d in order[:3]:
            outcome = "passed"
            if random() < 0.12:
                outcome = _FAILURES[bisect(_FAILURE_CUM, random() * _FAILURE_CUM[-1])][0]
            plan.append((d, None, outcome))
        while len(plan) < 4:
            failed = [i for i, (_d, _r, o) in enumerate(plan) if o != "passed"
                      and not any(r == i for _d2, r, _o2 in plan)]
            if failed:
                i = failed[0]
                plan.append((plan[i][0], i, "passed" if random() < 0.75 else "command_failure"))
            elif len(order) > len(plan):
                plan.append((order[len(plan)], None, "passed"))
            else:
                plan.append((plan[-1][0], len(plan) - 1, "passed"))  # a confirming rerun
        batch_run = self._run(project.id, "check_batch", "completed", began, None)
        batch_index = len(self.tables["execution_runs"]) - 1
        attempt_rows = self.tables["check_attempt_details"]
        parser_rows = self.tables["check_attempt_diagnostic_parsers"]
        run_ids: list[str] = []
        finished_at: list[int] = []
        final: dict[int, str] = {}
        for i, (d, rerun_of, outcome) in enumerate(plan):
            definition_id, command, timeout = data.CHECKS[d]
            start = began + 20 * i if rerun_of is None else finished_at[rerun_of] + 30
            seconds = 20 + int(random() * min(timeout, 600))
            if outcome == "timeout":
                seconds = timeout
            end = start + seconds
            status = "completed" if outcome == "passed" else "failed"
            run_id = self._run(project.id, "check", status, start, end)
            exit_code = exit_signal = exit_error = None
            text = data.CHECK_OUTPUTS[definition_id][0 if outcome == "passed" else 1]
            if outcome == "passed":
                exit_code = 0
            elif outcome == "command_failure":
                exit_code = 1
            elif outcome == "timeout":
                exit_signal = "SIGKILL"
            elif outcome == "spawn_failure":
                exit_error, text = "spawn ENOENT", ""
            else:
                exit_error, text = "docker: connection reset by peer", ""
            size = len(text.encode())
            if expired:
                attempt_rows.append((
                    run_id, batch_run, definition_id, command, _CHECK_FINGERPRINTS[d], workspace,
                    workspace, outcome, run_ids[rerun_of] if rerun_of is not None else None,
                    exit_code, exit_signal, exit_error, 1 if size else 0, size, size, size, "",
                    "expired"))
            else:
                attempt_rows.append((
                    run_id, batch_run, definition_id, command, _CHECK_FINGERPRINTS[d], workspace,
                    workspace, outcome, run_ids[rerun_of] if rerun_of is not None else None,
                    exit_code, exit_signal, exit_error, 1 if size else 0, 0, size, size, text,
                    "retained"))
            parser = data.DIAGNOSTIC_PARSERS.get(definition_id)
            if parser is not None:
                parser_rows.append((run_id, parser, stamp(end)))
            run_ids.append(run_id)
            finished_at.append(end)
            final[d] = outcome
        completed = max(finished_at) + 5
        passed = all(o == "passed" for o in final.values())
        row = self.tables["execution_runs"][batch_index]
        self.tables["execution_runs"][batch_index] = (
            row[0], row[1], row[2], "completed" if passed else "failed", row[4], stamp(completed))
        purpose = ("post_build", "manual", "pre_review", "post_build")[b % 4]
        self.tables["check_batch_details"].append(
            (batch_run, "main" if b % 3 else "agent/" + data.BRANCH_TOPICS[b % len(data.BRANCH_TOPICS)],
             purpose, stamp(completed)))


__all__ = ["HistoryPlan", "meaning", "plan", "write_history"]
