"""The conversation runner: FULL, CONCAT and SHARDED delivery with retrieval at every turn.

All conversations of a job advance in lockstep: per turn, one batched user-simulator call
(for every conversation that needs a rephrased shard), one batched retrieval call, and one
batched assistant call. Never one conversation at a time: batching is what makes the grid
affordable.

Turn loop of one conversation:
  1. the user speaks: FULL sends the original question; CONCAT sends every shard in one
     message; SHARDED sends shard 1 verbatim, then the simulator rephrases the next
     unrevealed shard (at most one per turn, in dependency order); once every shard is
     revealed and no answer was given, the user nudges for a final answer
     (``max_extra_turns`` times at most);
  2. the assistant retrieves with the query policy (HISTORY: all user turns so far,
     CURRENT: this turn only; single-turn conditions use the question itself);
  3. the assistant replies and must end with ``Answer: ...``; a reply without that line is
     recorded as unanswered (``answered=False``) and counted, never dropped;
  4. stopping rule: the conversation ends when the extracted answer is correct (exact match
     with the answer or an alias), or when every shard is revealed and the last reply gave
     an answer, or when the nudges are used up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tqdm import tqdm

from convrag.llm.types import Request, Sampling
from convrag.metrics.qa import exact_match
from convrag.records import Conversation, Passage, Question
from convrag.retrieval.policies import make_query
from convrag.simulate.answers import extract_answer
from convrag.simulate.shards import mentions, entities, leaks_answer

SINGLE_TURN = ("FULL", "CONCAT")


@dataclass
class Settings:
    runs: int = 2
    top_k: int = 3
    seed: int = 0
    max_extra_turns: int = 1
    assistant: Sampling = field(default_factory=Sampling)
    user: Sampling = field(default_factory=Sampling)

    @classmethod
    def from_dict(cls, d: dict) -> "Settings":
        a, u = d.get("assistant", {}), d.get("user_simulator", {})
        return cls(
            runs=d.get("runs", 2),
            top_k=d.get("top_k", 3),
            seed=d.get("seed", 0),
            max_extra_turns=d.get("max_extra_turns", 1),
            assistant=Sampling(a.get("temperature", 0.7), a.get("top_p", 0.95), a.get("max_tokens", 64),
                               tuple(a.get("stop", ()))),
            user=Sampling(u.get("temperature", 0.7), u.get("top_p", 0.95), u.get("max_tokens", 48),
                          tuple(u.get("stop", ()))),
        )


@dataclass
class _State:
    question: Question
    shards: list[str]
    run: int
    turns: list[dict] = field(default_factory=list)
    revealed: int = 0
    extra_used: int = 0
    done: bool = False
    pending_user: dict | None = None

    def user_texts(self) -> list[str]:
        return [t["text"] for t in self.turns if t["role"] == "user"]


def _guard_rephrase(text: str, shard: str, question: Question) -> bool:
    """A rephrased shard is used only if it keeps the shard's names and numbers, names no
    other entity (so nothing from an unrevealed shard leaks and nothing is invented), and
    does not state the answer."""
    text = text.strip()
    if not text or len(text) > 4 * max(len(shard), 40):
        return False
    if any(not mentions(text, e) for e in entities(shard)):
        return False
    if any(not mentions(shard, e) for e in entities(text)):
        return False
    return not leaks_answer(text, question)


class ConversationRunner:
    def __init__(self, *, condition, policy, retriever, retriever_name, model_name, user_model_name, dataset,
                 passages: dict[str, Passage], assistant_engine, user_engine, prompts: dict, settings: Settings,
                 study: str = "lic_rag"):
        self.condition, self.policy = condition, policy
        self.retriever, self.retriever_name = retriever, retriever_name
        self.model_name, self.user_model_name, self.dataset = model_name, user_model_name, dataset
        self.passages, self.prompts, self.settings, self.study = passages, prompts, settings, study
        self.assistant_engine, self.user_engine = assistant_engine, user_engine
        self.closed_book = retriever_name == "closed_book" or getattr(retriever, "closed_book", False)

    # ---- user side -------------------------------------------------------------------
    def _first_user_turn(self, s: _State) -> dict:
        if self.condition == "FULL":
            return {"role": "user", "text": s.question.question, "shard_id": None}
        if self.condition == "CONCAT":
            body = "\n".join(f"- {x}" for x in s.shards)
            return {"role": "user", "text": f"{self.prompts['concat_intro']}\n{body}", "shard_id": None}
        s.revealed = 1
        return {"role": "user", "text": s.shards[0], "shard_id": 1}

    def _history_text(self, s: _State) -> str:
        lines = []
        for t in s.turns:
            who = "User" if t["role"] == "user" else "Assistant"
            lines.append(f"{who}: {t['text'].strip()}")
        return "\n".join(lines) or "(nothing yet)"

    def _user_step(self, active: list[_State]) -> None:
        need_llm: list[_State] = []
        for s in active:
            if not s.turns:
                s.pending_user = self._first_user_turn(s)
            elif self.condition == "SHARDED" and s.revealed < len(s.shards):
                need_llm.append(s)
            else:
                s.extra_used += 1
                s.pending_user = {"role": "user", "text": self.prompts["nudge"], "shard_id": None}
        if not need_llm:
            return
        reqs = []
        for s in need_llm:
            user = self.prompts["user"].format(history=self._history_text(s), shard=s.shards[s.revealed])
            msgs = [{"role": "system", "content": self.prompts["user_system"]}, {"role": "user", "content": user}]
            reqs.append(Request(messages=msgs, sampling=self.settings.user, seed=self.settings.seed, sample_index=s.run))
        resps = self.user_engine.generate(reqs)
        for s, r in zip(need_llm, resps):
            shard = s.shards[s.revealed]
            text = r.text.strip().strip('"').strip()
            ok = _guard_rephrase(text, shard, s.question)
            s.revealed += 1
            s.pending_user = {"role": "user", "text": text if ok else shard, "shard_id": s.revealed, "rephrased": ok}

    # ---- assistant side --------------------------------------------------------------
    def _query(self, s: _State) -> str:
        texts = s.user_texts() + [s.pending_user["text"]]
        policy = "current" if self.condition in SINGLE_TURN and len(texts) == 1 else self.policy
        if policy == "none":
            policy = "history"  # single-turn conditions after a nudge: keep the question
        return make_query(policy, texts)

    def _user_content(self, text: str, passages: str | None) -> str:
        if not passages:
            return text
        return f"{self.prompts['passages_header']}\n{passages}\n\n{self.prompts['question_header']} {text}"

    def _assistant_messages(self, s: _State, retrieved: list[tuple[str, float]]) -> list[dict]:
        msgs = [{"role": "system", "content": self.prompts["assistant_system"]}]
        for ex in self.prompts.get("examples", []):
            msgs.append({"role": "user", "content": self._user_content(ex["message"], None if self.closed_book else ex["passages"])})
            msgs.append({"role": "assistant", "content": ex["reply"]})
        for t in s.turns:
            msgs.append({"role": t["role"], "content": t["text"]})
        lines = []
        for rank, (doc_id, _) in enumerate(retrieved, start=1):
            p = self.passages[doc_id]
            lines.append(self.prompts["passage"].format(rank=rank, title=p.title, text=p.text))
        msgs.append({"role": "user", "content": self._user_content(s.pending_user["text"], "\n".join(lines))})
        return msgs

    def run(self, questions: list[Question], shards: dict[str, list[str]], runs=None) -> list[Conversation]:
        """Simulate every (question, run) pair in lockstep; ``runs`` defaults to all runs."""
        runs = range(self.settings.runs) if runs is None else runs
        states = [_State(q, shards[q.qid], run) for q in questions for run in runs]
        max_turns = max((len(s.shards) for s in states), default=1) + self.settings.max_extra_turns
        if self.condition in SINGLE_TURN:
            max_turns = 1 + self.settings.max_extra_turns
        bar = tqdm(total=len(states), desc=f"{self.condition}/{self.policy} conversations done", unit="conv")
        try:
            turn = 0
            while True:
                active = [s for s in states if not s.done]
                if not active:
                    break
                turn += 1
                bar.set_postfix(turn=turn, active=len(active))
                self._user_step(active)
                if self.closed_book:
                    queries, results = [None] * len(active), [[] for _ in active]
                else:
                    queries = [self._query(s) for s in active]
                    results = self.retriever.search(queries, self.settings.top_k)
                reqs = [
                    Request(messages=self._assistant_messages(s, res), sampling=self.settings.assistant,
                            seed=self.settings.seed, sample_index=s.run)
                    for s, res in zip(active, results)
                ]
                resps = self.assistant_engine.generate(reqs)
                for s, q, res, r in zip(active, queries, results, resps):
                    answer = extract_answer(r.text)
                    s.turns.append(s.pending_user)
                    s.turns.append({
                        "role": "assistant", "text": r.text, "query": q,
                        "retrieved": [{"doc_id": d, "score": float(sc)} for d, sc in res],
                        "answer": answer, "answered": answer is not None,
                    })
                    s.pending_user = None
                    correct = answer is not None and exact_match(answer, s.question.answers) == 1.0
                    all_revealed = self.condition in SINGLE_TURN or s.revealed >= len(s.shards)
                    out_of_nudges = s.extra_used >= self.settings.max_extra_turns
                    if correct or (all_revealed and (answer is not None or out_of_nudges)) or turn >= max_turns:
                        s.done = True
                        bar.update(1)
        finally:
            bar.close()  # an error message must not land on the bar's line
        return [self._record(s) for s in states]

    def _record(self, s: _State) -> Conversation:
        answers = [t["answer"] for t in s.turns if t["role"] == "assistant" and t["answer"] is not None]
        conv_id = (f"{self.dataset}/{self.model_name}/{self.retriever_name}/"
                   f"{self.condition}_{self.policy}/{s.question.qid}/run{s.run}")
        return Conversation(
            conv_id=conv_id, study=self.study, qid=s.question.qid, dataset=self.dataset,
            condition=self.condition, policy=self.policy, retriever=self.retriever_name,
            model=self.model_name, run=s.run, turns=s.turns,
            final_answer=answers[-1] if answers else None, answered=bool(answers),
            n_unanswered_turns=sum(1 for t in s.turns if t["role"] == "assistant" and not t["answered"]),
        )
