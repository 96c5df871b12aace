"""Which database a fleet host serves: its archon release and shape, and an instance id.

The instance id lets the fleet client notice two host entries that reach the same database (or a
copy of it) and a host whose file was swapped for another archon's. It is derived, never stored:
the console writes nothing to identify a file (a read-only session could not, and an id written to
archon's tables is a change archon did not make).

Derivation: SHA-256 over the id and `created_at` of the oldest project (by `created_at`, then id),
the first 32 hex digits. archon never changes either column of a project, so the id survives
restarts, `VACUUM`, moving or renaming the file, and a console upgrade (the console's own ledger
is not used: the first upgrade would change the id of every file it upgrades). Its limits:

- an empty database (no project yet) has no id (`None`, source "empty"); the first project gives it one;
- deleting the oldest project changes the id (the next oldest takes over);
- a copy of the file (a restored backup on another host) has the same id: that is a second copy of
  one instance, which is what the client flags;
- two unrelated databases whose oldest projects share id and creation second collide (archon's
  project ids are random, so only a deliberate copy of those rows does that).
"""

from __future__ import annotations

import hashlib
from typing import Any

from console.db.connect import ArchonDatabase

_OLDEST = "SELECT id, created_at FROM projects ORDER BY created_at, id LIMIT 1"


def instance_id(handle: ArchonDatabase) -> tuple[str | None, str]:
    """(id, source): source "projects" for a derived id, "empty" for None."""
    row = handle.conn.execute(_OLDEST).fetchone()
    if row is None:
        return None, "empty"
    project_id, created = row[0], row[1]
    seed = f"archon-console instance\0{type(project_id).__name__}:{project_id}\0{type(created).__name__}:{created}"
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32], "projects"


def describe(handle: ArchonDatabase) -> dict[str, Any]:
    """What `hello` says about the database: the release and shape `upgrade --plan` detects
    (console/db/detect.py), whether the console's ledger is there, and the instance id."""
    shape = handle.shape
    ident, source = instance_id(handle)
    return {
        "archon_release": shape.release,
        "shape": {"release": shape.release, "reason": shape.reason, "newer": shape.newer,
                  "intermediate": shape.intermediate,
                  "ledger": "versioned" if shape.versioned else "unversioned", "steps": len(shape.ledger)},
        "instance_id": ident,
        "instance_source": source,
    }


__all__ = ["describe", "instance_id"]
