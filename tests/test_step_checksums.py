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
    "001-archon-1.8.20-baseline": "46a0287a124341e6256e4d51efba073d65f0e884285f7d57278e1aa97424c2f9",
    "002-project-active-profile-column": "c1286d90d6cbed418fb3bd7a27d09dbbcb3d3fb986998bf14ce282e526c49a50",
    "003-profile-tables": "95830bcc929449a24e3f64ba73293fdb58bb4c616202c6957876389c2a629221",
    "004-profile-revisions-rebuild-v2": "19bdaad0b0469b1f2f99562fdc362fb84a58d191ab3a2cc92fd029abad79dfba",
    "005-profile-backfill-initial": "20ece9afcc00db27e76e735ed3b6cc5344b764f65fdca8426d0404483f9ca243",
    "006-profile-backfill-schema-v2": "e0820419ed3a59316395ffdef3167704717d686ee18cc921770f89b71436db1f",
    "007-profile-guard-triggers": "41515f90a4b727b80548e70ce1615e5e53e8ab31f4e7ec6828add917e51e0f94",
    "008-build-sequence-profile-columns": "f683f87e50671a0f4194459195dd9dcaf5130c49d657aebc4c429a1059933517",
    "009-build-sequence-incomplete-sweep": "ca2edf2a70886f8f5c6ba72b1d7a8a56792b62cd354cf0009a35f0999552df38",
    "010-build-sequence-profile-triggers": "2820ff2c4eeda3c3f4c4484c19d070fb857e0dc93412f721a8a0e888fbff8ce3",
    "011-environment-profile-columns": "ed143d533db08800364efd093a36fe932bf8efe3f51b473f1f1e8a8ce7040391",
    "012-run-authorities": "993249198a9f7d9b49597c88b9343326c6f71f6f073c21f1e63b04d4e68c746c",
    "013-approval-tables": "3910fb7f8acd5ddff491093a2f9906e70148ed98526ed16ce837b34ea70fd06c",
    "014-approval-requests-rebuild-action-limit": "e7abffdc0266fdcad0aa70ca7108f440015f90bc5033b36b12ffbbf3540056f4",
    "015-build-setup-evidence": "c175fc10ca870b9bc1c3025844da258d68819e39eb828cf3c8228dd1fbbc50be",
    "016-environment-identity-triggers": "bb28760853f99c235c96bdf6bcec57e9cf0e41158750dca681ae9498df3551fc",
    "017-environment-reuse-index": "289ac950990febcba0fac386a5bbf9f0a42363b31912f7cbb16b43f8f543ed82",
    "018-check-attempt-outcome-ambiguous": "082c389febac5e522746a6822d9d081bb179ce97f8994bb277f9b5cd02162df3",
    "019-build-sequence-activation-run-index": "5fe5cc25e3f49473a4a3875e928769d3c00a383b3a1484da699ff73aff376580",
    "020-profile-revisions-rebuild-v3": "adede53aaded519ebbe63798f7ae2ed139d57845a6bfa2778662c194b95d3597",
    "021-profile-backfill-current-schema": "f8d39a626cedb823d0c3662537886a958980da10729ca1bb9547e08ba546c074",
    "022-profile-workload-eligibility": "0c776710213dd7f8232f962943d44d65b06c0e66310749527c5a3814c852f856",
    "023-service-run-details": "b46658417ce14affc2a116a0ad5d64f70b4abf7540d1e24fe18142b5563fba6c",
    "024-environment-operation-columns": "5e7207827b22293f1b35aec36ae4e13f6d632492f018ef65593822823f382b04",
    "025-environment-operation-indexes": "440f22b2321977ed2a3897b4af91b0bf8dc0d95055e817a0439f1f7710fc4773",
    "026-environment-operation-triggers": "8d683ec3ed025373e8b45c0914446d0f2f2eb68cf488a09611cd6219fa389357",
    "027-check-environment-columns": "d7971688c95e96d373800ec7cee6266382bac16a4df0d3df0da0c9b53d6a2e76",
    "028-check-attempt-outcome-environment-loss": "e8a3be6d28a23822b86c60dd62a70e114ab973cdeca152a2bfdbe787d291ae7d",
    "029-check-placement-triggers": "c0812f09ea89af399d335fa1af9394e61be9234ae303a055f341e83adbfa514f",
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
