"""Upgrading straight to a release writes what that release's start writes (issue 18, finding 4).

A user who skipped 1.8.22 starts archon 1.10.0 on a 1.8.20 file: 1.8.22's backfills never run, so
1.10.0's own start gives every project (deleted ones too) revision `:1` in schema 3 and one
`:created` event, and nothing else. The console's `upgrade --to 1.10.0` on such a file must leave
exactly that (the oracle's direct start, tests/reference/builder.py `direct`), while a file that
really stopped at 1.8.22 (archon 1.8.22 started on it, or the console's `upgrade --to 1.8.22`)
keeps the chained history. docs/decisions.md ("Direct and chained upgrade paths") says how the
console tells the two apart.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.cli.cli import main
from console.db.execution_profiles import create, fingerprint, serialize
from console.errors import EXIT_UNUSABLE
from console.services.upgrade.run import run_upgrade
from tests import upgrade_helpers as uh
from tests.reference import builder, compare, scenarios
from tests.upgrade_helpers import assert_same

pytestmark = pytest.mark.slow

STARTS = {
    "ref-1.8.20": scenarios.ref_1820,
    "ref-1.8.20-shapes": scenarios.ref_1820_shapes,
    "console-1.8.20": lambda path: uh.db_1820(path, projects=3),
    "ref-1.8.21-shape": scenarios.ref_1821_shape,
}


def _console_upgrade(start: Path, out: Path, target: str) -> Path:
    """The console's `upgrade --to target --force` on a copy of `start`."""
    path = Path(shutil.copy(start, out))
    run_upgrade(path, target=target, force=True, snapshot_dir=out.parent)
    return path


def _start(tmp_path: Path, name: str) -> Path:
    return STARTS[name](tmp_path / f"{name}.db")


def _profile_rows(path: Path) -> dict[str, dict]:
    conn = sqlite3.connect(path)
    try:
        out = {}
        for pid, provider, active in conn.execute(
            "SELECT id, build_execution_provider, active_execution_profile_revision_id FROM projects ORDER BY id"
        ):
            revisions = conn.execute(
                "SELECT id, revision, schema_version, fingerprint, profile_json FROM execution_profile_revisions "
                "WHERE project_id = ? ORDER BY revision", (pid,)).fetchall()
            events = conn.execute(
                "SELECT id, event_type, profile_revision_id, previous_profile_revision_id "
                "FROM execution_profile_audit_events WHERE project_id = ? ORDER BY id", (pid,)).fetchall()
            out[pid] = {"provider": provider, "active": active, "revisions": revisions, "events": events}
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("name", list(STARTS))
def test_upgrade_to_1_10_0_matches_archon_1_10_0_started_directly(tmp_path, name):
    """Schema objects and every row (revisions, events, active pointers, profile JSON and
    fingerprints) equal archon 1.10.0's start on the same file."""
    start = _start(tmp_path, name)
    ours = _console_upgrade(start, tmp_path / "console.db", "1.10.0")
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.10.0", chain=False)
    assert_same(ours, theirs, f"{name} -> 1.10.0 (archon 1.10.0 started directly)")


@pytest.mark.parametrize("name", ["ref-1.8.20", "ref-1.8.20-shapes", "console-1.8.20"])
def test_direct_upgrade_writes_one_schema_3_revision_and_one_created_event(tmp_path, name):
    """What 1.10.0's start writes, stated outright: no `:v3`, no `:chat-build*-v3`, no schema 2."""
    start = _start(tmp_path, name)
    ours = _console_upgrade(start, tmp_path / "console.db", "1.10.0")
    rows = _profile_rows(ours)
    assert len(rows) >= 3
    for pid, row in rows.items():
        profile = create(row["provider"], 3)
        first = f"{pid}:execution-profile:1"
        assert row["active"] == first, pid
        assert row["revisions"] == [(first, 1, 3, fingerprint(profile), serialize(profile))], pid
        assert row["events"] == [(f"{first}:created", "revision_created", first, None)], pid
        assert json.loads(row["revisions"][0][4])["eligible_workloads"] == ["build", "chat_build", "check"]


def test_the_oracle_tells_the_two_paths_apart(tmp_path):
    """The reference itself: direct and chained starts of the same file differ exactly where the
    issue says (so the comparisons above can fail)."""
    direct = builder.direct(tmp_path / "direct.db", "1.10.0", populate=scenarios.populate)
    chained = builder.upgraded(tmp_path / "chained.db", "1.10.0", populate=scenarios.populate)
    assert _profile_rows(direct)["proj-gone"]["revisions"][0][2] == 3
    assert _profile_rows(chained)["proj-gone"]["revisions"][0][2] == 2
    assert [r[0] for r in _profile_rows(chained)["proj-1"]["revisions"]] == [
        "proj-1:execution-profile:1", "proj-1:execution-profile:v3", "proj-1:execution-profile:chat-build-check-v3"]
    assert [r[0] for r in _profile_rows(direct)["proj-1"]["revisions"]] == ["proj-1:execution-profile:1"]
    assert compare.row_differences(direct, chained)


def test_a_stop_at_1_8_22_keeps_the_chained_history(tmp_path):
    """`upgrade --to 1.8.22` is archon 1.8.22's start; a later `upgrade` to 1.10.0 is then 1.10.0's
    start on that file: the chained path, as archon started twice."""
    start = _start(tmp_path, "ref-1.8.20-shapes")
    ours = Path(shutil.copy(start, tmp_path / "console.db"))
    run_upgrade(ours, target="1.8.22", force=True, snapshot_dir=tmp_path)
    theirs_1822 = scenarios.archon_upgrade(start, tmp_path / "archon-1822.db", "1.8.20", "1.8.22")
    assert_same(ours, theirs_1822, "ref-1.8.20-shapes -> 1.8.22")
    run_upgrade(ours, target="1.10.0", force=True, snapshot_dir=tmp_path)
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.10.0")
    assert_same(ours, theirs, "ref-1.8.20-shapes -> 1.8.22 -> 1.10.0")
    assert _profile_rows(ours)["proj-gone"]["revisions"][0][2] == 2


def test_an_interrupted_direct_upgrade_continues_only_to_its_target(tmp_path, capsys):
    """Killed after step 010 on the way to 1.10.0 (1.8.22's backfills were left to 1.10.0's),
    the file cannot be finished as 1.8.22: refused, nothing written; continuing to 1.10.0 ends
    where archon 1.10.0's direct start does."""
    start = _start(tmp_path, "ref-1.8.20")
    path = Path(shutil.copy(start, tmp_path / "archon.db"))
    crashed = uh.run_cli_crashing_at("after:010-build-sequence-profile-triggers", "--db", str(path),
                                     "upgrade", "--force", "--snapshot-dir", str(tmp_path))
    assert crashed.returncode != 0
    before = uh.sha256(path)
    assert main(["--db", str(path), "upgrade", "--to", "1.8.22", "--force"]) == EXIT_UNUSABLE
    err = capsys.readouterr().err
    assert "1.10.0" in err and "--to 1.10.0" in err
    assert uh.sha256(path) == before
    assert main(["--db", str(path), "upgrade", "--force", "--snapshot-dir", str(tmp_path)]) == 0
    theirs = scenarios.archon_upgrade(start, tmp_path / "oracle.db", "1.8.20", "1.10.0", chain=False)
    assert_same(path, theirs, "ref-1.8.20 -> (killed after 010) -> 1.10.0")


POLICY_COLUMNS = ("required_check_definition_ids", "pre_review_check_definition_ids",
                  "post_build_check_definition_ids", "auto_fix_check_definition_ids")
_project = st.fixed_dictionaries({
    "provider": st.sampled_from(["host", "docker_sandbox"]),
    "policies": st.tuples(*[st.sampled_from([None, "[]", '["lint"]']) for _ in POLICY_COLUMNS]),
    "deleted": st.booleans(),
})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(projects=st.lists(_project, min_size=1, max_size=4), stops=st.sampled_from(
    [("1.10.0",), ("1.8.22",), ("1.8.22", "1.10.0")]))
def test_every_upgrade_path_writes_what_its_stops_start_write(tmp_path_factory, projects, stops):
    """Generated 1.8.20 files (providers, configured check lists, deleted projects), upgraded by the
    console through `stops` (each an `upgrade --to`): the same schema and rows as archon started at
    exactly those releases, no other."""
    work = tmp_path_factory.mktemp("paths")

    def populate(conn, release):
        conn.execute("BEGIN")
        for n, p in enumerate(projects):
            row = {"id": f"p{n}", "name": f"P{n}", "repo_path": f"/srv/p{n}", "created_at": scenarios.T0,
                   "build_execution_provider": p["provider"], **dict(zip(POLICY_COLUMNS, p["policies"])),
                   "deletion_started_at": scenarios.T0 if p["deleted"] else None}
            conn.execute(f"INSERT INTO projects ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                         tuple(row.values()))
        conn.execute("COMMIT")

    start = builder.upgraded(work / "start.db", "1.8.20", populate=populate)
    ours = Path(shutil.copy(start, work / "console.db"))
    theirs = Path(shutil.copy(start, work / "archon.db"))
    conn = builder.connect(theirs)
    try:
        for stop in stops:
            run_upgrade(ours, target=stop, force=True, snapshot_dir=work)
            builder.archon_start(conn, stop)
        builder.archon_start(conn, stops[-1])  # once more: the state archon converges to (scenarios.archon_upgrade)
    finally:
        conn.close()
    assert_same(ours, theirs, f"{len(projects)} project(s) through {' -> '.join(stops)}")
