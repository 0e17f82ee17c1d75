"""What mtrag_un's rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json
from pathlib import Path

from convrag.cliargs import sampling_flag
from convrag.data.benchmarks import corpus_id
from convrag.layout import Layout
from convrag.retrieval import graph_inputs
from convrag.studies.mtrag_un import paths
from convrag.studies.mtrag_un.plan import mtrag_retrieval_jobs, retrieval_jobs


def run_files(config: dict, L: Layout, ext: str = "trec", jobs: list[dict] | None = None) -> list[str]:
    """The files of Table 2's retrieval runs (or of ``jobs``)."""
    jobs = retrieval_jobs(config) if jobs is None else jobs
    return [paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"], ext) for j in jobs]


def runs_arg(config: dict, L: Layout, jobs: list[dict] | None = None) -> str:
    """The runs of the scoring step as JSON [{retriever, policy, domain, path}] (Table 2's, or ``jobs``)."""
    jobs = retrieval_jobs(config) if jobs is None else jobs
    return json.dumps([{**{k: j[k] for k in ("retriever", "policy", "domain")},
                        "path": paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"])}
                       for j in jobs])


def retrieve_names(config: dict) -> dict[str, list[str]]:
    """The wildcard values of the retrieve rule: Table 2's runs and the mtrag_retrieval target's."""
    jobs = retrieval_jobs(config) + mtrag_retrieval_jobs(config)
    return {k: list(dict.fromkeys(j[k] for j in jobs)) for k in ("benchmark", "domain", "retriever", "policy")}


def mtrag_retrieval_artifacts(config: dict, L: Layout) -> dict:
    """The mtrag_retrieval target's artifacts (None while the target is off): the per-task scores,
    the runs (to count empty rankings) and the gold checks of the benchmark's corpora."""
    from convrag.data.gold import gold_files
    from convrag.studies.mtrag_un.plan import mtrag_retrieval_domains

    jobs = mtrag_retrieval_jobs(config)
    if not jobs:
        return {"mtrag_retrieval": None, "mtrag_retrieval_runs": None, "mtrag_retrieval_gold": None}
    b = config["mtrag_un"]["mtrag_retrieval"]["benchmark"]
    return {"mtrag_retrieval": paths.mtrag_retrieval_scores(L), "mtrag_retrieval_runs": run_files(config, L, jobs=jobs),
            "mtrag_retrieval_gold": gold_files(config, L, b, mtrag_retrieval_domains(config))}


def mtrag_retrieval_context(config: dict) -> dict:
    """What the mtrag_retrieval target's run used (the reproduction table's run keys)."""
    from convrag.report.reproduction import benchmark_identity, retriever_identity
    from convrag.studies.mtrag_un.plan import mtrag_retrieval_domains

    mr = config["mtrag_un"]["mtrag_retrieval"]
    if mr["benchmark"] is None:
        return {}
    return {"mtrag_retrieval_data": [benchmark_identity(config, mr["benchmark"])],
            "mtrag_retrieval_domains": mtrag_retrieval_domains(config),
            "mtrag_retrieval_retrievers": [retriever_identity(config, r) for r in mr["retrievers"]]}


def retrieve_inputs(config: dict, L: Layout, prompts_dir: str, benchmark: str, domain: str, retriever: str,
                    policy: str) -> dict:
    ins = {"tasks": L.benchmark_tasks(benchmark),
           "index": L.index_manifest(corpus_id(benchmark, domain), retriever),
           "graph": graph_inputs(config, L, corpus_id(benchmark, domain), retriever)}
    if policy == "llm_rewrite":
        ins["rewrite_prompts"] = config["mtrag_un"]["rewrite"].get("prompt") or f"{prompts_dir}/rag/rewrite.yaml"
    return ins


def retrieve_args(config: dict, retriever: str, policy: str, registry: str, cache: str) -> str:
    from convrag.rag.retrieve import retrieve_cli_args

    m = config["mtrag_un"]  # every task: the RAG setting reads these rankings too
    return retrieve_cli_args(config, retriever, policy, m["retrieval_k"], m["rewrite"], registry, cache)


def models(config: dict, retriever: str, policy: str) -> list[str]:
    from convrag.rag.retrieve import retrieve_models

    return retrieve_models(config, retriever, policy, config["mtrag_un"]["rewrite"])


def answer_inputs(config: dict, L: Layout, prompts_dir: str, benchmark: str, setting: str, domain: str) -> dict:
    from convrag.studies.mtrag_un.plan import rag_run

    ins = {"tasks": L.benchmark_tasks(benchmark), "prompts": generation_prompt(config, prompts_dir)}
    if setting == "rag":
        retriever, policy = rag_run(config)
        ins.update(run=paths.run(L, benchmark, domain, retriever, policy),
                   queries=paths.run(L, benchmark, domain, retriever, policy, "queries.jsonl"),
                   corpus=L.corpus(corpus_id(benchmark, domain)))
    return ins


def answer_args(config: dict, setting: str) -> str:
    """The ``convrag answer`` arguments of one setting (passages, k, sampling, recorded names)."""
    from convrag.studies.mtrag_un.plan import rag_run

    g = config["mtrag_un"]["generation"]
    if setting == "reference":
        args = f"--passages reference --top-k {g['reference_k']}"
    else:
        retriever, policy = rag_run(config)
        args = f"--passages run --top-k {g['top_k']} --retriever-name {retriever} --policy {policy}"
    return f"{args} {sampling_flag(g['sampling'])}"


def evaluation_files(config: dict, L: Layout, ext: str = "parquet") -> list[str]:
    from convrag.studies.mtrag_un.plan import generation_jobs

    return [paths.evaluation(L, j["benchmark"], j["model"], j["setting"], j["domain"], ext)
            for j in generation_jobs(config)]


def answer_accounting_files(config: dict, L: Layout) -> list[str]:
    from convrag.studies.mtrag_un.plan import generation_jobs

    return [paths.answers(L, j["benchmark"], j["model"], j["setting"], j["domain"], "accounting.json")
            for j in generation_jobs(config)]


def generation_prompt(config: dict, prompts_dir: str) -> str:
    """The reader prompt file: under the prompts folder, or the user's own (a path that exists)."""
    p = config["mtrag_un"]["generation"]["prompt"]
    return p if Path(p).is_file() and not Path(prompts_dir, p).is_file() else f"{prompts_dir}/{p}"


OFFICIAL = "official"


def judge_prompt_files(config: dict, L: Layout) -> dict[str, str]:
    """judge -> the prompt file replacing the project's: an adapted official one, or the user's."""
    given = config["mtrag_un"]["evaluation"]["prompts"]
    return {j: paths.official_prompt(L, j) if v == OFFICIAL else v for j, v in given.items() if v}


def official_sha256_arg(config: dict, judge: str) -> str:
    """``--sha256 <hex>`` when ``evaluation.official_sha256`` names the judge's scorer file (a
    stand-in served at its URL, checked by its own sha256), else "" (the resources/sources.yaml pin)."""
    from convrag.studies.mtrag_un.judges import OFFICIAL as FILES

    sha = config["mtrag_un"]["evaluation"]["official_sha256"].get(FILES[judge].file)
    return f"--sha256 {sha}" if sha else ""


def prompt_sources(config: dict) -> dict[str, str]:
    """Which prompt each role of the run used, for the reproduction table: ``own`` (the project's
    wording: an ``official`` judge whose scorer file is a stand-in, ``evaluation.official_sha256``,
    too), ``official`` (IBM's, adapted) or the user's file."""
    m = config["mtrag_un"]
    gen = m["generation"]["prompt"]
    out = {"generation": "own" if gen == "mtrag_un/reader.yaml" else gen,
           "rewrite": m["rewrite"].get("prompt") or "own"}
    out.update({j: "own" if official_sha256_arg(config, j) else m["evaluation"]["prompts"][j] or "own"
                for j in ("idk", "rb_llm", "clarification")})
    return out


def evaluate_args(config: dict, registry: str, cache: str, prompts_dir: str, L: Layout | None = None) -> str:
    e = config["mtrag_un"]["evaluation"]
    files = judge_prompt_files(config, L) if L is not None else {}
    return (f"--judge-model {e['judge_model']} --judges {' '.join(e['judges'])} --registry {registry} --cache {cache}"
            + (f" --prompt-files '{json.dumps(files, sort_keys=True)}'" if files else "")
            + f" --prompts-dir {prompts_dir} --max-tokens '{json.dumps(e['max_tokens'], sort_keys=True)}'"
            f" --bertscore '{json.dumps(e['bertscore'], sort_keys=True)}'")


def human_source(config: dict, resolve) -> str:
    """The human-evaluation file as given (a URL) or resolved against the repository (a path)."""
    src = config["mtrag_un"]["evaluation"]["human_evaluations"] or ""
    return src if src.startswith(("http://", "https://")) else resolve(src)


def human_input(config: dict, resolve) -> list[str]:
    """The rule's input: a local file (a URL is downloaded by the job itself)."""
    src = human_source(config, resolve)
    return [] if not src or src.startswith(("http://", "https://")) else [src]
