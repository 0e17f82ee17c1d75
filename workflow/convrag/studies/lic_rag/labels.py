"""Labels of a simulate job's conversations: the response category of every assistant turn and
the correctness verdict of every final answer.

They run inside the simulate job: the model is already loaded there, and no extra job per
dataset waits for the whole grid. Changing a judge's prompt or model therefore reruns the
simulate jobs, whose conversations then come from the LLM cache.

When the job overlaps its API roles with its GPU work (``ConversationRunner.run``, both label
models API models), the turns are classified as the simulation produces them and the answers
judged as conversations finish, on threads of their own (``categories``, ``judge``); otherwise all
of a job's turns go in one batch after the simulation (``label``). The requests are the same.
"""

from __future__ import annotations

from dataclasses import dataclass


def label_turns(conversations, classifier, classifier_prompts: dict, classifier_max_tokens: int) -> None:
    """Write each assistant turn's ``category`` (+ ``category_parsed``, ``category_raw``) in place."""
    from convrag.studies.lic_rag.judges import classify_turns

    by_id = {c.conv_id: c for c in conversations}
    for rec in classify_turns(conversations, classifier, classifier_prompts, classifier_max_tokens):
        turn = [t for t in by_id[rec["conv_id"]].turns if t["role"] == "assistant"][rec["turn"] - 1]
        turn.update(category=rec["category"], category_parsed=rec["parsed"], category_raw=rec["raw"])


def judge_conversations(conversations, questions: dict, judge, judge_prompts: dict, judge_max_tokens: int) -> None:
    """Write each conversation's ``judgment`` in place. ``questions``: (dataset, qid) -> Question."""
    from convrag.judges.correctness import judge_answers

    by_id = {c.conv_id: c for c in conversations}
    items = [{"key": c.conv_id, "question": questions[(c.dataset, c.qid)].question,
              "answers": list(questions[(c.dataset, c.qid)].answers), "prediction": c.final_answer}
             for c in conversations]
    for v in judge_answers(items, judge, judge_prompts, judge_max_tokens):
        by_id[v["key"]].judgment = {k: v[k] for k in ("correct", "method", "parsed", "raw")}


def label(conversations, questions: dict, classifier, classifier_prompts: dict, judge, judge_prompts: dict,
          classifier_max_tokens: int, judge_max_tokens: int) -> None:
    """Write each assistant turn's ``category`` (+ ``category_parsed``, ``category_raw``) and
    each conversation's ``judgment`` in place. ``questions``: (dataset, qid) -> Question."""
    label_turns(conversations, classifier, classifier_prompts, classifier_max_tokens)
    judge_conversations(conversations, questions, judge, judge_prompts, judge_max_tokens)


@dataclass
class Labels:
    """A job's two labellers, for ``ConversationRunner.run``. ``questions``: (dataset, qid) -> Question."""

    questions: dict
    classifier: object
    classifier_prompts: dict
    judge_engine: object
    judge_prompts: dict
    classifier_max_tokens: int
    judge_max_tokens: int

    @property
    def remote(self) -> bool:
        """Both label models are API models: they may run beside the simulation."""
        from convrag.llm.engine import is_remote

        return is_remote(self.classifier) and is_remote(self.judge_engine)

    def label(self, conversations) -> None:
        """Every label of ``conversations``, in place (after a lockstep simulation)."""
        label(conversations, self.questions, self.classifier, self.classifier_prompts, self.judge_engine,
              self.judge_prompts, self.classifier_max_tokens, self.judge_max_tokens)

    def categories(self, turns: list[tuple[str, str]]) -> list[dict]:
        """``(user message, reply)`` of assistant turns -> the fields ``label_turns`` writes into each
        (the same requests: the user's last message before the reply, and the reply)."""
        from convrag.llm.judge import run_judge
        from convrag.studies.lic_rag.judges import CLASSIFIER

        items = [{"item_id": str(i), "user": user, "reply": reply} for i, (user, reply) in enumerate(turns)]
        verdicts = run_judge(CLASSIFIER, items, self.classifier, self.classifier_prompts, self.classifier_max_tokens,
                             desc="classify turns")
        return [{"category": v["value"], "category_parsed": v["parsed"], "category_raw": v["raw"]} for v in verdicts]

    def judge(self, conversations) -> None:
        """The final answers' verdicts of ``conversations``, in place."""
        judge_conversations(conversations, self.questions, self.judge_engine, self.judge_prompts,
                            self.judge_max_tokens)
