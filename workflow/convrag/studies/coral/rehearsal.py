"""coral's rehearsal inputs: every file its targets read, with seeded synthetic values and no
model, at the config's full shape (every retrieval run of Table 2: retriever x query policy,
session encoder and LLM4CS variant, each measure; every answering model, the fine-tuned ones
too, x history strategy of Table 3; Figure 4's models x history lengths; every pairwise judge),
so every table, figure and reproduction row can be built before a GPU hour is spent
(convrag.report.rehearsal). The columns are those the study's jobs write (``score_retrieval``,
``coral evaluate``); ``questions`` conversations per flow sampler (3 turns each, every turn with
golden passages), as many again for each ``coral.statistics_benchmarks`` entry (Tables 1 and 4
count them too), a corpus of ``max(runs, questions) * 4`` passages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import write_jsonl, write_parquet
from convrag.records import TurnTask, write_records
from convrag.studies.coral.plan import FLOWS, generation_jobs, run_jobs, sft_generators, sweep_jobs, source

TURNS = 3
# the paper's pattern, so that every comparison has two sides: rewriting above the last question,
# a fine-tuned generator above its base, the summary's prompt far shorter than the raw context
TOKENS = {"raw_context": 2200, "last_response": 900, "rewrite": 800, "llm_summary": 480}


def _tasks(config: dict, questions: int, benchmark: str | None = None) -> list[TurnTask]:
    """``questions`` conversations per flow of the evaluated benchmark, or (``benchmark``) of a
    ``coral.statistics_benchmarks`` entry (its conversation ids prefixed with its name)."""
    b = benchmark or source(config)
    out = []
    for f in FLOWS:
        for q in range(questions):
            conv = f"{benchmark}-{f.lower()}-{q}" if benchmark else f"{f.lower()}-{q}"
            for turn in range(1, TURNS + 1):
                history = [{"role": "user" if k % 2 == 0 else "assistant", "text": f"utterance {k}"}
                           for k in range(2 * (turn - 1))]
                gold = {f"{conv}-p{turn}-{k}": 1 for k in range(1 + (q + turn) % 3)}
                out.append(TurnTask(task_id=f"{conv}_{turn}", benchmark=b, conversation_id=conv, turn=turn,
                                    history=history, question=f"question {turn} of {conv}?", rewrite=f"rewrite {turn}",
                                    reference_answers=["a golden response of several words [1]."], gold_docs=gold,
                                    labels={"flow": f, "domain": "wikipedia", "turn": turn}))
    return out


def _retrieval(config: dict, tasks: list[TurnTask], rng) -> pd.DataFrame:
    c = config["coral"]
    rows = []
    for j in run_jobs(config):
        level = 0.2 if j["policy"] == "current" else 0.3
        for t in tasks:
            base = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn,
                    "retriever": j["retriever"], "policy": j["policy"], "flow": t.labels["flow"]}
            rows += [{**base, "measure": m, "value": float(np.clip(level + rng.normal(0, 0.2), 0, 1))}
                     for m in c["measures"]]
    return pd.DataFrame(rows)


def _labels(config: dict, model: str, strategy: str) -> dict:
    """Table 3's ``retrieval`` and ``compression`` columns as the answer job records them
    (convrag.studies.coral.framework; wiring.framework_args adds the retriever)."""
    from convrag.studies.coral.framework import compression_label, retrieval_label
    from convrag.studies.coral.plan import generation_run

    c, g = config["coral"], config["coral"]["generation"]
    retriever, policy = generation_run(config)
    label = retrieval_label(strategy, g["retrieval"], rewrite_source=g["rewrite"], rewrite_model=c["rewrite"]["model"],
                            summary_model=g["summary_model"] or model, shared_run=f"{retriever}/{policy}")
    return {"retrieval": f"{label} ({retriever})" if g["retrieval"] == "strategy" else label,
            "compression": compression_label((c.get("compression") or {}).get("model"))}


def _scores(config: dict, job: dict, tasks: list[TurnTask], strategy: str, m: int | None, rng) -> pd.DataFrame:
    e = config["coral"]["evaluation"]
    labels = _labels(config, job["model"], strategy)
    tuned = job["model"] in sft_generators(config)
    level = 0.3 + (0.15 if tuned else 0.0)
    rows = []
    for t in tasks:
        rouge = float(np.clip(level + rng.normal(0, 0.05), 0, 1))
        row = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn, "model": job["model"],
               "strategy": job["strategy"], "max_history_turns": m,
               "bleu1": float(np.clip(rouge + rng.normal(0, 0.05), 0, 1)), "rougeL": rouge,
               "citation_recall": float(rng.uniform(0.2, 0.8)), "citation_precision": float(rng.uniform(0.2, 0.8)),
               "citation_skipped": False, "n_statements": 2, "n_entailed": 1, "n_citations": 2, "n_precise": 1,
               "n_overcite": 0, "prompt_tokens": int(TOKENS.get(strategy, 1000) + rng.integers(-50, 50)),
               "completion_tokens": int(rng.integers(50, 300)), "finish_reason": "stop",
               "used_rewrite_fallback": False, "has_reference": True, "nli_model": e["nli"], **labels}
        if e["compare"]:
            outcomes = ["win", "draw", "lose"]
            row.update(comparison=outcomes[int(rng.integers(0, 3))],
                       compare_model=e["compare_model"] or e["nli_model"])
            for judge in e["judges"]:
                row[f"comparison:{judge}"] = outcomes[int(rng.integers(0, 3))]
        rows.append(row)
    return pd.DataFrame(rows)


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    from convrag.layout import Layout
    from convrag.studies.coral import paths as P
    from convrag.studies.coral.wiring import history_strategy

    c = config["coral"]
    rng = np.random.default_rng(seed)
    tasks = _tasks(config, questions)
    out = {"tasks": str(folder / "tasks.jsonl"), "corpus": str(folder / "corpus.jsonl"), "gold": []}
    folder.mkdir(parents=True, exist_ok=True)
    write_records(out["tasks"], tasks)
    out["statistics_tasks"] = []
    for b in c["statistics_benchmarks"]:  # Table 1 / 4 count them with the evaluated conversations
        path = str(folder / f"statistics_{b}.jsonl")
        write_records(path, _tasks(config, questions, benchmark=b))
        out["statistics_tasks"].append(path)
    write_jsonl(out["corpus"], [{"doc_id": f"p{i}", "title": "", "text": "a passage of the corpus"}
                                for i in range(4 * max(runs, questions))])
    if c["retrievers"]:
        out["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(_retrieval(config, tasks, rng), out["retrieval"])
    layout = Layout(str(folder))
    out["generation"], out["history_sweep"] = [], []
    for j in generation_jobs(config):
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(_scores(config, j, tasks, j["strategy"], None, rng), path)
        out["generation"].append(path)
    sweep_turn = [t for t in tasks if t.turn == TURNS]
    for j in sweep_jobs(config):
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(_scores(config, j, sweep_turn, history_strategy(config, j["strategy"]), j["m"], rng), path)
        out["history_sweep"].append(path)
    return out
