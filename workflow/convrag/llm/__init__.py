"""LLM engine: batched, cached generation over transformers, vLLM and OpenAI-compatible backends.

Public API: ``Sampling``, ``Request``, ``Response`` (types), ``load_registry``/``ModelSpec``
(registry), ``LLMCache``/``cache_key`` (cache), ``Engine``/``load_engine`` (engine). Importing
this package loads no ML framework; backends import theirs when first needed.
"""

from convrag.llm.cache import LLMCache, cache_key
from convrag.llm.engine import Accounting, Engine, load_engine
from convrag.llm.registry import ModelSpec, load_registry
from convrag.llm.types import Request, Response, Sampling

__all__ = ["Accounting", "Engine", "LLMCache", "ModelSpec", "Request", "Response", "Sampling",
           "cache_key", "load_engine", "load_registry"]
