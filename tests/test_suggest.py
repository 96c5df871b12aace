"""console/suggest.py: the one rule for "did you mean"."""

from hypothesis import given, strategies as st

from console.suggest import did_you_mean, near_matches

WORDS = ["approvals", "envs", "profiles", "projects", "doctor", "audit", "upgrade", "restore"]


def test_a_typo_names_the_word_meant():
    assert near_matches("aprovals", WORDS)[0] == "approvals"
    assert did_you_mean("docter", WORDS) == "Did you mean doctor?"


def test_a_prefix_comes_before_a_close_spelling():
    assert near_matches("pro", WORDS)[:2] == ["profiles", "projects"]


def test_two_swapped_neighbours_name_a_short_word():
    """`--ot` for `--to`: a ratio sees two letters in four; issue 21 item 7's command line test found it."""
    assert near_matches("ot", ["snapshot-dir", "host", "to"]) == ["to", "snapshot-dir", "host"]
    assert near_matches("bd", ["db", "as", "json"]) == ["db"]


def test_an_exact_match_ignoring_case_stands_alone():
    assert near_matches("ENVS", WORDS) == ["envs"]


def test_nothing_near_is_none():
    assert did_you_mean("zzzzzz", WORDS) is None
    assert near_matches("", WORDS) == []


@given(st.text(max_size=30), st.lists(st.text(max_size=20), max_size=30), st.integers(0, 6))
def test_answers_are_candidates_each_once_within_the_limit(typed, candidates, limit):
    found = near_matches(typed, candidates, limit=limit)
    assert len(found) <= limit
    assert len(set(found)) == len(found)
    assert set(found) <= set(candidates)
