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

from console.cli import main
from console.db.migrations import base
from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0
from console.db.migrations.registry import MIGRATIONS, STEP_MODULES
from console.errors import EXIT_UNUSABLE
from console.services.doctor import run_doctor
from console.services.upgrade import plan_upgrade, run_upgrade
from tests.upgrade_helpers import db_1820, fingerprint_dir

PINNED = {
    "001-archon-1.8.20-baseline": "3680278410acdb37a3aee4358353341e55a4ac3b8fa3a98006dcbabfa3f77e6a",
    "002-project-active-profile-column": "bf8c4c6772030c608f8884512bf3d6adf598fce552faac6b6fa221205f777a7c",
    "003-profile-tables": "e23ccf57845edd81e173a87c6bc7b5510a783818e209cfa77c3ba66d52515da7",
    "004-profile-revisions-rebuild-v2": "9c006a5385906d0f9f3d97ad78cf2278d2ae51a9f299d92bcf64658855f89cd3",
    "005-profile-backfill-initial": "b7f2cf3c4edf3b17fa29419f245f49384f57d168e77dc40a6dcbc60bb28220a0",
    "006-profile-backfill-schema-v2": "75de20804996e4ccb1deceac0236bde27b137e1877d019a865b1e0b7c5e9c982",
    "007-profile-guard-triggers": "f3909d860a2e88b9f6893a56b812590bb9249d7e3cd7a2812f4b689ce1e4e3a9",
    "008-build-sequence-profile-columns": "8ac9bd04d98d8f8d3b41c44005ee20fbf93af4e04e3fbbfc22cfc2978639cfde",
    "009-build-sequence-incomplete-sweep": "24528a6e0a7c7f2ceb924780f45eb4fa7dbf873e727892b61c54d9970ee5850a",
    "010-build-sequence-profile-triggers": "297c99437d79c93ea2716835ab55c9d1a5bb9cb7c07e4e9f0dc9c2c62616b740",
    "011-environment-profile-columns": "6f635cd334e8411809907977bc06310fb937fc249727582735b0bd3426477bf3",
    "012-run-authorities": "995ef19da9d3e3746c5728963d8bec572da553a56d4b0b2d8284cab29ca44b63",
    "013-approval-tables": "89e7e02f3cb87569a8cdab78fbfd0ab8b86d4d718a4940368dbdd969d25cefba",
    "014-approval-requests-rebuild-action-limit": "9052d15a431ae876d3c5608858173bae4a907c43c0447ece8aa6936c2f0b71f8",
    "015-build-setup-evidence": "9c522867f38021c19cfa33861f7af3fbd309a56b511c198e2c2d7efd7c0b02d4",
    "016-environment-identity-triggers": "7eabeaa28449c0f46e7352dc501908a85201b50bd95d3add8ba5d99d5a974630",
    "017-environment-reuse-index": "c82799e6f054de4c075b393779c0d6be8f92144815d92bbb207d6719fc77915e",
    "018-check-attempt-outcome-ambiguous": "628dea46c543c6df869570996a5d3f102a5857d9f99a34e74cf8a49355913717",
    "019-build-sequence-activation-run-index": "451dd7bb2a96380138614da4eccf0cf843e7ed14f9a67380c9d11832be6a68b1",
    "020-profile-revisions-rebuild-v3": "6f7d7766d13294c748ad8d61ac9f198dcbfb5e001a52ca8cc52525bbb1dbabc2",
    "021-profile-backfill-current-schema": "36a6f373328cf59fd6c3794f552e33c5974e3a3ba9e5a6407a6a7c2895bec128",
    "022-profile-workload-eligibility": "dad05a0284b6e7b47501373bc6d60dfb09ce87eccfbc9fe193e7d5d65939df60",
    "023-service-run-details": "9f89a1793bc116ad8010eb24811bcdab0b64a87a2e5c9e4dee1575e64427e7f7",
    "024-environment-operation-columns": "1a7f90739d0acbdb9f507e47c70f5a8a193ab8df06a6b2a18c07e938af0d248d",
    "025-environment-operation-indexes": "dd15e29be33d6555f07865c831f88bc85662865ebb1990c8973f11ac4aa8a166",
    "026-environment-operation-triggers": "315b6933c63bb657ac21012f569e100e5c9ff33c5eee55f93ae0897c73e48a61",
    "027-check-environment-columns": "72f7f2efc68c3e8453fe4daa648c3e165c69b8a1b5e156d8a0340ddbaf50e500",
    "028-check-attempt-outcome-environment-loss": "5b1fb154977626d3dd0e8b924ed4286cfa83aa89a889ab89e36320d05c1672e5",
    "029-check-placement-triggers": "e41cabbab7f247dea82dc90d89bee5746b63d67c76756a57ec70b9690cc3bb22",
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


def _as_written_by_0_1_0(path, tool_version="0.1.0"):
    conn = sqlite3.connect(path, isolation_level=None)
    for name, checksum in CHECKSUMS_0_1_0.items():
        conn.execute(
            "UPDATE _archon_console_ledger SET checksum = ?, tool_version = ? WHERE name = ?",
            (checksum, tool_version, name),
        )
    conn.close()


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

    conn = sqlite3.connect(path, isolation_level=None)
    for name, checksum in CHECKSUMS_0_1_0_PACKAGE.items():
        conn.execute(
            "UPDATE _archon_console_ledger SET checksum = ?, tool_version = ? WHERE name = ?",
            (checksum, tool_version, name),
        )
    conn.close()


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
