"""CORAL's conversation construction, part 2: the LLM steps that turn sampled flows into
conversations (Cheng et al., *CORAL: Benchmarking Multi-turn Conversational RAG*, arXiv
2410.23090). Part 1 (title trees, flow samplers) is :mod:`convrag.studies.coral.pages`.

The paper, with gpt-4-turbo at temperature 0.7:

1. **Full question** (:func:`full_questions`): from a node's keyword chain (titles root ->
   node) and its section text, the model writes the standalone question the section
   answers, centred on the last keyword. Reply ``Question: ...`` on one line (at most 64
   tokens, stop at a newline); a reply without a parseable question is asked again, up to
   5 tries. The full question is the turn's golden rewrite.
2. **Conversational question** (:func:`conversational_questions`): every later turn is
   rewritten, given the earlier questions of the conversation, into the elliptical form it
   would have in a chat (references back, omitted words). Turn 1 stays standalone.

Why batched: every attempt of step 1 is ONE ``engine.generate`` call over all items still
open (the first attempt: all of them), and step 2 is one call over all later turns of all
conversations. The engine batches, dedupes and caches, so a rerun pays nothing and shared
prefixes (two LDS flows that begin alike) are asked once.

Nothing is dropped silently: an item that never parses gets a deterministic question built
from its keyword chain (``fallback_question`` of the YAML) and a rewrite that does not parse
keeps the full question; both are counted and every raw unparsed reply is kept in the
report. Retries use the next ``sample_index`` (0, 1, ...), so with temperature > 0 each try
is a fresh, reproducible sample; under greedy decoding a retry repeats the same answer
(one more cached miss, then the fallback).

All prompt wording (system text, templates, worked examples, the fallback question) lives
in ``resources/prompts/coral/contextualise.yaml``; this module keeps none.

:func:`build_conversations` produces :class:`~convrag.records.TurnTask` records shaped like
those of the released data (:mod:`convrag.data.coral`), so later stages treat generated and
released conversations alike:

- turn ``k`` of flow ``i`` is the flow's ``k``-th kept node; ``conversation_id`` =
  ``"<flow kind>-<i>"`` (``i`` = the flow's position in the input list, so ids do not move
  when another flow is skipped), or the record's own ``conversation_id`` when the flow is
  a flow record of :func:`convrag.studies.coral.construct.sample_flows` (a dict with
  ``flow``, ``node_ids``, ``page_ids``, ``second_page_id``); ``task_id`` =
  ``"<conversation_id>_<k>"``;
- ``question`` = the conversational question, ``rewrite`` = the full question,
  ``reference_answers`` = ``[node.text]``, ``history`` = earlier turns as ``user`` (their
  conversational question) / ``assistant`` (their plain section text) items;
- ``labels.reference_with_citations`` = the node's ``marked_text`` with each ``[ref id]``
  replaced by ``[doc id]`` (``ref_to_doc[page][ref]``; a ref it does not map is a
  :class:`~convrag.errors.DataError` naming page, node and ref; with ``ref_to_doc=None`` the
  doc id is :func:`default_doc_id`), ``labels.cited_passages`` = the cited doc ids in order
  of first citation, ``gold_docs`` = ``{doc id: 1}`` for each, ``contexts`` = ``[]`` (filled
  later from the corpus);
- the other labels of the loader (``domain``, ``split`` (None: generated data has no
  split), ``flow`` upper case, ``flow_code``, ``turn``, ``first_turn``, ``n_turns``,
  ``has_gold``, ``n_citations``) plus ``generated``, ``flow_index``, ``node_id``, ``page_id``,
  ``page_ids``, ``second_page_id``, ``keyword_chain``, ``question_fallback``,
  ``rewrite_fallback``.

Short sections: a node whose text (stripped) has fewer than ``min_text_chars`` characters
(default 10, the threshold of CORAL's own preprocessing; never below 1, so an empty section
is never a turn) is left out of its conversation and counted; the later nodes of the flow
move up one turn (LDS keeps its descent: a skipped node's title still appears in the
keyword chains below it). A flow left with no node gives no conversation (counted).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence


from convrag.resources import REPO_ROOT
from convrag.data.coral import DOMAIN, FLOWS, sample_id
from convrag.studies.coral.pages import SAMPLERS, Flow, TitleNode, TitleTree
from convrag.errors import ConfigError, DataError, ModelError
from convrag.llm.types import Request, Sampling
from convrag.records import TurnTask

__all__ = [
    "PROMPT_FILE", "PAPER_SAMPLING", "MAX_TRIES", "MIN_TEXT_CHARS", "load_prompts", "parse_question",
    "question_requests", "fallback_question", "full_questions", "conversational_requests",
    "conversational_questions", "default_doc_id", "cite_with_doc_ids", "build_conversations",
]

PROMPT_FILE = REPO_ROOT / "resources" / "prompts" / "coral" / "contextualise.yaml"
# The paper's decoding: temperature 0.7, at most 64 tokens, one line.
PAPER_SAMPLING = Sampling(temperature=0.7, max_tokens=64, stop=("\n",))
MAX_TRIES = 5
MIN_TEXT_CHARS = 10
_FLOW_CODE = {v: k for k, v in FLOWS.items()}  # "LDS" -> "a", as the released ids letter them

# ----------------------------------------------------------------------------- prompts

_PROMPT_KEYS = {"full_question": ("system", "user"), "conversational": ("system", "user")}
_TOP_KEYS = ("keyword_separator", "earlier_line", "fallback_question")


def load_prompts(path: str | Path | None = None) -> dict:
    """The prompt file (default :data:`PROMPT_FILE`), checked so that a missing key fails
    before any model call."""
    from convrag.resources import read_prompt_file

    return read_prompt_file(path if path is not None else PROMPT_FILE, _check_prompts, "CORAL contextualise prompts")


def _check_prompts(prompts: Any, where: str = "prompts") -> None:
    if not isinstance(prompts, Mapping):
        raise ConfigError(f"{where}: expected a mapping of prompts")
    for name, keys in _PROMPT_KEYS.items():
        if not isinstance(prompts.get(name), Mapping):
            raise ConfigError(f"{where}: missing prompt {name!r}")
        for k in keys:
            if not isinstance(prompts[name].get(k), str):
                raise ConfigError(f"{where}: prompt {name!r} lacks {k!r}")
    for k in _TOP_KEYS:
        if k not in prompts:
            raise ConfigError(f"{where}: missing {k!r}")
    fb = prompts["fallback_question"]
    if not isinstance(fb, Mapping) or not all(isinstance(fb.get(k), str) for k in ("root_only", "nested")):
        raise ConfigError(f"{where}: 'fallback_question' needs 'root_only' and 'nested' templates")


def _messages(prompt: Mapping, fields: dict[str, str], example_fields) -> list[dict[str, str]]:
    """System, the worked examples as user/assistant pairs, then the real user message."""
    msgs = [{"role": "system", "content": prompt["system"].strip()}]
    for ex in prompt.get("examples") or []:
        msgs.append({"role": "user", "content": prompt["user"].format(**example_fields(ex))})
        msgs.append({"role": "assistant", "content": str(ex["reply"]).strip()})
    msgs.append({"role": "user", "content": prompt["user"].format(**fields)})
    return msgs


# ----------------------------------------------------------------------------- parsing

_PREFIX = re.compile(r"^question\s*[:：]\s*", re.IGNORECASE)
_LEAD = " \t\"“”`*#>"  # whitespace, double quotes, markdown emphasis / heading / quote marks
_PAIRS = {"'": "'", "‘": "’", "\"": "\"", "“": "”"}


def parse_question(reply: str | None) -> str | None:
    """The question of a ``Question: ...`` reply, else None.

    The first non-empty line must start with ``Question:`` (any case), possibly after
    whitespace, double quotes or markdown marks (``**Question:**``); the rest of that line,
    stripped of whitespace, emphasis marks and enclosing quotes, is the question. A reply
    with no such line, or with nothing after the prefix, is not parseable."""
    if not reply:
        return None
    lines = [ln for ln in reply.splitlines() if ln.strip()]
    if not lines:
        return None
    first = lines[0]
    line = first.lstrip(_LEAD + "'‘")
    m = _PREFIX.match(line)
    if not m:
        return None
    q = line[m.end():].strip().strip("*").strip()
    while len(q) >= 2 and q[0] in _PAIRS and q[-1] == _PAIRS[q[0]]:
        q = q[1:-1].strip()
    # closing marks of a line that opened with them ('Question: ...?' -> no trailing quote)
    q = q.strip(" \t\"“”`*")
    if any(ch in "'‘" for ch in first[:len(first) - len(line)]):
        q = q.rstrip("'’ ")
    return q if any(ch.isalnum() for ch in q) else None


# ----------------------------------------------------------------------------- step 1


def _chain_fields(prompts: Mapping, chain: Sequence[str]) -> dict[str, str]:
    chain = [str(k).strip() for k in chain]
    if not chain or not all(chain):
        raise ValueError(f"keyword chain must be a non-empty list of non-empty titles, got {chain!r}")
    return {"keywords": prompts["keyword_separator"].join(chain), "last_keyword": chain[-1],
            "root_keyword": chain[0]}


def _question_messages(prompts: Mapping, chain: Sequence[str], text: str) -> list[dict[str, str]]:
    p = prompts["full_question"]
    return _messages(p, {**_chain_fields(prompts, chain), "text": text.strip()},
                     lambda ex: {**_chain_fields(prompts, ex["keywords"]), "text": str(ex["text"]).strip()})


def _clip(text: str, max_text_chars: int | None) -> str:
    return text if max_text_chars is None or len(text) <= max_text_chars else text[:max_text_chars]


def question_requests(items: Sequence[tuple[Sequence[str], str]], prompts: Mapping, sampling: Sampling,
                      seed: int, attempt: int, *, max_text_chars: int | None = None) -> list[Request]:
    """Step-1 requests for ``items`` = ``(keyword chain, section text)``; try ``attempt``
    (0-based) is ``sample_index``. ``max_text_chars`` clips long section texts (None: no
    clipping, as in the paper)."""
    _check_prompts(prompts)
    return [Request(messages=_question_messages(prompts, chain, _clip(text, max_text_chars)),
                    sampling=sampling, seed=seed, sample_index=attempt) for chain, text in items]


def fallback_question(chain: Sequence[str], prompts: Mapping) -> str:
    """The deterministic question of an item that never parsed (wording from the YAML)."""
    f = _chain_fields(prompts, chain)
    fb = prompts["fallback_question"]
    return (fb["root_only"] if len(chain) == 1 else fb["nested"]).format(**f)


def _generate(engine, requests: list[Request], desc: str):
    responses = engine.generate(requests, desc=desc)
    if len(responses) != len(requests):
        raise ModelError(f"{desc}: engine returned {len(responses)} responses for {len(requests)} requests")
    return responses


def full_questions(engine, items: Sequence[tuple[Sequence[str], str]], prompts: Mapping, *, sampling: Sampling,
                   seed: int = 0, max_tries: int = MAX_TRIES,
                   max_text_chars: int | None = None) -> tuple[list[str], dict]:
    """Step 1 for all ``items`` (``(keyword chain, section text)``): one batched call per try,
    retrying only the items whose reply did not parse, then the fallback question.

    Report: ``items``, ``max_tries``, ``attempts`` (tries made), ``requests_per_attempt``,
    ``parsed_per_attempt``, ``parsed``, ``fallbacks``, ``fallback_items`` (item indices),
    ``unparsed_replies`` (``{item, attempt, sample_index, reply, finish_reason}`` for every
    reply that did not parse), ``clipped_texts``. ``parsed + fallbacks == items``."""
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    _check_prompts(prompts)
    items = [(list(chain), str(text)) for chain, text in items]
    for chain, _ in items:
        _chain_fields(prompts, chain)  # a bad chain fails before any model call
    questions: list[str | None] = [None] * len(items)
    pending = list(range(len(items)))
    sent: list[int] = []
    parsed: list[int] = []
    unparsed: list[dict] = []
    for attempt in range(max_tries):
        if not pending:
            break
        reqs = question_requests([items[i] for i in pending], prompts, sampling, seed, attempt,
                                 max_text_chars=max_text_chars)
        responses = _generate(engine, reqs, f"coral full questions (try {attempt + 1})")
        still = []
        for i, r in zip(pending, responses):
            q = parse_question(r.text)
            if q is None:
                unparsed.append({"item": i, "attempt": attempt, "sample_index": attempt, "reply": r.text,
                                 "finish_reason": r.finish_reason})
                still.append(i)
            else:
                questions[i] = q
        sent.append(len(pending))
        parsed.append(len(pending) - len(still))
        pending = still
    for i in pending:
        questions[i] = fallback_question(items[i][0], prompts)
    report = {
        "items": len(items), "max_tries": max_tries, "attempts": len(sent), "requests_per_attempt": sent,
        "parsed_per_attempt": parsed, "parsed": sum(parsed), "fallbacks": len(pending),
        "fallback_items": list(pending), "unparsed_replies": unparsed,
        "clipped_texts": sum(max_text_chars is not None and len(t) > max_text_chars for _, t in items),
    }
    return [str(q) for q in questions], report


# ----------------------------------------------------------------------------- step 2


def _earlier_fields(prompts: Mapping, earlier: Sequence[str], question: str) -> dict[str, str]:
    lines = [prompts["earlier_line"].format(index=k, question=str(q).strip()) for k, q in enumerate(earlier, 1)]
    return {"earlier": "\n".join(lines), "question": str(question).strip()}


def conversational_requests(conversations: Sequence[Sequence[str]], prompts: Mapping, sampling: Sampling,
                            seed: int = 0) -> tuple[list[Request], list[tuple[int, int]]]:
    """Step-2 requests for every turn after the first of every conversation, with the
    ``(conversation index, 0-based turn index)`` of each."""
    _check_prompts(prompts)
    p = prompts["conversational"]
    reqs, slots = [], []
    for c, conv in enumerate(conversations):
        conv = [str(q) for q in conv]
        for t in range(1, len(conv)):
            msgs = _messages(p, _earlier_fields(prompts, conv[:t], conv[t]),
                             lambda ex: _earlier_fields(prompts, ex["earlier"], ex["question"]))
            reqs.append(Request(messages=msgs, sampling=sampling, seed=seed, sample_index=0))
            slots.append((c, t))
    return reqs, slots


def conversational_questions(engine, conversations: Sequence[Sequence[str]], prompts: Mapping, *,
                             sampling: Sampling, seed: int = 0) -> tuple[list[list[str]], dict]:
    """Step 2: each conversation's full questions in order -> its conversational questions.
    Turn 1 is kept as it is; all later turns of all conversations go in one batched call,
    each given the earlier FULL questions. An unparseable reply keeps the full question.

    Report: ``conversations``, ``turns``, ``first_turns`` (kept as is), ``requests``,
    ``parsed``, ``unchanged`` (parsed but equal to the full question), ``fallbacks``,
    ``fallback_turns`` (``{conversation, turn}``, turn 1-based), ``unparsed_replies``
    (``{conversation, turn, reply, finish_reason}``). ``first_turns + parsed + fallbacks ==
    turns``."""
    convs = [[str(q) for q in conv] for conv in conversations]
    for c, conv in enumerate(convs):
        if any(not q.strip() for q in conv):
            raise ValueError(f"conversation {c}: every full question must be non-empty")
    reqs, slots = conversational_requests(convs, prompts, sampling, seed)
    responses = _generate(engine, reqs, "coral conversational questions") if reqs else []
    out = [list(conv) for conv in convs]
    fallbacks, unparsed = [], []
    unchanged = 0
    for (c, t), r in zip(slots, responses):
        q = parse_question(r.text)
        if q is None:
            fallbacks.append({"conversation": c, "turn": t + 1})
            unparsed.append({"conversation": c, "turn": t + 1, "reply": r.text, "finish_reason": r.finish_reason})
        else:
            out[c][t] = q
            unchanged += q == convs[c][t].strip()
    report = {
        "conversations": len(convs), "turns": sum(len(c) for c in convs),
        "first_turns": sum(bool(c) for c in convs), "requests": len(reqs),
        "parsed": len(reqs) - len(fallbacks), "unchanged": unchanged, "fallbacks": len(fallbacks),
        "fallback_turns": fallbacks, "unparsed_replies": unparsed,
    }
    return out, report


# ----------------------------------------------------------------------------- citations


def default_doc_id(page_id: str, ref_id: str) -> str:
    """Doc id of a reference when no corpus mapping is given: unique across pages (ref ids
    such as ``cite_note-3`` repeat from page to page)."""
    return f"{page_id}:{ref_id}"


_MARK = re.compile(r"\[([^\[\]\n]+)\]")


def cite_with_doc_ids(node: TitleNode, ref_to_doc: Mapping[str, Mapping[str, Any]] | None
                      ) -> tuple[str, list[str], int]:
    """``(marked text with [ref id] -> [doc id], cited doc ids in order of first citation,
    number of markers)``. Only the node's ``cited_refs`` are markers; other bracketed text
    ("[citation needed]") is left alone. A cited ref that ``ref_to_doc`` does not map is a
    DataError naming page, node and ref."""
    def doc(ref: str) -> str:
        if ref_to_doc is None:
            return default_doc_id(node.page_id, ref)
        page = ref_to_doc.get(node.page_id)
        if page is None or ref not in page:
            why = "has no entry for the page" if page is None else "does not map it"
            raise DataError(f"page {node.page_id!r}, node {node.node_id!r} ({node.title!r}): cited reference "
                            f"{ref!r} is not in the corpus (ref_to_doc {why})")
        return str(page[ref])

    refs = set(node.cited_refs)
    docs = {ref: doc(ref) for ref in node.cited_refs}
    order: list[str] = []
    count = 0

    def sub(m: re.Match) -> str:
        nonlocal count
        ref = m.group(1)
        if ref not in refs:
            return m.group(0)
        count += 1
        order.append(docs[ref])
        return f"[{docs[ref]}]"

    text = _MARK.sub(sub, node.marked_text)
    order += [docs[r] for r in node.cited_refs]  # a listed ref without a marker still counts as cited
    return text.strip(), list(dict.fromkeys(order)), count


# ----------------------------------------------------------------------------- conversations


def _as_flow(flow: Flow | Mapping[str, Any], fi: int) -> tuple[Flow, str]:
    """(Flow, conversation id) of a :class:`Flow` or of a flow record (dict)."""
    if isinstance(flow, Flow):
        kind, f = flow.kind, flow
        cid = None
    elif isinstance(flow, Mapping):
        kind = str(flow.get("kind") or flow.get("flow") or "").lower()
        if "node_ids" not in flow:
            raise DataError(f"flow {fi}: record lacks 'node_ids'")
        nodes = tuple(str(n) for n in flow["node_ids"])
        pages = tuple(str(p) for p in flow.get("page_ids") or (n.rsplit("#", 1)[0] for n in nodes))
        f = Flow(kind, nodes, pages, flow.get("second_page_id"))
        cid = flow.get("conversation_id")
    else:
        raise TypeError(f"flow {fi}: expected a Flow or a flow record, got {type(flow).__name__}")
    if kind not in SAMPLERS:
        raise ConfigError(f"flow {fi}: unknown flow sampler {kind!r} (known: {', '.join(SAMPLERS)})")
    return f, str(cid) if cid else f"{kind}-{fi}"


def build_conversations(trees: Mapping[str, TitleTree], flows: Sequence[Flow | Mapping[str, Any]], engine,
                        prompts: Mapping, *,
                        ref_to_doc: Mapping[str, Mapping[str, Any]] | None = None, sampling: Sampling,
                        seed: int = 0, benchmark: str = "coral_world", min_text_chars: int = MIN_TEXT_CHARS,
                        max_tries: int = MAX_TRIES, max_text_chars: int | None = None
                        ) -> tuple[list[TurnTask], dict]:
    """Flows -> TurnTasks (see the module docstring for the record shape), with both LLM
    steps batched over all flows. Citations are resolved before any model call, so a bad
    ``ref_to_doc`` fails without cost. Each distinct node gets one full question, shared by
    every flow that visits it.

    Report: ``flows``, ``conversations``, ``turns``, ``empty_flows`` (flow indices left
    without a node), ``skipped_nodes`` / ``skipped_node_list`` (``{flow, node_id,
    chars}``, text under ``min_text_chars``), ``min_text_chars``, ``distinct_nodes``,
    ``conversations_by_flow``, ``turns_by_flow``, ``turns_with_citations``,
    ``turns_without_gold``, ``citations``, ``question_fallbacks``, ``rewrite_fallbacks`` and
    the two step reports, ``full_questions`` and ``conversational``."""
    _check_prompts(prompts)
    min_chars = max(int(min_text_chars), 1)
    kept: list[tuple[int, str, Flow, list[tuple[TitleTree, TitleNode]]]] = []
    skipped: list[dict] = []
    empty: list[int] = []
    seen_ids: set[str] = set()
    for fi, raw in enumerate(flows):
        flow, cid = _as_flow(raw, fi)
        if cid in seen_ids:
            raise DataError(f"flow {fi}: conversation id {cid!r} is not unique")
        seen_ids.add(cid)
        if len(flow.node_ids) != len(flow.page_ids):
            raise DataError(f"flow {fi}: {len(flow.node_ids)} node ids but {len(flow.page_ids)} page ids")
        nodes = []
        for nid, pid in zip(flow.node_ids, flow.page_ids):
            tree = trees.get(pid)
            if tree is None:
                raise DataError(f"flow {fi}: page {pid!r} of node {nid!r} is not among the trees")
            if nid not in tree:
                raise DataError(f"flow {fi}: node {nid!r} is not in the tree of page {pid!r}")
            node = tree[nid]
            chars = len(node.text.strip())
            if chars < min_chars:
                skipped.append({"flow": fi, "node_id": nid, "chars": chars})
                continue
            nodes.append((tree, node))
        if nodes:
            kept.append((fi, cid, flow, nodes))
        else:
            empty.append(fi)

    distinct: dict[str, tuple[TitleTree, TitleNode]] = {}
    for *_, nodes in kept:
        for tree, node in nodes:
            distinct.setdefault(node.node_id, (tree, node))
    cites = {nid: cite_with_doc_ids(node, ref_to_doc) for nid, (_, node) in distinct.items()}
    chains = {nid: tree.keyword_chain(nid) for nid, (tree, _) in distinct.items()}

    order = list(distinct)
    full, qrep = full_questions(engine, [(chains[n], distinct[n][1].text) for n in order], prompts,
                                sampling=sampling, seed=seed, max_tries=max_tries, max_text_chars=max_text_chars)
    full_of = dict(zip(order, full))
    q_fallback = {order[i] for i in qrep["fallback_items"]}
    convs = [[full_of[node.node_id] for _, node in nodes] for *_, nodes in kept]
    conv_q, crep = conversational_questions(engine, convs, prompts, sampling=sampling, seed=seed)
    r_fallback = {(f["conversation"], f["turn"]) for f in crep["fallback_turns"]}

    tasks: list[TurnTask] = []
    for c, (fi, cid, flow, nodes) in enumerate(kept):
        n = len(nodes)
        page_ids = list(dict.fromkeys(node.page_id for _, node in nodes))
        history: list[dict] = []
        for k, (_, node) in enumerate(nodes, 1):
            marked, cited, n_cites = cites[node.node_id]
            labels = {
                "domain": DOMAIN, "split": None, "flow": flow.kind.upper(),
                "flow_code": _FLOW_CODE.get(flow.kind.upper()),
                "turn": k, "first_turn": k == 1, "n_turns": n, "has_gold": bool(cited),
                "reference_with_citations": marked, "cited_passages": list(cited), "n_citations": n_cites,
                "generated": True, "flow_index": fi, "node_id": node.node_id, "page_id": node.page_id,
                "page_ids": list(page_ids), "second_page_id": flow.second_page_id,
                "keyword_chain": list(chains[node.node_id]), "question_fallback": node.node_id in q_fallback,
                "rewrite_fallback": (c, k) in r_fallback,
            }
            question = conv_q[c][k - 1]
            d = {"task_id": sample_id(cid, k), "benchmark": benchmark, "conversation_id": cid, "turn": k,
                 "history": list(history), "question": question, "reference_answers": [node.text],
                 "gold_docs": {doc: 1 for doc in cited}, "rewrite": full_of[node.node_id], "contexts": [],
                 "labels": labels}
            # schema check on the last turn only (it holds the whole history), as the loader does
            tasks.append(TurnTask.from_dict(d, where=f"conversation {cid} turn {k}") if k == n else TurnTask(**d))
            history += [{"role": "user", "text": question}, {"role": "assistant", "text": node.text}]

    report = {
        "flows": len(flows), "conversations": len(kept), "turns": len(tasks), "empty_flows": empty,
        "skipped_nodes": len(skipped), "skipped_node_list": skipped, "min_text_chars": min_chars,
        "distinct_nodes": len(order),
        "conversations_by_flow": dict(Counter(flow.kind.upper() for _, _, flow, _ in kept)),
        "turns_by_flow": dict(Counter(t.labels["flow"] for t in tasks)),
        "turns_with_citations": sum(bool(t.labels["cited_passages"]) for t in tasks),
        "turns_without_gold": sum(not t.gold_docs for t in tasks),
        "citations": sum(t.labels["n_citations"] for t in tasks),
        "question_fallbacks": qrep["fallbacks"], "rewrite_fallbacks": crep["fallbacks"],
        "full_questions": qrep, "conversational": crep,
    }
    return tasks, report
