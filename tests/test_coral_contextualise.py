"""CORAL conversation construction, LLM part: batching and retries of the full-question step,
the conversational rewrite, citations mapped to corpus doc ids, the TurnTask shape
(scripted engine), and one run with the real tiny model."""

import re

import numpy as np
import pytest

from convrag.config import REPO_ROOT
from convrag.studies.coral.pages import Flow, parse_html_page, sample_flow
from convrag.errors import DataError
from convrag.llm.types import Response, Sampling
from convrag.records import TurnTask
from convrag.studies.coral.contextualise import (
    PAPER_SAMPLING,
    build_conversations,
    conversational_questions,
    default_doc_id,
    fallback_question,
    full_questions,
    load_prompts,
    parse_question,
    question_requests,
)

PROMPTS = load_prompts()
SAMPLING = Sampling(temperature=0.7, max_tokens=64, stop=("\n",))


class Scripted:
    """Engine double: ``rule(request) -> reply text``; records every batch it is given."""

    def __init__(self, rule):
        self.rule, self.calls = rule, []

    def generate(self, requests, desc=None):
        self.calls.append(list(requests))
        return [Response(text=self.rule(r), prompt_tokens=10, completion_tokens=5, finish_reason="stop")
                for r in requests]


def _last(r):
    return r.messages[-1]["content"]


def _is_rewrite(r):
    return r.messages[0]["content"] == PROMPTS["conversational"]["system"].strip()


# a snippet of each section text -> the section's last keyword
SECTION_KW = {"hill-top observatory": "Velmar Observatory", "opened in 1892": "History",
              "paid for the first telescope": "Founding", "refractor": "Instruments",
              "A trout of Brisk Lake": "Brisk Lake trout", "Young fish eat": "Diet", "at dusk": "Hunting",
              "An observatory on a hill": "Velmar Observatory", "Built in 1892.": "History",
              "Insect larvae, then": "Diet"}


def _echo(r):
    """Step 1: "What about <last keyword>?"; step 2: "And " + the turn's full question, lower case
    (the template puts the turn's question after the earlier ones)."""
    text = _last(r)
    if _is_rewrite(r):
        return "Question: And " + re.findall(r"What (?:about|is there to know about) [^?]+\?", text)[-1].lower()
    for snippet, kw in SECTION_KW.items():
        if snippet in text:
            return f"Question: What about {kw}?"
    raise AssertionError(f"unexpected request {text!r}")


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("reply,expected", [
    ("Question: When was it built?", "When was it built?"),
    ("   Question:   When was it built?  ", "When was it built?"),
    ('"Question: When was it built?"', "When was it built?"),
    ("'Question: When was it built?'", "When was it built?"),
    ('Question: "When was it built?"', "When was it built?"),
    ("**Question:** When was it built?", "When was it built?"),
    ("question: when?", "when?"),
    ("\n\nQuestion: Late start?\nmore text", "Late start?"),
    ("Question: Is the players' union old?", "Is the players' union old?"),
    ("Question:", None),
    ("Question:   ", None),
    ('Question: ""', None),
    ("Question: ???", None),
    ("When was it built?", None),
    ("Sure! Question: When was it built?", None),
    ("", None),
    ("  \n ", None),
    (None, None),
])
def test_parse_question(reply, expected):
    assert parse_question(reply) == expected


def test_prompt_file_has_both_steps_and_fallback():
    for step in ("full_question", "conversational"):
        assert PROMPTS[step]["system"].strip() and PROMPTS[step]["user"] and PROMPTS[step]["examples"]
    assert fallback_question(["Velmar Observatory"], PROMPTS) != fallback_question(["Velmar Observatory", "Diet"], PROMPTS)
    q = fallback_question(["Velmar Observatory", "History", "Founding"], PROMPTS)
    assert "Velmar Observatory" in q and "Founding" in q and "History" not in q


# ----------------------------------------------------------------------------- step 1

ITEMS = [(["Velmar Observatory"], "An observatory on a hill."),
         (["Velmar Observatory", "History"], "Built in 1892."),
         (["Brisk Lake trout", "Diet"], "Insect larvae, then small fish.")]


def test_requests_hold_examples_chain_and_text():
    reqs = question_requests(ITEMS, PROMPTS, SAMPLING, seed=3, attempt=2)
    assert [r.sample_index for r in reqs] == [2, 2, 2] and {r.seed for r in reqs} == {3}
    msgs = reqs[1].messages
    n_ex = len(PROMPTS["full_question"]["examples"])
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * n_ex + ["user"]
    assert "Velmar Observatory" + PROMPTS["keyword_separator"] + "History" in msgs[-1]["content"]
    assert "Built in 1892." in msgs[-1]["content"]
    clipped = question_requests(ITEMS, PROMPTS, SAMPLING, 0, 0, max_text_chars=5)
    assert "An ob" in _last(clipped[0]) and "An obs" not in _last(clipped[0])


def test_all_parse_in_one_batched_call():
    eng = Scripted(_echo)
    qs, rep = full_questions(eng, ITEMS, PROMPTS, sampling=SAMPLING, seed=1)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 3
    assert qs == ["What about Velmar Observatory?", "What about History?", "What about Diet?"]
    assert rep["attempts"] == 1 and rep["parsed_per_attempt"] == [3] and rep["requests_per_attempt"] == [3]
    assert rep["fallbacks"] == 0 and rep["unparsed_replies"] == [] and rep["parsed"] == rep["items"] == 3


def test_retries_only_failures_with_next_sample_index_then_fallback():
    def rule(r):
        text = _last(r)
        if "Built in 1892." in text:  # parses on the third try
            return "Question: When was the Velmar Observatory built?" if r.sample_index >= 2 else f"junk {r.sample_index}"
        if "Insect larvae" in text:  # never parses
            return "Question:" if r.sample_index % 2 else f"I cannot {r.sample_index}"
        return "Question: What is the Velmar Observatory?"

    eng = Scripted(rule)
    qs, rep = full_questions(eng, ITEMS, PROMPTS, sampling=SAMPLING, max_tries=4)
    assert [len(c) for c in eng.calls] == [3, 2, 2, 1]
    assert [{r.sample_index for r in c} for c in eng.calls] == [{0}, {1}, {2}, {3}]
    assert all("Insect larvae" in _last(r) for r in eng.calls[3])
    assert qs[:2] == ["What is the Velmar Observatory?", "When was the Velmar Observatory built?"]
    assert qs[2] == fallback_question(["Brisk Lake trout", "Diet"], PROMPTS)
    assert rep["parsed_per_attempt"] == [1, 0, 1, 0] and rep["requests_per_attempt"] == [3, 2, 2, 1]
    assert rep["fallbacks"] == 1 and rep["fallback_items"] == [2] and rep["attempts"] == 4
    assert rep["parsed"] + rep["fallbacks"] == rep["items"]
    raw = [(u["item"], u["attempt"], u["reply"]) for u in rep["unparsed_replies"]]
    assert raw == [(1, 0, "junk 0"), (2, 0, "I cannot 0"), (1, 1, "junk 1"), (2, 1, "Question:"),
                   (2, 2, "I cannot 2"), (2, 3, "Question:")]
    assert all(u["sample_index"] == u["attempt"] for u in rep["unparsed_replies"])


def test_bad_input_fails_before_any_call():
    eng = Scripted(_echo)
    with pytest.raises(ValueError):
        full_questions(eng, [([], "text")], PROMPTS, sampling=SAMPLING)
    with pytest.raises(ValueError):
        full_questions(eng, ITEMS, PROMPTS, sampling=SAMPLING, max_tries=0)
    assert eng.calls == []


# ----------------------------------------------------------------------------- step 2


def test_conversational_one_call_given_earlier_full_questions():
    convs = [["What is the Velmar Observatory?", "When was the Velmar Observatory founded?",
              "Who founded the Velmar Observatory?"], ["What does the Brisk Lake trout eat?"], []]

    def rule(r):
        text = _last(r)
        if "Who founded" in text:
            return "Sure, here it is"
        return "Question: When was it founded?"

    eng = Scripted(rule)
    out, rep = conversational_questions(eng, convs, PROMPTS, sampling=SAMPLING, seed=2)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 2
    third = _last(eng.calls[0][1])
    assert convs[0][0] in third and convs[0][1] in third and convs[0][2] in third
    assert out == [["What is the Velmar Observatory?", "When was it founded?", "Who founded the Velmar Observatory?"],
                   ["What does the Brisk Lake trout eat?"], []]
    assert rep["turns"] == 4 and rep["first_turns"] == 2 and rep["requests"] == 2
    assert rep["parsed"] == 1 and rep["fallbacks"] == 1 and rep["fallback_turns"] == [{"conversation": 0, "turn": 3}]
    assert rep["unparsed_replies"][0]["reply"] == "Sure, here it is"
    assert rep["first_turns"] + rep["parsed"] + rep["fallbacks"] == rep["turns"]


def test_conversational_counts_unchanged_and_skips_call_without_later_turns():
    eng = Scripted(lambda r: "Question: Who founded the Velmar Observatory?")
    out, rep = conversational_questions(eng, [["What is it?", "Who founded the Velmar Observatory?"]], PROMPTS,
                                        sampling=SAMPLING)
    assert rep["unchanged"] == 1 and rep["fallbacks"] == 0
    eng2 = Scripted(_echo)
    out, rep = conversational_questions(eng2, [["Only one?"]], PROMPTS, sampling=SAMPLING)
    assert eng2.calls == [] and out == [["Only one?"]] and rep["requests"] == 0


# ----------------------------------------------------------------------------- conversations


def _cite(ref):
    return f'<sup class="reference"><a href="#{ref}">[x]</a></sup>'


VELMAR = f"""<html><body><div>Jump to navigation</div>
<h1>Velmar Observatory</h1><p>The Velmar Observatory is a hill-top observatory.{_cite('cite_note-1')} [citation needed]</p>
<h2>History<span class="mw-editsection">[edit]</span></h2><p>It opened in 1892 after ten years of work.{_cite('cite_note-2')}</p>
<h3>Founding</h3><p>Hedda Korsvik paid for the first telescope.{_cite('cite_note-2')} She sold an orchard.{_cite('cite_note-3')}{_cite('cite_note-2')}</p>
<h2>Gallery</h2><p>See.</p>
<h2>Instruments</h2><p>A refractor and a small radio dish are in use.</p>
<h2>References</h2><ol class="references"><li id="cite_note-1">Survey 1990</li><li id="cite_note-2">Korsvik letters</li>
<li id="cite_note-3">Orchard deed</li></ol></body></html>"""

TROUT = f"""<html><h1>Brisk Lake trout</h1><p>A trout of Brisk Lake.{_cite('cite_note-1')}</p>
<h2>Diet</h2><p>Young fish eat insect larvae; adults hunt small fish.</p>
<h3>Hunting</h3><p>Adults hunt at dusk in deep water.{_cite('cite_note-1')}</p>
<ol class="references"><li id="cite_note-1">Lake report</li></ol></html>"""

REF_TO_DOC = {"velmar": {"cite_note-1": "101", "cite_note-2": "102", "cite_note-3": "103"},
              "trout": {"cite_note-1": "201"}}


def _trees():
    return {"velmar": parse_html_page(VELMAR, "velmar"), "trout": parse_html_page(TROUT, "trout")}


def _flows():
    return [Flow("lds", ("velmar#0", "velmar#1", "velmar#2"), ("velmar",) * 3),
            Flow("strw", ("velmar#0", "velmar#3", "velmar#4"), ("velmar",) * 3),  # velmar#3 is "Gallery": too short
            Flow("dtrw", ("velmar#0", "velmar#4", "trout#0", "trout#1"), ("velmar", "velmar", "trout", "trout"),
                 "trout")]


def test_build_conversations_records():
    trees = _trees()
    assert trees["velmar"]["velmar#3"].title == "Gallery"
    eng = Scripted(_echo)
    tasks, rep = build_conversations(trees, _flows(), eng, PROMPTS, ref_to_doc=REF_TO_DOC, sampling=SAMPLING, seed=4)
    assert len(eng.calls) == 2  # one step-1 call (all parsed), one step-2 call
    assert len(eng.calls[0]) == rep["distinct_nodes"] == 6  # velmar#0 asked once for three flows
    assert [t.task_id for t in tasks] == ["lds-0_1", "lds-0_2", "lds-0_3", "strw-1_1", "strw-1_2",
                                          "dtrw-2_1", "dtrw-2_2", "dtrw-2_3", "dtrw-2_4"]
    assert rep["skipped_nodes"] == 1 and rep["skipped_node_list"] == [{"flow": 1, "node_id": "velmar#3", "chars": 4}]
    assert rep["turns"] == 9 and rep["conversations"] == 3 and rep["empty_flows"] == []
    assert rep["turns_by_flow"] == {"LDS": 3, "STRW": 2, "DTRW": 4}
    for t in tasks:
        TurnTask.from_dict(t.to_dict())
        assert t.benchmark == "coral_world" and t.contexts == [] and t.question
        assert t.labels["turn"] == t.turn and t.labels["n_turns"] == {"lds-0": 3, "strw-1": 2, "dtrw-2": 4}[t.conversation_id]
        assert t.labels["first_turn"] == (t.turn == 1) and t.labels["generated"] is True
        assert len(t.history) == 2 * (t.turn - 1)
        assert [h["role"] for h in t.history] == ["user", "assistant"] * (t.turn - 1)
    founding = tasks[2]
    assert founding.rewrite == "What about Founding?" and founding.question == "And what about founding?"
    assert founding.reference_answers == ["Hedda Korsvik paid for the first telescope. She sold an orchard."]
    assert founding.labels["reference_with_citations"] == \
        "Hedda Korsvik paid for the first telescope.[102] She sold an orchard.[103][102]"
    assert founding.labels["cited_passages"] == ["102", "103"] and founding.labels["n_citations"] == 3
    assert founding.gold_docs == {"102": 1, "103": 1} and founding.labels["has_gold"]
    assert founding.labels["keyword_chain"] == ["Velmar Observatory", "History", "Founding"]
    assert founding.labels["flow"] == "LDS" and founding.labels["flow_code"] == "a"
    assert founding.labels["node_id"] == "velmar#2" and founding.labels["page_id"] == "velmar"
    # history: earlier conversational questions and plain section texts
    assert founding.history == [
        {"role": "user", "text": tasks[0].question},
        {"role": "assistant", "text": "The Velmar Observatory is a hill-top observatory. [citation needed]"},
        {"role": "user", "text": tasks[1].question},
        {"role": "assistant", "text": "It opened in 1892 after ten years of work."},
    ]
    assert tasks[0].question == tasks[0].rewrite  # turn 1 stays standalone
    root = tasks[0].labels["reference_with_citations"]
    assert root == "The Velmar Observatory is a hill-top observatory.[101] [citation needed]"
    instruments = tasks[4]
    assert instruments.turn == 2 and instruments.labels["node_id"] == "velmar#4"
    assert instruments.gold_docs == {} and not instruments.labels["has_gold"]
    dtrw = [t for t in tasks if t.conversation_id == "dtrw-2"]
    assert dtrw[-1].labels["page_ids"] == ["velmar", "trout"] and dtrw[-1].labels["second_page_id"] == "trout"
    assert dtrw[2].gold_docs == {"201": 1}
    assert rep["citations"] == sum(t.labels["n_citations"] for t in tasks)
    assert rep["question_fallbacks"] == 0 and rep["rewrite_fallbacks"] == 0


def test_build_is_deterministic_and_counts_fallbacks():
    def rule(r):
        if _is_rewrite(r):
            return "" if "Hunting" in _last(r) else _echo(r)
        return "no idea" if "dusk" in _last(r) else _echo(r)

    flows = [Flow("lds", ("trout#0", "trout#1", "trout#2"), ("trout",) * 3)]
    runs = []
    for _ in range(2):
        eng = Scripted(rule)
        tasks, rep = build_conversations(_trees(), flows, eng, PROMPTS, ref_to_doc=REF_TO_DOC, sampling=SAMPLING,
                                         max_tries=2)
        runs.append(([t.to_dict() for t in tasks], rep))
        assert [len(c) for c in eng.calls] == [3, 1, 2]  # step 1, retry of "Hunting", step 2
    assert runs[0] == runs[1]
    tasks, rep = runs[0]
    hunting = tasks[2]
    assert hunting["rewrite"] == fallback_question(["Brisk Lake trout", "Diet", "Hunting"], PROMPTS)
    assert hunting["labels"]["question_fallback"] and not tasks[1]["labels"]["question_fallback"]
    assert hunting["question"] == hunting["rewrite"] and hunting["labels"]["rewrite_fallback"]
    assert rep["question_fallbacks"] == 1 and rep["rewrite_fallbacks"] == 1
    assert [u["reply"] for u in rep["full_questions"]["unparsed_replies"]] == ["no idea", "no idea"]
    assert rep["conversational"]["unparsed_replies"] == [{"conversation": 0, "turn": 3, "reply": "",
                                                          "finish_reason": "stop"}]


def test_unknown_reference_is_a_data_error_before_any_call():
    eng = Scripted(_echo)
    bad = {"velmar": {"cite_note-1": "101", "cite_note-2": "102"}, "trout": REF_TO_DOC["trout"]}
    with pytest.raises(DataError, match=r"velmar.*velmar#2.*cite_note-3"):
        build_conversations(_trees(), _flows(), eng, PROMPTS, ref_to_doc=bad, sampling=SAMPLING)
    with pytest.raises(DataError, match=r"'trout'.*trout#0.*cite_note-1"):
        build_conversations(_trees(), _flows(), eng, PROMPTS, ref_to_doc={"velmar": REF_TO_DOC["velmar"]},
                            sampling=SAMPLING)
    with pytest.raises(DataError, match="nope"):
        build_conversations(_trees(), [Flow("lds", ("nope#0",), ("nope",))], eng, PROMPTS, sampling=SAMPLING)
    assert eng.calls == []


def test_default_doc_ids_and_empty_flows():
    flows = [Flow("sids", ("velmar#3",), ("velmar",)), Flow("lds", ("trout#0", "trout#1"), ("trout",) * 2)]
    tasks, rep = build_conversations(_trees(), flows, Scripted(_echo), PROMPTS, sampling=SAMPLING)
    assert rep["empty_flows"] == [0] and rep["conversations"] == 1
    assert [t.conversation_id for t in tasks] == ["lds-1", "lds-1"]  # ids keep the flow's position
    assert tasks[0].gold_docs == {default_doc_id("trout", "cite_note-1"): 1}
    assert tasks[0].labels["reference_with_citations"] == f"A trout of Brisk Lake.[{default_doc_id('trout', 'cite_note-1')}]"


def test_flow_records_keep_their_conversation_ids():
    """The flows stage writes dict records (``conversation_id``, ``flow``, ``node_ids``, ...)."""
    recs = [{"conversation_id": "dtrw-0", "flow": "DTRW", "node_ids": ["velmar#0", "trout#0"],
             "page_ids": ["velmar", "trout"], "second_page_id": "trout", "turn_range": [2, 2]},
            {"conversation_id": "lds-0", "flow": "LDS", "node_ids": ["trout#0", "trout#1"],
             "page_ids": ["trout", "trout"], "second_page_id": None}]
    tasks, rep = build_conversations(_trees(), recs, Scripted(_echo), PROMPTS, ref_to_doc=REF_TO_DOC,
                                     sampling=SAMPLING)
    assert [t.task_id for t in tasks] == ["dtrw-0_1", "dtrw-0_2", "lds-0_1", "lds-0_2"]
    assert tasks[1].labels["flow"] == "DTRW" and tasks[1].labels["second_page_id"] == "trout"
    assert rep["conversations_by_flow"] == {"DTRW": 1, "LDS": 1}
    with pytest.raises(DataError, match="not unique"):
        build_conversations(_trees(), [recs[1], recs[1]], Scripted(_echo), PROMPTS, sampling=SAMPLING)


# ----------------------------------------------------------------------------- real tiny model


@pytest.mark.tinymodel
def test_build_with_the_real_tiny_model(tmp_path):
    import time

    from convrag.llm.engine import EnginePool

    trees = _trees()
    rng = np.random.default_rng(0)
    flows = [sample_flow("lds", trees["velmar"], rng, turns=(3, 3)), sample_flow("lds", trees["trout"], rng, turns=(3, 3))]
    pool = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    eng = pool.engine("smollm2-135m")
    t0 = time.perf_counter()
    tasks, rep = build_conversations(trees, flows, eng, PROMPTS, ref_to_doc=REF_TO_DOC, sampling=PAPER_SAMPLING,
                                     seed=0, max_tries=2)
    print(f"tiny model build: {time.perf_counter() - t0:.1f}s, report {rep['full_questions']['parsed_per_attempt']} "
          f"fallbacks {rep['question_fallbacks']}/{rep['rewrite_fallbacks']}; questions {[t.question for t in tasks]}")
    assert len(tasks) == 6 and rep["turns"] == 6 and rep["conversations"] == 2
    assert [t.task_id for t in tasks] == ["lds-0_1", "lds-0_2", "lds-0_3", "lds-1_1", "lds-1_2", "lds-1_3"]
    q, c = rep["full_questions"], rep["conversational"]
    assert q["items"] == rep["distinct_nodes"] == 6 and q["parsed"] + q["fallbacks"] == q["items"]
    assert sum(q["parsed_per_attempt"]) == q["parsed"] and q["requests_per_attempt"][0] == 6
    assert len(q["unparsed_replies"]) == sum(q["requests_per_attempt"]) - q["parsed"]
    assert c["first_turns"] + c["parsed"] + c["fallbacks"] == c["turns"] == 6 and c["requests"] == 4
    assert len(c["unparsed_replies"]) == c["fallbacks"]
    for t in tasks:
        TurnTask.from_dict(t.to_dict())
        assert t.question.strip() and t.rewrite and t.rewrite.strip()
        assert t.reference_answers and t.reference_answers[0]
        assert len(t.history) == 2 * (t.turn - 1)
        if t.turn == 1 or t.labels["rewrite_fallback"]:
            assert t.question == t.rewrite
    assert eng.accounting.calls == sum(q["requests_per_attempt"]) + c["requests"]
