"""Loader of CORAL (*Benchmarking Multi-turn Conversational Retrieval-Augmented Generation*, Cheng
et al. 2024; data on Hugging Face ``ariya2357/CORAL``): Wikipedia pages turned into conversations
whose golden responses cite passages with ``[passage id]`` markers.

Every record becomes the project's records (``TurnTask``, ``Passage``); every loader returns or
keeps a counted report, so nothing is dropped silently; every malformed record is a ``DataError``
naming the file, the line and the field (for a JSON array: the line where the conversation or turn
object starts).

**Files** (``../shared/data/coral/SOURCE.md``). The v2 release: ``new_<split>_conversation.json``
(a JSON array of ``{conv_id, turns: [{turn_id, question, response, golden_docs_pids}]}``),
``new_<split>_qrel.trec`` (TREC qrels ``<conv_id>_<turn_id> 0 <pid> <rel>``, only turns with gold),
``<split>_rewrite_new.jsonl`` (``{sample_id, rewrite}``, one line per turn) and
``passage_corpus.json``. The v1 files (``<split>_conversation.json``, ``<split>_qrel.tsv``) carry
the rewrite and the passage texts in each turn (``golden_rewrite``, ``golden_docs_text``, per the
CORAL README); both are read. A conversation file may also be JSON Lines (one conversation a
line: the README calls the files "jsonline"); the reader looks at the first character.

**Passage corpus.** No copy of ``passage_corpus.json`` could be inspected here. Third-party
readers treat it as JSON Lines of ``{"ref_id": <int>, "ref_string": "<text>"}``; ``iter_passages``
reads that, a JSON array of the same objects, and the id / text key spellings ``pid``, ``doc_id``,
``_id``, ``id`` / ``text``, ``contents``, ``passage`` (an optional ``title``, else ""). A record
with none of them is an error, so a different layout fails loudly instead of loading empty.

**One TurnTask per turn** (``task_id`` = the benchmark's own sample id ``<conv_id>_<turn_id>``,
the id of its qrels and rewrites):

- ``history``: the earlier turns, each question as a ``user`` turn and its golden response as an
  ``assistant`` turn (citation markers removed, surrounding whitespace stripped);
- ``question``: the turn's question, verbatim;
- ``reference_answers``: ``[the golden response without its [n] markers]`` (stripped; the files
  start every response with a space). The response with its markers is kept verbatim (stripped)
  in ``labels.reference_with_citations`` and the cited ids, in order of first citation, in
  ``labels.cited_passages``: answer metrics compare plain text, citation metrics use the labels.
  An empty response gives no reference (counted);
- ``gold_docs``: the turn's qrels (graded as the file grades them) when a qrels file is given,
  else ``golden_docs_pids`` with relevance 1. Turns without golden passages are common in the
  release (intended, per the maintainers): they get empty ``gold_docs`` and are counted;
- ``rewrite``: the golden rewrite (rewrites file, else the turn's ``golden_rewrite``; stripped),
  None when there is none (counted);
- ``contexts``: the golden passages ``[{doc_id, title, text}]`` in ``golden_docs_pids`` order,
  from the corpus when one is given (streamed once, keeping only the passages needed), else from
  v1's ``golden_docs_text``, else empty (counted);
- ``labels``: ``domain`` ("coral"), ``split`` (test / train, from the id), ``flow`` (the
  conversation-flow sampler: LDS / SIDS / STRW / DTRW) and ``flow_code`` (the id's letter a-d),
  ``turn``, ``first_turn``, ``n_turns``, ``has_gold``, ``reference_with_citations``,
  ``cited_passages``, ``n_citations``. The sampler of a letter is not stated in the release; it is
  inferred: the README's table order LDS, SIDS, STRW, DTRW, type ``a`` conversations have 3-5
  turns (LDS: 3.26 on average), type ``b`` 7-10 (SIDS: 8.64), and type ``d`` conversations switch
  topic midway (DTRW joins two pages).

**Consistency checks** (``strict=True``, the default; with ``strict=False`` each is counted in
the report instead): every ``[n]`` cited in a response is one of that turn's golden passages
(``check_citations``) and, when a corpus is given, a passage of the corpus; the qrels of a turn
(relevance > 0) are exactly its ``golden_docs_pids``; every qrels and rewrite id is a turn of the
conversation file; every golden passage is in the corpus. Turn ids must run 1, 2, ... in order;
conversation ids, rewrite ids, qrels rows and passage ids must be unique (always errors).
A golden passage that the response does not cite is allowed and counted (``gold_not_cited``);
bracketed text that is not a number (``[citation needed]``) is not a citation; it is counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator

from convrag.data.benchmarks import BenchmarkLoader, register_benchmark_loader
from convrag.errors import ConfigError, DataError
from convrag.io import json_error, utf8_errors
from convrag.records import Passage, TurnTask

DOMAIN = "coral"
# conv_id letter -> conversation-flow sampler (inferred, see the module docstring)
FLOWS = {"a": "LDS", "b": "SIDS", "c": "STRW", "d": "DTRW"}
SPLITS = {"test": "test", "train": "train"}
CITATION = re.compile(r"\[(\d+)\]")
_OTHER_BRACKET = re.compile(r"\[(?!\d+\])[^\[\]\n]{1,60}\]")
_CONV_ID = re.compile(r"^(Train|Test)_([A-Za-z])_(\d+)$")
# passage record keys, in order of preference (the first is what third-party readers use)
ID_KEYS = ("ref_id", "pid", "doc_id", "_id", "id")
TEXT_KEYS = ("ref_string", "text", "contents", "passage")
_TURN_FIELDS = {"turn_id", "question", "response", "golden_docs_pids", "golden_rewrite", "golden_docs_text"}
_CONV_FIELDS = {"conv_id", "turns"}
_MISSING = "(missing)"


# ---- citations -----------------------------------------------------------------------------


def cited_ids(text: str) -> list[str]:
    """Every ``[n]`` citation marker of a response, in order (repeats kept)."""
    return CITATION.findall(text)


def strip_citations(text: str) -> str:
    """The text without its ``[n]`` markers (nothing else changes)."""
    return CITATION.sub("", text)


def check_citations(text: str, known: Container[str], where: str, *, what: str = "a known passage id",
                    key: str = "response") -> list[str]:
    """The ids cited in ``text`` (``[n]`` markers, in order); a DataError naming ``where`` (file,
    line, conversation, turn) and the field when one is not in ``known`` (the turn's golden
    passage ids, or the corpus's)."""
    ids = cited_ids(text)
    for pid in ids:
        if pid not in known:
            raise DataError(f"{where}: field '{key}' cites passage [{pid}], which is not {what}")
    return ids


def sample_id(conv_id: str, turn: int) -> str:
    """The benchmark's id of a turn (its qrels and rewrites use it): ``<conv_id>_<turn_id>``."""
    return f"{conv_id}_{turn}"


def flow_of(conv_id: str) -> tuple[str | None, str | None, str | None]:
    """(split, letter, sampler) of a conversation id ``Test_a_2`` -> ("test", "a", "LDS");
    Nones when the id has another shape."""
    m = _CONV_ID.match(conv_id)
    if not m:
        return None, None, None
    code = m.group(2).lower()
    return SPLITS.get(m.group(1).lower()), code, FLOWS.get(code)


# ---- streaming JSON: arrays (with line numbers) or JSON Lines ----------------------------------

_DEC = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 20  # characters read at a time from a JSON array file


class _Need(Exception):
    """The buffer ends inside the value being decoded: read more."""


def _ws(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _at(s: str, i: int) -> str:
    if i >= len(s):
        raise _Need
    return s[i]


def _plain(s: str, i: int) -> tuple[Any, int, None]:
    v, end = _DEC.raw_decode(s, i)
    return v, end, None


def _array_with_starts(s: str, i: int) -> tuple[list, int, list[int]]:
    """Decode the array at ``s[i] == '['``; also the start index of each item."""
    out: list = []
    starts: list[int] = []
    i = _ws(s, i + 1)
    if _at(s, i) == "]":
        return out, i + 1, starts
    while True:
        starts.append(i)
        v, i = _DEC.raw_decode(s, i)
        out.append(v)
        i = _ws(s, i)
        c = _at(s, i)
        if c == ",":
            i = _ws(s, i + 1)
        elif c == "]":
            return out, i + 1, starts
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", s, i)


def _with_turns(s: str, i: int) -> tuple[Any, int, list[int] | None]:
    """Decode the value at ``s[i]``; for an object, also the start index of each item of its
    ``turns`` array (each value is decoded once)."""
    if _at(s, i) != "{":
        return _plain(s, i)
    obj: dict = {}
    starts = None
    i = _ws(s, i + 1)
    if _at(s, i) == "}":
        return obj, i + 1, None
    while True:
        if _at(s, i) != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", s, i)
        key, i = _DEC.raw_decode(s, i)
        i = _ws(s, i)
        if _at(s, i) != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", s, i)
        i = _ws(s, i + 1)
        if key == "turns" and _at(s, i) == "[":
            val, i, starts = _array_with_starts(s, i)
        else:
            val, i = _DEC.raw_decode(s, i)
        obj[key] = val
        i = _ws(s, i)
        c = _at(s, i)
        if c == ",":
            i = _ws(s, i + 1)
        elif c == "}":
            return obj, i + 1, starts
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", s, i)


Decoder = Callable[[str, int], tuple[Any, int, "list[int] | None"]]


def _iter_array(fh, buf: str, path: Path, decode: Decoder) -> Iterator[tuple[int, Any, list[int] | None]]:
    """Stream the elements of a JSON array, ``_CHUNK`` characters at a time: (line of the
    element, value, lines of its turns or None)."""
    eof = False

    def more() -> bool:
        nonlocal buf, eof
        chunk = fh.read(_CHUNK)
        if not chunk:
            eof = True
            return False
        buf += chunk
        return True

    pos = _ws(buf, 0) + 1  # just after '['
    mark, line = 0, 1      # the line number at index ``mark`` of ``buf``
    col0 = 1               # the column of ``buf[0]`` (not 1 once done-with text is dropped)

    def column(i: int) -> int:
        nl = buf.rfind("\n", 0, i)
        return i - nl if nl >= 0 else col0 + i
    first = True
    while True:
        try:
            start = _ws(buf, pos)
            if first and _at(buf, start) == "]":
                end = start + 1
                break
            value, stop, starts = decode(buf, start)
            nxt = _ws(buf, stop)
            delim = _at(buf, nxt)
            if delim not in ",]":
                raise json.JSONDecodeError("Expecting ',' delimiter", buf, nxt)
        except (json.JSONDecodeError, _Need) as e:
            if not eof and more():
                continue
            at, msg = (e.pos, e.msg) if isinstance(e, json.JSONDecodeError) else (len(buf), "unexpected end of file")
            at_line = line + buf.count(chr(10), mark, at)
            raise DataError(f"{path}:{at_line}: invalid JSON ({msg}: line {at_line} column {column(at)})") from None
        line += buf.count("\n", mark, start)
        mark = start
        turn_lines = None
        if starts is not None:
            turn_lines, prev, tl = [], start, line
            for t in starts:
                tl += buf.count("\n", prev, t)
                prev = t
                turn_lines.append(tl)
        yield line, value, turn_lines
        first = False
        pos = nxt + 1
        if delim == "]":
            end = pos
            break
        if mark > _CHUNK:  # drop what is done with, keeping the line count and the column
            col0 = column(mark)
            buf, pos, mark = buf[mark:], pos - mark, 0
    tail_line = line + buf.count("\n", mark, end)
    rest = buf[end:]
    while True:
        if rest.strip():
            raise DataError(f"{path}:{tail_line + rest[:len(rest) - len(rest.lstrip())].count(chr(10))}: invalid JSON "
                            "(extra data after the array)")
        tail_line += rest.count("\n")
        rest = fh.read(_CHUNK)
        if not rest:
            return


def _iter_json_records(path: str | Path, decode: Decoder = _plain) -> Iterator[tuple[int, Any, list[int] | None]]:
    """(line, value, lines of its turns or None) of each record of a JSON array file (streamed)
    or of a JSON Lines file (one value a line; blank lines skipped)."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8-sig")  # a byte-order mark, if any, is not data
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    with fh, utf8_errors(path):
        head = ""
        while True:
            chunk = fh.read(_CHUNK)
            head += chunk
            if not chunk or head.strip():
                break
        first = head.lstrip()[:1]
        if first == "[":
            yield from _iter_array(fh, head, path, decode)
            return
        fh.seek(0)
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{lineno}: malformed JSON line ({json_error(e, line=True)})") from None
            yield lineno, value, None


# ---- small field helpers -------------------------------------------------------------------


def _text(value: Any, where: str, key: str, nonempty: bool = False) -> str:
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise DataError(f"{where}: field '{key}' must be a {'non-empty ' if nonempty else ''}string, got {value!r:.60}")
    return value


def _pid(value: Any, where: str, key: str) -> str:
    """A passage id: a non-negative integer or a non-empty string -> str."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise DataError(f"{where}: field '{key}' must be a passage id (a non-negative integer), got {value!r:.60}")


def _counts(values: Iterable[Any]) -> dict[str, int]:
    return dict(sorted(Counter(_MISSING if v is None else str(v) for v in values).items()))


# ---- conversations -------------------------------------------------------------------------


def iter_conversations(path: str | Path) -> Iterator[tuple[int, dict, list[int]]]:
    """The raw conversations of a CORAL conversation file (JSON array, streamed; or JSON Lines):
    (line where the conversation starts, the object, the line where each of its turns starts)."""
    path = Path(path)
    for line, conv, turn_lines in _iter_json_records(path, _with_turns):
        if not isinstance(conv, dict):
            raise DataError(f"{path}:{line}: expected a conversation object, got {type(conv).__name__}")
        turns = conv.get("turns")
        n = len(turns) if isinstance(turns, list) else 0
        yield line, conv, (turn_lines if turn_lines is not None and len(turn_lines) == n else [line] * n)


def _read_turn(t: Any, tw: str, k: int, stats: Counter, strict: bool) -> dict:
    """One turn object -> {turn, question, response, pids, cited, rewrite, texts}."""
    if not isinstance(t, dict):
        raise DataError(f"{tw}: expected a turn object, got {type(t).__name__}")
    tid = t.get("turn_id")
    if "turn_id" not in t:
        raise DataError(f"{tw}: field 'turn_id' is missing")
    if isinstance(tid, bool) or not isinstance(tid, int) or tid != k:
        raise DataError(f"{tw}: field 'turn_id' is {tid!r}, expected {k} (turns are numbered 1, 2, ... in order; "
                        "a repeated or skipped turn_id is an error)")
    for key in ("question", "response", "golden_docs_pids"):
        if key not in t:
            raise DataError(f"{tw}: field '{key}' is missing")
    question = _text(t["question"], tw, "question", nonempty=True)
    response = _text(t["response"], tw, "response")
    raw_pids = t["golden_docs_pids"]
    if not isinstance(raw_pids, list):
        raise DataError(f"{tw}: field 'golden_docs_pids' must be a list of passage ids, got {raw_pids!r:.60}")
    raw_texts = t.get("golden_docs_text")
    if raw_texts is not None and (not isinstance(raw_texts, list) or len(raw_texts) != len(raw_pids)):
        raise DataError(f"{tw}: field 'golden_docs_text' must be a list with one text per golden_docs_pids entry "
                        f"({len(raw_pids)})")
    pids: list[str] = []
    texts: list[str] | None = None if raw_texts is None else []
    for i, p in enumerate(raw_pids):
        pid = _pid(p, tw, f"golden_docs_pids[{i}]")
        if pid in pids:
            stats["duplicate_gold_pids"] += 1
            continue
        pids.append(pid)
        if texts is not None:
            texts.append(_text(raw_texts[i], tw, f"golden_docs_text[{i}]"))
    rewrite = t.get("golden_rewrite")
    if rewrite is not None:
        rewrite = _text(rewrite, tw, "golden_rewrite")
    gold = set(pids)
    if strict:
        cited = check_citations(response, gold, tw, what=f"among the turn's golden_docs_pids {pids}")
    else:
        cited = cited_ids(response)
        stats["citations_not_gold"] += sum(c not in gold for c in cited)
    stats["citations"] += len(cited)
    stats["other_brackets"] += len(_OTHER_BRACKET.findall(response))
    stats["gold_not_cited"] += len(gold - set(cited))
    for key in t:
        if key not in _TURN_FIELDS:
            stats[f"ignored:turns[].{key}"] += 1
    return {"turn": k, "question": question, "response": response, "pids": pids,
            "cited": list(dict.fromkeys(cited)), "n_cited": len(cited), "golden_rewrite": rewrite, "texts": texts}


def read_conversations(path: str | Path, *, strict: bool = True, stats: Counter | None = None
                       ) -> list[dict]:
    """Every conversation of the file, validated: ``[{conv_id, line, turns: [{turn, line,
    question, response, pids, cited, golden_rewrite, texts}]}]`` (``pids``: golden passage ids as
    strings, repeats dropped and counted; ``cited``: the distinct ids cited, in order)."""
    path = Path(path)
    stats = Counter() if stats is None else stats
    seen: dict[str, int] = {}
    out = []
    for index, (line, conv, turn_lines) in enumerate(iter_conversations(path)):
        cid = conv.get("conv_id")
        if not isinstance(cid, str) or not cid.strip():
            raise DataError(f"{path}:{line}: conversation {index}: field 'conv_id' is missing or not a non-empty "
                            "string")
        cw = f"{path}:{line}: conversation '{cid}'"
        if cid in seen:
            raise DataError(f"{cw}: field 'conv_id': duplicate conversation id '{cid}' (first on line {seen[cid]})")
        seen[cid] = line
        turns = conv.get("turns")
        if not isinstance(turns, list) or not turns:
            raise DataError(f"{cw}: field 'turns' must be a non-empty list of turns")
        for key in conv:
            if key not in _CONV_FIELDS:
                stats[f"ignored:{key}"] += 1
        read = []
        for k, (t, tl) in enumerate(zip(turns, turn_lines), start=1):
            tw = f"{path}:{tl}: conversation '{cid}', turn {k}"
            rec = _read_turn(t, tw, k, stats, strict)
            rec["line"] = tl
            read.append(rec)
        out.append({"conv_id": cid, "line": line, "turns": read})
    return out


# ---- qrels and rewrites --------------------------------------------------------------------


def read_coral_qrels(path: str | Path) -> tuple[dict[str, dict[str, int]], dict[str, int], int,
                                                 dict[tuple[str, str], int]]:
    """CORAL qrels: TREC (``qid iter pid rel``, tabs or spaces; the v2 ``.trec`` file) or BEIR
    (``query-id corpus-id score`` with a header). Returns (qid -> {pid: rel}, qid -> line of its
    first row, rows, (qid, pid) -> line of that row). A repeated (qid, pid) row, a wrong column
    count or a non-integer relevance is a DataError naming file and line."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    first: dict[str, int] = {}
    where_row: dict[tuple[str, str], int] = {}
    rows = 0
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    with fh, utf8_errors(path):
        header_seen = False
        width = width_line = None  # the column count of the first row, which every row keeps
        for lineno, raw in enumerate(fh, start=1):
            cols = raw.split()
            if not cols:
                continue
            if not header_seen and not rows and len(cols) == 3 and not _is_int(cols[2]):
                header_seen = True  # BEIR header "query-id corpus-id score"
                continue
            if width is not None and len(cols) != width:  # one format a file: a TREC row that lost a column
                fmt = "'qid iter pid rel' (TREC" if width == 4 else "'query-id corpus-id score' (BEIR"
                raise DataError(f"{path}:{lineno}: expected {fmt}, as line {width_line}), got {len(cols)} columns")
            if len(cols) == 4:
                qid, pid, rel = cols[0], cols[2], cols[3]
            elif len(cols) == 3:
                qid, pid, rel = cols
            else:
                raise DataError(f"{path}:{lineno}: expected 'qid iter pid rel' (TREC) or 'query-id corpus-id score', "
                                f"got {len(cols)} columns")
            if width is None:
                width, width_line = len(cols), lineno
            if not _is_int(rel):
                raise DataError(f"{path}:{lineno}: field 'rel': relevance {rel!r} is not an integer")
            if (qid, pid) in where_row:
                raise DataError(f"{path}:{lineno}: field 'pid': duplicate qrels row for '{qid}' and passage '{pid}' "
                                f"(first on line {where_row[(qid, pid)]})")
            where_row[(qid, pid)] = lineno
            qrels.setdefault(qid, {})[pid] = int(rel)
            first.setdefault(qid, lineno)
            rows += 1
    return qrels, first, rows, where_row


def _is_int(s: str) -> bool:
    return s.lstrip("-").isdigit()


def read_rewrites(path: str | Path) -> dict[str, tuple[str, int]]:
    """CORAL's rewrites file (JSON Lines ``{"sample_id", "rewrite"}``) -> sample id -> (rewrite
    as shipped, line). A missing field or a repeated sample id is a DataError naming file and line."""
    path = Path(path)
    out: dict[str, tuple[str, int]] = {}
    for line, rec, _ in _iter_json_records(path):
        where = f"{path}:{line}"
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        sid = rec.get("sample_id")
        if not isinstance(sid, str) or not sid.strip():
            raise DataError(f"{where}: field 'sample_id' is missing or not a non-empty string")
        if "rewrite" not in rec:
            raise DataError(f"{where}: field 'rewrite' is missing (sample '{sid}')")
        text = _text(rec["rewrite"], where, "rewrite")
        if sid in out:
            raise DataError(f"{where}: field 'sample_id': duplicate rewrite of '{sid}' (first on line {out[sid][1]})")
        out[sid] = (text, line)
    return out


# ---- passages ------------------------------------------------------------------------------


def iter_passages(path: str | Path, *, source: str = DOMAIN, stats: Counter | None = None) -> Iterator[Passage]:
    """Stream the passage corpus (``passage_corpus.json``: JSON Lines or a JSON array of
    ``{"ref_id", "ref_string"}``; see the module docstring for the other key spellings) as
    ``Passage(doc_id=str(ref_id), title or "", text, source)``. A missing id or text, a
    non-string text or title, or a repeated id is a DataError naming file, line and field.
    ``stats`` (a Counter) counts passages, empty texts, titles and ignored fields."""
    path = Path(path)
    seen: dict[str, int] = {}
    for line, rec, _ in _iter_json_records(path):
        where = f"{path}:{line}"
        if not isinstance(rec, dict):
            raise DataError(f"{where}: expected a passage object, got {type(rec).__name__}")
        id_key = next((k for k in ID_KEYS if k in rec), None)
        if id_key is None:
            raise DataError(f"{where}: field 'ref_id' is missing (nor is there any of {', '.join(ID_KEYS[1:])})")
        doc_id = _pid(rec[id_key], where, id_key)
        if doc_id in seen:
            raise DataError(f"{where}: field '{id_key}': duplicate passage id '{doc_id}' (first on line "
                            f"{seen[doc_id]})")
        seen[doc_id] = line
        text_key = next((k for k in TEXT_KEYS if k in rec), None)
        if text_key is None:
            raise DataError(f"{where}: field 'ref_string' is missing (passage '{doc_id}'; nor is there any of "
                            f"{', '.join(TEXT_KEYS[1:])})")
        text = _text(rec[text_key], where, text_key)
        title = rec.get("title")
        title = "" if title is None else _text(title, where, "title")
        if stats is not None:
            stats["passages"] += 1
            stats["empty_texts"] += not text.strip()
            stats["titles"] += bool(title)
            for k in rec:
                if k not in (id_key, text_key, "title"):
                    stats[f"ignored:{k}"] += 1
        yield Passage(doc_id=doc_id, title=title, text=text, source=source)


def load_passages(path: str | Path, *, source: str = DOMAIN) -> list[Passage]:
    """Every passage of the corpus (``iter_passages``)."""
    return list(iter_passages(path, source=source))


# ---- the tasks -----------------------------------------------------------------------------


def load_coral(conversations: str | Path, *, qrels: str | Path | None = None, rewrites: str | Path | None = None,
               corpus: str | Path | None = None, benchmark: str = DOMAIN, strict: bool = True
               ) -> tuple[list[TurnTask], dict[str, Any]]:
    """CORAL's files -> one TurnTask per turn (the mapping: module docstring) and a counted report.

    ``qrels`` (TREC or BEIR) gives ``gold_docs``, checked against ``golden_docs_pids``;
    ``rewrites`` (JSON Lines) gives ``rewrite``; ``corpus`` (streamed once) gives ``contexts``
    and the check that every golden and cited passage exists. ``strict``: inconsistencies
    between the files (and citations outside the turn's golden passages) are DataErrors; with
    False they are counted in the report and the qrels file wins.
    """
    conv_path = Path(conversations)
    stats: Counter = Counter()
    convs = read_conversations(conv_path, strict=strict, stats=stats)
    if not convs:
        raise DataError(f"{conv_path}: no conversations in the file")
    turns = {sample_id(c["conv_id"], t["turn"]): (c, t) for c in convs for t in c["turns"]}

    def tw(sid: str) -> str:
        c, t = turns[sid]
        return f"{conv_path}:{t['line']}: conversation '{c['conv_id']}', turn {t['turn']}"

    # qrels: graded gold, checked against golden_docs_pids
    gold: dict[str, dict[str, int]] = {sid: {p: 1 for p in t["pids"]} for sid, (_, t) in turns.items()}
    qreport: dict[str, Any] = {}
    if qrels is not None:
        qpath = Path(qrels)
        q, qline, rows, row_line = read_coral_qrels(qpath)
        unknown = [sid for sid in q if sid not in turns]
        if unknown and strict:
            sid = unknown[0]
            raise DataError(f"{qpath}:{qline[sid]}: field 'qid' '{sid}' is not a turn of {conv_path} "
                            f"({len(unknown)} unknown ids)")
        mismatches = 0
        for sid, (c, t) in turns.items():
            docs = q.get(sid, {})
            positive = {p for p, r in docs.items() if r > 0}
            if positive != set(t["pids"]):
                mismatches += 1
                if strict:  # the row of a pid the conversation does not name, else of a golden pid with
                    # relevance <= 0, else the qid's first row (a golden pid has no row at all)
                    extra = sorted(positive - set(t["pids"]), key=_num)
                    lacking = sorted(set(t["pids"]) - positive, key=_num)
                    bad = extra or [p for p in lacking if (sid, p) in row_line]
                    line = row_line[(sid, bad[0])] if bad else qline.get(sid)
                    at = f"{qpath}:{line}" if line else f"{qpath} (no rows)"
                    norow = "" if bad or not lacking else f" (no row for passage '{lacking[0]}')"
                    raise DataError(f"{tw(sid)}: field 'golden_docs_pids' {t['pids']} differs from the qrels of "
                                    f"'{sid}' in {at}: {sorted(positive, key=_num)}{norow}")
            gold[sid] = dict(docs)
        qreport = {"qrels_rows": rows, "qrels_turns": sum(sid in turns for sid in q), "qrels_mismatches": mismatches,
                   "unknown_qrels_ids": len(unknown), "unknown_qrels_ids_list": unknown[:20],
                   "qrels_relevance": _counts(r for d in q.values() for r in d.values())}

    # rewrites: the file, else the turn's golden_rewrite
    rw: dict[str, str] = {}
    rreport: dict[str, Any] = {}
    if rewrites is not None:
        rpath = Path(rewrites)
        rf = read_rewrites(rpath)
        unknown = [sid for sid in rf if sid not in turns]
        if unknown and strict:
            sid = unknown[0]
            raise DataError(f"{rpath}:{rf[sid][1]}: field 'sample_id' '{sid}' is not a turn of {conv_path} "
                            f"({len(unknown)} unknown ids)")
        rw = {sid: text.strip() for sid, (text, _) in rf.items() if sid in turns}
        rreport = {"rewrite_lines": len(rf), "unknown_rewrite_ids": len(unknown),
                   "unknown_rewrite_ids_list": unknown[:20]}
    from_conv = differ = 0
    for sid, (_, t) in turns.items():
        g = t["golden_rewrite"]
        if g is None:
            continue
        if sid in rw:
            differ += rw[sid] != g.strip()
        else:
            rw[sid] = g.strip()
            from_conv += 1

    # contexts: the golden passages' texts, from the corpus (streamed once) or v1's golden_docs_text
    ctx_text: dict[str, tuple[str, str]] = {}
    creport: dict[str, Any] = {}
    if corpus is not None:
        cpath = Path(corpus)
        need = {p for d in gold.values() for p, r in d.items() if r > 0} | {
            p for _, t in turns.values() for p in [*t["pids"], *t["cited"]]}
        cstats: Counter = Counter()
        for p in iter_passages(cpath, stats=cstats):
            if p.doc_id in need:
                ctx_text[p.doc_id] = (p.title, p.text)
        missing_gold = missing_cited = 0
        for sid, (_, t) in turns.items():
            for p in dict.fromkeys([*t["pids"], *(p for p, r in gold[sid].items() if r > 0)]):
                if p not in ctx_text:
                    missing_gold += 1
                    if strict:
                        raise DataError(f"{tw(sid)}: field 'golden_docs_pids': passage '{p}' is not in the corpus "
                                        f"{cpath}")
            if strict:
                check_citations(t["response"], ctx_text, tw(sid), what=f"a passage of the corpus {cpath}")
            else:
                missing_cited += sum(p not in ctx_text for p in t["cited"])
        creport = {"corpus_passages": cstats["passages"], "gold_missing_from_corpus": missing_gold,
                   "cited_missing_from_corpus": missing_cited}

    tasks: list[TurnTask] = []
    for c in convs:
        cid = c["conv_id"]
        split, code, flow = flow_of(cid)
        history: list[dict] = []
        n = len(c["turns"])
        for t in c["turns"]:
            sid = sample_id(cid, t["turn"])
            reference = strip_citations(t["response"]).strip()
            order = list(dict.fromkeys([*t["pids"], *(p for p, r in gold[sid].items() if r > 0)]))
            if ctx_text:
                contexts = [{"doc_id": p, "title": ctx_text[p][0], "text": ctx_text[p][1]} for p in order
                            if p in ctx_text]
            elif t["texts"] is not None:
                contexts = [{"doc_id": p, "title": "", "text": x} for p, x in zip(t["pids"], t["texts"])]
            else:
                contexts = []
            labels = {
                "domain": DOMAIN, "split": split, "flow": flow, "flow_code": code, "turn": t["turn"],
                "first_turn": t["turn"] == 1, "n_turns": n, "has_gold": bool(order),
                "reference_with_citations": t["response"].strip(), "cited_passages": t["cited"],
                "n_citations": t["n_cited"],
            }
            d = {"task_id": sid, "benchmark": benchmark, "conversation_id": cid, "turn": t["turn"],
                 "history": list(history), "question": t["question"],
                 "reference_answers": [reference] if reference else [], "gold_docs": gold[sid],
                 "rewrite": rw.get(sid), "contexts": contexts, "labels": labels}
            # every field was checked above; the schema check runs on the conversation's last task
            # (which holds the whole history): checking every task would cost quadratic time
            last = t["turn"] == n
            tasks.append(TurnTask.from_dict(d, where=f"{tw(sid)} (task {sid})") if last else TurnTask(**d))
            history += [{"role": "user", "text": t["question"]}, {"role": "assistant", "text": reference}]

    report = {
        "files": {"conversations": str(conv_path), "qrels": None if qrels is None else str(qrels),
                  "rewrites": None if rewrites is None else str(rewrites),
                  "corpus": None if corpus is None else str(corpus)},
        "strict": strict,
        "conversations": len(convs),
        "turns": len(turns),
        "tasks": len(tasks),
        "split": _counts(t.labels["split"] for t in tasks),
        "conversations_by_flow": _counts(flow_of(c["conv_id"])[2] for c in convs),
        "turns_by_flow": _counts(t.labels["flow"] for t in tasks),
        "turns_with_gold": sum(bool(t.labels["has_gold"]) for t in tasks),
        "turns_without_gold": sum(not t.labels["has_gold"] for t in tasks),
        "turns_without_gold_by_flow": _counts(t.labels["flow"] for t in tasks if not t.labels["has_gold"]),
        "gold_passages": sum(len(t["pids"]) for _, t in turns.values()),
        "distinct_gold_passages": len({p for _, t in turns.values() for p in t["pids"]}),
        "duplicate_gold_pids": stats["duplicate_gold_pids"],
        "citations": stats["citations"],
        "turns_with_citations": sum(bool(t["cited"]) for _, t in turns.values()),
        "gold_not_cited": stats["gold_not_cited"],
        "citations_not_gold": stats["citations_not_gold"],
        "other_brackets": stats["other_brackets"],
        "empty_responses": sum(not t.reference_answers for t in tasks),
        **qreport,
        **rreport,
        "rewrites": sum(t.rewrite is not None for t in tasks),
        "rewrites_from_conversations": from_conv,
        "rewrites_differing_from_golden_rewrite": differ,
        "turns_without_rewrite": sum(t.rewrite is None for t in tasks),
        **creport,
        "contexts": sum(len(t.contexts) for t in tasks),
        "turns_without_contexts": sum(not t.contexts for t in tasks),
        "ignored_fields": {k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("ignored:")},
    }
    return tasks, report


def _num(p: str) -> tuple[int, str]:
    return (int(p), "") if p.isdigit() else (-1, p)


# ---- the registered benchmark loader ---------------------------------------------------------


@register_benchmark_loader("coral")
class Coral(BenchmarkLoader):
    """CORAL (``convrag.data.coral``): one TurnTask per turn of a split's conversations (golden
    history, response, rewrite, qrels, golden passages as contexts) and the passage corpus, one
    domain ``coral``. Config: ``{kind: coral, revision, release: v2|v1, split: test|train,
    strict: true, contexts: gold|none, files: {<raw name>: {local: path} | {url, sha256}}}``.

    Raw files (downloaded from the Hugging Face dataset ``ariya2357/CORAL`` at ``revision``;
    sha256 not pinned: no copy could be hashed here, so the download records it beside each
    file): release ``v2`` (default) ``conversations.json`` = ``<split>/new_<split>_conversation.json``,
    ``qrels.trec`` = ``<split>/new_<split>_qrel.trec``, ``rewrites.jsonl`` =
    ``<split>/<split>_rewrite_new.jsonl``; release ``v1`` ``conversations.json`` =
    ``<split>/<split>_conversation.json``, ``qrels.tsv`` = ``<split>/<split>_qrel.tsv`` (the rewrite
    and passage texts inside each turn); both: ``passage_corpus.json`` at the repository root.
    Where the paths come from: ``resolve/main/passage_corpus.json`` is the download command of a
    public CORAL evaluation (lnblanke/RLM-Agent); the v1 names are the repository's file listing
    at its commit e6b8fb6 (test/) and 9f6e2d756d94e925f52674cbb38cce764dab1407 (train/); the v2
    names are those of the verbatim copies in ``../shared/data/coral`` as a third-party CORAL
    harness lists them under ``test/`` and ``train/`` of the dataset. None was fetched here (no
    hub access): pin ``revision`` to a commit you have checked, or give every file under ``files``
    (``{local: path}``), which needs no revision and no network.

    ``contexts: gold`` (default) reads the corpus for the tasks too (the golden passages' texts
    and the check that every golden and cited passage exists); ``none`` leaves contexts empty
    (v1 files still give theirs). ``strict: false`` counts inconsistencies between the files
    instead of stopping (see ``load_coral``)."""

    HF_REPO = "ariya2357/CORAL"
    BASE = "https://huggingface.co/datasets/ariya2357/CORAL/resolve"
    RELEASES: dict[str, dict[str, str]] = {
        "v2": {"conversations.json": "{split}/new_{split}_conversation.json",
               "qrels.trec": "{split}/new_{split}_qrel.trec",
               "rewrites.jsonl": "{split}/{split}_rewrite_new.jsonl",
               "passage_corpus.json": "passage_corpus.json"},
        "v1": {"conversations.json": "{split}/{split}_conversation.json",
               "qrels.tsv": "{split}/{split}_qrel.tsv",
               "passage_corpus.json": "passage_corpus.json"},
    }
    CORPUS = "passage_corpus.json"
    KEYS = ("kind", "domains", "revision", "release", "split", "strict", "contexts", "files")
    CONTEXTS = ("gold", "none")

    def check(self, name, spec, source):
        key = f"benchmarks.{name}"
        self.check_keys(name, spec, source)
        if spec.get("release", "v2") not in self.RELEASES:
            raise ConfigError(f"{source}: invalid config key '{key}.release': {spec['release']!r} is not one of "
                              f"{', '.join(self.RELEASES)}")
        if spec.get("split", "test") not in SPLITS:
            raise ConfigError(f"{source}: invalid config key '{key}.split': {spec['split']!r} is not one of "
                              f"{', '.join(SPLITS)}")
        if not isinstance(spec.get("strict", True), bool):
            raise ConfigError(f"{source}: invalid config key '{key}.strict': must be true or false")
        if spec.get("contexts", "gold") not in self.CONTEXTS:
            raise ConfigError(f"{source}: invalid config key '{key}.contexts': {spec['contexts']!r} is not one of "
                              f"{', '.join(self.CONTEXTS)}")
        if "domains" in spec and list(spec["domains"] or []) != [DOMAIN]:
            raise ConfigError(f"{source}: invalid config key '{key}.domains': CORAL has one domain, [{DOMAIN}]")
        files = spec.get("files", {})
        if not isinstance(files, dict):
            raise ConfigError(f"{source}: invalid config key '{key}.files': a mapping of raw file name -> "
                              "{local: path} or {url, sha256}")
        names = self.raw_names(spec)
        for n, f in files.items():
            if n not in names:
                raise ConfigError(f"{source}: invalid config key '{key}.files.{n}': not a raw file of this release "
                                  f"(known: {', '.join(names)})")
            if not isinstance(f, dict) or not ({"local", "url"} & set(f)):
                raise ConfigError(f"{source}: invalid config key '{key}.files.{n}': give {{local: path}} or "
                                  "{url, sha256}")
        if "revision" not in spec and not set(names) <= set(files):
            raise ConfigError(f"{source}: invalid config key '{key}.revision': required (a commit of the Hugging Face "
                              f"dataset {self.HF_REPO}) unless every raw file is given under 'files'")

    def domains(self, spec):
        return [DOMAIN]

    def raw_names(self, spec):
        return list(self.RELEASES[spec.get("release", "v2")])

    def raw_files(self, spec):
        release, split = spec.get("release", "v2"), spec.get("split", "test")
        base = f"{self.BASE}/{spec.get('revision', 'lock')}"
        out = {n: {"url": f"{base}/{p.format(split=split)}", "sha256": None}
               for n, p in self.RELEASES[release].items()}
        out.update(spec.get("files", {}))
        return out

    def task_inputs(self, spec):
        names = [n for n in self.raw_names(spec) if n != self.CORPUS]
        return names + ([self.CORPUS] if spec.get("contexts", "gold") == "gold" else [])

    def corpus_inputs(self, spec, domain):
        return [self.CORPUS]

    def tasks(self, name, spec, files):
        need = self.task_inputs(spec)
        missing = [n for n in need if n not in files]
        if missing:
            raise DataError(f"benchmark {name}: raw file '{missing[0]}' not given (needed: {', '.join(need)})")
        qrels = files.get("qrels.trec", files.get("qrels.tsv"))
        return load_coral(files["conversations.json"], qrels=qrels, rewrites=files.get("rewrites.jsonl"),
                          corpus=files[self.CORPUS] if self.CORPUS in need else None, benchmark=name,
                          strict=spec.get("strict", True))

    def corpus(self, name, spec, domain, files):
        if domain != DOMAIN:
            raise DataError(f"benchmark {name}: unknown domain '{domain}' (CORAL has one, '{DOMAIN}')")
        return load_passages(files[self.CORPUS])
