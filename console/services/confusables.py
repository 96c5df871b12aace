"""Look-alike letters, mapped to the Latin letters they imitate: a compact UTS #39 skeleton.

Four-eyes compares names by their skeleton as well as by NFKC and case fold (four_eyes.py,
`name_forms`), so `\u0430lice` with a Cyrillic `\u0430` is alice. Python has no UTS #39 skeleton,
and the PyPI packages that come close answer other questions: `confusable_homoglyphs` (last release
January 2024) says whether one string mixes scripts, not whether two names look alike;
`confusables` (last release March 2021) builds regular expressions. So the table is here
(docs/decisions.md, D21). It covers what can pass for a login or a person's name: the Cyrillic,
Greek, Armenian and Latin letters that look like Latin ones, the digits and marks that look like
letters (`0`/`o`, `1`/`l`/`|` and the other vertical bars, and a capital `I`, which may stand for
`i` or `l`), the small capitals (`\u1d00`, `\u0280`, `\ua731`), Cherokee, Coptic and Lisu letters
that look Latin, the letter
pairs UTS #39 maps (`m`/`rn`, `d`/`cl`, `w`/`vv`) and the dashes that look like `-`. Full-width
and mathematical letters need no entry: NFKC makes them ASCII. The table is applied before NFKC
as well as after it, because NFKC turns a few look-alikes into letters that no longer look alike.

Every target is lowercase ASCII that maps to nothing further, so the skeleton is idempotent
(tests/adversarial/test_identity.py checks that and the known pairs). A wrong extra entry can only
refuse more. Combining marks are dropped (NFD) before the table applies. Unicode's own
confusables.txt is not shipped by any package the project may depend on offline, so this table is
hand-kept; tests/adversarial/test_identity_kernel.py holds every look-alike an attacker reported.
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
_SMALL_CAPITALS = {  # U+1D00.. and the IPA / Latin Extended-D small capitals
    "\u1d00": "a", "\u1d01": "ae", "\u1d03": "b", "\u1d04": "c", "\u1d05": "cl", "\u1d06": "cl",
    "\u1d07": "e", "\u1d0a": "j", "\u1d0b": "k", "\u1d0c": "l", "\u1d0d": "rn", "\u1d0e": "n",
    "\u1d0f": "o", "\u1d10": "o", "\u1d11": "o", "\u1d18": "p", "\u1d19": "r", "\u1d1a": "r",
    "\u1d1b": "t", "\u1d1c": "u", "\u1d20": "v", "\u1d21": "vv", "\u1d22": "z", "\u1d26": "r",
    "\u1d28": "n", "\u1d29": "p", "\u026a": "i", "\u0280": "r", "\u028f": "y", "\u0299": "b",
    "\u0262": "g", "\u029c": "h", "\u029f": "l", "\u0274": "n", "\ua730": "f", "\ua731": "s",
    "\ua7af": "q", "\u0276": "oe", "\u1d2b": "n",
}
_OTHER_SCRIPTS = {
    # Cyrillic, Greek, Armenian letters beyond the common ones, and a few symbols
    "\u0433": "r", "\u04bd": "e", "\u04bc": "e", "\u03b7": "n", "\u057c": "n", "\uab32": "e",
    "\u237a": "a", "\u2c9f": "o",
    # Coptic
    "\u2c80": "a", "\u2c81": "a", "\u2c82": "b", "\u2c83": "b", "\u2c88": "e", "\u2c89": "e",
    "\u2c8e": "h", "\u2c93": "i", "\u2c94": "k", "\u2c95": "k", "\u2c98": "rn", "\u2c9a": "n",
    "\u2c9e": "o", "\u2ca2": "p", "\u2ca3": "p", "\u2ca4": "c", "\u2ca5": "c", "\u2ca6": "t",
    "\u2ca8": "y", "\u2ca9": "y", "\u2cac": "x", "\u2cad": "x", "\u2cb0": "vv", "\u2cb1": "vv",
    # Cherokee capitals (Cherokee small letters case fold to them)
    "\u13aa": "a", "\u13f4": "b", "\u13df": "c", "\u13a0": "cl", "\u13ac": "e", "\u13c0": "g",
    "\u13bb": "h", "\u13a5": "i", "\u13ab": "j", "\u13e6": "k", "\u13de": "l", "\u13b7": "rn",
    "\u13e2": "p", "\u13a1": "r", "\u13d2": "r", "\u13da": "s", "\u13a2": "t", "\u13d9": "v",
    "\u13b3": "vv", "\u13d4": "vv", "\u13c3": "z", "\u13a9": "y", "\u13cf": "b", "\u13fc": "b",
    # Lisu
    "\ua4ee": "a", "\ua4d0": "b", "\ua4da": "c", "\ua4d3": "cl", "\ua4f0": "e", "\ua4dd": "f",
    "\ua4d6": "g", "\ua4e7": "h", "\ua4d9": "j", "\ua4d7": "k", "\ua4e1": "l", "\ua4df": "rn",
    "\ua4e0": "n", "\ua4f3": "o", "\ua4d1": "p", "\ua4e3": "r", "\ua4e2": "s", "\ua4d4": "t",
    "\ua4f4": "u", "\ua4e6": "v", "\ua4ea": "vv", "\ua4eb": "x", "\ua4ec": "y", "\ua4dc": "z",
    # vertical bars: Hebrew paseq, vav and final nun, divides, light bars, box drawing
    "\u05c0": "l", "\u05d5": "l", "\u05df": "l", "\u2223": "l", "\u2758": "l", "\u23d0": "l",
    "\u2502": "l", "\u2503": "l", "\ufe31": "l",
    # apostrophe-likes that are letters (category Lm), so `archon\u02bcs` is `archon's`
    "\u02bc": "'", "\u02b9": "'", "\u02bb": "'", "\u02bd": "'", "\u02c8": "'", "\u2019": "'",
}
_DASHES = {ch: "-" for ch in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u02d7\u2043\ufe58"}

SKELETON = {ord(k): v for table in (_LATIN, _CYRILLIC, _GREEK, _ARMENIAN, _SMALL_CAPITALS,
                                                 _OTHER_SCRIPTS, _DASHES) for k, v in table.items()}

# A capital I (and the capitals that look like it) is the capital of `i` but looks like `l`: the
# skeleton keeps it as this mark, which matches `i`, `l` or itself (`skeletons_match`), so `ALICE`,
# `AIICE` and `alice` are one name whichever I stands for what. The mark is a control character,
# which cleaned text never holds.
I_OR_L = "\x00"
CAPITAL_I = "I\u0399\u0406\u04c0\ua4f2\u2c92"
_FIRST = {**SKELETON, **{ord(ch): I_OR_L for ch in CAPITAL_I}}
_MATCHES_MARK = frozenset("il" + I_OR_L)


def without_marks(text: str) -> str:
    """NFD with every combining mark (Mn, Me) dropped: a dot, accent or overlay on a letter does not
    make it another name (`er\u0131\u0307n`, `eri\u0307n`, `ER\u0130N` are erin)."""
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) not in ("Mn", "Me"))


def skeleton(clean: str) -> str:
    """The skeleton of already cleaned text (NFKC, no invisibles): combining marks dropped,
    look-alikes mapped, case folded, then mapped again (folding can make a look-alike), capital Is
    kept as `I_OR_L`."""
    text = without_marks(clean).translate(_FIRST)
    folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text.casefold())
    return folded.translate(SKELETON)


def skeletons_match(a: str, b: str) -> bool:
    if a == b:
        return bool(a)
    if len(a) != len(b) or (I_OR_L not in a and I_OR_L not in b):
        return False
    return all(x == y or (x == I_OR_L and y in _MATCHES_MARK) or (y == I_OR_L and x in _MATCHES_MARK)
               for x, y in zip(a, b))


__all__ = ["CAPITAL_I", "I_OR_L", "SKELETON", "skeleton", "skeletons_match", "without_marks"]
