"""transformers backend: HF folders or GGUF files, batched with left padding, CPU or GPU.

Why the sampling is hand-made: torch's global RNG makes a sampled answer depend on which
other requests shared its batch, so a rerun with a different cache state (other misses,
other batches) would change answers. Here each row adds Gumbel noise drawn from its own
generator seeded by ``(seed, sample_index, step)`` to its temperature/top-p-adjusted logits
and decoding is greedy (Gumbel-max trick = exact sampling from the softmax). The same
request then yields the same text alone or in any batch; temperature 0 is plain greedy.

``json_mode`` has no constrained decoding here: it only enters the cache key, so prompts
must ask for JSON and callers must parse leniently.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from convrag.errors import ConfigError, ModelError
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response

log = logging.getLogger(__name__)


TOP_CANDIDATES = 512  # candidate tokens per row for top-p (a full sort only when they do not suffice)
MIN_SHARED_PREFIX = 16  # shortest common prompt prefix worth computing once per batch


def shared_prefix_len(seqs: list[list[int]]) -> int:
    """Length of the longest common token prefix, leaving every row at least one own token."""
    if len(seqs) < 2:
        return 0
    first, n = seqs[0], min(len(s) for s in seqs) - 1
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return i if i >= MIN_SHARED_PREFIX else 0


def row_seed(seed: int, sample_index: int, step: int) -> int:
    """A 63-bit generator seed from (seed, sample_index, step); stable across processes."""
    digest = hashlib.sha256(f"{seed}:{sample_index}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _make_processors():
    """Define the LogitsProcessor / StoppingCriteria classes once torch is imported."""
    import torch
    from transformers import LogitsProcessor, StoppingCriteria

    class GumbelSampler(LogitsProcessor):
        """Per-row temperature + top-p, then per-row seeded Gumbel noise (greedy decoding follows).

        Vectorised over rows: one softmax and one ``topk`` of ``TOP_CANDIDATES`` tokens for
        all sampled rows (the nucleus of a top-p < 1 row nearly always lies inside it; a row
        whose candidates hold less than top_p of the mass is re-done with a full sort, so the
        kept set is exactly the full-sort one). Only the noise draw is per row (own seed).
        """

        def __init__(self, rows: list[Request], prompt_len: int):
            self.rows = rows
            self.prompt_len = prompt_len
            self.sampled = [i for i, r in enumerate(rows) if r.sampling.temperature > 0.0]
            if self.sampled:
                self.temps = torch.tensor([rows[i].sampling.temperature for i in self.sampled]).unsqueeze(1)
                self.top_p = torch.tensor([rows[i].sampling.top_p for i in self.sampled]).unsqueeze(1)

        def __call__(self, input_ids, scores):
            if not self.sampled:
                return scores  # all greedy
            step = input_ids.shape[1] - self.prompt_len
            out = scores.float().clone()
            idx = torch.tensor(self.sampled, device=out.device)
            logits = out[idx] / self.temps.to(out.device)
            nucleus = (self.top_p < 1.0).squeeze(1).tolist()
            if any(nucleus):
                probs = torch.softmax(logits, dim=-1)
                k = min(TOP_CANDIDATES, probs.shape[-1])
                top_vals, top_idx = torch.topk(probs, k, dim=-1)  # sorted, descending
                drop = torch.ones_like(probs, dtype=torch.bool)
                for j, row_nucleus in enumerate(nucleus):
                    if not row_nucleus:
                        drop[j] = False
                        continue
                    vals, order = top_vals[j], top_idx[j]
                    if float(vals.sum()) < float(self.top_p[j]):  # nucleus wider than the candidates
                        vals, order = torch.sort(probs[j], descending=True)
                    # keep a token while the mass before it is below top_p (keeps >= 1)
                    keep_sorted = (torch.cumsum(vals, dim=-1) - vals) < self.top_p[j]
                    drop[j, order[keep_sorted]] = False
                logits = logits.masked_fill(drop, float("-inf"))
            noise = torch.empty_like(logits)
            for j, i in enumerate(self.sampled):
                r = self.rows[i]
                gen = torch.Generator(device="cpu").manual_seed(row_seed(r.seed, r.sample_index, step))
                u = torch.rand(logits.shape[-1], generator=gen, dtype=torch.float64)
                u = u.clamp(1e-300, 1.0 - 1e-16)
                noise[j] = (-torch.log(-torch.log(u))).to(dtype=logits.dtype)
            out[idx] = logits + noise.to(device=logits.device)
            return out

    class RowStopper(StoppingCriteria):
        """Per-row end: EOS, a stop string, or the row's own max_tokens; records where and why."""

        def __init__(self, rows: list[Request], prompt_len: int, eos_ids: set[int], tokenizer):
            self.rows, self.prompt_len, self.eos_ids, self.tok = rows, prompt_len, eos_ids, tokenizer
            self.done_at: list[int | None] = [None] * len(rows)
            self.reason: list[str | None] = [None] * len(rows)

        def __call__(self, input_ids, scores, **kwargs):
            n = input_ids.shape[1] - self.prompt_len
            for i, r in enumerate(self.rows):
                if self.done_at[i] is not None:
                    continue
                last = int(input_ids[i, -1])
                if last in self.eos_ids:
                    self.done_at[i], self.reason[i] = n, "eos"
                elif r.sampling.stop and any(
                        s in self.tok.decode(input_ids[i, self.prompt_len:], skip_special_tokens=True)
                        for s in r.sampling.stop):
                    self.done_at[i], self.reason[i] = n, "stop"
                elif n >= r.sampling.max_tokens:
                    self.done_at[i], self.reason[i] = n, "length"
            return torch.tensor([d is not None for d in self.done_at], dtype=torch.bool,
                                device=input_ids.device)

    return GumbelSampler, RowStopper


class TransformersBackend:
    """Loads the model once; ``generate`` handles a mixed batch of generation and label requests."""

    def __init__(self, spec: ModelSpec):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec = spec
        self.torch = torch
        torch.set_num_threads(int(os.environ.get("CONVRAG_THREADS") or os.cpu_count() or 1))
        want_gpu = spec.gpus > 0 and torch.cuda.is_available()
        self.device = os.environ.get("CONVRAG_DEVICE") or ("cuda" if want_gpu else "cpu")
        if spec.dtype in ("auto", None):
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        else:
            dtype = getattr(torch, spec.dtype, None)
            if not isinstance(dtype, torch.dtype):
                raise ConfigError(f"{spec.where('dtype')}: unknown torch dtype {spec.dtype!r}")
        folder, gguf = spec.weights_location()
        if gguf and os.environ.get("CONVRAG_NO_GGUF_CONVERSION") != "1":
            from convrag.llm.convert import convert_gguf

            folder, gguf = str(convert_gguf(folder, gguf, dtype=spec.dtype or "float32")), None
        kw = {"gguf_file": gguf} if gguf else {}
        if spec.revision and "hf_repo" in (spec.weights or {}):
            kw["revision"] = spec.revision
        try:
            self.tok = AutoTokenizer.from_pretrained(folder, **kw)
            self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw)
        except (OSError, ValueError) as e:
            raise ModelError(f"{spec.name}: cannot load weights from {folder} {gguf or ''}: {e}") from e
        self.model.to(self.device).eval()
        self.template = self._chat_template(spec.chat_template)
        self.pad_id = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        eos = {self.tok.eos_token_id}
        gen_eos = self.model.generation_config.eos_token_id
        eos.update(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos])
        self.eos_ids = {int(e) for e in eos if e is not None}
        self.max_len = spec.max_model_len or getattr(self.model.config, "max_position_embeddings", None) or 4096
        self.GumbelSampler, self.RowStopper = _make_processors()
        self.share_prefix = os.environ.get("CONVRAG_SHARE_PREFIX", "1") != "0"

    @staticmethod
    def _chat_template(value: str | None) -> str | None:
        if not value:
            return None
        p = Path(value)
        return p.read_text(encoding="utf-8") if "{" not in value and p.exists() else value

    # -- tokenisation --------------------------------------------------------------------
    def prompt_ids(self, r: Request, reserve: int = 0) -> list[int]:
        text = self.tok.apply_chat_template(r.chat, tokenize=False, add_generation_prompt=True,
                                            chat_template=self.template)
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        room = max(1, self.max_len - reserve)
        if len(ids) > room:  # keep the end: the question and the generation prompt
            log.warning("%s: prompt of %d tokens truncated to the last %d", self.spec.name, len(ids), room)
            ids = ids[-room:]
        return ids

    def _left_pad(self, seqs: list[list[int]]):
        torch = self.torch
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
        return ids.to(self.device), mask.to(self.device)

    # -- generation ----------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        gen_idx = [i for i, r in enumerate(requests) if r.labels is None]
        lab_idx = [i for i, r in enumerate(requests) if r.labels is not None]
        if gen_idx:
            for i, resp in zip(gen_idx, self._generate([requests[i] for i in gen_idx])):
                out[i] = resp
        if lab_idx:
            for i, resp in zip(lab_idx, self._score_labels([requests[i] for i in lab_idx])):
                out[i] = resp
        return out  # type: ignore[return-value]

    def _generate(self, rows: list[Request]) -> list[Response]:
        torch = self.torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        prompts = [self.prompt_ids(r, reserve=r.sampling.max_tokens) for r in rows]
        shared = shared_prefix_len(prompts) if self.share_prefix else 0
        ids, mask = self._left_pad([p[shared:] for p in prompts])
        extra = {}
        if shared:
            # The common prefix (system prompt, worked examples) is computed once and its KV
            # cache copied to every row: [prefix][pads][own tokens], positions from the mask.
            prefix = torch.tensor([prompts[0][:shared]], dtype=torch.long, device=self.device)
            ids = torch.cat([prefix.expand(len(rows), -1), ids], dim=1)
            mask = torch.cat([torch.ones_like(prefix).expand(len(rows), -1), mask], dim=1)
            extra["cache"] = self._prefix_cache(prefix, len(rows))
        plen = ids.shape[1]
        sampler = self.GumbelSampler(rows, plen)
        stopper = self.RowStopper(rows, plen, self.eos_ids, self.tok)
        # A fresh config: only our settings apply, not sampling defaults shipped with the weights.
        cfg = GenerationConfig(do_sample=False, max_new_tokens=max(r.sampling.max_tokens for r in rows),
                               pad_token_id=self.pad_id, eos_token_id=sorted(self.eos_ids),
                               bos_token_id=self.tok.bos_token_id)
        with torch.inference_mode():
            seqs = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg,
                                       logits_processor=LogitsProcessorList([sampler]),
                                       stopping_criteria=StoppingCriteriaList([stopper]), **extra)
        results = []
        for i, r in enumerate(rows):
            gen = seqs[i, plen:].tolist()
            n = stopper.done_at[i] if stopper.done_at[i] is not None else min(len(gen), r.sampling.max_tokens)
            reason = stopper.reason[i] or "length"
            keep = gen[:n - 1] if reason == "eos" else gen[:n]
            text = self.tok.decode(keep, skip_special_tokens=True)
            if reason == "stop":
                cut = min((text.find(s) for s in r.sampling.stop if s in text), default=len(text))
                text = text[:cut]
            results.append(Response(text=text, prompt_tokens=len(prompts[i]), completion_tokens=n,
                                    finish_reason="length" if reason == "length" else "stop",
                                    label_logprobs=None, cached=False))
        return results

    def _prefix_cache(self, prefix, batch: int):
        """KV cache of ``prefix`` (1 x p), repeated for ``batch`` rows."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        with self.torch.inference_mode():
            self.model(input_ids=prefix, cache=cache, use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(batch)
        return cache

    # -- label scoring -------------------------------------------------------------------
    def _score_labels(self, rows: list[Request]) -> list[Response]:
        """log p(label | prompt) summed over label tokens; one forward pass per chunk of pairs."""
        torch = self.torch
        pairs = []  # (row, label, prompt_ids, label_ids)
        prompts = []
        for ri, r in enumerate(rows):
            label_ids = {lab: self.tok(lab, add_special_tokens=False)["input_ids"] for lab in r.labels}
            longest = max(len(v) for v in label_ids.values())
            p = self.prompt_ids(r, reserve=longest)
            prompts.append(p)
            pairs += [(ri, lab, p, label_ids[lab]) for lab in r.labels]
        scores: list[dict[str, float]] = [{} for _ in rows]
        chunk = max(self.spec.batch_size, 16)
        for c in range(0, len(pairs), chunk):
            part = pairs[c:c + chunk]
            ids, mask = self._left_pad([p + lab for _, _, p, lab in part])
            k = max(len(lab) for *_, lab in part)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                # Left padding puts every label at the end, so only the last k+1 logits are needed.
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos,
                                    logits_to_keep=k + 1).logits.float()
            logp = torch.log_softmax(logits, dim=-1)  # (B, k+1, V); position j predicts token j+1
            for b, (ri, lab, _, lab_ids) in enumerate(part):
                m = len(lab_ids)
                # label token t (0..m-1) is predicted by kept column k-m+t (window = last k+1 positions)
                cols = torch.arange(k - m, k, device=logp.device)
                tgt = torch.tensor(lab_ids, device=logp.device)
                scores[ri][lab] = float(logp[b, cols, tgt].sum())
        return [Response(text=max(s, key=s.get), prompt_tokens=len(prompts[i]), completion_tokens=0,
                         finish_reason="label", label_logprobs=s, cached=False)
                for i, s in enumerate(scores)]
