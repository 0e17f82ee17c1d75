"""What the cross rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json
import shlex

from convrag.cliargs import sampling_flag
from convrag.layout import Layout
from convrag.retrieval import graph_inputs
from convrag.studies.cross import paths
from convrag.studies.cross.plan import answer_jobs, domains, is_multihop


def shard_benchmarks(config: dict) -> list[str]:
    """The multi-hop datasets whose shards the grid needs (sharded delivery configured)."""
    c = config["cross"]
    return list(c["multihop"]) if "sharded" in c["delivery"] else []


def tasks_file(config: dict, L: Layout, benchmark: str) -> str:
    return paths.multihop_tasks(L, benchmark) if is_multihop(config, benchmark) else L.benchmark_tasks(benchmark)


def tasks_inputs(config: dict, L: Layout, dataset: str) -> dict:
    ins = {"questions": L.questions(dataset)}
    if dataset in shard_benchmarks(config):
        ins["shards"] = paths.shards(L, dataset)
    return ins


def answer_inputs(config: dict, L: Layout, prompts_dir: str, benchmark: str, retriever: str, policy: str) -> dict:
    from convrag.retrieval import is_closed_book

    c = config["cross"]
    closed = is_closed_book(config, retriever)
    ins = {"tasks": tasks_file(config, L, benchmark), "prompts": f"{prompts_dir}/{c['prompt']}",
           "indexes": [] if closed else [L.index_manifest(cid, retriever) for cid in domains(config, benchmark).values()],
           "corpora": [] if closed else [L.corpus(cid) for cid in domains(config, benchmark).values()],
           "graphs": [] if closed else graph_inputs(config, L, list(domains(config, benchmark).values()), retriever)}
    if policy == "llm_rewrite":
        ins["rewrite_prompts"] = c["rewrite"]["prompt"] or f"{prompts_dir}/rag/rewrite.yaml"
    return ins


def answer_args(config: dict, L: Layout, benchmark: str, retriever: str, policy: str) -> str:
    """The ``convrag cross answer`` arguments of one cell besides its files and names."""
    from os.path import dirname

    from convrag.rag.retrieve import retrieve_cli_args
    from convrag.retrieval import is_closed_book

    c = config["cross"]
    closed = is_closed_book(config, retriever)
    doms = {d: None if closed else {"index": dirname(L.index_manifest(cid, retriever)), "corpus": L.corpus(cid)}
            for d, cid in domains(config, benchmark).items()}
    return " ".join([f"--domains {shlex.quote(json.dumps(doms, sort_keys=True))}",
                     f"--retriever-params {shlex.quote(json.dumps(config['retrievers'][retriever].get('params') or {}, sort_keys=True))}",
                     sampling_flag(c["sampling"]),
                     f"--top-k {c['top_k']} --seed {c['seed']}",
                     retrieve_cli_args(config, retriever, policy, c["recall_k"], c["rewrite"])])


def answer_models(config: dict, reader: str, retriever: str, policy: str) -> list[str]:
    """The registry models one answer job loads (reader, retriever LLM, rewriter)."""
    from convrag.rag.retrieve import retrieve_models

    return list(dict.fromkeys([reader, *retrieve_models(config, retriever, policy, config["cross"]["rewrite"])]))


def answer_files(config: dict, L: Layout, ext: str = "jsonl", benchmark: str | None = None) -> list[str]:
    return [paths.answers(L, j["benchmark"], j["retriever"], j["policy"], j["reader"], j["delivery"], ext)
            for j in answer_jobs(config) if benchmark is None or j["benchmark"] == benchmark]


def score_answers_arg(config: dict, L: Layout, benchmark: str) -> str:
    """The scoring job's answer files with their cells, as one quoted JSON argument."""
    files = [{**j, "path": paths.answers(L, j["benchmark"], j["retriever"], j["policy"], j["reader"], j["delivery"])}
             for j in answer_jobs(config) if j["benchmark"] == benchmark]
    return shlex.quote(json.dumps(files, sort_keys=True))


def score_args(config: dict, benchmark: str, prompts_dir: str) -> str:
    c = config["cross"]
    metrics = list(dict.fromkeys([*c["answer_metrics"], *c["benchmark_metrics"].get(benchmark, [])]))
    args = [f"--top-k {c['top_k']}"]
    if c["measures"]:
        args.append("--measures " + " ".join(shlex.quote(m) for m in c["measures"]))
    if metrics:
        args.append("--metrics " + " ".join(shlex.quote(m) for m in metrics))
    if c["judge"]["model"]:
        args.append(f"--judge-model {c['judge']['model']} --judge-prompts {prompts_dir}/{c['judge']['prompt']}"
                    f" --judge-max-tokens {c['judge']['max_tokens']}")
    if c["content"]["model"]:
        args.append(f"--content-model {c['content']['model']} --content-max-tokens {c['content']['max_tokens']}")
        if c["content"]["partial_insufficient"]:
            args.append("--partial-insufficient")
    return " ".join(args)


def score_models(config: dict) -> list[str]:
    c = config["cross"]
    return [x for x in (c["judge"]["model"], c["content"]["model"]) if x]


def score_inputs(config: dict, L: Layout, benchmark: str) -> dict:
    return {"tasks": tasks_file(config, L, benchmark), "answers": answer_files(config, L, benchmark=benchmark),
            "answer_accounting": answer_files(config, L, "accounting.json", benchmark=benchmark),
            "corpora": [L.corpus(cid) for cid in domains(config, benchmark).values()]}
