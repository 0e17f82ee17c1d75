"""Adding a retriever kind is one module: a kind written into a temporary folder (named in the
config's ``retriever_plugins``) is validated, planned and searched by the shared rules, and
mtrag_un's Table 2 is built with it through Snakemake; no file of the repository changes
(docs/adding_a_retriever.md)."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convrag.config import validate_config
from convrag.errors import ConfigError
from plugin_run import git_status, plan_and_build

KIND = '''
"""Word overlap: a passage scores the number of distinct query words it contains (a retriever
kind written by a test): no model, one JSON file as its index."""

import json
import re
import time
from pathlib import Path

from convrag.retrieval.base import (Capabilities, Retriever, SearchResult, check_k, check_manifest, normalize_params,
                                    passage_text, read_corpus, staging_dir, write_manifest)

CAPABILITIES = Capabilities()  # no graph, no LLM, cheap
DEFAULTS = {"min_length": 3}  # words shorter than this are left out


def _words(text, p):
    return {w for w in re.findall(r"\\w+", text.lower()) if len(w) >= p["min_length"]}


def build(corpus_path, out_dir, params):
    p = normalize_params("word_overlap", params, DEFAULTS)
    t0, passages = time.perf_counter(), read_corpus(corpus_path)
    with staging_dir(out_dir) as tmp:
        (tmp / "words.json").write_text(json.dumps({x.doc_id: sorted(_words(passage_text(x), p)) for x in passages}))
        write_manifest(tmp, "word_overlap", p, corpus_path, len(passages), time.perf_counter() - t0)


class WordOverlap(Retriever):
    name = "word_overlap"

    def __init__(self, index_dir, p):
        self.p = p
        self.words = {d: set(w) for d, w in json.loads((Path(index_dir) / "words.json").read_text()).items()}

    def search(self, queries, k):
        check_k(k)
        hits = []
        for q in queries:
            qw = _words(q, self.p)
            ranked = sorted((-len(qw & w), d) for d, w in self.words.items() if qw & w)[:k]
            hits.append([(d, float(-s)) for s, d in ranked])
        return SearchResult(hits)


def load(index_dir, params, corpus_path=None):
    p = normalize_params("word_overlap", params, DEFAULTS)
    check_manifest(index_dir, "word_overlap", p, corpus_path=corpus_path)
    return WordOverlap(index_dir, p)
'''

BENCHMARK = {"kind": "miniworld_mtrag", "domains": {"alpha": {"seed": 21, "conversations": 2}}}



def _write_kind(tmp_path: Path) -> Path:
    home = tmp_path / "kinds"
    home.mkdir()
    (home / "word_overlap.py").write_text(KIND.lstrip())
    return home


def _config(home: Path, **retriever) -> dict:
    return {"studies": ["mtrag_un"], "retriever_plugins": [str(home)], "warm_start": False,
            "benchmarks": {"mini": BENCHMARK},
            "retrievers": {"overlap": {"kind": "word_overlap", **retriever}},
            "mtrag_un": {"benchmark": "mini", "retrievers": ["overlap"], "policies": ["current"], "retrieval_k": 5,
                         "generation": {"models": []}}}


def test_a_plug_in_kind_is_validated_by_its_own_defaults(tmp_path):
    home = _write_kind(tmp_path)
    cfg = validate_config(_config(home, params={"min_length": 2}))
    assert cfg["retriever_plugins"] == [str(home)]
    with pytest.raises(ConfigError, match=r"'retrievers\.overlap\.params\.min_len': not a param of retriever kind "
                                          r"'word_overlap' \(known: min_length\); did you mean 'min_length'"):
        validate_config(_config(home, params={"min_len": 2}))
    cfg = _config(home)
    cfg["retrievers"]["overlap"]["kind"] = "word_overlaps"
    with pytest.raises(ConfigError, match=r"'retrievers\.overlap\.kind': unknown retriever kind 'word_overlaps' "
                                          r"\(known: .*word_overlap\); did you mean 'word_overlap'"):
        validate_config(cfg)
    cfg["retriever_plugins"] = [str(tmp_path / "none")]
    with pytest.raises(ConfigError, match=r"'retriever_plugins': retriever kind plug-in folder .*none: not a folder"):
        validate_config(cfg)


@pytest.mark.workflow
def test_a_retriever_kind_in_a_temporary_folder_plans_and_builds_a_table(tmp_path):
    before = git_status()
    home = _write_kind(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(_config(home)))
    table = "results/mtrag_un/tables/table2_retrieval.csv"
    planned = plan_and_build(tmp_path, table, unset_env="CONVRAG_RETRIEVER_PATH")  # the config alone names the folder
    assert {"build_index", "mtrag_un_retrieve", "study_table"} <= planned, planned

    # the index the rule built is the plug-in's, and the run holds its ranking of every task
    index = tmp_path / "results/indexes/mini.alpha/overlap"
    assert yaml.safe_load((index / "manifest.json").read_text())["retriever"] == "word_overlap"
    spec = importlib.util.spec_from_file_location("word_overlap_here", home / "word_overlap.py")
    kind = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kind)
    from convrag.records import TurnTask, read_records

    tasks = read_records(tmp_path / "results/benchmarks/mini/tasks.jsonl", TurnTask)
    want = kind.load(index, {}).search([t.question for t in tasks], 5)
    runs = list((tmp_path / "results").rglob("*.trec"))
    assert len(runs) == 1, runs
    got: dict[str, list[str]] = {}
    for line in runs[0].read_text().splitlines():
        qid, _, doc, rank, _, _ = line.split()
        got.setdefault(qid, []).append(doc)
    assert got == {t.task_id: [d for d, _ in hits] for t, hits in zip(tasks, want) if hits}
    # Table 2 holds the scores of that ranking: R@5 of the tasks with gold, the study's measure
    from convrag.metrics.registry import retrieval_scores

    qrels = {t.task_id: t.gold_docs for t in tasks if t.gold_docs}
    run = {t.task_id: dict(hits) for t, hits in zip(tasks, want) if t.task_id in qrels}
    expected = retrieval_scores(run, qrels, ["R@5", "nDCG@10"])
    rows = pd.read_csv(tmp_path / table).set_index("domain")
    assert set(rows.retriever) == {"overlap"} and rows.loc["alpha", "tasks"] == len(qrels) > 0, rows.to_string()
    for m in ("R@5", "nDCG@10"):
        assert rows.loc["alpha", m] == pytest.approx(expected[m].mean()), rows.to_string()
    assert 0 < rows.loc["alpha", "R@5"] < 1  # the toy ranking finds some gold, not all
    assert git_status() == before  # no file of the repository was edited or added
