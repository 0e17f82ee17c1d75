"""The conversation runner with a scripted engine double (the real tiny model runs in
tests/test_workflow.py): lockstep batching, stopping rule, unanswered turns counted."""

import yaml

from convrag.config import REPO_ROOT
from convrag.llm.types import Response
from convrag.records import Passage, Question
from convrag.simulate.conversation import ConversationRunner, Settings

PROMPTS = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "lic_rag" / "assistant.yaml").read_text())
Q1 = Question(qid="a", dataset="d", question="In which city was the founder of Wenlo Press born?", answers=["Ranholm"],
              supporting_doc_ids=["d/1", "d/2"], hops=2)
Q2 = Question(qid="b", dataset="d", question="Who founded Kerrow Films?", answers=["Tala Vess"],
              supporting_doc_ids=["d/3", "d/4"], hops=2)
SHARDS = {"a": ["I want a city where someone was born.", "The person founded Wenlo Press."],
          "b": ["I want the founder of a company.", "The company is Kerrow Films."]}
PASSAGES = {f"d/{i}": Passage(doc_id=f"d/{i}", title=f"T{i}", text=f"text {i}") for i in range(1, 5)}


class Engine:
    """Answers by rule: the assistant answers 'Ranholm' once it has seen 'Wenlo Press',
    never gives an Answer line for question b; the user simulator echoes the clue."""

    def __init__(self):
        self.batches = []

    def generate(self, reqs, desc=None):
        self.batches.append(len(reqs))
        out = []
        for r in reqs:
            sys_prompt = r.messages[0]["content"]
            if sys_prompt == PROMPTS["user_system"]:
                text = r.messages[-1]["content"].split("Clue to send next: ")[1].split("\n")[0]
            else:
                seen = " ".join(m["content"] for m in r.messages)
                if "Kerrow" in seen:
                    text = "I am not sure."
                elif "Wenlo Press" in seen:
                    text = "It was Ranholm.\nAnswer: Ranholm"
                else:
                    text = "Could you tell me more?\nAnswer: Paris"
            out.append(Response(text=text, prompt_tokens=1, completion_tokens=1, finish_reason="stop",
                                label_logprobs=None, cached=False))
        return out


class Retriever:
    def __init__(self):
        self.calls = []

    def search(self, queries, k):
        self.calls.append(list(queries))
        return [[("d/1", 2.0), ("d/3", 1.0)][:k] for _ in queries]


def _run(condition, policy, runs=2, retriever=None, name="bm25"):
    eng = Engine()
    ret = retriever or Retriever()
    runner = ConversationRunner(condition=condition, policy=policy, retriever=ret, retriever_name=name,
                                model_name="m", user_model_name="m", dataset="d", passages=PASSAGES,
                                assistant_engine=eng, user_engine=eng, prompts=PROMPTS,
                                settings=Settings(runs=runs, top_k=2, max_extra_turns=1))
    return runner.run([Q1, Q2], SHARDS), eng, ret


def test_sharded_lockstep_batches_and_stopping_rule():
    convs, eng, ret = _run("SHARDED", "history")
    assert len(convs) == 4
    # turn 1: 4 assistant calls in one batch; turn 2: 4 user-sim calls then 4 assistant calls;
    # turn 3: only question b (no answer yet, all shards revealed) gets a nudge: 2 assistant calls
    assert eng.batches == [4, 4, 4, 2]
    a = [c for c in convs if c.qid == "a"][0]
    assert a.final_answer == "Ranholm" and a.answered and len(a.turns) == 4
    assert [t["shard_id"] for t in a.turns if t["role"] == "user"] == [1, 2]
    b = [c for c in convs if c.qid == "b"][0]
    # b's first reply answers "Paris"; later replies have no Answer line: counted, not dropped
    assert b.final_answer == "Paris" and b.n_unanswered_turns == 2
    assert b.turns[-2]["text"] == PROMPTS["nudge"]
    # HISTORY: the turn-2 query holds both user turns
    assert ret.calls[1][0] == SHARDS["a"][0] + "\n" + SHARDS["a"][1]


def test_current_policy_queries_only_this_turn():
    convs, eng, ret = _run("SHARDED", "current")
    assert ret.calls[1][0] == SHARDS["a"][1]


def test_full_single_turn_and_passages_in_prompt():
    convs, eng, ret = _run("FULL", "none", runs=1)
    a = [c for c in convs if c.qid == "a"][0]
    assert len(a.turns) == 2 and a.final_answer == "Ranholm"
    assert a.turns[1]["retrieved"] == [{"doc_id": "d/1", "score": 2.0}, {"doc_id": "d/3", "score": 1.0}]
    assert ret.calls[0][0] == Q1.question


def test_concat_sends_every_shard_in_one_turn():
    convs, _, _ = _run("CONCAT", "none", runs=1)
    a = [c for c in convs if c.qid == "a"][0]
    assert all(s in a.turns[0]["text"] for s in SHARDS["a"])


def test_user_simulator_guard():
    from convrag.simulate.conversation import _guard_rephrase

    shard = 'Start from the author of the novel "The Golden Chorus".'
    q = Question(qid="g", dataset="d", question='In which country was the author of "The Golden Chorus" born?',
                 answers=["Dusemuna"], supporting_doc_ids=["d/1"], hops=2)
    assert _guard_rephrase("It's about whoever wrote the novel The Golden Chorus.", shard, q)
    assert not _guard_rephrase("The author wrote a novel.", shard, q)  # drops the title
    assert not _guard_rephrase("The Golden Chorus was written in Arabic.", shard, q)  # invents an entity
    assert not _guard_rephrase("The Golden Chorus author is from Dusemuna.", shard, q)  # leaks the answer
    assert not _guard_rephrase("", shard, q)
