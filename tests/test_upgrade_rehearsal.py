"""The upgrade never stops part-way, and where archon's start succeeds the console's upgrade
succeeds with archon's result (attack round on issue 18, findings 1a-1d).

Each step commits on its own, so a step that fails after earlier steps committed leaves a schema no
release has. The preflight runs the whole pending chain on a private copy of the profile tables
(console/db/migrations/fixed_ids.py `rehearse`) and refuses before step 001 when any step fails
there; and the steps standing for archon's 1.8.22 and 1.10.0 starts do what those starts do before
their backfills (the provider reset, and 1.10.0's backfills without the triggers its rebuild
dropped, re-created by step 022: console/db/migrations/profile_triggers.py), so a file archon starts
cleanly is not refused, and a run stopped after step 020 resumes to archon's result.
The oracle (tests/reference) is archon's start; `direct` paths start the target release once.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings, strategies as st

from console.cli.cli import main
from console.errors import EXIT_UNUSABLE
from console.services.doctor import run_doctor
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.reference import builder, profiles, scenarios
from tests.upgrade_helpers import assert_same
from tests.upgrade_helpers import fingerprint_dir


def _console(start: Path, out: Path, target: str) -> Path:
    path = Path(shutil.copy(start, out))
    run_upgrade(path, target=target, force=True, snapshot_dir=out.parent)
    return path


def _revision(conn, rid: str, project: str, number: int, version: int, profile: dict, *, verb="INSERT") -> None:
    text = profiles.serialize(profile)
    conn.execute(
        f"{verb} INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
        "profile_json) VALUES (?, ?, ?, ?, ?, ?)",
        (rid, project, number, version, profiles.fingerprint(json.loads(text)), text))


def _ledger(path: Path) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT name FROM sqlite_master WHERE name = '_archon_console_ledger'").fetchall()
    finally:
        conn.close()


def _refused_before_step_001(path: Path, capsys, *words: str) -> None:
    before = fingerprint_dir(path.parent)
    assert main(["--db", str(path), "upgrade", "--force", "--to", "1.10.0"]) == EXIT_UNUSABLE
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert fingerprint_dir(path.parent) == before
    assert _ledger(path) == []


@pytest.mark.slow
def test_1a_dangling_pointer_on_a_1_8_22_file_upgrades_as_archon_1_10_0_starts(tmp_path):
    """proj-2 points at a deleted docker revision (archon's guards allow the activation, nothing
    guards the delete): 1.10.0's start moves it on; step 021 used to be refused by 007's guard."""
    start = scenarios.ref_1822(tmp_path / "start.db", "upgraded")
    conn = builder.connect(start)
    old = json.loads(conn.execute(
        "SELECT profile_json FROM execution_profile_revisions WHERE id = 'proj-1:execution-profile:1'").fetchone()[0])
    conn.execute("BEGIN")
    _revision(conn, "proj-2:rev-2", "proj-2", 2, 2,
              profiles.normalize({**old, "provider_preference": "docker_sandbox"}, 2).profile)
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = 'proj-2:rev-2', "
                 "build_execution_provider = 'docker_sandbox' WHERE id = 'proj-2'")
    conn.execute("COMMIT")
    conn.execute("DELETE FROM execution_profile_revisions WHERE id = 'proj-2:rev-2'")
    conn.close()
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.22", "1.10.0")
    ours = _console(start, tmp_path / "console.db", "1.10.0")
    assert_same(ours, theirs, "1a: dangling docker pointer, 1.8.22 -> 1.10.0")


GUARD = "Build execution provider must project the active execution profile"


def _dangling_docker_pointer(start: Path) -> Path:
    """proj-2 points at a deleted docker revision (archon's guards allow the activation, nothing
    guards the delete)."""
    conn = builder.connect(start)
    old = json.loads(conn.execute(
        "SELECT profile_json FROM execution_profile_revisions WHERE project_id = 'proj-1' "
        "ORDER BY revision LIMIT 1").fetchone()[0])
    version = conn.execute("SELECT max(schema_version) FROM execution_profile_revisions").fetchone()[0]
    conn.execute("BEGIN")
    _revision(conn, "proj-2:rev-d", "proj-2", 9, version,
              profiles.normalize({**old, "provider_preference": "docker_sandbox"}, version).profile)
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = 'proj-2:rev-d', "
                 "build_execution_provider = 'docker_sandbox' WHERE id = 'proj-2'")
    conn.execute("COMMIT")
    conn.execute("DELETE FROM execution_profile_revisions WHERE id = 'proj-2:rev-d'")
    conn.close()
    return start


def test_4_adopted_1_10_0_file_archon_does_not_rebuild_keeps_the_guards_and_refuses(tmp_path, capsys):
    """upgrade2 finding 4: on a file archon 1.10.0 made, its start does not rebuild the (schema-3)
    revisions table, so its guards stay while its backfills run and refuse proj-2's revision 1;
    steps 021/022 used to drop them anyway and the upgrade succeeded, leaving a docker provider over
    a host profile. Now the rehearsal refuses before step 001 with archon's message."""
    start = _dangling_docker_pointer(builder.upgraded(tmp_path / "start.db", "1.10.0", populate=scenarios.populate))
    with pytest.raises((builder.ArchonStartFailed, sqlite3.Error), match=GUARD):
        scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.10.0", chain=False)
    _refused_before_step_001(start, capsys, "021-profile-backfill-current-schema",
                             "Build execution provider must project the active execution profile")


def _revision_triggers(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND instr(sql, 'execution_profile_revisions') > 0"))
    finally:
        conn.close()


@pytest.mark.slow
def test_4_a_run_resumed_after_step_020_finishes_as_archon_1_10_0_starts(tmp_path):
    """Attack round 3: 1a's file, its upgrade killed right after step 020 committed (the rebuild).
    020 used to commit with the guards archon's rebuild drops, a state archon never leaves, and the
    resumed upgrade refused at 021 where archon's own start finishes. Now 020 commits without them
    (what an archon killed after its rebuild leaves: the same triggers are gone), and the resumed
    upgrade ends equal to archon 1.10.0 started on the original file, and to archon started again
    after its own crash at the same point."""
    from tests.upgrade_helpers import ledger_names, run_cli_crashing_at

    path = _dangling_docker_pointer(scenarios.ref_1822(tmp_path / "start.db", "upgraded"))
    original = Path(shutil.copy(path, tmp_path / "original.db"))
    theirs = scenarios.archon_upgrade(original, tmp_path / "archon.db", "1.8.22", "1.10.0")

    archon_crashed = Path(shutil.copy(original, tmp_path / "archon-crashed.db"))
    conn = builder.connect(archon_crashed)
    try:
        with pytest.raises(builder.ArchonStopped):
            builder.archon_start(conn, "1.10.0", stop_after_rebuild=True)
    finally:
        conn.close()

    crashed = run_cli_crashing_at("after:020-profile-revisions-rebuild-v3", "--db", str(path), "upgrade",
                                  "--force", "--to", "1.10.0", "--snapshot-dir", str(tmp_path))
    assert crashed.returncode != 0
    assert ledger_names(path)[-1] == "020-profile-revisions-rebuild-v3"
    assert _revision_triggers(path) == _revision_triggers(archon_crashed) == []
    report = run_doctor(path, checks=["schema"], now=datetime.now(timezone.utc))
    assert "schema.unknown_shape" not in report.ids()
    stopped = report.finding("schema.interrupted_upgrade")
    assert stopped is not None and stopped.severity == "warning", report.ids()
    assert "020-profile-revisions-rebuild-v3" in stopped.found and "create_project_execution_profile" in stopped.found
    assert "upgrade --to 1.10.0" in stopped.what_to_do

    conn = builder.connect(archon_crashed)
    try:
        builder.archon_start(conn, "1.10.0")  # archon's next start finishes on what its crash left
    finally:
        conn.close()
    assert_same(archon_crashed, theirs, "archon 1.10.0 restarted after a crash at its rebuild")

    gate = plan_upgrade(path, "1.10.0", snapshot_dir=tmp_path).profile_evidence
    assert gate is not None and "022-profile-workload-eligibility" in gate.steps  # it installs the trigger
    assert run_upgrade(path, target="1.10.0", force=True, snapshot_dir=tmp_path).applied
    assert_same(path, theirs, "1a, upgrade killed after step 020 and resumed -> archon 1.10.0's start")


def test_doctor_names_an_archon_start_stopped_after_its_rebuild(tmp_path):
    """No ledger (archon's own start was killed after its 1.10.0 rebuild): doctor cannot vouch for
    the shape but says which known state it is, with the triggers archon re-creates later."""
    path = scenarios.ref_1822(tmp_path / "start.db", "upgraded")
    conn = builder.connect(path)
    try:
        with pytest.raises(builder.ArchonStopped):
            builder.archon_start(conn, "1.10.0", stop_after_rebuild=True)
    finally:
        conn.close()
    finding = run_doctor(path, checks=["schema"], now=datetime.now(timezone.utc)).finding("schema.unknown_shape")
    assert finding is not None and "archon 1.10.0 start stopped right after its rebuild" in finding.found
    assert "validate_project_execution_profile_owner_update" in finding.found


@pytest.mark.slow
def test_1b_provider_not_projecting_a_schema_1_profile_upgrades_as_archon_1_10_0_starts(tmp_path):
    """1.8.21 shape (no projection guards): proj-1 runs on a docker schema-1 revision while its
    provider stays host; archon 1.10.0 started directly succeeds."""
    start = scenarios.ref_1821_shape(tmp_path / "start.db")
    conn = builder.connect(start)
    _revision(conn, "proj-1:legacy", "proj-1", 2, 1, {"provider_preference": "docker_sandbox"})
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = 'proj-1:legacy' WHERE id = 'proj-1'")
    conn.close()
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.10.0", chain=False)
    ours = _console(start, tmp_path / "console.db", "1.10.0")
    assert_same(ours, theirs, "1b: host provider on a docker schema-1 profile, 1.8.21 shape -> 1.10.0")


def test_1c_a_revision_that_becomes_active_part_way_and_fails_refuses_before_step_001(tmp_path, capsys):
    """proj-1's pointer is '' and its revision 1 is unmigratable ({"provider_preference":"podman"}):
    021's first half activates it and its second half stops on it. Archon stops there too; the
    console refuses before the first write, naming the step and archon's message."""
    start = scenarios.ref_1821_shape(tmp_path / "start.db")
    conn = builder.connect(start)
    conn.execute("UPDATE projects SET active_execution_profile_revision_id = '' WHERE id = 'proj-1'")
    conn.execute("DELETE FROM execution_profile_revisions WHERE id = 'proj-1:execution-profile:1'")
    _revision(conn, "proj-1:execution-profile:1", "proj-1", 1, 1, {"provider_preference": "podman"})
    conn.close()
    _refused_before_step_001(start, capsys, "021-profile-backfill-current-schema",
                             "Stored execution profile revision proj-1:execution-profile:1 is invalid")


def _unknown_provider(path: Path, project: str = "proj-1") -> Path:
    """A provider outside (host, docker_sandbox), as a column `ensureColumn` added without the CHECK
    lets one in (written here past the CHECK)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE projects SET build_execution_provider = 'podman' WHERE id = ?", (project,))
    conn.commit()
    conn.close()
    return path


@pytest.mark.slow
def test_1d_unknown_provider_direct_to_1_10_0_runs_on_the_host_as_archon_does(tmp_path):
    start = _unknown_provider(scenarios.ref_1820(tmp_path / "start.db"))
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.10.0", chain=False)
    ours = _console(start, tmp_path / "console.db", "1.10.0")
    assert_same(ours, theirs, "1d: unknown provider, 1.8.20 -> 1.10.0 directly")


@pytest.mark.slow
def test_1d_unknown_provider_to_1_8_22_runs_on_the_host_as_archon_does(tmp_path):
    start = _unknown_provider(scenarios.ref_1820(tmp_path / "start.db"))
    theirs = scenarios.archon_upgrade(start, tmp_path / "archon.db", "1.8.20", "1.8.22")
    ours = _console(start, tmp_path / "console.db", "1.8.22")
    assert_same(ours, theirs, "1d: unknown provider, 1.8.20 -> 1.8.22")


# --- generated: hostile but archon-valid starting states ------------------------------------------

PROVIDERS = ("host", "docker_sandbox", "podman")
PROFILES = (
    {"provider_preference": "host"},
    {"provider_preference": "docker_sandbox"},
    {"provider_preference": "podman"},  # no release normalises it
    {"provider_preference": "host", "eligible_workloads": ["build"]},
)
_BASES: dict[str, Path] = {}
EVIDENCE_REFUSAL = "contradicts the console's execution-profile algorithms"


def _base(kind: str, directory: Path) -> Path:
    """Each starting shape built once per session (the oracle's archon starts), then copied."""
    if kind not in _BASES:
        path = directory / f"base-{kind}.db"
        _BASES[kind] = (scenarios.ref_1821_shape(path) if kind == "1.8.21"
                        else scenarios.ref_1822(path, "upgraded") if kind == "1.8.22"
                        else builder.upgraded(path, "1.10.0", populate=scenarios.populate))  # adopted
    return _BASES[kind]


project_state = st.fixed_dictionaries({
    "provider": st.sampled_from(PROVIDERS),
    "extra": st.one_of(st.none(), st.sampled_from(PROFILES)),  # one more revision of the project
    "pointer": st.sampled_from(("keep", "empty", "extra", "dangling", "other-project")),
    "delete_extra": st.booleans(),
})


def _hostile(path: Path, kind: str, states: list[dict]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'projects' "
                          "AND name LIKE 'validate_project_execution_profile_%'").fetchall()
    if kind != "1.8.21":  # archon's guards would refuse what follows; a writer without them does not
        conn.execute("PRAGMA recursive_triggers = OFF")
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'projects' "
                                    "AND name LIKE 'validate_project_execution_profile_%'").fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
    version = {"1.8.21": 1, "1.8.22": 2}.get(kind, 3)
    for project, state in zip(("proj-1", "proj-2"), states):
        if state["extra"] is not None:
            normal = profiles.normalize(state["extra"], version)  # as archon writes it, where it can
            extra = normal.profile if normal.ok and version > 1 else state["extra"]
            _revision(conn, f"{project}:extra", project, 7, version, extra, verb="INSERT OR IGNORE")
        pointer = {"keep": None, "empty": "", "extra": f"{project}:extra" if state["extra"] else "",
                   "dangling": f"{project}:gone", "other-project": "proj-1:execution-profile:1" if project == "proj-2"
                   else "proj-2:execution-profile:1"}[state["pointer"]]
        if pointer is not None:
            conn.execute("UPDATE projects SET active_execution_profile_revision_id = ? WHERE id = ?", (pointer, project))
        conn.execute("UPDATE projects SET build_execution_provider = ? WHERE id = ?", (state["provider"], project))
        if state["delete_extra"] and state["extra"] is not None:
            conn.execute("DELETE FROM execution_profile_revisions WHERE id = ?", (f"{project}:extra",))
    if kind == "1.8.22":  # the guards come back as archon's start left them
        for name in ("owner_insert", "owner_update", "projection_insert", "projection_update"):
            conn.execute(builder.seen("1.8.22", f"create trigger validate_project_execution_profile_{name}"))
    if kind == "1.10.0":  # as archon 1.10.0 left them
        for _name, sql in guards:
            conn.execute(sql)
    conn.close()


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(("1.8.21", "1.8.22", "1.10.0")), states=st.lists(project_state, min_size=2, max_size=2))
@example(kind="1.8.21", states=[  # an unmigratable active profile: archon's start stops too
    {"provider": "host", "extra": {"provider_preference": "podman"}, "pointer": "extra", "delete_extra": False},
    {"provider": "podman", "extra": None, "pointer": "dangling", "delete_extra": False}])
@example(kind="1.8.22", states=[  # 1a's shape: a dangling docker pointer, an unknown provider beside it
    {"provider": "docker_sandbox", "extra": None, "pointer": "dangling", "delete_extra": False},
    {"provider": "podman", "extra": None, "pointer": "keep", "delete_extra": False}])
@example(kind="1.10.0", states=[  # adopted 1.10.0 file, proj-2's active docker revision deleted: archon
    # does not rebuild its schema-3 table, so its guards refuse 021's revision 1 (upgrade2 finding 4)
    {"provider": "host", "extra": None, "pointer": "keep", "delete_extra": False},
    {"provider": "docker_sandbox", "extra": {"provider_preference": "docker_sandbox"}, "pointer": "extra",
     "delete_extra": True}])
def test_generated_starts_upgrade_as_archon_does_or_refuse_before_step_001(tmp_path_factory, kind, states):
    """Either the upgrade completes equal to archon 1.10.0's start on the same file, or it refuses
    before step 001 with the file unchanged; never a stop part-way. `1.10.0`: a file archon 1.10.0
    made, adopted by the console (its table is already schema 3: no rebuild, so the guards stay)."""
    work = tmp_path_factory.mktemp("gen")
    start = Path(shutil.copy(_base(kind, tmp_path_factory.getbasetemp()), work / "start.db"))
    _hostile(start, kind, states)
    try:
        theirs = scenarios.archon_upgrade(start, work / "archon.db", kind if kind == "1.8.22" else "1.8.20",
                                          "1.10.0", chain=kind == "1.8.22")  # 1.10.0: started again, directly
    except (builder.ArchonStartFailed, sqlite3.Error):
        theirs = None
    ours = Path(shutil.copy(start, work / "console.db"))
    before = fingerprint_dir(work)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--db", str(ours), "upgrade", "--force", "--to", "1.10.0", "--snapshot-dir", str(work)])
    event(f"{kind}: archon {'fails' if theirs is None else 'starts'}, console exit {code}")
    if code == EXIT_UNUSABLE:
        assert fingerprint_dir(work) == before, "a refusal wrote something"
        assert _ledger(ours) == []
        # where archon starts, the only refusal left is the evidence gate's (issue 18, findings 5-6):
        # a stored profile the console's algorithms would write differently
        assert theirs is None or EVIDENCE_REFUSAL in err.getvalue(), err.getvalue()
        return
    assert code == 0, f"the upgrade stopped part-way (exit {code}): {err.getvalue()}"
    assert theirs is not None, "the console upgraded a file archon 1.10.0 refuses to start on"
    assert_same(ours, theirs, f"generated {kind}: {states}")
