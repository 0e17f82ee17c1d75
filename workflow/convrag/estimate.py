"""Sizing a lic_rag grid before running it: conversations, LLM calls, tokens, GPU-hours and
a SLURM layout, for any config, from the token counts a finished run measured.

Method (docs/scaling.md has the reasoning, the assumptions and the numbers):

1. **Measure.** A simulate job (one per dataset x model x retriever x question chunk) runs
   every (condition, policy) cell of its retriever in lockstep, then labels its assistant
   turns (turn classifier) and judges its final answers (answer judge), and writes
   ``<retriever>/chunk<i>.accounting.json``: the Engine totals of each role (``assistant``,
   ``user_simulator``, ``classifier``, ``judge``, and ``retriever`` for a retriever that calls
   an LLM) and, under ``cells``, what each cell's conversations asked of the assistant and the
   user simulator. Cells are pooled over jobs by (condition, policy, retrieval closed|open)
   into per-conversation means (ratio of sums). The conversation files of the cells
   (``<retriever>/<COND>_<policy>/chunk<i>.jsonl``) add, per cell, the retriever's LLM work
   (the ``retrieval_cost`` of every assistant turn, pooled per retriever *kind*: ToG-2 and PoG
   make several calls per query, HippoRAG one), the assistant turns and those with a
   non-empty reply (one classifier call each; an empty reply is labelled ``missing`` by rule),
   the conversations the LLM judged (``judgment.method == "llm"``), and how many earlier
   replies each prompt carries (for the ``long`` scenario). The job's ``classifier`` and
   ``judge`` accounting over those counts give tokens per classified turn and per judged
   conversation (pooled over the jobs whose conversation files are all there). Shard,
   knowledge-graph and RAPTOR-build accounting give means per question and per corpus passage.
2. **Plan.** The target config's own grid (``convrag.config.simulate_jobs``, the function the
   Snakefile uses) gives every job, its model, retriever and cells, and its conversations per
   cell (questions in the chunk x runs; every question is assumed to pass sharding, so this
   is an upper bound). One model load per job and model the job runs (assistant, user
   simulator, retriever LLM, classifier, judge: a model serving several roles loads once).
3. **Multiply.** Per role: the assistant's tokens go to the job's model, the user
   simulator's to the user model, the retriever's to the retriever's LLM, the classifier's
   (per classified assistant turn of each written cell) and the judge's (per judged
   conversation) to their models, within each simulate job; the knowledge graph's (per
   passage, once per corpus) to the KG model, RAPTOR's summaries (per passage, once per corpus)
   to its LLM, sharding (per question) to the sharding model.
4. **Time.** GPU-seconds = prefill tokens / prefill rate + decode tokens / decode rate, rates
   per GPU from a FLOP model (``Throughput``: efficiency x peak bf16 FLOP/s of the registry's
   gpu_model / (2 x params)), divided by a tensor-parallel efficiency, plus the model loads.
   A job's wall time is the sum over its cells, labelling included (they share the job's
   GPUs). These are *assumptions*, not measurements; override them on the command line.

Two scenarios bracket the completion lengths: ``measured`` uses the measured tokens per call
(capped at the target's max_tokens); ``long`` assumes every assistant, user-simulator,
classifier, judge, sharding, OpenIE and RAPTOR-summary reply reaches the target config's
max_tokens, including the longer histories that follow (so no assistant reply is empty and
every assistant turn is classified). Retriever calls keep their measured lengths in both
(their budgets are per call type inside each retriever).

Cache: the backend figures are re-estimated for a *cold* cache (``cold_backend``): in-job
duplicates are answered once, as in any run, but answers a job found in the LLM cache (from an
earlier run, or another job) count as backend work, so a warm-cache measured run does not make
the target look cheaper than a fresh run is.

Only the job layout is read: per-cell accounting files of the old layout (one job per cell)
are refused with an error naming the file.
"""

from __future__ import annotations

import glob
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from convrag.config import REPO_ROOT, load_config, retriever_kind, retriever_llm
from convrag.studies.lic_rag.plan import MULTI_TURN, simulate_jobs
from convrag.studies.lic_rag.plan import role_model as _role_model
from convrag.errors import ConfigError, DataError
from convrag.retrieval import RETRIEVERS, capabilities


def role_model(config, role):
    return _role_model(config["lic_rag"], role)


def uses_llm(kind):
    return capabilities(kind).uses_llm


def needs_graph(kind):
    return capabilities(kind).needs_graph

DEFAULT_ACCOUNTING_GLOB = "results/lic_rag/conversations/**/chunk*.accounting.json"
DEFAULT_SHARD_ACCOUNTING_GLOB = "results/lic_rag/shards/*/accounting.json"
DEFAULT_GRAPH_ACCOUNTING_GLOB = "results/graphs/*/accounting.json"
DEFAULT_INDEX_MANIFEST_GLOB = "results/indexes/*/*/manifest.json"
# the config of the measured run (retriever name -> kind, top_k shown): the default run's
DEFAULT_MEASURED_CONFIG = REPO_ROOT / "config" / "config.yaml"

CELL_ROLES = ("assistant", "user_simulator")
# job-level roles that label the job's written conversations (judges.label), measured per unit
LABEL_ROLES = ("classifier", "judge")
JUDGE_METHODS = ("no_answer", "exact_match", "llm")
CONDITIONS = ("FULL", "CONCAT", "SHARDED", "RECAP", "SNOWBALL")
# RAPTOR calls its LLM only to build the tree (summaries); at query time its costs are zeros
BUILD_TIME_ONLY_LLM = frozenset({"raptor"})

# Peak dense bf16 tensor throughput per GPU, TFLOP/s (NVIDIA datasheets; V100 has no bf16:
# its fp16 figure). Keys are the registry's gpu_model values.
PEAK_BF16_TFLOPS = {
    "a100": 312.0,
    "h100": 989.0,
    "h200": 989.0,
    "b200": 2250.0,
    "l40s": 362.0,
    "a40": 150.0,
    "a10": 125.0,
    "l4": 121.0,
    "v100": 125.0,
}

SIZE_CLASSES = ((10.0, "small (<=10B)"), (40.0, "medium (10-40B)"), (math.inf, "large (>40B)"))
SCENARIOS = ("measured", "long")


def query_time_llm(kind: str) -> bool:
    """Whether a retriever kind calls its LLM for every query (the graph retrievers)."""
    return uses_llm(kind) and kind not in BUILD_TIME_ONLY_LLM


@dataclass
class Throughput:
    """The GPU-time model. Every number here is an assumption (docs/scaling.md).

    Per GPU, tokens/s = efficiency x peak bf16 FLOP/s / (2 x params): a forward pass costs
    ~2 FLOP per parameter per token. Prefill (prompt) tokens run compute-bound in large
    batches (``prefill_mfu``); decode (completion) tokens are limited by memory bandwidth and
    reach a lower fraction (``decode_mfu``, chosen to match published vLLM offline
    throughput of 8B models: ~3.4k output tok/s on one A100, ~12k on one H100).
    Tensor parallelism over n GPUs keeps ``tp_efficiency[n]`` of n x one GPU. A job loads each
    of its models once: ``load_fixed_s`` (engine start, CUDA graphs) + bf16 weights
    (2 bytes/param) read at ``load_gb_per_s``. Prefix caching, speculative decoding and
    quantisation are not modelled (all would lower the estimate).
    """

    prefill_mfu: float = 0.40
    decode_mfu: float = 0.15
    tp_efficiency: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 0.9, 4: 0.8, 8: 0.7})
    load_fixed_s: float = 90.0
    load_gb_per_s: float = 1.0
    default_gpu: str = "a100"

    def peak_flops(self, gpu_model: str | None) -> float:
        key = (gpu_model or self.default_gpu).lower()
        return PEAK_BF16_TFLOPS.get(key, PEAK_BF16_TFLOPS[self.default_gpu]) * 1e12

    def rates(self, params_b: float, gpu_model: str | None) -> tuple[float, float]:
        """(prefill, decode) tokens/s per GPU."""
        per_token = 2.0 * params_b * 1e9
        peak = self.peak_flops(gpu_model)
        return self.prefill_mfu * peak / per_token, self.decode_mfu * peak / per_token

    def tp_eff(self, n: int) -> float:
        if n in self.tp_efficiency:
            return self.tp_efficiency[n]
        below = [k for k in self.tp_efficiency if k <= n]
        return self.tp_efficiency[max(below)] if below else 1.0

    def gpu_seconds(self, prompt_tokens: float, completion_tokens: float, params_b: float,
                    gpu_model: str | None, gpus: int) -> float:
        """GPU-seconds (all GPUs of the job together) to process these tokens."""
        pre, dec = self.rates(params_b, gpu_model)
        return (prompt_tokens / pre + completion_tokens / dec) / self.tp_eff(max(gpus, 1))

    def load_seconds(self, params_b: float) -> float:
        return self.load_fixed_s + 2.0 * params_b / self.load_gb_per_s


# ---- counters ---------------------------------------------------------------------------


@dataclass
class Tokens:
    """Additive LLM counters of one role (the accounting's names)."""

    requests: float = 0.0  # calls the grid asks for
    calls: float = 0.0  # calls that reach a backend (after in-job dedupe; cold cache)
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    backend_prompt_tokens: float = 0.0
    backend_completion_tokens: float = 0.0

    @classmethod
    def from_accounting(cls, d: dict) -> "Tokens":
        return cls(**{f.name: float(d.get(f.name, 0) or 0) for f in fields(cls)})

    def add(self, other: "Tokens", scale: float = 1.0) -> "Tokens":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + scale * getattr(other, f.name))
        return self

    def scaled(self, scale: float) -> "Tokens":
        return Tokens().add(self, scale)

    def to_dict(self, digits: int = 1) -> dict[str, float]:
        return {k: round(v, digits) for k, v in asdict(self).items()}


def sum_tokens(items: Iterable[Tokens]) -> Tokens:
    total = Tokens()
    for t in items:
        total.add(t)
    return total


def cold_backend(acc: dict, misses: Tokens | None = None) -> Tokens:
    """One Engine accounting with its backend figures as a cold cache would give them.

    A cold run sends every distinct request of a job to the backend once: ``calls`` becomes
    ``unique_requests``. Tokens: the measured backend tokens cover the distinct requests that
    missed the cache; the distinct cache hits are added at their measured size. ``misses``
    (the sum of a job's per-cell figures, where ``calls`` and ``backend_*`` count every
    uncached request, duplicates included) gives the hits' size exactly: tokens of all
    requests minus those of the uncached ones, times the share of distinct keys among the
    cached requests. Without it, distinct hits are assumed as long as the distinct misses
    (or, when nothing missed, as the average request). Exact when nothing was cached.
    """
    t = Tokens.from_accounting(acc)
    hits = float(acc.get("cache_hits", 0) or 0)
    unique = float(acc.get("unique_requests", t.calls + hits) or 0)
    if misses is not None:
        cached_requests = t.requests - misses.calls
        share = hits / cached_requests if cached_requests > 0 else 0.0
        bp = t.backend_prompt_tokens + max(t.prompt_tokens - misses.backend_prompt_tokens, 0.0) * share
        bc = t.backend_completion_tokens + max(t.completion_tokens - misses.backend_completion_tokens, 0.0) * share
    elif t.calls > 0:
        bp, bc = t.backend_prompt_tokens * unique / t.calls, t.backend_completion_tokens * unique / t.calls
    elif t.requests > 0:
        bp, bc = t.prompt_tokens * unique / t.requests, t.completion_tokens * unique / t.requests
    else:
        bp = bc = 0.0
    t.calls, t.backend_prompt_tokens, t.backend_completion_tokens = unique, bp, bc
    return t


def _ratios(total: Tokens) -> tuple[float, float, float]:
    """(calls, backend prompt, backend completion) per request / prompt / completion token."""
    return (total.calls / total.requests if total.requests else 1.0,
            total.backend_prompt_tokens / total.prompt_tokens if total.prompt_tokens else 1.0,
            total.backend_completion_tokens / total.completion_tokens if total.completion_tokens else 1.0)


def _asked(requests: float, prompt: float, completion: float, ratios: tuple[float, float, float]) -> Tokens:
    """Asked-for counters, with backend figures in the job's (cold-cache) ratios."""
    fc, fp, fk = ratios
    return Tokens(requests, requests * fc, prompt, completion, prompt * fp, completion * fk)


@dataclass
class Cell:
    """Measured totals of one (condition, policy, retrieval) cell, pooled over jobs."""

    jobs: int = 0
    conversations: int = 0
    roles: dict[str, Tokens] = field(default_factory=lambda: {r: Tokens() for r in CELL_ROLES})
    # from the conversation files (where read): their conversations, assistant turns (what the
    # classifier labels; a RECAP file repeats its SHARDED twin's turns) and those with a
    # non-empty reply (one classifier call each), and per charged call the number of earlier
    # assistant replies in its prompt
    file_conversations: int = 0
    assistant_turns: int = 0
    classified_turns: int = 0
    assistant_history: int = 0
    user_history: int = 0
    # the judge: conversations of the files that carry a judgment, and those the LLM judged
    judgment_conversations: int = 0
    judged_conversations: int = 0

    def per_conversation(self) -> dict[str, Tokens]:
        n = max(self.conversations, 1)
        return {r: t.scaled(1.0 / n) for r, t in self.roles.items()}

    def turns_per_conversation(self) -> float | None:
        return self.assistant_turns / self.file_conversations if self.file_conversations else None

    def classified_per_conversation(self) -> float | None:
        return self.classified_turns / self.file_conversations if self.file_conversations else None

    def judged_share(self) -> float | None:
        """Share of conversations the LLM judges (method llm), among those with a judgment."""
        return self.judged_conversations / self.judgment_conversations if self.judgment_conversations else None

    def history_per_conversation(self) -> tuple[float, float] | None:
        if not self.file_conversations:
            return None
        return self.assistant_history / self.file_conversations, self.user_history / self.file_conversations


@dataclass
class RetrieverCell:
    """A retriever kind's LLM work in one (condition, policy) cell, from the conversation files."""

    jobs: int = 0
    conversations: int = 0
    queries: int = 0  # charged assistant turns (one retrieval each)
    tokens: Tokens = field(default_factory=Tokens)  # requests = the retriever's llm_calls
    parse_failures: int = 0

    def per_conversation(self) -> Tokens:
        return self.tokens.scaled(1.0 / max(self.conversations, 1))


@dataclass
class PerUnit:
    """A stage measured per unit of work (question, classified assistant turn, judged
    conversation, passage); ``files``: the accounting files (or simulate jobs) it pools."""

    unit: str
    files: int = 0
    units: int = 0
    tokens: Tokens = field(default_factory=Tokens)

    def per_unit(self) -> Tokens | None:
        return self.tokens.scaled(1.0 / self.units) if self.units else None

    def to_dict(self) -> dict[str, Any]:
        per = self.per_unit()
        return {"files": self.files, "unit": self.unit, "units": self.units,
                "per_unit": None if per is None else per.to_dict(3)}


def cell_key(condition: str, policy: str, closed: bool) -> tuple[str, str, str]:
    return (condition, policy, "closed" if closed else "open")


def _key_str(key: tuple[str, ...]) -> str:
    return "/".join(key)


# ---- reading a measured run -------------------------------------------------------------


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read {what}: {e}") from e


def _read_jsonl(path: Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}:{i}: not valid JSON: {e}") from e
    return out


@dataclass
class FileStats:
    """What one cell's conversation file says (see ``scan_conversations``)."""

    conversations: int = 0
    assistant_turns: int = 0
    classified: int = 0  # assistant turns with a non-empty reply: one classifier call each
    unlabelled: int = 0  # assistant turns without 'category_raw' ...
    first_unlabelled: int | None = None  # ... and the first record that has one
    judgment_conversations: int = 0  # conversations with a 'judgment'
    judged: int = 0  # ... whose method is llm
    judge_keys: set = field(default_factory=set)  # distinct (dataset, qid, final_answer) of those
    first_unjudged: int | None = None  # the first record without a judgment
    assistant_history: int = 0
    user_history: int = 0
    queries: int = 0  # charged assistant turns that retrieved (a query was sent)
    with_cost: int = 0  # ... of them with a retrieval_cost
    retrieval: Tokens = field(default_factory=Tokens)  # asked for: requests = llm_calls
    parse_failures: int = 0
    shown: int = 0  # passages shown over the open-retrieval turns ...
    open_turns: int = 0  # ... and those turns


def scan_conversations(convs: list[dict], condition: str, top_k: int | None, where: str = "") -> FileStats:
    """Per-cell counts from its conversation records.

    *Charged* calls are those the cell's accounting pays for: every assistant turn, except in
    a RECAP conversation, whose turns before the recap repeat its SHARDED twin and only the
    reply to the recap turn (the user turn with ``recap: true``) is its own. A user turn with
    a ``rephrased`` key came from the user simulator, whose prompt holds the conversation so
    far. Passages shown per turn: the first ``top_k`` of ``retrieved`` (which holds recall_k).
    Labels (judges.label): every assistant turn of the file is labelled, a RECAP file's
    repeated turns too; a reply that is empty after stripping is labelled ``missing`` by rule,
    every other one costs a classifier call (counted by the reply, not by ``category_raw``,
    which is also empty when the classifier itself returned nothing). The judge calls the LLM
    for ``judgment.method == "llm"``, once per distinct (question, gold answers, final answer).
    """
    s = FileStats()
    for i, conv in enumerate(convs, start=1):
        turns = conv.get("turns") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            raise DataError(f"{where}: record {i}: no 'turns' list")
        s.conversations += 1
        j = conv.get("judgment")
        if isinstance(j, dict):
            method = j.get("method")
            if method not in JUDGE_METHODS:
                raise DataError(f"{where}: record {i}: judgment.method is {method!r}, not one of "
                                f"{', '.join(JUDGE_METHODS)}")
            s.judgment_conversations += 1
            if method == "llm":
                s.judged += 1
                s.judge_keys.add((conv.get("dataset"), conv.get("qid"), conv.get("final_answer")))
        elif s.first_unjudged is None:
            s.first_unjudged = i
        replies = 0
        after_recap = False
        for t in turns:
            if t.get("role") == "user":
                if "rephrased" in t and condition != "RECAP":
                    s.user_history += replies
                after_recap = bool(t.get("recap"))
                continue
            s.assistant_turns += 1
            if (t.get("text") or "").strip():
                s.classified += 1
            if "category_raw" not in t:
                s.unlabelled += 1
                if s.first_unlabelled is None:
                    s.first_unlabelled = i
            if condition != "RECAP" or after_recap:
                s.assistant_history += replies
                if t.get("query") is not None:
                    s.queries += 1
                    retrieved = len(t.get("retrieved") or [])
                    s.shown += retrieved if top_k is None else min(retrieved, top_k)
                    s.open_turns += 1
                cost = t.get("retrieval_cost")
                if isinstance(cost, dict):
                    s.with_cost += 1
                    s.retrieval.add(Tokens(requests=float(cost.get("llm_calls", 0) or 0),
                                           prompt_tokens=float(cost.get("prompt_tokens", 0) or 0),
                                           completion_tokens=float(cost.get("completion_tokens", 0) or 0)))
                    s.parse_failures += int(cost.get("parse_failures", 0) or 0)
            replies += 1
    return s


@dataclass
class CellRecord:
    """One cell of one measured job."""

    conversations: int
    roles: dict[str, Tokens]
    stats: FileStats | None = None  # None: no conversation file beside the accounting
    retriever: Tokens | None = None  # a query-time-LLM retriever's tokens (backend: cold ratios)


@dataclass
class JobAccounting:
    path: Path
    dataset: str
    model: str
    retriever: str
    kind: str
    conversations: int
    cells: dict[tuple[str, str], CellRecord]
    notes: list[str] = field(default_factory=list)
    warm_cache: bool = False  # some role found answers in the LLM cache
    # classifier / judge: (units, cold-cache tokens) over the whole job: classified assistant
    # turns, judged conversations; None when the job has no such accounting, or a conversation
    # file is missing (the units come from the files)
    labels: dict[str, tuple[int, Tokens] | None] = field(default_factory=dict)

    @property
    def closed(self) -> bool:
        return self.kind == "closed_book"


def _retriever_kind(name: str, kinds: dict[str, str] | None, path: Path, source: str) -> str:
    if kinds is not None and name in kinds:
        return kinds[name]
    if name in RETRIEVERS:
        return name
    raise DataError(f"{path}: retriever '{name}' is not in the measured run's config ({source}) and is not a "
                    f"retriever kind ({', '.join(RETRIEVERS)}): pass the measured run's config")


def read_simulate_accounting(path: str | Path, retriever_kinds: dict[str, str] | None = None,
                             top_k: int | None = None, source: str = "no config") -> JobAccounting:
    """One simulate job: its cells with conversations, tokens per role, what the cells'
    conversation files add, and its classifier and judge per unit (see ``JobAccounting``).
    The path carries the job: .../<dataset>/<model>/<retriever>/chunk<i>.accounting.json."""
    path = Path(path)
    acc = _read_json(path, "accounting")
    if path.parent.name.partition("_")[0] in CONDITIONS:
        raise DataError(f"{path}: a per-cell accounting file of the old simulate layout (one job per "
                        "condition x policy); the estimate reads only the job layout "
                        "(.../<retriever>/chunk<i>.accounting.json with 'cells'): re-run the simulate stage")
    missing = [k for k in ("assistant", "cells", "job") if not isinstance(acc, dict) or k not in acc]
    if missing:
        raise DataError(f"{path}: not a simulate job accounting file (missing key(s) {', '.join(missing)}; expected "
                        ".../<retriever>/chunk<i>.accounting.json with 'assistant', 'user_simulator', 'cells', 'job')")
    if not isinstance(acc["cells"], dict) or not acc["cells"]:
        raise DataError(f"{path}: key 'cells' is empty or not a mapping")
    retriever, model, dataset = path.parent.name, path.parent.parent.name, path.parent.parent.parent.name
    chunk = path.name[len("chunk"):-len(".accounting.json")]
    kind = _retriever_kind(retriever, retriever_kinds, path, source)
    notes: list[str] = []

    raw: dict[tuple[str, str], dict] = {}
    for name, c in acc["cells"].items():
        cond, sep, pol = name.partition("_")
        if not sep or cond not in CONDITIONS or not pol:
            raise DataError(f"{path}: cells.{name}: not <CONDITION>_<policy> (conditions: {', '.join(CONDITIONS)})")
        if not isinstance(c, dict) or not isinstance(c.get("conversations"), int):
            raise DataError(f"{path}: cells.{name}.conversations is missing or not an integer")
        raw[(cond, pol)] = c

    warm = False
    ratios: dict[str, tuple[float, float, float]] = {}
    for role in CELL_ROLES:
        per_cell = [Tokens.from_accounting(c.get(role) or {}) for c in raw.values()]
        misses = sum_tokens(per_cell)
        if role not in acc:
            if misses.requests:
                raise DataError(f"{path}: cells carry '{role}' figures but the job has no '{role}' accounting")
            ratios[role] = (1.0, 1.0, 1.0)
            continue
        warm = warm or bool(acc[role].get("cache_hits"))
        ratios[role] = _ratios(cold_backend(acc[role], misses))
        asked = float(acc[role].get("requests", 0) or 0)
        if round(misses.requests) != round(asked):
            notes.append(f"{path}: its cells account for {misses.requests:.0f} of the job's {asked:.0f} {role} "
                         "requests (a RECAP cell whose SHARDED twin is not a cell?)")
    query_llm = query_time_llm(kind)
    r_ratios = (1.0, 1.0, 1.0)
    if query_llm:
        if "retriever" in acc:
            warm = warm or bool(acc["retriever"].get("cache_hits"))
            r_ratios = _ratios(cold_backend(acc["retriever"]))
        else:
            notes.append(f"{path}: retriever '{retriever}' ({kind}) calls an LLM but the job has no 'retriever' "
                         "accounting: its backend share is taken as 1")

    cells: dict[tuple[str, str], CellRecord] = {}
    charged_llm_calls, all_files = 0.0, True
    for (cond, pol), c in raw.items():
        roles = {}
        for role in CELL_ROLES:
            t = Tokens.from_accounting(c.get(role) or {})
            roles[role] = _asked(t.requests, t.prompt_tokens, t.completion_tokens, ratios[role])
        rec = CellRecord(conversations=c["conversations"], roles=roles)
        conv_path = path.parent / f"{cond}_{pol}" / f"chunk{chunk}.jsonl"
        if conv_path.exists():
            stats = scan_conversations(_read_jsonl(conv_path), cond, top_k, str(conv_path))
            if stats.conversations != rec.conversations:
                raise DataError(f"{conv_path}: {stats.conversations} conversations, but {path} says "
                                f"cells.{cond}_{pol}.conversations = {rec.conversations} (a stale file?)")
            rec.stats = stats
            if query_llm:
                if stats.with_cost < stats.queries:
                    notes.append(f"{conv_path}: {stats.queries - stats.with_cost} of {stats.queries} retrieving "
                                 "assistant turns carry no retrieval_cost: their retriever tokens are missing")
                r = stats.retrieval
                rec.retriever = _asked(r.requests, r.prompt_tokens, r.completion_tokens, r_ratios)
                charged_llm_calls += r.requests
        else:
            all_files = False
            what = "assistant-turn, classifier-call or judged-conversation counts" + (
                " or retriever tokens" if query_llm else "")
            notes.append(f"{conv_path} is missing: no {what} for {cond}_{pol} from this job")
        cells[(cond, pol)] = rec
    if query_llm and all_files and "retriever" in acc:
        asked = float(acc["retriever"].get("requests", 0) or 0)
        if round(charged_llm_calls) != round(asked):
            notes.append(f"{path}: the conversation files' retrieval_cost sum to {charged_llm_calls:.0f} retriever "
                         f"LLM calls, the job's retriever accounting to {asked:.0f}")
    labels: dict[str, tuple[int, Tokens] | None] = {}
    for role in LABEL_ROLES:
        labels[role] = None
        if role not in acc:
            continue
        if not all_files:
            notes.append(f"{path}: its '{role}' accounting is not used: conversation files of the job are missing "
                         "(they give its units of work)")
            continue
        for (cond, pol), rec in cells.items():
            s = rec.stats
            conv_path = path.parent / f"{cond}_{pol}" / f"chunk{chunk}.jsonl"
            if role == "classifier" and s.unlabelled:
                raise DataError(f"{conv_path}: record {s.first_unlabelled}: an assistant turn has no 'category_raw', "
                                f"but {path} has a 'classifier' accounting (a stale conversation file?)")
            if role == "judge" and s.first_unjudged is not None:
                raise DataError(f"{conv_path}: record {s.first_unjudged}: no 'judgment', but {path} has a 'judge' "
                                "accounting (a stale conversation file?)")
        warm = warm or bool(acc[role].get("cache_hits"))
        stats = [rec.stats for rec in cells.values()]
        if role == "classifier":
            units = sum(s.classified for s in stats)
            expected, what = units, "assistant turns with a non-empty reply"
        else:
            units = sum(s.judged for s in stats)
            expected = len(set().union(*(s.judge_keys for s in stats)))
            what = "distinct (question, final answer) pairs with judgment.method llm"
        asked = float(acc[role].get("requests", 0) or 0)
        if round(asked) != expected:
            notes.append(f"{path}: its '{role}' accounting has {asked:.0f} requests, its conversation files "
                         f"{expected} {what}")
        labels[role] = (units, cold_backend(acc[role]))
    n_conv = int(acc["job"].get("conversations", sum(c.conversations for c in cells.values())) or 0)
    return JobAccounting(path, dataset, model, retriever, kind, n_conv, cells, notes, warm, labels)


def read_stage_accounting(path: str | Path, records_name: str | None = None) -> tuple[int, Tokens, bool]:
    """A one-job stage (shards): (units, cold-cache tokens, warm cache?). Units = records of
    the output file beside the accounting: ``records_name`` (shards.jsonl), or the
    accounting's own name with ``.jsonl``."""
    path = Path(path)
    acc = _read_json(path, "accounting")
    if not isinstance(acc, dict) or "requests" not in acc:
        raise DataError(f"{path}: not an Engine accounting file (no key 'requests')")
    out = path.with_name(records_name or path.name.replace(".accounting.json", ".jsonl"))
    if not out.exists():
        raise DataError(f"{path}: {out.name} beside it is missing (it gives the units of work)")
    return len(_read_jsonl(out)), cold_backend(acc), bool(acc.get("cache_hits"))


def read_shard_accounting(path: str | Path) -> tuple[int, Tokens]:
    """One shard job: (questions, tokens); questions = records of shards.jsonl beside it."""
    n, tok, _ = read_stage_accounting(path, "shards.jsonl")
    return n, tok


def read_graph_accounting(path: str | Path) -> tuple[int, Tokens, bool]:
    """One knowledge-graph build: (passages from manifest.json beside it, tokens, warm cache?)."""
    path = Path(path)
    acc = _read_json(path, "accounting")
    if not isinstance(acc, dict) or "requests" not in acc:
        raise DataError(f"{path}: not an Engine accounting file (no key 'requests')")
    man_path = path.with_name("manifest.json")
    if not man_path.exists():
        raise DataError(f"{path}: manifest.json beside it is missing (its n_docs gives the passages)")
    man = _read_json(man_path, "manifest")
    if not isinstance(man.get("n_docs"), int):
        raise DataError(f"{man_path}: key 'n_docs' is missing or not an integer")
    return man["n_docs"], cold_backend(acc), bool(acc.get("cache_hits"))


def read_raptor_manifest(path: str | Path) -> tuple[int, Tokens] | None:
    """A RAPTOR index build: (passages, summary tokens); None for any other index. The build
    record counts every summary call, cached or not (the method's cost), so the backend
    figures are the asked-for ones."""
    path = Path(path)
    man = _read_json(path, "manifest")
    if not isinstance(man, dict) or man.get("retriever") != "raptor":
        return None
    b = man.get("build")
    if not isinstance(b, dict) or "llm_calls" not in b:
        raise DataError(f"{path}: key 'build.llm_calls' is missing "
                        "(a RAPTOR index built before its cost was recorded?)")
    if not isinstance(man.get("n_docs"), int):
        raise DataError(f"{path}: key 'n_docs' is missing or not an integer")
    calls = float(b["llm_calls"])
    p, c = float(b.get("prompt_tokens", 0) or 0), float(b.get("completion_tokens", 0) or 0)
    return man["n_docs"], Tokens(calls, calls, p, c, p, c)


def _expand(patterns: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in patterns:
        out.extend(sorted(glob.glob(p, recursive=True)))
    return sorted(set(out))


@dataclass
class Measured:
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    retriever_cells: dict[tuple[str, str, str], RetrieverCell] = field(default_factory=dict)  # (kind, cond, policy)
    sharding: PerUnit = field(default_factory=lambda: PerUnit("question"))
    # measured inside the simulate jobs (files = jobs)
    classifier: PerUnit = field(default_factory=lambda: PerUnit("assistant turn with a non-empty reply"))
    judge: PerUnit = field(default_factory=lambda: PerUnit("conversation judged by the LLM"))
    graph: PerUnit = field(default_factory=lambda: PerUnit("passage"))
    raptor: PerUnit = field(default_factory=lambda: PerUnit("passage"))
    files: int = 0
    models: set[str] = field(default_factory=set)
    retrievers: dict[str, str] = field(default_factory=dict)  # measured name -> kind
    notes: list[str] = field(default_factory=list)
    measured_top_k: int | None = None
    shown: int = 0  # passages shown over the open-retrieval assistant turns ...
    open_turns: int = 0  # ... and those turns (from the conversation files)

    def measured_passages_per_turn(self) -> float | None:
        return self.shown / self.open_turns if self.open_turns else None

    def passage_block_tokens(self) -> float | None:
        """Prompt tokens that retrieval adds to one assistant call: per-call assistant prompt of
        an open-retrieval cell minus its closed-book twin (FULL, else CONCAT: single-turn)."""
        for cond in ("FULL", "CONCAT"):
            o, c = self.cells.get((cond, "none", "open")), self.cells.get((cond, "none", "closed"))
            if o and c and o.roles["assistant"].requests and c.roles["assistant"].requests:
                a_o, a_c = o.roles["assistant"], c.roles["assistant"]
                return a_o.prompt_tokens / a_o.requests - a_c.prompt_tokens / a_c.requests
        return None

    def add_job(self, job: JobAccounting) -> None:
        self.files += 1
        self.models.add(job.model)
        self.retrievers[job.retriever] = job.kind
        self.notes.extend(job.notes)
        for (cond, pol), rec in job.cells.items():
            cell = self.cells.setdefault(cell_key(cond, pol, job.closed), Cell())
            cell.jobs += 1
            cell.conversations += rec.conversations
            for r in CELL_ROLES:
                cell.roles[r].add(rec.roles[r])
            s = rec.stats
            if s is not None:
                cell.file_conversations += s.conversations
                cell.assistant_turns += s.assistant_turns
                cell.classified_turns += s.classified
                cell.judgment_conversations += s.judgment_conversations
                cell.judged_conversations += s.judged
                cell.assistant_history += s.assistant_history
                cell.user_history += s.user_history
                self.shown += s.shown
                self.open_turns += s.open_turns
                if rec.retriever is not None:
                    rc = self.retriever_cells.setdefault((job.kind, cond, pol), RetrieverCell())
                    rc.jobs += 1
                    rc.conversations += s.conversations
                    rc.queries += s.queries
                    rc.tokens.add(rec.retriever)
                    rc.parse_failures += s.parse_failures
        for name, unit in (("classifier", self.classifier), ("judge", self.judge)):
            got = job.labels.get(name)
            if got is not None:
                unit.files += 1
                unit.units += got[0]
                unit.tokens.add(got[1])


def _measured_run(measured_config: dict | str | Path | None) -> tuple[dict[str, str] | None, int | None, str]:
    if measured_config is None:
        return None, None, "no config"
    cfg = measured_config if isinstance(measured_config, dict) else load_config(measured_config)
    src = "the given config" if isinstance(measured_config, dict) else str(measured_config)
    kinds = {name: r["kind"] for name, r in cfg["retrievers"].items()}
    return kinds, cfg["lic_rag"]["top_k"], src


def measure(accounting_globs: Iterable[str], shard_globs: Iterable[str] = (), *,
            graph_globs: Iterable[str] = (), index_manifest_globs: Iterable[str] = (),
            measured_config: dict | str | Path | None = None) -> Measured:
    """Read a finished (or partly finished) run. ``measured_config`` is that run's config: it
    maps retriever names to kinds and gives the top_k the assistant was shown (None: names
    must be kinds, and every retrieved passage counts as shown). The classifier and the judge
    are read from the simulate jobs' accounting (roles ``classifier``, ``judge``)."""
    accounting_globs = list(accounting_globs)
    files = _expand(accounting_globs)
    if not files:
        raise ConfigError(f"estimate: no simulate accounting file matches {accounting_globs} "
                          "(run the workflow first, or pass --accounting-glob)")
    kinds, top_k, source = _measured_run(measured_config)
    m = Measured(measured_top_k=top_k)
    if top_k is None:
        m.notes.append("the measured run's top_k is unknown (no config given): every retrieved passage is counted "
                       "as shown, which overstates passages per call when recall_k > top_k")
    warm = 0
    for f in files:
        job = read_simulate_accounting(f, kinds, top_k, source)
        m.add_job(job)
        warm += job.warm_cache

    for name, unit, what in (("classifier", m.classifier, "turn-classifier calls"),
                             ("judge", m.judge, "answer-judge calls")):
        if not unit.files:
            m.notes.append(f"no measured simulate job has a '{name}' accounting and all its conversation files: "
                           f"{what} are left out")
        elif unit.files < m.files:
            m.notes.append(f"'{name}' measured in {unit.files} of {m.files} simulate jobs (the others have no "
                           f"'{name}' accounting or miss conversation files)")
    shard_globs = list(shard_globs)
    for f in _expand(shard_globs):
        n, tok, w = read_stage_accounting(f, "shards.jsonl")
        m.sharding.files += 1
        m.sharding.units += n
        m.sharding.tokens.add(tok)
        warm += w
    if not m.sharding.files:
        m.notes.append(f"no sharding accounting matches {shard_globs}: sharding calls are left out")
    for f in _expand(graph_globs):
        n, tok, w = read_graph_accounting(f)
        m.graph.files += 1
        m.graph.units += n
        m.graph.tokens.add(tok)
        warm += w
    for f in _expand(index_manifest_globs):
        got = read_raptor_manifest(f)
        if got is not None:
            m.raptor.files += 1
            m.raptor.units += got[0]
            m.raptor.tokens.add(got[1])
    if warm:
        m.notes.append(f"{warm} measured job(s) found answers in the LLM cache (an earlier run, or another job): "
                       "their backend calls and tokens are re-estimated for a cold cache")
    return m


# ---- planning the target grid ------------------------------------------------------------


def _job_conversations(config: dict, job: dict) -> int:
    """Conversations of each cell of a job: questions in its chunk x runs."""
    lic = config["lic_rag"]
    n = config["datasets"][job["dataset"]]["n_questions"]
    size = lic["chunk_size"]
    return max(0, min(size, n - job["chunk"] * size)) * lic["runs"]


def _cells_run(cells: list) -> list[tuple[str, str, bool]]:
    """(condition, policy, written) of everything a job simulates: its cells, plus the SHARDED
    twin of a RECAP cell whose twin is not a cell (simulated for the recap, not written)."""
    cells = [tuple(c) for c in cells]
    out = [(c, p, True) for c, p in cells]
    for c, p in cells:
        if c == "RECAP" and ("SHARDED", p) not in cells and ("SHARDED", p, False) not in out:
            out.append(("SHARDED", p, False))
    return out


def _note(notes: list[str], msg: str) -> None:
    if msg not in notes:
        notes.append(msg)


def _lookup(measured: Measured, key: tuple[str, str, str], notes: list[str]) -> Cell:
    if key in measured.cells:
        return measured.cells[key]
    cond, pol, ret = key
    for alt in _alternatives(key):
        if alt in measured.cells:
            _note(notes, f"cell {_key_str(key)} was not measured: using {_key_str(alt)}")
            return measured.cells[alt]
    raise ConfigError(f"estimate: condition {cond} was not measured at all (measured cells: "
                      f"{', '.join(sorted(_key_str(k) for k in measured.cells))})")


def _lookup_retriever(measured: Measured, kind: str, cond: str, pol: str, notes: list[str]) -> RetrieverCell | None:
    key = (kind, cond, pol)
    if key in measured.retriever_cells:
        return measured.retriever_cells[key]
    for p in ("history", "current", "none"):
        alt = (kind, cond, p)
        if alt in measured.retriever_cells:
            _note(notes, f"retriever cell {_key_str(key)} was not measured: using {_key_str(alt)}")
            return measured.retriever_cells[alt]
    if any(k[0] == kind for k in measured.retriever_cells):
        _note(notes, f"retriever kind {kind}: condition {cond} was not measured: its LLM tokens in {cond} are left out")
    else:
        _note(notes, f"retriever kind {kind} calls an LLM per query, but no measured conversation of that kind carries "
                     "retrieval_cost: its query-time LLM tokens are left out (measure a run that includes it)")
    return None


def _alternatives(key: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """The cells ``_lookup`` tries for ``key``, in order (same condition)."""
    cond, pol, ret = key
    return [(cond, p, ret) for p in ("history", "current", "none")] + [(cond, pol, o) for o in ("open", "closed")] \
        + [(cond, p, o) for p in ("history", "current", "none") for o in ("open", "closed")]


def _label_rates(measured: Measured, key: tuple[str, str, str], cell: Cell,
                 notes: list[str]) -> dict[str, Any]:
    """Per conversation of cell ``key`` (``cell``: its measured profile): classifier calls in
    each scenario (measured: assistant turns with a non-empty reply; long: every assistant
    turn, since no reply is empty at max_tokens) and the share of conversations the LLM judges.

    Without a conversation file for the cell, the classifier's calls are the assistant calls
    charged to it (plus, for RECAP, its SHARDED twin's, whose turns the RECAP file repeats),
    every reply counted as non-empty; the judged share is borrowed from the nearest cell of the
    condition with judgments (``_lookup``'s order), else pooled over all measured cells, else
    unknown (None)."""
    cond, pol, ret = key
    per_conv = cell.classified_per_conversation()
    if per_conv is not None:
        cls = {"measured": per_conv, "long": cell.turns_per_conversation()}
    else:
        n = cell.per_conversation()["assistant"].requests
        if cond == "RECAP":
            n += _lookup(measured, ("SHARDED", pol, ret), notes).per_conversation()["assistant"].requests
        _note(notes, f"cell {_key_str(key)}: no conversation file read: the classifier's calls are taken as the "
                     "assistant calls charged to the cell" + (" and its SHARDED twin" if cond == "RECAP" else "")
                     + " (every reply counted as non-empty)")
        cls = {"measured": n, "long": n}
    share = cell.judged_share()
    if share is None:
        for alt in _alternatives(key):
            c = measured.cells.get(alt)
            if c is not None and c.judged_share() is not None:
                share = c.judged_share()
                _note(notes, f"cell {_key_str(key)}: no judged conversation file: the share of conversations "
                             f"the LLM judges is taken from {_key_str(alt)} ({share:.3f})")
                break
    if share is None:
        judged = sum(c.judged_conversations for c in measured.cells.values())
        with_judgment = sum(c.judgment_conversations for c in measured.cells.values())
        if with_judgment:
            share = judged / with_judgment
            _note(notes, f"cell {_key_str(key)}: no judged conversation of condition {cond} was measured: the share "
                         f"of conversations the LLM judges is the pooled one ({share:.3f})")
    return {"classifier": cls, "judged_share": share}


def _size_class(params_b: float | None) -> str:
    if params_b is None:
        return "undisclosed (API)"
    return next(name for limit, name in SIZE_CLASSES if params_b <= limit)


def _grow(tok: Tokens, extra_prompt: float, extra_completion: float) -> Tokens:
    """``tok`` plus asked-for tokens; the backend figures grow in tok's backend/asked ratio."""
    rp = tok.backend_prompt_tokens / tok.prompt_tokens if tok.prompt_tokens else 1.0
    rc = tok.backend_completion_tokens / tok.completion_tokens if tok.completion_tokens else 1.0
    t = Tokens().add(tok)
    t.prompt_tokens = max(t.prompt_tokens + extra_prompt, 0.0)
    t.completion_tokens = max(t.completion_tokens + extra_completion, 0.0)
    t.backend_prompt_tokens = max(t.backend_prompt_tokens + extra_prompt * rp, 0.0)
    t.backend_completion_tokens = max(t.backend_completion_tokens + extra_completion * rc, 0.0)
    return t


def _completion_delta(tok: Tokens, cap: float, scenario: str) -> tuple[float, float]:
    """(extra completion tokens per request, in all) that bring ``tok`` to the scenario: the
    measured length capped at ``cap``, or every reply at ``cap``."""
    if not tok.requests:
        return 0.0, 0.0
    per = tok.completion_tokens / tok.requests
    d = (min(per, cap) if scenario == "measured" else cap) - per
    return d, d * tok.requests


def _unit_profile(per: Tokens, cap: float, scenario: str) -> Tokens:
    return _grow(per, 0.0, _completion_delta(per, cap, scenario)[1])


def _cell_profile(cell: Cell, lic: dict, scenario: str, passage_delta: float = 0.0) -> dict[str, Any]:
    """Per-conversation tokens of a cell in a scenario (see module doc); ``passage_delta``:
    prompt tokens added to every assistant call (open retrieval: the target's passages).
    Also ``da`` (extra completion tokens per assistant reply) and ``turns`` (assistant turns
    per conversation in its file, what the classifier labels; None if no file was read)."""
    per = cell.per_conversation()
    a, u = per["assistant"], per["user_simulator"]
    da, ea = _completion_delta(a, lic["assistant"].get("max_tokens", 64), scenario)
    _, eu = _completion_delta(u, lic["user_simulator"].get("max_tokens", 48), scenario)
    # longer assistant replies lengthen every later prompt that holds them: the measured
    # number of earlier replies per charged call (from the files), else the SHARDED pattern
    # (the k-th assistant call holds k-1 replies, the k-th user-simulator call k)
    hist = cell.history_per_conversation()
    if hist is None:
        ta, tu = a.requests, u.requests
        hist = (ta * max(ta - 1, 0) / 2, tu * (tu + 1) / 2)
    return {
        "assistant": _grow(a, da * hist[0] + passage_delta * a.requests, ea),
        "user_simulator": _grow(u, da * hist[1], eu),
        "da": da,
        "turns": cell.turns_per_conversation(),
    }


@dataclass
class ModelRow:
    model: str
    backend: str
    params_b: float | None
    gpus: int
    gpu_model: str | None
    tensor_parallel: int
    roles: set[str] = field(default_factory=set)
    jobs: int = 0  # simulate jobs with this assistant model
    conversations: int = 0  # conversations of those jobs (all cells)
    sim_loads: int = 0  # simulate jobs that run this model (any role, labelling included): one load each
    other_loads: int = 0  # shard, knowledge-graph and index-build jobs
    tokens: dict[str, Tokens] = field(default_factory=lambda: {sc: Tokens() for sc in SCENARIOS})
    by_role: dict[str, dict[str, Tokens]] = field(default_factory=dict)
    gpu_hours: dict[str, float | None] = field(default_factory=lambda: {sc: 0.0 for sc in SCENARIOS})
    max_job_minutes: dict[str, float | None] = field(default_factory=lambda: {sc: None for sc in SCENARIOS})
    load_seconds: float = 0.0
    # GPU-seconds per question-run (one conversation of every cell) of this model's heaviest
    # simulate job, summed over the job's cells, long scenario (for the chunk-size advice)
    job_gpu_s_per_question_run: float = 0.0

    @property
    def local_gpu(self) -> bool:
        return self.backend in ("vllm", "transformers") and self.gpus > 0

    @property
    def loads(self) -> int:
        return self.sim_loads + self.other_loads

    def add(self, role: str, scenario: str, tok: Tokens, scale: float) -> None:
        self.roles.add(role)
        self.tokens[scenario].add(tok, scale)
        self.by_role.setdefault(role, {s: Tokens() for s in SCENARIOS})[scenario].add(tok, scale)


def estimate(config: dict, measured: Measured, registry: dict, throughput: Throughput | None = None,
             job_minutes: float = 240.0, budget_fraction: float = 0.5,
             passage_tokens: float | None = None,
             corpus_passages: dict[str, int] | None = None) -> dict[str, Any]:
    """The whole estimate as a JSON-able dict (see ``format_report`` for the tables).

    Retrieved passages: an open-retrieval assistant call of the measured run carried
    ``passage_block_tokens`` for its measured passages shown; in the target it carries the
    target's ``lic_rag.top_k`` passages of ``passage_tokens`` tokens each (default: as long as
    the measured run's). The difference is added to every open-retrieval assistant call.
    ``corpus_passages``: passages of each target corpus, for the one-time knowledge-graph and
    RAPTOR builds (a corpus without a size is left out, with a note).
    """
    tp = throughput or Throughput()
    lic = config["lic_rag"]
    corpus_passages = dict(corpus_passages or {})
    notes: list[str] = list(measured.notes)
    block, shown = measured.passage_block_tokens(), measured.measured_passages_per_turn()
    passage_delta = 0.0
    per_passage_measured = block / shown if block is not None and shown else None
    if per_passage_measured is None:
        notes.append("passage length not measurable (needs FULL or CONCAT cells with and without retrieval and their "
                     "conversation files): retrieval prompts kept as measured")
    else:
        target_pp = per_passage_measured if passage_tokens is None else float(passage_tokens)
        passage_delta = lic["top_k"] * target_pp - block
    user_model = role_model(config, "user_simulator")
    classifier_model, judge_model = role_model(config, "classifier"), role_model(config, "judge")
    shard_model = lic["sharding"]["model"]
    rows: dict[str, ModelRow] = {}

    def row(name: str) -> ModelRow:
        if name not in rows:
            s = registry[name]
            rows[name] = ModelRow(model=name, backend=s.backend, params_b=s.params_b, gpus=int(s.gpus or 0),
                                  gpu_model=s.gpu_model, tensor_parallel=int(s.tensor_parallel or 1))
        return rows[name]

    jobs = simulate_jobs(config)
    cells_used: dict[str, dict[str, Any]] = {}
    profiles: dict[tuple, dict[str, dict[str, Any]]] = {}
    label_profiles: dict[tuple, dict[str, dict[str, Any]]] = {}
    # per classified assistant turn / judged conversation, from the simulate jobs' accounting
    cls_per, judge_per = measured.classifier.per_unit(), measured.judge.per_unit()
    cls_cap, judge_cap = lic["classifier"].get("max_tokens", 8), lic["judge"].get("max_tokens", 8)
    # per (model, retriever): tokens per question-run on the job's own (assistant) model
    job_tokens: dict[tuple[str, str], dict[str, Tokens]] = {}
    cls_turns = 0.0  # classifier calls (measured scenario) and conversations the LLM judges
    judged_conv: float | None = 0.0
    total_conv = 0
    for job in jobs:
        kind = retriever_kind(config, job["retriever"])
        closed = kind == "closed_book"
        r_llm = retriever_llm(config, job["retriever"]) if query_time_llm(kind) else None
        n_conv = _job_conversations(config, job)
        run = _cells_run(job["cells"])
        if any(not w for _, _, w in run):
            _note(notes, "a RECAP cell without its SHARDED twin: the twin is simulated (and charged) but not written")
        a = row(job["model"])
        a.jobs += 1
        # the job's models, each loaded once: assistant, user simulator (multi-turn cells),
        # retriever LLM, and the classifier and judge that label the job's conversations
        used = {job["model"], classifier_model, judge_model}
        if any(c in MULTI_TURN for c, _, _ in run):
            used.add(user_model)
        if r_llm is not None:
            used.add(r_llm)
        for m in used:
            row(m).sim_loads += 1
        fill_own = (job["model"], job["retriever"]) not in job_tokens  # the same for every chunk
        own = job_tokens.setdefault((job["model"], job["retriever"]), {sc: Tokens() for sc in SCENARIOS})
        for cond, pol, written in run:
            key = cell_key(cond, pol, closed)
            if key not in profiles:
                cell = _lookup(measured, key, notes)
                delta = passage_delta if key[2] == "open" else 0.0
                profiles[key] = {sc: _cell_profile(cell, lic, sc, delta) for sc in SCENARIOS}
            prof = profiles[key]
            rc = _lookup_retriever(measured, kind, cond, pol, notes) if r_llm is not None else None
            r_per = rc.per_conversation() if rc is not None else None
            for sc in SCENARIOS:
                p = prof[sc]
                a.add("assistant", sc, p["assistant"], n_conv)
                if p["user_simulator"].requests:
                    row(user_model).add("user_simulator", sc, p["user_simulator"], n_conv)
                if r_per is not None:
                    row(r_llm).add("retriever", sc, r_per, n_conv)
                if fill_own:
                    own[sc].add(p["assistant"])
                    if user_model == job["model"]:
                        own[sc].add(p["user_simulator"])
                    if r_per is not None and r_llm == job["model"]:
                        own[sc].add(r_per)
            if not written:
                continue
            # labelling, inside the job: one classifier call per classified assistant turn (the
            # reply is in its prompt, so longer replies lengthen it), one judge call per judged
            # conversation (in-job duplicates folded into the per-unit means)
            if key not in label_profiles:
                rates = _label_rates(measured, key, _lookup(measured, key, notes), notes)
                share = rates["judged_share"]
                label_profiles[key] = {sc: {
                    "calls": rates["classifier"][sc],
                    "judged": share,
                    "classifier": None if cls_per is None else _grow(
                        _unit_profile(cls_per, cls_cap, sc).scaled(rates["classifier"][sc]),
                        rates["classifier"][sc] * prof[sc]["da"] * cls_per.requests, 0.0),
                    "judge": None if judge_per is None or share is None else
                    _unit_profile(judge_per, judge_cap, sc).scaled(share),
                } for sc in SCENARIOS}
            lp = label_profiles[key]
            for sc in SCENARIOS:
                for role, model in (("classifier", classifier_model), ("judge", judge_model)):
                    t = lp[sc][role]
                    if t is None:
                        continue
                    row(model).add(role, sc, t, n_conv)
                    if fill_own and model == job["model"]:
                        own[sc].add(t)
            a.conversations += n_conv
            total_conv += n_conv
            cls_turns += n_conv * lp["measured"]["calls"]
            share = lp["measured"]["judged"]
            judged_conv = None if judged_conv is None or share is None else judged_conv + n_conv * share
            cu = cells_used.setdefault(_key_str(key), {"jobs": 0, "conversations": 0})
            cu["jobs"] += 1
            cu["conversations"] += n_conv

    # sharding: one job per dataset, per-question means of the measured shard jobs
    n_questions = sum(config["datasets"][d]["n_questions"] for d in lic["datasets"])
    per_q = measured.sharding.per_unit()
    if per_q is not None:
        s = row(shard_model)
        s.other_loads += len(lic["datasets"])
        cap = lic["sharding"].get("max_tokens", 512) * lic["sharding"].get("attempts", 3)
        long_q = Tokens().add(per_q)
        long_q.completion_tokens = long_q.backend_completion_tokens = float(cap)
        s.add("sharding", "measured", per_q, n_questions)
        s.add("sharding", "long", long_q, n_questions)

    # one-time builds per corpus: the knowledge graph (graph retrievers) and RAPTOR's tree
    corpora = list(dict.fromkeys(config["datasets"][d]["corpus"] for d in lic["datasets"]))
    kinds = {r: retriever_kind(config, r) for r in lic["retrievers"]}
    builds = {"knowledge_graph": [], "raptor": []}
    kg_corpora = corpora if any(needs_graph(k) for k in kinds.values()) else []
    raptor_retrievers = [r for r, k in kinds.items() if k == "raptor"]
    todo = [("knowledge_graph", config["knowledge_graph"]["model"], c, None, measured.graph,
             config["knowledge_graph"].get("max_tokens", 160)) for c in kg_corpora]
    if raptor_retrievers:
        from convrag.retrieval.graph.raptor import DEFAULTS as RAPTOR_DEFAULTS

        todo += [("index_build", retriever_llm(config, r), c, r, measured.raptor,
                  {**RAPTOR_DEFAULTS, **(config["retrievers"][r].get("params") or {})}["summary_max_tokens"])
                 for r in raptor_retrievers for c in corpora]
    for role, model, corpus, retriever, unit, cap in todo:
        what = "knowledge graph" if retriever is None else f"RAPTOR tree ({retriever})"
        per = unit.per_unit()
        if per is None:
            _note(notes, f"{what}: no measured build matches (graph accounting / RAPTOR index manifest): "
                         "its one-time LLM cost is left out")
            continue
        n = corpus_passages.get(corpus)
        if n is None:
            _note(notes, f"{what} of corpus {corpus}: its passage count is unknown (prepare the corpus, or pass "
                         "corpus_passages): its one-time LLM cost is left out")
            continue
        r = row(model)
        r.other_loads += 1
        for sc in SCENARIOS:
            r.add(role, sc, _unit_profile(per, cap, sc), n)
        builds["knowledge_graph" if retriever is None else "raptor"].append(
            {"corpus": corpus, "retriever": retriever, "model": model, "passages": n})

    # GPU time
    chunks_now = sum(math.ceil(config["datasets"][d]["n_questions"] / lic["chunk_size"]) for d in lic["datasets"])
    for r in rows.values():
        if not r.local_gpu:
            r.gpu_hours = {sc: (0.0 if r.backend != "openai" else None) for sc in SCENARIOS}  # CPU | API
            continue
        if r.params_b is None:
            notes.append(f"{r.model}: params_b is not set in the registry: no GPU-hours")
            r.gpu_hours = {sc: None for sc in SCENARIOS}
            continue
        if r.backend == "transformers":
            notes.append(f"{r.model}: transformers backend on GPU timed with the vLLM throughput model (optimistic)")
        r.load_seconds = tp.load_seconds(r.params_b)
        for sc in SCENARIOS:
            t = r.tokens[sc]
            compute = tp.gpu_seconds(t.backend_prompt_tokens, t.backend_completion_tokens, r.params_b, r.gpu_model,
                                     r.gpus)
            r.gpu_hours[sc] = (compute + r.loads * r.load_seconds * r.gpus) / 3600.0
        # per-job wall time of this model's simulate jobs: the heaviest job (sum over its
        # cells of everything that runs on its model), fullest chunk
        heaviest = {sc: 0.0 for sc in SCENARIOS}
        for (model, _), per in job_tokens.items():
            if model != r.model:
                continue
            for sc in SCENARIOS:
                t = per[sc]
                gs = tp.gpu_seconds(t.backend_prompt_tokens, t.backend_completion_tokens, r.params_b, r.gpu_model,
                                    r.gpus)
                heaviest[sc] = max(heaviest[sc], gs)
        r.job_gpu_s_per_question_run = heaviest["long"]
        if r.jobs:
            conv_per_cell = lic["chunk_size"] * lic["runs"]
            for sc in SCENARIOS:
                r.max_job_minutes[sc] = (r.load_seconds + conv_per_cell * heaviest[sc] / r.gpus) / 60.0
        if r.sim_loads > r.jobs:
            notes.append(f"{r.model}: runs as user simulator, retriever LLM, classifier or judge inside other models' "
                         "simulate jobs, which request GPUs only for their own assistant model")

    layout = _layout(config, rows, job_minutes, budget_fraction)
    return {
        "config": {
            "datasets": {d: config["datasets"][d]["n_questions"] for d in lic["datasets"]},
            "models": list(lic["models"]),
            "retrievers": list(lic["retrievers"]),
            "retriever_llms": {r: (retriever_llm(config, r) if query_time_llm(kinds[r]) else None)
                               for r in lic["retrievers"]},
            "conditions": list(lic["conditions"]),
            "policies": list(lic["policies"]),
            "runs": lic["runs"],
            "chunk_size": lic["chunk_size"],
            "assistant_max_tokens": lic["assistant"].get("max_tokens"),
            "top_k": lic["top_k"],
            "tokens_per_passage": (None if per_passage_measured is None else
                                   round(per_passage_measured if passage_tokens is None else float(passage_tokens), 1)),
            "passage_tokens_added_per_open_call": round(passage_delta, 1),
            "user_simulator": user_model,
            "user_simulator_max_tokens": lic["user_simulator"].get("max_tokens"),
            "sharding_model": shard_model,
            "classifier": classifier_model,
            "judge": judge_model,
            "knowledge_graph_model": config["knowledge_graph"]["model"],
            "corpus_passages": {c: corpus_passages.get(c) for c in corpora},
        },
        "measured": {
            "simulate_files": measured.files,
            "models": sorted(measured.models),
            "retrievers": dict(sorted(measured.retrievers.items())),
            "cells": {
                _key_str(k): {
                    "jobs": c.jobs,
                    "conversations": c.conversations,
                    "per_conversation": {r: t.to_dict(2) for r, t in c.per_conversation().items()},
                    "assistant_turns_per_conversation": (None if c.turns_per_conversation() is None
                                                         else round(c.turns_per_conversation(), 3)),
                    "classified_turns_per_conversation": (None if c.classified_per_conversation() is None
                                                          else round(c.classified_per_conversation(), 3)),
                    "judged_share": None if c.judged_share() is None else round(c.judged_share(), 3),
                }
                for k, c in sorted(measured.cells.items())
            },
            "retriever_cells": {
                _key_str(k): {
                    "jobs": c.jobs,
                    "conversations": c.conversations,
                    "per_conversation": c.per_conversation().to_dict(2),
                    "llm_calls_per_query": round(c.tokens.requests / c.queries, 3) if c.queries else None,
                    "parse_failures": c.parse_failures,
                }
                for k, c in sorted(measured.retriever_cells.items())
            },
            "sharding": measured.sharding.to_dict(),
            "classifier": measured.classifier.to_dict(),
            "judge": measured.judge.to_dict(),
            "knowledge_graph": measured.graph.to_dict(),
            "raptor_build": measured.raptor.to_dict(),
            "top_k": measured.measured_top_k,
            "passages_shown_per_call": None if shown is None else round(shown, 2),
            "passage_block_tokens_per_call": None if block is None else round(block, 1),
            "tokens_per_passage": None if per_passage_measured is None else round(per_passage_measured, 1),
        },
        "grid": {
            "simulate_jobs": len(jobs),
            "simulate_chunks_per_model_and_retriever": chunks_now,
            "shard_jobs": len(lic["datasets"]),
            "graph_builds": builds["knowledge_graph"],
            "raptor_builds": builds["raptor"],
            "questions": n_questions,
            "conversations": total_conv,
            "assistant_turns_classified": round(cls_turns, 1),
            "conversations_judged": None if judged_conv is None else round(judged_conv, 1),
            "cells": cells_used,
        },
        "models": [_row_dict(r) for r in rows.values()],
        "size_classes": _size_classes(rows),
        "totals": {
            sc: {
                **sum_tokens(r.tokens[sc] for r in rows.values()).to_dict(0),
                "gpu_hours": round(sum(r.gpu_hours[sc] or 0.0 for r in rows.values()), 1),
            }
            for sc in SCENARIOS
        },
        "layout": layout,
        "assumptions": {
            **{k: v for k, v in asdict(tp).items()},
            "peak_bf16_tflops": PEAK_BF16_TFLOPS,
            "job_minutes": job_minutes,
            "budget_fraction": budget_fraction,
        },
        "notes": notes,
    }


def _row_dict(r: ModelRow) -> dict[str, Any]:
    return {
        "model": r.model,
        "backend": r.backend,
        "params_b": r.params_b,
        "size_class": _size_class(r.params_b),
        "gpus_per_job": r.gpus if r.local_gpu else 0,
        "gpu_model": r.gpu_model if r.local_gpu else None,
        "tensor_parallel": r.tensor_parallel,
        "roles": sorted(r.roles),
        "simulate_jobs": r.jobs,
        "conversations": r.conversations,
        "model_loads": r.loads,
        "model_loads_simulate": r.sim_loads,
        "load_seconds": round(r.load_seconds, 1),
        "tokens": {sc: t.to_dict(0) for sc, t in r.tokens.items()},
        "by_role": {role: {sc: t.to_dict(0) for sc, t in d.items()} for role, d in sorted(r.by_role.items())},
        "gpu_hours": {sc: (round(v, 2) if v is not None else None) for sc, v in r.gpu_hours.items()},
        "max_job_minutes": {sc: (round(v, 1) if v is not None else None) for sc, v in r.max_job_minutes.items()},
    }


def _size_classes(rows: dict[str, ModelRow]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows.values():
        if not r.local_gpu:
            continue
        c = out.setdefault(_size_class(r.params_b), {"size_class": _size_class(r.params_b), "models": [],
                                                     "gpu_hours": {sc: 0.0 for sc in SCENARIOS}})
        c["models"].append(r.model)
        for sc in SCENARIOS:
            c["gpu_hours"][sc] = round(c["gpu_hours"][sc] + (r.gpu_hours[sc] or 0.0), 2)
    order = [name for _, name in SIZE_CLASSES]
    return sorted(out.values(), key=lambda c: order.index(c["size_class"]) if c["size_class"] in order else 99)


def _layout(config: dict, rows: dict[str, ModelRow], job_minutes: float, budget_fraction: float) -> dict[str, Any]:
    """Recommended chunk size and the SLURM request of each model's jobs.

    The chunk size is global (lic_rag.chunk_size). The advice is the largest balanced chunk
    (ceil(n / k) for a dataset of n questions) whose fullest job, in the ``long`` scenario,
    still takes at most ``budget_fraction`` of the job time limit for every GPU model; a job's
    time is its model load plus the sum over all its cells (they run in lockstep on the job's
    GPUs). Fewer, fuller jobs pay the model load less often and give vLLM bigger batches.
    """
    lic = config["lic_rag"]
    sizes = sorted({config["datasets"][d]["n_questions"] for d in lic["datasets"]})
    candidates = sorted({math.ceil(n / k) for n in sizes for k in range(1, n + 1)}, reverse=True)
    budget_s = job_minutes * 60.0 * budget_fraction
    gpu_rows = [r for r in rows.values() if r.local_gpu and r.jobs and r.params_b is not None]

    def job_s(r: ModelRow, c: int) -> float:
        return r.load_seconds + c * lic["runs"] * r.job_gpu_s_per_question_run / r.gpus

    def chunks(c: int) -> int:
        return sum(math.ceil(config["datasets"][d]["n_questions"] / c) for d in lic["datasets"])

    recommended = next((c for c in candidates if all(job_s(r, c) <= budget_s for r in gpu_rows)), 1)
    now, rec = chunks(lic["chunk_size"]), chunks(recommended)
    per_model = []
    total = {sc: 0.0 for sc in SCENARIOS}
    for r in rows.values():
        saved = 0.0
        if r.local_gpu and r.params_b is not None:
            # the same tokens, fewer simulate jobs: every (model, retriever) runs over all chunks
            saved = (r.sim_loads - r.sim_loads // now * rec) * r.load_seconds * r.gpus / 3600.0
            for sc in SCENARIOS:
                total[sc] += (r.gpu_hours[sc] or 0.0) - saved
        if not r.jobs:
            continue
        entry = {"model": r.model, "kind": "gpu" if r.local_gpu else ("api" if r.backend == "openai" else "cpu"),
                 "jobs_now": r.jobs, "jobs_recommended": r.jobs // now * rec}
        if r.local_gpu:
            entry["sbatch_gpus"] = f"{r.gpu_model}:{r.gpus}" if r.gpu_model else str(r.gpus)
            if r.params_b is not None:
                t = job_s(r, recommended)
                entry["job_minutes_recommended_long"] = round(t / 60, 1)
                entry["load_share_recommended_long"] = round(r.load_seconds / t, 3)
                entry["gpu_hours_recommended"] = {sc: round(v - saved, 2) for sc, v in r.gpu_hours.items()}
        per_model.append(entry)
    return {"chunk_size_now": lic["chunk_size"], "chunk_size_recommended": recommended, "job_minutes": job_minutes,
            "budget_fraction": budget_fraction, "models": per_model,
            "gpu_hours_recommended": {sc: round(v, 1) for sc, v in total.items()}}


# ---- presentation -----------------------------------------------------------------------


def _fmt_n(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f}{suffix}"
    return f"{x:.0f}"


def _fmt_h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


ROLE_SHORT = {"user_simulator": "user-sim", "knowledge_graph": "kg", "index_build": "index"}


def format_report(est: dict[str, Any]) -> str:
    from tabulate import tabulate

    c, g, ms = est["config"], est["grid"], est["measured"]
    lines = [
        f"lic_rag grid: {len(c['datasets'])} datasets ({g['questions']} questions) x {len(c['models'])} models x "
        f"{len(c['retrievers'])} retrievers, {c['runs']} runs, chunk_size {c['chunk_size']}",
        f"  {g['simulate_jobs']:,} simulate jobs (all cells of a retriever in one job, which also classifies its "
        f"assistant turns and judges its answers) + {g['shard_jobs']} shard jobs + {len(g['graph_builds'])} "
        f"knowledge-graph and {len(g['raptor_builds'])} RAPTOR builds; {g['conversations']:,} conversations "
        "(every question assumed to pass sharding)",
        f"  measured on {ms['simulate_files']} simulate job files (models: {', '.join(ms['models'])}; retrievers: "
        f"{', '.join(ms['retrievers'])}; classifier measured in {ms['classifier']['files']}, judge in "
        f"{ms['judge']['files']} of them), {ms['sharding']['files']} shard, {ms['knowledge_graph']['files']} graph "
        f"and {ms['raptor_build']['files']} RAPTOR accounting files",
    ]
    if c["tokens_per_passage"] is not None:
        lines.append(
            f"  retrieval prompts: top_k {c['top_k']} x {c['tokens_per_passage']:.0f} tokens per passage (measured: "
            f"{ms['passages_shown_per_call']:.1f} shown x {ms['tokens_per_passage']:.0f}), "
            f"{c['passage_tokens_added_per_open_call']:+.0f} prompt tokens per open-retrieval assistant call")
    lines += [
        "",
        "Per model. 'measured': measured tokens per call; 'long': every reply at max_tokens "
        f"(assistant {c['assistant_max_tokens']}, user simulator {c['user_simulator_max_tokens']}).",
    ]
    rows = []
    for m in est["models"]:
        tm, tl = m["tokens"]["measured"], m["tokens"]["long"]
        gpus = f"{m['gpu_model'] or 'any'} x{m['gpus_per_job']}" if m["gpus_per_job"] else (
            "API" if m["backend"] == "openai" else "CPU")
        rows.append([
            m["model"], "+".join(ROLE_SHORT.get(r, r) for r in m["roles"]),
            "-" if m["params_b"] is None else m["params_b"], gpus, m["simulate_jobs"], f"{m['conversations']:,}",
            m["model_loads"] if m["gpus_per_job"] else "-", _fmt_n(tm["requests"]), _fmt_n(tm["prompt_tokens"]),
            _fmt_n(tm["completion_tokens"]),
            _fmt_n(tl["completion_tokens"]), _fmt_h(m["gpu_hours"]["measured"]), _fmt_h(m["gpu_hours"]["long"]),
        ])
    t_m, t_l = est["totals"]["measured"], est["totals"]["long"]
    rows.append(["TOTAL", "", "", "", g["simulate_jobs"], f"{g['conversations']:,}", "", _fmt_n(t_m["requests"]),
                 _fmt_n(t_m["prompt_tokens"]), _fmt_n(t_m["completion_tokens"]), _fmt_n(t_l["completion_tokens"]),
                 _fmt_h(t_m["gpu_hours"]), _fmt_h(t_l["gpu_hours"])])
    lines.append(tabulate(rows, headers=["model", "roles", "params_b", "GPUs/job", "jobs", "conversations", "loads",
                                         "LLM calls", "prompt tok", "completion tok", "completion tok (long)", "GPU-h",
                                         "GPU-h (long)"], tablefmt="github"))
    by_role: dict[str, dict[str, Tokens]] = {}
    for m in est["models"]:
        for role, d in m["by_role"].items():
            for sc, t in d.items():
                by_role.setdefault(role, {s: Tokens() for s in SCENARIOS})[sc].add(Tokens(**t))
    lines += ["", "Per role (all models):"]
    lines.append(tabulate([[role, _fmt_n(d["measured"].requests), _fmt_n(d["measured"].prompt_tokens),
                            _fmt_n(d["measured"].completion_tokens), _fmt_n(d["long"].completion_tokens)]
                           for role, d in sorted(by_role.items())],
                          headers=["role", "LLM calls", "prompt tok", "completion tok", "completion tok (long)"],
                          tablefmt="github"))
    lines += ["", "GPU-hours per model size:"]
    lines.append(tabulate([[s["size_class"], ", ".join(s["models"]), _fmt_h(s["gpu_hours"]["measured"]),
                            _fmt_h(s["gpu_hours"]["long"])] for s in est["size_classes"]],
                          headers=["size", "models", "GPU-h", "GPU-h (long)"], tablefmt="github"))
    lay = est["layout"]
    lines += ["", f"SLURM layout: chunk_size {lay['chunk_size_recommended']} recommended (now {lay['chunk_size_now']}): "
              f"the fullest job (model load + all its cells) stays within {lay['budget_fraction']:.0%} of a "
              f"{lay['job_minutes']:.0f}-minute limit in the 'long' scenario."]
    lines.append(tabulate([[m["model"], m["kind"], m.get("sbatch_gpus", "-"), m["jobs_now"], m["jobs_recommended"],
                            m.get("job_minutes_recommended_long", "-"), m.get("load_share_recommended_long", "-"),
                            _fmt_h(m.get("gpu_hours_recommended", {}).get("measured")),
                            _fmt_h(m.get("gpu_hours_recommended", {}).get("long"))]
                           for m in lay["models"]]
                          + [["TOTAL", "", "", sum(m["jobs_now"] for m in lay["models"]),
                              sum(m["jobs_recommended"] for m in lay["models"]), "", "",
                              _fmt_h(lay["gpu_hours_recommended"]["measured"]),
                              _fmt_h(lay["gpu_hours_recommended"]["long"])]],
                          headers=["model", "kind", "--gpus", "jobs now", "jobs (recommended)",
                                   "min/job (long)", "load share (long)", "GPU-h", "GPU-h (long)"], tablefmt="github"))
    a = est["assumptions"]
    lines += ["", "Assumptions (docs/scaling.md): tokens/s per GPU = efficiency x peak bf16 FLOP/s / (2 x params); "
              f"prefill efficiency {a['prefill_mfu']}, decode {a['decode_mfu']}; tensor-parallel efficiency "
              f"{a['tp_efficiency']}; model load {a['load_fixed_s']:.0f} s + weights at {a['load_gb_per_s']} GB/s per job "
              "and model; cold LLM cache; API models: tokens only."]
    if est["notes"]:
        lines += ["", "Notes:"] + [f"  - {n}" for n in est["notes"]]
    return "\n".join(lines)


def prepared_corpus_passages(config: dict) -> dict[str, int]:
    """Passages of each corpus the target config's results dir already holds
    (``<results_dir>/corpora/<corpus>/corpus.jsonl``, one passage per line)."""
    out = {}
    for name in config["corpora"]:
        p = Path(config["results_dir"]) / "corpora" / name / "corpus.jsonl"
        if p.exists():
            with open(p, encoding="utf-8") as fh:
                out[name] = sum(1 for line in fh if line.strip())
    return out


def run_estimate(config_path: str | Path, accounting_globs: Iterable[str] | None = None,
                 shard_globs: Iterable[str] | None = None,
                 throughput: Throughput | None = None, job_minutes: float = 240.0,
                 budget_fraction: float = 0.5, passage_tokens: float | None = None, *,
                 graph_globs: Iterable[str] | None = None, index_manifest_globs: Iterable[str] | None = None,
                 measured_config: dict | str | Path | None = DEFAULT_MEASURED_CONFIG,
                 corpus_passages: dict[str, int] | None = None) -> dict[str, Any]:
    """``convrag estimate``: measure (default globs: the default run under ./results) and plan
    ``config_path``. ``corpus_passages`` adds to (and overrides) the corpus sizes found under the target's results dir.
    The classifier and the judge are measured from the simulate jobs' accounting."""
    from convrag.llm.registry import load_registry

    config = load_config(config_path)
    reg_path = Path(config["models_registry"])
    registry = load_registry(reg_path if reg_path.is_absolute() else REPO_ROOT / reg_path)

    def pick(g, default):
        return list(g) if g is not None else [default]

    measured = measure(accounting_globs or [DEFAULT_ACCOUNTING_GLOB],
                       pick(shard_globs, DEFAULT_SHARD_ACCOUNTING_GLOB),
                       graph_globs=pick(graph_globs, DEFAULT_GRAPH_ACCOUNTING_GLOB),
                       index_manifest_globs=pick(index_manifest_globs, DEFAULT_INDEX_MANIFEST_GLOB),
                       measured_config=measured_config)
    sizes = {**prepared_corpus_passages(config), **(corpus_passages or {})}
    return estimate(config, measured, registry, throughput, job_minutes, budget_fraction, passage_tokens, sizes)
