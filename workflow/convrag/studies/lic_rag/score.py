"""lic_rag scoring: every conversation and every assistant turn scored once, into Parquet.

Every table and figure reads only these two tables, so rebuilding one never re-reads
conversations or calls a model. Per turn: SQuAD EM/F1 of the extracted answer (max over
aliases), Recall@k of the supporting passages among the turn's retrieved passages and the
cumulative recall over the conversation so far (ir_measures), the response category, the
retriever's LLM cost. Per conversation: final and BEST EM/F1, the judge's verdict, whether
the shards were revealed in dependency order, and, for §A.2's wording counts (how the user
simulator words one shard across simulations, whether the opening is the same), a short hash of
the normalised opening message and of each shard as a SHARDED conversation's user sent it (the
texts stay in the conversation files; hashes keep the score table small).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from convrag.errors import DataError
from convrag.metrics.qa import exact_match, f1_score
from convrag.metrics.retrieval import recall_at_k
from convrag.records import Conversation, Question, read_records
from convrag.studies.lic_rag.plan import MULTI_TURN

KEYS = ["dataset", "model", "retriever", "condition", "policy"]


def _order_kept(c: Conversation) -> float:
    """1.0 if the shards were revealed in dependency order (shard ids increasing), 0.0 if
    not, NaN for single-turn conditions."""
    if c.condition not in MULTI_TURN:
        return np.nan
    ids = [t["shard_id"] for t in c.turns if t["role"] == "user" and t.get("shard_id")]
    return float(all(a < b for a, b in zip(ids, ids[1:])))


def wording_key(text: str) -> str:
    """A message's wording, normalised as §A.2's counts compare it (``analyses.normalise_wording``:
    case, punctuation and spacing ignored), as a 12-hex-digit hash."""
    from convrag.studies.lic_rag.analyses import normalise_wording

    return hashlib.sha1(normalise_wording(text or "").encode("utf-8")).hexdigest()[:12]


def _wordings(c: Conversation) -> tuple[str | None, str | None]:
    """(opening, shard forms) of a multi-turn conversation: the wording key of its first user
    message, and for SHARDED, ``{shard id: wording key}`` of the user turns that revealed a shard
    (as JSON); None where they do not apply (one-turn conditions; RECAP and SNOWBALL restate
    shards, so their turns are not one shard's wording)."""
    if c.condition not in MULTI_TURN:
        return None, None
    users = [t for t in c.turns if t["role"] == "user"]
    opening = wording_key(users[0]["text"]) if users else None
    if c.condition != "SHARDED":
        return opening, None
    forms = {str(t["shard_id"]): wording_key(t["text"]) for t in users if t.get("shard_id")}
    return opening, json.dumps(forms, sort_keys=True)


def score_conversations(conv_paths: list[str], question_paths: list[str], recall_k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    questions: dict[tuple[str, str], Question] = {}
    for p in question_paths:
        for q in read_records(p, Question):
            questions[(q.dataset, q.qid)] = q
    conv_rows, turn_rows = [], []
    run_turn, qrels_turn, run_cum = {}, {}, {}
    for p in conv_paths:
        for c in read_records(p, Conversation):
            q = questions.get((c.dataset, c.qid))
            if q is None:
                raise DataError(f"{p}: conversation {c.conv_id} refers to unknown question {c.dataset}/{c.qid}")
            f1s, ems, seen = [], [], {}
            a_turns = [t for t in c.turns if t["role"] == "assistant"]
            for i, t in enumerate(a_turns, start=1):
                f1, em = f1_score(t["answer"], q.answers), exact_match(t["answer"], q.answers)
                f1s.append(f1)
                ems.append(em)
                key = f"{c.conv_id}#{i}"
                ranked = {r["doc_id"]: r["score"] for r in t.get("retrieved", [])[:recall_k]}
                for d in ranked:  # cumulative run: earlier-retrieved docs rank higher
                    seen.setdefault(d, 1e6 - len(seen))
                if ranked:
                    run_turn[key] = ranked
                    run_cum[key] = dict(seen)
                qrels_turn[key] = {d: 1 for d in q.supporting_doc_ids}
                cost = t.get("retrieval_cost") or {}
                turn_rows.append({
                    "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                    "turn": i, "answered": bool(t["answered"]), "f1": f1, "em": em, "n_retrieved": len(ranked),
                    "category": t.get("category"), "category_parsed": t.get("category_parsed"),
                    "retrieval_llm_calls": cost.get("llm_calls", 0),
                    "retrieval_prompt_tokens": cost.get("prompt_tokens", 0),
                    "retrieval_completion_tokens": cost.get("completion_tokens", 0),
                    "retrieval_parse_failures": cost.get("parse_failures", 0),
                })
            j = c.judgment or {}
            opening, forms = _wordings(c)
            conv_rows.append({
                "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                "hops": q.hops, "n_turns": len(a_turns),
                "final_f1": f1_score(c.final_answer, q.answers),
                "final_em": exact_match(c.final_answer, q.answers),
                "best_f1": max(f1s) if f1s else 0.0, "best_em": max(ems) if ems else 0.0,
                "answered": c.answered, "n_unanswered_turns": c.n_unanswered_turns,
                "judge_correct": (np.nan if j.get("correct") is None else float(j["correct"])),
                "judge_method": j.get("method"), "judge_parsed": j.get("parsed"),
                "order_kept": _order_kept(c), "opening": opening, "shard_forms": forms,
            })
    turns = pd.DataFrame(turn_rows)
    convs = pd.DataFrame(conv_rows)
    if len(turns):
        rec = recall_at_k(run_turn, {k: qrels_turn[k] for k in run_turn}, recall_k) if run_turn else {}
        cum = recall_at_k(run_cum, {k: qrels_turn[k] for k in run_cum}, 10**6) if run_cum else {}
        keys = turns["conv_id"] + "#" + turns["turn"].astype(str)
        turns[f"recall@{recall_k}"] = [rec.get(k, np.nan) for k in keys]
        turns["cum_recall"] = [cum.get(k, np.nan) for k in keys]
        last = turns.sort_values("turn").groupby("conv_id")["cum_recall"].last()
        convs["final_cum_recall"] = convs["conv_id"].map(last)
    return convs, turns
