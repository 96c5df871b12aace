"""A refusal is one line whatever database text it quotes (issue 17, attack round on finding 4).

Refusals quoted stored text with f-strings (a claim's OS account, its kind, a deletion time), and
stderr keeps line breaks, so a stored newline printed a second, forged line such as
`archon-console: ... activated.`. Every refusal is now made one line where it is born
(console/errors.py `ConsoleError`); this test attacks every subclass with generated text.
"""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import console.errors as errors
from widgets.safe_text import is_clean

ERRORS = [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.ConsoleError)]
BREAKS = st.sampled_from(["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1b[2K\r"])


def _hostile():
    return st.lists(st.one_of(st.text(max_size=20), BREAKS), max_size=8).map("".join)


def test_every_console_error_is_known():
    assert errors.Refusal in ERRORS and errors.UsageError in ERRORS and errors.DatabaseUnusable in ERRORS


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(cls=st.sampled_from(ERRORS), reason=_hostile(), hint=st.one_of(st.none(), _hostile()))
def test_a_refusal_is_one_clean_line_whatever_it_quotes(cls, reason, hint):
    try:
        exc = cls(f"claimed by bob (OS {reason}); only its holder can release it.", hint)
    except TypeError:  # a subclass with its own signature builds its reason itself
        return
    assert is_clean(exc.reason, allow_newlines=False), repr(exc.reason)
    assert exc.hint is None or is_clean(exc.hint, allow_newlines=False), repr(exc.hint)


def test_a_forged_line_in_a_refusal_stays_on_its_line(capsys):
    from console.cli.cli import _report

    _report(str(errors.Refusal("p1:r2 was activated by x\narchon-console: p1:r2 activated. FORGED").reason),
            None, 1, json=False)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FORGED" in err
