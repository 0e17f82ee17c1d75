"""LLM engine: batched, cached generation over transformers, vLLM and OpenAI-compatible backends.

Public API: ``Sampling``, ``Request``, ``Response`` (types), ``load_registry``/``ModelSpec``
(registry), ``LLMCache``/``cache_key`` (cache), ``Engine``/``load_engine`` (engine).
"""

from convrag.llm.types import Request, Response, Sampling

__all__ = ["Request", "Response", "Sampling"]
