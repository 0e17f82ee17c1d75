"""A short `convrag lic-rag simulate` job with `backend: vllm`, run as the workflow runs it (CLI).

Inputs are made by the project's own stages from the default config's mini world:
prepare-corpus, select-questions, build-index (bm25), shard (one LLM attempt on vLLM, the least the
sharding settings allow; the mini world's decomposition is the fallback, so every question gets a
shard set whether or not SmolLM2's passes the checks). The job is SHARDED x history
with BM25, so the assistant and the user simulator both run on vLLM over several turns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from lane_helpers import REPO

MODEL = "smollm2-135m-vllm"
SIM_KEYS = ("runs", "chunk_size", "top_k", "seed", "max_extra_turns", "assistant", "user_simulator")


def convrag(*args, timeout=600):
    cmd = [sys.executable, "-m", "convrag.cli", *map(str, args)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[2:5])} ... failed ({p.returncode}):\n{p.stderr[-6000:]}")
    return p, time.perf_counter() - t0


@pytest.fixture(scope="module")
def inputs(out_dir, registry_path):
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    d = out_dir / "simulate"
    shutil.rmtree(d, ignore_errors=True)  # a fresh LLM cache: the first job must call vLLM
    corpus = d / "corpora" / "miniworld"
    convrag("prepare-corpus", "--name", "miniworld", "--spec", json.dumps(cfg["corpora"]["miniworld"]),
            "--out-dir", corpus)
    questions = d / "datasets" / "miniworld" / "questions.jsonl"
    convrag("select-questions", "--dataset", "miniworld", "--spec", json.dumps(cfg["datasets"]["miniworld"]),
            "--questions", corpus / "questions_all.jsonl", "--out", questions)
    index = d / "indexes" / "miniworld" / "bm25"
    bm25 = cfg["retrievers"]["bm25"]
    convrag("build-index", "--retriever", bm25["kind"], "--params", json.dumps(bm25["params"]),
            "--corpus", corpus / "corpus.jsonl", "--out-dir", index)
    shards = d / "shards" / "miniworld" / "shards.jsonl"
    convrag("shard", "--questions", questions, "--prompts", REPO / "resources/prompts/shard.yaml",
            "--model", MODEL, "--registry", registry_path, "--cache", d / "cache" / "llm.sqlite",
            "--settings", json.dumps({"attempts": 1, "fallback": "decomposition"}), "--out", shards,
            "--report", shards.parent / "shard_report.md", "--accounting", shards.parent / "accounting.json")
    settings = {k: cfg["lic_rag"][k] for k in SIM_KEYS}
    return {"dir": d, "corpus": corpus / "corpus.jsonl", "questions": questions, "index": index,
            "shards": shards, "settings": settings, "bm25": bm25, "cache": d / "cache" / "llm.sqlite",
            "n_questions": cfg["datasets"]["miniworld"]["n_questions"]}


def simulate(inp, registry_path, name):
    out_dir = inp["dir"] / "conversations" / "miniworld" / MODEL / f"bm25{name}"
    out, acc = out_dir / "SHARDED_history" / "chunk0.jsonl", out_dir / "chunk0.accounting.json"
    p, seconds = convrag(
        "lic-rag", "simulate", "--questions", inp["questions"], "--shards", inp["shards"], "--corpus", inp["corpus"],
        "--index-dir", inp["index"], "--retriever", inp["bm25"]["kind"],
        "--retriever-params", json.dumps(inp["bm25"]["params"]), "--retriever-name", "bm25",
        "--prompts", REPO / "resources/prompts/lic_rag/assistant.yaml", "--dataset", "miniworld",
        "--model", MODEL, "--user-model", MODEL, "--cells", "SHARDED:history",
        "--chunk", 0, "--settings", json.dumps(inp["settings"]), "--registry", registry_path,
        "--cache", inp["cache"], "--threads", 2, "--out-dir", out_dir, "--accounting", acc, timeout=900)
    convs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return convs, json.loads(acc.read_text(encoding="utf-8")), seconds


def test_simulate_with_vllm_backend(inputs, registry_path):
    shardsets = [json.loads(x) for x in inputs["shards"].read_text().splitlines() if x.strip()]
    assert shardsets and all(s["passed"] and s["method"] in ("llm", "decomposition") for s in shardsets)
    assert len(shardsets) == inputs["n_questions"]

    convs, acc, seconds = simulate(inputs, registry_path, "")
    a = acc["assistant"]
    print(f"\nsimulate (vllm): {len(convs)} conversations in {seconds:.1f} s; assistant calls {a['calls']} "
          f"in {a['batches']} batches, load {a['load_seconds']:.1f} s, backend {a['backend_seconds']:.1f} s, "
          f"tokens {a['backend_prompt_tokens']}+{a['backend_completion_tokens']}")
    n = len(shardsets) * inputs["settings"]["runs"]
    assert len(convs) == n == acc["job"]["conversations"]
    for c in convs:
        assert c["model"] == MODEL and c["condition"] == "SHARDED" and c["retriever"] == "bm25"
        roles = [t["role"] for t in c["turns"]]
        assert roles[0] == "user" and "assistant" in roles
        assert all(t["text"].strip() for t in c["turns"] if t["role"] == "assistant")
        assert any(t.get("retrieved") for t in c["turns"])  # BM25 passages went with the turns
    # accounting: the backend ran (vLLM loaded once) and paid tokens; turns were batched
    assert a["calls"] > 0 and a["batches"] > 0 and a["load_seconds"] > 0
    assert a["backend_prompt_tokens"] > 0 and a["backend_completion_tokens"] > 0
    assert a["batches"] < a["calls"]
    # same model: the roles have their own accounting but share one loaded backend
    assert acc["user_simulator"]["calls"] > 0 and acc["user_simulator"]["load_seconds"] < 1.0

    # The same job again is answered from the SQLite cache: vLLM is never started.
    again, acc2, seconds2 = simulate(inputs, registry_path, "_rerun")
    a2 = acc2["assistant"]
    print(f"rerun from cache: {seconds2:.1f} s, calls {a2['calls']}, cache hits {a2['cache_hits']}")
    assert a2["calls"] == 0 and a2["load_seconds"] == 0 and a2["cache_hits"] > 0
    assert [c["turns"] for c in again] == [c["turns"] for c in convs]
