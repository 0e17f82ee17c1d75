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

from convrag.errors import ConfigError
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


def shard_settings(block: dict) -> dict:
    """The ``--settings`` of ``convrag shard`` from a study's sharding block, without the keys
    that are off (``steps: 1``, ``replace_failed: 0``, ``variability.questions: 0``), so a
    config that does not use them passes the same settings (and its shard jobs stay done)
    as before those keys existed."""
    off = {"steps": 1, "replace_failed": 0}
    out = {k: v for k, v in block.items() if not (k in off and v == off[k])}
    if not (block.get("variability") or {}).get("questions"):
        out.pop("variability", None)
    return out


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
class StepPrompt:
    """One step of two-step sharding (``segment`` or ``rephrase`` in the prompt file): a system
    prompt, worked examples (each a mapping of the user template's fields plus ``output``, the
    numbered lines the model should write) and the user template."""

    system: str
    examples: list[dict]
    user: str

    @classmethod
    def from_dict(cls, d: dict, source: str | None = None) -> "StepPrompt":
        ex = d.get("examples", [])
        if isinstance(ex, dict):
            ex = ex.get(source) or ex.get("default") or []
        return cls(system=d["system"], examples=ex, user=d["user"])

    def messages(self, **fields) -> list[dict]:
        msgs = [{"role": "system", "content": self.system}]
        for ex in self.examples:
            msgs.append({"role": "user", "content": self.user.format(**_fields(ex))})
            msgs.append({"role": "assistant", "content": numbered(ex["output"])})
        msgs.append({"role": "user", "content": self.user.format(**_fields(fields))})
        return msgs


def numbered(lines: list[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(lines, start=1))


def _fields(d: dict) -> dict:
    """Template fields: lists (an example's ``units``) become numbered lines."""
    return {k: numbered(v) if isinstance(v, list) else v for k, v in d.items() if k != "output"}


@dataclass
class ShardPrompts:
    system: str
    examples: list[dict]
    user: str
    segment: StepPrompt | None = None  # two-step sharding (settings steps: 2): step 1
    rephrase: StepPrompt | None = None  # ... and step 2

    @classmethod
    def from_dict(cls, d: dict, source: str | None = None) -> "ShardPrompts":
        """``examples`` is a list, or a mapping source -> list (one prompt pair set per source
        dataset: hotpotqa, 2wikimultihopqa, musique, miniworld); ``default`` covers the rest.
        ``segment`` and ``rephrase`` (optional) are the two steps' prompts (``StepPrompt``)."""
        ex = d.get("examples", [])
        if isinstance(ex, dict):
            ex = ex.get(source) or ex.get("default") or []
        steps = {k: StepPrompt.from_dict(d[k], source) for k in ("segment", "rephrase") if d.get(k)}
        return cls(system=d["system"], examples=ex, user=d["user"], **steps)

    def messages(self, question: str) -> list[dict]:
        msgs = [{"role": "system", "content": self.system}]
        for ex in self.examples:
            msgs.append({"role": "user", "content": self.user.format(question=ex["question"])})
            body = "\n".join(f"{i}. {s}" for i, s in enumerate(ex["shards"], start=1))
            msgs.append({"role": "assistant", "content": body})
        msgs.append({"role": "user", "content": self.user.format(question=question)})
        return msgs


# sample_index of the shard-wording variability samples (lic_rag.sharding.variability): far
# above any attempt index, so they never reuse an attempt's cached sample
VARIABILITY_OFFSET = 1000


def sharding_settings(settings: dict, source: str = "shard settings") -> dict:
    """A copy of ``settings`` with the defaults of the config schema's ``$defs/sharding`` filled
    in (the one definition of them, which lic_rag.sharding and cross.sharding use), checked
    against it: a shard job run by hand, or a caller that passes a few keys, gets the config's
    defaults; a study's own keys (lic_rag's reviews, variability) pass through."""
    from convrag.schema import _validate

    out = dict(settings)
    _validate(out, {"$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$ref": "config.schema.yaml#/$defs/sharding"}, source)
    return out


def sample_shards(items: list[tuple[Question, int]], engine, prompts: ShardPrompts, settings: dict,
                  desc: str) -> list[dict]:
    """One sample of a shard set for each (question, sample_index), batched: one model call
    (``steps: 1``) or one per step (``steps: 2``: segment the question into its information
    units, then rephrase the units into the user's messages). Returns per item
    ``{raw, shards}`` (two steps also ``raw_segment`` and ``units``), unchecked."""
    settings = sharding_settings(settings)
    steps, sampling = settings["steps"], Sampling.from_config(settings)
    if steps == 1:
        reqs = [Request(messages=prompts.messages(q.question), sampling=sampling, seed=0, sample_index=i)
                for q, i in items]
        return [{"raw": r.text, "shards": parse_shards(r.text)} for r in engine.generate(reqs, desc=desc)]
    if prompts.segment is None or prompts.rephrase is None:
        raise ConfigError("sharding steps: 2 needs 'segment' and 'rephrase' prompts in the shard prompt file")
    reqs = [Request(messages=prompts.segment.messages(question=q.question), sampling=sampling, seed=0,
                    sample_index=i) for q, i in items]
    seg = engine.generate(reqs, desc=f"{desc}, step 1 (segment)") if reqs else []
    out = [{"raw_segment": r.text, "units": parse_shards(r.text), "raw": "", "shards": []} for r in seg]
    todo = [j for j, o in enumerate(out) if o["units"]]  # nothing to rephrase: the sample fails its checks
    reqs = [Request(messages=prompts.rephrase.messages(question=items[j][0].question, units=out[j]["units"]),
                    sampling=sampling, seed=0, sample_index=items[j][1]) for j in todo]
    if reqs:
        for j, r in zip(todo, engine.generate(reqs, desc=f"{desc}, step 2 (rephrase)")):
            out[j]["raw"], out[j]["shards"] = r.text, parse_shards(r.text)
    return out


def shard_questions(questions: list[Question], engine, prompts: ShardPrompts, settings: dict) -> list[ShardSet]:
    """Shard every question; attempts are batched across questions (one model call per
    attempt round, per step with ``steps: 2``), each attempt a distinct cached sample
    (sample_index = attempt)."""
    settings = sharding_settings(settings)
    attempts = settings["attempts"]
    history: dict[str, list[dict]] = {q.qid: [] for q in questions}
    done: dict[str, ShardSet] = {}
    pending = list(questions)
    for attempt in range(attempts):
        if not pending:
            break
        samples = sample_shards([(q, attempt) for q in pending], engine, prompts, settings,
                                desc=f"shard attempt {attempt + 1}")
        still = []
        for q, smp in zip(pending, samples):
            shards = smp["shards"]
            checks = check_shards(q, shards)
            history[q.qid].append({"attempt": attempt, **smp, **checks})
            if checks["passed"]:
                done[q.qid] = _shardset(q, shards, checks, "llm", attempt, history[q.qid])
            else:
                still.append(q)
        pending = still
    for q in pending:
        fb = settings["fallback"]
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


def shard_with_replacements(questions: list[Question], reserve: list[Question], engine, prompts: ShardPrompts,
                            settings: dict) -> tuple[list[ShardSet], dict]:
    """Shard ``questions``; for every one whose shard set fails, shard the next question of
    ``reserve`` (in order, batched per round) until as many passed as there are questions or
    the reserve is exhausted (lic_rag.sharding.replace_failed; the paper keeps 150 questions
    per dataset). A passed replacement takes the place of the first failed question not yet
    replaced: its checks record ``replaces``, the failed one's ``replaced_by``. Returns every
    shard set (originals, then the reserve questions tried) and a summary
    ``{target, passed, replacements: [(failed, replacement)], reserve_tried, reserve_size, short}``."""
    sets = shard_questions(questions, engine, prompts, settings)
    target = len(questions)
    failed = [s for s in sets if not s.passed]
    pairs: list[tuple[str, str]] = []
    pos = 0
    while len(pairs) < len(failed) and pos < len(reserve):
        batch = reserve[pos:pos + len(failed) - len(pairs)]
        pos += len(batch)
        for s in shard_questions(batch, engine, prompts, settings):
            s.checks["reserve"] = True
            if s.passed:
                old = failed[len(pairs)]
                s.checks["replaces"] = old.qid
                old.checks["replaced_by"] = s.qid
                pairs.append((old.qid, s.qid))
            sets.append(s)
    passed = sum(s.passed for s in sets)
    return sets, {"target": target, "passed": passed, "replacements": pairs, "reserve_tried": pos,
                  "reserve_size": len(reserve), "short": max(0, target - passed)}


def shard_variability(questions: list[Question], engine, prompts: ShardPrompts, settings: dict,
                      samples: int) -> dict:
    """§A.2's wording variability: ``samples`` shard sets of each question (sample_index
    VARIABILITY_OFFSET + k: cached, and apart from the attempts' samples), all in one batch
    (per step), each with its checks' verdict."""
    settings = sharding_settings(settings)
    items = [(q, VARIABILITY_OFFSET + k) for q in questions for k in range(samples)]
    got = sample_shards(items, engine, prompts, settings, desc="shard wording variability") if items else []
    rows: dict[str, dict] = {}
    for (q, idx), smp in zip(items, got):
        row = rows.setdefault(q.qid, {"qid": q.qid, "dataset": q.dataset, "question": q.question, "samples": []})
        row["samples"].append({"sample": idx - VARIABILITY_OFFSET, "shards": smp["shards"],
                               "passed": bool(check_shards(q, smp["shards"])["passed"])})
    return {"steps": settings["steps"], "samples": samples, "questions": list(rows.values())}


def _shardset(q: Question, shards: list[str], checks: dict, method: str, attempt, attempts_log) -> ShardSet:
    checks = dict(checks)
    checks["passing_attempt"] = attempt
    checks["attempts"] = [
        {k: a[k] for k in ("attempt", "raw", "passed", "missing_entities", "added_entities", "leaked_answers",
                           "exposed_intermediate_answers", "goal_first", "bad_followups", "n_shards")}
        | {k: a[k] for k in ("raw_segment", "units") if k in a}  # two-step sharding: step 1 too
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


def shard_report(shardsets: list[ShardSet], questions: list[Question], replacement: dict | None = None) -> str:
    """Markdown report: counts, then every question that used the fallback or failed; with
    ``replacement`` (``shard_with_replacements``'s summary), which reserve question replaced
    which failed one, and by how many the dataset still falls short."""
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
        lines += [f"- `{s.qid}`: {by_id[s.qid].question if s.qid in by_id else ''}"
                  + (f" (replaced by `{s.checks['replaced_by']}`)" if s.checks.get("replaced_by") else "")
                  for s in failed]
    if replacement is not None:
        r = replacement
        lines += ["", "## Replacements of failed shard sets", "",
                  f"- questions asked for: {r['target']}; passed after replacement: {r['passed']}",
                  f"- reserve questions tried: {r['reserve_tried']} of {r['reserve_size']}",
                  f"- replacements: {len(r['replacements'])}"]
        lines.append(f"- SHORT by {r['short']} question(s): the reserve is exhausted" if r["short"]
                     else "- short by: 0")
        if r["replacements"]:
            lines += ["", "| failed qid | replaced by |", "|---|---|"]
            lines += [f"| {a} | {b} |" for a, b in r["replacements"]]
    return "\n".join(lines) + "\n"
