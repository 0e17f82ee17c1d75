"""Gold and qrels integrity (convrag.data.gold): a gold id missing from the corpus fails the run,
naming the benchmark and the id, unless the config says the corpus is a sample; then it is
counted and every retrieval table built on it says so in its caption."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.data.gold import caption_note, check_gold
from convrag.errors import DataError
from convrag.records import TurnTask


def _task(tid, domain, gold):
    return TurnTask(task_id=tid, benchmark="b", conversation_id=tid[0], turn=1, history=[], question="q",
                    gold_docs=gold, labels={"domain": domain})


def test_check_gold_counts_per_domain_and_names_the_first_ids():
    tasks = [_task("a1", "x", {"d1": 1, "d2": 2}), _task("b1", "x", {"d3": 1}), _task("c1", "x", {}),
             _task("e1", "y", {"zz": 1})]  # another domain: not this corpus's business
    r = check_gold(tasks, ["d1", "d9"], benchmark="b", domain="x", allow_missing=True)
    assert (r["turns"], r["turns_with_gold"], r["gold_ids"], r["qrels_rows"]) == (3, 2, 3, 3)
    assert (r["missing_ids"], r["missing_rows"], r["turns_with_missing_gold"], r["turns_with_no_gold_in_corpus"]) \
        == (2, 2, 2, 1)
    assert r["first_missing"] == [{"doc_id": "d2", "task_id": "a1"}, {"doc_id": "d3", "task_id": "b1"}]
    with pytest.raises(DataError) as e:
        check_gold(tasks, ["d1", "d9"], benchmark="b", domain="x", allow_missing=False, corpus="c.jsonl")
    msg = str(e.value)
    assert "benchmark 'b', domain 'x': 2 of 3 gold/qrels document ids" in msg
    assert "'d2' (task 'a1'), 'd3' (task 'b1')" in msg and "benchmarks.b.allow_missing_gold: true" in msg
    assert check_gold(tasks, ["d1", "d2", "d3"], benchmark="b", domain="x", allow_missing=False)["missing_ids"] == 0
    assert caption_note([r]) == ("Gold not in the corpus (allow_missing_gold: the corpus is a sample; a missing gold "
                                 "passage can never be retrieved, so recall and nDCG are lower bounds): b x 2 of 3 ids "
                                 "(1 of 2 turns with no gold left).")
    assert caption_note([{**r, "missing_ids": 0}]) == ""


def _env():
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def _snakemake(workdir: Path, cfg: dict, *targets: str) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           *targets, "--directory", str(workdir), "--configfile", str(workdir / "config.yaml")],
                          capture_output=True, text=True, env=_env(), timeout=900)


@pytest.mark.workflow
@pytest.mark.realdata
def test_unknown_gold_id_fails_the_run_unless_the_corpus_is_a_sample(shared_data, tmp_path):
    """MTRAG's real conversations (the shared sample): one relevant passage's id replaced by an
    unknown one. Without the flag the run fails naming the benchmark and the id; with
    ``allow_missing_gold: true`` it builds and Table 2's caption and the gold report count it."""
    sample = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un_sample.yaml").read_text())
    bench = sample["benchmarks"]["mtrag_sample"]
    files = {k: {"local": str((REPO_ROOT / v["local"]).resolve())} for k, v in bench["files"].items()}
    convs = json.loads(Path(files["conversations.json"]["local"]).read_text())
    changed = None
    for conv in convs:  # the first clapnq passage the editor judged relevant
        if changed is None and "clapnq" in conv["domain"]:
            for m in conv["messages"]:
                for c in m.get("contexts") or []:
                    if changed is None and (c.get("feedback") or {}).get("relevant", {}).get(conv["editor"], {}).get(
                            "value") == "yes":
                        changed, c["document_id"] = c["document_id"], "no-such-passage-0001"
    assert changed is not None
    (tmp_path / "conversations.json").write_text(json.dumps(convs))
    files["conversations.json"] = {"local": str(tmp_path / "conversations.json")}
    cfg = {"studies": ["mtrag_un"], "results_dir": "results", "warm_start": False,
           "benchmarks": {"mtrag_sample": {**bench, "allow_missing_gold": False, "domains": ["clapnq"], "files": files}},
           "retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "bm25s", "k1": 0.9, "b": 0.4}}},
           "mtrag_un": {"benchmark": "mtrag_sample", "retrievers": ["bm25"], "policies": ["current"],
                        "generation": {"models": []}}}
    table = "results/mtrag_un/tables/table2_retrieval.md"
    proc = _snakemake(tmp_path, cfg, table)
    assert proc.returncode != 0
    log = (tmp_path / "results/logs/benchmark_corpus/mtrag_sample.clapnq.log").read_text()
    assert "benchmark 'mtrag_sample', domain 'clapnq': 1 of" in log and "'no-such-passage-0001'" in log, log[-2000:]
    assert not (tmp_path / "results/corpora/mtrag_sample.clapnq/corpus.jsonl").exists()

    cfg["benchmarks"]["mtrag_sample"]["allow_missing_gold"] = True
    proc = _snakemake(tmp_path, cfg, table)
    assert proc.returncode == 0, proc.stderr[-3000:]
    gold = json.loads((tmp_path / "results/corpora/mtrag_sample.clapnq/gold.json").read_text())
    assert gold["missing_ids"] == 1 and gold["first_missing"][0]["doc_id"] == "no-such-passage-0001"
    assert gold["allow_missing_gold"] is True and gold["gold_ids"] > 1
    md = (tmp_path / table).read_text()
    assert f"mtrag_sample clapnq 1 of {gold['gold_ids']} ids" in md, md[:1500]
