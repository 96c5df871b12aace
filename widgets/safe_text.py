"""The one door for untrusted strings into any output: controls made visible, markup never parsed.

Rich and Textual parse `[...]` in plain `str` renderables (`[@click=app.quit]` runs an action,
`[/` can crash a render) and pass ESC sequences to the terminal. Every string that came from a
database goes through `clean` (for plain text: the CLI, notifications, logs, bundle reports) or
`safe_text` (for a `Text` built with no markup parsing). Both show C0/C1 controls and DEL as their
Unicode pictures (ESC as `␛`), and as `⟨U+XXXX⟩` everything else a reader cannot see but a terminal,
a shell or a parser acts on: the bidirectional controls (a "Trojan Source" reordering), every
invisible format character (Unicode category Cf: zero-width spaces and joiners, the BOM, the soft
hyphen, tag characters), variation selectors, the line and paragraph separators U+2028/2029 (a JSON
Lines reader using `str.splitlines` splits there), lone surrogates (no encoder can write them: the
CLI would die on its own output), and the Hangul fillers that Rich counts as zero cells but terminals
draw two wide (columns and dialog borders drift). A run of more than `MARK_RUN` combining marks
becomes one `⟨+N marks⟩`: a mark takes no cell, so width limits never bound such a run, and drawing
20,000 of them on one letter froze the TUI for a minute. So what is shown is as long and as wide as
it looks. This module imports nothing heavy: the CLI's start-up time includes it, and `clean` runs
on every line of output, so ASCII text takes a shorter path.
"""

from __future__ import annotations

import functools
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # rich is imported only by `safe_text`, which only the TUI calls; typing not at run time
    from typing import Any, Callable, Iterator

    from rich.text import Text

MARK_RUN = 3
# Unicode categories Mn and Me (nonspacing and enclosing marks) of Unicode 14.0, generated with
# `unicodedata`; tests/adversarial/test_invisible_text.py checks that every such character of the running
# Python is here.
_MARKS_BMP = (
    r"\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1-\u05c2\u05c4-\u05c5\u05c7\u0610-\u061a\u064b-\u065f"
    r"\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7-\u06e8\u06ea-\u06ed\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3"
    r"\u07fd\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0859-\u085b\u0898-\u089f\u08ca-\u08e1"
    r"\u08e3-\u0902\u093a\u093c\u0941-\u0948\u094d\u0951-\u0957\u0962-\u0963\u0981\u09bc\u09c1-\u09c4\u09cd"
    r"\u09e2-\u09e3\u09fe\u0a01-\u0a02\u0a3c\u0a41-\u0a42\u0a47-\u0a48\u0a4b-\u0a4d\u0a51\u0a70-\u0a71\u0a75"
    r"\u0a81-\u0a82\u0abc\u0ac1-\u0ac5\u0ac7-\u0ac8\u0acd\u0ae2-\u0ae3\u0afa-\u0aff\u0b01\u0b3c\u0b3f"
    r"\u0b41-\u0b44\u0b4d\u0b55-\u0b56\u0b62-\u0b63\u0b82\u0bc0\u0bcd\u0c00\u0c04\u0c3c\u0c3e-\u0c40"
    r"\u0c46-\u0c48\u0c4a-\u0c4d\u0c55-\u0c56\u0c62-\u0c63\u0c81\u0cbc\u0cbf\u0cc6\u0ccc-\u0ccd\u0ce2-\u0ce3"
    r"\u0d00-\u0d01\u0d3b-\u0d3c\u0d41-\u0d44\u0d4d\u0d62-\u0d63\u0d81\u0dca\u0dd2-\u0dd4\u0dd6\u0e31"
    r"\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd\u0f18-\u0f19\u0f35\u0f37\u0f39\u0f71-\u0f7e"
    r"\u0f80-\u0f84\u0f86-\u0f87\u0f8d-\u0f97\u0f99-\u0fbc\u0fc6\u102d-\u1030\u1032-\u1037\u1039-\u103a"
    r"\u103d-\u103e\u1058-\u1059\u105e-\u1060\u1071-\u1074\u1082\u1085-\u1086\u108d\u109d\u135d-\u135f"
    r"\u1712-\u1714\u1732-\u1733\u1752-\u1753\u1772-\u1773\u17b4-\u17b5\u17b7-\u17bd\u17c6\u17c9-\u17d3\u17dd"
    r"\u180b-\u180d\u180f\u1885-\u1886\u18a9\u1920-\u1922\u1927-\u1928\u1932\u1939-\u193b\u1a17-\u1a18\u1a1b"
    r"\u1a56\u1a58-\u1a5e\u1a60\u1a62\u1a65-\u1a6c\u1a73-\u1a7c\u1a7f\u1ab0-\u1ace\u1b00-\u1b03\u1b34"
    r"\u1b36-\u1b3a\u1b3c\u1b42\u1b6b-\u1b73\u1b80-\u1b81\u1ba2-\u1ba5\u1ba8-\u1ba9\u1bab-\u1bad\u1be6"
    r"\u1be8-\u1be9\u1bed\u1bef-\u1bf1\u1c2c-\u1c33\u1c36-\u1c37\u1cd0-\u1cd2\u1cd4-\u1ce0\u1ce2-\u1ce8\u1ced"
    r"\u1cf4\u1cf8-\u1cf9\u1dc0-\u1dff\u20d0-\u20f0\u2cef-\u2cf1\u2d7f\u2de0-\u2dff\u302a-\u302d\u3099-\u309a"
    r"\ua66f-\ua672\ua674-\ua67d\ua69e-\ua69f\ua6f0-\ua6f1\ua802\ua806\ua80b\ua825-\ua826\ua82c\ua8c4-\ua8c5"
    r"\ua8e0-\ua8f1\ua8ff\ua926-\ua92d\ua947-\ua951\ua980-\ua982\ua9b3\ua9b6-\ua9b9\ua9bc-\ua9bd\ua9e5"
    r"\uaa29-\uaa2e\uaa31-\uaa32\uaa35-\uaa36\uaa43\uaa4c\uaa7c\uaab0\uaab2-\uaab4\uaab7-\uaab8\uaabe-\uaabf"
    r"\uaac1\uaaec-\uaaed\uaaf6\uabe5\uabe8\uabed\ufb1e\ufe00-\ufe0f\ufe20-\ufe2f"
)
_MARKS_ASTRAL = (
    r"\U000101fd\U000102e0\U00010376-\U0001037a\U00010a01-\U00010a03\U00010a05-\U00010a06\U00010a0c-\U00010a0f"
    r"\U00010a38-\U00010a3a\U00010a3f\U00010ae5-\U00010ae6\U00010d24-\U00010d27\U00010eab-\U00010eac"
    r"\U00010f46-\U00010f50\U00010f82-\U00010f85\U00011001\U00011038-\U00011046\U00011070\U00011073-\U00011074"
    r"\U0001107f-\U00011081\U000110b3-\U000110b6\U000110b9-\U000110ba\U000110c2\U00011100-\U00011102"
    r"\U00011127-\U0001112b\U0001112d-\U00011134\U00011173\U00011180-\U00011181\U000111b6-\U000111be"
    r"\U000111c9-\U000111cc\U000111cf\U0001122f-\U00011231\U00011234\U00011236-\U00011237\U0001123e\U000112df"
    r"\U000112e3-\U000112ea\U00011300-\U00011301\U0001133b-\U0001133c\U00011340\U00011366-\U0001136c"
    r"\U00011370-\U00011374\U00011438-\U0001143f\U00011442-\U00011444\U00011446\U0001145e\U000114b3-\U000114b8"
    r"\U000114ba\U000114bf-\U000114c0\U000114c2-\U000114c3\U000115b2-\U000115b5\U000115bc-\U000115bd"
    r"\U000115bf-\U000115c0\U000115dc-\U000115dd\U00011633-\U0001163a\U0001163d\U0001163f-\U00011640\U000116ab"
    r"\U000116ad\U000116b0-\U000116b5\U000116b7\U0001171d-\U0001171f\U00011722-\U00011725\U00011727-\U0001172b"
    r"\U0001182f-\U00011837\U00011839-\U0001183a\U0001193b-\U0001193c\U0001193e\U00011943\U000119d4-\U000119d7"
    r"\U000119da-\U000119db\U000119e0\U00011a01-\U00011a0a\U00011a33-\U00011a38\U00011a3b-\U00011a3e\U00011a47"
    r"\U00011a51-\U00011a56\U00011a59-\U00011a5b\U00011a8a-\U00011a96\U00011a98-\U00011a99"
    r"\U00011c30-\U00011c36\U00011c38-\U00011c3d\U00011c3f\U00011c92-\U00011ca7\U00011caa-\U00011cb0"
    r"\U00011cb2-\U00011cb3\U00011cb5-\U00011cb6\U00011d31-\U00011d36\U00011d3a\U00011d3c-\U00011d3d"
    r"\U00011d3f-\U00011d45\U00011d47\U00011d90-\U00011d91\U00011d95\U00011d97\U00011ef3-\U00011ef4"
    r"\U00016af0-\U00016af4\U00016b30-\U00016b36\U00016f4f\U00016f8f-\U00016f92\U00016fe4\U0001bc9d-\U0001bc9e"
    r"\U0001cf00-\U0001cf2d\U0001cf30-\U0001cf46\U0001d167-\U0001d169\U0001d17b-\U0001d182"
    r"\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad\U0001d242-\U0001d244\U0001da00-\U0001da36"
    r"\U0001da3b-\U0001da6c\U0001da75\U0001da84\U0001da9b-\U0001da9f\U0001daa1-\U0001daaf\U0001e000-\U0001e006"
    r"\U0001e008-\U0001e018\U0001e01b-\U0001e021\U0001e023-\U0001e024\U0001e026-\U0001e02a"
    r"\U0001e130-\U0001e136\U0001e2ae\U0001e2ec-\U0001e2ef\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a"
    r"\U000e0100-\U000e01ef"
)
# One character each: C0 controls except tab and newline, DEL, C1 controls; the format characters
# (category Cf, bidi controls among them) and the combining grapheme joiner; the line and paragraph
# separators; the Hangul fillers; variation selectors; lone surrogates.
_SINGLE_BMP = (
    r"\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"
    r"\u115f\u1160\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff"
    r"\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
)
_SINGLE_ASTRAL = (
    r"\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
# `re` tests a class holding only characters up to U+FFFF with one table look-up, but a class with
# anything beyond by scanning its ranges one by one: so beyond-U+FFFF classes are tried only for
# such a character (the lookahead), and text without any candidate is left by one quick search.
_ASTRAL = r"(?=[\U00010000-\U0010ffff])"
_MARK = f"(?:[{_MARKS_BMP}]|{_ASTRAL}[{_MARKS_ASTRAL}])"
# A Hangul medial vowel or final consonant that does not follow a leading consonant or a vowel (so
# is part of no syllable) takes no cell on a terminal: pictured, so `erin` + U+1161 does not read as
# erin. Decomposed Korean (L V T sequences, as NFD file names hold) is left as it is.
_LONE_JAMO = r"(?<![\u1100-\u11ff\ua960-\ua97c\ud7b0-\ud7fb])[\u1160-\u11ff\ud7b0-\ud7ff]"
_UNSAFE = f"{_MARK}{{{MARK_RUN + 1},}}|[{_SINGLE_BMP}]|{_LONE_JAMO}|{_ASTRAL}[{_SINGLE_ASTRAL}]"
_CANDIDATES = f"[{_MARKS_BMP}{_SINGLE_BMP}\u1160-\u11ff\ud7b0-\ud7ff\U00010000-\U0010ffff]"


@functools.cache
def _compiled() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """`UNSAFE` and the candidate search, compiled on the first text beyond ASCII (~10 ms: a command
    whose output is all ASCII never pays it at start-up)."""
    return re.compile(_UNSAFE), re.compile(_CANDIDATES)


def __getattr__(name: str) -> Any:
    if name == "UNSAFE":  # everything the sanitiser pictures: one character, or a run of marks
        return _compiled()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# ASCII text can hold only the C0 controls and DEL of all that: the common case stays one small scan.
_ASCII_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LINE_BREAKS = re.compile(r"\r\n|[\n\t]")
# What `y` copies and completion offers: one word a shell takes as itself, unquoted (no `$`, quotes,
# backticks, `;`, spaces, globs, nothing beyond ASCII), that no command takes for an option (`-`) and
# zsh does not expand (a leading `=` becomes a command's path).
_SHELL_WORD = re.compile(r"[A-Za-z0-9._:@+,/][A-Za-z0-9._:@+=,/-]*", re.ASCII)


def _picture(match: re.Match[str]) -> str:
    found = match.group()
    if len(found) > 1:
        return f"\u27e8+{len(found)} marks\u27e9"
    code = ord(found)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0x9F:
        return "\ufffd"
    return f"\u27e8U+{code:04X}\u27e9"


def _matches(text: str) -> Iterator[re.Match[str]]:
    """The matches of `UNSAFE` in `text`, left to right as `re.sub` finds them; `UNSAFE` is tried only
    where a candidate character stands (trying its alternatives at every position of a long
    non-ASCII text took ten times as long)."""
    if text.isascii():
        yield from _ASCII_UNSAFE.finditer(text)
        return
    unsafe, candidates = _compiled()
    search, match = candidates.search, unsafe.match
    found = search(text)
    while found is not None:
        hit = match(text, found.start())
        if hit is not None:
            yield hit
        found = search(text, hit.end() if hit is not None else found.start() + 1)


def first_unsafe(text: str) -> re.Match[str] | None:
    """The first thing in `text` the sanitiser would picture, or None."""
    return next(_matches(text), None)


def replace_unsafe(text: str, replace: Callable[[re.Match[str]], str]) -> str:
    """`text` with everything `UNSAFE` matches replaced by `replace(match)`: the one scan that `clean`
    (pictures) and the JSON writers (`\\uXXXX` escapes) share."""
    if text.isascii():
        return _ASCII_UNSAFE.sub(replace, text)
    out: list[str] = []
    last = 0
    for hit in _matches(text):
        out += (text[last:hit.start()], replace(hit))
        last = hit.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def clean(value: object, *, one_line: bool = False) -> str:
    """Printable text: tab and newline kept (or blanked with `one_line`), everything else that could
    steer a terminal, hide text or break an encoder pictured."""
    if value is None:
        return ""
    text = str(value)
    if one_line:
        text = _LINE_BREAKS.sub(" ", text)
    if text.isascii():  # most output: one small scan, no further call
        return _ASCII_UNSAFE.sub(_picture, text)
    return replace_unsafe(text, _picture)


def is_clean(text: str, *, allow_newlines: bool = True) -> bool:
    """True when nothing in `text` could steer a terminal, hide itself or break an encoder (what the
    adversarial tests assert)."""
    if first_unsafe(text) is not None:
        return False
    return allow_newlines or not _LINE_BREAKS.search(text)


def is_shell_word(text: str) -> bool:
    """True when `text` is, whole, one word a shell reads as exactly itself (see `_SHELL_WORD`)."""
    return _SHELL_WORD.fullmatch(text) is not None


def safe_text(value: object, style: str = "", *, one_line: bool = False) -> "Text":
    """A `Text` of `value` exactly as written (never markup), with terminal controls pictured."""
    from rich.text import Text

    return Text(clean(value, one_line=one_line), style=style, no_wrap=one_line, end="")


__all__ = ["MARK_RUN", "clean", "first_unsafe", "is_clean", "is_shell_word", "replace_unsafe", "safe_text"]
