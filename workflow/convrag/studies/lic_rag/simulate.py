"""The conversation runner: FULL, CONCAT, SHARDED, RECAP and SNOWBALL delivery with retrieval
at every turn, for every (condition, policy) cell of one job at once.

All conversations of all cells of a job advance in lockstep: per turn, one batched
user-simulator call (for every conversation that reveals a shard), one batched retrieval
call, and one batched assistant call. Never one conversation at a time: batching is what
makes the grid affordable, and the cells share requests (every multi-turn cell opens with
the same first shard, so those turns are answered once).

When the user simulator is an API model and the assistant a local one (the paper configs), a
job's (question, run) pairs go in two cohorts that take turns: one cohort's user step (and its
retrieval, when the retriever's LLM is an API model too) runs on a worker thread while the GPU
answers the other cohort, and finished conversations are labelled (classifier, judge) on
threads of their own while the simulation goes on. The GPU then waits on the API only where
one side is longer than the other, so a job takes about max(GPU, API) time rather than their
sum (``ConversationRunner.run``). The conversations are the same as in lockstep.

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
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from convrag.errors import ConfigError
from convrag.llm.engine import is_remote
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
    record: Conversation | None = None  # written when it finishes (overlapped runs: labelled then)

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


class _Labeller:
    """One labeller on a thread of its own: ``fn(batch) -> results or None`` over the items given to
    ``submit``, in that order; the items that wait while it works go together into its next call
    (one API batch). A later call therefore finds an earlier call's answers in the LLM cache, so a
    prompt asked twice (a RECAP's SHARDED turns, a first turn shared by cells) gets one answer, as
    in one lockstep batch. ``results``: (item, result) pairs. ``check`` and ``close`` raise its
    error, if any; after an error it labels nothing more."""

    def __init__(self, fn, name: str):
        self.fn, self.pending, self.results, self.error = fn, [], [], None
        self._cv, self._closing = threading.Condition(), False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, items: list) -> None:
        if items:
            with self._cv:
                self.pending += items
                self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self.pending or self._closing)
                if not self.pending:
                    return
                batch, self.pending = self.pending, []
            try:
                out = self.fn(batch)
            except BaseException as e:  # handed to the simulating thread by check/close
                with self._cv:
                    self.error, self.pending = e, []
                return
            if out is not None:
                self.results += zip(batch, out)

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def close(self, cancel: bool = False) -> None:
        """Wait until every item is labelled (``cancel``: drop those not started) and raise the error, if any."""
        with self._cv:
            if cancel:
                self.pending = []
            self._closing = True
            self._cv.notify()
        self._thread.join()
        if not cancel:
            self.check()


class ConversationRunner:
    """``capabilities``: those of the retriever's kind (closed book is decided by them, never
    by the retriever's config name)."""

    def __init__(self, *, cells, retriever, retriever_name, capabilities: Capabilities, model_name, user_model_name,
                 dataset, passages: dict[str, Passage], assistant_engine, user_engine, prompts: dict,
                 settings: Settings, study: str = "lic_rag", retriever_engine=None):
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
        # ``retriever_engine``: the retriever's LLM, if any; an API one retrieves on the API side
        # of an overlapped turn (``run``)
        self._api_retrieval = capabilities.llm_at_query and is_remote(retriever_engine)
        self._usage_lock = threading.Lock()  # the two sides of an overlapped turn tally at once
        # per cell and role: what its conversations asked of the LLMs (for sizing a grid);
        # a RECAP cell is charged only for its recap turns (the rest is its SHARDED twin's)
        self.usage: dict[str, dict[str, dict[str, int]]] = {}

    def _tally(self, role: str, states: list[_State], responses) -> None:
        with self._usage_lock:
            self._tally_locked(role, states, responses)

    def _tally_locked(self, role: str, states: list[_State], responses) -> None:
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

    def _overlap(self, wanted: bool | None) -> bool:
        """Whether the API side of a turn overlaps the local side (see ``run``): only when the user
        simulator calls an API model and the assistant a local one; ``wanted`` False turns it off."""
        if wanted is False:
            return False
        return is_remote(self.user_engine) and not is_remote(self.reader.engine)

    def run(self, questions: list[Question], shards: dict[str, list[str]], runs=None, labels=None,
            overlap: bool | None = None) -> dict[tuple[str, str], list[Conversation]]:
        """Simulate every (question, run) pair of every cell; ``runs`` defaults to all runs.
        Returns the conversations per (condition, policy) cell, in question order, labelled by
        ``labels`` when given (``lic_rag.labels.Labels``: each assistant turn's category, each
        final answer's verdict).

        Lockstep (the default, and whenever the user simulator and the assistant are not an API
        and a local model, or ``overlap`` is False): per turn the user step, the retrieval and the
        assistant step of every active conversation, one batch each; the labels come after the
        simulation, one batch each. Overlapped (``overlap`` None, an API user simulator beside a
        local assistant): ``_run_overlapped``. The conversations are the same either way (every
        request carries its seed and sample index, and the backends are batch-invariant); the
        batches are not."""
        runs = range(self.settings.runs) if runs is None else runs
        wanted = list(dict.fromkeys(self.cells))
        # RECAP continues a SHARDED conversation of the same policy (run it even if unwanted)
        simulate = [c for c in wanted if c[0] != "RECAP"]
        simulate += [("SHARDED", p) for c, p in wanted if c == "RECAP" and ("SHARDED", p) not in simulate]
        recap_policies = {p for c, p in wanted if c == "RECAP"}
        states = [_State(q, shards[q.qid], run, cond, pol) for cond, pol in simulate for q in questions for run in runs]
        bar = progress(len(states) + sum(1 for s in states if s.condition == "SHARDED" and s.policy in recap_policies),
                       f"{self.retriever_name} conversations done", unit="conv")
        overlapped = self._overlap(overlap)
        background = labels if overlapped and labels is not None and labels.remote else None
        try:
            if overlapped:
                recaps = self._run_overlapped(states, recap_policies, set(wanted), bar, background)
            else:
                recaps = self._run_lockstep(states, recap_policies, bar)
        finally:
            bar.close()  # an error message must not land on the bar's line
        out: dict[tuple[str, str], list[Conversation]] = {c: [] for c in wanted}
        for s in states + recaps:
            if (s.condition, s.policy) in out:
                out[(s.condition, s.policy)].append(s.record if s.record is not None else self._record(s))
        order = {q.qid: i for i, q in enumerate(questions)}
        for convs in out.values():
            convs.sort(key=lambda c: (order[c.qid], c.run))
        if labels is not None and background is None:
            labels.label([c for v in out.values() for c in v])
        return out

    def _advance(self, active: list[_State], a_turns: list[dict], recap_policies: set, bar) -> list[_State]:
        """Record the answered turn of each active conversation and apply the stopping rule;
        returns the conversations this turn finished, with each RECAP continuation started."""
        finished = []
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
                finished.append(s)
                if s.condition == "SHARDED" and s.policy in recap_policies:
                    finished.append(self._recap_state(s))
        return finished

    def _run_lockstep(self, states: list[_State], recap_policies: set, bar) -> list[_State]:
        recaps: list[_State] = []
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
            recaps += [s for s in self._advance(active, a_turns, recap_policies, bar) if not s.done]
        return recaps

    def _needs_api(self, s: _State) -> bool:
        """Whether the next API side of ``s`` calls an API model (the branches of ``_user_step``)."""
        if s.done:
            return False
        if self._api_retrieval and not self.closed_book:
            return True
        return bool(s.turns) and not s.recap_from_sharded and not s.all_revealed

    def _api_side(self, cohort: list[_State]):
        """A cohort's API side of a turn (on the worker thread): its user step and, for a retriever
        whose LLM is an API model, its retrieval. ``(active, queries, results or None)``."""
        active = [s for s in cohort if not s.done]
        if not active:
            return active, [], None
        self._user_step(active)
        queries = [None if self.closed_book else self._query(s) for s in active]
        return active, queries, (self.reader.retrieve(queries) if self._api_retrieval else None)

    @staticmethod
    def _turn_items(s: _State, start: int) -> list[tuple[dict, str, str]]:
        """``(turn, the user's last message before it, its reply)`` of the assistant turns of ``s``
        from index ``start`` on: what the classifier is asked about each."""
        out, last_user = [], ""
        for i, t in enumerate(s.turns):
            if t["role"] == "user":
                last_user = t["text"]
            elif i >= start:
                out.append((t, last_user, t.get("text") or ""))
        return out

    def _run_overlapped(self, states: list[_State], recap_policies: set, wanted: set, bar, labels) -> list[_State]:
        """Two cohorts, the (question, run) pairs alternately (every cell of a pair in one cohort,
        so the cells' shared first turns stay in one batch). One worker thread runs a cohort's API
        side (user step; retrieval too when the retriever's LLM is an API model) while this thread
        runs the other cohort's local side (retrieval with a local retriever, the assistant's
        batch, the stopping rule), then they swap: the GPU waits only where one cohort's API side
        is longer than the other's GPU side.

        ``labels`` (API models, or None: labelled after the simulation): after every round (each
        cohort took one turn) the round's assistant turns go to the classifier and its finished
        conversations to the judge, each on a thread of its own (``_Labeller``). The classifier
        reads the turns' texts, never the turns: the categories are written into them here, at
        the end, while a RECAP conversation may copy its SHARDED twin's turns meanwhile. A failure
        in any thread fails the run (nothing is returned, so the job writes nothing)."""
        pairs = {}
        for s in states:
            pairs.setdefault((s.question.qid, s.run), len(pairs))
        cohorts = [c for c in ([s for s in states if pairs[(s.question.qid, s.run)] % 2 == i] for i in (0, 1)) if c]
        recaps: list[_State] = []
        api = ThreadPoolExecutor(1, thread_name_prefix="convrag-api")
        labs = []
        if labels is not None:
            labs = [_Labeller(lambda items: labels.categories([(u, r) for _, u, r in items]), "convrag-classify"),
                    _Labeller(labels.judge, "convrag-judge")]
        ok = False
        try:
            def submit(i):  # a cohort's next API side: its states as they are now, and whether it keeps apart
                cohort = [s for s in cohorts[i] if not s.done]
                # a first turn keeps apart too, so the cohorts start staggered (one's first GPU batch
                # beside the other's first user step)
                apart = any(self._needs_api(s) or not s.turns for s in cohort)
                return i, api.submit(self._api_side, cohort), apart

            queue = deque(submit(i) for i in range(len(cohorts)))
            turns, new_turns, finished_convs = [0] * len(cohorts), [], []
            while queue:
                batch = [queue.popleft()]
                if not batch[0][2] and not any(apart for _, _, apart in queue):
                    batch += queue  # no cohort waits on the API: one batch for all (nudges, recaps at the end)
                    queue.clear()
                sides = [(i, *fut.result()) for i, fut, _ in batch]
                sides = [side for side in sides if side[1]]  # a cohort with nothing active is done
                if not sides:
                    continue
                active = [s for _, act, _, _ in sides for s in act]
                queries = [q for _, _, qs, _ in sides for q in qs]
                # an API retrieval is a call to the API: its cohort is never merged with another
                results = sides[0][3] if len(sides) == 1 else None
                for i, *_ in sides:
                    turns[i] += 1
                bar.set_postfix(turn=max(turns), active=sum(1 for c in cohorts for s in c if not s.done))
                a_turns, resps = self.reader.answer(active, queries, [s.run for s in active], results=results)
                self._tally("assistant", active, resps)
                at = 0
                for i, act, _, _ in sides:
                    finished = self._advance(act, a_turns[at:at + len(act)], recap_policies, bar)
                    at += len(act)
                    started = [s for s in finished if not s.done]
                    cohorts[i] += started
                    recaps += started
                    queue.append(submit(i))  # its next API side, at once
                    for s in act:
                        if (s.condition, s.policy) in wanted:
                            new_turns += self._turn_items(s, len(s.turns) - 1)
                    for s in started:  # a RECAP conversation's copies of its twin's turns are its own
                        new_turns += self._turn_items(s, 0)
                    for s in finished:
                        if s.done:
                            s.record = self._record(s)
                            if (s.condition, s.policy) in wanted:
                                finished_convs.append(s.record)
                if queue[0][0] <= sides[-1][0]:  # every cohort took this turn: label what the round did
                    for lab in labs:
                        lab.check()  # a labeller's failure stops the simulation
                    if labs:
                        labs[0].submit(new_turns)
                        labs[1].submit(finished_convs)
                    new_turns, finished_convs = [], []
            if labs:
                labs[0].submit(new_turns)
                labs[1].submit(finished_convs)
                for lab in labs:
                    lab.close()
                for (turn, _, _), fields in labs[0].results:
                    turn.update(fields)
            ok = True
        finally:
            api.shutdown(wait=True, cancel_futures=not ok)
            for lab in labs:
                lab.close(cancel=True)
        return recaps

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
