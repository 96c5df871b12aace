"""Each host's last successful read, so the console starts and shows something with hosts down.

One file per host and read (method and parameters, with the host's alias and database, so a
changed hosts.toml never shows another database's rows), 0600 in a private 0700 directory
(`$XDG_CACHE_HOME/archon-console/fleet`, checked by console/fleet/private.py). A file is written
to a temporary file created exclusively (`O_EXCL | O_NOFOLLOW`), then renamed over the old one,
so a reader sees the old read or the new one, never half. It is read back by console/small_files.py
`read_small_text` (a regular file, not a symlink, under a size cap). What it holds came from the
host and stays hostile data, shown through the same sanitiser as a live answer.

Data from here is only ever shown as `stale` with its age; a write never consults it (the client
checks the method table before it looks here). The cache also remembers the database instance each
host answered as, which is how a host that starts answering for another database is noticed.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from console.fleet.hosts import NAME, Host
from console.fleet.private import cache_home, private_dir
from console.fleet.protocol import MAX_RESPONSE_BYTES, read_wire_json
from console.small_files import read_small_text

MAX_FILE_BYTES = MAX_RESPONSE_BYTES + 64 * 1024  # one answer and its envelope
MAX_READS_PER_HOST = 64  # distinct (method, parameters) kept; the oldest go first


def cache_dir() -> Path:
    return private_dir(cache_home() / "archon-console" / "fleet")


def _named(host: Host) -> Host:
    """A host whose name can be part of a file name (hosts.toml's names are checked by
    console/fleet/hosts.py; a `Host` built elsewhere is checked here again)."""
    if not NAME.fullmatch(host.name):
        raise ValueError(f"{host.name!r} is not a host name")
    return host


def _key(host: Host, method: str, params: dict[str, Any]) -> str:
    what = json.dumps([host.ssh, host.db, method, params], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(what.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _write(path: Path, value: Any) -> None:
    data = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    if len(data) > MAX_FILE_BYTES:
        return
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _read(path: Path) -> Any:
    try:
        return read_wire_json(read_small_text(path, limit=MAX_FILE_BYTES))
    except (OSError, ValueError):  # absent, not ours to read, too large, not JSON: as if never cached
        return None


def _prune(directory: Path, host: Host) -> None:
    files = sorted(directory.glob(f"{host.name}+read+*.json"), key=lambda p: p.lstat().st_mtime)
    for old in files[: max(0, len(files) - MAX_READS_PER_HOST)]:
        old.unlink(missing_ok=True)


def store(host: Host, method: str, params: dict[str, Any], data: Any, hello: dict[str, Any] | None,
          exit_code: int | None) -> None:
    """Remember a successful read. Never raises: a cache that cannot be written loses nothing."""
    try:
        directory = cache_dir()
        _write(directory / f"{_named(host).name}+read+{_key(host, method, params)}.json",
               {"at": time.time(), "data": data, "hello": hello, "exit": exit_code})
        _prune(directory, host)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is only a cache
        return


def lookup(host: Host, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any] | None, int | None, float] | None:
    """(data, hello, exit, age in seconds) of the last successful read, or None."""
    try:
        found = _read(cache_dir() / f"{_named(host).name}+read+{_key(host, method, params)}.json")
    except Exception:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("at"), (int, float)):
        return None
    hello = found.get("hello") if isinstance(found.get("hello"), dict) else None
    exit_code = found.get("exit") if isinstance(found.get("exit"), int) else None
    return found.get("data"), hello, exit_code, max(0.0, time.time() - float(found["at"]))


def instance_file(host: Host) -> Path:
    """Where the host's database instance is remembered ('+' is in no host name, so no host's
    files can match another's)."""
    return cache_dir() / f"{_named(host).name}+instance.json"


def known_instance(host: Host) -> str | None:
    """The database instance this host answered as before (for its alias and database), or None."""
    try:
        found = _read(instance_file(host))
    except Exception:
        return None
    if isinstance(found, dict) and found.get("key") == _key(host, "", {}) and isinstance(found.get("instance_id"), str):
        return found["instance_id"]
    return None


def remember_instance(host: Host, instance_id: str) -> None:
    try:
        _write(instance_file(host), {"key": _key(host, "", {}), "instance_id": instance_id, "at": time.time()})
    except Exception:
        return


def forget_instance(host: Host) -> None:
    """Accept a replaced database: the next answer is remembered as the host's instance."""
    try:
        instance_file(host).unlink(missing_ok=True)
    except Exception:
        return


__all__ = ["MAX_FILE_BYTES", "cache_dir", "forget_instance", "instance_file", "known_instance", "lookup", "remember_instance", "store"]
