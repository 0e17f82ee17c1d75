"""Model backends behind one call: ``backend.generate(requests) -> list[Response]``.

Each backend module imports its heavy dependency (torch/transformers, vllm, openai) only
when constructed, so importing the engine, or answering a job fully from the cache, never
pays for (or needs) a framework.
"""

from __future__ import annotations

from typing import Protocol

from convrag.errors import ConfigError
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response


class Backend(Protocol):
    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer ``requests`` in order; responses have ``cached=False``."""


def make_backend(spec: ModelSpec) -> Backend:
    if spec.backend == "transformers":
        from convrag.llm.backends.transformers_backend import TransformersBackend
        return TransformersBackend(spec)
    if spec.backend == "vllm":
        from convrag.llm.backends.vllm_backend import VLLMBackend
        return VLLMBackend(spec)
    if spec.backend == "openai":
        from convrag.llm.backends.openai_backend import OpenAIBackend
        return OpenAIBackend(spec)
    raise ConfigError(f"{spec.where('backend')}: unknown backend {spec.backend!r}")
