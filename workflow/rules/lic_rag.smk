# lic_rag: shard questions (with a manual review round trip), simulate conversations (one job
# per dataset x model x retriever x question chunk, all delivery cells in lockstep; the job
# then labels every assistant turn and judges every final answer), score, and build every
# table and figure.
# (Target, input and params functions live in common.smk.)


# Cheap aggregation steps run on the submit host, never as cluster jobs.
localrules:
    export_shard_review,
    final_shards,
    score_lic_rag,
    lic_rag_table,
    lic_rag_figure,
    table1_datasets,
    accounting_lic_rag,


rule shard_questions:
    input:
        questions=f"{RES}/datasets/{{dataset}}/questions.jsonl",
        prompts=f"{PROMPTS}/lic_rag/shard.yaml",
    output:
        shards=f"{LIC_OUT}/shards/{{dataset}}/shards.jsonl",
        report=report(
            f"{LIC_OUT}/shards/{{dataset}}/shard_report.md",
            caption="../report/shard_report.rst",
            category="lic_rag",
            subcategory="shards",
        ),
        accounting=f"{LIC_OUT}/shards/{{dataset}}/accounting.json",
    log:
        "logs/lic_rag/shard/{dataset}.log",
    conda:
        conda_env(models=[LIC["sharding"]["model"]])
    threads: config["threads"]["shard"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=gpu_resources(LIC["sharding"]["model"])["gpu"],
        gpu_model=gpu_resources(LIC["sharding"]["model"]).get("gpu_model", ""),
    params:
        settings=jarg(LIC["sharding"]),
        model=LIC["sharding"]["model"],
        source=lambda wc: corpus_source(wc.dataset),
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag shard --questions {input.questions} --prompts {input.prompts} --source {params.source}"
        " --model {params.model} --registry {params.registry} --cache {params.cache}"
        " --settings {params.settings} --out {output.shards} --report {output.report}"
        " --accounting {output.accounting} --threads {threads} 2> {log}"


rule export_shard_review:
    input:
        shards=f"{LIC_OUT}/shards/{{dataset}}/shards.jsonl",
        questions=f"{RES}/datasets/{{dataset}}/questions.jsonl",
    output:
        f"{LIC_OUT}/shards/{{dataset}}/review.yaml",
    log:
        "logs/lic_rag/shard_review/{dataset}.log",
    conda:
        CONDA_ENVS["cpu"]
    shell:
        "convrag shard-review export --shards {input.shards} --questions {input.questions} --out {output} 2> {log}"


rule final_shards:
    input:
        shards=f"{LIC_OUT}/shards/{{dataset}}/shards.jsonl",
        questions=f"{RES}/datasets/{{dataset}}/questions.jsonl",
        review=shard_review_input,
    output:
        f"{LIC_OUT}/shards/{{dataset}}/final.jsonl",
    log:
        "logs/lic_rag/final_shards/{dataset}.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        review=shard_review_arg,
    shell:
        "convrag shard-review apply --shards {input.shards} --questions {input.questions} {params.review}"
        " --out {output} 2> {log}"


rule simulate:
    input:
        unpack(simulate_inputs),
    output:
        conversations=cell_outputs(closed=False),
        accounting=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/chunk{{chunk}}.accounting.json",
    log:
        "logs/lic_rag/simulate/{dataset}/{model}/{retriever}/chunk{chunk}.log",
    benchmark:
        "benchmarks/out/simulate/{dataset}/{model}/{retriever}/chunk{chunk}.tsv"
    wildcard_constraints:
        retriever=alternatives([r for r in OPEN if r not in EXPLORERS + QUERY_LLM]),
    conda:
        # vllm-gpu when any model of the job runs on GPUs, java-bm25 for a pyserini
        # retriever, else cpu (API and CPU models)
        lambda wc: conda_env(models=simulate_models(wc), retriever=wc.retriever)
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=lambda wc: gpu_resources(wc.model)["gpu"],
        gpu_model=lambda wc: gpu_resources(wc.model).get("gpu_model", ""),
    params:
        settings=simulate_settings,
        cells=simulate_cells_arg,
        retriever_kind=lambda wc: retriever_kind(config, wc.retriever),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        retriever_llm=lambda wc: retriever_llm(config, wc.retriever) or wc.model,
        classifier=CLASSIFIER_MODEL,
        judge=JUDGE_MODEL,
        out_dir=lambda wc: f"{LIC_OUT}/conversations/{wc.dataset}/{wc.model}/{wc.retriever}",
        user_model=USER_MODEL,
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag simulate --questions {input.questions} --shards {input.shards}"
        " --corpus {input.corpus} --index-dir $(dirname {input.index})"
        " --retriever {params.retriever_kind} --retriever-params {params.retriever_params}"
        " --retriever-name {wildcards.retriever} --retriever-llm {params.retriever_llm}"
        " --prompts {input.prompts} --dataset {wildcards.dataset} --model {wildcards.model}"
        " --user-model {params.user_model} --cells {params.cells} --chunk {wildcards.chunk}"
        " --classifier-model {params.classifier} --classifier-prompts {input.classifier_prompts}"
        " --judge-model {params.judge} --judge-prompts {input.judge_prompts}"
        " --settings {params.settings} --registry {params.registry} --cache {params.cache}"
        " --threads {threads} --out-dir {params.out_dir} --accounting {output.accounting} 2> {log}"


# Longest jobs first, so that none ends a run alone: the exploring graph retrievers (ToG-2,
# PoG: several LLM rounds per query), then those with one LLM call per query (HippoRAG,
# HippoRAG2, LightRAG).
use rule simulate as simulate_explorer with:
    wildcard_constraints:
        retriever=alternatives(EXPLORERS),
    priority: 2


use rule simulate as simulate_graph with:
    wildcard_constraints:
        retriever=alternatives(QUERY_LLM),
    priority: 1


# Closed-book retrievers: the same job with policy `none` for every condition.
use rule simulate as simulate_closed_book with:
    output:
        conversations=cell_outputs(closed=True),
        accounting=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/chunk{{chunk}}.accounting.json",
    wildcard_constraints:
        retriever=alternatives(CLOSED),


rule score_lic_rag:
    input:
        conversations=conversation_files(),
        questions=expand(
            f"{RES}/datasets/{{dataset}}/questions.jsonl", dataset=LIC["datasets"]
        ),
    output:
        conversations=f"{LIC_OUT}/scores/conversations.parquet",
        turns=f"{LIC_OUT}/scores/turns.parquet",
    log:
        "logs/lic_rag/score.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        recall_k=LIC["recall_k"],
    shell:
        "convrag score --conversations {input.conversations} --questions {input.questions}"
        " --recall-k {params.recall_k} --out {output.conversations} --out-turns {output.turns} 2> {log}"


rule lic_rag_table:
    input:
        scores=f"{LIC_OUT}/scores/conversations.parquet",
        turns=f"{LIC_OUT}/scores/turns.parquet",
    output:
        csv=report(
            f"{LIC_OUT}/tables/{{target}}.csv",
            # one caption file, rendered with this target's caption (params.caption)
            caption="../report/lic_rag_target.rst",
            category="lic_rag",
            subcategory="tables",
        ),
        md=f"{LIC_OUT}/tables/{{target}}.md",
    log:
        "logs/lic_rag/tables/{target}.log",
    wildcard_constraints:
        target=alternatives(TABLES),
    conda:
        CONDA_ENVS["cpu"]
    params:
        boot=jarg(LIC["bootstrap"]),
        analysis=jarg(LIC["analysis"]),
        closed=" ".join(CLOSED),
        kinds=jarg(RETRIEVERS_OF_KIND),
        caption=lambda wc: lic_caption(wc.target),
        out_stem=lambda wc, output: output.csv.removesuffix(".csv"),
    shell:
        "convrag lic-rag {wildcards.target} --scores {input.scores} --turns {input.turns}"
        " --bootstrap {params.boot} --analysis {params.analysis} --closed-retrievers {params.closed}"
        " --retriever-kinds {params.kinds} --out-stem {params.out_stem} 2> {log}"


use rule lic_rag_table as lic_rag_figure with:
    output:
        png=report(
            f"{LIC_OUT}/figures/{{target}}.png",
            # one caption file, rendered with this target's caption (params.caption)
            caption="../report/lic_rag_target.rst",
            category="lic_rag",
            subcategory="figures",
        ),
        pdf=f"{LIC_OUT}/figures/{{target}}.pdf",
        csv=f"{LIC_OUT}/figures/{{target}}.csv",
        md=f"{LIC_OUT}/figures/{{target}}.md",
    log:
        "logs/lic_rag/figures/{target}.log",
    wildcard_constraints:
        target=alternatives(FIGURES),


rule table1_datasets:
    input:
        questions=expand(
            f"{RES}/datasets/{{dataset}}/questions.jsonl", dataset=LIC["datasets"]
        ),
        shards=expand(
            f"{LIC_OUT}/shards/{{dataset}}/final.jsonl", dataset=LIC["datasets"]
        ),
        corpora=[f"{RES}/corpora/{corpus_of(d)}/corpus.jsonl" for d in LIC["datasets"]],
    output:
        csv=report(
            f"{LIC_OUT}/tables/table1_datasets.csv",
            caption="../report/lic_rag/table1_datasets.rst",
            category="lic_rag",
            subcategory="tables",
        ),
        md=f"{LIC_OUT}/tables/table1_datasets.md",
    log:
        "logs/lic_rag/tables/table1_datasets.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        datasets=" ".join(
            f"--dataset {d}={RES}/datasets/{d}/questions.jsonl,{LIC_OUT}/shards/{d}/final.jsonl,"
            f"{RES}/corpora/{corpus_of(d)}/corpus.jsonl"
            for d in LIC["datasets"]
        ),
        out_stem=lambda wc, output: output.csv.removesuffix(".csv"),
    shell:
        "convrag lic-rag-datasets {params.datasets} --out-stem {params.out_stem} 2> {log}"


rule accounting_lic_rag:
    input:
        job_accounting_files(),
    output:
        csv=report(
            f"{LIC_OUT}/tables/accounting.csv",
            caption="../report/accounting.rst",
            category="lic_rag",
            subcategory="tables",
        ),
        md=f"{LIC_OUT}/tables/accounting.md",
    log:
        "logs/lic_rag/accounting.log",
    conda:
        CONDA_ENVS["cpu"]
    shell:
        "convrag accounting --jobs {input} --out {output.csv} 2> {log}"
