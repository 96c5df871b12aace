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
    "001-archon-1.8.20-baseline": "257412d431cd4ebc2fd7dd46bc3ed27d28cdd421fedca64ef9bc87e150a9791b",
    "002-project-active-profile-column": "13b138ce0f432010a9399c453302d4afc1a96c994f1c7c881790cd5f03d7082d",
    "003-profile-tables": "2aae11b9fadc89cdb6905166eb4103aa3f914dca2f0c61a11da9f5fb1e9b8a74",
    "004-profile-revisions-rebuild-v2": "f438f53d3cfafad75c942b0e2b398f04a703939e475e101002f08501207ca319",
    "005-profile-backfill-initial": "a7b1549e70e72fb23df118b867d19d1b0190a243db05a9cf6ecf4f7edfd4ecec",
    "006-profile-backfill-schema-v2": "68293c444318c00abcbaead5c7dc56d3429360df8481fcdf87251fca87e3f842",
    "007-profile-guard-triggers": "3b007e599203cf9f8e80c739356cabb26d9f3cebd4e28f43b5c6b1fa36cd3b2f",
    "008-build-sequence-profile-columns": "70f159e214cb80eed20e0fba22f7ffeae033bc66549c292efb586dc0e4db0f0d",
    "009-build-sequence-incomplete-sweep": "4cb706eddb308c683a8b786f02cd117ea5c83f910badd267fdc42a456af97e11",
    "010-build-sequence-profile-triggers": "1e9c23096ea838feb2df769788bfc4334ae2214b4cdce8a3d809f24c357a6c61",
    "011-environment-profile-columns": "55cebe5aebe397563965040e5fed5cbedebc28f6c8830a5591f5c8ab68824e33",
    "012-run-authorities": "05d49cdcf25881b71c663ce0c8232e18731f353668ab6ae37a691cec27e122b1",
    "013-approval-tables": "33f56cf44343f734450a09123816dde9ef756eca1500df02ce7824f3c27c9d4f",
    "014-approval-requests-rebuild-action-limit": "085722773b9b86b5ff9b64fee8c5864c9be534f5d240006fea7ad886530cbee1",
    "015-build-setup-evidence": "ac6e63807b0973f4f7a46e233267a1f77e829c639894882413cfc3e88e52bf98",
    "016-environment-identity-triggers": "5cec0b22d6e15caf7d5d22dedbe2e1365337e1d7489358535e462eb2ba5bbad2",
    "017-environment-reuse-index": "b18d1794104fbeacb84ea7b010a37dcc4e81b0e444e66815d7eb45f5769e4809",
    "018-check-attempt-outcome-ambiguous": "b2f9eec826275691e3a7413100898519304f93d6b973bb9fa307458285e70f0d",
    "019-build-sequence-activation-run-index": "a29e7f5d046d03998eb37ffbd5bb9db49c5d80572d19890b32ecf5952bb929ed",
    "020-profile-revisions-rebuild-v3": "e9fc8965c41f34d8c5edadba9c836d0734d2bf42fc3739b887fcac5908444201",
    "021-profile-backfill-current-schema": "59be04fae32b4fc8de007dfcab76e35b1325b73bd8eb437d48ce9db84ff5cb12",
    "022-profile-workload-eligibility": "f404666b88332d54b967701b94a9c31ce709db1669e3c39fcde9a44db98df5dd",
    "023-service-run-details": "61b7bf3e0255b59d64c79e73195e46e45e7f489d0f533dfb5ff13adc91e59f68",
    "024-environment-operation-columns": "eccbad282a3f9cb35235bf1f3def39ccd60d4035f892d086cc46bdd1e491d414",
    "025-environment-operation-indexes": "8d06872b1fbdceb5f164f9b902a2dfa28b2d4212c1aa6b590aa6e0d702354c33",
    "026-environment-operation-triggers": "a0220db8dc5d859c570c30dd7b0bcb044fe91004bfaeb662e6afd8280054e3b2",
    "027-check-environment-columns": "4f870d046abcba407b751fbfa178d86051bda76cc69cd6066c700da099faba77",
    "028-check-attempt-outcome-environment-loss": "90963fda8756649ac5b46c2fc98343f5afa7c22d5eec4a2de258747ecab5cd81",
    "029-check-placement-triggers": "1cc40f379b4d942d8be331cfcc1dff524230787d54036f2ba013f7fc92672963",
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
