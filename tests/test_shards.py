from convrag.records import Question
from convrag.sharding import check_shards, entities, parse_shards, shard_questions, shard_report, ShardPrompts
from convrag.llm.types import Response

Q = Question(qid="q1", dataset="d", question='In which city was the founder of the company that released the album "Cold Rivers" born?',
             answers=["Ranholm"], supporting_doc_ids=["d/1", "d/2", "d/3"], hops=3, type="bridge",
             decomposition=["I want a city where someone was born.", 'Start from the album "Cold Rivers".', "Then take its label's founder."])
CMP = Question(qid="q2", dataset="d", question="Who was born first, Malin Ostranova or Telostin Draberg?",
               answers=["Malin Ostranova"], supporting_doc_ids=["d/4", "d/5"], hops=2, type="comparison")


def test_entities_finds_names_and_numbers_not_question_words():
    assert entities(Q.question) == ["Cold Rivers"]
    assert entities(CMP.question) == ["Malin Ostranova", "Telostin Draberg"]
    assert entities("What happened in 1987 at the Bank of Velmora?") == ["1987", "Bank of Velmora"]


def test_parse_shards_numbered_lines_only():
    text = "Sure!\n1. I need a city.\n2) The person founded a company.\n- The album is Cold Rivers.\nThanks"
    assert parse_shards(text) == ["I need a city.", "The person founded a company.", "The album is Cold Rivers."]


def test_checks_pass_fail_cases():
    good = check_shards(Q, ["I need a city where someone was born.", "That person founded a company.", "It released Cold Rivers."])
    assert good["passed"] and good["missing_entities"] == []
    missing = check_shards(Q, ["I need a city.", "Someone founded a company."])
    assert not missing["passed"] and missing["missing_entities"] == ["Cold Rivers"]
    leaked = check_shards(Q, ["The city is Ranholm.", "The album is Cold Rivers."])
    assert not leaked["passed"] and leaked["leaked_answers"] == ["Ranholm"]
    one = check_shards(Q, ["Where was the founder of the label of Cold Rivers born?"])
    assert not one["min_two_shards"] and not one["passed"]
    # a comparison question names its candidate answers: not a leak
    cmp_ok = check_shards(CMP, ["I want the person born first.", "One is Malin Ostranova.", "The other is Telostin Draberg."])
    assert cmp_ok["passed"]


class Scripted:
    """A stand-in engine returning fixed texts per (question, attempt)."""

    def __init__(self, outputs):
        self.outputs, self.calls = outputs, []

    def generate(self, reqs, desc=None):
        self.calls.append(len(reqs))
        out = []
        for r in reqs:
            q = r.messages[-1]["content"]
            out.append(Response(text=self.outputs[(q, r.sample_index)], prompt_tokens=1, completion_tokens=1,
                                finish_reason="stop", label_logprobs=None, cached=False))
        return out


def test_shard_questions_attempts_are_batched_and_fallback_recorded():
    prompts = ShardPrompts(system="s", examples=[], user="Question: {question}")
    uq, uc = f"Question: {Q.question}", f"Question: {CMP.question}"
    eng = Scripted({
        (uq, 0): "1. The city is Ranholm.\n2. Cold Rivers", (uq, 1): "1. nothing", (uq, 2): "nope",
        (uc, 0): "1. I want who was born first.\n2. One is Malin Ostranova.\n3. Other is Telostin Draberg.",
    })
    sets = shard_questions([Q, CMP], eng, prompts, {"attempts": 3, "fallback": "decomposition"})
    assert eng.calls == [2, 1, 1]  # round 1 batches both questions; only the failing one retried
    q_set, c_set = sets
    assert c_set.passed and c_set.method == "llm" and c_set.checks["passing_attempt"] == 0
    assert q_set.method == "decomposition" and q_set.passed
    assert [s["text"] for s in q_set.shards] == Q.decomposition
    assert len(q_set.checks["attempts"]) == 3
    sets_none = shard_questions([Q], eng, prompts, {"attempts": 3, "fallback": "none"})
    assert not sets_none[0].passed
    report = shard_report(sets_none, [Q])
    assert "failed (excluded from the grid): 1" in report and "`q1`" in report


def test_invented_entities_fail_the_check():
    # a 135M model often "helps" by naming a city: that adds a fact the question did not give
    bad = check_shards(Q, ["I need the city where someone was born.", "The album Cold Rivers came out of New York City."])
    assert not bad["passed"] and bad["added_entities"] == ["New York City"]
    # sentence-opening ordinary words are not entities
    assert entities("Start from the album. Then take its label.") == []
    assert entities("Malin Ostranova was born first.") == ["Malin Ostranova"]
