"""Near matches for a word a person typed: one rule for the command line's words and options, the
console's `:` commands, `:project NAME` and the fleet's host names, so "did you mean" answers the
same wherever a typo lands.

Order matters more than score: a person who typed the start of a name means that name (k9s's `:ns`),
so prefixes come first, then names two swapped neighbours away (`--ot` for `--to`: too short for a
ratio to see), then names containing the text, then names a few edits away."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable


def near_matches(typed: str, candidates: Iterable[str], *, limit: int = 5, cutoff: float = 0.6) -> list[str]:
    """The candidates `typed` most likely meant, best first, at most `limit`: an exact match
    (ignoring case) alone; else those starting with it, those it names with two neighbours swapped,
    those containing it, then close spellings.
    Empty when nothing is near: the caller then lists what there is instead."""
    names = list(dict.fromkeys(candidates))
    want = typed.casefold().strip()
    if not want or limit <= 0:
        return []
    folded = {name: name.casefold() for name in names}
    exact = [name for name in names if folded[name] == want]
    if exact:
        return exact[:limit]
    prefix = [name for name in names if folded[name].startswith(want)]
    swaps = {want[:at] + want[at + 1] + want[at] + want[at + 2:] for at in range(len(want) - 1)}
    swapped = [name for name in names if folded[name] in swaps]
    inside = [name for name in names if want in folded[name] and name not in prefix]
    by_fold: dict[str, list[str]] = {}
    for name in names:
        by_fold.setdefault(folded[name], []).append(name)
    close = [name for fold in difflib.get_close_matches(want, list(by_fold), n=limit, cutoff=cutoff)
             for name in by_fold[fold]]
    ordered = list(dict.fromkeys(prefix + swapped + inside + close))
    return ordered[:limit]


def did_you_mean(typed: str, candidates: Iterable[str], *, limit: int = 3,
                 show: Callable[[str], str] | None = None) -> str | None:
    """The hint sentence for a typo, or None when nothing is near. `show` says how a matched
    candidate is written back (`claimed` matched, `:envs claimed=yes` shown)."""
    found = near_matches(typed, candidates, limit=limit)
    if not found:
        return None
    if show is not None:
        found = list(dict.fromkeys(show(name) for name in found))
    return f"Did you mean {' or '.join(found) if len(found) <= 2 else ', '.join(found[:-1]) + ' or ' + found[-1]}?"
