"""The conversation runner with a scripted engine double (the real tiny model runs in
tests/test_workflow.py and test_conversation_tinymodel.py): lockstep batching over all cells,
the user simulator's shard selection and its guard, RECAP and SNOWBALL, the stopping rule,
unanswered turns counted."""

import re

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError
from convrag.llm.engine import Engine
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Response
from convrag.records import Passage, Question
from convrag.llm.types import Sampling
from convrag.retrieval import capabilities
from convrag.studies.lic_rag.simulate import ConversationRunner, Settings, guard_rephrase, parse_selection

PROMPTS = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "lic_rag" / "assistant.yaml").read_text())
Q1 = Question(qid="a", dataset="d", question="In which city was the founder of Wenlo Press born?", answers=["Ranholm"],
              supporting_doc_ids=["d/1", "d/2"], hops=2)
Q2 = Question(qid="b", dataset="d", question="Who founded Kerrow Films?", answers=["Tala Vess"],
              supporting_doc_ids=["d/3", "d/4"], hops=2)
Q3 = Question(qid="c", dataset="d", question="Which city hosts the company that released the album Blue Rain?",
              answers=["Dalmen"], supporting_doc_ids=["d/1"], hops=2)
SHARDS = {"a": ["I want a city where someone was born.", "The person founded Wenlo Press."],
          "b": ["I want the founder of a company.", "The company is Kerrow Films."],
          "c": ["I want the city of a company.", "The company released an album.", "The album is Blue Rain."]}
PASSAGES = {f"d/{i}": Passage(doc_id=f"d/{i}", title=f"T{i}", text=f"text {i}") for i in range(1, 6)}


def remaining_clues(req) -> list[tuple[int, str]]:
    body = req.messages[-1]["content"].split("Clues not given yet:\n")[1].split("\nYour reply:")[0]
    return [(int(n), t) for n, t in (line.split(": ", 1) for line in body.splitlines() if line.strip())]


class ScriptedEngine:
    """The assistant answers 'Ranholm' once it has seen 'Wenlo Press', never gives an Answer
    line for question b, and answers 'Dalmen' for c only after a recap; the user simulator
    picks the LAST remaining clue for c (out of order) and echoes the first for the others."""

    def __init__(self):
        self.batches, self.kinds, self.requests = [], [], []

    def generate(self, reqs, desc=None):
        self.batches.append(len(reqs))
        self.requests += list(reqs)
        kinds = {"user" if r.messages[0]["content"] == PROMPTS["user_system"] else "assistant" for r in reqs}
        assert len(kinds) == 1, "a batch mixes user-simulator and assistant requests"
        self.kinds.append(kinds.pop())
        out = []
        for r in reqs:
            if r.messages[0]["content"] == PROMPTS["user_system"]:
                clues = remaining_clues(r)
                n, t = clues[-1] if "album" in " ".join(c for _, c in clues) else clues[0]
                text = f"{n}: {t}"
            else:
                seen = " ".join(m["content"] for m in r.messages[len(PROMPTS["examples"]) * 2 + 1:])
                last = r.messages[-1]["content"]
                if "Kerrow" in seen:
                    text = "I am not sure."
                elif "Wenlo Press" in seen:
                    text = "It was Ranholm.\nAnswer: Ranholm"
                elif "Blue Rain" in seen and PROMPTS["recap_intro"] in last:
                    text = "Answer: Dalmen"
                else:
                    text = "Could you tell me more?\nAnswer: Paris"
            out.append(Response(text=text, prompt_tokens=10, completion_tokens=2, finish_reason="stop"))
        return out


class Retriever:
    def __init__(self):
        self.calls = []

    def search(self, queries, k):
        self.calls.append(list(queries))
        return [[("d/1", 3.0), ("d/3", 2.0), ("d/5", 1.0)][:k] for _ in queries]


def _runner(cells, engine, retriever=None, name="bm25", kind="bm25", runs=2, top_k=2, recall_k=3, max_extra_turns=1):
    return ConversationRunner(cells=cells, retriever=retriever or Retriever(), retriever_name=name,
                              capabilities=capabilities(kind),
                              model_name="m", user_model_name="m", dataset="d", passages=PASSAGES,
                              assistant_engine=engine, user_engine=engine, prompts=PROMPTS,
                              settings=Settings(runs=runs, top_k=top_k, recall_k=recall_k, seed=0,
                                                max_extra_turns=max_extra_turns, assistant=Sampling(0.7, 0.95, 64),
                                                user=Sampling(0.7, 0.95, 48)))


def _run(cells, questions=(Q1, Q2), **kw):
    eng, ret = ScriptedEngine(), kw.pop("retriever", None) or Retriever()
    out = _runner(cells, eng, retriever=ret, **kw).run(list(questions), SHARDS)
    return out, eng, ret


def test_sharded_lockstep_batches_and_stopping_rule():
    out, eng, ret = _run([("SHARDED", "history")])
    convs = out[("SHARDED", "history")]
    assert len(convs) == 4
    # turn 1: 4 assistant calls in one batch; turn 2: 4 user-sim calls, then 4 assistant calls;
    # turn 3: only question b (no answer yet, all shards revealed) gets a nudge: 2 assistant calls
    assert eng.batches == [4, 4, 4, 2]
    a = [c for c in convs if c.qid == "a"][0]
    assert a.final_answer == "Ranholm" and a.answered and len(a.turns) == 4
    assert [t["shard_id"] for t in a.turns if t["role"] == "user"] == [1, 2]
    assert a.turns[2]["selection"] == "llm" and a.turns[2]["rephrased"] is True
    b = [c for c in convs if c.qid == "b"][0]
    # b's first reply answers "Paris"; later replies have no Answer line: counted, not dropped
    assert b.final_answer == "Paris" and b.n_unanswered_turns == 2
    assert b.turns[-2]["text"] == PROMPTS["nudge"]
    # HISTORY: the turn-2 query holds both user turns
    assert ret.calls[1][0] == SHARDS["a"][0] + "\n" + SHARDS["a"][1]


def test_current_policy_queries_only_this_turn():
    _, _, ret = _run([("SHARDED", "current")])
    assert ret.calls[1][0] == SHARDS["a"][1]


def test_all_cells_advance_in_one_batch_per_turn():
    cells = [("FULL", "none"), ("CONCAT", "none"), ("SHARDED", "history"), ("SHARDED", "current"),
             ("RECAP", "history"), ("SNOWBALL", "current")]
    out, eng, ret = _run(cells, runs=1)
    assert list(out) == cells and all(len(v) == 2 for v in out.values())
    # one retrieval call per turn for every active conversation of every cell
    assert len(ret.calls[0]) == 2 * 5  # turn 1: FULL, CONCAT, SHARDED x2, SNOWBALL (RECAP waits for SHARDED)
    # per turn: at most one user-simulator batch, then exactly one assistant batch
    assert eng.kinds.count("assistant") == len(ret.calls)
    assert all(k == "assistant" for k, nxt in zip(eng.kinds, eng.kinds[1:]) if k == nxt)


def test_recap_continues_sharded_with_one_recap_turn():
    out, _, _ = _run([("SHARDED", "history"), ("RECAP", "history")], questions=(Q1, Q3), runs=1)
    for sh, rc in zip(out[("SHARDED", "history")], out[("RECAP", "history")]):
        assert rc.turns[:len(sh.turns)] == sh.turns  # the SHARDED conversation, untouched
        assert len(rc.turns) == len(sh.turns) + 2
        recap = rc.turns[-2]
        assert recap["recap"] is True and recap["text"].startswith(PROMPTS["recap_intro"])
        assert all(s in recap["text"] for s in SHARDS[rc.qid])  # every revealed shard, verbatim
    c_sh, c_rc = out[("SHARDED", "history")][1], out[("RECAP", "history")][1]
    # the recap answer is the RECAP conversation's final answer
    assert c_sh.final_answer == "Paris" and c_rc.final_answer == "Dalmen"


def test_recap_without_sharded_cell_still_simulates_its_source():
    out, _, _ = _run([("RECAP", "current")], questions=(Q1,), runs=1)
    assert list(out) == [("RECAP", "current")]
    assert out[("RECAP", "current")][0].turns[-2]["recap"] is True


def test_snowball_restates_earlier_shards():
    out, _, _ = _run([("SNOWBALL", "history")], questions=(Q3,), runs=1)
    users = [t for t in out[("SNOWBALL", "history")][0].turns if t["role"] == "user" and t.get("shard_id")]
    assert users[0]["text"] == SHARDS["c"][0]
    assert users[1]["text"].startswith(PROMPTS["snowball_intro"]) and SHARDS["c"][0] in users[1]["text"]
    assert users[2]["text"].count("- ") == 2  # both earlier shards restated before the new one


def test_simulator_selects_shards_out_of_order_and_it_is_recorded():
    out, _, _ = _run([("SHARDED", "history")], questions=(Q3,), runs=1, max_extra_turns=1)
    c = out[("SHARDED", "history")][0]
    assert [t["shard_id"] for t in c.turns if t["role"] == "user" and t.get("shard_id")] == [1, 3, 2]


def test_unusable_selection_falls_back_to_dependency_order():
    class Bad(ScriptedEngine):
        def generate(self, reqs, desc=None):
            out = super().generate(reqs, desc)
            return [Response(text="1: I want a city where someone was born.", prompt_tokens=1, completion_tokens=1,
                             finish_reason="stop")
                    if r.messages[0]["content"] == PROMPTS["user_system"] else o for r, o in zip(reqs, out)]

    eng = Bad()
    out = _runner([("SHARDED", "history")], eng, runs=1).run([Q3], SHARDS)
    users = [t for t in out[("SHARDED", "history")][0].turns if t["role"] == "user" and t.get("shard_id")]
    assert [t["shard_id"] for t in users] == [1, 2, 3]
    assert users[1]["selection"] == "fallback" and "not a remaining shard" in users[1]["selection_error"]
    assert users[1]["text"] == SHARDS["c"][1] and users[1]["rephrased"] is False


def test_parse_selection():
    assert parse_selection("2: It is the person who founded Wenlo Press.", [1, 2]) == (
        1, "It is the person who founded Wenlo Press.", "")
    assert parse_selection('"3) the album is Blue Rain"', [2]) == (2, "the album is Blue Rain", "")
    assert parse_selection("The album is Blue Rain.", [1])[0] is None
    idx, _, why = parse_selection("1: again", [1, 2])
    assert idx is None and "shard 1 is not a remaining shard" in why


def test_full_single_turn_and_passages_in_prompt():
    out, _, ret = _run([("FULL", "none")], runs=1)
    a = out[("FULL", "none")][0]
    assert len(a.turns) == 2 and a.final_answer == "Ranholm"
    # recall_k=3 passages retrieved and recorded, top_k=2 shown to the assistant
    assert [r["doc_id"] for r in a.turns[1]["retrieved"]] == ["d/1", "d/3", "d/5"]
    assert ret.calls[0][0] == Q1.question


def test_concat_sends_every_shard_in_one_turn():
    out, _, _ = _run([("CONCAT", "none")], runs=1)
    assert all(s in out[("CONCAT", "none")][0].turns[0]["text"] for s in SHARDS["a"])


def test_shared_first_turns_are_answered_once_by_the_engine():
    class Backend:
        def __init__(self):
            self.rows = 0
            self.inner = ScriptedEngine()

        def generate(self, reqs):
            self.rows += len(reqs)
            return self.inner.generate(reqs)

    spec = ModelSpec(name="m", backend="transformers", weights={"path": "/nonexistent"}, batch_size=64)
    backend = Backend()
    eng = Engine(spec, cache=None, backend=backend)
    cells = [("SHARDED", "history"), ("SHARDED", "current"), ("SNOWBALL", "history"), ("RECAP", "current")]
    _runner(cells, eng, runs=1).run([Q1], SHARDS)
    # turn 1 is the same request in all four cells (RECAP's source is SHARDED/current)
    assert eng.accounting.requests > eng.accounting.unique_requests
    assert backend.rows == eng.accounting.unique_requests


def test_usage_is_tallied_per_cell_and_role():
    eng = ScriptedEngine()
    r = _runner([("SHARDED", "history"), ("FULL", "none")], eng, runs=1)
    r.run([Q1], SHARDS)
    assert r.usage["FULL_none"]["assistant"]["requests"] == 1
    assert r.usage["SHARDED_history"]["assistant"]["requests"] == 2
    assert r.usage["SHARDED_history"]["user_simulator"]["requests"] == 1
    assert r.usage["SHARDED_history"]["assistant"]["prompt_tokens"] == 20


def test_bad_settings():
    with pytest.raises(ConfigError, match="unknown delivery condition 'HALF'"):
        _runner([("HALF", "none")], ScriptedEngine())
    with pytest.raises(ConfigError, match="recall_k"):
        _runner([("FULL", "none")], ScriptedEngine(), top_k=5, recall_k=3)


def test_closed_book_retrieves_nothing():
    class Never:
        def search(self, queries, k):
            raise AssertionError("closed book must not search")

    out, _, _ = _run([("FULL", "none"), ("SHARDED", "none")], retriever=Never(), name="closed_book",
                     kind="closed_book", runs=1)
    assert all(t["retrieved"] == [] for c in out[("SHARDED", "none")] for t in c.turns if t["role"] == "assistant")


def test_closed_book_is_decided_by_kind_not_by_name():
    """A closed-book retriever named anything (here ``no_rag``) gets closed-book prompts: no
    worked examples with passages, no passage block, no query; an open retriever named
    ``closed_book`` still gets passages."""
    class Never:
        def search(self, queries, k):
            raise AssertionError("closed book must not search")

    out, eng, _ = _run([("FULL", "none")], retriever=Never(), name="no_rag", kind="closed_book", runs=1)
    msgs = [m["content"] for r in eng.requests for m in r.messages]
    assert msgs and not any(PROMPTS["passages_header"] in m for m in msgs)
    assert all(t["query"] is None and t["retrieved"] == [] for c in out[("FULL", "none")] for t in c.turns
               if t["role"] == "assistant")
    out, eng, ret = _run([("FULL", "none")], name="closed_book", kind="bm25", runs=1)
    assert ret.calls and any(PROMPTS["passages_header"] in m["content"] for r in eng.requests for m in r.messages)


def test_user_simulator_guard():
    shard = 'Start from the author of the novel "The Golden Chorus".'
    q = Question(qid="g", dataset="d", question='In which country was the author of "The Golden Chorus" born?',
                 answers=["Dusemuna"], supporting_doc_ids=["d/1"], hops=2)
    assert guard_rephrase("It's about whoever wrote the novel The Golden Chorus.", shard, q)
    assert not guard_rephrase("The author wrote a novel.", shard, q)  # drops the title
    assert not guard_rephrase("The Golden Chorus was written in Arabic.", shard, q)  # invents an entity
    assert not guard_rephrase("The Golden Chorus author is from Dusemuna.", shard, q)  # leaks the answer
    assert not guard_rephrase("", shard, q)
    # an unrevealed shard's entity in the message is rejected too (it is not the chosen shard's)
    assert not guard_rephrase("The Golden Chorus and Blue Rain.", shard, q)


def test_stopping_rule_documented_in_module():
    import convrag.studies.lic_rag.simulate as m

    assert re.search(r"Stopping rule: a conversation ends when the extracted answer is correct", m.__doc__)


def test_closed_book_uses_its_own_system_prompt_and_open_book_the_passage_one():
    _, eng, _ = _run([("FULL", "none")], name="closed_book", kind="closed_book", runs=1)
    systems = {r.messages[0]["content"] for r in eng.requests}
    assert systems == {PROMPTS["assistant_system_closed_book"]}
    assert "passage" not in PROMPTS["assistant_system_closed_book"].lower()
    _, eng, _ = _run([("FULL", "none")], runs=1)
    assert {r.messages[0]["content"] for r in eng.requests} == {PROMPTS["assistant_system"]}
    # the answer rule asks for the Answer line whenever a reply gives an answer, not always
    for key in ("assistant_system", "assistant_system_closed_book"):
        assert "Whenever your reply gives an answer" in PROMPTS[key] and "Always end" not in PROMPTS[key]


def test_reasoning_is_recorded_but_never_shown_again():
    """A thinking assistant's <think> block stays in the turn record, is not parsed for the
    answer and is not sent back, neither to the assistant nor to the user simulator."""
    class Thinking(ScriptedEngine):
        def generate(self, reqs, desc=None):
            out = super().generate(reqs, desc)
            if self.kinds[-1] == "assistant":
                out = [Response(text="<think>\nSECRET draft\nAnswer: Wrong\n</think>\n" + r.text, prompt_tokens=10,
                                completion_tokens=2, finish_reason="stop") for r in out]
            return out

    eng = Thinking()
    out = _runner([("SHARDED", "history")], eng, runs=1).run([Q1], SHARDS)
    conv = out[("SHARDED", "history")][0]
    a_turns = [t for t in conv.turns if t["role"] == "assistant"]
    assert a_turns[0]["text"].startswith("<think>") and a_turns[0]["answer"] == "Paris"
    assert conv.final_answer == "Ranholm"
    later = [m["content"] for r in eng.requests[1:] for m in r.messages]
    assert not any("SECRET" in m for m in later)


def test_per_model_assistant_settings_and_reasoning_switch():
    from convrag.studies.lic_rag.plan import job_settings, reasoning
    from convrag.studies.lic_rag.wiring import reasoning_arg

    lic = {"runs": 1, "chunk_size": 5, "top_k": 2, "recall_k": 2, "seed": 0, "max_extra_turns": 1,
           "assistant": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "stop": []},
           "user_simulator": {}, "classifier": {}, "judge": {},
           "assistant_by_model": {"qwen3-8b": {"temperature": 0.6, "max_tokens": 4096, "reasoning": True},
                                  "gemma": {"max_tokens": 256, "reasoning": False}}}
    assert job_settings(lic, "qwen3-8b")["assistant"] == {"temperature": 0.6, "top_p": 0.95, "max_tokens": 4096,
                                                          "stop": []}
    assert job_settings(lic, "llama")["assistant"] == lic["assistant"]
    assert job_settings(lic)["assistant"] == lic["assistant"]
    assert (reasoning(lic, "qwen3-8b"), reasoning(lic, "gemma"), reasoning(lic, "llama")) == (True, False, None)
    config = {"lic_rag": lic}
    assert [reasoning_arg(config, m) for m in ("qwen3-8b", "gemma", "llama")] == ["--reasoning on", "--reasoning off", ""]
