"""MTRAG's retrieval tasks as a benchmark (kind mtrag_retrieval), on the shared verbatim files:
777 tasks, the three query policies give the shipped texts, every qrels id is looked up in the
shared corpus sample (a sample: counted), and BM25 over it scores as pytrec_eval does."""

import json

import pytest

from convrag.data.benchmarks import benchmark_loader
from convrag.data.gold import check_gold
from convrag.data.mtrag import load_passage_corpus, strip_speaker_tags
from convrag.errors import ConfigError, DataError
from convrag.metrics.registry import score_task_runs
from convrag.metrics.retrieval import write_trec_run
from convrag.rag.policies import get_policy
from convrag.rag.retrieve import query_states
from convrag.retrieval import build_index, load_retriever

DOMS = ("clapnq", "cloud", "fiqa", "govt")
COUNTS = {"clapnq": 208, "cloud": 188, "fiqa": 180, "govt": 201}


def _spec(shared, tags="keep", domains=DOMS):
    files = {}
    for d in domains:
        for k in ("lastturn", "rewrite", "questions"):
            files[f"{d}_{k}.jsonl"] = {"local": str(shared / "mtrag_retrieval" / f"{d}_{k}.jsonl")}
        files[f"qrels_{d}.tsv"] = {"local": str(shared / "mtrag_retrieval" / f"qrels_{d}.tsv")}
        files[f"corpus_{d}.jsonl.zip"] = {"local": str(shared / "mtrag" / "corpus_sample" / f"{d}.jsonl")}
    return {"kind": "mtrag_retrieval", "domains": list(domains), "tags": tags, "files": files}


def _files(spec):
    return {n: f["local"] for n, f in spec["files"].items()}


def _lines(path):
    return {r["_id"]: r["text"] for r in map(json.loads, path.read_text().splitlines())}


@pytest.mark.realdata
def test_the_777_tasks_and_their_shipped_queries(shared_data):
    loader = benchmark_loader("mtrag_retrieval")
    spec = _spec(shared_data)
    loader.check("mtrag_r", spec, "cfg.yaml")
    tasks, report = loader.tasks("mtrag_r", spec, _files(spec))
    assert len(tasks) == report["tasks"] == 777 and report["domain"] == COUNTS
    assert report["tasks_with_gold"] == 777 and report["tasks_without_reference"] == 777
    for d in DOMS:
        shipped = {k: _lines(shared_data / "mtrag_retrieval" / f"{d}_{k}.jsonl") for k in ("lastturn", "rewrite",
                                                                                            "questions")}
        ts = [t for t in tasks if t.labels["domain"] == d]
        states = query_states(ts)
        for policy, kind in (("current", "lastturn"), ("rewrite", "rewrite"), ("history", "questions")):
            got = get_policy(policy).fn(states).queries
            assert got == [shipped[kind][t.task_id] for t in ts], (d, policy)
    stripped, _ = loader.tasks("mtrag_r", {**spec, "tags": "strip"}, _files(spec))
    t = stripped[0]
    assert t.question == strip_speaker_tags(tasks[0].question) and "|user|" not in t.rewrite


@pytest.mark.realdata
def test_qrels_ids_against_the_corpus_sample_are_counted(shared_data):
    loader = benchmark_loader("mtrag_retrieval")
    spec = _spec(shared_data)
    tasks, _ = loader.tasks("mtrag_r", spec, _files(spec))
    missing = {}
    for d in DOMS:
        passages = loader.corpus("mtrag_r", spec, d, _files(spec))
        r = check_gold(tasks, (p.doc_id for p in passages), benchmark="mtrag_r", domain=d, allow_missing=True)
        assert r["turns"] == COUNTS[d] and r["missing_ids"] > 0  # a sample: most gold passages are not in it
        missing[d] = (r["gold_ids"] - r["missing_ids"], r["gold_ids"])
        with pytest.raises(DataError, match=f"benchmark 'mtrag_r', domain '{d}'"):
            check_gold(tasks, (p.doc_id for p in passages), benchmark="mtrag_r", domain=d, allow_missing=False)
    assert all(0 < found < total for found, total in missing.values()), missing


@pytest.mark.realdata
def test_bm25_over_the_sample_scores_as_pytrec_eval(shared_data, tmp_path):
    """The workflow's scoring (ir_measures over the tasks' graded qrels) equals pytrec_eval run here
    on the same BM25 runs, per domain, for R@5 and nDCG@10 (the last-turn and rewrite queries)."""
    import pytrec_eval

    loader = benchmark_loader("mtrag_retrieval")
    spec = _spec(shared_data)
    tasks, _ = loader.tasks("mtrag_r", spec, _files(spec))
    runs, ours = [], {}
    for d in DOMS:
        corpus = tmp_path / f"{d}.jsonl"
        corpus.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in load_passage_corpus(
            spec["files"][f"corpus_{d}.jsonl.zip"]["local"], d)))
        build_index("bm25", corpus, tmp_path / f"idx_{d}", {"backend": "bm25s"})
        retriever = load_retriever("bm25", tmp_path / f"idx_{d}", {"backend": "bm25s"})
        ts = [t for t in tasks if t.labels["domain"] == d]
        for policy in ("current", "rewrite"):
            queries = get_policy(policy).fn(query_states(ts)).queries
            hits = retriever.search(queries, 10)
            run = {t.task_id: {doc: float(s) for doc, s in h} for t, h in zip(ts, hits)}
            path = tmp_path / f"{d}.{policy}.trec"
            write_trec_run(path, run)
            runs.append({"retriever": "bm25", "policy": policy, "domain": d, "path": str(path)})
            qrels = {t.task_id: dict(t.gold_docs) for t in ts}
            ev = pytrec_eval.RelevanceEvaluator(qrels, {"recall.5", "ndcg_cut.10"}).evaluate(run)
            ours[(d, policy)] = {"R@5": sum(v["recall_5"] for v in ev.values()) / len(qrels),
                                 "nDCG@10": sum(v["ndcg_cut_10"] for v in ev.values()) / len(qrels)}
    df = score_task_runs(tasks, runs, ["R@5", "nDCG@10"])
    means = df.groupby(["domain", "policy", "measure"])["value"].mean()
    for (d, policy), ref in ours.items():
        for m, v in ref.items():
            assert means[(d, policy, m)] == pytest.approx(v, abs=1e-9), (d, policy, m)
    # low over all 777 tasks (the sample holds the gold of 12 conversations), but not zero anywhere
    assert all(v["R@5"] > 0 for v in ours.values()), ours


def test_config_errors_name_the_key():
    loader = benchmark_loader("mtrag_retrieval")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.domains\[0\]': unknown domain 'banking'"):
        loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "domains": ["banking"]}, "c.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.tags': keep or strip"):
        loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "tags": "drop"}, "c.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.revision': required"):
        loader.check("m", {"kind": "mtrag_retrieval"}, "c.yaml")
    raw = loader.raw_files({"kind": "mtrag_retrieval", "revision": "cc5b1d481b391181b89f7ced860308482e785463",
                            "domains": ["govt"]})
    assert raw["qrels_govt.tsv"] == {
        "url": "https://raw.githubusercontent.com/IBM/mt-rag-benchmark/cc5b1d481b391181b89f7ced860308482e785463/"
               "mtrag-human/retrieval_tasks/govt/qrels/dev.tsv",
        "sha256": "46acb9b882297b6ff68978a56fd4ec57ea1c340cd604c62787a9ad69ac880d34",
        "git_blob": "df107d48d8cc5bbe8986471b6649b20602a1e97f"}
    assert raw["corpus_govt.jsonl.zip"]["git_blob"] == "f76cf8ce044d077a7a284b8276fc1970feda7ae3"


@pytest.mark.realdata
def test_mtrag_conversation_ids_from_the_shipped_questions_files(shared_data):
    """IBM ships no conversation_index_to_id.tsv: the ids rebuilt from the retrieval tasks'
    questions files equal those of the fork's tsv on the 12 sampled conversations."""
    from convrag.data.mtrag import load_conversations

    src = shared_data / "mtrag" / "conversations"
    qs = {d: shared_data / "mtrag_retrieval" / f"{d}_questions.jsonl" for d in DOMS}
    a, ra = load_conversations(src / "conversations.sample.json", questions=qs)
    b, _ = load_conversations(src / "conversations.sample.json", src / "conversation_index_to_id.tsv")
    assert [t.task_id for t in a] == [t.task_id for t in b] and len(a) == 73 and ra["ids_from_queries"] == 12
    with pytest.raises(DataError, match=r"conversation 0 \(clapnq.*matches no retrieval task"):
        load_conversations(src / "conversations.sample.json", questions={"clapnq": qs["govt"]})
