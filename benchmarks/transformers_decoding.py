"""The transformers backend's two CPU levers, measured on the same requests in one run:
batch size (decoding is memory-bound: more rows per forward cost little more) and the shared
prompt prefix (system prompt + worked examples computed once per batch; prefix reuse on/off). Reports wall time
per configuration, the ratios, and whether every configuration produced the same texts (the
sampling is seeded per request, so they must).

    python benchmarks/transformers_decoding.py --requests 32
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import yaml

from convrag.config import REPO_ROOT
from convrag.llm.backends.transformers_backend import TransformersBackend
from convrag.llm.registry import get_spec, load_registry
from convrag.llm.types import Request, Sampling


def requests(n: int) -> list[Request]:
    """lic_rag assistant prompts (system, two worked exchanges, one passage, a question)."""
    P = yaml.safe_load((REPO_ROOT / "resources/prompts/lic_rag/assistant.yaml").read_text())
    out = []
    for i in range(n):
        msgs = [{"role": "system", "content": P["assistant_system"]}]
        for ex in P["examples"]:
            msgs += [{"role": "user", "content": f"Passages:\n{ex['passages']}\n\nMessage: {ex['message']}"},
                     {"role": "assistant", "content": ex["reply"]}]
        msgs.append({"role": "user", "content": f"Passages:\n[1] Person {i}: Person {i} is a painter born in "
                     f"Town {i % 7} in {1900 + i}.\n\nMessage: Where was Person {i} born?"})
        out.append(Request(messages=msgs, sampling=Sampling(0.7, 0.95, 32, ("\n\n",)), seed=0, sample_index=i))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    os.environ["CONVRAG_THREADS"] = str(args.threads)
    spec = get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), args.model)
    backend = TransformersBackend(spec)
    reqs = requests(args.requests)
    backend.generate(reqs[:2])  # warm-up
    results = {}
    for batch, share in ((8, False), (8, True), (32, False), (32, True)):
        backend.prefix_store.clear()  # only the batch's own shared prefix may be reused
        backend.set_prefix_reuse(share)
        t0 = time.perf_counter()
        texts = []
        for i in range(0, len(reqs), batch):
            texts += [r.text for r in backend.generate(reqs[i:i + batch])]
        results[(batch, share)] = (time.perf_counter() - t0, texts)
        print(f"batch {batch:2d}, shared prefix {'on ' if share else 'off'}: {results[(batch, share)][0]:7.2f} s")
    base = results[(8, False)]
    print(f"batch 32 vs 8 (prefix off): {base[0] / results[(32, False)][0]:.2f}x")
    print(f"shared prefix at batch 32 : {results[(32, False)][0] / results[(32, True)][0]:.2f}x")
    print(f"both (the default)        : {base[0] / results[(32, True)][0]:.2f}x")
    same = all(v[1] == base[1] for v in results.values())
    print(f"same texts in every configuration: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
