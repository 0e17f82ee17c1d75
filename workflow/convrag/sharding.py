"""LLM-based shard construction: one multi-hop question -> a goal-first opening turn plus
clue turns in dependency order, with automatic checks recorded per question.

Why checks: a shard set is only a fair SHARDED condition if it carries the same information
as the question (every named entity and number kept, none invented), does not give the answer away, and
really spreads it over several turns. Every question gets a ShardSet: passed ones enter the
grid, failed ones are listed in the shard report with the failing check, never dropped.

A shared stage (``convrag shard``): lic_rag's SHARDED conditions and cross's sharded delivery
shard the same multi-hop questions with the same prompt file (``resources/prompts/shard.yaml``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from convrag.llm.types import Request, Sampling
from convrag.metrics.qa import normalize_answer
from convrag.records import Question, ShardSet

# Capitalised words that start questions or sentences and are not entities.
_NOT_ENTITIES = {
    "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "in", "on", "at",
    "the", "a", "an", "of", "is", "was", "were", "are", "did", "does", "do", "i", "my", "it",
    "that", "this", "and", "or", "for", "to", "from", "by", "with", "as", "has", "had", "have",
    "name", "tell", "please", "can", "could", "would", "born", "between", "after", "before",
}
_CONNECTORS = {"of", "the", "de", "la", "von", "van", "du", "der", "&"}  # not "and": it joins two names
_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-\.]*[\w]|[A-Za-z0-9]")
_NUMBERED = re.compile(r"^\s*(?:\d+[\.\):]|[-*•])\s*(.+?)\s*$")


def corpus_source(config: dict, dataset: str) -> str:
    """The source of a dataset's shard prompt pairs (``ShardPrompts``): miniworld or the
    hipporag format of its corpus (hotpotqa, 2wikimultihopqa, musique)."""
    c = config["corpora"][config["datasets"][dataset]["corpus"]]
    return c["kind"] if c["kind"] == "miniworld" else c["format"]


def entities(text: str) -> list[str]:
    """Named entities and numbers as written (capitalised spans, digits); a heuristic that
    needs no model, used to check that shards keep everything the question names."""
    toks = _TOKEN.findall(text)
    spans: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        while cur and cur[-1].lower() in _CONNECTORS:
            cur.pop()
        if cur:
            spans.append(" ".join(cur))
        cur.clear()

    starts = _sentence_starts(text)
    for i, tok in enumerate(toks):
        is_cap = tok[0].isupper() and tok.lower() not in _NOT_ENTITIES
        # A lone capitalised word opening a sentence ("Start from ...") is ordinary English.
        if is_cap and not cur and i in starts and (i + 1 >= len(toks) or not toks[i + 1][0].isupper()):
            is_cap = False
        if tok[0].isdigit():
            flush()
            spans.append(tok)
        elif is_cap:
            cur.append(tok)
        elif cur and tok.lower() in _CONNECTORS:
            cur.append(tok)
        else:
            flush()
    flush()
    seen, out = set(), []
    for s in spans:
        if s.lower() not in seen:
            seen.add(s.lower())
            out.append(s)
    return out


def _sentence_starts(text: str) -> set[int]:
    """Indices (in _TOKEN order) of tokens that open a sentence or line."""
    starts, i = set(), 0
    for sent in re.split(r"(?<=[.!?:])\s+|\n+", text):
        toks = _TOKEN.findall(sent)
        if toks:
            starts.add(i)
        i += len(toks)
    return starts


def mentions(haystack: str, needle: str) -> bool:
    h, n = f" {normalize_answer(haystack)} ", f" {normalize_answer(needle)} "
    return n.strip() != "" and n in h


def leaks_answer(text: str, question: Question) -> list[str]:
    """Gold answers (or aliases) that appear in ``text`` but not in the question itself
    (a comparison question names its candidate answers, which is not a leak)."""
    return [a for a in question.answers if mentions(text, a) and not mentions(question.question, a)]


_STOP = {
    "i", "me", "my", "we", "you", "it", "its", "a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by",
    "with", "and", "or", "is", "was", "are", "were", "be", "been", "that", "this", "which", "who", "what", "one",
    "someone", "something", "thing", "person", "also", "then", "take", "start", "looking", "want", "need", "know",
    "mean", "am", "im", "i'm", "about", "there", "their", "they", "he", "she", "his", "her", "do", "does", "did",
}
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')


def _content_words(text: str) -> set[str]:
    return {w for w in normalize_answer(text).split() if w not in _STOP and len(w) > 1}


def _entity_groups(question: str) -> list[list[str]]:
    """The question's entities, grouped: the words of one quoted title are one group."""
    groups, seen = [], set()
    for m in _QUOTED.finditer(question):
        g = entities(m.group(1) or m.group(2))
        if g:
            groups.append(g)
            seen.update(e.lower() for e in g)
    groups += [[e] for e in entities(question) if e.lower() not in seen]
    return groups


def check_shards(question: Question, shards: list[str]) -> dict:
    """The automatic checks of one shard set (all must hold for it to pass):

    - entities_kept: every named entity and number of the question appears in some shard;
    - no_added_entities: no shard names anything the question does not (no added facts);
    - answer_not_leaked / no_intermediate_answers: neither the answer nor a bridge value
      (``Question.intermediate_answers``) appears unless the question itself names it;
    - goal_first: shard 1 states the goal and names no entity (clues follow in dependency
      order, later ones may refer back to earlier ones);
    - one_clue_per_followup: every later shard adds new content words and at most one new
      entity group of the question (a quoted title counts as one);
    - min_two_shards.
    """
    joined = " \n ".join(shards)
    missing = [e for e in entities(question.question) if not mentions(joined, e)]
    added = [e for s in shards for e in entities(s) if not mentions(question.question, e)]
    leaked = leaks_answer(joined, question)
    exposed = [a for a in question.intermediate_answers
               if mentions(joined, a) and not mentions(question.question, a)]
    groups = _entity_groups(question.question)
    bad_followups, seen_words, seen_groups = [], _content_words(shards[0]) if shards else set(), set()
    for i, sh in enumerate(shards[1:], start=2):
        words = _content_words(sh)
        new_groups = {j for j, g in enumerate(groups) if j not in seen_groups and any(mentions(sh, e) for e in g)}
        if not (words - seen_words) or len(new_groups) > 1:
            bad_followups.append(i)
        seen_words |= words
        seen_groups |= new_groups
    checks = {
        "entities_kept": not missing,
        "missing_entities": missing,
        "no_added_entities": not added,
        "added_entities": sorted(set(added)),
        "answer_not_leaked": not leaked,
        "leaked_answers": leaked,
        "no_intermediate_answers": not exposed,
        "exposed_intermediate_answers": exposed,
        "goal_first": bool(shards) and not entities(shards[0]),
        "one_clue_per_followup": not bad_followups,
        "bad_followups": bad_followups,
        "min_two_shards": len(shards) >= 2,
        "n_shards": len(shards),
    }
    checks["passed"] = all(checks[k] for k in CHECKS)
    return checks


CHECKS = ("entities_kept", "no_added_entities", "answer_not_leaked", "no_intermediate_answers", "goal_first",
          "one_clue_per_followup", "min_two_shards")


_STEP_REF = re.compile(r"#\d+")


def decomposition_shards(question: Question) -> list[str]:
    """Shards from the source's own decomposition (the ``fallback: decomposition`` of shard
    construction). The mini world already stores goal + clues; MuSiQue (and 2Wiki chains,
    which the loader writes in MuSiQue's notation) store steps ``"<subject> >> <relation>"``
    or sub-questions that refer back with ``#k``. Those become a goal shard from the last
    step and one clue per earlier step, in order; the checks then decide as for any shard set."""
    steps = [d.strip() for d in question.decomposition if d and d.strip()]
    if not steps or not any(">>" in d or _STEP_REF.search(d) for d in steps):
        return steps

    def thing(text: str) -> str:
        return _STEP_REF.sub("that", text).replace(" ?", "?").strip()

    out = []
    last = steps[-1]
    if ">>" in last:
        out.append(f"I'm looking for the {last.split('>>', 1)[1].strip()} of something.")
    else:
        out.append(f"In the end I want to know: {_STEP_REF.sub('it', last).replace(' ?', '?').strip()}")
    for i, d in enumerate(steps[:-1]):
        if ">>" in d:
            subj, rel = (x.strip() for x in d.split(">>", 1))
            out.append(f"Then take the {rel} of that." if _STEP_REF.fullmatch(subj) else f"Start from the {rel} of {subj}.")
        else:
            out.append(f"{'First' if i == 0 else 'Then'}: {thing(d)}")
    return out


def parse_shards(text: str) -> list[str]:
    """Numbered (or bulleted) lines of the model output, in order; other lines ignored."""
    out = []
    for line in text.splitlines():
        m = _NUMBERED.match(line)
        if m and m.group(1).strip():
            out.append(m.group(1).strip())
    return out


@dataclass
class ShardPrompts:
    system: str
    examples: list[dict]
    user: str

    @classmethod
    def from_dict(cls, d: dict, source: str | None = None) -> "ShardPrompts":
        """``examples`` is a list, or a mapping source -> list (one prompt pair set per source
        dataset: hotpotqa, 2wikimultihopqa, musique, miniworld); ``default`` covers the rest."""
        ex = d.get("examples", [])
        if isinstance(ex, dict):
            ex = ex.get(source) or ex.get("default") or []
        return cls(system=d["system"], examples=ex, user=d["user"])

    def messages(self, question: str) -> list[dict]:
        msgs = [{"role": "system", "content": self.system}]
        for ex in self.examples:
            msgs.append({"role": "user", "content": self.user.format(question=ex["question"])})
            body = "\n".join(f"{i}. {s}" for i, s in enumerate(ex["shards"], start=1))
            msgs.append({"role": "assistant", "content": body})
        msgs.append({"role": "user", "content": self.user.format(question=question)})
        return msgs


def shard_questions(questions: list[Question], engine, prompts: ShardPrompts, settings: dict) -> list[ShardSet]:
    """Shard every question; attempts are batched across questions (one model call per
    attempt round), each attempt a distinct cached sample (sample_index = attempt)."""
    attempts = settings.get("attempts", 3)
    sampling = Sampling(temperature=settings.get("temperature", 0.7), top_p=1.0, max_tokens=settings.get("max_tokens", 96))
    history: dict[str, list[dict]] = {q.qid: [] for q in questions}
    done: dict[str, ShardSet] = {}
    pending = list(questions)
    for attempt in range(attempts):
        if not pending:
            break
        reqs = [Request(messages=prompts.messages(q.question), sampling=sampling, seed=0, sample_index=attempt) for q in pending]
        resps = engine.generate(reqs, desc=f"shard attempt {attempt + 1}")
        still = []
        for q, r in zip(pending, resps):
            shards = parse_shards(r.text)
            checks = check_shards(q, shards)
            history[q.qid].append({"attempt": attempt, "raw": r.text, "shards": shards, **checks})
            if checks["passed"]:
                done[q.qid] = _shardset(q, shards, checks, "llm", attempt, history[q.qid])
            else:
                still.append(q)
        pending = still
    for q in pending:
        fb = settings.get("fallback", "none")
        shards = decomposition_shards(q) if fb == "decomposition" else []
        if shards:
            checks = check_shards(q, shards)
            done[q.qid] = _shardset(q, shards, checks, "decomposition", None, history[q.qid])
        else:
            last = history[q.qid][-1] if history[q.qid] else {"shards": []}
            checks = check_shards(q, last["shards"])
            checks["passed"] = False
            done[q.qid] = _shardset(q, last["shards"], checks, "llm", None, history[q.qid])
    return [done[q.qid] for q in questions]


def _shardset(q: Question, shards: list[str], checks: dict, method: str, attempt, attempts_log) -> ShardSet:
    checks = dict(checks)
    checks["passing_attempt"] = attempt
    checks["attempts"] = [
        {k: a[k] for k in ("attempt", "raw", "passed", "missing_entities", "added_entities", "leaked_answers",
                           "exposed_intermediate_answers", "goal_first", "bad_followups", "n_shards")}
        for a in attempts_log
    ]
    return ShardSet(
        qid=q.qid,
        shards=[{"shard_id": i, "text": t} for i, t in enumerate(shards, start=1)],
        checks=checks,
        review_status="auto",
        passed=bool(checks["passed"]),
        method=method,
    )


def _reasons(c: dict) -> list[str]:
    """Why a check dict (or one attempt's record) failed, in words."""
    why = []
    if c.get("missing_entities"):
        why.append("missing entities: " + ", ".join(c["missing_entities"]))
    if c.get("added_entities"):
        why.append("added entities: " + ", ".join(c["added_entities"]))
    if c.get("leaked_answers"):
        why.append("answer leaked: " + ", ".join(c["leaked_answers"]))
    if c.get("exposed_intermediate_answers"):
        why.append("intermediate answer exposed: " + ", ".join(c["exposed_intermediate_answers"]))
    if c.get("goal_first") is False:
        why.append("shard 1 names an entity (goal first)")
    if c.get("bad_followups"):
        why.append("not one clue: shard(s) " + ", ".join(map(str, c["bad_followups"])))
    if c.get("n_shards", 2) < 2:
        why.append(f"{c.get('n_shards', 0)} shard(s)")
    return why


def shard_report(shardsets: list[ShardSet], questions: list[Question]) -> str:
    """Markdown report: counts, then every question that used the fallback or failed."""
    by_id = {q.qid: q for q in questions}
    n = len(shardsets)
    llm_ok = sum(s.passed and s.method == "llm" for s in shardsets)
    fb_ok = sum(s.passed and s.method != "llm" for s in shardsets)
    failed = [s for s in shardsets if not s.passed]
    lines = [
        "# Shard construction report",
        "",
        f"- questions: {n}",
        f"- passed with LLM shards: {llm_ok}",
        f"- passed with the source decomposition (fallback): {fb_ok}",
        f"- failed (excluded from the grid): {len(failed)}",
        "",
        "## Per question",
        "",
        "| qid | hops | method | passed | attempts | failing checks |",
        "|---|---|---|---|---|---|",
    ]
    for s in shardsets:
        c = s.checks
        why = _reasons(c) if not s.passed else []
        llm_fail = [a for a in c.get("attempts", []) if not a["passed"]]
        if s.method != "llm" and llm_fail:
            why.insert(0, f"all {len(llm_fail)} LLM attempts failed (last: {'; '.join(_reasons(llm_fail[-1])) or '?'})")
        q = by_id.get(s.qid)
        lines.append(
            f"| {s.qid} | {q.hops if q else ''} | {s.method} | {'yes' if s.passed else 'NO'} "
            f"| {len(c.get('attempts', []))} | {'; '.join(why).replace('|', '/')} |"
        )
    if failed:
        lines += ["", "## Failed questions (not simulated)", ""]
        lines += [f"- `{s.qid}`: {by_id[s.qid].question if s.qid in by_id else ''}" for s in failed]
    return "\n".join(lines) + "\n"
