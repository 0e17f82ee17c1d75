# lic_rag: shard questions (with a manual review round trip), simulate conversations (one job
# per dataset x model x retriever x question chunk, all delivery cells in lockstep; the job
# then labels every assistant turn and judges every final answer) and score them. Its tables
# and figures go through the shared report rules (report.smk).
# Inputs, outputs and arguments come from convrag.studies.lic_rag.wiring.
from convrag.studies.lic_rag import paths as lic_paths
from convrag.studies.lic_rag import wiring as lic_wiring

LIC = config["lic_rag"]
LIC_BY_CLASS = lic_wiring.retrievers_by_class(config)
LIC_ROLES = lic_wiring.role_models(config)


# Cheap aggregation steps run on the submit host, never as cluster jobs.
localrules:
    lic_rag,
    lic_rag_export_shard_review,
    lic_rag_final_shards,
    lic_rag_score,


# `snakemake --cores all lic_rag`: this study alone.
rule lic_rag:
    input:
        study_targets("lic_rag"),


# The reserve of replacement questions (lic_rag.sharding.replace_failed > 0): the same seeded
# draw as select_questions, continued after the dataset's n_questions (its questions.jsonl is
# not touched).
rule lic_rag_reserve_questions:
    input:
        lambda wc: L.questions_all(corpus_of(wc.dataset)),
    output:
        lic_paths.shards(L, "{dataset}", "reserve_questions.jsonl"),
    log:
        L.log("lic_rag/reserve_questions/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
    conda:
        CONDA_ENVS["cpu"]
    params:
        spec=lambda wc: jarg(config["datasets"][wc.dataset]),
        reserve=LIC["sharding"]["replace_failed"],
    shell:
        "convrag select-questions --dataset {wildcards.dataset} --spec {params.spec}"
        " --questions {input} --reserve {params.reserve} --reserve-out {output} 2> {log}"


use rule shard from templates as lic_rag_shard with:
    input:
        unpack(lambda wc: lic_wiring.shard_inputs(config, L, PROMPTS, wc.dataset)),
    output:
        **lic_wiring.shard_outputs(config, L),
        shards=lic_paths.shards(L, "{dataset}", "shards.jsonl"),
        report=report(
            lic_paths.shards(L, "{dataset}", "shard_report.md"),
            # relative to templates.smk, where `rule shard` is written (a `use rule` keeps its base)
            caption="../report/shard_report.rst",
            category="lic_rag",
            subcategory="shards",
        ),
        accounting=lic_paths.shards(L, "{dataset}", "accounting.json"),
    log:
        L.log("lic_rag/shard/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
    conda:
        conda_env(models=[LIC["sharding"]["model"]])
    resources:
        **model_job(LIC["sharding"]["model"]),
    params:
        settings=jarg(lic_wiring.shard_settings(config)),
        model=LIC["sharding"]["model"],
        source=lambda wc: corpus_source(config, wc.dataset),
        extra=lambda wc, input, output: lic_wiring.shard_extra_args(input, output),
        registry=REGISTRY,
        cache=CACHE,


rule lic_rag_export_shard_review:
    input:
        shards=lic_paths.shards(L, "{dataset}", "shards.jsonl"),
        questions=lambda wc: lic_wiring.question_files(config, L, wc.dataset),
    output:
        lic_paths.shards(L, "{dataset}", "review.yaml"),
    log:
        L.log("lic_rag/shard_review/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
    conda:
        CONDA_ENVS["cpu"]
    shell:
        "convrag lic-rag shard-review export --shards {input.shards} --questions {input.questions}"
        " --out {output} 2> {log}"


rule lic_rag_final_shards:
    input:
        shards=lic_paths.shards(L, "{dataset}", "shards.jsonl"),
        questions=lambda wc: lic_wiring.question_files(config, L, wc.dataset),
        review=lambda wc: [
            f for f in [lic_wiring.review_file(config, wc.dataset)] if f is not None
        ],
    output:
        lic_paths.shards(L, "{dataset}", "final.jsonl"),
    log:
        L.log("lic_rag/final_shards/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
    conda:
        CONDA_ENVS["cpu"]
    params:
        review=lambda wc, input: f"--review {input.review}" if input.review else "",
        n=lambda wc: config["datasets"][wc.dataset]["n_questions"],
    shell:
        "convrag lic-rag shard-review apply --shards {input.shards} --questions {input.questions}"
        " {params.review} --n-questions {params.n} --out {output} 2> {log}"


rule lic_rag_simulate:
    input:
        unpack(
            lambda wc: lic_wiring.simulate_inputs(
                config, L, PROMPTS, wc.dataset, wc.retriever
            )
        ),
    output:
        conversations=lic_wiring.cell_outputs(config, L, closed=False),
        accounting=lic_paths.job_accounting(
            L, "{dataset}", "{model}", "{retriever}", "{chunk}"
        ),
    log:
        L.log("lic_rag/simulate/{dataset}/{model}/{retriever}/chunk{chunk}.log"),
    benchmark:
        L.log("benchmarks/simulate/{dataset}/{model}/{retriever}/chunk{chunk}.tsv")
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
        model=alternatives(LIC["models"]),
        retriever=alternatives(LIC_BY_CLASS["cheap"]),
        chunk=r"\d+",
    conda:
        # vllm-gpu when any model of the job runs on GPUs, java-bm25 for a pyserini
        # retriever, else cpu (API and CPU models)
        lambda wc: conda_env(
            models=lic_wiring.simulate_models(config, wc.model, wc.retriever),
            retriever=wc.retriever,
        )
    threads: config["threads"]["simulate"]
    resources:
        **model_job(lambda wc: wc.model),
    params:
        settings=lambda wc: jarg(lic_wiring.simulate_settings(config, wc.model)),
        reasoning=lambda wc: lic_wiring.reasoning_arg(config, wc.model),
        cells=lambda wc: lic_wiring.cells_arg(config, wc.retriever),
        retriever_kind=lambda wc: retriever_kind(config, wc.retriever),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        retriever_llm=lambda wc: retriever_llm(config, wc.retriever) or wc.model,
        classifier=LIC_ROLES["classifier"],
        judge=LIC_ROLES["judge"],
        user_model=LIC_ROLES["user_simulator"],
        out_dir=lambda wc: lic_paths.job_dir(L, wc.dataset, wc.model, wc.retriever),
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag lic-rag simulate --questions {input.questions} --shards {input.shards}"
        " --corpus {input.corpus} --index-dir $(dirname {input.index})"
        " --retriever {params.retriever_kind} --retriever-params {params.retriever_params}"
        " --retriever-name {wildcards.retriever} --retriever-llm {params.retriever_llm}"
        " --prompts {input.prompts} --dataset {wildcards.dataset} --model {wildcards.model}"
        " --user-model {params.user_model} --cells {params.cells} --chunk {wildcards.chunk}"
        " --classifier-model {params.classifier} --classifier-prompts {input.classifier_prompts}"
        " --judge-model {params.judge} --judge-prompts {input.judge_prompts}"
        " --settings {params.settings} {params.reasoning} --registry {params.registry} --cache {params.cache}"
        " --threads {threads} --out-dir {params.out_dir} --accounting {output.accounting} 2> {log}"


# Longest jobs first, so that none ends a run alone: the exploring graph retrievers (ToG-2,
# PoG: several LLM rounds per query), then those with one LLM call per query (HippoRAG,
# HippoRAG2, LightRAG).
use rule lic_rag_simulate as lic_rag_simulate_explorer with:
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
        model=alternatives(LIC["models"]),
        retriever=alternatives(LIC_BY_CLASS["explorer"]),
        chunk=r"\d+",
    priority: 2


use rule lic_rag_simulate as lic_rag_simulate_graph with:
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
        model=alternatives(LIC["models"]),
        retriever=alternatives(LIC_BY_CLASS["query_llm"]),
        chunk=r"\d+",
    priority: 1


# Closed-book retrievers: the same job with policy `none` for every condition.
use rule lic_rag_simulate as lic_rag_simulate_closed_book with:
    output:
        conversations=lic_wiring.cell_outputs(config, L, closed=True),
        accounting=lic_paths.job_accounting(
            L, "{dataset}", "{model}", "{retriever}", "{chunk}"
        ),
    wildcard_constraints:
        dataset=alternatives(LIC["datasets"]),
        model=alternatives(LIC["models"]),
        retriever=alternatives(LIC_BY_CLASS["closed"]),
        chunk=r"\d+",


rule lic_rag_score:
    input:
        conversations=lic_wiring.conversation_files(config, L),
        questions=[
            f for d in LIC["datasets"] for f in lic_wiring.question_files(config, L, d)
        ],
    output:
        conversations=lic_paths.scores(L, "conversations.parquet"),
        turns=lic_paths.scores(L, "turns.parquet"),
    log:
        L.log("lic_rag/score.log"),
    conda:
        CONDA_ENVS["cpu"]
    params:
        recall_k=LIC["recall_k"],
    shell:
        "convrag lic-rag score --conversations {input.conversations} --questions {input.questions}"
        " --recall-k {params.recall_k} --out {output.conversations} --out-turns {output.turns} 2> {log}"
