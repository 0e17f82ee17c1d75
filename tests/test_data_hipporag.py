"""HippoRAG-format loaders: the real samples in ../shared/data, malformed input, sampling."""

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from convrag.data.hipporag import load_hipporag, sample_questions, write_dataset
from convrag.errors import ConfigError, DataError
from convrag.records import Passage, Question, read_records

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
realdata = pytest.mark.skipif(not SHARED.is_dir(), reason=f"real data samples not present at {SHARED}")


def _raw(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


# ---- real samples ----------------------------------------------------------------------


@realdata
@pytest.mark.realdata
def test_musique_counts_hops_and_supporting_passages():
    qf, cf = SHARED / "hipporag_musique" / "musique_train.json", SHARED / "hipporag_musique" / "musique_train_corpus.json"
    qs, ps = load_hipporag(qf, cf, "musique")
    assert len(qs) == 100 and len(ps) == 1890
    assert Counter(q.hops for q in qs) == {2: 68, 3: 27, 4: 5}
    assert [p.doc_id for p in ps[:3]] == ["musique/0", "musique/1", "musique/2"]
    by_id = {p.doc_id: p for p in ps}
    raw = {r["id"]: r for r in _raw(qf)}
    dup_titles = {t for t, n in Counter(p.title for p in ps).items() if n > 1}
    resolved_dup = 0
    for q in qs:
        r = raw[q.qid]
        assert q.dataset == "musique" and q.type == q.qid.split("__")[0] and q.hops == int(q.type[0])
        assert q.answers[0] == r["answer"] and set(r["answer_aliases"]) <= set(q.answers)
        assert q.decomposition == [d["question"] for d in r["question_decomposition"]]
        # hop order = decomposition order; each id resolves to the very paragraph (title and text)
        paras = {p["idx"]: p for p in r["paragraphs"]}
        want = [paras[d["paragraph_support_idx"]] for d in r["question_decomposition"]]
        assert len(q.supporting_doc_ids) == q.hops == len(want)
        for doc_id, p in zip(q.supporting_doc_ids, want):
            assert by_id[doc_id].title == p["title"] and by_id[doc_id].text == p["paragraph_text"]
            resolved_dup += p["title"] in dup_titles
    assert resolved_dup > 0  # the sample does exercise non-unique titles


@realdata
@pytest.mark.realdata
def test_hotpotqa_v1_dict_corpus():
    qf, cf = SHARED / "hipporag_hotpotqa" / "hotpotqa_train.json", SHARED / "hipporag_hotpotqa" / "hotpotqa_train_corpus.json"
    qs, ps = load_hipporag(qf, cf, "hotpotqa")
    assert len(qs) == 100 and len(ps) == 994
    assert {q.hops for q in qs} == {2}
    assert Counter(q.type for q in qs).keys() == {"bridge", "comparison"}
    raw_corpus = _raw(cf)
    for i, (title, sents) in enumerate(raw_corpus.items()):  # key order, sentences joined with ''
        assert ps[i].doc_id == f"hotpotqa/{i}" and ps[i].title == title and ps[i].text == "".join(sents)
    by_id = {p.doc_id: p for p in ps}
    for q, r in zip(qs, _raw(qf)):
        assert q.qid == r["_id"] and q.answers == [r["answer"]]
        titles = list(dict.fromkeys(f[0] for f in r["supporting_facts"]))
        assert [by_id[d].title for d in q.supporting_doc_ids] == titles


@realdata
@pytest.mark.realdata
def test_2wiki_list_corpus():
    qf = SHARED / "hipporag_2wikimultihopqa" / "2wikimultihopqa.json"
    cf = SHARED / "hipporag_2wikimultihopqa" / "2wikimultihopqa_corpus.json"
    qs, ps = load_hipporag(qf, cf, "2wikimultihopqa", format="2wikimultihopqa")
    assert len(qs) == 4 and len(ps) == 6119
    assert [q.hops for q in qs] == [2, 2, 2, 2]
    by_id = {p.doc_id: p for p in ps}
    for q, r in zip(qs, _raw(qf)):
        assert q.qid == r["_id"] and q.type == r["type"] and q.answers == [r["answer"]]
        titles = list(dict.fromkeys(f[0] for f in r["supporting_facts"]))
        assert [by_id[d].title for d in q.supporting_doc_ids] == titles


# ---- small generated files in the same formats --------------------------------------------


def _musique_rec(qid="2hop__1_2", titles=("A", "B"), texts=("a text", "b text")):
    paras = [{"idx": i, "title": t, "paragraph_text": x, "is_supporting": True} for i, (t, x) in enumerate(zip(titles, texts))]
    paras.append({"idx": len(paras), "title": "Noise", "paragraph_text": "noise", "is_supporting": False})
    decomp = [{"id": i, "question": f"sub {i}", "answer": "x", "paragraph_support_idx": i} for i in reversed(range(len(titles)))]
    return {"id": qid, "paragraphs": paras, "question": "Q?", "question_decomposition": decomp,
            "answer": "ans", "answer_aliases": ["alias", "ans"], "answerable": True}


def _wiki_rec(qid="w1", titles=("A", "B"), context=None):
    return {"_id": qid, "type": "compositional", "question": "Q?", "answer": "ans",
            "supporting_facts": [[t, 0] for t in titles] + [[titles[0], 1]],
            "context": context or [[t, [f"{t} text."]] for t in titles]}


def _write(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj, indent=1))
    return path


def test_musique_matches_title_and_text_and_orders_by_decomposition(tmp_path):
    corpus = [{"title": "A", "text": "other a"}, {"title": "A", "text": "a text"}, {"title": "B", "text": "b text"}]
    cf = _write(tmp_path / "c.json", corpus)
    qf = _write(tmp_path / "q.json", [_musique_rec()])
    (q,), ps = load_hipporag(qf, cf, "mq")
    assert q.supporting_doc_ids == ["mq/2", "mq/1"]  # decomposition lists B first; A is the 2nd "A"
    assert q.answers == ["ans", "alias"] and q.hops == 2 and q.type == "2hop"


def test_musique_without_decomposition_uses_paragraph_order(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}, {"title": "B", "text": "b text"}])
    rec = {**_musique_rec("3hop1__1_2_3"), "question_decomposition": []}
    (q,), _ = load_hipporag(_write(tmp_path / "q.json", [rec]), cf, "mq")
    assert q.supporting_doc_ids == ["mq/0", "mq/1"] and q.decomposition == []
    assert q.hops == 3 and q.type == "3hop1"  # hops come from the id prefix


def test_jsonl_questions_and_jsonl_inside_json_name(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}, {"title": "B", "text": "b text"}])
    lines = "\n".join(json.dumps(_musique_rec(f"2hop__{i}")) for i in range(3)) + "\n"
    for name in ("q.jsonl", "q_lines.json"):
        (tmp_path / name).write_text(lines)
        qs, _ = load_hipporag(tmp_path / name, cf, "mq")
        assert [q.qid for q in qs] == ["2hop__0", "2hop__1", "2hop__2"]


def test_malformed_jsonl_line_names_file_and_line(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}, {"title": "B", "text": "b text"}])
    qf = tmp_path / "q.jsonl"
    qf.write_text(json.dumps(_musique_rec()) + "\n" + '{"id": "2hop__x", "paragraphs": [\n')
    with pytest.raises(DataError, match=rf"{qf}:2"):
        load_hipporag(qf, cf, "mq")


def test_invalid_json_names_file_and_line(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}])
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"title": "A",\n   "text": oops}\n]\n')
    with pytest.raises(DataError, match=rf"{bad}:3"):
        load_hipporag(bad, cf, "mq")
    with pytest.raises(DataError, match=rf"{bad}:3"):
        load_hipporag(_write(tmp_path / "q.json", [_musique_rec()]), bad, "mq")


def test_missing_supporting_passage_names_file_question_and_title(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}])
    qf = _write(tmp_path / "q.json", [_musique_rec("2hop__77_88")])
    with pytest.raises(DataError, match=r"q\.json: question 2hop__77_88: supporting passage 'B' not found"):
        load_hipporag(qf, cf, "mq")
    wf = _write(tmp_path / "w.json", [_wiki_rec("wiki-9", titles=("A", "Gone"))])
    with pytest.raises(DataError, match=r"w\.json: question wiki-9: supporting passage 'Gone'"):
        load_hipporag(wf, cf, "w")


@pytest.mark.parametrize("corpus", [
    [{"title": "A", "text": "A text."}, {"title": "B", "text": "B text."}],  # v2-style list
    {"A": ["A text."], "B": ["B text."]},  # v1-style dict of sentences
])
def test_wiki_format_accepts_list_and_dict_corpora(tmp_path, corpus):
    cf = _write(tmp_path / "c.json", corpus)
    qf = _write(tmp_path / "q.json", [_wiki_rec()])
    (q,), ps = load_hipporag(qf, cf, "hotpotqa", format="hotpotqa")
    assert q.supporting_doc_ids == ["hotpotqa/0", "hotpotqa/1"] and q.hops == 2 and q.type == "compositional"
    assert [p.text for p in ps] == ["A text.", "B text."]


def test_repeated_title_resolved_by_context_text(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "Other."}, {"title": "A", "text": "First. Second."},
                                      {"title": "B", "text": "B text."}])
    ctx = [["A", ["First.", " Second."]], ["B", ["B text."]]]
    (q,), _ = load_hipporag(_write(tmp_path / "q.json", [_wiki_rec(context=ctx)]), cf, "h")
    assert q.supporting_doc_ids == ["h/1", "h/2"]


def test_format_mismatch_and_duplicate_ids_rejected(tmp_path):
    cf = _write(tmp_path / "c.json", [{"title": "A", "text": "a text"}, {"title": "B", "text": "b text"}])
    with pytest.raises(DataError, match="not a musique question record"):
        load_hipporag(_write(tmp_path / "w.json", [_wiki_rec()]), cf, "m", format="musique")
    with pytest.raises(DataError, match="duplicate question id 2hop__1_2"):
        load_hipporag(_write(tmp_path / "d.json", [_musique_rec(), _musique_rec()]), cf, "m")
    with pytest.raises(ConfigError, match="unknown hipporag format"):
        load_hipporag(tmp_path / "d.json", cf, "m", format="squad")


# ---- sampling and writing -------------------------------------------------------------------


def _pool(n=100):
    hops = [2] * 68 + [3] * 27 + [4] * 5
    return [Question(qid=f"q{i:03d}", dataset="d", question=f"Q{i}?", answers=["a"], supporting_doc_ids=[],
                     hops=hops[i % 100]) for i in range(n)]


def test_sample_reproducible_order_independent_and_nested():
    pool = _pool()
    a = sample_questions(pool, 20, seed=3)
    shuffled = pool[:]
    random.Random(1).shuffle(shuffled)
    assert [q.qid for q in a] == [q.qid for q in sample_questions(shuffled, 20, seed=3)]
    assert [q.qid for q in a] == [q.qid for q in sample_questions(pool, 40, seed=3)][:20]
    assert [q.qid for q in a] != [q.qid for q in sample_questions(pool, 20, seed=4)]
    assert len({q.qid for q in a}) == 20
    assert sample_questions(pool, 0, seed=3) == []


def test_sample_stratified_proportional():
    pool = _pool()
    s = sample_questions(pool, 20, seed=0, stratify_by="hops")
    assert Counter(q.hops for q in s) == {2: 14, 3: 5, 4: 1}  # 13.6 / 5.4 / 1.0, largest remainder
    rev = sample_questions(list(reversed(pool)), 20, seed=0, stratify_by=lambda q: q.hops)
    assert [q.qid for q in s] == [q.qid for q in rev]


def test_sample_errors():
    with pytest.raises(ConfigError, match="cannot sample n=101 questions: 100 available"):
        sample_questions(_pool(), 101, seed=0)
    with pytest.raises(DataError, match="duplicate question id q000"):
        sample_questions(_pool() + _pool(1), 5, seed=0)


def test_write_dataset_roundtrip(tmp_path):
    qs = _pool(5)
    ps = [Passage(doc_id=f"d/{i}", title=f"T{i}", text="x", source="d") for i in range(3)]
    write_dataset(qs, ps, tmp_path / "out")
    assert read_records(tmp_path / "out" / "questions.jsonl", Question) == qs
    assert read_records(tmp_path / "out" / "corpus.jsonl", Passage) == ps
