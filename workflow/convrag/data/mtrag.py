"""Loaders of MTRAG-UN and MTRAG (IBM's mt-rag-benchmark): generation tasks, BEIR retrieval tasks
and qrels, passage-level corpora, MTRAG's annotated conversations and its human-evaluation file.

Everything becomes the project's records (``TurnTask``, ``Passage``) or the small records below
(``RetrievalTask``, ``HumanEvaluation``), and every loader returns or keeps a counted report, so
nothing is dropped silently. Every error is a ``DataError`` that names the file, the line (JSONL)
or record (JSON arrays), and the field.

**Task ids.** The benchmark writes ``<conversation id><::><turn>`` in most files and
``<conversation id>::<turn>`` in the evaluation scripts' sample inputs. Every id is normalised ONE
way, to ``<::>`` (``ID_SEP``), by ``normalise_task_id``; the loaders count how many ids they
converted. The turn in the id must equal the record's ``turn`` field and the conversation part its
``conversation_id`` field.

**Domains.** ``labels.domain`` is always one of the short names clapnq / cloud / fiqa / govt
(``DOMAINS`` maps every spelling seen in the files: MTRAG's long collection names, MTRAG-UN's
``ibmcloud``); the raw name is kept in ``labels.collection``. An unknown collection is an error,
so a new domain (MTRAG-UN's Banking and Telco are not released yet) is added to the table on
purpose rather than slipping through under a name no corpus has.

**Labels** of a TurnTask: ``answerability`` (one value: ANSWERABLE, PARTIAL, UNANSWERABLE and,
MTRAG-UN only, UNDERSPECIFIED or, MTRAG only, CONVERSATIONAL; None when the file has none),
``question_type`` (a list: a turn may have several types), ``multi_turn`` (Follow-up /
Clarification / N/A, None when absent, ``NaN`` or an empty list), ``domain``, ``collection``,
``first_turn`` (turn == 1) and ``standalone``: True / False from a ``Standalone Type`` of
Standalone / Non-standalone where a record carries one, else None. MTRAG-UN's ``reference.jsonl``
has NO standalone field (nor do its user turns carry enrichments), so every MTRAG-UN task has
``standalone: None``: the paper's standalone / non-standalone split is not in the released files.
In MTRAG, ``Standalone Type`` appears only in the evaluation scripts' ``responses-10.jsonl``
(always ``NaN``) and in the enrichments of a few annotated user turns; ``Validity`` (e.g.
Adversarial) is kept as ``labels.validity`` where a conversation turn has one.

**NaN.** Some files hold bare ``NaN`` tokens (not JSON); they are parsed and become None, and the
report counts them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from convrag.data.empty_passages import EmptyPassages
from convrag.errors import ConfigError, DataError
from convrag.io import json_error, utf8_errors
from convrag.metrics.retrieval import Qrels, read_qrels
from convrag.records import Passage, TurnTask

ID_SEP = "<::>"
_ALT_SEP = "::"

# The answerability values each benchmark knows.
ANSWERABILITY: dict[str, tuple[str, ...]] = {
    "mtrag_un": ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "UNDERSPECIFIED"),
    "mtrag": ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "CONVERSATIONAL"),
}
VARIANTS = tuple(ANSWERABILITY)
MULTI_TURN = ("Follow-up", "Clarification", "N/A")
STANDALONE = {"Standalone": True, "Non-standalone": False}

# Every collection / domain spelling seen in the files -> the short domain name.
DOMAINS: dict[str, str] = {
    "clapnq": "clapnq",
    "mt-rag-clapnq-elser-512-100-20240503": "clapnq",
    "cloud": "cloud",
    "ibmcloud": "cloud",
    "mt-rag-ibmcloud-elser-512-100-20240502": "cloud",
    "fiqa": "fiqa",
    "mt-rag-fiqa-beir-elser-512-100-20240501": "fiqa",
    "govt": "govt",
    "mt-rag-govt-elser-512-100-20240611": "govt",
}

# The query files of MTRAG's retrieval tasks (<domain>_<kind>.jsonl), each with the shared query
# policy (convrag.rag.policies) whose text it ships: the last user turn, the benchmark's rewrite,
# every user turn so far; each line of a query is "|user|: <text>".
QUERY_FILES = {"lastturn": "current", "rewrite": "rewrite", "questions": "history"}
QUERY_KINDS = tuple(QUERY_FILES)
SPEAKER_TAG = "|user|: "

# The official per-task metric values of the human-evaluation file.
OFFICIAL_METRICS = ("RougeL", "Bert-Rec", "Bert-KPrec", "rb_agg", "rb_llm", "rl_f", "conditional_idk")

# Top-level fields of a generation-task line that the loader reads (anything else is counted as
# ignored in the report: task_type, dataset, predictions, ...).
_TASK_FIELDS = {"conversation_id", "task_id", "turn", "Turn", "input", "targets", "contexts", "answerability",
                "Answerability", "Question Type", "Multi-Turn", "Collection", "collection", "Standalone Type"}
_MISSING = "(missing)"


# ---- small helpers ------------------------------------------------------------------------


def _nan_counter() -> tuple[list[int], Any]:
    box = [0]

    def parse_constant(name: str):  # NaN, Infinity, -Infinity: not JSON, but in the sample files
        box[0] += 1
        return None

    return box, parse_constant


def _iter_json_lines(path: Path, lines: Iterable[str] | None = None, where: str | None = None,
                     open_binary=None) -> Iterator[tuple[int, dict, int]]:
    """(line number, object, NaN tokens on the line) for each non-blank line; NaN -> None. Bytes
    that are not UTF-8 name the line and byte offset (scanned from ``open_binary`` for ``lines``
    of a zip member)."""
    label = where or str(path)
    fh = None
    if lines is None:
        try:
            fh = open(path, encoding="utf-8")
        except FileNotFoundError as e:
            raise DataError(f"{path}: file not found") from e
        lines = fh
    try:
        with utf8_errors(path, label, open_binary):
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                box, pc = _nan_counter()
                try:
                    rec = json.loads(line, parse_constant=pc)
                except json.JSONDecodeError as e:
                    raise DataError(f"{label}:{lineno}: malformed JSON line ({json_error(e, line=True)})") from e
                if not isinstance(rec, dict):
                    raise DataError(f"{label}:{lineno}: expected a JSON object, got {type(rec).__name__}")
                yield lineno, rec, box[0]
    finally:
        if fh is not None:
            fh.close()


def _read_json(path: Path) -> tuple[Any, int]:
    """A whole JSON document, NaN-tolerant; (data, NaN tokens)."""
    box, pc = _nan_counter()
    try:
        with open(path, encoding="utf-8") as fh, utf8_errors(path):
            return json.load(fh, parse_constant=pc), box[0]
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({json_error(e)})") from e


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _counts(values: Iterable[Any]) -> dict[str, int]:
    c = Counter(_MISSING if v is None else str(v) for v in values)
    return dict(sorted(c.items()))


def normalise_task_id(task_id: Any, where: str = "task id") -> tuple[str, str, int, bool]:
    """``(id with <::>, conversation id, turn, converted from '::')`` of a task id.

    ``<conv><::><turn>`` is kept; ``<conv>::<turn>`` is rewritten to ``<conv><::><turn>``. The turn
    must be a positive integer; anything else is a DataError naming ``where``.
    """
    if not isinstance(task_id, str) or not task_id:
        raise DataError(f"{where}: field 'task_id' must be a non-empty string, got {task_id!r}")
    if ID_SEP in task_id:
        conv, _, turn, converted = *task_id.rpartition(ID_SEP), False
    elif _ALT_SEP in task_id:
        conv, _, turn, converted = *task_id.rpartition(_ALT_SEP), True
    else:
        raise DataError(f"{where}: field 'task_id' '{task_id}' has no '{ID_SEP}' (or '{_ALT_SEP}') between "
                        "conversation id and turn")
    if not conv or not turn.isdigit() or int(turn) < 1:
        raise DataError(f"{where}: field 'task_id' '{task_id}' is not '<conversation id>{ID_SEP}<turn>' "
                        "with a positive integer turn")
    return f"{conv}{ID_SEP}{int(turn)}", conv, int(turn), converted


def domain_of(collection: Any, where: str = "collection", key: str = "Collection") -> str:
    """The short domain name (clapnq / cloud / fiqa / govt) of a collection name (``DOMAINS``)."""
    if not isinstance(collection, str) or collection not in DOMAINS:
        raise DataError(f"{where}: field '{key}' {collection!r} is not a known collection "
                        f"(known: {', '.join(sorted(DOMAINS))})")
    return DOMAINS[collection]


def _turn(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool):
        raise DataError(f"{where}: field '{key}' must be a positive integer, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    else:
        raise DataError(f"{where}: field '{key}' must be a positive integer, got {value!r}")
    if n < 1:
        raise DataError(f"{where}: field '{key}' must be a positive integer, got {value!r}")
    return n


def _one(value: Any, where: str, key: str, allowed: Iterable[str] | None) -> str | None:
    """A label stored as a list with one value (or a bare string); None when absent / NaN / []."""
    if _is_missing(value) or value == []:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], str):
        raise DataError(f"{where}: field '{key}' must be a list with one value, got {value!r}")
    v = value[0]
    if allowed is not None and v not in allowed:
        raise DataError(f"{where}: field '{key}' value '{v}' is not one of {', '.join(allowed)}")
    return v


def _many(value: Any, where: str, key: str) -> list[str]:
    if _is_missing(value):
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: field '{key}' must be a list of strings, got {value!r}")
    return list(value)


def _standalone(value: Any, where: str, key: str) -> bool | None:
    v = _one(value, where, key, tuple(STANDALONE))
    return None if v is None else STANDALONE[v]


def _text(value: Any, where: str, key: str, nonempty: bool = False) -> str:
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise DataError(f"{where}: field '{key}' must be a {'non-empty ' if nonempty else ''}string, got "
                        f"{value!r:.60}")
    return value


def _contexts(value: Any, where: str, resolve: Mapping[str, Passage] | None = None) -> list[dict]:
    """``[{document_id, text, title?}]`` -> ``[{doc_id, title, text}]``; with ``resolve`` (doc id ->
    Passage) a context may name only its document_id (the human-evaluation file)."""
    if _is_missing(value):
        return []
    if not isinstance(value, list):
        raise DataError(f"{where}: field 'contexts' must be a list, got {type(value).__name__}")
    out = []
    for i, c in enumerate(value):
        w = f"{where}: field 'contexts[{i}]"
        if not isinstance(c, dict):
            raise DataError(f"{w}' must be an object")
        doc_id = c.get("document_id", c.get("doc_id"))
        if not isinstance(doc_id, str) or not doc_id:
            raise DataError(f"{w}.document_id' is missing or not a string")
        if resolve is not None and "text" not in c:
            if doc_id not in resolve:
                raise DataError(f"{w}.document_id' '{doc_id}' is not among the file's documents")
            p = resolve[doc_id]
            out.append({"doc_id": doc_id, "title": p.title, "text": p.text})
            continue
        title = c.get("title")
        title = "" if _is_missing(title) else _text(title, where, f"contexts[{i}].title")
        out.append({"doc_id": doc_id, "title": title, "text": _text(c.get("text"), where, f"contexts[{i}].text")})
    return out


_ROLES = {"user": "user", "agent": "assistant", "assistant": "assistant"}


def _dialogue(value: Any, where: str, key: str = "input") -> list[dict]:
    """``[{speaker, text}]`` -> ``[{role, text}]`` (user / assistant)."""
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: field '{key}' must be a non-empty list of turns")
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or t.get("speaker") not in _ROLES:
            got = t.get("speaker") if isinstance(t, dict) else t
            raise DataError(f"{where}: field '{key}[{i}].speaker' must be one of user, agent, got {got!r:.40}")
        out.append({"role": _ROLES[t["speaker"]], "text": _text(t.get("text"), where, f"{key}[{i}].text")})
    return out


def _build_task(rec: dict, where: str, benchmark: str, variant: str, stats: Counter,
                resolve: Mapping[str, Passage] | None = None) -> TurnTask:
    """One TurnTask from a generation-task record (MTRAG-UN / MTRAG / human-evaluation task)."""
    tid, conv, id_turn, converted = normalise_task_id(rec.get("task_id"), where)
    stats["ids_normalised"] += converted
    if "conversation_id" in rec and rec["conversation_id"] != conv:
        raise DataError(f"{where}: field 'conversation_id' {rec['conversation_id']!r} differs from the conversation "
                        f"in task_id '{rec['task_id']}'")
    turn_key = "turn" if "turn" in rec else "Turn" if "Turn" in rec else None
    if turn_key is None:
        raise DataError(f"{where}: field 'turn' is missing")
    turn = _turn(rec[turn_key], where, turn_key)
    if turn != id_turn:
        raise DataError(f"{where}: field '{turn_key}' is {turn} but task_id '{rec['task_id']}' names turn {id_turn}")
    turns = _dialogue(rec.get("input"), where)
    if turns[-1]["role"] != "user" or not turns[-1]["text"].strip():
        raise DataError(f"{where}: field 'input' must end with a non-empty user turn (the question); "
                        f"the last turn is the {turns[-1]['role']}'s")
    n_user = sum(t["role"] == "user" for t in turns)
    if n_user != turn:
        raise DataError(f"{where}: field 'input' has {n_user} user turns but the task is turn {turn}")
    targets = rec.get("targets")
    if _is_missing(targets):
        targets = []
    if not isinstance(targets, list):
        raise DataError(f"{where}: field 'targets' must be a list")
    answers = [_text(t.get("text") if isinstance(t, dict) else t, where, f"targets[{i}].text")
               for i, t in enumerate(targets)]
    ans_key = "answerability" if "answerability" in rec else "Answerability"
    coll_key = "Collection" if "Collection" in rec else "collection"
    if coll_key not in rec:
        raise DataError(f"{where}: field 'Collection' is missing")
    labels = {
        "answerability": _one(rec.get(ans_key), where, ans_key, ANSWERABILITY[variant]),
        "question_type": _many(rec.get("Question Type"), where, "Question Type"),
        "multi_turn": _one(rec.get("Multi-Turn"), where, "Multi-Turn", MULTI_TURN),
        "domain": domain_of(rec[coll_key], where, coll_key),
        "collection": rec[coll_key],
        "first_turn": turn == 1,
        "standalone": _standalone(rec.get("Standalone Type"), where, "Standalone Type"),
    }
    for k in rec:
        if k not in _TASK_FIELDS:
            stats[f"ignored:{k}"] += 1
    d = {"task_id": tid, "benchmark": benchmark, "conversation_id": conv, "turn": turn, "history": turns[:-1],
         "question": turns[-1]["text"], "reference_answers": answers,
         "contexts": _contexts(rec.get("contexts"), where, resolve), "labels": labels}
    return TurnTask.from_dict(d, where=f"{where} (task {tid})")


def _variant(benchmark: str, variant: str | None) -> str:
    v = variant or benchmark
    if v not in ANSWERABILITY:
        raise ConfigError(f"MTRAG loader: variant {v!r} is not one of {', '.join(VARIANTS)} "
                          f"(pass variant= when the benchmark is named otherwise)")
    return v


def _task_report(path: Path | str, tasks: list[TurnTask], stats: Counter) -> dict[str, Any]:
    return {
        "file": str(path),
        "tasks": len(tasks),
        "conversations": len({t.conversation_id for t in tasks}),
        "answerability": _counts(t.labels["answerability"] for t in tasks),
        "domain": _counts(t.labels["domain"] for t in tasks),
        "multi_turn": _counts(t.labels["multi_turn"] for t in tasks),
        "question_type": _counts(q for t in tasks for q in t.labels["question_type"]),
        "standalone": _counts(t.labels["standalone"] for t in tasks),
        "first_turn": sum(t.labels["first_turn"] for t in tasks),
        "contexts": sum(len(t.contexts) for t in tasks),
        "tasks_without_contexts": sum(not t.contexts for t in tasks),
        "tasks_without_reference": sum(not t.reference_answers for t in tasks),
        "ids_normalised": stats["ids_normalised"],
        "nan_values": stats["nan_values"],
        "ignored_fields": {k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("ignored:")},
    }


# ---- 1. generation tasks ------------------------------------------------------------------


def load_generation_tasks(path: str | Path, benchmark: str, *, variant: str | None = None
                          ) -> tuple[list[TurnTask], dict[str, Any]]:
    """Read MTRAG-UN ``reference.jsonl`` or MTRAG ``generation_tasks/*.jsonl`` (also the evaluation
    scripts' ``taskac_input`` / ``taskb_input`` / ``responses-*`` files) into TurnTasks.

    ``benchmark`` names the records (``TurnTask.benchmark``); ``variant`` (``mtrag_un`` or
    ``mtrag``, default: ``benchmark``) picks the answerability values allowed. Per line:
    ``input`` -> ``history`` (every turn but the last; speaker agent -> role assistant) and
    ``question`` (the last turn, which must be a user turn; the number of user turns must equal
    ``turn``); ``targets`` -> ``reference_answers``; ``contexts`` -> ``contexts``
    ``[{doc_id, title, text}]``; labels as in the module docstring. ``gold_docs`` stay empty: the
    qrels come from their own files (``attach_qrels``). Model ``predictions`` in a responses file
    are not read (counted under ``ignored_fields``).

    Report: tasks, conversations, counts per answerability / domain / multi-turn / question type
    / standalone value (``(missing)`` for None), first turns, contexts, tasks without contexts or
    reference, ids normalised from ``::``, NaN tokens, ignored fields.
    """
    path = Path(path)
    v = _variant(benchmark, variant)
    tasks: list[TurnTask] = []
    stats: Counter = Counter()
    seen: dict[str, int] = {}
    for lineno, rec, nans in _iter_json_lines(path):
        where = f"{path}:{lineno}"
        stats["nan_values"] += nans
        task = _build_task(rec, where, benchmark, v, stats)
        if task.task_id in seen:
            raise DataError(f"{where}: field 'task_id': duplicate task id '{task.task_id}' (first on line "
                            f"{seen[task.task_id]})")
        seen[task.task_id] = lineno
        tasks.append(task)
    return tasks, _task_report(path, tasks, stats)


# ---- 2. retrieval tasks and qrels ---------------------------------------------------------


def _read_queries(path: Path) -> tuple[dict[str, str], int]:
    out: dict[str, str] = {}
    converted = 0
    for lineno, rec, _ in _iter_json_lines(path):
        where = f"{path}:{lineno}"
        raw = rec.get("_id", rec.get("id"))
        tid, _, _, conv = normalise_task_id(raw, where)
        converted += conv
        text = _text(rec.get("text"), where, "text", nonempty=True)
        if tid in out:
            raise DataError(f"{where}: field '_id': duplicate query id '{tid}'")
        out[tid] = text
    return out, converted


def load_beir_queries(path: str | Path) -> dict[str, str]:
    """BEIR queries (one ``{"_id", "text"}`` a line) -> task id (normalised to ``<::>``) -> text.
    The text is kept as shipped (MTRAG prefixes every user turn with ``|user|: ``; see
    ``strip_speaker_tags``)."""
    return _read_queries(Path(path))[0]


def read_task_qrels(path: str | Path) -> tuple[Qrels, int]:
    """BEIR qrels (``query-id corpus-id score`` with a header; ``read_qrels``) with task ids
    normalised to ``<::>``; returns (qrels, ids converted from ``::``)."""
    raw = read_qrels(path)
    out: Qrels = {}
    converted = 0
    for qid, docs in raw.items():
        tid, _, _, conv = normalise_task_id(qid, f"{path}: query-id '{qid}'")
        converted += conv
        for d, r in docs.items():
            if out.setdefault(tid, {}).get(d, r) != r:
                raise DataError(f"{path}: task '{tid}' gives doc '{d}' two relevance values (under two id spellings)")
            out[tid][d] = r
    return out, converted


def strip_speaker_tags(text: str) -> str:
    """Drop the ``|user|: `` that starts each line of an MTRAG query."""
    return "\n".join(line[len(SPEAKER_TAG):] if line.startswith(SPEAKER_TAG) else line for line in text.split("\n"))


def queries_from_task(task: TurnTask) -> dict[str, str]:
    """The MTRAG query kinds of a TurnTask, written as MTRAG's query files write them
    (``|user|: <text>``, one user turn a line): ``lastturn`` (the question), ``questions`` (every
    user turn so far) and ``rewrite`` when the task has one. MTRAG-UN ships no query files; this
    gives its tasks the same query kinds."""
    users = [h["text"] for h in task.history if h["role"] == "user"] + [task.question]
    out = {"lastturn": SPEAKER_TAG + task.question, "questions": "\n".join(SPEAKER_TAG + u for u in users)}
    if task.rewrite:
        out["rewrite"] = SPEAKER_TAG + task.rewrite
    return out


@dataclass
class RetrievalTask:
    """One MTRAG retrieval task: its query of each kind and its graded qrels."""

    task_id: str
    benchmark: str
    conversation_id: str
    turn: int
    domain: str
    queries: dict[str, str]
    gold_docs: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_retrieval_tasks(queries_paths: Mapping[str, str | Path], qrels_path: str | Path | None, domain: str,
                         benchmark: str, *, strict: bool = True, strip_tags: bool = False
                         ) -> tuple[dict[str, RetrievalTask], dict[str, Any]]:
    """MTRAG's BEIR retrieval tasks of one domain: ``queries_paths`` maps a query kind
    (``QUERY_KINDS``: lastturn / rewrite / questions) to its file; every file must list the same
    task ids. Returns (task id -> RetrievalTask, in the first file's order; report).

    ``qrels_path`` (or None) gives ``gold_docs``; a qrels task id with no query is a DataError
    when ``strict``, else counted and listed in the report. Tasks without qrels are kept (empty
    ``gold_docs``) and counted: the official scorer skips them. ``strip_tags`` removes the
    ``|user|: `` line prefixes from the queries.
    """
    unknown = sorted(set(queries_paths) - set(QUERY_KINDS))
    if unknown or not queries_paths:
        raise ConfigError(f"load_retrieval_tasks: query kinds must be among {', '.join(QUERY_KINDS)}, got "
                          f"{sorted(queries_paths)}")
    dom = DOMAINS.get(domain, domain)
    per_kind: dict[str, dict[str, str]] = {}
    converted = 0
    first_kind = next(iter(queries_paths))
    for kind, p in queries_paths.items():
        per_kind[kind], n = _read_queries(Path(p))
        converted += n
        ref, ids = per_kind[first_kind], per_kind[kind]
        missing = [t for t in ref if t not in ids]
        extra = [t for t in ids if t not in ref]
        if missing or extra:
            what = f"lacks task '{missing[0]}'" if missing else f"has task '{extra[0]}'"
            raise DataError(f"{p}: query file ({kind}) {what}, unlike {queries_paths[first_kind]} ({first_kind}); "
                            f"{len(missing)} missing, {len(extra)} extra")
    tasks: dict[str, RetrievalTask] = {}
    for tid in per_kind[first_kind]:
        conv, _, turn = tid.rpartition(ID_SEP)
        qs = {k: (strip_speaker_tags(v[tid]) if strip_tags else v[tid]) for k, v in per_kind.items()}
        tasks[tid] = RetrievalTask(tid, benchmark, conv, int(turn), dom, qs)
    qrels, qconv = ({}, 0) if qrels_path is None else read_task_qrels(qrels_path)
    unknown_ids = sorted(q for q in qrels if q not in tasks)
    if unknown_ids and strict:
        raise DataError(f"{qrels_path}: query-id '{unknown_ids[0]}' has no query in "
                        f"{queries_paths[first_kind]} ({len(unknown_ids)} unknown task ids)")
    for tid, docs in qrels.items():
        if tid in tasks:
            tasks[tid].gold_docs = dict(docs)
    report = {
        "domain": dom,
        "tasks": len(tasks),
        "queries": {k: len(v) for k, v in per_kind.items()},
        "qrels_rows": sum(len(d) for d in qrels.values()),
        "qrels_tasks": len(qrels),
        "tasks_with_gold": sum(bool(t.gold_docs) for t in tasks.values()),
        "tasks_without_gold": sum(not t.gold_docs for t in tasks.values()),
        "unknown_qrels_ids": len(unknown_ids),
        "unknown_qrels_ids_list": unknown_ids,
        "ids_normalised": converted + qconv,
    }
    return tasks, report


def attach_qrels(tasks: Iterable[TurnTask], qrels_paths: Mapping[str, str | Path], *, strict: bool = True
                 ) -> tuple[list[TurnTask], dict[str, Any]]:
    """Set ``gold_docs`` of generation TurnTasks from per-domain qrels files (domain -> path).

    A qrels task id that is not among ``tasks`` is a DataError when ``strict`` (else counted and
    listed); a qrels file of one domain naming a task of another domain is always an error. Tasks
    without qrels keep empty ``gold_docs`` (MTRAG-UN's qrels cover only ANSWERABLE and PARTIAL
    turns) and are counted per answerability. Returns new TurnTasks (the inputs are not changed).
    """
    tasks = list(tasks)
    by_id = {t.task_id: t for t in tasks}
    gold: dict[str, dict[str, int]] = {}
    rows = converted = 0
    per_file: dict[str, int] = {}
    unknown: list[str] = []
    for dom, p in qrels_paths.items():
        short = DOMAINS.get(dom, dom)
        qrels, n = read_task_qrels(p)
        converted += n
        per_file[str(dom)] = sum(len(d) for d in qrels.values())
        for tid in sorted(qrels):
            t = by_id.get(tid)
            if t is None:
                if strict:
                    raise DataError(f"{p}: query-id '{tid}' is not a task of the task file "
                                    f"({sum(q not in by_id for q in qrels)} unknown ids in this file)")
                unknown.append(tid)
                continue
            if t.labels.get("domain") not in (None, short):
                raise DataError(f"{p}: query-id '{tid}' is a {t.labels.get('domain')} task, but this is the "
                                f"{short} qrels file")
            if tid in gold:
                raise DataError(f"{p}: query-id '{tid}' also has qrels in another file")
            gold[tid] = dict(qrels[tid])
            rows += len(qrels[tid])
    out = [replace(t, gold_docs=gold[t.task_id]) if t.task_id in gold else t for t in tasks]
    report = {
        "qrels_rows": rows,
        "qrels_rows_per_file": per_file,
        "tasks_with_gold": len(gold),
        "tasks_without_gold": len(out) - len(gold),
        "with_gold_by_answerability": _counts(t.labels.get("answerability") for t in out if t.task_id in gold),
        "without_gold_by_answerability": _counts(t.labels.get("answerability") for t in out if t.task_id not in gold),
        "unknown_qrels_ids": len(unknown),
        "unknown_qrels_ids_list": unknown,
        "ids_normalised": converted,
    }
    return out, report


# ---- 3. passage corpora -------------------------------------------------------------------


def _corpus_lines(path: Path) -> Iterator[tuple[Iterable[str] | None, str, Any]]:
    """Yield (lines, label for errors, an opener of the raw bytes) of a ``.zip`` holding one jsonl,
    or (None: read ``path`` itself, label, None) of a plain ``.jsonl``."""
    if path.suffix != ".zip":
        yield None, str(path), None
        return
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    except zipfile.BadZipFile as e:
        raise DataError(f"{path}: not a zip file ({e})") from e
    with zf:
        members = [n for n in zf.namelist() if n.endswith(".jsonl") and not n.startswith("__MACOSX/")]
        if len(members) != 1:
            raise DataError(f"{path}: the zip must hold exactly one .jsonl file, found {len(members)} "
                            f"({', '.join(members[:5])})")
        with zf.open(members[0]) as raw:
            yield io.TextIOWrapper(raw, encoding="utf-8"), f"{path}[{members[0]}]", lambda: zf.open(members[0])


def iter_passage_corpus(path: str | Path, domain: str, empty: EmptyPassages | None = None) -> Iterator[Passage]:
    """Stream the passages of an MTRAG passage-level corpus (``<domain>.jsonl`` or
    ``<domain>.jsonl.zip`` holding one jsonl): one ``{"_id" (or "id"), "title", "text", "url"}``
    a line -> ``Passage(doc_id=_id, title, text, source=domain)`` (the url is not kept; a missing
    title is ""). A missing id or text, an ``_id`` and ``id`` that disagree, or a repeated id is a
    DataError naming the file and line; so is an empty text, unless ``empty`` (the benchmark's
    ``empty_passages: drop``) leaves it out and counts it. One line is parsed at a time."""
    path = Path(path)
    empty = empty or EmptyPassages()
    source = DOMAINS.get(domain, domain)
    seen: set[str] = set()
    for lines, label, open_binary in _corpus_lines(path):
        for lineno, rec, _ in _iter_json_lines(path, lines, where=label, open_binary=open_binary):
            where = f"{label}:{lineno}"
            ids = [rec[k] for k in ("_id", "id") if not _is_missing(rec.get(k))]
            ids = [str(i) if isinstance(i, int) and not isinstance(i, bool) else i for i in ids]
            if not ids or not isinstance(ids[0], str) or not ids[0]:
                raise DataError(f"{where}: field '_id' is missing (nor is there an 'id')")
            if len(ids) == 2 and ids[0] != ids[1]:
                raise DataError(f"{where}: fields '_id' {ids[0]!r} and 'id' {ids[1]!r} disagree")
            doc_id = ids[0]
            if doc_id in seen:
                raise DataError(f"{where}: field '_id': duplicate passage id '{doc_id}'")
            seen.add(doc_id)
            if _is_missing(rec.get("text")):
                raise DataError(f"{where}: field 'text' is missing (passage '{doc_id}')")
            text = _text(rec["text"], where, "text")
            title = rec.get("title")
            title = "" if _is_missing(title) else _text(title, where, "title")
            if empty.keep(text, where, doc_id):
                yield Passage(doc_id=doc_id, title=title, text=text, source=source)


def load_passage_corpus(path: str | Path, domain: str, empty: EmptyPassages | None = None) -> list[Passage]:
    """Every passage of one domain's corpus (``iter_passage_corpus``)."""
    return list(iter_passage_corpus(path, domain, empty))


def benchmark_passages(path: str | Path, domain: str, benchmark: str, spec: dict) -> tuple[list[Passage], dict]:
    """One domain's corpus of an MTRAG-type benchmark (config ``benchmarks.<benchmark>``: ``spec``)
    and the counts of the empty passages its ``empty_passages: drop`` left out."""
    empty = EmptyPassages(spec.get("empty_passages"), f"benchmarks.{benchmark}.empty_passages")
    return load_passage_corpus(path, domain, empty), empty.report()


# ---- 4. gold passages in the corpus -------------------------------------------------------


# ---- 6. MTRAG's annotated conversations ---------------------------------------------------


def _index_rows(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8", newline="") as fh, utf8_errors(path):
            rows = list(csv.DictReader(fh, delimiter="\t"))
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    need = {"index_in_conversations_json_0based", "conversation_id"}
    if not rows or not need <= set(rows[0]):
        raise DataError(f"{path}: needs a header with columns {', '.join(sorted(need))}")
    for i, r in enumerate(rows, start=2):
        if not (r["index_in_conversations_json_0based"] or "").isdigit() or not r["conversation_id"]:
            raise DataError(f"{path}:{i}: bad index or conversation_id")
    return sorted(rows, key=lambda r: int(r["index_in_conversations_json_0based"]))


def _fingerprint(conv: dict) -> tuple[str, str, str]:
    n_user = sum(m.get("speaker") == "user" for m in conv.get("messages") or [] if isinstance(m, dict))
    dom = conv.get("domain")
    return (str(DOMAINS.get(dom, dom) if isinstance(dom, str) else dom), str(conv.get("author")), str(n_user))


def _conversation_ids(convs: list, path: Path, tsv: Path | None, stats: Counter) -> list[str]:
    """Conversation ids: the file has none. Without a tsv: ``index-<i>`` (the position). With
    ``conversation_index_to_id.tsv``: by position when the file holds every conversation; else
    (a sample that keeps the original order) each conversation takes the next row, in index
    order, whose domain, author and number of user turns match it."""
    if tsv is None:
        stats["ids_by_position"] = len(convs)
        return [f"index-{i}" for i in range(len(convs))]
    rows = _index_rows(tsv)
    checkable = {"domain", "author", "n_user_turns"} <= set(rows[0])
    fp = (lambda r: (DOMAINS.get(r["domain"], r["domain"]), r["author"], r["n_user_turns"])) if checkable else None
    if len(rows) == len(convs):
        for i, (c, r) in enumerate(zip(convs, rows)):
            if fp and fp(r) != _fingerprint(c):
                raise DataError(f"{path}: conversation {i}: domain/author/user turns {_fingerprint(c)} differ from "
                                f"{tsv} row for index {i} {fp(r)}")
        stats["ids_by_position"] = len(convs)
        return [r["conversation_id"] for r in rows]
    if not fp:
        raise DataError(f"{tsv}: has {len(rows)} rows but {path} has {len(convs)} conversations, and no domain/author/"
                        "n_user_turns columns to match them by")
    out, j = [], 0
    for i, c in enumerate(convs):
        key = _fingerprint(c)
        while j < len(rows) and fp(rows[j]) != key:
            j += 1
        if j == len(rows):
            raise DataError(f"{path}: conversation {i} {key} matches no row of {tsv} after the previous "
                            "conversation's (the sample must keep the original order)")
        out.append(rows[j]["conversation_id"])
        j += 1
    stats["ids_by_matching"] = len(convs)
    return out


def conversation_ids_from_queries(convs: list, path: Path, questions: Mapping[str, str | Path],
                                  positions: list[int] | None = None) -> list[str]:
    """The id of every conversation of ``conversations.json`` (which has none) from files that
    IBM's repository ships: the retrieval tasks' ``<domain>_questions.jsonl`` (domain -> path) list,
    per task ``<conversation id><::><turn>``, every user turn so far. A conversation takes the id
    whose longest question list is a prefix of its own user turns, in its domain; none or several
    is a DataError naming the conversation (a conversation with no retrieval task has no id), by its
    place in the file (``positions``: of each of ``convs``, when they are a selection)."""
    known: dict[str, dict[str, list[str]]] = {}  # domain -> conversation id -> user turns
    for dom, p in questions.items():
        d = DOMAINS.get(dom, dom)
        for tid, text in load_beir_queries(p).items():
            conv, _, turn = tid.rpartition(ID_SEP)
            turns = strip_speaker_tags(text).split("\n")
            if len(turns) > len(known.setdefault(d, {}).get(conv, [])):
                known[d][conv] = turns
    out = []
    for i, c in zip(positions if positions is not None else range(len(convs)), convs):
        dom = domain_of(c.get("domain"), f"{path}: conversation {i}", "domain")
        users = [m.get("text") for m in c["messages"] if m.get("speaker") == "user"]
        hits = [cid for cid, turns in known.get(dom, {}).items() if users[:len(turns)] == turns]
        if len(hits) != 1:
            what = "matches no retrieval task" if not hits else f"matches {len(hits)} conversations ({', '.join(hits[:3])})"
            raise DataError(f"{path}: conversation {i} ({dom}, first user turn {str(users[:1])[:80]}) {what} of the "
                            f"questions files ({', '.join(str(p) for p in questions.values())})")
        out.append(hits[0])
    return out


def _relevant(ctx: dict, editor: Any, author: Any) -> bool | None:
    """The editor's judgment of a shown passage, else the author's (None: no judgment)."""
    rel = ((ctx.get("feedback") or {}).get("relevant") or {})
    for who in (editor, author):
        if isinstance(who, str) and isinstance(rel.get(who), dict):
            return rel[who].get("value") == "yes"
    return None


def load_conversations(path: str | Path, index_to_id_tsv: str | Path | None = None, *, benchmark: str = "mtrag",
                       contexts: str = "relevant", questions: Mapping[str, str | Path] | None = None,
                       domains: Iterable[str] | None = None) -> tuple[list[TurnTask], dict[str, Any]]:
    """MTRAG's ``conversations.json`` (a JSON array of annotated conversations) -> one TurnTask per
    user turn that an agent turn follows.

    Turn ``t`` is the ``t``-th user message; ``history``: the messages before it (the agents'
    final, repaired ``text``); ``reference_answers``: the following agent message's text;
    ``gold_docs``: the passages shown with that agent message that the conversation's ``editor``
    judged relevant ("yes"), or, where the editor gave no judgment, its ``author`` did (relevance
    1); ``contexts``: those relevant passages (``contexts="relevant"``, as the reference
    generation tasks give them) or every passage shown (``"shown"``). Labels come from the user
    message's ``enrichments`` (Answerability, Question Type, Multi-Turn, Standalone Type,
    Validity); the domain from the conversation's ``domain`` (a collection name). Ids: from the
    retrieval tasks' questions files IBM ships (``questions``: domain -> path;
    ``conversation_ids_from_queries``), else from a ``conversation_index_to_id.tsv`` (a file of a
    fork, not of IBM's repository; ``_conversation_ids``), else the position. ``domains`` keeps the
    conversations of those domains only (all: None); it is applied before the ids are matched to
    ``questions``, which then needs those domains' files only (a conversation's id is looked up in
    its own domain's file), and after the ids are read from a tsv (which is by position).
    """
    if contexts not in ("relevant", "shown"):
        raise ConfigError(f"load_conversations: contexts must be 'relevant' or 'shown', got {contexts!r}")
    path = Path(path)
    data, nans = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of conversations")
    stats: Counter = Counter(nan_values=nans)
    for i, c in enumerate(data):
        if not isinstance(c, dict) or not isinstance(c.get("messages"), list):
            raise DataError(f"{path}: conversation {i}: field 'messages' must be a list")
        for j, m in enumerate(c["messages"]):  # before the ids: matching by user turns counts speakers
            if not isinstance(m, dict) or m.get("speaker") not in ("user", "agent"):
                got = m.get("speaker", "(missing)") if isinstance(m, dict) else type(m).__name__
                raise DataError(f"{path}: conversation {i}, message {j}: field 'speaker' must be user or agent, "
                                f"got {got!r}")
    keep = None if domains is None else set(domains)
    index = list(range(len(data)))
    if keep is not None:
        index = [i for i, c in enumerate(data) if domain_of(c.get("domain"), f"{path}: conversation {i}", "domain")
                 in keep]
        stats["conversations_other_domains"] = len(data) - len(index)
    if questions:
        ids = conversation_ids_from_queries([data[i] for i in index], path, questions, positions=index)
        stats["ids_from_queries"] = len(ids)
    else:
        ids = _conversation_ids(data, path, Path(index_to_id_tsv) if index_to_id_tsv else None, stats)
        ids = [ids[i] for i in index]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: two conversations got the same id '{Counter(ids).most_common(1)[0][0]}'")
    tasks: list[TurnTask] = []
    for i, conv, cid in zip(index, (data[i] for i in index), ids):
        cw = f"{path}: conversation {i} ({cid})"
        domain = domain_of(conv.get("domain"), cw, "domain")
        msgs = conv["messages"]
        history: list[dict] = []
        turn = 0
        for j, m in enumerate(msgs):
            w = f"{cw}, message {j}"
            if not isinstance(m, dict) or m.get("speaker") not in ("user", "agent"):
                raise DataError(f"{w}: field 'speaker' must be user or agent")
            text = _text(m.get("text"), w, "text")
            if m["speaker"] == "agent":
                history.append({"role": "assistant", "text": text})
                continue
            turn += 1
            stats["user_turns"] += 1
            stats["alternatives"] += bool(m.get("alternatives"))
            nxt = msgs[j + 1] if j + 1 < len(msgs) else None
            if not isinstance(nxt, dict) or nxt.get("speaker") != "agent":
                stats["user_turns_without_answer"] += 1
                history.append({"role": "user", "text": text})
                continue
            if not text.strip():
                raise DataError(f"{w}: field 'text' of a user turn is empty")
            aw = f"{cw}, message {j + 1}"
            shown = nxt.get("contexts") or []
            ctx = _contexts(shown, aw)
            rel = [_relevant(c, conv.get("editor"), conv.get("author")) for c in shown]
            stats["contexts_shown"] += len(ctx)
            stats["contexts_relevant"] += sum(r is True for r in rel)
            stats["contexts_rejected"] += sum(r is False for r in rel)
            stats["contexts_unjudged"] += sum(r is None for r in rel)
            gold = {c["doc_id"]: 1 for c, r in zip(ctx, rel) if r}
            e = m.get("enrichments") or {}
            ans_key = "Answerability" if "Answerability" in e else "answerability"
            labels = {
                "answerability": _one(e.get(ans_key), w, f"enrichments.{ans_key}", ANSWERABILITY["mtrag"]),
                "question_type": _many(e.get("Question Type"), w, "enrichments.Question Type"),
                "multi_turn": _one(e.get("Multi-Turn"), w, "enrichments.Multi-Turn", MULTI_TURN),
                "domain": domain,
                "collection": conv["domain"],
                "first_turn": turn == 1,
                "standalone": _standalone(e.get("Standalone Type"), w, "enrichments.Standalone Type"),
            }
            if "Validity" in e:
                labels["validity"] = _one(e["Validity"], w, "enrichments.Validity", None)
            tid = f"{cid}{ID_SEP}{turn}"
            d = {"task_id": tid, "benchmark": benchmark, "conversation_id": cid, "turn": turn,
                 "history": list(history), "question": text,
                 "reference_answers": [_text(nxt.get("text"), aw, "text")], "gold_docs": gold,
                 "contexts": [c for c, r in zip(ctx, rel) if r] if contexts == "relevant" else ctx, "labels": labels}
            tasks.append(TurnTask.from_dict(d, where=f"{w} (task {tid})"))
            history.append({"role": "user", "text": text})
    report = {**_task_report(path, tasks, stats), "conversations": len(index),
              **{k: stats[k] for k in ("user_turns", "user_turns_without_answer", "alternatives", "contexts_shown",
                                       "contexts_relevant", "contexts_rejected", "contexts_unjudged",
                                       "ids_by_position", "ids_by_matching", "ids_from_queries")},
              **({"conversations_other_domains": stats["conversations_other_domains"]} if keep is not None else {}),
              "tasks_with_gold": sum(bool(t.gold_docs) for t in tasks)}
    del report["ignored_fields"]
    return tasks, report


# ---- 6b. the human-evaluation file --------------------------------------------------------


@dataclass
class HumanEvaluation:
    """One system's response to one task of MTRAG's human-evaluation file: the response, the
    official per-task metric values (``OFFICIAL_METRICS``; None where the file has NaN) and the
    human judgments (judgment name -> annotator -> numeric value: 1-4 for the categorical
    judgments, via the file's metric definitions; win-rate as given)."""

    task_id: str
    system: str
    prediction: str
    metrics: dict[str, float | None]
    human: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HumanEvaluations:
    """The whole file: ``evaluations[(task id, system)]``, the tasks (TurnTasks: contexts resolved
    from ``documents``, ``gold_docs`` from each task's ``context_relevance`` indices), the
    documents (doc id -> Passage), the systems, the metric definitions and a report."""

    evaluations: dict[tuple[str, str], HumanEvaluation]
    tasks: dict[str, TurnTask]
    documents: dict[str, Passage]
    systems: list[str]
    metrics: list[dict]
    report: dict[str, Any]


def _value(ann: Any, where: str, key: str) -> float | None:
    """``{"system": {"value": x}}`` or ``{"composite": {"value": x}}`` -> x."""
    if not isinstance(ann, dict) or len(ann) != 1:
        raise DataError(f"{where}: field 'annotations.{key}' must hold one {{'system'|'composite': {{value}}}}")
    inner = next(iter(ann.values()))
    if not isinstance(inner, dict) or "value" not in inner:
        raise DataError(f"{where}: field 'annotations.{key}' has no value")
    v = inner["value"]
    if _is_missing(v):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DataError(f"{where}: field 'annotations.{key}' value {v!r} is not a number")
    return float(v)


def load_human_evaluations(path: str | Path, *, benchmark: str = "mtrag") -> HumanEvaluations:
    """MTRAG's ``reference_subset_with_human_evaluations.json`` (InspectorRAGet format: name,
    filters, models, metrics, documents, tasks, evaluations). Every evaluation must name a known
    task and model, carry every official metric, and appear once per (task, system)."""
    path = Path(path)
    data, nans = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object")
    for key in ("models", "metrics", "documents", "tasks", "evaluations"):
        if not isinstance(data.get(key), list):
            raise DataError(f"{path}: field '{key}' must be a list")
    documents: dict[str, Passage] = {}
    for i, d in enumerate(data["documents"]):
        w = f"{path}: documents[{i}]"
        if not isinstance(d, dict) or not isinstance(d.get("document_id"), str):
            raise DataError(f"{w}: field 'document_id' is missing")
        if d["document_id"] in documents:
            raise DataError(f"{w}: duplicate document_id '{d['document_id']}'")
        title = d.get("title")
        documents[d["document_id"]] = Passage(d["document_id"], "" if _is_missing(title) else _text(title, w, "title"),
                                              _text(d.get("text"), w, "text"))
    systems = [m.get("model_id") for m in data["models"] if isinstance(m, dict)]
    if len(systems) != len(data["models"]) or not all(isinstance(s, str) for s in systems):
        raise DataError(f"{path}: field 'models' entries need a string 'model_id'")
    scales = {}
    human_names = []
    for m in data["metrics"]:
        if isinstance(m, dict) and m.get("author") == "human":
            human_names.append(m["name"])
            if m.get("type") == "categorical":
                scales[m["name"]] = {str(v["value"]): float(v["numeric_value"]) for v in m.get("values", [])}
    stats: Counter = Counter(nan_values=nans)
    tasks: dict[str, TurnTask] = {}
    for i, rec in enumerate(data["tasks"]):
        w = f"{path}: tasks[{i}]"
        if not isinstance(rec, dict):
            raise DataError(f"{w}: expected an object")
        task = _build_task(rec, w, benchmark, "mtrag", stats, resolve=documents)
        rel = ((rec.get("annotations") or {}).get("context_relevance") or {}).get("system", [])
        if not isinstance(rel, list) or not all(isinstance(k, int) and 0 <= k < len(task.contexts) for k in rel):
            raise DataError(f"{w}: field 'annotations.context_relevance' must list indices into 'contexts'")
        task = replace(task, gold_docs={task.contexts[k]["doc_id"]: 1 for k in rel})
        if task.task_id in tasks:
            raise DataError(f"{w}: field 'task_id': duplicate task id '{task.task_id}'")
        tasks[task.task_id] = task
    evaluations: dict[tuple[str, str], HumanEvaluation] = {}
    for i, ev in enumerate(data["evaluations"]):
        w = f"{path}: evaluations[{i}]"
        if not isinstance(ev, dict):
            raise DataError(f"{w}: expected an object")
        tid, _, _, conv = normalise_task_id(ev.get("task_id"), w)
        stats["ids_normalised"] += conv
        if tid not in tasks:
            raise DataError(f"{w}: field 'task_id' '{tid}' is not among the file's tasks")
        system = ev.get("model_id")
        if system not in systems:
            raise DataError(f"{w}: field 'model_id' {system!r} is not among the file's models")
        if (tid, system) in evaluations:
            raise DataError(f"{w}: a second evaluation of task '{tid}' by '{system}'")
        ann = ev.get("annotations")
        if not isinstance(ann, dict):
            raise DataError(f"{w}: field 'annotations' must be an object")
        metrics = {}
        for k in OFFICIAL_METRICS:
            if k not in ann:
                raise DataError(f"{w}: field 'annotations.{k}' is missing (task '{tid}', system '{system}')")
            metrics[k] = _value(ann[k], w, k)
        human: dict[str, dict[str, float]] = {}
        for k in human_names:
            for annotator, a in (ann.get(k) or {}).items():
                v = a.get("value") if isinstance(a, dict) else None
                if k in scales:
                    if str(v) not in scales[k]:
                        raise DataError(f"{w}: field 'annotations.{k}.{annotator}' value {v!r} is not on the scale "
                                        f"{sorted(scales[k])}")
                    v = scales[k][str(v)]
                elif _is_missing(v) or isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise DataError(f"{w}: field 'annotations.{k}.{annotator}' value {v!r} is not a number")
                human.setdefault(k, {})[str(annotator)] = float(v)
                stats["human_judgments"] += 1
        evaluations[(tid, system)] = HumanEvaluation(tid, system, _text(ev.get("model_response"), w, "model_response"),
                                                     metrics, human)
    report = {
        **{k: v for k, v in _task_report(path, list(tasks.values()), stats).items() if k != "ignored_fields"},
        "documents": len(documents),
        "systems": systems,
        "evaluations": len(evaluations),
        "evaluations_per_system": _counts(s for _, s in evaluations),
        "human_judgments": stats["human_judgments"],
        "missing_metric_values": sum(v is None for e in evaluations.values() for v in e.metrics.values()),
    }
    return HumanEvaluations(evaluations, tasks, documents, systems, list(data["metrics"]), report)
