"""The conversation runner: FULL, CONCAT, SHARDED, RECAP and SNOWBALL delivery with retrieval
at every turn, for every (condition, policy) cell of one job at once.

All conversations of all cells of a job advance in lockstep: per turn, one batched
user-simulator call (for every conversation that reveals a shard), one batched retrieval
call, and one batched assistant call. Never one conversation at a time: batching is what
makes the grid affordable, and the cells share requests (every multi-turn cell opens with
the same first shard, so those turns are answered once).

Conditions (the user side of a turn):
- FULL: the original question in one turn. CONCAT: every shard in one turn.
- SHARDED: shard 1 (the goal) verbatim; then, each turn, the user simulator selects ONE
  remaining shard and rephrases it (it is shown only the remaining shards and must reply
  ``<shard number>: <message>``). The rephrasing is used only if it keeps the shard's names
  and numbers, names nothing else (so nothing unrevealed leaks and nothing is invented)
  and does not state the answer; otherwise the chosen shard goes out verbatim
  (``rephrased: false``). An unusable selection (no number, a revealed or unknown shard)
  falls back to the next shard in dependency order (``selection: "fallback"``). Once every
  shard is revealed and no answer was given, the user nudges for a final answer
  (``max_extra_turns`` times at most).
- RECAP: a SHARDED conversation plus one final user turn restating every revealed shard
  (verbatim, in shard order); the reply to it is the final answer.
- SNOWBALL: as SHARDED, but every user turn after the first restates all shards revealed
  so far (as they were sent) before the new one.

The assistant retrieves with the query policy (HISTORY: all user turns so far; CURRENT:
this turn only; single-turn conditions use their one message), is shown the first
``top_k`` passages (``recall_k`` >= top_k are retrieved and recorded for Recall@k), and ends
a reply that gives an answer with ``Answer: ...`` (closed book: a system prompt without the
passage sentence); a reply without that line is recorded as unanswered (``answered: false``)
and counted, never dropped. A reasoning model's ``<think>`` block is kept in the record but
neither parsed for the answer nor shown again to either side.

Stopping rule: a conversation ends when the extracted answer is correct (exact match with
the answer or an alias), or when every shard is revealed and the last reply gave an answer,
or when the nudges are used up. Single-turn conditions count as fully revealed.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from convrag.errors import ConfigError
from convrag.llm.types import Request
from convrag.metrics.qa import exact_match
from convrag.progress import progress
from convrag.rag.answers import visible_reply
from convrag.rag.policies import make_query
from convrag.rag.reader import Reader
from convrag.records import Conversation, Passage, Question
from convrag.retrieval.base import Capabilities
from convrag.studies.lic_rag.plan import CONDITIONS, SINGLE_TURN, Settings
from convrag.sharding import entities, leaks_answer, mentions

_SELECTION = re.compile(r"^\s*(?:clue\s*)?#?(\d+)\s*[:.)\-]\s*(.+?)\s*$", re.IGNORECASE)


@dataclass
class _State:
    question: Question
    shards: list[str]
    run: int
    condition: str
    policy: str
    turns: list[dict] = field(default_factory=list)
    revealed: list[int] = field(default_factory=list)  # shard indices (0-based), in the order sent
    sent: list[str] = field(default_factory=list)  # the shard text as the user sent it
    extra_used: int = 0
    done: bool = False
    pending_user: dict | None = None
    recap_from_sharded: bool = False  # a RECAP conversation waiting for its recap turn

    @property
    def all_revealed(self) -> bool:
        return self.condition in SINGLE_TURN or len(self.revealed) >= len(self.shards)

    def remaining(self) -> list[int]:
        return [i for i in range(len(self.shards)) if i not in self.revealed]

    def user_texts(self) -> list[str]:
        return [t["text"] for t in self.turns if t["role"] == "user"]


# What an assistant prompt file must hold (the project's resources/prompts/lic_rag/assistant.yaml or
# the user's, lic_rag.prompts.assistant): these texts, and these templates with their placeholders.
PROMPT_TEXTS = ("assistant_system", "passages_header", "question_header", "concat_intro", "nudge", "recap_intro",
                "recap_outro", "snowball_intro", "snowball_new", "user_system")
PROMPT_TEMPLATES = {"passage": {"rank", "title", "text"}, "user": {"history", "remaining"}}


def check_prompts(prompts: dict, where: str) -> None:
    """An assistant prompt file has every text and template the runner uses (it fails at load,
    naming the file and the key, never mid-run)."""
    from convrag.judges.prompts import check_prompts as check

    check(prompts, where, PROMPT_TEMPLATES, PROMPT_TEXTS)


def _shown_text(turn: dict) -> str:
    """A turn as the other side sees it later: an assistant turn without its reasoning."""
    return visible_reply(turn["text"]) if turn["role"] == "assistant" else turn["text"]


def guard_rephrase(text: str, shard: str, question: Question) -> bool:
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


def parse_selection(text: str, remaining: list[int]) -> tuple[int | None, str, str]:
    """``(shard index, message, why)`` from a user-simulator reply ``<shard number>: <message>``;
    index None when the reply names no remaining shard (``why`` says what was wrong)."""
    line = next((ln for ln in text.strip().strip('"').splitlines() if ln.strip()), "")
    m = _SELECTION.match(line)
    if not m:
        return None, "", "no '<number>: <message>' line"
    idx = int(m.group(1)) - 1
    if idx not in remaining:
        return None, "", f"shard {idx + 1} is not a remaining shard"
    return idx, m.group(2).strip().strip('"').strip(), ""


class ConversationRunner:
    """``capabilities``: those of the retriever's kind (closed book is decided by them, never
    by the retriever's config name)."""

    def __init__(self, *, cells, retriever, retriever_name, capabilities: Capabilities, model_name, user_model_name,
                 dataset, passages: dict[str, Passage], assistant_engine, user_engine, prompts: dict,
                 settings: Settings, study: str = "lic_rag"):
        self.cells = [tuple(c) for c in cells]
        for cond, _ in self.cells:
            if cond not in CONDITIONS:
                raise ConfigError(f"unknown delivery condition '{cond}' (known: {', '.join(CONDITIONS)})")
        self.retriever_name = retriever_name
        self.model_name, self.user_model_name, self.dataset = model_name, user_model_name, dataset
        self.prompts, self.settings, self.study = prompts, settings, study
        self.user_engine = user_engine
        self.reader = Reader(retriever=retriever, capabilities=capabilities, passages=passages,
                             engine=assistant_engine, sampling=settings.assistant,
                             build_messages=self._assistant_messages, top_k=settings.top_k,
                             recall_k=settings.recall_k, seed=settings.seed)
        self.closed_book = self.reader.closed_book
        # per cell and role: what its conversations asked of the LLMs (for sizing a grid);
        # a RECAP cell is charged only for its recap turns (the rest is its SHARDED twin's)
        self.usage: dict[str, dict[str, dict[str, int]]] = {}

    def _tally(self, role: str, states: list[_State], responses) -> None:
        for s, r in zip(states, responses):
            u = self.usage.setdefault(f"{s.condition}_{s.policy}", {}).setdefault(
                role, {"requests": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                       "backend_prompt_tokens": 0, "backend_completion_tokens": 0})
            u["requests"] += 1
            u["prompt_tokens"] += r.prompt_tokens
            u["completion_tokens"] += r.completion_tokens
            if not r.cached:
                u["calls"] += 1
                u["backend_prompt_tokens"] += r.prompt_tokens
                u["backend_completion_tokens"] += r.completion_tokens

    # ---- user side -------------------------------------------------------------------
    def _bullets(self, texts: list[str]) -> str:
        return "\n".join(f"- {x}" for x in texts)

    def _first_user_turn(self, s: _State) -> dict:
        if s.condition == "FULL":
            return {"role": "user", "text": s.question.question, "shard_id": None}
        if s.condition == "CONCAT":
            return {"role": "user", "text": f"{self.prompts['concat_intro']}\n{self._bullets(s.shards)}", "shard_id": None}
        s.revealed.append(0)
        s.sent.append(s.shards[0])
        return {"role": "user", "text": s.shards[0], "shard_id": 1, "selection": "first"}

    def _recap_turn(self, s: _State) -> dict:
        texts = [s.shards[i] for i in sorted(s.revealed)]
        body = f"{self.prompts['recap_intro']}\n{self._bullets(texts)}\n{self.prompts['recap_outro']}"
        s.recap_from_sharded = False
        return {"role": "user", "text": body, "shard_id": None, "recap": True}

    def _history_text(self, s: _State) -> str:
        lines = []
        for t in s.turns:
            who = "User" if t["role"] == "user" else "Assistant"
            lines.append(f"{who}: {_shown_text(t).strip()}")
        return "\n".join(lines) or "(nothing yet)"

    def _user_step(self, active: list[_State]) -> None:
        need_llm: list[_State] = []
        for s in active:
            if not s.turns:
                s.pending_user = self._first_user_turn(s)
            elif s.recap_from_sharded:
                s.pending_user = self._recap_turn(s)
            elif not s.all_revealed:
                need_llm.append(s)
            else:
                s.extra_used += 1
                s.pending_user = {"role": "user", "text": self.prompts["nudge"], "shard_id": None}
        if not need_llm:
            return
        reqs = []
        for s in need_llm:
            remaining = "\n".join(f"{i + 1}: {s.shards[i]}" for i in s.remaining())
            user = self.prompts["user"].format(history=self._history_text(s), remaining=remaining)
            msgs = [{"role": "system", "content": self.prompts["user_system"]}]
            for ex in self.prompts.get("user_examples", []):
                msgs.append({"role": "user", "content": self.prompts["user"].format(**ex["fields"])})
                msgs.append({"role": "assistant", "content": ex["reply"]})
            msgs.append({"role": "user", "content": user})
            reqs.append(Request(messages=msgs, sampling=self.settings.user, seed=self.settings.seed, sample_index=s.run))
        resps = self.user_engine.generate(reqs)
        self._tally("user_simulator", need_llm, resps)
        for s, r in zip(need_llm, resps):
            idx, message, why = parse_selection(r.text, s.remaining())
            selection = "llm"
            if idx is None:
                idx, message, selection = s.remaining()[0], "", "fallback"
            shard = s.shards[idx]
            ok = bool(message) and guard_rephrase(message, shard, s.question)
            text = message if ok else shard
            s.revealed.append(idx)
            turn = {"role": "user", "shard_id": idx + 1, "rephrased": ok, "selection": selection,
                    "simulator_output": r.text}
            if why:
                turn["selection_error"] = why
            if s.condition == "SNOWBALL" and s.sent:
                turn["text"] = (f"{self.prompts['snowball_intro']}\n{self._bullets(s.sent)}\n"
                                f"{self.prompts['snowball_new']} {text}")
            else:
                turn["text"] = text
            s.sent.append(text)
            s.pending_user = turn

    # ---- assistant side --------------------------------------------------------------
    def _query(self, s: _State) -> str:
        texts = s.user_texts() + [s.pending_user["text"]]
        policy = s.policy
        if s.condition in SINGLE_TURN or policy == "none":
            # one message (FULL/CONCAT); after a nudge keep the question (all user turns)
            policy = "current" if len(texts) == 1 else "history"
        return make_query(policy, texts)

    def _user_content(self, text: str, passages: str | None) -> str:
        if not passages:
            return text
        return f"{self.prompts['passages_header']}\n{passages}\n\n{self.prompts['question_header']} {text}"

    def _assistant_messages(self, s: _State, shown: list[Passage]) -> list[dict]:
        system = self.prompts.get("assistant_system_closed_book") if self.closed_book else None
        msgs = [{"role": "system", "content": system or self.prompts["assistant_system"]}]
        for ex in self.prompts.get("examples", []):
            msgs.append({"role": "user", "content": self._user_content(ex["message"], None if self.closed_book else ex["passages"])})
            msgs.append({"role": "assistant", "content": ex["reply"]})
        for t in s.turns:
            msgs.append({"role": t["role"], "content": _shown_text(t)})
        lines = [self.prompts["passage"].format(rank=rank, title=p.title, text=p.text)
                 for rank, p in enumerate(shown, start=1)]
        msgs.append({"role": "user", "content": self._user_content(s.pending_user["text"], "\n".join(lines))})
        return msgs

    def _max_turns(self, s: _State) -> int:
        if s.condition in SINGLE_TURN:
            return 1 + self.settings.max_extra_turns
        return len(s.shards) + self.settings.max_extra_turns + (1 if s.condition == "RECAP" else 0)

    def run(self, questions: list[Question], shards: dict[str, list[str]], runs=None) -> dict[tuple[str, str], list[Conversation]]:
        """Simulate every (question, run) pair of every cell in lockstep; ``runs`` defaults to
        all runs. Returns the conversations per (condition, policy) cell, in question order."""
        runs = range(self.settings.runs) if runs is None else runs
        wanted = list(dict.fromkeys(self.cells))
        # RECAP continues a SHARDED conversation of the same policy (run it even if unwanted)
        simulate = [c for c in wanted if c[0] != "RECAP"]
        simulate += [("SHARDED", p) for c, p in wanted if c == "RECAP" and ("SHARDED", p) not in simulate]
        recap_policies = {p for c, p in wanted if c == "RECAP"}
        states = [_State(q, shards[q.qid], run, cond, pol) for cond, pol in simulate for q in questions for run in runs]
        recaps: list[_State] = []
        bar = progress(len(states) + sum(1 for s in states if s.condition == "SHARDED" and s.policy in recap_policies),
                       f"{self.retriever_name} conversations done", unit="conv")
        try:
            turn = 0
            while True:
                active = [s for s in states + recaps if not s.done]
                if not active:
                    break
                turn += 1
                bar.set_postfix(turn=turn, active=len(active))
                self._user_step(active)
                queries = [None if self.closed_book else self._query(s) for s in active]
                a_turns, resps = self.reader.answer(active, queries, [s.run for s in active])
                self._tally("assistant", active, resps)
                for s, a_turn in zip(active, a_turns):
                    answer = a_turn["answer"]
                    s.turns.append(s.pending_user)
                    s.turns.append(a_turn)
                    last_was_recap = bool(s.pending_user.get("recap"))
                    s.pending_user = None
                    correct = answer is not None and exact_match(answer, s.question.answers) == 1.0
                    out_of_nudges = s.extra_used >= self.settings.max_extra_turns
                    n_assistant = sum(1 for t in s.turns if t["role"] == "assistant")
                    if s.condition == "RECAP":
                        s.done = last_was_recap
                    elif correct or (s.all_revealed and (answer is not None or out_of_nudges)) or n_assistant >= self._max_turns(s):
                        s.done = True
                    if s.done:
                        bar.update(1)
                        if s.condition == "SHARDED" and s.policy in recap_policies:
                            recaps.append(self._recap_state(s))
        finally:
            bar.close()  # an error message must not land on the bar's line
        out: dict[tuple[str, str], list[Conversation]] = {c: [] for c in wanted}
        for s in states + recaps:
            if (s.condition, s.policy) in out:
                out[(s.condition, s.policy)].append(self._record(s))
        order = {q.qid: i for i, q in enumerate(questions)}
        for convs in out.values():
            convs.sort(key=lambda c: (order[c.qid], c.run))
        return out

    @staticmethod
    def _recap_state(s: _State) -> _State:
        r = copy.deepcopy(s)
        r.condition, r.done, r.recap_from_sharded = "RECAP", False, True
        return r

    def _record(self, s: _State) -> Conversation:
        answers = [t["answer"] for t in s.turns if t["role"] == "assistant" and t["answer"] is not None]
        if s.condition == "RECAP":  # the answer to the recap turn is the final answer
            answers = [s.turns[-1]["answer"]] if s.turns[-1]["answer"] is not None else []
        conv_id = (f"{self.dataset}/{self.model_name}/{self.retriever_name}/"
                   f"{s.condition}_{s.policy}/{s.question.qid}/run{s.run}")
        return Conversation(
            conv_id=conv_id, study=self.study, qid=s.question.qid, dataset=self.dataset,
            condition=s.condition, policy=s.policy, retriever=self.retriever_name,
            model=self.model_name, run=s.run, turns=s.turns,
            final_answer=answers[-1] if answers else None, answered=bool(answers),
            n_unanswered_turns=sum(1 for t in s.turns if t["role"] == "assistant" and not t["answered"]),
        )
