import pytest

from convrag.errors import ConfigError, DataError
from convrag.retrieval.policies import make_query

TURNS = ["Who directed the film?", "It came out in 1994.", "It starred Tom Hanks."]


def test_history_joins_all_user_turns():
    assert make_query("history", TURNS) == "Who directed the film?\nIt came out in 1994.\nIt starred Tom Hanks."
    assert make_query("history", TURNS[:1]) == TURNS[0]


def test_current_and_none_use_last_turn():
    assert make_query("current", TURNS) == "It starred Tom Hanks."
    assert make_query("none", ["full question"]) == "full question"


def test_bad_policy_and_no_turns():
    with pytest.raises(ConfigError, match="unknown query policy 'rewrite'"):
        make_query("rewrite", TURNS)
    with pytest.raises(DataError, match="no user turns"):
        make_query("history", [])
