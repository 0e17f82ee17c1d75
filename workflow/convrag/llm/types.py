"""Request and response records of the LLM engine.

They are frozen and plain (strings, numbers, tuples) so that a request has one canonical
JSON form: the cache key is a hash of that form, and two requests that would give the same
answer always hash alike while any difference in messages or sampling gives a new key.

Label mode (``labels`` set): the request is *scored*, not generated. The response holds, for
each label, the log-probability that the assistant reply starts with that label (summed over
the label's tokens), and ``text`` is the most probable label. Used for p(ANSWERABLE) versus
p(UNANSWERABLE) readers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping


# the keys of a decoding-settings block (config $defs/sampling, --sampling JSON)
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop")


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; ``temperature == 0`` means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()

    def __post_init__(self):
        # Normalise so that equal settings give equal cache keys (0 vs 0.0, list vs tuple).
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", float(self.top_p))
        object.__setattr__(self, "max_tokens", int(self.max_tokens))
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        object.__setattr__(self, "stop", stop)
        if self.temperature < 0:
            raise ValueError(f"Sampling.temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"Sampling.top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"Sampling.max_tokens must be >= 1, got {self.max_tokens}")

    @staticmethod
    def settings(block: Mapping[str, Any]) -> dict[str, Any]:
        """The decoding keys of a config block (``SAMPLING_KEYS`` it has); others, such as a
        role's ``model``, are not sampling."""
        return {k: block[k] for k in SAMPLING_KEYS if k in block}

    @classmethod
    def from_config(cls, block: dict) -> "Sampling":
        """From a config block validated by the schema's ``$defs/sampling`` (its defaults are
        this class's)."""
        return cls(**cls.settings(block))

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens, "stop": list(self.stop)}


def _copy_messages(messages: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], ...]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"Request.messages[{i}] must be a mapping with 'role' and 'content'")
        out.append({str(k): str(v) for k, v in m.items()})
    return tuple(out)


@dataclass(frozen=True, eq=True)
class Request:
    """One chat call. ``seed`` and ``sample_index`` make repeated samples distinct and reproducible."""

    messages: tuple = ()
    sampling: Sampling = field(default_factory=Sampling)
    seed: int = 0
    sample_index: int = 0
    labels: tuple[str, ...] | None = None
    json_mode: bool = False

    def __post_init__(self):
        # A private copy, so a caller mutating its own list cannot change a queued request.
        object.__setattr__(self, "messages", _copy_messages(self.messages))
        if not self.messages:
            raise ValueError("Request.messages is empty")
        if isinstance(self.sampling, Mapping):
            object.__setattr__(self, "sampling", Sampling(**self.sampling))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "sample_index", int(self.sample_index))
        if self.labels is not None:
            labels = (self.labels,) if isinstance(self.labels, str) else tuple(str(x) for x in self.labels)
            if not labels or any(not x for x in labels):
                raise ValueError("Request.labels must be non-empty strings")
            object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "json_mode", bool(self.json_mode))

    def __hash__(self) -> int:  # messages are dicts: hash the canonical form instead
        import json
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @property
    def chat(self) -> list[dict[str, str]]:
        """The messages as a list of plain dicts, as chat templates and APIs expect."""
        return [dict(m) for m in self.messages]

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.chat, "sampling": self.sampling.to_dict(), "seed": self.seed,
                "sample_index": self.sample_index,
                "labels": list(self.labels) if self.labels is not None else None,
                "json_mode": self.json_mode}


@dataclass(frozen=True)
class Response:
    """A model answer; ``cached`` says it came from the cache, not the backend."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length" | "label"
    label_logprobs: dict[str, float] | None = None
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], cached: bool | None = None) -> "Response":
        r = cls(text=d["text"], prompt_tokens=int(d["prompt_tokens"]),
                completion_tokens=int(d["completion_tokens"]), finish_reason=d["finish_reason"],
                label_logprobs=d.get("label_logprobs"), cached=bool(d.get("cached", False)))
        return r if cached is None else dataclasses.replace(r, cached=cached)
