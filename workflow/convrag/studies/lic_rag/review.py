"""Manual review of shard sets: export to an editable YAML file, import the edited file.

Why: automatic checks catch missing or invented entities and leaks, not a clumsy or
misleading clue. A reviewer reads every shard set beside its checks and, per question,
keeps it (``accept``), rewrites its shards (``edit``: the edited shards replace the
generated ones and are re-checked, the checks are recorded) or removes the question from
the grid (``reject``, with a ``reason`` that is recorded). Nothing is lost: rejected
questions stay in the shard file with ``passed: false`` and ``review_status: rejected``.
"""

from __future__ import annotations

import dataclasses

import yaml

from convrag.errors import DataError
from convrag.records import Question, ShardSet
from convrag.sharding import _reasons, check_shards

DECISIONS = ("accept", "edit", "reject")
HEADER = """\
# Shard review file (ConvRAG-Grid). For every question set `decision` to one of:
#   accept  keep the shards as they are (also admits a set that failed the automatic checks)
#   edit    replace the shards by the edited `shards` list (re-checked; the checks are recorded)
#   reject  remove the question from the grid; say why in `reason`
# Then name this file in the config: lic_rag.sharding.reviews.<dataset>: <path>
"""


def export_review(shardsets: list[ShardSet], questions: list[Question]) -> str:
    by_id = {q.qid: q for q in questions}
    entries = []
    for s in shardsets:
        q = by_id.get(s.qid)
        entries.append({
            "qid": s.qid,
            "question": q.question if q else "",
            "answers": list(q.answers) if q else [],
            "method": s.method,
            "automatic_checks": "passed" if s.passed else "; ".join(_reasons(s.checks)) or "failed",
            "decision": "accept" if s.passed else "reject",
            "reason": "" if s.passed else "failed the automatic checks",
            "shards": [sh["text"] for sh in s.shards],
        })
    return HEADER + yaml.safe_dump({"reviews": entries}, sort_keys=False, allow_unicode=True, width=110)


def apply_review(shardsets: list[ShardSet], questions: list[Question], review_path) -> list[ShardSet]:
    """The shard sets with the review applied (questions absent from the file stay as they are)."""
    try:
        data = yaml.safe_load(open(review_path, encoding="utf-8")) or {}
    except FileNotFoundError as e:
        raise DataError(f"{review_path}: review file not found") from e
    except yaml.YAMLError as e:
        raise DataError(f"{review_path}: invalid YAML ({e})") from e
    entries = data.get("reviews") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise DataError(f"{review_path}: expected a top-level 'reviews:' list")
    by_q = {q.qid: q for q in questions}
    by_s = {s.qid: s for s in shardsets}
    seen = set()
    for i, e in enumerate(entries):
        where = f"{review_path}: reviews[{i}]"
        if not isinstance(e, dict) or "qid" not in e:
            raise DataError(f"{where}: each entry needs a 'qid'")
        qid = str(e["qid"])
        if qid not in by_s:
            raise DataError(f"{where}: unknown qid '{qid}' (not in the shard file)")
        if qid in seen:
            raise DataError(f"{where}: qid '{qid}' is reviewed twice")
        seen.add(qid)
        decision = e.get("decision")
        if decision not in DECISIONS:
            raise DataError(f"{where} (qid {qid}): decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        s = by_s[qid]
        checks = dict(s.checks)
        if decision == "reject":
            reason = str(e.get("reason") or "").strip()
            if not reason:
                raise DataError(f"{where} (qid {qid}): a rejected question needs a 'reason'")
            checks["review_reason"] = reason
            by_s[qid] = ShardSet(qid, s.shards, checks, "rejected", False, s.method)
        elif decision == "edit":
            shards = e.get("shards")
            if not isinstance(shards, list) or not all(isinstance(x, str) and x.strip() for x in shards) or not shards:
                raise DataError(f"{where} (qid {qid}): 'shards' must be a non-empty list of texts")
            new = check_shards(by_q[qid], [x.strip() for x in shards]) if qid in by_q else {}
            new["generated_checks"] = {k: v for k, v in checks.items() if k != "attempts"}
            new["review_reason"] = str(e.get("reason") or "")
            by_s[qid] = ShardSet(qid, [{"shard_id": j, "text": t.strip()} for j, t in enumerate(shards, start=1)],
                                 new, "edited", True, "edited")
        else:
            by_s[qid] = ShardSet(qid, s.shards, checks, "accepted", True, s.method)
    return [by_s[s.qid] for s in shardsets]


def keep_first(shardsets: list[ShardSet], n: int) -> list[ShardSet]:
    """At most ``n`` passed sets, the first in shard-file order (the dataset's questions, then its
    replacements in draw order): a review that passes a set whose question was already replaced
    would otherwise give more questions than the grid's chunks hold. The later ones leave the grid
    with the reason recorded (``review_status: over_n``), never silently."""
    out, passed = [], 0
    for s in shardsets:
        if s.passed and passed >= n:
            checks = {**s.checks, "review_reason": f"over the dataset's n_questions ({n}) after the review: "
                                                   f"the first {n} passed sets are kept"}
            s = dataclasses.replace(s, checks=checks, review_status="over_n", passed=False)
        passed += s.passed
        out.append(s)
    return out
