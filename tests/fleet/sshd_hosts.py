"""Hosts for the fleet tests over real sshd (tests/fleet/sshd.py): each host's own database and the
hosts.toml that reaches the lab's instances through `ssh -F <the lab's ssh_config>`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from console.fleet.hosts import Fleet, load_fleet
from tests.approvals_helpers import add_request, seed
from tests.conftest import connect

FAR = datetime(2099, 1, 1, tzinfo=timezone.utc)  # pending by the real clock, which a host's writes use


def host_db(make_db, name: str, *, requester: str = "alice") -> Path:
    """The seeded approvals database for host `name`, its own instance (an oldest project of its own),
    with `apr-x` pending until 2099, requested by `requester`."""
    path = make_db(fill=seed, cached=True, name=f"{name}.db")
    conn = connect(path)
    conn.execute("INSERT INTO projects (id, name, repo_path, created_at) VALUES (?, ?, ?, '2020-01-01 00:00:00')",
                 (f"{name}-origin", name.upper(), f"/repo/{name}"))
    add_request(conn, "apr-x", "p1", expires_at=FAR, authority={"requested_by": requester})
    conn.close()
    return path


def write_fleet(lab, entries: dict[str, dict]) -> Fleet:
    """The lab's hosts.toml (`lab.base / "hosts.toml"`): `[ssh] command = ssh -F <the lab's config>`
    and `entries` (name -> table)."""
    lines = [f"[ssh]\ncommand = {json.dumps(['ssh', '-F', str(lab.config)])}\n"]
    for name, table in entries.items():
        lines.append(f"[hosts.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
        lines.append("")
    path = lab.base / "hosts.toml"
    path.write_text("\n".join(lines))
    return load_fleet(path)
