"""What mtrag_un's rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json

from convrag.config import retriever_kind, retriever_llm
from convrag.data.benchmarks import corpus_id
from convrag.layout import Layout
from convrag.studies.mtrag_un import paths
from convrag.studies.mtrag_un.plan import retrieval_jobs


def run_files(config: dict, L: Layout, ext: str = "trec") -> list[str]:
    return [paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"], ext) for j in retrieval_jobs(config)]


def runs_arg(config: dict, L: Layout) -> str:
    """The runs of the scoring step as JSON [{retriever, policy, domain, path}]."""
    return json.dumps([{**{k: j[k] for k in ("retriever", "policy", "domain")},
                        "path": paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"])}
                       for j in retrieval_jobs(config)])


def retrieve_inputs(config: dict, L: Layout, prompts_dir: str, benchmark: str, domain: str, retriever: str,
                    policy: str) -> dict:
    ins = {"tasks": L.benchmark_tasks(benchmark),
           "index": L.index_manifest(corpus_id(benchmark, domain), retriever)}
    if policy == "llm_rewrite":
        ins["rewrite_prompts"] = f"{prompts_dir}/rag/rewrite.yaml"
    return ins


def retrieve_args(config: dict, retriever: str, policy: str, registry: str, cache: str) -> str:
    m = config["mtrag_un"]
    args = [f"--retriever {retriever_kind(config, retriever)} --retriever-name {retriever}",
            f"--k {m['retrieval_k']} --with-qrels"]
    llm = retriever_llm(config, retriever)
    if llm or policy == "llm_rewrite":
        args.append(f"--registry {registry} --cache {cache}")
    if llm:
        args.append(f"--retriever-llm {llm}")
    if policy == "llm_rewrite":
        args.append(f"--rewrite-model {m['rewrite']['model']} --rewrite-max-tokens {m['rewrite']['max_tokens']}")
    return " ".join(args)


def models(config: dict, retriever: str, policy: str) -> list[str]:
    m = config["mtrag_un"]
    return [x for x in [retriever_llm(config, retriever), m["rewrite"]["model"] if policy == "llm_rewrite" else None] if x]
