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
from console.db.migrations.legacy_checksums import CHECKSUMS_0_1_0, EARLIER_CHECKSUMS_0_1_0
from console.db.migrations.registry import MIGRATIONS, STEP_MODULES
from console.errors import EXIT_UNUSABLE
from console.services.doctor import run_doctor
from console.services.upgrade import plan_upgrade, run_upgrade
from tests.upgrade_helpers import db_1820, fingerprint_dir

PINNED = {
    "001-archon-1.8.20-baseline": "51a4d61582e223aa7304e0d46916c6e53c44dd5a079eaf1579c73795087a7d2f",
    "002-project-active-profile-column": "993e21def29c7ec1ea427366bb6aa6647543dabacabbfbc770c78ae7660bee6e",
    "003-profile-tables": "11c45df26ffdd0535f0a46a99dc70e3c34317f428050483fdeeb758e2e13df69",
    "004-profile-revisions-rebuild-v2": "57445c5bddd4b32d093b412f7a35de51b8ba788a16084cb0030cba729c74f500",
    "005-profile-backfill-initial": "61d0f364055a6c7050ac213d8eb0df7050168ec84835999ac010a3188a7b78dd",
    "006-profile-backfill-schema-v2": "2e3c065934f6040c354f8b606a5ca2a6804b0386a916f5862985e69d43a61b6f",
    "007-profile-guard-triggers": "8f5b6cc5f11ddda2d2428ec031f6842fbf5744d49ebe5613db48bb464b85e5f1",
    "008-build-sequence-profile-columns": "47539d85c0766b989c11f5b476c9f3c5d0e92a883b74fa3919cb38380b6567b7",
    "009-build-sequence-incomplete-sweep": "d20ec710a1c9e268a1ad5cec1cdc85b407c282a5a95f32e75c543288215b369b",
    "010-build-sequence-profile-triggers": "c976feddf733d80406b3a656e6f118a62bdc44aac9c71c63abc8876644c6cea2",
    "011-environment-profile-columns": "d38862151562cc093de69a0a6459c7935adc3f3aa7b318e38fc47d46cab3eadf",
    "012-run-authorities": "a0c72724bbaa96df4cf7b552cbb6453accbe317e2107642a22a94c9c6eb2c09a",
    "013-approval-tables": "bb1da83fc48ed03c18831a27c2f227a167e7f9b6fc99862ddb32f6c670de168d",
    "014-approval-requests-rebuild-action-limit": "8129f713fa45c551c713da318db10483f3293cd73d0ea6685d27a9e77a8d1172",
    "015-build-setup-evidence": "b4110e7a647b463635020b629b68187b112858bfb827ae18be348b4e9a86d42c",
    "016-environment-identity-triggers": "4e5bbb2597f9076f63cef9492097f5825a88db1f7678c2910084292f2f0f8368",
    "017-environment-reuse-index": "115c091b2ae474e14988c5906b358aa3507cc9c461922259f3f777e1774def11",
    "018-check-attempt-outcome-ambiguous": "9a9ec70cb7d88ca3598b62f0864c78f54e12ad982cdf6042b9e8f03bc7e82f21",
    "019-build-sequence-activation-run-index": "4ff0aea4b93414b9610fd4db3d1cdfa06bb3c8db1ce8092951ca7798a91455ab",
    "020-profile-revisions-rebuild-v3": "2efdae5ff45b172eecf0d9d00c7641e53c93fe63ccfbd6e9d812ab43e7018336",
    "021-profile-backfill-current-schema": "9cf76bae37662dbc5f8542b7bbef2f9d5ec2f2945a0a2ebdaecb7f8897ff1162",
    "022-profile-workload-eligibility": "dee3543d53b823149d902ef1421ade6082b163ea42497ee355d6e3a00f970b73",
    "023-service-run-details": "614d759fc437ba0632f05dab3bb8b8834675d5348a4e912337a7c36bf91e08f4",
    "024-environment-operation-columns": "7f8384ecba27d33287a5b96f86d60db368c09c5f8eb7efe812909fc2257d7f4c",
    "025-environment-operation-indexes": "168aa42422db08bf2dd5f0bae85b6655bd4c89eff6e559cba8efd8028d83666a",
    "026-environment-operation-triggers": "2e3aac77270c22009beccae70ecbf6877d551f37d133645d39e74f09bd83df1e",
    "027-check-environment-columns": "d4761917bbc94f63719f1ca3560dd568824fba9e4dfaf4cec5f645e7088b5480",
    "028-check-attempt-outcome-environment-loss": "9674ea63a28d631c9a284d5c0efa38d679edd090d48cca0ce242e8083cbc2c2a",
    "029-check-placement-triggers": "bf04fd06e009a43cfe110f10992f6818ede1479cca94b48fa76b55255e892b55",
}

# Steps whose own module changed after archon-console 0.1.0 (issue 8, rules 5 and 6).
CHANGED_SINCE_0_1_0 = {
    "001-archon-1.8.20-baseline",
    "004-profile-revisions-rebuild-v2",
    "014-approval-requests-rebuild-action-limit",
    "018-check-attempt-outcome-ambiguous",
    "020-profile-revisions-rebuild-v3",
    "028-check-attempt-outcome-environment-loss",
    # issue 18, finding 4 (the direct upgrade path); their earlier checksums are in EARLIER_CHECKSUMS_0_1_0
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


def _with_earlier_checksums(path, tool_version="0.1.0"):
    conn = sqlite3.connect(path, isolation_level=None)
    for name, checksums in EARLIER_CHECKSUMS_0_1_0.items():
        conn.execute(
            "UPDATE _archon_console_ledger SET checksum = ?, tool_version = ? WHERE name = ?",
            (checksums[-1], tool_version, name),
        )
    conn.close()


def test_the_earlier_checksums_are_the_released_bodies_and_not_the_current_ones():
    for name, checksums in EARLIER_CHECKSUMS_0_1_0.items():
        assert name in CHANGED_SINCE_0_1_0
        assert PINNED[name] not in checksums and CHECKSUMS_0_1_0[name] not in checksums


def test_a_ledger_written_before_the_direct_path_is_accepted(tmp_path, capsys):
    """A database the console upgraded before issue 18's direct path (steps 005/006/021/022 in
    their earlier bodies, recorded by console 0.1.0) is not refused as a changed step; an upgrade
    interrupted then continues."""
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _with_earlier_checksums(path)
    report = run_doctor(path, now=datetime.now(timezone.utc))
    assert report.finding("ledger.checksum_mismatch") is None
    result = run_upgrade(path, force=True)
    assert result.release_after == "1.10.0" and len(result.applied) == 10
    _with_earlier_checksums(path)
    assert plan_upgrade(path).up_to_date


def test_earlier_checksums_are_accepted_only_from_0_1_0(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True)
    _with_earlier_checksums(path, tool_version="0.2.0")
    for snap in tmp_path.glob("*.pre-upgrade-*"):
        snap.unlink()
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade", "--force"]) == EXIT_UNUSABLE
    assert "checksum changed" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before
