"""Pieces the fleet console's tests share (no tests here).

`FixedLink` answers as the fleet client would, from fixed data: the snapshot tests photograph the
screens with known hosts, rows and states, without timing. The flow tests
(tests/tui/test_fleet_flows.py) go through the real client, ssh stand-in and server instead.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from console.tui.fleet_monitor import Answer
from tests.tui.pilot import wait_until

NOW_TEXT = "2025-06-01 12:00:00"


@dataclass(frozen=True)
class HostConfig:
    name: str
    read_only: bool = False


def request_row(request_id: str, project: str, kind: str, expires_at: str, requester: str,
                action: dict[str, Any]) -> dict[str, Any]:
    """A row as `approvals list --json` prints it (the fields the merged queue reads)."""
    return {"id": request_id, "project_id": f"prj-{project}", "project_name": project, "action_kind": kind,
            "action_json": json.dumps(action), "authority_json": json.dumps({"requested_by": requester}),
            "status": "pending", "expires_at": expires_at}


class FixedLink:
    """`hosts`: name -> ("ok", hello, rows) | ("stale", hello, rows, sentence, age) (connects, then
    every read answers from the cache) | ("down", sentence) | ("hang",) (connects forever)."""

    def __init__(self, hosts: dict[str, tuple]) -> None:
        self.hosts = hosts
        self.calls: list[tuple[str, str, dict]] = []
        self.closed = False
        self.script: dict[tuple[str, str], list[Answer]] = {}  # (host, method) -> answers given first
        self.shows: dict[tuple[str, str], dict] = {}  # (host, id) -> fields `approvals.show` adds

    def answer_next(self, host: str, method: str, *answers: Answer) -> None:
        self.script.setdefault((host, method), []).extend(answers)

    async def connect(self, host: str) -> Answer:
        spec = self.hosts[host]
        if spec[0] == "hang":
            await asyncio.Event().wait()
        if spec[0] == "down":
            return Answer(host, "unreachable", spec[1])
        return Answer(host, "ok", hello=spec[1])

    async def call(self, host: str, method: str, params: dict) -> Answer:
        self.calls.append((host, method, params))
        scripted = self.script.get((host, method))
        if scripted:
            return scripted.pop(0)
        spec = self.hosts[host]
        if method == "approvals.list" and spec[0] == "stale":
            return Answer(host, "stale", spec[3], data=list(spec[2]), age_seconds=spec[4])
        if method == "approvals.list":
            return Answer(host, "ok", exit=0, data=list(spec[2]))
        if method == "approvals.show":
            shown = {"id": params["id"], "status": "pending", "options": {"approve": None, "deny": None},
                     "confirm": {}}
            return Answer(host, "ok", exit=0, data={**shown, **self.shows.get((host, params["id"]), {})})
        if method == "doctor":
            return Answer(host, "ok", exit=0, data={"counts": {"error": 0, "warning": 1, "info": 0}})
        ids = params.get("ids", [])
        return Answer(host, "ok", exit=0, data=[{"ok": True, "id": i, "state": "approved",
                                                  "message": f"Approved {i}."} for i in ids])

    async def close(self) -> None:
        self.closed = True


# --- the fixed hosts of the snapshots and of `make screenshots` (tests/make_screenshots.py)

HELLO = {"archon_release": "1.10.0", "actor": "alice", "actor_source": "forced_command", "read_only": False}


def fleet_link() -> FixedLink:
    return FixedLink({
        "eu1": ("ok", HELLO, [
            request_row("apr-00000011", "billing", "git_push", "2025-06-01 12:40:00", "dave",
                        {"remote": "origin", "branch": "main"}),
            request_row("apr-00000019", "atlas-api", "custom_check", "2025-06-01 15:00:00", "erin",
                        {"command": "make test"}),
        ]),
        "us2": ("stale", dict(HELLO, archon_release="1.8.22"), [
            request_row("apr-00000007", "ml-pipeline", "git_push", "2025-06-01 13:10:00", "carol",
                        {"remote": "origin", "branch": "feature/x"}),
        ], "us2: ssh: connect to host us2 port 22: Connection timed out", 240),
        "ap3": ("ok", dict(HELLO, actor="ops", actor_source="shared_account", read_only=True), [
            request_row("apr-00000003", "docs", "custom_check", "2025-06-01 12:20:00", "frank",
                        {"command": "lint"}),
        ]),
        "sa4": ("down", "sa4: ssh: connect to host sa4 port 22: Connection refused"),
        "bh5": ("hang",),
    })


async def settled(pilot, app) -> None:
    """Every host but the black-holed one has answered (the STALE one twice: rows, then its age)."""
    app.animation_level = "none"
    await wait_until(pilot, lambda: [s.phase for s in app.status.values()]
                     == ["ok", "stale", "ok", "down", "connecting"], what="every host's answer")
    await wait_until(pilot, lambda: len(app.screen.rows) == 4 if hasattr(app.screen, "rows") else True,
                     what="the merged rows")
    app.screen.refresh_bindings()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
