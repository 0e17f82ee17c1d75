"""The LLM judges of the "Better Retrievers, Worse Labels" study, and its blind audit.

Why: the study compares abstention labels from three sources (qrels, readers, judges) over
the same contexts (a retriever's top-5 for a turn, the gold documents, or none). Here:

* ``worse_labels_content_reference`` (``content_reference.yaml``): do the context's documents
  support the core of the turn's reference answer? The paper's content label (§3 of its text:
  the judge reads the dialogue, the latest question, the reference answer and the numbered
  documents, and says yes, partial (some but not all central points) or no, naming the
  supporting documents). Reply: first line yes / partial / no, then ``Support: 1, 3`` (or
  ``Support: none``). Value ``{"label", "support"}``. A panel of small judges is combined by
  ``panel_label``. (``worse_labels_content``, the same question without the reference answer, is
  the cross study's; its prompt file is ``content.yaml``.)
* ``worse_labels_correctness`` (``correctness.yaml``): a 1-5 score of a reader's answer
  against the reference; ``is_correct`` = answered (ANSWERABLE) and score >= 4.
* the audit (§3 of the paper's text: two runs of its auditor, Claude Opus 5.5, label 250
  contexts blind, one holistically and one claim by claim, and a third run adjudicates):
  ``audit_sample`` draws the contexts (stratified, shuffled, task ids and retrievers hidden
  behind ``audit_id``); ``run_audit`` asks the two procedures, ``holistic`` and ``claims``, each
  seeing the reference answer as the paper's labellers do, and adjudicates where they disagree.

Prompts are in the project's own wording under ``resources/prompts/worse_labels/``; every
model call is greedy; a reply no parser can read is recorded as ``None`` and counted, never
guessed. Passages are shown numbered ``[1]``..``[n]`` without doc ids.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from convrag.errors import DataError
from convrag.judges.content import (_MARKUP, CONTENT, CONTEXT_FIELDS, LABELS,  # noqa: F401
                                    context_user, parse_content)
from convrag.judges.content import judge_content as _judge_content
from convrag.judges.prompts import check_examples, check_prompts
from convrag.judges.prompts import need as _need
from convrag.llm.judge import Judge, register_judge
from convrag.llm.types import Request, Sampling
from convrag.studies.worse_labels.readers import STATUSES

__all__ = ["AUDIT_MAX_TOKENS", "AUDIT_STRATA_PAPER", "CONTENT", "CONTENT_REFERENCE", "CORRECTNESS", "LABELS",
           "PROCEDURES",
           "PROMPT_FILES", "audit_items", "audit_messages", "audit_sample", "check_audit_prompts", "check_content_prompts",
           "check_correctness_prompts", "content_messages", "correctness_messages", "is_correct", "judge_content",
           "load_prompts", "panel_label", "parse_claims", "parse_content", "parse_correctness", "run_audit"]

PROMPT_FILES = {"content": "worse_labels/content_reference.yaml", "correctness": "worse_labels/correctness.yaml",
                "audit": "worse_labels/audit.yaml"}
REFERENCE_FIELDS = CONTEXT_FIELDS | {"reference"}


# ---------------------------------------------------------------------------------------
# Prompts (the content judge's: convrag.judges.content)
# ---------------------------------------------------------------------------------------


def check_content_prompts(prompts: Mapping, where: str) -> None:
    check_prompts(prompts, where, {"user": REFERENCE_FIELDS}, texts=("system", "no_history", "no_passages",
                                                                     "no_reference"))
    check_examples(prompts, where, ("question", "reference", "passages", "reply"))


def _reference(prompts: Mapping, item: Mapping) -> str:
    return str(item.get("reference") or "").strip() or prompts["no_reference"].strip()


def content_messages(prompts: Mapping, item: Mapping) -> list[dict]:
    """System, few-shot (context and reference answer -> reply) turns, then the item's."""
    def user(it):
        return context_user(prompts["user"], prompts, it, reference=_reference(prompts, it))

    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples") or []:
        msgs.append({"role": "user", "content": user(ex)})
        msgs.append({"role": "assistant", "content": str(ex["reply"]).strip()})
    msgs.append({"role": "user", "content": user(item)})
    return msgs


CONTENT_REFERENCE = register_judge(Judge(
    name="worse_labels_content_reference", prompt=PROMPT_FILES["content"], unit="turn",
    fields=("question", "history", "reference", "passages"), messages=content_messages, parse=parse_content,
    labels=LABELS, max_tokens=24,
))


def judge_content(items: Sequence[Mapping], engine, prompts: Mapping, sampling: Sampling | None = None) -> list[dict]:
    """The study's content label of every item (the reference answer shown): one batched call,
    support numbers outside the item's passages dropped and counted (``convrag.judges.content``).
    ``sampling``: the stage's decoding settings (``--sampling``, from the config's
    ``judges.max_tokens``); a judge decodes greedily, so only its ``max_tokens`` is read (None: the
    judge's own reply budget)."""
    return _judge_content(items, engine, prompts, None if sampling is None else sampling.max_tokens,
                          judge=CONTENT_REFERENCE)


def check_correctness_prompts(prompts: Mapping, where: str) -> None:
    check_prompts(prompts, where, {"user": {"question", "reference", "answer"}}, texts=("system",))
    check_examples(prompts, where, ("question", "reference", "answer", "score"))


AUDIT_FIELDS = CONTEXT_FIELDS | {"reference"}


def check_audit_prompts(prompts: Mapping, where: str) -> None:
    review = {"label_a", "reply_a", "label_b", "reply_b"}
    check_prompts(prompts, where, {"holistic.system": set(), "holistic.user": AUDIT_FIELDS,
                                   "claims.system": set(), "claims.user": AUDIT_FIELDS,
                                   "adjudicate.system": set(), "adjudicate.user": AUDIT_FIELDS | review},
                  texts=("no_history", "no_passages", "no_reference", "unreadable"))


_CHECKS = {"content": check_content_prompts, "correctness": check_correctness_prompts, "audit": check_audit_prompts}


def load_prompts(prompts_dir: str | Path, which: Sequence[str] = ("content", "correctness", "audit")) -> dict:
    """``{name: prompt dict}`` for ``which`` from the prompts folder, each checked at load."""
    from convrag.resources import read_prompt_file

    return {w: read_prompt_file(Path(prompts_dir) / PROMPT_FILES[w], _CHECKS[w]) for w in which}


# ---------------------------------------------------------------------------------------
# Content (context sufficiency) judge and the panel
# ---------------------------------------------------------------------------------------

def panel_label(labels: Sequence[str | None]) -> str | None:
    """The panel's label: the majority of the labels given (None = that judge's reply was
    unreadable, left out); a tie for the top count -> "partial" (the judges disagree on
    sufficiency, the middle label says so); no labels -> None."""
    given = [x for x in labels if x is not None]
    bad = [x for x in given if x not in LABELS]
    if bad:
        raise ValueError(f"panel_label: unknown label(s) {bad} (known: {', '.join(LABELS)})")
    if not given:
        return None
    counts = Counter(given).most_common()
    top = [lab for lab, c in counts if c == counts[0][1]]
    return top[0] if len(top) == 1 else "partial"


# ---------------------------------------------------------------------------------------
# Answer correctness
# ---------------------------------------------------------------------------------------


def parse_correctness(text: str | None) -> int | None:
    """The first integer of the first non-empty line when it is 1..5 (``4``, ``**4**``,
    ``Score: 4``, ``4/5``); anything else -> None."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return None
    m = re.search(r"\d+", _MARKUP.sub("", lines[0]))
    return int(m.group()) if m and 1 <= int(m.group()) <= 5 else None


def correctness_messages(prompts: Mapping, item: Mapping) -> list[dict]:
    """System, few-shot (question, reference, answer) -> score turns, then the item."""
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples") or []:
        msgs.append({"role": "user", "content": prompts["user"].format(
            question=str(ex["question"]).strip(), reference=str(ex["reference"]).strip(),
            answer=str(ex["answer"]).strip())})
        msgs.append({"role": "assistant", "content": str(ex["score"])})
    msgs.append({"role": "user", "content": prompts["user"].format(
        question=str(item["question"]).strip(), reference=str(item["reference"] or "").strip(),
        answer=str(item["answer"] or "").strip())})
    return msgs


def correctness_rule(item: Mapping):
    """Items no model needs to judge. When the item carries the reader's ``status`` and it is
    not ANSWERABLE (an abstention, or an unreadable status line), the answer is not scored:
    ``(None, "skipped")`` (``is_correct`` does not use a score there). An empty answer scores
    1 (``(1, "rule")``): there is nothing that could be correct."""
    if "status" in item and item["status"] != "ANSWERABLE":
        return None, "skipped"
    if not str(item.get("answer") or "").strip():
        return 1, "rule"
    return None


CORRECTNESS = register_judge(Judge(
    name="worse_labels_correctness", prompt=PROMPT_FILES["correctness"], unit="turn",
    fields=("question", "reference", "answer"), messages=correctness_messages, parse=parse_correctness,
    rule=correctness_rule, max_tokens=4,
))


def is_correct(status: str | None, score: int | None) -> bool | None:
    """Answered and scored >= 4. None when the status line was unreadable (the study excludes
    those replies) or when an ANSWERABLE reply has no score (the judge's reply was unreadable)."""
    if status is None:
        return None
    if status not in STATUSES:
        raise ValueError(f"is_correct: unknown status {status!r}")
    if status != "ANSWERABLE":
        return False
    return None if score is None else score >= 4


# ---------------------------------------------------------------------------------------
# The audit: sample, procedures, adjudication
# ---------------------------------------------------------------------------------------

# The paper's default: 100 contexts of the fusion retriever (50 that the qrels label "none",
# 50 holding at least one gold document) and 50 "none" contexts of each other retriever; 250.
AUDIT_STRATA_PAPER = (
    {"set": "fusion", "qrels_label": "none", "n": 50},
    {"set": "fusion", "qrels_label": "any_gold", "n": 50},
    {"set": "bm25_turn", "qrels_label": "none", "n": 50},
    {"set": "bm25_hist", "qrels_label": "none", "n": 50},
    {"set": "hybrid", "qrels_label": "none", "n": 50},
)


def _in_stratum(contexts: pd.DataFrame, stratum: Mapping) -> pd.Series:
    """Rows of the stratum's set; qrels_label "none" = no gold document in the context,
    "any_gold" = any other qrels label (at least one gold document), None = every row."""
    want = stratum.get("qrels_label")
    mask = contexts["set"] == stratum["set"]
    if want is None:
        return mask
    if want == "none":
        return mask & (contexts["qrels_label"] == "none")
    if want == "any_gold":
        return mask & (contexts["qrels_label"] != "none") & contexts["qrels_label"].notna()
    raise ValueError(f"audit_sample: stratum qrels_label must be 'none', 'any_gold' or None, got {want!r}")


def audit_sample(contexts: pd.DataFrame, strata: Sequence[Mapping], seed: int) -> pd.DataFrame:
    """The contexts an auditor labels: per stratum ``n`` rows without replacement (all of them
    when fewer are available), a context drawn by an earlier stratum is not drawn again, then
    the union in an order shuffled by ``numpy.random.default_rng(seed)``; ``audit_id``
    ``a0001``.. follows that order, so neither the task id nor the retriever can be read from
    the id or the position. Adds ``stratum`` (index into ``strata``);
    ``attrs["strata"]`` lists each stratum with ``drawn`` and ``shortfall`` (n - drawn).
    """
    need = ["task_id", "set", "qrels_label", "doc_ids"]
    missing = [c for c in need if c not in contexts.columns]
    if missing:
        raise DataError(f"audit_sample: contexts lack column(s) {', '.join(missing)}")
    dup = contexts.duplicated(["task_id", "set"], keep=False)
    if dup.any():
        row = contexts[dup].iloc[0]
        raise DataError(f"audit_sample: context of task {row['task_id']} for set {row['set']} appears twice")
    rng = np.random.default_rng(seed)
    frame = contexts.reset_index(drop=True)
    taken = np.zeros(len(frame), dtype=bool)
    picked, report = [], []
    for si, st in enumerate(strata):
        n = int(st["n"])
        pool = np.flatnonzero(_in_stratum(frame, st).to_numpy() & ~taken)
        draw = np.sort(rng.choice(pool, size=min(n, len(pool)), replace=False)) if len(pool) else pool
        taken[draw] = True
        picked += [(int(i), si) for i in draw]
        report.append({**dict(st), "drawn": len(draw), "shortfall": n - len(draw)})
    order = rng.permutation(len(picked))
    rows = [picked[k] for k in order]
    out = frame.iloc[[i for i, _ in rows]].reset_index(drop=True)
    out["stratum"] = [si for _, si in rows]
    out.insert(0, "audit_id", [f"a{k:04d}" for k in range(1, len(out) + 1)])
    out.attrs["strata"] = report
    return out


PROCEDURES = ("holistic", "claims")
AUDIT_MAX_TOKENS = {"holistic": 96, "claims": 320, "adjudicate": 96}
_CLAIM_LINE = re.compile(r"^\s*claim\s*(\d+)\s*[:.)]\s*(.*?)\s*(?:->|=>|\u2192)\s*(not\s+supported|supported"
                         r"(?:\s+by)?\s*[:\-]?\s*(.*))\s*$", re.IGNORECASE)
_FINAL_LABEL = re.compile(r"^\s*label\s*[:\-]\s*(yes|partial|no)\b", re.IGNORECASE)
_CLAIM_MARKUP = re.compile(r"[*_#`]")  # the content parser's markup but ">": the claims' arrow keeps it


def parse_claims(text: str | None) -> dict | None:
    """``{"label", "support", "claims"}`` from a claim-by-claim reply: ``claims`` lists each
    readable ``Claim k: ... -> supported by 1, 3`` / ``-> not supported`` line as ``{claim,
    supported, documents}``; ``support`` = the documents of the supported claims, in first-named
    order; ``label`` from the LAST ``Label: yes|partial|no`` line. None without a label line."""
    claims, label = [], None
    for line in (text or "").splitlines():
        m = _CLAIM_LINE.match(_CLAIM_MARKUP.sub("", line))
        if m:
            supported = not m.group(3).lower().startswith("not")
            docs = [int(x) for x in re.findall(r"\d+", m.group(4) or "") if int(x) > 0] if supported else []
            claims.append({"claim": int(m.group(1)), "supported": supported, "documents": docs})
        f = _FINAL_LABEL.match(_MARKUP.sub("", line))
        if f:
            label = f.group(1).lower()
    if label is None:
        return None
    return {"label": label, "support": list(dict.fromkeys(d for c in claims for d in c["documents"])),
            "claims": claims}


_PARSERS = {"holistic": parse_content, "claims": parse_claims, "adjudicate": parse_content}


def audit_messages(prompts: Mapping, item: Mapping, procedure: str, reviews: Sequence[Mapping] = ()) -> list[dict]:
    """Messages of one audit procedure: "holistic" and "claims" see the context and the
    reference answer; "adjudicate" also sees ``reviews`` = the two earlier ``{label, raw}`` as
    Reviewer A (holistic) and Reviewer B (claims), with no model or procedure names."""
    if procedure not in (*PROCEDURES, "adjudicate"):
        raise ValueError(f"audit_messages: unknown procedure {procedure!r}")
    _need(item, ("question", "passages"), f"audit {procedure}")
    p = prompts[procedure]
    extra = {"reference": str(item.get("reference") or "").strip() or prompts["no_reference"].strip()}
    if procedure == "adjudicate":
        if len(reviews) != 2:
            raise ValueError(f"audit_messages: item {item.get('audit_id')}: adjudication needs two reviews")
        for tag, r in zip("ab", reviews):
            extra[f"label_{tag}"] = r["label"] or prompts["unreadable"].strip()
            extra[f"reply_{tag}"] = str(r["raw"] or "").strip() or prompts["unreadable"].strip()
    return [{"role": "system", "content": p["system"].strip()},
            {"role": "user", "content": context_user(p["user"], prompts, item, **extra)}]


def _label(value):
    return None if value is None else value["label"]


def run_audit(items: Sequence[Mapping], engine, prompts: Mapping, sampling: Sampling | None = None) -> list[dict]:
    """The audit of ``items`` (``{audit_id, question, history, reference, passages}``, e.g. rows
    of ``audit_sample``): ONE engine call asks both procedures (holistic, claims) for every
    item; ONE more call, the third run, adjudicates only the items whose two labels differ or
    where either is unreadable (none such: no second call). Records, in item order:
    ``{audit_id, holistic, claims, adjudicated (None when not asked), final, agree,
    support_holistic, support_claims, support_adjudicated, raw_holistic, raw_claims,
    raw_adjudicated}``; ``final`` is the agreed label, else the adjudicated one (None when that
    reply is unreadable). ``sampling``: the stage's decoding settings (``--sampling``, from the
    config's ``judges.audit.max_tokens``), greedy, its ``max_tokens`` for all three procedures;
    None: each procedure's own budget (``AUDIT_MAX_TOKENS``).
    """
    def ask(procedure, msgs):
        budget = AUDIT_MAX_TOKENS[procedure] if sampling is None else sampling.max_tokens
        return Request(messages=msgs, sampling=Sampling(max_tokens=budget))

    reqs = [ask(proc, audit_messages(prompts, it, proc)) for it in items for proc in PROCEDURES]
    answers = engine.generate(reqs, desc="worse_labels audit") if reqs else []
    out = []
    for i, it in enumerate(items):
        rec = {"audit_id": it.get("audit_id")}
        for j, proc in enumerate(PROCEDURES):
            raw = answers[2 * i + j].text
            value = _PARSERS[proc](raw)
            rec.update({proc: _label(value), f"support_{proc}": None if value is None else value["support"],
                        f"raw_{proc}": raw})
        rec["agree"] = rec["holistic"] is not None and rec["holistic"] == rec["claims"]
        rec.update(adjudicated=None, support_adjudicated=None, raw_adjudicated=None,
                   final=rec["holistic"] if rec["agree"] else None)
        out.append(rec)
    todo = [i for i, r in enumerate(out) if not r["agree"]]
    if todo:
        reqs = [ask("adjudicate", audit_messages(prompts, items[i], "adjudicate", [
            {"label": out[i]["holistic"], "raw": out[i]["raw_holistic"]},
            {"label": out[i]["claims"], "raw": out[i]["raw_claims"]}])) for i in todo]
        for i, r in zip(todo, engine.generate(reqs, desc="worse_labels adjudicate")):
            value = parse_content(r.text)
            out[i].update(adjudicated=_label(value), final=_label(value), raw_adjudicated=r.text,
                          support_adjudicated=None if value is None else value["support"])
    return out


def audit_items(sample: pd.DataFrame, turns: Mapping[str, Mapping], passages: Mapping[str, str]) -> list[dict]:
    """Auditor items from ``audit_sample`` rows: the turn's question, history and reference
    answer (``turns``: task_id -> ``{question, history, reference}``) and the passage texts of
    ``doc_ids`` (``passages``: doc id -> text). Only ``audit_id`` identifies an item: no task id,
    retriever or doc id."""
    out = []
    for row in sample.itertuples(index=False):
        turn = turns.get(row.task_id)
        if turn is None:
            raise DataError(f"audit_items: {row.audit_id}: no turn for task {row.task_id}")
        ids = list(row.doc_ids)
        lost = [d for d in ids if d not in passages]
        if lost:
            raise DataError(f"audit_items: {row.audit_id} (task {row.task_id}): no text for doc(s) {lost[:3]}")
        out.append({"audit_id": row.audit_id, "question": turn["question"], "history": turn.get("history"),
                    "reference": turn.get("reference"), "passages": [passages[d] for d in ids]})
    return out
