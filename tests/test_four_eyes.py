"""Four-eyes fails closed (issue 8, rule 10): alice never approves her own request, however its
authority is written, unless she explicitly confirms an unknown requester is not her."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.db.connect import open_database
from console.errors import Refusal
from console.services import approvals, four_eyes, identity
from console.services.approval_queue import show_request
from tests.conftest import make_schema
from tests.approvals_helpers import NOW, add_project, add_request, connect, dump, events, status_of

# Each of these let alice approve her own request on main (f8ad3b9).
BYPASSES = {
    "trailing comma": '{"requested_by": "alice",}',
    "a list": '[{"requested_by": "alice"}]',
    "zero-width space": json.dumps({"requested_by": "alice\u200b"}),
    "zero-width space, raw": '{"requested_by": "alice\u200b"}',
    "bidi override": json.dumps({"requested_by": "\u202ealice"}),
    "fullwidth letters": json.dumps({"requested_by": "\uff41\uff4c\uff49\uff43\uff45"}),
    "soft hyphen": json.dumps({"requested_by": "al\u00adice"}),
    "duplicate key": '{"requested_by": "alice", "requested_by": "bob"}',  # Python keeps the last
    "two fields": json.dumps({"requested_by": "bob", "requester": "alice"}),
    "look-alike field": json.dumps({"requested_by\u200b": "alice"}),
    "nested": json.dumps({"requested_by": {"name": "alice"}}),
}

UNKNOWN = {  # the requester cannot be determined and alice is not named: approvable only with the flag
    "no requester field": json.dumps({"scope": "push"}),
    "not JSON": "{requested_by: someone",
    "a list": '["bob"]',
    "requester not a string": json.dumps({"requested_by": 42}),
    "empty requester": json.dumps({"requested_by": "\u200b "}),
}


def confirmed(flag: bool) -> dict:
    """The confirmation only when given, so the unconfirmed cases run unchanged on older code."""
    return {"requester_unknown_ok": True} if flag else {}


def authorities_db(directory: Path, authorities: dict[str, str]) -> Path:
    path = make_schema(directory / "archon.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    for rid, text in authorities.items():
        add_request(conn, rid, "p1", expires_at=NOW + timedelta(days=36500), authority=text)  # live by any clock
    conn.close()
    return path


def ids(cases):
    return {f"r{i}": text for i, text in enumerate(cases.values())}


@pytest.fixture(scope="module")
def db_template(tmp_path_factory):
    return authorities_db(tmp_path_factory.mktemp("four-eyes"), {
        **ids(BYPASSES), **{f"u{i}": t for i, t in enumerate(UNKNOWN.values())},
        "ok": json.dumps({"requested_by": "bob"}),
    })


@pytest.fixture
def db(db_template, make_db):
    return make_db(template=db_template)


@pytest.mark.parametrize("rid,name", [(f"r{i}", n) for i, n in enumerate(BYPASSES)])
@pytest.mark.parametrize("flag", [False, True])
def test_alice_cannot_approve_her_own_request(db, rid, name, flag):
    before = dump(db)
    with open_database(db) as h:
        with pytest.raises(Refusal) as info:
            approvals.approve(h, rid, actor="alice", now=NOW, **confirmed(flag))
        assert info.value.reason.endswith("Nothing was written."), name
        options = show_request(h, rid, actor="alice", now=NOW).options
    assert dump(db) == before
    if not flag:
        assert options["approve"] is not None or "cannot be determined" in info.value.reason, name


@pytest.mark.parametrize("rid,name", [(f"u{i}", n) for i, n in enumerate(UNKNOWN)])
def test_unknown_requester_needs_the_confirmation_which_is_recorded(db, rid, name):
    before = dump(db)
    with open_database(db) as h:
        request = show_request(h, rid, actor="dave", now=NOW)
        assert request.options["approve"] is None and "cannot be determined" in request.confirm["approve"]
        assert request.requester_problem
        with pytest.raises(Refusal) as info:
            approvals.approve(h, rid, actor="dave", now=NOW)
    assert dump(db) == before
    assert "cannot be determined with certainty" in info.value.reason and "--requester-unknown-ok" in info.value.hint
    with open_database(db) as h:
        result = approvals.approve(h, rid, actor="dave", now=NOW, requester_unknown_ok=True)
    assert result.ok and "could not be determined" in result.message
    last = events(db, rid)[-1]
    assert last["to_status"] == "approved" and last["actor_reference"] == "dave"
    assert json.loads(last["metadata_json"])["requester_unknown_confirmed"] == request.requester_problem


def test_a_certain_other_requester_needs_no_confirmation(db):
    with open_database(db) as h:
        request = show_request(h, "ok", actor="alice", now=NOW)
        assert request.confirm == {} and request.options["approve"] is None
        assert approvals.approve(h, "ok", actor="alice", now=NOW).ok
    assert json.loads(events(db, "ok")[-1]["metadata_json"]) == identity.event_metadata("alice")  # who acted only


def test_deny_makes_the_same_comparison_as_approve(db):
    """Deny refuses whatever approve would call the requester's own (round 2 of issue 17, finding 4:
    `alice\u200b` was deniable by alice); an unknown requester that does not name you can be denied."""
    with open_database(db) as h:
        with pytest.raises(Refusal, match="four-eyes"):
            approvals.deny(h, "r2", actor="alice", reason="no", now=NOW)  # "alice\u200b"
        assert approvals.deny(h, "u0", actor="dave", reason="no", now=NOW).ok  # unknown requester


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=40))
def test_the_ascii_shortcut_canonicalises_as_the_unicode_path_does(text):
    """Decisions canonicalise every string of an authority, so ASCII takes a shortcut (issue 11
    item 6); it must give exactly the answer of the general NFKC path, controls and DEL included."""
    assert four_eyes.canonical_name(text) == four_eyes._canonical_unicode(text)


def test_canonical_names():
    assert four_eyes.canonical_name("  A\u200bL\u00adI\u202eC\u2066E\ufe0f ") == "alice"
    assert four_eyes.canonical_name("\uff21lice") == "alice"
    assert four_eyes.canonical_name("al  ice") == "al ice"
    assert not four_eyes.same_name("", "\u200b")
    # a combining mark does not make another name (it only refuses more): `eri\u0307n` is erin
    assert four_eyes.same_name("alice", "alicé") and four_eyes.same_name("alice", "ali\u0307ce")


def test_cli_refuses_without_the_flag_and_says_so(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    before = dump(db)
    code = main(["approvals", "approve", "u0", "--as", "dave", "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 1 and dump(db) == before
    assert "cannot be determined with certainty" in err and "--requester-unknown-ok" in err
    code = main(["approvals", "approve", "r0", "--as", "alice", "--requester-unknown-ok", "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 1 and "names you" in err and status_of(db, "r0") == "pending"
    code = main(["--json", "approvals", "approve", "u0", "--as", "dave", "--requester-unknown-ok", "--db", str(db)])
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)[0]["state"] == "approved"
    code = main(["approvals", "show", "u1", "--as", "dave", "--db", str(db)])
    out, _ = capsys.readouterr()
    assert code == 0 and "approve needs --requester-unknown-ok: its requester cannot be determined" in out


# --- generated authority shapes ----------------------------------------------------------------

INVISIBLE = st.sampled_from(["", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066",
                             "\u034f", "\ufe0f", "\u180e"])
CASE = st.sampled_from(["alice", "Alice", "ALICE", "\uff41lice", "al\u0131ce".replace("\u0131", "i")])


@st.composite
def alice_variants(draw):
    name = draw(CASE)
    chars = [draw(INVISIBLE) + ch for ch in name] + [draw(INVISIBLE)]
    return draw(st.sampled_from(["", " ", "\t"])) + "".join(chars) + draw(st.sampled_from(["", " "]))


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
EXTRA = st.dictionaries(st.sampled_from(["scope", "grant", "run", "approver", "note"]), JSON_LEAF, max_size=3)


@st.composite
def alice_authorities(draw):
    """Authority text in which alice is the requester, in any spelling or shape."""
    alice = draw(alice_variants())
    key = draw(st.sampled_from(["requested_by", "requester"]))
    extra = draw(EXTRA)
    body = {**extra, key: alice}
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    shape = draw(st.sampled_from(["plain", "trailing comma", "list", "duplicate", "duplicate after", "other field", "nested",
                                  "unquoted", "truncated"]))
    if shape == "trailing comma":
        text = text[:-1] + ",}"
    elif shape == "list":
        text = "[" + text + "]"
    elif shape == "duplicate":
        text = '{"%s": "bob", ' % key + text[1:]
    elif shape == "duplicate after":  # Python's json keeps the last value
        text = text[:-1] + ', "%s": "bob"}' % key
    elif shape == "other field":
        other = "requester" if key == "requested_by" else "requested_by"
        text = json.dumps({other: "bob", **body})
    elif shape == "nested":
        text = json.dumps({**extra, key: {"name": alice}})
    elif shape == "unquoted":
        text = "{%s: %s}" % (key, alice)
    elif shape == "truncated":
        text = text[: len(text) - draw(st.integers(1, 2))]  # the name stays whole
    return text


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    path = make_schema(tmp_path_factory.mktemp("four-eyes-gen") / "g.db", "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    conn.close()
    with open_database(path) as handle:
        yield handle, iter(range(10**6))


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=alice_authorities(), flag=st.booleans())
def test_generated_authorities_never_let_alice_approve_her_own_request(shared, text, flag):
    if len(text.encode()) < 2:
        return
    handle, counter = shared
    rid = f"mine-{next(counter)}"
    add_request(handle.conn, rid, "p1", expires_at=NOW + timedelta(hours=1), authority=text)
    try:
        approvals.approve(handle, rid, actor="alice", now=NOW, **confirmed(flag))
    except Refusal:
        pass
    status = handle.conn.execute("SELECT status FROM approval_requests WHERE id = ?", (rid,)).fetchone()[0]
    assert status == "pending", text


def test_remembered_name_comparisons_stay_bounded_and_answer_as_computed():
    """Issue 22, item 5: decisions remember the forms of the short names they compare (the same
    keys and approver names recur in every request), but a database of distinct names cannot grow
    that memory past its bound, a long text is never kept, and a remembered answer is the computed one."""
    limit = four_eyes.name_forms.cache_info().maxsize
    for n in range(limit + 500):
        assert four_eyes.names_person(f"agent:{n} alice", "alice")
    assert four_eyes.name_forms.cache_info().currsize <= limit
    long_text = "x" * 5000 + " alice"
    before = four_eyes.name_forms.cache_info()
    assert four_eyes.names_person(long_text, "alice") and four_eyes.names_person(long_text, "alice")
    after = four_eyes.name_forms.cache_info()
    assert after.currsize <= before.currsize + 2  # the windows are short; the long text is not kept
    computed = four_eyes.name_forms.__wrapped__  # the function itself, nothing kept
    for text in ("\u0430lice", "ALICE", "a l i c e", "bob", "alice\u200b", "ERlN"):
        expected = computed(text).same(computed("alice"))
        assert four_eyes.names_person(text, "alice") == four_eyes.names_person(text, "alice") == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_the_ascii_words_of_a_name_are_the_general_ones(text):
    """The ASCII shortcut of `_tokens` (a decision splits every short string of an authority into
    words) answers exactly what the general, Unicode-aware split does."""
    assert four_eyes._tokens(text) == four_eyes._unicode_tokens(text)
