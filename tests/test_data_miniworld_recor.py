"""The mini world's RECOR-like benchmark (convrag.data.miniworld_recor): counted plants of every
class, ground truth that holds (answer-bearing documents hold the answer and are not in the
qrels, near duplicates are copies, negatives are not), RECOR's task shape and history string,
determinism, config errors, and a BM25 run in which planted answer-bearing documents surface."""

import re

import pytest

from convrag.data.benchmarks import benchmark_loader
from convrag.data.miniworld_recor import DEFAULT_PLANT, render_recor
from convrag.data.recor import NO_HISTORY, official_query
from convrag.errors import ConfigError
from convrag.metrics.overlap import is_copy
from convrag.records import TurnTask, write_records

DEFAULT = {"alpha": {"seed": 21}, "beta": {"seed": 22}}  # 2 domains x 2 dialogues x 3 turns
SMALL = {"n_people": 12, "n_places": 6, "n_organisations": 8, "n_works": 6, "n_distractors": 4}


@pytest.fixture(scope="module")
def bench():
    tasks, passages, report = render_recor(DEFAULT, "mini")
    return tasks, {p.doc_id: p for p in passages}, report


def test_default_counts_every_class(bench):
    tasks, docs, report = bench
    assert report["tasks"] == report["turns"] == len(tasks) == 12 and report["dialogues"] == 4
    assert report["planted"] == {"same_thread": 4, "near_duplicate": 4, "other_chunk": 4, "negative": 24,
                                 "gold_note": 12, "gold_note_answering_another_turn": 4}
    assert report["turns_with"] == {"same_thread": 4, "near_duplicate": 8, "other_chunk": 4, "other_turn_gold": 4}
    # the clean turns (a quarter of each domain's 6): no answer-bearing document outside the qrels
    assert report["turns_without_unjudged_answer"] == 4 and report["gold_qrels"] == 24
    assert report["documents"] == len(docs) == 448 and report["gold_documents"] == 20
    for dom, r in report["per_domain"].items():
        dt = [t for t in tasks if t.labels["domain"] == dom]
        assert r["dialogues"] == 2 and r["turns"] == 6 and r["turns_by_position"] == {"1": 2, "2": 2, "3": 2}
        assert r["world_passages"] == 200 and r["documents"] == sum(d.startswith(dom + "/") for d in docs)
        for c, n in r["turns_with"].items():  # the report is the labels' count, and every class is there
            assert n == sum(c in t.labels["unjudged_answer_docs"].values() for t in dt) >= 1
        assert r["unjudged_negative_labels"] == sum(len(t.labels["unjudged_negative_docs"]) for t in dt) == 12
        assert r["turns_without_unjudged_answer"] == 2
    # the four classes, derived from the plant, also counted by hand on the labels
    labels = [c for t in tasks for c in t.labels["unjudged_answer_docs"].values()]
    assert sorted(set(labels)) == ["near_duplicate", "other_chunk", "other_turn_gold", "same_thread"]
    assert len(labels) == report["unjudged_answer_labels"] == 20


def test_answer_bearing_plants_hold_the_answer_and_are_unjudged(bench):
    tasks, docs, _ = bench
    by_conv = {}
    for t in tasks:
        by_conv.setdefault(t.conversation_id, []).append(t)
    for t in tasks:
        ans, gold = t.labels["answer"], t.gold_docs
        assert set(gold.values()) == {1} and len(gold) == 2
        assert any(ans in docs[g].text for g in gold) and ans in t.reference_answers[0]
        thread = {docs[d].title for d in t.labels["unjudged_negative_docs"]}
        assert len(thread) == 1 and thread.pop().startswith("Forum thread: questions about ")
        for d, cls in t.labels["unjudged_answer_docs"].items():
            assert d not in gold and ans in docs[d].text, (t.task_id, d)
            if cls == "other_chunk":  # another chunk of a gold page: same page id and title
                page = d.split("#chunk")[0]
                assert re.fullmatch(r"\w+/\d+#chunk\d+", d) and page in gold and docs[d].title == docs[page].title
            elif cls == "other_turn_gold":  # the gold of another turn of the same dialogue
                assert any(d in o.gold_docs for o in by_conv[t.conversation_id] if o is not t)
            elif cls == "same_thread":
                assert docs[d].title == docs[t.labels["unjudged_negative_docs"][0]].title
        for d in t.labels["unjudged_negative_docs"]:
            assert ans not in docs[d].text and t.labels["subject"] in docs[d].text and d not in gold
    # completeness proxy: every planted document naming the subject and the answer is gold or
    # labelled (a background passage may hold both strings for another fact: a year, a name)
    planted = {d: p for d, p in docs.items() if "#chunk" in d or int(d.split("/")[1]) >= 200}
    assert len(planted) == 448 - 400
    for t in tasks:
        named = {d for d, p in planted.items() if t.labels["subject"] in p.text and t.labels["answer"] in p.text}
        assert named <= set(t.gold_docs) | set(t.labels["unjudged_answer_docs"]), t.task_id


def test_copy_detector_flags_near_duplicates_only(bench):
    tasks, docs, _ = bench
    seen = 0
    for t in tasks:
        golds = {g: docs[g].text for g in t.gold_docs}
        for d, cls in t.labels["unjudged_answer_docs"].items():
            m = is_copy(docs[d].text, golds)
            if cls == "near_duplicate":
                seen += 1
                assert m.is_copy and docs[m.gold].title == docs[d].title and docs[d].text != docs[m.gold].text
                assert re.fullmatch(r"\w+/\d+", d)  # an opaque id, not the gold's
            else:
                assert not m.is_copy, (t.task_id, d, cls, m)
        for d in t.labels["unjudged_negative_docs"]:
            assert not is_copy(docs[d].text, golds).is_copy
    assert seen == 8  # 4 copies, each answering both turns about its subject


def test_plant_invariants_hold_on_other_seeds():
    for seed in range(6):
        domain = {"seed": seed, "dialogues": 2, "turns": [2, 4], "spec": SMALL}
        tasks, passages, report = render_recor({"s": domain}, "m")
        docs = {p.doc_id: p.text for p in passages}
        assert report["turns_without_unjudged_answer"] >= int(0.25 * len(tasks) + 0.5)  # the clean turns
        for t in tasks:
            golds = {g: docs[g] for g in t.gold_docs}
            for d, cls in t.labels["unjudged_answer_docs"].items():
                assert d not in golds and t.labels["answer"] in docs[d]
                assert is_copy(docs[d], golds).is_copy == (cls == "near_duplicate"), (seed, t.task_id, d)
            for d in t.labels["unjudged_negative_docs"]:
                assert t.labels["answer"] not in docs[d] and not is_copy(docs[d], golds).is_copy


def test_recor_task_shape_and_official_history(bench):
    tasks, _, _ = bench
    t1, t2, t3 = [t for t in tasks if t.conversation_id == "alpha/dlg0"]
    assert [t.task_id for t in (t1, t2, t3)] == [f"alpha/dlg0_turn_{i}" for i in (1, 2, 3)]
    assert t2.labels["topic_id"] == "dlg0_turn_2" and t2.labels["split"] == "dev" and t2.labels["n_turns"] == 3
    assert t1.labels["official_history"] == NO_HISTORY and t1.history == []
    q1, a1 = t1.question, t1.reference_answers[0]
    assert t2.labels["official_history"] == f"Q: {q1}\nA: {a1}"
    assert t3.labels["official_history"] == f"Q: {q1}\nA: {a1}\nQ: {t2.question}\nA: {t2.reference_answers[0]}"
    assert t2.history == [{"role": "user", "text": q1}, {"role": "assistant", "text": a1}]
    assert official_query(t1, True) == t1.question
    assert official_query(t2, True) == f"{t2.question}\n\nConversation History:\nQ: {q1}\nA: {a1}"
    # turn 1 names its subject; later turns refer back and only the standalone query names it
    assert t1.labels["standalone"] and t1.labels["subject"] in t1.question
    assert not t2.labels["standalone"] and t2.labels["subject"] not in t2.question
    assert t2.labels["subject"] in t2.labels["standalone_query"]
    for t in tasks:
        assert TurnTask.from_dict(t.to_dict()) == t and t.rewrite is None and t.contexts == []
        assert t.labels["has_gold"] is True and t.benchmark == "mini"
        assert {"domain", "split", "turn_id", "topic_id", "official_history", "has_gold", "n_turns"} <= set(t.labels)


def test_seeded_byte_identical_and_other_seed_differs(tmp_path):
    for name, doms in (("a", DEFAULT), ("b", DEFAULT), ("c", {**DEFAULT, "alpha": {"seed": 23}})):
        tasks, passages, _ = render_recor(doms, "mini")
        write_records(tmp_path / f"{name}.tasks.jsonl", tasks)
        write_records(tmp_path / f"{name}.corpus.jsonl", passages)
    for f in ("tasks", "corpus"):
        a, b, c = (tmp_path / f"{n}.{f}.jsonl" for n in "abc")
        assert a.read_bytes() == b.read_bytes() and a.read_bytes() != c.read_bytes()


def test_shares_turn_ranges_and_loader():
    none = {k: 0 for k in DEFAULT_PLANT}
    tasks, passages, report = render_recor({"x": {"seed": 3, "spec": {**SMALL, **none}}}, "m")
    assert all(not t.labels["unjudged_answer_docs"] and not t.labels["unjudged_negative_docs"] for t in tasks)
    assert report["documents"] == 36 + 6 and set(report["turns_with"].values()) == {0}  # world + 6 gold notes
    tasks, _, report = render_recor({"x": {"seed": 3, "dialogues": 4, "turns": [2, 4],
                                           "spec": {**SMALL, "same_thread_negatives": 1, "chunks": 1.0,
                                                    "clean_turns": 0}}}, "m")
    lengths = {t.conversation_id: t.labels["n_turns"] for t in tasks}
    assert set(lengths.values()) <= {2, 3, 4} and len(set(lengths.values())) > 1 and len(tasks) == sum(lengths.values())
    assert report["planted"]["other_chunk"] == len(tasks) and report["planted"]["negative"] == len(tasks)
    loader = benchmark_loader("miniworld_recor")
    spec = {"kind": "miniworld_recor", "domains": {"x": {"seed": 3, "spec": SMALL}, "y": {"seed": 4, "spec": SMALL}}}
    loader.check("mini", spec, "cfg.yaml")
    assert loader.domains(spec) == ["x", "y"]
    ltasks, lreport = loader.tasks("mini", spec, {})
    assert lreport["per_domain"]["y"]["turns"] == 6 and {t.labels["domain"] for t in ltasks} == {"x", "y"}
    corpus = loader.corpus("mini", spec, "y", {})
    assert all(p.doc_id.startswith("y/") and p.source == "y" for p in corpus)
    assert {d for t in ltasks if t.labels["domain"] == "y" for d in t.gold_docs} <= {p.doc_id for p in corpus}


@pytest.mark.parametrize("domain, key", [
    ({"seed": 1, "convs": 2}, "convs"),
    ({"spec": {"near_dups": 0.5}}, "spec.near_dups"),
    ({"spec": {"n_peple": 10}}, "spec.n_peple"),
    ({"spec": {"chunks": 1.5}}, "spec.chunks"),
    ({"spec": {"n_people": 1}}, "spec.n_people"),
    ({"turns": 5}, "turns"),
    ({"dialogues": 0}, "dialogues"),
])
def test_config_errors_name_the_key(domain, key):
    with pytest.raises(ConfigError, match=re.escape(f"'{key}'")):
        render_recor({"alpha": domain}, "mini")
    where = f"cfg.yaml: invalid config key 'benchmarks.mini.domains.alpha.{key}'"
    with pytest.raises(ConfigError, match=re.escape(where)):
        benchmark_loader("miniworld_recor").check("mini", {"kind": "miniworld_recor", "domains": {"alpha": domain}},
                                                  "cfg.yaml")


def test_config_errors_benchmark_level():
    loader = benchmark_loader("miniworld_recor")
    with pytest.raises(ConfigError, match=r"'benchmarks\.mini\.extra'"):
        loader.check("mini", {"kind": "miniworld_recor", "domains": {"a": {}}, "extra": 1}, "cfg.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.mini\.domains'"):
        loader.check("mini", {"kind": "miniworld_recor", "domains": {}}, "cfg.yaml")
    tiny = {"n_people": 3, "n_places": 2, "n_organisations": 3, "n_works": 1, "n_distractors": 0}
    with pytest.raises(ConfigError, match="dialogues"):
        render_recor({"a": {"seed": 1, "dialogues": 9, "spec": tiny}}, "mini")


def test_bm25_finds_planted_answer_documents(tmp_path):
    from convrag.retrieval import build_index, load_retriever

    tasks, passages, _ = render_recor({"alpha": {"seed": 21, "dialogues": 6}}, "mini")  # 18 turns (5 clean), one domain
    docs = {p.doc_id: p for p in passages}
    write_records(tmp_path / "corpus.jsonl", passages)
    build_index("bm25", tmp_path / "corpus.jsonl", tmp_path / "idx", {"backend": "bm25s"})
    bm25 = load_retriever("bm25", tmp_path / "idx", {"backend": "bm25s"})
    top = {form: [[d for d, _ in hits] for hits in bm25.search(qs, 5)] for form, qs in (
        ("standalone", [t.labels["standalone_query"] for t in tasks]), ("turn", [t.question for t in tasks]),
        ("history", [official_query(t, True) for t in tasks]))}
    planted = [(t, hits) for t, hits in zip(tasks, top["standalone"]) if t.labels["unjudged_answer_docs"]]
    found = [any(d in t.labels["unjudged_answer_docs"] for d in hits) for t, hits in planted]
    # most turns: with the standalone fact asked, an unjudged answer document is in the top 5
    assert (len(planted), sum(found)) == (12, 12)
    # qrels-labelled "no gold" contexts that are in fact sufficient (false misses), and true misses
    counts = {}
    for form in top:
        for t, hits in zip(tasks, top[form]):
            if not any(d in t.gold_docs for d in hits):
                answer = any(d in t.labels["unjudged_answer_docs"] for d in hits)
                assert answer == any(t.labels["answer"] in docs[d].text and t.labels["subject"] in docs[d].text
                                     for d in hits)
                counts[form, answer] = counts.get((form, answer), 0) + 1
    assert counts == {("standalone", True): 2, ("history", True): 5, ("history", False): 3,
                      ("turn", True): 6, ("turn", False): 6}  # the weak turn-only query: true misses too
