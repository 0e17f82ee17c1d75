"""Decode-step time with transformers' concatenating DynamicCache against the project's
preallocated KV buffers (``convrag.llm.prefix_cache.BufferLayer``), same prompt, same model,
same steps; checks that the logits are bit-identical.

Why: a DynamicCache grows by ``torch.cat`` at every decode step, i.e. it allocates and copies the
whole cache (for SmolLM2-135M: 46 KB per token, 2.2 GB at 32 rows x 1,500 positions) once per
step; on CPU that copy and its page faults cost more than the model's own arithmetic at long
prompts. The buffers are sized once for the prompt and the longest reply.

    python benchmarks/kv_buffer.py --rows 32 --positions 1500 --steps 6
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import torch
from transformers import DynamicCache

from convrag.config import REPO_ROOT
from convrag.llm.backends.transformers_backend import TransformersBackend
from convrag.llm.prefix_cache import buffered_cache
from convrag.llm.registry import get_spec, load_registry


def decode(model, cache, mask, nxt, steps):
    logits, t0 = [], time.perf_counter()
    for _ in range(steps):
        mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=mask.dtype)], 1)
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=mask.sum(-1, keepdim=True) - 1,
                    use_cache=True, cache=cache)
        logits.append(out.logits[:, -1])
        nxt = logits[-1].argmax(-1)
    return (time.perf_counter() - t0) / steps, torch.stack(logits)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--positions", type=int, default=1500)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1, help="threads while decoding (the prefill uses all cores)")
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    backend = TransformersBackend(get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), args.model))
    model = backend.model
    torch.manual_seed(0)
    ids = torch.randint(100, 1000, (args.rows, args.positions))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        plain = DynamicCache(config=model.config)
        buf = buffered_cache(DynamicCache, model.config, room=args.steps)
        nxt = model(input_ids=ids, attention_mask=mask, use_cache=True, cache=plain, logits_to_keep=1).logits[:, -1]
        for layer, (src, dst) in enumerate(zip(plain.layers, buf.layers)):
            dst.update(src.keys.clone(), src.values.clone())
        nxt = nxt.argmax(-1)
        torch.set_num_threads(args.threads)
        t_plain, l_plain = decode(model, copy.deepcopy(plain), mask, nxt, args.steps)
        t_buf, l_buf = decode(model, buf, mask, nxt, args.steps)
    print(f"{args.rows} rows x {args.positions} positions, {args.steps} decode steps, {args.threads} thread(s)")
    print(f"| cache | ms per step |\n|---|---|\n| DynamicCache (torch.cat) | {1000 * t_plain:.0f} |\n"
          f"| preallocated buffers | {1000 * t_buf:.0f} |")
    print(f"speed-up {t_plain / t_buf:.2f}x; logits bit-identical: {torch.equal(l_plain, l_buf)}")
    return 0 if torch.equal(l_plain, l_buf) else 1


if __name__ == "__main__":
    sys.exit(main())
