"""The LLM engine: dedupe -> cache lookup -> batched backend calls -> cache store.

Why this shape: the grids send the same prompt many times (reruns, shared turns, restarts),
so every request is first reduced to a content-hash key; only unseen keys reach the
backend, in batches (the main performance lever), and each answered batch is stored at
once, so a killed job resumes without re-paying. The backend is built on the first miss, so
a job answered fully from the cache never loads weights. ``accounting`` records what was
paid (calls, tokens, seconds inside the backend) so cost and overhead are measurable.

Replay and traces (config ``llm_cache``, passed to jobs as environment variables, so no stage
needs a new argument): under strict replay (``CONVRAG_LLM_REPLAY=strict``) a cache miss is an
error naming the request, model, role and job, raised before any backend is built, so a run
proves that it used recorded answers only. With ``CONVRAG_LLM_TRACE=DIR`` every engine appends
the keys it used, hits and misses, to ``DIR/<pid>.jsonl``: what ``convrag cache export`` needs to
bundle exactly the entries of a set of targets (convrag.llm.bundle).

Threads: ``generate`` may be called from several threads at once (a job that overlaps its API
roles with its GPU work: lic_rag's simulate). The accounting, the lazy backend build, the traces
and the cache are safe for that; an API backend (``openai``) is called concurrently, a local
backend (vLLM, transformers) by one thread at a time (one lock per loaded model).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from convrag.errors import ConfigError, ModelError, ReplayMissError
from convrag.io import write_json
from convrag.progress import progress
from convrag.llm.cache import LLMCache, cache_key, canonical_json, prompt_hash
from convrag.llm.registry import DEFAULT_REGISTRY, ModelSpec, get_spec, load_registry
from convrag.llm.types import Request, Response


@dataclass
class Accounting:
    """Running totals for one Engine; also readable as a mapping (``acc["calls"]``)."""

    requests: int = 0  # requests passed to generate (with duplicates)
    unique_requests: int = 0  # after in-call deduplication
    cache_hits: int = 0  # unique requests answered from the cache
    calls: int = 0  # requests sent to the backend
    batches: int = 0  # backend calls
    prompt_tokens: int = 0  # over all returned responses, cached or not
    completion_tokens: int = 0
    backend_prompt_tokens: int = 0  # only responses the backend produced in this engine
    backend_completion_tokens: int = 0
    backend_computed_prompt_tokens: int = 0  # prompt tokens the backend computed (reused prefixes are not)
    backend_seconds: float = 0.0  # time inside backend.generate
    backend_prefill_seconds: float = 0.0  # of which prompt forward passes (backends that measure it)
    backend_prefill_positions: int = 0  # positions the prompt passes computed, left padding included
    backend_decode_steps: int = 0  # decode forward passes (transformers backend)
    backend_decode_rows: int = 0  # rows over those passes: / backend_decode_steps = the mean decode batch
    load_seconds: float = 0.0  # time to build the backend (load weights, start clients)
    wall_seconds: float = 0.0  # time inside Engine.generate, loading included

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def add(self, other: "Accounting") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# backend counters copied into Accounting.backend_<name> per call (backends without them add 0)
_BACKEND_COUNTS = ("prefill_positions", "decode_steps", "decode_rows")


def _prompt_size(r: Request) -> int:
    return sum(len(m.get("content", "")) for m in r.messages)


REPLAY_ENV = "CONVRAG_LLM_REPLAY"  # "strict": every cache miss is an error (config llm_cache.replay)
TRACE_ENV = "CONVRAG_LLM_TRACE"  # a folder: engines append the keys they use (config llm_cache.trace)
JOB_ENV = "CONVRAG_JOB"  # optional name of the job, for traces and replay errors (default: from sys.argv)
_OFF = ("", "0", "false", "off", "no")


def replay_mode(value: str | None = None) -> str | None:
    """``"strict"`` or None, from ``value`` or else $CONVRAG_LLM_REPLAY; read per engine, not at
    import, because warm-started jobs import this module before their environment is applied."""
    raw = os.environ.get(REPLAY_ENV, "") if value is None else value
    mode = str(raw).strip().lower()
    if mode in _OFF:
        return None
    if mode == "strict":
        return "strict"
    source = f"${REPLAY_ENV}" if value is None else "replay"
    raise ConfigError(f"{source}={raw!r}: unknown LLM replay mode (config llm_cache.replay: false or strict)")


def job_name(argv: Sequence[str] | None = None) -> str:
    """The job an engine runs in: $CONVRAG_JOB, else the `convrag` stage words and output arguments
    (``--out*``, ``--accounting``) of the command line, which is what identifies a workflow job."""
    if os.environ.get(JOB_ENV):
        return os.environ[JOB_ENV]
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return f"pid {os.getpid()}"
    prog = Path(argv[0]).name
    if prog not in ("convrag", "cli.py", "__main__.py"):
        return " ".join([prog, *argv[1:]])[:300]
    words, rest = ["convrag"], argv[1:]
    i = 0
    while i < len(rest) and not rest[i].startswith("-"):
        words.append(rest[i])
        i += 1
    while i < len(rest):
        name, eq, _ = rest[i].partition("=")
        if name.startswith("--out") or name == "--accounting":
            if eq:
                words.append(rest[i])
            elif i + 1 < len(rest):
                words += [name, rest[i + 1]]
                i += 1
        i += 1
    return " ".join(words)


def _preview(request: Request, n: int = 120) -> str:
    last = request.messages[-1]
    text = " ".join(str(last.get("content", "")).split())
    return f"{last.get('role', '?')} message {text[:n]!r}" + (" (cut)" if len(text) > n else "")


class Engine:
    """``generate(requests) -> responses`` for one registry model, with cache and accounting."""

    def __init__(self, spec: ModelSpec, cache: LLMCache | None = None, backend: Any = None,
                 pool: "EnginePool | None" = None, role: str | None = None, replay: str | None = None,
                 trace: str | Path | None = None):
        """``role`` (the name the job's accounting gives this engine) only labels traces and
        replay errors; ``replay``/``trace`` default to $CONVRAG_LLM_REPLAY/$CONVRAG_LLM_TRACE."""
        self.spec = spec
        self.cache = cache
        self._backend = backend  # injectable for tests; otherwise built lazily
        self._pool = pool  # engines of one pool share one loaded backend per model
        self.model_id = spec.model_id()
        self.revision = spec.load_revision()  # a `lock` revision: its commit
        self.accounting = Accounting()
        self.role = role
        self.replay = replay_mode(replay)
        trace = os.environ.get(TRACE_ENV) if trace is None else trace
        self.trace_dir = Path(trace) if trace else None
        self._traced: set[str] = set()  # keys already in this engine's trace lines
        self._lock = threading.Lock()  # accounting, lazy backend, traces (see the module doc)
        # a local backend runs one call at a time; engines of one pool share its model's lock
        self._serial = None if is_remote(self) else (pool.lock(spec) if pool is not None else threading.Lock())

    @property
    def backend_loaded(self) -> bool:
        return self._backend is not None

    @property
    def backend(self):
        with self._lock:
            if self._backend is None:
                t0 = time.perf_counter()
                if self._pool is not None:
                    self._backend = self._pool.backend(self.spec)
                else:
                    from convrag.llm.node import make_backend  # through the node's server when set
                    self._backend = make_backend(self.spec)
                self.accounting.load_seconds += time.perf_counter() - t0
            return self._backend

    def key(self, request: Request) -> str:
        return cache_key(self.model_id, self.revision, request)

    def _trace(self, unique: dict[str, Request], hits: set[str]) -> None:
        """Append one line per key not yet traced by this engine to ``<trace dir>/<pid>.jsonl``
        (one file per process, so concurrent jobs never interleave; one write per call)."""
        with self._lock:
            new = [k for k in unique if k not in self._traced]
            if not new:
                return
            job = job_name()
            lines = "".join(canonical_json({
                "key": k, "model": self.spec.name, "model_id": self.model_id, "revision": self.revision,
                "role": self.role, "job": job, "prompt_sha256": prompt_hash(unique[k]), "hit": k in hits}) + "\n"
                for k in new)
            self.trace_dir.mkdir(parents=True, exist_ok=True)
            with open(self.trace_dir / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as fh:
                fh.write(lines)
            self._traced.update(new)

    def _replay_miss(self, misses: list[str], unique: dict[str, Request]) -> ReplayMissError:
        first = misses[0]
        where = self.cache.path if self.cache is not None else "(no cache configured)"
        return ReplayMissError(
            f"strict replay (llm_cache.replay: strict, ${REPLAY_ENV}): {len(misses)} of {len(unique)} requests "
            f"are not in the LLM cache {where}; model {self.spec.name} ({self.model_id}, revision "
            f"{self.revision}), role {self.role or 'unknown'}, job `{job_name()}`; first missing key {first}: "
            f"{_preview(unique[first])}. Import a cache bundle that covers this target (convrag cache import) "
            f"or run without strict replay.")

    def generate(self, requests: Sequence[Request], desc: str | None = None) -> list[Response]:
        """Answer ``requests`` in order (see module doc); ``desc`` turns on a tqdm bar. The call's
        counts are added to ``accounting`` at its end (under a lock: calls from several threads),
        those of a failed call too."""
        t_start = time.perf_counter()
        acc = Accounting()
        try:
            return self._generate(requests, desc, acc, t_start)
        finally:
            with self._lock:
                self.accounting.add(acc)

    def _generate(self, requests, desc, acc: Accounting, t_start: float) -> list[Response]:
        requests = list(requests)
        for i, r in enumerate(requests):
            if not isinstance(r, Request):
                raise TypeError(f"generate: requests[{i}] is {type(r).__name__}, not Request")
        keys = [self.key(r) for r in requests]
        unique: dict[str, Request] = {}
        for k, r in zip(keys, requests):
            unique.setdefault(k, r)
        found = self.cache.get_many(list(unique)) if self.cache is not None else {}
        results: dict[str, Response] = {}
        for k, v in found.items():
            try:
                results[k] = Response.from_dict(v, cached=True)
            except (KeyError, TypeError, ValueError):
                pass  # an unreadable entry is simply asked again (and overwritten)
        misses = [k for k in unique if k not in results]
        acc.requests += len(requests)
        acc.unique_requests += len(unique)
        acc.cache_hits += len(results)
        if self.trace_dir is not None:
            self._trace(unique, set(results))
        if misses and self.replay == "strict":
            raise self._replay_miss(misses, unique)  # before any backend is built

        if misses:
            # Similar lengths share a batch: less padding. Sampling is batch-invariant, so
            # regrouping cannot change any answer.
            misses.sort(key=lambda k: _prompt_size(unique[k]))
            size = len(misses) if self.spec.backend == "vllm" else self.spec.batch_size
            backend = self.backend
            with progress(len(misses), desc and f"{desc} ({self.spec.name})", unit="req") as bar:
                for i in range(0, len(misses), size):
                    chunk = misses[i:i + size]
                    shown = bar.n
                    # a local backend's counters and progress hook belong to this call while it holds the lock
                    with self._serial or contextlib.nullcontext():
                        t0 = time.perf_counter()
                        before = getattr(backend, "prefill_tokens", None)
                        before_s = getattr(backend, "prefill_seconds", 0.0)
                        counts = {f: getattr(backend, f, 0) for f in _BACKEND_COUNTS}
                        if hasattr(backend, "on_progress"):  # a backend that reports prompts as they finish
                            backend.on_progress = bar.update
                        try:
                            answers = backend.generate([unique[k] for k in chunk])
                        finally:
                            if hasattr(backend, "on_progress"):
                                backend.on_progress = None
                        acc.backend_seconds += time.perf_counter() - t0
                        acc.backend_prefill_seconds += getattr(backend, "prefill_seconds", 0.0) - before_s
                        for f, n in counts.items():
                            setattr(acc, f"backend_{f}", getattr(acc, f"backend_{f}") + getattr(backend, f, 0) - n)
                        computed = backend.prefill_tokens - before if before is not None else None
                    if len(answers) != len(chunk):
                        raise ModelError(f"{self.spec.name}: backend returned {len(answers)} "
                                         f"responses for {len(chunk)} requests")
                    answers = [dataclasses.replace(a, cached=False) for a in answers]
                    acc.batches += 1
                    acc.calls += len(chunk)
                    acc.backend_prompt_tokens += sum(a.prompt_tokens for a in answers)
                    acc.backend_completion_tokens += sum(a.completion_tokens for a in answers)
                    # a backend that does not count reuse computed every prompt token (as far as we know)
                    acc.backend_computed_prompt_tokens += (computed if computed is not None
                                                           else sum(a.prompt_tokens for a in answers))
                    if self.cache is not None:
                        self.cache.put_many({k: a.to_dict() for k, a in zip(chunk, answers)})
                    results.update(zip(chunk, answers))
                    if len(chunk) > bar.n - shown:  # what the backend did not report itself
                        bar.update(len(chunk) - (bar.n - shown))

        out = [results[k] for k in keys]
        acc.prompt_tokens += sum(r.prompt_tokens for r in out)
        acc.completion_tokens += sum(r.completion_tokens for r in out)
        acc.wall_seconds += time.perf_counter() - t_start
        return out

    def write_accounting(self, path: str | Path) -> None:
        """Atomic JSON with the totals plus which model and revision were used."""
        acc = self.accounting.to_dict()
        rate = acc["calls"] / acc["backend_seconds"] if acc["backend_seconds"] > 0 else None
        write_json(path, {"model": self.spec.name, "backend": self.spec.backend,
                          "model_id": self.model_id, "revision": self.revision,
                          "params_b": self.spec.params_b, **acc,
                          "requests_per_backend_second": rate})


class EnginePool:
    """Engines for several roles (assistant, user simulator, retriever, judge) over one cache.

    Each ``engine(name)`` call returns a new Engine with its own accounting, so every role's
    cost is reported apart, while all engines of one model share one backend, loaded on the
    first cache miss of any of them (a model is never loaded twice in a job).
    """

    def __init__(self, registry_path: str | Path = DEFAULT_REGISTRY, cache_path: str | Path | None = None):
        self.registry = load_registry(registry_path)
        self.cache = LLMCache(cache_path) if cache_path is not None else None
        self._backends: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @staticmethod
    def _key(spec: ModelSpec) -> str:
        # one backend per model and chat-template variables (a model with thinking on and off)
        return f"{spec.name} {canonical_json(spec.chat_template_kwargs or {})}"

    def engine(self, model: str, role: str | None = None, template_kwargs: dict | None = None) -> Engine:
        spec = get_spec(self.registry, model)
        if template_kwargs:
            spec = dataclasses.replace(spec, chat_template_kwargs={**(spec.chat_template_kwargs or {}),
                                                                    **template_kwargs})
        return Engine(spec, self.cache, pool=self, role=role)

    def backend(self, spec: ModelSpec):
        key = self._key(spec)
        with self._guard:  # engines of one model in two threads build it once
            if key not in self._backends:
                from convrag.llm.node import make_backend  # through the node's server when set
                self._backends[key] = make_backend(spec)
            return self._backends[key]

    def lock(self, spec: ModelSpec) -> threading.Lock:
        """The lock of a local model's backend: its engines call it one at a time."""
        with self._guard:
            return self._locks.setdefault(self._key(spec), threading.Lock())

    def close(self) -> None:
        for b in self._backends.values():
            if hasattr(b, "close"):
                b.close()
        self._backends.clear()


def is_remote(engine) -> bool:
    """Whether ``engine`` calls an API model (backend ``openai``): its calls wait on the network,
    not on this machine's GPU or CPU, so they can overlap local work. False for anything without
    a registry spec (a test's stand-in)."""
    return getattr(getattr(engine, "spec", None), "backend", None) == "openai"


def load_engine(model: str, registry_path: str | Path = DEFAULT_REGISTRY,
                cache_path: str | Path | None = None, role: str | None = None) -> Engine:
    """Engine for registry entry ``model``; ``cache_path=None`` disables the cache."""
    spec = get_spec(load_registry(registry_path), model)
    cache = LLMCache(cache_path) if cache_path is not None else None
    return Engine(spec, cache, role=role)
