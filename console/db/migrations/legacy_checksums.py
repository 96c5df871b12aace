"""The checksums earlier console versions recorded, frozen: one table per checksum scheme.

Archon-console 0.1.0 wrote ledger rows (tool_version "0.1.0") under two schemes in turn:

* `CHECKSUMS_0_1_0`: its first form hashed only each step's own module source;
* `CHECKSUMS_0_1_0_PACKAGE`: from then on (still tool_version "0.1.0") the hash also covered the
  modules of console/db/migrations the step imports, but not console/db/execution_profiles.py,
  whose defaults, normalisation, serialisation and fingerprint steps 004-007 and 020-022 write.

Archon-console 0.2.0 (console/__init__.py `__version__`) hashes every project module a step reaches
by imports (console/db/migrations/base.py `step_sources`), so every step that reaches the profile
algorithms has a new checksum. A ledger row is accepted when its checksum is this console's for the
step, or when it is one of the frozen values for the step *and* the row's tool_version is the
version that wrote it (`ACCEPTED_BY_VERSION`): a row a current console writes records the current
version, so from then on only the current checksum is accepted for it and an edited step is
noticed. The tool version is bumped whenever the checksum scheme (or a released step) changes, and
the old values are frozen here first, computed on the code that wrote them.

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
* A row under `CHECKSUMS_0_1_0_PACKAGE` for 004-007 or 020-022 says the step ran with the profile
  algorithms of the console that wrote it, which its checksum did not record; the console's
  profile evidence never counts those rows as archon's (console/db/profile_evidence.py).

Never edit these tables; they describe what was released.
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

CHECKSUMS_0_1_0_PACKAGE: dict[str, str] = {
    "001-archon-1.8.20-baseline": "51a4d61582e223aa7304e0d46916c6e53c44dd5a079eaf1579c73795087a7d2f",
    "002-project-active-profile-column": "993e21def29c7ec1ea427366bb6aa6647543dabacabbfbc770c78ae7660bee6e",
    "003-profile-tables": "11c45df26ffdd0535f0a46a99dc70e3c34317f428050483fdeeb758e2e13df69",
    "004-profile-revisions-rebuild-v2": "57445c5bddd4b32d093b412f7a35de51b8ba788a16084cb0030cba729c74f500",
    "005-profile-backfill-initial": "703994cde5dba153ea70973afb068031416f8bb547235928cc3560f2663d5a48",
    "006-profile-backfill-schema-v2": "d37b3c6e65c060ba4cefe363cefeb084c837858dbe9e0f5fd9f61219feee130b",
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
    "021-profile-backfill-current-schema": "c73dc50054c9c581e21fd78c83d2c8e477e5e29b9f143b74ad4718873e9ddfcf",
    "022-profile-workload-eligibility": "d3538ab01c80402e60e78f24f07d89913c6a733d8c93cb027ade2f34fd907f14",
    "023-service-run-details": "614d759fc437ba0632f05dab3bb8b8834675d5348a4e912337a7c36bf91e08f4",
    "024-environment-operation-columns": "7f8384ecba27d33287a5b96f86d60db368c09c5f8eb7efe812909fc2257d7f4c",
    "025-environment-operation-indexes": "168aa42422db08bf2dd5f0bae85b6655bd4c89eff6e559cba8efd8028d83666a",
    "026-environment-operation-triggers": "2e3aac77270c22009beccae70ecbf6877d551f37d133645d39e74f09bd83df1e",
    "027-check-environment-columns": "d4761917bbc94f63719f1ca3560dd568824fba9e4dfaf4cec5f645e7088b5480",
    "028-check-attempt-outcome-environment-loss": "9674ea63a28d631c9a284d5c0efa38d679edd090d48cca0ce242e8083cbc2c2a",
    "029-check-placement-triggers": "bf04fd06e009a43cfe110f10992f6818ede1479cca94b48fa76b55255e892b55",
}

# tool_version recorded in a ledger row -> the frozen checksum tables rows of that version may carry.
ACCEPTED_BY_VERSION: dict[str, tuple[dict[str, str], ...]] = {
    LEGACY_TOOL_VERSION: (CHECKSUMS_0_1_0, CHECKSUMS_0_1_0_PACKAGE),
}
