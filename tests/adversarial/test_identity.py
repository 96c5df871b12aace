"""Who acted, and four-eyes: the OS account, not the self-declared `--as` name (issue 17, finding 5).

The class: any identity the operator merely declares. `--as bob` hid erin's own request from her,
`--as archon` recorded a person's decision as archon's, a Cyrillic `а` made `аlice` another person,
and a 128-character `console::...` claim id was "yours" for every name. The mechanism
(console/services/identity.py, four_eyes.py, confusables.py; docs/decisions.md, D21): the OS
account acts and is recorded in every event; four-eyes compares the declared name and the login,
by NFKC + case fold and by confusable skeleton; archon's own names are refused for every human
action; a claim is yours only when its id is exactly one this account created under that name.

The regression tests at the top use only the command line and the services as they were before
the fix (the new modules are imported inside the tests that need them), so they run, and fail,
against the unfixed code.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.clock import db_time
from console.db.connect import open_database
from console.errors import Refusal, UsageError
from console.services import approvals
from console.services import environments as envs
from tests.conftest import make_schema
from tests.test_approvals_helpers import NOW, add_project, add_request, archon_move, connect, dump, events, status_of
from tests.test_environments_support import add_env, set_claim
from tests.test_environments_support import events as env_events
from tests.test_profiles import DOCKER, add_revision

FAR = NOW + timedelta(days=36500)  # live by any clock: writes use the real one


def os_login() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # pragma: no cover - a uid without a passwd entry
        pytest.skip("this uid has no login name, so no request can name it")


PREFIX_CLAIM = "console::" + "a" * 119  # 128 characters: the old prefix rule made it everyone's


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = make_schema(tmp_path_factory.mktemp("identity") / "archon.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    add_request(conn, "mine", "p1", expires_at=FAR, authority={"requested_by": os_login()})
    add_request(conn, "cyr", "p1", expires_at=FAR, authority={"requested_by": "\u0430lice"})  # Cyrillic a
    add_request(conn, "other", "p1", expires_at=FAR, authority={"requested_by": "carol"})
    add_request(conn, "done", "p1", expires_at=FAR, authority={"requested_by": "carol"})
    archon_move(conn, "done", "approved", actor="dave")
    add_request(conn, "old", "p1", expires_at=NOW - timedelta(days=1), authority={"requested_by": "carol"})
    add_env(conn, "env-free", "ready")
    add_env(conn, "env-held", "ready")
    add_revision(conn, "p1", 2, DOCKER)
    conn.close()
    return path


@pytest.fixture
def db(template, tmp_path):
    path = tmp_path / "archon.db"
    shutil.copyfile(template, path)
    conn = connect(path)  # a fresh claim by the real clock, made by nobody's console
    set_claim(conn, "env-held", PREFIX_CLAIM, "stop", db_time(datetime.now(timezone.utc)))
    conn.close()
    return path


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


# --- regression tests: each failed on main (7ba84b7) --------------------------------------------

def test_declaring_another_name_does_not_hide_your_own_request(db, capsys, monkeypatch):
    """erin, as `--as bob`, approved her own request; the OS login names her whatever she declares."""
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    before = dump(db)
    code, text = cli(capsys, "approvals", "approve", "mine", "--as", "bob", "--db", str(db))
    assert code == 1 and "four-eyes" in text and "OS login" in text, text
    code, text = cli(capsys, "approvals", "deny", "mine", "--as", "bob", "--reason", "no", "--db", str(db))
    assert code == 1 and "four-eyes" in text, text
    assert status_of(db, "mine") == "pending" and dump(db) == before
    with open_database(db) as handle:  # what the TUI offers comes from the same service
        options = approvals.show_request(handle, "mine", actor="bob", now=NOW).options
    assert "OS login" in options["approve"] and options["deny"]


def test_every_event_records_the_os_account_beside_the_declared_name(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    me = {"os_login": os_login(), "os_uid": os.geteuid(), "os_host": socket.gethostname(), "declared_as": "bob"}
    assert cli(capsys, "approvals", "approve", "other", "--as", "bob", "--db", str(db))[0] == 0
    assert cli(capsys, "approvals", "revoke", "done", "--as", "bob", "--reason", "r", "--db", str(db))[0] == 0
    for rid in ("other", "done"):
        last = events(db, rid)[-1]
        assert last["actor_reference"] == "bob" and json.loads(last["metadata_json"]).items() >= me.items()
    assert cli(capsys, "envs", "claim", "env-free", "--op", "stop", "--as", "bob", "--db", str(db))[0] == 0
    assert cli(capsys, "envs", "release", "env-free", "--as", "bob", "--db", str(db))[0] == 0
    for event in env_events(db, "env-free"):
        meta = json.loads(event["metadata_json"])
        assert meta.items() >= me.items() and meta["source"] == "archon-console", meta  # the console's keys kept


RESERVED = ["archon", "system", "console", "archon-console", "Archon-Bot", "SYSTEM", "\u0455ystem", "c\u043ensole",
            "archon_worker", "\uff41rchon"]
COMMANDS = {
    "approve": ["approvals", "approve", "other"],
    "deny": ["approvals", "deny", "other", "--reason", "r"],
    "revoke": ["approvals", "revoke", "done", "--reason", "r"],
    "expire": ["approvals", "expire"],
    "claim": ["envs", "claim", "env-free", "--op", "stop"],
    "release": ["envs", "release", "env-held", "--takeover", "--reason", "r"],
    "complete": ["envs", "complete", "env-held"],
    "activate": ["profiles", "activate", "p1", "r2", "--reason", "r"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", RESERVED)
def test_archon_s_own_names_are_refused_for_every_human_action(db, capsys, monkeypatch, command, name):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    before = dump(db)
    code, text = cli(capsys, *COMMANDS[command], "--as", name, "--db", str(db))
    assert code == 2 and "reserved" in text, (code, text)
    assert text.strip().count("\n") == 0, text  # one sentence
    assert dump(db) == before


@pytest.mark.parametrize("name", ["\u0430lice", "\u0410lice", "\u03b1lice", "a\u04cfice", "al\u0456ce", "AIice"])
def test_look_alike_letters_are_the_same_person(db, name):
    """`cyr` was requested by `аlice` (Cyrillic а): alice may not approve it, and neither may `name`
    approve alice's... so each spelling is tried as the approver of the Cyrillic request."""
    before = dump(db)
    for actor in ("alice", name):
        with open_database(db) as handle:
            with pytest.raises(Refusal, match="four-eyes"):
                approvals.approve(handle, "cyr", actor=actor, now=NOW)
    assert dump(db) == before


def test_a_128_character_console_claim_prefix_is_nobody_s_claim(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    before = dump(db)
    for actor in ("mallory", "a", "x" * 150):
        code, text = cli(capsys, "envs", "release", "env-held", "--as", actor, "--db", str(db))
        assert code == 1 and "only its holder" in text, text
        code, text = cli(capsys, "envs", "complete", "env-held", "--as", actor, "--db", str(db))
        assert code == 1 and "only its holder" in text, text
        with open_database(db) as handle:
            env = envs.show_environment(handle, "env-held", now=datetime.now(timezone.utc))
        assert not envs.held_by(PREFIX_CLAIM, actor) and envs.claim_options(env, actor).why("release")
    assert dump(db) == before
