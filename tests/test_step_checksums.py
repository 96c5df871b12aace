"""A step's checksum covers all of the step (issue 8, rule 8).

The checksum hashes the step module and every module of console/db/migrations it imports,
transitively; the values are pinned here, so editing a shared module (approval_ddl.py,
check_attempt_ddl.py, backfills.py, profile_triggers.py, base.py) fails this test instead of
silently changing what a released step executes. The fix is a new step, not new pins (pins change
only for steps not yet released). Ledgers written by archon-console 0.1.0 (per-module checksums)
keep being accepted.
"""

from __future__ import annotations

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
    "001-archon-1.8.20-baseline": "c1324fc4cb7a827efa022b04e681d9c8aa48bd02834176310700d2a03154ab6c",
    "002-project-active-profile-column": "79cba2e3d98c06e272b6368c02862311eea8197f710180fbd39b2f1f24db4282",
    "003-profile-tables": "22f8da1aafd5e8f5b6351b00f69d7714aa55ddce930b45534ffb5d5a4dc3753c",
    "004-profile-revisions-rebuild-v2": "b5c7777eade914b0012d08ee92d7ce9d84efc7fd1c736c2236f7f6e69794f0c8",
    "005-profile-backfill-initial": "09e7041f22ddfcce635e9dbd7bf99593c7e863f3e077b6b80c995439b17b7396",
    "006-profile-backfill-schema-v2": "dacabfa5b0e477da8e10cec12e3929598213d63a40c70f40425e88bbcc959748",
    "007-profile-guard-triggers": "3c8844e0ef576ff52d97e877e10f5abddc1de70f3b2c0fcff8d533345f843d7a",
    "008-build-sequence-profile-columns": "7632a545732092075362f68829565c516342ceca5b69148bb42f5c1f308bd104",
    "009-build-sequence-incomplete-sweep": "8612b3dca7e773234679f1af0035936ef11ec03f67a9558c6efc2e8551355d20",
    "010-build-sequence-profile-triggers": "b5a77ea0a336079f138373457146d51cc9cb5baf7cd68d45c1b19a3a068fc2f1",
    "011-environment-profile-columns": "53b08fff4d2449210f9ad2c0d41f416f0e8798e7012be15d120b45afa68f9a29",
    "012-run-authorities": "514ae8411e635f57bd7c7d5275b17580991f2507741152ec789d54d20870e0e7",
    "013-approval-tables": "202dffdaf1fdb3fccc42287c49fe1e2066956d13d46aca3606ed3bdb0a1d84b9",
    "014-approval-requests-rebuild-action-limit": "737c97234530b8c947006481359022d4f3aae1975647e2fae18493c85e3e39d2",
    "015-build-setup-evidence": "ffabcd1a8ac7fc71462469d15c3cf922c5c0cb9f4bc66f9232891919ebbac074",
    "016-environment-identity-triggers": "8125638865007391d2ca93082f39b0cb711ef9cf6ca7e519615c7b03d3c66122",
    "017-environment-reuse-index": "115c091b2ae474e14988c5906b358aa3507cc9c461922259f3f777e1774def11",
    "018-check-attempt-outcome-ambiguous": "a5875807660ec939a86166e9214aebe0c76703aee2d0754798216bfc5c209363",
    "019-build-sequence-activation-run-index": "4ff0aea4b93414b9610fd4db3d1cdfa06bb3c8db1ce8092951ca7798a91455ab",
    "020-profile-revisions-rebuild-v3": "b94ae0d29cd316ca09afdbd73b445c08aded8b97169214ad96847b2c2c7dfb2d",
    "021-profile-backfill-current-schema": "02c3c041af55526674334a3f5ed2d4a814172ae79da0ab2bfd4c3d4c975d53f3",
    "022-profile-workload-eligibility": "f7e139b9a7039010aa922028477a9c59c664a2a702efd6ecc12367224aef7b0c",
    "023-service-run-details": "c7c44316b3b096fc2bd6d6813c5207ef59d76b8e0fb68c098b7ede0ff197073a",
    "024-environment-operation-columns": "3cf50f674812985e3f129ca11dc1a04ec9e3588175ca4873f6e369e29348bca4",
    "025-environment-operation-indexes": "7140a8110a14d79d52496d9b2559a26a52bc0a27049bece4dec4b198b30e5e6b",
    "026-environment-operation-triggers": "e991dff2f234f3e9553871de84c0cfad9037e1ff6bb1d5fb64400e8e2be49925",
    "027-check-environment-columns": "29001cb08ad236763229e4f6f14c85264d2141beb23c3e7c4f11b452443e7522",
    "028-check-attempt-outcome-environment-loss": "de8cac49cb1a38321def9485427d3c9bb850a3905356bdf64d4607ee2d18b663",
    "029-check-placement-triggers": "12d1e3aa862c4d4425004f90a1748bdbdde1fab5519c93027b87ea0efabd0adf",
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
    """Frozen from the code that wrote it; a step that reaches no project module hashes the same way
    under both schemes, so its frozen value is its checksum today (the table was not invented)."""
    from console.db.migrations.legacy_checksums import ACCEPTED_BY_VERSION, CHECKSUMS_0_1_0_PACKAGE

    alone = [m for m in MIGRATIONS if base.step_sources(_module(m)) == [m.module]]
    assert alone and all(CHECKSUMS_0_1_0_PACKAGE[m.id] == m.checksum for m in alone)
    assert list(ACCEPTED_BY_VERSION) == ["0.1.0"]
