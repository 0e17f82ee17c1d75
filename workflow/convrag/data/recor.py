"""Loader of RECOR, the conversational track (track 2) of the RETECO SemEval-2027 shared task
(*RECOR: Reasoning-focused Multi-turn Conversational Retrieval Benchmark*, Ali et al., Findings of
ACL 2026): 11 domains (six from BRIGHT, five from StackExchange), each with its own document
corpus, multi-turn conversations and binary turn-level qrels.

Every record becomes the project's records (``TurnTask``, ``Passage``); the loaders return a
counted report, so nothing is dropped silently; every malformed record is a ``DataError`` naming
the file, the line and the field (for a JSON array: the line where the conversation or turn
object starts).

**Official release** (Hugging Face dataset ``DataScience-UIBK/RETECO-SemEval2027``, folder
``track2_recor/<domain>/``; see ``../shared/data/recor_pilot/SOURCE.md``): ``documents.jsonl``
(``{"doc_id", "content"}``), ``benchmark_<split>.json`` (a JSON array of conversations
``{id, task, metadata, original_query, original_answer, turns: [{turn_id, query, answer,
conversation_history, gold_doc_ids, subquestion_reasoning, ...}]}``) and ``qrels_<split>.txt``
(``<conv_id>_turn_<turn_id>\\t0\\t<doc_id>\\t1``); ``split`` is ``dev`` or ``train`` (70/30 by
conversation per domain).

**Pilot sample** (the organisers' 4-conversation sample, ``../shared/data/recor_pilot``): one
``benchmark.jsonl`` (one conversation a line, all domains; the domain is the conversation's
``task``), one ``documents.jsonl`` (only the 15 gold documents) and one space-separated
``qrels.txt`` with topic ids ``<conv_id>#turn<turn_id>``. A pilot domain's corpus is the set of
documents the qrels of that domain's turns name (the sample has no negatives: ranking over it is
not a meaningful retrieval result).

**Ids.** Conversation ids repeat across the BRIGHT domains (``"2"`` is a biology and an economics
conversation), so everything is keyed by domain: ``task_id`` = ``<domain>/<conv_id>_turn_<turn_id>``
(the official topic id, prefixed with the domain), ``conversation_id`` = ``<domain>/<conv_id>``.
The official topic id is kept in ``labels.topic_id`` (what a TREC run for the organisers uses).

**One TurnTask per turn**: ``history`` = the earlier turns of the conversation, each as a
``user`` turn (its query) and an ``assistant`` turn (its answer), verbatim; ``question`` = the
turn's ``query``; ``reference_answers`` = ``[answer]`` (empty when the answer is empty; counted);
``gold_docs`` = the turn's qrels (``{doc_id: relevance}``, all 1 in the release); ``labels``:
``domain``, ``split`` (``dev`` / ``train``; ``pilot`` for the sample), ``turn_id``,
``topic_id``, ``official_history`` (the turn's ``conversation_history`` string verbatim: the
official with-history baseline appends it to the query, see ``official_query``), ``has_gold``,
``n_turns``. A qrels line naming a turn the benchmark file does not have, or a document the
domain's ``documents.jsonl`` does not have, is an error naming the qrels file and line. A turn's
own ``gold_doc_ids`` field is not used for ``gold_docs``; turns where it differs from the qrels
are counted (``gold_doc_ids_differ_from_qrels``).

**Official queries** (``official_query``): the RETECO track-2 BM25 baselines rank the turn's
query alone, or ``query + "\\n\\nConversation History:\\n" + conversation_history``, the history
left out when it is empty or exactly ``"No previous conversation."`` (the RECOR baseline code,
``experiments/retrieval/ablation_eval.py``: ``"\\n\\n".join`` of the parts, the history part
``f"Conversation History:\\n{history}"`` added when ``history and history != "No previous
conversation."``). Turns without gold are not scored (they have no qrels).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from convrag.data.benchmarks import BenchmarkLoader, register_benchmark_loader
from convrag.data.coral import iter_conversations
from convrag.errors import ConfigError, DataError
from convrag.io import iter_jsonl, iter_lines
from convrag.records import Passage, TurnTask

# The 11 official domains (folder names of ``track2_recor/``), BRIGHT then StackExchange.
DOMAINS = ("biology", "earth_science", "economics", "psychology", "robotics", "sustainable_living",
           "drones", "hardware", "law", "medicalsciences", "politics")
# The five StackExchange domains (documents from the dialogue's own thread, its negatives included).
STACKEXCHANGE_DOMAINS = DOMAINS[6:]
# The domains of the organisers' pilot sample (manifest.json, ``track2_recor.domains``).
PILOT_DOMAINS = ("law", "drones", "biology", "earth_science")
SPLITS = ("dev", "train")
FORMATS = ("official", "pilot")
NO_HISTORY = "No previous conversation."
HISTORY_HEADER = "Conversation History:\n"

HF_REPO = "DataScience-UIBK/RETECO-SemEval2027"
HF_BASE = f"https://huggingface.co/datasets/{HF_REPO}/resolve"
HF_FOLDER = "track2_recor"
PILOT_FILES = {"benchmark": "benchmark.jsonl", "documents": "documents.jsonl", "qrels": "qrels.txt"}


# ---- ids and queries -------------------------------------------------------------------------


def topic_id(conv_id: str, turn_id: int) -> str:
    """The official topic id of a turn (its id in ``qrels_<split>.txt``): ``<conv_id>_turn_<turn_id>``."""
    return f"{conv_id}_turn_{turn_id}"


def pilot_topic_id(conv_id: str, turn_id: int) -> str:
    """The pilot sample's topic id of a turn (``qrels.txt``): ``<conv_id>#turn<turn_id>``."""
    return f"{conv_id}#turn{turn_id}"


def task_id(domain: str, conv_id: str, turn_id: int) -> str:
    """The project's id of a turn, unique across domains: ``<domain>/<conv_id>_turn_<turn_id>``."""
    return f"{domain}/{topic_id(conv_id, turn_id)}"


def official_query(task: TurnTask | Mapping[str, Any], with_history: bool) -> str:
    """The query of the official RETECO track-2 BM25 baseline for one turn: the turn's query
    (``with_history=False``), or ``query + "\\n\\nConversation History:\\n" + history`` with the
    turn's ``conversation_history`` verbatim (``labels.official_history``), the history left out
    when it is empty or exactly ``"No previous conversation."``."""
    question = task["question"] if isinstance(task, Mapping) else task.question
    if not with_history:
        return question
    labels = task.get("labels", {}) if isinstance(task, Mapping) else task.labels
    history = labels.get("official_history")
    if history and history != NO_HISTORY:
        return "\n\n".join([question, HISTORY_HEADER + history])
    return question


def normalise_domain(task: str) -> str:
    """A conversation's ``task`` as a domain folder name (``"Earth Science"`` -> ``earth_science``)."""
    return re.sub(r"[\s\-]+", "_", task.strip().lower())


# ---- raw files -------------------------------------------------------------------------------


def _doc_id(value: Any, where: str, key: str = "doc_id") -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    raise DataError(f"{where}: field '{key}' must be a non-empty string, got {value!r:.60}")


def iter_documents(path: str | Path) -> Iterable[tuple[int, str, str]]:
    """(line, doc_id, content) of each document of a ``documents.jsonl`` (``{"doc_id", "content"}``)."""
    path = Path(path)
    for lineno, rec in iter_jsonl(path):
        where = f"{path}:{lineno}"
        for key in ("doc_id", "content"):
            if key not in rec:
                raise DataError(f"{where}: field '{key}' is missing (a document is {{\"doc_id\", \"content\"}})")
        doc = _doc_id(rec["doc_id"], where)
        if not isinstance(rec["content"], str):
            raise DataError(f"{where}: field 'content' must be a string, got {type(rec['content']).__name__}")
        yield lineno, doc, rec["content"]


def read_documents(path: str | Path, keep: Iterable[str] | None = None) -> list[Passage]:
    """The documents of a ``documents.jsonl`` as Passages (``title`` "", ``text`` = ``content``),
    in file order; only those in ``keep`` when given. A duplicate doc id is an error."""
    path = Path(path)
    wanted = None if keep is None else set(keep)
    seen: dict[str, int] = {}
    out = []
    for lineno, doc, content in iter_documents(path):
        if doc in seen:
            raise DataError(f"{path}:{lineno}: field 'doc_id' '{doc}' repeats line {seen[doc]}")
        seen[doc] = lineno
        if wanted is None or doc in wanted:
            out.append(Passage(doc_id=doc, title="", text=content))
    return out


def document_ids(path: str | Path) -> dict[str, int]:
    """doc id -> line of every document of a ``documents.jsonl`` (a duplicate id is an error)."""
    path = Path(path)
    seen: dict[str, int] = {}
    for lineno, doc, _ in iter_documents(path):
        if doc in seen:
            raise DataError(f"{path}:{lineno}: field 'doc_id' '{doc}' repeats line {seen[doc]}")
        seen[doc] = lineno
    return seen


def _str_field(obj: dict, key: str, where: str, *, nonempty: bool = False, required: bool = True) -> str | None:
    if key not in obj:
        if required:
            raise DataError(f"{where}: field '{key}' is missing")
        return None
    value = obj[key]
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise DataError(f"{where}: field '{key}' must be a {'non-empty ' if nonempty else ''}string, "
                        f"got {value!r:.60}")
    return value


def read_conversations(path: str | Path) -> list[dict]:
    """The conversations of a benchmark file (a JSON array, or JSON Lines: one conversation a
    line), checked: ``{"id", "line", "task", "turns": [{"turn_id", "line", "query", "answer",
    "history", "gold_doc_ids"}]}``. Turn ids are positive integers, increasing within a
    conversation; a conversation id repeated within the file is an error."""
    path = Path(path)
    out: list[dict] = []
    seen: dict[str, int] = {}
    for line, conv, turn_lines in iter_conversations(path):
        where = f"{path}:{line}"
        if "id" not in conv:
            raise DataError(f"{where}: field 'id' is missing (a conversation needs an id)")
        cid = _doc_id(conv["id"], where, "id")
        where = f"{path}:{line}: conversation '{cid}'"
        if cid in seen:
            raise DataError(f"{where}: field 'id' repeats the conversation of line {seen[cid]}")
        seen[cid] = line
        task = _str_field(conv, "task", where, required=False)
        turns = conv.get("turns")
        if not isinstance(turns, list) or not turns:
            raise DataError(f"{where}: field 'turns' must be a non-empty list, got {turns!r:.60}")
        parsed = []
        last = 0
        for k, (t, tline) in enumerate(zip(turns, turn_lines)):
            tw = f"{path}:{tline}: conversation '{cid}', turn {k + 1}"
            if not isinstance(t, dict):
                raise DataError(f"{tw}: field 'turns[{k}]' must be an object, got {type(t).__name__}")
            tid = t.get("turn_id")
            if isinstance(tid, bool) or not isinstance(tid, int) or tid < 1:
                raise DataError(f"{tw}: field 'turn_id' must be a positive integer, got {tid!r:.60}")
            if tid <= last:
                raise DataError(f"{tw}: field 'turn_id' {tid} does not follow turn {last} (turn ids must increase)")
            last = tid
            gold = t.get("gold_doc_ids")
            if gold is not None and (not isinstance(gold, list) or not all(isinstance(g, str) for g in gold)):
                raise DataError(f"{tw}: field 'gold_doc_ids' must be a list of doc ids, got {gold!r:.60}")
            parsed.append({
                "turn_id": tid, "line": tline,
                "query": _str_field(t, "query", tw, nonempty=True),
                "answer": _str_field(t, "answer", tw),
                "history": _str_field(t, "conversation_history", tw),
                "gold_doc_ids": gold,
            })
        out.append({"id": cid, "line": line, "task": task, "turns": parsed})
    return out


def read_recor_qrels(path: str | Path, topics: Mapping[str, Any], *, docs: Mapping[str, Any] | None = None,
                     benchmark_path: str | Path = "", documents_path: str | Path = "",
                     ) -> tuple[dict[Any, dict[str, int]], dict[str, Any]]:
    """The qrels of a RECOR qrels file (``topic 0 doc_id relevance``, tab-separated as released,
    or space-separated as in the pilot sample): ``topics[topic id]`` (the key of each known turn)
    -> {doc_id: relevance}, and counts. A topic not in ``topics``, a doc id not in ``docs`` (when
    given), a repeated (topic, doc) pair or a malformed line is an error naming file and line."""
    path = Path(path)
    out: dict[Any, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    rows = 0
    rel_counts: Counter = Counter()
    for lineno, line in iter_lines(path):
        where = f"{path}:{lineno}"
        line = line.rstrip("\r")
        cols = line.split("\t") if "\t" in line else line.split()
        if len(cols) != 4:
            raise DataError(f"{where}: expected 4 columns 'topic_id 0 doc_id relevance', got {len(cols)}")
        topic, _, doc, rel = (c.strip() for c in cols)
        if topic not in topics:
            raise DataError(f"{where}: field 'topic_id' '{topic}' is not a turn of {benchmark_path or 'the benchmark'}")
        if not doc:
            raise DataError(f"{where}: field 'doc_id' is empty")
        if docs is not None and doc not in docs:
            raise DataError(f"{where}: field 'doc_id' '{doc}' (topic '{topic}') is not a document of "
                            f"{documents_path or 'the corpus'}")
        try:
            grade = int(rel)
        except ValueError:
            raise DataError(f"{where}: field 'relevance' '{rel}' is not an integer") from None
        if (topic, doc) in first:
            raise DataError(f"{where}: topic '{topic}' and doc '{doc}' repeat line {first[(topic, doc)]}")
        first[(topic, doc)] = lineno
        out.setdefault(topics[topic], {})[doc] = grade
        rows += 1
        rel_counts[str(grade)] += 1
    return out, {"rows": rows, "relevance": dict(sorted(rel_counts.items()))}


# ---- turns -> TurnTasks ----------------------------------------------------------------------


def _tasks_of(conv: dict, domain: str, split: str, gold: Mapping[int, dict[str, int]], benchmark: str,
              path: Path, stats: Counter) -> list[TurnTask]:
    cid = conv["id"]
    n = len(conv["turns"])
    history: list[dict] = []
    tasks = []
    for i, t in enumerate(conv["turns"]):
        tid = t["turn_id"]
        g = dict(gold.get(tid, {}))
        positive = {d for d, r in g.items() if r > 0}
        if t["gold_doc_ids"] is not None and set(t["gold_doc_ids"]) != positive:
            stats["gold_doc_ids_differ_from_qrels"] += 1
        if i == 0 and t["history"] != NO_HISTORY:
            stats["first_turn_history_not_default"] += 1
        if i > 0 and t["history"] in ("", NO_HISTORY):
            stats["later_turn_without_history"] += 1
        if not t["answer"].strip():
            stats["empty_answers"] += 1
        d = {
            "task_id": task_id(domain, cid, tid), "benchmark": benchmark,
            "conversation_id": f"{domain}/{cid}", "turn": tid, "history": list(history),
            "question": t["query"], "reference_answers": [t["answer"]] if t["answer"].strip() else [],
            "gold_docs": g, "rewrite": None, "contexts": [],
            "labels": {"domain": domain, "split": split, "turn_id": tid, "topic_id": topic_id(cid, tid),
                       "official_history": t["history"], "has_gold": bool(positive), "n_turns": n},
        }
        # the schema check runs on the conversation's last task (it holds the whole history)
        last = i == n - 1
        tasks.append(TurnTask.from_dict(d, where=f"{path}:{t['line']}: conversation '{cid}', turn {tid}")
                     if last else TurnTask(**d))
        history += [{"role": "user", "text": t["query"]}, {"role": "assistant", "text": t["answer"]}]
    return tasks


def _gold_summary(tasks: list[TurnTask]) -> dict[str, Any]:
    n = [sum(r > 0 for r in t.gold_docs.values()) for t in tasks]
    with_gold = [x for x in n if x]
    return {"mean": round(sum(with_gold) / len(with_gold), 4) if with_gold else 0.0,
            "min": min(with_gold, default=0), "max": max(with_gold, default=0),
            "turns_by_count": {str(k): v for k, v in sorted(Counter(n).items())}}


def _report(tasks: list[TurnTask], convs_by_domain: Mapping[str, list[dict]], stats: Counter,
            docs_by_domain: Mapping[str, int], qrels_by_domain: Mapping[str, dict]) -> dict[str, Any]:
    per_domain = {}
    for d, convs in convs_by_domain.items():
        dt = [t for t in tasks if t.labels["domain"] == d]
        per_domain[d] = {
            "conversations": len(convs), "turns": len(dt),
            "turns_with_gold": sum(t.labels["has_gold"] for t in dt),
            "positive_qrels": sum(r > 0 for t in dt for r in t.gold_docs.values()),
            "qrels_rows": qrels_by_domain.get(d, {}).get("rows", 0),
            "documents": docs_by_domain.get(d, 0),
            "gold_per_turn": _gold_summary(dt),
        }
    rel: Counter = Counter()
    for q in qrels_by_domain.values():
        rel.update(q.get("relevance", {}))
    return {
        "conversations": sum(len(c) for c in convs_by_domain.values()),
        "turns": len(tasks),
        "tasks": len(tasks),
        "turns_with_gold": sum(t.labels["has_gold"] for t in tasks),
        "turns_without_gold": sum(not t.labels["has_gold"] for t in tasks),
        "positive_qrels": sum(r > 0 for t in tasks for r in t.gold_docs.values()),
        "qrels_rows": sum(q.get("rows", 0) for q in qrels_by_domain.values()),
        "qrels_relevance": dict(sorted(rel.items())),
        "documents": sum(docs_by_domain.values()),
        "gold_per_turn": _gold_summary(tasks),
        "turns_by_position": {str(k): v for k, v in sorted(Counter(t.turn for t in tasks).items())},
        "gold_doc_ids_differ_from_qrels": stats["gold_doc_ids_differ_from_qrels"],
        "first_turn_history_not_default": stats["first_turn_history_not_default"],
        "later_turn_without_history": stats["later_turn_without_history"],
        "empty_answers": stats["empty_answers"],
        "task_differs_from_domain": stats["task_differs_from_domain"],
        "per_domain": per_domain,
    }


def load_recor(domain_files: Mapping[str, Mapping[str, str | Path]], *, split: str = "dev",
               benchmark: str = "recor") -> tuple[list[TurnTask], dict[str, Any]]:
    """TurnTasks of the official release: ``domain_files[domain]`` = ``{benchmark, qrels,
    documents}`` paths (``benchmark_<split>.json``, ``qrels_<split>.txt``, ``documents.jsonl`` of
    ``track2_recor/<domain>/``). Returns (tasks in domain, conversation and turn order, report)."""
    tasks: list[TurnTask] = []
    stats: Counter = Counter()
    convs_by_domain: dict[str, list[dict]] = {}
    docs_by_domain: dict[str, int] = {}
    qrels_by_domain: dict[str, dict] = {}
    for domain, f in domain_files.items():
        bpath, qpath, dpath = Path(f["benchmark"]), Path(f["qrels"]), Path(f["documents"])
        docs = document_ids(dpath)
        convs = read_conversations(bpath)
        topics = {}
        for c in convs:
            if c["task"] is not None and normalise_domain(c["task"]) != domain:
                stats["task_differs_from_domain"] += 1
            for t in c["turns"]:
                topics[topic_id(c["id"], t["turn_id"])] = (c["id"], t["turn_id"])
        if len(topics) != sum(len(c["turns"]) for c in convs):
            raise DataError(f"{bpath}: two turns share an official topic id '<conv_id>_turn_<turn_id>' "
                            "(a conversation id ending in '_turn_<n>')")
        qrels, qrep = read_recor_qrels(qpath, topics, docs=docs, benchmark_path=bpath, documents_path=dpath)
        for c in convs:
            gold = {tid: qrels.get((c["id"], tid), {}) for tid in (t["turn_id"] for t in c["turns"])}
            tasks += _tasks_of(c, domain, split, gold, benchmark, bpath, stats)
        convs_by_domain[domain] = convs
        docs_by_domain[domain] = len(docs)
        qrels_by_domain[domain] = qrep
    report = {"format": "official", "split": split, "domains": list(domain_files),
              "files": {d: {k: str(v) for k, v in f.items()} for d, f in domain_files.items()},
              **_report(tasks, convs_by_domain, stats, docs_by_domain, qrels_by_domain)}
    return tasks, report


def _pilot(benchmark_path: str | Path, documents_path: str | Path, qrels_path: str | Path,
           domains: Iterable[str] | None):
    """The pilot sample read once: (conversations by domain, gold by (domain, conv, turn),
    doc ids, qrels counts, skipped conversations)."""
    bpath, dpath, qpath = Path(benchmark_path), Path(documents_path), Path(qrels_path)
    keep = set(PILOT_DOMAINS if domains is None else domains)
    docs = document_ids(dpath)
    convs = read_conversations(bpath)
    by_domain: dict[str, list[dict]] = {}
    topics: dict[str, tuple[str, str, int]] = {}
    for c in convs:
        if c["task"] is None:
            raise DataError(f"{bpath}:{c['line']}: conversation '{c['id']}': field 'task' (its domain) is missing")
        d = normalise_domain(c["task"])
        if d not in DOMAINS:
            raise DataError(f"{bpath}:{c['line']}: conversation '{c['id']}': field 'task' '{c['task']}' is not a "
                            f"RECOR domain (known: {', '.join(DOMAINS)})")
        by_domain.setdefault(d, []).append(c)
        for t in c["turns"]:
            topics[pilot_topic_id(c["id"], t["turn_id"])] = (d, c["id"], t["turn_id"])
    qrels, qrep = read_recor_qrels(qpath, topics, docs=docs, benchmark_path=bpath, documents_path=dpath)
    skipped = {d: len(v) for d, v in by_domain.items() if d not in keep}
    by_domain = {d: by_domain.get(d, []) for d in (PILOT_DOMAINS if domains is None else domains)}
    return by_domain, qrels, docs, qrep, skipped


def load_recor_pilot(benchmark_path: str | Path, documents_path: str | Path, qrels_path: str | Path, *,
                     domains: Iterable[str] | None = None, benchmark: str = "recor",
                     ) -> tuple[list[TurnTask], dict[str, Any]]:
    """TurnTasks of the organisers' pilot sample (``benchmark.jsonl``, ``documents.jsonl``,
    ``qrels.txt``); ``domains`` (default ``PILOT_DOMAINS``) keeps the conversations whose ``task``
    is one of them (the others are counted in ``skipped_conversations``). ``split`` is ``pilot``."""
    by_domain, qrels, docs, qrep, skipped = _pilot(benchmark_path, documents_path, qrels_path, domains)
    bpath = Path(benchmark_path)
    tasks: list[TurnTask] = []
    stats: Counter = Counter()
    for d, convs in by_domain.items():
        for c in convs:
            gold = {t["turn_id"]: qrels.get((d, c["id"], t["turn_id"]), {}) for t in c["turns"]}
            tasks += _tasks_of(c, d, "pilot", gold, benchmark, bpath, stats)
    named = {}
    for (d, _, _), g in qrels.items():
        for doc in g:
            named.setdefault(doc, set()).add(d)
    docs_by_domain = {d: sum(d in ds for ds in named.values()) for d in by_domain}
    report = {
        "format": "pilot", "split": "pilot", "domains": list(by_domain),
        "files": {"benchmark": str(benchmark_path), "documents": str(documents_path), "qrels": str(qrels_path)},
        **_report(tasks, by_domain, stats, docs_by_domain, {"all": qrep}),
        "documents": len(docs),
        "documents_named_by_no_turn": sum(doc not in named for doc in docs),
        "skipped_conversations": skipped,
    }
    report["per_domain"] = {d: {k: v for k, v in r.items() if k != "qrels_rows"}
                            for d, r in report["per_domain"].items()}
    return tasks, report


def pilot_corpus(benchmark_path: str | Path, documents_path: str | Path, qrels_path: str | Path,
                 domain: str) -> list[Passage]:
    """One domain's corpus of the pilot sample: the documents named by the qrels of that
    domain's turns, in ``documents.jsonl`` order (the sample holds gold documents only)."""
    _, qrels, _, _, _ = _pilot(benchmark_path, documents_path, qrels_path, [domain])
    named = {doc for (d, _, _), g in qrels.items() if d == domain for doc in g}
    return read_documents(documents_path, keep=named)


# ---- the registered benchmark loader ---------------------------------------------------------


@register_benchmark_loader("recor")
class Recor(BenchmarkLoader):
    """RECOR / RETECO track 2 (``convrag.data.recor``). Config:

    - official release: ``{kind: recor, split: dev|train (default dev), domains: [...] (default
      all 11), revision: <Hugging Face revision of DataScience-UIBK/RETECO-SemEval2027, default
      main>, local: <folder laid out as track2_recor/, optional>}``. Raw files per domain:
      ``<domain>.documents.jsonl``, ``<domain>.benchmark_<split>.json``,
      ``<domain>.qrels_<split>.txt`` = ``track2_recor/<domain>/{documents.jsonl,
      benchmark_<split>.json, qrels_<split>.txt}``, downloaded from
      ``https://huggingface.co/datasets/DataScience-UIBK/RETECO-SemEval2027/resolve/<revision>/...``
      (sha256 recorded beside each download, not pinned: no copy was hashed here; pin
      ``revision`` to a commit for a reproducible grid), or read from ``local`` (a path relative
      to the repository root, as other loaders' ``local``) without network;
    - pilot sample: ``{kind: recor, format: pilot, local: {benchmark, documents, qrels}, domains:
      [...] (default the sample's four)}`` (paths relative to the repository root).
    """

    KEYS = ("kind", "format", "split", "domains", "revision", "local")

    def check(self, name, spec, source):
        key = f"benchmarks.{name}"
        self.check_keys(name, spec, source)
        fmt = spec.get("format", "official")
        if fmt not in FORMATS:
            raise ConfigError(f"{source}: invalid config key '{key}.format': {fmt!r} is not one of "
                              f"{', '.join(FORMATS)}")
        doms = spec.get("domains")
        if doms is not None:
            if not isinstance(doms, list) or not doms:
                raise ConfigError(f"{source}: invalid config key '{key}.domains': a non-empty list of domains "
                                  f"({', '.join(DOMAINS)})")
            for i, d in enumerate(doms):
                if d not in DOMAINS:
                    raise ConfigError(f"{source}: invalid config key '{key}.domains[{i}]': unknown domain {d!r} "
                                      f"(known: {', '.join(DOMAINS)})")
            if len(set(doms)) != len(doms):
                raise ConfigError(f"{source}: invalid config key '{key}.domains': a domain is listed twice")
        local = spec.get("local")
        if fmt == "pilot":
            for k in ("split", "revision"):
                if k in spec:
                    raise ConfigError(f"{source}: invalid config key '{key}.{k}': not used with format: pilot")
            if not isinstance(local, dict) or set(local) != set(PILOT_FILES) or not all(
                    isinstance(v, str) and v for v in local.values()):
                raise ConfigError(f"{source}: invalid config key '{key}.local': format pilot needs "
                                  "{benchmark, documents, qrels} paths")
            return
        if spec.get("split", "dev") not in SPLITS:
            raise ConfigError(f"{source}: invalid config key '{key}.split': {spec['split']!r} is not one of "
                              f"{', '.join(SPLITS)}")
        rev = spec.get("revision", "lock")
        if not isinstance(rev, str) or not rev.strip():
            raise ConfigError(f"{source}: invalid config key '{key}.revision': a commit of the Hugging Face dataset "
                              f"{HF_REPO}, or 'lock' (resolved at the first download and kept in the lock file)")
        if local is not None and (not isinstance(local, str) or not local):
            raise ConfigError(f"{source}: invalid config key '{key}.local': a folder laid out as "
                              f"{HF_FOLDER}/ (<domain>/documents.jsonl, ...)")

    def domains(self, spec):
        default = PILOT_DOMAINS if spec.get("format", "official") == "pilot" else DOMAINS
        return list(spec.get("domains") or default)

    @staticmethod
    def _domain_files(split: str) -> dict[str, str]:
        return {"documents": "documents.jsonl", "benchmark": f"benchmark_{split}.json",
                "qrels": f"qrels_{split}.txt"}

    def raw_files(self, spec):
        if spec.get("format", "official") == "pilot":
            return {PILOT_FILES[k]: {"local": spec["local"][k]} for k in PILOT_FILES}
        split, rev, local = spec.get("split", "dev"), spec.get("revision", "lock"), spec.get("local")
        out = {}
        for d in self.domains(spec):
            for fname in self._domain_files(split).values():
                if local:
                    out[f"{d}.{fname}"] = {"local": f"{local.rstrip('/')}/{d}/{fname}"}
                else:
                    out[f"{d}.{fname}"] = {"url": f"{HF_BASE}/{rev}/{HF_FOLDER}/{d}/{fname}", "sha256": None}
        return out

    def task_inputs(self, spec):
        return list(self.raw_files(spec))

    def corpus_inputs(self, spec, domain):
        if spec.get("format", "official") == "pilot":
            return list(PILOT_FILES.values())
        return [f"{domain}.documents.jsonl"]

    def _need(self, name, files, need):
        missing = [n for n in need if n not in files]
        if missing:
            raise DataError(f"benchmark {name}: raw file '{missing[0]}' not given (needed: {', '.join(need)})")

    def tasks(self, name, spec, files):
        self._need(name, files, self.task_inputs(spec))
        if spec.get("format", "official") == "pilot":
            return load_recor_pilot(*(files[PILOT_FILES[k]] for k in ("benchmark", "documents", "qrels")),
                                    domains=self.domains(spec), benchmark=name)
        split = spec.get("split", "dev")
        per = {d: {k: files[f"{d}.{f}"] for k, f in self._domain_files(split).items()} for d in self.domains(spec)}
        return load_recor(per, split=split, benchmark=name)

    def corpus(self, name, spec, domain, files):
        if domain not in self.domains(spec):
            raise DataError(f"benchmark {name}: unknown domain '{domain}' "
                            f"(configured: {', '.join(self.domains(spec))})")
        self._need(name, files, self.corpus_inputs(spec, domain))
        if spec.get("format", "official") == "pilot":
            return pilot_corpus(*(files[PILOT_FILES[k]] for k in ("benchmark", "documents", "qrels")), domain)
        return read_documents(files[f"{domain}.documents.jsonl"])
