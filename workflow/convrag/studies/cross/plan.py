"""The cross-benchmark grid: benchmarks x retrievers x readers x query policies x delivery.

A *benchmark* of the grid is either a TurnTask benchmark of the config (``benchmarks.<name>``:
MTRAG-UN, MTRAG, CORAL, RECOR or the mini world's views of them; one corpus per domain, each
task answered after its recorded history) or a multi-hop dataset (``datasets.<name>``) whose
questions are sharded as lic_rag shards them. Delivery ``recorded`` answers each task as the
benchmark records it (a multi-hop question whole, in one turn); ``sharded`` reveals a multi-hop
question's shards one user turn at a time, the reader answering every turn (lic_rag's SHARDED
condition with the shards in order instead of a simulated user), and scores the last turn.
Only multi-hop datasets have shards: a (TurnTask benchmark, sharded) cell is not planned, and
``cells`` says why. The closed-book retriever sends no query, so it has one policy, ``none``.

One answer job per (benchmark, retriever, policy, reader, delivery) covers every domain of the
benchmark; one scoring job per benchmark batches the judge and the content label over all of
its answer files (identical prompts are asked once).
"""

from __future__ import annotations

DELIVERIES = ("recorded", "sharded")


def is_multihop(config: dict, benchmark: str) -> bool:
    return benchmark in config["cross"]["multihop"]


def benchmarks(config: dict) -> list[str]:
    c = config["cross"]
    return [*c["benchmarks"], *c["multihop"]]


def domains(config: dict, benchmark: str) -> dict[str, str]:
    """Domain -> corpus id of one grid benchmark (a multi-hop dataset: one domain, ``all``)."""
    from convrag.data.benchmarks import benchmark_loader, corpus_id

    if is_multihop(config, benchmark):
        return {"all": config["datasets"][benchmark]["corpus"]}
    spec = config["benchmarks"][benchmark]
    return {d: corpus_id(benchmark, d) for d in benchmark_loader(spec["kind"]).domains(spec)}


def grid(config: dict) -> dict:
    """The grid's axes, small and JSON-able (what the ``plan`` target rebuilds the cells from)."""
    from convrag.retrieval import is_closed_book

    c = config["cross"]
    return {"benchmarks": list(c["benchmarks"]), "multihop": list(c["multihop"]),
            "retrievers": {r: is_closed_book(config, r) for r in c["retrievers"]}, "policies": list(c["policies"]),
            "readers": list(c["readers"]), "delivery": list(c["delivery"]),
            "benchmark_policies": {b: list(p) for b, p in c["benchmark_policies"].items()}}


def grid_cells(g: dict) -> list[dict]:
    """Every cell of the grid ``g`` (``grid``) with ``planned`` and, when not planned, the ``reason``."""
    out = []
    for b in [*g["benchmarks"], *g["multihop"]]:
        multihop = b in g["multihop"]
        for r, closed in g["retrievers"].items():
            for p in (["none"] if closed else g["policies"]):
                for m in g["readers"]:
                    for d in g["delivery"]:
                        cell = dict(benchmark=b, retriever=r, policy=p, reader=m, delivery=d,
                                    kind="multihop" if multihop else "turns", planned=True, reason="")
                        own = g.get("benchmark_policies", {}).get(b)
                        if d == "sharded" and not multihop:
                            cell.update(planned=False, reason="sharded delivery needs shards: only the multi-hop "
                                                              "datasets (cross.multihop) are sharded")
                        elif own is not None and p != "none" and p not in own:
                            cell.update(planned=False, reason=f"not among the benchmark's policies "
                                                              f"(cross.benchmark_policies.{b}: {', '.join(own)})")
                        out.append(cell)
    return out


def cells(config: dict) -> list[dict]:
    return grid_cells(grid(config))


def answer_jobs(config: dict) -> list[dict]:
    return [{k: c[k] for k in ("benchmark", "retriever", "policy", "reader", "delivery")}
            for c in cells(config) if c["planned"]]


def model_jobs(config: dict) -> list[dict]:
    """Every model-calling job: sharding, answering (reader, rewriter, retriever LLM), scoring."""
    from convrag.retrieval import retriever_llm

    c = config["cross"]
    jobs = [dict(stage="shard", benchmark=d, model=c["sharding"]["model"]) for d in c["multihop"]
            if "sharded" in c["delivery"]]
    for j in answer_jobs(config):
        models = [j["reader"]]
        if j["policy"] == "llm_rewrite":
            models.append(c["rewrite"]["model"])
        if retriever_llm(config, j["retriever"]):
            models.append(retriever_llm(config, j["retriever"]))
        jobs.append(dict(stage="answer", **j, models=models))
    for b in benchmarks(config):
        models = [x for x in (c["judge"]["model"], c["content"]["model"]) if x]
        if models:
            jobs.append(dict(stage="score", benchmark=b, models=models))
    return jobs
