"""The checksums archon-console 0.1.0 recorded, frozen: one per step id.

0.1.0 hashed only each step's own module source. A ledger row it wrote (tool_version "0.1.0")
keeps being accepted when its checksum is the one below, so a database that version upgraded is
not refused as "changed checksum" by a console whose checksums also cover the shared modules
(console/db/migrations/base.py `step_checksum`).

What such a row means for the steps whose body changed since (001, 014, 018, 020, 028): the step
ran in its 0.1.0 form, and it is not re-run.

* 001 may have created the console's reconstruction of 1.8.20 on a database it adopted (for
  example the trigger `preserve_execution_environment_binding_evidence` beside archon's own rule);
  the console does not remove what it created then.
* 004, 014 and 020 put back the triggers of the rebuilt table in the text the database held before,
  where archon installs its release's text; the rules are the same unless the old text differed.
* 018 and 028 built check_attempt_details from the console's copy of archon's text, so a line or
  column of the database's own table that the console did not know was not carried over; the
  snapshot recorded in the same ledger row holds the table as it was.

Never edit this table; it describes what was released. EARLIER_CHECKSUMS_0_1_0 below keeps, the
same way, the whole-step checksums of step bodies released and changed later.
"""

LEGACY_TOOL_VERSION = "0.1.0"

CHECKSUMS_0_1_0: dict[str, str] = {
    "001-archon-1.8.20-baseline": "78ce0f962998d0631304514237b99fe8ec4da6f98049a08cdd015e841a8f0781",
    "002-project-active-profile-column": "bcfa33ab1c0e2eed54aa885594b8b0bdcd991e49f35961438f1e52170e3a63c3",
    "003-profile-tables": "150fd443850518265569315e37f8e4f3ec340ba3a6d7018220e2d289b6dc815c",
    "004-profile-revisions-rebuild-v2": "aff1e538f1840abdc37729d2a6be37dd40b22fb2720067456278bc51049d656e",
    "005-profile-backfill-initial": "53b2a228be71115fa1a8ee7d767921a92f14ad3284e53e29278b5870d5f37f83",
    "006-profile-backfill-schema-v2": "c4e76d2ebfa4c620a285ef5e46ce0aa2fa8bd7bed2d35b40f8697421cc25a057",
    "007-profile-guard-triggers": "c38759aba5e8e4aff4c041d65df65558148d24e713686c3466ad62c40d400555",
    "008-build-sequence-profile-columns": "42ca3781170a59f1970aba4b3be489de157f9082084a8e47075d085b905b96cf",
    "009-build-sequence-incomplete-sweep": "2c67a1af5cf224490ade558936e5a0ff0b96c9d228f57d96e2def28794374e06",
    "010-build-sequence-profile-triggers": "1b26832192509d0fdcc1ad5db99c3d9abd9495e25b9cf2cbabd59342b66e04f8",
    "011-environment-profile-columns": "77b2a6288de1a25b40d334a34892419ff201bb716b10ab78533dac4cf0d09a6b",
    "012-run-authorities": "0f0ee27dc866c24a2593be381199fcc0ea2853c5b2bf4679abb01a03da68896e",
    "013-approval-tables": "043144ec1fe4bb56312408e7f08c3e37d262f50b3bfad78d8cf32d5a83c9e01e",
    "014-approval-requests-rebuild-action-limit": "460027767f0ac91bbc28b1b0d8df932ef583c94aca71471f105594bb81551949",
    "015-build-setup-evidence": "fe568c0575ae033ddc0d3c18ea2ee38f3b25bbe3020cca3d03025a1f9175b88b",
    "016-environment-identity-triggers": "2898053ebb4d727a76fd0dbb9fd19d3b4c0777017628c4f7fbb0eb9907546f68",
    "017-environment-reuse-index": "96c877dbda2ce669e6f2607ea891c9fcb912a267a47007321c763de50abedf59",
    "018-check-attempt-outcome-ambiguous": "e5d3c53d8f822668f919e99c0793f0334b654556685ff1214ed2585fc9d73b54",
    "019-build-sequence-activation-run-index": "4a6dc0a492170671362c68f9865ddc787c5dfebc7df5154aa2fe8532ff6846dd",
    "020-profile-revisions-rebuild-v3": "0ce22326d7dea9289f8544aaa94d9d030b2b38e38e51db30259c57d59e71eca5",
    "021-profile-backfill-current-schema": "827c0ff20c0617fce127fe97427704fda71a80c95cf8bfe02508d66fe3285f85",
    "022-profile-workload-eligibility": "69398aa33f9b5f7e620c99b4c2e908d51e56902672a6840d67f126ec2a43dbb1",
    "023-service-run-details": "81e95391cf2fc280a56ab3772498fd20d48e5d6a32cecec1735a30bb54c56f13",
    "024-environment-operation-columns": "3d558ad1d964f49b43aa7f46042686bf325c072e1e75de6b1e029c3542b080eb",
    "025-environment-operation-indexes": "4ab16127c8c562d13b1b1c97906087ffe4dc8aee983dc217e439182a676d2930",
    "026-environment-operation-triggers": "2190fbe50fb696f4e25fa3bf84de995f5e5640c3e8fc5f6618abef9fe31aa2b8",
    "027-check-environment-columns": "ccf9fb0be94bff395b9c4456a1847c7dc0ae0a8a0eeaab76c8acfc115d659aaf",
    "028-check-attempt-outcome-environment-loss": "a9e92a3abda665c4e8ab6259a1184491783321a575e9e835510ace8443e400a9",
    "029-check-placement-triggers": "12d7748b7c2c11c27412e9e75724bc5d995c93686e057ecc009b0c2b599b6ae6",
}


# Whole-step checksums (base.py `step_checksum`) of earlier bodies of steps whose body changed after
# they were released, each recorded by a console whose version was still 0.1.0. A ledger row carrying
# one means the step ran in that form, and it is not re-run:
#
# * before the direct upgrade path (issue 18, finding 4): 005 and 006 ran 1.8.22's backfills even when
#   the run's target was 1.10.0, so the file holds the chained history (revision 1 in schema 2, then
#   `:v3` and the workload repair) that archon 1.8.22 followed by 1.10.0 would have left; 021 did not
#   give revision 1 itself, 022 estimated differently. What they wrote is archon's chained path, which
#   archon's own next start accepts as it is.
#
# Never edit an entry; add one when a released step's body changes again.
EARLIER_CHECKSUMS_0_1_0: dict[str, tuple[str, ...]] = {
    "005-profile-backfill-initial": ("703994cde5dba153ea70973afb068031416f8bb547235928cc3560f2663d5a48",),
    "006-profile-backfill-schema-v2": ("d37b3c6e65c060ba4cefe363cefeb084c837858dbe9e0f5fd9f61219feee130b",),
    "021-profile-backfill-current-schema": ("c73dc50054c9c581e21fd78c83d2c8e477e5e29b9f143b74ad4718873e9ddfcf",),
    "022-profile-workload-eligibility": ("d3538ab01c80402e60e78f24f07d89913c6a733d8c93cb027ade2f34fd907f14",),
}
