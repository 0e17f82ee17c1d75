"""MTRAG-UN and MTRAG loaders: every record of the real samples in ../shared/data (counts computed
here from the raw files, independently of the loader), id normalisation, round trips, cross-checks
between the files, and malformed input (small files written in tmp_path)."""

from __future__ import annotations

import csv
import json
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from convrag.data.gold import check_gold

from convrag.data.mtrag import (
    DOMAINS,
    ID_SEP,
    OFFICIAL_METRICS,
    QUERY_KINDS,
    RetrievalTask,
    attach_qrels,
    domain_of,
    iter_passage_corpus,
    load_beir_queries,
    load_conversations,
    load_generation_tasks,
    load_human_evaluations,
    load_passage_corpus,
    load_retrieval_tasks,
    normalise_task_id,
    queries_from_task,
    strip_speaker_tags,
)
from convrag.errors import ConfigError, DataError
from convrag.records import Passage, TurnTask

DOMS = ("clapnq", "cloud", "fiqa", "govt")
# the test's own spelling table, written independently of the loader's
SHORT = {"clapnq": "clapnq", "ibmcloud": "cloud", "fiqa": "fiqa", "govt": "govt",
         "mt-rag-clapnq-elser-512-100-20240503": "clapnq", "mt-rag-ibmcloud-elser-512-100-20240502": "cloud",
         "mt-rag-fiqa-beir-elser-512-100-20240501": "fiqa", "mt-rag-govt-elser-512-100-20240611": "govt"}


def _raw_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _raw_qrels(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["query-id", "corpus-id", "score"]
    return [line.split("\t") for line in lines[1:] if line.strip()]


def _roundtrip(tasks):
    for t in tasks:
        again = TurnTask.from_dict(json.loads(json.dumps(t.to_dict(), allow_nan=False)))
        assert again == t


# ---- MTRAG-UN ----------------------------------------------------------------------------


@pytest.mark.realdata
def test_mtrag_un_reference_every_task(shared_data):
    path = shared_data / "mtrag_un" / "reference.jsonl"
    raw = _raw_lines(path)
    tasks, report = load_generation_tasks(path, "mtrag_un")
    assert len(tasks) == len(raw) == 507 == report["tasks"]
    # counts from the raw file, independently
    assert report["answerability"] == dict(Counter(r["answerability"][0] for r in raw))
    assert report["answerability"] == {"ANSWERABLE": 285, "UNANSWERABLE": 97, "UNDERSPECIFIED": 78, "PARTIAL": 47}
    assert report["domain"] == dict(Counter(SHORT[r["Collection"]] for r in raw))
    assert report["multi_turn"] == dict(Counter(r["Multi-Turn"][0] for r in raw))
    assert report["contexts"] == sum(len(r["contexts"]) for r in raw)
    assert report["tasks_without_contexts"] == sum(not r["contexts"] for r in raw)
    assert report["first_turn"] == sum(str(r["turn"]) == "1" for r in raw)
    assert report["ids_normalised"] == 0 and report["nan_values"] == 0
    assert report["conversations"] == len({r["conversation_id"] for r in raw})
    # the released file has no standalone field: every task says so with None
    assert report["standalone"] == {"(missing)": 507}
    assert all("Standalone Type" not in r for r in raw)
    for t, r in zip(tasks, raw):
        assert t.task_id == r["task_id"] and t.benchmark == "mtrag_un" and t.turn == int(r["turn"])
        assert t.question == r["input"][-1]["text"] and len(t.history) == len(r["input"]) - 1
        assert [h["role"] for h in t.history] == [{"user": "user", "agent": "assistant"}[i["speaker"]]
                                                  for i in r["input"][:-1]]
        assert t.reference_answers == [x["text"] for x in r["targets"]]
        assert [c["doc_id"] for c in t.contexts] == [c["document_id"] for c in r["contexts"]]
        assert [c["text"] for c in t.contexts] == [c["text"] for c in r["contexts"]]
        assert t.labels["question_type"] == r["Question Type"] and t.labels["collection"] == r["Collection"]
        assert t.labels["first_turn"] == (t.turn == 1) and t.gold_docs == {}
    _roundtrip(tasks)


@pytest.mark.realdata
def test_mtrag_un_qrels_attach_to_answerable_and_partial(shared_data):
    tasks, _ = load_generation_tasks(shared_data / "mtrag_un" / "reference.jsonl", "mtrag_un")
    files = {d: shared_data / "mtrag_un" / f"qrels_{d}.tsv" for d in DOMS}
    rows = {d: _raw_qrels(p) for d, p in files.items()}
    with_gold, report = attach_qrels(tasks, files)
    assert report["qrels_rows"] == sum(len(v) for v in rows.values()) == 851
    assert report["qrels_rows_per_file"] == {d: len(v) for d, v in rows.items()}
    qids = {q for v in rows.values() for q, _, _ in v}
    assert report["tasks_with_gold"] == len(qids) == 332
    assert report["with_gold_by_answerability"] == {"ANSWERABLE": 285, "PARTIAL": 47}
    assert report["unknown_qrels_ids"] == 0
    by_id = {t.task_id: t for t in with_gold}
    for d, v in rows.items():
        for q, doc, score in v:
            assert by_id[q].gold_docs[doc] == int(score) and by_id[q].labels["domain"] == d
    assert all(t.gold_docs == {} for t in tasks)  # the inputs are not changed
    _roundtrip(with_gold)


# ---- MTRAG generation tasks and the evaluation scripts' sample inputs --------------------


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["generation_tasks/reference.head2.jsonl", "sample_data/taskac_input.jsonl",
                                  "sample_data/taskb_input.jsonl", "sample_data/responses-10.jsonl"])
def test_mtrag_generation_files_and_id_normalisation(shared_data, name):
    path = shared_data / "mtrag" / name
    text = path.read_text(encoding="utf-8")
    raw = _raw_lines(path)  # Python's json accepts the bare NaN tokens too
    tasks, report = load_generation_tasks(path, "mtrag")
    assert len(tasks) == len(raw) == report["tasks"]
    n_colon = sum(ID_SEP not in r["task_id"] for r in raw)
    assert report["ids_normalised"] == n_colon
    assert report["nan_values"] == text.count("NaN")
    for t, r in zip(tasks, raw):
        assert t.task_id == (r["task_id"] if ID_SEP in r["task_id"] else r["task_id"].replace("::", ID_SEP))
        assert t.task_id == f"{r['conversation_id']}{ID_SEP}{r['turn']}"
        assert t.labels["domain"] == SHORT[r.get("Collection", r.get("collection"))]
    _roundtrip(tasks)
    if name.startswith("sample_data"):
        assert n_colon == len(raw) == 10
    if name.endswith("responses-10.jsonl"):
        assert report["nan_values"] > 0
        assert report["multi_turn"]["(missing)"] == sum(r["Multi-Turn"] != r["Multi-Turn"] for r in raw)  # NaN
        assert report["ignored_fields"]["predictions"] == 10
        assert all(t.labels["standalone"] is None for t in tasks)  # 'Standalone Type' is NaN on every line


@pytest.mark.realdata
def test_generation_task_equals_the_conversation_turn(shared_data):
    gen, _ = load_generation_tasks(shared_data / "mtrag" / "generation_tasks" / "reference.head2.jsonl", "mtrag")
    conv, _ = load_conversations(shared_data / "mtrag" / "conversations" / "conversations.sample.json",
                                 shared_data / "mtrag" / "conversations" / "conversation_index_to_id.tsv")
    by_id = {t.task_id: t for t in conv}
    for g in gen:
        c = by_id[g.task_id]
        assert (c.question, c.history, c.reference_answers) == (g.question, g.history, g.reference_answers)
        assert c.contexts == g.contexts  # the reference contexts are the relevant passages
        for k in ("answerability", "question_type", "multi_turn", "domain", "first_turn"):
            assert c.labels[k] == g.labels[k]


# ---- MTRAG retrieval tasks ---------------------------------------------------------------


@pytest.mark.realdata
@pytest.mark.parametrize("domain", DOMS)
def test_mtrag_retrieval_tasks(shared_data, domain):
    base = shared_data / "mtrag_retrieval"
    files = {k: base / f"{domain}_{k}.jsonl" for k in QUERY_KINDS}
    raw = {k: _raw_lines(p) for k, p in files.items()}
    qrels = _raw_qrels(base / f"qrels_{domain}.tsv")
    tasks, report = load_retrieval_tasks(files, base / f"qrels_{domain}.tsv", domain, "mtrag")
    n = {"clapnq": 208, "cloud": 188, "fiqa": 180, "govt": 201}[domain]
    assert len(tasks) == report["tasks"] == n == len(raw["lastturn"])
    assert report["queries"] == {k: len(v) for k, v in raw.items()}
    assert report["qrels_rows"] == len(qrels) and report["qrels_tasks"] == len({q for q, _, _ in qrels})
    assert report["unknown_qrels_ids"] == 0 and report["tasks_without_gold"] == 0
    for k, rows in raw.items():
        assert {r["_id"]: r["text"] for r in rows} == {t: x.queries[k] for t, x in tasks.items()}
        assert load_beir_queries(files[k]) == {r["_id"]: r["text"] for r in rows}
    for q, doc, score in qrels:
        assert tasks[q].gold_docs[doc] == int(score)
    t = next(iter(tasks.values()))
    assert isinstance(t, RetrievalTask) and t.domain == domain and t.task_id == f"{t.conversation_id}{ID_SEP}{t.turn}"
    stripped, _ = load_retrieval_tasks(files, None, domain, "mtrag", strip_tags=True)
    assert all("|user|" not in q for x in stripped.values() for q in x.queries.values())
    assert all(x.gold_docs == {} for x in stripped.values())


@pytest.mark.realdata
def test_queries_from_conversation_tasks_match_the_query_files(shared_data):
    tasks, _ = load_conversations(shared_data / "mtrag" / "conversations" / "conversations.sample.json",
                                  shared_data / "mtrag" / "conversations" / "conversation_index_to_id.tsv")
    queries = {}
    for d in DOMS:
        for k in ("lastturn", "questions"):
            for tid, text in load_beir_queries(shared_data / "mtrag_retrieval" / f"{d}_{k}.jsonl").items():
                queries.setdefault(tid, {})[k] = text
    matched = 0
    for t in tasks:
        if t.task_id in queries:
            q = queries_from_task(t)
            assert (q["lastturn"], q["questions"]) == (queries[t.task_id]["lastturn"], queries[t.task_id]["questions"])
            matched += 1
    assert matched == 57
    assert strip_speaker_tags("|user|: a\n|user|: b") == "a\nb"


# ---- passage corpora ---------------------------------------------------------------------


@pytest.mark.realdata
def test_corpus_sample_every_passage(shared_data):
    total = 0
    for d in DOMS:
        path = shared_data / "mtrag" / "corpus_sample" / f"{d}.jsonl"
        raw = _raw_lines(path)
        ps = load_passage_corpus(path, d)
        assert len(ps) == len(raw)
        got = [(p.doc_id, p.title, p.text, p.source) for p in ps]
        assert got == [(r["_id"], r["title"], r["text"], d) for r in raw]
        total += len(ps)
    assert total == 1056


@pytest.mark.realdata
def test_zipped_corpus_streams_like_the_jsonl(shared_data, tmp_path):
    src = shared_data / "mtrag" / "corpus_sample" / "cloud.jsonl"
    z = tmp_path / "cloud.jsonl.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.write(src, "cloud.jsonl")
    assert load_passage_corpus(z, "ibmcloud") == load_passage_corpus(src, "cloud")
    assert next(iter_passage_corpus(z, "cloud")).source == "cloud"


def test_zipped_corpus_with_id_and_missing_title(tmp_path):
    z = tmp_path / "govt.jsonl.zip"
    lines = [{"_id": "a-1", "id": "a-1", "title": "T", "text": "one", "url": "u"}, {"id": "a-2", "text": "two"}]
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("govt/govt.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    assert load_passage_corpus(z, "govt") == [Passage("a-1", "T", "one", "govt"), Passage("a-2", "", "two", "govt")]


@pytest.mark.realdata
def test_gold_of_sampled_conversations_is_in_the_corpus_sample(shared_data):
    tasks, report = load_conversations(shared_data / "mtrag" / "conversations" / "conversations.sample.json",
                                       shared_data / "mtrag" / "conversations" / "conversation_index_to_id.tsv")
    rows = 0
    for d in DOMS:  # the one gold check of the workflow (rule benchmark_corpus, convrag.data.gold)
        ps = load_passage_corpus(shared_data / "mtrag" / "corpus_sample" / f"{d}.jsonl", d)
        rep = check_gold(tasks, [p.doc_id for p in ps], benchmark="mtrag", domain=DOMAINS.get(d, d), allow_missing=False)
        assert rep["missing_ids"] == 0
        rows += rep["qrels_rows"]
    assert rows == sum(len(t.gold_docs) for t in tasks) > 0
    with pytest.raises(DataError, match=r"domain 'clapnq': \d+ of \d+ gold/qrels document ids .* \(task '.+<::>\d+'\)"):
        check_gold(tasks, [], benchmark="mtrag", domain="clapnq", allow_missing=False)


# ---- MTRAG conversations and human evaluations -------------------------------------------


@pytest.mark.realdata
def test_conversations_every_answered_user_turn(shared_data):
    cdir = shared_data / "mtrag" / "conversations"
    raw = json.loads((cdir / "conversations.sample.json").read_text(encoding="utf-8"))
    tasks, report = load_conversations(cdir / "conversations.sample.json", cdir / "conversation_index_to_id.tsv")
    answered = sum(m["speaker"] == "user" and j + 1 < len(c["messages"]) and c["messages"][j + 1]["speaker"] == "agent"
                   for c in raw for j, m in enumerate(c["messages"]))
    assert len(raw) == 12 == report["conversations"] and len(tasks) == answered == report["tasks"]
    # ids: the sample keeps the original order; matched to the index tsv
    manifest = json.loads((shared_data / "mtrag" / "sample_manifest.json").read_text(encoding="utf-8"))
    rows = {int(r["index_in_conversations_json_0based"]): r["conversation_id"]
            for r in csv.DictReader(open(cdir / "conversation_index_to_id.tsv", encoding="utf-8"), delimiter="\t")}
    key = "conversation_index_in_conversations_json(0-based)"
    want = [rows[i] for i in sorted(i for d in DOMS for i in manifest[d][key])]
    assert list(dict.fromkeys(t.conversation_id for t in tasks)) == want
    assert report["ids_by_matching"] == 12
    assert report["answerability"] == dict(Counter(m["enrichments"]["Answerability"][0] for c in raw
                                                   for m in c["messages"] if m["speaker"] == "user"))
    assert report["contexts_shown"] == sum(len(m.get("contexts", [])) for c in raw for m in c["messages"])
    # gold docs from the editor's (else the author's) judgments equal MTRAG's qrels on every task they cover
    qrels = {}
    for d in DOMS:
        for q, doc, s in _raw_qrels(shared_data / "mtrag_retrieval" / f"qrels_{d}.tsv"):
            qrels.setdefault(q, {})[doc] = int(s)
    covered = [t for t in tasks if t.task_id in qrels]
    assert len(covered) == 57 and all(t.gold_docs == qrels[t.task_id] for t in covered)
    assert all(not t.gold_docs for t in tasks if t.task_id not in qrels)
    _roundtrip(tasks)
    shown, _ = load_conversations(cdir / "conversations.sample.json", contexts="shown")
    assert sum(len(t.contexts) for t in shown) == report["contexts_shown"]
    assert shown[0].conversation_id == "index-0"


@pytest.mark.realdata
def test_human_evaluations_every_task_and_system(shared_data):
    path = shared_data / "mtrag" / "evaluations" / "reference_subset_with_human_evaluations.sample.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    he = load_human_evaluations(path)
    assert len(he.tasks) == len(raw["tasks"]) == 12 and len(he.documents) == len(raw["documents"]) == 24
    assert len(he.evaluations) == len(raw["evaluations"]) == 36 == 12 * len(he.systems)
    assert he.systems == ["reference", "llama-3.1-405b-instruct", "gpt-4o"]
    for ev in raw["evaluations"]:
        e = he.evaluations[(ev["task_id"], ev["model_id"])]
        assert e.prediction == ev["model_response"]
        for k in OFFICIAL_METRICS:
            assert e.metrics[k] == next(iter(ev["annotations"][k].values()))["value"]
        assert e.human["faithfulness"] == {a: float(v["value"]) for a, v in ev["annotations"]["faithfulness"].items()}
    for rt in raw["tasks"]:
        t = he.tasks[rt["task_id"]]
        assert [c["doc_id"] for c in t.contexts] == [c["document_id"] for c in rt["contexts"]]
        assert len(t.gold_docs) == int(rt["# Relevant Passages"]) and t.turn == int(rt["Turn"])
        assert t.question == rt["input"][-1]["text"] and t.reference_answers == [x["text"] for x in rt["targets"]]
    _roundtrip(he.tasks.values())


# ---- ids, domains ------------------------------------------------------------------------


def test_normalise_task_id_and_domains():
    assert normalise_task_id("abc<::>3") == ("abc<::>3", "abc", 3, False)
    assert normalise_task_id("abc::03") == ("abc<::>3", "abc", 3, True)
    for bad in ("abc", "abc<::>", "<::>2", "abc::x", "abc<::>0", 5):
        with pytest.raises(DataError, match="task_id"):
            normalise_task_id(bad, "f.jsonl:1")
    assert {domain_of(k) for k in DOMAINS} == set(DOMS) and domain_of("ibmcloud") == "cloud"
    with pytest.raises(DataError, match="'Collection' 'banking' is not a known collection"):
        domain_of("banking")


# ---- malformed input ---------------------------------------------------------------------


def _task(**over) -> dict:
    rec = {"conversation_id": "c1", "task_id": "c1<::>2", "turn": "2", "Collection": "fiqa",
           "input": [{"speaker": "user", "text": "q1"}, {"speaker": "agent", "text": "a1"},
                     {"speaker": "user", "text": "q2"}],
           "targets": [{"speaker": "agent", "text": "a2"}], "contexts": [{"document_id": "d1", "text": "t"}],
           "answerability": ["ANSWERABLE"], "Question Type": ["Factoid"], "Multi-Turn": ["Follow-up"]}
    rec.update(over)
    return rec


def _write(tmp_path: Path, *lines, name="tasks.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return p


def test_small_task_file_reads(tmp_path):
    p = _write(tmp_path, _task(), _task(task_id="c1::1", turn=1, input=[{"speaker": "user", "text": "q1"}],
                                        **{"Multi-Turn": float("nan")}))
    assert "NaN" in p.read_text()  # json.dumps writes the bare NaN token
    tasks, report = load_generation_tasks(p, "mtrag_un")
    assert [t.task_id for t in tasks] == ["c1<::>2", "c1<::>1"] and report["ids_normalised"] == 1
    assert report["nan_values"] == 1 and tasks[1].labels["multi_turn"] is None
    assert tasks[0].history == [{"role": "user", "text": "q1"}, {"role": "assistant", "text": "a1"}]
    assert tasks[0].contexts == [{"doc_id": "d1", "title": "", "text": "t"}]
    with pytest.raises(ConfigError, match="variant"):
        load_generation_tasks(p, "my_bench")
    assert load_generation_tasks(p, "my_bench", variant="mtrag")[0][0].benchmark == "my_bench"


@pytest.mark.parametrize("line, message", [
    ("{not json", r"tasks.jsonl:2: malformed JSON line"),
    (_task(input=[{"speaker": "user", "text": "q1"}, {"speaker": "agent", "text": "a1"}]),
     r"tasks.jsonl:2: field 'input' must end with a non-empty user turn"),
    (_task(input=[]), r"tasks.jsonl:2: field 'input' must be a non-empty list"),
    (_task(answerability=["CONVERSATIONAL"]),
     r"tasks.jsonl:2: field 'answerability' value 'CONVERSATIONAL' is not one of"),
    (_task(answerability=["ANSWERABLE", "PARTIAL"]), r"tasks.jsonl:2: field 'answerability' must be a list with one"),
    (_task(turn=3), r"tasks.jsonl:2: field 'turn' is 3 but task_id 'c1<::>2' names turn 2"),
    (_task(task_id="c2<::>2"), r"tasks.jsonl:2: field 'conversation_id' 'c1' differs"),
    (_task(task_id="c1<::>1", turn=1, conversation_id="c1"), r"tasks.jsonl:2: field 'input' has 2 user turns"),
    (_task(Collection="banking"), r"tasks.jsonl:2: field 'Collection' 'banking' is not a known collection"),
    (_task(**{"Multi-Turn": ["Sideways"]}), r"tasks.jsonl:2: field 'Multi-Turn' value 'Sideways'"),
    (_task(contexts=[{"document_id": "d1"}]), r"tasks.jsonl:2: field 'contexts\[0\].text' must be a string"),
    (_task(input=[{"speaker": "bot", "text": "x"}]), r"tasks.jsonl:2: field 'input\[0\].speaker'"),
    (_task(), r"tasks.jsonl:2: field 'task_id': duplicate task id 'c1<::>2' \(first on line 1\)"),
])
def test_malformed_task_lines(tmp_path, line, message):
    p = _write(tmp_path, _task(), line)
    with pytest.raises(DataError, match=message):
        load_generation_tasks(p, "mtrag_un")


def test_duplicate_after_normalisation(tmp_path):
    p = _write(tmp_path, _task(), _task(task_id="c1::2"))
    with pytest.raises(DataError, match="duplicate task id 'c1<::>2'"):
        load_generation_tasks(p, "mtrag_un")


def test_qrels_unknown_task_strict_and_counted(tmp_path):
    tasks, _ = load_generation_tasks(_write(tmp_path, _task()), "mtrag_un")
    q = tmp_path / "qrels_fiqa.tsv"
    q.write_text("query-id\tcorpus-id\tscore\nc1::2\td1\t1\nzz<::>1\td2\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qrels_fiqa.tsv: query-id 'zz<::>1' is not a task"):
        attach_qrels(tasks, {"fiqa": q})
    out, report = attach_qrels(tasks, {"fiqa": q}, strict=False)
    assert out[0].gold_docs == {"d1": 1} and report["unknown_qrels_ids_list"] == ["zz<::>1"]
    assert report["ids_normalised"] == 1 and report["tasks_with_gold"] == 1
    with pytest.raises(DataError, match="is a fiqa task, but this is the govt qrels file"):
        attach_qrels(tasks, {"govt": q}, strict=False)


def test_retrieval_query_files_must_agree(tmp_path):
    last = _write(tmp_path, {"_id": "c::1", "text": "|user|: a"}, {"_id": "c<::>2", "text": "|user|: b"},
                  name="x_lastturn.jsonl")
    rew = _write(tmp_path, {"_id": "c<::>1", "text": "|user|: A"}, name="x_rewrite.jsonl")
    with pytest.raises(DataError, match=r"x_rewrite.jsonl: query file \(rewrite\) lacks task 'c<::>2'"):
        load_retrieval_tasks({"lastturn": last, "rewrite": rew}, None, "fiqa", "mtrag")
    q = tmp_path / "qrels.tsv"
    q.write_text("query-id\tcorpus-id\tscore\nc<::>1\td\t1\nc<::>9\td\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qrels.tsv: query-id 'c<::>9' has no query"):
        load_retrieval_tasks({"lastturn": last}, q, "fiqa", "mtrag")
    tasks, report = load_retrieval_tasks({"lastturn": last}, q, "fiqa", "mtrag", strict=False)
    assert report["unknown_qrels_ids"] == 1 and report["ids_normalised"] == 1 and report["tasks_without_gold"] == 1
    assert tasks["c<::>1"].gold_docs == {"d": 1}
    dup = _write(tmp_path, {"_id": "c<::>1", "text": "a"}, {"_id": "c::1", "text": "b"}, name="dup.jsonl")
    with pytest.raises(DataError, match=r"dup.jsonl:2: field '_id': duplicate query id 'c<::>1'"):
        load_beir_queries(dup)
    with pytest.raises(ConfigError, match="query kinds"):
        load_retrieval_tasks({"history": last}, None, "fiqa", "mtrag")


@pytest.mark.parametrize("lines, message", [
    ([{"title": "t", "text": "x"}], r"c.jsonl:1: field '_id' is missing"),
    ([{"_id": "a", "title": "t"}], r"c.jsonl:1: field 'text' is missing \(passage 'a'\)"),
    ([{"_id": "a", "text": "x"}, {"_id": "a", "text": "y"}], r"c.jsonl:2: field '_id': duplicate passage id 'a'"),
    ([{"_id": "a", "id": "b", "text": "x"}], r"c.jsonl:1: fields '_id' 'a' and 'id' 'b' disagree"),
    (["{oops"], r"c.jsonl:1: malformed JSON line"),
])
def test_malformed_corpus(tmp_path, lines, message):
    p = _write(tmp_path, *lines, name="c.jsonl")
    with pytest.raises(DataError, match=message):
        load_passage_corpus(p, "fiqa")


def test_malformed_zip_corpus(tmp_path):
    z = tmp_path / "two.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("a.jsonl", "")
        zf.writestr("b.jsonl", "")
    with pytest.raises(DataError, match="exactly one .jsonl file, found 2"):
        load_passage_corpus(z, "fiqa")
    z2 = tmp_path / "bad.jsonl.zip"
    with zipfile.ZipFile(z2, "w") as zf:
        zf.writestr("bad.jsonl", json.dumps({"_id": "a", "text": "x"}) + "\n" + json.dumps({"_id": "b"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl.zip\[bad.jsonl\]:2: field 'text' is missing"):
        load_passage_corpus(z2, "fiqa")


def test_malformed_conversations_and_evaluations(tmp_path):
    conv = [{"author": "a", "editor": "e", "domain": "fiqa", "messages": [
        {"speaker": "user", "text": "q", "enrichments": {"Answerability": ["UNDERSPECIFIED"]}},
        {"speaker": "agent", "text": "r", "contexts": []}]}]
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(conv), encoding="utf-8")
    with pytest.raises(DataError, match=r"conv.json: conversation 0 \(index-0\), message 0: field "
                                        r"'enrichments.Answerability' value 'UNDERSPECIFIED'"):
        load_conversations(p)
    ev = {"models": [{"model_id": "m"}], "metrics": [], "documents": [],
          "tasks": [{"task_id": "c<::>1", "Turn": "1", "Collection": "fiqa",
                     "input": [{"speaker": "user", "text": "q"}],
                     "targets": [{"text": "r"}], "contexts": [], "Answerability": ["ANSWERABLE"]}],
          "evaluations": [{"task_id": "c<::>1", "model_id": "m", "model_response": "r",
                           "annotations": {k: {"composite": {"value": 1}} for k in OFFICIAL_METRICS[:-1]}}]}
    p = tmp_path / "ev.json"
    p.write_text(json.dumps(ev), encoding="utf-8")
    with pytest.raises(DataError, match=r"ev.json: evaluations\[0\]: field 'annotations.conditional_idk' is missing"):
        load_human_evaluations(p)
