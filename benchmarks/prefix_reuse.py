"""Prompt-prefix reuse on a lic_rag SHARDED simulation: every prompt token computed versus
only the tokens no stored prefix covers, same backend, same conversations, one run.

Runs the default config's lic_rag SHARDED cell (HISTORY policy, BM25 over the mini world)
with the real packaged SmolLM2 and no LLM cache, first with reuse off, then on (empty store).
Prints per role the prompt tokens requested and computed, prefill and backend seconds, the
wall-time ratio, and whether both runs produced identical conversations.

    python benchmarks/prefix_reuse.py --questions 8 --runs 2
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
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()

    config = load_config(REPO_ROOT / "config" / "config.yaml")
    spec = get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), args.model)
    world = config["corpora"]["miniworld"]
    questions, passages = generate_world(world["spec"], seed=world.get("seed", 0))
    questions = questions[: args.questions]
    shards = {q.qid: list(q.decomposition) for q in questions}
    prompts = yaml.safe_load((REPO_ROOT / "resources/prompts/lic_rag/assistant.yaml").read_text())
    settings = dataclasses.replace(Settings.from_block(config["lic_rag"]), runs=args.runs)

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_records(corpus, passages)
        build_index("bm25", corpus, Path(tmp) / "bm25", {"backend": "bm25s"})
        retriever = load_retriever("bm25", Path(tmp) / "bm25", {"backend": "bm25s"})
        backend = Engine(spec, cache=None).backend  # loaded once, excluded from the timings
        by_id = {p.doc_id: p for p in passages}
        results = {}
        for reuse in (False, True):
            backend.prefix_store.clear()
            backend.set_prefix_reuse(reuse)
            eng = Engine(spec, cache=None, backend=backend)
            runner = ConversationRunner(cells=[("SHARDED", "history")], retriever=retriever, retriever_name="bm25",
                                        capabilities=capabilities("bm25"), model_name=args.model,
                                        user_model_name=args.model, dataset="bench", passages=by_id,
                                        assistant_engine=eng, user_engine=eng, prompts=prompts, settings=settings)
            t0 = time.perf_counter()
            convs = runner.run(questions, shards)[("SHARDED", "history")]
            results[reuse] = (time.perf_counter() - t0, eng.accounting, [json.dumps(c.turns) for c in convs])

    print(f"model={args.model} conversations={len(results[True][2])} (questions={len(questions)} x runs={args.runs}), "
          f"SHARDED / history / bm25, batch size {spec.batch_size}")
    print("| reuse | wall s | backend s | prefill s | prompt tokens requested | computed | completion tokens |")
    print("|---|---|---|---|---|---|---|")
    for reuse, (wall, acc, _) in results.items():
        print(f"| {'on' if reuse else 'off'} | {wall:.1f} | {acc.backend_seconds:.1f} | {acc.backend_prefill_seconds:.1f} "
              f"| {acc.backend_prompt_tokens} | {acc.backend_computed_prompt_tokens} | {acc.backend_completion_tokens} |")
    off, on = results[False], results[True]
    same = sum(a == b for a, b in zip(off[2], on[2]))
    print(f"wall-time ratio off/on: {off[0] / on[0]:.2f}x; prompt tokens computed: "
          f"{on[1].backend_computed_prompt_tokens / max(1, off[1].backend_computed_prompt_tokens):.1%} of no-reuse")
    print(f"identical conversations: {same}/{len(on[2])}")
    return 0 if same == len(on[2]) else 1


if __name__ == "__main__":
    sys.exit(main())
