"""A step's checksum covers all of the step (issue 8, rule 8).

The checksum hashes the step module and every module of console/db/migrations it imports,
transitively; the values are pinned here, so editing a shared module (approval_ddl.py,
check_attempt_ddl.py, backfills.py, profile_triggers.py, base.py) fails this test instead of
silently changing what a released step executes. The fix is a new step, not new pins (pins change
only for steps not yet released). Ledgers written by archon-console 0.1.0 (per-module checksums)
keep being accepted.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import sqlite3
from datetime import datetime, timezone

import pytest

from console.cli.cli import main
from console.db.migrations import base
from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0
from console.db.migrations.registry import MIGRATIONS, STEP_MODULES
from console.errors import EXIT_UNUSABLE
from console.services.doctor import run_doctor
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import db_1820, fingerprint_dir

PINNED = {
    "001-archon-1.8.20-baseline": "b391c3db8891a035735cd985a330ccd129afbcff68d1e3a146e3e8bb77c69222",
    "002-project-active-profile-column": "6cdb8802a37d677ac1946867b0834b78634e52e9a475b3cfc23ea3ed75df3435",
    "003-profile-tables": "4ffb96b60a8a71cff90be77b4c1593af366f1d64df0171917e8af1ee574f9a4c",
    "004-profile-revisions-rebuild-v2": "5db696a6f4b3eaf69817218656b07f068f556908a628144dc8b637da3d1227a1",
    "005-profile-backfill-initial": "3e02c1aa67cdef0752e1d116269448161e8d383697ec5c1bda4d6e207ede726f",
    "006-profile-backfill-schema-v2": "1c0c2bbba9f116527b5a7dcc37b536f944424727a2365c230a6c309495aa6641",
    "007-profile-guard-triggers": "872ec2dd84049aa21926a772fcbd1cde2bc371b94304f1bd84548a6834caf21b",
    "008-build-sequence-profile-columns": "93a217eb971533dba067f27279e7f067c8f440b122eeb18b3b4d540bc47b1d21",
    "009-build-sequence-incomplete-sweep": "abd0396be726179c1cf2d96f8a29caab4d07e2547af54e8b27f7cda7fdb86897",
    "010-build-sequence-profile-triggers": "685a6a6b0f710fedf5335ac3550d973778bb505d6b4c2859de37bd6b46d10ba6",
    "011-environment-profile-columns": "2b22d88121b5284d2845ae59c44441fe1dd065e155577dd5d0cff34f9bb2cdad",
    "012-run-authorities": "4d14d4295479dfcb40381c25a67e53ffca31b9e47b049989b95e7240fa7edcc0",
    "013-approval-tables": "648ca6d2f5384df02c5b707a3191f87aba57683442adaac9f66077fbaf5a9f36",
    "014-approval-requests-rebuild-action-limit": "41f8db2c496ef153266f9df24d0e7537407912cb53cf0dd4af3b9ec3fbd2b569",
    "015-build-setup-evidence": "2361a45dbd90d21c674af12bb1b920b783e736348f3422585dd5e165b2f17df4",
    "016-environment-identity-triggers": "a18112d3e05e37f8fef1a73aee41d7bf2ef2811527467cc624e7cd40ec98ae10",
    "017-environment-reuse-index": "e222697206294f613a7507e5a8cae9e04c89b4d33c8c5010bc7be8a5c1b0a913",
    "018-check-attempt-outcome-ambiguous": "dbd819566fc249a40ba15fb7de66534e5b61758b51749f652c224b722e5db35c",
    "019-build-sequence-activation-run-index": "b76e32183148b8f23cc48889dace14e06427c47eef52c787da9c51a1ed7d34b4",
    "020-profile-revisions-rebuild-v3": "124063e5f39321eb26ef03b274bf492ad579e3682c850fdb7b8e76d5e6db11bd",
    "021-profile-backfill-current-schema": "d3689bb86b9405306761297c82071ab2e281eb77b400d94a61fb573dd6bbd280",
    "022-profile-workload-eligibility": "b973b0b226f7f37fae23767d448b4fc252901cd59228df9748a37944f9d8408f",
    "023-service-run-details": "fb9536e07e8a451a7ccb4e867fab70f7b3617a54c0deeed1e967eb918c0c0010",
    "024-environment-operation-columns": "9a434c38a9e4ece50bc51c7a7af88e449fb39469575a25f2eebea57d05e3e16d",
    "025-environment-operation-indexes": "2e5e561f52a867845e4ab584208a4c3d6dd13abbf5a637d6eb7a82692f598814",
    "026-environment-operation-triggers": "470095de414d44a89b6b7a47db9cf3542ed5f31c37820291dda179268aab297c",
    "027-check-environment-columns": "4e8042208e49fd4e15d547833dcee93d935f5d22cfa09d9c2f333b781c7b14aa",
    "028-check-attempt-outcome-environment-loss": "5fbc8b02f3c43c2b864f4112a9a931f8a78ffcd36c87489d4c11690ed8fe9ba8",
    "029-check-placement-triggers": "81ba923e36e1fd8333f14cf0a181f4ace476bb654e827a3de8f19ea1565fe0ed",
}

# Steps whose own module changed after archon-console 0.1.0 (issue 8, rules 5 and 6).
CHANGED_SINCE_0_1_0 = {
    "001-archon-1.8.20-baseline",
    "004-profile-revisions-rebuild-v2",
    "014-approval-requests-rebuild-action-limit",
    "018-check-attempt-outcome-ambiguous",
    "020-profile-revisions-rebuild-v3",
    "028-check-attempt-outcome-environment-loss",
    # issue 18, finding 4 (the direct upgrade path); their earlier checksums are in CHECKSUMS_0_1_0_PACKAGE
    "005-profile-backfill-initial",
    "006-profile-backfill-schema-v2",
    "021-profile-backfill-current-schema",
    "022-profile-workload-eligibility",
}


def _module(migration):
    return importlib.import_module(migration.module)


def test_every_step_checksum_is_pinned():
    actual = {m.id: m.checksum for m in MIGRATIONS}
    changed = sorted(k for k in PINNED if actual.get(k) != PINNED[k])
    assert not changed, (
        f"What released steps execute changed: {changed}. A released step (and every shared module it "
        "imports) is never edited; add a new step instead."
    )
    assert list(actual) == list(PINNED)


@pytest.mark.parametrize(
    "step, shared",
    [
        ("s013_approval_tables", "console.db.migrations.steps.approval_ddl"),
        ("s014_approval_requests_rebuild_action_limit", "console.db.migrations.steps.approval_ddl"),
        ("s018_check_attempt_outcome_ambiguous", "console.db.migrations.steps.check_attempt_ddl"),
        ("s028_check_attempt_outcome_environment_loss", "console.db.migrations.steps.check_attempt_ddl"),
        ("s022_profile_workload_eligibility", "console.db.migrations.backfills"),
        ("s007_profile_guard_triggers", "console.db.migrations.profile_triggers"),
        ("s020_profile_revisions_rebuild_v3", "console.db.migrations.steps.s010_build_sequence_profile_triggers"),
        ("s002_project_active_profile_column", "console.db.migrations.base"),
    ],
)
def test_the_checksum_follows_shared_modules(monkeypatch, step, shared):
    module = importlib.import_module(f"console.db.migrations.steps.{step}")
    assert shared in base.step_sources(module)
    before = base.step_checksum(module)
    real = inspect.getsource

    def edited(obj):
        text = real(obj)
        return text + "\n# edited\n" if getattr(obj, "__name__", "") == shared else text

    monkeypatch.setattr(base.inspect, "getsource", edited)
    assert base.step_checksum(module) != before
    untouched = importlib.import_module("console.db.migrations.steps.s017_environment_reuse_index")
    if shared != "console.db.migrations.base":
        assert shared not in base.step_sources(untouched)


def test_the_frozen_table_is_what_0_1_0_computed():
    """0.1.0 hashed each step module's source alone: for every step not edited since, the frozen
    value is exactly that hash (so the table was not invented)."""
    assert list(CHECKSUMS_0_1_0) == [m.id for m in MIGRATIONS]
    assert len(STEP_MODULES) == len(MIGRATIONS)
    for migration in MIGRATIONS:
        old = hashlib.sha256(inspect.getsource(_module(migration)).encode("utf-8")).hexdigest()
        if migration.id in CHANGED_SINCE_0_1_0:
            assert old != CHECKSUMS_0_1_0[migration.id]
        else:
            assert old == CHECKSUMS_0_1_0[migration.id], migration.id
        assert migration.checksum != CHECKSUMS_0_1_0[migration.id]


def _as_written_with(path, checksums: dict[str, str], tool_version: str = "0.1.0") -> None:
    """The ledger as a console that computed `checksums` and called itself `tool_version` left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    for name, checksum in checksums.items():
        conn.execute(
            "UPDATE _archon_console_ledger SET checksum = ?, tool_version = ? WHERE name = ?",
            (checksum, tool_version, name),
        )
    conn.close()


def _as_written_by_0_1_0(path, tool_version="0.1.0"):
    _as_written_with(path, CHECKSUMS_0_1_0, tool_version)


@pytest.mark.slow
def test_a_ledger_written_by_0_1_0_is_accepted(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _as_written_by_0_1_0(path)

    plan = plan_upgrade(path)
    assert plan.ledger_state == "versioned" and len(plan.applied) == 19
    report = run_doctor(path, now=datetime.now(timezone.utc))
    assert report.finding("ledger.checksum_mismatch") is None
    result = run_upgrade(path, force=True)
    assert result.release_after == "1.10.0" and len(result.applied) == 10


def test_old_checksums_are_accepted_only_from_0_1_0(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _as_written_by_0_1_0(path, tool_version="0.2.0")
    for snap in tmp_path.glob("*.pre-upgrade-*"):
        snap.unlink()
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_UNUSABLE
    assert "checksum changed" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before


# --- issue 18, finding 7: everything a step's output depends on is inside its checksum ------------

STEP_MODULE_NAMES = [m.module for m in MIGRATIONS]
PROFILE_STEPS = ("s004", "s005", "s006", "s007", "s020", "s021", "s022")


def _edit_one(monkeypatch, target: str) -> None:
    """Make `inspect.getsource` see `target` with a comment appended (the file itself is untouched)."""
    real = inspect.getsource

    def edited(obj):
        text = real(obj)
        return text + "\n# an edit\n" if getattr(obj, "__name__", "") == target else text

    monkeypatch.setattr(base.inspect, "getsource", edited)


@pytest.mark.parametrize(
    "step, source",
    [(name, source) for name in STEP_MODULE_NAMES for source in base.step_sources(importlib.import_module(name))],
)
def test_editing_any_module_a_step_reaches_changes_its_checksum(monkeypatch, step, source):
    module = importlib.import_module(step)
    before = base.step_checksum(module)
    _edit_one(monkeypatch, source)
    assert base.step_checksum(module) != before


@pytest.mark.parametrize("step", [n for n in STEP_MODULE_NAMES if n.rsplit(".", 1)[1][:4] in PROFILE_STEPS])
def test_the_profile_algorithms_are_inside_the_profile_steps_checksums(monkeypatch, step):
    """The defaults, normalisation, serialisation and fingerprint steps 004-007 and 020-022 write
    (console/db/execution_profiles.py) and the JSON reader they parse with."""
    module = importlib.import_module(step)
    sources = base.step_sources(module)
    assert "console.db.execution_profiles" in sources and "widgets.safe_json" in sources
    before = base.step_checksum(module)
    _edit_one(monkeypatch, "console.db.execution_profiles")
    assert base.step_checksum(module) != before


@pytest.mark.slow
@pytest.mark.parametrize("step", STEP_MODULE_NAMES)
def test_every_project_module_a_step_imports_at_any_depth_is_in_its_sources(step):
    """Checked independently of the AST walk: a fresh interpreter imports the step and lists every
    project module that loads (a package counts only through the modules it holds)."""
    import subprocess
    import sys

    code = (  # the step's packages first: what their __init__ loads is theirs, not the step's
        "import importlib, sys\n"
        f"importlib.import_module({step.rpartition('.')[0]!r})\n"
        "before = set(sys.modules)\n"
        f"importlib.import_module({step!r})\n"
        "for name, mod in sorted(sys.modules.items()):\n"
        "    if name.split('.')[0] in ('console', 'widgets') and name not in before and not hasattr(mod, '__path__'):\n"
        "        print(name)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert step in loaded
    assert set(loaded) <= set(base.step_sources(importlib.import_module(step)))


def test_the_project_packages_are_pyprojects():
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(p.rstrip("*") for p in include) == sorted(base.PROJECT_PACKAGES)


def _as_written_by_main_before_0_2_0(path, tool_version="0.1.0"):
    from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0_PACKAGE

    _as_written_with(path, CHECKSUMS_0_1_0_PACKAGE, tool_version)


@pytest.mark.slow
def test_a_ledger_written_before_the_profile_algorithms_were_covered_is_accepted(tmp_path):
    from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0_PACKAGE

    assert list(CHECKSUMS_0_1_0_PACKAGE) == [m.id for m in MIGRATIONS]
    for migration in MIGRATIONS:  # every step reaching the profile algorithms has a new checksum
        if "console.db.execution_profiles" in base.step_sources(_module(migration)):
            assert migration.checksum != CHECKSUMS_0_1_0_PACKAGE[migration.id]
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _as_written_by_main_before_0_2_0(path)
    plan = plan_upgrade(path)
    assert plan.ledger_state == "versioned" and len(plan.applied) == 19
    report = run_doctor(path, now=datetime.now(timezone.utc))
    assert report.finding("ledger.checksum_mismatch") is None
    result = run_upgrade(path, force=True)
    assert result.release_after == "1.10.0" and len(result.applied) == 10


@pytest.mark.slow
def test_those_checksums_are_refused_in_a_row_the_current_version_wrote(tmp_path, capsys):
    from console import __version__

    assert __version__ != "0.1.0"
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _as_written_by_main_before_0_2_0(path, tool_version=__version__)
    for snap in tmp_path.glob("*.pre-upgrade-*"):
        snap.unlink()
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_UNUSABLE
    assert "checksum changed" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before


def test_the_second_frozen_table_is_what_main_computed_before_0_2_0():
    """Frozen from the code that wrote it; a step that imports no project module hashed its name and
    source alone under that scheme, so its frozen value is that hash today (the table was not
    invented). Today's checksum of every step also covers the runner (base.py `RUNNER`)."""
    from console.db.migrations.legacy_checksums import ACCEPTED_BY_VERSION, CHECKSUMS_0_1_0_PACKAGE

    def before_the_runner_counted(module) -> str:  # the scheme of then: name and source, nothing else
        digest = hashlib.sha256()
        for part in (module.__name__, inspect.getsource(module)):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        return digest.hexdigest()

    def imports_nothing_of_ours(module) -> bool:
        return not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(ast.parse(inspect.getsource(module))))

    alone = [m for m in MIGRATIONS if imports_nothing_of_ours(_module(m))]
    assert alone and all(CHECKSUMS_0_1_0_PACKAGE[m.id] == before_the_runner_counted(_module(m)) for m in alone)
    assert list(ACCEPTED_BY_VERSION) == ["0.1.0"]


# --- attack round on issue 18, finding 4: the runner decides what a step writes -------------------

RUNNER_MODULES = ("console.db.migrations.runner", "console.db.tx")


@pytest.mark.parametrize("step", STEP_MODULE_NAMES)
def test_the_runner_and_what_it_imports_are_every_steps_sources(monkeypatch, step):
    """The runner turns foreign keys off around a rebuild (with them on, step 020's DROP TABLE
    cascades into the audit events) and owns the transaction; no step imports it, so it is a source
    of every step by base.py's mechanism (`RUNNER`): editing it, or a module it imports, changes
    every step's checksum."""
    module = importlib.import_module(step)
    sources = base.step_sources(module)
    for name in RUNNER_MODULES:
        assert name in sources
        before = base.step_checksum(module)
        _edit_one(monkeypatch, name)
        assert base.step_checksum(module) != before
        monkeypatch.undo()
