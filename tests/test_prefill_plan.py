"""Prefill planning and batch joining of the transformers backend (issue 47, item 4), without a model."""

from __future__ import annotations

import torch

from convrag.llm.backends.transformers_backend import plan_groups
from convrag.llm.prefix_cache import BufferLayer, buffered_cache, merge_batches, mergeable


def _cost(groups, lengths, overhead):
    return sum(len(g) * max(lengths[i] for i in g) + overhead for g in groups)


def test_plan_groups_splits_short_from_long_rows():
    lengths = [20, 900, 25, 880, 22, 30]
    groups = plan_groups(lengths, budget=8192, overhead=48)
    assert sorted(i for g in groups for i in g) == list(range(6))
    assert groups == [[0, 4, 2, 5], [3, 1]]  # shortest first, each group sorted by length
    assert _cost(groups, lengths, 48) == 4 * 30 + 2 * 900 + 2 * 48  # against one pass: 6 * 900 + 48


def test_plan_groups_is_optimal_and_keeps_the_budget():
    import itertools
    lengths = [5, 7, 40, 41, 300, 310, 2000]
    for budget, overhead in ((8192, 48), (700, 48), (8192, 0), (8192, 10_000)):
        groups = plan_groups(lengths, budget=budget, overhead=overhead)
        assert all(len(g) == 1 or len(g) * max(lengths[i] for i in g) <= budget for g in groups)
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        best = None  # every contiguous split of the sorted rows
        for cuts in itertools.product((0, 1), repeat=len(order) - 1):
            gs, cur = [], [order[0]]
            for c, i in zip(cuts, order[1:]):
                if c:
                    gs.append(cur)
                    cur = []
                cur.append(i)
            gs.append(cur)
            if all(len(g) == 1 or len(g) * max(lengths[i] for i in g) <= budget for g in gs):
                best = min(best or 1e18, _cost(gs, lengths, overhead))
        assert _cost(groups, lengths, overhead) == best, (budget, overhead)
    assert plan_groups([9, 9, 9], overhead=10_000) == [[0, 1, 2]]
    assert plan_groups([1, 1], overhead=0) in ([[0], [1]], [[0, 1]])
    assert plan_groups([]) == []


def _Config():  # a plain attention model of two layers: what DynamicCache(config=...) reads
    from transformers import LlamaConfig

    return LlamaConfig(num_hidden_layers=2, hidden_size=12, num_attention_heads=3, num_key_value_heads=3,
                       intermediate_size=8, vocab_size=16)


def _batch(rows: int, width: int, filled: list[int], seed: int):
    from transformers import DynamicCache

    g = torch.Generator().manual_seed(seed)
    cache = buffered_cache(DynamicCache, _Config(), room=4)
    mask = torch.zeros((rows, width), dtype=torch.long)
    for i, n in enumerate(filled):
        mask[i, width - n:] = 1
    for layer in range(2):
        cache.update(torch.randn(rows, 3, width, 4, generator=g), torch.randn(rows, 3, width, 4, generator=g), layer)
    return cache, mask


def test_merge_batches_right_aligns_rows_and_keeps_their_columns():
    from transformers import DynamicCache

    a = _batch(2, 5, [5, 3], seed=1)
    b = _batch(1, 8, [6], seed=2)
    assert mergeable(a[0]) and all(isinstance(layer, BufferLayer) for layer in a[0].layers)
    cache, mask = merge_batches(DynamicCache, _Config(), [a, b], room=4)
    assert mask.tolist() == [[0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1, 1]]
    assert cache.get_seq_length() == 8
    for layer in range(2):
        k, v = cache.layers[layer].keys, cache.layers[layer].values
        assert k.shape == (3, 3, 8, 4)
        assert torch.equal(k[:2, :, 3:], a[0].layers[layer].keys) and torch.equal(v[:2, :, 3:], a[0].layers[layer].values)
        assert torch.equal(k[2:], b[0].layers[layer].keys) and torch.equal(v[2:], b[0].layers[layer].values)
        assert not k[:2, :, :3].any()
    # the joined batch decodes in place: one more column per step, rows still selectable
    cache.update(torch.ones(3, 3, 1, 4), torch.ones(3, 3, 1, 4), 0)
    assert cache.layers[0].keys.shape == (3, 3, 9, 4)
    cache.layers[0].batch_select_indices(torch.tensor([0, 2]))
    assert cache.layers[0].keys.shape == (2, 3, 9, 4)


def test_a_cache_with_other_layers_is_not_mergeable():
    class Other:
        pass

    class Cache:
        layers = [BufferLayer(0), Other()]

    assert not mergeable(Cache())
    assert not mergeable(object())
