"""CORAL's §3.1 cleaning filters and the §3.3 / Table 1 statistics (convrag.studies.coral.cleaning),
each against values worked out by hand."""

import pandas as pd
import pytest

from convrag.records import TurnTask
from convrag.studies.coral import cleaning as C


def test_too_short_is_fewer_than_16_whitespace_words():
    words = [f"w{i}" for i in range(16)]
    assert C.too_short(" ".join(words[:15])) and not C.too_short(" ".join(words))
    assert C.too_short("") and C.too_short("  a\tb  ", min_words=3) and not C.too_short("a\tb c", min_words=3)


def test_non_english_share_counts_characters_outside_printable_ascii():
    assert C.non_english_share("abc日本") == pytest.approx(2 / 5)  # two of five characters
    assert C.non_english_share("Café au lait") == pytest.approx(1 / 12)  # é only
    assert C.non_english_share("a\nb") == 0.0 and C.non_english_share("") == 0.0  # a newline is a space


def test_term_recall_is_the_share_of_the_sentences_content_words_in_the_passage():
    passage = "An old telescope, built 1892 by Hedda."
    # content words {telescope, built, 1892} ('the', 'was', 'in' are stop words): all three in the passage
    assert C.term_recall("The telescope was built in 1892.", passage) == 1.0
    # {hedda, sold, orchard, barn}: only 'hedda' -> 1/4, under the 0.3 threshold
    assert C.term_recall("Hedda sold an orchard and a barn.", passage) == 0.25
    assert C.term_recall("The and of.", passage) == 0.0  # no content word
    cited = {"p1": passage, "p2": "Hedda sold the orchard in 1890."}
    # sentence {hedda, sold, orchard, barn}: p1 1/4 = 0.25 (dropped), p2 3/4 = 0.75 (kept)
    assert C.supported_citations("Hedda sold an orchard and a barn.", cited) == ["p2"]
    assert C.supported_citations("Hedda sold an orchard and a barn.", cited, min_recall=0.2) == ["p1", "p2"]


def test_clean_passages_drops_short_then_non_english_and_counts_why():
    long_en = " ".join(["word"] * 16)
    long_cjk = " ".join(["日本語"] * 16)  # 48 of 63 characters outside ASCII: 0.76
    ps = [{"id": "a", "text": long_en}, {"id": "b", "text": "too short"}, {"doc_id": "c", "text": long_cjk},
          {"id": "d", "text": "日本"}]  # short and non-English: counted as short (the first filter)
    kept, rep = C.clean_passages(ps)
    assert [p.get("id") for p in kept] == ["a"]
    assert rep["given"] == 4 and rep["kept"] == 1 and rep["dropped"] == {"too_short": 2, "non_english": 1}
    assert rep["dropped_ids"] == {"too_short": ["b", "d"], "non_english": ["c"]}
    assert C.non_english_share(long_cjk) == pytest.approx(48 / 63)
    kept, rep = C.clean_passages(ps, max_non_english=0.8)
    assert [p.get("id", p.get("doc_id")) for p in kept] == ["a", "c"]


def _t(conv, turn, gold, answer):
    return TurnTask(task_id=f"{conv}_{turn}", benchmark="x", conversation_id=conv, turn=turn, history=[],
                    question="q?", reference_answers=[answer], gold_docs=gold)


def test_dataset_statistics_by_hand():
    tasks = [_t("a", 1, {"p1": 1}, "Hi there."),               # 1 golden passage, 3 tokens (Hi, there, .)
             _t("a", 2, {"p1": 1, "p2": 2, "p3": 1, "p9": 0}, "A b, c!"),  # 3 (grade 0 is not golden), 5 tokens
             _t("b", 1, {"p4": 1, "p5": 1}, "x")]               # 2, 1 token
    assert [C.tokens(t.reference_answers[0]) for t in tasks] == [3, 5, 1]
    row = C.dataset_statistics(tasks, corpus_size=200_000).iloc[0]
    assert (row.conversations, row.turns, row.turns_per_conversation) == (2, 3, 1.5)
    assert row.passages_per_turn == 2.0 and row.response_tokens == 3.0 and row.corpus_passages == 200_000
    # resampling conversations: golden passages per turn is 2 in every resample (a: 4/2, b: 2/1, a+b: 6/3)
    assert (row.passages_per_turn_low, row.passages_per_turn_high) == (2.0, 2.0)
    # tokens: a+a 8/2 = 4, b+b 1, a+b 9/3 = 3; each extreme has probability 1/4 > 2.5%
    assert (row.response_tokens_low, row.response_tokens_high) == (1.0, 4.0)
    one = C.dataset_statistics(tasks[:2], corpus_size=5).iloc[0]
    assert pd.isna(one.passages_per_turn_low)  # one conversation: no interval


def test_count_lines_counts_records(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert C.count_lines(f) == 2


def test_clean_tasks_keeps_the_citations_the_filters_keep():
    long = "Hedda Korsvik paid for the first telescope of the Velmar Observatory with money from her family farm."
    corpus = {"101": long,                                                   # 17 words, English: kept
              "102": "Hedda sold the orchard.",                               # 4 words: too short
              "103": "Korsvik orchard sale: " + "日本語 " * 14 + "and more words here.",  # non-English share > 0.3
              "104": "A list of rivers and lakes in the northern region of the country, " * 2}  # unrelated
    marked = "Hedda Korsvik paid for the first telescope.[101][104] She sold an orchard.[102][103] [citation needed]"
    t = TurnTask(task_id="c_1", benchmark="x", conversation_id="c", turn=1, history=[], question="q?",
                 reference_answers=["..."], gold_docs={"101": 1, "102": 1, "103": 1, "104": 1},
                 labels={"reference_with_citations": marked, "cited_passages": ["101", "104", "102", "103"],
                         "n_citations": 4, "has_gold": True})
    plain = TurnTask(task_id="c_2", benchmark="x", conversation_id="c", turn=2, history=[], question="q?",
                     labels={"cited_passages": []})
    assert C.non_english_share(corpus["103"]) > 0.3 and not C.too_short(corpus["103"])
    # sentence 1's content words {hedda, korsvik, paid, first, telescope}: 101 has all 5 (1.0), 104 none (0.0)
    assert C.term_recall("Hedda Korsvik paid for the first telescope.", corpus["101"]) == 1.0
    assert C.term_recall("Hedda Korsvik paid for the first telescope.", corpus["104"]) == 0.0
    (out, same), rep = C.clean_tasks([t, plain], corpus)
    assert same is plain
    assert out.labels["reference_with_citations"] == (
        "Hedda Korsvik paid for the first telescope.[101] She sold an orchard. [citation needed]")
    assert out.labels["cited_passages"] == ["101"] and out.gold_docs == {"101": 1}
    assert out.labels["n_citations"] == 1 and out.labels["has_gold"]
    assert rep["citations"] == 4 and rep["kept"] == 1 and rep["turns_losing_gold"] == 0
    assert rep["dropped"] == {"too_short": 1, "non_english": 1, "term_recall": 1}
    with pytest.raises(ValueError, match="cited passage '101' is not in the corpus"):
        C.clean_tasks([t], {})


def test_contextualise_applies_the_filters_to_the_default_world(tmp_path, monkeypatch):
    """`convrag coral contextualise --cleaning --corpus` on the default config's world (scripted
    questions instead of the LLM): the written tasks are clean_tasks of the unfiltered ones."""
    import argparse
    import json

    from convrag.config import REPO_ROOT, load_config
    from convrag.data.miniworld import build_world
    from convrag.io import read_json, write_jsonl
    from convrag.llm.types import Response
    from convrag.rag.jobs import Job
    from convrag.records import read_records
    from convrag.studies.coral.cli import add_cli
    from convrag.studies.coral.construct import read_trees, sample_flows
    from convrag.studies.coral.world import page_records

    class Questions:
        def generate(self, reqs, desc=None):
            return [Response(text="Question: What about it?", prompt_tokens=1, completion_tokens=1,
                             finish_reason="stop") for _ in reqs]

    monkeypatch.setattr(Job, "engine", lambda self, model, role, template_kwargs=None: Questions())
    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    w = cfg["coral"]["world"]
    block = cfg["corpora"][w["corpus"]]
    pages = page_records(w["corpus"], block)
    write_jsonl(tmp_path / "pages.jsonl", pages)
    write_jsonl(tmp_path / "flows.jsonl", sample_flows(read_trees(pages), w["samplers"], w["turns"], w["long_share"],
                                                       w["seed"])[0])
    world = build_world({**block["spec"], "name": w["corpus"]}, block["seed"])
    write_jsonl(tmp_path / "corpus.jsonl", world.passages)
    p = argparse.ArgumentParser()
    add_cli(p.add_subparsers(dest="cmd"))
    base = ["contextualise", "--pages", str(tmp_path / "pages.jsonl"), "--flows", str(tmp_path / "flows.jsonl"),
            "--prompts", str(REPO_ROOT / "resources" / "prompts" / "coral" / "contextualise.yaml"), "--model", "m",
            "--registry", "r", "--cache", str(tmp_path / "cache"),
            "--sampling", json.dumps({k: cfg["coral"]["contextualise"][k] for k in ("temperature", "top_p", "max_tokens")})]
    outs = {}
    for name, extra in (("plain", []), ("clean", ["--cleaning", '{"min_recall": 0.3}', "--corpus",
                                                  str(tmp_path / "corpus.jsonl")])):
        a = p.parse_args(base + extra + ["--out", str(tmp_path / f"{name}.jsonl"), "--accounting",
                                         str(tmp_path / f"{name}.acc.json"), "--report", str(tmp_path / f"{name}.json")])
        a.fn(a)
        outs[name] = read_records(tmp_path / f"{name}.jsonl", TurnTask)
    corpus = {x.doc_id: x.text for x in world.passages}
    expected, rep = C.clean_tasks(outs["plain"], corpus)
    assert [t.to_dict() for t in outs["clean"]] == [json.loads(json.dumps(t.to_dict())) for t in expected]
    assert read_json(tmp_path / "clean.json")["cleaning"] == json.loads(json.dumps(rep))
    assert rep["citations"] > 0 and rep["kept"] + sum(rep["dropped"].values()) == rep["citations"]
    print("default world citations:", rep)
