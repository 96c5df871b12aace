"""Profile JSON is JavaScript's JSON (issue 18): archon parses stored profiles with `JSON.parse` and
writes them with `JSON.stringify`, so every number is a double written as ECMAScript's
Number::toString(10) writes it, keys are sorted as JavaScript's default sort orders them (UTF-16
code units), and text `JSON.parse` refuses is not a profile. The console's fingerprints (what it
writes in steps 005-007 and 020-022, and what doctor and the evidence gate recompute) depend on it.

Checked three ways: a table of outputs written out by hand from the specification, the reference
oracle's independent implementation (tests/reference/profiles.py), and Node itself where the
machine has it (optional: CI has no node).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import sqlite3
import struct
import subprocess
from datetime import datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console.db import execution_profiles as profiles
from console.db import profile_evidence
from console.demo.writer import generate
from console.services.doctor import run_doctor
from tests.reference import profiles as oracle

# Number::toString(10) (ECMA-262, 6.1.6.1.20): k shortest digits s, n the decimal point's place.
# k <= n <= 21: digits then zeros; 0 < n <= 21: a point inside; -6 < n <= 0: "0." and zeros;
# otherwise one digit, the rest after a point, "e", a sign and the exponent n-1. -0 is "0";
# JSON.stringify writes every non-finite number as null.
KNOWN = [
    (0.0, "0"), (-0.0, "0"), (0, "0"), (1.0, "1"), (1, "1"), (-1.0, "-1"), (100.0, "100"),
    (0.1, "0.1"), (-1.5, "-1.5"), (123.456, "123.456"), (1 / 3, "0.3333333333333333"),
    # the small boundary: 1e-7 and below are written with an exponent, 1e-6 and above are not
    (1e-7, "1e-7"), (-1e-7, "-1e-7"), (1.5e-7, "1.5e-7"), (9.999999999999998e-8, "9.999999999999998e-8"),
    (1e-6, "0.000001"), (1.234e-6, "0.000001234"), (1.23e-18, "1.23e-18"),
    # the large boundary: below 1e21 every digit up to the point, 1e21 and above an exponent
    (1e20, "100000000000000000000"), (1e21, "1e+21"), (-1e21, "-1e+21"), (1.5e21, "1.5e+21"),
    (9.999999999999999e20, "999999999999999900000"), (1.2345678901234568e20, "123456789012345680000"),
    # integers: exact up to 2**53, beyond it the nearest double's shortest digits padded with zeros
    (2**53 - 1, "9007199254740991"), (2**53, "9007199254740992"), (2**53 + 1, "9007199254740992"),
    (2**53 + 3, "9007199254740996"), (2**60, "1152921504606847000"),
    (12345678901234567890, "12345678901234567000"), (10**21, "1e+21"), (-(2**63), "-9223372036854776000"),
    # the extremes of the double format
    (5e-324, "5e-324"), (-5e-324, "-5e-324"), (2.2250738585072014e-308, "2.2250738585072014e-308"),
    (2.225073858507201e-308, "2.225073858507201e-308"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    # not finite: null (an integer beyond the largest double is Infinity in JavaScript)
    (math.inf, "null"), (-math.inf, "null"), (math.nan, "null"), (10**400, "null"), (-(10**400), "null"),
]


@pytest.mark.parametrize(("value", "written"), KNOWN, ids=[f"{v!r}"[:24] for v, _ in KNOWN])
def test_numbers_are_written_as_javascript_writes_them(value, written):
    assert profiles.serialize(value) == written
    assert profiles.serialize({"provider_preference": "host", "n": [value]}) == (
        '{"n":[' + written + '],"provider_preference":"host"}')


def _shape_ok(text: str, x: float) -> None:
    """What Number::toString's form requires of any finite double, whatever its digits."""
    assert float(text) == x or (x == 0 and text == "0")  # the same double back
    if x != 0 and 1e-6 <= abs(x) < 1e21:  # -6 < n <= 21
        assert "e" not in text, text
    elif x != 0:
        mantissa, _, exponent = text.partition("e")
        assert exponent[0] in "+-" and exponent[1:].isdigit() and exponent[1] != "0", text
        assert mantissa.lstrip("-")[0] != "0" and (len(mantissa.lstrip("-")) == 1 or mantissa.lstrip("-")[1] == ".")
    assert not text.endswith(".0") and ".e" not in text and "e+0" not in text and "e-0" not in text, text
    if "." in text:
        assert not text.split("e")[0].endswith("0"), text


FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.floats(min_value=-1e-5, max_value=1e-5) | (
    st.floats(min_value=1e19, max_value=1e22)) | st.integers(min_value=0, max_value=2**64 - 1).map(
    lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0])  # every bit pattern: subnormals too
INTEGERS = st.integers() | st.integers(min_value=2**53 - 4, max_value=2**53 + 4) | st.integers(
    min_value=-(10**330), max_value=10**330)


@settings(max_examples=600, deadline=None)
@given(value=FLOATS | INTEGERS)
@example(2**53 + 1)
@example(-(2**53) - 1)
@example(1e21)
@example(1e-7)
@example(math.nextafter(1e21, 0))
@example(math.nextafter(1e-7, 0))
@example(-0.0)
@example(5e-324)
def test_every_number_agrees_with_the_oracle_and_javascripts_form(value):
    ours = profiles.serialize(value)
    assert ours == oracle.serialize(value)
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if math.isfinite(x):
        _shape_ok(ours, x)
    else:
        assert ours == "null"
    # JSON.parse reads what JSON.stringify wrote as the same double, and writing it again changes nothing
    if ours != "null":
        assert profiles.serialize(profiles.parse(ours)) == ours


# --- key order -------------------------------------------------------------------------------

def test_keys_sort_by_utf16_code_units():
    """U+10000 is D800 DC00 in UTF-16, before U+FFFF; by code point it would come after."""
    value = {"\uffff": 1, "\U00010000": 2, "z": {"\U0001f600": 0, "\ufb01": 0, "a": 0}}
    assert profiles.serialize(value) == '{"z":{"a":0,"\U0001f600":0,"\ufb01":0},"\U00010000":2,"\uffff":1}'


KEYS = st.text(alphabet=st.sampled_from(["a", "Z", "1", "\x7f", "\u00e9", "\ud7ff", "\ue000", "\ufb01",
                                         "\uffff", "\U00010000", "\U0001f600", "\U0010ffff"]), max_size=3)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=st.recursive(st.none() | st.booleans() | FLOATS | st.text(max_size=4),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS | st.text(max_size=3),
                                                                                       inner, max_size=4),
                          max_leaves=12))
def test_nested_values_agree_with_the_oracle(value):
    assert profiles.serialize(value) == oracle.serialize(value)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(KEYS | st.text(max_size=4), unique=True, max_size=8))
def test_key_order_is_utf16_order(keys):
    written = profiles.serialize({k: 0 for k in keys})
    order = list(json.loads(written))  # Python keeps the written order
    assert order == sorted(keys, key=lambda k: k.encode("utf-16-be", "surrogatepass"))


# --- parse side: what JSON.parse reads ---------------------------------------------------------

@pytest.mark.parametrize("same", [
    ['{"provider_preference":"host","w":1}', '{"provider_preference":"host","w":1.0}',
     '{"provider_preference":"host","w":1e0}', '{"w":10E-1,"provider_preference":"host"}'],
    ['{"provider_preference":"host","n":12345678901234567890}',
     '{"provider_preference":"host","n":12345678901234567891}',
     '{"provider_preference":"host","n":1.2345678901234567e19}'],
    ['{"provider_preference":"host","z":-0}', '{"provider_preference":"host","z":0.0}',
     '{"provider_preference":"host","z":-0.0e5}'],
])
def test_texts_javascript_reads_as_one_profile_have_one_fingerprint(same):
    assert len({profiles.fingerprint_json(text) for text in same}) == 1
    assert profiles.fingerprint_json(same[0]) is not None
    assert len({profiles.serialize(profiles.normalize(profiles.parse(t), 3).profile) for t in same}) == 1


def test_an_integer_beyond_two_to_the_53_is_read_as_the_nearest_double():
    assert profiles.parse("[9007199254740993]") == [9007199254740992.0]
    assert profiles.parse("[1e400, -1e400]") == [math.inf, -math.inf]  # JSON.parse: Infinity
    assert profiles.serialize(profiles.parse('{"a":1e400}')) == '{"a":null}'  # and JSON.stringify: null


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_text_javascript_cannot_parse_is_not_a_profile(token):
    """Python's json reads these tokens; JSON.parse throws, so archon's start refuses the revision."""
    text = '{"provider_preference":"host","w":%s}' % token
    assert profiles.fingerprint_json(text) is None
    with pytest.raises(ValueError):
        profiles.parse(text)


# --- what archon wrote is recognised as archon's -------------------------------------------------

# A schema-3 profile as archon (Node) writes it, by hand: keys in UTF-16 order (U+10000 before
# U+FFFF), 2**60 as its shortest digits, 1e-7 with an exponent, -0 as 0. Its fingerprint is the
# SHA-256 of exactly this text (A10).
ARCHON_TEXT = ('{"check_template_policy":{"agent":"opencode","mode":"agent_template"},'
               '"eligible_workloads":["build","chat_build","check"],'
               '"limits":{"cpu":0.5,"max":1152921504606847000,"min":1e-7,"zero":0},'
               '"provider_preference":"host","\U00010000":1,"\uffff":2}')
NOW = "2026-03-01T12:00:00+00:00"


@pytest.mark.slow
def test_a_profile_archon_wrote_with_numbers_and_astral_keys_is_not_a_contradiction(tmp_path):
    """On main the evidence gate called it a contradiction (no byte-for-byte round trip) and doctor
    a fingerprint mismatch: the console wrote `1.0`-style numbers and sorted keys by code point."""
    path = tmp_path / "archon.db"
    generate(path, release="current", requests=4, projects=3, environments=2, wal=False, now=NOW)
    revision = "prj-atlas-api:execution-profile:3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert json.loads(conn.execute("SELECT profile_json FROM execution_profile_revisions WHERE id = ?",
                                   (revision,)).fetchone()[0])["provider_preference"] == "host"
    conn.execute("DROP TRIGGER preserve_execution_profile_revision")
    conn.execute("UPDATE execution_profile_revisions SET profile_json = ?, fingerprint = ? WHERE id = ?",
                 (ARCHON_TEXT, hashlib.sha256(ARCHON_TEXT.encode("utf-8")).hexdigest(), revision))
    conn.execute("CREATE TRIGGER preserve_execution_profile_revision BEFORE UPDATE ON execution_profile_revisions "
                 "BEGIN SELECT RAISE(ABORT, 'Execution profile revisions are immutable'); END")
    evidence = profile_evidence.verify(conn)
    conn.close()
    assert evidence.contradictions == [] and evidence.status == profile_evidence.VERIFIED
    report = run_doctor(path, now=datetime.fromisoformat(NOW))
    assert report.finding("profiles.fingerprint_mismatch") is None, report.finding("profiles.fingerprint_mismatch")


# --- Node itself, where installed (optional) ---------------------------------------------------

NODE = shutil.which("node")


def _doubles(count: int) -> list[float]:
    rng = random.Random(18)
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(count)]
    values += [rng.uniform(-1e-5, 1e-5) for _ in range(count // 4)] + [rng.uniform(1e19, 1e22) for _ in range(count // 4)]
    values += [float(v) for v, _ in KNOWN if isinstance(v, float)]
    return [v for v in values if math.isfinite(v)]


@pytest.mark.skipif(NODE is None, reason="node is not installed (optional check; CI has none)")
def test_node_writes_what_the_console_writes():
    numbers = _doubles(4000)
    integers = [2**53 + i for i in range(-3, 4)] + [12345678901234567890, 2**60, 10**21, -(2**63)]
    keys = ["\uffff", "\U00010000", "a", "\U0001f600", "\ufb01", "\ue000", "\ud7ff", "Z", "\U0010ffff", "\u00e9"]
    script = ("const d = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "process.stdout.write(JSON.stringify({n: d.n.map(x => JSON.stringify(x)),"
              " i: d.i.map(s => JSON.stringify(Number(s))), k: d.k.slice().sort()}));")
    payload = json.dumps({"n": numbers, "i": [str(i) for i in integers], "k": keys})
    done = subprocess.run([NODE, "-e", script], input=payload, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    node = json.loads(done.stdout)
    assert [profiles.serialize(x) for x in numbers] == node["n"]
    assert [profiles.serialize(i) for i in integers] == node["i"]
    assert list(json.loads(profiles.serialize({k: 0 for k in keys}))) == node["k"]
