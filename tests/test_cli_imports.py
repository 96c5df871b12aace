"""What each CLI command imports, listed (issue 22 item 1): a command's start-up is most of its time
on any database size, and the start-up is its imports.

Each command runs in a fresh interpreter that reports `sys.modules` at exit
(tests/cli_modules.py `modules_of`); no timing is asserted. Two lists per command are compared
exactly: the console's own modules, and which of the standard and third-party modules that cost
start-up time (`HEAVY`) it loads. A new import on one of these paths, or one that went away, is a
change to a list here, made on purpose. The migration steps count as one entry (`STEPS`): a
command that reads the ledger loads all of them through the registry.

The instruction counts behind the lists (callgrind, README "Benchmarks"): `approvals show` went from
about 372 to 196 million instructions once dataclasses, typing, pathlib's... were off its path; the
modules named in `HEAVY` and listed nowhere below are the ones that were removed.
"""

from __future__ import annotations

import pytest

from tests.approvals_helpers import live_request
from tests.conftest import pin_real_clock
from tests.cli_modules import modules_of

# Standard and third-party modules whose import costs a command's start-up something measurable.
HEAVY = frozenset({
    "asyncio", "ast", "bz2", "concurrent", "contextvars", "csv", "dataclasses", "dateutil", "decimal",
    "difflib", "fnmatch", "getpass", "hashlib", "humanize", "inspect", "ipaddress", "locale", "lzma",
    "multiprocessing", "pathlib", "pickle", "platform", "random", "rich", "shutil", "socket", "sqlite_utils",
    "subprocess", "tempfile", "termios", "textual", "threading", "tokenize", "typing", "urllib", "uuid", "zlib",
})
STEPS = "console.db.migrations.steps.s*"

# Every command's start: the entry point, the parser, the output sanitiser, opening the database.
CORE = {
    "console", "console.cli", "console.cli.cli", "console.cli.commands", "console.cli.options",
    "console.cli.output", "console.cli.parser", "console.clock", "console.db", "console.db.connect",
    "console.db.connection", "console.db.file_guard", "console.db.file_trust", "console.db.files",
    "console.db.limits", "console.db.paths", "console.db.rows", "console.db.tx", "console.errors",
    "console.isolation", "console.records", "console.services", "console.signals", "console.text",
    "widgets", "widgets.safe_json", "widgets.safe_text",
}
# pathlib (and fnmatch, urllib.parse and ipaddress with it), threading and contextvars: the database
# layer's paths, locks and lock budget; locale: argparse's gettext.
CORE_HEAVY = {"contextvars", "fnmatch", "ipaddress", "locale", "pathlib", "threading", "urllib"}

APPROVAL_READS = {
    "console.cli.commands.approvals", "console.db.detect", "console.db.queries", "console.db.sql",
    "console.models", "console.models.approvals", "console.models.results", "console.models.values",
    "console.services.approval_queue", "console.services.base", "console.services.confusables",
    "console.services.four_eyes", "console.services.identity", "console.services.resolve",
}
LEDGER = {
    "console.db.detect", "console.db.execution_profiles", "console.db.introspect", "console.db.ledger",
    "console.db.locked_copy", "console.db.migrations", "console.db.migrations.backfills",
    "console.db.migrations.base", "console.db.migrations.legacy_checksums",
    "console.db.migrations.profile_triggers", "console.db.migrations.registry", "console.db.migrations.runner",
    "console.db.migrations.steps", "console.db.migrations.steps.approval_ddl",
    "console.db.migrations.steps.check_attempt_ddl", STEPS, "console.db.migrations.stops",
    "console.db.profile_evidence", "console.db.readonly", "console.db.sql",
}
# sqlite-utils reads the schema for the plan and doctor (console/db/introspect.py) and brings csv,
# dateutil, decimal, tempfile, uuid...; the upgrade's model and doctor's report are still dataclasses.
LEDGER_HEAVY = {
    "ast", "bz2", "concurrent", "csv", "dataclasses", "dateutil", "decimal", "hashlib", "inspect", "lzma",
    "platform", "random", "shutil", "sqlite_utils", "tempfile", "tokenize", "typing", "uuid", "zlib",
}

COMMANDS = {
    "approvals list": (["approvals", "list"], APPROVAL_READS | {"console.db.locked_copy", "console.db.readonly"}, set()),
    "approvals show": (["approvals", "show", "apr-1"],
                       APPROVAL_READS | {"console.db.locked_copy", "console.db.readonly"}, set()),
    "approvals approve": (["approvals", "approve", "{live}", "--as", "dave"],
                          APPROVAL_READS | {"console.services.approval_transitions", "console.services.approvals"},
                          set()),
    "envs list": (["envs", "list"], {
        "console.cli.commands.envs", "console.db.queries", "console.db.sql", "console.models",
        "console.models.environments", "console.models.values", "console.services.base",
        "console.services.environment_queries", "console.services.environment_rules", "console.services.identity",
        "console.services.resolve",
        "console.db.locked_copy", "console.db.readonly",  # a listing reads through the read-only reader
    }, set()),
    "upgrade --plan": (["upgrade", "--plan"], LEDGER - {"console.db.introspect"} | {
        "console.cli.commands.upgrade", "console.db.exclusive_lock", "console.db.migrations.fixed_ids",
        "console.db.migrations.preflight", "console.db.migrations.replay", "console.db.snapshot",
        "console.db.snapshot_check", "console.db.snapshot_manifest", "console.db.snapshot_pages",
        "console.services.profile_gate", "console.services.upgrade", "console.services.upgrade.decide",
        "console.services.upgrade.model", "console.services.upgrade.plan",
    }, LEDGER_HEAVY - {"csv", "dateutil", "decimal", "platform", "random", "sqlite_utils", "tempfile", "uuid"}
       | {"humanize", "rich"}),  # no sqlite-utils (console/db/detect.py `table_names`); humanize: sizes in
    # words; rich: console/text.py `cells`
    "doctor": (["doctor"], LEDGER | {
        "console.cli.commands.doctor", "console.db.queries", "console.db.rules", "console.models",
        "console.models.environments", "console.models.values", "console.services.base", "console.services.doctor",
        "console.services.doctor.checks_approvals", "console.services.doctor.checks_constraints",
        "console.services.doctor.checks_environments",
        "console.services.doctor.checks_integrity", "console.services.doctor.checks_profiles",
        "console.services.doctor.checks_schema", "console.services.doctor.context",
        "console.services.doctor.report", "console.services.environment_queries",
        "console.services.environment_rules", "console.services.identity", "console.services.resolve",
    }, LEDGER_HEAVY),
    "audit": (["audit"], {"console.cli.commands.audit", "console.db.live", "console.db.locked_copy",
                          "console.db.readonly", "console.services.audit"},
              {"typing"}),  # typing: the export's rows are NamedTuples (console/services/audit.py)
}


@pytest.fixture
def db(db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01 09:30:00")
    return db


def _named(loaded: set[str]) -> tuple[set[str], set[str]]:
    """The console's modules (the migration steps as one `STEPS`) and the `HEAVY` ones, by package."""
    ours = {m for m in loaded if m.split(".")[0] in ("console", "widgets")}
    steps = {m for m in ours if m.startswith("console.db.migrations.steps.s0")}
    return (ours - steps) | ({STEPS} if steps else set()), {m.split(".")[0] for m in loaded} & HEAVY


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_imports_exactly_its_list(db, tmp_path, name):
    argv, own, heavy = COMMANDS[name]
    argv = [word.replace("{live}", live_request(db)) if word == "{live}" else word for word in argv]
    ours, loaded_heavy = _named(modules_of(tmp_path, *argv, "--db", str(db)))
    expected = CORE | own
    assert ours == expected, (f"{name}: console modules newly imported {sorted(ours - expected)}, "
                              f"no longer imported {sorted(expected - ours)}")
    expected_heavy = CORE_HEAVY | heavy
    assert loaded_heavy == expected_heavy, (f"{name}: heavy modules newly imported {sorted(loaded_heavy - expected_heavy)}, "
                                            f"no longer imported {sorted(expected_heavy - loaded_heavy)}")


def test_no_cli_path_above_imports_the_tui_or_the_standard_dataclasses_on_a_hot_path():
    """The four commands of issue 22's table (and `approvals list`) import neither textual, rich nor
    the TUI, nor dataclasses, typing, subprocess, shutil or uuid: the lists above say so; this keeps
    it from being edited away with them."""
    never = {"textual", "rich", "dataclasses", "inspect", "typing", "subprocess", "pickle", "shutil", "uuid",
             "humanize", "getpass", "termios", "tempfile", "sqlite_utils"}
    for name in ("approvals list", "approvals show", "approvals approve", "envs list"):
        _argv, own, heavy = COMMANDS[name]
        assert not (CORE_HEAVY | heavy) & never, name
        assert not {m for m in CORE | own if m.startswith(("console.tui", "widgets.")) and m not in
                    ("widgets.safe_json", "widgets.safe_text")}, name


def test_the_written_out_whitespace_is_every_character_strip_removes():
    """console/services/approval_queue.py spells `str.isspace`'s characters out instead of finding them
    at import; they must stay exactly the running Python's, or the requester sort and `requester_of`
    would disagree about a name padded with one of them."""
    import sys

    from console.services.approval_queue import WHITESPACE

    assert WHITESPACE == "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
