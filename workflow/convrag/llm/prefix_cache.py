"""Prompt-prefix reuse for the transformers backend: KV caches of token sequences already
computed in this process, looked up by longest common token prefix.

Why: a simulated conversation's next call repeats its previous prompt and reply, a batch of
judge calls repeats one system prompt and worked examples, and a label-scored prompt is
scored once per label. Prefill on CPU runs at a few hundred tokens per second, so computing
each prompt token once is the lever (vLLM does the same on GPU with automatic prefix
caching, a hash per block of tokens; here a linear scan over a few hundred entries is
cheap next to one forward pass).

An entry holds the keys and values of every layer for one sequence, positions 0..n-1
(rotary positions are part of the keys, so a prefix is valid wherever it is reused as long
as the reused row's positions also start at 0). An entry that is a prefix of a newer one is
dropped (the newer one covers it); the least recently used entries go when the byte budget
(``CONVRAG_PREFIX_CACHE_MB``, 2048 by default) is full.

The batch's own cache (:func:`buffered_cache`) keeps each layer's keys and values in a buffer
sized for the prompt and the longest reply, so decoding writes one column per step in place.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicLayer


@dataclass
class Entry:
    ids: torch.Tensor  # (n,) long
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values (heads, n, dim)

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.kv)


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two 1-D id tensors."""
    m = min(len(a), len(b))
    if m == 0:
        return 0
    diff = (a[:m] != b[:m]).nonzero()
    return int(diff[0, 0]) if len(diff) else m


class PrefixStore:
    """Longest-prefix lookup over stored KV sequences, with an LRU byte budget."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self._next = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0

    def lookup(self, ids: list[int], limit: int) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with ``ids`` (at most ``limit`` tokens) and that length."""
        if limit <= 0 or not self.entries:
            return None, 0
        q = torch.tensor(ids[:limit], dtype=torch.long)
        best, best_n, best_key = None, 0, None
        for key, e in self.entries.items():
            n = common_prefix(e.ids, q)
            if n > best_n:
                best, best_n, best_key = e, n, key
        if best_key is not None:
            self.entries.move_to_end(best_key)
        return best, best_n

    def add(self, ids: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Store ``kv`` (per layer, heads x len(ids) x dim) for ``ids``; drop entries it covers."""
        t = torch.tensor(ids, dtype=torch.long)
        for key, e in list(self.entries.items()):
            n = common_prefix(e.ids, t)
            if n == len(t):  # already covered by a longer (or equal) entry
                self.entries.move_to_end(key)
                return
            if n == len(e.ids):  # the new sequence extends this one
                self.bytes -= e.nbytes
                del self.entries[key]
        entry = Entry(t, kv)
        if entry.nbytes > self.budget:
            return
        self.entries[self._next] = entry
        self._next += 1
        self.bytes += entry.nbytes
        while self.bytes > self.budget:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.nbytes


def cache_layers(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of a transformers DynamicCache (5.x ``layers``; older key/value lists)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def row_kv(cache, row: int, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A copy of one batch row's keys and values at ``positions`` (its non-padding columns)."""
    return [(k[row][:, positions].clone(), v[row][:, positions].clone()) for k, v in cache_layers(cache)]


def buffered_cache(cache_cls, config, room: int):
    """A DynamicCache whose plain layers keep their keys and values in preallocated buffers
    (:class:`BufferLayer`, room for ``room`` positions beyond the first update). Other layer
    kinds (sliding windows, ...) are left as they are."""
    cache = cache_cls(config=config)
    if hasattr(cache, "layers"):
        cache.layers = [BufferLayer(room) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def _columns(like: torch.Tensor, n: int) -> torch.Tensor:
    """An uninitialised (batch, heads, n, dim) tensor shaped and typed like ``like``."""
    return like.new_empty(like.shape[:2] + (n, like.shape[3]))


class BufferLayer(DynamicLayer):
    """A DynamicLayer that writes new positions into a preallocated buffer instead of
    concatenating: the decode loop otherwise copies (and allocates) the whole cache at every
    step, which dominates decoding at long prompts and large batches on CPU (measured 3.4x per
    step at 32 rows x 1,500 positions; benchmarks/README.md). ``keys`` / ``values`` are views of
    the filled columns, so attention sees exactly the tensors a DynamicLayer holds
    (bit-identical logits, tested)."""

    def __init__(self, room: int = 0):
        super().__init__()
        self.room, self.filled, self.kbuf, self.vbuf = max(0, int(room)), 0, None, None

    def update(self, key_states, value_states, *args, **kwargs):
        q = key_states.shape[-2]
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.kbuf, self.vbuf = (_columns(t, q + self.room) for t in (key_states, value_states))
        elif self.filled + q > self.kbuf.shape[2]:  # out of room: grow to what is needed plus the room
            self.kbuf, self.vbuf = (torch.cat([b[:, :, :self.filled], _columns(b, q + self.room)], dim=2)
                                    for b in (self.kbuf, self.vbuf))
        self.kbuf[:, :, self.filled:self.filled + q] = key_states
        self.vbuf[:, :, self.filled:self.filled + q] = value_states
        self.filled += q
        self.keys, self.values = self.kbuf[:, :, :self.filled], self.vbuf[:, :, :self.filled]
        return self.keys, self.values

    def batch_select_indices(self, indices) -> None:
        if self.filled:
            self.kbuf, self.vbuf = self.kbuf[indices], self.vbuf[indices]
            self.keys, self.values = self.kbuf[:, :, :self.filled], self.vbuf[:, :, :self.filled]

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("BufferLayer is only grown and row-selected by the decode loop")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("BufferLayer is only grown and row-selected by the decode loop")


def mergeable(cache) -> bool:
    """Whether every layer of ``cache`` is a :class:`BufferLayer` (plain attention), so that
    batches of it can be joined by :func:`merge_batches`; a sliding-window layer cannot."""
    return hasattr(cache, "layers") and all(type(layer) is BufferLayer for layer in cache.layers)


def merge_batches(cache_cls, config, batches: list, room: int):
    """One batch from several ``(cache, mask)`` batches of buffered caches: the rows in order, each
    batch's columns right-aligned to the widest (the new columns on the left are zeros, masked).

    Why: the decode loop admits new rows while others are still decoding (continuous batching),
    and prompts of very different lengths are computed in separate forward passes (less padding);
    both then decode together, one forward per step. A row's keys and values and its mask keep
    their order; only left padding is added, which the mask hides and the explicit position ids
    ignore, so every row attends to exactly what it attended to before."""
    import torch.nn.functional as F

    width = max(mask.shape[1] for _, mask in batches)
    mask = torch.cat([F.pad(m, (width - m.shape[1], 0)) for _, m in batches])
    cache = buffered_cache(cache_cls, config, room=room)
    parts = [cache_layers(c) for c, _ in batches]
    for layer in range(len(parts[0])):
        ks = torch.cat([F.pad(p[layer][0], (0, 0, width - p[layer][0].shape[2], 0)) for p in parts])
        vs = torch.cat([F.pad(p[layer][1], (0, 0, width - p[layer][1].shape[2], 0)) for p in parts])
        cache.update(ks, vs, layer)
    return cache, mask


def padded_cache(cache, parts: list[tuple[Entry | None, int]], width: int, like: torch.Tensor | None):
    """Fill an empty cache for a batch whose row i starts with the first n_i tokens of entry_i,
    left-padded (zeros) to ``width`` columns; the caller masks the padding."""
    if width == 0:
        return cache
    ref = next(e for e, n in parts if e is not None and n > 0)
    for layer, (k0, v0) in enumerate(ref.kv):
        ks = k0.new_zeros((len(parts), k0.shape[0], width, k0.shape[2]))
        vs = v0.new_zeros((len(parts), v0.shape[0], width, v0.shape[2]))
        for i, (e, n) in enumerate(parts):
            if e is not None and n > 0:
                ks[i, :, width - n:] = e.kv[layer][0][:, :n]
                vs[i, :, width - n:] = e.kv[layer][1][:, :n]
        if like is not None:
            ks, vs = ks.to(like.device), vs.to(like.device)
        cache.update(ks, vs, layer)
    return cache
