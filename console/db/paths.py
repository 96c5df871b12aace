"""Where the database is: `--db`, else `$ARCHON_DB_PATH`, else archon's default."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DB_PATH = Path("~/.archon/archon.db")


def resolve_db_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("ARCHON_DB_PATH")
    if env:
        return Path(env).expanduser()
    return DEFAULT_DB_PATH.expanduser()
