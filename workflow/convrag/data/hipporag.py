"""Loader for the HippoRAG-format multi-hop sets (MuSiQue, 2WikiMultiHopQA, HotpotQA).

HippoRAG ships each set as a question file in the source benchmark's own schema plus a
shared retrieval corpus (a list of ``{title, text}``, or in HippoRAG v1's HotpotQA a dict
title -> sentences). Everything downstream reads only Passage / Question records, so this
module maps both halves onto them and ties every supporting fact to a corpus passage:

- doc ids are ``<dataset>/<index in the corpus file>`` (dict corpus: key order), stable
  across runs and independent of which questions are later sampled;
- MuSiQue titles are not unique, so its supporting paragraphs are matched by
  (title, text); 2Wiki / HotpotQA supporting facts name only a title, matched by title
  (and, if a title repeats, by the question's own context text);
- a supporting passage missing from the corpus is an error, not a silent drop, because a
  question without its gold passages would bias every retrieval metric.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from convrag.data.empty_passages import EmptyPassages
from convrag.errors import ConfigError, DataError
from convrag.io import iter_jsonl, json_error, read_text
from convrag.records import Passage, Question, write_records

FORMATS = ("musique", "2wikimultihopqa", "hotpotqa")
_HOPS = re.compile(r"^(\d+)hop")


def _read(path: Path) -> tuple[Any, list[int] | None]:
    """JSON (a list or dict) or JSONL (one object per line); returns (data, line numbers).

    A ``.json`` file that holds one object per line is read as JSONL too, so both spellings
    of the same data work; every parse error names the file and line.
    """
    if path.suffix == ".jsonl":
        rows = list(iter_jsonl(path))
        return [r for _, r in rows], [n for n, _ in rows]
    text = read_text(path)  # a missing file, or bytes that are not UTF-8: DataError naming file and line
    try:
        data = json.loads(text)
        return data, _array_lines(text) if isinstance(data, list) else None
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and text.lstrip().startswith("{"):
            rows = list(iter_jsonl(path))
            return [r for _, r in rows], [n for n, _ in rows]
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({json_error(e)})") from e


def _array_lines(text: str) -> list[int]:
    """The line on which each element of a top-level JSON array starts, so that an error names its
    line: ``json`` keeps no positions, so the (already parsed) array is walked once more with
    ``raw_decode``, counting newlines from one element to the next."""
    decoder, skip = json.JSONDecoder(), re.compile(r"[\s,]*")
    i = text.index("[") + 1
    lines, line, last = [], 1, 0
    while True:
        i = skip.match(text, i).end()
        if i >= len(text) or text[i] == "]":
            return lines
        line += text.count("\n", last, i)
        last = i
        lines.append(line)
        _, i = decoder.raw_decode(text, i)


def _where(path: Path, lines: list[int] | None) -> Callable[[int], str]:
    return (lambda i: f"{path}:{lines[i]}") if lines else (lambda i: f"{path}: record {i}")


def _text(value: Any, where: str) -> str:
    """Passage text; a list of sentences is joined with '' because HotpotQA sentences
    already carry their leading space (joining with ' ' would double it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return "".join(value)
    raise DataError(f"{where}: passage text must be a string or a list of sentences")


def _passages(data: Any, lines: list[int] | None, dataset: str, path: Path, empty: EmptyPassages) -> list[Passage]:
    where = _where(path, lines)
    if isinstance(data, dict):
        items = [(t, v, f"{path}: title {t!r}") for t, v in data.items()]
    elif isinstance(data, list):
        items = []
        for i, rec in enumerate(data):
            if not isinstance(rec, dict) or not isinstance(rec.get("title"), str) or "text" not in rec:
                raise DataError(f"{where(i)}: corpus entry needs a string 'title' and a 'text'")
            items.append((rec["title"], rec["text"], where(i)))
    else:
        raise DataError(f"{path}: corpus must be a JSON list of {{title, text}} or a dict title -> text")
    out = []
    for i, (t, v, w) in enumerate(items):  # a dropped passage keeps its number: the ids do not shift
        text = _text(v, w)
        if empty.keep(text, w, f"{dataset}/{i}"):
            out.append(Passage(doc_id=f"{dataset}/{i}", title=t, text=text, source=dataset))
    return out


class _Index:
    """Corpus look-ups: by (title, text) for MuSiQue, by title for 2Wiki / HotpotQA."""

    def __init__(self, passages: list[Passage]):
        self.by_key: dict[tuple[str, str], str] = {}
        self.by_title: dict[str, list[str]] = defaultdict(list)
        for p in passages:
            self.by_key.setdefault((p.title, p.text.strip()), p.doc_id)
            self.by_title[p.title].append(p.doc_id)


def _answers(rec: dict, where: str) -> list[str]:
    ans = rec.get("answer")
    first = ans if isinstance(ans, list) else [ans]
    aliases = rec.get("answer_aliases") or rec.get("aliases") or []
    out = [str(a) for a in [*first, *aliases] if a is not None and str(a) != ""]
    if not out:
        raise DataError(f"{where}: question has no answer")
    return list(dict.fromkeys(out))


def _field(rec: dict, key: str, where: str) -> Any:
    if key not in rec:
        raise DataError(f"{where}: question record lacks field '{key}'")
    return rec[key]


def _missing(qpath: Path, cpath: Path, qid: str, title: str) -> DataError:
    return DataError(f"{qpath}: question {qid}: supporting passage '{title}' not found in corpus {cpath}")


def _musique(rec: dict, where: str, idx: _Index, qpath: Path, cpath: Path) -> dict:
    qid = str(_field(rec, "id", where))
    paras = {p.get("idx", i): p for i, p in enumerate(_field(rec, "paragraphs", where))}
    supporting = [k for k, p in paras.items() if p.get("is_supporting")]
    decomp = rec.get("question_decomposition") or []
    # Hop order comes from the decomposition when it covers exactly the supporting paragraphs.
    order = [d.get("paragraph_support_idx") for d in decomp]
    if not order or sorted(set(order), key=str) != sorted(set(supporting), key=str):
        order = supporting
    doc_ids = []
    for k in dict.fromkeys(order):
        p = paras[k]
        key = (p.get("title", ""), str(p.get("paragraph_text", "")).strip())
        if key not in idx.by_key:
            raise _missing(qpath, cpath, qid, key[0])
        doc_ids.append(idx.by_key[key])
    m = _HOPS.match(qid)
    return {
        "qid": qid,
        "question": _field(rec, "question", where),
        "answers": _answers(rec, where),
        "supporting_doc_ids": doc_ids,
        "hops": int(m.group(1)) if m else max(1, len(doc_ids)),
        "type": qid.split("__")[0] if m else "",
        "decomposition": [d["question"] for d in decomp if d.get("question")],
        # answers of the decomposition steps before the last: a shard must not reveal them
        "intermediate_answers": [str(d["answer"]) for d in decomp[:-1] if d.get("answer")],
    }


def _wiki(rec: dict, where: str, idx: _Index, qpath: Path, cpath: Path) -> dict:
    """2WikiMultiHopQA and HotpotQA share this schema (supporting_facts = [title, sent_idx])."""
    qid = str(rec["_id"] if "_id" in rec else _field(rec, "id", where))
    facts = _field(rec, "supporting_facts", where)
    titles = list(dict.fromkeys(f[0] for f in facts))
    if not titles:
        raise DataError(f"{where}: question {qid} has no supporting facts")
    context = {c[0]: c[1] for c in rec.get("context") or [] if len(c) == 2}
    doc_ids = []
    for t in titles:
        cands = idx.by_title.get(t, [])
        if len(cands) > 1:  # a repeated title: disambiguate with the question's own context
            sents = context.get(t) or []
            hits = [idx.by_key.get((t, j.join(sents).strip())) for j in ("", " ")]
            cands = [h for h in dict.fromkeys(hits) if h]
            if len(cands) != 1:
                raise DataError(f"{qpath}: question {qid}: supporting title '{t}' is ambiguous in corpus {cpath}")
        if not cands:
            raise _missing(qpath, cpath, qid, t)
        doc_ids.append(cands[0])
    question = _field(rec, "question", where)
    answers = _answers(rec, where)
    return {
        "qid": qid,
        "question": question,
        "answers": answers,
        "supporting_doc_ids": doc_ids,
        "hops": len(titles),
        "type": str(rec.get("type", "")),
        "intermediate_answers": _wiki_intermediates(rec, question, answers, titles),
        "decomposition": _wiki_chain(rec),
    }


def _wiki_chain(rec: dict) -> list[str]:
    """2Wiki evidence triples that form one chain (each object is the next subject: the
    compositional and inference questions) in MuSiQue's step notation ``"A >> relation"``,
    ``"#1 >> relation"``; other shapes (comparisons) have no such decomposition."""
    ev = [t for t in rec.get("evidences") or [] if isinstance(t, list) and len(t) == 3]
    if len(ev) < 2 or any(str(a[2]) != str(b[0]) for a, b in zip(ev, ev[1:])):
        return []
    return [f"{ev[0][0]} >> {ev[0][1]}"] + [f"#{i} >> {t[1]}" for i, t in enumerate(ev[1:], start=1)]


def _wiki_intermediates(rec: dict, question: str, answers: list[str], titles: list[str]) -> list[str]:
    """Bridge values a shard must not reveal: 2Wiki's evidence-triple objects (other than the
    answer), else HotpotQA's supporting titles the question does not name (the bridge entity
    of a bridge question; a comparison question names both of its entities)."""
    low = question.lower()
    gold = {a.lower() for a in answers}
    if rec.get("evidences"):
        cands = [str(t[2]) for t in rec["evidences"] if isinstance(t, list) and len(t) == 3]
    else:
        cands = [re.sub(r"\s*\(.*\)$", "", t) for t in titles]  # "Lilu (mythology)" -> "Lilu"
    return list(dict.fromkeys(c for c in cands if c and c.lower() not in gold and c.lower() not in low))


def load_hipporag(
    questions_path: str | Path, corpus_path: str | Path, dataset: str, format: str | None = None,
    empty: EmptyPassages | None = None,
) -> tuple[list[Question], list[Passage]]:
    """Load a HippoRAG question file and its corpus as (questions, passages).

    ``dataset`` names the records (doc id prefix, ``Question.dataset``); ``format`` (one of
    FORMATS) is checked when given, otherwise detected per record from its fields. A passage with
    empty text is a DataError naming file and line, unless ``empty`` (the corpus's
    ``empty_passages: drop``) leaves it out and counts it.
    """
    qpath, cpath = Path(questions_path), Path(corpus_path)
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown hipporag format '{format}' (known: {', '.join(FORMATS)})")
    passages = _passages(*_read(cpath), dataset=dataset, path=cpath,
                         empty=empty or EmptyPassages(key=f"corpora.{dataset}.empty_passages"))
    idx = _Index(passages)
    data, lines = _read(qpath)
    if not isinstance(data, list):
        raise DataError(f"{qpath}: question file must be a JSON list or JSONL of question objects")
    where = _where(qpath, lines)
    questions, seen = [], set()
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DataError(f"{where(i)}: expected a JSON object, got {type(rec).__name__}")
        kind = "musique" if "paragraphs" in rec else "wiki" if "supporting_facts" in rec else None
        if kind is None or (format is not None and (format == "musique") != (kind == "musique")):
            raise DataError(f"{where(i)}: not a {format or 'HippoRAG'} question record (fields: {sorted(rec)[:8]})")
        d = (_musique if kind == "musique" else _wiki)(rec, where(i), idx, qpath, cpath)
        if d["qid"] in seen:
            raise DataError(f"{where(i)}: duplicate question id {d['qid']}")
        seen.add(d["qid"])
        questions.append(Question.from_dict({"dataset": dataset, **d}, where=f"{where(i)} (question {d['qid']})"))
    return questions, passages


def sample_questions(
    questions: Iterable[Question], n: int, seed: int, stratify_by: str | Callable[[Question], Any] | None = None
) -> list[Question]:
    """A reproducible draw of ``n`` questions.

    Questions are sorted by qid first, so the draw does not depend on input order. Without
    strata the result is a prefix of one seeded permutation, so a larger ``n`` with the same
    seed keeps every question of a smaller draw. ``stratify_by`` (an attribute name such as
    ``"hops"`` or a function) allocates ``n`` proportionally over strata (largest remainder,
    ties to the smaller key) and draws within each stratum; strata come out in key order.
    """
    pool = sorted(questions, key=lambda q: q.qid)
    ids = [q.qid for q in pool]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"sample_questions: duplicate question id {dup}")
    if n < 0 or n > len(pool):
        raise ConfigError(f"cannot sample n={n} questions: {len(pool)} available")
    rng = np.random.default_rng(seed)
    if stratify_by is None:
        return [pool[i] for i in rng.permutation(len(pool))[:n]]
    key = stratify_by if callable(stratify_by) else (lambda q: getattr(q, stratify_by))
    strata: dict[Any, list[Question]] = defaultdict(list)
    for q in pool:
        strata[key(q)].append(q)
    keys = sorted(strata, key=lambda k: (str(type(k)), k))
    quota = {k: n * len(strata[k]) / len(pool) for k in keys}
    alloc = {k: int(quota[k]) for k in keys}
    for k in sorted(keys, key=lambda k: -(quota[k] - alloc[k]))[: n - sum(alloc.values())]:
        alloc[k] += 1
    out = []
    for k in keys:
        members = strata[k]
        out += [members[i] for i in rng.permutation(len(members))[: alloc[k]]]
    return out


def write_dataset(questions: Iterable[Question], passages: Iterable[Passage], out_dir: str | Path) -> None:
    """Write ``questions.jsonl`` and ``corpus.jsonl`` (atomically) into ``out_dir``."""
    out = Path(out_dir)
    write_records(out / "corpus.jsonl", passages)
    write_records(out / "questions.jsonl", questions)
