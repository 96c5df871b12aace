"""Who asked for an approval request, and whether the approver is that person (four-eyes, fail closed).

Archon stores the requester inside `authority_json`, whose contents the console only infers
(docs/decisions.md, Q11: a string under `requested_by` or `requester`). A self-approval must be refused
however that text is dressed up, so the rule fails closed:

- The approver is two names: the one declared (`--as`) and the login of the OS account the console
  runs as (console/services/identity.py). Either one naming the requester refuses.
- Names are compared after Unicode NFKC, with invisible characters (format characters such as
  zero-width spaces, soft hyphens and bidi controls; control characters; fillers and variation
  selectors) removed, runs of whitespace collapsed, and case folded. Archon stores names as it
  was given them; "Alice" and "alice" are one person to an operator, so the comparison ignores
  case (folding can only refuse more, never less). They are also compared by their confusable
  skeleton (console/services/confusables.py), so a Cyrillic `\u0430` in `\u0430lice` is still
  alice: two names are one person when either form agrees (`NameForms`).
- When the requester cannot be determined with certainty (no authority, not JSON, not an object,
  no requester field, a requester that is not a string or is empty, two requester fields or
  duplicated keys naming different people, a field name dressed with invisible characters),
  approving needs an explicit second confirmation that names the problem; and if the unreadable
  authority mentions the approver anywhere, approving is refused outright.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from functools import lru_cache, wraps

from console.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Callable, TypeVar

from console.services import identity
from console.services.confusables import I_OR_L, SKELETON, skeleton, skeletons_match, without_marks
from console.text import UnreadableJson, read_json

if TYPE_CHECKING:
    T = TypeVar("T")

REQUESTER_KEYS = ("requested_by", "requester")

# Default-ignorable code points outside the format (Cf) and control (Cc) categories.
_INVISIBLE_EXTRA = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0]
    + list(range(0xFE00, 0xFE10))
    + list(range(0xE0100, 0xE01F0))
    + [0x2800]  # the braille blank renders as a space: `erin\u2800` is erin
    # Hangul medial vowels and final consonants left standing after NFKC (which composes every
    # real syllable): they take no cell on a terminal, so `erin\u1161` reads as erin.
    + list(range(0x1160, 0x1200)) + list(range(0xD7B0, 0xD800))
)
# Characters that render as blank space without being whitespace (braille blank, Hangul fillers).
_BLANK_LIKE = frozenset([0x2800, 0x3164, 0xFFA0, 0x115F, 0x1160])
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Cs", "Co", "Cn"})
# A string literal, or one that never closes (it runs to the end): every quote starts a match, so
# the scan is linear (a pattern that can fail from a quote rescans the rest from every later one).
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_TOKEN_SPLIT = re.compile(r"[\s{}\[\],:;=\"'`()<>]+")


def _invisible(ch: str) -> bool:
    return ord(ch) in _INVISIBLE_EXTRA or unicodedata.category(ch) in _INVISIBLE_CATEGORIES


# ASCII text is its own NFKC form, and its only invisible characters are the C0 controls and DEL
# (category Cc; no ASCII code point is Cf, Cs, Co, Cn or in _INVISIBLE_EXTRA), whose casefold is
# lower(). Decisions canonicalise every string of an authority, so this path keeps them cheap.
_ASCII_INVISIBLE = dict.fromkeys([*range(0x20), 0x7F])


# A decision compares every string of the request's authority with one or two approver names, and
# most of those strings (its keys, the approver's names, common values) recur from request to
# request, as does the approver's name itself (`declared_name_problem`, `reserved_name`). These pure
# functions remember their answers for short texts only: at most _REMEMBERED answers per function,
# about texts of at most _SHORT characters, so memory stays bounded whatever the database holds.
_SHORT = 200
_REMEMBERED = 2048


def _remembered(function: Callable[..., T]) -> Callable[..., T]:
    remembered = lru_cache(maxsize=_REMEMBERED)(function)

    @wraps(function)
    def answer(*texts: str) -> T:
        for text in texts:
            if len(text) > _SHORT:
                return function(*texts)
        return remembered(*texts)

    answer.cache_info = remembered.cache_info  # type: ignore[attr-defined]  # how much is kept
    return answer


@_remembered
def canonical_name(text: str) -> str:
    """The form two names are compared in: NFKC, invisibles removed, whitespace collapsed, casefolded."""
    if text.isascii():
        return _clean_ascii(text).lower()
    return _canonical_unicode(text)


def _clean_ascii(text: str) -> str:
    if not text.isprintable():  # printable ASCII holds no control character to remove
        text = text.translate(_ASCII_INVISIBLE)
    return " ".join(text.split())


def _clean_unicode(text: str) -> str:
    """NFKC, invisibles removed, whitespace collapsed; case kept (`I` may stand for `l`)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if not _invisible(ch))
    return " ".join(text.split())


def _canonical_unicode(text: str) -> str:
    """`canonical_name` for any text (the ASCII shortcut gives the same answer faster)."""
    return unicodedata.normalize("NFKC", _clean_unicode(text).casefold())


@dataclass(frozen=True)
class NameForms:
    """The two forms a name is compared in: `canonical_name`, and its confusable skeleton
    (console/services/confusables.py) taken from the cleaned text before case is folded."""

    canonical: str
    skeleton: str

    def same(self, other: NameForms) -> bool:
        return (bool(self.canonical) and self.canonical == other.canonical) or skeletons_match(
            self.skeleton, other.skeleton)


@_remembered
def name_forms(text: str) -> NameForms:
    if text.isascii():
        return NameForms(canonical_name(text), skeleton(_clean_ascii(text)))
    return NameForms(_canonical_unicode(text), _skeleton_unicode(text))


def _skeleton_unicode(text: str) -> str:
    """Look-alikes are mapped before NFKC too: NFKC turns some into letters that no longer look
    alike (the lunate sigma `\u03f2`, a `c`, becomes `\u03c3`)."""
    return skeleton(_clean_unicode(without_marks(text).translate(SKELETON)))


def same_name(a: str | None, b: str | None) -> bool:
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return name_forms(a).same(name_forms(b))


@_remembered
def declared_name_problem(name: str) -> str | None:
    """Why a declared (`--as`) name cannot be recorded as who acted, or None: it must show exactly
    as what it is, so nothing invisible, no control or bidi character, no edge whitespace."""
    if not name:
        return "is empty"
    if name != name.strip() or not name.strip():
        return "starts or ends with whitespace"
    for ch in name:
        if ch.isspace() and ch != " ":
            return "holds a line break or another whitespace character than a space"
        if _invisible(ch) or unicodedata.category(ch) in ("Zl", "Zp") or ord(ch) in _BLANK_LIKE:
            return "holds a control, bidi or invisible character"
    return None


RESERVED_NAMES = ("archon", "system", "console")
_RESERVED = tuple(name_forms(name) for name in RESERVED_NAMES)


@_remembered
def reserved_name(name: str) -> bool:
    """True for names that belong to archon's own actors (`archon`, `system`, `console`, and
    `archon-*`, `archon_*`, `archon <anything>`) in any spelling four-eyes would call the same."""
    forms = name_forms(name)
    if any(forms.same(reserved) for reserved in _RESERVED):
        return True
    # "archon" holds no i or l, so a skeleton that starts with it starts with exactly these letters.
    return any(len(key) > 6 and key.startswith("archon") and not (key[6].isalnum() or key[6] == I_OR_L)
               for key in (forms.canonical, forms.skeleton))


SHOWN_MAX = 200  # characters of a requester name or problem the console stores or prints


def bounded(text: str) -> str:
    """Requester text as the console quotes it in messages and event metadata: invisibles removed
    and at most `SHOWN_MAX` characters, so a dressed-up name can never push an event past archon's
    4096-byte metadata CHECK nor flood a terminal."""
    text = text if text.isascii() and text.isprintable() else _clean_unicode(text)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 1] + "\u2026"


@_remembered
def _tokens(text: str) -> tuple[str, ...]:
    """The words of a name: cleaned text split at every character that is neither a letter, a
    digit nor a combining mark (`erin@corp`, `human|erin`, `Erin Smith`)."""
    if text.isascii():  # cleaning ASCII removes its controls only; its letters and digits are [A-Za-z0-9]
        return tuple(_ASCII_WORD.findall(text.translate(_ASCII_INVISIBLE)))
    return _unicode_tokens(text)


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def _unicode_tokens(text: str) -> tuple[str, ...]:
    """`_tokens` for any text (the ASCII shortcut gives the same answer faster)."""
    words, word = [], []
    for ch in _clean_unicode(text):
        if ch.isalnum() or unicodedata.category(ch)[0] == "M":
            word.append(ch)
        elif word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return tuple(words)


@dataclass(frozen=True)
class _Person:
    """What `names_person` compares a text with, made once per approver name (`_person`)."""

    forms: NameForms
    size: int  # how many words the name has
    words: NameForms  # the forms of those words joined by one space


@lru_cache(maxsize=16)
def _person(name: str) -> _Person:
    """The approver's side of every comparison: a decision compares each string of the request's
    authority with the same one or two names (the declared one, the OS login), so their forms are
    made once per process, not once per string (bounded: approver names, not database text)."""
    wanted = _tokens(name)
    joined = " ".join(wanted)
    return _Person(name_forms(name), len(wanted), name_forms(joined))


def names_person(text: str | None, name: str | None) -> bool:
    """True when `text` is `name`, or holds `name`'s words as consecutive words of its own, in any
    spelling `same_name` calls the same: the one comparison four-eyes makes (approve and deny)."""
    if not isinstance(text, str) or not isinstance(name, str):
        return False
    return _names_person(text, name)


@_remembered
def _names_person(text: str, name: str) -> bool:
    person = _person(name)
    if name_forms(text).same(person.forms):  # same_name(text, name)
        return True
    if not person.size:
        return False
    words, size = _tokens(text), person.size
    return any(name_forms(" ".join(words[i:i + size])).same(person.words) for i in range(len(words) - size + 1))



@dataclass(frozen=True)
class Requester:
    """`name` as stored when it is certain; otherwise `problem` says why it is not. `texts` holds
    every string the authority contains (keys and values, repeated keys included; for text that is
    not JSON, its string literals and bare tokens)."""

    name: str | None
    problem: str | None = None
    texts: tuple[str, ...] = ()

    @property
    def certain(self) -> bool:
        return self.problem is None

    def mentions_name(self, name: str) -> bool:
        return any(names_person(text, name) for text in self.texts)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (_strings(k) + _strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(text: str) -> str:
    """JSON escapes decoded wherever they stand, even in a string that never closes."""
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("u") and len(code) == 5:
            return chr(int(code[1:], 16))
        return _SIMPLE_ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def _mentions_of_text(text: str) -> tuple[str, ...]:
    """Every string literal (decoded) and every bare token in text that is not valid JSON."""
    found: set[str] = set()
    for literal in _STRING_LITERAL.findall(text):
        try:
            decoded = read_json(literal)
        except UnreadableJson:
            decoded = _unescape(literal[1:-1] if len(literal) > 1 and literal.endswith('"') else literal[1:])
        if isinstance(decoded, str):
            found.add(decoded)
    clean = _clean_unicode(_unescape(text))  # tokens keep their case: a capital I may stand for l
    found.update(token for token in _TOKEN_SPLIT.split(clean) if token)
    return tuple(found)


class _PairsDecoder(threading.local):
    """A JSON decoder per thread, reused (building one costs as much as parsing a short authority),
    whose hook records every object's pairs for the current call: Python's json keeps only the
    last of repeated keys, and a repeated requester key must still be seen."""

    def __init__(self) -> None:
        self.pairs: list[list[tuple[str, Any]]] = []
        self.decoder = json.JSONDecoder(object_pairs_hook=self._keep)

    def _keep(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        self.pairs.append(pairs)
        return dict(pairs)


_decoding = _PairsDecoder()


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    return "not a JSON object"


def identify(authority_json: Any) -> Requester:
    """The requester `authority_json` names, or why it cannot be said with certainty (`bounded`)."""
    found = _identify(authority_json)
    return Requester(found.name, bounded(found.problem) if found.problem else None, found.texts)


def _identify(authority_json: Any) -> Requester:
    if authority_json is None:
        return Requester(None, "the request has no authority_json")
    if isinstance(authority_json, (bytes, bytearray)):
        try:
            authority_json = bytes(authority_json).decode("utf-8")
        except UnicodeDecodeError:
            return Requester(None, "its authority_json is not UTF-8 text")
    if not isinstance(authority_json, str):
        return Requester(None, "its authority_json is not text", (str(authority_json),))
    pairs_seen: list[list[tuple[str, Any]]] = []
    _decoding.pairs = pairs_seen
    try:
        value = read_json(authority_json, decoder=_decoding.decoder)
    except UnreadableJson as exc:
        why = str(exc) if exc.over_limit else "not valid JSON"
        return Requester(None, f"its authority_json is {why}", _mentions_of_text(authority_json))

    def mentions() -> tuple[str, ...]:
        every = _strings(value) + [s for pairs in pairs_seen for pair in pairs for s in _strings(list(pair))]
        return tuple(dict.fromkeys(every))  # repeated keys included

    if not isinstance(value, dict):
        return Requester(None, f"its authority_json is {_kind(value)}, not an object", mentions())
    top = pairs_seen[-1]  # the outermost object is completed last
    candidates = [(k, v) for k, v in top if canonical_name(k) in REQUESTER_KEYS]
    if not candidates:
        return Requester(None, "its authority_json names no requester (no requested_by or requester field)", mentions())
    for key, raw in candidates:
        if key not in REQUESTER_KEYS:
            return Requester(None, f"its requester field {key!r} is spelled with invisible or look-alike characters",
                             mentions())
        if not isinstance(raw, str):
            return Requester(None, f"its {key} is {_kind(raw)}, not a name", mentions())
    names = {canonical_name(v) for _, v in candidates}
    if len(candidates) > len({k for k, _ in candidates}) and len(names) > 1:
        return Requester(None, "its authority_json repeats a requester field with different names", mentions())
    if len(names) > 1:
        return Requester(None, "its requested_by and requester fields name different people", mentions())
    if names == {""}:
        return Requester(None, "its requester name is empty (or only invisible characters)", mentions())
    return Requester(candidates[0][1], None, mentions())


@dataclass(frozen=True)
class Verdict:
    """`self_approval`: the request may be the approver's own; approving and denying are refused.
    `unverified`: the kernel does not vouch for the approver's OS account; approving is refused.
    `unknown`: the problem an explicit confirmation must accept. `by_login`: the OS login, not the
    declared name, is what named the requester."""

    self_approval: str | None = None
    unknown: str | None = None
    requester: str | None = None  # as stored (`bounded`), when certain
    by_login: bool = False
    unverified: str | None = None


def approver_names(actor: str) -> list[str]:
    """The declared name, then the OS login when it is another name (identity.py)."""
    login = identity.current().login
    return [actor] if login is None or login == actor else [actor, login]


def check_approver(authority_json: Any, actor: str) -> Verdict:
    """Four-eyes for approve and deny alike (docs/decisions.md, D1 and D21)."""
    me = identity.current()
    unverified = None if me.verified else (
        f"your OS account cannot be verified ({me.unverified}), so four-eyes cannot tell who you are")
    requester = identify(authority_json)
    names = approver_names(actor)
    if requester.certain:
        shown = bounded(requester.name or "")
        for index, name in enumerate(names):
            if names_person(requester.name, name):
                return Verdict(self_approval=_self(index, name, "you requested it"), requester=shown,
                               by_login=index > 0, unverified=unverified)
        for index, name in enumerate(names):
            if requester.mentions_name(name):  # {"requested_by": "bob", "on_behalf_of": "erin"}
                return Verdict(self_approval=_self(index, name, (
                    f"its authority names you as well as its requester {shown!r}, so it may be your own "
                    "request")), by_login=index > 0, unverified=unverified)
        return Verdict(requester=shown, unverified=unverified)
    for index, name in enumerate(names):
        if requester.mentions_name(name):
            return Verdict(self_approval=_self(index, name, (
                f"its requester cannot be determined with certainty ({requester.problem}) and its authority "
                "names you")), by_login=index > 0, unverified=unverified)
    return Verdict(unknown=requester.problem, unverified=unverified)


def _self(index: int, name: str, said: str) -> str:
    if index == 0:
        return f"{said} (four-eyes rule)"
    return f"{said}: it names your OS login {bounded(name)!r}, whatever name you act as (four-eyes rule)"


__all__ = [
    "REQUESTER_KEYS", "RESERVED_NAMES", "SHOWN_MAX", "Requester", "Verdict", "approver_names", "bounded", "declared_name_problem",
    "canonical_name", "check_approver", "NameForms", "identify", "name_forms", "names_person", "reserved_name",
    "same_name",
]
