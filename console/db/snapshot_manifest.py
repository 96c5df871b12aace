"""A snapshot's SHA-256, kept where it survives a move: a manifest file beside the snapshot.

The ledger inside the database records each snapshot's path and SHA-256, but a path stops
matching once the snapshot is moved, and the ledger is gone from a database that was restored to
its pre-upgrade state. So every snapshot also gets `<snapshot>.sha256`, one line in `sha256sum`
format (`<hex>  <file name>`; `sha256sum -c` reads it), and `restore` looks a snapshot up by the
hash of its content: the manifest beside it, a manifest of the same hash in its directory or the
database's (a snapshot renamed without its manifest), or a ledger row.

A manifest also names the database the snapshot was taken from: a second line
`# source-database: "<absolute path>"` (a JSON string; `sha256sum -c` skips lines that start with
`#`). A manifest without it was written by an older console and is "unbound". Since issue 18 it
also names that database's identity, `# source-instance: "<id>"` (console/db/ledger.py
`instance_id`: the SHA-256 of the snapshot its first upgrade took; a database never upgraded gets
this snapshot's own), and `# source-ledger: <n>`, how many upgrade steps its ledger recorded then.
Older consoles skip both lines; a manifest without them is judged by its path alone
(docs/decisions.md, "A snapshot names its database").

A manifest is written exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`), never over an existing file or
through a symlink, and read through a descriptor the trust walk handed over. Its text proves nothing
about who wrote it: anyone who can write the directory can put a snapshot of their choosing beside a
manifest of their choosing. So a manifest vouches for a snapshot only when nobody but the operator
(or root) could have placed either (console/db/file_trust.py). The ledger inside the database
outranks any manifest, and a manifest speaks only for the database it names
(console/services/upgrade/restore.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from console.db.file_trust import Judged, open_judged
from console.text import UnreadableJson, read_json

SUFFIX = ".sha256"
MAX_BYTES = 16384  # two short lines (a path is at most 4096 bytes); anything bigger is not one of ours
MAX_SCANNED = 2000  # directory entries looked at when searching for a manifest by hash
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
_SOURCE = "# source-database: "
_INSTANCE = "# source-instance: "
_LEDGER = "# source-ledger: "


@dataclass(frozen=True)
class Manifest:
    sha256: str
    source: str | None  # the absolute path of the database it was taken from; None: an older manifest
    untrusted: str | None  # why another user could have placed it or its snapshot; None: nobody could
    instance: str | None = None  # that database's identity (console/db/ledger.py); None: an older manifest
    ledger_steps: int | None = None  # steps its upgrade ledger recorded when the snapshot was taken


def manifest_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + SUFFIX)


def write_manifest(snapshot: Path, sha256: str, source: Path | None = None, *,
                   instance: str | None = None, ledger_steps: int | None = None) -> Path:
    """Create `<snapshot>.sha256`; `FileExistsError` if the name is taken (the caller picks another).

    `source`: the database the snapshot was taken from (made absolute here); `instance` and
    `ledger_steps`: its identity and its ledger's length then."""
    target = manifest_path(snapshot)
    text = f"{sha256}  {snapshot.name}\n"
    if source is not None:
        text += f"{_SOURCE}{json.dumps(os.path.abspath(source))}\n"
    if instance is not None:
        text += f"{_INSTANCE}{json.dumps(instance)}\n"
    if ledger_steps is not None:
        text += f"{_LEDGER}{int(ledger_steps)}\n"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        target.unlink()
        raise
    os.close(fd)
    return target


def _comment(line: str, prefix: str, kind: type) -> tuple[bool, object]:
    """(False, None) when `line` is not this comment; (True, value) when it is and well formed;
    raises ValueError when it is this comment but malformed (a file another user may have written)."""
    if not line.startswith(prefix):
        return False, None
    try:
        value = read_json(line[len(prefix):])
    except UnreadableJson:
        raise ValueError(prefix) from None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(prefix)
    return True, value


def parse_manifest(data: bytes) -> tuple[str, str | None] | None:
    """(SHA-256, source database or None) from a manifest's bytes, or None when it is not one."""
    parsed = parse_identity(data)
    return None if parsed is None else (parsed[0], parsed[1])


def parse_identity(data: bytes) -> tuple[str, str | None, str | None, int | None] | None:
    """(SHA-256, source database, source instance, ledger steps) from a manifest's bytes, or None
    when it is not one; each of the last three None when the manifest does not say."""
    if len(data) > MAX_BYTES:
        return None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    match = _LINE.match(lines[0].strip()) if lines else None
    if match is None:
        return None
    found: dict[str, object] = {}
    for line in lines[1:]:
        for prefix, kind in ((_SOURCE, str), (_INSTANCE, str), (_LEDGER, int)):
            try:
                matched, value = _comment(line, prefix, kind)
            except ValueError:
                return None
            if matched:
                found[prefix] = value
    steps = found.get(_LEDGER)
    return (match.group(1), found.get(_SOURCE), found.get(_INSTANCE),  # type: ignore[return-value]
            steps if isinstance(steps, int) and steps >= 0 else None)


def _read_held(held: Judged) -> Manifest | None:
    try:
        parsed = parse_identity(os.pread(held.fd, MAX_BYTES + 1, 0))
    except OSError:
        return None
    return None if parsed is None else Manifest(parsed[0], parsed[1], held.untrusted, parsed[2], parsed[3])


def manifest_beside(snapshot: Judged) -> Manifest | None:
    """The snapshot's own manifest, read through the directory the snapshot was opened in.

    Its `untrusted` covers the snapshot too: a manifest cannot vouch for a file another user placed."""
    try:
        held = snapshot.sibling(snapshot.name + SUFFIX)
    except OSError:
        return None
    with held:
        found = _read_held(held)
    if found is None:
        return None
    return Manifest(found.sha256, found.source, found.untrusted or snapshot.untrusted,
                    found.instance, found.ledger_steps)


def read_manifest(path: Path) -> Manifest | None:
    """The manifest at `path` (judged, console/db/file_trust.py), or None when absent or not a manifest."""
    try:
        held = open_judged(path)
    except OSError:
        return None
    with held:
        return _read_held(held)


def manifests_with_hash(directories: Iterable[Path], sha256: str) -> list[tuple[Path, Manifest]]:
    """Manifests in `directories` (not below them) that record `sha256`, each judged as it was read."""
    found: list[tuple[Path, Manifest]] = []
    seen: set[Path] = set()
    for directory in directories:
        try:
            directory = directory.resolve()
        except OSError:
            continue
        if directory in seen:
            continue
        seen.add(directory)
        try:
            with os.scandir(directory) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_SCANNED:
                        break
                    if not entry.name.endswith(SUFFIX):
                        continue
                    manifest = read_manifest(Path(entry.path))
                    if manifest is not None and manifest.sha256 == sha256:
                        found.append((Path(entry.path), manifest))
        except OSError:
            continue
    return found


__all__ = [
    "SUFFIX",
    "Manifest",
    "manifest_beside",
    "manifest_path",
    "manifests_with_hash",
    "parse_identity",
    "parse_manifest",
    "read_manifest",
    "write_manifest",
]
