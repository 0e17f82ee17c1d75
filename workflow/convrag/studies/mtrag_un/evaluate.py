"""Score responses as the official MTRAG scorer does: algorithmic metrics, judges, conditioning.

One function for every response the study scores, so generated answers (Table 4, Figure 3)
and MTRAG's human-evaluated responses (the judge-human correlation) go through the same
code. An item is a (task, response) pair: ``{item_id, task_id, conversation_turns (speaker
user|agent, ending with the question), response, targets, contexts (texts shown to the
model), answerability, ...labels}``.

Per item, in the official order: ROUGE-L, BERTScore recall and passage precisions, RB_alg
(``convrag.metrics.mtrag``; all BERTScore pairs in one batched call); the judges (one
batched call each, ``studies/mtrag_un/judges.py``); then RL_F, RB_llm and RB_alg conditioned
on answerability with the IDK and clarification verdicts. The underspecified-type judge (Table 5's
taxonomy, when ``judges`` names it) runs in the same pass on UNDERSPECIFIED tasks. Raw values keep the suffix
``_raw``. A task without a target gets no algorithmic metrics (NaN, counted as
``no_target``: the official scorer writes none for it); an unparsed verdict is recorded and
counted, never guessed.
"""

from __future__ import annotations

import math

import pandas as pd

from convrag.errors import ConfigError
from convrag.metrics.mtrag import UNDERSPECIFIED, algorithmic_scores, condition_metric
from convrag.metrics.text import OFFLINE_BERTSCORE, PAPER_BERTSCORE

BERTSCORE = {"paper": PAPER_BERTSCORE, "offline": OFFLINE_BERTSCORE}
LABELS = ("domain", "answerability", "multi_turn", "question_type", "standalone")


def bertscore_config(value) -> dict:
    if isinstance(value, dict):
        return value
    if value not in BERTSCORE:
        raise ConfigError(f"mtrag_un.evaluation.bertscore: '{value}' is not one of {', '.join(BERTSCORE)} or a dict")
    return BERTSCORE[value]


def answer_items(tasks, answers: list[dict], corpus: dict | None = None) -> list[dict]:
    """Items from answer records (``convrag answer``): the contexts are the passages the model
    was shown (the task's reference contexts, or the retrieved passages' texts)."""
    by_id = {t.task_id: t for t in tasks}
    items = []
    for a in answers:
        t = by_id[a["task_id"]]
        if a["passages"] == "reference":
            ref = {c["doc_id"]: c["text"] for c in t.contexts}
            contexts = [ref[r["doc_id"]] for r in a["retrieved"]]
        elif a["passages"] in ("run", "retrieved"):
            if corpus is None:
                raise ConfigError("evaluate: answers from retrieved passages need the corpus")
            contexts = [corpus[r["doc_id"]].text for r in a["retrieved"]]
        else:
            contexts = []
        turns = [{"speaker": "user" if h["role"] == "user" else "agent", "text": h["text"]} for h in t.history]
        items.append({"item_id": f"{a['task_id']}#{a.get('run', 0)}", "task_id": t.task_id,
                      "conversation_id": t.conversation_id, "turn": t.turn,
                      "conversation_turns": [*turns, {"speaker": "user", "text": t.question}],
                      "response": a["text"] or "", "targets": list(t.reference_answers), "contexts": contexts,
                      **{k: t.labels.get(k) for k in LABELS}})
    return items


def score_items(items: list[dict], engine, prompts_dir: str, judges: list[str], max_tokens: dict,
                bertscore: dict, prompt_files: dict | None = None) -> tuple[pd.DataFrame, list[dict], dict]:
    """(one metrics row per item, every verdict record, counts)."""
    from convrag.studies.mtrag_un.judges import judge_all, judge_summary, rb_llm_fallback

    if items and ("idk" not in judges or ("clarification" not in judges
                                          and any(it["answerability"] == UNDERSPECIFIED for it in items))):
        raise ConfigError("mtrag_un.evaluation.judges: conditioning needs the idk judge (and the clarification "
                          "judge when there are UNDERSPECIFIED tasks)")
    scored = [i for i, it in enumerate(items) if it["targets"]]
    alg = algorithmic_scores([items[i]["response"] for i in scored], [items[i]["targets"] for i in scored],
                             [items[i]["contexts"] for i in scored], bertscore) if scored else []
    alg_by = dict(zip(scored, alg))
    verdicts = judge_all(items, engine, prompts_dir, max_tokens=max_tokens, which=tuple(judges),
                         prompt_files=prompt_files)
    rows = []
    for i, it in enumerate(items):
        a = alg_by.get(i, {})
        v = {name: verdicts[name][i] for name in verdicts}
        raw = {"RB_alg": a.get("RB_alg", math.nan)}
        if "rb_llm" in v:
            raw["RB_llm"] = v["rb_llm"]["value"]
            row_extra = {"rb_llm_fallback": rb_llm_fallback(v["rb_llm"]["raw"])}
        else:
            row_extra = {}
        if "faithfulness" in v:
            raw["RL_F"] = v["faithfulness"]["faithfulness"]
        idk = v["idk"]["value"]
        clar = v["clarification"]["value"] if "clarification" in v else None
        row = {k: it.get(k) for k in ("item_id", "task_id", "conversation_id", "turn", *LABELS)}
        row.update(response=it["response"], RougeL=a.get("RougeL", math.nan), BertscoreR=a.get("BertscoreR", math.nan),
                   BertKPrec_max=a.get("BertKPrec_max", math.nan), idk=None if idk is None else str(idk),
                   clarification=clar, **row_extra)
        if "faithfulness" in v:
            row["faithfulness_status"] = v["faithfulness"]["status"]
        if "underspecified_type" in v:  # Table 5's type (None: not asked, or an invalid reply: see the verdicts)
            row["underspecified_type"] = v["underspecified_type"]["value"]
            row["underspecified_type_invalid"] = v["underspecified_type"]["method"] == "llm" and \
                v["underspecified_type"]["value"] is None
        for k, x in raw.items():
            row[f"{k}_raw"] = x
            row[k] = condition_metric(x, it["answerability"], idk,
                                      clar if it["answerability"] == UNDERSPECIFIED else None)
        rows.append(row)
    records = [r for name in verdicts for r in verdicts[name]]
    counts = {"items": len(items), "no_target": len(items) - len(scored), **judge_summary(verdicts)}
    return pd.DataFrame(rows), records, counts
