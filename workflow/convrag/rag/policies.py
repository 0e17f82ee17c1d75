"""Query policies: what a conversational RAG system sends to the retriever at each turn.

A policy maps conversation states to query strings, batched, independent of the retriever:
- ``history``: every user turn so far, one per line (lic_rag's HISTORY; MTRAG's "all
  questions"), so information given earlier keeps steering retrieval;
- ``current``: the latest user turn only (lic_rag's CURRENT; MTRAG's "last turn");
- ``none``: for single-turn conditions (FULL / CONCAT), where the one user message is the
  query; equal to ``current``;
- ``rewrite``: the benchmark's shipped standalone rewrite of the turn (MTRAG, CORAL); a turn
  without one is an error naming it, never a silent fallback;
- ``official_history``: RECOR's RETECO baseline query (BM25-hist), the turn plus the turn's
  official conversation history (``labels.official_history``, ``convrag.data.recor.official_query``);
- ``standalone``: the generated world's resolved question (``labels.standalone_query``);
- ``llm_rewrite``: a standalone rewrite of the last user turn given the conversation,
  written by an LLM with the project's prompt (``resources/prompts/rag/rewrite.yaml``), one
  batched call for all states; an empty rewrite falls back to the last user turn and is
  counted (``PolicyResult.fallbacks``).

A new policy is a function registered with ``@register_policy(name)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from convrag.errors import ConfigError, DataError
from convrag.registry import Registry


@dataclass
class QueryState:
    """What a policy may read: the user turns so far (the last one is being answered), the
    whole conversation as ``{role, text}`` dicts, a shipped rewrite if the benchmark has one,
    and the turn's labels (``TurnTask.labels``)."""

    user_turns: list[str]
    turns: list[dict] = field(default_factory=list)
    rewrite: str | None = None
    key: str = ""  # names the turn in errors (task id)
    labels: dict = field(default_factory=dict)


@dataclass
class PolicyResult:
    queries: list[str]
    fallbacks: int = 0  # states whose policy output was unusable (then the last user turn)
    raw: list[str | None] = field(default_factory=list)  # the LLM's rewrites, where one was asked


@dataclass(frozen=True)
class Policy:
    name: str
    fn: Callable[..., PolicyResult]
    needs_llm: bool = False


POLICIES: "Registry[Policy]" = Registry("query policy")


def register_policy(name: str, needs_llm: bool = False):
    def deco(fn):
        POLICIES.add(name, Policy(name, fn, needs_llm))
        return fn

    return deco


def get_policy(name: str) -> Policy:
    return POLICIES.get(name)


def _check(states: list[QueryState], name: str) -> None:
    for s in states:
        if not s.user_turns:
            raise DataError(f"query policy '{name}': no user turns yet{f' ({s.key})' if s.key else ''}")


@register_policy("history")
def _history(states, **_) -> PolicyResult:
    _check(states, "history")
    return PolicyResult(["\n".join(s.user_turns) for s in states])


@register_policy("current")
def _current(states, **_) -> PolicyResult:
    _check(states, "current")
    return PolicyResult([s.user_turns[-1] for s in states])


@register_policy("none")
def _none(states, **_) -> PolicyResult:
    _check(states, "none")
    return PolicyResult([s.user_turns[-1] for s in states])


@register_policy("rewrite")
def _rewrite(states, **_) -> PolicyResult:
    for s in states:
        if not (s.rewrite or "").strip():
            raise DataError(f"query policy 'rewrite': turn {s.key or '?'} has no shipped rewrite")
    return PolicyResult([s.rewrite for s in states])


def _label(states, name: str, label: str, what: str, empty_ok: bool = False) -> None:
    for s in states:
        if label not in s.labels if empty_ok else not s.labels.get(label):
            raise DataError(f"query policy '{name}': turn {s.key or '?'} has no labels.{label} ({what}); "
                            "this benchmark has none")


@register_policy("official_history")
def _official_history(states, **_) -> PolicyResult:
    from convrag.data.recor import official_query

    _label(states, "official_history", "official_history", "RECOR's conversation_history", empty_ok=True)
    return PolicyResult([official_query({"question": s.user_turns[-1], "labels": s.labels}, with_history=True)
                         for s in states])


@register_policy("standalone")
def _standalone(states, **_) -> PolicyResult:
    _label(states, "standalone", "standalone_query", "the generated world's resolved question")
    return PolicyResult([s.labels["standalone_query"] for s in states])


def rewrite_messages(state: QueryState, prompts: dict) -> list[dict]:
    """The chat messages ``llm_rewrite`` sends for one state: the system prompt, the prompt
    file's few-shot examples as user / assistant turns, then the conversation so far (every
    turn but the last, "Role: text" lines; "(none)" on a first turn) and the last user turn.
    Also the prompt of a rewriter fine-tuned on golden rewrites (``studies.coral.sft``)."""
    history = "\n".join(f"{t['role'].capitalize()}: {t['text'].strip()}" for t in state.turns[:-1]) or "(none)"
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(history=ex["history"], question=ex["question"])})
        msgs.append({"role": "assistant", "content": ex["rewrite"]})
    msgs.append({"role": "user", "content": prompts["user"].format(history=history, question=state.user_turns[-1])})
    return msgs


# The rewrite's reply budget when a caller names none; the config's (rewrite.max_tokens) default is
# the same number (tests/test_retrieval_policies.py holds them together).
REWRITE_MAX_TOKENS = 64


@register_policy("llm_rewrite", needs_llm=True)
def _llm_rewrite(states, llm=None, prompts: dict | None = None, max_tokens: int | None = None, **_) -> PolicyResult:
    from convrag.llm.types import Request, Sampling

    _check(states, "llm_rewrite")
    if llm is None or prompts is None:
        raise ConfigError("query policy 'llm_rewrite' needs an LLM and its prompt file")
    # the policy's decoding: greedy, one line; only the budget is the caller's
    sampling = Sampling(max_tokens=max_tokens or REWRITE_MAX_TOKENS, stop=("\n",))
    reqs = [Request(messages=rewrite_messages(s, prompts), sampling=sampling) for s in states]
    out = PolicyResult([], raw=[])
    for s, r in zip(states, llm.generate(reqs, desc="rewrite queries")):
        text = r.text.strip().strip('"').strip()
        out.raw.append(r.text)
        if text:
            out.queries.append(text)
        else:
            out.queries.append(s.user_turns[-1])
            out.fallbacks += 1
    return out


def make_queries(name: str, states: list[QueryState], **kw) -> PolicyResult:
    return get_policy(name).fn(states, **kw)


def make_query(policy: str, user_turns: list[str]) -> str:
    """One query of a policy that needs no LLM (lic_rag's per-conversation call)."""
    p = get_policy(policy)
    if p.needs_llm:
        raise ConfigError(f"query policy '{policy}' needs an LLM: use make_queries")
    return p.fn([QueryState(list(user_turns))]).queries[0]
