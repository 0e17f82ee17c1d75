"""What coral's rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json

from convrag.layout import Layout
from convrag.studies.coral import paths
from convrag.studies.coral.plan import (constructed, domain, generation_jobs, generation_run, index_corpus,
                                        retrieval_jobs, source)


def tasks_file(config: dict, L: Layout) -> str:
    """The conversations as TurnTasks: built by the study, or the released benchmark's."""
    return paths.tasks(L, source(config)) if constructed(config) else L.benchmark_tasks(source(config))


def world_spec(config: dict) -> str:
    """The world corpus's own block (kind, seed, spec) as JSON: the pages render that world."""
    return json.dumps(config["corpora"][config["coral"]["world"]["corpus"]], sort_keys=True)


def flows_args(config: dict) -> str:
    w = config["coral"]["world"]
    return (f"--samplers {json.dumps(json.dumps(w['samplers'], sort_keys=True))} "
            f"--turns {json.dumps(json.dumps(w['turns'], sort_keys=True))} "
            f"--long-share {w['long_share']} --seed {w['seed']}")


def contextualise_args(config: dict, registry: str, cache: str) -> str:
    x = config["coral"]["contextualise"]
    return (f"--model {x['model']} --registry {registry} --cache {cache} --max-tokens {x['max_tokens']} "
            f"--temperature {x['temperature']} --top-p {x['top_p']} --tries {x['tries']} "
            f"--seed {config['coral']['world']['seed']}")


def run_files(config: dict, L: Layout, ext: str = "trec") -> list[str]:
    return [paths.run(L, j["source"], j["retriever"], j["policy"], ext) for j in retrieval_jobs(config)]


def runs_arg(config: dict, L: Layout) -> str:
    """The runs of the scoring step as JSON [{retriever, policy, domain, path}]."""
    return json.dumps([{"retriever": j["retriever"], "policy": j["policy"], "domain": domain(config),
                        "path": paths.run(L, j["source"], j["retriever"], j["policy"])}
                       for j in retrieval_jobs(config)])


def retrieve_inputs(config: dict, L: Layout, prompts_dir: str, retriever: str, policy: str) -> dict:
    ins = {"tasks": tasks_file(config, L), "index": L.index_manifest(index_corpus(config), retriever)}
    if policy == "llm_rewrite":
        ins["rewrite_prompts"] = f"{prompts_dir}/rag/rewrite.yaml"
    return ins


def retrieve_args(config: dict, retriever: str, policy: str, registry: str, cache: str) -> str:
    from convrag.rag.retrieve import retrieve_cli_args

    c = config["coral"]
    return (retrieve_cli_args(config, retriever, policy, c["retrieval_k"], c["rewrite"], registry, cache)
            + f" --domain {domain(config)}")


def models(config: dict, retriever: str, policy: str) -> list[str]:
    from convrag.rag.retrieve import retrieve_models

    return retrieve_models(config, retriever, policy, config["coral"]["rewrite"])


def answer_files(config: dict, L: Layout, ext: str = "jsonl") -> list[str]:
    return [paths.answers(L, j["source"], j["model"], j["strategy"], ext) for j in generation_jobs(config)]


def evaluation_files(config: dict, L: Layout, ext: str = "parquet") -> list[str]:
    return [paths.evaluation(L, j["source"], j["model"], j["strategy"], ext) for j in generation_jobs(config)]


def answer_inputs(config: dict, L: Layout, prompts_dir: str) -> dict:
    """The turns, the ranking (and its queries) whose passages are shown, the corpus, the prompt."""
    retriever, policy = generation_run(config)
    s = source(config)
    return {"tasks": tasks_file(config, L), "run": paths.run(L, s, retriever, policy),
            "queries": paths.run(L, s, retriever, policy, "queries.jsonl"), "corpus": L.corpus(index_corpus(config)),
            "prompts": f"{prompts_dir}/{config['coral']['generation']['prompt']}"}


def answer_args(config: dict, model: str, strategy: str, registry: str, cache: str) -> str:
    g = config["coral"]["generation"]
    args = [f"--registry {registry} --cache {cache} --top-k {g['top_k']}",
            f"--sampling {json.dumps(json.dumps(g['sampling'], sort_keys=True))}"]
    if g["max_history_turns"]:
        args.append(f"--max-history-turns {g['max_history_turns']}")
    if strategy == "llm_summary":
        args.append(f"--summary-model {g['summary_model'] or model}")
    return " ".join(args)


def evaluate_args(config: dict, registry: str, cache: str, prompts_dir: str) -> str:
    e = config["coral"]["evaluation"]
    return (f"--nli-model {e['nli_model']} --nli-max-tokens {e['nli_max_tokens']} --registry {registry} "
            f"--cache {cache} --prompts-dir {prompts_dir} --at-most-citations {e['at_most_citations']}"
            + (" --first-line" if e["first_line"] else ""))


def generation_models(config: dict, model: str, strategy: str) -> list[str]:
    g = config["coral"]["generation"]
    return [model] + ([g["summary_model"]] if strategy == "llm_summary" and g["summary_model"] else [])
