"""Look-alike letters, mapped to the Latin letters they imitate: a compact UTS #39 skeleton.

Four-eyes compares names by their skeleton as well as by NFKC and case fold (four_eyes.py,
`name_forms`), so `\u0430lice` with a Cyrillic `\u0430` is alice. Python has no UTS #39 skeleton,
and the PyPI packages that come close answer other questions: `confusable_homoglyphs` (last release
January 2024) says whether one string mixes scripts, not whether two names look alike;
`confusables` (last release March 2021) builds regular expressions. So the table is here
(docs/decisions.md, D21). It covers what can pass for a login or a person's name: the Cyrillic,
Greek, Armenian and Latin letters that look like Latin ones, the digits and marks that look like
letters (`0`/`o`, `1`/`l`/`|`, and a capital `I`, which may stand for `i` or `l`), the letter
pairs UTS #39 maps (`m`/`rn`, `d`/`cl`, `w`/`vv`) and the dashes that look like `-`. Full-width
and mathematical letters need no entry: NFKC makes them ASCII. The table is applied before NFKC
as well as after it, because NFKC turns a few look-alikes into letters that no longer look alike.

Every target is lowercase ASCII that maps to nothing further, so the skeleton is idempotent
(tests/adversarial/test_identity.py checks that and the known pairs). A wrong extra entry can only
refuse more.
"""

from __future__ import annotations

import unicodedata

_LATIN = {
    "0": "o", "1": "l", "|": "l", "m": "rn", "d": "cl", "w": "vv",
    "\u0131": "i", "\u0237": "j", "\u0251": "a", "\u0261": "g", "\u0269": "i", "\u01c0": "l",
    "\u2113": "l", "\u0196": "l",
}
_CYRILLIC = {
    # lowercase
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y",
    "\u0445": "x", "\u0455": "s", "\u0456": "i", "\u0458": "j", "\u04bb": "h", "\u0501": "cl",
    "\u051b": "q", "\u051d": "vv", "\u04cf": "l", "\u044c": "b",
    # capitals
    "\u0410": "a", "\u0412": "b", "\u0415": "e", "\u041a": "k", "\u041c": "rn", "\u041d": "h",
    "\u041e": "o", "\u0420": "p", "\u0421": "c", "\u0422": "t", "\u0425": "x", "\u0405": "s",
    "\u0408": "j", "\u04ae": "y", "\u0423": "y", "\u0417": "3",
    "\u051c": "vv",
}
_GREEK = {
    # lowercase
    "\u03b1": "a", "\u03bf": "o", "\u03c1": "p", "\u03bd": "v", "\u03b9": "i", "\u03ba": "k",
    "\u03c5": "u", "\u03c7": "x", "\u03f2": "c", "\u03b3": "y", "\u03c9": "vv",
    # capitals
    "\u0391": "a", "\u0392": "b", "\u0395": "e", "\u0396": "z", "\u0397": "h", "\u039a": "k",
    "\u039c": "rn", "\u039d": "n", "\u039f": "o", "\u03a1": "p", "\u03a4": "t", "\u03a5": "y",
    "\u03a7": "x", "\u03f9": "c",
}
_ARMENIAN = {"\u0585": "o", "\u057d": "u", "\u0578": "n", "\u0570": "h", "\u0581": "g", "\u0566": "q"}
_DASHES = {ch: "-" for ch in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u02d7\u2043\ufe58"}

SKELETON = {ord(k): v for table in (_LATIN, _CYRILLIC, _GREEK, _ARMENIAN, _DASHES) for k, v in table.items()}

# A capital I (and the capitals that look like it) is the capital of `i` but looks like `l`: the
# skeleton keeps it as this mark, which matches `i`, `l` or itself (`skeletons_match`), so `ALICE`,
# `AIICE` and `alice` are one name whichever I stands for what. The mark is a control character,
# which cleaned text never holds.
I_OR_L = "\x00"
CAPITAL_I = "I\u0399\u0406\u04c0"
_FIRST = {**SKELETON, **{ord(ch): I_OR_L for ch in CAPITAL_I}}
_MATCHES_MARK = frozenset("il" + I_OR_L)


def skeleton(clean: str) -> str:
    """The skeleton of already cleaned text (NFKC, no invisibles): look-alikes mapped, case folded,
    then mapped again (folding can make a look-alike), capital Is kept as `I_OR_L`."""
    text = clean.translate(_FIRST)
    folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text.casefold())
    return folded.translate(SKELETON)


def skeletons_match(a: str, b: str) -> bool:
    if a == b:
        return bool(a)
    if len(a) != len(b) or (I_OR_L not in a and I_OR_L not in b):
        return False
    return all(x == y or (x == I_OR_L and y in _MATCHES_MARK) or (y == I_OR_L and x in _MATCHES_MARK)
               for x, y in zip(a, b))


__all__ = ["CAPITAL_I", "I_OR_L", "SKELETON", "skeleton", "skeletons_match"]
