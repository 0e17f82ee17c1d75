"""MTRAG's retrieval tasks as a benchmark (kind mtrag_retrieval), on the shared verbatim files:
777 tasks, the three query policies give the shipped texts, every qrels id is looked up in the
shared corpus sample (a sample: counted), and BM25 over it scores as pytrec_eval does."""

import json

import pytest

from convrag.data.benchmarks import benchmark_loader
from convrag.data.gold import check_gold
from convrag.data.mtrag import QUERY_FILES, load_passage_corpus, strip_speaker_tags
from convrag.errors import ConfigError, DataError
from convrag.metrics.registry import score_task_runs
from convrag.metrics.retrieval import write_trec_run
from convrag.rag.policies import get_policy
from convrag.rag.retrieve import query_states
from convrag.retrieval import build_index, load_retriever
from convrag.studies.worse_labels.retrieve import query_texts

from mtrag_helpers import local_retrieval_spec

DOMS = ("clapnq", "cloud", "fiqa", "govt")
COUNTS = {"clapnq": 208, "cloud": 188, "fiqa": 180, "govt": 201}


def _spec(shared, tags="keep", domains=DOMS):
    return local_retrieval_spec(shared, domains, tags=tags)


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
    assert (report["tasks_without_gold"], report["ids_normalised"], report["tags"]) == (0, 0, "keep")
    assert report["conversations"] == 110
    for d in DOMS:
        shipped = {k: _lines(shared_data / "mtrag_retrieval" / f"{d}_{k}.jsonl") for k in ("lastturn", "rewrite",
                                                                                            "questions")}
        ts = [t for t in tasks if t.labels["domain"] == d]
        assert [t.task_id for t in ts] == list(shipped["lastturn"])  # the shipped order, ids as shipped
        assert all(t.task_id == f"{t.conversation_id}<::>{t.turn}" for t in ts)
        states = query_states(ts)
        for kind, policy in QUERY_FILES.items():
            got = get_policy(policy).fn(states).queries
            assert got == [shipped[kind][t.task_id] for t in ts], (d, policy)
            # worse_labels' ladder rungs (query: current / rewrite / history) read the same shipped texts
            assert query_texts(ts, policy) == got, (d, policy)
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
    # (found in the sample, distinct qrels ids): counted from the shared files
    assert missing == {"clapnq": (35, 499), "cloud": (37, 415), "fiqa": (34, 479), "govt": (197, 407)}, missing


# BM25 (bm25s, k1 0.9, b 0.4) over the shared corpus sample, all 777 tasks: (R@5, nDCG@10) per
# domain and policy, as pytrec_eval computes them. Low because the sample holds the gold passages
# of 12 of the 110 conversations (govt: of more), but not zero anywhere.
BM25_SAMPLE = {
    ("clapnq", "current"): (0.028446, 0.031392), ("clapnq", "rewrite"): (0.035657, 0.038920),
    ("clapnq", "history"): (0.025240, 0.029837),
    ("cloud", "current"): (0.026520, 0.032279), ("cloud", "rewrite"): (0.032725, 0.036643),
    ("cloud", "history"): (0.018364, 0.022768),
    ("fiqa", "current"): (0.012500, 0.011206), ("fiqa", "rewrite"): (0.012500, 0.011816),
    ("fiqa", "history"): (0.008796, 0.006084),
    ("govt", "current"): (0.288695, 0.305845), ("govt", "rewrite"): (0.355635, 0.356462),
    ("govt", "history"): (0.263314, 0.275677),
}


def _official_qrels(path):
    """Qrels read as MTRAG's scorer reads them (scripts/evaluation/run_retrieval_eval.py
    load_qrels: csv, tab, header skipped, int scores), independently of the loader."""
    import csv

    qrels = {}
    with open(path, encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        next(reader)
        for q, c, score in reader:
            qrels.setdefault(q, {})[c] = int(score)
    return qrels


def _pytrec(qrels, run):
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recall.5", "ndcg_cut.10"}).evaluate(run)
    return (sum(v["recall_5"] for v in ev.values()) / len(ev), sum(v["ndcg_cut_10"] for v in ev.values()) / len(ev),
            len(ev))


@pytest.mark.realdata
def test_bm25_over_the_sample_scores_as_pytrec_eval(shared_data, tmp_path):
    """The workflow's scoring (ir_measures over the tasks' graded qrels) equals pytrec_eval run here
    on the same BM25 runs with the qrels read from the shipped files as MTRAG's scorer reads them,
    per domain, for R@5 and nDCG@10 (the last-turn, rewrite and all-questions queries)."""

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
        qrels = _official_qrels(shared_data / "mtrag_retrieval" / f"qrels_{d}.tsv")
        for policy in ("current", "rewrite", "history"):
            queries = get_policy(policy).fn(query_states(ts)).queries
            hits = retriever.search(queries, 10)
            run = {t.task_id: {doc: float(s) for doc, s in h} for t, h in zip(ts, hits)}
            path = tmp_path / f"{d}.{policy}.trec"
            write_trec_run(path, run)
            runs.append({"retriever": "bm25", "policy": policy, "domain": d, "path": str(path)})
            r5, ndcg, n = _pytrec(qrels, run)
            assert n == COUNTS[d]  # every task scored (pytrec_eval skips a query with no hits)
            ours[(d, policy)] = {"R@5": r5, "nDCG@10": ndcg}
    df = score_task_runs(tasks, runs, ["R@5", "nDCG@10"])
    means = df.groupby(["domain", "policy", "measure"])["value"].mean()
    assert df.groupby(["domain", "policy", "measure"])["value"].size().to_dict() == {
        (d, p, m): COUNTS[d] for d, p in ours for m in ("R@5", "nDCG@10")}
    for (d, policy), ref in ours.items():
        for m, v in ref.items():
            assert means[(d, policy, m)] == pytest.approx(v, abs=1e-9), (d, policy, m)
        assert (ref["R@5"], ref["nDCG@10"]) == pytest.approx(BM25_SAMPLE[(d, policy)], abs=1e-6), (d, policy)


def test_config_errors_name_the_key():
    loader = benchmark_loader("mtrag_retrieval")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.domains\[0\]': unknown domain 'banking'"):
        loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "domains": ["banking"]}, "c.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.tags': keep or strip"):
        loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "tags": "drop"}, "c.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.revision': required"):
        loader.check("m", {"kind": "mtrag_retrieval"}, "c.yaml")
    loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "allow_missing_gold": True}, "c.yaml")
    with pytest.raises(ConfigError, match=r"'benchmarks\.m\.allow_missing_gold': true or false, got 'yes'"):
        loader.check("m", {"kind": "mtrag_retrieval", "revision": "a" * 40, "allow_missing_gold": "yes"}, "c.yaml")
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


@pytest.mark.workflow
@pytest.mark.realdata
def test_workflow_runs_the_ladder_on_the_retrieval_tasks(shared_data, tmp_path):
    """Snakemake on a benchmark entry of kind mtrag_retrieval with the shared files (govt only,
    ``allow_missing_gold: true``: the corpus is a sample) and worse_labels' three BM25 rungs of
    Table 3: the gold check counts the missing qrels ids, each rung's queries are the shipped texts,
    and pytrec_eval over the workflow's TREC runs gives the values above."""
    import os
    import subprocess
    import sys

    import yaml

    from convrag.config import REPO_ROOT

    spec = _spec(shared_data, domains=("govt",))
    del spec["tags"]  # the default: keep
    rungs = {"questions_bm25": "history", "last_bm25": "current", "rewrite_bm25": "rewrite"}  # rung -> query policy
    judge = "smollm2-135m"  # named by the study's schema; no target below calls a model
    cfg = {"studies": ["worse_labels"], "results_dir": "results", "warm_start": False,
           "benchmarks": {"mtrag_r": {**spec, "allow_missing_gold": True}},
           "retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "bm25s", "k1": 0.9, "b": 0.4}}},
           "worse_labels": {"slices": {"mtrag": {"benchmark": "mtrag_r", "answerability": None, "ladder": {
               r: {"kind": "query", "retriever": "bm25", "query": q} for r, q in rungs.items()}}},
               "main": "mtrag", "replication": None, "readers": {"models": [judge]},
               "judges": {"content": [judge], "primary": judge, "answer": {"model": judge},
                          "audit": {"model": judge}}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    runs = {r: f"results/worse_labels/runs/mtrag/eval/{r}/govt" for r in rungs}
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile",
                           str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "--", *(p + ".trec" for p in runs.values())],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "results/benchmarks/mtrag_r/report.json").read_text())
    assert (report["kind"], report["tasks"], report["domain"]) == ("mtrag_retrieval", 201, {"govt": 201})
    gold = json.loads((tmp_path / "results/corpora/mtrag_r.govt/gold.json").read_text())
    assert (gold["gold_ids"], gold["missing_ids"], gold["allow_missing_gold"]) == (407, 210, True)
    shipped = {k: _lines(shared_data / "mtrag_retrieval" / f"govt_{k}.jsonl") for k in ("lastturn", "rewrite",
                                                                                         "questions")}
    qrels = _official_qrels(shared_data / "mtrag_retrieval" / "qrels_govt.tsv")
    shipped_file = {policy: kind for kind, policy in QUERY_FILES.items()}
    for rung, policy in rungs.items():
        queries = {r["task_id"]: r["query"] for r in map(json.loads, (tmp_path / (runs[rung] + ".queries.jsonl"))
                                                         .read_text().splitlines())}
        assert queries == shipped[shipped_file[policy]], rung
        run = {}
        for line in (tmp_path / (runs[rung] + ".trec")).read_text().splitlines():
            qid, _, doc, _, score, _ = line.split()
            run.setdefault(qid, {})[doc] = float(score)
        r5, ndcg, n = _pytrec(qrels, run)
        assert n == 201 and (r5, ndcg) == pytest.approx(BM25_SAMPLE[("govt", policy)], abs=1e-6), rung
