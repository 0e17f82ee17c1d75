"""lic_rag's rehearsal inputs: the score tables a grid would produce, with seeded synthetic
values and no model, at the grid's full shape (every dataset, model, retriever, condition and
policy of ``plan.simulate_cells``), so every table, figure and reproduction row can be built
before a GPU-week is spent (convrag.report.rehearsal). Questions and runs per cell are cut to
``questions`` x ``runs``; the columns are those ``score.py`` writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import write_json, write_parquet
from convrag.studies.lic_rag.judges import CATEGORIES
from convrag.studies.lic_rag.plan import MULTI_TURN, simulate_cells

SHARDS = 3  # user turns of a synthetic multi-turn conversation
LEVEL = {"FULL": 0.6, "CONCAT": 0.55, "SHARDED": 0.45, "RECAP": 0.55, "SNOWBALL": 0.5}  # mean synthetic F1


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    from convrag.retrieval import is_closed_book

    lic = config["lic_rag"]
    rng = np.random.default_rng(seed)
    cells = list(dict.fromkeys((c["dataset"], c["model"], c["retriever"], c["condition"], c["policy"])
                               for c in simulate_cells(config)))
    closed = {r: is_closed_book(config, r) for r in lic["retrievers"]}
    rk = f"recall@{lic['recall_k']}"
    convs, turns = [], []
    for ds, model, ret, cond, pol in cells:
        for q in range(questions):
            qid = f"{ds}-q{q:03d}"
            for run in range(runs):
                cid = f"{ds}/{model}/{ret}/{cond}_{pol}/{qid}/run{run}"
                n = SHARDS + (1 if cond == "RECAP" else 0) if cond in MULTI_TURN else 1
                # the paper's pattern, so that every ratio has a denominator: FULL above SHARDED, RECAP between
                f1s = np.clip(LEVEL[cond] + rng.normal(0, 0.15, n), 0, 1).round(3)
                recall = np.full(n, np.nan) if closed[ret] else rng.choice([0.0, 0.5, 1.0], n)
                cum = np.full(n, np.nan) if closed[ret] else np.maximum.accumulate(recall)
                convs.append({
                    "conv_id": cid, "dataset": ds, "model": model, "retriever": ret, "condition": cond,
                    "policy": pol, "qid": qid, "run": run, "hops": 2 + q % 3, "n_turns": n,
                    "final_f1": float(f1s[-1]), "final_em": float(f1s[-1] > 0.9), "best_f1": float(f1s.max()),
                    "best_em": float(f1s.max() > 0.9), "answered": True, "n_unanswered_turns": 0,
                    "judge_correct": float(rng.uniform() < f1s[-1]), "judge_method": "llm", "judge_parsed": True,
                    "order_kept": float(rng.uniform() < 0.9) if cond in MULTI_TURN else np.nan,
                    "final_cum_recall": float(cum[-1]),
                    # §A.2's wording keys: the opening as written, each later shard in one of a few forms
                    "opening": f"{qid}-opening" if cond in MULTI_TURN else None,
                    "shard_forms": json.dumps({"1": f"{qid}-s1", **{str(k): f"{qid}-s{k}-{rng.integers(0, 6)}"
                                                                    for k in range(2, SHARDS + 1)}})
                    if cond == "SHARDED" else None})
                for t in range(n):
                    turns.append({
                        "conv_id": cid, "dataset": ds, "model": model, "retriever": ret, "condition": cond,
                        "policy": pol, "qid": qid, "run": run, "turn": t + 1, "answered": True,
                        "f1": float(f1s[t]), "em": float(f1s[t] > 0.9), "n_retrieved": 0 if closed[ret] else lic["recall_k"],
                        "category": CATEGORIES[int(rng.integers(0, 3))], "category_parsed": True,
                        "retrieval_llm_calls": int(rng.integers(0, 4)), "retrieval_prompt_tokens": int(rng.integers(0, 900)),
                        "retrieval_completion_tokens": int(rng.integers(0, 90)), "retrieval_parse_failures": 0,
                        rk: float(recall[t]), "cum_recall": float(cum[t])})
    paths = {"scores": str(folder / "conversations.parquet"), "turns": str(folder / "turns.parquet")}
    write_parquet(pd.DataFrame(convs), paths["scores"])
    write_parquet(pd.DataFrame(turns), paths["turns"])
    var = lic["sharding"]["variability"]
    if var["questions"]:  # shard-wording variability samples: a few wordings per question
        paths["shard_variability"] = []
        for ds in lic["datasets"]:
            qs = [{"qid": f"{ds}-q{q:03d}", "dataset": ds, "question": "?",
                   "samples": [{"sample": k, "shards": ["goal", f"clue {int(rng.integers(0, 4))}"],
                                "passed": bool(rng.uniform() < 0.8)} for k in range(var["samples"])]}
                  for q in range(var["questions"])]
            path = folder / ds / "variability.json"
            write_json(path, {"steps": lic["sharding"]["steps"], "samples": var["samples"], "questions": qs})
            paths["shard_variability"].append(str(path))
    return paths
