"""The real-data grid (config/studies/lic_rag_sample.yaml) on a slice: MuSiQue 2-hop questions
from ../shared/data with closed book and BM25, FULL / CONCAT / SHARDED / RECAP, through
Snakemake with the real SmolLM2 model: real loaders, real corpus, real shard fallback, every
table of the study built."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT

pytestmark = [pytest.mark.workflow, pytest.mark.tinymodel, pytest.mark.realdata]


def test_sample_grid_slice(shared_data, tmp_path):
    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "lic_rag_sample.yaml").read_text())
    for c in cfg["corpora"].values():  # the config's paths are relative to the repo root
        c["local"] = {k: str((REPO_ROOT / v).resolve()) for k, v in c["local"].items()}
    cfg["datasets"]["musique_2hop"]["n_questions"] = 3
    lic = cfg["lic_rag"]
    lic.update(datasets=["musique_2hop"], retrievers=["closed_book", "bm25"],
               conditions=["FULL", "CONCAT", "SHARDED", "RECAP"], policies=["history"], runs=1,
               top_k=2, max_extra_turns=0)  # 2 passages, no nudge turn: shorter prompts, CI time
    lic["assistant"]["max_tokens"] = 20  # CI time (the config's 40): the assertions read no answer text
    lic["sharding"].update(attempts=1, max_tokens=64)  # a 2-hop question's shards fit in 64 tokens
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")],
                          capture_output=True, text=True, env=env, timeout=2400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    out = tmp_path / "results" / "sample"
    qs = [json.loads(x) for x in (out / "datasets/musique_2hop/questions.jsonl").read_text().splitlines()]
    assert len(qs) == 3 and all(q["hops"] == 2 and q["qid"].startswith("2hop") for q in qs)
    corpus = (out / "corpora/musique/corpus.jsonl").read_text().splitlines()
    assert len(corpus) == 1890  # the full sample corpus, loaded from ../shared/data
    sets = [json.loads(x) for x in (out / "lic_rag/shards/musique_2hop/final.jsonl").read_text().splitlines()]
    passed = [s for s in sets if s["passed"]]
    assert len(sets) == 3 and passed, "no MuSiQue question entered the grid"
    t1 = pd.read_csv(out / "lic_rag/tables/datasets.csv").iloc[0]
    assert t1.questions == 3 and t1.in_grid == len(passed) and t1.corpus_passages == 1890
    scores = pd.read_parquet(out / "lic_rag/scores/conversations.parquet")
    # closed book and BM25 each: FULL, CONCAT, SHARDED, RECAP (one policy) x the passed questions x 1 run
    assert set(scores.condition) == {"FULL", "CONCAT", "SHARDED", "RECAP"} and len(scores) == len(passed) * 2 * 4
    bm = pd.read_parquet(out / "lic_rag/scores/turns.parquet")
    bm = bm[bm.retriever == "bm25"]
    assert bm["recall@5"].notna().all() and bm["recall@5"].between(0, 1).all()
    # every supporting passage id of a question is in the real corpus (recall is meaningful)
    ids = {json.loads(x)["doc_id"] for x in corpus}
    assert all(d in ids for q in qs for d in q["supporting_doc_ids"])
    t2 = pd.read_csv(out / "lic_rag/tables/table2_full_vs_sharded.csv")
    assert set(t2[t2.dataset != "all"].retriever) == {"closed_book", "bm25"} and (t2.n_questions == len(passed)).all()
    for name in ("decomposition", "recovery", "information_preservation"):
        assert (out / f"lic_rag/tables/{name}.md").exists()
