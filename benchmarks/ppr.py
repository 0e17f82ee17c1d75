"""Time of one personalized PageRank on a random sparse graph (the claim: <= 50 ms per PPR).

Builds a random symmetric weighted graph with ``--nodes`` nodes and about ``--degree``
edges per node (each node draws degree/2 random neighbours; the edges are made symmetric,
duplicate pairs add their weights), seeds the reset vector on ``--seeds`` random nodes, and
times convrag.retrieval.graph.ppr with time.perf_counter: one warm-up run, then the median
of ``--repeats`` runs, for

  full      personalized_pagerank(adj, reset, damping): transition matrix built from the
            adjacency and the walk solved (what a one-off call costs);
  prepared  PPR(adj).run(reset, damping): the walk alone, transition built once per graph
            (what the retrievers pay per query);
  batch/q   PPR(adj).run on a (n x --batch) reset matrix, divided by --batch (the per-query
            cost when a job's queries are run together).

    python benchmarks/ppr.py --nodes 20000 --degree 10 --repeats 7

Prints one line per variant and a final PASS/FAIL line for the 50 ms claim (on "full").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from scipy import sparse

from convrag.retrieval.graph.ppr import PPR, personalized_pagerank


def random_graph(n: int, degree: int, seed: int) -> sparse.csr_matrix:
    rng = np.random.default_rng(seed)
    half = max(1, degree // 2)
    rows = np.repeat(np.arange(n), half)
    cols = rng.integers(0, n, size=n * half)
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    w = rng.uniform(0.5, 1.5, size=rows.size)
    a = sparse.coo_matrix((w, (rows, cols)), shape=(n, n)).tocsr()
    return (a + a.T).tocsr()


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--degree", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--damping", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--claim-ms", type=float, default=50.0)
    a = ap.parse_args(argv)

    adj = random_graph(a.nodes, a.degree, a.seed)
    rng = np.random.default_rng(a.seed + 1)
    reset = np.zeros(a.nodes)
    reset[rng.choice(a.nodes, size=a.seeds, replace=False)] = rng.uniform(0.1, 1.0, size=a.seeds)
    resets = np.zeros((a.nodes, a.batch))
    for j in range(a.batch):
        resets[rng.choice(a.nodes, size=a.seeds, replace=False), j] = 1.0
    edges = adj.nnz // 2
    print(f"graph: {a.nodes} nodes, {edges} undirected edges ({2 * edges / a.nodes:.1f} per node), "
          f"damping {a.damping}, {a.seeds} seed nodes, median of {a.repeats} runs after one warm-up")

    prepared = PPR(adj)
    x = personalized_pagerank(adj, reset, a.damping)
    assert abs(x.sum() - 1.0) < 1e-9
    full = median_ms(lambda: personalized_pagerank(adj, reset, a.damping), a.repeats)
    run = median_ms(lambda: prepared.run(reset, a.damping), a.repeats)
    batch = median_ms(lambda: prepared.run(resets, a.damping), a.repeats) / a.batch
    print(f"full      {full:8.2f} ms per PPR (transition matrix built + walk)")
    print(f"prepared  {run:8.2f} ms per PPR (walk only)")
    print(f"batch/q   {batch:8.2f} ms per PPR ({a.batch} reset vectors at once)")
    ok = full <= a.claim_ms
    print(f"{'PASS' if ok else 'FAIL'}: {full:.2f} ms per PPR {'<=' if ok else '>'} {a.claim_ms:g} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
