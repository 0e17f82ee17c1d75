"""What coral's rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json

from convrag.cliargs import sampling_flag
from convrag.layout import Layout
from convrag.retrieval import graph_inputs
from convrag.studies.coral import paths
from convrag.studies.coral.plan import (constructed, domain, generation_jobs, generation_run, index_corpus,
                                        llm4cs_model, run_jobs, sft_generators, source, sweep_jobs, sweep_m,
                                        trained_on)


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
    cleaning = config["coral"]["world"].get("cleaning")
    return (f"--model {x['model']} --registry {registry} --cache {cache} {sampling_flag(x)} "
            f"--tries {x['tries']} "
            f"--seed {config['coral']['world']['seed']}"
            + (f" --cleaning {json.dumps(json.dumps(cleaning, sort_keys=True))}" if cleaning else ""))


def contextualise_inputs(config: dict, L: Layout, prompts_dir: str) -> dict:
    """The pages, flows and prompt file; the world's corpus too when the §3.1 filters are on."""
    ins = {"pages": paths.pages(L, source(config)), "flows": paths.flows(L, source(config)),
           "prompts": f"{prompts_dir}/{config['coral']['contextualise']['prompt']}"}
    if config["coral"]["world"].get("cleaning"):
        ins["corpus"] = L.corpus(index_corpus(config))
    return ins


def run_files(config: dict, L: Layout, ext: str = "trec") -> list[str]:
    return [paths.run(L, j["source"], j["retriever"], j["policy"], ext) for j in run_jobs(config)]


def runs_arg(config: dict, L: Layout) -> str:
    """The runs of the scoring step as JSON [{retriever, policy, domain, path}]."""
    return json.dumps([{"retriever": j["retriever"], "policy": j["policy"], "domain": domain(config),
                        "path": paths.run(L, j["source"], j["retriever"], j["policy"])}
                       for j in run_jobs(config)])


def retrieve_inputs(config: dict, L: Layout, prompts_dir: str, retriever: str, policy: str) -> dict:
    ins = {"tasks": tasks_file(config, L), "index": L.index_manifest(index_corpus(config), retriever),
           "graph": graph_inputs(config, L, index_corpus(config), retriever)}
    if policy == "llm_rewrite":
        ins["rewrite_prompts"] = config["coral"]["rewrite"]["prompt"] or f"{prompts_dir}/rag/rewrite.yaml"
    return ins


def retrieve_args(config: dict, retriever: str, policy: str, registry: str, cache: str) -> str:
    from convrag.rag.retrieve import retrieve_cli_args

    c = config["coral"]
    return (retrieve_cli_args(config, retriever, policy, c["retrieval_k"], c["rewrite"], registry, cache)
            + f" --domain {domain(config)}")


def sft_retrieve_inputs(config: dict, L: Layout, prompts_dir: str, retriever: str, rewriter: str) -> dict:
    """A fine-tuned rewriter's run: the turns, the index, the rewrite prompt, the tuned model."""
    return {**retrieve_inputs(config, L, prompts_dir, retriever, "llm_rewrite"),
            "tuned": paths.sft(L, source(config), rewriter)}


def sft_rewriter_models(config: dict, rewriter: str | None) -> list[str]:
    """The registry model a tuned rewriter's run follows for its environment and GPUs: its base
    (none for a name that is not a retrieving rewriter)."""
    from convrag.studies.coral.plan import sft_rewriters

    base = sft_rewriters(config).get(rewriter)
    return [base] if base else []


def sft_retrieve_args(config: dict, L: Layout, retriever: str, rewriter: str, cache: str) -> str:
    """``convrag retrieve --policy llm_rewrite`` with the tuned rewriter, read from the registry
    its training wrote beside it."""
    from convrag.rag.retrieve import retrieve_cli_args

    c = config["coral"]
    registry = paths.sft(L, source(config), rewriter) + "/registry.yaml"
    return ("--policy llm_rewrite " + retrieve_cli_args(config, retriever, "llm_rewrite", c["retrieval_k"],
                                                        {**c["rewrite"], "model": rewriter}, registry, cache)
            + f" --domain {domain(config)}")


def dense_params(config: dict, retriever: str) -> dict:
    """A dense retriever's params with the defaults filled (its encoder and query prefix)."""
    from convrag.retrieval.dense import DEFAULTS

    return {**DEFAULTS, **config["retrievers"][retriever]["params"]}


def train_inputs(config: dict, L: Layout, encoder: str) -> dict:
    """The training turns of a session encoder and the corpus their gold passages come from (a
    train benchmark's own domain: ``coral`` for CORAL's split, ``qrecc`` for QReCC's answers)."""
    from convrag.data.benchmarks import benchmark_loader, corpus_id

    train = config["coral"]["session_encoders"][encoder]["train"]
    if train is None:
        return {"tasks": tasks_file(config, L), "corpus": L.corpus(index_corpus(config))}
    spec = config["benchmarks"][train]
    return {"tasks": L.benchmark_tasks(train),
            "corpus": L.corpus(corpus_id(train, benchmark_loader(spec["kind"]).domains(spec)[0]))}


def train_args(config: dict, encoder: str) -> str:
    e = config["coral"]["session_encoders"][encoder]
    p = dense_params(config, e["retriever"])
    args = [f"--style {e['style']} --base-model {p['model']} --epochs {e['epochs']} --batch-size {e['batch_size']}",
            f"--lr {e['lr']} --temperature {e['temperature']} --seed {e['seed']}",
            f"--query-prefix {json.dumps(p['query_prefix'])} --trained-on {json.dumps(trained_on(config, encoder))}"]
    if e["max_steps"]:
        args.append(f"--max-steps {e['max_steps']}")
    if e["max_turns"] is not None:
        args.append(f"--max-turns {e['max_turns']}")
    return " ".join(args)


def session_args(config: dict, encoder: str) -> str:
    e = config["coral"]["session_encoders"][encoder]
    return (f"--name {encoder} --recall-k {config['coral']['retrieval_k']} --domain {domain(config)}"
            + (f" --max-turns {e['max_turns']}" if e["max_turns"] is not None else ""))


def llm4cs_args(config: dict, registry: str, cache: str, policy: str = "llm4cs") -> str:
    from convrag.studies.coral.conversational import llm4cs_variant

    x = config["coral"]["llm4cs"]
    prompting, aggregation = llm4cs_variant(policy)
    return (f"--model {llm4cs_model(config)} --registry {registry} --cache {cache} --n {x['n']} "
            f"--prompting {prompting} --aggregation {aggregation} "
            f"{sampling_flag(x)} --recall-k {config['coral']['retrieval_k']} --domain {domain(config)}")


def training_job(config: dict, block: str, name: str | None) -> dict:
    """A training job's env key and SLURM GPUs (``block``: session_encoders or sft): the GPU env
    when the entry asks for GPUs, else the CPU env."""
    x = (config["coral"][block] or {}).get(name) or {}
    gpus = x.get("gpus") or 0
    return {"env": "vllm-gpu" if gpus else "cpu", "gpu": gpus, "gpu_model": x.get("gpu_model") or ""}


def sft_inputs(config: dict, L: Layout, prompts_dir: str, name: str) -> dict:
    """A fine-tuning job's turns and prompt file; a generator also sees the generation run's
    passages (over the study's own conversations)."""
    x = config["coral"]["sft"][name]
    if x["role"] == "rewrite":
        tasks = L.benchmark_tasks(x["train"]) if x["train"] else tasks_file(config, L)
        return {"tasks": tasks, "prompts": config["coral"]["rewrite"]["prompt"] or f"{prompts_dir}/rag/rewrite.yaml"}
    ins = answer_inputs(config, L, prompts_dir)
    if x["train"]:  # another split has no retrieval run: its golden passages are shown
        from convrag.data.benchmarks import corpus_id

        return {"tasks": L.benchmark_tasks(x["train"]), "corpus": L.corpus(corpus_id(x["train"], domain(config))),
                "prompts": ins["prompts"]}
    return {k: ins[k] for k in ("tasks", "run", "queries", "corpus", "prompts")}


def sft_args(config: dict, name: str, registry: str) -> str:
    x = config["coral"]["sft"][name]
    args = [f"--role {x['role']} --base-model {x['model']} --registry {registry} --epochs {x['epochs']}",
            f"--lr {x['lr']} --batch-size {x['batch_size']} --max-length {x['max_length']} --seed {x['seed']}",
            f"--method {x['method']} --name {name}"]
    if x["method"] == "lora":
        args.append(f"--lora {json.dumps(json.dumps(x['lora'], sort_keys=True))}")
    if x["max_steps"]:
        args.append(f"--max-steps {x['max_steps']}")
    if x["role"] == "generate":
        args.append(f"--strategy {x['strategy']} --top-k {config['coral']['generation']['top_k']}"
                    + (" --gold-passages" if x["train"] else ""))
    return " ".join(args)


def answer_models(config: dict) -> list[str]:
    """Every value of the rules' ``model`` wildcard: the generation models and the answering
    fine-tuned generators (coral.sft.<name>.answers)."""
    from convrag.studies.coral.plan import generation_models as all_models

    return all_models(config)


def registry_model(config: dict, model: str) -> str:
    """The registry model a job's resources and environment follow: a fine-tuned generator's base."""
    return sft_generators(config).get(model, model)


def tuned_inputs(config: dict, L: Layout, model: str) -> dict:
    """A fine-tuned generator's answer job also needs its model folder (the registry written
    beside it names it); none for a registry model."""
    return {"tuned": paths.sft(L, source(config), model)} if model in sft_generators(config) else {}


def answer_registry(config: dict, L: Layout, model: str, registry: str) -> str:
    """The registry an answer job reads: the run's, or the fine-tuned generator's own (the run's
    plus the tuned model, written by ``convrag coral sft --name``)."""
    return paths.sft(L, source(config), model) + "/registry.yaml" if model in sft_generators(config) else registry


def models(config: dict, retriever: str, policy: str) -> list[str]:
    from convrag.rag.retrieve import retrieve_models

    return retrieve_models(config, retriever, policy, config["coral"]["rewrite"])


def answer_files(config: dict, L: Layout, ext: str = "jsonl") -> list[str]:
    return [paths.answers(L, j["source"], j["model"], j["strategy"], ext)
            for j in generation_jobs(config) + sweep_jobs(config)]


def evaluation_files(config: dict, L: Layout, ext: str = "parquet", sweep: bool | None = None) -> list[str]:
    """Scores of Table 3's jobs (``sweep=False``), Figure 4's (``True``) or both (``None``)."""
    jobs = ((generation_jobs(config) if sweep is not True else [])
            + (sweep_jobs(config) if sweep is not False else []))
    return [paths.evaluation(L, j["source"], j["model"], j["strategy"], ext) for j in jobs]


def strategies(config: dict) -> list[str]:
    """Every value of the rules' ``strategy`` wildcard: Table 3's strategies and the sweep's names."""
    return list(dict.fromkeys(config["coral"]["generation"]["strategies"]
                              + [j["strategy"] for j in sweep_jobs(config)]))


def history_strategy(config: dict, name: str) -> str:
    """The history strategy an answers name runs (a sweep name runs the sweep's strategy)."""
    return config["coral"]["generation"]["history_sweep"]["strategy"] if sweep_m(name) is not None else name


def answer_inputs(config: dict, L: Layout, prompts_dir: str) -> dict:
    """The turns, the ranking (and its queries) whose passages are shown, the corpus, the prompt."""
    retriever, policy = generation_run(config)
    s = source(config)
    return {"tasks": tasks_file(config, L), "run": paths.run(L, s, retriever, policy),
            "queries": paths.run(L, s, retriever, policy, "queries.jsonl"), "corpus": L.corpus(index_corpus(config)),
            "prompts": f"{prompts_dir}/{config['coral']['generation']['prompt']}"}


def answer_args(config: dict, model: str, name: str, registry: str, cache: str) -> str:
    """The answer job's arguments; ``name`` is a strategy of Table 3 or a sweep name (Figure 4:
    the sweep's strategy with the last m turns, only the sweep's turn of its conversations)."""
    g = config["coral"]["generation"]
    strategy, m = history_strategy(config, name), sweep_m(name)
    args = [f"--strategy {strategy} --registry {registry} --cache {cache} --top-k {g['top_k']}",
            sampling_flag(g["sampling"])]
    if m is not None:
        sw = g["history_sweep"]
        args.append(f"--max-history-turns {m} --at-turn {sw['turn']} --conversations {sw['conversations']} "
                    f"--sample-seed {sw['seed']}")
    elif g["max_history_turns"]:
        args.append(f"--max-history-turns {g['max_history_turns']}")
    if strategy == "llm_summary":
        args.append(f"--summary-model {g['summary_model'] or model}")
    return " ".join(args)


def evaluate_args(config: dict, registry: str, cache: str, prompts_dir: str) -> str:
    e = config["coral"]["evaluation"]
    return (f"--nli {e['nli']} --nli-model {e['nli_model']} --nli-max-tokens {e['nli_max_tokens']} "
            f"--registry {registry} --cache {cache} --prompts-dir {prompts_dir} "
            f"--at-most-citations {e['at_most_citations']}"
            + (" --first-line" if e["first_line"] else "")
            + (f" --compare-model {compare_model(config)} --compare-max-tokens {e['compare_max_tokens']}"
               if e["compare"] else "")
            + (f" --judges {' '.join(e['judges'])}" if e["compare"] and e["judges"] else ""))


def compare_model(config: dict) -> str | None:
    """The win / draw / lose judge (default: the NLI judge's model); None when not compared."""
    e = config["coral"]["evaluation"]
    return (e["compare_model"] or e["nli_model"]) if e["compare"] else None


def evaluation_models(config: dict) -> list[str]:
    """Registry models the evaluate job loads (the LLM NLI judge, the comparison judges)."""
    e = config["coral"]["evaluation"]
    return list(dict.fromkeys(([e["nli_model"]] if e["nli"] == "llm" else [])
                              + ([compare_model(config)] + e["judges"] if e["compare"] else [])))


def evaluate_gpu(config: dict, gpu_resources) -> dict:
    """The evaluate job's SLURM GPU resources: one A100 for TRUE-T5 (11B, bfloat16), else the
    most any of its registry models asks for."""
    if config["coral"]["evaluation"]["nli"] == "true_t5":
        return {"gpu": 1, "gpu_model": "a100"}
    res = [gpu_resources(m) for m in evaluation_models(config)] or [{"gpu": 0}]
    return max(res, key=lambda r: r["gpu"])


def generation_models(config: dict, model: str, name: str) -> list[str]:
    g = config["coral"]["generation"]
    strategy = history_strategy(config, name)
    return [registry_model(config, model)] + ([g["summary_model"]] if strategy == "llm_summary" and g["summary_model"] else [])


def framework_inputs(config: dict, L: Layout, prompts_dir: str, name: str) -> dict:
    """What the paper's framework (§4) adds to an answer job: under ``generation.retrieval:
    strategy``, the index the strategy's own query searches, or for the rewrite strategy the run
    retrieved with that rewrite (its query is the rewrite: shared, not searched twice); the f_p
    prompt when ``coral.compression`` is set."""
    from convrag.studies.coral.plan import strategy_run

    c = config["coral"]
    ins = {}
    if c["generation"]["retrieval"] == "strategy":
        run = strategy_run(config, history_strategy(config, name))
        if run:
            ins["strategy_run"] = paths.run(L, source(config), *run)
            ins["strategy_queries"] = paths.run(L, source(config), *run, "queries.jsonl")
        else:
            ins["index"] = L.index_manifest(index_corpus(config), generation_run(config)[0])
            ins["graph"] = graph_inputs(config, L, index_corpus(config), generation_run(config)[0])
    if c["compression"]:
        ins["compress_prompts"] = f"{prompts_dir}/{c['compression']['prompt']}"
    return ins


def framework_args(config: dict, model: str, name: str, input) -> str:
    """The answer job's retrieval (P_k = R(f(H_k), q_k)) and compression (f_p) arguments; the
    label names both in Table 3's ``retrieval`` / ``compression`` columns."""
    import os
    import shlex

    from convrag.retrieval import retriever_kind
    from convrag.studies.coral.framework import retrieval_label

    c, g = config["coral"], config["coral"]["generation"]
    strategy = history_strategy(config, name)
    retriever, policy = generation_run(config)
    label = retrieval_label(strategy, g["retrieval"], rewrite_source=g["rewrite"], rewrite_model=c["rewrite"]["model"],
                            summary_model=g["summary_model"] or model, shared_run=f"{retriever}/{policy}")
    args = [f"--retrieval {g['retrieval']}"]
    if "index" in input.keys():
        params = json.dumps(config["retrievers"][retriever]["params"], sort_keys=True)
        args.append(f"--retriever {retriever_kind(config, retriever)} --index-dir {os.path.dirname(input.index)} "
                    f"--retriever-params {shlex.quote(params)}")
    elif "strategy_run" in input.keys():
        args.append(f"--strategy-run {input.strategy_run} --strategy-queries {input.strategy_queries}")
    if g["retrieval"] == "strategy":
        label = f"{label} ({retriever})"
    args.append(f"--retrieval-label {shlex.quote(label)}")
    if c["compression"]:
        x = c["compression"]
        args.append(f"--compress-model {x['model']} --compress-prompts {input.compress_prompts} "
                    f"--compress-max-tokens {x['max_tokens']}")
    return " ".join(args)


def llm4cs_policies(config: dict) -> list[str]:
    """The run policies of the configured LLM4CS variants (the rule's ``llm4cs`` wildcard)."""
    from convrag.studies.coral.conversational import llm4cs_policy

    x = config["coral"]["llm4cs"]
    return [llm4cs_policy(v["prompting"], v["aggregation"]) for v in (x["variants"] if x else [])]


def framework_retriever(config: dict, name: str) -> str | None:
    """The retriever an answer job searches itself (its environment must load it), or None."""
    from convrag.studies.coral.plan import strategy_run

    g = config["coral"]["generation"]
    if g["retrieval"] != "strategy" or strategy_run(config, history_strategy(config, name)):
        return None
    return generation_run(config)[0]
