"""The LLM judges of the MTRAG-UN study, used as IBM's official scorer uses them.

Why here: MTRAG's generation metrics need four LLM verdicts per task (IDK, RB_llm,
clarification, RAGAS faithfulness = RL_F) before ``convrag.metrics.mtrag`` can condition
them on answerability. Each judge is registered on import (``mtrag_idk``, ``mtrag_rb_llm``,
``mtrag_clarification``; the two faithfulness steps ``ragas_statements`` / ``ragas_verdicts``
are registered by ``convrag.metrics.faithfulness``), has a prompt file
``resources/prompts/mtrag_un/<name>.yaml`` in the project's own wording, and is read by the
official parser of ``convrag.metrics.mtrag``. ``judge_all`` runs them over a list of tasks,
one batched engine call per judge (two for faithfulness), and ``judge_summary`` counts what a
caption must report (unparsed replies, RB_llm's 0.5 fallbacks, IDK verdicts, NaN causes).

Behaviour kept from the official scorer (``IBM/mt-rag-benchmark`` @ ``cc5b1d4``): the
conversation is rendered as ``speaker: text`` lines; IDK and faithfulness see all of it;
RB_llm sees it split into previous conversation and current question
(``split_conversation``), the FIRST target as reference and the context texts joined by a
blank line; the clarification judge sees only the response. An empty response is judged by
the LLM like any other for IDK, RB_llm and clarification (the official scorer has no rule
for it); faithfulness gives it no statements (NaN) without a model call.

Deviations: the few-shot examples are sent as chat turns (the official prompts are one user
message with inline examples); the clarification judge is asked only on UNDERSPECIFIED
tasks (the official asks it on every task but its verdict is used only there, so the
conditioned scores are the same); the other tasks get a record ``value: None,
method: "skipped", parsed: True`` (nothing was asked, nothing failed). Greedy decoding.

Beyond the official scorer: the underspecified-type judge (``mtrag_underspecified_type``,
``which`` name "underspecified_type") sorts each reply to an UNDERSPECIFIED question into the
three types of the paper's Table 5 in the project's labels (``UNDERSPECIFIED_TYPES``: asks the
user what they mean; answers several readings; answers one reading). Like the clarification
judge it is asked on UNDERSPECIFIED tasks only, in the same evaluate job and with the same model;
a reply naming no type or several is invalid (value None), recorded and counted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Iterable

import yaml

from convrag.judges.official import OfficialPrompt
from convrag.llm.judge import Judge, register_judge, run_judge
from convrag.metrics.faithfulness import STATEMENTS_JUDGE, STATUSES, VERDICTS_JUDGE, faithfulness_scores
from convrag.metrics.mtrag import (
    IDK_UNKNOWN,
    RATING_PATTERNS,
    UNDERSPECIFIED,
    parse_clarification,
    parse_idk,
    parse_rb_llm_rating,
    render_conversation,
    split_conversation,
)

__all__ = [
    "ALLOWED",
    "CLARIFICATION",
    "DEFAULT_MAX_TOKENS",
    "IDK",
    "JUDGES",
    "RB_LLM",
    "UNDERSPECIFIED_TYPE",
    "UNDERSPECIFIED_TYPES",
    "WHICH",
    "judge_all",
    "judge_summary",
    "load_prompts",
    "parse_underspecified_type",
    "rb_llm_fallback",
]

WHICH = ("idk", "rb_llm", "clarification", "faithfulness", "underspecified_type")
# Replies: IDK needs one word; RB_llm an explanation then the rating; clarification a short
# JSON object; faithfulness (statements, verdicts) a JSON list each; the underspecified type one word.
DEFAULT_MAX_TOKENS = {"idk": 16, "rb_llm": 512, "clarification": 192, "faithfulness": (512, 1024),
                      "underspecified_type": 16}
# Table 5's taxonomy of replies to an UNDERSPECIFIED question (the project's labels): the reply asks
# the user what they mean; answers two or more readings of the question; answers one reading as if
# the question were clear.
UNDERSPECIFIED_TYPES = ("clarify", "multiple", "single")


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------


def _system(prompts: dict) -> list[dict]:
    """The system message; none for an official prompt (one user message, examples inline)."""
    text = (prompts.get("system") or "").strip()
    return [{"role": "system", "content": text}] if text else []


def idk_messages(prompts: dict, item: dict) -> list[dict]:
    """System, few-shot (conversation, response) -> label turns, then the item."""
    msgs = _system(prompts)
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(conversation=ex["conversation"].strip(),
                                                                       response=ex["response"])})
        msgs.append({"role": "assistant", "content": str(ex["label"])})
    msgs.append({"role": "user", "content": prompts["user"].format(conversation=item["conversation"],
                                                                   response=item["response"] or "")})
    return msgs


NO_EARLIER_TURNS = "(none: this is the first question)"


def rb_llm_messages(prompts: dict, item: dict) -> list[dict]:
    """System (criteria and rating format), then the sections of the item.

    Earlier turns and current question come from ``split_conversation`` (official quirks
    included); an empty previous conversation is shown as ``NO_EARLIER_TURNS``."""
    previous, question = split_conversation(item["conversation"])
    # the official prompt shows an empty previous conversation as it is (an empty section)
    user = prompts["user"].format(previous=previous or ("" if prompts.get("official") else NO_EARLIER_TURNS),
                                  question=question,
                                  reference=item["reference"], response=item["response"] or "",
                                  documents=item["documents"])
    return _system(prompts) + [{"role": "user", "content": user}]


def clarification_messages(prompts: dict, item: dict) -> list[dict]:
    """System (definition and JSON format), few-shot response -> JSON turns, then the item."""
    msgs = _system(prompts)
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(response=ex["response"])})
        msgs.append({"role": "assistant", "content": str(ex["output"]).strip()})
    msgs.append({"role": "user", "content": prompts["user"].format(response=item["response"] or "")})
    return msgs


# ---------------------------------------------------------------------------------------
# Parsers and the registered judges
# ---------------------------------------------------------------------------------------

# the same clean-up as parse_rb_llm_rating: each line's text from "for example:" on is removed
_EXAMPLE_TAIL = re.compile(r"for example:[^\n]*", re.IGNORECASE)


def rb_llm_fallback(raw) -> bool:
    """True when ``parse_rb_llm_rating(raw)``'s 0.5 is its fallback, not a rating of 5.

    Mirrors the parser: after the "for example:" clean-up, the last of ``RATING_PATTERNS``
    that matches decides; a fallback is no match at all, or a final value outside (0, 1]
    on the 0-1 scale (0, negative, above 10)."""
    s = _EXAMPLE_TAIL.sub("", str(raw))
    value = None
    for _form, rx in RATING_PATTERNS:
        m = rx.search(s)
        if m:
            value = float(m.group(1)) / 10
    return value is None or not (0 < value <= 1)


def _parse_rb_llm(text):
    return None if text is None else parse_rb_llm_rating(text)


def _parse_clarification(text):
    return None if text is None else parse_clarification(text)


_TYPE_WORD = re.compile(r"[a-z]+")


def parse_underspecified_type(text) -> str | None:
    """The underspecified-type judge's label: the one of ``UNDERSPECIFIED_TYPES`` that the reply
    names (case and punctuation ignored, e.g. "Multiple." -> "multiple"); None (invalid, recorded
    and counted) when the reply names none of them or more than one (never guessed)."""
    if not isinstance(text, str):
        return None
    found = {w for w in _TYPE_WORD.findall(text.lower()) if w in UNDERSPECIFIED_TYPES}
    return found.pop() if len(found) == 1 else None


IDK = register_judge(Judge(
    name="mtrag_idk", prompt="mtrag_un/idk.yaml", unit="task", fields=("conversation", "response"),
    messages=idk_messages, parse=parse_idk, labels=("yes", "partial", "no"), max_tokens=DEFAULT_MAX_TOKENS["idk"],
))

RB_LLM = register_judge(Judge(
    name="mtrag_rb_llm", prompt="mtrag_un/rb_llm.yaml", unit="task",
    fields=("conversation", "response", "reference", "documents"), messages=rb_llm_messages, parse=_parse_rb_llm,
    max_tokens=DEFAULT_MAX_TOKENS["rb_llm"],
))

CLARIFICATION = register_judge(Judge(
    name="mtrag_clarification", prompt="mtrag_un/clarification.yaml", unit="task", fields=("response",),
    messages=clarification_messages, parse=_parse_clarification, labels=("yes", "no"),
    max_tokens=DEFAULT_MAX_TOKENS["clarification"],
))

UNDERSPECIFIED_TYPE = register_judge(Judge(
    name="mtrag_underspecified_type", prompt="mtrag_un/underspecified_type.yaml", unit="task",
    fields=("conversation", "response"), messages=idk_messages, parse=parse_underspecified_type,
    labels=UNDERSPECIFIED_TYPES, max_tokens=DEFAULT_MAX_TOKENS["underspecified_type"],
))

# ``which`` name -> the judges it runs (faithfulness: its two steps)
JUDGES = {"idk": (IDK,), "rb_llm": (RB_LLM,), "clarification": (CLARIFICATION,),
          "faithfulness": (STATEMENTS_JUDGE, VERDICTS_JUDGE), "underspecified_type": (UNDERSPECIFIED_TYPE,)}

# allowed values per ``which`` name (None = unparsed or skipped)
ALLOWED = {"idk": (1, 0, 0.5, IDK_UNKNOWN), "clarification": (1.0, 0.0, 0.5),
           "underspecified_type": UNDERSPECIFIED_TYPES}


# IBM's own judge prompts at the benchmark's pinned commit (convrag.judges.official adapts them;
# ``mtrag_un.evaluation.prompts.<judge>: official``): where each lives and how its fields map onto
# ours. The clarification judge is the official "underspecified" judge (Figure 6).
OFFICIAL_REPO = "IBM/mt-rag-benchmark"
OFFICIAL = {
    "idk": OfficialPrompt("scripts/evaluation/judge_utils.py", "prompt_template",
                          {"inquiry": "conversation", "response": "response"}, function="format_idk_judge"),
    "rb_llm": OfficialPrompt("scripts/evaluation/judge_utils.py", "formatted_conversation",
                             {"row['previous_conversation']": "previous", "row['current_question']": "question",
                              "row['reference_answer']": "reference", "row['response']": "response",
                              "document_txt": "documents"}, function="format_conversation_radbench"),
    "clarification": OfficialPrompt("scripts/evaluation/underspecified_eval.py", "UNDERSPECIFIED_PROMPT",
                                    {"response": "response"}),
}


def load_prompts(prompts_dir: str | Path, which: Iterable[str] = WHICH, files: dict | None = None) -> dict[str, dict]:
    """The prompt dicts of ``which`` from the prompts folder (``resources/prompts``), or from
    ``files`` (judge -> a prompt file: the user's, or an adapted official one):
    ``{"idk": {...}, ..., "faithfulness": ({statements}, {verdicts})}``."""
    root = Path(prompts_dir)
    files = files or {}
    out = {}
    for w in which:
        if w in files:
            out[w] = yaml.safe_load(Path(files[w]).read_text(encoding="utf-8"))
            continue
        loaded = tuple(yaml.safe_load((root / j.prompt).read_text(encoding="utf-8")) for j in JUDGES[w])
        out[w] = loaded if w == "faithfulness" else loaded[0]
    return out


# ---------------------------------------------------------------------------------------
# All judges over a list of tasks
# ---------------------------------------------------------------------------------------


def _answerability(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    values = list(value)
    return values[0] if values else None


def _tokens(max_tokens: dict | None, w: str):
    given = dict(max_tokens or {})
    unknown = set(given) - set(WHICH)
    if unknown:
        raise ValueError(f"judge_all: unknown max_tokens key(s) {sorted(unknown)} (known: {', '.join(WHICH)})")
    v = given.get(w, DEFAULT_MAX_TOKENS[w])
    if w == "faithfulness" and isinstance(v, int):
        v = (v, v)
    return v


def judge_all(items: list[dict], engine, prompts_dir: str | Path, max_tokens: dict | None = None,
              which: Iterable[str] = WHICH, prompt_files: dict | None = None) -> dict[str, list[dict]]:
    """Run the MTRAG-UN judges over ``items``; one record per item and judge, in item order.

    ``items``: ``{item_id, conversation_turns: [{"speaker": "user"|"agent", "text"}, ...]``
    (ending with the current user question), ``response, targets: [str], contexts: [str],
    answerability}`` (answerability: a class name or a list whose first element is it).
    Judge inputs: conversation = ``render_conversation(turns)``; reference = ``targets[0]``
    or ""; documents = the contexts joined by a blank line (RB_llm); faithfulness question =
    the conversation, its contexts = the context list.

    Returns ``{w: records}`` for each ``w`` in ``which`` ("idk", "rb_llm", "clarification",
    "faithfulness"). idk / rb_llm / clarification records are ``run_judge`` verdicts
    ``{item_id, judge, value, method, parsed, raw}``; clarification is asked only on
    UNDERSPECIFIED items, the others get ``value None, method "skipped", parsed True,
    raw None``. faithfulness records are those of ``faithfulness_scores``. ``max_tokens``:
    per ``which`` name (faithfulness: an int for both steps or a pair); missing keys use
    ``DEFAULT_MAX_TOKENS``. One batched engine call per judge (faithfulness: two).
    """
    which = tuple(which)
    bad = [w for w in which if w not in WHICH]
    if bad:
        raise ValueError(f"judge_all: unknown judge(s) {bad} (known: {', '.join(WHICH)})")
    prompts = load_prompts(prompts_dir, which, prompt_files)
    base = []
    for i, it in enumerate(items):
        for f in ("conversation_turns", "response", "targets", "contexts"):
            if f not in it:
                raise ValueError(f"judge_all: item {it.get('item_id', i)} lacks field {f!r}")
        targets = [it["targets"]] if isinstance(it["targets"], str) else list(it["targets"] or [])
        contexts = list(it["contexts"] or [])
        base.append({"item_id": it.get("item_id"), "conversation": render_conversation(it["conversation_turns"]),
                     "response": it["response"] if it["response"] is not None else "",
                     "reference": targets[0] if targets else "", "documents": "\n\n".join(contexts),
                     "contexts": contexts, "answerability": _answerability(it.get("answerability"))})
    out: dict[str, list[dict]] = {}
    for w in which:
        if w == "idk":
            out[w] = run_judge(IDK, base, engine, prompts[w], _tokens(max_tokens, w), desc="judge mtrag_idk")
        elif w == "rb_llm":
            out[w] = run_judge(RB_LLM, base, engine, prompts[w], _tokens(max_tokens, w), desc="judge mtrag_rb_llm")
        elif w in ("clarification", "underspecified_type"):  # asked on UNDERSPECIFIED tasks only
            judge = CLARIFICATION if w == "clarification" else UNDERSPECIFIED_TYPE
            asked = [b for b in base if b["answerability"] == UNDERSPECIFIED]
            got = iter(run_judge(judge, asked, engine, prompts[w], _tokens(max_tokens, w), desc=f"judge {judge.name}"))
            out[w] = [next(got) if b["answerability"] == UNDERSPECIFIED else
                      {"item_id": b["item_id"], "judge": judge.name, "value": None, "method": "skipped",
                       "parsed": True, "raw": None} for b in base]
        else:
            p_st, p_vd = prompts[w]
            out[w] = faithfulness_scores([{"item_id": b["item_id"], "question": b["conversation"],
                                           "response": b["response"], "contexts": b["contexts"]} for b in base],
                                         engine, p_st, p_vd, _tokens(max_tokens, w))
    return out


def _key(v) -> str:
    return "None" if v is None else str(v)


def judge_summary(results: dict[str, list[dict]]) -> dict:
    """Counts per judge of ``judge_all``'s results (JSON-ready; value keys are strings).

    * every judge: ``items``; ``unparsed`` = model replies the parser could not read
      (asked, ``value`` None; for faithfulness: status other than "ok" and
      "no_statements"), so a NaN or a missing verdict is always counted;
    * idk: ``values`` (counts of "1", "0", "0.5", "unknown", "None");
    * rb_llm: ``fallbacks`` (0.5 given because no rating was readable, ``rb_llm_fallback``),
      ``values`` not kept (continuous);
    * clarification: ``asked``, ``skipped``, ``values`` ("1.0", "0.0", "0.5", "None"),
      ``undecided`` (0.5: no yes/no decision readable, the parser's fallback);
    * faithfulness: ``status`` (count per ``STATUSES``), ``nan`` (items with a NaN score),
      ``scored`` (status ok).
    """
    out = {}
    for w, recs in results.items():
        s: dict = {"items": len(recs)}
        if w == "faithfulness":
            st = Counter(r["status"] for r in recs)
            s["status"] = {k: st.get(k, 0) for k in STATUSES}
            s["unparsed"] = st.get("unparsed_statements", 0) + st.get("unparsed_verdicts", 0)
            s["nan"] = sum(1 for r in recs if isinstance(r["faithfulness"], float) and math.isnan(r["faithfulness"]))
            s["scored"] = st.get("ok", 0)
        else:
            asked = [r for r in recs if r["method"] != "skipped"]
            s["unparsed"] = sum(1 for r in asked if r["method"] == "llm" and r["value"] is None)
            if w == "rb_llm":
                s["fallbacks"] = sum(1 for r in asked if r["raw"] is not None and rb_llm_fallback(r["raw"]))
            else:
                s["values"] = dict(Counter(_key(r["value"]) for r in asked))
            if w in ("clarification", "underspecified_type"):
                s["asked"] = len(asked)
                s["skipped"] = len(recs) - len(asked)
            if w == "clarification":
                s["undecided"] = sum(1 for r in asked if r["value"] == 0.5)
        out[w] = s
    return out
