"""Labels of a simulate job's conversations: the response category of every assistant turn and
the correctness verdict of every final answer.

They run inside the simulate job, right after its conversations are done: the model is
already loaded there, all of a job's turns go in one batch, and no extra job per dataset
waits for the whole grid. Changing a judge's prompt or model therefore reruns the simulate
jobs, whose conversations then come from the LLM cache.
"""

from __future__ import annotations


def label(conversations, questions: dict, classifier, classifier_prompts: dict, judge, judge_prompts: dict,
          classifier_max_tokens: int, judge_max_tokens: int) -> None:
    """Write each assistant turn's ``category`` (+ ``category_parsed``, ``category_raw``) and
    each conversation's ``judgment`` in place. ``questions``: (dataset, qid) -> Question."""
    from convrag.studies.lic_rag.judges import classify_turns
    from convrag.judges.correctness import judge_answers

    by_id = {c.conv_id: c for c in conversations}
    for rec in classify_turns(conversations, classifier, classifier_prompts, classifier_max_tokens):
        turn = [t for t in by_id[rec["conv_id"]].turns if t["role"] == "assistant"][rec["turn"] - 1]
        turn.update(category=rec["category"], category_parsed=rec["parsed"], category_raw=rec["raw"])
    items = [{"key": c.conv_id, "question": questions[(c.dataset, c.qid)].question,
              "answers": list(questions[(c.dataset, c.qid)].answers), "prediction": c.final_answer}
             for c in conversations]
    for v in judge_answers(items, judge, judge_prompts, judge_max_tokens):
        by_id[v["key"]].judgment = {k: v[k] for k in ("correct", "method", "parsed", "raw")}
