"""Lockstep batching vs one conversation at a time, on the same backend and conversations.

Runs the lic_rag SHARDED simulation (BM25 retrieval, HISTORY policy) on mini-world
questions twice with the real packaged SmolLM2 model and no cache:
  A) lockstep: all conversations advance together, one batched call per turn per role;
  B) one at a time: each conversation simulated alone (batches of one).
Prints the wall-time speed-up A vs B, the share of A's simulate time spent inside the
backend, and whether both modes produced the same conversations (the transformers
backend's seeded sampling is batch-invariant, so they should, up to float rounding of padded
batches).

    python benchmarks/simulate_batching.py --questions 4 --runs 2 --batch-size 8
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from convrag.config import REPO_ROOT, load_config
from convrag.data.miniworld import generate_world
from convrag.llm.engine import Engine
from convrag.llm.registry import get_spec, load_registry
from convrag.records import write_records
from convrag.retrieval import build_index, capabilities, load_retriever
from convrag.studies.lic_rag.plan import Settings
from convrag.studies.lic_rag.simulate import ConversationRunner


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()

    spec = get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), args.model)
    spec = dataclasses.replace(spec, batch_size=args.batch_size)
    questions, passages = generate_world({"questions": {"2": 2, "3": 1, "4": 1}}, seed=7)
    questions = questions[: args.questions]
    shards = {q.qid: list(q.decomposition) for q in questions}
    prompts = yaml.safe_load((REPO_ROOT / "resources/prompts/lic_rag/assistant.yaml").read_text())
    # sampling, seed and recall_k from the validated default config's lic_rag block
    block = Settings.from_block(load_config(REPO_ROOT / "config" / "config.yaml")["lic_rag"])
    settings = dataclasses.replace(block, runs=args.runs, top_k=3, recall_k=max(3, block.recall_k),
                                   max_extra_turns=1)

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_records(corpus, passages)
        build_index("bm25", corpus, Path(tmp) / "bm25", {"backend": "bm25s"})
        retriever = load_retriever("bm25", Path(tmp) / "bm25", {"backend": "bm25s"})
        engine = Engine(spec, cache=None)
        t0 = time.perf_counter()
        engine.backend  # load weights once; excluded from both timings
        load = time.perf_counter() - t0
        by_id = {p.doc_id: p for p in passages}

        def runner():
            return ConversationRunner(cells=[("SHARDED", "history")], retriever=retriever,
                                      retriever_name="bm25", capabilities=capabilities("bm25"),
                                      model_name=args.model, user_model_name=args.model,
                                      dataset="bench", passages=by_id, assistant_engine=engine,
                                      user_engine=engine, prompts=prompts, settings=settings)

        b0 = engine.accounting.backend_seconds
        t0 = time.perf_counter()
        lockstep = runner().run(questions, shards)[("SHARDED", "history")]
        t_lock = time.perf_counter() - t0
        inside = engine.accounting.backend_seconds - b0

        t0 = time.perf_counter()
        single = []
        for q in questions:
            for run in range(args.runs):
                single.extend(runner().run([q], shards, runs=[run])[("SHARDED", "history")])
        t_single = time.perf_counter() - t0

    same = sum(json.dumps(a.turns) == json.dumps(b.turns) for a, b in zip(lockstep, single))
    print(f"model={args.model} batch_size={args.batch_size} conversations={len(lockstep)} "
          f"(questions={len(questions)} x runs={args.runs}); model load {load:.1f} s (excluded)")
    print(f"lockstep batched : {t_lock:8.1f} s wall; {inside:.1f} s inside the backend "
          f"({100 * inside / t_lock:.1f}% of simulate time)")
    print(f"one at a time    : {t_single:8.1f} s wall")
    print(f"speed-up         : {t_single / t_lock:.2f}x")
    print(f"identical conversations in both modes: {same}/{len(lockstep)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
