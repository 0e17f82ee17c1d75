"""Model registry: ``config/models.yaml`` maps a short model name to how to run it.

A study config names models only by these keys, so adding a model is one YAML entry and no
code. Every key is checked here, once, so a typo fails at start-up with the exact key path
(``models.yaml: <name>.<key>``) rather than hours later on a GPU node.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from convrag.errors import ConfigError
from convrag.io import read_yaml

BACKENDS = ("transformers", "vllm", "openai")
DEFAULT_REGISTRY = "config/models.yaml"


@dataclass
class ModelSpec:
    """How to load and call one model (fields mirror the YAML keys)."""

    name: str
    backend: str
    weights: dict[str, str] | None = None  # {package, file} | {path} | {hf_repo}
    revision: str | None = None
    chat_template: str | None = None  # None: the tokenizer's; else a file path or inline Jinja
    # extra variables of the chat template, e.g. {enable_thinking: false} for Qwen3 models
    chat_template_kwargs: dict[str, Any] | None = None
    batch_size: int = 8
    max_model_len: int | None = None
    dtype: str = "auto"
    gpus: int = 0
    gpu_model: str | None = None
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    # vLLM's scheduler: the most sequences in one step and the most tokens one step computes
    # (None: vLLM's own default). A grid's short prompts decode faster with more rows per step;
    # long shared prefixes prefill in fewer steps with a larger token budget.
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    api_model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    max_retries: int = 5
    timeout_s: float = 120.0
    params_b: float | None = None
    family: str | None = None  # the model family (default: the name's leading letters, qwen3-8b -> qwen)
    source: str = field(default="", repr=False)  # the registry file, for error messages
    _resolved: str | None = field(default=None, repr=False, compare=False)  # a `lock` revision's commit

    def where(self, key: str) -> str:
        return f"{self.source or 'models.yaml'}: {self.name}.{key}"

    def load_revision(self) -> str | None:
        """The revision a model is loaded and cached at: ``resolved_revision``, with ``lock``
        resolved to its commit (the run's lock file, else the hub now, recorded there:
        ``convrag.sources.model_revision``), so the cache never keys on a moving branch."""
        if self.revision == "lock" and self.weights and "hf_repo" in self.weights:
            if self._resolved is None:
                from convrag.sources import model_revision

                self._resolved = model_revision("model", self.weights["hf_repo"], "lock")
            return self._resolved
        return self.resolved_revision()

    def resolved_revision(self) -> str | None:
        """The revision, defaulting to the weights package's version for packaged weights; a
        ``lock`` revision's commit: resources/sources.yaml's pin, else the run's lock file's entry
        (else ``lock``: what a plan or a table shows before the first load)."""
        if self.revision == "lock" and self.weights and "hf_repo" in self.weights:
            from convrag.sources import Lock, is_commit, pinned_model_revision

            if is_commit(pinned := pinned_model_revision(self.weights["hf_repo"])):
                return pinned
            entry = Lock.from_env().get(f"hf-model:{self.weights['hf_repo']}")
            return entry["revision"] if entry else "lock"
        if self.revision:
            return str(self.revision)
        if self.weights and "package" in self.weights:
            try:
                return importlib.metadata.version(self.weights["package"])
            except importlib.metadata.PackageNotFoundError:
                return None
        return None

    def model_family(self) -> str:
        """Its family, for analyses that take the largest model of each (``family``, else the
        letters its name starts with: ``llama-3.1-8b`` -> llama, ``qwen3.6-27b`` -> qwen)."""
        return self.family or re.match(r"[A-Za-z]*", self.name).group(0).lower() or self.name

    def model_id(self) -> str:
        """What is actually run (backend, weights, template, dtype, API model), as canonical JSON.

        The cache keys on this rather than on the registry name, so renaming an entry keeps its
        cache while swapping weights, template or dtype never serves another model's answers.
        """
        ident = {"backend": self.backend, "weights": self.weights, "chat_template": self.chat_template,
                 "dtype": self.dtype, "api_model": self.api_model}
        if self.chat_template_kwargs:  # only when set, so the ids of every other model stay as they were
            ident["chat_template_kwargs"] = self.chat_template_kwargs
        return json.dumps(ident, sort_keys=True, separators=(",", ":"))

    def weights_location(self) -> tuple[str, str | None]:
        """``(folder_or_repo, gguf_file_or_None)`` for transformers/vLLM loading."""
        w = self.weights or {}
        if "package" in w:
            spec = importlib.util.find_spec(w["package"].replace("-", "_"))
            if spec is None or not spec.submodule_search_locations:
                raise ConfigError(f"{self.where('weights.package')}: package {w['package']!r} is not installed")
            folder = spec.submodule_search_locations[0]  # located, never imported
            f = w.get("file")
            if f and not (Path(folder) / f).exists():
                raise ConfigError(f"{self.where('weights.file')}: {f!r} not found in {folder}")
            return folder, f
        if "path" in w:
            p = Path(w["path"]).expanduser()
            if not p.is_absolute() and self.source and Path(self.source).is_file():
                # relative to the registry file (a fine-tuned model's registry sits beside its
                # weights, so a results folder moved elsewhere still loads its own)
                p = Path(self.source).parent / p
            if p.suffix == ".gguf":
                return str(p.parent), p.name
            return str(p), w.get("file")
        if "hf_repo" in w:
            return w["hf_repo"], w.get("file")
        raise ConfigError(f"{self.where('weights')}: no weights given")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d


_FIELDS = {f.name: f for f in fields(ModelSpec) if f.name not in ("name", "source")}
_WEIGHT_KEYS = {"package", "file", "path", "hf_repo"}
_POS_INT = ("batch_size", "tensor_parallel", "concurrency")
_NONNEG_INT = ("gpus", "max_retries")


def _check(spec: ModelSpec) -> None:
    w = spec.where
    if spec.backend not in BACKENDS:
        raise ConfigError(f"{w('backend')}: unknown backend {spec.backend!r}; expected one of {', '.join(BACKENDS)}")
    if spec.weights is not None:
        if not isinstance(spec.weights, dict):
            raise ConfigError(f"{w('weights')}: expected a mapping, got {type(spec.weights).__name__}")
        for k in spec.weights:
            if k not in _WEIGHT_KEYS:
                raise ConfigError(f"{w('weights.' + str(k))}: unknown key; expected {sorted(_WEIGHT_KEYS)}")
        kinds = [k for k in ("package", "path", "hf_repo") if k in spec.weights]
        if len(kinds) != 1:
            raise ConfigError(f"{w('weights')}: give exactly one of package, path, hf_repo")
        spec.weights = {k: str(v) for k, v in spec.weights.items()}
    for k in _POS_INT:
        v = getattr(spec, k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{w(k)}: expected a positive integer, got {v!r}")
    for k in _NONNEG_INT:
        v = getattr(spec, k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError(f"{w(k)}: expected a non-negative integer, got {v!r}")
    if spec.max_model_len is not None and (not isinstance(spec.max_model_len, int) or spec.max_model_len < 1):
        raise ConfigError(f"{w('max_model_len')}: expected a positive integer, got {spec.max_model_len!r}")
    for k in ("max_num_seqs", "max_num_batched_tokens"):
        v = getattr(spec, k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{w(k)}: expected a positive integer or null (vLLM's default), got {v!r}")
        if v is not None and spec.backend not in ("vllm", "transformers"):
            raise ConfigError(f"{w(k)}: a scheduler setting of the vllm and transformers backends; this model's "
                              f"backend is {spec.backend}")
    if not isinstance(spec.gpu_memory_utilization, (int, float)) or not 0 < spec.gpu_memory_utilization <= 1:
        raise ConfigError(f"{w('gpu_memory_utilization')}: expected a number in (0, 1]")
    if not isinstance(spec.timeout_s, (int, float)) or spec.timeout_s <= 0:
        raise ConfigError(f"{w('timeout_s')}: expected a positive number")
    if spec.family is not None and not isinstance(spec.family, str):
        raise ConfigError(f"{w('family')}: expected a name")
    if spec.params_b is not None and not isinstance(spec.params_b, (int, float)):
        raise ConfigError(f"{w('params_b')}: expected a number (billions of parameters)")
    if spec.backend in ("transformers", "vllm") and not spec.weights:
        raise ConfigError(f"{w('weights')}: required for the {spec.backend} backend")
    if spec.backend == "vllm" and spec.tensor_parallel > max(spec.gpus, 1):
        raise ConfigError(f"{w('tensor_parallel')}: {spec.tensor_parallel} exceeds gpus={spec.gpus}")
    if spec.backend == "openai":
        for k in ("api_model", "api_key_env"):
            if not getattr(spec, k):
                raise ConfigError(f"{w(k)}: required for the openai backend")
    if spec.revision is not None:
        spec.revision = str(spec.revision)
    if spec.chat_template_kwargs is not None and not isinstance(spec.chat_template_kwargs, dict):
        raise ConfigError(f"{w('chat_template_kwargs')}: expected a mapping of template variables")


def parse_registry(data: Any, source: str = "models.yaml") -> dict[str, ModelSpec]:
    """Validate an already-loaded registry mapping."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source}: expected a non-empty mapping of model name -> settings")
    out: dict[str, ModelSpec] = {}
    for name, entry in data.items():
        name = str(name)
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: {name}: expected a mapping, got {type(entry).__name__}")
        for k in entry:
            if k not in _FIELDS:
                raise ConfigError(f"{source}: {name}.{k}: unknown key; expected one of {', '.join(_FIELDS)}")
        if "backend" not in entry:
            raise ConfigError(f"{source}: {name}.backend: required")
        spec = ModelSpec(name=name, source=source, **entry)
        _check(spec)
        out[name] = spec
    return out


def load_registry(path: str | Path = DEFAULT_REGISTRY) -> dict[str, ModelSpec]:
    """Read and validate ``models.yaml``; errors name ``<file>: <model>.<key>``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: model registry not found")
    # strict: a model named twice is an error naming both lines, not the last entry kept silently
    return parse_registry(read_yaml(path, error=ConfigError), source=str(path))


def get_spec(registry: dict[str, ModelSpec], name: str) -> ModelSpec:
    try:
        return registry[name]
    except KeyError:
        from convrag.registry import unknown_name

        src = next(iter(registry.values())).source if registry else "models.yaml"
        raise ConfigError(unknown_name("model", name, sorted(registry), where=src)) from None
