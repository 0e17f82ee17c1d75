"""Query policies: history / current / none, the shipped rewrite, the LLM rewrite (batched,
with counted fallbacks), and the registry's errors."""

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response
from convrag.rag.policies import POLICIES, QueryState, get_policy, make_queries, make_query

TURNS = ["Who directed the film?", "It came out in 1994.", "It starred Tom Hanks."]
REWRITE = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "rag" / "rewrite.yaml").read_text())


def test_history_joins_all_user_turns():
    assert make_query("history", TURNS) == "Who directed the film?\nIt came out in 1994.\nIt starred Tom Hanks."
    assert make_query("history", TURNS[:1]) == TURNS[0]


def test_current_and_none_use_last_turn():
    assert make_query("current", TURNS) == "It starred Tom Hanks."
    assert make_query("none", ["full question"]) == "full question"


def test_bad_policy_and_no_turns():
    with pytest.raises(ConfigError, match="unknown query policy 'paraphrase'"):
        make_query("paraphrase", TURNS)
    with pytest.raises(DataError, match="no user turns"):
        make_query("history", [])
    with pytest.raises(ConfigError, match="needs an LLM"):
        make_query("llm_rewrite", TURNS)
    assert {"history", "current", "none", "rewrite", "llm_rewrite"} <= set(POLICIES)
    assert get_policy("llm_rewrite").needs_llm and not get_policy("rewrite").needs_llm


def test_shipped_rewrite_and_a_turn_without_one():
    states = [QueryState(TURNS, rewrite="Who directed the 1994 film starring Tom Hanks?", key="t1")]
    assert make_queries("rewrite", states).queries == ["Who directed the 1994 film starring Tom Hanks?"]
    with pytest.raises(DataError, match="turn t2 has no shipped rewrite"):
        make_queries("rewrite", [QueryState(TURNS, rewrite=None, key="t2")])


class Scripted:
    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def generate(self, reqs, desc=None):
        self.calls.append(list(reqs))
        return [Response(text=self.replies.pop(0), prompt_tokens=9, completion_tokens=3, finish_reason="stop")
                for _ in reqs]


def test_llm_rewrite_is_one_batch_and_counts_empty_rewrites():
    turns = [{"role": "user", "text": "Who wrote Blue Rain?"}, {"role": "assistant", "text": "Tolo Vanes."},
             {"role": "user", "text": "Where was she born?"}]
    states = [QueryState(["Who wrote Blue Rain?", "Where was she born?"], turns, key="a"),
              QueryState(["What is the Orvik Theatre?"], turns[:1], key="b")]
    eng = Scripted(['"Where was Tolo Vanes born?"', "  "])
    res = make_queries("llm_rewrite", states, llm=eng, prompts=REWRITE)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 2
    assert res.queries == ["Where was Tolo Vanes born?", "What is the Orvik Theatre?"]  # empty -> last turn
    assert res.fallbacks == 1 and res.raw == ['"Where was Tolo Vanes born?"', "  "]
    last = eng.calls[0][0].messages[-1]["content"]
    assert "User: Who wrote Blue Rain?\nAssistant: Tolo Vanes." in last and "Last question: Where was she born?" in last
    assert "(none)" in eng.calls[0][1].messages[-1]["content"]  # no history before the first question
    assert eng.calls[0][0].sampling.temperature == 0.0


def test_llm_rewrite_budget_has_one_default():
    """The rewrite's reply budget: the caller's (the rules pass the config's rewrite.max_tokens), else
    the policy's REWRITE_MAX_TOKENS, which is the schema's default too (issue 46: one definition)."""
    from convrag.rag.policies import REWRITE_MAX_TOKENS

    schema = yaml.safe_load((REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["$defs"]["rewrite"]["properties"]["max_tokens"]["default"] == REWRITE_MAX_TOKENS == 64
    states = [QueryState(["Where was she born?"], [{"role": "user", "text": "Where was she born?"}], key="a")]
    for given, want in ((None, REWRITE_MAX_TOKENS), (12, 12)):
        eng = Scripted(["Where was Tolo Vanes born?"])
        make_queries("llm_rewrite", states, llm=eng, prompts=REWRITE, max_tokens=given)
        s = eng.calls[0][0].sampling
        assert (s.max_tokens, s.temperature, s.stop) == (want, 0.0, ("\n",))
