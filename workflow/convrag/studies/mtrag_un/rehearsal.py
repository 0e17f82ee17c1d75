"""mtrag_un's rehearsal inputs: every file its targets read, with seeded synthetic values and
no model, at the config's full shape (every domain of the benchmark, retriever, query policy,
measure, generation model, setting, judge; MTRAG's human-evaluated responses when the config
re-scores them), so every table, figure and reproduction row can be built before a GPU hour is
spent (convrag.report.rehearsal). The columns are those the study's jobs write (``score_runs``,
``evaluate.score_items``, ``human-eval``); ``questions`` tasks per domain x answerability class
(each its own conversation, as in MTRAG-UN; turns cycle 1-4), ``runs`` passages per corpus; the
tasks carry a standalone label (the released files do not) so that Table 3 has both halves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import write_jsonl, write_parquet
from convrag.records import TurnTask, write_records
from convrag.studies.mtrag_un.judges import UNDERSPECIFIED_TYPES
from convrag.studies.mtrag_un.plan import ANSWERABILITY, domains, generation_jobs, retrieval_jobs

MULTI_TURN = ("Follow-up", "Clarification", "N/A")


def _tasks(config: dict, questions: int) -> list[TurnTask]:
    b = config["mtrag_un"]["benchmark"]
    out = []
    for dom in domains(config):
        for a, ans in enumerate(ANSWERABILITY):
            for q in range(questions):
                conv = f"{dom}-{ans.lower()}-{q}"
                turn = 1 + (a + q) % 4
                history = [{"role": "user" if k % 2 == 0 else "assistant", "text": f"utterance {k}"}
                           for k in range(2 * (turn - 1))]
                gold = {f"{dom}-doc{q}": 1} if ans in ("ANSWERABLE", "PARTIAL") else {}
                out.append(TurnTask(task_id=f"{conv}<::>{turn}", benchmark=b, conversation_id=conv, turn=turn,
                                    history=history, question=f"question {q} on {dom}?", reference_answers=["an answer"],
                                    gold_docs=gold, contexts=[{"doc_id": f"{dom}-doc{q}", "text": "a passage"}],
                                    labels={"domain": dom, "answerability": ans,
                                            "multi_turn": MULTI_TURN[(a + q) % 3], "question_type": ["Factoid"],
                                            "standalone": q % 2 == 0, "first_turn": turn == 1}))
    return out


MTRAG_ANSWERABILITY = ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "CONVERSATIONAL")


def _statistics_tasks(config: dict, folder: Path, questions: int) -> list[str]:
    """The task files of ``statistics_benchmarks`` (MTRAG's conversations: every user turn a task),
    at the paths the study's artifacts name under ``folder``: per domain ``questions``
    conversations of 2-5 turns, turn 1 multi-turn N/A, later turns Follow-up or Clarification, the
    four MTRAG answerability classes in turn, and (as in MTRAG) a standalone label on one turn only."""
    from convrag.data.benchmarks import benchmark_loader
    from convrag.layout import Layout
    from convrag.studies import get_study

    names = config["mtrag_un"]["statistics_benchmarks"]
    out = get_study("mtrag_un").artifacts(config, Layout(str(folder)))["statistics_tasks"]
    for name, path in zip(names, out):
        spec = config["benchmarks"][name]
        tasks, k = [], 0
        for dom in benchmark_loader(spec["kind"]).domains(spec):
            for q in range(questions):
                conv, history = f"{name}-{dom}-{q}", []
                for turn in range(1, 3 + q % 4):
                    ans = MTRAG_ANSWERABILITY[k % 4]
                    tasks.append(TurnTask(
                        task_id=f"{conv}<::>{turn}", benchmark=name, conversation_id=conv, turn=turn,
                        history=list(history), question=f"question {turn} on {dom}?", reference_answers=["an answer"],
                        gold_docs={f"{dom}-doc{q}": 1} if ans in ("ANSWERABLE", "PARTIAL") else {},
                        labels={"domain": dom, "answerability": ans, "question_type": ["Factoid"],
                                "multi_turn": "N/A" if turn == 1 else ("Follow-up", "Clarification")[k % 2],
                                "first_turn": turn == 1, "standalone": False if k == 1 else None}))
                    history += [{"role": "user", "text": f"question {turn}"}, {"role": "assistant", "text": "an answer"}]
                    k += 1
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_records(path, tasks)
    return list(out)


def _retrieval(config: dict, tasks: list[TurnTask], rng) -> pd.DataFrame:
    m = config["mtrag_un"]
    rows = []
    for j in retrieval_jobs(config):
        level = 0.3 + (0.1 if j["policy"] != m["gain_base"] else 0.0)  # the paper's pattern: rewriting helps
        for t in tasks:
            if t.labels["domain"] != j["domain"] or not t.gold_docs:
                continue
            base = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn, "domain": j["domain"],
                    "retriever": j["retriever"], "policy": j["policy"],
                    **{k: t.labels.get(k) for k in ("standalone", "answerability", "multi_turn")}}
            rows += [{**base, "measure": meas, "value": float(np.clip(level + rng.normal(0, 0.2), 0, 1))}
                     for meas in m["measures"]]
    return pd.DataFrame(rows)


def _generation(config: dict, tasks: list[TurnTask], folder: Path, rng) -> list[str]:
    from convrag.studies.mtrag_un import paths
    from convrag.layout import Layout

    judges = config["mtrag_un"]["evaluation"]["judges"]
    layout = Layout(str(folder))
    out = []
    for j in generation_jobs(config):
        rows = []
        for t in (t for t in tasks if t.labels["domain"] == j["domain"]):
            ans = t.labels["answerability"]
            level = 0.6 if j["setting"] == "reference" else 0.5  # the paper: reference above RAG
            raw = {k: float(np.clip(level + rng.normal(0, 0.15), 0, 1)) for k in ("RB_alg", "RB_llm", "RL_F")}
            idk = str(int(rng.uniform() < (0.7 if ans == "UNANSWERABLE" else 0.1)))
            clar = float(rng.choice([1.0, 0.0])) if ans == "UNDERSPECIFIED" else None
            row = {"item_id": f"{t.task_id}#0", "task_id": t.task_id, "conversation_id": t.conversation_id,
                   "turn": t.turn, **{k: t.labels.get(k) for k in ("domain", "answerability", "multi_turn")},
                   "question_type": ", ".join(t.labels["question_type"]), "standalone": t.labels["standalone"],
                   "response": "a reply", "RougeL": raw["RB_alg"], "BertscoreR": raw["RB_alg"],
                   "BertKPrec_max": raw["RB_alg"], "idk": idk, "clarification": clar,
                   "rb_llm_fallback": bool(rng.uniform() < 0.05), "faithfulness_status": "ok",
                   **{f"{k}_raw": v for k, v in raw.items()}, **raw,
                   "model": j["model"], "setting": j["setting"], "judge_model": config["mtrag_un"]["evaluation"]["judge_model"]}
            if "underspecified_type" in judges:  # every type, and now and then an invalid reply
                typ = UNDERSPECIFIED_TYPES[int(rng.integers(0, 3))] if rng.uniform() > 0.1 else None
                row.update(underspecified_type=typ if ans == "UNDERSPECIFIED" else None,
                           underspecified_type_invalid=ans == "UNDERSPECIFIED" and typ is None)
            rows.append(row)
        path = paths.evaluation(layout, j["benchmark"], j["model"], j["setting"], j["domain"])
        write_parquet(pd.DataFrame(rows), path)
        out.append(path)
    return out


def _human(questions: int, rng) -> pd.DataFrame:
    """The human-eval scores: MTRAG's two response systems of Figure 5 on answerable and partial
    tasks, 1-4 human ratings (and win rates) loosely tracking the judge scores."""
    from convrag.studies.mtrag_un.human import FIGURE5_HUMAN, FIGURE5_METRICS, PAPER_SYSTEMS

    rows = []
    for k in range(max(8, 4 * questions)):
        ans = ("ANSWERABLE", "PARTIAL")[k % 2]
        for system in PAPER_SYSTEMS:
            q = float(rng.uniform())
            row = {"task_id": f"human-{k}", "conversation_id": f"human-c{k // 2}", "turn": 1 + k % 5, "domain": "govt",
                   "system": system, "answerability": ans, "response": "a reply"}
            for ours, official in FIGURE5_METRICS.items():
                row[ours] = row[official] = float(np.clip(q + rng.normal(0, 0.2), 0, 1))
            for h in FIGURE5_HUMAN:
                name = h.removeprefix("human_")
                value = float(np.clip(1 + 3 * q + rng.normal(0, 0.5), 1, 4)) if name != "win_rate" else float(q > 0.5)
                row.update({h: value, f"n_{name}": int(rng.integers(1, 4))})
            rows.append(row)
    return pd.DataFrame(rows)


def _mtrag_retrieval(config: dict, folder: Path, questions: int, rng) -> dict:
    """MTRAG's retrieval tasks scored per task (``score_runs`` columns) and their TREC runs, at the
    paths the study's artifacts name under ``folder`` (none while that target is off); the last
    task of each run gets an empty ranking (the table counts such tasks)."""
    from convrag.layout import Layout
    from convrag.studies import get_study

    arts = get_study("mtrag_un").artifacts(config, Layout(str(folder)))
    if not arts.get("mtrag_retrieval") or not arts.get("mtrag_retrieval_runs"):
        return {}
    measures = config["mtrag_un"]["measures"]
    rows = []
    for path in arts["mtrag_retrieval_runs"]:
        retriever, policy, domain = Path(path).parts[-3], Path(path).parts[-2], Path(path).stem
        ids = [f"mtrag-{domain}-{q}<::>{1 + q % 4}" for q in range(questions + 1)]
        lines = [f"{qid} Q0 {domain}-doc{k} {k + 1} {1.0 / (k + 1):.4f} rehearsal"
                 for qid in ids[:-1] for k in range(2)]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
        for qid in ids:
            base = {"task_id": qid, "conversation_id": qid.split("<::>")[0], "turn": int(qid.split("<::>")[1]),
                    "domain": domain, "retriever": retriever, "policy": policy}
            rows += [{**base, "measure": meas,
                      "value": 0.0 if qid == ids[-1] else float(np.clip(0.3 + rng.normal(0, 0.2), 0, 1))}
                     for meas in measures]
    write_parquet(pd.DataFrame(rows), arts["mtrag_retrieval"])
    return {"mtrag_retrieval": arts["mtrag_retrieval"], "mtrag_retrieval_runs": list(arts["mtrag_retrieval_runs"]),
            "mtrag_retrieval_gold": []}


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    from convrag.data.benchmarks import corpus_id

    m = config["mtrag_un"]
    rng = np.random.default_rng(seed)
    tasks = _tasks(config, questions)
    paths = {"tasks": str(folder / "tasks.jsonl"), "gold": [],
             "statistics_tasks": _statistics_tasks(config, folder, questions)}  # MTRAG's, when named
    write_records(paths["tasks"], tasks)
    paths["corpora"] = []
    for dom in domains(config):
        p = folder / "corpora" / f"{corpus_id(m['benchmark'], dom)}.jsonl"
        write_jsonl(p, [{"doc_id": f"{dom}-doc{i}", "title": "", "text": " ".join(["word"] * (20 + 5 * i))}
                        for i in range(max(runs, questions))])
        paths["corpora"].append(str(p))
    if m["retrievers"]:
        paths["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(_retrieval(config, tasks, rng), paths["retrieval"])
    if m["generation"]["models"]:
        paths["generation"] = _generation(config, tasks, folder, rng)
    paths.update(_mtrag_retrieval(config, folder, questions, rng))  # MTRAG's own retrieval tasks, when on
    if m["evaluation"]["human_evaluations"]:
        paths["human"] = str(folder / "human.parquet")
        write_parquet(_human(questions, rng), paths["human"])
    return paths
