"""Sizing a lic_rag grid before running it: conversations, LLM calls, tokens, GPU-hours and
a SLURM layout, for any config, from the token counts a finished run measured.

Method (docs/scaling.md has the numbers for the paper grid and the reasoning):

1. **Measure.** Every simulate job writes ``chunk<i>.accounting.json`` (requests, backend
   calls and prompt/completion tokens, per role), every shard job
   ``shards/<dataset>/accounting.json``. Simulate jobs are pooled per *cell*, (condition,
   policy, retrieval closed|open), into per-conversation means (ratio of sums); shard jobs into
   per-question means.
2. **Plan.** The target config's own grid (``convrag.config.simulate_jobs``) gives every job,
   its model and cell, and its conversations (questions in the chunk x runs; every question is
   assumed to pass sharding, so this is an upper bound on conversations).
3. **Multiply.** Per role: the assistant's tokens go to the job's model, the user simulator's
   to the user model, the sharding calls to the sharding model.
4. **Time.** GPU-seconds = prefill tokens / prefill rate + decode tokens / decode rate, rates
   per GPU from a FLOP model (``Throughput``: efficiency x peak bf16 FLOP/s of the registry's
   gpu_model / (2 x params)), divided by a tensor-parallel efficiency, plus one model load per
   job. These are *assumptions*, not measurements; override them on the command line.

Two scenarios bracket the completion lengths: ``measured`` uses the measured tokens per call
(capped at the target's max_tokens); ``long`` assumes every assistant and user-simulator reply
reaches the target config's max_tokens, including the longer histories that follow.

When the user simulator shares the assistant's engine (the same model, as in the default
run), the accounting holds both roles together; the user-simulator part is then estimated
from the conversation file beside it (exact call count; tokens from text length, see
``CHARS_PER_TOKEN``).
"""

from __future__ import annotations

import glob
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

import yaml

from convrag.config import REPO_ROOT, load_config, retriever_kind, simulate_jobs
from convrag.errors import ConfigError, DataError

DEFAULT_ACCOUNTING_GLOB = "results/lic_rag/conversations/**/chunk*.accounting.json"
DEFAULT_SHARD_ACCOUNTING_GLOB = "results/lic_rag/shards/*/accounting.json"
DEFAULT_PROMPTS = REPO_ROOT / "resources" / "prompts" / "lic_rag" / "assistant.yaml"

ROLES = ("assistant", "user_simulator")

# Splitting a shared engine's totals (user simulator == assistant model) into roles: tokens of
# a user-simulator call are estimated from its text. 3.7 characters per token (without chat
# template) and 4 template tokens per message were measured on the default run's closed-book
# jobs (SmolLM2 tokenizer), whose prompts can be rebuilt exactly from the conversation files.
CHARS_PER_TOKEN = 3.7
MESSAGE_OVERHEAD_TOKENS = 4

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


@dataclass
class Throughput:
    """The GPU-time model. Every number here is an assumption (docs/scaling.md).

    Per GPU, tokens/s = efficiency x peak bf16 FLOP/s / (2 x params): a forward pass costs
    ~2 FLOP per parameter per token. Prefill (prompt) tokens run compute-bound in large
    batches (``prefill_mfu``); decode (completion) tokens are limited by memory bandwidth and
    reach a lower fraction (``decode_mfu``, chosen to match published vLLM offline
    throughput of 8B models: ~3.4k output tok/s on one A100, ~12k on one H100).
    Tensor parallelism over n GPUs keeps ``tp_efficiency[n]`` of n x one GPU. A job loads its
    model once: ``load_fixed_s`` (engine start, CUDA graphs) + bf16 weights (2 bytes/param)
    read at ``load_gb_per_s``. Prefix caching, speculative decoding and quantisation are not
    modelled (all would lower the estimate).
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
    calls: float = 0.0  # calls that reached a backend (after in-job dedupe and the cache)
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


@dataclass
class Cell:
    """Measured totals of one (condition, policy, retrieval) cell."""

    jobs: int = 0
    conversations: int = 0
    roles: dict[str, Tokens] = field(default_factory=lambda: {r: Tokens() for r in ROLES})

    def per_conversation(self) -> dict[str, Tokens]:
        n = max(self.conversations, 1)
        return {r: t.scaled(1.0 / n) for r, t in self.roles.items()}


def cell_key(condition: str, policy: str, closed: bool) -> tuple[str, str, str]:
    return (condition, policy, "closed" if closed else "open")


def _key_str(key: tuple[str, str, str]) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


# ---- reading a measured run -------------------------------------------------------------


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


def _history_text(turns: list[dict]) -> str:
    # as convrag.simulate.conversation.ConversationRunner._history_text
    lines = [f"{'User' if t['role'] == 'user' else 'Assistant'}: {t['text'].strip()}" for t in turns]
    return "\n".join(lines) or "(nothing yet)"


def user_simulator_share(conversations: list[dict], prompts: dict | None) -> tuple[int, int, float, float]:
    """(assistant calls, user-simulator calls, user-simulator prompt tokens, completion tokens)
    of one job, from its conversations. The calls are exact (a user turn with a ``rephrased``
    key came from the simulator); the tokens are estimated from text length."""
    a_calls = u_calls = 0
    u_prompt = u_completion = 0.0
    system = (prompts or {}).get("user_system", "")
    template = (prompts or {}).get("user", "{history}\n{shard}")
    for conv in conversations:
        turns = conv.get("turns", [])
        for i, t in enumerate(turns):
            if t.get("role") == "assistant":
                a_calls += 1
            elif "rephrased" in t:
                u_calls += 1
                # the sent text stands in for the shard (rephrased: its rewording; else the shard)
                text = template.format(history=_history_text(turns[:i]), shard=t["text"])
                u_prompt += (len(system) + len(text)) / CHARS_PER_TOKEN + 2 * MESSAGE_OVERHEAD_TOKENS
                u_completion += len(t["text"]) / CHARS_PER_TOKEN
    return a_calls, u_calls, u_prompt, u_completion


def _split_shared(total: Tokens, conversations: list[dict], prompts: dict | None) -> tuple[Tokens, Tokens]:
    a_calls, u_calls, u_prompt, u_completion = user_simulator_share(conversations, prompts)
    if u_calls == 0:
        return total, Tokens()
    f_calls = u_calls / (a_calls + u_calls)
    f_prompt = min(u_prompt / total.prompt_tokens, 1.0) if total.prompt_tokens else f_calls
    f_completion = min(u_completion / total.completion_tokens, 1.0) if total.completion_tokens else f_calls
    user = Tokens(
        requests=total.requests * f_calls,
        calls=total.calls * f_calls,
        prompt_tokens=total.prompt_tokens * f_prompt,
        completion_tokens=total.completion_tokens * f_completion,
        backend_prompt_tokens=total.backend_prompt_tokens * f_prompt,
        backend_completion_tokens=total.backend_completion_tokens * f_completion,
    )
    return Tokens().add(total).add(user, -1.0), user


@dataclass
class Measured:
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)
    shard_questions: int = 0
    shard_tokens: Tokens = field(default_factory=Tokens)
    files: int = 0
    shard_files: int = 0
    models: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    retrieved: int = 0  # passages shown over all open-retrieval assistant turns ...
    open_turns: int = 0  # ... and those turns (from the conversation files)

    def measured_top_k(self) -> float | None:
        return self.retrieved / self.open_turns if self.open_turns else None

    def passage_block_tokens(self) -> float | None:
        """Prompt tokens that retrieval adds to one assistant call: per-call assistant prompt of
        an open-retrieval cell minus its closed-book twin (FULL, else CONCAT: single-turn)."""
        for cond in ("FULL", "CONCAT"):
            o, c = self.cells.get((cond, "none", "open")), self.cells.get((cond, "none", "closed"))
            if o and c and o.roles["assistant"].requests and c.roles["assistant"].requests:
                a_o, a_c = o.roles["assistant"], c.roles["assistant"]
                return a_o.prompt_tokens / a_o.requests - a_c.prompt_tokens / a_c.requests
        return None

    def add_job(self, key, conversations: int, roles: dict[str, Tokens]) -> None:
        cell = self.cells.setdefault(key, Cell())
        cell.jobs += 1
        cell.conversations += conversations
        for r in ROLES:
            cell.roles[r].add(roles.get(r, Tokens()))


@dataclass
class JobAccounting:
    key: tuple[str, str, str]
    conversations: int
    roles: dict[str, Tokens]
    model: str
    notes: list[str]
    retrieved: int = 0  # passages over its open-retrieval assistant turns
    open_turns: int = 0


def read_simulate_accounting(path: str | Path, prompts: dict | None = None) -> JobAccounting:
    """One simulate job: its cell, conversations, tokens per role, model and notes.

    The path carries the job: .../<dataset>/<model>/<retriever>/<condition>_<policy>/chunk<i>.accounting.json.
    """
    path = Path(path)
    try:
        acc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read accounting: {e}") from e
    cond_pol, retriever, model = path.parent.name, path.parent.parent.name, path.parent.parent.parent.name
    if "_" not in cond_pol or "assistant" not in acc or "job" not in acc:
        raise DataError(f"{path}: not a simulate accounting file (expected .../<condition>_<policy>/chunk<i>.accounting.json "
                        "with 'assistant' and 'job')")
    condition, policy = cond_pol.split("_", 1)
    conv_path = path.with_name(path.name.replace(".accounting.json", ".jsonl"))
    convs = _read_jsonl(conv_path) if conv_path.exists() else None
    retrieved = open_turns = 0
    if convs is not None:
        answers = [t for c in convs for t in c.get("turns", []) if t.get("role") == "assistant"]
        closed = not any(t.get("query") for t in answers)
        if not closed:
            open_turns, retrieved = len(answers), sum(len(t.get("retrieved") or []) for t in answers)
    else:
        closed = retriever == "closed_book" or (condition == "SHARDED" and policy == "none")
    notes = []
    assistant = Tokens.from_accounting(acc["assistant"])
    if "user_simulator" in acc:
        roles = {"assistant": assistant, "user_simulator": Tokens.from_accounting(acc["user_simulator"])}
    elif condition == "SHARDED" and convs is not None:
        a, u = _split_shared(assistant, convs, prompts)
        roles = {"assistant": a, "user_simulator": u}
    else:
        roles = {"assistant": assistant, "user_simulator": Tokens()}
        if condition == "SHARDED":
            notes.append(f"{path}: user simulator shares the assistant engine and {conv_path.name} is missing: "
                         "its tokens stay with the assistant")
    n_conv = int(acc["job"].get("conversations", 0))
    return JobAccounting(cell_key(condition, policy, closed), n_conv, roles, model, notes, retrieved, open_turns)


def read_shard_accounting(path: str | Path) -> tuple[int, Tokens]:
    """One shard job: (questions, tokens); questions = records of shards.jsonl beside it."""
    path = Path(path)
    try:
        acc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read accounting: {e}") from e
    shards = path.with_name("shards.jsonl")
    if not shards.exists():
        raise DataError(f"{path}: {shards.name} beside it is missing (it gives the number of questions)")
    return len(_read_jsonl(shards)), Tokens.from_accounting(acc)


def _expand(patterns: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in patterns:
        out.extend(sorted(glob.glob(p, recursive=True)))
    return sorted(set(out))


def measure(accounting_globs: Iterable[str], shard_globs: Iterable[str] = (),
            prompts_path: str | Path | None = DEFAULT_PROMPTS) -> Measured:
    accounting_globs, shard_globs = list(accounting_globs), list(shard_globs)
    files = _expand(accounting_globs)
    if not files:
        raise ConfigError(f"estimate: no simulate accounting file matches {accounting_globs} "
                          "(run the workflow first, or pass --accounting-glob)")
    prompts = None
    if prompts_path is not None and Path(prompts_path).exists():
        prompts = yaml.safe_load(Path(prompts_path).read_text(encoding="utf-8"))
    m = Measured()
    for f in files:
        job = read_simulate_accounting(f, prompts)
        m.add_job(job.key, job.conversations, job.roles)
        m.models.add(job.model)
        m.notes.extend(job.notes)
        m.retrieved += job.retrieved
        m.open_turns += job.open_turns
        m.files += 1
    for f in _expand(shard_globs):
        q, tok = read_shard_accounting(f)
        m.shard_questions += q
        m.shard_tokens.add(tok)
        m.shard_files += 1
    if not m.shard_files:
        m.notes.append(f"no shard accounting matches {shard_globs}: sharding calls are left out")
    return m


# ---- planning the target grid ------------------------------------------------------------


def _job_conversations(config: dict, job: dict) -> int:
    lic = config["lic_rag"]
    n = config["datasets"][job["dataset"]]["n_questions"]
    size = lic["chunk_size"]
    return max(0, min(size, n - job["chunk"] * size)) * lic["runs"]


def _lookup(measured: Measured, key: tuple[str, str, str], notes: list[str]) -> Cell:
    if key in measured.cells:
        return measured.cells[key]
    cond, pol, ret = key
    for alt in [(cond, p, ret) for p in ("history", "current", "none")] + [(cond, pol, o) for o in ("open", "closed")] \
            + [(cond, p, o) for p in ("history", "current", "none") for o in ("open", "closed")]:
        if alt in measured.cells:
            msg = f"cell {_key_str(key)} was not measured: using {_key_str(alt)}"
            if msg not in notes:
                notes.append(msg)
            return measured.cells[alt]
    raise ConfigError(f"estimate: condition {cond} was not measured at all (measured cells: "
                      f"{', '.join(sorted(_key_str(k) for k in measured.cells))})")


def _size_class(params_b: float | None) -> str:
    if params_b is None:
        return "undisclosed (API)"
    return next(name for limit, name in SIZE_CLASSES if params_b <= limit)


def _per_conversation(cell: Cell, lic: dict, scenario: str, passage_delta: float = 0.0) -> dict[str, Tokens]:
    """Per-conversation tokens of a cell in a scenario (see module doc); ``passage_delta``:
    prompt tokens added to every assistant call (open retrieval: the target's passages)."""
    per = cell.per_conversation()
    max_a = lic["assistant"].get("max_tokens", 64)
    max_u = lic["user_simulator"].get("max_tokens", 48)
    out = {}
    a, u = per["assistant"], per["user_simulator"]
    ta, tu = a.requests, u.requests
    ca = a.completion_tokens / ta if ta else 0.0
    cu = u.completion_tokens / tu if tu else 0.0
    # the measured completions, never above the target's caps
    target_ca = min(ca, max_a) if scenario == "measured" else max_a
    target_cu = min(cu, max_u) if scenario == "measured" else max_u
    da, du = target_ca - ca, target_cu - cu
    # longer assistant replies lengthen every later prompt: the assistant's own history holds
    # its earlier replies (sum over calls of previous replies ~ ta(ta-1)/2) and the k-th
    # user-simulator call sees k replies (~ tu(tu+1)/2)
    extra = {
        "assistant": (da * ta * max(ta - 1, 0) / 2 + passage_delta * ta, da * ta),
        "user_simulator": (da * tu * (tu + 1) / 2, du * tu),
    }
    for role, tok in (("assistant", a), ("user_simulator", u)):
        ep, ec = extra[role]
        rp = tok.backend_prompt_tokens / tok.prompt_tokens if tok.prompt_tokens else 1.0
        rc = tok.backend_completion_tokens / tok.completion_tokens if tok.completion_tokens else 1.0
        t = Tokens().add(tok)
        t.prompt_tokens = max(t.prompt_tokens + ep, 0.0)
        t.completion_tokens = max(t.completion_tokens + ec, 0.0)
        t.backend_prompt_tokens = max(t.backend_prompt_tokens + ep * rp, 0.0)
        t.backend_completion_tokens = max(t.backend_completion_tokens + ec * rc, 0.0)
        out[role] = t
    return out


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
    conversations: int = 0
    loads: int = 0  # jobs that load this model (assistant jobs, user-simulator jobs, shard jobs)
    tokens: dict[str, Tokens] = field(default_factory=lambda: {"measured": Tokens(), "long": Tokens()})
    by_role: dict[str, dict[str, Tokens]] = field(default_factory=dict)
    gpu_hours: dict[str, float | None] = field(default_factory=lambda: {"measured": 0.0, "long": 0.0})
    max_job_minutes: dict[str, float | None] = field(default_factory=lambda: {"measured": None, "long": None})
    load_seconds: float = 0.0
    # GPU-seconds per conversation of this model's heaviest cell (for the chunk-size advice)
    heaviest_conv_gpu_s: float = 0.0

    @property
    def local_gpu(self) -> bool:
        return self.backend in ("vllm", "transformers") and self.gpus > 0

    def add(self, role: str, scenario: str, tok: Tokens, scale: float) -> None:
        self.roles.add(role)
        self.tokens[scenario].add(tok, scale)
        self.by_role.setdefault(role, {"measured": Tokens(), "long": Tokens()})[scenario].add(tok, scale)


def estimate(config: dict, measured: Measured, registry: dict, throughput: Throughput | None = None,
             job_minutes: float = 240.0, budget_fraction: float = 0.5,
             passage_tokens: float | None = None) -> dict[str, Any]:
    """The whole estimate as a JSON-able dict (see ``format_report`` for the tables).

    Retrieved passages: an open-retrieval assistant call of the measured run carried
    ``passage_block_tokens`` for its measured top_k passages; in the target it carries the
    target's ``lic_rag.top_k`` passages of ``passage_tokens`` tokens each (default: as long as
    the measured run's). The difference is added to every open-retrieval assistant call.
    """
    tp = throughput or Throughput()
    lic = config["lic_rag"]
    notes: list[str] = list(measured.notes)
    block, top_k_measured = measured.passage_block_tokens(), measured.measured_top_k()
    passage_delta = 0.0
    per_passage_measured = block / top_k_measured if block is not None and top_k_measured else None
    if per_passage_measured is None:
        notes.append("passage length not measurable (needs FULL or CONCAT cells with and without retrieval and their "
                     "conversation files): retrieval prompts kept as measured")
    else:
        target_pp = per_passage_measured if passage_tokens is None else float(passage_tokens)
        passage_delta = lic["top_k"] * target_pp - block
    user_model = lic["user_simulator"]["model"] or lic["sharding"]["model"]
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
    per_conv_cache: dict[tuple, dict[str, dict[str, Tokens]]] = {}
    total_conv = 0
    for job in jobs:
        closed = retriever_kind(config, job["retriever"]) == "closed_book"
        key = cell_key(job["condition"], job["policy"], closed)
        cell = _lookup(measured, key, notes)
        if key not in per_conv_cache:
            delta = passage_delta if key[2] == "open" else 0.0
            per_conv_cache[key] = {sc: _per_conversation(cell, lic, sc, delta) for sc in ("measured", "long")}
        n_conv = _job_conversations(config, job)
        total_conv += n_conv
        a = row(job["model"])
        a.jobs += 1
        a.conversations += n_conv
        a.loads += 1
        u = row(user_model)
        if user_model != job["model"]:
            u.loads += 1
        for sc, per in per_conv_cache[key].items():
            a.add("assistant", sc, per["assistant"], n_conv)
            u.add("user_simulator", sc, per["user_simulator"], n_conv)
        cu = cells_used.setdefault(_key_str(key), {"jobs": 0, "conversations": 0})
        cu["jobs"] += 1
        cu["conversations"] += n_conv

    # sharding: one job per dataset, per-question means of the measured shard jobs
    n_questions = sum(config["datasets"][d]["n_questions"] for d in lic["datasets"])
    if measured.shard_questions:
        per_q = measured.shard_tokens.scaled(1.0 / measured.shard_questions)
        s = row(shard_model)
        s.loads += len(lic["datasets"])
        cap = lic["sharding"].get("max_tokens", 512) * lic["sharding"].get("attempts", 3)
        long_q = Tokens().add(per_q)
        long_q.completion_tokens = long_q.backend_completion_tokens = float(cap)
        s.add("sharding", "measured", per_q, n_questions)
        s.add("sharding", "long", long_q, n_questions)

    # GPU time
    for r in rows.values():
        if not r.local_gpu:
            if r.backend != "openai":
                r.gpu_hours = {"measured": 0.0, "long": 0.0}  # CPU model
            else:
                r.gpu_hours = {"measured": None, "long": None}
            continue
        if r.params_b is None:
            notes.append(f"{r.model}: params_b is not set in the registry: no GPU-hours")
            r.gpu_hours = {"measured": None, "long": None}
            continue
        if r.backend == "transformers":
            notes.append(f"{r.model}: transformers backend on GPU timed with the vLLM throughput model (optimistic)")
        r.load_seconds = tp.load_seconds(r.params_b)
        for sc in ("measured", "long"):
            t = r.tokens[sc]
            compute = tp.gpu_seconds(t.backend_prompt_tokens, t.backend_completion_tokens, r.params_b, r.gpu_model, r.gpus)
            r.gpu_hours[sc] = (compute + r.loads * r.load_seconds * r.gpus) / 3600.0
        # per-job wall time of this model's simulate jobs (heaviest cell, fullest chunk)
        heaviest = {"measured": 0.0, "long": 0.0}
        for key, per in per_conv_cache.items():
            for sc in heaviest:
                t = Tokens().add(per[sc]["assistant"])
                if user_model == r.model:
                    t.add(per[sc]["user_simulator"])
                gs = tp.gpu_seconds(t.backend_prompt_tokens, t.backend_completion_tokens, r.params_b, r.gpu_model, r.gpus)
                heaviest[sc] = max(heaviest[sc], gs)
        r.heaviest_conv_gpu_s = heaviest["long"]
        if r.jobs:
            conv_per_job = lic["chunk_size"] * lic["runs"]
            for sc in heaviest:
                r.max_job_minutes[sc] = (r.load_seconds + conv_per_job * heaviest[sc] / r.gpus) / 60.0
        if r.model == user_model and any(j["model"] != user_model for j in jobs):
            notes.append(f"{r.model}: runs as user simulator inside other models' simulate jobs, which request "
                         "GPUs only for their own assistant model")

    layout = _layout(config, rows, job_minutes, budget_fraction)
    return {
        "config": {
            "datasets": {d: config["datasets"][d]["n_questions"] for d in lic["datasets"]},
            "models": list(lic["models"]),
            "retrievers": list(lic["retrievers"]),
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
        },
        "measured": {
            "simulate_files": measured.files,
            "shard_files": measured.shard_files,
            "models": sorted(measured.models),
            "shard_questions": measured.shard_questions,
            "cells": {
                _key_str(k): {
                    "jobs": c.jobs,
                    "conversations": c.conversations,
                    "per_conversation": {r: t.to_dict(2) for r, t in c.per_conversation().items()},
                }
                for k, c in sorted(measured.cells.items())
            },
            "per_shard_question": (measured.shard_tokens.scaled(1.0 / measured.shard_questions).to_dict(2)
                                   if measured.shard_questions else None),
            "top_k": top_k_measured,
            "passage_block_tokens_per_call": None if block is None else round(block, 1),
            "tokens_per_passage": None if per_passage_measured is None else round(per_passage_measured, 1),
        },
        "grid": {
            "simulate_jobs": len(jobs),
            "shard_jobs": len(lic["datasets"]),
            "questions": n_questions,
            "conversations": total_conv,
            "cells": cells_used,
        },
        "models": [_row_dict(r) for r in rows.values()],
        "size_classes": _size_classes(rows),
        "totals": {
            sc: {
                **sum_tokens(r.tokens[sc] for r in rows.values()).to_dict(0),
                "gpu_hours": round(sum(r.gpu_hours[sc] or 0.0 for r in rows.values()), 1),
            }
            for sc in ("measured", "long")
        },
        "layout": layout,
        "assumptions": {
            **{k: v for k, v in asdict(tp).items()},
            "peak_bf16_tflops": PEAK_BF16_TFLOPS,
            "chars_per_token": CHARS_PER_TOKEN,
            "message_overhead_tokens": MESSAGE_OVERHEAD_TOKENS,
            "job_minutes": job_minutes,
            "budget_fraction": budget_fraction,
        },
        "notes": notes,
    }


def sum_tokens(items: Iterable[Tokens]) -> Tokens:
    total = Tokens()
    for t in items:
        total.add(t)
    return total


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
        "load_seconds": round(r.load_seconds, 1),
        "tokens": {sc: t.to_dict(0) for sc, t in r.tokens.items()},
        "by_role": {role: {sc: t.to_dict(0) for sc, t in d.items()} for role, d in r.by_role.items()},
        "gpu_hours": {sc: (round(v, 2) if v is not None else None) for sc, v in r.gpu_hours.items()},
        "max_job_minutes": {sc: (round(v, 1) if v is not None else None) for sc, v in r.max_job_minutes.items()},
    }


def _size_classes(rows: dict[str, ModelRow]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows.values():
        if not r.local_gpu:
            continue
        c = out.setdefault(_size_class(r.params_b), {"size_class": _size_class(r.params_b), "models": [],
                                                     "gpu_hours": {"measured": 0.0, "long": 0.0}})
        c["models"].append(r.model)
        for sc in ("measured", "long"):
            c["gpu_hours"][sc] = round(c["gpu_hours"][sc] + (r.gpu_hours[sc] or 0.0), 2)
    order = [name for _, name in SIZE_CLASSES]
    return sorted(out.values(), key=lambda c: order.index(c["size_class"]) if c["size_class"] in order else 99)


def _layout(config: dict, rows: dict[str, ModelRow], job_minutes: float, budget_fraction: float) -> dict[str, Any]:
    """Recommended chunk size and the SLURM request of each model's jobs.

    The chunk size is global (lic_rag.chunk_size). The advice is the largest balanced chunk
    (ceil(n / k) for a dataset of n questions) whose fullest job of the heaviest cell, in the
    ``long`` scenario, still takes at most ``budget_fraction`` of the job time limit for every
    GPU model: fewer, fuller jobs pay the model load less often and give vLLM bigger batches.
    """
    lic = config["lic_rag"]
    sizes = sorted({config["datasets"][d]["n_questions"] for d in lic["datasets"]})
    candidates = sorted({math.ceil(n / k) for n in sizes for k in range(1, n + 1)}, reverse=True)
    budget_s = job_minutes * 60.0 * budget_fraction
    gpu_rows = [r for r in rows.values() if r.local_gpu and r.jobs and r.params_b is not None]

    def fits(c: int) -> bool:
        return all(r.load_seconds + c * lic["runs"] * r.heaviest_conv_gpu_s / r.gpus <= budget_s for r in gpu_rows)

    def chunks(c: int) -> int:
        return sum(math.ceil(config["datasets"][d]["n_questions"] / c) for d in lic["datasets"])

    recommended = next((c for c in candidates if fits(c)), 1)
    per_model = []
    for r in rows.values():
        if not r.jobs:
            continue
        # a model's jobs = its (dataset-independent) cells x the chunks of every dataset
        n_jobs = r.jobs // chunks(lic["chunk_size"]) * chunks(recommended)
        entry = {"model": r.model, "kind": "gpu" if r.local_gpu else ("api" if r.backend == "openai" else "cpu"),
                 "jobs_now": r.jobs, "jobs_recommended": n_jobs}
        if r.local_gpu:
            entry["sbatch_gpus"] = f"{r.gpu_model}:{r.gpus}" if r.gpu_model else str(r.gpus)
            if r.params_b is not None:
                full = recommended * lic["runs"]
                entry["job_minutes_recommended_long"] = round((r.load_seconds + full * r.heaviest_conv_gpu_s / r.gpus) / 60, 1)
                entry["load_share_recommended_long"] = round(
                    r.load_seconds / (r.load_seconds + full * r.heaviest_conv_gpu_s / r.gpus), 3)
                # the same tokens, fewer model loads
                saved = (r.jobs - n_jobs) * r.load_seconds * r.gpus / 3600.0
                entry["gpu_hours_recommended"] = {sc: round(v - saved, 2) for sc, v in r.gpu_hours.items()}
        per_model.append(entry)
    total = {sc: round(sum(m.get("gpu_hours_recommended", {}).get(sc, 0.0) for m in per_model)
                       + sum(r.gpu_hours[sc] or 0.0 for r in rows.values() if r.local_gpu and not r.jobs), 1)
             for sc in ("measured", "long")}
    return {"chunk_size_now": lic["chunk_size"], "chunk_size_recommended": recommended, "job_minutes": job_minutes,
            "budget_fraction": budget_fraction, "models": per_model, "gpu_hours_recommended": total}


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


def format_report(est: dict[str, Any]) -> str:
    from tabulate import tabulate

    c, g = est["config"], est["grid"]
    lines = [
        f"lic_rag grid: {len(c['datasets'])} datasets ({g['questions']} questions) x {len(c['models'])} models x "
        f"{len(c['retrievers'])} retrievers, {c['runs']} runs, chunk_size {c['chunk_size']}",
        f"  {g['simulate_jobs']:,} simulate jobs + {g['shard_jobs']} shard jobs, {g['conversations']:,} conversations "
        "(every question assumed to pass sharding)",
        f"  measured on {est['measured']['simulate_files']} simulate and {est['measured']['shard_files']} shard "
        f"accounting files (models: {', '.join(est['measured']['models'])})",
    ]
    ms = est["measured"]
    if c["tokens_per_passage"] is not None:
        lines.append(
            f"  retrieval prompts: top_k {c['top_k']} x {c['tokens_per_passage']:.0f} tokens per passage (measured: top_k "
            f"{ms['top_k']:.1f} x {ms['tokens_per_passage']:.0f}), {c['passage_tokens_added_per_open_call']:+.0f} "
            "prompt tokens per open-retrieval assistant call")
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
            m["model"], "+".join(r.replace("user_simulator", "user-sim") for r in m["roles"]),
            "-" if m["params_b"] is None else m["params_b"], gpus, m["simulate_jobs"], f"{m['conversations']:,}",
            _fmt_n(tm["requests"]), _fmt_n(tm["prompt_tokens"]), _fmt_n(tm["completion_tokens"]),
            _fmt_n(tl["completion_tokens"]), _fmt_h(m["gpu_hours"]["measured"]), _fmt_h(m["gpu_hours"]["long"]),
        ])
    t_m, t_l = est["totals"]["measured"], est["totals"]["long"]
    rows.append(["TOTAL", "", "", "", g["simulate_jobs"], f"{g['conversations']:,}", _fmt_n(t_m["requests"]),
                 _fmt_n(t_m["prompt_tokens"]), _fmt_n(t_m["completion_tokens"]), _fmt_n(t_l["completion_tokens"]),
                 _fmt_h(t_m["gpu_hours"]), _fmt_h(t_l["gpu_hours"])])
    lines.append(tabulate(rows, headers=["model", "roles", "params_b", "GPUs/job", "jobs", "conversations", "LLM calls",
                                         "prompt tok", "completion tok", "completion tok (long)", "GPU-h",
                                         "GPU-h (long)"], tablefmt="github"))
    lines += ["", "GPU-hours per model size:"]
    lines.append(tabulate([[s["size_class"], ", ".join(s["models"]), _fmt_h(s["gpu_hours"]["measured"]),
                            _fmt_h(s["gpu_hours"]["long"])] for s in est["size_classes"]],
                          headers=["size", "models", "GPU-h", "GPU-h (long)"], tablefmt="github"))
    lay = est["layout"]
    lines += ["", f"SLURM layout: chunk_size {lay['chunk_size_recommended']} recommended (now {lay['chunk_size_now']}): "
              f"the fullest job of the heaviest cell stays within {lay['budget_fraction']:.0%} of a "
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
              f"{a['tp_efficiency']}; model load {a['load_fixed_s']:.0f} s + weights at {a['load_gb_per_s']} GB/s per job; "
              "API models: tokens only."]
    if est["notes"]:
        lines += ["", "Notes:"] + [f"  - {n}" for n in est["notes"]]
    return "\n".join(lines)


def run_estimate(config_path: str | Path, accounting_globs: Iterable[str] | None = None,
                 shard_globs: Iterable[str] | None = None, prompts_path: str | Path | None = DEFAULT_PROMPTS,
                 throughput: Throughput | None = None, job_minutes: float = 240.0,
                 budget_fraction: float = 0.5, passage_tokens: float | None = None) -> dict[str, Any]:
    from convrag.llm.registry import load_registry

    config = load_config(config_path)
    reg_path = Path(config["models_registry"])
    registry = load_registry(reg_path if reg_path.is_absolute() else REPO_ROOT / reg_path)
    measured = measure(accounting_globs or [DEFAULT_ACCOUNTING_GLOB],
                       shard_globs if shard_globs is not None else [DEFAULT_SHARD_ACCOUNTING_GLOB], prompts_path)
    return estimate(config, measured, registry, throughput, job_minutes, budget_fraction, passage_tokens)
