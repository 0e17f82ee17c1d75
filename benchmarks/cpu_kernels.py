"""Alternative CPU kernels for the packaged SmolLM2-135M against the default float32
transformers path, on the same batched requests in one run: prefill and decode tokens per
second, wall time, and how many texts agree with float32.

Paths measured (all inside the project's own transformers backend, so batching, prefix reuse
and seeded sampling are identical; only the weights' arithmetic changes):
  fp32  the default;
  int8  torch dynamic quantisation of every Linear layer (int8 weights, int8 activations
        quantised per batch; fbgemm/x86 kernels, AVX2 here);
  bf16  bfloat16 weights and activations.
Each path is also checked for batch invariance: 8 greedy requests decoded in one batch and each
alone must give the same texts (the project's caches, crash recovery and prefix reuse rely on a
row's result not depending on the rows beside it; torch's dynamic int8 quantises activations with
one scale per tensor, i.e. per batch, so it cannot promise that).
llama.cpp (``llama-cpp-python``) is not measured: PyPI has no binary wheel for it here, and
building it from source inside the README's install command would cost more minutes than it
could save (see benchmarks/README.md).

    python benchmarks/cpu_kernels.py --requests 32
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from transformers_decoding import requests  # noqa: E402  (the lic_rag assistant prompts)

from convrag.config import REPO_ROOT  # noqa: E402
from convrag.llm.backends.transformers_backend import TransformersBackend  # noqa: E402
from convrag.llm.registry import get_spec, load_registry  # noqa: E402


def run(backend, reqs, batch: int):
    backend.prefix_store.clear()
    p0, s0, t0 = backend.prefill_tokens, backend.prefill_seconds, time.perf_counter()
    out = []
    for i in range(0, len(reqs), batch):
        out += backend.generate(reqs[i:i + batch])
    wall = time.perf_counter() - t0
    pre_s = backend.prefill_seconds - s0
    done = sum(r.completion_tokens for r in out)
    return wall, (backend.prefill_tokens - p0) / pre_s, done / max(1e-9, wall - pre_s), [r.text for r in out]


def batch_invariant(backend, reqs) -> int:
    """How many of 8 greedy requests decode to the same text alone as in their batch."""
    from convrag.llm.types import Sampling

    greedy = [type(r)(r.messages, sampling=Sampling(0.0, 1.0, 24, ("\n\n",))) for r in reqs[:8]]
    backend.set_prefix_reuse(False)
    together = [r.text for r in backend.generate(greedy)]
    alone = [backend.generate([r])[0].text for r in greedy]
    backend.set_prefix_reuse(True)
    return sum(a == b for a, b in zip(together, alone))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    spec = get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), args.model)
    backend = TransformersBackend(spec)
    reqs = requests(args.requests)
    backend.generate(reqs[:2])  # warm-up
    torch = backend.torch
    fp32 = backend.model
    results = {}
    results["fp32"] = run(backend, reqs, args.batch)
    invariant = {"fp32": batch_invariant(backend, reqs)}
    from torch.ao.quantization import quantize_dynamic
    backend.model = quantize_dynamic(fp32, {torch.nn.Linear}, dtype=torch.qint8)
    backend.prefix_store.clear()  # stored KV was computed by the other weights
    backend.generate(reqs[:2])
    results["int8"] = run(backend, reqs, args.batch)
    invariant["int8"] = batch_invariant(backend, reqs)
    backend.model = fp32.to(torch.bfloat16)
    backend.prefix_store.clear()
    backend.generate(reqs[:2])
    results["bf16"] = run(backend, reqs, args.batch)
    invariant["bf16"] = batch_invariant(backend, reqs)
    base = results["fp32"]
    print(f"{args.requests} lic_rag assistant requests, batch {args.batch}, threads {torch.get_num_threads()}")
    print("| path | wall s | prefill tok/s | decode tok/s | speed-up | texts equal to fp32 | alone = in batch |\n"
          "|---|---|---|---|---|---|---|")
    for name, (wall, pre, dec, texts) in results.items():
        same = sum(a == b for a, b in zip(texts, base[3]))
        print(f"| {name} | {wall:.1f} | {pre:.0f} | {dec:.1f} | {base[0] / wall:.2f}x | {same}/{len(texts)} "
              f"| {invariant[name]}/8 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
