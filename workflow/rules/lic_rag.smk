# lic_rag: shard questions, simulate conversations (one job per dataset x model x
# retriever x condition x policy x question chunk), score, and build tables and figures.
# (Target, input and params functions live in common.smk.)


# Cheap aggregation steps run on the submit host, never as cluster jobs.
localrules:
    score_lic_rag,
    table2_full_vs_sharded,
    figure_delivery_conditions,
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
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag shard --questions {input.questions} --prompts {input.prompts}"
        " --model {params.model} --registry {params.registry} --cache {params.cache}"
        " --settings {params.settings} --out {output.shards} --report {output.report}"
        " --accounting {output.accounting} 2> {log}"


rule simulate:
    input:
        unpack(simulate_inputs),
    output:
        conversations=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/{{condition}}_{{policy}}/chunk{{chunk}}.jsonl",
        accounting=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/{{condition}}_{{policy}}/chunk{{chunk}}.accounting.json",
    log:
        "logs/lic_rag/simulate/{dataset}/{model}/{retriever}/{condition}_{policy}/chunk{chunk}.log",
    benchmark:
        "benchmarks/out/simulate/{dataset}/{model}/{retriever}/{condition}_{policy}/chunk{chunk}.tsv"
    conda:
        # vllm-gpu when the assistant or the user simulator runs on GPUs, java-bm25 for a
        # pyserini retriever, else cpu (API and CPU models)
        lambda wc: conda_env(models=[wc.model, user_model()], retriever=wc.retriever)
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=lambda wc: gpu_resources(wc.model)["gpu"],
        gpu_model=lambda wc: gpu_resources(wc.model).get("gpu_model", ""),
    params:
        settings=simulate_settings,
        retriever_kind=lambda wc: retriever_kind(config, wc.retriever),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        user_model=user_model(),
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag simulate --questions {input.questions} --shards {input.shards}"
        " --corpus {input.corpus} --index-dir $(dirname {input.index})"
        " --retriever {params.retriever_kind} --retriever-params {params.retriever_params}"
        " --retriever-name {wildcards.retriever} --prompts {input.prompts}"
        " --dataset {wildcards.dataset} --model {wildcards.model} --user-model {params.user_model}"
        " --condition {wildcards.condition} --policy {wildcards.policy} --chunk {wildcards.chunk}"
        " --settings {params.settings} --registry {params.registry} --cache {params.cache}"
        " --threads {threads} --out {output.conversations} --accounting {output.accounting} 2> {log}"


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
        top_k=LIC["top_k"],
    shell:
        "convrag score --conversations {input.conversations} --questions {input.questions}"
        " --top-k {params.top_k} --out {output.conversations} --out-turns {output.turns} 2> {log}"


rule table2_full_vs_sharded:
    input:
        f"{LIC_OUT}/scores/conversations.parquet",
    output:
        csv=report(
            f"{LIC_OUT}/tables/table2_full_vs_sharded.csv",
            caption="../report/table2_full_vs_sharded.rst",
            category="lic_rag",
            subcategory="tables",
        ),
        md=f"{LIC_OUT}/tables/table2_full_vs_sharded.md",
    log:
        "logs/lic_rag/table2.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        boot=jarg(LIC["bootstrap"]),
        out_stem=lambda wc, output: output.csv.removesuffix(".csv"),
    shell:
        "convrag lic-rag table2 --scores {input} --bootstrap {params.boot}"
        " --out-stem {params.out_stem} 2> {log}"


rule figure_delivery_conditions:
    input:
        f"{LIC_OUT}/scores/conversations.parquet",
    output:
        png=report(
            f"{LIC_OUT}/figures/delivery_conditions.png",
            caption="../report/delivery_conditions.rst",
            category="lic_rag",
            subcategory="figures",
        ),
        pdf=f"{LIC_OUT}/figures/delivery_conditions.pdf",
        data=f"{LIC_OUT}/figures/delivery_conditions.csv",
        data_md=f"{LIC_OUT}/figures/delivery_conditions.md",
    log:
        "logs/lic_rag/figure_delivery_conditions.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        boot=jarg(LIC["bootstrap"]),
        out_stem=lambda wc, output: output.png.removesuffix(".png"),
    shell:
        "convrag lic-rag figure-delivery --scores {input} --bootstrap {params.boot}"
        " --out-stem {params.out_stem} 2> {log}"


rule accounting_lic_rag:
    input:
        conversation_files(),
    output:
        report(
            f"{LIC_OUT}/tables/accounting.csv",
            caption="../report/accounting.rst",
            category="lic_rag",
            subcategory="tables",
        ),
    log:
        "logs/lic_rag/accounting.log",
    conda:
        CONDA_ENVS["cpu"]
    shell:
        "convrag accounting --conversations {input} --out {output} 2> {log}"
