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
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.clock import db_time
from console.db.connect import open_database
from console.errors import Refusal, UsageError
from console.services import approvals
from console.services.approval_queue import show_request
from console.services.environment_claims import claim, release
from console.services.environment_queries import show_environment
from console.services.environment_rules import claim_options, held_by
from tests.conftest import make_schema
from tests.approvals_helpers import NOW, add_project, add_request, archon_move, connect, dump, events, status_of
from tests.environments_support import add_env, set_claim
from tests.environments_support import events as env_events
from tests.profiles_support import DOCKER, add_revision

FAR = NOW + timedelta(days=36500)  # live by any clock: writes use the real one


def os_login() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # pragma: no cover - a uid without a passwd entry
        pytest.skip("this uid has no login name, so no request can name it")


PREFIX_CLAIM = "console::" + "a" * 119  # 128 characters: the old prefix rule made it everyone's


def _rows(conn) -> None:
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


@pytest.fixture
def db(make_db):
    path = make_db(fill=_rows, cached=True)
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
        options = show_request(handle, "mine", actor="bob", now=NOW).options
    assert "OS login" in options["approve"] and options["deny"]


@pytest.mark.slow
def test_every_event_records_the_os_account_beside_the_declared_name(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    me = {"os_login": os_login(), "os_uid": os.geteuid(), "os_host": os.uname().nodename, "declared_as": "bob"}
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


@pytest.mark.slow
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
            env = show_environment(handle, "env-held", now=datetime.now(timezone.utc))
        assert not held_by(PREFIX_CLAIM, actor) and claim_options(env, actor).why("release")
    assert dump(db) == before


# --- the TUI decides through the same service ----------------------------------------------------

@pytest.mark.slow
async def test_the_console_refuses_the_login_s_own_request_and_archon_s_names(demo_copy, make_app):
    from console.tui.screens.approvals import ApprovalsScreen
    from tests.approvals_helpers import set_authority
    from tests.tui.pilot import db as query, ready, select, settle

    path = demo_copy()
    set_authority(path, "apr-00000192", json.dumps({"requested_by": os_login()}))
    for actor, said in (("bob", "OS login"), ("archon", "reserved")):
        app = make_app(path, actor=actor)
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app, ApprovalsScreen)
            await select(pilot, app, "apr-00000192")
            assert said in app.screen.unavailable()["approve"], app.screen.unavailable()
            await pilot.press("a")
            await settle(pilot, app)
        assert query(path, "SELECT status FROM approval_requests WHERE id='apr-00000192'")[0][0] == "pending"


@pytest.mark.slow
async def test_the_environments_screen_greys_every_claim_key_for_archon_s_names(demo_copy, make_app):
    from console.tui.screens.environments import EnvironmentsScreen
    from tests.tui.pilot import db as query, ready, select, settle

    path = demo_copy()
    app = make_app(path, actor="\u0455ystem", start="envs")  # Cyrillic s
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0011")  # ready and unclaimed
        for action in ("claim_stop", "claim_retire", "claim_reset", "claim_cleanup", "complete", "release", "takeover"):
            assert "reserved" in app.screen.unavailable()[action], action
        await pilot.press("s")
        await settle(pilot, app)
        assert isinstance(app.screen, EnvironmentsScreen)  # no dialog for a write the service refuses
    assert query(path, "SELECT operation_claim_id FROM execution_environments WHERE id = 'env-0011'") == [(None,)]


# --- the rule over generated names ---------------------------------------------------------------

# Look-alikes from Unicode's confusables.txt (UTS #39), written out here independently of
# console/services/confusables.py: the test must not take the table's word for what looks alike.
KNOWN = {
    "a": ["\u0430", "\u03b1", "\u0251", "\u0410", "\u0391"], "b": ["\u0412", "\u0392"],
    "c": ["\u0441", "\u03f2", "\u0421"], "d": ["cl"], "e": ["\u0435", "\u0415", "\u0395"],
    "h": ["\u04bb", "\u041d", "\u0397"], "i": ["\u0456", "\u0131", "\u03b9", "I"], "j": ["\u0458"],
    "k": ["\u039a", "\u041a"], "l": ["\u04cf", "1", "I", "|", "\u0399", "\u0406", "\u2113"], "m": ["rn"],
    "n": ["\u039d"], "o": ["\u043e", "\u03bf", "0", "\u0585", "\u041e", "\u039f"],
    "p": ["\u0440", "\u03c1", "\u0420", "\u03a1"], "s": ["\u0455", "\u0405"], "t": ["\u0422", "\u03a4"],
    "w": ["vv"], "x": ["\u0445", "\u03c7", "\u0425"], "y": ["\u0443", "\u04ae"],
}
INVISIBLE = ["", "", "", "\u200b", "\u00ad", "\u202e", "\u2060", "\ufe0f"]


@st.composite
def look_alike(draw, base: str) -> str:
    """`base` with each letter kept, upper-cased, made full-width or mathematical bold (NFKC forms),
    or replaced by a look-alike, and invisible characters between."""
    out = []
    for ch in base:
        forms = [ch, ch.upper()]
        if "a" <= ch <= "z":
            forms += [chr(0xFF41 + ord(ch) - 97), chr(0x1D41A + ord(ch) - 97), chr(0x1D400 + ord(ch) - 97)]
        forms += KNOWN.get(ch, [])
        out.append(draw(st.sampled_from(forms)) + draw(st.sampled_from(INVISIBLE)))
    return draw(st.sampled_from(["", " "])) + "".join(out) + draw(st.sampled_from(["", " "]))


NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    path = make_schema(tmp_path_factory.mktemp("identity-gen") / "g.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    conn.close()
    with open_database(path) as handle:
        yield handle, iter(range(10**6))


def _approve(shared, requester: str, actor: str) -> str:
    handle, counter = shared
    rid = f"gen-{next(counter)}"
    add_request(handle.conn, rid, "p1", expires_at=FAR, authority={"requested_by": requester})
    try:
        approvals.approve(handle, rid, actor=actor, now=NOW)
    except (Refusal, UsageError):
        pass
    return handle.conn.execute("SELECT status FROM approval_requests WHERE id = ?", (rid,)).fetchone()[0]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(data=st.data(), base=NAMES)
def test_every_spelling_of_a_name_is_that_name_and_a_longer_one_is_not(data, base):
    from console.services import four_eyes

    variant = data.draw(look_alike(base))
    assert four_eyes.same_name(variant, base) and four_eyes.same_name(base, variant), (base, variant)
    assert not four_eyes.same_name(variant, base + "q"), (base, variant)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), base=NAMES)
def test_no_spelling_of_the_requester_approves_and_other_names_still_can(shared, data, base):
    """The same rule through the service, both ways round (each example writes three requests)."""
    from console.services import four_eyes

    variant = data.draw(look_alike(base))
    assert _approve(shared, requester=variant, actor=base) == "pending", (base, variant)
    assert _approve(shared, requester=base, actor=variant) == "pending", (base, variant)
    other = base + "q"  # one letter longer: no spelling of base
    if not four_eyes.reserved_name(other) and not four_eyes.same_name(variant, os_login()):
        assert _approve(shared, requester=variant, actor=other) == "approved", (base, variant)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(data=st.data(), word=st.sampled_from(["archon", "system", "console", "archon-", "archon_", "archon "]),
       suffix=st.text(alphabet="abcxyz-", max_size=6))
def test_every_spelling_of_archon_s_names_is_reserved(data, word, suffix):
    from console.services import four_eyes
    from console.services.base import validate_actor

    name = data.draw(look_alike(word + suffix if word.startswith("archon") and len(word) == 7 else word))
    assert four_eyes.reserved_name(name), name
    with pytest.raises(UsageError):
        validate_actor(name)


def test_names_that_only_resemble_a_reserved_word_are_people():
    from console.services import four_eyes

    for name in ("archonaut", "archons", "systems", "consoles", "bob", "Archibald", "sys", "con sole"):
        assert not four_eyes.reserved_name(name), name


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40))
def test_the_ascii_shortcut_gives_the_unicode_path_s_forms(text):
    from console.services import four_eyes

    assert four_eyes.name_forms(text) == four_eyes.NameForms(
        four_eyes._canonical_unicode(text), four_eyes._skeleton_unicode(text))


def test_the_skeleton_table_is_idempotent_and_knows_the_listed_pairs():
    from console.services import four_eyes
    from console.services.confusables import CAPITAL_I, SKELETON

    for target in SKELETON.values():
        assert target.translate(SKELETON) == target and target == target.lower() and target.isascii()
        assert not set(target) & set(CAPITAL_I)
    for letter, alikes in KNOWN.items():
        for alike in alikes:
            assert four_eyes.same_name(f"x{letter}y", f"x{alike}y"), (letter, alike)
    assert four_eyes.same_name("\u0440\u0430\u0443\u0440\u0430l", "paypal")  # Cyrillic р, а, у
    assert four_eyes.same_name("AIICE", "alice") and not four_eyes.same_name("eli", "ell")


# --- claim ownership is the exact id --------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(a=st.text(min_size=1, max_size=160), b=st.text(min_size=1, max_size=160),
       forged=st.text(max_size=120))
def test_a_claim_is_held_only_by_the_name_and_account_that_created_it(a, b, forged):
    from console.services.base import claim_id_for

    claim_id = claim_id_for(a)
    assert len(claim_id) <= 128 and held_by(claim_id, a)
    assert held_by(claim_id, b) == (a == b)
    for text in ("console:" + forged, ("console:" + forged + "@" * 128)[:128], claim_id[:-1], claim_id + "0"):
        assert not held_by(text, a) and not held_by(text, b)


def test_another_account_declaring_the_same_name_does_not_hold_the_claim(db, monkeypatch):
    from console.services import identity

    with open_database(db) as handle:
        claim(handle, "env-free", "stop", "alice", now=datetime.now(timezone.utc))
    real = identity.current()
    monkeypatch.setattr(identity, "current", lambda: identity.OsIdentity("mallory", real.uid + 1, real.host))
    before = dump(db)
    with open_database(db) as handle:
        with pytest.raises(Refusal, match="only its holder"):
            release(handle, "env-free", "alice", now=datetime.now(timezone.utc))
    assert dump(db) == before


def test_show_names_the_os_account_beside_the_declared_actor(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    account = f"{os_login()}@{os.uname().nodename}"
    assert cli(capsys, "approvals", "approve", "other", "--as", "bob", "--db", str(db))[0] == 0
    code, text = cli(capsys, "approvals", "show", "other", "--as", "bob", "--db", str(db))
    assert code == 0 and f"bob (human; OS {account})" in text.replace("\n", " "), text
    assert cli(capsys, "envs", "claim", "env-free", "--op", "stop", "--as", "bob", "--db", str(db))[0] == 0
    code, text = cli(capsys, "envs", "show", "env-free", "--as", "bob", "--db", str(db))
    assert code == 0 and f"bob (OS {account})" in text, text


@pytest.mark.parametrize("metadata", [None, "", "{", "[" * 5000, '{"os_login": "x"}', '"text"', "{}"])
def test_unreadable_or_foreign_metadata_shows_no_account(metadata):
    from console.services.identity import account_of

    assert account_of(metadata) is None


def test_the_console_s_timelines_name_the_os_account(db, capsys, monkeypatch):
    from console.tui.screens.approval_detail import detail_events

    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    assert cli(capsys, "approvals", "approve", "other", "--as", "bob", "--db", str(db))[0] == 0
    with open_database(db) as handle:
        request = show_request(handle, "other", actor="bob", now=NOW)
    last = detail_events(request)[-1]
    assert f"OS {os_login()}@{os.uname().nodename}" in str(last), last
