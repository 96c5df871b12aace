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
    "001-archon-1.8.20-baseline": "648ee65bb303ade2cab07bc7e6a272c7e5596145b741cddb8b439cc7c65a9561",
    "002-project-active-profile-column": "c4fb04cf33dd8647fa983944915475e4d710828805b2fa8fa679c1501cc9295e",
    "003-profile-tables": "d93d7b2b11f870ce3a46dfe594b4bc0024489300aadeccd47f0b562aab5b9ca3",
    "004-profile-revisions-rebuild-v2": "60ac27a8504a1035acdf9d41e309cb80302849d94b9b0388a75433883c3db954",
    "005-profile-backfill-initial": "504abbaf0ee28eb16e0a670ff844d4577a057339700f5ffc42b6060cbae613d8",
    "006-profile-backfill-schema-v2": "4940822e25a85ff7c0e8ebce59faf6c5fe98508d90cb0762324ef9813651cc99",
    "007-profile-guard-triggers": "77e48d2fadf031c8c433ed7d253a4770c2baacafa04eb2434b3db073461d4ca0",
    "008-build-sequence-profile-columns": "899c4b00e955889778c327963ccc957057933213e6d74232ca496225585e477f",
    "009-build-sequence-incomplete-sweep": "35c5a6826f0b829b4ba80ab060835b61f425f759161f75431178f5c38d10579b",
    "010-build-sequence-profile-triggers": "ae22e235c21445589c9036408d5ff99fc6dc037c1fef465bff898323fef76ed0",
    "011-environment-profile-columns": "61096c6292e78f7764754643326a461af27a46b2ae3e2fa609258f86b8c9656a",
    "012-run-authorities": "59f84943700528ce98dc93d20a2ef02493ebf63fde09f8feb88ee21ecd6b7245",
    "013-approval-tables": "f3d7fda405a9d00ab495f041dfebf722c0d95b57e414f6436d5a615a8eea51bf",
    "014-approval-requests-rebuild-action-limit": "78bf8bbdb7f7e41ed99b56138af563b9d3e0a55ecebe7787baefdcccb2a55e16",
    "015-build-setup-evidence": "6b86d2d836431b8bef967c9ac9f0fc605877437278e3f29cab748b892dd80450",
    "016-environment-identity-triggers": "2aa264eb4b2b472e722aad1def688ac580d3d776fd58dd4c733d7e47531505ad",
    "017-environment-reuse-index": "fc7f13832183c0d58473fc0cf6190c8a9c252c99e0255a8a808250b8033a9e0a",
    "018-check-attempt-outcome-ambiguous": "71c2d1e035ccc5f69fb9f80e3fe58158d1f1846b12bd1540bd7318d6f28f7adb",
    "019-build-sequence-activation-run-index": "b45799014d5ac05206b500c9d2c44a07edf19f4799f3571b7e1e72313877c2a5",
    "020-profile-revisions-rebuild-v3": "ecbf1706ed83f89f30c11eef754107ecf1a2344656d44005ef96fe991a2f5f26",
    "021-profile-backfill-current-schema": "d4f01c6ecd2cd129268ecdfc0c8c8a3ea2c7ad0d99b2ae6020a416cd773d5348",
    "022-profile-workload-eligibility": "26bc701df897da551b9cf7f38dcddcad37a8338ed8d5c563f645fab094b8c6cd",
    "023-service-run-details": "7c013a84d51d7f5eca0cb0efc088a721dac6183817b8f5c215235b80733e36b4",
    "024-environment-operation-columns": "e98ffed36f7b454a7251340257eca3981b90051359dea4b68352595809ddab65",
    "025-environment-operation-indexes": "e6022ad5ecf9d64b04cc970dac7c99a3f249a3436833cf793a7df483868259ec",
    "026-environment-operation-triggers": "250a995dcbac23232e61df771aa8569e46826c80ac69819dfce270379cb2384f",
    "027-check-environment-columns": "7b799c5af1c9f70a3b60ad9a5bec92ea9df09dced3dc4a329fea330e3e45ce82",
    "028-check-attempt-outcome-environment-loss": "8241583dce67fba2708f348fae4b71c10c2ebc1f8f6ac440879d475b9bdf126e",
    "029-check-placement-triggers": "fdfad229b72ec5fb07e4ebb0c35dd8c4153b45a57a3e6cdc737064711e8c4411",
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
