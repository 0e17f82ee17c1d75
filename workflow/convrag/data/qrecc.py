"""Loader of QReCC (*Open-Domain Question Answering Goes Conversational via Question Rewriting*,
Anantha et al., NAACL 2021; ``apple/ml-qrecc``, data CC BY-SA 3.0) as a benchmark of kind
``qrecc``: the conversations CORAL's Table 2 trains its "-Q" session encoders on (Conv-ANCE-Q,
KD-ANCE-Q: "trained on the QReCC dataset").

Why a loader of its own: the release is one zip of two JSON arrays of turns, not CORAL's
conversation objects, and it carries no passage collection (the 54M passages of the paper's
search are built by scripts from Common Crawl and the Wayback Machine, ``collection/`` in the
repository). What the release does carry is enough for both training styles of
``convrag.retrieval.conv_dense``: the human rewrite of every turn (KD's teacher input) and the
answer with its source URL (the positive of the contrastive style, below).

**File** (``resources/sources.yaml``: ``dataset/qrecc_data.zip`` of apple/ml-qrecc at a pinned
commit, its git blob id; the snapshot omits the 4 MiB+ zip, so its size and sha256 are not known
here and the download is checked against the blob id). The zip holds ``qrecc_train.json`` and
``qrecc_test.json`` (the readers of TensorFlow Datasets and datamaestro open them at the zip's
root; the member is found by its file name, wherever it sits in the zip, and must be there once).
Each is a JSON array of turn objects, as the repository's README shows one::

    {"Context": [q1, a1, ..., q_{k-1}, a_{k-1}], "Question": q_k, "Rewrite": ..., "Answer": ...,
     "Answer_URL": ..., "Conversation_no": 74, "Turn_no": 2, "Conversation_source": "trec"}

Every field is required with its type (a missing or mistyped one is a ``DataError`` naming the
file, the zip member, the line where the turn object starts and the field); a repeated
(Conversation_no, Turn_no) is an error. What the release may hold but a loader cannot judge is
counted in the report, never dropped silently: an empty ``Answer`` (QuAC's unanswerable turns:
no reference, no positive), an empty ``Rewrite`` (no KD target), a ``Context`` whose length is not
2 x (Turn_no - 1), a ``Context`` that differs from the same conversation's earlier turns, turn
numbers with gaps.

**One TurnTask per turn** (``task_id`` = ``<Conversation_no>_<Turn_no>``): ``history`` from
``Context`` (user and assistant in turn, the user first), ``question``, ``rewrite`` (stripped;
None when empty), ``reference_answers`` ``[Answer]`` (stripped; none when empty), ``gold_docs``
``{<task_id>: 1}`` when the turn has an answer, ``labels``: ``domain`` ("qrecc"), ``split``,
``source`` (quac / nq / trec), ``answer_url``, ``turn``, ``first_turn``, ``n_turns``.

**Corpus** (one domain, ``qrecc``): one passage per answered turn, id = the task id, text = the
answer, no title. So Conv-ANCE's contrastive style pulls a session towards its own answer, with
the batch's other answers as negatives: the release's closest stand-in for the gold passage,
which QReCC defines by the answer itself (its ``utils/evaluate_retrieval.py`` counts a passage
relevant when its best span matches the answer with F1 >= 0.8). A run that trains on it says so
(the published entries' caveat); KD uses only the rewrites and is the paper's recipe as stated.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from convrag.data.benchmarks import BenchmarkLoader, register_benchmark_loader
from convrag.errors import ConfigError, DataError
from convrag.io import json_error, utf8_errors
from convrag.records import Passage, TurnTask

DOMAIN = "qrecc"
SPLITS = ("train", "test")
REPO = "apple/ml-qrecc"  # the zip's blob id per commit: resources/sources.yaml
ZIP = "qrecc_data.zip"
REPO_PATH = f"dataset/{ZIP}"
FIELDS = {"Context": list, "Question": str, "Rewrite": str, "Answer": str, "Answer_URL": str,
          "Conversation_no": int, "Turn_no": int, "Conversation_source": str}
_WS = re.compile(r"[ \t\n\r]*")


def member_name(split: str) -> str:
    return f"qrecc_{split}.json"


# ---- reading the zip's JSON array, with the line of every turn object -------------------------------


def _open_member(path: Path, split: str) -> tuple[str, str]:
    """(text, label for errors) of the split's member of the release zip (found by its name)."""
    want = member_name(split)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    except zipfile.BadZipFile as e:
        raise DataError(f"{path}: not a zip file ({e})") from e
    with zf:
        names = [n for n in zf.namelist() if not n.startswith("__MACOSX/") and n.rsplit("/", 1)[-1] == want]
        if len(names) != 1:
            raise DataError(f"{path}: the QReCC release must hold exactly one {want}, found {len(names)} "
                            f"(members: {', '.join(zf.namelist()[:6])})")
        label = f"{path}[{names[0]}]"
        raw = zf.read(names[0])
    with utf8_errors(path, label, lambda: io.BytesIO(raw)):
        return raw.decode("utf-8-sig"), label


def iter_turn_objects(text: str, label: str) -> Iterator[tuple[int, Any]]:
    """(line where it starts, value) of each item of the JSON array ``text``; invalid JSON or
    anything but an array is a DataError naming the line."""
    dec = json.JSONDecoder()
    i = _WS.match(text, 0).end()
    if text[i:i + 1] != "[":
        raise DataError(f"{label}:{text.count(chr(10), 0, i) + 1}: expected a JSON array of turn objects")
    line, mark = 1, 0
    i = _WS.match(text, i + 1).end()
    if text[i:i + 1] == "]":
        return
    while True:
        line += text.count("\n", mark, i)
        mark = i
        try:
            value, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise DataError(f"{label}:{e.lineno}: invalid JSON ({json_error(e)})") from None
        yield line, value
        i = _WS.match(text, end).end()
        c = text[i:i + 1]
        if c == "]":
            rest = text[i + 1:]
            if rest.strip():
                raise DataError(f"{label}:{text.count(chr(10), 0, i) + 1}: invalid JSON (extra data after the array)")
            return
        if c != ",":
            at = text.count("\n", 0, i) + 1
            raise DataError(f"{label}:{at}: invalid JSON (expected ',' or ']' after a turn object)")
        i = _WS.match(text, i + 1).end()


def _turn(obj: Any, where: str) -> dict:
    """One turn object, every field present with its type (bool is not an int here)."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: expected a turn object, got {type(obj).__name__}")
    for key, typ in FIELDS.items():
        if key not in obj:
            raise DataError(f"{where}: field '{key}' is missing")
        v = obj[key]
        if not isinstance(v, typ) or isinstance(v, bool):
            raise DataError(f"{where}: field '{key}' must be {'an integer' if typ is int else 'a ' + typ.__name__}, "
                            f"got {v!r:.60}")
    for i, c in enumerate(obj["Context"]):
        if not isinstance(c, str):
            raise DataError(f"{where}: field 'Context[{i}]' must be a string, got {c!r:.60}")
    if obj["Turn_no"] < 1:
        raise DataError(f"{where}: field 'Turn_no' is {obj['Turn_no']}, turns are numbered from 1")
    if not obj["Question"].strip():
        raise DataError(f"{where}: field 'Question' is empty")
    return obj


# ---- tasks and corpus ---------------------------------------------------------------------------------


def read_turns(path: str | Path, split: str) -> tuple[list[dict], str]:
    """Every turn object of the split, validated, with ``_line`` (where it starts); and the label
    of the member read (``<zip>[<member>]``)."""
    text, label = _open_member(Path(path), split)
    out, seen = [], {}
    for line, obj in iter_turn_objects(text, label):
        where = f"{label}:{line}: turn object {len(out)}"
        t = _turn(obj, where)
        key = (t["Conversation_no"], t["Turn_no"])
        if key in seen:
            raise DataError(f"{where}: Conversation_no {key[0]} Turn_no {key[1]} repeats the turn on line {seen[key]}")
        seen[key] = line
        out.append({**t, "_line": line})
    return out, label


def load_qrecc(path: str | Path, *, split: str, benchmark: str) -> tuple[list[TurnTask], list[Passage], dict]:
    """(TurnTasks, answer passages, counted report) of one split of the release zip (module doc)."""
    if split not in SPLITS:
        raise ConfigError(f"qrecc: split must be one of {', '.join(SPLITS)}, not {split!r}")
    turns, label = read_turns(path, split)
    stats: Counter = Counter()
    by_conv: dict[int, dict[int, dict]] = {}
    for t in turns:
        by_conv.setdefault(t["Conversation_no"], {})[t["Turn_no"]] = t
    tasks, passages = [], []
    for conv in sorted(by_conv):
        ts = by_conv[conv]
        numbers = sorted(ts)
        n_turns = numbers[-1]
        stats["turn_gaps"] += n_turns - len(numbers)
        for k in numbers:
            t = ts[k]
            ctx = t["Context"]
            if len(ctx) != 2 * (k - 1):
                stats["context_length_mismatch"] += 1
            # the context should repeat the conversation's earlier questions and answers
            for j in range(1, min(k, len(ctx) // 2 + 1)):
                earlier = ts.get(j)
                if earlier is not None and (ctx[2 * (j - 1)].strip() != earlier["Question"].strip()
                                            or ctx[2 * (j - 1) + 1].strip() != earlier["Answer"].strip()):
                    stats["context_differs_from_earlier_turns"] += 1
                    break
            tid = f"{conv}_{k}"
            answer, rewrite = t["Answer"].strip(), t["Rewrite"].strip()
            stats["unanswered"] += not answer
            stats["without_rewrite"] += not rewrite
            stats[f"source:{t['Conversation_source']}"] += 1
            history = [{"role": "user" if i % 2 == 0 else "assistant", "text": c} for i, c in enumerate(ctx)]
            tasks.append(TurnTask.from_dict({
                "task_id": tid, "benchmark": benchmark, "conversation_id": str(conv), "turn": k,
                "history": history, "question": t["Question"], "rewrite": rewrite or None,
                "reference_answers": [answer] if answer else [], "gold_docs": {tid: 1} if answer else {},
                "labels": {"domain": DOMAIN, "split": split, "source": t["Conversation_source"],
                           "answer_url": t["Answer_URL"], "turn": k, "first_turn": k == 1, "n_turns": n_turns}},
                where=f"{label}:{t['_line']}"))
            if answer:
                passages.append(Passage(doc_id=tid, title="", text=answer, source=DOMAIN))
    report = {"file": label, "split": split, "tasks": len(tasks), "conversations": len(by_conv),
              "tasks_with_gold": len(passages), "unanswered": stats["unanswered"],
              "without_rewrite": stats["without_rewrite"], "turn_gaps": stats["turn_gaps"],
              "context_length_mismatch": stats["context_length_mismatch"],
              "context_differs_from_earlier_turns": stats["context_differs_from_earlier_turns"],
              "sources": {k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("source:")},
              "positives": "answer", "corpus_passages": len(passages)}
    return tasks, passages, report


@register_benchmark_loader("qrecc")
class Qrecc(BenchmarkLoader):
    """QReCC's release (module docstring). Config: ``{kind: qrecc, split: train|test, revision (a
    commit of apple/ml-qrecc), files: {qrecc_data.zip: {local: path} | {url, sha256}}}``."""

    KEYS = ("kind", "domains", "split", "revision", "files")

    def check(self, name, spec, source):
        key = f"benchmarks.{name}"
        self.check_keys(name, spec, source)
        if spec.get("split", "train") not in SPLITS:
            raise ConfigError(f"{source}: invalid config key '{key}.split': {spec['split']!r} is not one of "
                              f"{', '.join(SPLITS)}")
        if "domains" in spec and list(spec["domains"] or []) != [DOMAIN]:
            raise ConfigError(f"{source}: invalid config key '{key}.domains': QReCC has one domain, [{DOMAIN}]")
        files = spec.get("files") or {}
        if not isinstance(files, dict) or set(files) - {ZIP}:
            raise ConfigError(f"{source}: invalid config key '{key}.files': only {ZIP} (the release zip) may be "
                              "given, as {local: path} or {url, sha256}")
        for n, f in files.items():
            if not isinstance(f, dict) or not ({"local", "url"} & set(f)):
                raise ConfigError(f"{source}: invalid config key '{key}.files.{n}': give {{local: path}} or "
                                  "{url, sha256}")
        self.check_files_given(name, spec, source, REPO, " (the release zip dataset/qrecc_data.zip)")

    def domains(self, spec):
        return [DOMAIN]

    def raw_names(self, spec):
        return [ZIP]

    def raw_files(self, spec):
        from convrag.sources import github_file

        out = {ZIP: github_file(REPO, spec.get("revision", ""), REPO_PATH)}
        out.update(spec.get("files") or {})
        return out

    def task_inputs(self, spec):
        return [ZIP]

    def corpus_inputs(self, spec, domain):
        return [ZIP]

    def tasks(self, name, spec, files):
        tasks, _, report = load_qrecc(files[ZIP], split=spec.get("split", "train"), benchmark=name)
        return tasks, report

    def corpus(self, name, spec, domain, files):
        if domain != DOMAIN:
            raise DataError(f"benchmark {name}: unknown domain '{domain}' (QReCC has one, '{DOMAIN}')")
        return load_qrecc(files[ZIP], split=spec.get("split", "train"), benchmark=name)[1]
