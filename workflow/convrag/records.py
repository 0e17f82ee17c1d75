"""The common records every loader produces and every stage reads (ARCHITECTURE section 3).

Each record is a dataclass with ``to_dict``/``from_dict``; ``from_dict`` validates against
the JSON schema in ``workflow/schemas/records/<name>.schema.json`` so a bad record is
rejected with the file, line and field that is wrong.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TypeVar

import jsonschema
from referencing import Registry, Resource

from convrag.errors import DataError
from convrag.io import iter_jsonl, write_jsonl
from convrag.resources import REPO_ROOT

SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas" / "records"

T = TypeVar("T", bound="Record")


@functools.lru_cache(maxsize=None)
def _registry() -> Registry:
    resources = []
    for f in sorted(SCHEMA_DIR.glob("*.schema.json")):
        resources.append((f.name, Resource.from_contents(json.loads(f.read_text()))))
    return Registry().with_resources(resources)


@functools.lru_cache(maxsize=None)
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = _registry().contents(f"{name}.schema.json")
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=_registry())


class Record:
    SCHEMA: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[T], d: dict[str, Any], where: str = "") -> T:
        errors = sorted(_validator(cls.SCHEMA).iter_errors(d), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            loc = "/".join(str(p) for p in e.path) or "<record>"
            raise DataError(f"{where or cls.__name__}: invalid {cls.__name__} field '{loc}': {e.message}")
        return cls._build(d)

    @classmethod
    def _build(cls: type[T], d: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Passage(Record):
    SCHEMA = "passage"
    doc_id: str
    title: str
    text: str
    source: str = ""


@dataclass
class Question(Record):
    SCHEMA = "question"
    qid: str
    dataset: str
    question: str
    answers: list[str]
    supporting_doc_ids: list[str]
    hops: int
    type: str = ""
    # Sub-questions or clues from the source in dependency order (MuSiQue's
    # question_decomposition, the mini world's relation chain); optional.
    decomposition: list[str] = field(default_factory=list)
    # Bridge values reached on the way to the answer (MuSiQue step answers, 2Wiki evidence
    # objects, HotpotQA bridge titles, the mini world's chain entities): shards must not
    # expose them, or the conversation skips hops.
    intermediate_answers: list[str] = field(default_factory=list)


@dataclass
class Shard(Record):
    SCHEMA = "shard"
    shard_id: int
    text: str


@dataclass
class ShardSet(Record):
    SCHEMA = "shardset"
    qid: str
    shards: list[dict]
    checks: dict[str, Any] = field(default_factory=dict)
    review_status: str = "auto"
    passed: bool = True
    method: str = "llm"


@dataclass
class Turn(Record):
    SCHEMA = "turn"
    role: str
    text: str
    shard_id: int | None = None
    query: str | None = None
    retrieved: list[dict] = field(default_factory=list)
    category: str | None = None
    answer: str | None = None
    answered: bool | None = None
    # user turns: False when the simulator's rephrasing failed its guard and the shard was
    # sent verbatim; None for verbatim-by-design turns (first shard, FULL, CONCAT, nudges)
    rephrased: bool | None = None


@dataclass
class Conversation(Record):
    SCHEMA = "conversation"
    conv_id: str
    study: str
    qid: str
    dataset: str
    condition: str
    policy: str
    retriever: str
    model: str
    run: int
    turns: list[dict] = field(default_factory=list)
    final_answer: str | None = None
    answered: bool = False
    n_unanswered_turns: int = 0
    # the LLM judge's verdict on final_answer: {correct, method, parsed, raw} (judges.correctness)
    judgment: dict | None = None


@dataclass
class TurnTask(Record):
    """One evaluated turn of a conversation with a fixed history (MTRAG-UN, CORAL, RECOR):
    the reader answers ``question`` after ``history`` (earlier turns, ``role`` user or
    assistant). ``gold_docs``: graded qrels of the turn (doc id -> relevance); ``rewrite``:
    the benchmark's standalone rewrite if it ships one; ``contexts``: passages the benchmark
    gives with the task (its reference setting); ``labels``: answerability, domain,
    multi-turn type, ... as the benchmark names them."""

    SCHEMA = "turn_task"
    task_id: str
    benchmark: str
    conversation_id: str
    turn: int
    history: list[dict]
    question: str
    reference_answers: list[str] = field(default_factory=list)
    gold_docs: dict[str, int] = field(default_factory=dict)
    rewrite: str | None = None
    contexts: list[dict] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)


def read_records(path: str | Path, cls: type[T]) -> list[T]:
    """Read a JSONL of ``cls`` records; errors name the file and line."""
    return [cls.from_dict(rec, where=f"{path}:{lineno}") for lineno, rec in iter_jsonl(path)]


def write_records(path: str | Path, records: Iterable[Record | dict]) -> None:
    write_jsonl(path, records)
