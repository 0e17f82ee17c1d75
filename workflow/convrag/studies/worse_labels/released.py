"""Released query expansions for an expansion rung (the paper's Fusion): the paper releases its
LLM expansions with its artifacts and reports that regenerating them with an open model scores
lower (.453 instead of .546), so a reproduction of Fusion and Hybrid reads the released ones
when the config names them (``ladder.<rung>.released``: a local file or a pinned download) and
regenerates them (``ladder.expand``) only as the fallback.

**Format** (no released file is known to this repository yet, so this is the project's own
documented format; a file in another layout needs a small conversion first). Per task id and
expansion kind, the expansion text exactly as the expanding LLM replied:

* ``jsonl`` (default): one JSON object per line, ``{"task_id": ..., "kind": ..., "text": ...}``;
* ``json``: one object ``{task_id: {kind: text, ...}, ...}``.

``kind`` is one of ``ladder.EXPANSIONS``; the text is read as that kind's reply is
(``ladder.parse_reply``: query2doc the passage, a leading "Passage:" dropped; the rewrite kinds a
"Rewrite:" line then "Passage:" / "Document:"), and becomes the BM25 query the same way
(``ladder.expansion_query``), so released and regenerated expansions run through one path. A
released text that cannot be read (empty; a rewrite kind without "Rewrite:") falls back to the
official with-history query and is counted, as a regenerated one is. Every (task, kind) the rung
needs must be in the file: a missing one is an error naming the file and the task ids (no silent
mix of released and regenerated expansions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from convrag.errors import DataError
from convrag.records import TurnTask

__all__ = ["FORMATS", "read_released", "released_records"]

FORMATS = ("jsonl", "json")


def _text(v, where: str) -> str:
    if not isinstance(v, str):
        raise DataError(f"{where}: the expansion text must be a string, got {type(v).__name__}")
    return v


def read_released(path: str | Path, fmt: str = "jsonl") -> dict[tuple[str, str], str]:
    """(task_id, kind) -> expansion text of a released file (module doc); DataError naming the
    file and line / task on a malformed record, an unknown kind or a (task, kind) given twice."""
    from convrag.studies.worse_labels.ladder import EXPANSIONS

    if fmt not in FORMATS:
        raise DataError(f"{path}: unknown released-expansions format {fmt!r} (known: {', '.join(FORMATS)})")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{path}: released expansions file not found")
    out: dict[tuple[str, str], str] = {}

    def add(tid, kind, text, where):
        if not isinstance(tid, str) or not tid:
            raise DataError(f"{where}: 'task_id' must be a non-empty string")
        if kind not in EXPANSIONS:
            raise DataError(f"{where}: unknown expansion kind {kind!r} (known: {', '.join(EXPANSIONS)})")
        if (tid, kind) in out:
            raise DataError(f"{where}: task {tid} has a second '{kind}' expansion")
        out[(tid, kind)] = _text(text, where)

    if fmt == "jsonl":
        with p.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}: line {i}"
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{where}: not JSON ({e.msg})") from None
                if not isinstance(rec, dict) or not {"task_id", "kind", "text"} <= set(rec):
                    raise DataError(f"{where}: expected an object with task_id, kind and text")
                add(rec["task_id"], rec["kind"], rec["text"], where)
    else:
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: not JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}: expected an object task_id -> {{kind: text}}")
        for tid, kinds in obj.items():
            if not isinstance(kinds, dict):
                raise DataError(f"{path}: task {tid}: expected an object kind -> text")
            for kind, text in kinds.items():
                add(tid, kind, text, f"{path}: task {tid}")
    if not out:
        raise DataError(f"{path}: no released expansion in the file")
    return out


def released_records(tasks: Sequence[TurnTask], released: Mapping[tuple[str, str], str], kinds: Sequence[str],
                     where: str, query_repeats: int | None = None) -> list[dict]:
    """The records ``ladder.expand`` returns (task-major, ``kinds`` order), from released texts
    instead of an engine, each marked ``source: released``. DataError naming ``where`` (the file)
    and the missing task ids when a (task, kind) is not in ``released``."""
    from convrag.studies.worse_labels import ladder

    kinds = ladder._check_kinds(kinds)
    missing: dict[str, list[str]] = {}
    for t in tasks:
        for k in kinds:
            if (t.task_id, k) not in released:
                missing.setdefault(t.task_id, []).append(k)
    if missing:
        shown = "; ".join(f"{tid} ({', '.join(ks)})" for tid, ks in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise DataError(f"{where}: no released expansion for {len(missing)} of {len(tasks)} task(s): {shown}{more} "
                        "(the released file must cover every turn the rung retrieves for, train turns too when "
                        "its weights are fitted; or leave 'released' out to regenerate them)")
    reps = ladder.QUERY_REPEATS if query_repeats is None else query_repeats
    out = []
    for t in tasks:
        for k in kinds:
            text = released[(t.task_id, k)]
            parsed = ladder.parse_reply(k, text)
            out.append({"task_id": t.task_id, "kind": k, "raw": text, "rewrite": parsed["rewrite"],
                        "passage": parsed["passage"], "query": ladder.expansion_query(t, k, parsed, reps),
                        "fallback": not parsed["parsed"], "source": "released"})
    return out
